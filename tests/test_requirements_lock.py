"""requirements.lock, which `make setup` and the Dockerfile install, against requirements.txt, which a developer
edits: every requirement is pinned in the lock at a version it allows, every pin carries its hashes, and the
tools that install the lock are the ones it pins (`make lock` writes it again after requirements.txt changes)."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _requirements() -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def _lock() -> dict[str, tuple[str, int]]:
    """name -> (pinned version, number of hashes)."""
    out, name = {}, None
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^ ;\\]+)", line)
        if pin:
            name = canonicalize_name(pin.group(1))
            out[name] = (pin.group(3), 0)
        elif name and line.strip().startswith("--hash=sha256:"):
            out[name] = (out[name][0], out[name][1] + 1)
    return out


def test_every_requirement_is_pinned_in_the_lock_at_a_version_it_allows():
    lock = _lock()
    wrong = [f"{r} (lock: {lock.get(canonicalize_name(r.name), ('missing',))[0]})" for r in _requirements()
             if canonicalize_name(r.name) not in lock
             or not r.specifier.contains(lock[canonicalize_name(r.name)][0], prereleases=True)]
    assert not wrong, f"requirements.lock is out of date with requirements.txt (run `make lock`): {wrong}"


def test_every_pin_carries_its_hashes():
    unhashed = [name for name, (_, hashes) in _lock().items() if hashes == 0]
    assert not unhashed and len(_lock()) > 100


def test_setup_and_the_image_install_the_lock_with_the_uv_it_pins():
    uv = _lock()["uv"][0]
    makefile, dockerfile = (ROOT / "Makefile").read_text(), (ROOT / "Dockerfile").read_text()
    assert f"UV_VERSION := {uv}" in makefile and "uv pip sync" in makefile and "requirements.lock" in makefile
    assert f"uv=={uv}" in dockerfile and "uv pip sync" in dockerfile and "requirements.lock" in dockerfile
