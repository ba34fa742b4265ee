"""The infill engine: document + spans -> canvas -> sampler (-> syntax retries) -> minimal edits.

This is the one entry point the CLI, the language server and the benchmarks call. Spans that do
not fit in one context window together are filled group by group (each group sees the others'
original text as context).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import torch

from infill.backend import Denoiser
from infill.canvas import Canvas, build_canvas
from infill.document import Document
from infill.edits import TextEdit, minimal_edit
from infill.errors import InputError
from infill.sampler import SamplerConfig, SampleStats, Step, merge_stats, one_line, sample, step_cap
from infill.span_length import choose_lengths, needs_scored_lengths
from infill.spans import Span, validate_spans
from infill.syntax_remask import remask_syntax, slot_texts


@dataclass
class InfillOptions:
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    budget: int | None = None  # masked positions per span; None: from the span's current length
    context_length: int | None = None  # None: the model's own
    syntax_rounds: int = 4  # retries of fills that break a file that parsed (infill.syntax_remask)
    syntax_edits: int = 6  # then single-token edits, each checked by the parser (infill.syntax_edits)
    syntax_restarts: int = 4  # then fresh fills, each with its own retries and edits (infill.syntax_remask),
    #   of spans of several lines only (single lines parse as often without them: README, Measuring)
    pass_budget: int | None = 400  # no fresh fill starts once a canvas has had this many forward passes
    #   (bounds a broken fill's time: about 11 s at worst on two threads; None: no bound)

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 1:
            raise InputError(f"budget must be at least 1 (got {self.budget})")
        if self.context_length is not None and self.context_length < 8:
            raise InputError(f"context_length must be at least 8 (got {self.context_length})")
        for name in ("syntax_rounds", "syntax_edits", "syntax_restarts"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must be 0 or more (got {getattr(self, name)})")
        if self.pass_budget is not None and self.pass_budget < 1:
            raise InputError(f"pass_budget must be at least 1 (got {self.pass_budget})")


@dataclass
class SpanResult:
    span: Span
    new_text: str  # what the model wrote for the span, in the document's line endings
    edit: TextEdit | None  # minimal edit; None when the model reproduced the span exactly


@dataclass
class InfillResult:
    spans: list[SpanResult]
    stats: SampleStats

    @property
    def edits(self) -> list[TextEdit]:
        return [s.edit for s in self.spans if s.edit is not None]


def infill(
    denoiser: Denoiser,
    document: Document,
    spans: Sequence[Span],
    options: InfillOptions | None = None,
    on_step: Callable[[Canvas, Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> InfillResult:
    """Regenerate `spans` of `document`; everything outside them is fixed context."""
    options = options or InfillOptions()
    spans = validate_spans(document.text, spans)
    if not spans:
        raise InputError("nothing to fill: no span was given")
    results: list[SpanResult] = []
    totals: list[SampleStats] = []
    for canvas in plan_canvases(denoiser, document.text, spans, options):
        ids = torch.tensor([canvas.ids])
        editable = torch.tensor([canvas.editable()])
        step_hook = partial(on_step, canvas) if on_step else None
        texts = [document.text[s.span.start : s.span.end] for s in canvas.slots]
        config = step_cap(options.sampler, texts)
        restarts = 0 if one_line(texts) else options.syntax_restarts
        sampled = sample(denoiser, ids, editable, config, step_hook, cancelled)
        sampled = remask_syntax(
            denoiser, document, canvas, sampled, config, options.syntax_rounds, step_hook, cancelled,
            edits=options.syntax_edits, restarts=restarts, pass_budget=options.pass_budget,
        )  # fmt: skip
        totals.append(sampled.stats)
        for slot, new_text in zip(canvas.slots, slot_texts(denoiser, document, canvas, sampled.ids)):
            edit = minimal_edit(document.text, slot.span.start, slot.span.end, new_text)
            results.append(SpanResult(slot.span, new_text, edit))
    return InfillResult(results, merge_stats(totals))


def plan_canvases(
    denoiser: Denoiser, text: str, spans: list[Span], options: InfillOptions, keep_text: bool = False
) -> list[Canvas]:
    """One canvas for all spans when they fit in one window; else greedy runs of spans that do.

    `keep_text`: slots hold the spans' own tokens rather than masks (see `build_canvas`).
    A model with neither <null> nor <|expand|> gets each span at the length its first pass
    scores best (infill.span_length), one batched pass per canvas.
    """

    def canvas(group: list[Span]) -> Canvas:
        return build_canvas(
            denoiser, text, group, options.budget, options.context_length, keep_text=keep_text
        )

    try:
        canvases = [canvas(spans)]
    except InputError:
        if len(spans) == 1:
            raise
        canvases, group, current = [], [spans[0]], canvas([spans[0]])
        for span in spans[1:]:
            try:
                current, group = canvas(group + [span]), group + [span]
            except InputError:
                canvases.append(current)
                current, group = canvas([span]), [span]
        canvases.append(current)
    if keep_text or not needs_scored_lengths(denoiser, options.sampler.length):
        return canvases
    # A model without <null> or <|expand|>: each span's length chosen by scoring (at most its
    # budget, so the groups still fit their windows).
    return [scored_canvas(denoiser, text, [slot.span for slot in c.slots], options) for c in canvases]


def scored_canvas(denoiser: Denoiser, text: str, spans: list[Span], options: InfillOptions) -> Canvas:
    lengths = choose_lengths(denoiser, text, spans, options.budget, options.context_length)
    return build_canvas(denoiser, text, spans, lengths, options.context_length)
