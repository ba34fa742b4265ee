"""Syntax-guided re-masking: a fill that breaks the file's syntax is partly denoised again.

    fill the canvas -> put the fills in the file -> parse (tree-sitter, then Python's ast)
    while the fills cause syntax problems and rounds are left:
        re-mask the fills' tokens that the problems touch (tree-sitter's ERROR and MISSING
            nodes; Python's own error: its whole line)
        denoise those positions again, everything else fixed context, at a temperature
        keep the result if it leaves no more problems than before
    then single-token edits, each checked by the parser (infill.syntax_edits)
    while a fill still breaks the syntax, restarts are left and the pass budget is not spent:
        denoise the whole fill again from all-masked, at a temperature, shorter than the first
            fill and in another unmasking order by turns (FRESH_FILLS), with its own retries
            and edits; keep it if it leaves fewer problems

This is self-correction with the parser as the judge: a masked diffusion model can revise any
token it committed, with context on both sides, so the broken part is re-drawn in place while
the rest of the fill stays. (Re-masking just the tokens a problem touches, rather than whole
lines, kept more fills parsing and closer to the original: see README, Measuring.) The retry
samples at a temperature (seeded, so a request gives the same result each time): at
temperature 0 the model, asked the same question, would mostly say the same thing again.

A fresh fill is also of another length: the first fill's was the model's median guess, and a
fill that went wrong as a whole at that length often parses at another. (v2, 100 held-out blocks
and 100 bodies, one fresh fill: its length x1.0 77/90% parse, x1.3 80/92%, x0.7 80/95%, x0.5
78/97%; edit similarity the same: see README, Measuring.) Fresh fills that differ from each
other mend more fills between them than draws alike: of 99 of 300 held-out blocks still broken
after their retries and edits, each of 12 kinds of fresh fill mended 12-36 and all 12 together
74 (docs/fresh_fill_kinds_blocks300.json). FRESH_FILLS was picked from them (left-to-right
order mends other blocks than confidence order does; lengths x1.3 and x1.6 mended fewest), then
measured on other blocks (README, Measuring).

Problems are counted with infill.syntax.python_problems: tree-sitter's, else the one Python's
own parser reports (tree-sitter misses bad indentation). In a file that parsed before the fill
every problem is the fill's doing; in one that did not (a quick fix for a syntax error fills or
repairs the statement around it), only the problems that touch a fill are. tree-sitter often
reports an unclosed bracket or a bad indent lines after the mistake, outside every fill: such a
problem is blamed on the last line of the nearest fill before it.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import torch

from infill.backend import Denoiser
from infill.canvas import Canvas, Slot, span_text
from infill.document import Document
from infill.errors import Cancelled
from infill.line_shape import shape_with_shift
from infill.sampler import SamplerConfig, SampleResult, SampleStats, Step, merge_stats, sample
from infill.syntax import SyntaxProblem, overlaps, python_problems
from infill.syntax_edits import edit_tokens

TEMPERATURE = 0.8  # sampling temperature of a retry
RETRY_STEPS = 16  # step cap of a retry (at most the request's own cap)
RESTART_SEED = 100  # fresh fill k samples with seed (the request's seed or 0) + RESTART_SEED + k...
FRESH_FILLS = (  # ...and, in turn, scales the length its first pass decides and unmasks in an order
    (0.7, "confidence"),
    (0.7, "left-to-right"),
    (0.5, "confidence"),
    (0.7, "confidence"),
)


def remask_syntax(
    denoiser: Denoiser,
    document: Document,
    canvas: Canvas,
    sampled: SampleResult,
    config: SamplerConfig,
    rounds: int,
    on_step: Callable[[Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    edits: int = 0,
    restarts: int = 0,
    pass_budget: int | None = None,
) -> SampleResult:
    """Up to `rounds` retries of the fills of each row of `sampled` (B, L), a filled `canvas` of
    `document` (rows: e.g. alternatives; the rows that need a retry are retried as one batch),
    then up to `edits` parser-checked single-token edits of each row still broken
    (infill.syntax_edits), then up to `restarts` fresh fills of the rows still broken, each
    with its own rounds and edits (FRESH_FILLS in turn). No fresh fill starts once the forward
    passes made so far, `sampled`'s included, reach `pass_budget` (None: no limit).

    Returns the ids to keep with their confidence, and `sampled.stats` merged with those of the
    rounds run (each counts one `syntax_rounds`; its `revisions` include the re-masked tokens),
    of the edits (`syntax_edits`, and as `revisions` too) and of the restarts (`syntax_restarts`).
    """
    if rounds < 1 and edits < 1 and restarts < 1:
        return sampled
    parsed_before: list[bool] = []  # the document is parsed once, and only if a fill breaks

    def fills_problems(row: torch.Tensor) -> list[SyntaxProblem]:
        """The problems that are the fills' doing (row: (1, L)): all of them in a file that
        parsed; in one that did not, those that touch a fill."""
        texts = slot_texts(denoiser, document, canvas, row)
        found = python_problems(_spliced(document, canvas, texts))
        if found and not parsed_before:
            parsed_before.append(not python_problems(document.text))
        if not found or parsed_before[0]:
            return found
        extents = fill_extents(document, canvas, texts)
        return [p for p in found if any(overlaps(p, start, end) for start, end in extents)]

    ids, confidence = sampled.ids.clone(), sampled.confidence.clone()
    rows = range(ids.size(0))
    problems = [fills_problems(ids[r : r + 1]) for r in rows]
    done: list[SampleStats] = []
    for round_index in range(rounds):
        remask = torch.zeros_like(ids, dtype=torch.bool)
        for r in rows:
            if problems[r]:
                remask[r : r + 1] = tokens_to_remask(denoiser, document, canvas, ids[r : r + 1], problems[r])
        if not remask.any():
            break
        retry = replace(
            config,
            temperature=TEMPERATURE,
            seed=(config.seed or 0) + round_index + 1,
            length="given",
            steps=min(config.steps, RETRY_STEPS),
        )
        hook = None if on_step is None else partial(_as_retry, on_step, round_index + 1)
        trial = sample(denoiser, ids, remask, retry, hook, cancelled)
        revisions = trial.stats.revisions + int(remask.sum())
        done.append(replace(trial.stats, tokens=0, revisions=revisions, syntax_rounds=1))
        for r in rows:
            left = fills_problems(trial.ids[r : r + 1]) if remask[r].any() else None
            if left is not None and len(left) <= len(problems[r]):
                ids[r], problems[r] = trial.ids[r], left
                confidence[r] = torch.where(remask[r], trial.confidence[r], confidence[r])
    slots = torch.tensor(canvas.editable())
    blamed = partial(tokens_to_remask, denoiser, document, canvas)
    for r in rows if edits > 0 else ():
        if not problems[r]:
            continue
        if cancelled is not None and cancelled():
            raise Cancelled("sampling cancelled")
        started = time.perf_counter()
        row = ids[r : r + 1]
        edited, probs, made, passes = edit_tokens(denoiser, canvas, row, fills_problems, blamed, edits)
        ids[r] = edited[0]
        if probs is not None:
            confidence[r] = torch.where(slots, probs[0], confidence[r])
        seconds = time.perf_counter() - started
        done.append(  # forward passes, but no denoising steps
            SampleStats(steps=0, forward_passes=passes, tokens=0, revisions=made, seconds=seconds,
                        converged=True, syntax_edits=made)
        )  # fmt: skip
    for restart in range(restarts):
        broken = [r for r in rows if problems[r]]
        passes = sum(stats.forward_passes for stats in [sampled.stats, *done])
        if not broken or (pass_budget is not None and passes >= pass_budget):
            break
        seed = (config.seed or 0) + RESTART_SEED + restart
        hook = None if on_step is None else partial(_as_restart, on_step, restart + 1)
        scale, order = FRESH_FILLS[restart % len(FRESH_FILLS)]
        afresh = replace(config, temperature=TEMPERATURE, seed=seed, length_scale=scale, order=order)
        fresh = sample(denoiser, ids[broken], slots.expand(len(broken), -1), afresh, hook, cancelled)
        fresh = remask_syntax(denoiser, document, canvas, fresh, config, rounds, hook, cancelled, edits)
        done.append(replace(fresh.stats, tokens=0, syntax_restarts=1))
        for i, r in enumerate(broken):
            left = fills_problems(fresh.ids[i : i + 1])
            if len(left) < len(problems[r]):
                ids[r], confidence[r], problems[r] = fresh.ids[i], fresh.confidence[i], left
    return SampleResult(ids, confidence, merge_stats([sampled.stats, *done]))


def _as_retry(on_step: Callable[[Step], None], retry: int, step: Step) -> None:
    on_step(replace(step, retry=retry))


def _as_restart(on_step: Callable[[Step], None], restart: int, step: Step) -> None:
    on_step(replace(step, restart=restart))


def slot_texts(denoiser: Denoiser, document: Document, canvas: Canvas, ids: torch.Tensor) -> list[str]:
    """Each slot's fill as text, in the document's line endings."""
    row = ids[0].tolist()
    return [_slot_text(denoiser, document, slot, row)[0] for slot in canvas.slots]


def _slot_text(denoiser: Denoiser, document: Document, slot: Slot, row: list[int]) -> tuple[str, int]:
    """One slot's fill in the document's line endings and the span's line shape
    (`infill.line_shape`), and how far the shape moved the decoded text."""
    decoded = document.adapt_newlines(span_text(denoiser, row[slot.start : slot.start + slot.length]))
    return shape_with_shift(document.text, slot.span.start, slot.span.end, decoded, document.newline)


def filled_text(denoiser: Denoiser, document: Document, canvas: Canvas, ids: torch.Tensor) -> str:
    """The document with each slot's span replaced by its fill."""
    return _spliced(document, canvas, slot_texts(denoiser, document, canvas, ids))


def _spliced(document: Document, canvas: Canvas, texts: list[str]) -> str:
    """The document with each slot's span replaced by its text in `texts`."""
    pieces, position = [], 0
    for slot, text in zip(canvas.slots, texts):
        pieces += [document.text[position : slot.span.start], text]
        position = slot.span.end
    return "".join(pieces) + document.text[position:]


def fill_extents(document: Document, canvas: Canvas, texts: list[str]) -> list[tuple[int, int]]:
    """Where each fill (`texts`, one per slot) lies in the filled text: [start, end) offsets."""
    extents, shift = [], 0
    for slot, text in zip(canvas.slots, texts):
        start = slot.span.start + shift
        extents.append((start, start + len(text)))
        shift += len(text) - (slot.span.end - slot.span.start)
    return extents


def tokens_to_remask(
    denoiser: Denoiser,
    document: Document,
    canvas: Canvas,
    ids: torch.Tensor,
    problems: list[SyntaxProblem],
) -> torch.Tensor:
    """(1, L) bool: the fills' content tokens (not <null>) whose characters a problem touches (a
    missing token: the tokens on both sides of it). A problem that touches no fill is blamed on
    the last line of the nearest fill before it (or on the first fill's first line)."""
    texts = slot_texts(denoiser, document, canvas, ids)
    extents = fill_extents(document, canvas, texts)
    ranges: list[list[tuple[int, int]]] = [[] for _ in canvas.slots]  # per fill, in its own text
    for problem in problems:
        touched = [i for i, (a, b) in enumerate(extents) if overlaps(problem, a, b)]
        for i in touched:
            ranges[i].append((problem.start - extents[i][0], problem.end - extents[i][0]))
        if not touched:
            before = bisect.bisect_right([end for _, end in extents], problem.start) - 1
            text = texts[max(before, 0)]
            if before >= 0:  # the last line of the fill before
                ranges[before].append((text.rfind("\n") + 1, len(text)))
            else:  # the first line of the first fill
                ranges[0].append((0, len(text.split("\n")[0])))
    remask = torch.zeros_like(ids, dtype=torch.bool)
    row = ids[0].tolist()
    for slot, wanted in zip(canvas.slots, ranges):
        for position, (a, b) in _token_offsets(denoiser, document, slot, row) if wanted else ():
            if any(a < hi and lo < b if lo < hi else a <= lo <= b for lo, hi in wanted):
                remask[0, position] = True
    return remask


def _token_offsets(denoiser: Denoiser, document: Document, slot: Slot, row: list[int]):
    """(canvas position, (start, end) in the fill's text) of each content token of the slot."""
    shift = _slot_text(denoiser, document, slot, row)[1]  # the line shape may move the text
    lengths = [
        max(0, len(document.adapt_newlines(span_text(denoiser, row[slot.start : i]))) + shift)
        for i in range(slot.start, slot.start + slot.length + 1)
    ]  # text length up to each position (decoded once)
    for i in range(slot.start, slot.start + slot.length):
        if row[i] != denoiser.null_id:
            yield i, (lengths[i - slot.start], lengths[i - slot.start + 1])
