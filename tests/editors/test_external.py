"""Tests that need an external program skip loudly without it, or fail when CI is set.

The README's test command must pass on a fresh machine without `nvim`; CI must not pass without
it. Checked on the real Neovim test file, run by pytest in a subprocess with a PATH that has no
nvim on it, once without CI and once with CI=true.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from external import in_ci, require_program

ROOT = pathlib.Path(__file__).resolve().parents[2]
NVIM_TESTS = ROOT / "tests" / "editors" / "test_lsp_nvim.py"
MISSING = "infill-test-no-such-program"


def run_nvim_tests_without_nvim(tmp_path: pathlib.Path, ci: str | None) -> subprocess.CompletedProcess:
    """pytest on the Neovim tests, with PATH = a folder holding only python (no nvim)."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env["PATH"] = str(bare)
    if ci is not None:
        env["CI"] = ci
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(NVIM_TESTS)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_without_nvim_the_nvim_tests_skip_and_say_how_to_install_it(tmp_path):
    done = run_nvim_tests_without_nvim(tmp_path, ci=None)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "passed" not in output.splitlines()[-1] and "skipped" in output.splitlines()[-1]
    assert "SKIPPED" in output  # the reason is in the summary (-rs)
    assert "nvim is not installed" in output and "apt-get install -y neovim" in output


@pytest.mark.slow
def test_without_nvim_in_ci_the_nvim_tests_fail(tmp_path):
    done = run_nvim_tests_without_nvim(tmp_path, ci="true")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    summary = output.splitlines()[-1]  # a fixture that fails makes its tests errors
    assert "failed" in summary or "error" in summary
    assert "skipped" not in summary and "passed" not in summary
    assert "nvim is not installed" in output and "CI is set" in output


def test_require_program_finds_a_program_on_path():
    assert require_program("python", install="-", path=str(pathlib.Path(sys.executable).parent))


def test_require_program_skips_or_fails_by_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception, match="pip install it"):
        require_program(MISSING, install="pip install it")
    for value in ("true", "1", "yes"):
        monkeypatch.setenv("CI", value)
        assert in_ci()
        with pytest.raises(pytest.fail.Exception, match="CI is set"):
            require_program(MISSING, install="pip install it")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        require_program(MISSING, install="pip install it")
