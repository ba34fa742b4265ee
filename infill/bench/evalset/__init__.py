"""The execution-checked set: small Python functions written for this project, each with asserts.

Each module here is plain Python: imports (and private `_helpers`) at the top, then functions and
classes, each followed by the statements that check it: 2-5 `assert`s, and for classes the
assignments that set up an object (to names starting with "_"). Importing a module runs every
assert, so the originals are known to pass. The benchmark (`infill-bench quality`, kinds
"exec-body" and "exec-line") masks a function's body or one of its lines, lets the model fill it,
and runs the result with its asserts in a subprocess.

The set is never trained on: `infill.train.corpus` excludes this package from the corpus.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

MODULES = ("strings", "sequences", "mappings", "arithmetic", "parsing", "classes", "recursion", "errors")


# What may stand before the first function, and among the checks (defs there are private: "_name").
PREAMBLE_TYPES = (ast.Import, ast.ImportFrom, ast.Assign, ast.FunctionDef, ast.ClassDef)
CHECK_TYPES = (ast.Assert, ast.Assign, ast.Expr, ast.FunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class EvalFunction:
    """One function (or class) of the set, with what it needs to run and the code that checks it."""

    module: str
    name: str
    preamble: str  # the module's imports and helpers
    source: str  # the def or class, decorators included
    checks: str  # the code after it: asserts (and set-up statements, private helpers)

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def program(self) -> str:
        """A standalone script: preamble, the function, its checks. Exits 0 iff the checks pass."""
        return "\n\n\n".join(part for part in (self.preamble, self.source, self.checks) if part) + "\n"

    @property
    def source_range(self) -> tuple[int, int]:
        """Where `source` lies in `program` (character offsets)."""
        start = len(self.preamble) + 3 if self.preamble else 0
        return start, start + len(self.source)

    @property
    def assert_count(self) -> int:
        return sum(isinstance(node, ast.Assert) for node in ast.parse(self.checks).body)


@functools.cache
def load_functions() -> tuple[EvalFunction, ...]:
    """Every function of the set, module by module, in file order."""
    return tuple(item for module in MODULES for item in parse_module(module, module_path(module).read_text()))


def module_path(module: str) -> Path:
    return Path(__file__).with_name(f"{module}.py")


def parse_module(module: str, text: str) -> list[EvalFunction]:
    """Split a module into its functions and classes, each with the code after it (its checks)."""
    tree = ast.parse(text)
    lines = text.splitlines()
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    items = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")]
    if not items:
        return []
    starts = [first_line(node) for node in items] + [len(lines) + 1]
    after_docstring = tree.body[0].end_lineno if body is not tree.body else 0
    preamble = "\n".join(lines[after_docstring : starts[0] - 1]).strip("\n")
    found = []
    for node, next_start in zip(items, starts[1:]):
        source = "\n".join(lines[first_line(node) - 1 : node.end_lineno])
        checks = "\n".join(lines[node.end_lineno : next_start - 1]).strip("\n")
        found.append(EvalFunction(module, node.name, preamble, source, checks))
    for node in body:
        allowed = PREAMBLE_TYPES if node.lineno < starts[0] else CHECK_TYPES
        if node not in items and not isinstance(node, allowed):
            raise ValueError(f"{module}.py line {node.lineno}: unexpected {type(node).__name__}")
    return found


def first_line(node: ast.stmt) -> int:
    """The line a definition starts on, decorators included."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
