"""Review mode: the code tokens of a file the model finds unlikely, given everything around them,
as findings (`infill review FILE`, `infill FILE --review`); nothing is rewritten.

    plan:    the spans (default: the whole file, in blocks of REVIEW_LINES lines) with their tokens
             in place, as fix mode plans them
    mask:    score every span token with that token masked (infill.modes.fix.score_tokens,
             `masked=True`, for every family: what the model expects there without seeing it)
             and select nothing: no position is denoised
    finish:  the doubted code tokens (fix mode's rule, `flag_tokens`: below `threshold` and below
             `ratio` x the favourite's probability; comments and string literals are prose, not
             code, and left out: infill.text.syntax.prose_ranges), adjacent ones merged into one
             finding: where it is (1-based line and column), its text, the model's favourite
             tokens there (`expected`), the lowest probability among them (`score`); the names
             a definition or a parameter list introduces are left out too (nothing around a new
             name tells what it will be: infill.text.syntax.introduced_names). `top` K
             instead lists the K code tokens the model doubts most whatever the threshold, most
             doubted first (for ranking: `Finding.doubt`).

Fix mode re-predicts what it flags; review mode only reports it, for a person or a CI step to
judge (the command exits 1 when there are findings). The threshold is review mode's own,
REVIEW_THRESHOLD, chosen by the review benchmark (`infill-bench review`).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

import torch

from infill.engine.canvas import Canvas, Slot
from infill.engine.pipeline import NOTHING_SAMPLED, Filled, Job, RequestStats, Selection
from infill.engine.repair import RepairPolicy
from infill.errors import InputError
from infill.modes.fix import document_offsets, flag_tokens, score_tokens, token_bounds
from infill.options import REVIEW_THRESHOLD, FixOptions
from infill.text.document import Document
from infill.text.edits import offset_to_position
from infill.text.spans import Span, validate_spans
from infill.text.syntax import introduced_names, prose_ranges

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser

TINY = 1e-30  # probabilities are taken as at least this under a logarithm
REVIEW_LINES = 10  # lines a span of the whole-file review holds (the canvases group spans to fit);
#   a span must fit the model's window alone: 40 lines of a data table held 1,525 tokens (test_calendar.py)


@dataclass(frozen=True)
class Finding:
    line: int  # 1-based, of the finding's first character
    column: int  # 1-based, in characters
    text: str  # the doubted text as it is in the file
    expected: str  # the model's favourite tokens at those positions ("" where it would delete)
    score: float  # the lowest probability the model gave a token of it
    start: int  # character offsets in the file
    end: int
    favourite: float = 1.0  # the probability of the model's favourite token where `score` is
    entropy: float = 0.0  # nats: how spread the model's distribution is where `score` is

    @property
    def doubt(self) -> float:
        return doubt(self.score, self.entropy)

    def to_json(self) -> dict:
        return {"line": self.line, "column": self.column, "text": self.text, "expected": self.expected,
                "score": round(self.score, 6)}  # fmt: skip


@dataclass
class ReviewResult:
    findings: list[Finding]
    stats: RequestStats


@dataclass
class ReviewRequest:
    document: Document
    spans: Sequence[Span] = ()  # empty: the whole file
    options: FixOptions = field(default_factory=lambda: FixOptions(threshold=REVIEW_THRESHOLD))
    top: int | None = None  # the K most doubted code tokens instead of the threshold's findings

    def plan(self, denoiser: Denoiser) -> list[Job]:
        if self.top is not None and self.top < 1:
            raise InputError(f"--top takes a count of 1 or more (got {self.top})")
        spans = validate_spans(self.document.text, self.spans or whole_file(self.document))
        if not spans:
            raise InputError("nothing to review: the file is empty")
        policy = RepairPolicy(retries=0, token_edits=0, fresh_fills=0, pass_budget=None)
        select = partial(score_only, options=self.options)
        options = self.options
        job = Job(self.document, spans, options.sampler, policy, context_length=options.context_length,
                  keep_text=True, select=select)  # fmt: skip
        return [job]

    def finish(self, denoiser: Denoiser, filled: list[Filled], stats: RequestStats) -> ReviewResult:
        every = self.top is not None  # ranking: every code token is a candidate
        options = replace(self.options, max_fraction=1.0)
        document = self.document  # every job is planned on it; parsed once for what is left out
        skipped = sorted(prose_ranges(document.text, document.language)
                         + introduced_names(document.text, document.language))  # fmt: skip
        findings: list[Finding] = []
        for part in filled:
            probs = part.selection.probs
            if probs is None:
                continue
            everything = torch.ones(len(part.canvas.ids), dtype=torch.bool)
            flags = everything if every else flag_tokens(part.canvas, probs, options)
            for slot in part.canvas.slots:
                findings += slot_findings(denoiser, document, part.canvas, slot, probs, flags, skipped, every)
        if every:
            return ReviewResult(sorted(findings, key=lambda f: -f.doubt)[: self.top], stats)
        return ReviewResult(sorted(findings, key=lambda f: f.start), stats)


def doubt(score: float, entropy: float) -> float:
    """How much more surprising a token is than the model expects a token there to be: -log(score)
    less the entropy of the model's distribution there (the expected surprise), in nats; `top`
    ranks by it, most doubted first. A name among many plausible ones has a low probability and a
    spread distribution; a swapped `<` a low probability where the model was sure: the second is
    the doubt worth showing (measured: docs/measurements.md, "Reviewing")."""
    return -math.log(max(score, TINY)) - entropy


def whole_file(document: Document) -> list[Span]:
    """The file as spans of REVIEW_LINES lines each (their line ends included)."""
    text = document.text
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n" and i + 1 < len(text)]
    cuts = starts[::REVIEW_LINES] + [len(text)]
    return [Span(a, b, f"lines {1 + k * REVIEW_LINES}-") for k, (a, b) in enumerate(zip(cuts, cuts[1:]))]


def score_only(denoiser: Denoiser, canvas: Canvas, ids: torch.Tensor, options: FixOptions) -> Selection:
    """The mask stage: every span token scored with it masked; nothing selected to denoise."""
    nothing = torch.zeros_like(ids, dtype=torch.bool)
    if not any(canvas.editable()):
        return Selection(nothing, None, NOTHING_SAMPLED)
    started = time.perf_counter()
    probs, passes = score_tokens(denoiser, canvas, ids[0], options.scoring_rows, masked=True)
    stats = replace(NOTHING_SAMPLED, forward_passes=passes, seconds=time.perf_counter() - started)
    return Selection(nothing, probs, stats)


def slot_findings(
    denoiser: Denoiser,
    document: Document,
    canvas: Canvas,
    slot: Slot,
    probs: torch.Tensor,
    flags: torch.Tensor,
    skipped: list[tuple[int, int]],
    singles: bool = False,
) -> list[Finding]:
    """The flagged code tokens of one slot as findings: adjacent ones merged (`singles`: one
    finding a token); tokens starting in `skipped` (prose, introduced names) and whitespace left out."""
    span = slot.span
    original = document.text[span.start : span.end]
    tokens = canvas.ids[slot.start : slot.start + slot.length]
    normal = original.replace("\r\n", "\n")  # what the model saw
    bounds, clean = token_bounds(denoiser, normal, tokens)
    where = document_offsets(original, span.start)
    groups: list[list[int]] = []
    for i in range(slot.length):
        piece = normal[bounds[i] : bounds[i + 1]]
        first_character = where[min(bounds[i] + len(piece) - len(piece.lstrip()), len(normal))]
        if not flags[slot.start + i] or not piece.strip() or in_ranges(skipped, first_character):
            continue
        if groups and not singles and i == groups[-1][-1] + 1:
            groups[-1].append(i)
        else:
            groups.append([i])
    findings = []
    for group in groups:
        first, last = group[0], group[-1] + 1
        while not clean[first]:
            first -= 1
        while not clean[last]:
            last += 1
        start, end = where[bounds[first]], where[bounds[last]]
        rows = probs[slot.start + torch.tensor(group)]
        favourite = [t for t in rows.argmax(-1).tolist() if t != denoiser.null_id]
        scores = rows.gather(-1, torch.tensor([tokens[i] for i in group])[:, None]).squeeze(-1)
        lowest = int(scores.argmin())
        line, column = offset_to_position(document.text, start)
        text = document.text[start:end]
        row = rows[lowest]
        entropy = -float(torch.special.xlogy(row, row).sum())  # 0 log 0 = 0, as the entropy rule has it
        expected = document.adapt_generated(denoiser.decode(favourite))
        findings.append(Finding(line + 1, column + 1, text, expected, float(scores[lowest]),
                                start, end, float(row.max()), entropy))  # fmt: skip
    return findings


def in_ranges(ranges: list[tuple[int, int]], offset: int) -> bool:
    """Whether `offset` lies in one of `ranges` (sorted by start; nested ranges allowed)."""
    k = bisect.bisect_right(ranges, (offset, float("inf")))
    return any(start <= offset < end for start, end in ranges[max(0, k - 8) : k])
