"""Syntax errors of a text in its language, as tree-sitter finds them (plain functions).

tree-sitter parses any text; where it cannot make sense of the code it leaves ``ERROR`` nodes
(tokens it had to skip) and zero-width ``MISSING`` nodes (a token it had to assume, such as a
closing parenthesis). :func:`syntax_problems` lists them as character offsets (the outermost
ERROR of a nest only, every MISSING node). The language server publishes them as diagnostics
(lsp_server.diagnostics); alternatives rank candidates that break a parsing file last.

Each language is parsed with its own grammar (infill.text.languages): the tokens of another
language's syntax are never asked of a file. A language without a grammar (plain text) has no
syntax problems. tree-sitter is lenient about what a grammar cannot see, Python's indentation above
all (an ``if`` with no indented body parses). :func:`file_problems` adds Python's own verdict
(``ast.parse``) there where tree-sitter finds nothing: the engine re-masks the tokens of a fill on
the lines those problems touch (infill.engine.repair).
"""

from __future__ import annotations

import ast
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import tree_sitter

from infill.text.languages import PYTHON, Language
from infill.text.parse_cache import parse_tree

SYNTAX_ERROR = "syntax-error"  # an ERROR node: code tree-sitter could not parse
MISSING_TOKEN = "missing-token"  # a MISSING node: a token tree-sitter had to assume
MAX_PROBLEMS = 50
"""At most this many problems per document (a broken file should not flood anyone)."""
_PARSING = threading.RLock()
"""One ``ast.parse`` at a time in the process (`parse_python`). CPython 3.11 counts the recursion
of the AST's conversion to Python objects in state of the interpreter, not of the thread: a parse
interrupted mid-conversion by another thread's parse (a finalizer run by the collector can let
another thread in) fails with SystemError "AST constructor recursion depth mismatch". Seen once
in a full test run, under a team server's concurrent requests (issue 38). The parses are under
the GIL anyway, so the lock costs nothing; re-entrant, for a parse a finalizer runs in the same
thread."""

_SHOWN_TEXT = 30  # unexpected text longer than this (or multi-line) is not quoted


@dataclass(frozen=True)
class SyntaxProblem:
    """A syntax error at characters ``[start, end)`` (``start == end``: a missing token)."""

    start: int
    end: int
    code: str  # SYNTAX_ERROR or MISSING_TOKEN
    message: str


def overlaps(problem: SyntaxProblem, start: int, end: int) -> bool:
    """Whether ``problem`` touches the characters ``[start, end]`` (ends included, so a cursor
    right after an error, or a missing token at a fill's edge, counts)."""
    return problem.start <= end and start <= problem.end


def has_syntax_error(text: str, language: Language = PYTHON) -> bool:
    """Whether tree-sitter finds an ERROR or MISSING node anywhere in ``text``."""
    return language.has_grammar and parse_tree(text, language)[1].has_error


def syntax_problems(text: str, language: Language = PYTHON, limit: int = MAX_PROBLEMS) -> list[SyntaxProblem]:
    """ERROR and MISSING nodes of ``text`` in ``language``, in document order, at most ``limit``."""
    if not language.has_grammar:
        return []
    data, root = parse_tree(text, language)
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


def parse_python(text: str) -> ast.Module:
    """``ast.parse(text)``, its warnings (SyntaxWarning for an invalid escape sequence) ignored,
    one parse at a time in the process (`_PARSING`). SyntaxError, ValueError as ``ast.parse``."""
    with _PARSING, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def file_problems(text: str, language: Language = PYTHON) -> list[SyntaxProblem]:
    """tree-sitter's problems; if it finds none in Python, the one ``ast.parse`` reports, if any
    (over the line it names, without its terminator)."""
    found = syntax_problems(text, language)
    if found or language is not PYTHON:
        return found
    try:
        parse_python(text)
    except SyntaxError as error:
        lines = text.split("\n")
        row = min(max((error.lineno or 1) - 1, 0), len(lines) - 1)
        start = sum(len(line) + 1 for line in lines[:row])
        end = start + len(lines[row].rstrip("\r"))
        return [SyntaxProblem(start, end, SYNTAX_ERROR, f"syntax error: {error.msg}")]
    except (ValueError, RecursionError, MemoryError):  # e.g. a NUL character; too deeply nested
        return [SyntaxProblem(0, 0, SYNTAX_ERROR, "syntax error: Python cannot parse this file")]
    return []


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


def prose_ranges(text: str, language: Language = PYTHON) -> list[tuple[int, int]]:
    """Character ranges of ``text``'s comments and string literals (docstrings among them), in
    document order: prose rather than code (every grammar names those nodes "comment" or
    "...string..."); none for a language without a grammar."""

    def prose(node: tree_sitter.Node) -> tuple[list[tree_sitter.Node], bool]:
        if "comment" in node.type or ("string" in node.type and node.is_named):
            return [node], False
        return [], True

    return node_ranges(text, language, prose)


def introduced_names(text: str, language: Language = PYTHON) -> list[tuple[int, int]]:
    """Character ranges of the names ``text`` introduces: the name of each definition or
    declaration (its ``name`` field) and the identifiers of parameter lists; in document order.
    Nothing around a new name tells what it will be (a reviewer leaves them alone)."""
    kinds = ("definition", "declaration", "declarator", "item", "spec")

    def names(node: tree_sitter.Node) -> tuple[list[tree_sitter.Node], bool]:
        if "parameter" in node.type and node.type.endswith(("parameters", "parameter_list")):
            return [first for child in node.children if (first := parameter_name(child))], False
        name = node.child_by_field_name("name")
        return ([name] if name is not None and node.type.endswith(kinds) else []), True

    return node_ranges(text, language, names)


def node_ranges(
    text: str, language: Language, pick: Callable[[tree_sitter.Node], tuple[list[tree_sitter.Node], bool]]
) -> list[tuple[int, int]]:
    """Character ranges of the nodes `pick` takes, walking ``text``'s tree from its root:
    `pick(node)` -> (the nodes to take there, whether to look into the node's children); none
    for a language without a grammar."""
    if not language.has_grammar:
        return []
    data, root = parse_tree(text, language)
    to_char = _char_offsets(text, data)
    ranges: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        taken, look_inside = pick(node)
        ranges.update((to_char(chosen.start_byte), to_char(chosen.end_byte)) for chosen in taken)
        if look_inside:
            stack.extend(reversed(node.children))
    return sorted(ranges)


def parameter_name(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The identifier a parameter (a child of a parameter list) introduces: itself, or the first
    identifier within it (``x: int = 0`` -> ``x``, not its type)."""
    stack = [node]
    while stack:
        current = stack.pop(0)
        if current.type == "identifier":
            return current
        stack = [child for child in current.children if child.is_named] + stack
    return None
