"""One logits table a pass against three, paired in one process (docs/models.md, "One logits
table a pass"): a shape's ready fill with random int4 weights on 2 threads, the functions as they
were before (the output layer at every computed position and the wanted rows copied out, the
kept context's rows copied out, the softmax into a new table) swapped in and out in turn, the
order alternating, each fill after an idle refresh. Prints the medians, the per-pair ratio, the
page faults a fill and whether both ways filled the same text.

    python docs/experiments/logits_tables_ab.py [open-dcoder-0.5b|dream-7b] [PAIRS]
"""

from __future__ import annotations

import resource
import statistics
import sys
import time

import torch
from ready_fill_passes import LINE_TOKENS, WINDOW, ready_fill_setup  # beside this script

import infill.engine.kept_context as kept_context
import infill.engine.prediction as prediction
import infill.models.denoiser as denoiser_module
from infill.bench.shapes import DecidedLength
from infill.engine.kept_context import KeptContext, context_ids
from infill.modes.fill import infill


@torch.no_grad()
def three_tables_cached_logits(self, ids, positions, cache, refresh):
    """CachingCheckpointDenoiser.cached_logits before: every computed row through the output layer."""
    ids = ids.to(self.device)
    if not self.shift:
        return self.network.logits_at(ids, positions.to(self.device), cache, refresh).cpu().float()
    needed, rows = denoiser_module.shifted(positions)
    out = self.network.logits_at(ids, needed.to(self.device), cache, refresh)
    return out[:, rows.to(self.device)].cpu().float()


ONE_TABLE_KEPT = kept_context.KeptContext.cached_logits


def three_tables_kept_logits(self, ids, positions, cache, refresh):
    """KeptContext.cached_logits before: a pass over the changed positions copied its rows out."""
    reused = self.reused_passes
    out = ONE_TABLE_KEPT(self, ids, positions, cache, refresh)
    return out.clone() if self.reused_passes > reused else out


def three_tables_softmax(denoiser, logits, special=None):
    """allowed_softmax before: the probabilities in a table of their own."""
    logits = logits.float()
    logits[..., special if special is not None else prediction.special_index(denoiser)] = float("-inf")
    return torch.softmax(logits, dim=-1)


WAYS = {
    "three tables": (three_tables_cached_logits, three_tables_kept_logits, three_tables_softmax),
    "one table": (denoiser_module.CachingCheckpointDenoiser.cached_logits, ONE_TABLE_KEPT,
                  prediction.allowed_softmax),  # fmt: skip
}


def use(way: str) -> None:
    cached, kept, softmax = WAYS[way]
    denoiser_module.CachingCheckpointDenoiser.cached_logits = cached
    kept_context.KeptContext.cached_logits = kept
    prediction.allowed_softmax = softmax


def main() -> None:
    shape = sys.argv[1] if len(sys.argv) > 1 else "open-dcoder-0.5b"
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    denoiser, document, span, next_span, options = ready_fill_setup(shape)
    kept = KeptContext(denoiser)
    infill(DecidedLength(kept, LINE_TOKENS), document, [span], options)  # the fill before
    prepared = context_ids(denoiser, document, next_span.start, WINDOW)
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    faults: dict[str, list[int]] = {way: [] for way in WAYS}
    texts: dict[str, set[str]] = {way: set() for way in WAYS}
    for index in range(pairs):
        for way in list(WAYS) if index % 2 == 0 else list(WAYS)[::-1]:
            use(way)
            kept.refresh(prepared)  # the language server's idle refresh (not timed)
            before, started = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
            result = infill(DecidedLength(kept, LINE_TOKENS), document, [next_span], options)
            times[way].append(1000 * (time.perf_counter() - started))
            faults[way].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
            texts[way].add(repr(result.edits))
    use("one table")
    old, new = times["three tables"], times["one table"]
    ratio = statistics.median(b / a for a, b in zip(old, new))
    same = texts["three tables"] == texts["one table"] and len(texts["one table"]) == 1
    print(f"{shape}, {pairs} pairs: ready fill three tables {statistics.median(old):.0f} ms, one table "
          f"{statistics.median(new):.0f} ms; one/three per pair (median) {ratio:.3f}; page faults a fill "
          f"{statistics.median(faults['three tables']):.0f} -> {statistics.median(faults['one table']):.0f}; "
          f"the same fill both ways: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
