"""A cached span pass of a shape's network with random int4 weights on 2 threads, timed by hand:
the median of N passes over 4 positions, then over 16, after one refresh over a 512-token canvas
(docs/models.md, "Fewer operations a layer"). It times whichever `infill` Python imports, so
two versions of the code compare on one machine:

    python docs/experiments/cached_pass_time.py open-dcoder-0.5b 100
    cd OTHER_CHECKOUT && PYTHONPATH=. python ~/infill/docs/experiments/cached_pass_time.py open-dcoder-0.5b 9
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from infill.bench.shapes import SHAPES, random_network


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


if __name__ == "__main__":
    main()
