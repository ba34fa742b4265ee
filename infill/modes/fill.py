"""Fill mode: regenerate spans; everything outside them is fixed context.

plan:   the spans of the document, masked, at the request's budget
repair: every step the options allow (fresh fills for spans of several lines)
recall: a one-line span may take a line of the document instead (infill.engine.recall)
edits:  one minimal edit per span whose text changed

Under the authors' protocol (`options.protocol == "authors"`, infill.engine.authors) each span is a
hole of its own, filled by its family's published loop, with no repair and no recall; each
span's result carries the ids that loop committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infill.engine.authors import loop_family
from infill.engine.authors.run import AUTHORS_CONTEXT, denoise_stage, hole_budget
from infill.engine.canvas import Canvas
from infill.engine.pipeline import Filled, Hooks, Job, RequestStats, run
from infill.engine.repair import RepairPolicy
from infill.engine.results import Step
from infill.errors import InputError
from infill.options import InfillOptions
from infill.text.document import Document
from infill.text.edits import TextEdit, minimal_edit
from infill.text.spans import Span, validate_spans

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser


@dataclass
class SpanResult:
    span: Span
    new_text: str  # what the model wrote for the span, in the document's line endings
    edit: TextEdit | None  # minimal edit; None when the model reproduced the span exactly
    tokens: list[list[int]] | None = None  # the authors' protocol: the ids each step of its loop committed


@dataclass
class InfillResult:
    spans: list[SpanResult]
    stats: RequestStats

    @property
    def edits(self) -> list[TextEdit]:
        return [s.edit for s in self.spans if s.edit is not None]


@dataclass
class FillRequest:
    document: Document
    spans: Sequence[Span]
    options: InfillOptions = field(default_factory=InfillOptions)

    def plan(self, denoiser: Denoiser) -> list[Job]:
        spans = validate_spans(self.document.text, self.spans)
        if not spans:
            raise InputError("nothing to fill: no span was given")
        options = self.options
        if options.protocol == "authors":
            return authors_jobs(denoiser, self.document, spans, options)
        policy = RepairPolicy.of(options)
        return [
            Job(self.document, spans, options.sampler, policy, options.budget, options.context_length,
                recall=options.recall)
        ]

    def finish(self, denoiser: Denoiser, filled: list[Filled], stats: RequestStats) -> InfillResult:
        return InfillResult(span_results(filled), stats)


def authors_jobs(
    denoiser: Denoiser, document: Document, spans: list[Span], options: InfillOptions
) -> list[Job]:
    """One job per span, each a hole of its own filled by the family's published loop."""
    options.authors.check_family(loop_family(denoiser))
    loop = denoise_stage(options.authors)
    jobs = []
    for span in spans:
        current = len(denoiser.encode(document.text[span.start : span.end].replace("\r\n", "\n")))
        budget = hole_budget(denoiser, current, options.budget)
        context = options.context_length or AUTHORS_CONTEXT
        jobs.append(Job(document, [span], options.sampler, RepairPolicy(0, 0, 0), budget, context,
                        denoise=loop))  # fmt: skip
    return jobs


def span_results(filled: list[Filled]) -> list[SpanResult]:
    """Each slot's text (row 0) and its minimal edit of the job's document, in span order."""
    results = []
    for part in filled:
        text = part.job.document.text
        tokens = part.sampled.tokens[0] if part.sampled.tokens else None
        for slot, new_text in zip(part.canvas.slots, part.texts[0]):
            edit = minimal_edit(text, slot.span.start, slot.span.end, new_text)
            results.append(SpanResult(slot.span, new_text, edit, tokens))
    return results


def infill(
    denoiser: Denoiser,
    document: Document,
    spans: Sequence[Span],
    options: InfillOptions | None = None,
    on_step: Callable[[Canvas, Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> InfillResult:
    """Regenerate `spans` of `document`: `run` on a FillRequest."""
    request = FillRequest(document, spans, options or InfillOptions())
    return run(denoiser, request, Hooks(on_step, cancelled))
