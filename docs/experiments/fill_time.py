"""Where one CPU fill's time goes: the network's forward passes against the engine's own work
between them (choosing tokens, parsing, repairing, moving the kept context), and the functions
of that own work that take the most (cProfile, switched off during the forwards).

The load of `infill-bench serve --in-process --kept-context --block-length 4 --block-passes` at
one client, without the driver's threads: the shipped model (bfloat16 on the CPU, 2 threads),
one-line fills of the held-out file of `infill.bench.serve.fill_bodies`, one after another on
the document's kept context. docs/serving.md, "Where a CPU fill's time goes".

    python docs/experiments/fill_time.py [FILLS] [TOP]
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
    torch.set_num_threads(2)
    denoiser = load(None, "cpu")
    options = with_sampler(InfillOptions(), {"block_length": 4, "block_passes": True})
    contexts = DocumentContexts()
    profile = cProfile.Profile()
    forward = {"seconds": 0.0, "passes": 0, "profiling": False}

    def execute(p):  # a pass, run as the in-process driver runs it, out of the profile
        if forward["profiling"]:
            profile.disable()
        started = time.perf_counter()
        try:
            return p.run(denoiser)
        finally:
            forward["seconds"] += time.perf_counter() - started
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
    pstats.Stats(profile).sort_stats("cumulative").print_stats(top)


if __name__ == "__main__":
    main()
