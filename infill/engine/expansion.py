"""Variable-length spans for models with an <|expand|> token (DreamOn): the span grows and shrinks
while it is denoised.

    each span starts as `expand_start` masks (at most its budget: the most it may grow to)
    repeat (at most `steps` passes):
        predict the span positions of the current sequence (context + spans as they are now)
        re-mask committed tokens the model no longer believes in (this project's self-correction)
        choose a token for each masked position (temperature, top-p, top-k; <|expand|> ruled
            out in a span at its budget, and on the last pass)
        commit the best under the unmasking rule (one a pass when the step cap allows, as
            DreamOn does; more when the cap is short, or above `commit_threshold`)
        a committed <|expand|> becomes two masks (the span grows by one)
        a committed end-of-text is deleted, with every mask after it in its span (the span
            shrinks: DreamOn's pad-to-the-right then delete)
        stop when a pass finds nothing masked and changes nothing

As DreamOn's own sampler does (DreamLM/DreamOn `eval/generator.py`,
`batch_generate_with_expand_as_token`; its infilling evaluation script under `eval/`, with
masks to start with 4 to 64, at most 64, 256 steps, entropy, temperature 0.2, top-p 0.9):
one token committed per step, a committed expand turned into two masks, the end-of-text
committed inside the span removed together with the masks to its right, expand forbidden once
the span has used its length budget. Here the budget is the span's slot in the canvas (the
engine sizes it from the span's current length), so the grown span always fits the context
window the canvas was cut to.

The sequence changes length as spans grow and shrink, so rows are denoised one after another
(DreamOn's sampler takes one row at a time too), each with full passes after every change of
length (the context cache is kept while the length stays). The result is written back in the
canvas's fixed layout: each slot holds its span's tokens followed by <null> (the end-of-text
id: dropped on decoding), so the engine maps slots to spans and edits exactly as for a fixed
length.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from infill.engine.prediction import CanvasPredictor
from infill.engine.results import SampleResult, SampleStats, Step
from infill.engine.unmasking import candidates, commit_positions, pick, runs, without_token
from infill.errors import Cancelled
from infill.options import SamplerConfig

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser


@dataclass
class Cell:
    """One position of a span: its token (the mask id while masked), how often it was re-masked,
    and the model's probability of its token when it was last predicted."""

    token: int
    revisions: int = 0
    confidence: float = 0.0
    committed: bool = False  # in the last step
    remasked: bool = False  # in the last step


@dataclass
class SpanState:
    start: int  # the slot's start in the canvas
    budget: int  # the slot's length: the most the span may grow to
    cells: list[Cell] = field(default_factory=list)


class _ExpandAllowed:
    """The denoiser with <|expand|> and end-of-text allowed as predictions (whatever its
    special_ids say): the view infill.engine.prediction predicts through."""

    def __init__(self, denoiser: Denoiser):
        self._denoiser = denoiser
        self.special_ids = frozenset(denoiser.special_ids) - {denoiser.expand_id, denoiser.null_id}

    def __getattr__(self, name: str):
        return getattr(self._denoiser, name)


def sample_expanding(
    denoiser: Denoiser,
    canvas: torch.Tensor,
    editable: torch.Tensor,
    config: SamplerConfig,
    on_step: Callable[[Step], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> SampleResult:
    """Denoise the `editable` runs (spans) of each row of `canvas` (B, L), growing and shrinking
    them with <|expand|> and end-of-text (see the module's docstring). `config.steps` must be
    set. Returns the canvas layout, each slot its span's tokens then <null>s."""
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(config.seed) if config.seed is not None else None
    ids = canvas.clone()
    confidence = torch.ones(canvas.shape)
    totals = {"steps": 0, "passes": 0, "cached": 0, "revisions": 0, "converged": True}
    for row in range(canvas.size(0)):
        spans = [SpanState(a, b - a) for a, b in runs(editable[row])]
        start = max(1, round(config.expand_start * config.length_scale))
        for span in spans:
            span.cells = [Cell(denoiser.mask_id) for _ in range(min(start, span.budget))]
        run = _RowRun(denoiser, canvas[row], spans, config, generator)
        for step in range(config.steps):
            if cancelled is not None and cancelled():
                raise Cancelled("sampling cancelled")
            done = run.step(step)
            write_back(denoiser, ids, confidence, row, spans)
            if on_step is not None:
                on_step(run.report(step, ids, row))
            if done:
                break
        totals["steps"] = max(totals["steps"], run.passes)
        totals["passes"] += run.passes
        totals["cached"] += run.passes - run.full_passes
        totals["revisions"] += run.revisions
        totals["converged"] &= run.converged
    stats = SampleStats(
        steps=totals["steps"],
        forward_passes=totals["passes"],
        tokens=int(editable[0].sum()),
        revisions=totals["revisions"],
        seconds=time.perf_counter() - started,
        converged=totals["converged"],
        cached_passes=totals["cached"],
    )
    return SampleResult(ids, confidence, stats)


class _RowRun:
    """The denoising of one row: its spans' cells, the sequence the model sees, the passes."""

    def __init__(self, denoiser: Denoiser, row: torch.Tensor, spans: list[SpanState], config, generator):
        self.denoiser = denoiser
        self.view = _ExpandAllowed(denoiser)
        self.row = row
        self.spans = spans
        self.config = config
        self.generator = generator
        self.predictor: CanvasPredictor | None = None
        self.shape: tuple[int, ...] = ()
        self.passes = self.revisions = 0
        self.earlier_full_passes = 0  # of the predictors before the current one
        self.converged = False

    @property
    def full_passes(self) -> int:
        return self.earlier_full_passes + (self.predictor.full_passes if self.predictor else 0)

    def sequence(self) -> tuple[torch.Tensor, list[Cell]]:
        """(1, L') ids the model sees now, and the span cells in order (their positions: the
        editable positions of the sequence, left to right)."""
        pieces, cells, position = [], [], 0
        for span in self.spans:
            pieces += [self.row[position : span.start].tolist(), [cell.token for cell in span.cells]]
            cells += span.cells
            position = span.start + span.budget
        pieces.append(self.row[position:].tolist())
        return torch.tensor([[token for piece in pieces for token in piece]]), cells

    def editable(self, length: int) -> torch.Tensor:
        flags = torch.zeros(1, length, dtype=torch.bool)
        shift = 0
        for span in self.spans:
            flags[0, span.start + shift : span.start + shift + len(span.cells)] = True
            shift += len(span.cells) - span.budget
        return flags

    def step(self, step: int) -> bool:
        """One pass; True when sampling is over (nothing masked and nothing doubted)."""
        config, denoiser = self.config, self.denoiser
        x, cells = self.sequence()
        shape = tuple(len(span.cells) for span in self.spans)
        for cell in cells:
            cell.committed = cell.remasked = False
        if not cells:  # every span deleted itself: nothing left to predict
            self.converged = True
            return True
        if self.predictor is None or shape != self.shape:  # a new length: start a new cache
            self.earlier_full_passes = self.full_passes
            self.predictor = CanvasPredictor(self.view, self.editable(x.size(1)), config.cache_refresh)
            self.shape = shape
        _, probs = self.predictor(x)  # (1, P, vocab) at the span cells, in order
        self.passes += 1
        last = step == config.steps - 1
        tokens = torch.tensor([[cell.token for cell in cells]])
        masked = tokens == denoiser.mask_id
        current = probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # (1, P)
        revisions = torch.tensor([[cell.revisions for cell in cells]])
        disbelieved = ~masked & (current < config.remask_threshold) & (revisions < config.max_revisions)

        choices, vocab = candidates(probs)  # (the most likely tokens only, with a large vocabulary)
        at_budget = torch.tensor([[len(s.cells) >= s.budget for s in self.spans for _ in s.cells]])
        if last:
            at_budget[:] = True  # the last pass must leave no <mask> behind: no growing then
        choices = without_token(choices, vocab, denoiser.expand_id, keep=~at_budget)
        picked, picked_p, score = pick(choices, vocab, config, self.generator)
        blocks = torch.zeros_like(picked)  # DreamOn decodes the span as one block
        commit = commit_positions(masked, torch.ones_like(masked), blocks, score, picked_p, config, step)
        remask = disbelieved & (not last)

        for i, cell in enumerate(cells):
            if commit[0, i]:
                cell.token, cell.confidence = int(picked[0, i]), float(picked_p[0, i])
                cell.committed = True
            elif remask[0, i]:
                cell.token, cell.revisions, cell.remasked = denoiser.mask_id, cell.revisions + 1, True
                self.revisions += 1
            elif not masked[0, i]:
                cell.confidence = float(current[0, i])
        for span in self.spans:
            span.cells = self.reshaped(span)
        if not masked.any() and not disbelieved.any():
            self.converged = True
            return True
        return False

    def reshaped(self, span: SpanState) -> list[Cell]:
        """The span's cells after this step's commits: each committed <|expand|> two masks (while
        the budget allows), the first committed end-of-text deleted with every mask after it."""
        null, expand, mask = self.denoiser.null_id, self.denoiser.expand_id, self.denoiser.mask_id
        ends = [i for i, cell in enumerate(span.cells) if cell.committed and cell.token == null]
        end = ends[0] if ends else len(span.cells)
        kept: list[Cell] = []
        for i, cell in enumerate(span.cells):
            if i >= end and (cell.token == null or cell.token == mask and not cell.remasked):
                continue  # the end-of-text and the masks to its right: deleted
            kept.append(cell)
        grown: list[Cell] = []
        length = len(kept)
        for cell in kept:
            if cell.token != expand:
                grown.append(cell)
            elif length < span.budget:
                grown += [Cell(mask), Cell(mask)]
                length += 1
            else:  # two expands in one pass at the budget: the second stays one mask
                grown.append(Cell(mask))
        return grown

    def report(self, step: int, ids: torch.Tensor, row: int) -> Step:
        committed = torch.zeros_like(ids, dtype=torch.bool)
        remasked = torch.zeros_like(ids, dtype=torch.bool)
        masked_left = 0
        for span in self.spans:
            for i, cell in enumerate(span.cells):
                committed[row, span.start + i] = cell.committed
                remasked[row, span.start + i] = cell.remasked
                masked_left += cell.token == self.denoiser.mask_id
        return Step(step, ids.clone(), committed, remasked, masked_left, cap=self.config.steps)


def write_back(
    denoiser: Denoiser, ids: torch.Tensor, confidence: torch.Tensor, row: int, spans: list[SpanState]
) -> None:
    """Each span into its slot of `ids[row]`: its tokens, then <null> to the slot's end. A
    padding position's confidence is the geometric mean of the span's (1 for an empty span), so
    the slot's mean log-probability is the span's own (what infill.modes.alternatives ranks by)."""
    for span in spans:
        tokens = [cell.token for cell in span.cells]
        padding = span.budget - len(tokens)
        ids[row, span.start : span.start + span.budget] = torch.tensor(tokens + [denoiser.null_id] * padding)
        probs = [max(cell.confidence, 1e-12) for cell in span.cells]
        mean = math.exp(sum(map(math.log, probs)) / len(probs)) if probs else 1.0
        confidence[row, span.start : span.start + span.budget] = torch.tensor(probs + [mean] * padding)
