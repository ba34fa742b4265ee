"""infill's 4-bit kernel built from today's source against one built from another (a C file: an
earlier version, `git show COMMIT:infill/models/int4_native.c > old.c`), alternating in one
process on the same network: the benchmark's ready fill (after an idle refresh, not timed) and next
fill (from a fork of the kept context the fill before left) of `ready_fill_passes.py`, random int4
weights, 2 threads. Prints the medians, the ratio fill by fill, and whether both kernels wrote the
same text. The kernels are swapped where infill asks for them (`int4_native.build`), so the
modules' products and the C span layers both take the one being timed:

    python docs/experiments/int4_kernel_ab.py OTHER.c [open-dcoder-0.5b|dream-7b|llada-8b] [ROUNDS]
"""

from __future__ import annotations

import ctypes
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ready_fill_passes import LINE_TOKENS, WINDOW, TimedPasses, ready_fill_setup  # beside this script

from infill.engine.kept_context import KeptContext, context_ids
from infill.models import c_build, int4_native
from infill.modes.fill import infill


def built(source: Path, folder: Path) -> c_build.Build:
    library = folder / f"{source.stem}.so"
    failure = c_build.compile_library(shutil.which("cc"), source, library, int4_native.FLAGS)
    if failure:
        raise SystemExit(f"{source} did not build: {failure}")

    return c_build.Build(int4_native.declared(ctypes.CDLL(str(library))), None)


def main() -> None:
    other = Path(sys.argv[1])
    shape = sys.argv[2] if len(sys.argv) > 2 else "open-dcoder-0.5b"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    with tempfile.TemporaryDirectory() as folder:
        kernels = {"today's": int4_native.build(), other.name: built(other, Path(folder))}
        print({name: build.library.infill_int4_instructions().decode() for name, build in kernels.items()})
        denoiser, document, span, next_span, options = ready_fill_setup(shape)
        after_fill = KeptContext(denoiser)
        infill(TimedPasses(after_fill, LINE_TOKENS, []), document, [span], options)  # the fill before
        prepared = context_ids(denoiser, document, next_span.start, WINDOW)
        ready = KeptContext(denoiser)
        seconds = {(fill, name): [] for fill in ("next", "ready") for name in kernels}
        texts = {name: set() for name in kernels}
        for _ in range(rounds):
            for name, build in kernels.items():
                int4_native.build = lambda build=build: build  # noqa: E731 (what every product asks)
                for fill in ("next", "ready"):
                    if fill == "ready":
                        ready.refresh(prepared)  # the language server's idle refresh (not timed)
                    kept = after_fill.fork(denoiser) if fill == "next" else ready
                    started = time.perf_counter()
                    result = infill(TimedPasses(kept, LINE_TOKENS, []), document, [next_span], options)
                    seconds[fill, name].append(time.perf_counter() - started)
                    texts[name].add(result.spans[0].new_text)
    ours, theirs = kernels
    for fill in ("next", "ready"):
        ratios = [a / b for a, b in zip(seconds[fill, ours], seconds[fill, theirs])]
        print(f"{shape} {fill} fill: {1000 * statistics.median(seconds[fill, ours]):.0f} ms with today's "
              f"kernel, {1000 * statistics.median(seconds[fill, theirs]):.0f} ms with {theirs} (medians of "
              f"{rounds}); today's / {theirs}, fill by fill: median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")  # fmt: skip
    print(f"the same text both ways: {texts[ours] == texts[theirs]}")


if __name__ == "__main__":
    main()
