"""Documentation in each language's convention (infill.text.doc_comments): where it is missing, what
an oracle model's text becomes (exact text, parsed with the grammar), and the hook's fixed point."""

from __future__ import annotations

import dataclasses

import pytest
from plans import plan_canvases

from infill.docstrings_hook import document_to_fixed_point
from infill.modes.docstrings import DOCSTRING_BUDGET, add_docstrings, insertion_layout
from infill.options import InfillOptions
from infill.text.docstring_sites import missing_docstring_at, missing_docstrings
from infill.text.document import document_from_bytes
from infill.text.edits import apply_edits
from infill.text.languages import GO, JAVA, JAVASCRIPT, RUST, TSX, TYPESCRIPT, C, Language, named
from infill.text.syntax import has_syntax_error

TS = """\
/** Already documented. */
export function documented(): void {}

// a plain comment is not JSDoc
export function plain(x: number): number {
  return x;
}

export class Stack<T> {
  private items: T[] = [];

  push(item: T): void {
    this.items.push(item);
  }
}
"""

GO_SOURCE = """\
package stack

// Stack is documented.
type Stack struct {
\titems []int
}

func (s *Stack) Push(x int) {
\ts.items = append(s.items, x)
}

func helper() int { return 1 }

// Pop has a comment.

func Pop() {}
"""

RUST_SOURCE = """\
//! A crate.

/// Documented.
pub fn documented() {}

#[derive(Debug)]
pub struct Point {
    x: i32,
}

impl Point {
    pub fn norm(&self) -> i32 {
        self.x
    }
}
"""

JAVA_SOURCE = """\
public class Cart {
    /** Documented. */
    public int total() {
        return 0;
    }

    @Override
    public String toString() {
        return "cart";
    }
}
"""

C_SOURCE = """\
/** Documented. */
int documented(void);

typedef struct {
    int x;
} point;

static int twice(int x) {
    return 2 * x;
}
"""


def names(text: str, language: Language) -> list[str]:
    return [site.name for site in missing_docstrings(text, language=language)]


@pytest.mark.parametrize(
    ("text", "language", "expected"),
    [
        (TS, TYPESCRIPT, ["function plain", "class Stack", "function Stack.push"]),
        (GO_SOURCE, GO, ["function Stack.Push", "function Pop"]),  # exported only; a blank line detaches
        (RUST_SOURCE, RUST, ["class Point", "class Point", "function Point.norm"]),  # struct, impl, fn
        (JAVA_SOURCE, JAVA, ["class Cart", "function Cart.toString"]),
        (C_SOURCE, C, ["class ?", "function twice"]),
    ],
)
def test_missing_is_judged_by_the_language_s_convention(text, language, expected):
    assert names(text, language) == expected


def test_the_site_at_a_cursor_and_where_it_goes():
    [_, _, push] = missing_docstrings(TS, language=TYPESCRIPT)
    assert (push.start, push.indent) == (TS.index("  push"), "  ")
    inside = TS.index("this.items.push")
    assert missing_docstring_at(TS, inside, TYPESCRIPT) == push
    assert missing_docstring_at(TS, TS.index("documented()"), TYPESCRIPT) is None  # has one
    [point, _, _] = missing_docstrings(RUST_SOURCE, language=RUST)
    assert point.start == RUST_SOURCE.index("#[derive")  # above the attributes


def document_with(make_oracle, oracle_for_canvases, text: str, language: Language, answers, data=None):
    """add_docstrings with an oracle that writes answers[i] for the i-th site."""
    document = dataclasses.replace(document_from_bytes(data or text.encode()), language=language)
    sites = missing_docstrings(document.text, language=language)
    assert len(sites) == len(answers)
    probe = make_oracle(None)
    layout, spans = insertion_layout(document, sites)
    by_span = dict(zip(spans, answers, strict=True))
    options = InfillOptions(budget=DOCSTRING_BUDGET)
    plan = plan_canvases(probe, layout.text, spans, options)
    oracle = oracle_for_canvases([(c, [probe.encode(by_span[s.span]) for s in c.slots]) for c in plan])
    result = add_docstrings(oracle, document, sites, options)
    return document, result, apply_edits(document.text, result.edits)


def test_jsdoc_above_functions_classes_and_methods(make_oracle, oracle_for_canvases):
    answers = ["Returns x.", "A stack.\nLast in, first out.", "Pushes an item. */ junk"]
    _, result, after = document_with(make_oracle, oracle_for_canvases, TS, TYPESCRIPT, answers)
    assert after == TS.replace(
        "export function plain", "/** Returns x. */\nexport function plain"
    ).replace(
        "export class Stack", "/**\n * A stack.\n * Last in, first out.\n */\nexport class Stack"
    ).replace("  push(item", "  /** Pushes an item. */\n  push(item")
    assert not has_syntax_error(after, TYPESCRIPT) and len(result.edits) == 3


def test_go_doc_comments_start_with_the_name_and_keep_tabs_and_crlf(make_oracle, oracle_for_canvases):
    crlf = GO_SOURCE.replace("\n", "\r\n")
    answers = ["appends x to the stack.", "removes the top item.\nIt panics when empty."]
    _, _, after = document_with(make_oracle, oracle_for_canvases, crlf, GO, answers, crlf.encode())
    expected = GO_SOURCE.replace(
        "func (s *Stack) Push", "// Push appends x to the stack.\nfunc (s *Stack) Push"
    ).replace("\nfunc Pop()", "\n// Pop removes the top item.\n// It panics when empty.\nfunc Pop()")
    assert after == expected.replace("\n", "\r\n")
    assert not has_syntax_error(after, GO) and "\t" in after


def test_rustdoc_javadoc_and_doxygen_at_the_declaration_s_indentation(make_oracle, oracle_for_canvases):
    rust_answers = ["A point.", "", "Its norm."]  # nothing for the impl block
    _, _, rust = document_with(make_oracle, oracle_for_canvases, RUST_SOURCE, RUST, rust_answers)
    assert rust == RUST_SOURCE.replace("#[derive", "/// A point.\n#[derive").replace(
        "    pub fn norm", "    /// Its norm.\n    pub fn norm"
    )
    _, _, java = document_with(make_oracle, oracle_for_canvases, JAVA_SOURCE, JAVA, ["A cart.", "Its name."])
    assert java == JAVA_SOURCE.replace("public class", "/** A cart. */\npublic class").replace(
        "    @Override", "    /** Its name. */\n    @Override"
    )
    _, _, c = document_with(make_oracle, oracle_for_canvases, C_SOURCE, C, ["A point.", "Doubles x."])
    assert c == C_SOURCE.replace("typedef", "/** A point. */\ntypedef").replace(
        "static int", "/** Doubles x. */\nstatic int"
    )
    for text, language in ((rust, RUST), (java, JAVA), (c, C)):
        assert not has_syntax_error(text, language)


def test_no_text_means_no_edit_and_a_reason(make_oracle, oracle_for_canvases):
    # JSDoc ends at the model's own "*/": nothing before it is no text
    answers = ["", " */ tail", "\n\n"]
    _, result, after = document_with(make_oracle, oracle_for_canvases, TS, TYPESCRIPT, answers)
    assert after == TS and all(fill.reason for fill in result.fills)


# --------------------------------------------------------------------------- Rust's //! module docs

RUST_MODULE = """\
// Copyright 2024 The Inventory Authors.
// SPDX-License-Identifier: MIT

#![allow(dead_code)]

/// Counts the items.
pub fn count(items: &[u32]) -> usize {
    items.len()
}
"""


def sites_of(text: str, language: Language) -> list[tuple[str, int]]:
    return [(site.name, site.line) for site in missing_docstrings(text, language=language)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (RUST_MODULE, [("module", 4)]),  # after the licence header, before the #![attributes]
        ("use std::io;\n\npub fn f() {}\n", [("module", 1), ("function f", 3)]),
        ("#!/usr/bin/env run-cargo-script\nfn main() {}\n", [("module", 2), ("function main", 2)]),
        ("// attached to the use\nuse std::io;\n", [("module", 1)]),  # not a header: no blank line
        ("//! Documented.\n\nuse std::io;\n", []),
        ("// Licence.\n\n/*! Documented. */\nuse std::io;\n", []),
        ('#![doc = include_str!("../README.md")]\nuse std::io;\n', []),
        ("#![allow(unused)]\n//! Documented after an attribute.\nuse std::io;\n", []),
        ('#![ doc = "Documented." ]\nuse std::io;\n', []),
        ("// ! a plain comment\n\nuse std::io;\n", [("module", 3)]),
        ("", []),
        ("// only a comment\n", []),
    ],
)
def test_a_rust_file_without_inner_docs_is_a_module_site_at_its_top(text, expected):
    assert sites_of(text, RUST) == expected


def test_the_module_site_at_a_cursor_outside_every_declaration():
    text = RUST_MODULE.replace("/// Counts the items.\n", "")
    [module, count] = missing_docstrings(text, language=RUST)
    assert missing_docstring_at(text, text.index("allow"), RUST) == module
    assert missing_docstring_at(text, text.index("items.len"), RUST) == count  # the innermost
    assert missing_docstring_at(RUST_SOURCE, 2, RUST) is None  # has its //!


def test_rust_module_docs_go_first_with_a_blank_line_after(make_oracle, oracle_for_canvases):
    crlf = RUST_MODULE.replace("\n", "\r\n")
    answers = ["Inventory helpers.\nCounts what is in stock."]
    _, _, after = document_with(make_oracle, oracle_for_canvases, crlf, RUST, answers, crlf.encode())
    expected = RUST_MODULE.replace(
        "#![allow", "//! Inventory helpers.\n//! Counts what is in stock.\n\n#![allow"
    )
    assert after == expected.replace("\n", "\r\n")
    assert not has_syntax_error(after, RUST) and missing_docstrings(after, language=RUST) == []
    # the module's comment and the first item's at the same place: module first, then the item's
    text = "pub fn area(r: f64) -> f64 {\n    r * r\n}\n"
    answers = ["Geometry.", "The area of a square."]
    _, _, after = document_with(make_oracle, oracle_for_canvases, text, RUST, answers)
    assert after == "//! Geometry.\n\n/// The area of a square.\n" + text
    assert not has_syntax_error(after, RUST) and missing_docstrings(after, language=RUST) == []


# --------------------------------------------------------------------------- functions bound to a name

BOUND_TS = """\
/** Documented. */
export const documented = (): void => {};

export const load = async function (path: string): Promise<string> {
  const read = (p: string) => p;
  return read(path);
};

const twice = (x: number): number => x * 2;

let first = (x: number) => x, second = (x: number) => x;

namespace Shapes {
  export const area = (r: number): number => r * r;
}
"""


def test_functions_bound_to_a_name_are_jsdoc_sites_above_their_statement():
    sites = missing_docstrings(BOUND_TS, language=TYPESCRIPT)
    # not the local helper `read`, nor the two functions of one `let`
    assert [site.name for site in sites] == ["function load", "function twice", "function area"]
    load, twice, area = sites
    assert load.start == BOUND_TS.index("export const load") and load.indent == ""
    assert twice.start == BOUND_TS.index("const twice")
    assert area.start == BOUND_TS.index("  export const area") and area.indent == "  "
    assert missing_docstring_at(BOUND_TS, BOUND_TS.index("read(path)"), TYPESCRIPT) == load
    assert missing_docstring_at(BOUND_TS, BOUND_TS.index("{};"), TYPESCRIPT) is None  # documented
    for language in (JAVASCRIPT, TSX):
        text = "export const f = (a) => a;\nvar g = function* () {};\n"
        assert sites_of(text, language) == [("function f", 1), ("function g", 2)]


def test_jsdoc_above_bound_functions_exact_text(make_oracle, oracle_for_canvases):
    answers = ["Reads the file at path.", "Doubles x.", "The area of a circle of radius r,\nroughly."]
    _, result, after = document_with(make_oracle, oracle_for_canvases, BOUND_TS, TYPESCRIPT, answers)
    assert after == BOUND_TS.replace(
        "export const load", "/** Reads the file at path. */\nexport const load"
    ).replace("const twice", "/** Doubles x. */\nconst twice").replace(
        "  export const area",
        "  /**\n   * The area of a circle of radius r,\n   * roughly.\n   */\n  export const area",
    )
    assert not has_syntax_error(after, TYPESCRIPT) and len(result.edits) == 3
    assert missing_docstrings(after, language=TYPESCRIPT) == []


# --------------------------------------------------------------------------- the hook's fixed point


def test_one_run_reaches_the_fixed_point_a_second_run_changes_nothing(make_oracle, oracle_for_canvases):
    """The reported case: the model wrote nothing usable for the class while the function lacked
    its docstring, and wrote one once the function had it; the second run added it. Now the first
    run goes on to that canvas itself, and the second run finds nothing to do."""
    text = "def area(r):\n    return r * r\n\n\nclass Shape:\n    pass\n"
    document = document_from_bytes(text.encode())
    probe = make_oracle(None)
    options = InfillOptions(budget=DOCSTRING_BUDGET)
    canvases = []
    sites = missing_docstrings(text)
    layout, spans = insertion_layout(document, sites)
    [first] = plan_canvases(probe, layout.text, spans, options)
    canvases.append((first, [probe.encode("Area of a square."), []]))  # nothing for the class
    after_first = text.replace("return r * r", '"""Area of a square."""\n    return r * r')
    second_sites = missing_docstrings(after_first)
    layout, spans = insertion_layout(document_from_bytes(after_first.encode()), second_sites)
    [second] = plan_canvases(probe, layout.text, spans, options)
    canvases.append((second, [probe.encode("A shape.")]))
    oracle = oracle_for_canvases(canvases)

    done = document_to_fixed_point(oracle, document)
    assert [fill.site.name for fill in done.added] == ["function area", "class Shape"] and not done.unfilled
    again = document_to_fixed_point(oracle, document_from_bytes(done.text.encode()))
    assert again.text == done.text and again.added == []


def test_a_site_the_model_cannot_fill_is_reported_and_not_retried(make_oracle, oracle_for_canvases):
    text = "def area(r):\n    return r * r\n"
    document = document_from_bytes(text.encode())
    probe = make_oracle(None)
    layout, spans = insertion_layout(document, missing_docstrings(text))
    [canvas] = plan_canvases(probe, layout.text, spans, InfillOptions(budget=DOCSTRING_BUDGET))
    oracle = oracle_for_canvases([(canvas, [[]])])
    done = document_to_fixed_point(oracle, document)
    assert done.text == text and [fill.site.name for fill in done.unfilled] == ["function area"]
    assert named("python") is not None
