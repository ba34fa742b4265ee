"""`infill-bench`: measured quality and speed of a model, printed as tables and written as JSON.

    infill-bench quality [--model DIR] [--tasks 200] [--kinds line,block]
        Tasks cut from the held-out packages (never trained on; see infill.train.corpus):
        a span of the file is masked and the model regenerates it. Scores: exact match
        (ignoring trailing whitespace), edit similarity (difflib ratio) and whether the filled
        file still parses.
    infill-bench speed [--model DIR]
        Engine time and end-to-end CLI time for a one-line and a ten-line fill in a 200-line file.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from infill.backend import Denoiser, load_backend
from infill.document import Document, document_from_bytes
from infill.edits import apply_edits
from infill.engine import InfillOptions, infill
from infill.sampler import SamplerConfig
from infill.spans import Span, line_span
from infill.train.corpus import HELDOUT_PACKAGES, iter_python_files, package_of, source_roots


@dataclass
class Task:
    kind: str  # "line" | "block"
    path: str
    text: str
    first: int  # 1-based lines, inclusive
    last: int

    @property
    def span(self) -> Span:
        return line_span(self.text, self.first, self.last)


@dataclass
class Score:
    kind: str
    exact: bool
    similarity: float
    parses: bool
    steps: int
    seconds: float


def heldout_sources(limit_chars: int = 60_000) -> list[tuple[str, str]]:
    """(path, text) of the held-out packages' files that parse, smallest first."""
    found = []
    for root, path in iter_python_files(source_roots()):
        if package_of(path.relative_to(root)) not in HELDOUT_PACKAGES:
            continue
        try:
            text = path.read_text("utf-8")
            ast.parse(text)
        except (UnicodeDecodeError, SyntaxError, ValueError):
            continue
        if 200 < len(text) < limit_chars:
            found.append((str(path), text))
    return sorted(set(found))


def code_lines(text: str) -> list[int]:
    """1-based numbers of the lines that hold code (not blank, not only a comment)."""
    lines = text.split("\n")
    return [i + 1 for i, line in enumerate(lines) if line.strip() and not line.strip().startswith("#")]


def make_tasks(sources: list[tuple[str, str]], kinds: list[str], count: int, seed: int = 0) -> list[Task]:
    """`count` tasks per kind: a code line (not blank, not a comment), or a block of 3-6 lines."""
    rng = random.Random(seed)
    tasks = []
    for kind in kinds:
        for _ in range(count):
            path, text = rng.choice(sources)
            lines = text.split("\n")
            code = code_lines(text)
            first = rng.choice(code)
            last = first if kind == "line" else min(len(lines), first + rng.randint(2, 5))
            tasks.append(Task(kind, path, text, first, last))
    return tasks


def score_task(backend: Denoiser, task: Task, config: SamplerConfig) -> Score:
    document = Document(task.text, bom=False, newline="\n")
    span = task.span
    result = infill(backend, document, [span], InfillOptions(sampler=config))
    original = task.text[span.start : span.end]
    produced = result.spans[0].new_text
    filled = apply_edits(task.text, result.edits)
    try:
        ast.parse(filled)
        parses = True
    except (SyntaxError, ValueError):
        parses = False
    return Score(
        kind=task.kind,
        exact=produced.rstrip() == original.rstrip(),
        similarity=difflib.SequenceMatcher(None, original, produced).ratio(),
        parses=parses,
        steps=result.stats.steps,
        seconds=result.stats.seconds,
    )


def summarize(scores: list[Score]) -> dict[str, dict]:
    table = {}
    for kind in sorted({s.kind for s in scores}):
        rows = [s for s in scores if s.kind == kind]
        table[kind] = {
            "tasks": len(rows),
            "exact_match": sum(s.exact for s in rows) / len(rows),
            "edit_similarity": statistics.mean(s.similarity for s in rows),
            "parses": sum(s.parses for s in rows) / len(rows),
            "mean_steps": statistics.mean(s.steps for s in rows),
            "mean_ms": 1000 * statistics.mean(s.seconds for s in rows),
        }
    return table


def print_table(table: dict[str, dict]) -> None:
    print(f"{'kind':8} {'tasks':>5} {'exact':>7} {'edit-sim':>9} {'parses':>7} {'steps':>6} {'ms':>7}")
    for kind, r in table.items():
        print(f"{kind:8} {r['tasks']:5d} {r['exact_match']:7.1%} {r['edit_similarity']:9.3f} "
              f"{r['parses']:7.1%} {r['mean_steps']:6.1f} {r['mean_ms']:7.0f}")


def quality(args) -> dict:
    backend = load_backend(args.model, threads=args.threads)
    tasks = make_tasks(heldout_sources(), args.kinds.split(","), args.tasks, args.seed)
    config = SamplerConfig(steps=args.steps)
    scores = [score_task(backend, t, config) for t in tqdm(tasks, desc="quality", unit="task")]
    table = summarize(scores)
    print_table(table)
    return {"model": str(args.model or "default"), "steps_cap": args.steps, "table": table}


SPEED_FILE_LINES = 200


def speed_file() -> str:
    """A 200-line Python file cut from a held-out module (a real file, never trained on)."""
    long_enough = [text for _, text in heldout_sources() if text.count("\n") >= SPEED_FILE_LINES]
    text = long_enough[0]
    return "\n".join(text.split("\n")[:SPEED_FILE_LINES]) + "\n"


def speed(args) -> dict:
    text = speed_file()
    code = code_lines(text)
    one, ten = code[len(code) // 2], code[len(code) // 2]
    started = time.perf_counter()
    backend = load_backend(args.model, threads=args.threads)
    load_seconds = time.perf_counter() - started
    document = document_from_bytes(text.encode())
    results = {"load_seconds": load_seconds}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "speed.py"
        path.write_text(text)
        for name, first, last in (("one_line", one, one), ("ten_lines", ten, ten + 9)):
            spans = [line_span(text, first, last)]
            engine = []
            for _ in range(args.repeat):
                result = infill(backend, document, spans)
                engine.append(result.stats.seconds)
            command = [sys.executable, "-m", "infill.cli", str(path), "--lines", f"{first}-{last}"]
            if args.model:
                command += ["--model", str(args.model)]
            cli = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True)
                cli.append(time.perf_counter() - t)
            results[name] = {
                "positions": result.stats.tokens,
                "steps": result.stats.steps,
                "engine_ms": 1000 * statistics.median(engine),
                "cli_ms": 1000 * statistics.median(cli),
            }
    print(f"model load: {load_seconds * 1000:.0f} ms (file of {SPEED_FILE_LINES} lines)")
    print(f"{'fill':10} {'positions':>9} {'steps':>5} {'engine ms':>10} {'cli ms':>8}")
    for name in ("one_line", "ten_lines"):
        r = results[name]
        print(f"{name:10} {r['positions']:9d} {r['steps']:5d} {r['engine_ms']:10.0f} {r['cli_ms']:8.0f}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="infill-bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["quality", "speed"])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tasks", type=int, default=100, help="quality: tasks per kind")
    parser.add_argument("--kinds", default="line,block")
    parser.add_argument("--steps", type=int, default=SamplerConfig.steps, help="sampler step cap")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="speed: runs per measurement (median)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    results = quality(args) if args.what == "quality" else speed(args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
