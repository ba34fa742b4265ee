"""The README's commands as written: the main job's `infill` command (the part of the install
line after the installs) and the commands shown right after it run on the example module and exit
0, and the example module's own tests pass. The installs themselves are what CI's .ci/run does."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the shipped model through subprocesses

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def shell_blocks(section: str) -> list[str]:
    """The ```sh blocks of the README's section `section` (a "## " heading)."""
    start = README.index(f"## {section}\n")
    end = README.find("\n## ", start + 1)
    return re.findall(r"```sh\n(.*?)```", README[start : end if end > 0 else None], re.S)


def main_job() -> str:
    """The main job's command: the install line's last step."""
    install = shell_blocks("Two commands")[0].strip()
    return install.split(" && ")[-1]


def run(command: str) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    assert argv[0] == "infill", command
    executable = shutil.which("infill", path=str(Path(sys.executable).parent)) or shutil.which("infill")
    return subprocess.run([executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_main_job_fills_a_code_line_of_the_example_module():
    command = main_job()
    assert command.startswith("infill examples/") and "--stats" in command
    done = run(command)
    assert done.returncode == 0, done.stderr
    assert "1 span(s)" in done.stderr  # the --stats line
    assert done.stdout.startswith("--- a/examples/") or "no change" in done.stderr


def test_the_commands_after_it_run_as_written():
    [block] = shell_blocks("Two commands")[1:2]
    commands = [line for line in block.strip().split("\n") if line]
    assert any("--show-steps" in c for c in commands) and any("--alternatives" in c for c in commands)
    for command in commands:
        done = run(command)
        assert done.returncode == 0, (command, done.stderr)
        assert "span(s)" in done.stderr or "candidate" in done.stdout + done.stderr


def test_the_example_module_passes_its_own_tests():
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "examples"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
