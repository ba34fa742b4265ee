"""Importing infill asks PyTorch's CPU allocator for huge pages (THP_MEM_ALLOC_ENABLE,
infill/__init__.py) unless the environment says otherwise; checked in a fresh interpreter, as
PyTorch reads it once per process. What it buys is measured in docs/models.md ("infill's own 4-bit
kernel"), not here."""

from __future__ import annotations

import os
import subprocess
import sys


def setting_after_import(environment: dict) -> str:
    env = {key: value for key, value in os.environ.items() if key != "THP_MEM_ALLOC_ENABLE"}
    probe = "import os, infill; print(os.environ.get('THP_MEM_ALLOC_ENABLE'))"
    done = subprocess.run([sys.executable, "-c", probe], env={**env, **environment}, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def test_importing_infill_asks_for_huge_pages_unless_told_otherwise():
    assert setting_after_import({}) == "1"
    assert setting_after_import({"THP_MEM_ALLOC_ENABLE": "0"}) == "0"
