"""Moving a kept context's cache (infill.engine.kept_context.moved_cache) run by run, against the
way it was moved before (every kept position gathered and scattered by index, each key turned by
its own angle), paired in one process on 2 threads: the caches of a 512-position canvas at the
0.5B and the 7B shapes' layer counts and key/value heads (random numbers), moved as a one-line
fill's first pass moves them (the span's 16 tokens become 32 masks: two runs, one moved by 16).
Prints the medians of 30 moves each way and whether both give the same numbers
(docs/models.md, "One logits table a pass").

    python docs/experiments/moved_cache_ab.py
"""

from __future__ import annotations

import statistics
import time

import torch

from infill.engine.kept_context import moved_cache, rotated
from infill.models.native.model import LayerCache

SHAPES = {"open-dcoder-0.5b": (24, 2, 64), "dream-7b": (28, 4, 128)}  # layers, key/value heads, head size
RUNS = [(0, 0, 250), (266, 282, 230)]  # (from, to, length): before the span, after it
THETA = 1_000_000.0


def gathered(cache: list, runs: list, length: int, theta: float) -> list:
    """The move as it was: the kept positions gathered by index, turned position by position."""
    old_at = torch.cat([torch.arange(i, i + n) for i, _, n in runs])
    new_at = torch.cat([torch.arange(j, j + n) for _, j, n in runs])
    moved = []
    for layer in cache:
        shape = (*layer.keys.shape[:2], length, layer.keys.shape[-1])
        keys, values = layer.keys.new_zeros(shape), layer.values.new_zeros(shape)
        keys[:, :, new_at] = rotated(layer.keys[:, :, old_at], new_at - old_at, theta)
        values[:, :, new_at] = layer.values[:, :, old_at]
        moved.append(LayerCache(keys, values))
    return moved


def main() -> None:
    torch.set_num_threads(2)
    length = RUNS[-1][1] + RUNS[-1][2] + 16
    for shape, (layers, heads, size) in SHAPES.items():
        cache = [LayerCache(torch.randn(1, heads, 512, size), torch.randn(1, heads, 512, size))
                 for _ in range(layers)]  # fmt: skip
        ways = {"gathered": gathered, "run by run": moved_cache}
        times: dict[str, list[float]] = {way: [] for way in ways}
        for index in range(30):
            for way in list(ways) if index % 2 == 0 else list(ways)[::-1]:
                started = time.perf_counter()
                ways[way](cache, RUNS, length, THETA)
                times[way].append(1000 * (time.perf_counter() - started))
        old, new = (ways[way](cache, RUNS, length, THETA) for way in ways)
        same = all(torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values) for a, b in zip(old, new))
        old_ms, new_ms = (statistics.median(times[way]) for way in ways)
        print(f"{shape}: a 512-position cache moved: gathered {old_ms:.1f} ms, run by run {new_ms:.1f} ms; "
              f"the same numbers: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
