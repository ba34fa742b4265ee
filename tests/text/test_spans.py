"""Tests for infill.text.spans: --lines, --range, --node, cursor kinds, and span validation."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infill.errors import InputError
from infill.text.spans import (
    CURSOR_KINDS,
    Span,
    line_span,
    node_at_offset,
    node_span,
    parse_lines,
    parse_range,
    validate_spans,
)

SOURCE = '''\
"""Geometría: formas y áreas — ∑ 😀."""
import functools
import math

RATE = 0.5  # tasa — ½


def helper(x):
    return x * 2


@functools.cache
@register("área")
def compute(a, b):  # header comment
    # leading comment
    """Suma — ∑ of a and b."""
    total = a + b
    if total > 10: total = 10
    return total


class Shape:
    """A shape."""

    def area(self):
        return 0.0

    def helper(self):
        def inner():
            return 1

        return inner()


class Circle(Shape):
    def area(self):
        return math.pi * self.r ** 2

    @property
    def name(self): return "círculo"
'''


def selected(text: str, span: Span) -> str:
    return text[span.start : span.end]


def line_of(text: str, needle: str) -> int:
    """1-based number of the line where ``needle`` first occurs."""
    return text[: text.index(needle)].count("\n") + 1


def assert_input_error(pattern: str, function, *args) -> None:
    with pytest.raises(InputError, match=pattern):
        function(*args)


# --------------------------------------------------------------------------- --lines


def test_lines_range_starts_at_column_0_and_stops_before_the_newline():
    text = "a = 1\n    b = 2\n    c = 3\nd = 4\n"
    span = parse_lines(text, "2-3")
    assert selected(text, span) == "    b = 2\n    c = 3"
    assert text[span.end] == "\n"
    assert span.label == "lines 2-3"


def test_single_line_and_spaces_around_numbers():
    text = "a\nb\nc\n"
    assert selected(text, parse_lines(text, "2")) == "b"
    assert parse_lines(text, "2").label == "line 2"
    assert selected(text, parse_lines(text, " 1 - 2 ")) == "a\nb"


def test_lines_in_a_crlf_file_leave_the_crlf_outside():
    text = "a\r\nb\r\nc\r\n"
    span = parse_lines(text, "1-2")
    assert selected(text, span) == "a\r\nb"
    assert text[span.end : span.end + 2] == "\r\n"


def test_last_line_without_trailing_newline():
    text = "first\nlast"
    span = parse_lines(text, "2")
    assert selected(text, span) == "last"
    assert span.end == len(text)


def test_lines_count_characters_not_bytes():
    text = "ä€😀\nnaïve = 'é'\n"
    span = parse_lines(text, "2")
    assert span.start == 4
    assert selected(text, span) == "naïve = 'é'"


def test_empty_lines_can_be_selected():
    text = "a\n\n\nb\n"
    span = parse_lines(text, "2-3")
    assert (span.start, span.end) == (2, 3)
    assert selected(text, span) == "\n"


def test_line_span_directly():
    text = "x\ny\nz"
    assert selected(text, line_span(text, 1, 3)) == text


@pytest.mark.parametrize(
    ("text", "spec", "message"),
    [
        ("a\n", "x", r"--lines expects A-B or A .*got 'x'"),
        ("a\n", "1-2-3", "--lines expects"),
        ("a\n", "1.5", "--lines expects"),
        ("a\n", "-1", "--lines expects"),
        ("a\n", "", "--lines expects"),
        ("", "1", "the file is empty"),
        ("a\n", "0", "line numbers start at 1, got 0"),
        ("a\nb\n", "3", r"line 3 is past the end of the file \(2 lines\)"),
        ("a\n", "1-2", r"line 2 is past the end of the file \(1 line\)"),
        ("a\nb\nc", "3-1", "line range 3-1 is backwards"),
    ],
)
def test_bad_lines(text, spec, message):
    assert_input_error(message, parse_lines, text, spec)


@st.composite
def files_of_lines(draw):
    """A file as (text, lines, terminators): lines without breaks, each "\\n" or "\\r\\n"."""
    lines = draw(
        st.lists(
            st.text(st.characters(blacklist_characters="\r\n", codec="utf-8"), max_size=8),
            min_size=1,
            max_size=12,
        )
    )
    terminators = draw(st.lists(st.sampled_from(["\n", "\r\n"]), min_size=len(lines)))
    terminators = terminators[: len(lines)]
    if draw(st.booleans()) and lines[-1]:
        terminators[-1] = ""  # last line without a terminator
    text = "".join(line + end for line, end in zip(lines, terminators))
    return text, lines, terminators


@given(files_of_lines(), st.data())
def test_line_span_selects_exactly_those_lines(file, data):
    text, lines, terminators = file
    first = data.draw(st.integers(1, len(lines)), label="first")
    last = data.draw(st.integers(first, len(lines)), label="last")
    span = parse_lines(text, f"{first}-{last}")

    joined = "".join(lines[i] + terminators[i] for i in range(first - 1, last - 1))
    assert selected(text, span) == joined + lines[last - 1]
    before = "".join(line + end for line, end in zip(lines[: first - 1], terminators))
    after = terminators[last - 1] + "".join(line + end for line, end in zip(lines[last:], terminators[last:]))
    assert text[: span.start] == before
    assert text[span.end :] == after


# --------------------------------------------------------------------------- --range


def test_range_within_a_line_has_exclusive_end_column():
    text = "abcdef\n"
    span = parse_range(text, "1:2-1:4")
    assert selected(text, span) == "bc"
    assert span.label == "range 1:2-1:4"


def test_range_across_lines_and_insertion_point():
    text = "ab\ncd\n"
    assert selected(text, parse_range(text, "1:3-2:2")) == "\nc"
    point = parse_range(text, "2:1-2:1")
    assert (point.start, point.end) == (3, 3)


def test_range_may_end_just_past_a_line_or_at_the_end_of_the_file():
    text = "ab\ncd\n"
    assert selected(text, parse_range(text, "1:1-1:3")) == "ab"
    end = parse_range(text, "3:1-3:1")  # after the final newline
    assert (end.start, end.end) == (len(text), len(text))


def test_range_in_a_crlf_file_counts_columns_before_the_cr():
    text = "ab\r\ncd\r\n"
    assert selected(text, parse_range(text, "1:3-2:1")) == "\r\n"
    assert_input_error("column 4 is past the end of line 1", parse_range, text, "1:4-2:1")


def test_range_columns_count_characters():
    text = "é😀x = 1\n"
    assert selected(text, parse_range(text, "1:2-1:4")) == "😀x"


@pytest.mark.parametrize(
    ("text", "spec", "message"),
    [
        ("abc\n", "1:1", r"--range expects L:C-L:C .*got '1:1'"),
        ("abc\n", "1-2", "--range expects"),
        ("abc\n", "a:b-c:d", "--range expects"),
        ("abc\n", "0:1-1:1", "line and column numbers start at 1, got 0:1"),
        ("abc\n", "1:0-1:1", "line and column numbers start at 1, got 1:0"),
        ("abc\n", "3:1-3:1", r"line 3 is past the end of the file \(1 line\)"),
        (
            "abc\n",
            "1:1-1:6",
            (
                r"column 6 is past the end of line 1, which has 3 characters "
                r"\(the last valid column is 4\)"
            ),
        ),
        ("abc\n", "1:3-1:2", "range 1:3-1:2 ends before it starts"),
    ],
)
def test_bad_ranges(text, spec, message):
    assert_input_error(message, parse_range, text, spec)


def position_of(text: str, offset: int) -> str:
    """The 1-based "L:C" of a character offset, computed independently of the module."""
    line_start = text.rfind("\n", 0, offset) + 1
    return f"{text.count(chr(10), 0, offset) + 1}:{offset - line_start + 1}"


@given(files_of_lines(), st.data())
def test_range_positions_round_trip(file, data):
    text, _, _ = file
    inside_crlf = {i + 1 for i in range(len(text) - 1) if text[i : i + 2] == "\r\n"}
    offsets = st.integers(0, len(text)).filter(lambda offset: offset not in inside_crlf)
    start = data.draw(offsets, label="start")
    end = data.draw(offsets.filter(lambda offset: offset >= start), label="end")
    span = parse_range(text, f"{position_of(text, start)}-{position_of(text, end)}")
    assert (span.start, span.end) == (start, end)


# --------------------------------------------------------------------------- --node


def test_function_with_decorators():
    span = node_span(SOURCE, "function:compute")
    text = selected(SOURCE, span)
    assert text.startswith('@functools.cache\n@register("área")\ndef compute(a, b):')
    assert text.endswith("    return total")
    assert SOURCE[span.end] == "\n"
    assert span.label == "function compute"


def test_method_is_line_shaped():
    span = node_span(SOURCE, "function:Shape.area")
    assert selected(SOURCE, span) == "    def area(self):\n        return 0.0"
    assert span.label == "function Shape.area"


def test_decorated_method_with_body_on_the_def_line():
    span = node_span(SOURCE, "function:name")
    assert selected(SOURCE, span) == '    @property\n    def name(self): return "círculo"'


def test_class_whole():
    text = selected(SOURCE, node_span(SOURCE, "class:Shape"))
    assert text.startswith('class Shape:\n    """A shape."""')
    assert text.endswith("        return inner()")


def test_body_of_function_takes_comment_lines_above_it_but_not_the_header_comment():
    span = node_span(SOURCE, "body:compute")
    assert selected(SOURCE, span) == (
        "    # leading comment\n"
        '    """Suma — ∑ of a and b."""\n'
        "    total = a + b\n"
        "    if total > 10: total = 10\n"
        "    return total"
    )
    assert span.label == "body of function compute"


def test_body_of_class():
    text = selected(SOURCE, node_span(SOURCE, "body:Circle"))
    assert text.startswith("    def area(self):\n        return math.pi")
    assert text.endswith('return "círculo"')


def test_body_on_the_same_line_is_just_the_node():
    assert selected(SOURCE, node_span(SOURCE, "body:name")) == 'return "círculo"'


def test_nested_function_by_plain_and_dotted_name():
    plain = node_span(SOURCE, "body:inner")
    assert selected(SOURCE, plain) == "            return 1"
    assert node_span(SOURCE, "body:helper.inner") == plain
    assert node_span(SOURCE, "body:Shape.helper.inner") == plain
    assert plain.label == "body of function Shape.helper.inner"


def test_docstrings():
    assert selected(SOURCE, node_span(SOURCE, "docstring:compute")) == '"""Suma — ∑ of a and b."""'
    span = node_span(SOURCE, "docstring:Shape")
    assert selected(SOURCE, span) == '"""A shape."""'
    assert span.label == "docstring of class Shape"


def test_missing_docstring_is_an_error():
    assert_input_error(
        r"function helper \(line 8\) has no docstring", node_span, SOURCE, "docstring:helper@8"
    )
    text = 'def f():\n    x = f"not {a} docstring"\n    return b"x"\n'
    assert_input_error("has no docstring", node_span, text, "docstring:f")
    assert_input_error("has no docstring", node_span, 'def g():\n    b"bytes"\n', "docstring:g")


def test_ambiguous_name_lists_candidates_and_how_to_pick_each():
    with pytest.raises(InputError) as error:
        node_span(SOURCE, "function:helper")
    message = str(error.value)
    assert "'helper' matches 2 definitions" in message
    assert "function helper (line 8)" in message
    assert "function Shape.helper (line 28)" in message
    assert "helper@8 or Shape.helper" in message


def test_name_at_line_picks_one_of_several():
    assert selected(SOURCE, node_span(SOURCE, "function:helper@8")).startswith("def helper(x):")
    decorated = node_span(SOURCE, "function:compute@12")  # a decorator line counts too
    assert decorated == node_span(SOURCE, "function:compute")
    assert_input_error(
        r"no function 'helper' starts on line 9; 'helper' is defined on line\(s\) 8, 28",
        node_span,
        SOURCE,
        "function:helper@9",
    )


def test_same_qualified_name_twice_suggests_name_at_line():
    text = "class C:\n    @property\n    def x(self): ...\n    @x.setter\n    def x(self, v): ...\n"
    assert_input_error(r"pick one with x@3 or x@5", node_span, text, "body:C.x")
    assert selected(text, node_span(text, "body:x@5")) == "..."


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("function:Circle", r"no function named 'Circle'.*class Circle on line 35.*class:Circle"),
        ("class:compute", r"no class named 'compute'.*function compute.*function:compute"),
        ("function:helpr", r"no function named 'helpr' in the file; did you mean 'helper'"),
        ("body:Circle.perimeter", "no function or class named 'Circle.perimeter'"),
        ("function:Circle.inner", "no function named 'Circle.inner'"),
        ("function:not-a-name", "'not-a-name' is not a Python name or dotted name"),
        ("function:Shape.", "is not a Python name"),
        ("function:helper@x", "NAME@LINE expects a 1-based line number"),
        ("function:helper@", "NAME@LINE expects a 1-based line number"),
        ("function:nothing@3", "no function named 'nothing'"),
        ("func:compute", r"unknown --node kind 'func'.*function, class, body, docstring"),
        ("compute", "unknown --node kind 'compute'"),
        ("function:", "missing its target, e.g. function:my_function"),
        ("statement:", r"missing its target, e.g. statement:12"),
        ("statement:two", "statement:LINE expects a 1-based line number, got 'two'"),
        ("statement:0", "line numbers start at 1"),
        ("statement:99", r"line 99 is past the end of the file \(40 lines\)"),
        ("statement:6", r"no statement starts on line 6 \(it is blank\)"),
        ("statement:15", r"no statement starts on line 15 \(it holds only a comment\)"),
    ],
)
def test_bad_selectors(selector, message):
    assert_input_error(message, node_span, SOURCE, selector)


def test_nothing_defined_at_all():
    assert_input_error("it defines no functions or classes", node_span, "x = 1\n", "body:f")
    assert_input_error("no function named 'f'", node_span, "", "function:f")
    assert_input_error("the file is empty", node_span, "", "statement:1")


def test_statement_simple_and_compound():
    assert selected(SOURCE, node_span(SOURCE, "statement:2")) == "import functools"
    inline_if = node_span(SOURCE, f"statement:{line_of(SOURCE, 'if total')}")
    assert selected(SOURCE, inline_if) == "    if total > 10: total = 10"
    klass = node_span(SOURCE, f"statement:{line_of(SOURCE, 'class Shape')}")
    assert selected(SOURCE, klass) == selected(SOURCE, node_span(SOURCE, "class:Shape"))
    assert klass.label == f"statement on line {line_of(SOURCE, 'class Shape')}"


def test_statement_on_a_decorator_line_is_the_whole_decorated_definition():
    decorated = node_span(SOURCE, "statement:12")
    function = node_span(SOURCE, "function:compute")
    assert (decorated.start, decorated.end) == (function.start, function.end)
    def_line = node_span(SOURCE, "statement:14")  # the def itself, without its decorators
    assert selected(SOURCE, def_line).startswith("def compute(a, b):")


def test_statement_first_of_several_on_a_line_and_continuation_lines():
    text = "a = 1; b = 2\ncall(\n    x)\nif a:\n    pass\nelse:\n    pass\n"
    assert selected(text, node_span(text, "statement:1")) == "a = 1"
    assert selected(text, node_span(text, "statement:2")) == "call(\n    x)"
    assert_input_error(
        r"no statement starts on line 3 \(it is part of the expression statement that starts "
        r"on line 2\)",
        node_span,
        text,
        "statement:3",
    )
    assert_input_error("part of the if statement that starts on line 4", node_span, text, "statement:6")


def test_nodes_in_a_crlf_file_end_before_the_crlf():
    text = "def f():\r\n    x = 1\r\n    return x\r\n"
    span = node_span(text, "body:f")
    assert selected(text, span) == "    x = 1\r\n    return x"
    assert text[span.end :] == "\r\n"


def test_file_with_syntax_errors_still_finds_existing_nodes():
    text = "def broken(:\n    return (1 +\n\n\ndef fine():\n    return 'ok'\n"
    assert selected(text, node_span(text, "body:fine")) == "    return 'ok'"
    assert selected(text, node_span(text, "function:fine")).startswith("def fine():")


def test_empty_body_at_end_of_file_is_an_insertion_point():
    text = "def f():\n"
    span = node_span(text, "body:f")
    assert span.start == span.end == len("def f():")


identifier_like = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="'\\"),
    max_size=12,
)


@given(identifier_like, identifier_like)
def test_node_offsets_are_characters_after_any_non_ascii_text(comment, literal):
    text = f"# {comment}\nvalue = '{literal}'\n\ndef target():\n    return '{literal}'\n"
    function = node_span(text, "function:target")
    assert selected(text, function) == f"def target():\n    return '{literal}'"
    assert selected(text, node_span(text, "body:target")) == f"    return '{literal}'"


# --------------------------------------------------------------------------- node_at_offset


def at(needle: str, kind: str, text: str = SOURCE) -> str | None:
    span = node_at_offset(text, text.index(needle), kind)
    return None if span is None else selected(text, span)


def test_cursor_kinds_inside_a_method():
    assert at("math.pi", "expression") == "math"
    assert at("* self", "expression") == "math.pi * self.r ** 2"
    assert at("** 2", "expression") == "self.r ** 2"
    assert at("math.pi", "statement") == "        return math.pi * self.r ** 2"
    assert at("math.pi", "body") == "        return math.pi * self.r ** 2"
    assert at("math.pi", "function") == "    def area(self):\n        return math.pi * self.r ** 2"
    assert at("math.pi", "class").startswith("class Circle(Shape):")


def test_cursor_function_and_class_include_decorators():
    assert at("@register", "function").startswith("@functools.cache\n")
    assert at('"círculo"', "function").startswith("    @property\n")
    assert at('"círculo"', "body") == 'return "círculo"'


def test_cursor_innermost_of_nested_definitions():
    assert at("return 1", "function").startswith("        def inner():")
    assert at("return 1", "body") == "            return 1"
    assert at("return 1", "class").startswith("class Shape:")


def test_cursor_in_indentation_and_just_after_a_node():
    text = "def f():\n    x = 1\n    y = 2\n"
    indent = node_at_offset(text, text.index("    y"), "statement")
    assert selected(text, indent) == "    y = 2"
    end_of_line = node_at_offset(text, text.index("1\n") + 1, "statement")
    assert selected(text, end_of_line) == "    x = 1"
    assert selected(text, node_at_offset(text, text.index("1\n") + 1, "expression")) == "1"


def test_cursor_labels():
    assert node_at_offset(SOURCE, SOURCE.index("return 0.0"), "body").label == ("body of function Shape.area")
    assert node_at_offset(SOURCE, SOURCE.index("return 0.0"), "function").label == ("function Shape.area")
    line = line_of(SOURCE, "return 0.0")
    assert node_at_offset(SOURCE, SOURCE.index("0.0"), "expression").label == (f"expression on line {line}")


def test_cursor_with_nothing_of_that_kind():
    assert at("import math", "function") is None
    assert at("import math", "class") is None
    assert at("import math", "expression") is None
    assert at("def compute", "expression") is None  # the keyword
    assert at("compute(a", "expression") is None  # a def's own name is not an expression
    assert node_at_offset("", 0, "statement") is None


def test_cursor_in_the_leading_comment_of_a_body():
    assert at("# leading", "body").startswith("    # leading comment\n")


@pytest.mark.parametrize("kind", CURSOR_KINDS)
def test_cursor_span_always_contains_the_offset(kind):
    for offset in range(0, len(SOURCE), 7):
        span = node_at_offset(SOURCE, offset, kind)
        assert span is None or span.start <= offset <= span.end


def test_bad_cursor_requests():
    assert_input_error("unknown node kind 'method'", node_at_offset, SOURCE, 0, "method")
    assert_input_error(
        rf"offset {len(SOURCE) + 1} is outside the file \(0-{len(SOURCE)}\)",
        node_at_offset,
        SOURCE,
        len(SOURCE) + 1,
        "statement",
    )
    assert_input_error("offset -1 is outside the file", node_at_offset, SOURCE, -1, "statement")


# --------------------------------------------------------------------------- validate_spans


def test_validate_sorts_and_allows_touching_spans():
    text = "abcdefghij"
    spans = [Span(5, 8, "b"), Span(0, 5, "a"), Span(8, 8, "c"), Span(10, 10, "d")]
    assert validate_spans(text, spans) == [spans[1], spans[0], spans[2], spans[3]]
    assert validate_spans(text, [Span(3, 3), Span(3, 6)]) == [Span(3, 3), Span(3, 6)]
    assert validate_spans(text, []) == []


@pytest.mark.parametrize(
    ("text", "spans", "message"),
    [
        ("", [Span(0, 0)], "the file is empty"),
        ("abc", [Span(-1, 2)], r"span characters -1-2 reaches outside the file"),
        (
            "abc",
            [Span(1, 4, "lines 1-2")],
            r"lines 1-2 \(characters 1-4\) reaches outside the file, which has 3 characters",
        ),
        ("abc", [Span(2, 1, "x")], r"x \(characters 2-1\) ends before it starts"),
        (
            "abcdef",
            [Span(0, 3, "first"), Span(2, 5, "second")],
            r"first \(characters 0-3\) overlaps second \(characters 2-5\)",
        ),
        ("abcdef", [Span(0, 6, "outer"), Span(2, 3, "inner")], "outer .* overlaps inner"),
        ("abcdef", [Span(2, 2, "p"), Span(2, 2, "q")], "p .* overlaps q"),
        ("abcdef", [Span(1, 4, "big"), Span(2, 2, "point")], "big .* overlaps point"),
        (
            "a\r\nb",
            [Span(0, 2, "x")],
            r"x \(characters 0-2\) splits the line terminator \\r\\n at offset 2",
        ),
        ("a\r\nb", [Span(2, 4)], "splits the line terminator"),
        ("a\r\nb", [Span(2, 2)], "splits the line terminator"),
    ],
)
def test_invalid_spans(text, spans, message):
    assert_input_error(message, validate_spans, text, spans)


def conflict(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two in-range spans clash: a shared character, a point strictly inside a span,
    or the same insertion point twice. Spans that only touch do not clash."""
    (a_start, a_end), (b_start, b_end) = a, b
    if a_start == a_end and b_start == b_end:
        return a_start == b_start
    if a_start == a_end:
        return b_start < a_start < b_end
    if b_start == b_end:
        return a_start < b_start < a_end
    return a_start < b_end and b_start < a_end


@given(
    st.text(st.sampled_from("ab\r\n"), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(-1, 13), st.integers(-1, 13)), max_size=4),
)
def test_validate_agrees_with_a_brute_force_model(text, pairs):
    valid = (
        all(0 <= start <= end <= len(text) for start, end in pairs)
        and not any(conflict(a, b) for i, a in enumerate(pairs) for b in pairs[i + 1 :])
        and not any(
            offset > 0 and text[offset - 1 : offset + 1] == "\r\n" for pair in pairs for offset in pair
        )
    )
    spans = [Span(start, end) for start, end in pairs]
    if valid:
        result = validate_spans(text, spans)
        assert [(span.start, span.end) for span in result] == sorted(pairs)
    else:
        with pytest.raises(InputError):
            validate_spans(text, spans)


def test_spans_from_the_parsers_validate_together():
    spans = [
        node_span(SOURCE, "body:Circle.area"),
        parse_lines(SOURCE, "2-3"),
        node_span(SOURCE, "docstring:Shape"),
        parse_range(SOURCE, "5:1-5:1"),
    ]
    ordered = validate_spans(SOURCE, spans)
    assert [span.label for span in ordered] == [
        "lines 2-3",
        "range 5:1-5:1",
        "docstring of class Shape",
        "body of function Circle.area",
    ]
    assert all(re.fullmatch(r"[^\r]*", selected(SOURCE, span)) for span in ordered)


def _every_candidate(data, root, kind, target):
    """The plain walk over every child that infill.text.spans._candidates_around shortcuts."""
    from infill.text.spans import _cursor_range, _line_shaped_start

    stack = [root]
    while stack:
        node = stack.pop()
        found = _cursor_range(data, node, kind)
        if found is not None and found[0] <= target <= found[1]:
            yield found[0], found[1], node.id
        stack.extend(
            c
            for c in reversed(node.children)
            if _line_shaped_start(data, c.start_byte) <= target <= c.end_byte
        )


@pytest.mark.parametrize(
    "source",
    ["", "x", "\n\n", "def f(:\n  x = (1,\n",
     "@d\nclass X:\n\n    def f(self): return (1,\n   2)\n  \ns = '🐍é'\n",
     "class A:\n    def g(self):\n        pass\n    \nif x:\n\tpass\n"],
)  # fmt: skip
def test_the_nodes_around_an_offset_are_found_as_by_walking_every_child(source):
    from infill.text.spans import CURSOR_KINDS, _candidates_around, parse_tree

    data, root = parse_tree(source)
    for target in range(len(data) + 1):
        for kind in CURSOR_KINDS:
            found = [(s, e, node.id) for s, e, node in _candidates_around(data, root, kind, target)]
            assert found == list(_every_candidate(data, root, kind, target)), (target, kind)
