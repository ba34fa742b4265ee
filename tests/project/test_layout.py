"""The layout: no import circles between our modules, and the runtime (everything but the
benchmarks and training; the team server's modules too) never imports the benchmarks, training or
the language server.

Imports are read with `ast` from the source, wherever they are (inside functions too), except
under `if TYPE_CHECKING:`; `from a import b` counts as importing `a.b` when that is a module,
else `a`. docs/architecture.md has the map."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("infill", "lsp_server", "team_server")
OUTSIDE_THE_RUNTIME = ("infill.bench", "infill.train", "lsp_server")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of our packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, source: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of `modules` that the module `name` imports (itself excluded)."""
    tree = ast.parse(source)
    type_only = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
        for node in ast.walk(branch)
    }
    package = name if is_package else name.rpartition(".")[0]
    named = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            named.update(f"{module}.{alias.name}" for alias in node.names)
            named.add(module)
    found = set()
    for dotted in named:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        if dotted and dotted != name:
            found.add(dotted)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = module_files(root)
    return {
        name: imports(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", set(files))
        for name, path in files.items()
    }


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def outside_the_runtime(name: str) -> bool:
    return any(name == top or name.startswith(f"{top}.") for top in OUTSIDE_THE_RUNTIME)


def runtime_leaks(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (name, other)
        for name, targets in graph.items()
        if not outside_the_runtime(name)
        for other in targets
        if outside_the_runtime(other)
    )


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest path of imports (the graph has no circles)."""
    best: dict[str, list[str]] = {}

    def chain(node: str) -> list[str]:
        if node not in best:
            best[node] = [node] + max((chain(other) for other in sorted(graph[node])), key=len, default=[])
        return best[node]

    return max((chain(node) for node in sorted(graph)), key=len)


def test_no_import_circles():
    assert circles(import_graph()) == []


def test_the_runtime_never_imports_bench_train_or_the_server():
    assert runtime_leaks(import_graph()) == []


def test_the_checks_can_fail(tmp_path):
    """A made-up package with a circle and a runtime module that imports the server."""
    (tmp_path / "infill" / "engine").mkdir(parents=True)
    (tmp_path / "lsp_server").mkdir()
    files = {
        "infill/__init__.py": "",
        "infill/engine/__init__.py": "",
        "infill/engine/a.py": "def f():\n    from infill.engine import b\n",
        "infill/engine/b.py": "from .a import f\n",
        "infill/engine/c.py": "import typing\nif typing.TYPE_CHECKING:\n    import lsp_server.x\n",
        "infill/cli.py": "import lsp_server.x\n",
        "lsp_server/__init__.py": "",
        "lsp_server/x.py": "from infill.engine.c import *\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    graph = import_graph(tmp_path)
    assert circles(graph) == [["infill.engine.a", "infill.engine.b"]]
    assert runtime_leaks(graph) == [("infill.cli", "lsp_server.x")]  # not c: a type-only import
    del graph["infill.engine.b"], graph["infill.engine.a"]
    assert longest_chain(graph) == ["infill.cli", "lsp_server.x", "infill.engine.c"]


if __name__ == "__main__":  # the layout's figures (docs/architecture.md)
    graph = import_graph()
    chain = longest_chain(graph)
    print(f"{len(graph)} modules; circles: {circles(graph) or 'none'}")
    print(f"longest import chain: {len(chain)} modules: {' -> '.join(chain)}")


def test_the_package_top_holds_its_parts_only():
    """At most 12 entries at the top of infill/ (subpackages by role, the CLI, the hook, the shared
    options and errors): a module about models sits in infill/models/, and so on."""
    hidden = ("__pycache__", ".")
    entries = sorted(p.name for p in (ROOT / "infill").iterdir() if not p.name.startswith(hidden))
    assert len(entries) <= 12, entries
    assert "hub_cache.py" not in entries and "model_info.py" not in entries
