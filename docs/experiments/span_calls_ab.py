"""A shape's cached span pass (4 positions of a 512-token canvas, random int4 weights, 2 threads)
with its layers' C arguments made at every pass, as before 2026-12-02 evening (the network's
`span_calls` dropped before each pass), against made once (`Decoder.span_layer_calls`),
alternating in one process; docs/models.md, "The span layers' arguments made once":

    python docs/experiments/span_calls_ab.py open-dcoder-0.5b 16
"""

from __future__ import annotations

import statistics
import sys

import torch
from cached_pass_time import median_ms  # beside this script

from infill.bench.shapes import SHAPES, random_network

PASSES = 50  # a round's passes of each kind


class MadeEveryPass:
    """The network with its layers' C arguments dropped before each pass, so made again."""

    def __init__(self, network) -> None:
        self.network = network

    def logits_at(self, *args):
        self.network.span_calls = None
        return self.network.logits_at(*args)


def main() -> None:
    shape, rounds = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(2)
    network = random_network(SHAPES[shape][0], torch.device("cpu"), torch.float32, "int4")
    ids = torch.randint(0, 150_000, (1, 512), generator=torch.Generator().manual_seed(0))
    positions, cache = torch.arange(200, 204), network.new_cache()
    before, after = [], []
    with torch.no_grad():
        network.logits_at(ids, positions, cache, True)
        median_ms(network, ids, positions, cache, 5)  # warm
        for _ in range(rounds):
            before.append(median_ms(MadeEveryPass(network), ids, positions, cache, PASSES))
            after.append(median_ms(network, ids, positions, cache, PASSES))
    ratio = statistics.median([b / a for a, b in zip(before, after)])
    print(f"{shape}: made every pass {statistics.median(before):.2f} ms, made once "
          f"{statistics.median(after):.2f} ms, median of paired ratios {ratio:.3f} ({rounds} rounds of "
          f"{PASSES})")  # fmt: skip


if __name__ == "__main__":
    main()
