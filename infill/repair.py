"""Fix mode: find the tokens of a span the model does not believe in, and re-predict only those.

    score: one bidirectional pass over the canvas with each span's *current* tokens visible
    flag:  span tokens whose probability is below `threshold` and below `ratio` x the probability
           of the model's favourite token there (at most `max_fraction` of a span, least likely first)
    fix:   the sampler denoises the flagged positions only; every other token stays fixed context

The model was trained to restore randomly replaced tokens, so its probabilities at visible
positions say which tokens look wrong. This is a simple scheme: the length never grows. Each
flagged token becomes exactly one token, or <null> (which deletes it); nothing is inserted.
If nothing is flagged there is no edit and no forward pass beyond the scoring one. The edits
cover only the flagged tokens: bytes between them never change.

    retry: if the span had a syntax error (a quick fix) and still has one, the syntax retries
           of infill.syntax_remask re-draw the tokens its syntax errors touch; the tokens they
           rewrite count as flagged. A span without a syntax error never gets retries, so a
           repair of code that parses keeps to its flagged tokens.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import torch

from infill.backend import Denoiser
from infill.canvas import Canvas, Slot
from infill.document import Document
from infill.edits import TextEdit, apply_edits, minimal_edit
from infill.engine import InfillOptions, plan_canvases
from infill.errors import Cancelled, InputError
from infill.line_shape import keep_line_shape
from infill.sampler import (
    SamplerConfig,
    SampleResult,
    SampleStats,
    Step,
    merge_stats,
    sample,
    step_cap,
    token_probabilities,
)
from infill.spans import Span, validate_spans
from infill.syntax import overlaps, python_problems
from infill.syntax_remask import remask_syntax

NOTHING_SAMPLED = SampleStats(steps=0, forward_passes=0, tokens=0, revisions=0, seconds=0.0, converged=True)


@dataclass
class RepairOptions:
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    threshold: float = 0.05  # flag a token whose probability is below this...
    ratio: float = 0.2  # ...and below this share of the probability of the model's favourite token
    #   (above 1 also flags the favourite itself when it is below `threshold`)
    max_fraction: float = 0.25  # flag at most this share of a span's tokens (at least one)
    context_length: int | None = None  # None: the model's own
    syntax_rounds: int = 4  # syntax retries when the repaired span still has (or gets) syntax problems
    syntax_edits: int = 6  # then parser-checked single-token edits (infill.syntax_edits)
    #   (no fresh fills, InfillOptions.syntax_restarts: a repair keeps the code it does not flag)

    def __post_init__(self) -> None:
        for name in ("threshold", "max_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                raise InputError(f"{name} must be between 0 and 1 (got {getattr(self, name)})")
        if self.ratio < 0:
            raise InputError(f"ratio must be 0 or more (got {self.ratio})")
        InfillOptions(  # validates the options both have
            context_length=self.context_length,
            syntax_rounds=self.syntax_rounds,
            syntax_edits=self.syntax_edits,
        )

    @classmethod
    def from_infill(cls, options: InfillOptions, **overrides) -> RepairOptions:
        """The repair options of a request made with infill `options`: the same sampler, window
        and syntax retries (`overrides`: the fields only repair has, e.g. `threshold`)."""
        return cls(
            options.sampler,
            context_length=options.context_length,
            syntax_rounds=options.syntax_rounds,
            syntax_edits=options.syntax_edits,
            **overrides,
        )


@dataclass
class FlaggedToken:
    """A token the model did not believe in, and what replaced it."""

    start: int  # character offsets of the token in the document text
    end: int
    text: str  # the token as it was
    probability: float  # the model's probability of it in the scoring pass
    suggestion: str  # the model's favourite token there in the scoring pass
    suggestion_probability: float
    replacement: str  # what the sampler wrote in its place ("" for a deletion)


@dataclass
class SpanRepair:
    span: Span
    new_text: str  # the span after the repair, in the document's line endings
    edits: list[TextEdit]  # one minimal edit per run of flagged tokens that changed
    flagged: list[FlaggedToken]


@dataclass
class RepairResult:
    spans: list[SpanRepair]
    stats: SampleStats  # forward_passes counts the scoring passes too

    @property
    def edits(self) -> list[TextEdit]:
        return [edit for s in self.spans for edit in s.edits]

    @property
    def flagged(self) -> list[FlaggedToken]:
        return [token for s in self.spans for token in s.flagged]


def repair(
    denoiser: Denoiser,
    document: Document,
    spans: Sequence[Span],
    options: RepairOptions | None = None,
    on_step: Callable[[Canvas, Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> RepairResult:
    """Re-predict the tokens of `spans` that the model finds unlikely; keep all the others."""
    options = options or RepairOptions()
    spans = validate_spans(document.text, spans)
    if not spans:
        raise InputError("nothing to fix: no span was given")
    layout = InfillOptions(options.sampler, context_length=options.context_length)
    problems = python_problems(document.text) if options.syntax_rounds or options.syntax_edits else []
    results: list[SpanRepair] = []
    totals: list[SampleStats] = []
    for canvas in plan_canvases(denoiser, document.text, spans, layout, keep_text=True):
        if cancelled is not None and cancelled():
            raise Cancelled("repair cancelled")
        started = time.perf_counter()
        ids = torch.tensor([canvas.ids])
        probs = token_probabilities(denoiser, ids)[0]
        flags = flag_tokens(canvas, probs, options)
        totals.append(SampleStats(0, 1, 0, 0, time.perf_counter() - started, converged=True))
        step_hook = partial(on_step, canvas) if on_step else None
        sampled = SampleResult(ids, torch.ones(ids.shape), NOTHING_SAMPLED)
        config = step_cap(options.sampler, [document.text[s.span.start : s.span.end] for s in canvas.slots])
        if flags.any():
            sampled = sample(denoiser, ids, flags[None], config, step_hook, cancelled)
        broken = any(overlaps(p, slot.span.start, slot.span.end) for p in problems for slot in canvas.slots)
        rounds, edits = (options.syntax_rounds, options.syntax_edits) if broken else (0, 0)
        sampled = remask_syntax(
            denoiser, document, canvas, sampled, config, rounds, step_hook, cancelled, edits
        )
        totals.append(sampled.stats)
        filled = sampled.ids[0].tolist()
        flags |= sampled.ids[0] != ids[0]  # what the syntax retries rewrote is flagged too
        for slot in canvas.slots:
            results.append(repair_span(denoiser, document, canvas, slot, probs, flags, filled))
    return RepairResult(results, merge_stats(totals))


def flag_tokens(canvas: Canvas, probs: torch.Tensor, options: RepairOptions) -> torch.Tensor:
    """(L,) bool: the slot positions whose token the model finds unlikely (probs: (L, vocab))."""
    ids = torch.tensor(canvas.ids)
    current = probs.gather(-1, ids[:, None]).squeeze(-1)
    top = probs.max(-1).values
    unlikely = (current < options.threshold) & (current < options.ratio * top)
    flags = torch.zeros(len(canvas.ids), dtype=torch.bool)
    for slot in canvas.slots:
        where = slice(slot.start, slot.start + slot.length)
        candidates = unlikely[where].nonzero().flatten()
        cap = max(1, int(options.max_fraction * slot.length))
        keep = candidates[current[where][candidates].argsort()[:cap]]
        flags[slot.start + keep] = True
    return flags


def repair_span(
    denoiser: Denoiser,
    document: Document,
    canvas: Canvas,
    slot: Slot,
    probs: torch.Tensor,
    flags: torch.Tensor,
    filled: list[int],
) -> SpanRepair:
    """The edits and flagged tokens of one slot, with character offsets into the document."""
    span = slot.span
    original = document.text[span.start : span.end]
    before = canvas.ids[slot.start : slot.start + slot.length]
    after = filled[slot.start : slot.start + slot.length]
    flagged = [i for i in range(slot.length) if flags[slot.start + i]]
    if not flagged:
        return SpanRepair(span, original, [], [])

    drop = set(denoiser.special_ids) | {denoiser.null_id}  # dropped only where the model wrote them

    def written(first: int, last: int) -> str:
        """Text of tokens [first, last) after the repair; a flagged position may hold <null>."""
        return denoiser.decode(
            [t for i, t in enumerate(after[first:last], first) if t not in drop or i not in flagged]
        )

    normal = original.replace("\r\n", "\n")  # what the model saw
    prefixes = [denoiser.decode(before[:i]) for i in range(slot.length + 1)]
    bounds = [len(os.path.commonprefix([prefix, normal])) for prefix in prefixes]
    clean = [bound == len(prefix) for bound, prefix in zip(bounds, prefixes)]  # not inside a character
    where = document_offsets(original, span.start)

    tokens = []
    for i in flagged:
        last = next(j for j in range(i + 1, slot.length + 1) if clean[j])  # a part of a character
        start, end = where[bounds[i]], where[bounds[last]]  # stands for the whole character
        top = int(probs[slot.start + i].argmax())
        tokens.append(
            FlaggedToken(
                start=start,
                end=end,
                text=document.text[start:end],
                probability=float(probs[slot.start + i, before[i]]),
                suggestion=denoiser.decode([top]),
                suggestion_probability=float(probs[slot.start + i, top]),
                replacement=written(i, i + 1),
            )
        )

    edits, spliced, position = [], [], 0
    for first, last in runs(flagged, clean):
        replacement = written(first, last)
        spliced += [normal[position : bounds[first]], replacement]
        position = bounds[last]
        edit = minimal_edit(
            document.text, where[bounds[first]], where[bounds[last]], document.adapt_newlines(replacement)
        )
        edits += [edit] if edit is not None else []
    if "".join(spliced) + normal[position:] != written(0, slot.length):
        # A replacement only makes sense together with its unchanged neighbours (a character
        # split between tokens): fall back to one edit for the whole span.
        whole = document.adapt_newlines(written(0, slot.length))
        edits = [edit for edit in [minimal_edit(document.text, span.start, span.end, whole)] if edit]
    shifted = [TextEdit(e.start - span.start, e.end - span.start, e.new_text) for e in edits]
    new_text = apply_edits(original, shifted)
    shaped = keep_line_shape(document.text, span.start, span.end, new_text, document.newline)
    if shaped != new_text:  # a flagged line break at the span's edge was replaced: keep the line shape
        edits = [edit for edit in [minimal_edit(document.text, span.start, span.end, shaped)] if edit]
    return SpanRepair(span, shaped, edits, tokens)


def runs(flagged: list[int], clean: list[bool]) -> list[tuple[int, int]]:
    """Token ranges [first, last) covering the flagged positions, each between clean boundaries
    (where the decoded prefix ends on a whole character); touching ranges are merged."""
    merged: list[tuple[int, int]] = []
    for i in flagged:
        first, last = i, i + 1
        while not clean[first]:
            first -= 1
        while not clean[last]:
            last += 1
        if merged and first <= merged[-1][1]:
            previous = merged.pop()
            first, last = previous[0], max(last, previous[1])
        merged.append((first, last))
    return merged


def document_offsets(original: str, base: int) -> list[int]:
    """Document offset of each character of `original` with "\\r\\n" read as "\\n" (a pair maps
    to its "\\r"), plus one for the end."""
    keep = [i for i, c in enumerate(original) if not (c == "\n" and i > 0 and original[i - 1] == "\r")]
    return [base + i for i in keep] + [base + len(original)]
