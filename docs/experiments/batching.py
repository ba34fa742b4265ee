"""Batched against one at a time: N fills of a held-out-like file on the shipped model.

    python docs/experiments/batching.py [--fills 4] [--kind line|block] [--repeat 3] [--threads 1]
                                        [--gather S]

Runs the same N fill requests (one span each, on different lines of a frozen copy of one of this
project's files, tests/data/tokenizer_texts/document.py.txt) once one after the other through
`pipeline.run`, and once submitted together to a `BatchingDriver`, alternating the two `--repeat`
times; prints the median wall time of each, the time per fill, the driver's rows per forward,
and whether every batched result equals its in-process one (edits and counts).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from infill.engine.batching import GATHER_S, BatchingDriver
from infill.engine.pipeline import run
from infill.models.native import load_backend
from infill.modes import FillRequest
from infill.text.document import document_from_bytes
from infill.text.spans import line_span

TEXT = (Path(__file__).parents[2] / "tests" / "data" / "tokenizer_texts" / "document.py.txt").read_text()
LINES = {
    "line": [(51, 51), (76, 76), (113, 113), (154, 154), (62, 62), (97, 97), (131, 131), (160, 160)],
    "block": [(60, 62), (75, 78), (145, 147), (130, 133), (94, 97), (152, 154), (83, 85), (158, 162)],
}


def outcome(result) -> list:
    return [(s.new_text, s.edit) for s in result.spans] + [result.stats.forward_passes]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fills", type=int, default=4)
    parser.add_argument("--kind", choices=sorted(LINES), default="line")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--gather", type=float, default=GATHER_S, help="the driver's gather_s")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    backend = load_backend()
    document = document_from_bytes(TEXT.encode())
    requests = [FillRequest(document, [line_span(TEXT, a, b)]) for a, b in LINES[args.kind][: args.fills]]
    for request in requests:  # warm up
        run(backend, request)
    alone_times, batched_times, same, rows = [], [], True, []
    for _ in range(args.repeat):
        started = time.perf_counter()
        alone = [run(backend, request) for request in requests]
        alone_times.append(time.perf_counter() - started)
        driver = BatchingDriver(backend, gather_s=args.gather)
        tickets = [driver.submit(request) for request in requests]
        started = time.perf_counter()
        with driver:
            batched = [ticket.result() for ticket in tickets]
        batched_times.append(time.perf_counter() - started)
        stats = driver.stats()
        rows.append(stats.rows_per_pass)
        same &= all(outcome(a) == outcome(b) for a, b in zip(alone, batched))
    one, many = statistics.median(alone_times), statistics.median(batched_times)
    print(f"{args.fills} {args.kind} fills, {args.threads} thread(s), gather {args.gather} s, "
          f"{args.repeat} runs each (medians):")  # fmt: skip
    print(f"  one at a time: {one:.3f} s ({one / args.fills * 1000:.0f} ms a fill)")
    print(f"  batched:       {many:.3f} s ({many / args.fills * 1000:.0f} ms a fill), "
          f"{statistics.median(rows):.2f} rows a forward (last run: {stats.passes} forwards, "
          f"{stats.shared_passes} shared, at most {stats.most_requests} requests)")  # fmt: skip
    print(f"  forwards took {stats.forward_seconds:.3f} s of the last batched run; "
          f"batched / one at a time: {many / one:.2f}; results identical: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
