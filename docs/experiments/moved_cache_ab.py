"""Moving a kept context's cache (infill.engine.kept_context.moved_cache) run by run, against the
way it was moved before (every kept position gathered and scattered by index, each key turned by
its own angle), paired in one process on 2 threads: the caches of a 512-position canvas at the
0.5B and the 7B shapes' layer counts and key/value heads (random numbers), moved as a one-line
fill's first pass moves them (the span's 16 tokens become 32 masks: two runs, one moved by 16).
Prints the medians of 30 moves each way and whether both give the same numbers
(docs/models.md, "One logits table a pass"); then the same for today's two ways, a layer at a
time (the CPU's) and every layer at once (a GPU's: `all_layers`), with the operations each
launches (torch.profiler, top-level operators; docs/serving.md, "A kept context moved").

    python docs/experiments/moved_cache_ab.py
"""

from __future__ import annotations

import statistics
import time
from functools import partial

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
        paired(shape, cache, length, {"gathered": gathered, "run by run": moved_cache})
        each = {"a layer at a time": partial(moved_cache, all_layers=False),
                "every layer at once": partial(moved_cache, all_layers=True)}  # fmt: skip
        paired(shape, cache, length, each)
        for way, move in each.items():
            with torch.profiler.profile() as profile:
                move(cache, RUNS, length, THETA)
            print(f"  {way}: {sum(1 for event in profile.events() if event.cpu_parent is None)} operations")


def paired(shape: str, cache: list, length: int, ways: dict) -> None:
    """Two ways of moving `cache`, alternating 30 times: their medians, and whether both give the
    same numbers."""
    times: dict[str, list[float]] = {way: [] for way in ways}
    for index in range(30):
        for way in list(ways) if index % 2 == 0 else list(ways)[::-1]:
            started = time.perf_counter()
            ways[way](cache, RUNS, length, THETA)
            times[way].append(1000 * (time.perf_counter() - started))
    old, new = (ways[way](cache, RUNS, length, THETA) for way in ways)
    same = all(torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values) for a, b in zip(old, new))
    first, second = ways
    print(f"{shape}: a 512-position cache moved: {first} {statistics.median(times[first]):.1f} ms, "
          f"{second} {statistics.median(times[second]):.1f} ms; the same numbers: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
