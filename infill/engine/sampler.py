"""The diffusion sampler: turn masked span positions into tokens, a few confident ones per pass.

    x = canvas with every editable position set to <mask>
    repeat (at most `steps` passes):
        predict the editable positions with one bidirectional forward pass (over the span
            positions only, on cached context keys/values, between full passes: see prediction.py;
            with block passes, over the current block and what the last pass changed)
        first pass only: fix each span's length (the rest of its budget becomes <null>)
        re-mask committed tokens whose probability has fallen below `remask_threshold`
        choose a token for each masked position (temperature, top-p, top-k)
        commit masked positions of the current block: each above `commit_threshold`, and at
            least enough of the best ones under the unmasking rule (`order`) to finish the
            block within its share of the passes
        stop when a pass finds nothing masked and changes nothing

Positions outside the editable mask are fixed context and never change. Works on a batch of
canvases (B, L) at once, e.g. several alternatives for one request.

The unmasking rules (Dream's entropy / maskgit_plus / topk_margin, LLaDA's low_confidence, this
project's left-to-right) are in infill.engine.unmasking. Blocks (`block_length`, LLaDA's and Fast-dLLM's
semi-autoregressive decoding): each span's positions are cut into blocks of that many, decoded
left to right; a step commits only inside a row's current block (its first block that still has
a masked position), and the step cap is split evenly between the blocks. With
`commit_threshold` set and a step cap of at least the span's length, a step commits every
position of the block at least that confident and at least the best one: Fast-dLLM's threshold
decoding (threshold 0.9, block 32 in its Dream setting). A lower step cap commits more per step
(the quota) so the block still finishes in time. With `block_passes` and a cache, a cached pass
computes only each row's current block and the positions the pass before changed (so that the
cache holds their final tokens' keys and values), not the whole span: Fast-dLLM's dual cache, a
pass costing a block's positions; the last pass adds every masked position, as it commits them
all. (DreamOn's growing spans, infill.engine.expansion, decode as one block.)

A denoiser with `expand_id` (DreamOn) decides span lengths by growing and shrinking the span
while it denoises: infill.engine.expansion runs that loop. A denoiser with neither a null token
nor expand gets its span lengths from infill.engine.span_length (chosen in the canvas stage,
infill.engine.pipeline).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

import torch

from infill.engine.expansion import sample_expanding
from infill.engine.prediction import CanvasPredictor
from infill.engine.results import SampleResult, SampleStats, Step
from infill.engine.unmasking import candidates, commit_positions, current_block, pick, runs, without_token
from infill.errors import Cancelled
from infill.options import MULTI_LINE_STEPS, ONE_LINE_STEPS, SamplerConfig

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser


def step_cap(config: SamplerConfig, span_texts: list[str], positions: int | None = None) -> SamplerConfig:
    """`config` with its step cap and cache refresh decided for these spans.

    The cap: as set; one per masked position (`positions`) under `cap_per_position` (a
    published family's steps = new tokens); or ONE_LINE_STEPS when every span's current text is
    one line or less, else MULTI_LINE_STEPS. (Measured on v2 with syntax retries, 100 held-out
    tasks per kind: single lines fill as well at 16 steps as at 32, in half the time; blocks
    and bodies parse more often the fewer tokens a pass commits: 68/79% at 32, 72/85% at 128,
    where a pass commits one token unless more are confident: docs/measurements.md.)

    The refresh: spans of one line or less get no full pass after the first at the default
    cache_refresh: 100 held-out lines (`infill-bench quality --kinds line --tasks 100 --seed 0
    --cache-refresh 8` against `16`) fill as well without it: exact 4.0% both, edit similarity
    0.577 -> 0.583, parses 91% -> 93% (docs/measurements.md)."""
    if config.steps is None:
        if config.cap_per_position and positions:
            config = replace(config, steps=positions)
        else:
            config = replace(config, steps=ONE_LINE_STEPS if one_line(span_texts) else MULTI_LINE_STEPS)
    if one_line(span_texts) and config.cache_refresh == SamplerConfig.cache_refresh:
        config = replace(config, cache_refresh=max(config.cache_refresh, config.steps))
    return config


def one_line(span_texts: list[str]) -> bool:
    """Whether every span's current text is one line or less (an insertion point too)."""
    return all("\n" not in text and "\r" not in text for text in span_texts)


def sample(
    denoiser: Denoiser,
    canvas: torch.Tensor,
    editable: torch.Tensor,
    config: SamplerConfig,
    on_step: Callable[[Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    finish_now: Callable[[], bool] | None = None,
) -> SampleResult:
    """Denoise the `editable` positions (B, L bool) of `canvas` (B, L ids). A step cap left to
    the spans (None) is MULTI_LINE_STEPS here: callers that know the spans use step_cap.
    `finish_now()` true (a deadline passed) before a pass: that pass is the last (it commits
    everything)."""
    if config.steps is None:
        config = replace(config, steps=MULTI_LINE_STEPS)
    if config.length != "given" and expands(denoiser):
        return sample_expanding(denoiser, canvas, editable, config, on_step, cancelled)
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(config.seed) if config.seed is not None else None
    x = torch.where(editable, torch.full_like(canvas, denoiser.mask_id), canvas)
    predict = CanvasPredictor(denoiser, editable, config.cache_refresh, keep_first=config.first_view)
    budget = int(editable[0].sum())
    padding = torch.zeros_like(editable)
    decide_length = config.length == "first-pass" and denoiser.null_id is not None
    fixed_length = config.length in ("first-pass", "given") and denoiser.null_id is not None
    blocks = block_index(editable, config.block_length)
    focusing = config.block_passes and predict.caching  # (SamplerConfig: block passes have blocks)
    wanted: torch.Tensor | None = None  # block passes: the positions the next pass computes
    expand_id = getattr(denoiser, "expand_id", None)
    revisions = torch.zeros_like(canvas)
    confidence = torch.ones(canvas.shape)
    total_revisions, passes, converged = 0, 0, False
    for step in range(config.steps):
        if cancelled is not None and cancelled():
            raise Cancelled("sampling cancelled")
        last = step == config.steps - 1 or (finish_now is not None and finish_now())
        if wanted is not None:  # block passes: these positions (the last pass commits, so computes,
            #   every masked one)
            predict.focus(wanted | (editable & (x == denoiser.mask_id)) if last else wanted)
        columns, probs = predict(x)  # (B, P, vocab) at the P positions predicted
        passes += 1
        spread = partial(at_columns, x.shape, columns)  # (B, P) values -> (B, L)
        seen = spread(torch.ones(probs.shape[:2], dtype=torch.bool), False)  # the positions predicted
        if decide_length and step == 0:
            null_p = spread(probs[..., denoiser.null_id], 0.0)
            content = span_lengths(null_p, editable, config.length_scale)
            padding = editable & ~content
            x = torch.where(padding, torch.full_like(x, denoiser.null_id), x)
            confidence = torch.where(padding, null_p, confidence)
            editable = content  # the padding is final; only content positions are denoised
            predict.narrow(editable)
        masked = editable & (x == denoiser.mask_id)

        # Self-correction: committed tokens the model no longer believes in go back to <mask>
        # (a position this pass did not compute keeps its standing).
        current = spread(probs.gather(-1, x[:, columns, None]).squeeze(-1), 1.0)
        disbelieved = editable & ~masked & (current < config.remask_threshold)
        disbelieved &= revisions < config.max_revisions
        remask = disbelieved & (not last)  # the last pass must leave no <mask> behind

        # A token for every position, and its score under the unmasking rule (over each
        # position's CANDIDATES most likely tokens when the vocabulary is large).
        choices, vocab = candidates(probs)
        if fixed_length:  # no <null> inside a span's content
            choices = without_token(choices, vocab, denoiser.null_id)
        elif config.nulls_from_end and denoiser.null_id is not None:
            null_best = spread(probs.argmax(-1) == denoiser.null_id, False)
            allowed = null_allowed(x, masked, editable, null_best, denoiser.null_id)
            choices = without_token(choices, vocab, denoiser.null_id, keep=allowed[:, columns])
        if expand_id is not None:  # a span grows only in infill.engine.expansion's loop
            choices = without_token(choices, vocab, expand_id)
        picked, picked_p, scores = pick(choices, vocab, config, generator)  # (B, P) each
        predicted = spread(picked, denoiser.mask_id)
        predicted_p = spread(picked_p, 0.0)
        score = spread(scores, float("-inf"))

        # Commit: in the current block, everything confident, and at least enough of the best
        # scored to finish the block in its share of the passes (on the last pass: everything).
        commit = masked.clone() if last else commit_positions(masked, editable, blocks, score, predicted_p,
                                                                   config, step)  # fmt: skip

        x = torch.where(commit, predicted, x)
        x = torch.where(remask, torch.full_like(x, denoiser.mask_id), x)
        rated = editable & seen & ~remask  # the positions this pass predicted keep its probability
        confidence = torch.where(commit, predicted_p, torch.where(rated, current, confidence))
        revisions += remask.long()
        total_revisions += int(remask.sum())
        if on_step is not None:
            masked_left = int((editable & (x == denoiser.mask_id)).sum())
            newly = commit | padding if step == 0 else commit  # the padding is committed at once
            on_step(Step(step, x.clone(), newly, remask, masked_left, cap=config.steps))
        if not masked.any() and not disbelieved.any():
            converged = True  # this pass found everything committed and believed all of it
            break
        if last:
            break
        if focusing:  # the next pass: the current blocks, and what this pass changed
            changed = commit | remask | (padding if step == 0 else torch.zeros_like(padding))
            wanted = block_positions(editable & (x == denoiser.mask_id), editable, blocks) | changed
    stats = SampleStats(
        steps=passes,
        forward_passes=passes,
        tokens=budget,
        revisions=total_revisions,
        seconds=time.perf_counter() - started,
        converged=converged,
        cached_passes=passes - predict.full_passes,
        computed=predict.computed,
    )
    return SampleResult(x, confidence, stats, first_view=predict.first_view)


def expands(denoiser: Denoiser) -> bool:
    """Whether the denoiser grows and shrinks spans itself (DreamOn's <|expand|> and end-of-text)."""
    return getattr(denoiser, "expand_id", None) is not None and denoiser.null_id is not None


def block_positions(masked: torch.Tensor, editable: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
    """(B, L) bool: the editable positions of each row's current block (its first block with a
    `masked` position; none for a row with nothing masked)."""
    return editable & (blocks == current_block(masked, blocks)[:, None])


def block_index(editable: torch.Tensor, block_length: int | None) -> torch.Tensor:
    """(B, L) long: the block of each editable position, counted from its span's start (a span:
    a run of editable positions); 0 everywhere when `block_length` is None."""
    blocks = torch.zeros_like(editable, dtype=torch.long)
    if block_length is None:
        return blocks
    for row in range(editable.size(0)):
        for start, end in runs(editable[row]):
            blocks[row, start:end] = torch.arange(end - start) // block_length
    return blocks


def at_columns(shape: torch.Size, columns: torch.Tensor, values: torch.Tensor, fill) -> torch.Tensor:
    """A (B, L) tensor holding (B, P) `values` at `columns` and `fill` everywhere else."""
    full = torch.full(shape, fill, dtype=values.dtype)
    full[:, columns] = values
    return full


def span_lengths(null_p: torch.Tensor, editable: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """(B, L) bool: the editable positions that hold a span's content; the rest is padding.

    Each span (a run of editable positions) keeps as many leading positions as, on the first pass
    (every position still masked), the model finds more likely content than <null>: the median
    length under the model, since padding runs from a span's end. Deciding the length once, up
    front, avoids the collapse a weak model shows when nulls may grow at any step: each committed
    null makes its neighbour look like padding too, and the fill ends up a token or two long.
    `scale` != 1: that length times `scale`, rounded, at least 1 and at most the span's budget."""
    content = torch.zeros_like(editable)
    for row in range(editable.size(0)):
        for start, end in runs(editable[row]):
            length = int((null_p[row, start:end] < 0.5).sum())
            if scale != 1:
                length = max(1, min(end - start, round(length * scale)))
            content[row, start : start + length] = True
    return content


def null_allowed(
    x: torch.Tensor, masked: torch.Tensor, editable: torch.Tensor, null_best: torch.Tensor, null_id: int
) -> torch.Tensor:
    """Where <null> may be committed now: where every later position of the span is null too.

    Training pads a span's content with nulls at its end, so a null in the middle tells the model
    that the content is over, and a confident early null would cut the fill short. A position
    counts as null if it holds one or, still masked, the model's best guess for it is one
    (`null_best`); nulls are allowed only in the run of such positions that ends the span."""
    length = x.size(1)
    index = torch.arange(length).expand_as(x)
    null_like = torch.where(masked, null_best, x == null_id)
    content = editable & ~null_like

    def next_after(flags: torch.Tensor) -> torch.Tensor:  # index of the next flagged position after i
        at = torch.where(flags, index, length)
        at = torch.cat([at[:, 1:], torch.full_like(at[:, :1], length)], dim=1)
        return torch.flip(torch.cummin(torch.flip(at, [1]), dim=1).values, [1])

    return editable & (next_after(content) >= next_after(~editable))


