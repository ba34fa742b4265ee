"""A request's cost follows the model's window, not the file: fill a piece of text around the spans.

The model sees at most ``context_length`` tokens around the spans (:mod:`infill.engine.canvas` cuts
the canvas there), but building that canvas tokenizes the whole file, and the syntax checks of
retries parse all of it: a one-line fill in a 20,000-line file cost several times one in a
200-line file. :func:`window_around` picks the text the model can see, generously (at least
:data:`CHARS_PER_TOKEN` characters per token of the half of the context each side of the spans
gets, more than any tokenizer of code averages), widened to whole lines and, where one is near, to the start
of a top-level definition on each side, so that a file that parses gives a window that parses
(the syntax checks then judge the fill as in the whole file).

The pipeline's window step (:func:`infill.engine.pipeline.in_window`) is the one caller that
fills: it stages every mode's job on :meth:`Window.document`, its spans moved in by
:meth:`Window.span`, and gives the mode back its own spans, in the file's offsets, when the
stages are done. Text outside the window cannot change: the spans lie inside it, and a mode's
edits are minimal edits of the file within its spans. (The language server's kept context,
:mod:`infill.engine.kept_context`, takes the same window around an offset to run a fill's first pass
ahead of time.)
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from infill.text.document import Document
from infill.text.languages import Language
from infill.text.spans import Span, char_offset

CHARS_PER_TOKEN = 8
"""Characters of text taken per token of context on each side (code averages 3-4)."""
_TOP_LEVEL = re.compile(r"^(?:async[ \t]+def|def|class)[ \t]|^@", re.MULTILINE)


@dataclass(frozen=True)
class Window:
    """Characters [start, end) of a text."""

    start: int
    end: int

    def document(self, document: Document) -> Document:
        """The window's text as a document of its own (same BOM flag and line endings)."""
        if (self.start, self.end) == (0, len(document.text)):
            return document
        return dataclasses.replace(document, text=document.text[self.start : self.end])

    def span(self, span: Span) -> Span:
        """``span`` (file offsets) in the window's offsets."""
        return dataclasses.replace(span, start=span.start - self.start, end=span.end - self.start)


def fits_one_window(text: str, context_tokens: int) -> bool:
    """Whether all of ``text`` is within the reach of one window of ``context_tokens`` tokens
    (generously, as :func:`window_around` reaches)."""
    return len(text) <= max(1, context_tokens) * CHARS_PER_TOKEN


def window_around(text: str, start: int, end: int, context_tokens: int) -> Window:
    """The window of ``text`` a fill of [start, end) needs for ``context_tokens`` tokens of context
    (see the module docstring); the whole text when it is not much longer."""
    reach = max(1, context_tokens) * CHARS_PER_TOKEN // 2  # the canvas splits its context in two
    if len(text) <= 2 * reach + (end - start):
        return Window(0, len(text))
    low = _line_start(text, max(0, start - reach))
    high = _line_end(text, min(len(text), end + reach))
    # Out to a top-level definition (within as much again), so that the window parses.
    before = [m.start() for m in _TOP_LEVEL.finditer(text, max(0, low - reach), low + 8) if m.start() <= low]
    if before:
        low = before[-1]
    after = _TOP_LEVEL.search(text, high, min(len(text), high + reach))
    if after is not None:
        high = after.start()
    return Window(low, high)


def staging_window(document: Document, start: int, end: int, context_tokens: int) -> Window:
    """The window a fill of [start, end) of ``document`` is staged on (the pipeline's window step,
    and the language server's kept context ahead of a fill): :func:`window_around`, widened by
    :func:`parsing_window` where it would not parse."""
    return parsing_window(document, window_around(document.text, start, end, context_tokens))


def parsing_window(document: Document, window: Window) -> Window:
    """`window`, widened to whole top-level statements of the file where its text does not parse
    and the file does (a window that starts inside a class body or a multi-line string).

    The repair stage judges a fill by the problems it causes in the text it sees: in a window
    that does not parse it can only count those that touch a fill, and Python's parser names
    only the first problem, the window's own; a fill that breaks the file would pass. Widened,
    the window parses as the file does. tree-sitter parses the whole file (cheap, and cached);
    a language without a grammar keeps its window."""
    text, language = document.text, document.language
    if (window.start, window.end) == (0, len(text)) or language.grammar is None:
        return window
    from infill.text.syntax import file_problems  # tree-sitter: only once a window is cut

    if not file_problems(text[window.start : window.end], language):
        return window
    start, end = _top_level_around(text, window, language)
    return window if (start, end) == (window.start, window.end) else Window(start, end)


def _top_level_around(text: str, window: Window, language: Language) -> tuple[int, int]:
    """The start of the file's top-level statement holding `window.start` and the end of the one
    holding its last character (the window's own ends where the file does not parse)."""
    from infill.text.parse_cache import parse_tree

    data, root = parse_tree(text, language)
    if root.has_error:
        return window.start, window.end
    low, high = len(text[: window.start].encode()), len(text[: window.end].encode())
    start, end = low, high
    for node in root.children:  # a statement holding the window's edge moves it out to its own
        if node.start_byte <= low < node.end_byte:
            start = node.start_byte
        if node.start_byte < high <= node.end_byte:
            end = node.end_byte
    return _line_start(text, char_offset(data, start)), _line_end(text, char_offset(data, end))


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _line_end(text: str, offset: int) -> int:
    """Just after the line break that ends the line ``offset`` is on (the text's end if none)."""
    if offset > 0 and text[offset - 1] == "\n":
        return offset
    found = text.find("\n", offset)
    return len(text) if found == -1 else found + 1
