"""The shipped family's rotary positions in one C call (infill.models.layer_ops.rotate_halves_)
against PyTorch's operations, on the shipped model in bfloat16 (2 threads): a span pass over 11
positions of a 512-token cached canvas, the two ways alternating pass by pass, 3,000 passes; the
medians of each 1,000 (docs/models.md, "bfloat16 products of our own"). The logits are the same
bit for bit (tests/models/test_layer_ops.py).

    python docs/experiments/rotation_ab.py
"""

from __future__ import annotations

import statistics
import time

import torch

import infill.models.layer_ops as layer_ops
from infill.models import load

PASSES, PART = 3000, 1000


def main() -> None:
    torch.set_num_threads(2)
    backend = load(None, "cpu", "bfloat16")
    ids = torch.randint(3, backend.model.config.vocab_size, (1, 512))
    positions = torch.arange(250, 261)
    cache = backend.new_cache()
    backend.cached_logits(ids, positions, cache, refresh=True)
    applies = layer_ops.applies

    def without_rotation(*tensors, bfloat16=False):  # (qkv, cos, sin) is the rotation's question
        if len(tensors) == 3 and tensors[0].dim() == 4 and tensors[1].dim() <= 2:
            return False
        return applies(*tensors, bfloat16=bfloat16)

    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        for index in range(PASSES):
            ours = index % 2 == 1
            layer_ops.applies = applies if ours else without_rotation
            started = time.perf_counter()
            backend.cached_logits(ids, positions, cache, refresh=False)
            times[ours].append(time.perf_counter() - started)
    finally:
        layer_ops.applies = applies
    for start in range(0, PASSES // 2, PART // 2):
        theirs = 1000 * statistics.median(times[False][start : start + PART // 2])
        ours = 1000 * statistics.median(times[True][start : start + PART // 2])
        print(f"passes {2 * start}-{2 * start + PART}: PyTorch's rotation {theirs:.2f} ms -> "
              f"C {ours:.2f} ms ({theirs / ours:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
