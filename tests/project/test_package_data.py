"""What an installed package needs beside its modules: every C source infill builds at first use
(infill.models.c_build) is in the package data pyproject.toml declares, so that a wheel carries
it (a source missing there is a file that cannot be read at the first pass, not a kernel left
out)."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_c_source_is_package_data():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["infill"]
    sources = sorted(path.relative_to(ROOT / "infill").as_posix() for path in (ROOT / "infill").rglob("*.c"))
    assert sources, "no C sources found"
    missing = [source for source in sources if not any(fnmatch(source, pattern) for pattern in declared)]
    assert not missing, f"not in pyproject.toml's package data: {missing}"
