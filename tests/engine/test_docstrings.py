"""Tests for infill.docstrings (document mode): find definitions without a docstring, fill one in."""

from __future__ import annotations

import ast
import codecs
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plans import plan_canvases

from infill.modes.docstrings import DOCSTRING_BUDGET, add_docstrings, docstring_literal, insertion_layout
from infill.options import InfillOptions, SamplerConfig
from infill.text.docstring_sites import missing_docstring_at, missing_docstrings
from infill.text.document import document_from_bytes
from infill.text.edits import apply_edits
from infill.text.spans import line_span, node_span

SOURCE = '''\
import functools


def documented(a):
    """Already here."""
    return a


def area(width, height):  # rectangles only
    # the product
    return width * height


class Shape:
    sides = 0

    @functools.cache
    def perimeter(self, *,
                  scale=1) -> float:
        def helper(x):
            return x * scale
        return helper(self.sides)

    async def fetch(self):
        return None


def one_liner(x): return x + 1
class Empty(Exception): pass
'''

EXPECTED_SITES = [
    ("function area", 9, "    ", False),
    ("class Shape", 14, "    ", False),
    ("function Shape.perimeter", 18, "        ", False),
    ("function Shape.perimeter.helper", 20, "            ", False),
    ("function Shape.fetch", 24, "        ", False),
    ("function one_liner", 28, "    ", True),
    ("class Empty", 29, "    ", True),
]
LEAKS = ("<mask>", "<null>", "<pad>", "<unk>", "<eos>")


def docstrings_of(text: str) -> dict[str, str | None]:
    """Every function and class of `text` (which must parse) by name, with its docstring."""
    found = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = ast.get_docstring(node, clean=False)
    return found


def oracle_writing(make_oracle, oracle_for_canvases, document, sites, answers, options=None):
    """An oracle that writes answers[i] (model text, "\\n" line ends) for sites[i]."""
    options = options or InfillOptions()
    probe = make_oracle(None)
    layout, spans = insertion_layout(document, sites)
    by_span = dict(zip(spans, answers, strict=True))
    options = dataclasses.replace(options, budget=options.budget or DOCSTRING_BUDGET)
    plan = plan_canvases(probe, layout.text, spans, options)
    return oracle_for_canvases([(c, [probe.encode(by_span[s.span]) for s in c.slots]) for c in plan])


def fill(make_oracle, oracle_for_canvases, text: str, answers, data: bytes | None = None, options=None):
    document = document_from_bytes(data if data is not None else text.encode())
    sites = missing_docstrings(document.text)
    assert len(sites) == len(answers)
    oracle = oracle_writing(make_oracle, oracle_for_canvases, document, sites, answers, options)
    return document, add_docstrings(oracle, document, sites, options)


# --------------------------------------------------------------------------- finding sites


def test_every_function_and_class_without_a_docstring_is_found():
    sites = missing_docstrings(SOURCE)

    assert [(s.name, s.line, s.indent, s.one_line) for s in sites] == EXPECTED_SITES
    area = sites[0]
    assert area.start == area.end == SOURCE.index("  # rectangles only\n") + len("  # rectangles only")
    perimeter = sites[2]  # its header spans two lines: the site is after the second
    assert SOURCE[: perimeter.start].endswith("scale=1) -> float:")
    one_liner = sites[5]
    assert SOURCE[one_liner.start : one_liner.end] == " "  # between the ':' and the body


def test_spans_select_the_definitions_whose_header_they_touch():
    by_class = missing_docstrings(SOURCE, within=[node_span(SOURCE, "class:Shape")])
    by_line = missing_docstrings(SOURCE, within=[line_span(SOURCE, 19, 19), line_span(SOURCE, 28, 29)])
    by_decorator = missing_docstrings(SOURCE, within=[line_span(SOURCE, 17, 17)])
    by_body_line = missing_docstrings(SOURCE, within=[line_span(SOURCE, 11, 11)])

    assert [s.name for s in by_class] == [name for name, *_ in EXPECTED_SITES[1:5]]
    assert [s.name for s in by_line] == ["function Shape.perimeter", "function one_liner", "class Empty"]
    assert [s.name for s in by_decorator] == ["function Shape.perimeter"]
    assert by_body_line == []


def test_the_site_at_a_cursor_is_the_innermost_definition():
    at = SOURCE.index("x * scale")
    assert missing_docstring_at(SOURCE, at).name == "function Shape.perimeter.helper"
    assert missing_docstring_at(SOURCE, SOURCE.index("sides = 0")).name == "class Shape"
    assert missing_docstring_at(SOURCE, SOURCE.index("return a")) is None  # it has one
    assert missing_docstring_at(SOURCE, SOURCE.index("import functools")) is None


def test_tab_indentation_is_kept():
    text = "class A:\n\tdef f(self):\n\t\treturn 1\n\tdef g(self): return 2\n"
    sites = missing_docstrings(text)
    assert [(s.name, s.indent) for s in sites] == [
        ("class A", "\t"),
        ("function A.f", "\t\t"),
        ("function A.g", "\t\t"),
    ]


# --------------------------------------------------------------------------- filling them (oracle)


def test_the_models_text_becomes_a_docstring_after_the_header(make_oracle, oracle_for_canvases):
    answers = [f"Docstring {i}." for i in range(len(EXPECTED_SITES))]

    document, result = fill(make_oracle, oracle_for_canvases, SOURCE, answers)

    new = apply_edits(SOURCE, result.edits)
    found = docstrings_of(new)
    for index, (name, *_rest) in enumerate(EXPECTED_SITES):
        assert found[name.split(".")[-1].split()[-1]] == f"Docstring {index}."
    assert found["documented"] == "Already here."
    area = result.fills[0]
    assert area.docstring == '"""Docstring 0."""' and area.reason is None
    assert area.edit.start == area.edit.end == area.site.start
    assert area.edit.new_text == '\n    """Docstring 0."""'
    lines = new.splitlines()
    assert lines[8:11] == [
        "def area(width, height):  # rectangles only",
        '    """Docstring 0."""',
        "    # the product",
    ]
    assert "def one_liner(x):" in lines and '    """Docstring 5."""' in lines and "    return x + 1" in lines
    for f in result.fills:  # each edit stays at its site: the rest of the file is untouched
        assert f.site.start <= f.edit.start <= f.edit.end <= f.site.end
    assert new.count('"""') == SOURCE.count('"""') + 2 * len(EXPECTED_SITES)
    assert result.stats.forward_passes >= 1


@pytest.mark.parametrize(
    ("written", "docstring"),
    [
        ('Stop here.""" + secret()', "Stop here."),
        ('Say "hi"', 'Say "hi" '),
        ("Match a\\d+ digit", "Match a\\d+ digit"),
        ("Ends with a backslash\\", "Ends with a backslash"),
        ("  Summary.\n\n      Details, indented oddly.\n        More.\n", None),
        ("Tab\there, bell\x07 and form feed\x0c gone.", "Tab\there, bell and form feed gone."),
    ],
    ids=["closing-quotes", "trailing-quote", "backslash-raw", "trailing-backslash", "multi-line", "controls"],
)
def test_whatever_the_model_writes_the_file_still_parses(
    make_oracle, oracle_for_canvases, written, docstring
):
    text = "def f(x):\n    return x\n"

    _, result = fill(make_oracle, oracle_for_canvases, text, [written], options=InfillOptions(budget=64))

    new = apply_edits(text, result.edits)
    function = ast.parse(new).body[0]
    assert ast.unparse(function.body[-1]) == "return x"
    if docstring is not None:
        assert ast.get_docstring(function, clean=False) == docstring
    else:  # PEP 257 layout: summary on the quotes' line, the rest at the body's indentation
        assert new == (
            'def f(x):\n    """Summary.\n\n    Details, indented oddly.\n      More.\n    """\n    return x\n'
        )


def test_no_text_means_no_edit_and_a_reason(make_oracle, oracle_for_canvases):
    text = "def f(x):\n    return x\n\n\ndef g(y):\n    return y\n"

    _, result = fill(make_oracle, oracle_for_canvases, text, ["", "  \n  "])

    assert result.edits == []
    assert [f.reason for f in result.fills] == ["the model wrote no usable docstring text"] * 2


def test_tabs_crlf_and_bom_are_kept(make_oracle, oracle_for_canvases):
    text = "class A:\r\n\tdef f(self):\r\n\t\treturn 1\r\n\tdef g(self): return 2\r\n"
    data = codecs.BOM_UTF8 + text.encode()

    document, result = fill(make_oracle, oracle_for_canvases, text, ["An A.", "F.\nLonger.", "G."], data)

    new = apply_edits(text, result.edits)
    assert new == (
        'class A:\r\n\t"""An A."""\r\n'
        '\tdef f(self):\r\n\t\t"""F.\r\n\t\tLonger.\r\n\t\t"""\r\n\t\treturn 1\r\n'
        '\tdef g(self):\r\n\t\t"""G."""\r\n\t\treturn 2\r\n'
    )
    assert new.count("\n") == new.count("\r\n")
    assert document.encode(new).startswith(codecs.BOM_UTF8)
    assert docstrings_of(new) == {"A": "An A.", "f": "F.\n\t\tLonger.\n\t\t", "g": "G."}


TRICKY = st.text(
    alphabet=st.sampled_from(['"', "'", "\\", "\n", "\r", "\t", " ", "a", "\x00", "\u00e9", "{"])
)


@settings(max_examples=400, deadline=None)
@given(written=st.one_of(st.text(), TRICKY), indent=st.sampled_from(["    ", "\t", "        "]))
def test_any_text_makes_a_valid_docstring_or_none(written, indent):
    literal = docstring_literal(written, indent)
    if literal is None:
        return
    program = f"def f():\n{indent}{literal}\n{indent}return 1\n"
    function = ast.parse(program).body[0]
    assert isinstance(ast.get_docstring(function), str)
    assert len(function.body) == 2


# --------------------------------------------------------------------- the real (tiny) model


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("indent", ["    ", "\t"], ids=["spaces", "tabs"])
def test_the_tiny_random_model_documents_a_whole_file(tiny_backend, newline, indent):
    text = SOURCE.replace("    ", indent).replace("\n", newline)
    document = document_from_bytes(text.encode())
    sites = missing_docstrings(text)
    assert len(sites) == len(EXPECTED_SITES)
    options = InfillOptions(SamplerConfig(steps=6, temperature=1.5, seed=3))  # a random model: nulls

    result = add_docstrings(tiny_backend, document, sites, options)

    new = apply_edits(text, result.edits)
    found = docstrings_of(new)  # parses
    written = [f for f in result.fills if f.edit is not None]
    assert written, "at this temperature the random model writes something"
    for f in result.fills:
        assert (f.edit is None) == (f.reason is not None) == (f.docstring is None)
    for f in written:
        assert found[f.site.name.split(".")[-1].split()[-1]] is not None
        assert f.edit.start >= f.site.start and f.edit.end <= f.site.end
        assert f.edit.new_text.startswith(newline + f.site.indent)
        for leak in LEAKS:
            assert leak not in f.edit.new_text
    assert new.count("\n") == new.count(newline)
    assert result.stats.forward_passes >= 1
