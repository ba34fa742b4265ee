"""The ready and next fills of `ready_fill_passes.py` with and without the output layer skipping
the rows a pass computes for the cache alone (a decided line's <null> padding, in the pass after
the length is decided; a kept context's changed positions beyond the span, in a fill's first
pass), alternating in one process: medians of the fills' milliseconds, the ratio fill by fill,
and whether the two kinds wrote the same text. "without" runs the output layer at every position
a pass computes, as before the change, and drops the rows not asked for. A next fill starts from
the kept context the fill before left (a fork of it each time), a ready fill from an idle
refresh (not timed):

    python docs/experiments/cache_only_rows_ab.py [open-dcoder-0.5b|dream-7b|llada-8b] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time

from ready_fill_passes import LINE_TOKENS, WINDOW, TimedPasses, ready_fill_setup  # beside this script

from infill.engine.kept_context import KeptContext, context_ids
from infill.modes.fill import infill


class EveryRow:
    """The denoiser as it was: the output layer at every position a pass computes, the rows not
    asked for dropped after it."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def cached_logits(self, ids, positions, cache, refresh, predicted=None):
        logits = self.inner.cached_logits(ids, positions, cache, refresh)
        return logits if predicted is None else logits[:, predicted]


def main() -> None:
    shape = sys.argv[1] if len(sys.argv) > 1 else "open-dcoder-0.5b"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    denoiser, document, span, next_span, options = ready_fill_setup(shape)
    after_fill = KeptContext(denoiser)
    infill(TimedPasses(after_fill, LINE_TOKENS, []), document, [span], options)  # the fill before
    prepared = context_ids(denoiser, document, next_span.start, WINDOW)
    kinds = {"with": denoiser, "without": EveryRow(denoiser)}
    ready = {kind: KeptContext(inner) for kind, inner in kinds.items()}
    seconds = {(fill, kind): [] for fill in ("next", "ready") for kind in kinds}
    texts = {kind: set() for kind in kinds}
    for _ in range(rounds):
        for kind, inner in kinds.items():
            for fill in ("next", "ready"):
                if fill == "ready":
                    ready[kind].refresh(prepared)  # the language server's idle refresh (not timed)
                kept = after_fill.fork(inner) if fill == "next" else ready[kind]
                started = time.perf_counter()
                result = infill(TimedPasses(kept, LINE_TOKENS, []), document, [next_span], options)
                seconds[fill, kind].append(time.perf_counter() - started)
                texts[kind].add(result.spans[0].new_text)
    for fill in ("next", "ready"):
        ratios = [a / b for a, b in zip(seconds[fill, "with"], seconds[fill, "without"])]
        print(f"{shape} {fill} fill: {1000 * statistics.median(seconds[fill, 'with']):.0f} ms with the rows "
              f"skipped, {1000 * statistics.median(seconds[fill, 'without']):.0f} ms without (medians of "
              f"{rounds}); with / without, fill by fill: median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")  # fmt: skip
    print(f"the same text both ways: {texts['with'] == texts['without']}")


if __name__ == "__main__":
    main()
