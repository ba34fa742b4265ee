"""What a fill's syntax checks spend parsing, with the text after a broken one parsed afresh at once
(infill.text.parse_cache now) or tried incrementally first (before): the texts the parse cache is
asked for during `docs/experiments/fill_time.py`'s fills are recorded, then replayed through a
fresh cache of each kind, alternating, in one process; the trees are checked to be the same.

    python docs/experiments/parse_replay.py [FILLS] [ROUNDS]
"""

from __future__ import annotations

import contextlib
import io
import runpy
import statistics
import sys
import time
from pathlib import Path

import tree_sitter

from infill.text.parse_cache import ParseCache, edited_copy


class IncrementalFirst(ParseCache):
    """The cache before: every new text tried incrementally from the last tree, a broken result
    parsed again afresh."""

    def parse(self, text: str):
        if text in self._trees:
            self._trees.move_to_end(text)
            data, tree = self._trees[text]
            return data, tree.root_node
        base = next(reversed(self._trees.values()), None)
        data = text.encode("utf-8", "surrogatepass")
        parser = tree_sitter.Parser(self.language)
        tree = parser.parse(data) if base is None else parser.parse(data, edited_copy(*base, data))
        if base is not None and tree.root_node.has_error:
            tree = parser.parse(data)
        self._trees[text] = (data, tree)
        while len(self._trees) > self.kept:
            self._trees.popitem(last=False)
        return data, tree.root_node


def recorded_texts(fills: int) -> list[tuple[tree_sitter.Language, str]]:
    """The (language, text) of every parse the fills of fill_time.py ask for, in order."""
    asked: list[tuple[tree_sitter.Language, str]] = []
    parse = ParseCache.parse

    def recording(cache: ParseCache, text: str):
        asked.append((cache.language, text))
        return parse(cache, text)

    ParseCache.parse = recording
    sys.argv = ["fill_time.py", str(fills), "1"]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(Path(__file__).with_name("fill_time.py")), run_name="__main__")
    finally:
        ParseCache.parse = parse
    return asked


def replay(kind: type[ParseCache], asked) -> tuple[float, list[str]]:
    """Milliseconds to parse `asked` through new caches of `kind`, and the trees (as text)."""
    caches: dict[tree_sitter.Language, ParseCache] = {}
    started = time.perf_counter()
    roots = [caches.setdefault(language, kind(language)).parse(text)[1] for language, text in asked]
    return (time.perf_counter() - started) * 1000, [str(root) for root in roots]


def main() -> None:
    fills = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    asked = recorded_texts(fills)
    broken = [tree_sitter.Parser(lang).parse(text.encode()).root_node.has_error for lang, text in asked]
    after = [now for before, now in zip(broken, broken[1:]) if before]
    print(f"{len(asked)} parses asked for; {len(after)} texts after a broken one, {sum(after)} broken")
    times: dict[str, list[float]] = {"incremental first (before)": [], "afresh after a broken one (now)": []}
    trees = []
    for _ in range(rounds):
        for runs, kind in zip(times.values(), (IncrementalFirst, ParseCache)):
            milliseconds, found = replay(kind, asked)
            runs.append(milliseconds)
            trees.append(found)
    print("the same trees both ways:", all(found == trees[0] for found in trees))
    for name, runs in times.items():
        print(f"{name}: median {statistics.median(runs):.0f} ms ({', '.join(f'{r:.0f}' for r in runs)})")
    before, now = (statistics.median(runs) for runs in times.values())
    print(f"now / before: {now / before:.3f}")


if __name__ == "__main__":
    main()
