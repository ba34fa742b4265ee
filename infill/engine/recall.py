"""The recall stage: a single-line fill may take a line the file already has.

Code repeats itself: the line after `G = nx.Graph()` in one test is often the line after it in
another. For a span of one whole line, the candidates are the lines that come, elsewhere in the
same document, right after the line before the span or right before the line after it (blank
lines skipped), each counted by how often; each also at the indentation of the fill and of
the neighbouring lines. The model ranks them against its own fill in one pass over the canvas
with every slot masked (the sampler's first view of it):

    score(line) = mean log p(line's tokens, then <null>) + PRIOR_WEIGHT * log(1 + count)

(the fill's own count is 0). The best-scoring line takes the slot, unless it would give the
file a syntax error the fill did not (tree-sitter's, then Python's). Measured with the shipped
model on 200 held-out single lines of networkx, each of two task seeds (docs/measurements.md,
Recall): exact lines 4.5% -> 22.5% and 3.5% -> 21.0%.

Only models with a <null> token (a candidate shorter than the slot ends in nulls) and without
<|expand|> (whose canvases change length) are recalled for; fill mode and the first inline
sample ask for it (`InfillOptions.recall`), and the request's statistics count the lines taken
(`RequestStats.recalled`, infill.engine.pipeline). The fills' texts come from the canvas's
`Decoder` (infill.engine.decode), which the pipeline hands down.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from infill.engine.canvas import Canvas, Slot
from infill.engine.prediction import exact_slot_logits, rows_of
from infill.engine.results import SampleResult
from infill.text.spans import Span
from infill.text.syntax import file_problems

if TYPE_CHECKING:
    from infill.engine.decode import Decoder  # the decode stage of a canvas, handed down by the pipeline
    from infill.models.base import Denoiser  # the interface of every model family (infill.models)

PRIOR_WEIGHT = 2.0  # weight of log(1 + count), measured against 1 and 4 (docs/measurements.md, Recall)
MAX_CANDIDATES = 8  # the most frequent lines ranked, before indentation variants


@dataclass(frozen=True)
class Candidate:
    text: str  # the line as it would fill the span (indented when the span starts its line)
    count: int  # how often it sits next to the span's neighbours elsewhere in the document


def whole_line(text: str, span: Span) -> bool:
    """Whether `span` is one whole line of `text`: from the line's start or the end of its
    indentation, to the line's end."""
    line_start = text.rfind("\n", 0, span.start) + 1
    line_end = text.find("\n", span.end)
    line_end = len(text) if line_end < 0 else line_end
    prefix, content = text[line_start : span.start], text[span.start : span.end]
    return (
        not prefix.strip()
        and not (prefix and content[:1].isspace())
        and span.end == line_end - (text[line_end - 1 : line_end] == "\r")
        and "\n" not in content
        and "\r" not in content
    )


def candidates(text: str, span: Span, fill: str) -> list[Candidate]:
    """The lines that sit next to the span's neighbours elsewhere in `text`, most frequent first
    (at most MAX_CANDIDATES, `fill` itself left out), in the indentations that fit the span."""
    before = [line.rstrip("\r") for line in text[: span.start].split("\n")]
    after = [line.rstrip("\r") for line in text[span.end :].split("\n")]
    head = [line for line in before[:-1] if line.strip()]  # whole lines above the span's line
    tail = [line for line in after[1:] if line.strip()]  # and below it
    if not head and not tail:
        return []
    previous = head[-1].strip() if head else None
    following = tail[0].strip() if tail else None
    counts: Counter[str] = Counter()
    lines = [line.strip() for line in head] + [None] + [line.strip() for line in tail]  # None: the span
    for first, second in zip(lines, lines[1:]):
        if first is None or second is None:
            continue
        if first == previous:
            counts[second] += 1
        if second == following:
            counts[first] += 1
    if not counts:
        return []
    starts_line = not before[-1]  # the span starts at column 0: candidates carry indentation
    indents = {""}
    if starts_line:
        indents = {indentation(fill)} | {indentation(line) for line in (head[-1:] + tail[:1])}
    found = []
    for line, count in counts.most_common(MAX_CANDIDATES):
        for indent in sorted(indents):
            offered = indent + line if starts_line else line
            if offered != fill:
                found.append(Candidate(offered, count))
    return found


def indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def recall(
    denoiser: Denoiser,
    decoder: Decoder,
    sampled: SampleResult,
    first_view: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[SampleResult, int]:
    """The recall stage over row 0 of a filled canvas (`decoder.canvas`): each one-line slot
    keeps the model's fill or takes the best-ranked line of the document (see the module's
    docstring). `first_view`: the sampler's first pass over the canvas as laid out
    (SampleResult.first_view), ranked on instead of a pass of recall's own. Returns the result
    (its stats count recall's pass, if it made one) and the number of lines taken."""
    if denoiser.null_id is None or getattr(denoiser, "expand_id", None) is not None:
        return sampled, 0
    document, canvas = decoder.document, decoder.canvas
    text = document.text
    fills = decoder.texts(sampled.ids)
    offers = [
        candidates(text, slot.span, fill) if whole_line(text, slot.span) else []
        for slot, fill in zip(canvas.slots, fills)
    ]
    if not any(offers):
        return sampled, 0
    if first_view is not None:  # the sampler's first pass saw the canvas as laid out
        logp, passes = SlotLogProbs(*first_view, len(canvas.ids)), 0
    else:  # one pass, every slot masked: the canvas as laid out
        logp, passes = SlotLogProbs.of(denoiser, canvas), 1
    ids = sampled.ids.clone()
    taken = 0
    for index, (slot, offer) in enumerate(zip(canvas.slots, offers)):
        if not offer:
            continue
        own = ids[0, slot.start : slot.start + slot.length].tolist()
        ranked = sorted(
            [(score(logp, slot, own, denoiser.null_id, 0), own)]
            + [
                (score(logp, slot, tokens, denoiser.null_id, c.count), tokens)
                for c in offer
                if len(tokens := denoiser.encode(c.text)) <= slot.length
            ],
            key=lambda pair: -pair[0],
        )
        broken_before = None  # parsed only once a line outranks the fill
        for _, tokens in ranked:
            if tokens is own:
                break
            if broken_before is None:
                broken_before = breaks(decoder, fills, index)
            row = tokens + [denoiser.null_id] * (slot.length - len(tokens))
            trial = ids.clone()
            trial[0, slot.start : slot.start + slot.length] = torch.tensor(row)
            trial_fills = decoder.texts(trial)
            if not broken_before and breaks(decoder, trial_fills, index):
                continue
            ids, fills, taken = trial, trial_fills, taken + 1
            break
    confidence = sampled.confidence.clone()
    changed = ids[0] != sampled.ids[0]
    confidence[0, changed] = logp.at(changed.nonzero().flatten(), ids[0, changed]).exp()  # all masked
    before = sampled.stats
    stats = replace(before, forward_passes=before.forward_passes + passes)
    return SampleResult(ids, confidence, stats), taken


class SlotLogProbs:
    """Log-probabilities over the vocabulary at a canvas's slot positions only (the output layer
    runs there alone where the denoiser can: a 2,048-token canvas x a 152k vocabulary would be
    1.2 GB)."""

    def __init__(self, columns: torch.Tensor, logp: torch.Tensor, length: int):
        self.row = rows_of(columns, length)
        self.logp = logp  # (P, vocab)

    @classmethod
    def of(cls, denoiser: Denoiser, canvas: Canvas) -> SlotLogProbs:
        columns, logits = exact_slot_logits(denoiser, canvas, torch.tensor([canvas.ids]))
        return cls(columns, torch.log_softmax(logits.float(), -1), len(canvas.ids))

    def at(self, positions: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The log-probability of each token at its canvas position (slot positions only)."""
        return self.logp[self.row[positions], tokens]


def score(logp: SlotLogProbs, slot: Slot, tokens: list[int], null_id: int, count: int) -> float:
    """Mean log-probability of a slot's content tokens and the <null> that ends them (none when
    they fill the slot), plus the count's prior."""
    content = [t for t in tokens if t != null_id]
    targets = (content + [null_id])[: slot.length]
    positions = torch.arange(slot.start, slot.start + len(targets))
    mean = logp.at(positions, torch.tensor(targets)).mean().item()
    return mean + PRIOR_WEIGHT * math.log1p(count)


def breaks(decoder: Decoder, fills: list[str], index: int) -> bool:
    """Whether the top-level statement around slot `index`, with the slots filled by `fills`,
    has a syntax error (only that part is parsed: a 20,000-line file costs no more than a small one)."""
    text = decoder.spliced(fills)
    slots = decoder.canvas.slots
    start = slots[index].span.start + sum(
        len(f) - (s.span.end - s.span.start) for s, f in zip(slots, fills[:index])
    )
    first, last = top_level_block(text, start, start + len(fills[index]))
    return bool(file_problems(text[first:last], decoder.document.language))


CONTINUATIONS = ("else", "elif", "except", "finally")  # top-level lines that go on a statement


def top_level_block(text: str, start: int, end: int) -> tuple[int, int]:
    """The lines around text[start:end], out to the nearest lines before and after it that begin
    a top-level statement (code at column 0; the one after is left out)."""

    def begins_statement(line_start: int) -> bool:
        head = text[line_start : line_start + 8]
        return (head[:1].isalpha() or head[:1] in "_@") and not head.startswith(CONTINUATIONS)

    first = text.rfind("\n", 0, start) + 1
    while first > 0 and not begins_statement(first):
        first = text.rfind("\n", 0, first - 1) + 1
    last = text.find("\n", end)
    while last != -1 and not begins_statement(last + 1):
        last = text.find("\n", last + 1)
    return first, len(text) if last == -1 else last + 1
