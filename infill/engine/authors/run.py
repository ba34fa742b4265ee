"""The authors' protocol as the pipeline's denoise stage: one hole per canvas, its family's loop.

`hole_budget` says how many masks a hole gets on the canvas (its slot), `denoise_stage` returns
the function the pipeline calls instead of this engine's sampler (`infill.engine.pipeline.Job.denoise`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from infill.engine.authors import LoopResult, dream, dreamon, llada, loop_family, open_dcoder
from infill.engine.results import SampleResult, SampleStats
from infill.engine.unmasking import runs
from infill.errors import InputError, TimedOut
from infill.options import AuthorsSettings, SamplerConfig

AUTHORS_CONTEXT = 2048  # the window on every device (this engine's CPU default, 512, is not theirs)
DREAMON_MAX_LENGTH = 64  # DreamOn's evaluation: a hole grows to at most 64 tokens (max_gen_len)
DEFAULT_STEPS = {"DreamOn": 128, "Open-dCoder": 64}  # their evaluations; Dream and LLaDA: one per mask


def hole_budget(denoiser, span_tokens: int, budget: int | None) -> int:
    """The hole's slot on the canvas: `budget` (--budget) when given; else DreamOn's maximum
    length, or, for the other families, the span's current length (the published evaluations'
    "true length" setting)."""
    if budget is not None:
        return budget
    if loop_family(denoiser) == "DreamOn":
        return DREAMON_MAX_LENGTH
    if span_tokens < 1:
        raise InputError(
            "--protocol authors fills a hole of N masks: give N with --budget (the span is empty)"
        )
    return span_tokens


def denoise_stage(settings: AuthorsSettings) -> Callable[..., SampleResult]:
    """The pipeline's denoise stage under the authors' protocol (one hole per canvas)."""

    def denoise(denoiser, ids: torch.Tensor, editable: torch.Tensor, config: SamplerConfig, on_step,
                cancelled, finish_now=None) -> SampleResult:  # fmt: skip
        started = time.perf_counter()
        (start, end), *more = runs(editable[0])
        if more:
            raise InputError("--protocol authors fills one hole per canvas")
        def stop() -> bool:  # a published loop cut short is not its authors' result: it stops
            if finish_now is not None and finish_now():
                raise TimedOut("the authors' loop did not finish before --timeout (no partial fill is kept)")
            return cancelled is not None and cancelled()

        result = run_loop(denoiser, ids[0].tolist(), start, end - start, settings, stop)
        filled = torch.tensor([result.ids])
        stats = SampleStats(
            steps=result.passes,
            forward_passes=result.passes,
            tokens=end - start,
            revisions=0,
            seconds=time.perf_counter() - started,
            converged=bool((filled[0, start:end] != denoiser.mask_id).all()),
        )
        return SampleResult(filled, torch.ones(filled.shape), stats, tokens=[result.by_step])

    return denoise


def run_loop(denoiser, ids: list[int], start: int, length: int, settings: AuthorsSettings,
             cancelled=None) -> LoopResult:  # fmt: skip
    """The family's published loop on the canvas row `ids`, whose hole is ids[start:start+length]."""
    family = loop_family(denoiser)
    settings.check_family(family)
    steps = settings.steps or DEFAULT_STEPS.get(family, length)
    network, mask = denoiser.logits, denoiser.mask_id
    if family == "Dream":
        order = settings.order_for("Dream")
        return dream.diffusion_generate(network, ids, mask, settings, order, steps, cancelled)
    if family == "Open-dCoder":
        return open_dcoder.generate(network, ids, mask, settings, steps, cancelled)
    if family == "LLaDA":
        return llada.generate(network, ids, mask, settings, start, length, steps, cancelled)
    eos = denoiser.framing.end[0]
    return dreamon.infill_with_expansion(network, ids, start, length, mask, eos, denoiser.expand_id,
                                         denoiser.null_id, settings, steps, cancelled)  # fmt: skip
