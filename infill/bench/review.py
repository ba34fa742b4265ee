"""`infill-bench review`: does review mode find an injected bug, and how often does it cry wolf?

Each task (infill.bench.bugs) is a window of a held-out file, with one injected bug or none. The
window is reviewed once (infill.modes.review, ranking every code token: `top`), which gives every
candidate token's masked score, the model's favourite's probability and the entropy of its
distribution there; every metric and
every threshold of the sweep is then computed from those scores (score once, threshold many
times), as review mode would flag them (below the threshold and below `ratio` x the favourite;
adjacent tokens merged into one finding).

    top-k        the share of bug tasks with a token of the bug among the k candidates the
                 model doubts most (review --top's order: infill.modes.review.doubt; a token
                 hits if it overlaps a range of the bug)
    precision    at a threshold, over the bug tasks: the share of findings that overlap the bug
    recall       the share of bug tasks with a finding that overlaps the bug
    false/100    findings in the clean windows per 100 of their lines
    s/100 lines  review time per 100 lines reviewed (the scoring passes)

Baselines over the same candidate tokens: `random` (the expected top-k of a random order) and
`frequency` (the token whose Python token is rarest in the file first, ties in random order,
expected value). Ties are counted as a random order would break them, for every ranker.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass

from tqdm import tqdm

from infill.bench.bugs import CLEAN, ReviewTask, python_tokens
from infill.engine.pipeline import run
from infill.models.base import Denoiser
from infill.modes.review import REVIEW_THRESHOLD, ReviewRequest, doubt
from infill.options import FixOptions
from infill.text.document import Document

TOP_K = (1, 5)
THRESHOLDS = (1e-7, 2e-7, 5e-7, 1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 0.001, 0.002, 0.005,
              0.01, 0.02, 0.05, 0.1)  # fmt: skip
FALSE_TARGET = 1.0  # false findings per 100 clean lines the default threshold may make
RANKERS = ("model", "frequency", "random")


@dataclass(frozen=True)
class Candidate:
    """A code token review mode scored: where its text starts (after leading blanks) and ends."""

    start: int
    end: int
    text: str
    token_start: int  # where the token starts, its leading blanks included
    score: float  # the model's probability of it, masked
    favourite: float  # the probability of the model's favourite token there
    entropy: float  # nats: the spread of the model's distribution there

    @property
    def doubt(self) -> float:  # review --top's order, most doubted first (infill.modes.review.doubt)
        return doubt(self.score, self.entropy)


@dataclass
class Reviewed:
    task: ReviewTask
    candidates: list[Candidate]  # in document order
    seconds: float
    passes: int

    def hits(self) -> list[bool]:
        return [overlaps(c.start, c.end, self.task.ranges) for c in self.candidates]


def overlaps(start: int, end: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(start < b and a < end for a, b in ranges)


# --------------------------------------------------------------------------- scoring


def review_task(denoiser: Denoiser, task: ReviewTask, options: FixOptions) -> Reviewed:
    """Every code token of the task's window, scored by review mode (one run over its spans)."""
    document = Document(task.text, bom=False, newline="\n")
    request = ReviewRequest(document, task.spans, options, top=len(task.text) + 1)
    started = time.perf_counter()
    result = run(denoiser, request)
    seconds = time.perf_counter() - started
    candidates = []
    for f in result.findings:
        lead = len(f.text) - len(f.text.lstrip())
        candidates.append(
            Candidate(f.start + lead, f.end, f.text.strip(), f.start, f.score, f.favourite, f.entropy)
        )
    candidates.sort(key=lambda c: c.start)
    return Reviewed(task, candidates, seconds, result.stats.forward_passes)


def review_all(
    denoiser: Denoiser, tasks: list[ReviewTask], options: FixOptions | None = None
) -> list[Reviewed]:
    options = options or FixOptions(threshold=REVIEW_THRESHOLD)
    return [review_task(denoiser, t, options) for t in tqdm(tasks, desc="review", unit="window")]


# --------------------------------------------------------------------------- rankings


def frequency_keys(reviewed: Reviewed) -> list[int]:
    """Per candidate: how often its Python token (the one holding its first character) occurs in
    the file; rarest first."""
    tokens = python_tokens(reviewed.task.text)
    counts = Counter(string for string, _, _ in tokens)
    keys = []
    for c in reviewed.candidates:
        holding = [string for string, a, b in tokens if a <= c.start < b]
        keys.append(counts[holding[0]] if holding else 0)
    return keys


def ranker_keys(reviewed: Reviewed, ranker: str) -> list[float]:
    """Per candidate: its key under `ranker` (lowest first)."""
    if ranker == "model":
        return [-c.doubt for c in reviewed.candidates]
    if ranker == "frequency":
        return [float(k) for k in frequency_keys(reviewed)]
    if ranker == "random":
        return [0.0] * len(reviewed.candidates)
    raise ValueError(f"unknown ranker {ranker!r}")


def top_k_hit(keys: list[float], hits: list[bool], k: int) -> float:
    """The probability that a candidate with a hit is among the k lowest keys, ties broken in a
    random order (1.0 or 0.0 without ties in the way)."""
    groups: dict[float, list[bool]] = {}
    for key, hit in zip(keys, hits):
        groups.setdefault(key, []).append(hit)
    taken = 0
    for key in sorted(groups):
        group = groups[key]
        room = k - taken
        if room <= 0:
            return 0.0
        bad = group.count(True)
        if bad and room >= len(group):
            return 1.0
        if bad:
            return 1.0 - math.comb(len(group) - bad, room) / math.comb(len(group), room)
        taken += len(group)
    return 0.0


# --------------------------------------------------------------------------- findings at a threshold


@dataclass(frozen=True)
class Flagged:
    start: int
    end: int
    score: float


def findings_at(candidates: list[Candidate], threshold: float, ratio: float) -> list[Flagged]:
    """Review mode's findings from the scores: tokens below `threshold` and below `ratio` x their
    favourite's probability, touching ones merged (as infill.modes.review merges neighbours)."""
    found: list[Flagged] = []
    last_end = None
    for c in candidates:
        if not (c.score < threshold and c.score < ratio * c.favourite):
            last_end = None
            continue
        if found and last_end is not None and c.token_start <= last_end:
            previous = found.pop()
            found.append(Flagged(previous.start, c.end, min(previous.score, c.score)))
        else:
            found.append(Flagged(c.start, c.end, c.score))
        last_end = c.end
    return found


# --------------------------------------------------------------------------- the table


def localization(rows: list[Reviewed], ranker: str, k: int) -> float:
    values = [top_k_hit(ranker_keys(r, ranker), r.hits(), k) for r in rows]
    return sum(values) / len(values) if values else 0.0


def at_threshold(rows: list[Reviewed], threshold: float, ratio: float) -> dict:
    """Precision and recall over the bug tasks, false findings per 100 lines of the clean ones."""
    bugs = [r for r in rows if r.task.kind != CLEAN]
    clean = [r for r in rows if r.task.kind == CLEAN]
    findings = [(r, findings_at(r.candidates, threshold, ratio)) for r in bugs]
    true = sum(overlaps(f.start, f.end, r.task.ranges) for r, found in findings for f in found)
    total = sum(len(found) for _, found in findings)
    caught = sum(any(overlaps(f.start, f.end, r.task.ranges) for f in found) for r, found in findings)
    false = sum(len(findings_at(r.candidates, threshold, ratio)) for r in clean)
    clean_lines = sum(r.task.lines for r in clean)
    return {
        "threshold": threshold,
        "findings": total,
        "precision": true / total if total else None,
        "recall": caught / len(bugs) if bugs else None,
        "false_per_100_clean_lines": 100 * false / clean_lines if clean_lines else None,
    }


def sweep(rows: list[Reviewed], thresholds: tuple[float, ...], ratio: float) -> list[dict]:
    return [at_threshold(rows, t, ratio) for t in thresholds]


def choose_threshold(rows: list[dict], target: float = FALSE_TARGET) -> dict:
    """The sweep's row with at most `target` false findings per 100 clean lines and the best
    recall, then precision, then the higher threshold; if none meets the target, the one with
    the fewest false findings."""
    meeting = [r for r in rows if (r["false_per_100_clean_lines"] or 0.0) <= target]
    if meeting:
        return max(meeting, key=lambda r: (r["recall"] or 0.0, r["precision"] or 0.0, r["threshold"]))
    return min(rows, key=lambda r: (r["false_per_100_clean_lines"], -r["threshold"]))


def summarize(rows: list[Reviewed], threshold: float, ratio: float, kinds: list[str]) -> dict[str, dict]:
    """Per bug kind and "all": tasks, top-k of every ranker, precision and recall at `threshold`;
    "clean": false findings per 100 lines; every row: seconds per 100 lines reviewed."""
    table = {}
    groups = {kind: [r for r in rows if r.task.kind == kind] for kind in kinds}
    groups["all"] = [r for r in rows if r.task.kind != CLEAN]
    clean = [r for r in rows if r.task.kind == CLEAN]
    for name, group in groups.items():
        if not group:
            continue
        row: dict = {"tasks": len(group)}
        for ranker in RANKERS:
            for k in TOP_K:
                row[f"{ranker}_top{k}"] = localization(group, ranker, k)
        measured = at_threshold(group + clean, threshold, ratio)
        row.update(precision=measured["precision"], recall=measured["recall"])
        row["seconds_per_100_lines"] = seconds_per_100(group)
        row["candidates"] = sum(len(r.candidates) for r in group) / len(group)
        table[name] = row
    if clean:
        measured = at_threshold(clean, threshold, ratio)
        table[CLEAN] = {"tasks": len(clean), "lines": sum(r.task.lines for r in clean),
                        "false_per_100_clean_lines": measured["false_per_100_clean_lines"],
                        "seconds_per_100_lines": seconds_per_100(clean),
                        "candidates": sum(len(r.candidates) for r in clean) / len(clean)}  # fmt: skip
    return table


def seconds_per_100(rows: list[Reviewed]) -> float:
    lines = sum(r.task.lines for r in rows)
    return 100 * sum(r.seconds for r in rows) / lines if lines else 0.0


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


COLUMNS = ("model_top1", "model_top5", "frequency_top1", "frequency_top5", "random_top1", "random_top5",
           "precision", "recall")  # fmt: skip


def format_table(table: dict[str, dict], threshold: float) -> str:
    header = ("kind", "tasks", "top-1", "top-5", "freq-1", "freq-5", "rand-1", "rand-5", "prec", "recall")
    lines = [f"localization (top-k: the bug among the k most doubted code tokens); precision and recall "
             f"at threshold {threshold:g}"]  # fmt: skip
    lines.append(
        "{:11} {:>5} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8}".format(*header, "s/100ln")
    )
    for name, r in table.items():
        if name == CLEAN:
            continue
        cells = [percent(r[key]) for key in COLUMNS]
        lines.append(f"{name:11} {r['tasks']:5d} " + " ".join(f"{c:>7}" for c in cells)
                     + f" {r['seconds_per_100_lines']:8.1f}")  # fmt: skip
    if CLEAN in table:
        r = table[CLEAN]
        lines.append(f"clean windows: {r['tasks']} ({r['lines']} lines): "
                     f"{r['false_per_100_clean_lines']:.2f} false findings per 100 lines, "
                     f"{r['seconds_per_100_lines']:.1f} s per 100 lines")  # fmt: skip
    return "\n".join(lines)


def format_sweep(rows: list[dict], chosen: float) -> str:
    lines = ["threshold  findings  precision  recall  false/100 clean lines"]
    for r in rows:
        mark = "  <- default" if r["threshold"] == chosen else ""
        false = "-" if r["false_per_100_clean_lines"] is None else f"{r['false_per_100_clean_lines']:.2f}"
        lines.append(f"{r['threshold']:9g} {r['findings']:9d} {percent(r['precision']):>10} "
                     f"{percent(r['recall']):>7} {false:>22}{mark}")  # fmt: skip
    return "\n".join(lines)


def measure(
    denoiser: Denoiser,
    tasks: list[ReviewTask],
    kinds: list[str],
    options: FixOptions | None = None,
    thresholds: tuple[float, ...] = THRESHOLDS,
) -> dict:
    """The benchmark on a loaded model: review every task once, then the table at the chosen
    threshold and the sweep; the results as JSON-ready data (every task's bug and its ranks)."""
    options = options or FixOptions(threshold=REVIEW_THRESHOLD)
    rows = review_all(denoiser, tasks, options)
    swept = sweep(rows, thresholds, options.ratio)
    chosen = choose_threshold(swept)
    table = summarize(rows, chosen["threshold"], options.ratio, kinds)
    return {"ratio": options.ratio, "thresholds": list(thresholds), "sweep": swept,
            "chosen_threshold": chosen["threshold"],
            "meets_false_target": (chosen["false_per_100_clean_lines"] or 0.0) <= FALSE_TARGET,
            "table": table,
            "tasks": [task_json(r, chosen["threshold"], options.ratio) for r in rows]}  # fmt: skip


def task_json(reviewed: Reviewed, threshold: float, ratio: float) -> dict:
    """A task, its bug, the model's five most doubted tokens, its findings at `threshold` and every
    candidate as [start, end, token start, score, favourite's probability, entropy] (to rank
    them again)."""
    doubted = sorted(reviewed.candidates, key=lambda c: -c.doubt)[:5]
    found = findings_at(reviewed.candidates, threshold, ratio)
    text = reviewed.task.text
    return {**reviewed.task.to_json(), "seconds": round(reviewed.seconds, 3), "passes": reviewed.passes,
            "candidates": len(reviewed.candidates),
            "model_top5": [[c.text, round(c.score, 6)] for c in doubted],
            "model_rank": model_rank(reviewed),
            "findings": [[text[f.start : f.end], round(f.score, 6),
                          overlaps(f.start, f.end, reviewed.task.ranges)] for f in found],
            "scored": [[c.start, c.end, c.token_start, float(f"{c.score:.4g}"), float(f"{c.favourite:.4g}"),
                        round(c.entropy, 3)] for c in reviewed.candidates]}  # fmt: skip


def model_rank(reviewed: Reviewed) -> int | None:
    """1-based rank of the bug's most doubted token among the candidates (None: no candidate hits)."""
    order = sorted(range(len(reviewed.candidates)), key=lambda i: -reviewed.candidates[i].doubt)
    hits = reviewed.hits()
    return next((n for n, i in enumerate(order, 1) if hits[i]), None)
