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

import torch

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
