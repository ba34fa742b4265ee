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

from infill.text.parse_cache import ParseCache


class IncrementalFirst(ParseCache):
    """The cache before: every new text parsed from the most recent tree, broken or not (a broken
    result then parsed again afresh, as now)."""

    def _base(self):
        return next(reversed(self._trees.values()), None)


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
