"""sda.lake.dist: the package zip shipped with --py-files is complete, reproducible and content-named."""

from __future__ import annotations

import zipfile
from pathlib import Path

from sda.lake import dist


def _package(root: Path) -> Path:
    pkg = root / "sda"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__pycache__").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "maths.py").write_text("X = 1\n")
    (pkg / "data" / "sensors.csv").write_text("id\n1\n")
    (pkg / "__pycache__" / "maths.cpython-311.pyc").write_bytes(b"junk")
    (pkg / "notes.txt").write_text("not shipped")
    return pkg


def test_zip_holds_the_sources_and_data_only(tmp_path):
    path = dist.package_zip(tmp_path / "out", _package(tmp_path))
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["sda/__init__.py", "sda/data/sensors.csv", "sda/maths.py"]
        assert zf.read("sda/maths.py") == b"X = 1\n"


def test_same_code_same_file_new_code_new_name(tmp_path):
    pkg = _package(tmp_path)
    first = dist.package_zip(tmp_path / "out", pkg)
    (pkg / "maths.py").touch()  # a new mtime alone changes nothing
    again = dist.package_zip(tmp_path / "out", pkg)
    assert again == first and again.read_bytes() == first.read_bytes()
    (pkg / "maths.py").write_text("X = 2\n")
    changed = dist.package_zip(tmp_path / "out", pkg)
    assert changed != first and changed.name.startswith("sda-") and changed.suffix == ".zip"


def test_the_real_package_is_importable_from_its_zip(tmp_path):
    import subprocess
    import sys

    path = dist.package_zip(tmp_path)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import sda, sda.orbit.sensors, sda.orbit.screening; "
            "print(sda.__file__); print(len(sda.orbit.sensors.load_sensors()))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    where, sensors = out.stdout.split()
    assert where == f"{path}/sda/__init__.py"
    assert int(sensors) > 0  # the embedded registry CSV is read from inside the zip
