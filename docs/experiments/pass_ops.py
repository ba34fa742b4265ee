"""How many operations a span pass of the published families' network launches: each one is a
Python call, a dispatch and (on a GPU) a kernel launch, whatever the size of its tensors, so on a
GPU a span pass of the 7B shape is bound by their number, not by the weights (docs/serving.md,
"Measured"). Counted with torch.profiler on the CPU (top-level operators only), on a 2-layer
network with the Dream 7B shape's heads (28 query heads, 4 key/value heads) and tiny widths: the
count does not depend on the widths. A single span pass of 8 positions over a cached canvas, and
the batching driver's span forward (CacheRows, its passes packed in one row) of R canvases. The
operations are a GPU's: infill's C layer operations, which serve these passes on a CPU in calls
the profiler does not see, are switched off (INFILL_LAYER_OPS=pytorch).

`python docs/experiments/pass_ops.py`"""

from __future__ import annotations

import os

os.environ["INFILL_LAYER_OPS"] = "pytorch"  # before infill builds them (infill.models.layer_ops.SWITCH)

from dataclasses import replace  # noqa: E402

import torch  # noqa: E402

from infill.bench.shapes import SHAPES  # noqa: E402
from infill.models.decoder import Decoder  # noqa: E402
from infill.models.native.model import CacheRows  # noqa: E402

CANVAS = 300
SPAN = torch.arange(10, 18)


def top_level_ops(network: Decoder, *arguments) -> int:
    """Operators called from Python (not those they call) by `network.logits_at(*arguments)`."""
    with torch.profiler.profile() as profile:
        network.logits_at(*arguments)
    return sum(1 for event in profile.events() if event.cpu_parent is None)


def prepared(network: Decoder) -> tuple[torch.Tensor, list]:
    """A canvas and its cache, filled by a refresh."""
    ids = torch.randint(0, network.config.vocab_size, (1, CANVAS))
    cache = network.new_cache()
    network.logits_at(ids, SPAN, cache, True)
    return ids, cache


def counts(layers: int) -> tuple[int, dict[int, int]]:
    """Operations of one span pass, and of the driver's span forward by canvases."""
    torch.manual_seed(0)
    config = replace(SHAPES["dream-7b"][0], vocab_size=1000, hidden_size=64, intermediate_size=128,
                     num_layers=layers, head_dim=16)  # fmt: skip
    network = Decoder(config).eval()
    ids, cache = prepared(network)
    alone = top_level_ops(network, ids, SPAN, cache, False)
    batched = {}
    for rows in (1, 8):
        canvases = [prepared(network) for _ in range(rows)]  # packed as infill.models.batching packs them
        tokens = torch.cat([canvas_ids[0, SPAN] for canvas_ids, _ in canvases])[None]
        positions = SPAN.repeat(rows)[None]
        shared: dict = {}
        caches = [CacheRows([own[layer] for _, own in canvases], [1] * rows, [SPAN] * rows, shared)
                  for layer in range(layers)]  # fmt: skip
        batched[rows] = top_level_ops(network, tokens, positions, caches, False)
    return alone, batched


def main() -> None:
    (alone2, batched2), (alone4, batched4) = counts(2), counts(4)
    print(f"one span pass: {(alone4 - alone2) / 2:.1f} operations a layer, "
          f"{2 * alone2 - alone4} besides (embedding, positions, output)")  # fmt: skip
    further = (batched4[8] - batched4[1]) / 7 / 4
    print(f"the driver's span forward: {(batched4[1] - batched2[1]) / 2:.1f} operations a layer for "
          f"one canvas, {further:.1f} more a layer for each further canvas")  # fmt: skip


if __name__ == "__main__":
    main()
