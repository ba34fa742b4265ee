"""A real editor as the client: headless Neovim (0.7, Debian's) runs tests/nvim/fill_action.lua.

The script loads the plugin in editors/nvim, which starts infill-lsp (with a tiny random model)
for the Python buffer; it lists code actions for a range, resolves "fill selection", applies the
workspace edit and writes the file. The file must change only inside the selection.

Neovim must be installed (`apt-get install -y neovim`; .ci/run does): without it these tests
skip with a loud reason, or fail when CI is set, so that a missing install step in CI cannot
hide (tests/external.py).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from external import require_program
from lsp_support import contrarian_model_dir, tiny_model_dir

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "nvim" / "fill_action.lua"
PLUGIN = ROOT / "editors" / "nvim"

LINES = [
    "# Café ☕: bytes outside the selection must survive",
    "import math",
    "",
    "",
    "def area(radius):",
    '    """Area of a circle."""',
    "    return math.pi * radius ** 2",
    "",
    "",
    "def mean(values):",
    "    total = sum(values)",
    "    return total / len(values)",
    "",
    "",
    "print(area(2), mean([1, 2, 3]))",
]


NVIM_INSTALL = "apt-get install -y neovim"


@pytest.fixture
def nvim() -> str:
    """The nvim program (skips, or fails when CI is set, if it is missing)."""
    return require_program("nvim", install=NVIM_INSTALL)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    return tiny_model_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def contrarian_model(tmp_path_factory) -> pathlib.Path:
    return contrarian_model_dir(tmp_path_factory)


def run_nvim(
    nvim: str, tmp_path: pathlib.Path, env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess:
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        env[name] = str(tmp_path / name.lower())
    command = [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n"]
    command += ["-c", f"luafile {SCRIPT}", "-c", "cquit 3"]
    return subprocess.run(
        command, env={**os.environ, **env}, cwd=tmp_path, capture_output=True, timeout=timeout, check=False
    )


def test_nvim_is_debians_0_7_or_later(nvim):
    version = subprocess.run([nvim, "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = (int(part) for part in version.split()[1].lstrip("v").split(".")[:2])
    assert (major, minor) >= (0, 7)


def run_action(nvim, tmp_path, model, lines: list[str], first: int, last: int, mode: str = "fill"):
    """Write ``lines`` to a .py file, let nvim run the ``mode`` action for lines first..last
    (0-based, whole lines); return the script's report and the original and written bytes."""
    source = tmp_path / "example.py"
    original = ("\n".join(lines) + "\n").encode("utf-8")
    source.write_bytes(original)
    report_path = tmp_path / "report.json"
    env = {
        "INFILL_PLUGIN": str(PLUGIN),
        "INFILL_CMD": json.dumps([sys.executable, "-m", "lsp_server.server"]),
        "INFILL_INIT": json.dumps({"modelPath": str(model), "threads": 1, "steps": 8}),
        "INFILL_FILE": str(source),
        "INFILL_RANGE": f"{first}:0-{last}:{len(lines[last])}",
        "INFILL_MODE": mode,
        "INFILL_REPORT": str(report_path),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = run_nvim(nvim, tmp_path, env)
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    assert done.returncode == 0, (done.returncode, report, done.stderr.decode(errors="replace")[-2000:])
    return report, original, source.read_bytes()


def assert_changed_only_inside(lines: list[str], first: int, last: int, original: bytes, written: bytes):
    before = b"".join(line.encode() + b"\n" for line in lines[:first])
    after = b"".join(line.encode() + b"\n" for line in lines[last + 1 :])
    assert written.startswith(before) and written.endswith(b"\n" + after)
    middle = written[len(before) : len(written) - len(after)].decode("utf-8")
    assert "<mask>" not in middle and "<null>" not in middle
    assert written != original  # the edit was applied (a random model does not write the same)


def test_nvim_fills_a_selection_through_code_action_resolve(nvim, tmp_path, tiny_model):
    first, last = 10, 11  # the body of mean()
    report, original, written = run_action(nvim, tmp_path, tiny_model, LINES, first, last)
    assert report["ok"] and report["steps"] == ["initialized", "listed", "resolved", "written"]
    assert report["offset_encoding"] == "utf-16"
    assert report["titles"][0] == "Infill: fill selection"
    assert report["kind"] == "refactor.rewrite.infill.selection"
    assert_changed_only_inside(LINES, first, last, original, written)


def test_nvim_shows_syntax_errors_and_applies_the_quick_fix(nvim, tmp_path, contrarian_model):
    broken = list(LINES)
    broken[10] = "    total = = sum(values)"
    # The quick fix repairs (re-predicts unlikely tokens): a model that disbelieves them all.
    report, original, written = run_action(nvim, tmp_path, contrarian_model, broken, 10, 10, mode="fix")
    assert report["steps"] == ["initialized", "diagnostics", "listed", "resolved", "written"]
    [published] = report["published"]
    assert published["source"] == "infill" and published["message"] == 'syntax error: unexpected "="'
    assert (published["lnum"], published["col"], published["end_col"]) == (10, 12, 13)
    assert report["kind"] == "quickfix"
    assert report["titles"][0] == "Infill: fix syntax error (repair statement on line 11)"
    assert_changed_only_inside(broken, 10, 10, original, written)
