"""The line-boundary rule: a fill keeps the line shape of the span it replaces.

Editors select whole lines as a range from column 0 of the first line to column 0 of the line
after the last (Neovim's `V`, VS Code's line selection): the span then ends with a line break.
The model may well write its text without that final line break, which would glue the fill's
last line onto the line after the selection (the blank line after it disappears). So, for a
non-empty span of `text`, the fill's edges are made to match the span's:

- the span ends at a line boundary (its text ends with a line break): the fill ends with a line
  break too (blanks after the fill's last line break, which would indent the line after, go);
- the span ends at the end of a line (just before its line break, as `infill --lines` spans
  do): the fill does not end with line breaks (trailing blank lines go);
- the span starts with a line break (at the end of the line before): the fill starts with one
  (blanks before it, which would trail the line before, go);
- the span starts at column 0 (and not with a line break): the fill starts at column 0 of the
  span's first line: leading blank lines go.

An empty span (an insertion point: inline completion, a docstring) is left as the model wrote
it. Added line breaks are the document's (`newline`). The rule is applied where a span's text is
produced from the canvas (`infill.engine.decode`, the pipeline's decode stage), so the
parser judges, and the CLI, the language server and every editor get, fills of this shape.
"""

from __future__ import annotations

import re

_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\r?\n)+")
_TRAILING_BLANK_LINES = re.compile(r"(?:\r?\n[ \t]*)+\Z")


def keep_line_shape(text: str, start: int, end: int, fill: str, newline: str = "\n") -> str:
    """`fill` (the new text of text[start:end]) with the span's line boundaries (see above)."""
    return shape_with_shift(text, start, end, fill, newline)[0]


def shape_with_shift(text: str, start: int, end: int, fill: str, newline: str = "\n") -> tuple[str, int]:
    """`keep_line_shape`, and how far the fill's original characters moved: a character at
    offset i of `fill` is at i + shift in the result (if it was kept)."""
    if start >= end:
        return fill, 0
    old = text[start:end]
    shaped = fill
    if old.startswith(("\n", "\r\n")):
        shaped = shaped.lstrip(" \t")
        if not shaped.startswith(("\n", "\r\n")):
            shaped = newline + shaped
    elif start == 0 or text[start - 1] == "\n":
        shaped = _LEADING_BLANK_LINES.sub("", shaped)
    shift = len(shaped) - len(fill)  # only the front has changed so far
    if old.endswith("\n"):
        shaped = shaped.rstrip(" \t")
        if not shaped.endswith("\n"):
            shaped += newline
    elif text.startswith(("\n", "\r\n"), end):
        shaped = _TRAILING_BLANK_LINES.sub("", shaped)
    return shaped, shift
