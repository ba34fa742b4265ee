"""Where docstrings are missing: the sites document mode (infill.modes.docstrings) fills.

A definition without a docstring (found with tree-sitter, as in `infill.spans`) gets an
insertion site right after its header line. A one-line definition (``def f(): return 1``) has
[start, end) over the blank between its ':' and its body, which moves to a line of its own.
The indentation is the body's own (tabs stay tabs). Finding sites needs no torch: the language
server lists them for every code action request.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import tree_sitter

from infill import definitions as defs
from infill.languages import PYTHON, Language
from infill.parse_cache import parse_tree
from infill.spans import Span, _char_offset, _definition_name, _docstring, _with_decorators


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
    indent: str  # the body's indentation
    one_line: bool

    def before(self, newline: str) -> str:
        """What goes before the docstring literal: a line break and the body's indentation."""
        return newline + self.indent

    def after(self, newline: str) -> str:
        """What goes after it: nothing, or for a one-line definition the body's new line start."""
        return newline + self.indent if self.one_line else ""


def missing_docstrings(
    text: str, within: Sequence[Span] | None = None, language: Language = PYTHON
) -> list[DocstringSite]:
    """Every function and class without a docstring, in source order, at any depth.

    within: keep only the definitions whose header (decorators to ':') overlaps one of these
    spans (an empty span: contains its offset); None keeps them all.
    """
    if language is not PYTHON:
        return []
    return [
        site for site, header in _missing(text)
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
        site = _site(text, data, node) if _docstring(node) is None else None
        if site is not None:
            found.append((site, (_char_offset(data, _with_decorators(node).start_byte), site.start)))
    return tuple(found)


def missing_docstring_at(text: str, offset: int, language: Language = PYTHON) -> DocstringSite | None:
    """The site of the innermost definition around `offset` (decorators to its end), or None if
    there is none or it already has a docstring."""
    if language is not PYTHON:
        return None
    data, root = parse_tree(text)
    target = len(text[:offset].encode("utf-8", "surrogatepass"))
    around = [
        n for n in _definitions_around(root, target) if _with_decorators(n).start_byte <= target <= n.end_byte
    ]
    if not around:
        return None
    innermost = max(around, key=lambda node: node.start_byte)
    return _site(text, data, innermost) if _docstring(innermost) is None else None


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
                node = _with_decorators(node)
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
    colon_end = _char_offset(data, colons[-1].end_byte)
    body_start = _char_offset(data, body.start_byte)
    line = node.start_point.row + 1
    if body.start_point.row == colons[-1].end_point.row:  # def f(): return 1
        indent = _leading_blank(text, _char_offset(data, node.start_byte)) + _indent_unit(text)
        return DocstringSite(_definition_name(node), line, colon_end, body_start, indent, True)
    line_end = text.find("\n", colon_end)
    line_end = len(text) if line_end == -1 else line_end - (text[line_end - 1] == "\r")
    indent = _leading_blank(text, body_start)
    return DocstringSite(_definition_name(node), line, line_end, line_end, indent, False)


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
