"""Unmasking rules: which token a masked position gets, and which positions a step commits first.

Every rule scores each masked position from the model's distribution there; a step commits the
best-scored positions of its current block (see infill.engine.sampler). The rules, by their published
names (checked against the authors' samplers: Dream's `generation_utils.py` `sample_tokens`,
ML-GSAI/LLaDA `generate.py`, NVlabs/Fast-dLLM `llada/generate.py` and
`dream/model/generation_utils.py`):

    maskgit_plus    Dream: the probability of the chosen token under the *sampling* distribution
                    (after temperature, top-p and top-k, renormalised)
    topk_margin     Dream: top-1 minus top-2 probability of the sampling distribution
    entropy         Dream: the negative entropy of the sampling distribution (a peaked
                    distribution first, however its mass is split below the top)
    low_confidence  LLaDA: the model's own probability of the chosen token (softmax of the
                    logits, no temperature); LLaDA pairs it with blocks (SamplerConfig.block_length)
    left-to-right   this project's: the first masked positions on the canvas first

This project's older names stay: "confidence" is LLaDA's low_confidence (the same number: the
model's probability of the token picked), "margin" is topk_margin. With temperature 0 and no
top-p/top-k the sampling distribution is the model's, so maskgit_plus = low_confidence.

The token itself is drawn the same way under every rule, as Dream's `sample_tokens` does:
temperature 0 takes the most likely token; above 0 it samples from softmax(logits / T), cut by
top-p (the smallest set of most likely tokens reaching probability p, the first always kept)
and then top-k (the k most likely). LLaDA's Gumbel-max with noise (-log u)^T draws from the
same softmax(logits / T).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from infill.engine import top_candidates

if TYPE_CHECKING:
    from infill.options import SamplerConfig

RULES = ("maskgit_plus", "topk_margin", "entropy", "low_confidence", "left-to-right")
ALIASES = {"confidence": "low_confidence", "margin": "topk_margin"}  # this project's older names


def rule_name(order: str) -> str:
    """The published name of an order (aliases resolved)."""
    return ALIASES.get(order, order)


def sampling_distribution(
    probs: torch.Tensor, temperature: float, top_p: float | None = None, top_k: int | None = None
) -> torch.Tensor:
    """(..., vocab) -> (..., vocab): the distribution tokens are drawn from (renormalised).

    `probs`: the model's probabilities with the tokens that may not be produced at 0. Rows that
    are all 0 (nothing allowed) stay 0."""
    if temperature > 0:
        logits = torch.where(probs > 0, probs.log() / temperature, torch.tensor(float("-inf")))
        dist = torch.softmax(logits, dim=-1).nan_to_num(0.0)
        if (top_p is None or top_p >= 1) and top_k is None:
            return dist  # (already normalised)
    else:
        dist = probs
    if top_p is not None and top_p < 1:
        ordered, index = dist.sort(dim=-1, descending=True)
        before = ordered.cumsum(-1) - ordered  # the mass of the tokens ranked above each token
        drop = before > top_p * ordered.sum(-1, keepdim=True)  # (ranked 1st: before = 0, kept)
        dist = dist.masked_fill(torch.zeros_like(drop).scatter(-1, index, drop), 0.0)
    if top_k is not None and top_k < dist.size(-1):
        kth = dist.topk(top_k, dim=-1).values[..., -1:]
        dist = torch.where(dist >= kth, dist, torch.zeros_like(dist))
    total = dist.sum(-1, keepdim=True)
    return torch.where(total > 0, dist / total.clamp_min(1e-30), dist)


def choose_tokens(dist: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """(B, P, vocab) sampling distribution -> (B, P) token ids: the most likely at temperature 0,
    else a draw (rows of 0, where nothing is allowed, draw from all tokens: never committed as
    anything but a placeholder)."""
    if temperature <= 0:
        return dist.argmax(-1)
    drawable = torch.where(dist.sum(-1, keepdim=True) > 0, dist, torch.ones_like(dist))
    flat = drawable.reshape(-1, dist.size(-1))
    return torch.multinomial(flat, 1, generator=generator).view(dist.shape[:-1])


def rule_scores(rule: str, dist: torch.Tensor, picked: torch.Tensor, model_p: torch.Tensor) -> torch.Tensor:
    """(B, P) scores, higher committed first, of the P positions under `rule` (a name or alias).

    dist: (B, P, vocab) sampling distribution; picked: (B, P) the chosen tokens; model_p: (B, P)
    the model's own probability of them (no temperature)."""
    rule = rule_name(rule)
    if rule == "low_confidence":
        return model_p
    if rule == "maskgit_plus":
        return dist.gather(-1, picked.unsqueeze(-1)).squeeze(-1)
    if rule == "topk_margin":
        top = dist.topk(2, dim=-1).values
        return top[..., 0] - top[..., 1]
    if rule == "entropy":
        return torch.special.xlogy(dist, dist).sum(-1)  # sum p log p = -entropy (0 log 0 = 0)
    if rule == "left-to-right":  # the P positions are in canvas order: the first scores highest
        return torch.arange(dist.size(1), 0, -1, dtype=dist.dtype).expand(picked.shape) / dist.size(1)
    raise ValueError(f"unknown unmasking rule {rule!r}")


# ------------------------------------------------- one pass: the tokens drawn, the positions committed


CANDIDATES = 256
"""With a vocabulary larger than LARGE_VOCABULARY, a pass chooses among each position's this many
most likely tokens: temperature, top-p, top-k, the draw and the unmasking rule's score then cost
in proportion to them, not to a 152k-token vocabulary (measured: docs/models.md). The most
likely token and its probability are the same; a draw at temperature 0.2 almost never leaves
them; entropy and margin are those of the candidates."""


LARGE_VOCABULARY = 32_768


def candidates(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, P, vocab) probabilities -> the ones a pass chooses from, and their token ids (None:
    the whole vocabulary, by position; a copy, free to change)."""
    if probs.size(-1) <= LARGE_VOCABULARY:
        return probs.clone(), None
    return top_candidates.top(probs, CANDIDATES)


def pick(
    choices: torch.Tensor,
    vocab: torch.Tensor | None,
    config: SamplerConfig,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, P, n) choices (`candidates`) -> (B, P) each: the token drawn at every position
    (temperature, top-p, top-k), the model's own probability of it, and its score under the
    unmasking rule (`config.order`)."""
    dist = sampling_distribution(choices, config.temperature, config.top_p, config.top_k)
    chosen = choose_tokens(dist, config.temperature, generator)  # indices into choices
    picked = chosen if vocab is None else vocab.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    picked_p = choices.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    return picked, picked_p, rule_scores(config.order, dist, chosen, picked_p)


def without_token(
    choices: torch.Tensor, vocab: torch.Tensor | None, token: int, keep: torch.Tensor | None = None
) -> torch.Tensor:
    """`choices` with `token` ruled out (probability 0), except at the (B, P) positions `keep`."""
    if vocab is None:
        choices[..., token] = 0 if keep is None else choices[..., token] * keep
        return choices
    hit = vocab == token
    if keep is not None:
        hit &= ~keep.bool()[..., None]
    return choices.masked_fill(hit, 0.0)


def commit_positions(
    masked: torch.Tensor,
    editable: torch.Tensor,
    blocks: torch.Tensor,
    score: torch.Tensor,
    predicted_p: torch.Tensor,
    config: SamplerConfig,
    step: int,
) -> torch.Tensor:
    """(B, L) bool: the masked positions a step commits.

    Only positions of a row's current block (its first block with a masked position; see
    `block_index`; `editable`: the positions still being denoised) are candidates. Of those:
    each whose token the model gives at least `commit_threshold`, and the `quota` best by
    `score`, the quota being what finishes the block by its share of the step cap: block j of
    n ends after step (j + 1) * steps // n, and a block that finishes early leaves its passes
    to the next. (Spread this way the count per step is LLaDA's: the remainder goes to the
    first steps.) The last step commits everything."""
    if step == config.steps - 1:
        return masked.clone()
    current = current_block(masked, blocks)  # (B,)
    in_block = masked & (blocks == current[:, None])
    count = torch.where(editable, blocks, 0).max(1).values + 1  # (B,) blocks of each row's spans
    block_end = (current + 1).clamp_max(count) * config.steps // count
    quota = torch.ceil(in_block.sum(1) / (block_end - step).clamp_min(1)).long()  # (B,)
    ranked = torch.where(in_block, score, torch.tensor(float("-inf")))
    rank = ranked.argsort(dim=1, descending=True, stable=True).argsort(dim=1)
    return in_block & ((rank < quota[:, None]) | (predicted_p >= config.commit_threshold))


def current_block(masked: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
    """(B,) each row's current block: the first of its blocks (`blocks`, (B, L): see
    infill.engine.sampler.block_index) with a masked position (`masked`, (B, L) bool); a row
    with none gets the largest long."""
    return torch.where(masked, blocks, torch.iinfo(torch.long).max).min(1).values


def runs(flags: torch.Tensor) -> list[tuple[int, int]]:
    """(start, end) of each run of True in a 1-D bool tensor."""
    edges = torch.diff(flags.long(), prepend=flags.new_zeros(1).long(), append=flags.new_zeros(1).long())
    starts = (edges == 1).nonzero().flatten().tolist()
    ends = (edges == -1).nonzero().flatten().tolist()
    return list(zip(starts, ends))
