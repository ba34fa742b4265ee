"""Injected bugs for `infill-bench review`: held-out files with one reviewer's bug each, and clean
windows, cut (seeded, deterministic) from the held-out packages (never trained on).

Bug kinds (each a change that still parses: a reviewer's bug, not a syntax error):

    operator     a comparison, arithmetic or augmented-assignment operator swapped:
                 < <=, > >=, == !=, + -, * /, // /, += -=, ... (OPERATOR_SWAPS)
    off-by-one   an integer literal n written n+1 or n-1
    variable     a name read in a function replaced by another variable of that function
                 (a parameter or a name it assigns)
    arguments    two neighbouring positional arguments of a call swapped
    not          the `not` of a condition dropped (if, while, assert, a conditional expression,
                 a comprehension's if)

The bug's place is recorded as character ranges of the mutated file: the new operator, constant
or name; each swapped argument; for a dropped `not`, the first token of what it negated (where
the `not` was). Sites are code: never in a comment or string literal, nor a name a definition
introduces (review mode leaves those out). A task reviews a window of WINDOW_LINES lines around
the bug (`infill review --lines`); a clean task is a window of an unmodified file.
"""

from __future__ import annotations

import ast
import bisect
import io
import random
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from infill.modes.review import REVIEW_LINES
from infill.text.spans import Span, line_span
from infill.text.syntax import introduced_names, prose_ranges
from infill.train.corpus import ast_offsets, char_offsets

BUG_KINDS = ("operator", "off-by-one", "variable", "arguments", "not")
CLEAN = "clean"
WINDOW_LINES = 30  # lines a task reviews (the bug somewhere inside, not at its edges)
EDGE_LINES = 5  # the bug is at least this many lines from a window's edge (where the file allows)
SPAN_LINES = REVIEW_LINES  # a window is reviewed in spans of this many lines, as `infill review` a file
ARGUMENT_CHARS = 40  # a swapped argument is at most this long (and on one line)

OPERATOR_SWAPS = {
    "<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==",
    "+": "-", "-": "+", "*": "/", "/": "*", "//": "/",
    "+=": "-=", "-=": "+=",
}  # fmt: skip


@dataclass(frozen=True)
class Mutation:
    text: str  # the whole file after the change
    ranges: tuple[tuple[int, int], ...]  # the bug's place in `text` (character offsets)
    before: str  # what was there, and what is now (for the report)
    after: str


@dataclass(frozen=True)
class ReviewTask:
    kind: str  # one of BUG_KINDS, or "clean"
    path: str
    text: str  # the file as reviewed (mutated, or as it is)
    first: int  # the window reviewed: 1-based lines, both included
    last: int
    ranges: tuple[tuple[int, int], ...] = ()  # the bug's place (none for a clean window)
    before: str = ""
    after: str = ""

    @property
    def window(self) -> tuple[int, int]:
        span = line_span(self.text, self.first, self.last)
        return span.start, span.end

    @property
    def spans(self) -> list[Span]:
        """The window as spans of SPAN_LINES lines (a window of long lines can hold more tokens
        than a model's context; the canvases group the spans to fit)."""
        firsts = range(self.first, self.last + 1, SPAN_LINES)
        return [line_span(self.text, a, min(a + SPAN_LINES - 1, self.last)) for a in firsts]

    @property
    def lines(self) -> int:
        return self.last - self.first + 1

    def to_json(self) -> dict:
        ranges = [list(r) for r in self.ranges]
        return {"kind": self.kind, "path": self.path, "lines": [self.first, self.last], "ranges": ranges,
                "before": self.before, "after": self.after}  # fmt: skip


# --------------------------------------------------------------------------- sites


@dataclass(frozen=True)
class Site:
    """One place a bug of some kind can go: replace text[start:end] with `new` (the bug's place
    is then `marks`, relative to `start` in the new text)."""

    start: int
    end: int
    new: str
    marks: tuple[tuple[int, int], ...]


def python_tokens(text: str) -> list[tuple[str, int, int]]:
    """(string, start, end) of the file's Python tokens, in character offsets."""
    starts = char_offsets(text)
    found = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (
            tokenize.NEWLINE,
            tokenize.NL,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            continue
        (row, col), (end_row, end_col) = token.start, token.end
        found.append((token.string, starts[row - 1] + col, starts[end_row - 1] + end_col))
    return found


def node_range(offset: Callable[[int, int], int], node: ast.AST) -> tuple[int, int]:
    return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)


def operator_sites(text: str, tree: ast.AST) -> Iterator[Site]:
    """The operator tokens between the operands of a comparison, binary operation or augmented
    assignment (found by position, so a `*` of `*args` or a `/` of a signature never is)."""
    offset = ast_offsets(text)
    gaps = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            gaps.append((node_range(offset, node.left)[1], node_range(offset, node.right)[0]))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            gaps += [
                (node_range(offset, a)[1], node_range(offset, b)[0]) for a, b in zip(operands, operands[1:])
            ]
        elif isinstance(node, ast.AugAssign):
            gaps.append((node_range(offset, node.target)[1], node_range(offset, node.value)[0]))
    tokens = python_tokens(text)
    starts = [start for _, start, _ in tokens]
    for low, high in gaps:
        for string, start, end in tokens[bisect.bisect_left(starts, low) :]:
            if start >= high:
                break
            if string in OPERATOR_SWAPS:
                new = OPERATOR_SWAPS[string]
                yield Site(start, end, new, ((0, len(new)),))


def constant_sites(text: str, tree: ast.AST) -> Iterator[Site]:
    """Decimal integer literals, each as n+1 and (when n > 0) n-1."""
    offset = ast_offsets(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            start, end = node_range(offset, node)
            if not re.fullmatch(r"[0-9]+", text[start:end]):
                continue
            for new in {node.value + 1, node.value - 1} - {-1}:
                yield Site(start, end, str(new), ((0, len(str(new))),))


def function_scopes(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    return (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def variable_sites(text: str, tree: ast.AST) -> Iterator[Site]:
    """A name a function reads (not a called one) replaced by another of its variables: its
    parameters and the names it assigns."""
    offset = ast_offsets(text)
    for function in function_scopes(tree):
        arguments = function.args
        every = [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            arguments.vararg,
            arguments.kwarg,
        ]
        variables = {a.arg for a in every if a is not None}
        called = set()
        for node in ast.walk(function):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                variables.add(node.id)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.add(id(node.func))
        for node in ast.walk(function):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in called:
                if node.id not in variables:
                    continue
                start, end = node_range(offset, node)
                for other in sorted(variables - {node.id}):
                    yield Site(start, end, other, ((0, len(other)),))


def argument_sites(text: str, tree: ast.AST) -> Iterator[Site]:
    """Two neighbouring positional arguments of a call (different texts, each short and on one
    line) swapped; both are the bug's place."""
    offset = ast_offsets(text)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for a, b in zip(node.args, node.args[1:]):
            if isinstance(a, ast.Starred) or isinstance(b, ast.Starred):
                continue
            (a_start, a_end), (b_start, b_end) = node_range(offset, a), node_range(offset, b)
            first, second = text[a_start:a_end], text[b_start:b_end]
            short = all(len(t) <= ARGUMENT_CHARS and "\n" not in t for t in (first, second))
            if first != second and short:
                new = second + text[a_end:b_start] + first
                marks = ((0, len(second)), (len(new) - len(first), len(new)))
                yield Site(a_start, b_end, new, marks)


def not_sites(text: str, tree: ast.AST) -> Iterator[Site]:
    """The `not` of a condition dropped; the bug's place is the first token after it."""
    offset = ast_offsets(text)
    conditions = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            conditions.append(node.test)
        elif isinstance(node, ast.comprehension):
            conditions += node.ifs
    tokens = python_tokens(text)
    starts = [start for _, start, _ in tokens]
    seen = set()
    for condition in conditions:
        for node in ast.walk(condition):
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and id(node) not in seen:
                seen.add(id(node))
                start = node_range(offset, node)[0]
                operand = node_range(offset, node.operand)[0]
                if text[start:operand].strip() != "not":
                    continue  # `not (a and b)`: the operand starts inside the parenthesis
                _, _, token_end = tokens[bisect.bisect_left(starts, operand)]
                yield Site(start, token_end, text[operand:token_end], ((0, token_end - operand),))


SITES: dict[str, Callable[[str, ast.AST], Iterator[Site]]] = {
    "operator": operator_sites,
    "off-by-one": constant_sites,
    "variable": variable_sites,
    "arguments": argument_sites,
    "not": not_sites,
}


def code_sites(kind: str, text: str) -> list[Site]:
    """The sites of `kind` in the file whose bug would be code review mode looks at (not in a
    comment or string, nor an introduced name)."""
    left_out = prose_ranges(text) + introduced_names(text)
    sites = []
    for site in SITES[kind](text, ast.parse(text)):
        if not any(a <= site.start < b or a < site.end <= b for a, b in left_out):
            sites.append(site)
    return sites


def mutate(text: str, site: Site) -> Mutation | None:
    """The file with the site's bug in; None if that does not parse or changes nothing."""
    new = text[: site.start] + site.new + text[site.end :]
    if new == text:
        return None
    try:
        ast.parse(new)
    except (SyntaxError, ValueError):
        return None
    ranges = tuple((site.start + a, site.start + b) for a, b in site.marks)
    return Mutation(new, ranges, text[site.start : site.end], site.new)


def inject(kind: str, text: str, rng: random.Random) -> Mutation | None:
    """One bug of `kind` at a site chosen with `rng`; None if the file has no site for it."""
    sites = code_sites(kind, text)
    rng.shuffle(sites)
    for site in sites[:20]:
        mutation = mutate(text, site)
        if mutation is not None:
            return mutation
    return None


# --------------------------------------------------------------------------- windows and tasks


def window_around(text: str, line: int, rng: random.Random, lines: int = WINDOW_LINES) -> tuple[int, int]:
    """1-based (first, last) of a window of `lines` lines holding `line`, at least EDGE_LINES
    from its edges where the file allows, placed with `rng`."""
    count = len(char_offsets(text)) - 1 - text.endswith("\n")
    lines = min(lines, count)
    lowest, highest = max(1, line - lines + 1 + EDGE_LINES), min(line - EDGE_LINES, count - lines + 1)
    if lowest > highest:
        lowest, highest = max(1, line - lines + 1), min(line, count - lines + 1)
    first = rng.randint(lowest, max(lowest, highest))
    return first, first + lines - 1


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def bug_task(kind: str, path: str, text: str, rng: random.Random, lines: int) -> ReviewTask | None:
    mutation = inject(kind, text, rng)
    if mutation is None:
        return None
    first, last = window_around(mutation.text, line_of(mutation.text, mutation.ranges[0][0]), rng, lines)
    task = ReviewTask(
        kind, path, mutation.text, first, last, mutation.ranges, mutation.before, mutation.after
    )
    start, end = task.window
    return task if all(start <= a and b <= end for a, b in task.ranges) else None


def clean_task(path: str, text: str, rng: random.Random, lines: int) -> ReviewTask | None:
    """A window of the file as it is; None if it would hold no code token to review."""
    count = len(char_offsets(text)) - 1 - text.endswith("\n")
    first, last = window_around(text, rng.randint(1, count), rng, lines)
    task = ReviewTask(CLEAN, path, text, first, last)
    start, end = task.window
    left_out = prose_ranges(text)
    code = [
        s for _, s, e in python_tokens(text) if start <= s < end and not any(a <= s < b for a, b in left_out)
    ]
    return task if code else None


def make_review_tasks(
    sources: list[tuple[str, str]],
    kinds: list[str],
    count: int,
    clean: int,
    seed: int = 0,
    lines: int = WINDOW_LINES,
) -> list[ReviewTask]:
    """`count` bug tasks of each kind (each from a different file while there are files) and
    `clean` clean windows, chosen with a seeded generator per kind (adding a kind changes no
    other kind's tasks)."""
    tasks = []
    for kind, wanted in [*((k, count) for k in kinds), (CLEAN, clean)]:
        rng = random.Random(f"{seed}:{kind}")
        made = []
        for _ in range(3):  # each file once, then again while tasks are short
            order = list(sources)
            rng.shuffle(order)
            for path, text in order:
                if len(made) == wanted:
                    break
                task = (
                    clean_task(path, text, rng, lines)
                    if kind == CLEAN
                    else bug_task(kind, path, text, rng, lines)
                )
                if task is not None and task not in made:
                    made.append(task)
        tasks += made
    return tasks
