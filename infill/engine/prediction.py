"""Token probabilities at a canvas's editable positions, one call per denoising step.

Between two steps only the editable positions change; the fixed context before and after them
does not. A denoiser that can cache (`CachingDenoiser`: the shipped model can) runs one pass over
the whole canvas on the first step and every `refresh` steps after it, and in the steps between
computes only the editable positions, attending to the context's keys and values from the last
full pass (Fast-dLLM's "dual cache"). The output layer runs at the editable positions only.
A step then costs in proportion to the span, not to the file's window.

The cached context was computed while the span was more masked than it is now: an
approximation, which `infill-bench speed` and `infill-bench quality --cache-refresh` measure.
`refresh=1` runs every step over the whole canvas (exact), as does a denoiser without a cache.
Once a span's length is decided, its <null> padding is context too: `narrow` drops it from the
computed positions (after one more pass that caches it, its output layer at the content alone),
so a cached step costs in proportion to the span's content.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from infill.engine.kept_context import without_kept_context

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.engine.canvas import Canvas
    from infill.models.base import Denoiser



class CanvasPredictor:
    def __init__(self, denoiser: Denoiser, editable: torch.Tensor, refresh: int, keep_first: bool = False):
        """editable (B, L) bool: the positions whose probabilities are wanted (the same columns
        serve every row); refresh: full passes every this many steps (1: every step);
        keep_first: keep row 0's log-probabilities of the first pass (`first_view`)."""
        self.denoiser = denoiser
        self.columns = editable.any(0).nonzero().flatten()  # the positions the next pass computes
        self.wanted = self.columns  # those whose probabilities are wanted: the rest, for the cache alone
        self.refresh = refresh
        self.caching = refresh > 1 and hasattr(denoiser, "cached_logits")
        self.cache = denoiser.new_cache() if self.caching else None
        self.calls = 0
        self.full_passes = 0
        self.computed = 0  # positions computed, summed over the passes (what cached passes cost)
        self.special = special_index(denoiser)
        self.keep_first = keep_first
        self.first_view: tuple[torch.Tensor, torch.Tensor] | None = None  # (columns, (P, vocab) log-probs)

    def narrow(self, editable: torch.Tensor) -> None:
        """After the next pass only `editable` (a subset of the positions so far) is wanted, e.g.
        once a span's <null> padding is final. The next pass still computes the positions that
        leave (not their probabilities), so that the cache holds their keys and values with their
        final tokens; the passes after it compute `editable` alone."""
        self.wanted = editable.any(0).nonzero().flatten()

    def focus(self, wanted: torch.Tensor) -> None:
        """The next pass computes only the `wanted` positions ((B, L) bool; the same columns serve
        every row), on the cached keys and values of the others, until `focus` is called again
        (block passes: infill.engine.sampler; those not wanted, for the cache, in the next pass
        only). Without a cache every pass computes them all."""
        if self.caching:
            self.columns = wanted.any(0).nonzero().flatten()

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, L) ids -> (columns (P,), probabilities (B, P, vocab) at those positions): the
        positions computed whose probabilities are wanted, special tokens (mask, padding, ...)
        ruled out."""
        full = not self.caching or self.calls % self.refresh == 0
        self.calls += 1
        self.full_passes += int(full)
        self.computed += len(self.columns)
        keep = torch.isin(self.columns, self.wanted)
        columns, predicted = self.columns, None if bool(keep.all()) else keep.nonzero().flatten()
        if self.caching:
            logits = self.denoiser.cached_logits(x, columns, self.cache, full, predicted)
        else:
            logits = self.denoiser.logits(x)[:, columns if predicted is None else columns[predicted]]
        if predicted is not None:  # the others were computed for the cache, once: not again
            columns = self.columns = columns[predicted]
        if self.keep_first and self.calls == 1:  # the canvas as laid out, every position masked
            self.first_view = columns, torch.log_softmax(logits[0].float(), -1)
        return columns, allowed_softmax(self.denoiser, logits, self.special)


def allowed_softmax(
    denoiser: Denoiser, logits: torch.Tensor, special: torch.Tensor | None = None
) -> torch.Tensor:
    """Softmax over the vocabulary with the special tokens (mask, padding...) ruled out
    (`special`: `special_index(denoiser)`, made once by a caller that asks every pass)."""
    logits = logits.float()  # in place, as the denoiser's logits are the caller's (CachingDenoiser):
    logits[..., special if special is not None else special_index(denoiser)] = float("-inf")
    return torch.softmax(logits, dim=-1, out=logits)  # no second (P, vocab) table: 20 MB a pass
    #   at 152k tokens and 33 positions, on fresh pages (tests/engine/test_prediction.py: the same numbers)


def special_index(denoiser: Denoiser) -> torch.Tensor:
    """The denoiser's special ids as an index tensor (a checkpoint whose tokenizer covers few of
    its output rows has over 100k of them: made from the set at every pass, 50 ms)."""
    return torch.tensor(sorted(denoiser.special_ids), dtype=torch.long)


def exact_slot_logits(
    denoiser: Denoiser, canvas: Canvas, ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(columns (P,): the slot positions of `canvas`, logits (P, vocab) there) of one exact pass
    over `ids` (1, L), its output layer at the slots alone where the denoiser can
    (`exact_logits_at`); never through a kept context (the document's stays untouched)."""
    columns = torch.tensor(canvas.editable()).nonzero().flatten()
    with torch.no_grad():
        return columns, exact_logits_at(without_kept_context(denoiser), ids, columns)[0]


def rows_of(columns: torch.Tensor, length: int) -> torch.Tensor:
    """(length,) long: each of `columns`' row in the values (P, ...) computed there, -1 elsewhere."""
    row = torch.full((length,), -1, dtype=torch.long)
    row[columns] = torch.arange(len(columns))
    return row


def exact_logits_at(denoiser: Denoiser, ids: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """ids (B, L) -> logits (B, P, vocab) at `columns` (P,) of one exact pass over the whole
    canvas: the output layer at those positions alone where the denoiser can (`cached_logits`
    on a fresh cache), else the full logits cut there."""
    if hasattr(denoiser, "cached_logits"):
        return denoiser.cached_logits(ids, columns, denoiser.new_cache(), refresh=True)
    return denoiser.logits(ids)[:, columns]


def token_probabilities(denoiser: Denoiser, x: torch.Tensor) -> torch.Tensor:
    """Softmax over the vocabulary at every position, special tokens ruled out (one full pass)."""
    return allowed_softmax(denoiser, denoiser.logits(x))
