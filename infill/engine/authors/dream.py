"""Dream's `diffusion_generate` (the `_sample` loop of the Dream family's generation_utils.py:
Dream-v0, Dream-Coder-v0, DiffuCoder), on an infilling canvas [begin] prefix [mask] x N suffix.

    t: `steps` + 1 times from 1 down to eps (1e-3), float32
    step i, t = t_i, s = t_i+1:
        logits of the whole canvas (one full pass; row i predicts the token at i, the shift)
        origin: each masked position is revealed with probability 1 - s/t (all at the last step)
        other orders: a token and a score for every masked position (infill.engine.authors.tokens);
            the int(masks x (1 - s/t)) best scored are committed (all of them at the last step)

With steps = N this commits nothing at the first step and two tokens at the last: the count is
truncated, not one a step. Open-dCoder's loop is this one with one more order (p2,
infill.engine.authors.open_dcoder).
"""

from __future__ import annotations

import torch

from infill.engine.authors import AuthorsSettings, LoopResult, Network, check_cancelled, seeded
from infill.engine.authors.tokens import sample_tokens


def diffusion_generate(
    network: Network,
    ids: list[int],
    mask_id: int,
    settings: AuthorsSettings,
    order: str,
    steps: int,
    cancelled=None,
    open_dllm: bool = False,
) -> LoopResult:
    """Run the loop on the canvas row `ids` (every `mask_id` in it is decided)."""
    x = torch.tensor([ids])
    generator = seeded(settings)
    times = torch.linspace(1, 1e-3, steps + 1)
    result = LoopResult(ids)
    for i in range(steps):
        masked = x[0] == mask_id
        if not masked.any():
            break  # (the authors' loop runs on, changing nothing)
        check_cancelled(cancelled)
        logits = network(x)[0]
        t, s = times[i], times[i + 1]
        last = i == steps - 1
        if order == "origin":
            reveal = torch.rand(int(masked.sum()), generator=generator) < (1.0 if last else 1 - s / t)
            chosen = torch.full((int(masked.sum()),), mask_id)
            if reveal.any():
                _, drawn = sample_tokens(logits[masked][reveal], order, settings.temperature,
                                         settings.top_p, settings.top_k, generator, open_dllm)  # fmt: skip
                chosen[reveal] = drawn
            x[0, masked] = chosen
            result.commit(chosen[reveal].tolist())
            continue
        score, tokens = sample_tokens(logits[masked], order, settings.temperature, settings.top_p,
                                      settings.top_k, generator, open_dllm)  # fmt: skip
        count = masked.sum() / 1  # float32, as the authors' `mask_index.sum() / batch`
        number = int(count) if last else int(count * (1 - s / t))
        full = torch.full(x[0].shape, float("-inf"), dtype=score.dtype)
        full[masked] = score
        positions = torch.topk(full, number).indices  # (none when number is 0)
        result.commit_at(x, masked, tokens, positions, mask_id)
    result.ids = x[0].tolist()
    return result
