"""How an LSP client (UTF-16 positions, the protocol's default) reads positions and applies edits.

Written on UTF-16 code units, independently of lsp_server.positions, so that tests can check the
server's conversions against it: lines end at "\\r\\n", "\\r" or "\\n" (LSP), a character past the
end of a line means the end of that line (LSP), and a line past the last one is an error.
"""

from __future__ import annotations

from collections.abc import Iterable

CR, LF = 0x0D, 0x0A

Edit = tuple[int, int, int, int, str]
"""(start line, start character, end line, end character, new text)."""


def code_units(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def from_units(units: list[int]) -> str:
    return b"".join(unit.to_bytes(2, "little") for unit in units).decode("utf-16-le", "surrogatepass")


def lines(units: list[int]) -> list[tuple[int, int]]:
    """(first unit, end of content) of every line; the text after the last line break is a line."""
    found, start, at = [], 0, 0
    while at < len(units):
        if units[at] in (CR, LF):
            width = 2 if units[at] == CR and units[at + 1 : at + 2] == [LF] else 1
            found.append((start, at))
            at += width
            start = at
        else:
            at += 1
    return [*found, (start, len(units))]


def unit_offset(units: list[int], line: int, character: int) -> int:
    """Where a position is, in code units; AssertionError if it splits a surrogate pair."""
    found = lines(units)
    assert 0 <= line < len(found) and character >= 0, f"position {line}:{character} is outside the text"
    start, end = found[line]
    offset = min(start + character, end)
    assert not (0 < offset < len(units) and 0xDC00 <= units[offset] <= 0xDFFF), "splits a surrogate pair"
    return offset


def position(text: str, char_offset: int) -> tuple[int, int]:
    """The (line, character) of a code point offset of ``text``, as the client counts."""
    units = code_units(text)
    at = len(code_units(text[:char_offset]))
    for number, (start, end) in enumerate(lines(units)):
        if start <= at <= end:
            return number, at - start
    raise AssertionError(f"offset {char_offset} is inside a line break")


def apply(text: str, edits: Iterable[Edit]) -> str:
    """Apply edits whose positions all refer to ``text`` (LSP: they must not overlap; insertions
    at one position appear in the order given)."""
    units = code_units(text)
    spans = [(unit_offset(units, a, b), unit_offset(units, c, d), new_text) for a, b, c, d, new_text in edits]
    spans.sort(key=lambda span: span[:2])  # stable
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        assert end <= start, f"overlapping edits: {spans}"
    for start, end, new_text in reversed(spans):
        assert start <= end, f"an edit ends before it starts: {spans}"
        units[start:end] = code_units(new_text)
    return from_units(units)
