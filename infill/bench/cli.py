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
      exec-body, exec-line: from this project's execution-checked set (infill/bench/evalset):
        a function's body, or one line of it, is masked in a file that holds the module's
        imports, the function and its asserts; the filled file is then RUN, and the task
        passes if every assert holds.
    Scores per kind: exact match (ignoring trailing whitespace), edit similarity (difflib
    ratio), whether the filled file parses, pass rate (exec kinds), the share of fills that
    broke the syntax and were retried (--retries), the share mended by parser-checked
    token edits (--token-edits), the share filled afresh (--fresh-fills), mean steps and ms.
    --plot draws quality against the sampler's step cap (over --plot-tasks tasks per kind).

    Executing model output: the exec kinds run code the model wrote, in a separate
    `python -I -S` process in a temporary directory, with a time limit (--exec-timeout)
    and a memory cap. Leave the exec kinds out of --kinds to run nothing.

infill-bench speed [--model DIR]
    Model load time, engine time and end-to-end CLI time for a one-line and a ten-line fill
    in a 200-line file.

infill-bench drift [--model DIR] [--tasks 100] [--seed 0] [--json PATH]
    Fills on the language server's kept context against exact fills, on held-out lines: the
    code line 3 lines above each is filled and accepted first, then the line is filled exactly,
    on the stale kept context and on the context after the idle refresh (infill.bench.drift):
    the share of fills identical to the exact one, exact matches, positions computed.

infill-bench review [--model DIR] [--files 10] [--clean 20] [--seed 0] [--kinds operator,...]
                    [--window 30] [--threads T] [--json PATH]
    Held-out windows (--window lines) with one injected bug each (infill.bench.bugs):
    operator, off-by-one, variable, arguments, not (--files tasks per kind), and --clean
    unmodified windows; each reviewed once (infill.modes.review, every code token scored
    masked). Top-1 / top-5 localization (the bug among the k most doubted tokens) of the
    model, a token-frequency ranker and a random one; precision and recall of the findings
    and false findings per 100 clean lines, over a sweep of thresholds (scored once): the
    default threshold is the one with at most 1 false finding per 100 clean lines and the
    best recall; time per 100 lines.

infill-bench serve [--clients 1,2,4,8,16] [--seconds 30] [--soak SECONDS] [--soak-clients 8]
                   [--url URL --token T | --in-process [--shapes dream-7b] [--kept-context]] [--threads 2]
                   [--json PATH] [--plot PATH]
    A team server (`infill serve`, started here unless --url names one) under N editors at
    once, each asking for the next one-line fill of a held-out file when its last one came
    back: fills/s, latency p50/p95/p99, rows per forward pass, failures and the replica's
    memory per level, each against one client's; --soak: memory over a long run
    (infill.bench.serve).

infill-bench lsp [--model DIR] [--runs 5] [--steps N] [--threads N] [--file-lines 2000,20000] [--json PATH]
    The language server as an editor sees it (lsp_server.measure): start to `initialize`
    answer, listing code actions, the first fill (loads the model), a one-line fill in a
    200-line file and in longer ones (--file-lines; with each one's ratio to the 200-line
    file's), an inline completion (medians of --runs), and the server's memory.
"""


from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

from infill.bench.bugs import BUG_KINDS, WINDOW_LINES
from infill.bench.quality import PLOT_CAPS, REPAIR_FLAGS, engine_options, rule_options, run_quality
from infill.bench.sizes import CONTEXTS, SIZES, parse_sizes
from infill.bench.tasks import KINDS, code_lines, heldout_sources, make_tasks
from infill.cli import add_renamed_flags
from infill.engine.batching import SCHEDULES
from infill.errors import ModelError
from infill.models import load
from infill.models.base import Denoiser
from infill.models.native import DEFAULT_MODEL_DIR
from infill.modes.fill import infill
from infill.options import (
    MULTI_LINE_STEPS,
    ONE_LINE_STEPS,
    ORDERS,
    QUANTIZE_MODES,
    InfillOptions,
    SamplerConfig,
)
from infill.text.document import document_from_bytes
from infill.text.spans import line_span


def parse_kinds(text: str, known: tuple[str, ...] = KINDS) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in known]
    if unknown or not kinds:
        listed = ", ".join(unknown) or "(none)"
        raise argparse.ArgumentTypeError(f"unknown kind(s) {listed}; choose from {', '.join(known)}")
    return kinds


def any_kinds(text: str) -> list[str]:
    """--kinds: quality's task kinds or review's bug kinds (each command checks its own)."""
    return parse_kinds(text, (*KINDS, *BUG_KINDS))


def load_backend(args: argparse.Namespace) -> Denoiser:
    """The model --model, --device, --dtype, --quantize and --threads name (infill.models.load)."""
    return load(
        args.model,
        args.device,
        args.dtype,
        threads=args.threads,
        trust_remote_code=args.trust_remote_code,
        quantize=args.quantize,
    )


def quality(args: argparse.Namespace) -> dict:
    backend = load_backend(args)
    if args.kept_context:  # as the language server runs: each sampling starts from the last one's cache
        from infill.engine.kept_context import KeptContext

        backend = KeptContext(backend)
    results = run_quality(backend, args)
    results["kept_context"] = args.kept_context
    results["quantize"], results["dtype"] = args.quantize, args.dtype  # as asked ("auto": infill chose)
    return results


def review(args: argparse.Namespace) -> dict:
    """Injected bugs found by review mode, against a frequency and a random ranker
    (infill.bench.review)."""
    import torch

    from infill.bench.bugs import make_review_tasks
    from infill.bench.review import format_sweep, format_table, measure

    kinds = [k for k in args.kinds if k in BUG_KINDS] if args.kinds_given else list(BUG_KINDS)
    if not kinds:
        raise SystemExit(f"infill-bench review: --kinds takes some of {', '.join(BUG_KINDS)}")
    tasks = make_review_tasks(heldout_sources(), kinds, args.files, args.clean, args.seed, args.window)
    backend = load_backend(args)
    results = measure(backend, tasks, kinds)
    print(format_table(results["table"], results["chosen_threshold"]))
    print(format_sweep(results["sweep"], results["chosen_threshold"]))
    threads = torch.get_num_threads()
    print(f"{len(tasks)} windows, {sum(t.lines for t in tasks)} lines; {threads} threads")
    return {"model": str(args.model or "default"), "seed": args.seed, "files_per_kind": args.files,
            "clean_windows": args.clean, "window_lines": args.window, "threads": threads,
            **results}  # fmt: skip


def drift(args: argparse.Namespace) -> dict:
    """Fills on the language server's kept context against exact ones (infill.bench.drift)."""
    from dataclasses import asdict

    from infill.bench.drift import format_drift, measure_drift, summarize_drift

    backend = load_backend(args)
    tasks = make_tasks(heldout_sources(), ["line"], args.tasks, args.seed)
    config = SamplerConfig(steps=args.steps, cache_refresh=args.cache_refresh, order=args.order,
                           **rule_options(args))  # fmt: skip
    options = InfillOptions(config, **engine_options(args))
    rows = measure_drift(backend, tasks, options)
    table = summarize_drift(rows)
    print(format_drift(table))
    return {"model": str(args.model or "default"), "seed": args.seed, "table": table,
            "rows": [asdict(row) for row in rows]}  # fmt: skip


SPEED_FILE_LINES = 200
SIZE_PASSES = 12  # sizes: passes per fill
SHAPE_PASSES = (4, 8, 16)  # shapes: fills timed at these pass counts (issue 27's table)
DEFAULT_SHAPE = "open-dcoder-0.5b"  # shapes, loading: the shape measured when none is named


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
               "order": args.order, **rule_options(args), **engine_options(args)}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "speed.py"
        path.write_text(text)
        for name, first, last in (("one_line", one, one), ("ten_lines", ten, ten + 9)):
            spans = [line_span(text, first, last)]
            row = {}
            for variant, config in variants.items():
                options = InfillOptions(config, **engine_options(args))
                runs = [infill(backend, document, spans, options) for _ in range(args.repeat)]
                row[f"{variant}_ms"] = 1000 * statistics.median(r.stats.seconds for r in runs)
                row[f"{variant}_steps"] = runs[-1].stats.steps
                row["positions"] = runs[-1].stats.tokens
            row["speedup"] = row["exact_ms"] / row["cached_ms"]
            command = [sys.executable, "-m", "infill.cli", str(path), "--lines", f"{first}-{last}",
                       "--cache-refresh", str(args.cache_refresh), "--retries", str(args.retries),
                       "--token-edits", str(args.token_edits),
                       "--fresh-fills", str(args.fresh_fills), "--pass-budget", str(args.pass_budget),
                       "--order", args.order, *([] if args.recall else ["--no-recall"])]  # fmt: skip
            for option, value in rule_options(args).items():
                if value is True:  # a flag
                    command += ["--" + option.replace("_", "-")]
                elif value not in (None, False):
                    command += ["--" + option.replace("_", "-"), str(value)]
            if args.steps is not None:
                command += ["--steps", str(args.steps)]
            if args.model:
                command += ["--model", str(args.model), "--device", args.device, "--dtype", args.dtype]
            if args.trust_remote_code:
                command += ["--trust-remote-code"]
            command += ["--quantize", args.quantize]
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
        results = measure(model=model, runs=args.runs, steps=args.steps, threads=args.threads,
                          file_lines=file_lines, quantize=args.quantize, dtype=args.dtype)  # fmt: skip
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

    from infill.bench.sizes import format_rows, measure_size
    from infill.models.native.tokenizer import CodeTokenizer

    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = CodeTokenizer.load(args.model or DEFAULT_MODEL_DIR)
    text = speed_file()
    code = code_lines(text)
    span = line_span(text, code[len(code) // 2], code[len(code) // 2])
    if args.passes is not None and len(args.passes) > 1:
        raise SystemExit("infill-bench sizes: --passes takes one count")
    passes = args.passes[0] if args.passes else SIZE_PASSES
    rows = []
    for context in args.contexts:
        for hidden, layers in tqdm(args.sizes, desc=f"sizes (context {context})"):
            row = measure_size(tokenizer, text, span, hidden, layers, context, passes, args.repeat)
            rows.append(row)
    print(f"one-line fill in a {SPEED_FILE_LINES}-line file, {passes} passes, "
          f"{torch.get_num_threads()} threads")  # fmt: skip
    print(format_rows(rows))
    return {"passes": passes, "threads": torch.get_num_threads(), "rows": [r.__dict__ for r in rows]}


def shapes(args: argparse.Namespace) -> dict:
    """The published families' real shapes with random weights: pass and fill times, peak memory."""
    import torch

    from infill.bench.shapes import SHAPES, TINY_SHAPES, format_rows, measure_shape
    from infill.models import pick_device, pick_dtype
    from infill.models.quantize import check_quantizable, check_quantize

    if args.threads:
        torch.set_num_threads(args.threads)
    check_quantize(args.quantize, args.device)
    device = pick_device(args.device)
    dtype = pick_dtype(args.dtype, device)
    check_quantizable(args.quantize, dtype, args.trust_remote_code)
    text = speed_file()
    code = code_lines(text)
    middle = len(code) // 2
    span, next_span = (
        line_span(text, code[middle], code[middle]),
        line_span(text, code[middle + 1], code[middle + 1]),
    )
    names = list(TINY_SHAPES) if args.tiny else args.shapes or [DEFAULT_SHAPE]
    unknown = [name for name in names if name not in SHAPES and name not in TINY_SHAPES]
    if unknown:
        raise SystemExit(f"infill-bench shapes: unknown shape(s) {', '.join(unknown)}; "
                         f"known: {', '.join([*SHAPES, *TINY_SHAPES])}")  # fmt: skip
    passes = args.passes or SHAPE_PASSES
    rows = [
        measure_shape(name, text, span, device, dtype, passes, args.repeat, next_span, args.quantize,
                      args.context_length, rule_options(args), args.line_tokens)
        for name in tqdm(names, desc="shapes")
    ]  # fmt: skip
    print(f"one-line fill in a {SPEED_FILE_LINES}-line file at {', '.join(map(str, passes))} passes, "
          f"{torch.get_num_threads()} threads, random weights; fill: the first in the document, "
          "next: the next line's, on the document's kept context")  # fmt: skip
    print(format_rows(rows))
    return {"passes": list(passes), "threads": torch.get_num_threads(), "rows": [r.__dict__ for r in rows],
            "known_shapes": [*SHAPES, *TINY_SHAPES]}  # fmt: skip


def loading(args: argparse.Namespace) -> dict:
    """The peak memory of loading a real-size checkpoint (written once, random), in a fresh process."""
    from infill.bench.loading import format_rows, measure_loading, write_checkpoint

    if args.checkpoint_dir is None:
        raise SystemExit("infill-bench loading: --checkpoint-dir DIR (where the checkpoint is, or goes)")
    rows = []
    for name in args.shapes or [DEFAULT_SHAPE]:
        folder = args.checkpoint_dir / name
        write_checkpoint(name, folder)
        rows.append(measure_loading(name, folder, args.quantize, args.threads))
        if args.quantize == "int4":  # the packed network kept on disk: written, then read back
            rows.append(measure_loading(name, folder, args.quantize, args.threads, keep=True))
            rows.append(measure_loading(name, folder, args.quantize, args.threads, keep=True))
    print(f"loading a random bfloat16 checkpoint in the published layout, {args.threads or 'all'} threads")
    print(format_rows(rows))
    return {"rows": [r.__dict__ for r in rows]}


def serve(args: argparse.Namespace) -> dict | None:
    """A team server under load: fills/s and latency by clients, then the soak (infill.bench.serve)."""
    from infill.bench.serve import HttpTarget, LocalServer, bearer, bench_serve, plot, setting_names

    clients = [int(part) for part in args.clients.split(",")]
    if not clients or min(clients) < 1 or args.seconds <= 0 or args.soak < 0 or args.soak_clients < 1:
        print("infill-bench serve: --clients are counts of 1 or more, --seconds above 0", file=sys.stderr)
        return None
    server = None
    try:
        if args.in_process:
            target = in_process_target(args)
            where = f"in-process batching driver, schedule {target.driver.schedule}"
        elif args.url:
            target = HttpTarget(args.url, bearer(args.token), setting_names(sampler_rules(args)))
            where = args.url
        else:
            log = Path(tempfile.gettempdir()) / "infill-bench-serve.log"
            server = LocalServer(args.threads or 2, str(args.model) if args.model else None, log,
                                 args.schedule)  # fmt: skip
            print(f"infill-bench serve: starting `infill serve` on {server.url} (log: {log})",
                  file=sys.stderr)  # fmt: skip
            server.wait()
            target = HttpTarget(server.url, {}, setting_names(sampler_rules(args)))
            where = f"infill serve --threads {args.threads or 2} --schedule {args.schedule}"
        result = bench_serve(target, clients, args.seconds, args.soak, args.soak_clients, where)
    except RuntimeError as error:
        print(f"infill-bench serve: {error}", file=sys.stderr)
        return None
    finally:
        if server is not None:
            server.stop()
        if args.in_process and "target" in locals():
            target.close()
    if args.plot:
        plot(result, args.plot)
    return result


def in_process_target(args: argparse.Namespace):
    """--in-process: the batching driver over the model (or the --shapes shape, random weights)."""
    from infill.bench.serve import DriverTarget, random_weight_options, with_sampler
    from infill.models import load
    from infill.options import InfillOptions

    rules = sampler_rules(args)

    if args.shapes or args.tiny:  # a shape asked for: random weights
        import torch

        from infill.bench.shapes import random_denoiser

        name = (args.shapes or [DEFAULT_SHAPE])[0] + ("-tiny" if args.tiny else "")
        device = torch.device("cuda" if args.device == "cuda" or (args.device == "auto"
                              and torch.cuda.is_available()) else "cpu")  # fmt: skip
        dtype = torch.bfloat16 if args.dtype in ("auto", "bfloat16") else getattr(torch, args.dtype)
        if args.threads:
            torch.set_num_threads(args.threads)
        denoiser = random_denoiser(name, device, dtype, args.quantize)
        options = with_sampler(random_weight_options(), rules)
        return DriverTarget(denoiser, options, args.kept_context, args.schedule)
    denoiser = load(str(args.model) if args.model else None, args.device, args.dtype, threads=args.threads,
                    quantize=args.quantize)  # fmt: skip
    return DriverTarget(denoiser, with_sampler(InfillOptions(), rules), args.kept_context, args.schedule)


def sampler_rules(args: argparse.Namespace) -> dict:
    """The unmasking flags given (--block-length, --block-passes, --top-p, --top-k), as SamplerConfig
    fields: what every fill of `infill-bench serve` asks for beside the engine's defaults."""
    from infill.bench.quality import rule_options

    return {name: value for name, value in rule_options(args).items() if value not in (None, False)}


def pass_counts(text: str) -> tuple[int, ...]:
    """--passes: comma-separated pass counts, each at least 1."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of pass counts: {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"pass counts must be at least 1: {text!r}")
    return counts


def size_list(text: str) -> list[tuple[int, int]]:
    try:
        return parse_sizes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="infill-bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    commands = ["quality", "speed", "lsp", "sizes", "shapes", "loading", "drift", "review", "serve"]
    parser.add_argument("what", choices=commands)
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
    parser.add_argument("--quantize", choices=QUANTIZE_MODES, default="auto",
                        help="int4 / int8: the linear layers' weights in 4 / 8 bits (CPU; int8 float32 "
                        "only); auto: for models of 100M parameters or more on the CPU, int8 where it "
                        "fits in half the memory, else int4")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tasks", type=int, default=100, help="quality: tasks per kind; drift: lines")
    kinds = ",".join(KINDS)
    parser.add_argument("--kinds", type=any_kinds, default=None,
                        help=f"quality: some of {kinds}; review: some of {','.join(BUG_KINDS)} "
                        "(default: all)")  # fmt: skip
    parser.add_argument("--files", type=int, default=10, help="review: bug windows per kind")
    parser.add_argument("--clean", type=int, default=20, help="review: unmodified windows")
    parser.add_argument("--window", type=int, default=WINDOW_LINES, metavar="LINES",
                        help="review: lines a window holds (default %(default)s)")  # fmt: skip
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
                        "language server does: infill.engine.kept_context); serve --in-process: each "
                        "client keeps its document's context between its fills")  # fmt: skip
    parser.add_argument("--order", choices=ORDERS, default=SamplerConfig.order,
                        help="the unmasking rule: which masked positions a pass commits first")  # fmt: skip
    parser.add_argument("--block-length", type=int, default=None, metavar="N",
                        help="decode spans in blocks of N positions, left to right")  # fmt: skip
    parser.add_argument("--block-passes", action="store_true",
                        help="with --block-length: a cached pass computes the current block alone")
    parser.add_argument("--line-tokens", type=int, default=None, metavar="N",
                        help="shapes: the span is a line of N tokens (the engine's budget for it), and "
                        "the fills' first pass decides N, as a trained network's does (random weights "
                        "never decide a length: by default a fill denoises the line's whole budget)")
    parser.add_argument("--top-p", type=float, default=None, help="sample from the top-p tokens")
    parser.add_argument("--top-k", type=int, default=None, help="sample from the top-k tokens")
    for name, help_text in REPAIR_FLAGS.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=int, default=getattr(InfillOptions, name), help=help_text)
    add_renamed_flags(parser)
    parser.add_argument("--source", type=Path, default=None, metavar="DIR",
                        help="quality: tasks from the files of the repository DIR that `infill-train "
                        "finetune` holds out (default: this project's held-out packages)")
    parser.add_argument("--no-recall", dest="recall", action="store_false",
                        help="one-line fills never take a line of the file (infill.engine.recall)")
    parser.add_argument("--context-length", type=int, default=None, metavar="N",
                        help="quality, speed, shapes: the model's window in tokens (default: the "
                        "model's own; shapes: the device's)")
    parser.add_argument("--seed", type=int, default=0, help="quality, drift, review: task selection seed")
    parser.add_argument("--exec-timeout", type=float, default=5.0, help="quality: seconds per executed task")
    parser.add_argument("--plot", type=Path, default=None, help="quality: PNG of quality vs. the step cap")
    parser.add_argument("--plot-tasks", type=int, default=20, help="quality: tasks per kind for --plot")
    parser.add_argument("--plot-caps", default=",".join(map(str, PLOT_CAPS)), help="quality: caps for --plot")
    parser.add_argument("--repeat", type=int, default=3, help="speed: runs per measurement (median)")
    parser.add_argument("--passes", type=pass_counts, default=None, metavar="N,...",
                        help=f"sizes: denoising passes per fill (default {SIZE_PASSES}); shapes: the pass "
                        f"counts to time fills at (default {','.join(map(str, SHAPE_PASSES))})")  # fmt: skip
    parser.add_argument("--sizes", type=size_list, default=list(SIZES), metavar="HxL,...",
                        help="sizes: hidden size x layers of each model to time (default: "
                        + ",".join(f"{h}x{n}" for h, n in SIZES) + ")")  # fmt: skip
    parser.add_argument("--contexts", type=lambda v: [int(c) for c in v.split(",")], default=list(CONTEXTS),
                        metavar="N,...", help="sizes: canvas lengths in tokens (default: "
                        + ",".join(map(str, CONTEXTS)) + ")")  # fmt: skip
    parser.add_argument(
        "--shapes",
        type=lambda v: v.split(","),
        default=None,
        help="shapes, loading: which of open-dcoder-0.5b, dream-7b, llada-8b (comma-separated; "
        "default open-dcoder-0.5b); serve --in-process: the first, with random weights, instead of the model",
    )
    parser.add_argument("--checkpoint-dir", type=Path, default=None, metavar="DIR",
                        help="loading: where each shape's random checkpoint is written once (15 GB for "
                        "dream-7b) and read from")  # fmt: skip
    parser.add_argument("--tiny", action="store_true",
                        help="shapes: every family's 2-layer, width-64 stand-in instead (seconds; for CI)")
    parser.add_argument("--runs", type=int, default=5, help="lsp: fills and completions (median)")
    parser.add_argument("--file-lines", default="2000,20000", metavar="N,N",
                        help="lsp: other file lengths to time the one-line fill in, against the "
                        "200-line file (default 2000,20000; '' for none)")  # fmt: skip
    parser.add_argument("--clients", default="1,2,4,8,16", metavar="N,...",
                        help="serve: editors asking at once, one level each (default 1,2,4,8,16)")
    parser.add_argument("--seconds", type=float, default=30.0, help="serve: seconds each level runs")
    parser.add_argument("--soak", type=float, default=0.0, metavar="SECONDS",
                        help="serve: then run --soak-clients clients this long, sampling the memory")
    parser.add_argument("--soak-clients", type=int, default=8, help="serve: clients of the soak (default 8)")
    parser.add_argument("--url", default=None, help="serve: a running team server (default: start one here)")
    parser.add_argument("--in-process", action="store_true",
                        help="serve: the batching driver in this process, no HTTP or Ray (with --shapes "
                        "NAME: that shape with random weights)")  # fmt: skip
    parser.add_argument("--token", default=None, help="serve: its bearer token")
    parser.add_argument("--schedule", default="auto", choices=SCHEDULES,
                        help="serve: the batching driver's schedule, in-process or in the server "
                        "started here (infill serve --schedule; default auto)")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None,
                        help="also write the results (every task) here; gzip-compressed if PATH ends in .gz")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.kinds_given = args.kinds is not None
    if args.what != "review":  # quality's kinds (the default: all of them)
        try:
            args.kinds = parse_kinds(",".join(args.kinds) if args.kinds_given else ",".join(KINDS))
        except argparse.ArgumentTypeError as error:
            parser.error(f"argument --kinds: {error}")
    if args.what == "lsp" and args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        modes = {"quality": quality, "speed": speed, "lsp": lsp, "sizes": sizes, "shapes": shapes,
                 "loading": loading, "drift": drift, "review": review, "serve": serve}  # fmt: skip
        results = modes[args.what](args)
    except ModelError as error:
        print(f"infill-bench: model error: {error}", file=sys.stderr)
        return 3
    if results is None:
        return 1
    if args.json:
        write_json(args.json, results)
    return 0


def write_json(path: Path, results: dict) -> None:
    """The results as JSON; gzip-compressed where `path` ends in .gz (review's every scored token)."""
    text = json.dumps(results, indent=1)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
