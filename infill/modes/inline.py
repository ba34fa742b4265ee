"""Inline mode: what to insert at the cursor, with the code before *and after* it as context.

    plan:   an insertion point (an empty span) at the cursor; with a temperature above 0, one
            job per sample (seeds 0, 1, ...), else one (sampling is deterministic)
    repair: at most RETRIES syntax retry and TOKEN_EDITS token edits (the options may
            lower them): ghost text is asked for as the user types. Token edits nearly doubled
            its time (`infill-bench lsp --threads 2`: 140 -> 259 ms with 2 edits), so it gets
            none; an insertion point gets no fresh fills
    recall: on a blank line, the first sample may be a line of the file (infill.engine.recall)
    edits:  the distinct, non-blank texts, in the order drawn

The language server offers them as ghost text (lsp_server.inline).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infill.engine.pipeline import Filled, Job, RequestStats
from infill.engine.repair import RepairPolicy
from infill.options import InfillOptions
from infill.text.document import Document
from infill.text.spans import Span, validate_spans

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser

RETRIES = 1  # caps on the options' retries and token_edits
TOKEN_EDITS = 0


@dataclass
class Completions:
    texts: list[str]  # distinct, non-blank
    stats: RequestStats


@dataclass
class InlineRequest:
    document: Document
    offset: int  # character offset of the cursor
    options: InfillOptions = field(default_factory=InfillOptions)
    samples: int = 1  # at a temperature above 0: samples drawn (one job each)

    def plan(self, denoiser: Denoiser) -> list[Job]:
        options = self.options
        policy = RepairPolicy.of(
            options,
            retries=min(options.retries, RETRIES),
            token_edits=min(options.token_edits, TOKEN_EDITS),
        )
        spans = validate_spans(self.document.text, [Span(self.offset, self.offset, "cursor")])
        runs = max(1, self.samples) if options.sampler.temperature > 0 else 1
        first_seed = options.sampler.seed or 0
        jobs = []
        for run in range(runs):
            sampler = options.sampler
            if runs > 1:
                sampler = dataclasses.replace(sampler, seed=first_seed + run)
            recall = options.recall and run == 0  # the first sample only: the others stay the model's
            jobs.append(
                Job(self.document, spans, sampler, policy, options.budget, options.context_length,
                    recall=recall)
            )  # fmt: skip
        return jobs

    def finish(self, denoiser: Denoiser, filled: list[Filled], stats: RequestStats) -> Completions:
        texts: list[str] = []
        for part in filled:  # one canvas a job: one insertion point
            (inserted,) = part.texts[0]
            if inserted.strip() and inserted not in texts:
                texts.append(inserted)
        return Completions(texts, stats)
