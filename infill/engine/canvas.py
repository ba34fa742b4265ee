"""The canvas: the file as token ids, each span replaced by a run of masked positions.

    text:    [ seg0 ][ span1 ][ seg1 ][ span2 ][ seg2 ]
    canvas:  [ seg0 ids ][ <mask> x budget1 ][ seg1 ids ][ <mask> x budget2 ][ seg2 ids ]

Segments and spans are tokenized separately (as in training), after turning "\\r\\n" into "\\n":
the model only ever sees "\\n"; the file's own line endings are restored in the edits.

Span length is unknown, so each span gets a *budget* of positions; the model fills positions it
does not need with <null>, and nulls are dropped when the span is decoded. The default budget
is 1.5x the tokens the span has now, plus 8 (at least 16, at most half the context); training
pads spans with 0..max(8, n) nulls, so budgets in that range look familiar to the model.

Files longer than the model's context: two steps, each owning one thing. The pipeline's window
step (infill.engine.pipeline.in_window) owns which *text* a job is built from: the piece of the
file around its spans that the model can reach (infill.text.window), so that only that is
tokenized. This module owns how many of its *tokens* the model gets: `window` cuts the canvas
to the context, holding every span of the canvas, and shares the remaining room evenly between
the context before the first span and after the last one (a side that runs out of text gives
its share to the other side). The text window is generous, so this cut, the last guard, is
what decides the tokens the model sees.

Framing: the published models never see a prompt without their begin token (Dream family:
`<|beginoftext|>`; LLaDA: `<|startoftext|>`), and DreamOn's prompts also end with end-of-text
(`[bos] prefix masks suffix [eos]`). A denoiser's `framing` says which; the canvas holds them
around the window (cut to make room for them), so position 0 is never a span's and is never
decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from infill.errors import InputError

if TYPE_CHECKING:  # types only: training (infill.train.masking) runs without tree-sitter
    from infill.models.base import Denoiser
    from infill.text.spans import Span

MIN_BUDGET = 16


@dataclass(frozen=True)
class Slot:
    """Where one span's masked positions sit in the canvas."""

    span: Span
    start: int  # index in Canvas.ids
    length: int  # budget


@dataclass(frozen=True)
class Framing:
    """The tokens a model family's authors put before and after every prompt."""

    begin: tuple[int, ...] = ()
    end: tuple[int, ...] = ()


NO_FRAMING = Framing()


def framing_of(denoiser: Denoiser) -> Framing:
    return getattr(denoiser, "framing", None) or NO_FRAMING


@dataclass(frozen=True)
class Canvas:
    ids: list[int]  # the window of the file the model sees; slots hold <mask> (or, kept, the span's text)
    slots: list[Slot]

    def editable(self) -> list[bool]:
        flags = [False] * len(self.ids)
        for slot in self.slots:
            flags[slot.start : slot.start + slot.length] = [True] * slot.length
        return flags


def default_budget(span_tokens: int, context_length: int) -> int:
    return max(MIN_BUDGET, min(context_length // 2, span_tokens * 3 // 2 + 8))


def build_canvas(
    denoiser: Denoiser,
    text: str,
    spans: Sequence[Span],
    budget: int | Sequence[int] | None = None,
    context_length: int | None = None,
    *,
    keep_text: bool = False,
) -> Canvas:
    """Lay out `text` with `spans` (sorted, non-overlapping) masked; cut to the context window.

    `budget`: masked positions for every span, or one number per span, or None: each span's
    `default_budget`.

    With `keep_text` each slot holds the span's own tokens instead of masks (its length is their
    count, `budget` is unused): the canvas on which the fix mode scores existing code.
    """
    context_length = context_length or denoiser.context_length
    framing = framing_of(denoiser)
    cuts = [0] + [b for s in spans for b in (s.start, s.end)] + [len(text)]
    pieces = [denoiser.encode(text[a:b].replace("\r\n", "\n")) for a, b in pairwise(cuts)]
    segments, originals = pieces[0::2], pieces[1::2]

    ids: list[int] = list(segments[0])
    slots: list[Slot] = []
    budgets = budget if isinstance(budget, Sequence) else [budget] * len(spans)
    for span, original, segment, given in zip(spans, originals, segments[1:], budgets, strict=True):
        if keep_text:
            slots.append(Slot(span, len(ids), len(original)))
            ids += original + segment
            continue
        length = given if given is not None else default_budget(len(original), context_length)
        slots.append(Slot(span, len(ids), length))
        ids += [denoiser.mask_id] * length + segment
    return framed(window(Canvas(ids, slots), context_length - len(framing.begin) - len(framing.end)), framing)


def framed(canvas: Canvas, framing: Framing) -> Canvas:
    """`canvas` between the framing's begin and end tokens (its slots moved along)."""
    if framing == NO_FRAMING:
        return canvas
    shift = len(framing.begin)
    slots = [Slot(s.span, s.start + shift, s.length) for s in canvas.slots]
    return Canvas(list(framing.begin) + canvas.ids + list(framing.end), slots)


def window(canvas: Canvas, context_length: int) -> Canvas:
    """Cut the canvas to at most `context_length` ids around its slots (the token-level cut; the
    text it was built from is already the job's window: see the module docstring)."""
    if len(canvas.ids) <= context_length:
        return canvas
    first = canvas.slots[0].start
    last = canvas.slots[-1].start + canvas.slots[-1].length
    if last - first > context_length:
        raise InputError(
            f"the spans need {last - first} positions, more than the model's context of "
            f"{context_length} tokens: select less, or fill the spans one at a time"
        )
    room = context_length - (last - first)
    before, after = first, len(canvas.ids) - last
    left = min(before, max(room // 2, room - after))
    right = min(after, room - left)
    start = first - left
    slots = [Slot(s.span, s.start - start, s.length) for s in canvas.slots]
    return Canvas(canvas.ids[start : last + right], slots)
