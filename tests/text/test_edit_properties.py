"""Edit arithmetic end to end, as the server does it, over ~10,000 generated cases.

A file's bytes (CRLF, LF, lone CR and mixed line ends, a UTF-8 BOM, tabs, astral characters,
with or without a final newline) become a Document (infill.text.document); model output gets the
file's line ends (``adapt_generated``) and becomes minimal edits (infill.text.edits); those become
LSP edits in UTF-16 (lsp_server.positions), which a client applies (tests/utf16_client.py, on
UTF-16 code units, written independently). The properties:

- the client's result equals our own ``apply_edits`` and, once encoded, every byte of the file
  outside the replaced spans is identical (the BOM included);
- offsets and LSP positions round-trip exactly (every offset not between a "\\r" and its "\\n",
  every position on a character boundary), and agree with the client's own count;
- the CLI's JSON ranges (lines end after "\\n" only) point at the edited text.

tests/text/test_edits.py and tests/lsp/test_lsp_positions.py hold the worked examples; this file the volume.
"""

from __future__ import annotations

import codecs

import pytest
import utf16_client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_support import offsets_to_range
from lsprotocol.types import Position

from infill.text.document import document_from_bytes
from infill.text.edits import TextEdit, apply_edits, edits_to_json, minimal_edit
from lsp_server.positions import (
    UTF8,
    UTF16,
    UTF32,
    PositionError,
    offset_to_position,
    position_to_offset,
    range_to_offsets,
    to_lsp_edits,
)

BOM = codecs.BOM_UTF8

# Property tests: no per-example deadline and no "too slow" health check, which only measure
# how busy the machine is.
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces that make every kind of line end, tabs and characters of 1 to 4 UTF-8 bytes (2 UTF-16
# units for the astral ones: emoji, Fraktur, the last code point) frequent.
PIECES = [
    "a", "x = 1", " ", "\t", "\n", "\n", "\r\n", "\r\n", "\r", "é", "☕", "日本",
    "😀", "🐍", "𝔘", "\U0010ffff", "\ufeff", "#",
]  # fmt: skip
ANY_CHARACTER = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")

texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(alphabet=ANY_CHARACTER, max_size=40),
)
replacements = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=8).map("".join),
    st.text(alphabet=ANY_CHARACTER, max_size=8),
)

Span = tuple[int, int]


@st.composite
def spans(draw: st.DrawFn, text: str) -> list[Span]:
    """Non-overlapping spans of ``text`` in order; they may be empty, touch, or cut a "\\r\\n"."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    return list(zip(cuts[::2], cuts[1::2]))


@st.composite
def files_with_fills(draw: st.DrawFn) -> tuple[bytes, list[tuple[Span, str]]]:
    """A file's bytes, and model output (lines ending in "\\n") for spans of its text."""
    text = draw(texts)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # no final newline
    data = (BOM if draw(st.booleans()) else b"") + text.encode("utf-8")
    chosen = draw(spans(document_from_bytes(data).text))  # a leading "\ufeff" is read as the BOM
    fills = [(span, draw(replacements).replace("\r\n", "\n")) for span in chosen]
    return data, fills


def byte_offset(data: bytes, text: str, offset: int) -> int:
    """Where character ``offset`` of the document's text is in the file's bytes."""
    return (len(BOM) if data.startswith(BOM) else 0) + len(text[:offset].encode("utf-8"))


def lsp_tuples(text: str, edits: list[TextEdit]) -> list[utf16_client.Edit]:
    return [
        (e.range.start.line, e.range.start.character, e.range.end.line, e.range.end.character, e.new_text)
        for e in to_lsp_edits(text, edits, UTF16)
    ]


# ------------------------------------------------------------------------------------ bytes


@pytest.mark.slow
@settings(PROPERTY, max_examples=3000)
@given(case=files_with_fills())
def test_a_fill_reaches_the_file_only_inside_its_spans(case: tuple[bytes, list[tuple[Span, str]]]) -> None:
    data, fills = case
    document = document_from_bytes(data)
    text = document.text
    adapted = [(span, document.adapt_generated(new_text)) for span, new_text in fills]
    edits = [minimal_edit(text, start, end, new_text) for (start, end), new_text in adapted]
    edits = [edit for edit in edits if edit is not None]

    edited = utf16_client.apply(text, lsp_tuples(text, edits))  # what the editor holds now
    assert edited == apply_edits(text, edits)
    written = document.encode(edited)

    # Walk the file: every gap between spans (the BOM included) is the same bytes, shifted by the
    # replacements before it.
    shift, gap_start = 0, 0
    for (start, end), new_text in adapted:
        gap_end = byte_offset(data, text, start)
        assert written[gap_start + shift : gap_end + shift] == data[gap_start:gap_end]
        gap_start = byte_offset(data, text, end)
        shift += len(new_text.encode("utf-8")) - (gap_start - gap_end)
    assert written[gap_start + shift :] == data[gap_start:]
    assert len(written) == len(data) + shift


# ------------------------------------------------------------------------------------ positions


def between_cr_and_lf(text: str, offset: int) -> bool:
    return 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n"


@pytest.mark.slow
@settings(PROPERTY, max_examples=3000)
@given(text=texts)
def test_every_offset_and_position_round_trips_and_agrees_with_the_client(text: str) -> None:
    for offset in range(len(text) + 1):
        if between_cr_and_lf(text, offset):  # no LSP position is there: it means the line's end
            position = offset_to_position(text, offset)
            assert position_to_offset(text, position) == offset - 1
            continue
        position = offset_to_position(text, offset, UTF16)
        assert (position.line, position.character) == utf16_client.position(text, offset)
        assert position_to_offset(text, position, UTF16) == offset
        for encoding in (UTF8, UTF32):
            assert position_to_offset(text, offset_to_position(text, offset, encoding), encoding) == offset


@settings(PROPERTY, max_examples=1500)
@given(text=texts, line=st.integers(0, 12), character=st.integers(0, 40))
def test_any_position_lands_on_the_clients_character_or_is_refused(
    text: str, line: int, character: int
) -> None:
    """Past the line's end: the line's end; inside a surrogate pair: before it; past the last line:
    an error (negative numbers never get here: lsprotocol refuses them)."""
    units = utf16_client.code_units(text)
    lines = utf16_client.lines(units)
    if line >= len(lines):
        with pytest.raises(PositionError):
            position_to_offset(text, Position(line=line, character=character))
        return
    offset = position_to_offset(text, Position(line=line, character=character))
    start, end = lines[line]
    wanted = min(start + character, end)
    if 0 < wanted < len(units) and 0xDC00 <= units[wanted] <= 0xDFFF:
        wanted -= 1  # inside an astral character: at its start
    assert len(utf16_client.code_units(text[:offset])) == wanted
    back = offset_to_position(text, offset)
    assert back.line == line and back.character == wanted - start


@settings(PROPERTY, max_examples=1000)
@given(data=st.data(), text=texts)
def test_ranges_round_trip(data: st.DataObject, text: str) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    if between_cr_and_lf(text, start) or between_cr_and_lf(text, end):
        return
    for encoding in (UTF16, UTF8, UTF32):
        assert range_to_offsets(text, offsets_to_range(text, start, end, encoding), encoding) == (start, end)


# ------------------------------------------------------------------------------------ the CLI's JSON


@settings(PROPERTY, max_examples=1500)
@given(case=files_with_fills())
def test_json_ranges_point_at_the_replaced_text(case: tuple[bytes, list[tuple[Span, str]]]) -> None:
    data, fills = case
    text = document_from_bytes(data).text
    edits = [minimal_edit(text, start, end, new_text) for (start, end), new_text in fills]
    lines = text.split("\n")  # the CLI's lines end after "\n" only
    for item in edits_to_json(text, [edit for edit in edits if edit is not None]):
        for key in ("start", "end"):
            where = item["range"][key]
            offset = sum(len(line) + 1 for line in lines[: where["line"]]) + where["character"]
            assert offset == item[key]
        assert text[item["start"] : item["end"]] == item["old_text"]
