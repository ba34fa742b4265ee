"""Fresh fills: a fill that still breaks the syntax after its retries and edits is drawn again.

    while a fill still breaks the syntax, fresh fills are left and the pass budget is not spent:
        denoise the whole fill again from all-masked, at a temperature, shorter than the first
            fill and in another unmasking order by turns (FRESH_FILLS), with its own retries
            and edits; keep it if it leaves fewer problems

(The loop is the repair stage's, infill.engine.repair: a fresh fill is its next attempt.)

A fresh fill is also of another length: the first fill's was the model's median guess, and a
fill that went wrong as a whole at that length often parses at another. (v2, 100 held-out blocks
and 100 bodies, one fresh fill: its length x1.0 77/90% parse, x1.3 80/92%, x0.7 80/95%, x0.5
78/97%; edit similarity the same: docs/measurements.md.) Fresh fills that differ from each
other mend more fills between them than draws alike: of 99 of 300 held-out blocks still broken
after their retries and edits, each of 12 kinds of fresh fill mended 12-36 and all 12 together
74 (docs/results/fresh_fill_kinds_blocks300.json). FRESH_FILLS was picked from them (left-to-right
order mends other blocks than confidence order does; lengths x1.3 and x1.6 mended fewest), then
measured on other blocks (docs/measurements.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

import torch

from infill.engine.canvas import Canvas
from infill.engine.repair.problems import FillProblems
from infill.engine.repair.rows import TEMPERATURE, Rows
from infill.engine.results import SampleResult, Step
from infill.engine.sampler import sample
from infill.options import SamplerConfig

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser

RESTART_SEED = 100  # fresh fill k samples with seed (the request's seed or 0) + RESTART_SEED + k...
FRESH_FILLS = (  # ...and, in turn, scales the length its first pass decides and unmasks in an order
    (0.7, "confidence"),
    (0.7, "left-to-right"),
    (0.5, "confidence"),
    (0.7, "confidence"),
)


def fresh_fill(
    denoiser: Denoiser,
    canvas: Canvas,
    rows: Rows,
    broken: list[int],
    config: SamplerConfig,
    k: int,
    pass_budget: int | None,
    on_step: Callable[[Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> SampleResult:
    """The `k`-th fresh fill (k >= 1) of the rows `broken` of `rows`: their slots denoised again
    from all-masked as FRESH_FILLS says, within what `pass_budget` leaves (None: no limit)."""
    seed = (config.seed or 0) + RESTART_SEED + k - 1
    scale, order = FRESH_FILLS[(k - 1) % len(FRESH_FILLS)]
    afresh = replace(config, temperature=TEMPERATURE, seed=seed, length_scale=scale, order=order)
    left = rows.passes_left(pass_budget)
    if left is not None:
        afresh = replace(afresh, steps=min(afresh.steps, left))
    slots = torch.tensor(canvas.editable()).expand(len(broken), -1)
    return sample(denoiser, rows.ids[broken], slots, afresh, on_step, cancelled)


def keep_better(rows: Rows, broken: list[int], fresh: Rows, problems_of: FillProblems) -> None:
    """Each row of `fresh` (a fresh fill of the rows `broken`, after its retries and edits)
    replaces its row of `rows` if it leaves fewer problems; its statistics join theirs."""
    rows.stats.append(replace(fresh.result().stats, tokens=0))
    for i, r in enumerate(broken):
        left = problems_of(fresh.ids[i : i + 1])
        if len(left) < len(rows.problems[r]):
            rows.ids[r], rows.confidence[r], rows.problems[r] = fresh.ids[i], fresh.confidence[i], left


def as_fresh_fill(on_step: Callable[[Step], None] | None, k: int) -> Callable[[Step], None] | None:
    """`on_step` with each step marked as one of the `k`-th fresh fill (Step.restart)."""
    return None if on_step is None else partial(_as_restart, on_step, k)


def _as_restart(on_step: Callable[[Step], None], restart: int, step: Step) -> None:
    on_step(replace(step, restart=restart))
