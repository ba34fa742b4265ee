"""LSP positions <-> character offsets, and our edits as LSP edits.

The engine counts in characters (code points) of the document text. LSP counts lines and, within
a line, *code units* of the negotiated position encoding: UTF-16 by default (an astral character
such as an emoji is two units), or UTF-8 (bytes) / UTF-32 (code points) when the client offered
them in ``general.positionEncodings`` and the server picked one.

Lines end at "\\n", "\\r\\n" or a lone "\\r", as the LSP specification says. A character past the
end of a line means the end of that line (also from the specification); a line past the last one
is an error (:class:`PositionError`). A position that falls inside a character (between the two
halves of a surrogate pair, or inside a UTF-8 sequence) is moved back to that character's start.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence

from lsprotocol import types

from infill.text.edits import TextEdit

UTF8 = types.PositionEncodingKind.Utf8.value
UTF16 = types.PositionEncodingKind.Utf16.value
UTF32 = types.PositionEncodingKind.Utf32.value
ENCODINGS = (UTF8, UTF16, UTF32)

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class PositionError(ValueError):
    """A position or range that does not fit the document."""


@functools.lru_cache(maxsize=8)
def line_starts(text: str) -> tuple[int, ...]:
    """Offset of the first character of every line; the text after a final line break is a line.
    Kept for the last few texts: every request on a document converts positions on its text."""
    return (0, *(match.end() for match in _LINE_BREAK.finditer(text)))


def units(text: str, encoding: str = UTF16) -> int:
    """Length of ``text`` in code units of ``encoding``."""
    if encoding == UTF32:
        return len(text)
    if encoding == UTF16:
        return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    raise ValueError(f"unknown position encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}")


def _char_units(char: str, encoding: str) -> int:
    code = ord(char)
    if encoding == UTF16:
        return 2 if code > 0xFFFF else 1
    if encoding == UTF8:
        return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
    return 1


def position_to_offset(text: str, position: types.Position, encoding: str = UTF16, *, starts=None) -> int:
    """Character offset of an LSP ``position`` in ``text``.

    ``starts`` (from :func:`line_starts`) saves recomputing the line index for many positions.
    """
    starts = starts if starts is not None else line_starts(text)
    line, character = position.line, position.character
    if line < 0 or character < 0:
        raise PositionError(f"position {line}:{character} is negative")
    if line >= len(starts):
        raise PositionError(
            f"line {line} is past the end of the document, whose last line is {len(starts) - 1} (0-based)"
        )
    start = starts[line]
    end = content_end(text, starts, line)
    if encoding == UTF32:
        return min(start + character, end)
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown position encoding {encoding!r}")
    offset, counted = start, 0
    while offset < end:
        width = _char_units(text[offset], encoding)
        if counted + width > character:
            break  # the position is at this character, or inside it
        counted += width
        offset += 1
    return offset


def offset_to_position(text: str, offset: int, encoding: str = UTF16, *, starts=None) -> types.Position:
    """LSP position of the character ``offset`` in ``text``."""
    if not 0 <= offset <= len(text):
        raise PositionError(f"offset {offset} is outside the document (0-{len(text)})")
    starts = starts if starts is not None else line_starts(text)
    line = bisect.bisect_right(starts, offset) - 1
    return types.Position(line=line, character=units(text[starts[line] : offset], encoding))


def range_to_offsets(text: str, lsp_range: types.Range, encoding: str = UTF16) -> tuple[int, int]:
    """``(start, end)`` character offsets of an LSP range; PositionError if it ends before it starts."""
    starts = line_starts(text)
    start = position_to_offset(text, lsp_range.start, encoding, starts=starts)
    end = position_to_offset(text, lsp_range.end, encoding, starts=starts)
    if end < start:
        raise PositionError(f"range {format_range(lsp_range)} ends before it starts")
    return start, end


def to_lsp_edits(text: str, edits: Sequence[TextEdit], encoding: str = UTF16) -> list[types.TextEdit]:
    """Our edits (character offsets into ``text``) as LSP text edits, in text order.

    All ranges refer to ``text`` as it is before any edit, as LSP wants for the edits of one
    ``TextDocumentEdit``. LSP has no position between the "\\r" and "\\n" of a line break, so an
    edit that starts or ends there takes in the whole pair (same result, representable range);
    edits that meet there are made one first, else both would take in the pair and overlap.
    """
    starts = line_starts(text)
    lsp_edits = []
    for edit in _joined_inside_crlf(text, sorted(edits, key=lambda edit: (edit.start, edit.end))):
        start, end, new_text = edit.start, edit.end, edit.new_text
        if _inside_crlf(text, start):
            start, new_text = start - 1, "\r" + new_text
        if _inside_crlf(text, end):
            end, new_text = end + 1, new_text + "\n"
        lsp_range = types.Range(
            start=offset_to_position(text, start, encoding, starts=starts),
            end=offset_to_position(text, end, encoding, starts=starts),
        )
        lsp_edits.append(types.TextEdit(range=lsp_range, new_text=new_text))
    return lsp_edits


def _joined_inside_crlf(text: str, edits: list[TextEdit]) -> list[TextEdit]:
    """Edits in text order, those that touch between a "\\r" and its "\\n" joined into one
    (the same result: touching edits apply in this order)."""
    joined: list[TextEdit] = []
    for edit in edits:
        last = joined[-1] if joined else None
        if last is not None and last.end == edit.start and _inside_crlf(text, edit.start):
            joined[-1] = TextEdit(last.start, edit.end, last.new_text + edit.new_text)
        else:
            joined.append(edit)
    return joined


def _inside_crlf(text: str, offset: int) -> bool:
    return 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n"


def format_range(lsp_range: types.Range) -> str:
    """A range as ``line:character-line:character`` (0-based, as on the wire)."""
    start, end = lsp_range.start, lsp_range.end
    return f"{start.line}:{start.character}-{end.line}:{end.character}"


def content_end(text: str, starts: Sequence[int], line: int) -> int:
    """Offset just past the last character of ``line``, before its line break (``starts``: from
    :func:`line_starts`)."""
    if line + 1 >= len(starts):
        return len(text)
    end = starts[line + 1]
    if text[max(end - 2, 0) : end] == "\r\n":
        return end - 2
    return end - 1
