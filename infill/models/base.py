"""The interface the engine talks to: a `Denoiser` maps a canvas of token ids to logits and can
encode and decode text. The sampler and the engine use nothing else, so every model family
(`infill.models.native`, `.dream`, `.llada`) plugs in by implementing this Protocol.

Optional attributes a family may add (read with getattr): `expand_id` (DreamOn's `<|expand|>`,
None elsewhere), `recommended` (its authors' sampler settings, a plain dict), `framing`
(the tokens its authors put around every prompt: `infill.engine.canvas.Framing`; none by default) and
`scores_visible_tokens` (True: trained to restore randomly replaced visible tokens, so the
probability at an unmasked position judges the token there; False by default: a loss at masked
positions only. Fix mode scores a span by it: `infill.modes.fix.scores_visible_tokens`).
"""

from __future__ import annotations

from typing import Protocol

import torch


class Denoiser(Protocol):
    mask_id: int
    null_id: int | None  # None: the model has no null token (spans are then filled exactly)
    special_ids: frozenset[int]  # never generated (mask, padding, ...; not null)
    context_length: int

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, L) -> logits (B, L, vocab); bidirectional: every position sees the whole canvas."""
        ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def token_text(self, token_id: int) -> str: ...


class CachingDenoiser(Denoiser, Protocol):
    """A denoiser that can compute a few positions of a canvas, reusing the keys and values of the
    rest from its last full pass (the optional speed path; see `infill.engine.prediction`)."""

    def new_cache(self) -> object: ...

    def cached_logits(self, ids: torch.Tensor, positions: torch.Tensor, cache, refresh: bool) -> torch.Tensor:
        """ids (B, L), positions (P,) -> logits (B, P, vocab)."""
        ...
