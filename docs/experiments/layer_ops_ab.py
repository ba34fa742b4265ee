"""A layer's small operations in C (infill.models.layer_ops) against PyTorch's, paired in one
process: a shape with random int4 weights on 2 threads, each round timing with and without them in
turn (the order alternating), so that this machine's moving memory rate falls on both alike
(docs/models.md, "A layer's small operations in C"). Per round: the median of 20 cached passes
over 4 positions, and of 3 ready fills (`infill-bench shapes`'s: a line of 16 tokens in blocks of
4 with block passes, 8 passes, each after an idle refresh).

    python docs/experiments/layer_ops_ab.py [open-dcoder-0.5b|dream-7b] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from ready_fill_passes import LINE_TOKENS, WINDOW, ready_fill_setup  # beside this script

import infill.models.layer_ops as layer_ops
from infill.bench.shapes import DecidedLength
from infill.engine.kept_context import KeptContext, context_ids
from infill.modes.fill import infill


def main() -> None:
    shape = sys.argv[1] if len(sys.argv) > 1 else "open-dcoder-0.5b"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    if not layer_ops.build().library:
        raise SystemExit(f"infill's layer operations are not built here: {layer_ops.build().reason}")
    denoiser, document, span, next_span, options = ready_fill_setup(shape)
    kept = KeptContext(denoiser)
    infill(DecidedLength(kept, LINE_TOKENS), document, [span], options)  # the fill before
    prepared = context_ids(denoiser, document, next_span.start, WINDOW)
    ids = prepared  # (1, L): the canvas the idle refresh prepares
    positions = torch.arange(ids.shape[1] // 2, ids.shape[1] // 2 + 4)
    cache = denoiser.new_cache()
    denoiser.cached_logits(ids, positions, cache, refresh=True)

    def cached_pass() -> float:
        started = time.perf_counter()
        denoiser.cached_logits(ids, positions, cache, refresh=False)
        return time.perf_counter() - started

    def ready_fill() -> float:
        kept.refresh(prepared)  # the language server's idle refresh (not timed)
        started = time.perf_counter()
        infill(DecidedLength(kept, LINE_TOKENS), document, [next_span], options)
        return time.perf_counter() - started

    real = layer_ops.applies
    ratios: dict[str, list[float]] = {"cached pass": [], "ready fill": []}
    for round_ in range(rounds):
        found = {}
        for use in (True, False) if round_ % 2 else (False, True):
            layer_ops.applies = real if use else (lambda *tensors, bfloat16=False: False)
            for _ in range(3):
                cached_pass()  # warm
            found[use] = (
                1000 * statistics.median(cached_pass() for _ in range(20)),
                1000 * statistics.median(ready_fill() for _ in range(3)),
            )
        layer_ops.applies = real
        (torch_pass, torch_fill), (c_pass, c_fill) = found[False], found[True]
        ratios["cached pass"].append(torch_pass / c_pass)
        ratios["ready fill"].append(torch_fill / c_fill)
        print(f"round {round_ + 1}: cached pass {torch_pass:.2f} -> {c_pass:.2f} ms "
              f"({torch_pass / c_pass:.2f}x), ready fill {torch_fill:.0f} -> {c_fill:.0f} ms "
              f"({torch_fill / c_fill:.2f}x)")  # fmt: skip
    print(f"{shape}: PyTorch's operations over infill's, median of {rounds} rounds: "
          + ", ".join(f"{name} {statistics.median(values):.2f}x" for name, values in ratios.items()))


if __name__ == "__main__":
    main()
