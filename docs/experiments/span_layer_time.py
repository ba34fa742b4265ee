"""A span pass timed by hand with its layers in C (one call a layer) and as modules (the same
numbers; docs/models.md, "Span layers in one call"): the median of N passes over P positions of
a 512-token canvas after one refresh, the two ways alternating, 2 threads. SHAPE: the shipped
model as served on this CPU (bfloat16, infill's product; the default), or a published shape with
random 4-bit weights (infill.bench.shapes, float32 numbers, infill's 4-bit product).

    python docs/experiments/span_layer_time.py [N] [shipped | open-dcoder-0.5b | ...]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import infill.models.decoder as decoder
import infill.models.native.model as native
from infill.bench.shapes import SHAPES, random_network
from infill.models import load
from infill.models.native.model import LayerCache


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    shape = sys.argv[2] if len(sys.argv) > 2 else "shipped"
    torch.set_num_threads(2)
    if shape == "shipped":
        served = load(None, "cpu")
        network, new_cache = served.model.cached_logits, served.new_cache
        module, sizes = native, (1, 4, 11, 32)
    else:
        net = random_network(SHAPES[shape][0], torch.device("cpu"), torch.float32, "int4")
        network, new_cache, module, sizes = net.logits_at, net.new_cache, decoder, (1, 4, 8, 16)
    ids = torch.randint(10, 8000, (1, 512), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = new_cache()
        network(ids, torch.arange(200, 204), cache, True)
        caches = {"in C": cache, "modules": [LayerCache(c.keys.clone(), c.values.clone()) for c in cache]}
        fused = module.fused_span_layers
        ways = {"in C": fused, "modules": lambda *args: None}
        for positions in sizes:
            span = torch.arange(200, 200 + positions)
            times: dict[str, list[float]] = {way: [] for way in ways}
            for _ in range(count):
                for way, run in ways.items():
                    module.fused_span_layers = run
                    started = time.perf_counter()
                    network(ids, span, caches[way], False)
                    times[way].append(1000 * (time.perf_counter() - started))
            module.fused_span_layers = fused
            c, m = (statistics.median(times[way]) for way in ways)
            print(f"{shape} {positions:>2} positions: layers in C {c:.2f} ms, as modules {m:.2f} ms "
                  f"({m / c:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
