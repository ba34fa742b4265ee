"""Parser-checked token edits: the step after the syntax retries for a fill that still breaks the syntax.

The syntax retries (infill.engine.repair.retries) re-draw the tokens a problem touches; what they leave
broken is often one token away from parsing: a bracket too many or too few, a missing comma or
colon, a stray quote. This step searches single-token edits of the fills, each one checked by
parsing the whole file:

    while the fills cause syntax problems and edits are left:
        one forward pass: the model's probabilities at every position of the fills (an exact
            pass whose output layer runs at the fills' positions alone: `SlotProbabilities`)
        where to edit: the tokens a problem touches and their neighbours, and the tokens of
            each fill the model finds least likely
        what to try there, most likely first: one of the model's top tokens instead, the token
            deleted, or a bracket, comma, colon or quote inserted before it (into the span's
            <null> padding, which makes room)
        keep the edit that leaves the fewest problems, or as many but the first of them later
            in the file (the likeliest among equals), if that is progress on now; an edit that
            leaves none ends the search
    keep the edits only if, together, they leave fewer problems than before them

Moving the first problem on counts as progress because mending a fill often takes two edits
(an opening bracket and its closing one) of which the first changes no count.
No edit brings in a comment: a '#' would hide the rest of its line rather than mend it. Each
candidate costs one parse of the file (a few ms for a 30 kB file), so at most `MAX_TRIALS` are
tried per edit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from infill.engine.canvas import Canvas, Slot
from infill.engine.prediction import allowed_softmax, exact_slot_logits, rows_of
from infill.engine.repair.problems import FillProblems
from infill.engine.repair.rows import Rows
from infill.engine.results import SampleStats
from infill.errors import Cancelled
from infill.text.syntax import SyntaxProblem

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.models.base import Denoiser

MAX_TRIALS = 120  # candidate edits parsed per edit
TOP_TOKENS = 6  # the model's most likely tokens at a position (less the token there and <null>)...
MIN_PROBABILITY = 1e-3  # ...if it gives them at least this probability
NEIGHBOURS = 1  # tokens on each side of a token a problem touches that are tried too
LEAST_LIKELY = 2  # each fill's least likely tokens that are tried too
INSERTABLE = (")", "]", "}", ",", ":", '"', "'", "(")
PRIOR = 0.02  # the probability an edit of the parser's (a deletion, an insertion) is given


@dataclass
class SlotProbabilities:
    """The model's probabilities (special tokens ruled out) at a canvas's slot positions only,
    from one exact pass over the whole canvas whose output layer runs at those positions alone
    where the denoiser can: the same numbers as a full pass's there (tested), without the output
    layer and softmax over every position (the shipped model, a 512-token window with 27 slot
    positions, 2 threads: 64.4 against 50.8 ms, medians of 20 passes each way, alternating)."""

    row: torch.Tensor  # (L,) long: each slot position's row of `probs` (-1 elsewhere)
    probs: torch.Tensor  # (P, vocab)

    @classmethod
    def of(cls, denoiser: Denoiser, canvas: Canvas, ids: torch.Tensor) -> SlotProbabilities:
        """At the slot positions of `canvas` holding `ids` (1, L) (`exact_slot_logits`)."""
        columns, logits = exact_slot_logits(denoiser, canvas, ids)
        return cls(rows_of(columns, ids.shape[1]), allowed_softmax(denoiser, logits))

    def at(self, position: int) -> torch.Tensor:
        """(vocab,): the distribution at slot `position`."""
        return self.probs[self.row[position]]

    def of_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """(1, L): the probability of each slot position's token in `ids` (1, L), 0 elsewhere."""
        found = torch.zeros(ids.shape, dtype=self.probs.dtype)
        slots = (self.row >= 0).nonzero().flatten()
        found[0, slots] = self.probs[self.row[slots], ids[0, slots]]
        return found


@dataclass
class Edit:
    position: int  # canvas position
    token: int | None  # the new token (None: delete the token at `position`)
    insert: bool  # True: put `token` before `position`, shifting the rest of the slot right
    gain: float  # log-probability of the new token minus that of the old, under the model

    def apply(self, ids: torch.Tensor, slot: Slot, null_id: int) -> torch.Tensor:
        """The (1, L) ids with this edit made inside `slot` (a deleted token becomes <null>, which
        the fill's text drops; an insertion shifts the rest of the slot right, onto the <null>
        that ends it)."""
        row = ids.clone()
        end = slot.start + slot.length
        if self.insert:
            row[0, self.position + 1 : end] = ids[0, self.position : end - 1]
            row[0, self.position] = self.token
        else:
            row[0, self.position] = null_id if self.token is None else self.token
        return row


def edit_rows(
    denoiser: Denoiser,
    canvas: Canvas,
    rows: Rows,
    problems_of: FillProblems,
    max_edits: int,
    cancelled: Callable[[], bool] | None = None,
) -> int:
    """Up to `max_edits` parser-checked edits of each row of `rows` that still breaks the syntax;
    returns the edits made.

    The rows' problems stay as counted before the edits, so a row the edits mended still gets a
    fresh fill (infill.engine.repair.fresh_fills), kept if it leaves fewer problems than that count.
    Counting again would save time but lose quality: of 40 held-out blocks and 40 bodies
    (`infill-bench quality --kinds block,body --tasks 40 --threads 2`), it changed 6 fills, each
    further from the original than before (edit similarity 0.363 -> 0.356
    on blocks, 0.352 -> 0.347 on bodies, parse rates the same, blocks 4.6 -> 4.0 s)."""
    slots = torch.tensor(canvas.editable())
    edits = 0
    for r in range(rows.ids.size(0)) if max_edits > 0 else ():
        if not rows.problems[r]:
            continue
        if cancelled is not None and cancelled():
            raise Cancelled("sampling cancelled")
        started = time.perf_counter()
        row = rows.ids[r : r + 1]
        edited, probs, made, passes = edit_tokens(
            denoiser, canvas, row, problems_of, problems_of.blamed, max_edits
        )
        rows.ids[r] = edited[0]
        if probs is not None:
            rows.confidence[r] = torch.where(slots, probs[0], rows.confidence[r])
        seconds = time.perf_counter() - started
        rows.stats.append(  # forward passes, but no denoising steps
            SampleStats(steps=0, forward_passes=passes, tokens=0, revisions=made, seconds=seconds,
                        converged=True)
        )  # fmt: skip
        edits += made
    return edits


def edit_tokens(
    denoiser: Denoiser,
    canvas: Canvas,
    ids: torch.Tensor,
    problems_of: Callable[[torch.Tensor], list[SyntaxProblem]],
    blamed: Callable[[torch.Tensor, list[SyntaxProblem]], torch.Tensor],
    max_edits: int,
) -> tuple[torch.Tensor, torch.Tensor | None, int, int]:
    """Single-token edits of the fills of `ids` (1, L) that leave fewer `problems_of(ids)`.

    `blamed(ids, problems)` gives the (1, L) positions a problem touches. Returns the ids, the
    model's probability of each token after the edits (None if none was made), the number of
    edits made and the forward passes run."""
    original = ids
    problems = before = problems_of(ids)
    inserts = _insertable_tokens(denoiser)
    made = passes = 0
    while problems and made < max_edits:
        probs = SlotProbabilities.of(denoiser, canvas, ids)
        passes += 1
        best: tuple[tuple[int, int], torch.Tensor, list[SyntaxProblem]] | None = None
        tried = candidates(denoiser, canvas, ids, probs, blamed(ids, problems), inserts)[:MAX_TRIALS]
        for edit, slot in tried:
            trial = edit.apply(ids, slot, denoiser.null_id)
            left = problems_of(trial)
            if best is None or _standing(left) < best[0]:
                best = (_standing(left), trial, left)
            if not left:
                break
        if best is None or best[0] >= _standing(problems):
            break
        ids, problems, made = best[1], best[2], made + 1
    if not made or len(problems) >= len(before):
        return original, None, 0, passes
    return ids, SlotProbabilities.of(denoiser, canvas, ids).of_tokens(ids), made, passes + 1


def _standing(problems: list[SyntaxProblem]) -> tuple[int, int]:
    """Smaller is better: fewer problems, then the first one later in the file."""
    return len(problems), -(problems[0].start if problems else 0)


def candidates(
    denoiser: Denoiser,
    canvas: Canvas,
    ids: torch.Tensor,
    probs: SlotProbabilities,
    blamed: torch.Tensor,
    inserts: list[int],
) -> list[tuple[Edit, Slot]]:
    """The edits to try, most likely under the model first."""
    null, found = denoiser.null_id, []
    row = ids[0].tolist()
    for slot in canvas.slots:
        content = [i for i in range(slot.start, slot.start + slot.length) if row[i] != null]
        room = bool(content) and row[slot.start + slot.length - 1] == null  # a <null> to shift onto
        where: set[int] = set()
        for k, position in enumerate(content):
            if blamed[0, position]:
                where.update(content[max(0, k - NEIGHBOURS) : k + NEIGHBOURS + 1])
        where.update(sorted(content, key=lambda i: float(probs.at(i)[row[i]]))[:LEAST_LIKELY])
        for position in sorted(where):
            old = math.log(max(float(probs.at(position)[row[position]]), 1e-12))
            top = probs.at(position).topk(TOP_TOKENS)
            for p, token in zip(top.values.tolist(), top.indices.tolist()):
                if p < MIN_PROBABILITY or token in (row[position], null):
                    continue
                if "#" not in denoiser.token_text(token):
                    found.append((Edit(position, token, False, math.log(p) - old), slot))
            found.append((Edit(position, None, False, math.log(PRIOR) - old), slot))
            if room:
                found += [(Edit(position, token, True, math.log(PRIOR)), slot) for token in inserts]
        if room and where:  # after the fill's last token
            found += [(Edit(content[-1] + 1, token, True, math.log(PRIOR)), slot) for token in inserts]
    found.sort(key=lambda pair: -pair[0].gain)
    return found


def _insertable_tokens(denoiser: Denoiser) -> list[int]:
    """The ids of INSERTABLE that are single tokens of the model's vocabulary."""
    encoded = [denoiser.encode(text) for text in INSERTABLE]
    return [ids[0] for ids in encoded if len(ids) == 1]
