"""The shipped model's span pass as served on this CPU (bfloat16, infill's product, 2 threads),
timed by hand with its layers in C (`fused_span_layers`, one call a layer) and as modules (the
same numbers; docs/models.md, "The shipped model's span layer in one call"): the median of N
passes over P positions of a 512-token canvas after one refresh, the two ways alternating.

    python docs/experiments/span_layer_time.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import infill.models.native.model as native
from infill.models import load
from infill.models.native.model import LayerCache


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    torch.set_num_threads(2)
    denoiser = load(None, "cpu")
    ids = torch.randint(10, 8000, (1, 512), generator=torch.Generator().manual_seed(0))
    cache = denoiser.new_cache()
    denoiser.cached_logits(ids, torch.arange(200, 204), cache, True)
    caches = {"in C": cache, "modules": [LayerCache(c.keys.clone(), c.values.clone()) for c in cache]}
    fused = native.fused_span_layers
    ways = {"in C": fused, "modules": lambda *args: None}
    for positions in (1, 4, 11, 32):
        span = torch.arange(200, 200 + positions)
        times: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(count):
            for way, run in ways.items():
                native.fused_span_layers = run
                started = time.perf_counter()
                denoiser.cached_logits(ids, span, caches[way], False)
                times[way].append(1000 * (time.perf_counter() - started))
        native.fused_span_layers = fused
        c, m = (statistics.median(times[way]) for way in ways)
        print(f"{positions:>2} positions: layers in C {c:.2f} ms, as modules {m:.2f} ms ({m / c:.2f}x)")


if __name__ == "__main__":
    main()
