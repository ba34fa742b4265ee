"""LLaDA's `generate` (ML-GSAI/LLaDA generate.py), on an infilling canvas [<|startoftext|>] prefix
[mask] x N suffix: the hole is its `gen_length`, with the suffix after it in every pass.

    the hole is cut into blocks of `block_length` (default: one block), decoded left to right,
    each with steps / blocks steps; at a block's start, its masks are spread over its steps
    (get_num_transfer_tokens: mask_num // steps each, the remainder to the first steps)
    step: logits of the whole canvas (no shift: row i predicts the token at i)
        token: argmax of the logits (Gumbel noise (-log u)^T above temperature 0)
        score: its softmax probability (low_confidence) or a uniform draw (random); -inf past
               the current block and at positions not masked
        commit the step's count of best-scored positions
"""

from __future__ import annotations

import torch

from infill.engine.authors import AuthorsSettings, LoopResult, Network, check_cancelled, seeded
from infill.errors import InputError


def transfer_counts(masks: int, steps: int) -> list[int]:
    """How many of a block's `masks` each of its `steps` commits."""
    return [masks // steps + (1 if i < masks % steps else 0) for i in range(steps)]


def generate(
    network: Network,
    ids: list[int],
    mask_id: int,
    settings: AuthorsSettings,
    start: int,
    length: int,
    steps: int,
    cancelled=None,
) -> LoopResult:
    """The hole is ids[start : start + length]."""
    order = settings.order_for("LLaDA")
    block = settings.block_length or length
    if length % block:
        raise InputError(
            f"LLaDA's loop needs the hole ({length} tokens) to be a multiple of --block-length ({block})"
        )
    blocks = length // block
    if steps % blocks:
        raise InputError(f"LLaDA's loop needs --steps ({steps}) to be a multiple of the blocks ({blocks})")
    steps //= blocks
    x = torch.tensor([ids])
    generator = seeded(settings)
    result = LoopResult(ids)
    for b in range(blocks):
        end = start + (b + 1) * block
        counts = transfer_counts(int((x[0, start + b * block : end] == mask_id).sum()), steps)
        for i in range(steps):
            check_cancelled(cancelled)
            masked = x[0] == mask_id
            logits = network(x)[0]
            noisy = logits
            if settings.temperature > 0:
                noise = torch.rand(logits.shape, dtype=torch.float64, generator=generator)
                noisy = logits.double().exp() / (-torch.log(noise)) ** settings.temperature
            tokens = noisy.argmax(-1)
            if order == "low_confidence":
                score = torch.softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
            else:
                score = torch.rand(tokens.shape, generator=generator)
            score = score.double()
            score[end:] = float("-inf")
            tokens = torch.where(masked, tokens, x[0])
            score = torch.where(masked, score, torch.tensor(float("-inf"), dtype=score.dtype))
            positions = torch.topk(score, counts[i]).indices
            x[0, positions] = tokens[positions]
            result.commit(tokens[positions].tolist())
    result.ids = x[0].tolist()
    return result
