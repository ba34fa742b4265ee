"""Syntax errors -> LSP diagnostics and the span a quick fix regenerates (plain functions)."""

from __future__ import annotations

import pytest
from lsprotocol import types

from infill.text.syntax import MISSING_TOKEN, SYNTAX_ERROR, SyntaxProblem, overlaps, syntax_problems
from lsp_server.diagnostics import MAX_FIX_LINES, diagnostics, fix_span
from lsp_server.positions import UTF8, UTF16, UTF32


def test_valid_code_has_no_problems():
    assert syntax_problems("def f(x):\n    return x + 1\n") == []
    assert syntax_problems("") == []
    assert diagnostics("import os\r\n") == []


def test_a_missing_token_is_a_zero_width_problem_where_the_token_belongs():
    text = "def f(:\n    return 1\n"
    [problem] = syntax_problems(text)
    assert problem == SyntaxProblem(6, 6, MISSING_TOKEN, 'syntax error: missing ")"')


def test_an_unexpected_token_is_an_error_over_exactly_that_token():
    text = "class A:\n    def m(self):\n        x = = 2\n        return x\n"
    [problem] = syntax_problems(text)
    assert problem.code == SYNTAX_ERROR and text[problem.start : problem.end] == "="
    assert problem.message == 'syntax error: unexpected "="'
    assert problem.start == text.index("= 2")


def test_nested_errors_are_reported_once_by_the_outermost():
    text = "x = foo(1, 2\ny = 3\n"  # tree-sitter nests an ERROR for "2" inside one for both lines
    [problem] = syntax_problems(text)
    assert (problem.start, problem.end) == (0, len("x = foo(1, 2\ny = 3"))
    assert problem.message == "syntax error: invalid syntax"


def test_problems_are_limited_and_in_document_order():
    text = "".join(f"x{i} = = {i}\n" for i in range(30))
    problems = syntax_problems(text, limit=5)
    assert len(problems) == 5
    assert [p.start for p in problems] == sorted(p.start for p in problems)
    assert len(syntax_problems(text)) == 30


def test_ranges_are_in_the_negotiated_encoding():
    line = 's = "🐍é" + = 1'
    text = f"# ok\r\n{line}\r\n"
    [diagnostic] = diagnostics(text, UTF16)
    column = line.index("= 1")
    assert diagnostic.range.start == types.Position(line=1, character=column + 1)  # 🐍: two units
    assert diagnostic.range.end == types.Position(line=1, character=column + 2)
    assert diagnostic.source == "infill" and diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.code == SYNTAX_ERROR
    [utf8] = diagnostics(text, UTF8)
    assert utf8.range.start.character == len(line[:column].encode("utf-8"))
    [utf32] = diagnostics(text, UTF32)
    assert utf32.range.start.character == column


def test_fix_span_is_the_smallest_statement_around_the_error():
    text = "def f():\n    x = = 2\n    return x\n"
    [problem] = syntax_problems(text)
    span, kind = fix_span(text, problem)
    assert kind == "statement" and text[span.start : span.end] == "    x = = 2"
    assert span.label == "statement on line 2"


def test_fix_span_is_the_error_lines_when_no_statement_holds_it():
    text = "import os\nx = foo(1, 2\ny = 3\n"
    [problem] = syntax_problems(text)
    assert text[problem.start : problem.end] == "x = foo(1, 2\ny = 3"  # an ERROR outside statements
    span, kind = fix_span(text, problem)
    assert kind == "lines" and span.label == "lines 2-3"
    assert text[span.start : span.end] == "x = foo(1, 2\ny = 3"


def test_fix_span_of_an_error_in_a_long_statement_is_its_lines():
    body = "".join(f"    v{i} = {i}\n" for i in range(MAX_FIX_LINES + 2))
    text = "def f(:\n" + body  # a missing ")" in a long function: not the whole function
    [problem] = syntax_problems(text)
    span, kind = fix_span(text, problem)
    assert (kind, text[span.start : span.end]) == ("lines", "def f(:")


def test_fix_span_keeps_crlf_outside_and_skips_blank_lines_for_missing_tokens():
    text = "x = (1,\r\n\r\n"
    problem = SyntaxProblem(len("x = (1,\r\n"), len("x = (1,\r\n"), MISSING_TOKEN, "missing")
    span, kind = fix_span(text, problem)
    assert text[span.start : span.end] == "x = (1," and kind in ("lines", "statement")


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [(0, 3, False), (0, 4, True), (5, 5, True), (8, 8, True), (9, 12, False)],
)
def test_overlap_includes_both_ends(start, end, expected):
    assert overlaps(SyntaxProblem(4, 8, SYNTAX_ERROR, "x"), start, end) is expected
