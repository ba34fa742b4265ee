"""The interface the engine talks to: a `Denoiser` maps a canvas of token ids to logits and can
encode and decode text. The sampler and the engine use nothing else, so every model family
(`infill.models.native`, `.dream`, `.llada`) plugs in by implementing this Protocol.

Optional attributes a family may add (read with getattr): `expand_id` (DreamOn's `<|expand|>`,
None elsewhere), `recommended` (its authors' sampler settings, a plain dict), `framing`
(the tokens its authors put around every prompt: `infill.engine.canvas.Framing`; none by default) and
`scores_visible_tokens` (True: trained to restore randomly replaced visible tokens, so the
probability at an unmasked position judges the token there; False by default: a loss at masked
positions only. Fix mode scores a span by it: `infill.modes.fix.scores_visible_tokens`).

`Pass` is one call of the network methods below as data: the unit of work a request asks of the
model. In-process a pass runs at once (`Pass.run`); the batching driver (infill.engine.batching)
runs the pending passes of several requests as one forward, through a denoiser's
`run_passes` (`BatchingDenoiser`: the caching families, infill.models.batching).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


class Denoiser(Protocol):
    mask_id: int
    null_id: int | None  # None: the model has no null token (spans are then filled exactly)
    special_ids: frozenset[int]  # never generated (mask, padding, ...; not null)
    context_length: int

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, L) -> logits (B, L, vocab); bidirectional: every position sees the whole canvas.
        The tensor is the caller's, never one the denoiser keeps: the engine overwrites it (its
        probabilities in place, infill.engine.prediction.allowed_softmax); so are `cached_logits`'."""
        ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def token_text(self, token_id: int) -> str: ...


class CachingDenoiser(Denoiser, Protocol):
    """A denoiser that can compute a few positions of a canvas, reusing the keys and values of the
    rest from its last full pass (the optional speed path; see `infill.engine.prediction`)."""

    def new_cache(self) -> object: ...

    def cached_logits(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache,
        refresh: bool,
        predicted: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """ids (B, L), positions (P,) -> logits (B, P, vocab). `predicted` (Q,): indices into
        `positions`, the only ones whose logits are wanted, (B, Q, vocab); the others are computed
        for the cache alone (their keys and values), and the output layer skips them."""
        ...


@dataclass(frozen=True, eq=False)
class Pass:
    """One call of a denoiser's network: `logits(ids)` (positions None), or
    `cached_logits(ids, positions, cache, refresh, predicted)`. Frozen: the tensors it names belong
    to the request that asked (its canvas, its cache), and whoever runs it hands back what that call
    returns: logits (B, L, vocab), or (B, P, vocab) at `positions` ((B, Q, vocab) at the
    `predicted` ones), on the CPU in float32."""

    ids: torch.Tensor  # (B, L) the canvas rows
    positions: torch.Tensor | None = None  # (P,) the positions computed; None: every position, no cache
    cache: object = None  # the request's own cache (the denoiser's new_cache()), written by the pass
    refresh: bool = True  # a pass over the whole canvas that fills the cache; False: the positions
    #   only, on the cached keys and values of the rest (infill.engine.prediction)
    predicted: torch.Tensor | None = None  # (Q,) indices into positions: the logits wanted (None: all)

    @property
    def kind(self) -> str:
        """Passes of one kind can share a forward: "full" (every position's logits), "refresh", "span"."""
        if self.positions is None:
            return "full"
        return "refresh" if self.refresh else "span"

    @property
    def rows(self) -> int:
        return self.ids.shape[0]

    @property
    def work(self) -> int:
        """Positions the network computes for it: its rows times its positions (a pass over
        whole canvases: times their length)."""
        computed = self.ids.shape[1] if self.positions is None or self.refresh else len(self.positions)
        return self.rows * computed

    def run(self, denoiser: Denoiser) -> torch.Tensor:
        """The in-process driver: the call this pass stands for, on `denoiser`, now."""
        if self.positions is None:
            return denoiser.logits(self.ids)
        return denoiser.cached_logits(self.ids, self.positions, self.cache, self.refresh, self.predicted)


class BatchingDenoiser(CachingDenoiser, Protocol):
    """A caching denoiser that runs several passes of one kind (requests' canvases of different
    lengths) as one forward; each pass gets what its own call would return."""

    def run_passes(self, passes: list[Pass]) -> list[torch.Tensor]: ...
