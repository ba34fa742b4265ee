"""The repair stage: parser-guided steps for fills that break the file's syntax.

    for each attempt: the fill as sampled, then up to `fresh_fills` fresh fills of the rows
            still broken, while the pass budget lasts
        check        put the fills in the file and parse it (tree-sitter, then Python's ast)
        retries      re-mask the tokens the problems touch and sample them again, a few rounds
                     (infill.engine.repair.retries)
        token edits  optional: single-token edits, each checked by the parser
                     (infill.engine.repair.token_edits)
        keep         a fresh fill replaces a row if it leaves fewer problems
                     (infill.engine.repair.fresh_fills; spans of several lines only: single lines
                     parse as often without them, docs/measurements.md)

`repair` below is that loop. The fills' texts come from the canvas's `Decoder`, which the
pipeline hands down (infill.engine.decode); the counts of each step go back to the pipeline's
statistics (`Repaired`; infill.engine.pipeline.RequestStats), the model's work (forward passes,
steps, revisions) into the rows' SampleStats.

Which steps run, and how many times, is the request's RepairPolicy: every mode goes through
this one stage, with its own policy (fix mode, for one, repairs only spans that had a syntax
error and never draws a fresh fill; infill.modes). Which problems count as a fill's doing:
infill.engine.repair.problems.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from infill.engine.canvas import Canvas
from infill.engine.repair.fresh_fills import as_fresh_fill, fresh_fill, keep_better
from infill.engine.repair.problems import FillProblems
from infill.engine.repair.retries import retry
from infill.engine.repair.rows import Rows
from infill.engine.repair.token_edits import edit_rows
from infill.engine.results import SampleResult, Step
from infill.engine.sampler import one_line
from infill.errors import InputError
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import Document
from infill.text.syntax import file_problems, overlaps

if TYPE_CHECKING:
    from infill.engine.decode import Decoder  # the decode stage of a canvas, handed down by the pipeline
    from infill.models.base import Denoiser  # the interface of every model family (infill.models)


@dataclass(frozen=True)
class RepairPolicy:
    """Which repair steps a request allows, and how many of each (0: the step is off)."""

    retries: int = 4  # rounds of syntax retries
    token_edits: int = 6  # parser-checked single-token edits per row
    fresh_fills: int = 4  # fresh fills of a span of several lines
    pass_budget: int | None = 400  # the canvas's forward passes in all (its fill and every repair
    #   step): no step starts once they are spent, and none runs past them
    only_where_broken: bool = False  # repair only the spans that had a syntax problem before

    def __post_init__(self) -> None:
        for name in ("retries", "token_edits", "fresh_fills"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must be 0 or more (got {getattr(self, name)})")

    @classmethod
    def of(cls, options: InfillOptions, **overrides) -> RepairPolicy:
        """The policy of a request made with `options` (`overrides`: a mode's own choices)."""
        fields = dict(
            retries=options.retries,
            token_edits=options.token_edits,
            fresh_fills=options.fresh_fills,
            pass_budget=options.pass_budget,
        )
        return cls(**{**fields, **overrides})

    def for_canvas(self, document: Document, canvas: Canvas) -> RepairPolicy:
        """The steps this canvas gets: no fresh fills for spans of one line or less, and none
        at all under `only_where_broken` when no span touched a syntax problem."""
        policy = self
        if one_line([document.text[s.span.start : s.span.end] for s in canvas.slots]):
            policy = replace(policy, fresh_fills=0)
        if policy.only_where_broken and (policy.retries or policy.token_edits):
            problems = file_problems(document.text, document.language)
            spans = [slot.span for slot in canvas.slots]
            if not any(overlaps(p, s.start, s.end) for p in problems for s in spans):
                policy = replace(policy, retries=0, token_edits=0)
        return policy

    @property
    def off(self) -> bool:
        return self.retries < 1 and self.token_edits < 1 and self.fresh_fills < 1


@dataclass
class Repaired:
    """What the repair stage made of a filled canvas, and what it took."""

    sampled: SampleResult  # the rows to keep with their confidence; stats: the fill's and every step's
    retries: int = 0  # retry rounds run (each re-masks and samples the broken rows once)
    token_edits: int = 0  # single-token edits made
    fresh_fills: int = 0  # fresh fills drawn


def repair(
    denoiser: Denoiser,
    decoder: Decoder,
    sampled: SampleResult,
    config: SamplerConfig,
    policy: RepairPolicy,
    on_step: Callable[[Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Repaired:
    """The rows of `sampled` (B, L), a filled canvas (`decoder.canvas`) of `decoder.document`,
    with the fills that break the syntax repaired as `policy` allows (see
    `RepairPolicy.for_canvas`). Every step's forward passes, steps and revisions join
    `sampled.stats` (a retry's revisions include the tokens it re-masked; an edit is one)."""
    canvas = decoder.canvas
    policy = policy.for_canvas(decoder.document, canvas)
    if policy.off:
        return Repaired(sampled)
    budget, done = policy.pass_budget, Repaired(sampled)
    problems_of = FillProblems(decoder)
    rows = Rows.of(sampled, problems_of)  # check: the problems of each row's fills
    for attempt in range(1 + policy.fresh_fills):  # 0: the fill as sampled; k: its k-th fresh fill
        if attempt == 0:
            trial, broken, hook = rows, [], on_step
        else:
            broken = rows.broken()
            if not broken or rows.spent(budget):
                break
            hook = as_fresh_fill(on_step, attempt)
            fresh = fresh_fill(denoiser, canvas, rows, broken, config, attempt, budget, hook, cancelled)
            # counted before the trial's own passes (the fresh fill's among them): the rows' so far
            trial = Rows.of(fresh, problems_of, counted=rows.forward_passes)
            done.fresh_fills += 1
        # re-mask the tokens the problems touch and sample them again, a few rounds
        done.retries += retry(denoiser, trial, problems_of, config, policy.retries, hook, cancelled, budget)
        if policy.token_edits and not trial.spent(budget):  # optional: token edits
            done.token_edits += edit_rows(denoiser, canvas, trial, problems_of, policy.token_edits, cancelled)
        if attempt:
            keep_better(rows, broken, trial, problems_of)
    done.sampled = rows.result()
    return done
