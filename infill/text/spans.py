"""What to regenerate, as data.

A :class:`Span` is a half-open range of character offsets into the document text. The functions
here build spans from what a user types (``--lines``, ``--range``, ``--node``) or from a cursor
position (for the language server), and check a set of spans before anything is regenerated.
Every mistake in the input raises :class:`~infill.errors.InputError` with a message for the user.

Lines end with "\\n" or "\\r\\n". A span never includes the terminator of its last line, so that
newline stays as fixed context around the regenerated text.

Python syntax comes from tree-sitter, which counts in UTF-8 bytes; all byte offsets are turned
into character offsets before they leave this module.
"""

from __future__ import annotations

import bisect
import difflib
import functools
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import tree_sitter

from infill.errors import InputError
from infill.text import definitions as defs
from infill.text.languages import PYTHON, Language
from infill.text.parse_cache import parse_tree


@dataclass(frozen=True)
class Span:
    """A half-open range ``[start, end)`` of character offsets into the document text.

    ``start == end`` is an insertion point. ``label`` says in words what the span covers
    ("lines 10-20", "body of function foo"); it only appears in messages.
    """

    start: int
    end: int
    label: str = ""


SELECTOR_KINDS = ("function", "class", "body", "docstring", "statement")
"""The KIND part of a ``--node KIND:TARGET`` selector."""

CURSOR_KINDS = ("statement", "function", "class", "body", "expression")
"""The kinds :func:`node_at_offset` understands."""

# --------------------------------------------------------------------------- lines and ranges


def line_span(text: str, first: int, last: int) -> Span:
    """Span of the 1-based lines ``first`` to ``last``, both included.

    It starts at column 0 of line ``first`` (indentation included) and ends at the end of line
    ``last``, before its line terminator.
    """
    count = _line_count(text)
    for line in (first, last):
        _check_line_number(line, count)
    if first > last:
        raise InputError(f"line range {first}-{last} is backwards: {first} comes after {last}")
    bounds = _line_bounds(text)
    label = f"line {first}" if first == last else f"lines {first}-{last}"
    return Span(bounds[first - 1][0], bounds[last - 1][1], label)


def parse_lines(text: str, spec: str) -> Span:
    """Span for a ``--lines`` value: ``"A-B"`` (lines A to B, both included) or ``"A"``."""
    match = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", spec)
    if match is None:
        raise InputError(f"--lines expects A-B or A (1-based line numbers, e.g. 10-20), got {spec!r}")
    first = int(match[1])
    last = int(match[2]) if match[2] else first
    return line_span(text, first, last)


def parse_range(text: str, spec: str) -> Span:
    """Span for a ``--range`` value ``"L:C-L:C"``.

    Lines and columns are 1-based, columns count characters, and the end column is exclusive.
    The column just past a line's last character is valid; equal ends give an insertion point.
    """
    match = re.fullmatch(r"\s*([0-9]+):([0-9]+)\s*-\s*([0-9]+):([0-9]+)\s*", spec)
    if match is None:
        raise InputError(
            "--range expects L:C-L:C (1-based line:column, end column exclusive, "
            f"e.g. 3:5-3:12), got {spec!r}"
        )
    start_line, start_column, end_line, end_column = (int(group) for group in match.groups())
    start = position_offset(text, start_line, start_column)
    end = position_offset(text, end_line, end_column)
    label = f"range {start_line}:{start_column}-{end_line}:{end_column}"
    if start > end:
        raise InputError(f"{label} ends before it starts")
    return Span(start, end, label)


def position_offset(text: str, line: int, column: int) -> int:
    """Character offset of the 1-based position ``line:column``."""
    if line < 1 or column < 1:
        raise InputError(f"line and column numbers start at 1, got {line}:{column}")
    bounds = _line_bounds(text)
    if line > len(bounds):
        count = _line_count(text)
        raise InputError(f"line {line} is past the end of the file ({_plural(count, 'line')})")
    start, end = bounds[line - 1]
    if column > end - start + 1:
        raise InputError(
            f"column {column} is past the end of line {line}, which has "
            f"{_plural(end - start, 'character')} (the last valid column is {end - start + 1})"
        )
    return start + column - 1


def _line_count(text: str) -> int:
    """Number of lines in ``text``; a final line terminator does not start another line."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _line_bounds(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each line's content, without its line terminator.

    As with ``text.split("\\n")``, text that ends with a newline gets a final empty line there:
    a position may point into it (the very end of the file), but line counts leave it out.
    """
    bounds = []
    start = 0
    for piece in text.split("\n"):
        end = start + len(piece)
        ends_in_crlf = piece.endswith("\r") and end < len(text)
        bounds.append((start, end - 1 if ends_in_crlf else end))
        start = end + 1
    return bounds


def _check_line_number(line: int, count: int) -> None:
    """Raise InputError unless ``line`` is one of the ``count`` lines of the file."""
    if count == 0:
        raise InputError("the file is empty: there are no lines to select")
    if line < 1:
        raise InputError(f"line numbers start at 1, got {line}")
    if line > count:
        raise InputError(f"line {line} is past the end of the file ({_plural(count, 'line')})")


def _plural(count: int, noun: str) -> str:
    """Count and noun, e.g. "1 line" or "2 lines"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


# --------------------------------------------------------------------------- syntax nodes


def node_span(text: str, selector: str, language: Language = PYTHON) -> Span:
    """Span for a ``--node KIND:TARGET`` selector on source in ``language`` (which nodes each
    kind means there: infill.text.languages).

    - ``function:NAME`` / ``class:NAME``: the whole definition, decorators (``export``,
      ``template``) included.
    - ``body:NAME``: the body of function or class NAME: Python's block (with any comment lines
      between the header and the first statement), else what is between its braces.
    - ``docstring:NAME``: the docstring literal of function or class NAME, quotes included
      (Python only).
    - ``statement:LINE``: the first statement that starts on 1-based LINE; for a compound
      statement, the whole statement.

    NAME is a plain name, which matches a definition of that name at any depth, or a dotted one
    (``Cls.method``, ``outer.inner``), which must match the end of the definition's qualified
    name. ``NAME@LINE`` keeps only the definition whose ``def``/``class`` (or decorator) is on
    LINE. A name that matches several definitions is an error listing them.

    Blocks and statements are line-shaped: if only whitespace precedes them on their first
    line, the span starts at column 0. Spans end where the node ends, before the newline.
    """
    kind, _, target = (part.strip() for part in selector.partition(":"))
    if kind not in SELECTOR_KINDS:
        raise InputError(
            f"unknown --node kind {kind!r} in {selector!r}; "
            f"expected KIND:NAME with KIND one of {', '.join(SELECTOR_KINDS)}"
        )
    if not target:
        example = "statement:12" if kind == "statement" else f"{kind}:my_function"
        raise InputError(f"--node {selector!r} is missing its target, e.g. {example}")
    if not language.has_grammar:
        raise InputError(f"--node needs a language with a grammar; this file is filled as "
                         f"{language.title} (say its language with --language)")  # fmt: skip
    if kind == "docstring" and language is not PYTHON:
        raise InputError(f"docstring:NAME is for Python; {language.title} documentation is a comment")
    data, root = parse_tree(text, language)
    if kind == "statement":
        return _statement_span(text, data, root, target, language)
    definition = _find_definition(root, kind, target, language)
    return _definition_part_span(data, definition, kind, language)


def node_at_offset(text: str, offset: int, kind: str, language: Language = PYTHON) -> Span | None:
    """Span of the innermost ``kind`` node around character ``offset``, or None if there is none.

    ``kind`` is one of :data:`CURSOR_KINDS`. "function" and "class" mean the whole definition
    with its decorators, "body" the body of a function or class (as in :func:`node_span`),
    "statement" any simple or compound statement, and "expression" any expression. A language
    without a grammar has no such nodes: None.
    A node contains the offset if the offset lies in its span, either end included, so a
    cursor just after a node or in the indentation before a statement still selects it.
    """
    if kind not in CURSOR_KINDS:
        raise InputError(f"unknown node kind {kind!r}; expected one of {', '.join(CURSOR_KINDS)}")
    if not 0 <= offset <= len(text):
        raise InputError(f"offset {offset} is outside the file (0-{len(text)})")
    if not language.has_grammar:
        return None
    data, root = parse_tree(text, language)
    target = len(text[:offset].encode("utf-8", "surrogatepass"))
    candidates = list(_candidates_around(data, root, kind, target, language))
    if not candidates:
        return None
    # The innermost is the smallest; of equal ones, the later (deeper) one.
    start, end, node = min(reversed(candidates), key=lambda found: found[1] - found[0])
    return _to_span(data, start, end, _cursor_label(node, kind, language))


def _candidates_around(
    data: bytes, root: tree_sitter.Node, kind: str, target: int, language: Language = PYTHON
) -> Iterator[tuple[int, int, tree_sitter.Node]]:
    """``(start, end, node)`` for each ``kind`` node whose byte range holds ``target``,
    outer before inner."""
    stack = [root]
    while stack:
        node = stack.pop()
        found = _cursor_range(data, node, kind, language)
        if found is not None and found[0] <= target <= found[1]:
            yield found[0], found[1], node
        stack.extend(reversed(_children_around(data, node, target)))


def _children_around(data: bytes, node: tree_sitter.Node, target: int) -> list[tree_sitter.Node]:
    """The children of ``node`` whose range, from its line-shaped start, holds byte ``target``:
    found from the first child that reaches ``target`` (a module of 2,000 definitions is not
    walked child by child)."""
    # py-tree-sitter 0.26's first_child_for_byte crashes where there is no such child (a leaf,
    # or a node whose children all end before the byte): those have no child around target.
    if node.child_count == 0 or node.child(node.child_count - 1).end_byte < target:
        return []
    child = node.first_child_for_byte(target - 1) if target > 0 else node.child(0)
    found = []
    while child is not None and _line_shaped_start(data, child.start_byte) <= target:
        if target <= child.end_byte:
            found.append(child)
        child = child.next_sibling
    return found


def _cursor_range(
    data: bytes, node: tree_sitter.Node, kind: str, language: Language = PYTHON
) -> tuple[int, int] | None:
    """Byte range that ``kind`` selects at ``node``, or None if ``node`` is not of that kind."""
    if kind == "expression":
        return (node.start_byte, node.end_byte) if defs.is_expression(node, language) else None
    if kind == "statement":
        found = (node.start_byte, node.end_byte) if defs.is_statement(node, language) else None
    elif kind == "body":
        found = defs.body_range(node, language) if defs.kind_of(node, language) else None
    elif defs.whole_kind(node, language) == kind:
        found = (node.start_byte, node.end_byte)
    else:
        found = None
    return None if found is None else (_line_shaped_start(data, found[0]), found[1])


def _cursor_label(node: tree_sitter.Node, kind: str, language: Language) -> str:
    """Label for what :func:`node_at_offset` found."""
    if kind == "function" or kind == "class":
        return defs.describe(defs.inner(node, language), language)
    if kind == "body":
        return f"body of {defs.describe(node, language)}"
    return f"{kind} on line {node.start_point.row + 1}"


# --- statement:LINE


def _statement_span(text: str, data: bytes, root: tree_sitter.Node, target: str, language: Language) -> Span:
    """Span of the first statement that starts on line ``target``."""
    if not re.fullmatch(r"[0-9]+", target):
        raise InputError(f"statement:LINE expects a 1-based line number, got {target!r}")
    line = int(target)
    _check_line_number(line, _line_count(text))
    row = line - 1
    statements = list(defs.statements_on_row(root, row, language))
    starting = [node for node in statements if node.start_point.row == row]
    if not starting:
        reason = _no_statement_reason(text, root, row, statements)
        raise InputError(f"no statement starts on line {line}{reason}")
    node = starting[0]
    return _to_span(
        data, _line_shaped_start(data, node.start_byte), node.end_byte, f"statement on line {line}"
    )


def _no_statement_reason(
    text: str, root: tree_sitter.Node, row: int, statements: list[tree_sitter.Node]
) -> str:
    """Why no statement starts on ``row``, as a parenthesised remark (or "")."""
    start, end = _line_bounds(text)[row]
    content = text[start:end]
    if not content.strip():
        return " (it is blank)"
    first_byte = len(text[: start + len(content) - len(content.lstrip())].encode("utf-8", "surrogatepass"))
    if "comment" in root.descendant_for_byte_range(first_byte, first_byte + 1).type:
        return " (it holds only a comment)"
    if statements:
        enclosing = statements[-1]
        kind = enclosing.type.replace("_", " ")
        return f" (it is part of the {kind} that starts on line {enclosing.start_point.row + 1})"
    return ""


# --- function:NAME, class:NAME, body:NAME, docstring:NAME


def _find_definition(
    root: tree_sitter.Node, kind: str, selector: str, language: Language
) -> tree_sitter.Node:
    """The one function or class definition that ``kind:selector`` names."""
    name, at_sign, line_text = (part.strip() for part in selector.partition("@"))
    wanted = tuple(part.strip() for part in name.split("."))
    if not all(part.isidentifier() for part in wanted):
        raise InputError(f"{name!r} is not a {language.title} name or dotted name (like Cls.method or a.b)")
    if at_sign and not re.fullmatch(r"[0-9]+", line_text):
        raise InputError(f"NAME@LINE expects a 1-based line number after '@', got {selector!r}")
    definitions = defs.definitions(root, language)
    either = kind in ("body", "docstring")
    pool = [node for node in definitions if either or defs.kind_of(node, language) == kind]
    matches = [node for node in pool if _names_match(node, wanted, language)]
    if at_sign and matches:
        at_line = [node for node in matches if _starts_on_line(node, int(line_text), language)]
        if not at_line:
            lines = ", ".join(str(node.start_point.row + 1) for node in matches)
            raise InputError(
                f"no {_kind_words(kind)} {name!r} starts on line {line_text}; "
                f"{name!r} is defined on line(s) {lines}"
            )
        matches = at_line
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise InputError(_ambiguity_message(selector, matches, pool, language))
    raise InputError(_not_found_message(kind, name, wanted, definitions, language))


def _names_match(node: tree_sitter.Node, wanted: tuple[str, ...], language: Language) -> bool:
    """Whether the dotted name ``wanted`` matches the end of the definition's qualified name."""
    return defs.qualified_name(node, language)[-len(wanted) :] == wanted


def _starts_on_line(node: tree_sitter.Node, line: int, language: Language) -> bool:
    """Whether the definition's ``def``/``class`` line or one of its decorators is on ``line``."""
    outer = defs.outer(node, language)
    return outer.start_point.row <= line - 1 <= node.start_point.row


def _ambiguity_message(
    selector: str, matches: list[tree_sitter.Node], pool: list[tree_sitter.Node], language: Language
) -> str:
    """Error text for a name that matches several definitions, with a way to pick each."""
    listing = ", ".join(f"{defs.describe(n, language)} (line {n.start_point.row + 1})" for n in matches)
    picks = " or ".join(_unique_selector(node, pool, language) for node in matches)
    return f"{selector!r} matches {len(matches)} definitions: {listing}; pick one with {picks}"


def _unique_selector(node: tree_sitter.Node, pool: list[tree_sitter.Node], language: Language) -> str:
    """The shortest dotted name that selects only ``node`` in ``pool``, else ``NAME@LINE``."""
    qualified = defs.qualified_name(node, language)
    for length in range(1, len(qualified) + 1):
        suffix = qualified[-length:]
        if sum(_names_match(other, suffix, language) for other in pool) == 1:
            return ".".join(suffix)
    return f"{qualified[-1]}@{node.start_point.row + 1}"


def _not_found_message(
    kind: str, name: str, wanted: tuple[str, ...], definitions: list[tree_sitter.Node], language: Language
) -> str:
    """Error text for a name that matches nothing, with the nearest things that do exist."""
    message = f"no {_kind_words(kind)} named {name!r} in the file"
    if not definitions:
        return message + " (it defines no functions or classes)"
    other_kind = [node for node in definitions if _names_match(node, wanted, language)]
    if other_kind:
        node = other_kind[0]
        other = defs.kind_of(node, language)
        return (
            f"{message}; there is {defs.describe(node, language)} on line {node.start_point.row + 1} "
            f"(select it with {other}:{name})"
        )
    known = {".".join(defs.qualified_name(node, language)) for node in definitions}
    known |= {defs.qualified_name(node, language)[-1] for node in definitions}
    close = difflib.get_close_matches(name, sorted(known), n=3)
    if close:
        return f"{message}; did you mean {', '.join(repr(option) for option in close)}?"
    return message


def _kind_words(kind: str) -> str:
    """What a selector kind looks for, in words."""
    return kind if kind in ("function", "class") else "function or class"


def _definition_part_span(data: bytes, definition: tree_sitter.Node, kind: str, language: Language) -> Span:
    """Span of the part of ``definition`` that ``kind`` selects."""
    label = defs.describe(definition, language)
    if kind in ("function", "class"):
        outer = defs.outer(definition, language)
        return _to_span(data, _line_shaped_start(data, outer.start_byte), outer.end_byte, label)
    if kind == "body":
        body = defs.body_range(definition, language)
        if body is None:
            raise InputError(f"{label} (line {definition.start_point.row + 1}) has no body")
        return _to_span(data, _line_shaped_start(data, body[0]), body[1], f"body of {label}")
    literal = docstring_literal(definition)
    if literal is None:
        raise InputError(f"{label} (line {definition.start_point.row + 1}) has no docstring")
    return _to_span(data, literal.start_byte, literal.end_byte, f"docstring of {label}")


def definition_name(node: tree_sitter.Node) -> str:
    """E.g. "function Cls.method" or "class Outer.Inner" (Python)."""
    return defs.describe(node, PYTHON)


def with_decorators(node: tree_sitter.Node) -> tree_sitter.Node:
    """The decorated definition around ``node`` if it has decorators, else ``node`` (Python)."""
    return defs.outer(node, PYTHON)


def docstring_literal(definition: tree_sitter.Node) -> tree_sitter.Node | None:
    """The docstring literal of a function or class, or None if it has none.

    As in Python, that is a plain (not bytes, not f-) string literal, possibly implicitly
    concatenated, standing alone as the first statement of the body.
    """
    body = definition.child_by_field_name("body")
    if body is None:
        return None
    first = next((child for child in body.named_children if child.type != "comment"), None)
    if first is None or first.type != "expression_statement" or first.named_child_count != 1:
        return None
    literal = first.named_children[0]
    parts = literal.named_children if literal.type == "concatenated_string" else [literal]
    if all(part.type == "string" and _is_plain_string(part) for part in parts):
        return literal
    return None


def _is_plain_string(string: tree_sitter.Node) -> bool:
    """Whether a string literal is a plain str: no b, f or t prefix."""
    opening = next((child for child in string.children if child.type == "string_start"), None)
    prefix = defs.node_text(opening).lower() if opening is not None else ""
    return not any(letter in prefix for letter in "bft")


# --------------------------------------------------------------------------- validation


def validate_spans(text: str, spans: Sequence[Span]) -> list[Span]:
    """The spans sorted by start, after checking that they can be regenerated together.

    InputError if the file is empty, or a span reaches outside the text, ends before it
    starts, splits a "\\r\\n" pair, or overlaps another span. Spans that share a character
    overlap; two insertion points at the same offset do too. Spans that only touch are fine.
    """
    if not text:
        raise InputError("the file is empty: there is nothing to regenerate")
    for span in spans:
        _check_span(text, span)
    ordered = sorted(spans, key=lambda span: (span.start, span.end))
    for before, after in itertools.pairwise(ordered):
        same_insertion_point = before.start == before.end == after.start == after.end
        if after.start < before.end or same_insertion_point:
            raise InputError(f"{_describe(before)} overlaps {_describe(after)}")
    return ordered


def _check_span(text: str, span: Span) -> None:
    """Raise InputError unless ``span`` is a well-formed range inside ``text``."""
    if span.start > span.end:
        raise InputError(f"{_describe(span)} ends before it starts")
    if span.start < 0 or span.end > len(text):
        raise InputError(
            f"{_describe(span)} reaches outside the file, which has {_plural(len(text), 'character')}"
        )
    for offset in (span.start, span.end):
        if 0 < offset < len(text) and text[offset - 1 : offset + 1] == "\r\n":
            raise InputError(f"{_describe(span)} splits the line terminator \\r\\n at offset {offset}")


def _describe(span: Span) -> str:
    """A span as messages name it: its label (if any) and its offsets."""
    where = f"characters {span.start}-{span.end}"
    return f"{span.label} ({where})" if span.label else f"span {where}"


# --------------------------------------------------------------------------- tree-sitter plumbing


def _line_shaped_start(data: bytes, start: int) -> int:
    """``start`` moved back to the start of its line if only whitespace precedes it there."""
    line_start = data.rfind(b"\n", 0, start) + 1
    return line_start if not data[line_start:start].strip() else start


def _to_span(data: bytes, start: int, end: int, label: str) -> Span:
    """Span from byte offsets into ``data`` (the UTF-8 encoding of the document)."""
    return Span(char_offset(data, start), char_offset(data, end), label)


def char_offset(data: bytes, byte_offset: int) -> int:
    """Character offset of a byte offset into ``data`` (UTF-8; always a character boundary):
    the byte offset less the bytes beyond the first of each multi-byte character before it."""
    table = _multibyte_characters(data)
    if table is None:
        return byte_offset
    starts, extra = table
    before = bisect.bisect_left(starts, byte_offset)  # multi-byte characters that start before it
    return byte_offset - (extra[before - 1] if before else 0)


@functools.lru_cache(maxsize=8)
def _multibyte_characters(data: bytes) -> tuple[list[int], list[int]] | None:
    """Where each multi-byte character of ``data`` starts, and the extra bytes of all of them up to
    and including it; None for ASCII. Built once per text: offsets then cost a binary search,
    not a decode of everything before them (thousands of offsets in a big file)."""
    if data.isascii():
        return None
    starts, extra, total = [], [], 0
    for character in _MULTIBYTE.finditer(data):
        total += character.end() - character.start() - 1
        starts.append(character.start())
        extra.append(total)
    return starts, extra


_MULTIBYTE = re.compile(rb"[\xc0-\xff][\x80-\xbf]*")
