"""What an installed package needs beside its modules: every C source infill builds at first use
(infill.models.c_build) is in the package data pyproject.toml declares, so that a wheel carries
it (a source missing there is a file that cannot be read at the first pass, not a kernel left
out)."""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def declared_package_data() -> list[str]:
    """The globs of `infill = [...]` under [tool.setuptools.package-data] (read as text: Python
    3.10 has no TOML reader)."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text[text.index("[tool.setuptools.package-data]") :]
    line = re.search(r"^infill = \[(.*)\]$", section, re.MULTILINE)
    assert line, "no package data for infill in pyproject.toml"
    return re.findall(r'"([^"]+)"', line.group(1))


def test_every_c_source_is_package_data():
    declared = declared_package_data()
    sources = sorted(path.relative_to(ROOT / "infill").as_posix() for path in (ROOT / "infill").rglob("*.c"))
    assert sources, "no C sources found"
    missing = [source for source in sources if not any(fnmatch(source, pattern) for pattern in declared)]
    assert not missing, f"not in pyproject.toml's package data: {missing}"
