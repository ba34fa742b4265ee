"""infill's bfloat16 product (infill.models.bf16_native) against PyTorch's (oneDNN's), paired in one
process on the shipped model in bfloat16, 2 threads, each round timing both in turn (the order
alternating), so that this machine's moving memory rate falls on both alike (docs/models.md,
"bfloat16 products of our own"). Per round: the median of 200 span passes over 11 positions of a
512-token cached canvas, and the total of 40 held-out one-line fills (`infill-bench quality`'s
tasks, seed 0, the default options).

    python docs/experiments/bf16_products_ab.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import infill.models.bf16_native as bf16_native
from infill.bench.tasks import heldout_sources, make_tasks
from infill.models import load
from infill.modes.fill import infill
from infill.options import InfillOptions
from infill.text.document import Document

PASSES, FILLS = 200, 40


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    if not bf16_native.available():
        raise SystemExit(f"infill's bfloat16 kernel is not built here: {bf16_native.build().reason}")
    torch.set_num_threads(2)
    backend = load(None, "cpu", "bfloat16")
    model = backend.model
    tasks = make_tasks(heldout_sources(), ["line"], FILLS, 0, None)
    ids = torch.randint(3, model.config.vocab_size, (1, 512))
    positions = torch.arange(250, 261)
    cache = backend.new_cache()
    backend.cached_logits(ids, positions, cache, refresh=True)
    kernel = bf16_native.takes

    def span_pass() -> float:
        started = time.perf_counter()
        backend.cached_logits(ids, positions, cache, refresh=False)
        return time.perf_counter() - started

    def fills() -> float:
        started = time.perf_counter()
        for task in tasks:
            infill(backend, Document(task.text, bom=False, newline="\n"), [task.span], InfillOptions())
        return time.perf_counter() - started

    def timed(ours: bool) -> tuple[float, float]:
        bf16_native.takes = kernel if ours else (lambda x, weight: False)
        try:
            fills()  # warm: this side's shapes and caches
            passes = statistics.median(span_pass() for _ in range(PASSES))
            return passes, fills()
        finally:
            bf16_native.takes = kernel

    for round in range(rounds):
        order = (False, True) if round % 2 == 0 else (True, False)
        times = dict(zip(order, (timed(ours) for ours in order)))
        (pt_pass, pt_fills), (our_pass, our_fills) = times[False], times[True]
        print(f"round {round + 1}: span pass {1000 * pt_pass:.2f} -> {1000 * our_pass:.2f} ms "
              f"({pt_pass / our_pass:.2f}x); {FILLS} fills {pt_fills:.2f} -> {our_fills:.2f} s "
              f"({pt_fills / our_fills:.2f}x)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
