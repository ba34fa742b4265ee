"""Rank the scores of an `infill-bench review` run again: the probability order against doubt.

`infill-bench review --json R.json` keeps every candidate token of every window as [start, end,
token start, probability, favourite's probability, entropy]. This reads them back and prints the
top-1 / top-5 localization of two orders over the same scores, per bug kind, beside the run's
frequency ranker:

    probability  the least likely token first (review --top's order until 2026-11-27)
    doubt        the most doubted first: -log p less the entropy of the model's distribution
                 there (infill.modes.review.doubt, review --top's order now)

The same windows and the same forward passes, so the two columns differ only by the order.
Several files are pooled: every window counts once, the frequency ranker's figures weighted by
each run's windows.

    python docs/experiments/review_rankers.py docs/results/review_shipped_200windows.json.gz
    python docs/experiments/review_rankers.py docs/results/review_shipped_*.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from infill.bench.review import TOP_K, overlaps, top_k_hit
from infill.modes.review import doubt

ORDERS = {
    "probability": lambda p, entropy: p,
    "doubt": lambda p, entropy: -doubt(p, entropy),
}


def localization(tasks: list[dict], order: str, k: int) -> float:
    key = ORDERS[order]
    values = []
    for task in tasks:
        ranges = tuple(tuple(r) for r in task["ranges"])
        hits = [overlaps(start, end, ranges) for start, end, *_ in task["scored"]]
        keys = [key(p, entropy) for _, _, _, p, _, entropy in task["scored"]]
        values.append(top_k_hit(keys, hits, k))
    return sum(values) / len(values)


def read(path: str) -> dict:
    data = Path(path).read_bytes()
    return json.loads(gzip.decompress(data) if path.endswith(".gz") else data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+", help="infill-bench review --json files (.json or .json.gz)")
    args = parser.parse_args()
    runs = [read(path) for path in args.results]
    bugs = [t for run in runs for t in run["tasks"] if t["kind"] != "clean"]
    kinds = sorted({t["kind"] for t in bugs}, key=[t["kind"] for t in bugs].index)
    columns = [f"{order} top-{k}" for order in ORDERS for k in TOP_K] + ["frequency top-5"]
    print(f"{'kind':11} {'tasks':>5} " + " ".join(f"{c:>15}" for c in columns))
    for kind in [*kinds, "all"]:
        group = bugs if kind == "all" else [t for t in bugs if t["kind"] == kind]
        cells = [localization(group, order, k) for order in ORDERS for k in TOP_K]
        tables = [run["table"][kind] for run in runs if kind in run["table"]]
        cells.append(sum(t["frequency_top5"] * t["tasks"] for t in tables) / sum(t["tasks"] for t in tables))
        print(f"{kind:11} {len(group):5d} " + " ".join(f"{c:15.1%}" for c in cells))


if __name__ == "__main__":
    main()
