"""The pipeline is the only door: the language server, the team server and the command-line tools call
`infill.engine.pipeline.run` with a mode's request, and never the stages below it (the sampler, the
repair steps, the canvas and decoding). docs/architecture.md has the picture."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BELOW_THE_PIPELINE = (
    "infill.engine.sampler",
    "infill.engine.expansion",
    "infill.engine.unmasking",
    "infill.engine.prediction",
    "infill.engine.span_length",
    "infill.engine.canvas",
    "infill.engine.decode",
    "infill.engine.repair",  # and every step in it
    "infill.engine.recall",
)
CALLERS = sorted(ROOT.glob("lsp_server/*.py")) + sorted(ROOT.glob("team_server/*.py")) + [
    ROOT / "infill/cli.py", ROOT / "infill/docstrings_hook.py"]


def imported_modules(source: str) -> set[str]:
    """Every module an `import` or `from ... import` names, wherever it is (in functions, and
    under `if TYPE_CHECKING:` too), with `from a import b` counted as `a` and `a.b`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def reaches_below(source: str) -> list[str]:
    return sorted(
        name
        for name in imported_modules(source)
        if any(name == below or name.startswith(f"{below}.") for below in BELOW_THE_PIPELINE)
    )


def test_the_check_catches_a_caller_that_reaches_past_the_pipeline():
    assert reaches_below("def f():\n    from infill.engine.sampler import sample\n") == [
        "infill.engine.sampler",
        "infill.engine.sampler.sample",
    ]
    assert reaches_below("import infill.engine.repair.retries\n") == ["infill.engine.repair.retries"]
    assert reaches_below("from infill.engine import repair\n") == ["infill.engine.repair"]
    source = "from infill.engine.pipeline import run\nfrom infill.modes import FillRequest\n"
    assert reaches_below(source) == []


@pytest.mark.parametrize("path", CALLERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_callers_go_through_the_pipeline_only(path: Path):
    found = reaches_below(path.read_text(encoding="utf-8"))
    assert found == [], f"{path.name} reaches past infill.engine.pipeline"


def test_the_callers_do_run_requests_through_the_pipeline():
    callers = {path.name: imported_modules(path.read_text(encoding="utf-8")) for path in CALLERS}
    for name in ("cli.py", "actions.py", "alternatives.py", "inline.py"):
        assert "infill.engine.pipeline.run" in callers[name], name
