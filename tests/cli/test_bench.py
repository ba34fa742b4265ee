"""infill-bench: the execution-checked set, task cutting, metrics, execution, JSON and plot."""

from __future__ import annotations

import ast
import difflib
import importlib
import inspect
import json
import random
import re
import subprocess
import sys
import time

import pytest
import torch
from int4_builds import OTHER_CPUS, built_for

from infill import bench
from infill.bench import cli as bench_cli
from infill.bench import cpu_peaks
from infill.bench import quality as bench_quality
from infill.bench import shapes as bench_shapes
from infill.bench import tasks as bench_tasks
from infill.bench.evalset import MODULES, load_functions
from infill.bench.quality import Score, judge, normalized, percentile, run_program, summarize
from infill.bench.tasks import Task, make_tasks, span_candidates
from infill.options import InfillOptions

SOURCE = '''"""A module."""

import math


def area(radius):
    """Area of a circle.

    Uses math.pi."""
    squared = radius * radius
    return math.pi * squared


def one_liner(x): return x


class Shape:
    def describe(self, name):
        """Say what it is."""
        # shout it
        text = f"a {name}"
        return text.upper()
'''

LINES = SOURCE.split("\n")


def texts(kind: str, text: str = SOURCE) -> list[str]:
    return [text[a:b] for a, b in span_candidates(kind, text)]


# --------------------------------------------------------------------------- the execution-checked set


def test_the_set_has_100_functions_that_pass_their_own_asserts():
    functions = load_functions()
    assert len(functions) >= 100
    assert len({f.qualified_name for f in functions}) == len(functions)
    for f in functions:
        assert 2 <= f.assert_count <= 5, f.qualified_name
        definition = ast.parse(f.source).body[0]
        methods = [n for n in definition.body if isinstance(n, ast.FunctionDef)]
        assert ast.get_docstring(definition) or any(map(ast.get_docstring, methods)), f.qualified_name
        exec(compile(f.program, f"<{f.qualified_name}>", "exec"), {"__name__": "evalset"})  # passes
        for kind in ("exec-body", "exec-line"):
            assert span_candidates(kind, f.program, f.source_range), (kind, f.qualified_name)
        assert f.program[slice(*f.source_range)] == f.source


def test_the_set_modules_import_and_run_their_asserts():
    for module in MODULES:
        importlib.import_module(f"infill.bench.evalset.{module}")


# --------------------------------------------------------------------------- cutting tasks


def test_body_and_docstring_spans_are_what_a_task_expects():
    assert texts("body") == [
        "    squared = radius * radius\n    return math.pi * squared",
        '        text = f"a {name}"\n        return text.upper()',  # the comment before it stays context
    ]  # one_liner's body shares the def line: skipped
    assert texts("docstring") == ["Area of a circle.\n\n    Uses math.pi.", "Say what it is."]
    assert texts("exec-body") == texts("body")
    assert texts("exec-line") == [
        "    squared = radius * radius",
        "    return math.pi * squared",
        '        text = f"a {name}"',
        "        return text.upper()",
    ]


def test_line_and_block_tasks_are_whole_code_lines():
    tasks = make_tasks([("m.py", SOURCE)], ["line", "block"], 8, seed=3)
    assert [t.kind for t in tasks] == ["line"] * 8 + ["block"] * 8
    for task in tasks:
        assert task.expected == SOURCE[task.start : task.end]
        assert task.start == 0 or SOURCE[task.start - 1] == "\n"
        assert SOURCE[task.end] == "\n"
        lines = task.expected.split("\n")
        assert len(lines) == 1 if task.kind == "line" else 2 <= len(lines) <= 6
        for line in (lines[0], lines[-1]):
            assert line in LINES and line.strip() and not line.strip().startswith("#")
        assert '"""' not in task.expected and "Uses math.pi." not in task.expected  # not in a docstring


def test_task_selection_is_seeded_and_per_kind():
    sources = [("m.py", SOURCE), ("n.py", SOURCE.replace("radius", "r"))]
    kinds = ["line", "block", "body", "docstring"]
    first = make_tasks(sources, kinds, 5, seed=1)
    assert first == make_tasks(sources, kinds, 5, seed=1)
    assert [(t.path, t.start) for t in first if t.kind == "body"] == [
        (t.path, t.start) for t in make_tasks(sources, ["body"], 5, seed=1)
    ]  # a kind's tasks do not depend on the other kinds asked for
    assert first != make_tasks(sources, kinds, 5, seed=2)
    spans = [(t.kind, t.path, t.start, t.end) for t in make_tasks(sources, kinds, 20, seed=1)]
    assert len(spans) == len(set(spans))  # no task twice, though 20 tasks from 2 files repeat draws


def test_exec_tasks_mask_part_of_a_function_of_the_set_not_of_its_helpers():
    functions = tuple(f for f in load_functions() if f.module == "errors")[:6]  # with _helpers around
    assert all("def _raises" in f.preamble for f in functions)
    tasks = make_tasks([], ["exec-body", "exec-line"], 4, seed=0, functions=functions)
    assert [t.kind for t in tasks] == ["exec-body"] * 4 + ["exec-line"] * 4
    programs = {f"evalset:{f.qualified_name}": f for f in functions}
    for task in tasks:
        function = programs[task.path]
        assert task.text == function.program and task.executes
        assert task.filled(task.expected) == task.text
        first, last = function.source_range
        assert first <= task.start < task.end <= last
        assert "assert " not in task.expected and '"""' not in task.expected
    bodies = {t.path: t.expected for t in tasks if t.kind == "exec-body"}
    for path, body in bodies.items():
        source = programs[path].source
        assert source.endswith(body) or source.startswith("class ")


# --------------------------------------------------------------------------- metrics


def line_task() -> Task:
    start = SOURCE.index("    squared")
    return Task("line", "m.py", SOURCE, start, SOURCE.index("\n", start))


def test_exact_match_ignores_trailing_whitespace_only():
    task = line_task()
    assert task.expected == "    squared = radius * radius"
    assert judge(task, "    squared = radius * radius  \n")["exact"]
    assert not judge(task, "squared = radius * radius")["exact"]
    assert normalized("a  \nb\t\n\n") == "a\nb"


def test_similarity_and_parses_on_hand_made_fills():
    task = line_task()
    perfect = judge(task, task.expected)
    assert perfect == {"exact": True, "similarity": 1.0, "parses": True}
    close = judge(task, "    squared = radius ** 2")
    expected_ratio = difflib.SequenceMatcher(None, task.expected, "    squared = radius ** 2").ratio()
    assert close == {"exact": False, "similarity": pytest.approx(expected_ratio), "parses": True}
    assert 0.5 < close["similarity"] < 1
    broken = judge(task, "    squared = (radius")
    assert broken["parses"] is False and broken["exact"] is False
    assert judge(task, "")["similarity"] == 0.0


def test_summary_averages_per_kind():
    def score(kind, exact, similarity, parses, passed, steps, rounds=0, edits=0, restarts=0):
        return Score(kind, "p", 0, 1, "x", "y", exact, similarity, parses, passed, steps, ms=10.0 * steps,
                     retries=rounds, token_edits=edits, fresh_fills=restarts,
                     passes=steps + rounds)  # fmt: skip

    table = summarize([
        score("line", True, 1.0, True, None, 2),
        score("line", False, 0.5, False, None, 4, rounds=3, edits=2, restarts=1),
        score("exec-body", False, 0.25, True, True, 8),
        score("exec-body", False, 0.75, True, False, 8),
    ])  # fmt: skip
    assert list(table) == ["line", "exec-body"]
    assert table["line"] == {"tasks": 2, "exact_match": 0.5, "edit_similarity": 0.75, "parses": 0.5,
                             "pass_rate": None, "mean_steps": 3, "retried": 0.5, "edited": 0.5,
                             "restarted": 0.5, "mean_ms": 30.0, "p90_ms": 40.0, "max_ms": 40.0,
                             "mean_passes": 4.5, "max_passes": 7}  # fmt: skip
    assert table["exec-body"]["pass_rate"] == 0.5
    assert table["exec-body"]["edit_similarity"] == 0.5


def test_percentile_is_the_nearest_rank():
    values = [float(v) for v in range(1, 11)]  # 1..10
    assert (percentile(values, 0.9), percentile(values, 0.5), percentile(values, 1.0)) == (9.0, 5.0, 10.0)
    assert percentile([3.0], 0.9) == 3.0 and percentile(values, 0.0) == 1.0


def test_a_fix_task_swaps_one_code_token_for_another_of_the_same_file():
    text = 'def f(alpha, beta):\n    total = alpha + beta  # sum\n    return str(total) + "!"\n'
    line = "    total = alpha + beta  # sum"
    start = text.index(line)
    seen = set()
    for seed in range(40):
        task = bench_tasks.corrupted(Task("line", "p", text, start, start + len(line)), random.Random(seed))
        assert task is not None and task.kind == "fix" and task.expected == line
        bad = task.text[task.start : task.end]
        assert task.text == text[:start] + bad + text[start + len(line) :]
        assert bad.endswith("  # sum") and bad != line  # the comment is never touched
        old, new = (re.findall(r"\w+|[^\w\s]", x) for x in (line, bad))
        [(was, now)] = [(a, b) for a, b in zip(old, new, strict=True) if a != b]  # one token swapped
        assert now in set(re.findall(r"\w+|[^\w\s]", text))  # for one of the same file
        assert now.isidentifier() == was.isidentifier()  # a name for a name, a symbol for a symbol
        seen.add(now)
    assert len(seen) > 3
    task = Task("line", "p", 'x = "a b"\n', 0, 9)
    assert bench_tasks.corrupted(task, random.Random(0)).answer == 'x = "a b"'


# --------------------------------------------------------------------------- execution


@pytest.fixture(scope="module")
def clamp_task() -> Task:
    (clamp,) = [f for f in load_functions() if f.name == "clamp"]
    (task,) = make_tasks([], ["exec-body"], 1, functions=(clamp,))
    assert task.expected == "    return max(low, min(high, value))"
    return task


def test_exec_scoring_passes_a_correct_body_and_fails_a_broken_one(clamp_task):
    assert run_program(clamp_task.filled(clamp_task.expected)) == (True, None)
    also_right = clamp_task.filled("    return min(high, max(low, value))")
    assert run_program(also_right) == (True, None)
    passed, why = run_program(clamp_task.filled("    return value"))
    assert not passed and why.startswith("AssertionError")
    passed, why = run_program(clamp_task.filled("    return max(low, min(high, value)"))
    assert not passed and "SyntaxError" in why


def test_exec_scoring_stops_a_program_that_runs_too_long(clamp_task):
    passed, why = run_program(clamp_task.filled("    while True:\n        pass"), timeout=1)
    assert (passed, why) == (False, "timeout after 1 s")


# --------------------------------------------------------------------------- the command


def test_quality_with_the_kept_context_runs_as_the_server_does(tiny_backend, monkeypatch, tmp_path):
    monkeypatch.setattr(bench_cli, "load_backend", lambda *args, **kwargs: tiny_backend)
    monkeypatch.setattr(bench_quality, "heldout_sources", lambda: [("sample.py", SOURCE)])
    out = tmp_path / "results.json"
    argv = [
        "quality",
        "--kinds",
        "block",
        "--tasks",
        "2",
        "--steps",
        "4",
        "--kept-context",
        "--json",
        str(out),
    ]
    assert bench.main(argv) == 0
    results = json.loads(out.read_text())
    assert results["kept_context"] is True and results["table"]["block"]["tasks"] == 2


@pytest.mark.slow
def test_quality_command_prints_a_table_and_writes_json_and_a_plot(
    tiny_backend, monkeypatch, tmp_path, capsys
):
    monkeypatch.setattr(bench_cli, "load_backend", lambda *args, **kwargs: tiny_backend)
    monkeypatch.setattr(bench_quality, "heldout_sources", lambda: [("sample.py", SOURCE)])
    out, png = tmp_path / "results.json", tmp_path / "curve.png"
    argv = ["quality", "--tasks", "2", "--steps", "4", "--json", str(out), "--plot", str(png),
            "--plot-tasks", "1", "--plot-caps", "1,2", "--exec-timeout", "3"]  # fmt: skip
    assert bench.main(argv) == 0

    printed = capsys.readouterr().out
    header = ["kind", "tasks", "exact", "edit-sim", "parses", "pass", "retried", "edited", "afresh"]
    header += ["steps", "ms", "p90", "ms"]
    assert printed.splitlines()[0].split() == header
    results = json.loads(out.read_text())
    assert list(results["table"]) == list(bench_tasks.KINDS)
    assert all(row["tasks"] == 2 for row in results["table"].values())
    assert len(results["tasks"]) == 2 * len(bench_tasks.KINDS)
    for task in results["tasks"]:
        if task["kind"] in bench_tasks.EXEC_KINDS:
            assert isinstance(task["passed"], bool)
        elif task["kind"] == "fix":  # the original line, where a corrupted one was given
            start, expected = task["start"], task["expected"]
            assert expected == SOURCE[start : start + len(expected)] and task["passed"] is None
            assert 0 <= task["steps"] <= 4 * (1 + task["retries"])  # 0: the repair flagged nothing
            continue
        else:
            assert task["expected"] == SOURCE[task["start"] : task["end"]] and task["passed"] is None
        runs = 1 + task["fresh_fills"] + task["retries"]  # fill, fresh fills, retries
        assert 1 <= task["steps"] <= 4 * runs  # 4 passes each at most
    assert set(results["step_curve"]) == set(bench_tasks.KINDS)
    assert all(set(rows) == {"1", "2"} for rows in results["step_curve"].values())
    restarts = InfillOptions.fresh_fills  # at cap 1 a fill, a retry and a fresh fill are one pass
    runs = (1 + restarts) * (1 + InfillOptions.retries)
    assert all(row["tasks"] == 1 and row["mean_steps"] <= runs for row in
               (rows["1"] for rows in results["step_curve"].values()))  # fmt: skip
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_kinds_are_refused_before_loading_a_model(capsys):
    with pytest.raises(SystemExit):
        bench.main(["quality", "--kinds", "line,bogus", "--model", "/nonexistent"])
    assert "unknown kind(s) bogus" in capsys.readouterr().err


def test_size_measurement_runs_the_engine_for_exactly_the_given_passes(tiny_tokenizer):
    from infill.bench.sizes import format_rows, measure_size
    from infill.text.spans import line_span

    text = "".join(f"value_{i} = {i} * 2\n" for i in range(40))
    row = measure_size(tiny_tokenizer, text, line_span(text, 20, 20), hidden=32, layers=2,
                       context=64, passes=5, repeat=1)  # fmt: skip

    assert row.passes == 5
    expected_params = tiny_tokenizer.vocab_size * 32 + 2 * (4 * 32 * 32 + 3 * 32 * 32 * 8 // 3)
    assert abs(row.params - expected_params) / expected_params < 0.2  # embeddings + attention + MLP
    assert 0 < row.pass_ms <= row.fill_ms
    assert "hidden" in format_rows([row]) and f"{row.fill_ms:8.0f}" in format_rows([row])


def test_quality_takes_its_tasks_from_a_repositorys_held_out_files(tiny_backend, monkeypatch, tmp_path):
    from infill.train.repository import collect

    monkeypatch.setattr(bench_cli, "load_backend", lambda *args, **kwargs: tiny_backend)
    repo = tmp_path / "repo"
    repo.mkdir()
    for n in range(12):
        (repo / f"module_{n}.py").write_text(SOURCE.replace("def ", f"def m{n}_"))
    heldout = {f.path for f in collect(repo, report=lambda message: None).heldout}
    out = tmp_path / "results.json"
    argv = ["quality", "--source", str(repo), "--kinds", "line", "--tasks", "3", "--steps", "2"]
    argv += ["--json", str(out)]
    assert bench.main(argv) == 0
    tasks = json.loads(out.read_text())["tasks"]
    assert len(tasks) == 3 and {t["path"] for t in tasks} <= heldout and heldout


def test_sizes_takes_the_sizes_and_canvases_to_time(capsys):
    args = bench_cli.build_parser().parse_args(["sizes", "--sizes", "384x4, 384x5", "--contexts", "512"])
    assert args.sizes == [(384, 4), (384, 5)] and args.contexts == [512]
    with pytest.raises(SystemExit):
        bench_cli.build_parser().parse_args(["sizes", "--sizes", "384by5"])
    assert "not HIDDENxLAYERS" in capsys.readouterr().err


@pytest.mark.slow
def test_shapes_tiny_runs_every_family_at_each_pass_count_in_the_devices_window(tmp_path, capsys):
    from infill.bench.shapes import TINY_SHAPES
    from infill.models.denoiser import CPU_CONTEXT

    out = tmp_path / "shapes.json"
    assert bench.main(["shapes", "--tiny", "--passes", "2,3", "--repeat", "1", "--threads", "1",
                       "--device", "cpu", "--json", str(out)]) == 0  # fmt: skip

    results = json.loads(out.read_text())
    assert [row["shape"] for row in results["rows"]] == list(TINY_SHAPES)
    for row in results["rows"]:
        assert row["fill_passes"] == {"2": 2, "3": 3}  # random weights: exactly the passes asked
        assert set(row["fill_ms"]) == set(row["kept_fill_ms"]) == set(row["ready_fill_ms"]) == {"2", "3"}
        fills = [*row["fill_ms"].values(), *row["kept_fill_ms"].values(), *row["ready_fill_ms"].values()]
        assert all(ms > 0 for ms in fills)
        assert row["canvas"] <= CPU_CONTEXT < 2 * row["canvas"]  # the CPU's window, from a 200-line file
    table = capsys.readouterr().out
    assert "fill@2 ms" in table and "next@3 ms" in table and "ready@3 ms" in table


@pytest.mark.parametrize("block_passes", [False, True])
def test_a_decided_length_narrows_the_random_networks_fill_to_that_many_positions(block_passes):
    """--line-tokens: the first pass runs over the line's whole budget, as a trained network's
    does, and decides 5 tokens; the passes after it compute those (or, with block passes, a
    block of 2 and what the pass before changed)."""
    from plans import CountingPositions
    from samples import COUNTER_MODULE

    from infill.bench.shapes import DecidedLength, random_denoiser
    from infill.modes.fill import infill
    from infill.options import InfillOptions, SamplerConfig
    from infill.text.document import document_from_bytes
    from infill.text.spans import line_span

    counting = CountingPositions(random_denoiser("llada-8b-tiny", torch.device("cpu"), torch.float32))
    blocks = {"block_length": 2, "block_passes": True} if block_passes else {}
    options = InfillOptions(sampler=SamplerConfig(steps=6, commit_threshold=1.0, **blocks), retries=0,
                            token_edits=0, fresh_fills=0, recall=False)  # fmt: skip
    document = document_from_bytes(COUNTER_MODULE.encode())
    [filled] = infill(DecidedLength(counting, 5), document, [line_span(COUNTER_MODULE, 5, 5)], options).spans

    budget = counting.computed[0]
    assert budget > 5
    assert counting.computed[1] >= budget - 5  # the padding once more, to cache its <null>s' keys
    if block_passes:
        assert all(n <= 2 * 2 for n in counting.computed[2:-1])
    else:
        assert counting.computed[2:] == [5] * 4
    assert filled.new_text.strip()


@pytest.mark.slow
def test_shapes_peak_memory_is_the_fills_not_the_bandwidth_probes(tmp_path):
    """The probes read a 1 GiB tensor after the fills; a fresh process with a tiny shape never
    comes near that, so a peak of 1 GiB or more would be the probe's."""
    from infill.bench.shapes import memory_bandwidth

    out = tmp_path / "shapes.json"
    command = [sys.executable, "-m", "infill.bench", "shapes", "--shapes", "open-dcoder-0.5b-tiny",
               "--passes", "2", "--repeat", "1", "--threads", "1", "--json", str(out)]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    [row] = json.loads(out.read_text())["rows"]
    probe_mib = inspect.signature(memory_bandwidth).parameters["mib"].default
    assert 0 < row["resident_mib"] <= row["peak_mib"] < probe_mib, row


@pytest.mark.slow
def test_shapes_times_the_cached_pass_after_a_first_one_untimed(monkeypatch):
    """A process's first span pass pays once for what later ones reuse; the cached pass the bench
    prints is a later one's (a first pass made to take half a second must not show)."""
    import infill.bench.shapes as shapes
    from infill.bench.cli import code_lines, line_span, speed_file

    made = shapes.random_denoiser

    def slow_first_span_pass(*args, **kwargs):
        denoiser = made(*args, **kwargs)
        inner, seen = denoiser.cached_logits, []

        def cached_logits(ids, positions, cache, refresh, predicted=None):
            if not refresh and not seen:
                seen.append(True)
                time.sleep(0.5)
            return inner(ids, positions, cache, refresh, predicted)

        denoiser.cached_logits = cached_logits
        return denoiser

    monkeypatch.setattr(shapes, "random_denoiser", slow_first_span_pass)
    text = speed_file()
    line = code_lines(text)[len(code_lines(text)) // 2]
    row = shapes.measure_shape("llada-8b-tiny", text, line_span(text, line, line), torch.device("cpu"),
                               torch.float32, (2,), repeat=1)  # fmt: skip
    assert row.cached_pass_ms < 400


def test_shapes_takes_a_window_and_refuses_a_bad_pass_count(tmp_path, capsys):
    out = tmp_path / "shapes.json"
    assert bench.main(["shapes", "--shapes", "llada-8b-tiny", "--passes", "2", "--repeat", "1",
                       "--context-length", "128", "--json", str(out)]) == 0  # fmt: skip
    [row] = json.loads(out.read_text())["rows"]
    assert row["canvas"] <= 128
    with pytest.raises(SystemExit):
        bench.main(["shapes", "--tiny", "--passes", "0,4"])
    assert "pass counts must be at least 1" in capsys.readouterr().err


def test_the_repair_flags_have_the_cli_names_and_the_old_ones_still_work(capsys):
    parser = bench_cli.build_parser()
    args = parser.parse_args(["quality", "--retries", "1", "--token-edits", "2", "--fresh-fills", "3"])
    assert bench_quality.engine_options(args) == {
        "retries": 1, "token_edits": 2, "fresh_fills": 3, "pass_budget": InfillOptions.pass_budget,
        "recall": True, "context_length": None,
    }  # fmt: skip
    assert capsys.readouterr().err == ""
    old = parser.parse_args(
        ["quality", "--syntax-rounds", "1", "--syntax-edits", "2", "--syntax-restarts", "3"]
    )
    assert bench_quality.engine_options(old) == bench_quality.engine_options(args)
    assert "infill-bench: warning: --syntax-rounds is deprecated, use --retries" in capsys.readouterr().err


def test_drift_fills_each_line_three_ways_after_an_earlier_fill(tiny_backend, monkeypatch, tmp_path, capsys):
    from infill.bench.drift import VARIANTS

    function = "def step_{0}(value):\n    total = value * {0}\n    return total + {0}\n\n"
    source = "".join(function.format(i) for i in range(12))
    monkeypatch.setattr(bench_cli, "load_backend", lambda *args, **kwargs: tiny_backend)
    monkeypatch.setattr(bench_cli, "heldout_sources", lambda: [("sample.py", source)])
    out = tmp_path / "drift.json"
    argv = ["drift", "--tasks", "3", "--steps", "4", "--retries", "0", "--json", str(out)]
    assert bench.main(argv) == 0

    results = json.loads(out.read_text())
    assert 1 <= results["table"]["tasks"] == len(results["rows"]) <= 3
    assert results["table"]["exact"]["agrees_with_exact"] == 1.0
    for row in results["rows"]:
        assert set(row["fills"]) == set(VARIANTS) and "\n" not in row["truth"]
        # the kept contexts compute less than a whole window once the first fill left one
        assert row["computed"]["refreshed"] <= row["computed"]["exact"]
    assert "same as exact" in capsys.readouterr().out


@pytest.mark.slow
def test_shapes_prints_each_pass_beside_its_floors_and_int4_reads_a_sixth_of_float32(tmp_path, capsys):
    rows = {}
    for quantize in ("none", "int4"):
        out = tmp_path / f"{quantize}.json"
        argv = ["shapes", "--shapes", "llada-8b-tiny", "--passes", "2", "--repeat", "1", "--dtype", "float32"]
        assert bench.main([*argv, "--quantize", quantize, "--json", str(out)]) == 0
        [rows[quantize]] = json.loads(out.read_text())["rows"]
    assert rows["none"]["dtype"] == "float32" and rows["int4"]["dtype"] == "int4"
    multiplied = str(bench_shapes.product_dtype(torch.device("cpu"))).removeprefix("torch.")
    # a 4-bit pass's products are the kernel's integer ones: its floor is their peak's
    integer = cpu_peaks.integer_peak(torch.get_num_threads()) is not None
    assert rows["none"]["matmul_dtype"] == multiplied
    assert rows["int4"]["matmul_dtype"] == ("int8" if integer else multiplied)
    for row in rows.values():
        assert row["bandwidth_gbs"] > 0 and row["matmul_gflops"] > 0
        read_ms = row["weights_read_mib"] * 2**20 / row["bandwidth_gbs"] / 1e6
        assert row["read_floor_ms"] == pytest.approx(read_ms)
        assert row["compute_floor_ms"] > 0
    # the same multiply-adds, each set against its own rate
    work = [row["compute_floor_ms"] * row["matmul_gflops"] for row in rows.values()]
    assert work[0] == pytest.approx(work[1])
    # 4.25 bits a weight against 32 (the tiny shape's output layer is most of its weights)
    assert rows["int4"]["weights_read_mib"] < rows["none"]["weights_read_mib"] / 6
    # the ready fill beside its floor: its passes as the kept context ran them, spans of the
    #   canvas and not the whole of it (the idle refresh prepared that), each no cheaper than a
    #   pass's reading floor
    for row in rows.values():
        positions, floor = row["ready_fill_positions"]["2"], row["ready_fill_floor_ms"]["2"]
        assert len(positions) == row["fill_passes"]["2"]
        assert all(0 < count < row["canvas"] for count in positions)
        assert floor >= len(positions) * row["read_floor_ms"] * (1 - 1e-9)
    out = capsys.readouterr().out
    assert f"comp fl. = its multiply-adds / the products' rate ({multiplied} " in out
    assert ("int8 dot products' peak" in out) == integer
    assert "llada-8b-tiny ready@2: " in out and "each at its larger floor" in out


def test_a_fills_floor_is_each_pass_at_the_larger_of_reading_and_arithmetic():
    # 1e9 multiply-adds a position in the layers, 1e8 more in the output layer, at 100 GFLOP/s:
    #   32 positions with logits 0.704 s, 20 with 4 of them given logits 0.408 s, 1 position 0.022 s
    #   (under its reading, 0.1 s)
    passes = [(32, 32), (20, 4), (1, 1)]
    floor = bench_shapes.passes_floor_ms(passes, read_s=0.1, layers=10**9, head=10**8, rate=100.0)
    assert floor == pytest.approx(704 + 408 + 100)


@pytest.mark.parametrize("native", [True, False])
def test_the_compute_floor_multiplies_in_float32_where_the_cpu_would_emulate_bfloat16(native, monkeypatch):
    monkeypatch.setattr(bench_shapes, "cpu_has_bfloat16", lambda: native)
    assert bench_shapes.product_dtype(torch.device("cpu")) == (torch.bfloat16 if native else torch.float32)
    assert bench_shapes.product_dtype(torch.device("cuda")) == torch.bfloat16


@pytest.mark.parametrize("march", ["native", *sorted(OTHER_CPUS)])
def test_the_integer_peak_is_that_of_the_instructions_the_4bit_kernel_multiplies_with(march, tmp_path):
    """For this CPU's build and each 256-bit one this CPU can run (AVX-VNNI's, AVX2's): a program
    measures the peak of the instructions that build multiplies with, and the build's product is
    slower than that peak."""
    from infill.models import int4_native

    if not int4_native.available():
        pytest.skip(f"infill's 4-bit kernel is not built here: {int4_native.build().reason}")
    library = built_for(march, tmp_path)
    instructions = library.infill_int4_instructions().decode()
    peak = cpu_peaks.integer_peak(1, None if march == "native" else instructions)
    assert peak is not None and peak.instructions == instructions and peak.gmacs > 0
    # no 4-bit product runs faster than the instructions it is made of (the kernel's best is 73%
    #   of the peak; a program that counted half the instructions read 146%: a fifth's margin for a
    #   busy machine's slower peak)
    rows, tiles = 64, int4_native.pack(torch.randn(1024, 2048) * 0.02, 128)
    x = torch.randn(rows, 2048)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seconds = []
        for _ in range(5):
            started = time.perf_counter()
            int4_native.matmul(x, *tiles, library)
            seconds.append(time.perf_counter() - started)
    finally:
        torch.set_num_threads(threads)
    assert rows * 1024 * 2048 / min(seconds) / 1e9 < 1.2 * peak.gmacs


def test_a_4bit_pass_without_an_integer_peak_is_set_against_the_float_product(monkeypatch):
    monkeypatch.setattr(bench_shapes, "integer_peak", lambda threads: None)
    monkeypatch.setattr(bench_shapes, "matmul_rate", lambda device, dtype: 123.0)
    network = torch.nn.Sequential(torch.nn.Linear(4, 4))
    monkeypatch.setattr(bench_shapes, "quantized_kind", lambda network: "int4")
    multiplied = str(bench_shapes.product_dtype(torch.device("cpu"))).removeprefix("torch.")
    assert bench_shapes.products_rate(network, torch.device("cpu")) == (multiplied, 123.0)
    monkeypatch.setattr(bench_shapes, "integer_peak", lambda threads: cpu_peaks.Peak(100.0, "AVX2"))
    assert bench_shapes.products_rate(network, torch.device("cpu")) == ("int8", 200.0)


@pytest.mark.slow
def test_loading_writes_a_checkpoint_in_the_published_layout_and_measures_a_fresh_process(
    tmp_path, capsys, monkeypatch
):
    from safetensors import safe_open

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the packed network kept here

    out = tmp_path / "loading.json"
    assert bench.main(["loading", "--shapes", "dream-7b-tiny", "--quantize", "int4", "--checkpoint-dir",
                       str(tmp_path / "checkpoints"), "--json", str(out)]) == 0  # fmt: skip
    folder = tmp_path / "checkpoints" / "dream-7b-tiny"
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    assert "model.layers.1.mlp.down_proj.weight" in index and "lm_head.weight" in index
    with safe_open(str(folder / index["lm_head.weight"]), framework="pt") as shard:
        assert shard.get_tensor("lm_head.weight").dtype == torch.bfloat16
    rows = json.loads(out.read_text())["rows"]
    assert [row["way"] for row in rows] == ["packed", "packed, kept", "kept file"]
    for row in rows:
        assert row["quantize"] == "int4" and row["seconds"] > 0 and 0 < row["loaded_mib"] <= row["peak_mib"]
    assert len(list((tmp_path / "cache" / "infill" / "packed").glob("*.safetensors"))) == 1
    assert "peak MiB" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--checkpoint-dir"):
        bench.main(["loading", "--shapes", "dream-7b-tiny"])
