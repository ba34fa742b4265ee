"""Several passes in one forward: whole canvases right-padded with a key mask; span passes packed.

A pass (`infill.models.base.Pass`) is one call of a denoiser's network methods. The batching
driver (`infill.engine.batching`) hands a caching denoiser the pending passes of several requests
at once (`run_passes`, passes of one kind); `run_batch` lays them out as one batch and gives each
pass back its own rows, as its own call would have returned them.

Full and refresh passes (whole canvases):

    ids        every pass's rows one after the other, right-padded to the longest canvas (token 0)
    key_mask   (R, W) True at each row's real positions: no query attends to a padded key. None
               when every canvas has one length (nothing is padded: the forward is the one a
               single call makes, a batch of more rows)
    positions  refresh passes: each row its own (R, P); a pass with fewer positions than the
               most is padded with its last one (those outputs are dropped)
    cache      refresh passes: a new batch cache, cut into each pass's own

Span passes (`run_packed`) are packed instead: one row holding every pass's query tokens (its
canvas's tokens at its positions) side by side, with their own positions for the rotary angles,
none padded, so a forward computes the tokens its passes asked for and no more (padded to the
most positions, eight passes of about 9 positions computed 37 each). Each layer's caches of the
passes side by side (`CacheRows`): each pass's queries attend to its own cache's keys and values,
and its fresh ones are written into it (the products of the layers run once for the batch; the
attention once per pass and layer on a CPU, where infill's C attention reads each cache where it
is, and once per layer elsewhere, over the caches laid one after another with each query masked
to its own: infill.models.native.model, `attend_packed`).

Each pass keeps its own cache object (a request may hold it across passes and requests: the
language server's kept context, infill.engine.kept_context): a refresh copies its rows out of the
batch's, a span pass writes into it directly.

The padded keys of full and refresh passes change nothing in exact arithmetic (their attention
weights are 0), but the attention's sums run over another length, so a row's logits may differ
from its own call's in the last bits (about 1e-5 on the shipped model's logits;
tests/models/test_batched_forward.py checks every family's rows against their own calls, argmax
included). In bfloat16 such a difference can move a number's rounding, so the batching driver
gives whole canvases of different lengths forwards of their own (infill.engine.batching,
`forward_key`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from infill.models.base import Pass
from infill.models.native.model import CacheRows, at_positions

FullForward = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]
"""(ids (R, W), key_mask (R, W) or None) -> logits (R, W, vocab)."""
ForwardAt = Callable[..., torch.Tensor]
"""(ids (R, W), positions (R, P), cache, refresh, key_mask) -> logits (R, P, vocab); for packed
span passes (CacheRows caches) ids (1, N) are the tokens themselves and positions (1, N) theirs."""


@dataclass(frozen=True)
class Layout:
    """Where each pass's rows sit in the batch."""

    starts: list[int]  # each pass's first row
    lengths: list[int]  # each pass's canvas length
    width: int  # the longest

    def rows(self, index: int, passes: list[Pass]) -> slice:
        return slice(self.starts[index], self.starts[index] + passes[index].rows)


def run_batch(passes: list[Pass], device: torch.device, full: FullForward, at: ForwardAt,
              new_cache: Callable[[], list]) -> list[torch.Tensor]:  # fmt: skip
    """`passes` (all of one kind) as one forward: each pass's output, on `device`, in the network's
    dtype (the caller turns it into what its own call returns). `full` runs "full" passes,
    `at` the others; `new_cache` makes the batch's cache of a refresh."""
    kinds = {p.kind for p in passes}
    if len(kinds) != 1:
        raise ValueError(f"passes of one kind share a forward, not {sorted(kinds)}")
    kind = kinds.pop()
    if kind == "span":
        return run_packed(passes, device, at)
    layout = lay_out(passes)
    ids = padded_ids(passes, layout).to(device)
    key_mask = None
    if any(length != layout.width for length in layout.lengths):
        key_mask = (torch.arange(layout.width)[None] < row_lengths(passes, layout)[:, None]).to(device)
    if kind == "full":
        out = full(ids, key_mask)
        return [out[layout.rows(i, passes), : layout.lengths[i]] for i in range(len(passes))]
    positions = padded_positions(passes).to(device)
    cache = new_cache()
    out = at(ids, positions, cache, True, key_mask)
    for i, p in enumerate(passes):
        rows, length = layout.rows(i, passes), layout.lengths[i]
        for own, batch in zip(p.cache, cache):
            own.keys = batch.keys[rows, :, :length].clone()
            own.values = batch.values[rows, :, :length].clone()
    return [out[layout.rows(i, passes), : len(p.positions)] for i, p in enumerate(passes)]


def run_packed(passes: list[Pass], device: torch.device, at: ForwardAt) -> list[torch.Tensor]:
    """Span passes as one forward of one row: every pass's tokens at its positions (row by row
    for a pass of several canvases), side by side, none padded; each pass's queries attend to its
    own cache, which takes their fresh keys and values (`CacheRows`)."""
    where = [p.positions.to(device) for p in passes]
    tokens = torch.cat([at_positions(p.ids.to(device), own).reshape(-1) for p, own in zip(passes, where)])
    positions = torch.cat([own.repeat(p.rows) for p, own in zip(passes, where)])
    sizes = [p.rows for p in passes]
    shared: dict = {}  # the layers' attention mask, made once (CacheRows.key_segments)
    caches = [CacheRows(list(layers), sizes, where, shared) for layers in zip(*(p.cache for p in passes))]
    out = at(tokens[None], positions[None], caches, False, None)[0]  # (N, vocab)
    outs, start = [], 0
    for p in passes:
        count = p.rows * len(p.positions)
        outs.append(out[start : start + count].view(p.rows, len(p.positions), -1))
        start += count
    return outs


def lay_out(passes: list[Pass]) -> Layout:
    starts, row = [], 0
    for p in passes:
        starts.append(row)
        row += p.rows
    lengths = [p.ids.shape[1] for p in passes]
    return Layout(starts, lengths, max(lengths))


def padded_ids(passes: list[Pass], layout: Layout) -> torch.Tensor:
    """(R, W): every pass's rows, right-padded with token 0 (never attended)."""
    rows = sum(p.rows for p in passes)
    ids = torch.zeros(rows, layout.width, dtype=passes[0].ids.dtype)
    for i, p in enumerate(passes):
        ids[layout.rows(i, passes), : layout.lengths[i]] = p.ids.cpu()
    return ids


def row_lengths(passes: list[Pass], layout: Layout) -> torch.Tensor:
    """(R,): each row's canvas length."""
    return torch.tensor([length for p, length in zip(passes, layout.lengths) for _ in range(p.rows)])


def padded_positions(passes: list[Pass]) -> torch.Tensor:
    """(R, P): each row its pass's positions, a shorter list padded with its last position."""
    most = max(len(p.positions) for p in passes)
    rows = []
    for p in passes:
        own = p.positions.cpu()
        own = torch.cat([own, own[-1:].expand(most - len(own))])
        rows.append(own.expand(p.rows, most))
    return torch.cat(rows)
