"""How the published loops pick a token at each masked position and score it: `sample_tokens`
of Dream's generation_utils.py (the Dream family, DreamOn's eval/generator.py) and of Open-dLLM's
veomni/models/transformers/qwen2/generation_utils.py, written from their published algorithm.

    logits / temperature (when above 0) -> top-p cut -> top-k cut -> softmax
    token: the most likely (temperature 0), else a draw
    score: its probability (maskgit_plus, p2, origin), top-1 minus top-2 probability
           (topk_margin), or sum p log p (entropy: the negative entropy)

Nothing is ruled out: the authors' loops let the model write any id (mask, end-of-text, ...).
The two codes differ in small ways, kept here: Open-dLLM takes the softmax in float32 and its
entropy clamps p at 1e-10 where Dream adds 1e-10.
"""

from __future__ import annotations

import torch


def top_p_cut(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Logits of the tokens outside the nucleus set to the dtype's lowest value: the smallest
    set of most likely tokens whose probability exceeds `top_p` (the most likely always kept)."""
    ordered, index = logits.sort(dim=-1, descending=True)
    cumulative = torch.softmax(ordered, dim=-1).cumsum(-1)
    drop = cumulative > top_p
    drop[..., 1:] = drop[..., :-1].clone()  # keep the token that crosses top_p
    drop[..., 0] = False
    outside = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, index, drop)
    return logits.masked_fill(outside, torch.finfo(logits.dtype).min)


def top_k_cut(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    kth = torch.topk(logits, min(top_k, logits.size(-1))).values[..., -1:]
    return logits.masked_fill(logits < kth, torch.finfo(logits.dtype).min)


def sample_tokens(
    logits: torch.Tensor,
    rule: str,
    temperature: float = 0.0,
    top_p: float | None = None,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    open_dllm: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(P, vocab) logits -> (score (P,), token (P,)) under `rule`."""
    if temperature > 0:
        logits = logits / temperature
    if top_p is not None and top_p < 1:
        logits = top_p_cut(logits, top_p)
    if top_k is not None:
        logits = top_k_cut(logits, top_k)
    probs = torch.softmax(logits.float() if open_dllm else logits, dim=-1)
    if temperature > 0:
        tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        score = probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    else:
        score, tokens = probs.max(dim=-1)
    if rule == "topk_margin":
        top = probs.sort(dim=-1, descending=True).values
        score = top[..., 0] - top[..., 1]
    elif rule == "entropy":
        logs = torch.log(probs.clamp(min=1e-10)) if open_dllm else torch.log(probs + 1e-10)
        score = (probs * logs).sum(-1)
    return score, tokens
