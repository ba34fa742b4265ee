"""How far fills on the language server's kept context drift from exact fills (`infill-bench drift`).

The server keeps each document's keys and values between requests (infill.engine.kept_context): a
fill's first pass computes only what changed since the document's last pass, attending to
context computed while the text was different. This measures what that costs on held-out
files, as an editor session goes: for each held-out line (the task), the code line a few lines
above it is filled first and the fill accepted (the document changes there), then the task's
line is filled three ways on the edited document:

  exact      a fresh cache: every pass over the whole window (the CLI's fill)
  stale      on the kept context as the first fill left it (the edit and the span computed
             against the moved context)
  refreshed  on the kept context after the idle refresh (lsp_server.idle): one exact pass over
             the edited text around the edit, as the server runs when the user pauses

Reported: the share of stale and refreshed fills identical to the exact one (agreement), each
variant's exact-match rate against the held-out line, and the positions each first pass
computed (the window's length for the exact fill).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from tqdm import tqdm

from infill.bench.tasks import Task, code_lines
from infill.engine.kept_context import KeptContext, context_ids
from infill.modes.fill import infill
from infill.options import InfillOptions
from infill.text.document import document_from_bytes
from infill.text.edits import apply_edits
from infill.text.spans import Span, line_span

VARIANTS = ("exact", "stale", "refreshed")
GAP = 3
"""The first fill is this many code lines above the task's line."""


@dataclass
class DriftRow:
    path: str
    truth: str  # the held-out line
    fills: dict[str, str]  # by variant: the task's fill
    computed: dict[str, int]  # by variant: positions its first pass computed (exact: the window)


def earlier_line(task: Task, gap: int = GAP) -> Span | None:
    """The code line ``gap`` code lines above the task's span (None near the top of the file)."""
    line = task.text.count("\n", 0, task.start)
    above = [number for number in code_lines(task.text) if number < line]
    if len(above) < gap:
        return None
    return line_span(task.text, above[-gap], above[-gap])


def measure_row(backend, task: Task, first: Span, options: InfillOptions) -> DriftRow:
    """The first fill at ``first``, accepted, then the task's line filled three ways."""
    document = document_from_bytes(task.text.encode())
    kept = KeptContext(backend)
    edits = infill(kept, document, [first], options).edits
    edited = apply_edits(task.text, edits)
    moved = len(edited) - len(task.text)  # the task's line is below the edit
    span = Span(task.start + moved, task.end + moved, "drift task")
    after = document_from_bytes(edited.encode())
    refreshed = kept.fork()
    context_length = options.context_length or backend.context_length
    refreshed.refresh(context_ids(backend, after, first.start, context_length))
    fills, computed = {}, {}
    for variant, denoiser in (("exact", backend), ("stale", kept), ("refreshed", refreshed)):
        before = getattr(denoiser, "computed_positions", 0)
        result = infill(denoiser, after, [span], options)
        fills[variant] = result.spans[0].new_text
        computed[variant] = getattr(denoiser, "computed_positions", 0) - before or context_length
    return DriftRow(task.path, task.expected, fills, computed)


def measure_drift(backend, tasks: list[Task], options: InfillOptions) -> list[DriftRow]:
    rows = []
    for task in tqdm(tasks, desc="drift", unit="task"):
        first = earlier_line(task)
        if first is not None:
            rows.append(measure_row(backend, task, first, options))
    return rows


def summarize_drift(rows: list[DriftRow]) -> dict:
    def same(a: str, b: str) -> bool:
        return a.rstrip() == b.rstrip()

    table = {"tasks": len(rows)}
    for variant in VARIANTS:
        table[variant] = {
            "agrees_with_exact": statistics.mean(same(r.fills[variant], r.fills["exact"]) for r in rows),
            "exact_match": statistics.mean(same(r.fills[variant], r.truth) for r in rows),
            "mean_computed": statistics.mean(r.computed[variant] for r in rows),
        }
    return table


def format_drift(table: dict) -> str:
    header = f"{'variant':10} {'same as exact':>13} {'exact match':>11} {'reused passes compute':>22}"
    lines = [f"{table['tasks']} held-out lines, each after the code line {GAP} above it was filled", header]
    for variant in VARIANTS:
        row = table[variant]
        lines.append(f"{variant:10} {row['agrees_with_exact']:13.1%} {row['exact_match']:11.1%} "
                     f"{row['mean_computed']:12.0f} positions")  # fmt: skip
    return "\n".join(lines)
