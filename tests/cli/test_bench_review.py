"""infill-bench review: injected bugs that parse and differ only where recorded, the localization
and threshold metrics on hand-made scores, the frequency baseline, findings from the scores as
review mode makes them, and the command on the shipped model and on every published family's
tiny checkpoint (mechanics only: random weights measure no quality)."""

from __future__ import annotations

import ast
import gzip
import itertools
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from checkpoints import FAMILIES, write_checkpoint

from infill import bench
from infill.bench import cli as bench_cli
from infill.bench.bugs import (
    BUG_KINDS,
    CLEAN,
    OPERATOR_SWAPS,
    SPAN_LINES,
    ReviewTask,
    code_sites,
    inject,
    make_review_tasks,
)
from infill.bench.review import (
    THRESHOLDS,
    Candidate,
    Reviewed,
    at_threshold,
    choose_threshold,
    findings_at,
    frequency_keys,
    localization,
    measure,
    review_task,
    top_k_hit,
)
from infill.engine.pipeline import run
from infill.models import load
from infill.modes.review import REVIEW_THRESHOLD, ReviewRequest
from infill.options import FixOptions
from infill.text.document import Document
from infill.text.spans import Span
from infill.text.syntax import introduced_names, prose_ranges

SOURCE = '''"""Bills."""


def total(items, tax, rounding=2):
    """What the items cost with tax."""
    subtotal = 0
    count = len(items)
    for item in items:
        if not item.free and item.price > 0:
            subtotal += item.price * item.count
    if count == 0:
        return None  # nothing to bill
    average = subtotal / count
    return round(subtotal * (1 + tax), rounding), average


def scaled(values, factor, offset):
    result = [value * factor - offset for value in values if not value < 0]
    while not result:
        result.append(max(offset, factor))
    return pow(factor, offset) + len(result)
'''


# --------------------------------------------------------------------------- injection


@pytest.mark.parametrize("kind", BUG_KINDS)
def test_each_kind_injects_a_bug_that_parses_and_differs_only_where_recorded(kind):
    left_out = prose_ranges(SOURCE) + introduced_names(SOURCE)
    seen = set()
    for seed in range(12):
        mutation = inject(kind, SOURCE, random.Random(seed))
        assert mutation is not None
        text, ranges = mutation.text, mutation.ranges
        ast.parse(text)  # a reviewer's bug, not a syntax error
        assert text != SOURCE
        low, high = min(a for a, _ in ranges), max(b for _, b in ranges)
        tail = len(text) - high
        assert text[:low] == SOURCE[:low] and text[high:] == SOURCE[len(SOURCE) - tail :]
        changed = SOURCE[low : len(SOURCE) - tail]
        marked = [text[a:b] for a, b in ranges]
        if kind == "operator":
            assert OPERATOR_SWAPS[changed] == marked[0]
        elif kind == "off-by-one":
            assert abs(int(marked[0]) - int(changed)) == 1
        elif kind == "variable":
            assert marked[0].isidentifier() and changed.isidentifier() and marked[0] != changed
        elif kind == "arguments":
            first, second = marked
            assert changed.startswith(second) and changed.endswith(first)  # the two swapped
            assert text[low:high] == first + changed[len(second) : len(changed) - len(first)] + second
        else:
            assert changed.startswith("not ") and changed.endswith(marked[0])
            assert text[low:high] == marked[0]
        for start, _ in ranges:  # code review mode scores: not prose, not an introduced name
            assert not any(a <= start < b for a, b in left_out)
        seen.add((low, mutation.after))
    assert len(seen) > 1  # the seed picks the site


def test_no_site_in_a_comment_a_string_or_a_definitions_name():
    text = 'def f(a, b=1):\n    """a < b + 1"""\n    return g("x + 1", a), h(a, b)  # a - 1\n'
    assert [text[s.start : s.end] for s in code_sites("operator", text)] == []
    assert [text[s.start : s.end] for s in code_sites("off-by-one", text)] == ["1", "1"]  # n+1, n-1
    assert {(text[s.start : s.end], s.new) for s in code_sites("variable", text)} == {("a", "b"), ("b", "a")}
    assert [s.new for s in code_sites("arguments", text)] == ["b, a"]  # not the string's swap


def test_tasks_are_seeded_and_hold_their_bug_inside_the_window():
    sources = [(f"m{n}.py", SOURCE.replace("def ", f"def m{n}_")) for n in range(4)]
    tasks = make_review_tasks(sources, list(BUG_KINDS), 3, 2, seed=5, lines=12)
    assert tasks == make_review_tasks(sources, list(BUG_KINDS), 3, 2, seed=5, lines=12)
    assert tasks != make_review_tasks(sources, list(BUG_KINDS), 3, 2, seed=6, lines=12)
    assert [t.kind for t in tasks] == [k for k in BUG_KINDS for _ in range(3)] + [CLEAN] * 2
    alone = make_review_tasks(sources, ["not"], 3, 0, seed=5, lines=12)
    assert alone == [t for t in tasks if t.kind == "not"]  # a kind's tasks do not depend on the others
    for task in tasks:
        start, end = task.window
        assert task.lines == 12
        assert all(start <= a < b <= end for a, b in task.ranges)
        spans = task.spans  # reviewed in spans of SPAN_LINES lines: what lies between them is a line end
        assert len(spans) == 2 and (spans[0].start, spans[-1].end) == (start, end)
        assert all(task.text.count("\n", s.start, s.end) < SPAN_LINES for s in spans)
        assert all(task.text[a.end : b.start] == "\n" for a, b in zip(spans, spans[1:]))
        if task.kind == CLEAN:
            assert task.text in {text for _, text in sources} and not task.ranges


# --------------------------------------------------------------------------- metrics


def test_top_k_counts_ties_as_a_random_order_breaks_them():
    assert top_k_hit([0.5, 0.1, 0.3], [False, False, True], 1) == 0.0
    assert top_k_hit([0.5, 0.1, 0.3], [False, False, True], 2) == 1.0
    assert top_k_hit([0.0] * 10, [True] + [False] * 9, 1) == pytest.approx(0.1)
    assert top_k_hit([0.0] * 10, [True] + [False] * 9, 5) == pytest.approx(0.5)
    assert top_k_hit([0.0] * 10, [True, True] + [False] * 8, 5) == pytest.approx(1 - 56 / 252)
    assert top_k_hit([1.0, 2.0, 2.0, 2.0], [False, True, False, False], 2) == pytest.approx(1 / 3)
    assert top_k_hit([1.0, 2.0], [False, False], 5) == 0.0


def candidate(
    start: int, end: int, score: float, favourite: float = 0.9, lead: int = 1, entropy: float = 0.0
) -> Candidate:
    return Candidate(start, end, "x" * (end - start), start - lead, score, favourite, entropy)


def reviewed(kind: str, candidates: list[Candidate], ranges=((20, 22),), lines: int = 10) -> Reviewed:
    task = ReviewTask(kind, "f.py", "x = 1\n" * 20, 1, lines, ranges if kind != CLEAN else ())
    return Reviewed(task, candidates, seconds=2.0, passes=3)


def test_localization_precision_recall_and_false_findings_on_hand_made_scores():
    caught = reviewed("operator", [candidate(1, 3, 0.3), candidate(20, 22, 0.001), candidate(30, 33, 0.002)])
    missed = reviewed("not", [candidate(1, 3, 0.0001), candidate(20, 21, 0.5), candidate(40, 44, 0.02)])
    clean = reviewed(CLEAN, [candidate(1, 3, 0.004), candidate(9, 12, 0.6)], lines=50)
    rows = [caught, missed, clean]
    assert localization([caught, missed], "model", 1) == 0.5
    assert localization([caught, missed], "model", 5) == 1.0
    assert localization([caught, missed], "random", 1) == pytest.approx((1 / 3 + 1 / 3) / 2)
    measured = at_threshold(rows, 0.003, ratio=0.2)
    # findings: caught 0.001 (hit) and 0.002 (not), missed 0.0001 (not); clean: none below 0.003
    assert measured["findings"] == 3
    assert measured["precision"] == pytest.approx(1 / 3) and measured["recall"] == 0.5
    assert measured["false_per_100_clean_lines"] == 0.0
    loose = at_threshold(rows, 0.01, ratio=0.2)
    assert loose["false_per_100_clean_lines"] == pytest.approx(2.0)  # one finding in 50 lines
    assert at_threshold(rows, 0.01, ratio=0.001)["findings"] == 1  # 0.0001 < 0.001 x 0.9 only


def test_the_model_ranks_by_doubt_a_spread_distribution_excuses_a_low_probability():
    # the bug (20, 22): probability 0.01 where the model was sure (entropy 0.1); a name at (1, 3):
    # probability 0.001 among many (entropy 5 nats: about 150 equally likely names)
    row = reviewed("operator", [candidate(1, 3, 0.001, entropy=5.0), candidate(20, 22, 0.01, entropy=0.1)])
    assert localization([row], "model", 1) == 1.0
    assert row.candidates[1].doubt == pytest.approx(-math.log(0.01) - 0.1)
    sure = reviewed("operator", [candidate(1, 3, 0.001, entropy=0.1), candidate(20, 22, 0.01, entropy=0.1)])
    assert localization([sure], "model", 1) == 0.0  # equal spreads: the probability decides


def test_neighbouring_flagged_tokens_are_one_finding():
    tokens = [candidate(0, 2, 0.001, lead=0), candidate(2, 4, 0.002, lead=0), candidate(6, 8, 0.001)]
    assert [(f.start, f.end) for f in findings_at(tokens, 0.01, 0.2)] == [(0, 4), (6, 8)]  # a token between
    assert findings_at(tokens, 0.01, 0.2)[0].score == 0.001
    spaced = [*tokens[:2], candidate(5, 7, 0.001, lead=1)]  # " x" right after: the next token
    assert [(f.start, f.end) for f in findings_at(spaced, 0.01, 0.2)] == [(0, 7)]
    broken = [tokens[0], candidate(2, 4, 0.5, lead=0), candidate(4, 6, 0.001, lead=0)]
    assert len(findings_at(broken, 0.01, 0.2)) == 2  # an unflagged token between


def test_the_threshold_is_the_best_recall_within_the_false_finding_target():
    sweep = [
        {"threshold": 0.001, "recall": 0.2, "precision": 0.5, "false_per_100_clean_lines": 0.2},
        {"threshold": 0.01, "recall": 0.4, "precision": 0.3, "false_per_100_clean_lines": 0.9},
        {"threshold": 0.05, "recall": 0.6, "precision": 0.2, "false_per_100_clean_lines": 3.0},
    ]
    assert choose_threshold(sweep)["threshold"] == 0.01
    assert choose_threshold(sweep, target=0.1)["threshold"] == 0.001  # none meets it: the fewest false


def test_the_frequency_baseline_puts_the_rarest_token_of_the_file_first():
    text = "a = b + c\nb = a + c\nc = a - b\n"
    task = ReviewTask("operator", "f.py", text, 1, 3, ((text.index("-"), text.index("-") + 1),))
    places = [i for i, ch in enumerate(text) if not ch.isspace() and ch != "\n"]
    tokens = [Candidate(i, i + 1, text[i], i, 0.5, 0.9, 1.0) for i in places]
    row = Reviewed(task, tokens, 1.0, 1)
    keys = frequency_keys(row)
    assert dict(zip((t.text for t in tokens), keys)) == {"a": 3, "b": 3, "c": 3, "=": 3, "+": 2, "-": 1}
    assert localization([row], "frequency", 1) == 1.0
    assert localization([row], "random", 1) == pytest.approx(1 / len(tokens))


# --------------------------------------------------------------------------- through review mode


def test_the_findings_of_the_scores_are_review_modes_at_that_threshold(tiny_backend):
    """Score once, threshold many times: the bench's findings at a threshold are those review
    mode reports when run with it."""
    document = Document(SOURCE, bom=False, newline="\n")
    task = ReviewTask("operator", "f.py", SOURCE, 6, 9, ((0, 1),))
    span = Span(*task.window)
    assert SOURCE[span.start : span.end].startswith("    subtotal = 0") and span.end - span.start < 120
    scored = review_task(tiny_backend, task, FixOptions())
    scores = sorted(c.score for c in scored.candidates)
    assert len(scored.candidates) > 10
    for threshold in (scores[len(scores) // 3], scores[2 * len(scores) // 3]):
        options = FixOptions(threshold=threshold, ratio=1.0)
        reported = run(tiny_backend, ReviewRequest(document, [span], options)).findings
        expected = [(f.start + len(f.text) - len(f.text.lstrip()), f.end) for f in reported]
        found = findings_at(scored.candidates, threshold, 1.0)
        assert reported and [(f.start, f.end) for f in found] == expected


def test_review_mode_defaults_to_the_benchmarks_threshold():
    document = Document(SOURCE, bom=False, newline="\n")
    assert ReviewRequest(document).options.threshold == REVIEW_THRESHOLD
    assert REVIEW_THRESHOLD in THRESHOLDS  # chosen from the sweep


def files_with_sites(kinds: list[str], count: int) -> list[tuple[str, str]]:
    """The first `count` held-out files that have a site of every kind. Wherever Python and the
    environment are installed, the held-out list sorts differently (site-packages can come first)."""
    sources = bench_cli.heldout_sources()
    having = ((path, text) for path, text in sources if all(code_sites(k, text) for k in kinds))
    chosen = list(itertools.islice(having, count))
    assert len(chosen) == count, "too few held-out files with these bugs' sites"
    return chosen


@pytest.mark.slow
def test_the_command_on_the_shipped_model_prints_the_table_and_writes_json(monkeypatch, tmp_path, capsys):
    sources = files_with_sites(["operator", "not"], 3)
    monkeypatch.setattr(bench_cli, "heldout_sources", lambda: sources)
    out = tmp_path / "review.json.gz"
    argv = ["review", "--files", "1", "--clean", "1", "--kinds", "operator,not", "--window", "8",
            "--threads", "2", "--json", str(out)]  # fmt: skip
    assert bench.main(argv) == 0
    printed = capsys.readouterr().out
    assert "top-5" in printed and "false/100 clean lines" in printed
    results = json.loads(gzip.decompress(out.read_bytes()))
    assert [t["kind"] for t in results["tasks"]] == ["operator", "not", CLEAN]
    assert {t["path"] for t in results["tasks"]} <= {path for path, _ in sources}
    assert set(results["table"]) == {"operator", "not", "all", CLEAN}
    for task in results["tasks"]:
        assert task["candidates"] > 0 and task["seconds"] > 0
        if task["kind"] != CLEAN:
            assert 1 <= task["model_rank"] <= task["candidates"]  # the bug's token is a candidate
    recalls = [row["recall"] for row in results["sweep"]]
    assert recalls == sorted(recalls)  # a higher threshold flags more
    assert results["chosen_threshold"] in THRESHOLDS
    row = results["table"]["all"]
    assert all(0 <= row[key] <= 1 for key in row if key.endswith(("top1", "top5")))
    # the experiment script ranks the stored scores again: its doubt order is the bench's own
    script = Path(__file__).resolve().parents[2] / "docs" / "experiments" / "review_rankers.py"
    printed = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
    cells = next(line for line in printed.splitlines() if line.startswith("all")).split()
    doubt_top1, doubt_top5 = (float(c.rstrip("%")) / 100 for c in cells[4:6])
    assert (doubt_top1, doubt_top5) == pytest.approx((row["model_top1"], row["model_top5"]), abs=1e-3)
    assert all(row[f"{ranker}_top1"] <= row[f"{ranker}_top5"] for ranker in ("model", "frequency", "random"))


@pytest.mark.slow
def test_every_published_family_runs_the_benchmark_on_a_tiny_checkpoint(tmp_path):
    """The mechanics (masked scoring, the token offsets, the rankers) on each family's tokenizer;
    random weights cannot measure quality."""
    tasks = make_review_tasks([("bill.py", SOURCE)], ["operator", "arguments"], 1, 1, seed=0, lines=6)
    for family in FAMILIES:
        write_checkpoint(tmp_path / family, family)
        denoiser = load(tmp_path / family, "cpu", torch.float32)
        results = measure(denoiser, tasks, ["operator", "arguments"])
        assert len(results["tasks"]) == 3, family
        for task in results["tasks"]:
            assert task["candidates"] > 0, family
            if task["kind"] != CLEAN:
                assert task["model_rank"] is not None, (family, task)  # the bug is among the candidates
        assert not math.isnan(results["table"]["all"]["model_top5"])
