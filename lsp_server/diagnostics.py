"""Syntax errors of a Python document as LSP diagnostics, and the span a quick fix regenerates.

The errors themselves are tree-sitter's ERROR and MISSING nodes, found by
:func:`infill.text.syntax.syntax_problems`; :func:`to_diagnostics` turns them into LSP diagnostics
in the client's position encoding; :func:`fix_span` says what a quick fix fills.

Nothing here knows about the server; everything is a plain function of the document text.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from lsprotocol import types

from infill.text.languages import PYTHON, Language
from infill.text.spans import Span, node_at_offset
from infill.text.syntax import SyntaxProblem, syntax_problems
from lsp_server.positions import UTF16, content_end, line_starts, offset_to_position

SOURCE = "infill"
MAX_FIX_LINES = 8
"""A quick fix regenerates the smallest statement around the error if it has at most this many
lines; otherwise (and where no statement holds the error) the lines of the error itself."""


def to_diagnostic(
    text: str, problem: SyntaxProblem, encoding: str = UTF16, *, starts=None
) -> types.Diagnostic:
    """One problem as an LSP diagnostic (source "infill", severity Error)."""
    starts = starts if starts is not None else line_starts(text)
    return types.Diagnostic(
        range=types.Range(
            start=offset_to_position(text, problem.start, encoding, starts=starts),
            end=offset_to_position(text, problem.end, encoding, starts=starts),
        ),
        message=problem.message,
        severity=types.DiagnosticSeverity.Error,
        code=problem.code,
        source=SOURCE,
    )


def to_diagnostics(
    text: str, problems: Sequence[SyntaxProblem], encoding: str = UTF16
) -> list[types.Diagnostic]:
    starts = line_starts(text)
    return [to_diagnostic(text, problem, encoding, starts=starts) for problem in problems]


def diagnostics(text: str, encoding: str = UTF16, language: Language = PYTHON) -> list[types.Diagnostic]:
    """The syntax errors of ``text`` in ``language`` as LSP diagnostics; empty when it parses
    (or the language has no grammar)."""
    return to_diagnostics(text, syntax_problems(text, language), encoding)


def fix_span(text: str, problem: SyntaxProblem, language: Language = PYTHON) -> tuple[Span, str]:
    """What a quick fix for ``problem`` regenerates, and its kind ("statement" or "lines").

    The smallest statement that holds the whole error, when it has at most
    :data:`MAX_FIX_LINES` lines; otherwise the lines the error touches (from the start of its
    first line to the end of its last, without the terminator). A missing token at the start of
    a blank line takes the previous non-blank line instead.
    """
    starts = line_starts(text)
    first, last = _problem_lines(text, starts, problem)
    statement = node_at_offset(text, problem.start, "statement", language)
    if statement is not None and statement.start <= problem.start and problem.end <= statement.end:
        lines = text.count("\n", statement.start, statement.end) + 1
        if lines <= MAX_FIX_LINES and statement.start < statement.end:
            return statement, "statement"
    start, end = starts[first], content_end(text, starts, last)
    label = f"line {first + 1}" if first == last else f"lines {first + 1}-{last + 1}"
    return Span(start, end, label), "lines"


# ---------------------------------------------------------------------- helpers


def _problem_lines(text: str, starts: Sequence[int], problem: SyntaxProblem) -> tuple[int, int]:
    """0-based first and last line of ``problem``; a missing token on a blank line moves up to the
    previous non-blank line."""
    first = bisect.bisect_right(starts, problem.start) - 1
    if problem.start == problem.end:
        while first > 0 and not text[starts[first] : content_end(text, starts, first)].strip():
            first -= 1
        return first, first
    return first, max(first, bisect.bisect_right(starts, problem.end - 1) - 1)
