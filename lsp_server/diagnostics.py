"""Syntax errors of a Python document as LSP diagnostics, and the span a quick fix regenerates.

tree-sitter parses any text; where it cannot make sense of the code it leaves ``ERROR`` nodes
(tokens it had to skip) and zero-width ``MISSING`` nodes (a token it had to assume, such as a
closing parenthesis). :func:`syntax_problems` lists them as character offsets (the outermost
ERROR of a nest only, every MISSING node); :func:`to_diagnostics` turns them into LSP
diagnostics in the client's position encoding; :func:`fix_span` says what a quick fix fills.

Nothing here knows about the server; everything is a plain function of the document text.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import tree_sitter
import tree_sitter_python
from lsprotocol import types

from infill.spans import Span, node_at_offset
from lsp_server.positions import UTF16, content_end, line_starts, offset_to_position

SOURCE = "infill"
SYNTAX_ERROR = "syntax-error"  # an ERROR node: code tree-sitter could not parse
MISSING_TOKEN = "missing-token"  # a MISSING node: a token tree-sitter had to assume
MAX_PROBLEMS = 50
"""At most this many problems per document (a broken file should not flood the client)."""
MAX_FIX_LINES = 8
"""A quick fix regenerates the smallest statement around the error if it has at most this many
lines; otherwise (and where no statement holds the error) the lines of the error itself."""
_SHOWN_TEXT = 30  # unexpected text longer than this (or multi-line) is not quoted


@dataclass(frozen=True)
class SyntaxProblem:
    """A syntax error at characters ``[start, end)`` (``start == end``: a missing token)."""

    start: int
    end: int
    code: str  # SYNTAX_ERROR or MISSING_TOKEN
    message: str


def syntax_problems(text: str, limit: int = MAX_PROBLEMS) -> list[SyntaxProblem]:
    """ERROR and MISSING nodes of ``text`` parsed as Python, in document order, at most ``limit``."""
    data = text.encode("utf-8", "surrogatepass")
    root = tree_sitter.Parser(_language()).parse(data).root_node
    if not root.has_error:
        return []
    to_char = _char_offsets(text, data)
    problems: list[SyntaxProblem] = []
    stack = [root]
    while stack and len(problems) < limit:
        node = stack.pop()
        if node.is_missing:
            offset = to_char(node.start_byte)
            problems.append(SyntaxProblem(offset, offset, MISSING_TOKEN, _missing_message(node)))
            continue
        if node.is_error:
            start, end = to_char(node.start_byte), to_char(node.end_byte)
            problems.append(SyntaxProblem(start, end, SYNTAX_ERROR, _error_message(text[start:end])))
            stack.extend(child for child in reversed(node.children) if child.is_missing)
            continue  # nested ERROR nodes are part of this one
        stack.extend(child for child in reversed(node.children) if child.has_error or child.is_missing)
    return sorted(problems, key=lambda problem: (problem.start, problem.end))


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


def diagnostics(text: str, encoding: str = UTF16) -> list[types.Diagnostic]:
    """The syntax errors of ``text`` as LSP diagnostics; empty when it parses."""
    return to_diagnostics(text, syntax_problems(text), encoding)


def fix_span(text: str, problem: SyntaxProblem) -> tuple[Span, str]:
    """What a quick fix for ``problem`` regenerates, and its kind ("statement" or "lines").

    The smallest statement that holds the whole error, when it has at most
    :data:`MAX_FIX_LINES` lines; otherwise the lines the error touches (from the start of its
    first line to the end of its last, without the terminator). A missing token at the start of
    a blank line takes the previous non-blank line instead.
    """
    starts = line_starts(text)
    first, last = _problem_lines(text, starts, problem)
    statement = node_at_offset(text, problem.start, "statement")
    if statement is not None and statement.start <= problem.start and problem.end <= statement.end:
        lines = text.count("\n", statement.start, statement.end) + 1
        if lines <= MAX_FIX_LINES and statement.start < statement.end:
            return statement, "statement"
    start, end = starts[first], content_end(text, starts, last)
    label = f"line {first + 1}" if first == last else f"lines {first + 1}-{last + 1}"
    return Span(start, end, label), "lines"


def overlaps(problem: SyntaxProblem, start: int, end: int) -> bool:
    """Whether ``problem`` touches the characters ``[start, end]`` (ends included, so a cursor
    right after an error, or on a missing token, counts)."""
    return problem.start <= end and start <= problem.end


# ---------------------------------------------------------------------- helpers


@functools.cache
def _language() -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_python.language())


def _char_offsets(text: str, data: bytes):
    """A function from byte offsets of ``data`` (UTF-8 of ``text``) to character offsets."""
    if len(data) == len(text):  # ASCII: the same
        return lambda byte_offset: byte_offset
    return lambda byte_offset: len(data[:byte_offset].decode("utf-8", "surrogatepass"))


def _missing_message(node: tree_sitter.Node) -> str:
    what = node.type if node.is_named else f'"{node.type}"'
    return f"syntax error: missing {what}"


def _error_message(code: str) -> str:
    code = code.strip()
    if not code or "\n" in code or "\r" in code or len(code) > _SHOWN_TEXT:
        return "syntax error: invalid syntax"
    if any(char.isspace() for char in code):
        return f'syntax error: cannot parse "{code}"'
    return f'syntax error: unexpected "{code}"'


def _problem_lines(text: str, starts: list[int], problem: SyntaxProblem) -> tuple[int, int]:
    """0-based first and last line of ``problem``; a missing token on a blank line moves up to the
    previous non-blank line."""
    first = bisect.bisect_right(starts, problem.start) - 1
    if problem.start == problem.end:
        while first > 0 and not text[starts[first] : content_end(text, starts, first)].strip():
            first -= 1
        return first, first
    return first, max(first, bisect.bisect_right(starts, problem.end - 1) - 1)
