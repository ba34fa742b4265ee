"""Scoring `infill-bench quality`: fill each task through the pipeline, judge it, summarise.

The fills go through the same modes the CLI and the language server run (infill.modes), as
any user of the library would call them.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tqdm import tqdm

from infill.bench.evalset import EvalFunction
from infill.bench.tasks import EXEC_KINDS, KINDS, Task, heldout_sources, make_tasks
from infill.errors import InputError
from infill.models.base import Denoiser
from infill.modes.fill import infill
from infill.modes.fix import fix
from infill.options import FixOptions, InfillOptions, SamplerConfig
from infill.text.document import Document

PLOT_CAPS = (1, 2, 4, 8, 16, 32)
MEMORY_CAP = 2 * 1024**3  # bytes of address space for a program under test


@dataclass
class Score:
    kind: str
    path: str
    start: int
    end: int
    expected: str
    produced: str
    exact: bool
    similarity: float
    parses: bool
    passed: bool | None  # exec kinds only
    steps: int
    ms: float
    error: str | None = None  # why the task failed outright (engine error, failing assert, timeout)
    retries: int = 0  # retries of a fill that broke the file's syntax (infill.engine.repair.retries)
    token_edits: int = 0  # parser-checked token edits made to it (infill.engine.repair.token_edits)
    fresh_fills: int = 0  # fresh fills after the retries and edits left it broken
    passes: int = 0  # the model's forward passes, all of them


# --------------------------------------------------------------------------- sources and spans


def normalized(text: str) -> str:
    """Text without trailing whitespace on its lines or at its end."""
    return "\n".join(line.rstrip() for line in text.rstrip().split("\n"))


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def judge(task: Task, produced: str) -> dict:
    """The text metrics of a fill: exact match, edit similarity, whether the filled file parses."""
    return {
        "exact": normalized(produced) == normalized(task.expected),
        "similarity": difflib.SequenceMatcher(None, task.expected, produced, autojunk=False).ratio(),
        "parses": parses(task.filled(produced)),
    }


def limit_memory() -> None:  # pragma: no cover - runs in the child process
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_program(source: str, timeout: float = 5.0) -> tuple[bool, str | None]:
    """Run a Python program in a fresh isolated interpreter: (exited 0, why not)."""
    with tempfile.TemporaryDirectory(prefix="infill-exec-") as tmp:
        path = Path(tmp) / "task.py"
        path.write_text(source, encoding="utf-8")
        preexec = limit_memory if sys.platform != "win32" else None
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", str(path)],
                cwd=tmp, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=timeout, preexec_fn=preexec,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return False, f"timeout after {timeout:g} s"
    if done.returncode == 0:
        return True, None
    lines = done.stderr.strip().splitlines()
    return False, lines[-1] if lines else f"exit status {done.returncode}"


def score_task(backend: Denoiser, task: Task, options: InfillOptions, timeout: float = 5.0) -> Score:
    """Fill the task's span with the model, then judge (and for exec kinds, run) the result."""
    try:
        document = Document(task.text, bom=False, newline="\n")
        if task.kind == "fix":
            result = fix(backend, document, [task.span], FixOptions.from_infill(options))
        else:
            result = infill(backend, document, [task.span], options)
    except InputError as error:
        metrics = {"exact": False, "similarity": 0.0, "parses": False}
        passed = False if task.executes else None
        return Score(task.kind, task.path, task.start, task.end, task.expected, "", **metrics,
                     passed=passed, steps=0, ms=0.0, error=str(error))  # fmt: skip
    produced = result.spans[0].new_text
    passed, error = run_program(task.filled(produced), timeout) if task.executes else (None, None)
    return Score(
        task.kind, task.path, task.start, task.end, task.expected, produced, **judge(task, produced),
        passed=passed, steps=result.stats.steps, ms=1000 * result.stats.seconds, error=error,
        retries=result.stats.retries, token_edits=result.stats.token_edits,
        fresh_fills=result.stats.fresh_fills, passes=result.stats.forward_passes,
    )  # fmt: skip


def evaluate(
    backend: Denoiser, tasks: list[Task], options: InfillOptions, timeout: float, desc: str
) -> list[Score]:
    return [score_task(backend, t, options, timeout) for t in tqdm(tasks, desc=desc, unit="task")]


def summarize(scores: list[Score]) -> dict[str, dict]:
    """Per kind (in KINDS order): task count and mean metrics."""
    table = {}
    for kind in sorted({s.kind for s in scores}, key=lambda k: KINDS.index(k) if k in KINDS else len(KINDS)):
        rows = [s for s in scores if s.kind == kind]
        executed = [s.passed for s in rows if s.passed is not None]
        table[kind] = {
            "tasks": len(rows),
            "exact_match": statistics.mean(s.exact for s in rows),
            "edit_similarity": statistics.mean(s.similarity for s in rows),
            "parses": statistics.mean(s.parses for s in rows),
            "pass_rate": statistics.mean(executed) if executed else None,
            "mean_steps": statistics.mean(s.steps for s in rows),
            "retried": statistics.mean(s.retries > 0 for s in rows),
            "edited": statistics.mean(s.token_edits > 0 for s in rows),
            "restarted": statistics.mean(s.fresh_fills > 0 for s in rows),
            "mean_ms": statistics.mean(s.ms for s in rows),
            "p90_ms": percentile([s.ms for s in rows], 0.9),
            "max_ms": max(s.ms for s in rows),
            "mean_passes": statistics.mean(s.passes for s in rows),
            "max_passes": max(s.passes for s in rows),
        }
    return table


def percentile(values: list[float], share: float) -> float:
    """The value that `share` of `values` are at most (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered)) - 1))]


def print_table(table: dict[str, dict]) -> None:
    header = ("kind", "tasks", "exact", "edit-sim", "parses", "pass", "retried", "edited", "afresh")
    header += ("steps", "ms", "p90 ms")
    print("{:10} {:>5} {:>7} {:>9} {:>7} {:>7} {:>8} {:>7} {:>7} {:>6} {:>7} {:>7}".format(*header))
    for kind, r in table.items():
        passed = "-" if r["pass_rate"] is None else f"{r['pass_rate']:.1%}"
        print(f"{kind:10} {r['tasks']:5d} {r['exact_match']:7.1%} {r['edit_similarity']:9.3f} "
              f"{r['parses']:7.1%} {passed:>7} {r['retried']:8.1%} {r['edited']:7.1%} {r['restarted']:7.1%} "
              f"{r['mean_steps']:6.1f} "
              f"{r['mean_ms']:7.0f} {r['p90_ms']:7.0f}")  # fmt: skip


# --------------------------------------------------------------------------- quality vs. step cap


def step_curve(
    backend: Denoiser,
    tasks: list[Task],
    caps: list[int],
    per_kind: int,
    timeout: float,
    options: InfillOptions | None = None,
) -> dict[str, dict[int, dict]]:
    """{kind: {cap: summary row}} over the first `per_kind` tasks of each kind (`options` with
    each step cap in turn)."""
    options = options or InfillOptions()
    subset = [t for kind in dict.fromkeys(t.kind for t in tasks) for t in of_kind(tasks, kind)[:per_kind]]
    curve: dict[str, dict[int, dict]] = {}
    for cap in caps:
        capped = replace(options, sampler=replace(options.sampler, steps=cap))
        scores = evaluate(backend, subset, capped, timeout, desc=f"step cap {cap}")
        for kind, row in summarize(scores).items():
            curve.setdefault(kind, {})[cap] = row
    return curve


def of_kind(tasks: list[Task], kind: str) -> list[Task]:
    return [t for t in tasks if t.kind == kind]


def plot_curve(curve: dict[str, dict[int, dict]], path: Path, title: str = "") -> None:
    """Exact match / pass rate, edit similarity and parse rate against the step cap, one line per
    kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4.2))
    for kind, rows in curve.items():
        caps = sorted(rows)
        metric = "pass_rate" if kind in EXEC_KINDS else "exact_match"
        label = f"{kind} ({'pass' if kind in EXEC_KINDS else 'exact'})"
        left.plot(caps, [rows[c][metric] for c in caps], marker="o", label=label)
        middle.plot(caps, [rows[c]["edit_similarity"] for c in caps], marker="o", label=kind)
        right.plot(caps, [rows[c]["parses"] for c in caps], marker="o", label=kind)
    named = ((left, "exact match / pass rate"), (middle, "edit similarity"), (right, "filled file parses"))
    for axis, name in named:
        axis.set_xscale("log", base=2)
        axis.set_xticks(sorted({c for rows in curve.values() for c in rows}))
        axis.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        axis.set_xlabel("sampler step cap")
        axis.set_ylabel(name)
        axis.set_ylim(0, 1)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    fig.suptitle(title or "infill quality against the diffusion step cap")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- commands


def repository_sources(root: Path) -> list[tuple[str, str]]:
    """(path, text) of the files of the repository under `root` that `infill-train finetune`
    holds out (never trains on), those that parse."""
    from infill.train.repository import collect

    files = collect(root, report=lambda message: None)
    return [(f.path, f.text) for f in files.heldout if parses(f.text)]


def run_quality(
    backend: Denoiser,
    args: argparse.Namespace,
    sources: list[tuple[str, str]] | None = None,
    functions: tuple[EvalFunction, ...] | None = None,
) -> dict:
    """The quality benchmark on a loaded backend; `sources` default to the held-out files (of
    `--source DIR`, when given, else of the project's held-out packages)."""
    if sources is None and any(k not in EXEC_KINDS for k in args.kinds):
        source = getattr(args, "source", None)
        sources = repository_sources(source) if source is not None else heldout_sources()
    tasks = make_tasks(sources or [], args.kinds, args.tasks, args.seed, functions)
    rules = rule_options(args)
    config = SamplerConfig(steps=args.steps, cache_refresh=args.cache_refresh, order=args.order, **rules)
    options = InfillOptions(config, **engine_options(args))
    scores = evaluate(backend, tasks, options, args.exec_timeout, desc="quality")
    table = summarize(scores)
    print_table(table)
    results = {"model": str(args.model or "default"), "steps_cap": args.steps, "seed": args.seed,
               "cache_refresh": args.cache_refresh, "order": args.order, **rule_options(args),
               **engine_options(args), "table": table, "tasks": [asdict(s) for s in scores]}  # fmt: skip
    if args.plot:
        caps = [int(c) for c in args.plot_caps.split(",")]
        curve = step_curve(backend, tasks, caps, args.plot_tasks, args.exec_timeout, options)
        plot_curve(curve, args.plot, f"{results['model']}: quality against the step cap")
        results["step_curve"] = {kind: {str(c): r for c, r in rows.items()} for kind, rows in curve.items()}
        print(f"plot: {args.plot}")
    return results


REPAIR_FLAGS = {  # InfillOptions field: what its flag (--retries, ...) does
    "retries": "retries of fills that break the file's syntax (0: none)",
    "token_edits": "then parser-checked single-token edits of fills still broken (0: none)",
    "fresh_fills": "then fresh fills of multi-line fills still broken, with retries and edits (0: none)",
    "pass_budget": "forward passes a fill and its repair steps take in all (0: no bound)",
}


def engine_options(args: argparse.Namespace) -> dict[str, int | bool | None]:
    """The InfillOptions fields of the repair flags, --no-recall's and --context-length's."""
    options = {name: getattr(args, name) for name in REPAIR_FLAGS}
    options["pass_budget"] = options["pass_budget"] or None  # 0: no bound
    options["recall"] = getattr(args, "recall", True)
    options["context_length"] = getattr(args, "context_length", None)
    return options


def rule_options(args: argparse.Namespace) -> dict[str, float | int | None]:
    """The SamplerConfig fields of the unmasking flags (--block-length, --block-passes, --top-p, --top-k)."""
    return {name: getattr(args, name) for name in ("block_length", "block_passes", "top_p", "top_k")}
