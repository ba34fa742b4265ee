"""One of the shipped family's layer operations in C (infill.models.layer_ops) against PyTorch's,
on the shipped model in bfloat16 (2 threads): "rotation" (`rotate_halves_`) or "gate" (the MLP's
silu(gate) * up, `swiglu`). A span pass over 11 positions of a 512-token cached canvas, the two
ways alternating pass by pass, 3,000 passes; the medians of each 1,000 (docs/models.md,
"bfloat16 products of our own"). The logits are the same bit for bit for the rotation, and
nearly so for the gate (tests/models/test_layer_ops.py).

    python docs/experiments/shipped_op_ab.py rotation|gate
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import infill.models.layer_ops as layer_ops
from infill.models import load

PASSES, PART = 3000, 1000


def main() -> None:
    operation = sys.argv[1] if len(sys.argv) > 1 else "rotation"
    torch.set_num_threads(2)
    backend = load(None, "cpu", "bfloat16")
    ids = torch.randint(3, backend.model.config.vocab_size, (1, 512))
    positions = torch.arange(250, 261)
    cache = backend.new_cache()
    backend.cached_logits(ids, positions, cache, refresh=True)
    applies = layer_ops.applies

    def without(*tensors, bfloat16=False):  # (qkv, cos, sin) is the rotation's question; (x,) the gate's
        rotation = len(tensors) == 3 and tensors[0].dim() == 4 and tensors[1].dim() <= 2
        if (rotation and operation == "rotation") or (len(tensors) == 1 and operation == "gate"):
            return False
        return applies(*tensors, bfloat16=bfloat16)

    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        for index in range(PASSES):
            ours = index % 2 == 1
            layer_ops.applies = applies if ours else without
            started = time.perf_counter()
            backend.cached_logits(ids, positions, cache, refresh=False)
            times[ours].append(time.perf_counter() - started)
    finally:
        layer_ops.applies = applies
    for start in range(0, PASSES // 2, PART // 2):
        theirs = 1000 * statistics.median(times[False][start : start + PART // 2])
        ours = 1000 * statistics.median(times[True][start : start + PART // 2])
        print(f"passes {2 * start}-{2 * start + PART}: PyTorch's {operation} {theirs:.2f} ms -> "
              f"C {ours:.2f} ms ({theirs / ours:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
