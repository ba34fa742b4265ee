"""The language server's cycle with a loaded network's blocks from the heap or mapped apart
(docs/models.md, "A pass's blocks from the heap"): a shape with random int4 weights on 2 threads,
the document's first fill, then CYCLES times an idle refresh and a ready fill of the next line
after it. `kept`: the code as it is (`infill.models.memory`: blocks kept in the heap after
loading, given back after each pass over the whole canvas); `apart`: every block of a MiB or more
mapped apart as while loading, nothing given back (as before 2026-11-29). One setting a process:
what one way leaves in the heap would serve the other, so compare processes run in turn. Prints
the medians, the page faults and the process's peak (VmHWM).

    python docs/experiments/heap_blocks_cycle.py [open-dcoder-0.5b|dream-7b] [kept|apart] [CYCLES]
"""

from __future__ import annotations

import resource
import statistics
import sys
import time

import torch
from ready_fill_passes import LINE_TOKENS, WINDOW, ready_fill_setup  # beside this script

import infill.models.denoiser as denoiser_module
from infill.bench.shapes import DecidedLength, peak_mib
from infill.engine.kept_context import KeptContext, context_ids
from infill.models.memory import return_big_blocks
from infill.modes.fill import infill


def timed(work) -> tuple[float, int]:
    """(milliseconds, page faults) of `work()`."""
    before, started = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    work()
    return 1000 * (time.perf_counter() - started), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def main() -> None:
    shape = sys.argv[1] if len(sys.argv) > 1 else "open-dcoder-0.5b"
    setting = sys.argv[2] if len(sys.argv) > 2 else "kept"
    cycles = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    denoiser, document, span, next_span, options = ready_fill_setup(shape)
    if setting == "apart":
        return_big_blocks()
        denoiser_module.give_back = lambda: False
    kept = KeptContext(denoiser)
    first = timed(lambda: infill(DecidedLength(kept, LINE_TOKENS), document, [span], options))
    prepared = context_ids(denoiser, document, next_span.start, WINDOW)
    refreshes, fills = [], []
    for _ in range(cycles):
        refreshes.append(timed(lambda: kept.refresh(prepared)))
        fills.append(timed(lambda: infill(DecidedLength(kept, LINE_TOKENS), document, [next_span], options)))

    def median(runs: list, index: int) -> float:
        return statistics.median(run[index] for run in runs)

    peak = peak_mib(torch.device("cpu"))
    print(f"{shape}, blocks {setting}: first fill {first[0]:.0f} ms ({first[1]} page faults); "
          f"refresh {median(refreshes, 0):.0f} ms ({median(refreshes, 1):.0f}); ready fill "
          f"{median(fills, 0):.0f} ms ({median(fills, 1):.0f}); peak {peak:.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
