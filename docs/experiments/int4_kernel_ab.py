"""infill's 4-bit kernel built from today's source against one built from another (a C file: an
earlier version, `git show COMMIT:infill/models/int4_native.c > old.c`), alternating in one
process, both ways checked to give the same numbers (or text).

`layers`: milliseconds of the 7B shape's MLP layers (up/gate 18,944 x 3,584, down 3,584 x 18,944;
each made three times over, so that the weights come from memory as in a pass) at 1-64 rows of
activations, medians of 7, 2 threads; every product compared to the bit.

`cached-layers`: the same for the 0.5B shape's MLP layers (up/gate 4,864 x 896, down 896 x 4,864:
2.2 MB of 4-bit weights each, one copy, so that they stay in the caches), the kernels' arithmetic
without the memory's reading, medians of 15 of 20 calls each.

SHAPE: the benchmark's ready fill (after an idle refresh, not timed) and next fill (from a fork of
the kept context the fill before left) of `ready_fill_passes.py`, random int4 weights, 2 threads;
the medians, the ratio fill by fill, and whether both kernels wrote the same text. The kernels are
swapped where infill asks for them (`int4_native.build`), so the modules' products and the C span
layers both take the one being timed.

`passes SHAPE`: a cached span pass over 4 and over 5 positions (after one pass over a 512-token
window), ten passes a kernel a round, alternating, the first kind first in even rounds; the medians,
the ratio round by round, whether the logits were the same.

`first SHAPE`: a pass over the whole 512-token window (a fresh cache each time) and the benchmark's
first fill of a line in the document (no kept context: that pass, then the line's), alternating,
the first kind first in even rounds; the medians, the ratio round by round, whether the passes'
logits and the fills' texts were the same both ways.

    python docs/experiments/int4_kernel_ab.py OTHER.c layers
    python docs/experiments/int4_kernel_ab.py OTHER.c cached-layers
    python docs/experiments/int4_kernel_ab.py OTHER.c [open-dcoder-0.5b|dream-7b|llada-8b] [ROUNDS]
    python docs/experiments/int4_kernel_ab.py OTHER.c passes [open-dcoder-0.5b|dream-7b|llada-8b] [ROUNDS]
    python docs/experiments/int4_kernel_ab.py OTHER.c first [open-dcoder-0.5b|dream-7b|llada-8b] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from ready_fill_passes import LINE_TOKENS, WINDOW, paired_fills, ready_fill_setup  # beside this script

from infill.bench.shapes import SHAPES, DecidedLength, random_network
from infill.models import c_build, int4_native
from infill.models.int4_native import NativeInt4Linear
from infill.modes.fill import infill


def built(source: Path, folder: Path) -> c_build.Build:
    build = c_build.build_elsewhere(source, folder, int4_native.declared, int4_native.FLAGS)
    if build.library is None:
        raise SystemExit(f"{source} did not build: {build.reason}")
    return build


LAYERS = {"7B MLP up/gate": (18944, 3584), "7B MLP down": (3584, 18944)}
CACHED_LAYERS = {"0.5B MLP up/gate": (4864, 896), "0.5B MLP down": (896, 4864)}


def layers(kernels: dict, shapes: dict = LAYERS, copies: int = 3, calls: int = 1, rounds: int = 7) -> None:
    """Each layer of `shapes` made `copies` times, each copy multiplied `calls` times a round."""
    torch.set_num_threads(2)
    torch.manual_seed(0)
    ours, theirs = kernels
    for name, (outputs, inputs) in shapes.items():
        made = [NativeInt4Linear(torch.randn(outputs, inputs) * 0.02, None) for _ in range(copies)]
        for rows in (1, 2, 4, 5, 8, 9, 16, 21, 33, 64):
            x = torch.randn(rows, inputs)
            ms: dict = {kernel: [] for kernel in kernels}
            products = {}
            for _ in range(rounds):
                for kernel, build in kernels.items():
                    started = time.perf_counter()
                    products[kernel] = [int4_native.matmul(x, c.tiles, c.scales, c.offsets, build.library)
                                        for c in made for _ in range(calls)]  # fmt: skip
                    ms[kernel].append(1000 * (time.perf_counter() - started) / len(products[kernel]))
            assert all(torch.equal(a, b) for a, b in zip(products[ours], products[theirs])), (name, rows)
            mine, other = statistics.median(ms[ours]), statistics.median(ms[theirs])
            print(f"{name}, {rows:>2} rows: {mine:7.3f} ms today's, {other:7.3f} ms {theirs} "
                  f"({mine / other:.2f}); the same numbers")  # fmt: skip


def switched_to(build: c_build.Build):
    """A kind for `paired_fills`: every 4-bit product (modules and C span layers) asks
    `int4_native.build` for its kernel; this kind answers `build`. A network keeps its C span
    layers' arguments, the kernel's address among them, once made (`Decoder.span_layer_calls`),
    so they are made again: until 2026-12-07 they were not, and since 2026-12-02 the fills and
    the first passes compared the output layer's kernel only (the layers took the first one's)."""

    def switch(denoiser):
        int4_native.build = lambda: build
        network = getattr(denoiser, "network", denoiser)
        for module in network.modules():
            if hasattr(module, "span_calls"):
                module.span_calls = None
        return denoiser

    return switch


def cached_passes(shape: str, kinds: dict, rounds: int) -> None:
    torch.set_num_threads(2)
    network = random_network(SHAPES[shape][0], torch.device("cpu"), torch.float32, "int4")
    ids = torch.randint(0, 120_000, (1, WINDOW), generator=torch.Generator().manual_seed(0))
    cache = network.new_cache()
    first, second = kinds
    with torch.no_grad():
        network.logits_at(ids, torch.arange(WINDOW), cache, True)
        for positions in (torch.arange(200, 204), torch.arange(200, 205)):
            ms, logits = {kind: [] for kind in kinds}, {}
            for r in range(rounds):
                for kind, switch in list(kinds.items())[:: 1 if r % 2 == 0 else -1]:
                    switch(network)  # its C span layers' kernel too
                    times = []
                    for _ in range(10):
                        started = time.perf_counter()
                        logits[kind] = network.logits_at(ids, positions, cache, False)
                        times.append(time.perf_counter() - started)
                    ms[kind].append(1000 * statistics.median(times))
            ratios = [a / b for a, b in zip(ms[first], ms[second])]
            mine, other = statistics.median(ms[first]), statistics.median(ms[second])
            print(f"{shape} cached pass over {len(positions)} positions: {mine:.2f} ms {first}, "
                  f"{other:.2f} ms {second} (medians of {rounds}); the first / the second: median "
                  f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
                  f"the same logits: {torch.equal(logits[first], logits[second])}")  # fmt: skip


def first_fills(shape: str, kinds: dict, rounds: int) -> None:
    denoiser, document, span, _, options = ready_fill_setup(shape)
    ids = torch.randint(0, 150_000, (1, WINDOW), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(200, 204)
    seconds = {(what, kind): [] for what in ("full pass", "first fill") for kind in kinds}
    logits, texts = {}, {kind: set() for kind in kinds}
    first, second = kinds
    for r in range(rounds):
        for kind, switch in list(kinds.items())[:: 1 if r % 2 == 0 else -1]:
            switch(denoiser)
            started = time.perf_counter()
            logits[kind] = denoiser.cached_logits(ids, positions, denoiser.new_cache(), refresh=True)
            seconds["full pass", kind].append(time.perf_counter() - started)
            started = time.perf_counter()
            result = infill(DecidedLength(denoiser, LINE_TOKENS), document, [span], options)
            seconds["first fill", kind].append(time.perf_counter() - started)
            texts[kind].add(result.spans[0].new_text)
        assert torch.equal(logits[first], logits[second]), f"round {r}: the logits differ"
    for what in ("full pass", "first fill"):
        a, b = seconds[what, first], seconds[what, second]
        ratios = [x / y for x, y in zip(a, b)]
        mine, other = 1000 * statistics.median(a), 1000 * statistics.median(b)
        print(f"{shape} {what}: {mine:.0f} ms {first}, {other:.0f} ms {second} (medians of {rounds}); "
              f"the first / the second: median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")  # fmt: skip
    print(f"the same logits every round; the same text both ways: {texts[first] == texts[second]}")


def main() -> None:
    other = Path(sys.argv[1])
    what = sys.argv[2] if len(sys.argv) > 2 else "open-dcoder-0.5b"
    with tempfile.TemporaryDirectory() as folder:
        kernels = {"today's kernel": int4_native.build(), other.name: built(other, Path(folder))}
        print({name: build.library.infill_int4_instructions().decode() for name, build in kernels.items()})
        kinds = {f"with {name}": switched_to(build) for name, build in kernels.items()}
        if what == "layers":
            layers(kernels)
        elif what == "cached-layers":
            layers(kernels, CACHED_LAYERS, copies=1, calls=20, rounds=15)
        elif what == "passes":
            shape = sys.argv[3] if len(sys.argv) > 3 else "open-dcoder-0.5b"
            cached_passes(shape, kinds, int(sys.argv[4]) if len(sys.argv) > 4 else 8)
        elif what == "first":
            shape = sys.argv[3] if len(sys.argv) > 3 else "open-dcoder-0.5b"
            first_fills(shape, kinds, int(sys.argv[4]) if len(sys.argv) > 4 else 8)
        else:
            paired_fills(what, kinds, int(sys.argv[3]) if len(sys.argv) > 3 else 8)


if __name__ == "__main__":
    main()
