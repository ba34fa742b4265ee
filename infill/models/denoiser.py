"""A published checkpoint behind the engine's `Denoiser` interface: network + tokenizer + the
family's conventions (which token masks, which one pads, whether predictions are shifted).

The shift: Dream-family models and Open-dCoder were trained from autoregressive models and kept
their habit of predicting the NEXT token: the network's output at position i-1 is the prediction
for the token at i. The engine wants row i to predict the token at i, so a shifted family's rows
are moved one down (row 0 keeps the network's row 0, as the authors' samplers do).

Tensors cross the interface on the CPU in float32; the network runs on its own device and dtype.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from infill.engine.canvas import NO_FRAMING, Framing
from infill.models.base import Pass
from infill.models.batching import run_batch
from infill.models.decoder import Decoder
from infill.models.memory import give_back
from infill.models.vocabulary import CheckpointTokenizer

CONTEXT_CAP = 2048  # canvas tokens: these models accept far more, but each pass costs with the canvas
CPU_CONTEXT = 512  # on the CPU, a window of this many tokens around the spans: a full pass of the
#   0.5B shape costs about 6-8 s at 256 tokens and 10-16 s at 1,024 on 2 cores (docs/models.md);
#   --context-length / the server's contextLength set another


def device_context(limit: int, device: torch.device) -> int:
    """The window a checkpoint gets on `device`: at most `limit` (its own), CPU_CONTEXT on the
    CPU, CONTEXT_CAP elsewhere."""
    return min(limit, CPU_CONTEXT if device.type == "cpu" else CONTEXT_CAP)


@dataclass(eq=False)
class CheckpointDenoiser:
    family: str  # "Dream", "DreamOn", "Open-dCoder", "LLaDA", ...
    network: torch.nn.Module  # ids (B, L) -> logits (B, L, vocab)
    tokenizer: CheckpointTokenizer
    mask_id: int
    null_id: int | None  # the end-of-text token these models pad with: dropped on decoding
    special_ids: frozenset[int]  # every added/special token but the null, and ids with no token
    context_length: int
    shift: bool  # the network's row i predicts the token at i + 1
    device: torch.device
    expand_id: int | None = None  # DreamOn's <|expand|> (in special_ids until a sampler handles it)
    recommended: dict = field(default_factory=dict)  # the authors' sampler settings (see the family)
    framing: Framing = NO_FRAMING  # the tokens the authors put around every prompt (infill.engine.canvas)
    # Trained with a loss at masked positions only: a probability at a visible position says
    # little (Dream's shift: the row that scores token i has seen it), so fix mode scores each
    # token with its position masked (infill.modes.fix).
    scores_visible_tokens: bool = False

    @torch.no_grad()
    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.network(ids.to(self.device))
        give_back()  # what a pass over the whole canvas freed (infill.models.memory)
        if self.shift:
            out = torch.cat([out[:, :1], out[:, :-1]], dim=1)
        return out.cpu().float()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def token_text(self, token_id: int) -> str:
        text = self.tokenizer.tokenizer.id_to_token(token_id)
        if text is None or token_id in self.special_ids or token_id == self.null_id:
            return text or f"<{token_id}>"
        return self.decode([token_id])


@dataclass(eq=False)
class CachingCheckpointDenoiser(CheckpointDenoiser):
    """With the project's own network (`Decoder`): span-only passes on cached context."""

    network: Decoder

    @property
    def rope_theta(self) -> float:
        """The rotary base (infill.engine.kept_context turns cached keys with it)."""
        return self.network.config.rope_theta

    def new_cache(self) -> list:
        return self.network.new_cache()

    def layers(self) -> list:
        """The network's layers, in order (a refresh that may stop checks between them)."""
        return list(self.network.layers)

    @torch.no_grad()
    def cached_logits(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache,
        refresh: bool,
        predicted: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, P, vocab) for the tokens AT `positions` (at `positions[predicted]` alone if
        given). Shifted: computed at the positions before them too (one more per span), as the
        network's row i-1 predicts the token at i."""
        ids = ids.to(self.device)
        needed, rows = shifted(positions) if self.shift else (positions, None)  # rows: no (P, vocab) copy
        if predicted is not None:
            rows = predicted if rows is None else rows[predicted]
        rows = None if rows is None else rows.to(self.device)
        out = self.network.logits_at(ids, needed.to(self.device), cache, refresh, rows=rows)
        if refresh:
            give_back()  # what a pass over the whole canvas freed (infill.models.memory)
        return out.cpu().float()

    @torch.no_grad()
    def run_passes(self, passes: list[Pass]) -> list[torch.Tensor]:
        """Passes of one kind (several requests' canvases) as one forward, each pass's logits as
        its own call returns them (infill.models.batching: right-padding and a key mask)."""
        computed, picks = passes, [None] * len(passes)
        if self.shift and passes[0].positions is not None:
            picks = [shifted(p.positions)[1] for p in passes]
            computed = [replace(p, positions=shifted(p.positions)[0]) for p in passes]
        outs = run_batch(computed, self.device, self.network, self.network.logits_at, self.new_cache)
        if passes[0].kind != "span":
            give_back()  # what passes over the whole canvas freed (infill.models.memory)
        results = []
        for p, out, pick in zip(passes, outs, picks):
            if p.predicted is not None:  # (the batch's output layer ran at every position)
                pick = p.predicted if pick is None else pick[p.predicted]
            if self.shift and p.positions is None:
                out = torch.cat([out[:, :1], out[:, :-1]], dim=1)
            elif pick is not None:
                out = out[:, pick.to(self.device)]
            results.append(out.cpu().float())
        return results


def shifted(positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A shifted family's logits at `positions` (P,): the positions to compute (each and the one
    before it, sorted) and, among them, the rows that predict the tokens at `positions`."""
    source = (positions - 1).clamp(min=0)
    needed = torch.unique(torch.cat([positions, source]))  # sorted
    return needed, torch.searchsorted(needed, source)


def unusable_ids(tokenizer: CheckpointTokenizer, vocab_size: int, null_id: int | None) -> frozenset[int]:
    """Ids the model must never write: every added token (mask, chat markers, FIM markers, padding
    ...) except the null, and the rows of the output layer that no token has (padding of the
    embedding table to a round size)."""
    ruled_out = set(tokenizer.added.values())
    ruled_out |= set(range(vocab_size)) - tokenizer.known_ids()
    ruled_out.discard(null_id)
    return frozenset(i for i in ruled_out if 0 <= i < vocab_size)
