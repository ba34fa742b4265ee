"""DreamOn's variable-length infilling (DreamLM/DreamOn eval/generator.py: `infilling_with_expansion`
and `batch_generate_with_expand_as_token`), on its canvas [bos] prefix [mask] x 4 suffix [eos].

The sequence is the canvas padded with masks to `max_tokens` (the canvas plus the room the hole
may grow by); the model sees only its window, the canvas as it stands. Each step:

    logits of the window (one full pass, shifted); <|expand|> ruled out (-1e9) once the window
        has reached max_tokens or the expand budget is spent
    a token and a score for every masked position of the window; the best one is committed
    pad_eos_to_right: every masked position after the first end-of-text becomes end-of-text
    each <|expand|> becomes two masks (the hole grows by one, the budget shrinks by one)
    each end-of-text at a position that was masked is deleted, a mask appended at the far end
        (the hole shrinks by one)
    stop when the window has no mask left, or after `steps` steps

The answer is the hole as it stands: decode(x[prefix : prefix + length]), special tokens skipped.
Its evaluation (eval/configs/eval_infill.yaml): 128 steps, at most 64 tokens, 4 to start with,
entropy, temperature 0.1, top-p 0.9; `max_tokens` 2048.
"""

from __future__ import annotations

import torch

from infill.engine.authors import AuthorsSettings, LoopResult, Network, check_cancelled, seeded
from infill.engine.authors.tokens import sample_tokens

MAX_TOKENS = 2048  # MDMGeneratorArgs.max_tokens


def infill_with_expansion(
    network: Network,
    ids: list[int],
    start: int,
    length: int,
    mask_id: int,
    eos_id: int,
    expand_id: int,
    null_id: int,
    settings: AuthorsSettings,
    steps: int,
    cancelled=None,
) -> LoopResult:
    """The hole's slot is ids[start : start + length] (`length`: the most it may grow to, DreamOn's
    `max_gen_len`); it starts as `settings.expand_start` masks (4)."""
    order = settings.order_for("DreamOn")
    initial = min(settings.expand_start or 4, length)
    prompt = ids[:start] + [mask_id] * initial + ids[start + length :]
    max_tokens = min(MAX_TOKENS, len(prompt) + length - initial)
    x = torch.tensor(prompt + [mask_id] * (max_tokens - len(prompt)))
    size, expand_budget = initial, length  # its num_generation_tokens, expand_budget
    generator = seeded(settings)
    result = LoopResult(ids)
    for _ in range(steps):
        window = len(prompt) - initial + size
        masked = (x == mask_id) & (torch.arange(len(x)) < window)
        if not masked.any():
            break
        check_cancelled(cancelled)
        logits = network(x[None, :window])[0][masked[:window]]
        if window == max_tokens or expand_budget == 0:
            logits[:, expand_id] -= 1e9
        score, tokens = sample_tokens(logits, order, settings.temperature, settings.top_p, settings.top_k,
                                      generator)  # fmt: skip
        best = int(torch.topk(score, 1).indices[0])
        x[masked.nonzero().flatten()[best]] = tokens[best]
        result.commit([int(tokens[best])])
        ends = (x == eos_id).nonzero().flatten()
        if len(ends):  # pad_eos_to_right
            x[(torch.arange(len(x)) >= ends[0]) & masked] = eos_id
        for where in sorted((x == expand_id).nonzero().flatten().tolist(), reverse=True):
            x = torch.cat([x[:where], torch.tensor([mask_id, mask_id]), x[where + 1 :]])[:max_tokens]
            size, expand_budget = size + 1, expand_budget - 1
        for where in sorted(((x == eos_id) & masked).nonzero().flatten().tolist(), reverse=True):
            x = torch.cat([x[:where], x[where + 1 :], torch.tensor([mask_id])])
            size -= 1
    hole = x[start : start + max(size, 0)].tolist()
    result.ids = ids[:start] + hole + [null_id] * (length - len(hole)) + ids[start + length :]
    return result
