"""The ``sda`` package as one zip, for Spark executors on a cluster (``spark-submit --py-files``).

On ``local[...]`` the Python workers are children of the driver and import ``sda`` from the same
installation. On a standalone, YARN or Kubernetes cluster they run on other machines, where nothing
guarantees the same version of ``include/sda`` is installed: the zip ships exactly the code the
driver runs. It is built from the package directory, byte-for-byte reproducible (sorted entries, fixed
timestamps) and named by its content hash, so every task of a DAG run ships the same file, a code
change gives a new name, and a zip that already exists is reused instead of rebuilt.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # include/sda
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)
_SUFFIXES = (".py", ".csv")


def package_files(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """The files that make up the package: sources and data, no caches."""
    return sorted(
        p for p in package_dir.rglob("*")
        if p.is_file() and p.suffix in _SUFFIXES and "__pycache__" not in p.parts
    )


def zip_bytes(package_dir: Path = PACKAGE_DIR) -> bytes:
    """The zip's content: ``sda/...`` entries in sorted order with fixed times, so equal code gives equal bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in package_files(package_dir):
            name = f"{package_dir.name}/{path.relative_to(package_dir).as_posix()}"
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    return buffer.getvalue()


def package_zip(dest_dir: Path, package_dir: Path = PACKAGE_DIR) -> Path:
    """``<dest_dir>/sda-<sha256[:16]>.zip``, written atomically when absent; returns its path."""
    data = zip_bytes(package_dir)
    target = Path(dest_dir) / f"{package_dir.name}-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if target.is_file() and target.read_bytes() == data:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)  # two tasks building at once write the same bytes
    return target
