"""infill.text.languages: the table, detection, each language's syntax checks and node selectors."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from language_samples import SAMPLES
from plans import plan_canvases

from infill.errors import InputError
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import Document, document_from_bytes
from infill.text.languages import (
    JAVASCRIPT,
    LANGUAGES,
    PYTHON,
    TEXT,
    TSX,
    TYPESCRIPT,
    Language,
    by_path,
    detect,
    grammar,
    named,
)
from infill.text.spans import line_span, node_at_offset, node_span
from infill.text.syntax import file_problems, has_syntax_error, syntax_problems

BROKEN = {  # one statement cut short in each language
    "python": "def f(x):\n    return (x +\n",
    "typescript": "function f(x: number) {\n  return (x +;\n}\n",
    "javascript": "function f(x) {\n  return (x +;\n}\n",
    "tsx": "function F() {\n  return <div>;\n}\n",
    "go": "package p\n\nfunc f(x int) int {\n\treturn (x +\n}\n",
    "rust": "fn f(x: i32) -> i32 {\n    (x +\n}\n",
    "java": "class A {\n    int f(int x) {\n        return (x +;\n    }\n}\n",
    "c": "int f(int x) {\n    return (x +;\n}\n",
    "cpp": "int f(int x) {\n    return (x +;\n}\n",
}


def test_the_table_has_each_language_once_and_python_first():
    names = [language.name for language in LANGUAGES]
    assert names == ["python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp"]
    extensions = [ext for language in (*LANGUAGES, TEXT) for ext in language.extensions]
    ids = [lid for language in (*LANGUAGES, TEXT) for lid in language.language_ids]
    assert len(extensions) == len(set(extensions)) and len(ids) == len(set(ids))
    assert set(SAMPLES) == set(names) == set(BROKEN)


@pytest.mark.parametrize("language", LANGUAGES, ids=lambda language: language.name)
def test_each_pinned_grammar_loads_and_knows_the_row_s_node_kinds(language: Language):
    table = grammar(language)
    assert 13 <= table.abi_version <= 15
    kinds = language.functions | language.classes | language.wrappers | language.blocks
    for kind in kinds | language.declarators | language.function_values:
        assert table.id_for_node_kind(kind, True), f"{language.name}: the grammar has no {kind!r} nodes"


@pytest.mark.parametrize("name", list(SAMPLES))
def test_a_valid_file_has_no_problems_in_its_own_language_and_a_broken_one_has(name):
    language = named(name)
    _, source, _ = SAMPLES[name]
    assert file_problems(source, language) == [] and not has_syntax_error(source, language)
    assert syntax_problems(BROKEN[name], language) and file_problems(BROKEN[name], language)
    if language is not PYTHON:  # what reading it as Python did: problems everywhere
        assert file_problems(source, PYTHON)


@pytest.mark.parametrize(
    ("name", "path", "first_line", "expected"),
    [
        (None, "a/app.ts", "", "typescript"),
        (None, "App.TSX", "", "tsx"),
        (None, "main.go", "", "go"),
        (None, "lib.rs", "", "rust"),
        (None, "Main.java", "", "java"),
        (None, "x.h", "", "c"),
        (None, "x.hpp", "", "cpp"),
        (None, "index.mjs", "", "javascript"),
        (None, "esm.mts", "", "typescript"),
        (None, "common.CTS", "", "typescript"),
        (None, "vec.h++", "", "cpp"),
        (None, "tool", "#!/usr/bin/env python3", "python"),
        (None, "tool", "#!/usr/bin/env node", "javascript"),
        ("typescriptreact", "x.py", "", "tsx"),  # the languageId wins over the extension
        ("Go", "x.txt", "", "go"),
        ("javascriptreact", None, "", "javascript"),
        ("c++", None, "", "cpp"),
        ("plaintext", "x.py", "", "text"),
    ],
)
def test_the_language_comes_from_its_name_else_the_extension(name, path, first_line, expected):
    detected = detect(name, path, first_line)
    assert detected.language.name == expected and detected.notice is None


def test_an_unknown_language_is_text_and_says_so_once():
    for detected in (detect("cobol", "x.cob"), detect(None, "notes.cob"), detect(None, "Makefile")):
        assert detected.language is TEXT
        assert "filled as text" in detected.notice and "known: python, javascript" in detected.notice
    assert by_path("x.cob") is None and named("cobol") is None


def test_a_grammar_that_fails_to_load_is_a_clear_error_and_text():
    missing = ("tree_sitter_nonexistent", "language")
    broken = dataclasses.replace(TYPESCRIPT, name="ts-broken", grammar=missing)
    with pytest.raises(Exception, match=r"TypeScript grammar \(tree-sitter-nonexistent\) failed to load"):
        grammar(broken)
    text = SAMPLES["typescript"][1]
    with pytest.raises(InputError, match="failed to load"):
        node_span(text, "function:total", broken)
    with pytest.raises(InputError, match="failed to load"):
        syntax_problems(text, broken)


def test_text_has_lines_and_ranges_but_no_nodes_or_syntax():
    text = SAMPLES["go"][1]
    assert file_problems("((((\n", TEXT) == [] and not has_syntax_error("((((", TEXT)
    assert node_at_offset(text, 5, "function", TEXT) is None
    with pytest.raises(InputError, match="--node needs a language with a grammar"):
        node_span(text, "function:Distance", TEXT)
    span = line_span(text, 3, 3)
    assert text[span.start : span.end] == 'import "math"'


@pytest.mark.parametrize(
    ("name", "selector", "expected"),
    [(name, selector, text) for name, (_, _, chosen) in SAMPLES.items() for selector, text in chosen.items()],
)
def test_node_selectors_resolve_to_the_node_s_exact_text(name, selector, expected):
    _, source, _ = SAMPLES[name]
    span = node_span(source, selector, named(name))
    assert source[span.start : span.end] == expected


@pytest.mark.parametrize("name", list(SAMPLES))
def test_the_node_at_the_cursor_is_the_one_the_selector_names(name):
    _, source, chosen = SAMPLES[name]
    language = named(name)
    for selector, expected in chosen.items():
        kind = selector.split(":")[0]
        if kind == "statement":
            continue
        inside = source.index(expected) + len(expected) // 2
        found = node_at_offset(source, inside, kind, language)
        assert found is not None and source[found.start : found.end] in (expected, found.label and expected)


BOUND_JS = """\
export const load = async function (path) {
  const text = await read(path);
  return text.trim();
};

const twice = (x) => x * 2;

let first = (x) => x, second = function* () {};

function outer() {
  const helper = () => {
    return 1;
  };
  return helper();
}
"""


@pytest.mark.parametrize("language", [JAVASCRIPT, TYPESCRIPT, TSX], ids=lambda language: language.name)
@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("function:load", BOUND_JS[: BOUND_JS.index("\n\nconst twice")]),  # export and const included
        ("body:load", "  const text = await read(path);\n  return text.trim();"),
        ("function:twice", "const twice = (x) => x * 2;"),
        ("body:twice", "x * 2"),  # an expression body
        ("function:first", "first = (x) => x"),  # one of several in a `let`: the declarator alone
        ("function:second", "second = function* () {}"),
        ("function:outer.helper", "  const helper = () => {\n    return 1;\n  };"),
        ("body:helper", "    return 1;"),
        ("statement:6", "const twice = (x) => x * 2;"),
    ],
)
def test_functions_bound_to_a_name_are_function_nodes(language, selector, expected):
    span = node_span(BOUND_JS, selector, language)
    assert BOUND_JS[span.start : span.end] == expected


def test_the_function_at_the_cursor_in_a_bound_function():
    found = node_at_offset(BOUND_JS, BOUND_JS.index("trim"), "function", JAVASCRIPT)
    assert found is not None and found.label == "function load"
    assert BOUND_JS[found.start : found.end] == BOUND_JS[: BOUND_JS.index("\n\nconst twice")]
    found = node_at_offset(BOUND_JS, BOUND_JS.index("return 1"), "function", JAVASCRIPT)
    assert found is not None and found.label == "function outer.helper"
    with pytest.raises(InputError, match="no function named 'count'"):
        node_span("const count = 3;\n", "function:count", JAVASCRIPT)  # a value, not a function


def test_bad_node_selectors_in_other_languages_say_what_exists():
    _, source, _ = SAMPLES["go"]
    from infill.text.languages import GO

    with pytest.raises(InputError, match=r"no function named 'Norn'.*did you mean 'Norm'"):
        node_span(source, "function:Norn", GO)
    with pytest.raises(InputError, match=r"there is class Point on line 6 \(select it with class:Point\)"):
        node_span(source, "function:Point", GO)
    with pytest.raises(InputError, match="docstring:NAME is for Python"):
        node_span(source, "docstring:Norm", GO)


APP_TS = """\
interface User { name: string; age: number; }

export function greet(user: User): string {
  const label: string = `${user.name} (${user.age})`;
  return "Hello, " + label;
}
console.log(greet({ name: "Ada", age: 36 }));
"""


def fill_back(make_oracle, oracle_for_canvases, source: str, span, language: Language):
    """Fill `span` of `source` in `language` with an oracle that puts its text back."""
    document = dataclasses.replace(document_from_bytes(source.encode()), language=language)
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    answer = probe.encode(source[span.start : span.end])
    options = InfillOptions(SamplerConfig(steps=8, max_revisions=0), budget=len(answer) + 2)
    [canvas] = plan_canvases(probe, source, [span], options)
    oracle = oracle_for_canvases([(canvas, [answer])])
    return infill(oracle, document, [span], options)


def repairs(stats) -> int:
    return stats.retries + stats.token_edits + stats.fresh_fills


@pytest.mark.parametrize("name", list(SAMPLES))
def test_a_right_fill_of_a_valid_file_gets_no_syntax_repair(name, make_oracle, oracle_for_canvases):
    _, source, chosen = SAMPLES[name]
    selector = next(s for s in chosen if s.startswith("body:"))
    span = node_span(source, selector, named(name))
    result = fill_back(make_oracle, oracle_for_canvases, source, span, named(name))
    assert result.edits == [] and repairs(result.stats) == 0


def test_the_83_second_case_typescript_is_no_longer_repaired_as_python(make_oracle, oracle_for_canvases):
    """`infill app.ts --lines 4-5` spent 324 passes repairing "syntax errors" that were TypeScript
    read as Python. The same right fill: repaired as Python, left alone as TypeScript."""
    span = line_span(APP_TS, 4, 5)
    assert repairs(fill_back(make_oracle, oracle_for_canvases, APP_TS, span, PYTHON).stats) > 0
    as_typescript = fill_back(make_oracle, oracle_for_canvases, APP_TS, span, TYPESCRIPT)
    assert as_typescript.edits == [] and repairs(as_typescript.stats) == 0


def test_a_document_knows_its_language_from_its_path(tmp_path):
    from infill.text.document import load_document

    for name, (file_name, source, _) in SAMPLES.items():
        path = tmp_path / file_name
        path.write_text(source)
        assert load_document(path).language.name == name
    assert Document("x", False, "\n").language is PYTHON  # made in memory: Python, as before
