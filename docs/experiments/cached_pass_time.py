"""A cached span pass of a shape's network with random int4 weights on 2 threads, timed by hand:
the median of N passes over 4 positions, then over 16, after one refresh over a 512-token canvas
(docs/models.md, "Fewer operations a layer"). It times whichever `infill` Python imports, so
two versions of the code compare on one machine:

    python docs/experiments/cached_pass_time.py open-dcoder-0.5b 100
    cd OTHER_CHECKOUT && PYTHONPATH=. python ~/infill/docs/experiments/cached_pass_time.py open-dcoder-0.5b 9

Then the 4-position pass's 4-bit products alone: their time and the bytes they read (docs/models.md,
"Asking for the weights ahead"), where infill's kernel runs them.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from infill.bench.shapes import SHAPES, random_network
from infill.models import int4_native


def median_ms(network, ids, positions, cache, count: int) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        network.logits_at(ids, positions, cache, False)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def main() -> None:
    shape, count = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(2)
    network = random_network(SHAPES[shape][0], torch.device("cpu"), torch.float32, "int4")
    ids = torch.randint(0, 150_000, (1, 512), generator=torch.Generator().manual_seed(0))
    cache = network.new_cache()
    with torch.no_grad():
        network.logits_at(ids, torch.arange(200, 204), cache, True)
        median_ms(network, ids, torch.arange(200, 204), cache, 5)  # warm
        four = median_ms(network, ids, torch.arange(200, 204), cache, count)
        sixteen = median_ms(network, ids, torch.arange(200, 216), cache, count)
    print(f"{shape}: cached pass over 4 positions {four:.2f} ms, over 16 {sixteen:.2f} ms "
          f"(medians of {count})")  # fmt: skip
    if int4_native.available():
        products(network, ids, cache, count)


def products(network, ids, cache, count: int) -> None:
    """The 4-bit products' share of a 4-position pass, each call timed around its layer."""
    spent = {"seconds": 0.0, "calls": 0, "bytes": 0}
    forward = int4_native.NativeInt4Linear.forward

    def timed(layer, x):
        started = time.perf_counter()
        y = forward(layer, x)
        spent["seconds"] += time.perf_counter() - started
        spent["calls"] += 1
        spent["bytes"] += layer.nbytes()
        return y

    int4_native.NativeInt4Linear.forward = timed
    try:
        with torch.no_grad():
            for _ in range(count):
                network.logits_at(ids, torch.arange(200, 204), cache, False)
    finally:
        int4_native.NativeInt4Linear.forward = forward
    ms, calls = 1000 * spent["seconds"] / count, spent["calls"] // count
    mib, rate = spent["bytes"] / count / 2**20, spent["bytes"] / spent["seconds"] / 1e9
    print(f"  its 4-bit products: {ms:.2f} ms a pass in {calls} calls, {mib:.0f} MiB read ({rate:.1f} GB/s)")


if __name__ == "__main__":
    main()
