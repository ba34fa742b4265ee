"""The top candidates of a pass by infill's C routine against PyTorch's topk (infill.engine.
top_candidates), alternating in one process: the benchmark's next and ready fills of a shape with
random int4 weights (`ready_fill_passes.py`'s, 2 threads), with whether both wrote the same text;
then topk alone over a 152k-token vocabulary at 4 and 32 positions, medians of 50.

    python docs/experiments/top_candidates_ab.py [open-dcoder-0.5b|dream-7b] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from ready_fill_passes import paired_fills  # beside this script

from infill.engine import top_candidates
from infill.models.c_build import Build

BUILT = top_candidates.build()


def switched_to(build: Build):
    def switch(denoiser):
        top_candidates.build = lambda: build
        return denoiser

    return switch


def alone(positions: int) -> None:
    probs = torch.softmax(torch.randn(1, positions, 151_936) * 3, dim=-1)
    times = {}
    for name, build in (("C", BUILT), ("topk", Build(None, "switched"))):
        top_candidates.build = lambda build=build: build
        spent = []
        for _ in range(55):
            started = time.perf_counter()
            top_candidates.top(probs, 256)
            spent.append(time.perf_counter() - started)
        times[name] = 1000 * statistics.median(spent[5:])
    print(f"{positions} positions: {times['C']:.3f} ms with the C routine, {times['topk']:.3f} ms with topk")


def main() -> None:
    if BUILT.library is None:
        raise SystemExit(f"no C routine: {BUILT.reason}")
    shape = sys.argv[1] if len(sys.argv) > 1 else "open-dcoder-0.5b"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    torch.set_num_threads(2)
    kinds = {"C routine": switched_to(BUILT), "topk": switched_to(Build(None, "switched"))}
    paired_fills(shape, kinds, rounds)
    for positions in (4, 32):
        alone(positions)


if __name__ == "__main__":
    main()
