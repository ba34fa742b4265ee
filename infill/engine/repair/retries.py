"""Syntax retries: a fill that breaks the file's syntax is partly denoised again.

    while the fills cause syntax problems and rounds are left:
        re-mask the fills' tokens that the problems touch (tree-sitter's ERROR and MISSING
            nodes; Python's own error: its whole line)
        denoise those positions again, everything else fixed context, at a temperature
        keep the result if it leaves no more problems than before

This is self-correction with the parser as the judge: a masked diffusion model can revise any
token it committed, with context on both sides, so the broken part is re-drawn in place while
the rest of the fill stays. (Re-masking just the tokens a problem touches, rather than whole
lines, kept more fills parsing and closer to the original: docs/measurements.md.) The retry
samples at a temperature (seeded, so a request gives the same result each time): at
temperature 0 the model, asked the same question, would mostly say the same thing again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

import torch

from infill.engine.repair.problems import FillProblems
from infill.engine.repair.rows import TEMPERATURE, Rows
from infill.engine.results import Step
from infill.engine.sampler import sample
from infill.options import SamplerConfig

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser

RETRY_STEPS = 16  # step cap of a retry (at most the request's own cap)


def retry(
    denoiser: Denoiser,
    rows: Rows,
    problems_of: FillProblems,
    config: SamplerConfig,
    rounds: int,
    on_step: Callable[[Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    pass_budget: int | None = None,
) -> int:
    """Up to `rounds` retries of the broken rows of `rows` (those that need one as one batch),
    within `pass_budget` forward passes for the rows in all (None: no bound; see
    `Rows.passes_left`). Returns the rounds run."""
    ran = 0
    for round_index in range(rounds):
        if rows.spent(pass_budget):
            break
        left = rows.passes_left(pass_budget)
        remask = torch.zeros_like(rows.ids, dtype=torch.bool)
        for r, problems in enumerate(rows.problems):
            if problems:
                remask[r : r + 1] = problems_of.blamed(rows.ids[r : r + 1], problems)
        if not remask.any():
            break
        retried = replace(
            config,
            temperature=TEMPERATURE,
            seed=(config.seed or 0) + round_index + 1,
            length="given",
            steps=min(config.steps, RETRY_STEPS, left or RETRY_STEPS),
        )
        hook = None if on_step is None else partial(_as_retry, on_step, round_index + 1)
        trial = sample(denoiser, rows.ids, remask, retried, hook, cancelled)
        revisions = trial.stats.revisions + int(remask.sum())
        rows.stats.append(replace(trial.stats, tokens=0, revisions=revisions))
        ran += 1
        for r in range(rows.ids.size(0)):
            left = problems_of(trial.ids[r : r + 1]) if remask[r].any() else None
            if left is not None and len(left) <= len(rows.problems[r]):
                rows.ids[r], rows.problems[r] = trial.ids[r], left
                rows.confidence[r] = torch.where(remask[r], trial.confidence[r], rows.confidence[r])
    return ran


def _as_retry(on_step: Callable[[Step], None], retry: int, step: Step) -> None:
    on_step(replace(step, retry=retry))
