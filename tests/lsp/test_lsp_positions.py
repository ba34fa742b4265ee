"""LSP positions (UTF-16 by default, UTF-8/UTF-32 when negotiated) <-> character offsets."""

from __future__ import annotations

import pytest
from lsp_support import offsets_to_range
from lsprotocol.types import Position, Range

from infill.text.edits import TextEdit, apply_edits
from lsp_server.positions import (
    UTF8,
    UTF16,
    UTF32,
    PositionError,
    line_starts,
    offset_to_position,
    position_to_offset,
    range_to_offsets,
    to_lsp_edits,
    units,
)

# 🐍 and 😀 are astral (two UTF-16 units, four UTF-8 bytes); é is two UTF-8 bytes; ☕ three.
TEXT = 'x = "é🐍"\r\ny = "😀☕" + x\r\n\r\nz\rw\n'


def utf16_column(line_text: str) -> int:
    return len(line_text.encode("utf-16-le")) // 2


def test_line_starts_follow_lsp_line_breaks():
    # "\r\n", "\r" and "\n" each end a line; the text after the last break is a line.
    assert line_starts(TEXT) == (0, 10, 24, 26, 28, 30)
    assert line_starts("") == (0,)
    assert line_starts("a\u2028b\x0cc") == (0,)  # not LSP line breaks (unlike str.splitlines)


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [(UTF16, [0, 4, 5, 6, 8, 9]), (UTF8, [0, 4, 5, 7, 11, 12]), (UTF32, [0, 4, 5, 6, 7, 8])],
)
def test_columns_on_a_line_with_non_ascii(encoding, expected):
    line = 'x = "é🐍"'
    for offset, column in zip([0, 4, 5, 6, 7, 8], expected):
        assert offset_to_position(TEXT, offset, encoding) == Position(line=0, character=column)
        assert position_to_offset(TEXT, Position(line=0, character=column), encoding) == offset
    assert units(line, encoding) == expected[-1]


def test_utf16_columns_match_an_independent_count():
    for offset in range(len(TEXT) + 1):
        position = offset_to_position(TEXT, offset)
        start = line_starts(TEXT)[position.line]
        assert position.character == utf16_column(TEXT[start:offset])
        if TEXT[offset - 1 : offset + 1] != "\r\n":  # not between "\r" and "\n"
            assert position_to_offset(TEXT, position) == offset


def test_crlf_lines_and_their_ends():
    # Line 1 is 'y = "😀☕" + x': 12 code points, 13 UTF-16 units; its end is before "\r\n".
    line1_end = TEXT.index("\r\n", 10)
    assert offset_to_position(TEXT, line1_end) == Position(line=1, character=13)
    assert position_to_offset(TEXT, Position(line=1, character=13)) == line1_end
    # A character past the end of a line means the end of that line (LSP spec), not the next line.
    assert position_to_offset(TEXT, Position(line=1, character=99)) == line1_end
    assert position_to_offset(TEXT, Position(line=2, character=5)) == 24  # empty CRLF line
    # Lone "\r" ends a line too.
    assert offset_to_position(TEXT, TEXT.index("w")) == Position(line=4, character=0)
    # The empty line after the final "\n" is addressable (the end of the document).
    assert position_to_offset(TEXT, Position(line=5, character=0)) == len(TEXT)
    assert offset_to_position(TEXT, len(TEXT)) == Position(line=5, character=0)


def test_positions_inside_a_character_move_to_its_start():
    snake = TEXT.index("🐍")
    assert position_to_offset(TEXT, Position(line=0, character=7), UTF16) == snake  # between surrogates
    assert position_to_offset(TEXT, Position(line=0, character=9), UTF8) == snake  # inside the bytes


def test_out_of_range_positions_are_errors():
    with pytest.raises(PositionError, match="past the end"):
        position_to_offset(TEXT, Position(line=6, character=0))
    with pytest.raises(PositionError, match="ends before it starts"):
        range_to_offsets(TEXT, Range(start=Position(line=1, character=2), end=Position(line=0, character=0)))
    with pytest.raises(PositionError):
        offset_to_position(TEXT, len(TEXT) + 1)


def test_ranges_round_trip():
    start, end = TEXT.index("😀"), TEXT.index("x", 10) + 1
    lsp_range = offsets_to_range(TEXT, start, end)
    assert lsp_range == Range(start=Position(line=1, character=5), end=Position(line=1, character=13))
    assert range_to_offsets(TEXT, lsp_range) == (start, end)
    for encoding in (UTF8, UTF32):
        assert range_to_offsets(TEXT, offsets_to_range(TEXT, start, end, encoding), encoding) == (start, end)


def apply_utf16(text: str, edits) -> str:
    """Apply LSP edits the way a UTF-16 client does (independently of lsp_server.positions)."""
    lines = text.splitlines(keepends=True)  # fine here: TEXT has no other separators
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + utf16_column(line))
    data = text.encode("utf-16-le")

    def unit_offset(position):  # a character past the line's end means its end (LSP spec)
        content = lines[position.line].rstrip("\r\n") if position.line < len(lines) else ""
        return starts[position.line] + min(position.character, utf16_column(content))

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        a, b = unit_offset(edit.range.start), unit_offset(edit.range.end)
        data = data[: 2 * a] + edit.new_text.encode("utf-16-le") + data[2 * b :]
    return data.decode("utf-16-le")


def test_edits_become_lsp_edits_that_a_utf16_client_applies_identically():
    ours = [
        TextEdit(TEXT.index("é"), TEXT.index("🐍") + 1, "🦀ü"),
        TextEdit(TEXT.index("😀"), TEXT.index("☕"), ""),
        TextEdit(TEXT.index("z"), TEXT.index("z") + 1, "a\r\nb"),
    ]
    lsp_edits = to_lsp_edits(TEXT, list(reversed(ours)))
    assert [edit.range.start for edit in lsp_edits] == [
        Position(line=0, character=5),
        Position(line=1, character=5),
        Position(line=3, character=0),
    ]
    assert lsp_edits[0].range.end == Position(line=0, character=8)
    assert apply_utf16(TEXT, lsp_edits) == apply_edits(TEXT, ours)


@pytest.mark.parametrize(
    "edit",
    [
        TextEdit(TEXT.index("\r\n") + 1, TEXT.index("\r\n") + 1, "inserted"),  # between "\r" and "\n"
        TextEdit(TEXT.index("x\r\n") + 1, TEXT.index("x\r\n") + 2, ""),  # deletes the "\r" only
        TextEdit(TEXT.index("\r\n") + 1, TEXT.index("y") + 1, "Y"),  # from inside the pair
    ],
)
def test_an_edit_that_splits_a_crlf_becomes_one_that_a_client_can_apply(edit: TextEdit):
    [lsp_edit] = to_lsp_edits(TEXT, [edit])
    assert apply_utf16(TEXT, [lsp_edit]) == apply_edits(TEXT, [edit])


def test_edits_that_meet_between_cr_and_lf_become_one_edit_not_two_overlapping():
    """Found by tests/text/test_edit_properties.py: each edit took in the whole "\\r\\n", so the two
    ranges overlapped, and a client refuses overlapping edits."""
    crlf = TEXT.index("\r\n")
    ours = [TextEdit(crlf - 1, crlf + 1, "X"), TextEdit(crlf + 1, crlf + 2, "Y")]  # meet inside the pair
    lsp_edits = to_lsp_edits(TEXT, ours)
    assert len(lsp_edits) == 1
    assert apply_utf16(TEXT, lsp_edits) == apply_edits(TEXT, ours)
