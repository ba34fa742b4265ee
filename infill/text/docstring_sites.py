"""Where documentation is missing: the sites document mode (infill.modes.docstrings) fills.

Python: a definition without a docstring (found with tree-sitter, as in `infill.text.spans`) gets an
insertion site right after its header line. A one-line definition (``def f(): return 1``) has
[start, end) over the blank between its ':' and its body, which moves to a line of its own.
The indentation is the body's own (tabs stay tabs).

Other languages: a declaration without a documentation comment of its language's convention
(infill.text.doc_comments: JSDoc, Javadoc, Doxygen, rustdoc, Go doc comments) gets a site at the start
of its line (above its Rust attributes): the comment goes on lines of its own, at the
declaration's indentation. A Rust file without its own ``//!`` documentation gets a "module" site
first, at the top (infill.text.doc_comments.module_top), with a blank line after the comment. Finding
sites needs no torch: the language server lists them for every code action request.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import tree_sitter

from infill.text import definitions as defs
from infill.text import doc_comments
from infill.text.languages import PYTHON, Language
from infill.text.parse_cache import parse_tree
from infill.text.spans import Span, char_offset, definition_name, docstring_literal, with_decorators


@dataclass(frozen=True)
class DocstringSite:
    """Where a definition's docstring goes: text[start:end] is replaced by the quoted docstring.

    Usually start == end, the end of the header line. For a one-line definition, [start, end)
    is the blank between the ':' and the body, and the body moves to the next line.
    """

    name: str  # e.g. "function Cls.method", "class Outer.Inner"
    line: int  # 1-based line of the `def` / `class` keyword
    start: int
    end: int
    indent: str  # the body's indentation (a comment: the declaration's)
    one_line: bool
    style: str = "docstring"  # or the key of a comment convention (infill.text.doc_comments)
    opener: str = '"""'  # what the model's text follows on the canvas...
    closer: str = '"""'  # ...and what follows it
    own_name: str = ""  # the declaration's own name (a Go comment starts with it)
    module: bool = False  # the file's own documentation (Rust's //!): a blank line follows it

    @property
    def is_comment(self) -> bool:
        return self.style != "docstring"

    def before(self, newline: str) -> str:
        """What goes before the docstring literal: a line break and the body's indentation (a
        comment: its indentation, at the start of the declaration's line)."""
        return self.indent if self.is_comment else newline + self.indent

    def after(self, newline: str) -> str:
        """What goes after it: nothing, or for a one-line definition the body's new line start (a
        comment: the line break before the declaration)."""
        if self.is_comment:
            return newline * (2 if self.module else 1)
        return newline + self.indent if self.one_line else ""


def missing_docstrings(
    text: str, within: Sequence[Span] | None = None, language: Language = PYTHON
) -> list[DocstringSite]:
    """Every function and class without a docstring, in source order, at any depth.

    within: keep only the definitions whose header (decorators to ':') overlaps one of these
    spans (an empty span: contains its offset); None keeps them all.
    """
    missing = _missing(text) if language is PYTHON else _missing_comments(text, language)
    return [
        site for site, header in missing
        if within is None or any(_overlaps(header, (s.start, s.end)) for s in within)
    ]  # fmt: skip


@functools.lru_cache(maxsize=4)
def _missing(text: str) -> tuple[tuple[DocstringSite, tuple[int, int]], ...]:
    """Every site of :func:`missing_docstrings` with its header's range, once per text (a
    language server lists actions for the same text again and again; 2,000 sites of a
    20,000-line file take a tenth of a second)."""
    data, root = parse_tree(text)
    found = []
    for node in defs.definitions(root, PYTHON):
        site = _site(text, data, node) if docstring_literal(node) is None else None
        if site is not None:
            found.append((site, (char_offset(data, with_decorators(node).start_byte), site.start)))
    return tuple(found)


def missing_docstring_at(text: str, offset: int, language: Language = PYTHON) -> DocstringSite | None:
    """The site of the innermost definition around `offset` (decorators to its end), or None if
    there is none or it already has a docstring."""
    if language is not PYTHON:
        return _comment_site_at(text, offset, language)
    data, root = parse_tree(text)
    target = len(text[:offset].encode("utf-8", "surrogatepass"))
    around = [
        n for n in _definitions_around(root, target) if with_decorators(n).start_byte <= target <= n.end_byte
    ]
    if not around:
        return None
    innermost = max(around, key=lambda node: node.start_byte)
    return _site(text, data, innermost) if docstring_literal(innermost) is None else None


@functools.lru_cache(maxsize=4)
def _missing_comments(text: str, language: Language) -> tuple[tuple[DocstringSite, tuple[int, int]], ...]:
    """The comment sites of ``text`` with each declaration's header range (its line)."""
    convention = doc_comments.convention_of(language)
    if convention is None:
        return ()
    data, root = parse_tree(text, language)
    module = _module_site(text, data, root, language)
    found = [] if module is None else [(module, (0, _line_end(text, module.start)))]
    for node in defs.definitions(root, language):
        site = _comment_site(text, data, node, language, convention)
        if site is not None:
            found.append((site, (site.start, _line_end(text, site.start))))
    return tuple(found)


def _line_end(text: str, offset: int) -> int:
    end = text.find("\n", offset)
    return len(text) if end == -1 else end


def _module_site(text: str, data: bytes, root: tree_sitter.Node, language: Language) -> DocstringSite | None:
    """The site of a file's own documentation (Rust's ``//!``) if its row has one and it lacks
    it: at the start of the line of :func:`infill.text.doc_comments.module_top`."""
    convention = doc_comments.module_convention_of(language)
    if convention is None or doc_comments.module_is_documented(root, convention):
        return None
    top = doc_comments.module_top(root)
    if top is None or top.is_error:
        return None
    start = char_offset(data, top.start_byte)
    line_start = text.rfind("\n", 0, start) + 1
    return DocstringSite("module", top.start_point.row + 1, line_start, line_start, text[line_start:start],
                         False, language.module_docs or "", convention.opener, convention.closer,
                         module=True)  # fmt: skip


def _comment_site(
    text: str, data: bytes, node: tree_sitter.Node, language: Language, convention: doc_comments.Convention
) -> DocstringSite | None:
    """The site of a declaration lacking its documentation comment; None if it has one, the
    convention leaves it out, or it does not start its line."""
    anchor = doc_comments.anchor(node, language)
    if node.has_error or doc_comments.is_documented(anchor, convention):
        return None
    if not doc_comments.wants_documentation(node, convention, language):
        return None
    first = doc_comments.first_line_above(anchor)
    start = char_offset(data, first.start_byte)
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].strip(" \t"):
        return None  # code before it on its line: no line of its own to put a comment on
    own = defs.name_of(node)
    indent, line = text[line_start:start], node.start_point.row + 1
    name, opener = defs.describe(node, language), doc_comments.opener(convention, own)
    return DocstringSite(name, line, line_start, line_start, indent, False, language.docs or "", opener,
                         convention.closer, own)  # fmt: skip


def _comment_site_at(text: str, offset: int, language: Language) -> DocstringSite | None:
    """The comment site of the innermost declaration around ``offset`` (its comment line to its
    end), or None."""
    convention = doc_comments.convention_of(language)
    if convention is None:
        return None
    data, root = parse_tree(text, language)
    target = len(text[:offset].encode("utf-8", "surrogatepass"))
    def top(node: tree_sitter.Node) -> int:
        return doc_comments.first_line_above(doc_comments.anchor(node, language)).start_byte

    around = [
        node for node in defs.definitions(root, language)
        if top(node) <= target <= node.end_byte
        and doc_comments.wants_documentation(node, convention, language)
    ]  # fmt: skip
    if not around:  # in no declaration: in the file (Rust's module)
        return _module_site(text, data, root, language)
    innermost = max(around, key=lambda node: node.start_byte)
    return _comment_site(text, data, innermost, language, convention)


def _definitions_around(root: tree_sitter.Node, target: int) -> list[tree_sitter.Node]:
    """The function and class definitions whose nodes (decorators included) hold byte ``target``
    or end there: the ancestors of the nodes at ``target`` and just before it (not a query over
    the whole tree)."""
    found = []
    for at in {target, max(0, target - 1)}:
        node = root.descendant_for_byte_range(at, at)
        while node is not None:
            if node.type == "decorated_definition":
                node = node.child_by_field_name("definition") or node
            if node.type in ("function_definition", "class_definition"):
                if node not in found:
                    found.append(node)
                node = with_decorators(node)
            node = node.parent
    return found


def _overlaps(header: tuple[int, int], span: tuple[int, int]) -> bool:
    if span[0] == span[1]:
        return header[0] <= span[0] <= header[1]
    return header[0] < span[1] and span[0] < header[1]


def _site(text: str, data: bytes, node: tree_sitter.Node) -> DocstringSite | None:
    """The insertion site of a definition; None if tree-sitter could not make sense of it."""
    body = node.child_by_field_name("body")
    colons = [child for child in node.children if child.type == ":"]
    if body is None or not colons or node.has_error:
        return None
    colon_end = char_offset(data, colons[-1].end_byte)
    body_start = char_offset(data, body.start_byte)
    line = node.start_point.row + 1
    if body.start_point.row == colons[-1].end_point.row:  # def f(): return 1
        indent = _leading_blank(text, char_offset(data, node.start_byte)) + _indent_unit(text)
        return DocstringSite(definition_name(node), line, colon_end, body_start, indent, True)
    line_end = text.find("\n", colon_end)
    line_end = len(text) if line_end == -1 else line_end - (text[line_end - 1] == "\r")
    indent = _leading_blank(text, body_start)
    return DocstringSite(definition_name(node), line, line_end, line_end, indent, False)


def _leading_blank(text: str, offset: int) -> str:
    """The spaces and tabs that start the line `offset` is on."""
    start = text.rfind("\n", 0, offset) + 1
    line = text[start:offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indent_unit(text: str) -> str:
    """A tab if more lines are indented with tabs than with spaces, else four spaces."""
    lines = text.split("\n")
    tabs = sum(line.startswith("\t") for line in lines)
    return "\t" if tabs > sum(line.startswith(" ") for line in lines) else "    "
