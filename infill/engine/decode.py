"""The decode stage: a filled canvas back to text, one string per span.

    slot positions -> token ids without <null> and special tokens -> text
                   -> the document's line endings -> the span's line shape (infill.text.line_shape)

The repair stage parses these texts spliced into the document, and the modes make their edits
of them, so both see exactly what the user would get.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from infill.engine.canvas import Canvas, Slot
from infill.text.document import Document
from infill.text.line_shape import shape_with_shift

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser


def span_text(denoiser: Denoiser, ids: list[int]) -> str:
    """Decode a filled slot: nulls (unused budget) and any special token are dropped."""
    drop = set(denoiser.special_ids) | {denoiser.null_id}
    return denoiser.decode([i for i in ids if i not in drop])


def slot_texts(denoiser: Denoiser, document: Document, canvas: Canvas, ids: torch.Tensor) -> list[str]:
    """Each slot's fill in row 0 of `ids` (1, L) as text, in the document's line endings."""
    row = ids[0].tolist()
    return [slot_text(denoiser, document, slot, row)[0] for slot in canvas.slots]


def rows_texts(denoiser: Denoiser, document: Document, canvas: Canvas, ids: torch.Tensor) -> list[list[str]]:
    """`slot_texts` of every row of `ids` (B, L)."""
    return [slot_texts(denoiser, document, canvas, ids[r : r + 1]) for r in range(ids.size(0))]


def slot_text(denoiser: Denoiser, document: Document, slot: Slot, row: list[int]) -> tuple[str, int]:
    """One slot's fill in the document's line endings and the span's line shape
    (`infill.text.line_shape`), and how far the shape moved the decoded text."""
    decoded = document.adapt_newlines(span_text(denoiser, row[slot.start : slot.start + slot.length]))
    return shape_with_shift(document.text, slot.span.start, slot.span.end, decoded, document.newline)


def filled_text(denoiser: Denoiser, document: Document, canvas: Canvas, ids: torch.Tensor) -> str:
    """The document with each slot's span replaced by its fill (row 0 of `ids`)."""
    return spliced(document, canvas, slot_texts(denoiser, document, canvas, ids))


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
