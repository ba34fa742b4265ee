"""Span lengths by scoring, for models with neither a <null> token nor <|expand|>.

Such a model fills every masked position with content, so a span's number of masks is its
length, and it has to be chosen before denoising. Each span gets a few candidate lengths (the
fractions LENGTH_FRACTIONS of its budget: by default the engine's budget from the span's current
length), laid out as candidate canvases (row r: every span at its r-th candidate length). One
forward pass over them as a batch, every span position masked, scores each span at each length:

    score(span, k) = mean over the span's k positions of log max_v p(v)

the log-probability of the model's most likely token at each position on that first pass (how
sure the model is of what goes there; a span with too many or too few positions leaves it
unsure somewhere). Each span takes its best-scored length; the engine then lays out the canvas
at those lengths and denoises it as usual (`length` "first-pass" only: "given" keeps the budget).

The candidate canvases must have one width to go in one batch: each is cut to the width of the
narrowest, so a longer candidate gives up as many tokens of far context (the window around the
spans, infill.engine.canvas.window). Where the file has too little context around the spans for that,
candidates of different widths go in one pass per width.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from infill.engine.canvas import Canvas, build_canvas, default_budget, window
from infill.engine.prediction import CanvasPredictor
from infill.errors import InputError
from infill.text.spans import Span

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser

LENGTH_FRACTIONS = (0.125, 0.25, 0.5, 0.75, 1.0)  # candidate lengths, as fractions of the budget


def needs_scored_lengths(denoiser: Denoiser, length_policy: str) -> bool:
    """Whether span lengths are chosen by scoring: no <null>, no <|expand|>, length not given."""
    expands = getattr(denoiser, "expand_id", None) is not None
    return denoiser.null_id is None and not expands and length_policy != "given"


def candidate_lengths(budget: int) -> list[int]:
    """The lengths tried for a span of this budget, shortest first (at least 1, no repeats)."""
    return sorted({max(1, round(budget * fraction)) for fraction in LENGTH_FRACTIONS})


def choose_lengths(
    denoiser: Denoiser,
    text: str,
    spans: Sequence[Span],
    budget: int | None = None,
    context_length: int | None = None,
) -> list[int]:
    """For each span of `spans` (laid out together in one canvas), the candidate length the
    model's first pass scores best (see the module's docstring); `budget`: the longest candidate
    (None: each span's default budget)."""
    context_length = context_length or denoiser.context_length
    if budget is None:
        originals = [denoiser.encode(text[s.start : s.end].replace("\r\n", "\n")) for s in spans]
        budgets = [default_budget(len(tokens), context_length) for tokens in originals]
    else:
        budgets = [budget] * len(spans)
    options = [candidate_lengths(b) for b in budgets]
    rows = max(len(lengths) for lengths in options)
    # Row r: each span at its r-th candidate (its last one when it has fewer).
    layouts = [[lengths[min(r, len(lengths) - 1)] for lengths in options] for r in range(rows)]
    canvases = [build_canvas(denoiser, text, spans, layout, context_length) for layout in layouts]
    scores = score_canvases(denoiser, same_width(canvases))  # (rows, spans)
    best = scores.argmax(0).tolist()
    return [layouts[r][s] for s, r in enumerate(best)]


def same_width(canvases: list[Canvas]) -> list[Canvas]:
    """The canvases cut to the narrowest one's width where their context allows."""
    width = min(len(canvas.ids) for canvas in canvases)
    cut = []
    for canvas in canvases:
        try:
            cut.append(window(canvas, width))
        except InputError:  # too little context to give up: it keeps its width
            cut.append(canvas)
    return cut


def score_canvases(denoiser: Denoiser, canvases: list[Canvas]) -> torch.Tensor:
    """(rows, spans): each slot's mean log-probability of the most likely token per position,
    with every slot masked; canvases of one width go through the model as one batch (the output
    layer at the slots only, where the denoiser can: infill.engine.prediction)."""
    scores = torch.zeros(len(canvases), len(canvases[0].slots))
    by_width: dict[int, list[int]] = {}
    for row, canvas in enumerate(canvases):
        by_width.setdefault(len(canvas.ids), []).append(row)
    for rows in by_width.values():
        ids = torch.tensor([canvases[row].ids for row in rows])
        editable = torch.tensor([canvases[row].editable() for row in rows])
        columns, probs = CanvasPredictor(denoiser, editable, refresh=2)(ids)  # one full pass
        best = torch.full(ids.shape, float("nan"))
        best[:, columns] = probs.max(-1).values.clamp_min(1e-12).log()
        for i, row in enumerate(rows):
            for s, slot in enumerate(canvases[row].slots):
                scores[row, s] = best[i, slot.start : slot.start + slot.length].mean()
    return scores
