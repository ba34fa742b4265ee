"""Block passes (SamplerConfig.block_passes, infill.engine.sampler): with blocks and a cache, a
cached pass computes only each row's current block and the positions the pass before changed.

Network doubles whose logits at a position do not depend on the others (so a cache is never
stale) check the mechanics: which positions each pass computes, and that the tokens are those of
passes over the whole span. The shipped model checks that a real fill's passes shrink to a block
and that its fills still come out whole."""

from __future__ import annotations

import pytest
import torch
from plans import CountingPositions
from samples import COUNTER_MODULE, LEAKS
from test_unmasking import MASK, TableDenoiser, rising_confidence_problem

from infill.engine.results import Step
from infill.engine.sampler import sample
from infill.errors import InputError
from infill.models.native import load_backend
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.spans import line_span


class CachedTable(TableDenoiser):
    """The table double with the cached interface: each call computes `positions` alone and
    records them (its logits never depend on the cache, so skipping positions loses nothing)."""

    def __init__(self, table: torch.Tensor, null_id: int | None = None):
        super().__init__(table, null_id)
        self.computed: list[list[int]] = []

    def new_cache(self) -> dict:
        return {}

    def cached_logits(self, ids: torch.Tensor, positions: torch.Tensor, cache, refresh: bool, predicted=None):
        self.computed.append(positions.tolist())
        return self.logits(ids)[:, positions if predicted is None else positions[predicted]]


def cached_problem(length: int, start: int, count: int):
    plain, canvas, editable = rising_confidence_problem(length, start, count)
    return CachedTable(plain.table), canvas, editable


def committed(steps: list[Step]) -> list[list[int]]:
    return [step.committed[0].nonzero().flatten().tolist() for step in steps]


def test_a_pass_computes_the_current_block_and_what_the_pass_before_changed():
    denoiser, canvas, editable = cached_problem(length=16, start=2, count=12)
    steps: list[Step] = []
    config = SamplerConfig(steps=6, block_length=4, block_passes=True, commit_threshold=1.0,
                           remask_threshold=0.0, cache_refresh=100)  # fmt: skip

    result = sample(denoiser, canvas, editable, config, on_step=steps.append)

    # Blocks 2-5, 6-9, 10-13, two passes each, the rightmost two of a block first (as without
    # block passes: test_unmasking). The first pass computes the span; after it, a pass computes
    # its block and the two positions the pass before committed (their final tokens' keys).
    assert committed(steps) == [[4, 5], [2, 3], [8, 9], [6, 7], [12, 13], [10, 11]]
    assert denoiser.computed == [
        list(range(2, 14)),
        [2, 3, 4, 5],
        [2, 3, 6, 7, 8, 9],
        [6, 7, 8, 9],
        [6, 7, 10, 11, 12, 13],
        [10, 11, 12, 13],
    ]
    assert (result.ids[0, 2:14] == 0).all()


@pytest.mark.parametrize("order", ["confidence", "entropy", "margin", "left-to-right"])
def test_block_passes_give_the_tokens_of_passes_over_the_whole_span(order):
    """Where the cache is never stale (the double), computing less changes no token."""
    whole, canvas, editable = cached_problem(length=24, start=3, count=17)
    focused = CachedTable(whole.table)
    config = SamplerConfig(steps=9, block_length=5, order=order, commit_threshold=0.8, cache_refresh=100)

    a = sample(whole, canvas, editable, config)
    b = sample(focused, canvas, editable, SamplerConfig(**{**config.__dict__, "block_passes": True}))

    assert torch.equal(a.ids, b.ids)
    assert a.stats.forward_passes == b.stats.forward_passes
    assert sum(map(len, focused.computed)) < sum(map(len, whole.computed))


def test_a_deadline_mid_block_makes_the_next_pass_compute_and_commit_every_masked_position():
    denoiser, canvas, editable = cached_problem(length=16, start=2, count=12)
    passes = []
    config = SamplerConfig(steps=12, block_length=4, block_passes=True, commit_threshold=1.0,
                           cache_refresh=100)  # fmt: skip

    finish_now = lambda: len(passes) >= 2  # noqa: E731  (a deadline that passes after two passes)
    result = sample(denoiser, canvas, editable, config, on_step=passes.append, finish_now=finish_now)

    assert len(passes) == 3  # the deadline was seen before the third pass: that pass was the last
    assert set(range(2, 14)) <= set(denoiser.computed[-1])  # it computed every masked position
    assert not (result.ids == MASK).any()


def test_block_passes_change_nothing_without_a_cache_or_without_caching():
    _, canvas, editable = rising_confidence_problem(length=16, start=2, count=12)
    plain = rising_confidence_problem(length=16, start=2, count=12)[0]
    config = SamplerConfig(steps=6, block_length=4, block_passes=True, commit_threshold=1.0)
    alone = sample(plain, canvas, editable, config)
    assert torch.equal(alone.ids[0, 2:14], torch.zeros(12, dtype=torch.long))

    cached = cached_problem(length=16, start=2, count=12)[0]
    exact = sample(cached, canvas, editable, SamplerConfig(**{**config.__dict__, "cache_refresh": 1}))
    assert cached.computed == [] and len(cached.inputs) == 6  # every pass exact, over the canvas
    assert torch.equal(exact.ids[0, 2:14], torch.zeros(12, dtype=torch.long))


def test_block_passes_need_blocks():
    with pytest.raises(InputError, match="block_length"):
        SamplerConfig(block_passes=True)


# ----------------------------------------------------------------------------- the shipped model


@pytest.mark.slow
def test_a_real_fill_with_block_passes_computes_a_block_or_two_a_pass_and_comes_out_whole():
    text = COUNTER_MODULE
    span = line_span(text, 11, 13)  # mean's loop and return: three lines of a body
    document = document_from_bytes(text.encode())
    counting = CountingPositions(load_backend())
    sampler = SamplerConfig(steps=24, block_length=4, block_passes=True)
    result = infill(counting, document, [span], InfillOptions(sampler=sampler, retries=0, token_edits=0,
                                                              fresh_fills=0, recall=False))  # fmt: skip

    assert len(counting.computed) >= 4
    first_pass, padding_pass, middle = counting.computed[0], counting.computed[1], counting.computed[2:-1]
    assert first_pass > 12  # the span's whole budget
    assert padding_pass <= first_pass  # block 0, and the padding the first pass decided (its <null> keys)
    assert max(middle) <= 2 * 4  # a block, and what the pass before committed in the block before
    [filled] = result.spans
    assert filled.new_text.strip()
    assert not any(leak in filled.new_text for leak in LEAKS)
    assert result.stats.computed == sum(counting.computed)  # what --stats prints


def test_the_stats_line_says_how_many_positions_the_passes_computed():
    from infill.cli import stats_line
    from infill.engine.pipeline import RequestStats

    stats = RequestStats(steps=4, forward_passes=4, tokens=16, revisions=0, seconds=0.05, converged=True,
                         computed=28)  # fmt: skip
    assert "(4 forward passes computing 28 positions, 0 revisions)" in stats_line(stats, "1 span(s)")
    unknown = RequestStats(steps=4, forward_passes=4, tokens=16, revisions=0, seconds=0.05, converged=True)
    assert "(4 forward passes, 0 revisions)" in stats_line(unknown, "1 span(s)")  # a loop that does not count
