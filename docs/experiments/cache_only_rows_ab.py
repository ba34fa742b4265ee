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

import sys

from ready_fill_passes import paired_fills  # beside this script


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
    kinds = {"with the rows skipped": lambda denoiser: denoiser, "without": EveryRow}
    paired_fills(shape, kinds, rounds)


if __name__ == "__main__":
    main()
