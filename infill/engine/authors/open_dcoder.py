"""Open-dCoder's loop (pengzhangzhi/Open-dLLM, `_mdm_sample` in
veomni/models/transformers/qwen2/generation_utils.py), on its infilling canvas prefix [mask] x N
suffix (its eval_infill.py: no begin token, Qwen2.5's tokenizer adds none).

Its default order, p2, re-decides the whole hole at every step:

    step i of `steps`, kappa = (i + 1) / steps:
        a token and its probability at every position of the hole (committed ones too)
        the floor(N x (1 - kappa)) least probable positions of the hole become masks again
        every other position that was masked takes its token; committed ones keep theirs

The other orders are Dream's loop (infill.engine.authors.dream) with Open-dLLM's `sample_tokens`.
"""

from __future__ import annotations

import math

import torch

from infill.engine.authors import AuthorsSettings, LoopResult, Network, check_cancelled, seeded
from infill.engine.authors.dream import diffusion_generate
from infill.engine.authors.tokens import sample_tokens


def generate(
    network: Network, ids: list[int], mask_id: int, settings: AuthorsSettings, steps: int, cancelled=None
) -> LoopResult:
    order = settings.order_for("Open-dCoder")
    if order != "p2":
        return diffusion_generate(network, ids, mask_id, settings, order, steps, cancelled, open_dllm=True)
    x = torch.tensor([ids])
    hole = x[0] == mask_id  # the positions p2 may decide and re-mask (its `~fix_mask`)
    generator = seeded(settings)
    result = LoopResult(ids)
    for i in range(steps):
        masked = x[0] == mask_id
        if not masked.any():
            break
        check_cancelled(cancelled)
        logits = network(x)[0]
        kappa = (i + 1) / steps
        score, tokens = sample_tokens(logits[hole], "p2", settings.temperature, settings.top_p,
                                      settings.top_k, generator, open_dllm=True)  # fmt: skip
        positions = hole.nonzero().flatten()
        count = int(hole.sum())
        to_mask = min(count, max(0, math.floor(float(torch.tensor(float(count)) * (1.0 - kappa)))))
        remask = torch.zeros_like(hole)
        if to_mask > 0:
            remask[positions[torch.argsort(score)[:to_mask]]] = True
        x[0, remask] = mask_id
        result.commit_at(x, hole, tokens, masked & ~remask, mask_id)  # the masked ones not re-masked
    result.ids = x[0].tolist()
    return result
