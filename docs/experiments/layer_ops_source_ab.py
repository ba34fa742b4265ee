"""infill's layer operations (infill.models.layer_ops) built from today's source against one built
from another (a C file: an earlier version, `git show COMMIT:infill/models/layer_ops.c > old.c`),
alternating in one process. The library is swapped where infill asks for it (`layer_ops.build`),
so a build without the attention (`infill_attention_queries` 0) runs PyTorch's attention and the
span layers as modules, as infill does with it.

SHAPE, random int4 weights, 2 threads: per round the median of 20 cached passes over 4 positions
of a 512-token canvas each way; then the benchmark's next and ready fills (`ready_fill_passes.py`,
`paired_fills`), with whether both builds wrote the same text:

    python docs/experiments/layer_ops_source_ab.py OTHER.c [open-dcoder-0.5b|dream-7b] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from ready_fill_passes import paired_fills, ready_fill_setup  # beside this script

import infill.models.layer_ops as layer_ops
from infill.models import c_build


def built(source: Path, folder: Path) -> c_build.Build:
    build = c_build.build_elsewhere(source, folder, layer_ops.declared)
    if build.library is None:
        raise SystemExit(f"{source} did not build: {build.reason}")
    return build


def switched_to(build: c_build.Build):
    """A kind for `paired_fills`: infill's layer operations answer `build` (and its attention's
    size, asked once a build, is asked again)."""

    def switch(denoiser):
        layer_ops.build = lambda: build
        layer_ops.most_queries.cache_clear()
        return denoiser

    return switch


def cached_passes(shape: str, kinds: dict, rounds: int) -> None:
    denoiser = ready_fill_setup(shape)[0]
    ids = torch.randint(5, 1000, (1, 512), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(256, 260)
    ms: dict = {kind: [] for kind in kinds}
    logits: dict = {}
    with torch.no_grad():
        for _ in range(rounds):
            for kind, switch in kinds.items():
                inner = switch(denoiser)
                cache = inner.new_cache()
                inner.cached_logits(ids, positions, cache, refresh=True)
                times = []
                for _ in range(20):
                    started = time.perf_counter()
                    logits[kind] = inner.cached_logits(ids, positions, cache, refresh=False)
                    times.append(time.perf_counter() - started)
                ms[kind].append(1000 * statistics.median(times))
    first, second = kinds
    ratios = [a / b for a, b in zip(ms[first], ms[second])]
    largest = float((logits[first] - logits[second]).abs().max())
    print(f"{shape} cached pass over 4 positions: {statistics.median(ms[first]):.1f} ms {first}, "
          f"{statistics.median(ms[second]):.1f} ms {second} (medians of {rounds} rounds' medians of 20); "
          f"round by round: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, "
          f"max {max(ratios):.3f}); largest logit difference {largest:.2e}")  # fmt: skip


def main() -> None:
    other = Path(sys.argv[1])
    shape = sys.argv[2] if len(sys.argv) > 2 else "open-dcoder-0.5b"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    with tempfile.TemporaryDirectory() as folder:
        builds = {"today's build": layer_ops.build(), other.name: built(other, Path(folder))}
        print({name: f"{build.library.infill_attention_queries()} queries a head's attention"
               for name, build in builds.items()})  # fmt: skip
        kinds = {f"with {name}": switched_to(build) for name, build in builds.items()}
        cached_passes(shape, kinds, rounds)
        paired_fills(shape, kinds, rounds)


if __name__ == "__main__":
    main()
