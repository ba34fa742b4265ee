"""The decode stage: a filled canvas back to text, one string per span.

    slot positions -> token ids without <null> and special tokens -> text
                   -> the document's line endings -> the span's line shape (infill.text.line_shape)

Decoding means this one thing, and it happens here only: the pipeline makes one `Decoder` per
canvas and decodes the final rows with it (the decode stage), and it hands the same `Decoder`
to the stages that judge fills by their text before that: the repair stage (which parses the
fills spliced into the file, and needs to know which tokens each problem's characters came
from) and the recall stage (which parses a candidate line in its slot). They call its methods
and import nothing of this module but its type, so whatever they parse is exactly the text the
user would get, and a change to how slots become text is made once, here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from infill.engine.canvas import Canvas, Slot
from infill.text.document import Document
from infill.text.line_shape import shape_with_shift

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser


@dataclass(frozen=True)
class Decoder:
    """The decode stage of one canvas of `document`: rows of canvas ids -> each slot's text."""

    denoiser: Denoiser
    document: Document
    canvas: Canvas

    def texts(self, ids: torch.Tensor) -> list[str]:
        """Each slot's fill in row 0 of `ids` (1, L) as text, in the document's line endings."""
        row = ids[0].tolist()
        return [slot_text(self.denoiser, self.document, slot, row)[0] for slot in self.canvas.slots]

    def rows(self, ids: torch.Tensor) -> list[list[str]]:
        """`texts` of every row of `ids` (B, L): [row][slot]."""
        return [self.texts(ids[r : r + 1]) for r in range(ids.size(0))]

    def spliced(self, texts: list[str]) -> str:
        """The document with each slot's span replaced by its text in `texts`."""
        return spliced(self.document, self.canvas, texts)

    def extents(self, texts: list[str]) -> list[tuple[int, int]]:
        """Where each fill (`texts`, one per slot) lies in the spliced text: [start, end) offsets."""
        return fill_extents(self.document, self.canvas, texts)

    def token_offsets(self, slot: Slot, row: list[int]) -> Iterator[tuple[int, tuple[int, int]]]:
        """(canvas position, (start, end) in the slot's text) of each content token of `slot`
        in `row` (a canvas row as a list of ids)."""
        denoiser, document = self.denoiser, self.document
        shift = slot_text(denoiser, document, slot, row)[1]  # the line shape may move the text
        lengths = [
            max(0, len(document.adapt_generated(span_text(denoiser, row[slot.start : i]))) + shift)
            for i in range(slot.start, slot.start + slot.length + 1)
        ]  # text length up to each position (decoded once)
        for i in range(slot.start, slot.start + slot.length):
            if row[i] != denoiser.null_id:
                yield i, (lengths[i - slot.start], lengths[i - slot.start + 1])


def span_text(denoiser: Denoiser, ids: list[int]) -> str:
    """Decode a filled slot: nulls (unused budget) and any special token are dropped."""
    drop = set(denoiser.special_ids) | {denoiser.null_id}
    return denoiser.decode([i for i in ids if i not in drop])


def slot_text(denoiser: Denoiser, document: Document, slot: Slot, row: list[int]) -> tuple[str, int]:
    """One slot's fill in the document's line endings and the span's line shape
    (`infill.text.line_shape`), and how far the shape moved the decoded text."""
    decoded = document.adapt_generated(span_text(denoiser, row[slot.start : slot.start + slot.length]))
    return shape_with_shift(document.text, slot.span.start, slot.span.end, decoded, document.newline)


def filled_text(denoiser: Denoiser, document: Document, canvas: Canvas, ids: torch.Tensor) -> str:
    """The document with each slot's span replaced by its fill (row 0 of `ids`)."""
    decoder = Decoder(denoiser, document, canvas)
    return decoder.spliced(decoder.texts(ids))


def spliced(document: Document, canvas: Canvas, texts: list[str]) -> str:
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
