"""A ready fill of a shape with random int4 weights, pass by pass: the positions each pass
computes and its milliseconds, the network's time and the rest (the sampler's and the pipeline's
own work), for six fills each after an idle refresh, 2 threads. The fill is `infill-bench
shapes`'s (a line of 16 tokens in blocks of 4 with block passes, 8 passes; docs/models.md,
"Asking for the weights ahead"). It times whichever `infill` Python imports:

    python docs/experiments/ready_fill_passes.py [open-dcoder-0.5b|dream-7b|llada-8b]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from infill.bench.cli import code_lines, line_span, speed_file
from infill.bench.shapes import DecidedLength, random_denoiser
from infill.engine.canvas import default_budget
from infill.engine.kept_context import KeptContext, context_ids
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes

WINDOW, LINE_TOKENS, FILLS = 512, 16, 6


class TimedPasses(DecidedLength):
    """The benchmark's decided length, each pass's positions and seconds kept in `passes`."""

    def __init__(self, inner, tokens: int, passes: list) -> None:
        super().__init__(inner, tokens)
        self.passes = passes

    def cached_logits(self, ids, positions, cache, refresh, predicted=None):
        started = time.perf_counter()
        logits = super().cached_logits(ids, positions, cache, refresh, predicted)
        self.passes.append((len(positions), time.perf_counter() - started))
        return logits


def ready_fill_setup(shape: str):
    """The benchmark's ready fill for `shape` (random int4 weights, 2 threads): (denoiser,
    document, the line filled before, the line filled ready, options)."""
    torch.set_num_threads(2)
    text = speed_file()
    code = code_lines(text)
    middle = len(code) // 2
    span = line_span(text, code[middle], code[middle])
    next_span = line_span(text, code[middle + 1], code[middle + 1])
    denoiser = random_denoiser(shape, torch.device("cpu"), torch.float32, "int4")
    document = document_from_bytes(text.encode())
    sampler = SamplerConfig(steps=8, commit_threshold=1.0, block_length=4, block_passes=True)
    options = InfillOptions(sampler=sampler, retries=0, token_edits=0, fresh_fills=0, recall=False,
                            context_length=WINDOW, budget=default_budget(LINE_TOKENS, WINDOW))  # fmt: skip
    return denoiser, document, span, next_span, options


def paired_fills(shape: str, kinds: dict, rounds: int) -> None:
    """The benchmark's next fill (from a fork of the kept context the fill before left) and ready
    fill (after an idle refresh, not timed) of `shape`, for two kinds alternating in one process,
    `rounds` times: the medians, the first kind's time over the second's fill by fill, and whether
    both wrote the same text. `kinds`: name -> a function called before that kind's fills, given the
    benchmark's denoiser, returning the denoiser they use (after switching whatever it switches)."""
    denoiser, document, span, next_span, options = ready_fill_setup(shape)
    after_fill = KeptContext(denoiser)
    infill(TimedPasses(after_fill, LINE_TOKENS, []), document, [span], options)  # the fill before
    prepared = context_ids(denoiser, document, next_span.start, WINDOW)
    ready: dict = {}
    seconds = {(fill, kind): [] for fill in ("next", "ready") for kind in kinds}
    texts = {kind: set() for kind in kinds}
    for _ in range(rounds):
        for kind, switch in kinds.items():
            inner = switch(denoiser)
            if kind not in ready:
                ready[kind] = KeptContext(inner)  # each kind's own, refreshed before each ready fill
            for fill in ("next", "ready"):
                if fill == "ready":
                    ready[kind].refresh(prepared)  # the language server's idle refresh (not timed)
                kept = after_fill.fork(inner) if fill == "next" else ready[kind]
                started = time.perf_counter()
                result = infill(TimedPasses(kept, LINE_TOKENS, []), document, [next_span], options)
                seconds[fill, kind].append(time.perf_counter() - started)
                texts[kind].add(result.spans[0].new_text)
    first, second = kinds
    for fill in ("next", "ready"):
        ratios = [a / b for a, b in zip(seconds[fill, first], seconds[fill, second])]
        print(f"{shape} {fill} fill: {1000 * statistics.median(seconds[fill, first]):.0f} ms {first}, "
              f"{1000 * statistics.median(seconds[fill, second]):.0f} ms {second} (medians of {rounds}); "
              f"the first / the second, fill by fill: median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")  # fmt: skip
    print(f"the same text both ways: {texts[first] == texts[second]}")


def main() -> None:
    shape = sys.argv[1] if len(sys.argv) > 1 else "open-dcoder-0.5b"
    denoiser, document, span, next_span, options = ready_fill_setup(shape)
    kept = KeptContext(denoiser)
    infill(TimedPasses(kept, LINE_TOKENS, []), document, [span], options)  # the fill before
    prepared = context_ids(denoiser, document, next_span.start, WINDOW)
    totals, others = [], []
    for _ in range(FILLS):
        kept.refresh(prepared)  # the language server's idle refresh (not timed)
        passes: list = []
        started = time.perf_counter()
        infill(TimedPasses(kept, LINE_TOKENS, passes), document, [next_span], options)
        total = time.perf_counter() - started
        network = sum(seconds for _, seconds in passes)
        totals.append(total)
        others.append(total - network)
        each = ", ".join(f"{count} in {1000 * seconds:.1f}" for count, seconds in passes)
        print(f"ready fill {1000 * total:.0f} ms: passes (positions in ms) {each}; "
              f"network {1000 * network:.0f} ms, the rest {1000 * (total - network):.0f} ms")  # fmt: skip
    print(f"{shape}: medians of {FILLS}: ready fill {1000 * statistics.median(totals):.0f} ms, "
          f"the rest {1000 * statistics.median(others):.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
