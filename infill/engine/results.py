"""What a denoising run gives back: the filled canvas (`SampleResult`), what each pass did
(`Step`, for watchers: --show-steps, progress, tests) and the model's work (`SampleStats`, summed
over the runs of a request by `merge_stats`). The sampler, expansion, the repair and recall
stages, the authors' loops and the modes share these; they import no stage. What the stages
above the sampler did (retries, token edits, fresh fills, recalled lines, the repair stage's
passes and time) is counted by the pipeline: infill.engine.pipeline.RequestStats."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Step:
    """What one pass did (for --show-steps, progress reports and tests)."""

    index: int
    ids: torch.Tensor  # (B, L) canvas after this step
    committed: torch.Tensor  # (B, L) bool: positions committed in this step
    remasked: torch.Tensor  # (B, L) bool: committed tokens that were masked again
    masked_left: int
    retry: int = 0  # 0: the fill itself; k: its k-th syntax retry (infill.engine.repair.retries)
    restart: int = 0  # 0: the first fill; k: its k-th fresh fill after it kept breaking the syntax
    cap: int = 0  # the step cap of this denoising run


@dataclass
class SampleStats:
    """The model's work: what the sampler did, and the forward passes of the stages that run the
    model without sampling (token edits, recall, scoring)."""

    steps: int
    forward_passes: int
    tokens: int  # editable positions filled (per canvas)
    revisions: int  # re-maskings (self-corrections) over the whole run
    seconds: float
    converged: bool  # False: stopped by the step cap
    cached_passes: int = 0  # forward passes over the span positions only (cached context)
    computed: int = 0  # span positions the sampler's passes computed, summed over the passes (a
    #   cached pass costs its positions: block passes cut them; infill.engine.sampler); 0 where a
    #   loop does not count them (DreamOn's growing spans, the authors' loops)


@dataclass
class SampleResult:
    ids: torch.Tensor  # (B, L)
    confidence: torch.Tensor  # (B, L) the model's probability of each final token (1 on context)
    stats: SampleStats
    tokens: list[list[list[int]]] | None = None  # [row][step]: the ids each step committed (engine.authors)
    first_view: tuple[torch.Tensor, torch.Tensor] | None = None  # row 0's first pass, every position
    #   masked: (columns, log-probabilities (P, vocab)), kept when asked (SamplerConfig.first_view)
    #   for the recall stage, which ranks lines on it instead of a pass of its own


def merge_stats(parts: list[SampleStats]) -> SampleStats:
    return SampleStats(
        steps=sum(p.steps for p in parts),
        forward_passes=sum(p.forward_passes for p in parts),
        tokens=sum(p.tokens for p in parts),
        revisions=sum(p.revisions for p in parts),
        seconds=sum(p.seconds for p in parts),
        converged=all(p.converged for p in parts),
        cached_passes=sum(p.cached_passes for p in parts),
        computed=sum(p.computed for p in parts),
    )
