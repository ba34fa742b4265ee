"""The repair stage: parser-guided steps for fills that break the file's syntax.

    fill the canvas -> put the fills in the file -> parse (tree-sitter, then Python's ast)
    retries      re-draw the tokens the problems touch, a few rounds (infill.engine.repair.retries)
    token edits  then single-token edits, each checked by the parser (infill.engine.repair.token_edits)
    fresh fills  then draw a still-broken fill again from scratch, with its own retries and
                 edits (infill.engine.repair.fresh_fills); spans of several lines only (single lines
                 parse as often without them: docs/measurements.md)

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
from infill.engine.repair.fresh_fills import redraw
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

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser


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


def repair(
    denoiser: Denoiser,
    document: Document,
    canvas: Canvas,
    sampled: SampleResult,
    config: SamplerConfig,
    policy: RepairPolicy,
    on_step: Callable[[Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> SampleResult:
    """The rows of `sampled` (B, L), a filled `canvas` of `document`, with the fills that break
    the syntax repaired as `policy` allows (see `RepairPolicy.for_canvas`).

    Returns the ids to keep with their confidence, and `sampled.stats` merged with those of the
    steps run: each retry round counts one `syntax_rounds` (its `revisions` include the
    re-masked tokens), each edit one `syntax_edits` (and a revision), each fresh fill one
    `syntax_restarts`."""
    return _repair(denoiser, document, canvas, sampled, config, policy.for_canvas(document, canvas),
                   on_step, cancelled)  # fmt: skip


def _repair(denoiser, document, canvas, sampled, config, policy, on_step, cancelled) -> SampleResult:
    if policy.off:
        return sampled
    problems_of = FillProblems(denoiser, document, canvas)
    rows = Rows.of(sampled, problems_of)
    budget = policy.pass_budget
    retry(denoiser, rows, problems_of, config, policy.retries, on_step, cancelled, budget)
    if budget is None or rows.forward_passes < budget:
        edit_rows(denoiser, canvas, rows, problems_of, policy.token_edits, cancelled)

    def mend(fresh: SampleResult, hook: Callable[[Step], None] | None) -> SampleResult:
        """A fresh fill's own retries and edits, within what is left of the budget."""
        left = None if budget is None else max(0, budget - rows.forward_passes - fresh.stats.forward_passes)
        own = replace(policy, fresh_fills=0, pass_budget=left)
        return _repair(denoiser, document, canvas, fresh, config, own, hook, cancelled)

    redraw(denoiser, canvas, rows, problems_of, config, policy.fresh_fills, policy.pass_budget, mend,
                on_step, cancelled)  # fmt: skip
    return rows.result()
