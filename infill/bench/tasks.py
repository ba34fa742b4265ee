"""Held-out tasks for `infill-bench quality`: spans cut (seeded) from code never trained on.

line, block, body, docstring   from the held-out packages (infill.train.corpus)
fix                            a held-out line with one token swapped (fix mode restores it)
exec-body, exec-line           from the execution-checked set (infill.bench.evalset)
"""

from __future__ import annotations

import ast
import functools
import random
import re
from dataclasses import dataclass
from pathlib import Path

from infill.bench.evalset import EvalFunction, load_functions
from infill.text.spans import Span, line_span
from infill.train.corpus import (
    HELDOUT_PACKAGES,
    ast_offsets,
    char_offsets,
    iter_python_files,
    package_of,
    source_roots,
)

KINDS = ("line", "block", "body", "docstring", "exec-body", "exec-line", "fix")
EXEC_KINDS = ("exec-body", "exec-line")
BODY_MAX_LINES, BODY_MAX_CHARS = 10, 400  # held-out bodies; larger ones overflow the span budget


@dataclass
class Task:
    kind: str
    path: str  # a held-out file, or "evalset:module.function"
    text: str  # the whole file (for exec kinds: a program that runs the function's asserts)
    start: int  # the masked span, in characters
    end: int
    answer: str | None = None  # "fix": the span before it was corrupted (else: the span's text)

    @property
    def expected(self) -> str:
        return self.answer if self.answer is not None else self.text[self.start : self.end]

    @property
    def span(self) -> Span:
        return Span(self.start, self.end, f"{self.kind} task")

    @property
    def executes(self) -> bool:
        return self.kind in EXEC_KINDS

    def filled(self, produced: str) -> str:
        return self.text[: self.start] + produced + self.text[self.end :]


def heldout_sources(limit_chars: int = 60_000) -> list[tuple[str, str]]:
    """(path, text) of the held-out packages' files that parse (200 to `limit_chars` characters),
    sorted by path. Found once a process (`_heldout_sources`): a walk of every source folder."""
    return list(_heldout_sources(limit_chars))


@functools.cache
def _heldout_sources(limit_chars: int) -> tuple[tuple[str, str], ...]:
    def held_out(relative: Path) -> bool:
        return package_of(relative) in HELDOUT_PACKAGES

    found = []
    for _, path in iter_python_files(source_roots(), held_out):
        try:
            text = path.read_text("utf-8")
            if 200 < len(text) < limit_chars:
                ast.parse(text)
                found.append((str(path), text))
        except (UnicodeDecodeError, SyntaxError, ValueError):
            continue
    return tuple(sorted(set(found)))


def code_lines(text: str) -> list[int]:
    """1-based numbers of the lines that hold code (not blank, not only a comment)."""
    lines = text.split("\n")
    return [i + 1 for i, line in enumerate(lines) if line.strip() and not line.strip().startswith("#")]


def string_lines(text: str) -> set[int]:
    """Lines of docstrings (bare string statements) and of multi-line string literals."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        multiline = isinstance(node, (ast.Constant, ast.JoinedStr)) and node.end_lineno > node.lineno
        if docstring or multiline:
            found.update(range(node.lineno, node.end_lineno + 1))
    return found


def statement_lines(text: str) -> list[int]:
    """Code lines outside docstrings and multi-line strings: what line and block tasks mask."""
    inside = string_lines(text)
    return [n for n in code_lines(text) if n not in inside]


def functions_of(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def body_spans(text: str, max_lines: int = 10**9, max_chars: int = 10**9) -> list[tuple[int, int]]:
    """Each function's body after its docstring: from column 0 of its first statement's line to
    the end of its last statement. One-line functions (`def f(): return 1`) are skipped."""
    offset, starts = ast_offsets(text), char_offsets(text)
    found = []
    for node in functions_of(ast.parse(text)):
        body = node.body[1:] if ast.get_docstring(node, clean=False) is not None else node.body
        if not body or body[0].lineno == node.lineno:
            continue
        start, end = starts[body[0].lineno - 1], offset(body[-1].end_lineno, body[-1].end_col_offset)
        lines = body[-1].end_lineno - body[0].lineno + 1
        if lines <= max_lines and end - start <= max_chars:
            found.append((start, end))
    return found


def docstring_spans(text: str) -> list[tuple[int, int]]:
    """The text between the quotes of each function's triple-quoted docstring (if not blank)."""
    offset = ast_offsets(text)
    found = []
    for node in functions_of(ast.parse(text)):
        if ast.get_docstring(node, clean=False) is None:
            continue
        literal = node.body[0].value
        start = offset(literal.lineno, literal.col_offset)
        end = offset(literal.end_lineno, literal.end_col_offset)
        source = text[start:end]
        opening = re.match(r"[rRuU]?('''|\"\"\")", source)
        if opening and source.count(opening[1]) == 2 and source[opening.end() : -3].strip():
            found.append((start + opening.end(), end - 3))
    return found


def line_spans(text: str, lines: list[int]) -> list[tuple[int, int]]:
    spans = [line_span(text, n, n) for n in lines]
    return [(s.start, s.end) for s in spans]


def block_spans(text: str) -> list[tuple[int, int]]:
    """Runs of 2-6 lines that start and end with a code line, none in a docstring or multi-line string."""
    code, inside = statement_lines(text), string_lines(text)
    ends = set(code)
    found = []
    for first in code:
        for last in range(first + 1, first + 6):
            if last in ends and not inside.intersection(range(first, last + 1)):
                found.append(line_span(text, first, last))
    return [(s.start, s.end) for s in found]


def span_candidates(kind: str, text: str, region: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """Every span of `kind` in the file, or in `region` of it: (start, end) character offsets."""
    found = all_spans(kind, text)
    if region is None:
        return found
    return [(a, b) for a, b in found if region[0] <= a and b <= region[1]]


def all_spans(kind: str, text: str) -> list[tuple[int, int]]:
    if kind in ("line", "fix"):
        return line_spans(text, statement_lines(text))
    if kind == "block":
        return block_spans(text)
    if kind == "body":
        return body_spans(text, BODY_MAX_LINES, BODY_MAX_CHARS)
    if kind == "docstring":
        return docstring_spans(text)
    if kind == "exec-body":
        return body_spans(text)
    if kind == "exec-line":
        bodies, starts = body_spans(text), char_offsets(text)
        lines = [n for n in code_lines(text) if any(a <= starts[n - 1] < b for a, b in bodies)]
        return line_spans(text, lines)
    raise ValueError(f"unknown task kind {kind!r} (expected one of {', '.join(KINDS)})")


def make_tasks(
    sources: list[tuple[str, str]],
    kinds: list[str],
    count: int,
    seed: int = 0,
    functions: tuple[EvalFunction, ...] | None = None,
) -> list[Task]:
    """`count` tasks per kind, chosen with a seeded generator per kind (adding a kind changes no
    other kind's tasks), no span twice (a repeated task would count as two). Exec kinds use each
    function of the set at most once, and mask a part of that function (not of the helpers
    around it)."""
    tasks = []
    for kind in kinds:
        rng = random.Random(f"{seed}:{kind}")
        if kind in EXEC_KINDS:
            pool = [
                (f"evalset:{f.qualified_name}", f.program, f.source_range)
                for f in functions or load_functions()
            ]
            picks = pool if count >= len(pool) else rng.sample(pool, count)
        else:
            picks = ((*rng.choice(sources), None) for _ in range(count * 20)) if sources else iter(())
        made, chosen = 0, set()
        for path, text, region in picks:
            candidates = span_candidates(kind, text, region)
            if not candidates:
                continue
            task = Task(kind, path, text, *rng.choice(candidates))
            if (path, task.start, task.end) in chosen:
                continue
            chosen.add((path, task.start, task.end))
            if kind == "fix":
                task = corrupted(task, rng)
            if task is not None:
                tasks.append(task)
                made += 1
            if made == count:
                break
    return tasks


_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+|[^\w\s]")
_WORD = re.compile(r"[A-Za-z_]\w*")


def corrupted(task: Task, rng: random.Random) -> Task | None:
    """A "fix" task from a line task: one code token of the line (not in a string or comment)
    replaced by another token of the same file (a name by a name, a symbol by a symbol: the
    random-token corruption the model learned to undo); the answer is the line as it was. None
    if the line has nothing to swap."""
    line = task.text[task.start : task.end]
    code = line.split("#")[0]  # not in a comment, nor (roughly: quotes before it pair up) a string
    tokens = [
        t
        for t in _TOKEN.finditer(code)
        if not (code.count('"', 0, t.start()) % 2 or code.count("'", 0, t.start()) % 2)
    ]
    if not tokens:
        return None
    target = rng.choice(tokens)
    if _WORD.fullmatch(target.group()):
        pool = set(_WORD.findall(task.text))
    else:
        pool = {t for t in _TOKEN.findall(task.text) if not t[0].isalnum() and t[0] != "_"}
    pool.discard(target.group())
    if not pool:
        return None
    bad = line[: target.start()] + rng.choice(sorted(pool)) + line[target.end() :]
    text = task.text[: task.start] + bad + task.text[task.end :]
    return Task("fix", task.path, text, task.start, task.start + len(bad), answer=line)


# --------------------------------------------------------------------------- scoring
