"""Alternatives: several candidate fills for one span, sampled together as one batch.

The span's canvas is repeated `n` times as the rows of one (n, L) batch, and the sampler draws
each row at a temperature above 0 (one seeded generator for the batch, so a seed makes the whole
set reproducible). Candidates that decode to the same text are merged, and the rest are ranked
by the model's own score: the mean log-probability of the tokens in the span's slot, <null>s
included, as `SampleResult.confidence` reports them when sampling ends. Every candidate has the
same number of slot positions, so the scores compare. Candidates that break the file's syntax
get syntax retries (infill.syntax_remask), the rows that need one as one batch; a candidate
that still turns a file that parses into one that does not ranks after every candidate that
keeps it parsing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch

from infill.backend import Denoiser
from infill.canvas import Canvas, span_text
from infill.document import Document
from infill.edits import TextEdit, minimal_edit
from infill.engine import InfillOptions, plan_canvases
from infill.errors import InputError
from infill.line_shape import keep_line_shape
from infill.sampler import SampleStats, Step, sample, step_cap
from infill.spans import Span, validate_spans
from infill.syntax import python_problems
from infill.syntax_remask import remask_syntax

DEFAULT_TEMPERATURE = 0.8
MAX_CANDIDATES = 64


@dataclass
class Candidate:
    new_text: str  # the span's text in this candidate, in the document's line endings
    edit: TextEdit | None  # minimal edit; None when the candidate is the span as it is
    score: float  # mean log-probability of the slot's tokens (higher: the model likes it more)
    rows: list[int]  # the batch rows that sampled this text
    stats: SampleStats  # of the whole batch (the same object for every candidate)
    breaks_syntax: bool = False  # the file parsed before and does not with this candidate


def alternatives(
    denoiser: Denoiser,
    document: Document,
    span: Span,
    n: int,
    options: InfillOptions | None = None,
    temperature: float | None = None,
    on_step: Callable[[Canvas, Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> list[Candidate]:
    """Up to `n` distinct fills of `span`, best first, from one batch of `n` samples.

    temperature: None takes the options' sampler temperature if it is above 0, else 0.8. At 0
    every row would be the same, so that is refused.
    """
    options = options or InfillOptions()
    if not 1 <= n <= MAX_CANDIDATES:
        raise InputError(f"the number of alternatives must be between 1 and {MAX_CANDIDATES} (got {n})")
    if temperature is None:
        temperature = options.sampler.temperature or DEFAULT_TEMPERATURE
    if temperature <= 0:
        raise InputError(f"alternatives need a temperature above 0 (got {temperature})")
    (span,) = validate_spans(document.text, [span])
    sampler = replace(options.sampler, temperature=temperature)
    config = step_cap(sampler, [document.text[span.start : span.end]])
    (canvas,) = plan_canvases(denoiser, document.text, [span], options)  # one span: one canvas
    (slot,) = canvas.slots
    ids = torch.tensor([canvas.ids]).repeat(n, 1)
    editable = torch.tensor([canvas.editable()]).repeat(n, 1)
    step_hook = partial(on_step, canvas) if on_step else None
    sampled = sample(denoiser, ids, editable, config, step_hook, cancelled)
    rounds = options.syntax_rounds  # candidates that break the syntax are retried, as one batch
    sampled = remask_syntax(
        denoiser, document, canvas, sampled, config, rounds, step_hook, cancelled, options.syntax_edits
    )

    parsed = not python_problems(document.text)
    where = slice(slot.start, slot.start + slot.length)
    scores = sampled.confidence[:, where].clamp_min(1e-12).log().mean(1).tolist()
    best: dict[str, Candidate] = {}
    for row in range(n):
        written = document.adapt_newlines(span_text(denoiser, sampled.ids[row, where].tolist()))
        new_text = keep_line_shape(document.text, span.start, span.end, written, document.newline)
        known = best.get(new_text)
        if known is None:
            edit = minimal_edit(document.text, span.start, span.end, new_text)
            filled = document.text[: span.start] + new_text + document.text[span.end :]
            breaks = parsed and bool(python_problems(filled))
            best[new_text] = Candidate(new_text, edit, scores[row], [row], sampled.stats, breaks)
        else:
            known.rows.append(row)
            known.score = max(known.score, scores[row])
    return sorted(best.values(), key=lambda c: (not c.breaks_syntax, c.score), reverse=True)
