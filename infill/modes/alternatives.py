"""Alternatives: several candidate fills for one span, sampled together as one batch.

plan:   the span's canvas repeated `n` times as the rows of one (n, L) batch, sampled at a
        temperature above 0 (one seeded generator for the batch, so a seed makes the whole
        set reproducible)
repair: syntax retries and token edits of the rows that break the syntax, as one batch;
        no fresh fills
edits:  candidates that decode to the same text are merged, the rest ranked by the model's
        own score: the mean log-probability of the tokens in the span's slot, <null>s
        included, as `SampleResult.confidence` reports them when sampling ends (every
        candidate has the same number of slot positions, so the scores compare). A candidate
        that turns a file that parses into one that does not ranks after every candidate
        that keeps it parsing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from infill.engine.canvas import Canvas
from infill.engine.pipeline import Filled, Hooks, Job, RequestStats, run
from infill.engine.repair import RepairPolicy
from infill.engine.results import Step
from infill.errors import InputError
from infill.options import InfillOptions
from infill.text.document import Document
from infill.text.edits import TextEdit, minimal_edit
from infill.text.spans import Span, validate_spans
from infill.text.syntax import file_problems

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser

DEFAULT_TEMPERATURE = 0.8
MAX_CANDIDATES = 64


@dataclass
class Candidate:
    new_text: str  # the span's text in this candidate, in the document's line endings
    edit: TextEdit | None  # minimal edit; None when the candidate is the span as it is
    score: float  # mean log-probability of the slot's tokens (higher: the model likes it more)
    rows: list[int]  # the batch rows that sampled this text
    stats: RequestStats  # of the whole batch (the same object for every candidate)
    breaks_syntax: bool = False  # the file parsed before and does not with this candidate


@dataclass
class AlternativesRequest:
    """Up to `n` distinct fills of `span`, best first. `temperature`: None takes the options'
    sampler temperature if it is above 0, else DEFAULT_TEMPERATURE; 0 is refused (every row
    would be the same)."""

    document: Document
    span: Span
    n: int
    options: InfillOptions = field(default_factory=InfillOptions)
    temperature: float | None = None

    def plan(self, denoiser: Denoiser) -> list[Job]:
        options = self.options
        if not 1 <= self.n <= MAX_CANDIDATES:
            raise InputError(
                f"the number of alternatives must be between 1 and {MAX_CANDIDATES} (got {self.n})"
            )
        temperature = self.temperature
        if temperature is None:
            temperature = options.sampler.temperature or DEFAULT_TEMPERATURE
        if temperature <= 0:
            raise InputError(f"alternatives need a temperature above 0 (got {temperature})")
        spans = validate_spans(self.document.text, [self.span])
        sampler = replace(options.sampler, temperature=temperature)
        policy = RepairPolicy.of(options, fresh_fills=0)
        return [
            Job(self.document, spans, sampler, policy, options.budget, options.context_length, rows=self.n)
        ]

    def finish(self, denoiser: Denoiser, filled: list[Filled], stats: RequestStats) -> list[Candidate]:
        (part,) = filled  # one span: one canvas
        (slot,) = part.canvas.slots
        document, span, sampled = part.job.document, slot.span, part.sampled
        parsed = not file_problems(document.text, document.language)
        where = slice(slot.start, slot.start + slot.length)
        scores = sampled.confidence[:, where].clamp_min(1e-12).log().mean(1).tolist()
        best: dict[str, Candidate] = {}
        for row, (new_text,) in enumerate(part.texts):
            known = best.get(new_text)
            if known is None:
                edit = minimal_edit(document.text, span.start, span.end, new_text)
                filled_text = document.text[: span.start] + new_text + document.text[span.end :]
                breaks = parsed and bool(file_problems(filled_text, document.language))
                best[new_text] = Candidate(new_text, edit, scores[row], [row], part.stats, breaks)
            else:
                known.rows.append(row)
                known.score = max(known.score, scores[row])
        return sorted(best.values(), key=lambda c: (not c.breaks_syntax, c.score), reverse=True)


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
    """Up to `n` distinct fills of `span`, best first, from one batch of `n` samples: `run` on
    an AlternativesRequest."""
    request = AlternativesRequest(document, span, n, options or InfillOptions(), temperature)
    return run(denoiser, request, Hooks(on_step, cancelled))
