"""Where one CPU fill's time goes: the network's forward passes against the engine's own work
between them (choosing tokens, parsing, repairing, moving the kept context), and the functions
of that own work that take the most (cProfile, switched off during the forwards). The forwards
are split by kind: refreshes (the whole window), span passes of at most SMALL positions (what
batching across requests can share) and larger ones (the kept context's recomputed runs), with
what that bounds: eight clients' throughput over one client's if the small span passes cost
nothing at all (the bound on issue 38's eight clients over one, on the same two cores).

The load of `infill-bench serve --in-process --kept-context --block-length 4 --block-passes` at
one client, without the driver's threads: the shipped model (bfloat16 on the CPU, 2 threads),
one-line fills of the held-out file of `infill.bench.serve.fill_bodies`, one after another on
the document's kept context. docs/serving.md, "Where a CPU fill's time goes".

    python docs/experiments/fill_time.py [FILLS] [TOP] [QUANTIZE]

QUANTIZE: the model's `--quantize` (auto, the default: bfloat16 where the CPU computes it, else
int4; none: bfloat16 or float32).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import torch

from infill.bench.serve import fill_bodies, with_sampler
from infill.engine.batching import PassDenoiser
from infill.engine.kept_context import DocumentContexts
from infill.engine.pipeline import Hooks, run
from infill.models import load
from infill.modes import FillRequest
from infill.options import InfillOptions
from infill.text.document import document_from_bytes
from infill.text.spans import line_span


def main() -> None:
    fills = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    quantize = sys.argv[3] if len(sys.argv) > 3 else "auto"
    torch.set_num_threads(2)
    denoiser = load(None, "cpu", quantize=quantize)
    options = with_sampler(InfillOptions(), {"block_length": 4, "block_passes": True})
    contexts = DocumentContexts()
    profile = cProfile.Profile()
    forward = {"seconds": 0.0, "passes": 0, "profiling": False}
    kinds: dict[str, float] = {}  # seconds of forwards by kind (`kind`)

    def execute(p):  # a pass, run as the in-process driver runs it, out of the profile
        if forward["profiling"]:
            profile.disable()
        started = time.perf_counter()
        try:
            return p.run(denoiser)
        finally:
            seconds = time.perf_counter() - started
            forward["seconds"] += seconds
            kinds[kind(p)] = kinds.get(kind(p), 0.0) + seconds
            forward["passes"] += 1
            if forward["profiling"]:
                profile.enable()

    def fill(body: dict) -> None:
        document = document_from_bytes(body["text"].encode("utf-8"))
        line = body["spans"][0]["lines"]
        request = FillRequest(document, [line_span(document.text, line, line)], options)
        kept = contexts.denoiser("document", denoiser)
        own = kept.fork(PassDenoiser(denoiser, execute))
        run(own, request, Hooks())
        kept.keep(own)

    bodies = fill_bodies()
    for body in bodies[:5]:  # warm up: the kernels built, the context kept
        fill(body)
    forward.update(seconds=0.0, passes=0, profiling=True)
    kinds.clear()
    started = time.perf_counter()
    profile.enable()
    for body in bodies[5 : 5 + fills]:
        fill(body)
    profile.disable()
    forward["profiling"] = False
    wall = time.perf_counter() - started
    own = wall - forward["seconds"]
    print(f"{fills} fills in {wall:.2f} s: forwards {1000 * forward['seconds'] / fills:.1f} ms a fill "
          f"({forward['passes'] / fills:.1f} passes), own work {1000 * own / fills:.1f} ms a fill "
          "(profiled: cProfile's own cost included)")  # fmt: skip
    each = {name: 1000 * seconds / fills for name, seconds in sorted(kinds.items())}
    print("forwards by kind, ms a fill: " + ", ".join(f"{name} {ms:.1f}" for name, ms in each.items()))
    fill_ms, own_ms = 1000 * wall / fills, 1000 * own / fills
    rest = fill_ms - each.get("small span", 0.0)  # a fill whose small span passes cost nothing
    cores = (own_ms + 2 * (rest - own_ms)) / 2  # its own work on one core beside forwards on two
    print(f"if the small span passes cost nothing: {rest:.0f} ms a fill against {fill_ms:.0f}, at most "
          f"{fill_ms / rest:.2f}x one client's throughput; {fill_ms / cores:.2f}x if, besides, every "
          "request's own work ran on one core while the forwards kept both busy")  # fmt: skip
    pstats.Stats(profile).sort_stats("cumulative").print_stats(top)


SMALL = 32  # positions: span passes up to this many batch (their products read the weights)


def kind(p) -> str:
    """A pass's kind for the split: "refresh", "small span" or "large span"."""
    if p.positions is None or p.refresh:
        return "refresh"
    return "small span" if len(p.positions) <= SMALL else "large span"


if __name__ == "__main__":
    main()
