"""One request, start to end: the stages every mode goes through.

    plan     request.plan(denoiser) -> jobs: each the file, its spans, the rows to sample, the
             sampler's settings and the repair policy (the modes: infill.modes)
    window   the text of the file around a job's spans that the model can reach (infill.text.window):
             the stages below run on that text alone (`in_window`); what they made of it is
             moved back into the file's offsets before the mode's finish (`Windowed.to_file`)
    canvas   a job's spans laid out as token ids, in groups that fit the model's context, cut to
             it token by token (infill.engine.canvas)
    mask     the positions to denoise: every slot position, or the mode's choice (fix mode
             scores the canvas and picks the tokens the model doubts)
    denoise  the sampler (infill.engine.sampler)
    repair   parser-guided retries, token edits and fresh fills, as the policy allows (infill.engine.repair)
    recall   a one-line fill may take a line of the document the model ranks higher (infill.engine.recall)
    decode   each slot's text (infill.engine.decode: one Decoder per canvas, which the repair and
             recall stages are handed to read the fills they judge)
    edits    request.finish(...) -> the mode's result: its edits of the file and what it has to say

Windowing is this module's, for every mode: a mode plans its jobs on the whole file and finishes
on the whole file, and never sees a window; the CLI and the language server run a request the
same way whatever the file's length.

Progress (before each job), cancellation (before each job and each canvas; the sampler checks
before each pass) and statistics are handled here, once for every mode: `RequestStats`, the
model's work (SampleStats, summed over every run) and what the stages above the sampler did.
The CLI and the language server call `run` and nothing below it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch

from infill.engine.canvas import Canvas, build_canvas
from infill.engine.decode import Decoder
from infill.engine.recall import recall
from infill.engine.repair import Repaired, RepairPolicy, repair
from infill.engine.results import SampleResult, SampleStats, Step, merge_stats
from infill.engine.sampler import sample, step_cap
from infill.engine.span_length import choose_lengths, needs_scored_lengths
from infill.errors import Cancelled, InputError
from infill.options import SamplerConfig
from infill.text.document import Document
from infill.text.spans import Span
from infill.text.window import Window, staging_window

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser

__all__ = [
    "Canvas",
    "Filled",
    "Hooks",
    "Job",
    "Request",
    "RequestStats",
    "SampleStats",
    "Selection",
    "Step",
    "Windowed",
    "in_window",
    "jobs_of",
    "lay_out",
    "run",
]

NOTHING_SAMPLED = SampleStats(steps=0, forward_passes=0, tokens=0, revisions=0, seconds=0.0, converged=True)


@dataclass
class RequestStats(SampleStats):
    """A request's statistics (or one canvas's): the model's work, summed over every run (the
    fill, its retries and fresh fills, the passes of token edits, recall and scoring), and what
    the stages above the sampler did. The CLI's --stats and --json and the language server show them."""

    retries: int = 0  # retry rounds of fills that broke the file's syntax (infill.engine.repair.retries)
    token_edits: int = 0  # single-token edits the parser checked (infill.engine.repair.token_edits)
    fresh_fills: int = 0  # fresh fills of a fill that still broke the syntax (repair.fresh_fills)
    recalled: int = 0  # one-line fills that took a line of the document instead (infill.engine.recall)
    repair_passes: int = 0  # of forward_passes, those the repair stage made (retries, edits, fresh fills)
    repair_seconds: float = 0.0  # of seconds, the repair stage's

    @classmethod
    def of(cls, parts: list[SampleStats], **stages: float) -> RequestStats:
        """`parts` summed (with their stage counters, where they have them), plus `stages`."""
        counters = {
            f.name: stages.get(f.name, 0) + sum(getattr(part, f.name, 0) for part in parts)
            for f in fields(cls)
            if f.name not in SampleStats.__dataclass_fields__
        }
        return cls(**vars(merge_stats(parts)), **counters)


@dataclass
class Hooks:
    """What the caller wants to see and say while a request runs."""

    on_step: Callable[[Canvas, Step], None] | None = None  # after each denoising pass
    cancelled: Callable[[], bool] | None = None  # true: stop (Cancelled)
    on_progress: Callable[[int, int], None] | None = None  # (spans done, spans in all), before each job
    deadline: float | None = None  # time.monotonic() past which a fill ends at its next pass and
    #   skips the repair and recall stages: the best fill so far (the CLI's --timeout)

    def out_of_time(self, now: float | None = None) -> bool:
        """Past the deadline at `now` (time.monotonic(); None: now)."""
        return self.deadline is not None and (time.monotonic() if now is None else now) > self.deadline


@dataclass
class Selection:
    """The mask stage's answer: which positions of a canvas's rows the sampler denoises."""

    editable: torch.Tensor  # (B, L) bool
    probs: torch.Tensor | None = None  # (L, vocab): the scoring pass it was chosen by, if any
    stats: SampleStats | None = None  # of that pass


@dataclass
class Job:
    """One piece of a plan: spans of the file, filled on one canvas or more.

    As a mode plans it, a job holds the whole file and its spans in the file's offsets; the
    stages see it on its window (`in_window`: the same job, its document the window's text)."""

    document: Document
    spans: list[Span]  # sorted, not overlapping
    sampler: SamplerConfig
    repair: RepairPolicy
    budget: int | None = None  # masked positions per span; None: from the span's current length
    context_length: int | None = None  # None: the model's own
    rows: int = 1  # samples drawn together as one batch (alternatives)
    keep_text: bool = False  # slots hold the spans' own tokens, not masks (see build_canvas)
    select: Callable[[Denoiser, Canvas, torch.Tensor], Selection] | None = None  # None: every slot position
    context: Any = None  # what the mode's finish needs to know of this job (e.g. its window)
    recall: bool = False  # one-line fills may take a line of the document (fill mode, first inline sample)
    denoise: Callable[..., SampleResult] | None = None  # None: this engine's sampler (`denoise`);
    #   else the stage to run instead, with the same arguments (the authors' loops: infill.engine.authors.run)
    layout: Callable[[Document, list[Span]], tuple[Document, list[Span]]] | None = None  # None: the
    #   model fills the spans of the window's text; else the text it fills, made from the window's
    #   document and the spans moved into it, with one span for each of them, in order (docstrings:
    #   the quotes put in place, the empty span between them)


@dataclass
class Filled:
    """What the stages made of one canvas of a job, in the file's offsets (`Windowed.to_file`)."""

    job: Job  # as planned: the whole file
    canvas: Canvas  # its slots hold the job's spans, in the file's offsets
    selection: Selection
    sampled: SampleResult  # after the repair and recall stages
    texts: list[list[str]]  # [row][slot]: each slot's text
    stats: RequestStats  # of this canvas: its mask, denoise, repair and recall stages


R = TypeVar("R", covariant=True)


class Request(Protocol[R]):
    """A mode's request (infill.modes): its plan, and what it makes of the filled canvases."""

    def plan(self, denoiser: Denoiser) -> list[Job]: ...

    def finish(self, denoiser: Denoiser, filled: list[Filled], stats: RequestStats) -> R: ...


def run(denoiser: Denoiser, request: Request[R], hooks: Hooks | None = None) -> R:
    """Run `request` through the stages; its mode's result. A denoiser that runs whole requests
    itself (a team server in the model's place: infill.models.served) is handed the request."""
    hooks = hooks or Hooks()
    if hasattr(denoiser, "run_request"):
        return denoiser.run_request(request, hooks)
    jobs = request.plan(denoiser)
    total, done = sum(len(job.spans) for job in jobs), 0
    filled: list[Filled] = []
    for job in jobs:
        if hooks.on_progress is not None:
            hooks.on_progress(done, total)
        check(hooks)  # before a job's text is tokenized...
        windowed = in_window(denoiser, job)
        for canvas in lay_out(denoiser, windowed.staged):
            check(hooks)  # ...and before each of its canvases is denoised
            filled.append(windowed.to_file(fill_canvas(denoiser, windowed.staged, canvas, hooks)))
        done += len(job.spans)
    return request.finish(denoiser, filled, RequestStats.of([f.stats for f in filled]))


def check(hooks: Hooks) -> None:
    """Cancelled if the caller has asked to stop."""
    if hooks.cancelled is not None and hooks.cancelled():
        raise Cancelled("request cancelled")


def fill_canvas(denoiser: Denoiser, job: Job, canvas: Canvas, hooks: Hooks) -> Filled:
    """mask -> denoise -> repair -> recall -> decode, for one canvas."""
    ids = torch.tensor([canvas.ids]).repeat(job.rows, 1)
    selection = mask(denoiser, job, canvas, ids)
    spans = [job.document.text[s.span.start : s.span.end] for s in canvas.slots]
    config = step_cap(job.sampler, spans, int(selection.editable[0].sum()))
    recalls = job.recall and job.rows == 1
    on_step = partial(hooks.on_step, canvas) if hooks.on_step else None
    stage = job.denoise or denoise
    sampled = stage(denoiser, ids, selection.editable, replace(config, first_view=recalls), on_step,
                    hooks.cancelled, hooks.out_of_time)  # fmt: skip
    first_view = sampled.first_view  # the canvas as laid out: what recall ranks lines on
    decoder = Decoder(denoiser, job.document, canvas)  # the decode stage, for this canvas
    repaired = Repaired(sampled)
    if not hooks.out_of_time():
        repaired = repair_in_time(denoiser, job, decoder, sampled, config, on_step, hooks)
    stages = dict(
        retries=repaired.retries,
        token_edits=repaired.token_edits,
        fresh_fills=repaired.fresh_fills,
        repair_passes=repaired.sampled.stats.forward_passes - sampled.stats.forward_passes,
        repair_seconds=repaired.sampled.stats.seconds - sampled.stats.seconds,
    )
    sampled = repaired.sampled
    if recalls and not hooks.out_of_time():
        sampled, stages["recalled"] = recall(denoiser, decoder, sampled, first_view)
    texts = decoder.rows(sampled.ids)  # the decode stage
    stats = RequestStats.of([s for s in (selection.stats, sampled.stats) if s is not None], **stages)
    return Filled(job, canvas, selection, sampled, texts, stats)


def repair_in_time(denoiser: Denoiser, job: Job, decoder: Decoder, sampled: SampleResult,
                   config: SamplerConfig, on_step, hooks: Hooks) -> Repaired:  # fmt: skip
    """The repair stage, given up (its fill kept as sampled) when the deadline passes."""

    def stop() -> bool:
        return hooks.out_of_time() or (hooks.cancelled is not None and hooks.cancelled())

    try:
        return repair(denoiser, decoder, sampled, config, job.repair, on_step, stop)
    except Cancelled:
        if not hooks.out_of_time():
            raise
        return Repaired(sampled)


def jobs_of(filled: list[Filled]) -> list[Job]:
    """The jobs the filled canvases came from, in order, each once."""
    jobs: list[Job] = []
    for part in filled:
        if not any(part.job is job for job in jobs):
            jobs.append(part.job)
    return jobs


# --------------------------------------------------------------------------- the stages


@dataclass(frozen=True)
class Windowed:
    """The window step's answer: a job as planned (the whole file) and as the stages see it."""

    planned: Job
    window: Window  # the characters of the file the stages see
    staged: Job  # the job on the window's text (laid out by `Job.layout`), its spans in that text's offsets

    def to_file(self, part: Filled) -> Filled:
        """A canvas filled for the staged job as one of the planned job: its slots hold the
        planned job's spans (the staged spans are theirs one for one, in order)."""
        planned = dict(zip(self.staged.spans, self.planned.spans, strict=True))
        slots = [replace(slot, span=planned[slot.span]) for slot in part.canvas.slots]
        return replace(part, job=self.planned, canvas=replace(part.canvas, slots=slots))


def in_window(denoiser: Denoiser, job: Job) -> Windowed:
    """The window step: the job on the text of the file that its model can reach around its
    spans (infill.text.window.staging_window, for the job's context length; widened where a cut
    would not parse, so that the repair stage judges as in the file), so that a request
    costs what the model's window costs, not the file. Only that text is tokenized, parsed by
    the repair stage's checks, and searched by recall; a file that is not much longer than the
    window is its own window, and the job is the same job.

    The canvas stage still cuts the canvas to the context token by token (infill.engine.canvas
    `window`): this step owns which text the stages see, that cut only how many of its tokens.
    """
    context = job.context_length or denoiser.context_length
    window = staging_window(job.document, job.spans[0].start, job.spans[-1].end, context)
    document, spans = window.document(job.document), [window.span(span) for span in job.spans]
    if job.layout is not None:
        document, spans = job.layout(document, spans)
    return Windowed(job, window, replace(job, document=document, spans=spans, layout=None))


def lay_out(denoiser: Denoiser, job: Job) -> list[Canvas]:
    """The canvas stage: one canvas for all of the job's spans when they fit in one window; else
    greedy runs of spans that do.

    A model with neither <null> nor <|expand|> gets each span at the length its first pass
    scores best (infill.engine.span_length), one batched pass per canvas.
    """

    def canvas(group: list[Span], budget=job.budget) -> Canvas:
        return build_canvas(
            denoiser, job.document.text, group, budget, job.context_length, keep_text=job.keep_text
        )

    try:
        canvases = [canvas(job.spans)]
    except InputError:
        if len(job.spans) == 1:
            raise
        canvases, group, current = [], [job.spans[0]], canvas([job.spans[0]])
        for span in job.spans[1:]:
            try:
                current, group = canvas(group + [span]), group + [span]
            except InputError:
                canvases.append(current)
                current, group = canvas([span]), [span]
        canvases.append(current)
    if job.keep_text or not needs_scored_lengths(denoiser, job.sampler.length):
        return canvases
    # A model without <null> or <|expand|>: each span's length chosen by scoring (at most its
    # budget, so the groups still fit their windows).
    scored = []
    for laid in canvases:
        spans = [slot.span for slot in laid.slots]
        lengths = choose_lengths(denoiser, job.document.text, spans, job.budget, job.context_length)
        scored.append(canvas(spans, lengths))
    return scored


def mask(denoiser: Denoiser, job: Job, canvas: Canvas, ids: torch.Tensor) -> Selection:
    """The mask stage: the job's own choice, or every slot position of every row."""
    if job.select is not None:
        return job.select(denoiser, canvas, ids)
    return Selection(torch.tensor([canvas.editable()]).repeat(ids.size(0), 1))


def denoise(
    denoiser: Denoiser,
    ids: torch.Tensor,
    editable: torch.Tensor,
    config: SamplerConfig,
    on_step: Callable[[Step], None] | None,
    cancelled: Callable[[], bool] | None,
    finish_now: Callable[[], bool] | None = None,
) -> SampleResult:
    """The denoise stage: the sampler over the editable positions (nothing to denoise: no pass)."""
    if not editable.any():
        return SampleResult(ids, torch.ones(ids.shape), NOTHING_SAMPLED)
    return sample(denoiser, ids, editable, config, on_step, cancelled, finish_now)
