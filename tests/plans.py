"""Test helpers that reach one stage at a time (the CLI and the server go through `run`)."""

from __future__ import annotations

from infill.engine.canvas import Canvas
from infill.engine.decode import Decoder
from infill.engine.pipeline import Job, lay_out
from infill.engine.repair import Repaired, RepairPolicy, repair
from infill.engine.results import SampleResult
from infill.models.base import Denoiser
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import Document
from infill.text.spans import Span


def plan_canvases(
    denoiser: Denoiser, text: str, spans: list[Span], options: InfillOptions, keep_text: bool = False
) -> list[Canvas]:
    """The canvas stage's canvases for `spans` of `text` under `options`."""
    job = Job(Document(text, bom=False, newline="\n"), list(spans), options.sampler, RepairPolicy.of(options),
              options.budget, options.context_length, keep_text=keep_text)  # fmt: skip
    return lay_out(denoiser, job)


def remask_syntax(
    denoiser: Denoiser,
    document: Document,
    canvas: Canvas,
    sampled: SampleResult,
    config: SamplerConfig,
    rounds: int,
    on_step=None,
    cancelled=None,
    edits: int = 0,
    restarts: int = 0,
    pass_budget: int | None = None,
) -> Repaired:
    """The repair stage with `rounds` retries, `edits` token edits and `restarts` fresh fills."""
    policy = RepairPolicy(retries=rounds, token_edits=edits, fresh_fills=restarts, pass_budget=pass_budget)
    return repair(denoiser, Decoder(denoiser, document, canvas), sampled, config, policy, on_step, cancelled)


class CountingPositions:
    """A caching denoiser, the positions each of its cached passes computed counted (`computed`)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.computed: list[int] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def cached_logits(self, ids, positions, cache, refresh, predicted=None):
        self.computed.append(len(positions))
        return self.inner.cached_logits(ids, positions, cache, refresh, predicted)
