"""Minimal text edits and their presentation (unified diff, JSON with line/character ranges).

Offsets are character (code point) offsets into `Document.text`, ranges are half-open
[start, end). Lines end after "\\n" only: a "\\r\\n" is one line break, and a lone "\\r" (or any
other character `str.splitlines` would split on, such as form feed) is part of the line.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_NO_NEWLINE_MARKER = "\\ No newline at end of file\n"


@dataclass(frozen=True)
class TextEdit:
    """Replace text[start:end] by new_text (offsets in code points, half-open)."""

    start: int
    end: int
    new_text: str

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"invalid edit range [{self.start}, {self.end})")


def minimal_edit(text: str, start: int, end: int, new_text: str) -> TextEdit | None:
    """The smallest edit equivalent to replacing text[start:end] by new_text; None if a no-op.

    The longest common prefix, then the longest common suffix of what remains, of the old and the
    new part are kept. A "\\r\\n" pair inside the span is never split between a kept and an edited
    part, nor is an edit boundary placed between its "\\r" and "\\n": trimming backs off by one
    character instead. The edit always lies inside [start, end).
    """
    _check_range(text, start, end)
    old = text[start:end]
    if old == new_text:
        return None

    prefix = _common_prefix_length(old, new_text)
    suffix = _common_suffix_length(old[prefix:], new_text[prefix:])
    while True:  # backing off at one end can make the other split a pair: until neither does
        if _start_splits_crlf(old, new_text, prefix, suffix):
            prefix -= 1
            suffix = _common_suffix_length(old[prefix:], new_text[prefix:])
        elif _end_splits_crlf(old, new_text, prefix, suffix):
            suffix -= 1
        else:
            break

    return TextEdit(start + prefix, end - suffix, new_text[prefix : len(new_text) - suffix])


def apply_edits(text: str, edits: Sequence[TextEdit]) -> str:
    """Apply edits whose offsets all refer to `text` (as if applied back to front).

    Edits may come in any order but must not overlap (ValueError otherwise); they may touch.
    Several insertions at the same offset are applied in the order given.
    """
    pieces = []
    position = 0
    for edit in _sorted_edits(text, edits):
        pieces.append(text[position : edit.start])
        pieces.append(edit.new_text)
        position = edit.end
    pieces.append(text[position:])
    return "".join(pieces)


def offset_to_position(text: str, offset: int) -> tuple[int, int]:
    """0-based (line, character) of a code point offset; lines end after "\\n"."""
    if not 0 <= offset <= len(text):
        raise ValueError(f"offset {offset} is outside the text (length {len(text)})")
    line = text.count("\n", 0, offset)
    line_start = text.rfind("\n", 0, offset) + 1
    return line, offset - line_start


def unified_diff(old: str, new: str, path: str) -> str:
    """A unified diff (headers a/path and b/path, 3 lines of context); "" when old == new.

    A last line without a line break gets the standard "\\ No newline at end of file" marker,
    so that the diff can be applied by `patch`, `git apply` and diff parsers.
    """
    if old == new:
        return ""
    path = path.replace("\\", "/").lstrip("/")  # "a//tmp/x.py" is not a path patch tools accept
    diff_lines = difflib.unified_diff(
        _split_lines(old), _split_lines(new), fromfile=f"a/{path}", tofile=f"b/{path}", n=3
    )
    return "".join(_terminated(line) for line in diff_lines)


def edits_to_json(text: str, edits: Sequence[TextEdit]) -> list[dict]:
    """Edits as JSON-ready dicts, in text order, with 0-based line/character ranges.

    Each dict: {"start", "end", "new_text", "old_text",
    "range": {"start": {"line", "character"}, "end": {"line", "character"}}}.
    """
    return [
        {
            "start": edit.start,
            "end": edit.end,
            "new_text": edit.new_text,
            "old_text": text[edit.start : edit.end],
            "range": {
                "start": _position_json(text, edit.start),
                "end": _position_json(text, edit.end),
            },
        }
        for edit in _sorted_edits(text, edits)
    ]


def _check_range(text: str, start: int, end: int) -> None:
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"range [{start}, {end}) is outside the text (length {len(text)})")


def _sorted_edits(text: str, edits: Sequence[TextEdit]) -> list[TextEdit]:
    """Edits in text order (stable for equal ranges); ValueError if out of range or overlapping."""
    ordered = sorted(edits, key=lambda edit: (edit.start, edit.end))
    for edit in ordered:
        _check_range(text, edit.start, edit.end)
    for before, after in itertools.pairwise(ordered):
        if before.end > after.start:
            raise ValueError(
                f"overlapping edits [{before.start}, {before.end}) and [{after.start}, {after.end})"
            )
    return ordered


def _common_prefix_length(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    length = 0
    while length < limit and a[length] == b[length]:
        length += 1
    return length


def _common_suffix_length(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    length = 0
    while length < limit and a[-1 - length] == b[-1 - length]:
        length += 1
    return length


def _start_splits_crlf(old: str, new: str, prefix: int, suffix: int) -> bool:
    """Would keeping `prefix` characters end the kept part on the "\\r" of a "\\r\\n"?

    That is the case when the old text continues with "\\n" (the edit would start inside the
    pair) or the edited new part starts with "\\n" (the new pair would be half kept, half new).
    """
    if prefix == 0 or old[prefix - 1] != "\r":
        return False
    new_part = new[prefix : len(new) - suffix]
    return old[prefix : prefix + 1] == "\n" or new_part[:1] == "\n"


def _end_splits_crlf(old: str, new: str, prefix: int, suffix: int) -> bool:
    """Would keeping `suffix` characters start the kept part on the "\\n" of a "\\r\\n"?"""
    if suffix == 0 or old[len(old) - suffix] != "\n":
        return False
    old_end = len(old) - suffix
    new_part = new[prefix : len(new) - suffix]
    return (old_end > 0 and old[old_end - 1] == "\r") or new_part[-1:] == "\r"


def _split_lines(text: str) -> list[str]:
    """Lines with their terminators, split after "\\n" only (unlike str.splitlines)."""
    lines = text.split("\n")
    last = lines.pop()
    return [line + "\n" for line in lines] + ([last] if last else [])


def _terminated(diff_line: str) -> str:
    """A diff line with its line break; a content line that had none gets the marker."""
    if diff_line.endswith("\n"):
        return diff_line
    return diff_line + "\n" + _NO_NEWLINE_MARKER


def _position_json(text: str, offset: int) -> dict:
    line, character = offset_to_position(text, offset)
    return {"line": line, "character": character}


def edits_from_json(text: str, items: Any) -> list[TextEdit]:
    """Edits as :func:`edits_to_json` writes them, read back against ``text``; ValueError unless
    each one is an object whose offsets lie in ``text`` and whose ``old_text`` is what is there
    (an answer about another version of the text changes nothing)."""
    if not isinstance(items, list):
        raise ValueError("edits must be a list")
    edits = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("each edit is an object")
        start, end, new_text = item.get("start"), item.get("end"), item.get("new_text")
        if not (type(start) is int and type(end) is int and isinstance(new_text, str)):
            raise ValueError("each edit has integer start and end and a string new_text")
        _check_range(text, start, end)
        if "old_text" in item and item["old_text"] != text[start:end]:
            raise ValueError(f"the edit at {start}-{end} replaces text that is not there")
        edits.append(TextEdit(start, end, new_text))
    return edits
