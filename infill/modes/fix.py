"""Fix mode: find the tokens of a span the model does not believe in, and re-predict only those.

    plan:  the spans with their current tokens in place (not masked)
    mask:  score every span token (`score_tokens`, by the rule the model declares, below);
           flagged are those whose probability is below `threshold` and below `ratio` x the
           probability of the model's favourite token there (at most `max_fraction` of a span,
           least likely first)
    denoise: the flagged positions only; every other token stays fixed context
    repair: only if the span had a syntax error (a quick fix) and still has one: the syntax
           retries and token edits (infill.engine.repair), whose rewritten tokens count as flagged;
           never a fresh fill. A span without a syntax error never gets a repair, so a fix of
           code that parses keeps to its flagged tokens.
    edits: one per run of flagged tokens that changed: bytes between them never change

Scoring, by what the model was trained on (`scores_visible_tokens`, the denoiser's attribute):

    visible  this project's own model was trained to restore randomly replaced visible tokens,
             so its probability at an unmasked position says whether the token there looks
             wrong: one pass over the canvas as it is scores the whole span
    masked   the published checkpoints (Dream family, LLaDA, Open-dCoder) had a loss at masked
             positions only; with Dream's shift the row that scores token i has even seen it.
             Each span token is scored with its own position masked and the rest of the canvas
             as it is: `scoring_rows` canvases per pass, each with a different position masked,
             so a span of T tokens takes ceil(T / scoring_rows) passes

This is a simple scheme: the length never grows. Each flagged token becomes exactly one token,
or <null> (which deletes it); nothing is inserted. If nothing is flagged there is no edit and no
forward pass beyond the scoring ones.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import torch

from infill.engine.canvas import Canvas, Slot
from infill.engine.kept_context import without_kept_context
from infill.engine.pipeline import NOTHING_SAMPLED, Filled, Hooks, Job, RequestStats, Selection, run
from infill.engine.prediction import allowed_softmax, exact_logits_at, token_probabilities
from infill.engine.repair import RepairPolicy
from infill.engine.results import SampleStats, Step
from infill.errors import InputError
from infill.options import FixOptions
from infill.text.document import Document
from infill.text.edits import TextEdit, apply_edits, minimal_edit
from infill.text.line_shape import keep_line_shape
from infill.text.spans import Span, validate_spans

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser


@dataclass
class FlaggedToken:
    """A token the model did not believe in, and what replaced it."""

    start: int  # character offsets of the token in the document text
    end: int
    text: str  # the token as it was
    probability: float  # the model's probability of it when scored (`score_tokens`)
    suggestion: str  # the model's favourite token there when scored
    suggestion_probability: float
    replacement: str  # what the sampler wrote in its place ("" for a deletion)


@dataclass
class SpanFix:
    span: Span
    new_text: str  # the span after the fix, in the document's line endings
    edits: list[TextEdit]  # one minimal edit per run of flagged tokens that changed
    flagged: list[FlaggedToken]


@dataclass
class FixResult:
    spans: list[SpanFix]
    stats: RequestStats  # forward_passes counts the scoring passes too (every masked one)

    @property
    def edits(self) -> list[TextEdit]:
        return [edit for s in self.spans for edit in s.edits]

    @property
    def flagged(self) -> list[FlaggedToken]:
        return [token for s in self.spans for token in s.flagged]


@dataclass
class FixRequest:
    document: Document
    spans: Sequence[Span]
    options: FixOptions = field(default_factory=FixOptions)

    def plan(self, denoiser: Denoiser) -> list[Job]:
        spans = validate_spans(self.document.text, self.spans)
        if not spans:
            raise InputError("nothing to fix: no span was given")
        options = self.options
        policy = RepairPolicy(
            retries=options.retries,
            token_edits=options.token_edits,
            fresh_fills=0,
            pass_budget=options.pass_budget,
            only_where_broken=True,
        )
        select = partial(select_unlikely, options=options)
        job = Job(self.document, spans, options.sampler, policy, context_length=options.context_length,
                  keep_text=True, select=select)  # fmt: skip
        return [job]

    def finish(self, denoiser: Denoiser, filled: list[Filled], stats: RequestStats) -> FixResult:
        results = []
        for part in filled:
            flags = part.selection.editable[0] | (part.sampled.ids[0] != torch.tensor(part.canvas.ids))
            after = part.sampled.ids[0].tolist()  # what the repair stage rewrote is flagged too
            for slot in part.canvas.slots:
                results.append(
                    fix_span(
                        denoiser, part.job.document, part.canvas, slot, part.selection.probs, flags, after
                    )
                )
        return FixResult(results, stats)


def fix(
    denoiser: Denoiser,
    document: Document,
    spans: Sequence[Span],
    options: FixOptions | None = None,
    on_step: Callable[[Canvas, Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> FixResult:
    """Re-predict the tokens of `spans` that the model finds unlikely; keep all the others:
    `run` on a FixRequest."""
    return run(denoiser, FixRequest(document, spans, options or FixOptions()), Hooks(on_step, cancelled))


def select_unlikely(denoiser: Denoiser, canvas: Canvas, ids: torch.Tensor, options: FixOptions) -> Selection:
    """The mask stage of fix mode: `score_tokens`, then `flag_tokens`."""
    if not any(canvas.editable()):  # the spans hold no token (insertion points): nothing to score
        return Selection(torch.zeros_like(ids, dtype=torch.bool), None, NOTHING_SAMPLED)
    started = time.perf_counter()
    probs, passes = score_tokens(denoiser, canvas, ids[0], options.scoring_rows)
    flags = flag_tokens(canvas, probs, options)
    stats = SampleStats(0, passes, 0, 0, time.perf_counter() - started, converged=True)
    return Selection(flags[None], probs, stats)


def scores_visible_tokens(denoiser: Denoiser) -> bool:
    """Whether the model's probability at a visible position judges the token there (it was
    trained to restore randomly replaced visible tokens); a model that does not say was not."""
    return bool(getattr(denoiser, "scores_visible_tokens", False))


def score_tokens(
    denoiser: Denoiser, canvas: Canvas, ids: torch.Tensor, rows: int, masked: bool = False
) -> tuple[torch.Tensor, int]:
    """ids (L,) -> (probabilities (L, vocab), forward passes): the model's distribution at each
    slot position (at least one), scored by the model's rule (the module's docstring), special
    tokens ruled out. Masked scoring fills only the slot rows (the others are 0).

    `rows` canvases per pass need a denoiser that computes the output layer at given positions
    only (`cached_logits`); one that returns every position's logits (the checkpoint's own code,
    --trust-remote-code) scores one canvas per pass, the memory of a visible scoring pass.
    Every masked pass is a full one: never through the language server's kept context.
    `masked`: every model scored with each token masked (review mode: what the model expects
    there without seeing it, not whether it would keep it)."""
    if scores_visible_tokens(denoiser) and not masked:
        return token_probabilities(denoiser, ids[None])[0], 1
    denoiser = without_kept_context(denoiser)
    if not hasattr(denoiser, "cached_logits"):
        rows = 1  # rows x canvas x vocabulary logits would not stay bounded
    positions = torch.tensor(canvas.editable()).nonzero().flatten()
    chunks = positions.split(rows)  # a few positions per pass: memory stays bounded
    scored = [masked_scores(denoiser, ids, chunk) for chunk in chunks]
    probs = torch.zeros(len(ids), scored[0].shape[-1])
    probs[positions] = torch.cat(scored)
    return probs, len(chunks)


def masked_scores(denoiser: Denoiser, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """ids (L,), positions (K,) -> (K, vocab): the distribution at each position with that one
    position masked, the rest of the canvas as it is; one forward pass over K canvases."""
    rows = torch.arange(len(positions))
    canvases = ids.repeat(len(positions), 1)
    canvases[rows, positions] = denoiser.mask_id
    logits = exact_logits_at(denoiser, canvases, positions)
    return allowed_softmax(denoiser, logits[rows, rows])  # canvas k's row at its masked position


def flag_tokens(canvas: Canvas, probs: torch.Tensor, options: FixOptions) -> torch.Tensor:
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


def fix_span(
    denoiser: Denoiser,
    document: Document,
    canvas: Canvas,
    slot: Slot,
    probs: torch.Tensor,
    flags: torch.Tensor,
    filled: list[int],
) -> SpanFix:
    """The edits and flagged tokens of one slot, with character offsets into the document."""
    span = slot.span
    original = document.text[span.start : span.end]
    before = canvas.ids[slot.start : slot.start + slot.length]
    after = filled[slot.start : slot.start + slot.length]
    flagged = [i for i in range(slot.length) if flags[slot.start + i]]
    if not flagged:
        return SpanFix(span, original, [], [])

    drop = set(denoiser.special_ids) | {denoiser.null_id}  # dropped only where the model wrote them

    def written(first: int, last: int) -> str:
        """Text of tokens [first, last) after the fix; a flagged position may hold <null>."""
        return denoiser.decode(
            [t for i, t in enumerate(after[first:last], first) if t not in drop or i not in flagged]
        )

    normal = original.replace("\r\n", "\n")  # what the model saw
    bounds, clean = token_bounds(denoiser, normal, before)
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
            document.text, where[bounds[first]], where[bounds[last]], document.adapt_generated(replacement)
        )
        edits += [edit] if edit is not None else []
    if "".join(spliced) + normal[position:] != written(0, slot.length):
        # A replacement only makes sense together with its unchanged neighbours (a character
        # split between tokens): fall back to one edit for the whole span.
        whole = document.adapt_generated(written(0, slot.length))
        edits = [edit for edit in [minimal_edit(document.text, span.start, span.end, whole)] if edit]
    shifted = [TextEdit(e.start - span.start, e.end - span.start, e.new_text) for e in edits]
    new_text = apply_edits(original, shifted)
    shaped = keep_line_shape(document.text, span.start, span.end, new_text, document.newline)
    if shaped != new_text:  # a flagged line break at the span's edge was replaced: keep the line shape
        edits = [edit for edit in [minimal_edit(document.text, span.start, span.end, shaped)] if edit]
    return SpanFix(span, shaped, edits, tokens)


def token_bounds(denoiser: Denoiser, normal: str, tokens: list[int]) -> tuple[list[int], list[bool]]:
    """Where each of `tokens` (a span's, read as the text `normal`) starts in `normal`, and the end;
    and whether that boundary is clean (the decoded prefix ends on a whole character: a token may
    hold part of one)."""
    prefixes = [denoiser.decode(tokens[:i]) for i in range(len(tokens) + 1)]
    bounds = [len(os.path.commonprefix([prefix, normal])) for prefix in prefixes]
    return bounds, [bound == len(prefix) for bound, prefix in zip(bounds, prefixes)]


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
