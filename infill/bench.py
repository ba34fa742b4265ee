"""`infill-bench`: measured quality and speed of a model, printed as tables and written as JSON.

infill-bench quality [--model DIR] [--tasks 100] [--kinds line,block,...] [--steps 32]
                     [--json PATH] [--plot PATH]
    A span is masked and the model regenerates it. Task kinds:
      line, block, body, docstring: cut (seeded) from the held-out packages, never trained
        on (see infill.train.corpus): one code line; 2-6 lines; a function body (up to 10
        lines); the text inside a function's docstring quotes.
      fix: a held-out code line with one token swapped for another of the same file (a name
        for a name, a symbol for a symbol); fix mode (--fix) repairs the line, and it is
        exact if the line is restored.
      exec-body, exec-line: from this project's execution-checked set (infill/evalset):
        a function's body, or one line of it, is masked in a file that holds the module's
        imports, the function and its asserts; the filled file is then RUN, and the task
        passes if every assert holds.
    Scores per kind: exact match (ignoring trailing whitespace), edit similarity (difflib
    ratio), whether the filled file parses, pass rate (exec kinds), the share of fills that
    broke the syntax and were retried (--syntax-rounds), the share mended by parser-checked
    token edits (--syntax-edits), the share filled afresh (--syntax-restarts), mean steps and ms.
    --plot draws quality against the sampler's step cap (over --plot-tasks tasks per kind).

    Executing model output: the exec kinds run code the model wrote, in a separate
    `python -I -S` process in a temporary directory, with a time limit (--exec-timeout)
    and a memory cap. Leave the exec kinds out of --kinds to run nothing.

infill-bench speed [--model DIR]
    Model load time, engine time and end-to-end CLI time for a one-line and a ten-line fill
    in a 200-line file.

infill-bench lsp [--model DIR] [--runs 5] [--steps N] [--threads N] [--file-lines 2000,20000] [--json PATH]
    The language server as an editor sees it (lsp_server.measure): start to `initialize`
    answer, listing code actions, the first fill (loads the model), a one-line fill in a
    200-line file and in longer ones (--file-lines; with each one's ratio to the 200-line
    file's), an inline completion (medians of --runs), and the server's memory.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tqdm import tqdm

from infill.backend import DEFAULT_MODEL_DIR, Denoiser
from infill.document import Document, document_from_bytes
from infill.engine import InfillOptions, infill
from infill.errors import InputError, ModelError
from infill.evalset import EvalFunction, load_functions
from infill.models import load
from infill.repair import RepairOptions, repair
from infill.sampler import MULTI_LINE_STEPS, ONE_LINE_STEPS, ORDERS, SamplerConfig
from infill.spans import Span, line_span
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
PLOT_CAPS = (1, 2, 4, 8, 16, 32)
MEMORY_CAP = 2 * 1024**3  # bytes of address space for a program under test


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
    syntax_rounds: int = 0  # retries of a fill that broke the file's syntax (infill.syntax_remask)
    syntax_edits: int = 0  # parser-checked token edits made to it (infill.syntax_edits)
    syntax_restarts: int = 0  # fresh fills after the retries and edits left it broken
    passes: int = 0  # the model's forward passes, all of them


# --------------------------------------------------------------------------- sources and spans


def heldout_sources(limit_chars: int = 60_000) -> list[tuple[str, str]]:
    """(path, text) of the held-out packages' files that parse (200 to `limit_chars` characters),
    sorted by path."""
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
            result = repair(backend, document, [task.span], RepairOptions.from_infill(options))
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
        syntax_rounds=result.stats.syntax_rounds, syntax_edits=result.stats.syntax_edits,
        syntax_restarts=result.stats.syntax_restarts, passes=result.stats.forward_passes,
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
            "retried": statistics.mean(s.syntax_rounds > 0 for s in rows),
            "edited": statistics.mean(s.syntax_edits > 0 for s in rows),
            "restarted": statistics.mean(s.syntax_restarts > 0 for s in rows),
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


def run_quality(
    backend: Denoiser,
    args: argparse.Namespace,
    sources: list[tuple[str, str]] | None = None,
    functions: tuple[EvalFunction, ...] | None = None,
) -> dict:
    """The quality benchmark on a loaded backend; `sources` default to the held-out files."""
    if sources is None and any(k not in EXEC_KINDS for k in args.kinds):
        sources = heldout_sources()
    tasks = make_tasks(sources or [], args.kinds, args.tasks, args.seed, functions)
    rules = rule_options(args)
    config = SamplerConfig(steps=args.steps, cache_refresh=args.cache_refresh, order=args.order, **rules)
    options = InfillOptions(config, **syntax_options(args))
    scores = evaluate(backend, tasks, options, args.exec_timeout, desc="quality")
    table = summarize(scores)
    print_table(table)
    results = {"model": str(args.model or "default"), "steps_cap": args.steps, "seed": args.seed,
               "cache_refresh": args.cache_refresh, "order": args.order, **rule_options(args),
               **syntax_options(args), "table": table, "tasks": [asdict(s) for s in scores]}  # fmt: skip
    if args.plot:
        caps = [int(c) for c in args.plot_caps.split(",")]
        curve = step_curve(backend, tasks, caps, args.plot_tasks, args.exec_timeout, options)
        plot_curve(curve, args.plot, f"{results['model']}: quality against the step cap")
        results["step_curve"] = {kind: {str(c): r for c, r in rows.items()} for kind, rows in curve.items()}
        print(f"plot: {args.plot}")
    return results


SYNTAX_FLAGS = {  # InfillOptions field: what its flag (--syntax-rounds, ...) does
    "syntax_rounds": "retries of fills that break the file's syntax (0: none)",
    "syntax_edits": "then parser-checked single-token edits of fills still broken (0: none)",
    "syntax_restarts": "then fresh fills of multi-line fills still broken, with retries and edits (0: none)",
    "pass_budget": "no fresh fill starts once a fill has had this many forward passes (0: no bound)",
}


def syntax_options(args: argparse.Namespace) -> dict[str, int | None]:
    """The InfillOptions fields of the syntax flags."""
    options = {name: getattr(args, name) for name in SYNTAX_FLAGS}
    options["pass_budget"] = options["pass_budget"] or None  # 0: no bound
    return options


def rule_options(args: argparse.Namespace) -> dict[str, float | int | None]:
    """The SamplerConfig fields of the unmasking flags (--block-length, --top-p, --top-k)."""
    return {name: getattr(args, name) for name in ("block_length", "top_p", "top_k")}


def parse_kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        listed = ", ".join(unknown) or "(none)"
        raise argparse.ArgumentTypeError(f"unknown kind(s) {listed}; choose from {', '.join(KINDS)}")
    return kinds


def load_backend(args: argparse.Namespace) -> Denoiser:
    """The model --model, --device, --dtype and --threads name (infill.models.load)."""
    return load(
        args.model, args.device, args.dtype, threads=args.threads, trust_remote_code=args.trust_remote_code
    )


def quality(args: argparse.Namespace) -> dict:
    backend = load_backend(args)
    if args.kept_context:  # as the language server runs: each sampling starts from the last one's cache
        from infill.kept_context import KeptContext

        backend = KeptContext(backend)
    results = run_quality(backend, args)
    results["kept_context"] = args.kept_context
    return results


SPEED_FILE_LINES = 200


def speed_file() -> str:
    """A 200-line Python file cut from a held-out module (a real file, never trained on)."""
    long_enough = [text for _, text in heldout_sources() if text.count("\n") >= SPEED_FILE_LINES]
    text = long_enough[0]
    return "\n".join(text.split("\n")[:SPEED_FILE_LINES]) + "\n"


def speed(args: argparse.Namespace) -> dict:
    """Engine time of a one-line and a ten-line fill in a 200-line file, every pass over the whole
    canvas ("exact") against the default context cache ("cached"), and the CLI's wall time."""
    text = speed_file()
    code = code_lines(text)
    one, ten = code[len(code) // 2], code[len(code) // 2]
    started = time.perf_counter()
    backend = load_backend(args)
    load_seconds = time.perf_counter() - started
    document = document_from_bytes(text.encode())
    variants = {
        "exact": SamplerConfig(steps=args.steps, cache_refresh=1, order=args.order, **rule_options(args)),
        "cached": SamplerConfig(
            steps=args.steps, cache_refresh=args.cache_refresh, order=args.order, **rule_options(args)
        ),
    }
    results = {"load_seconds": load_seconds, "steps_cap": args.steps, "cache_refresh": args.cache_refresh,
               "order": args.order, **rule_options(args), **syntax_options(args)}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "speed.py"
        path.write_text(text)
        for name, first, last in (("one_line", one, one), ("ten_lines", ten, ten + 9)):
            spans = [line_span(text, first, last)]
            row = {}
            for variant, config in variants.items():
                options = InfillOptions(config, **syntax_options(args))
                runs = [infill(backend, document, spans, options) for _ in range(args.repeat)]
                row[f"{variant}_ms"] = 1000 * statistics.median(r.stats.seconds for r in runs)
                row[f"{variant}_steps"] = runs[-1].stats.steps
                row["positions"] = runs[-1].stats.tokens
            row["speedup"] = row["exact_ms"] / row["cached_ms"]
            command = [sys.executable, "-m", "infill.cli", str(path), "--lines", f"{first}-{last}",
                       "--cache-refresh", str(args.cache_refresh), "--syntax-rounds", str(args.syntax_rounds),
                       "--syntax-edits", str(args.syntax_edits),
                       "--syntax-restarts", str(args.syntax_restarts), "--pass-budget", str(args.pass_budget),
                       "--order", args.order]  # fmt: skip
            for option, value in rule_options(args).items():
                if value is not None:
                    command += ["--" + option.replace("_", "-"), str(value)]
            if args.steps is not None:
                command += ["--steps", str(args.steps)]
            if args.model:
                command += ["--model", str(args.model), "--device", args.device, "--dtype", args.dtype]
            if args.trust_remote_code:
                command += ["--trust-remote-code"]
            cli = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True)
                cli.append(time.perf_counter() - t)
            row["cli_ms"] = 1000 * statistics.median(cli)
            results[name] = row
    print(f"model load: {load_seconds * 1000:.0f} ms (file of {SPEED_FILE_LINES} lines); "
          f"step cap {args.steps or 'by the spans'}, "
          f"full pass every {args.cache_refresh} steps when cached")  # fmt: skip
    header = ("fill", "positions", "steps", "exact ms", "cached ms", "speed-up", "cli ms")
    print("{:10} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8}".format(*header))
    for name in ("one_line", "ten_lines"):
        r = results[name]
        steps = f"{r['exact_steps']}/{r['cached_steps']}"
        print(f"{name:10} {r['positions']:9d} {steps:>9} {r['exact_ms']:9.0f} {r['cached_ms']:10.0f} "
              f"{r['speedup']:8.1f}x {r['cli_ms']:8.0f}")  # fmt: skip
    return results


def lsp(args: argparse.Namespace) -> dict | None:
    """lsp_server.measure's numbers, printed as its table; None (and why, on stderr) if the
    server failed (a model it cannot load, a crash)."""
    from lsp_server.measure import format_table, line_counts, measure

    model = str(args.model) if args.model else None
    try:
        file_lines = line_counts(args.file_lines)
        results = measure(
            model=model, runs=args.runs, steps=args.steps, threads=args.threads, file_lines=file_lines
        )
    except argparse.ArgumentTypeError as error:
        print(f"infill-bench lsp: --file-lines: {error}", file=sys.stderr)
        return None
    except RuntimeError as error:
        print(f"infill-bench lsp: {error}", file=sys.stderr)
        return None
    print(format_table(results))
    return results


def sizes(args: argparse.Namespace) -> dict:
    """Size against speed: random-weight models of several sizes, one-line fill, fixed passes."""
    import torch

    from infill.sizes import CONTEXTS, SIZES, format_rows, measure_size
    from infill.tokenizer import CodeTokenizer

    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = CodeTokenizer.load(args.model or DEFAULT_MODEL_DIR)
    text = speed_file()
    code = code_lines(text)
    span = line_span(text, code[len(code) // 2], code[len(code) // 2])
    rows = []
    for context in CONTEXTS:
        for hidden, layers in tqdm(SIZES, desc=f"sizes (context {context})"):
            row = measure_size(tokenizer, text, span, hidden, layers, context, args.passes, args.repeat)
            rows.append(row)
    print(f"one-line fill in a {SPEED_FILE_LINES}-line file, {args.passes} passes, "
          f"{torch.get_num_threads()} threads")  # fmt: skip
    print(format_rows(rows))
    return {"passes": args.passes, "threads": torch.get_num_threads(), "rows": [r.__dict__ for r in rows]}


def shapes(args: argparse.Namespace) -> dict:
    """The published families' real shapes with random weights: pass and fill times, peak memory."""
    import torch

    from infill.models import pick_device, pick_dtype
    from infill.shapes import SHAPES, format_rows, measure_shape

    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    text = speed_file()
    code = code_lines(text)
    middle = len(code) // 2
    span, next_span = (
        line_span(text, code[middle], code[middle]),
        line_span(text, code[middle + 1], code[middle + 1]),
    )
    rows = [
        measure_shape(name, text, span, device, dtype, args.passes, args.repeat, next_span)
        for name in args.shapes
    ]
    print(f"one-line fill in a {SPEED_FILE_LINES}-line file, {args.passes} passes (a full one every "
          f"{SamplerConfig.cache_refresh}), {torch.get_num_threads()} threads, random weights")  # fmt: skip
    print(format_rows(rows))
    return {"passes": args.passes, "threads": torch.get_num_threads(), "rows": [r.__dict__ for r in rows],
            "known_shapes": list(SHAPES)}  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="infill-bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("what", choices=["quality", "speed", "lsp", "sizes", "shapes"])
    parser.add_argument("--model", type=Path, default=None,
                        help="checkpoint folder, any family infill.models.load takes "
                        "(default: the shipped model)")  # fmt: skip
    parser.add_argument("--device", default="auto", help="cuda, mps, cpu or auto")
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run the checkpoint's own modeling code (never without this flag)",
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tasks", type=int, default=100, help="quality: tasks per kind")
    kinds = ",".join(KINDS)
    parser.add_argument("--kinds", type=parse_kinds, default=kinds, help=f"quality: some of {kinds}")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"sampler step cap (default: {ONE_LINE_STEPS} for spans of one line or "
                        f"less, {MULTI_LINE_STEPS} for longer ones)")  # fmt: skip
    parser.add_argument(
        "--cache-refresh",
        type=int,
        default=SamplerConfig.cache_refresh,
        help="full pass every N steps, span-only passes on cached context between (1: exact)",
    )
    parser.add_argument("--kept-context", action="store_true",
                        help="quality: start each sampling from the last one's cache, moved (as the "
                        "language server does: infill.kept_context)")  # fmt: skip
    parser.add_argument("--order", choices=ORDERS, default=SamplerConfig.order,
                        help="the unmasking rule: which masked positions a pass commits first")  # fmt: skip
    parser.add_argument("--block-length", type=int, default=None, metavar="N",
                        help="decode spans in blocks of N positions, left to right")  # fmt: skip
    parser.add_argument("--top-p", type=float, default=None, help="sample from the top-p tokens")
    parser.add_argument("--top-k", type=int, default=None, help="sample from the top-k tokens")
    for name, help_text in SYNTAX_FLAGS.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=int, default=getattr(InfillOptions, name), help=help_text)
    parser.add_argument("--seed", type=int, default=0, help="quality: task selection seed")
    parser.add_argument("--exec-timeout", type=float, default=5.0, help="quality: seconds per executed task")
    parser.add_argument("--plot", type=Path, default=None, help="quality: PNG of quality vs. the step cap")
    parser.add_argument("--plot-tasks", type=int, default=20, help="quality: tasks per kind for --plot")
    parser.add_argument("--plot-caps", default=",".join(map(str, PLOT_CAPS)), help="quality: caps for --plot")
    parser.add_argument("--repeat", type=int, default=3, help="speed: runs per measurement (median)")
    parser.add_argument("--passes", type=int, default=12, help="sizes, shapes: denoising passes per fill")
    parser.add_argument(
        "--shapes",
        type=lambda v: v.split(","),
        default=["open-dcoder-0.5b"],
        help="shapes: which of open-dcoder-0.5b, dream-7b, llada-8b (comma-separated)",
    )
    parser.add_argument("--runs", type=int, default=5, help="lsp: fills and completions (median)")
    parser.add_argument("--file-lines", default="2000,20000", metavar="N,N",
                        help="lsp: other file lengths to time the one-line fill in, against the "
                        "200-line file (default 2000,20000; '' for none)")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="also write the results (every task) here")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.what == "lsp" and args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        modes = {"quality": quality, "speed": speed, "lsp": lsp, "sizes": sizes, "shapes": shapes}
        results = modes[args.what](args)
    except ModelError as error:
        print(f"infill-bench: model error: {error}", file=sys.stderr)
        return 3
    if results is None:
        return 1
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
