"""The top candidates of a pass by infill's C routine (infill.engine.top_candidates) are PyTorch's
topk: the same values and indices, largest first, over a 152k-token vocabulary, for passes of 1 to
33 positions and distributions from flat to peaked; among equal values, the lowest indices; with
the switch set, PyTorch's own."""

from __future__ import annotations

import pytest
import torch

from infill.engine import top_candidates
from infill.engine.unmasking import CANDIDATES, candidates

VOCAB = 151_936


@pytest.fixture(scope="module", autouse=True)
def built():
    if top_candidates.build().library is None:
        pytest.skip(f"no C routine here: {top_candidates.build().reason}")


@pytest.mark.parametrize("shape", [(1, 1), (1, 4), (2, 5), (1, 33)])
@pytest.mark.parametrize("spread", [0.3, 3.0, 30.0])  # from nearly flat to one token
def test_the_same_as_topk(shape, spread):
    generator = torch.Generator().manual_seed(sum(shape) + int(10 * spread))
    probs = torch.softmax(torch.randn(*shape, VOCAB, generator=generator) * spread, dim=-1)
    values, indices = top_candidates.top(probs, CANDIDATES)
    assert_topk(probs, values, indices)


def assert_topk(probs: torch.Tensor, values: torch.Tensor, indices: torch.Tensor) -> None:
    """topk's values, each at its index, and topk's indices but where values are equal: there
    each run of equal values in the lowest indices, ascending (topk's order of them is open)."""
    expected = probs.topk(values.shape[-1], dim=-1)
    assert torch.equal(values, expected.values)
    assert torch.equal(probs.gather(-1, indices), values)
    tied = torch.zeros_like(values, dtype=torch.bool)
    tied[..., 1:] |= values[..., 1:] == values[..., :-1]
    tied[..., :-1] |= values[..., 1:] == values[..., :-1]
    assert torch.equal(indices[~tied], expected.indices[~tied])
    same = values[..., 1:] == values[..., :-1]
    assert (indices[..., 1:][same] > indices[..., :-1][same]).all()
    for row, index in zip(probs.reshape(-1, probs.shape[-1]), indices.reshape(-1, indices.shape[-1])):
        last = row[index[-1]]  # no index left out below a kept one of the same value
        assert (row[: index[-1]] == last).sum() <= (row[index] == last).sum()


@pytest.mark.parametrize("k", [1, 5, 9, 40, 1000])
def test_any_number_of_candidates(k):
    """Few (under the floor's sample rank: every value through the heap) or many."""
    probs = torch.softmax(torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(k)) * 3, dim=-1)
    assert_topk(probs, *top_candidates.top(probs, k))


def test_the_sampler_chooses_among_them():
    probs = torch.softmax(torch.randn(1, 6, VOCAB, generator=torch.Generator().manual_seed(1)) * 4, dim=-1)
    choices, vocab = candidates(probs)
    assert torch.equal(vocab, probs.topk(CANDIDATES, dim=-1).indices)
    assert torch.equal(choices, probs.gather(-1, vocab))


def test_equal_values_keep_the_lowest_indices():
    """A row of equal values (too many for the floor: every value through the heap), a row of one
    token and the rest equal, and a row with a run of equal values at the edge of the k kept."""
    probs = torch.full((3, VOCAB), 1.0 / VOCAB)
    probs[1] = 0.0
    probs[1, 7] = 1.0
    probs[2] = torch.linspace(1.0, 0.0, VOCAB)
    probs[2, 200:400] = probs[2, 250]  # 200 equal values across the 256th place
    values, indices = top_candidates.top(probs, CANDIDATES)
    assert_topk(probs, values, indices)
    assert indices[0].tolist() == list(range(CANDIDATES))
    assert indices[1].tolist() == [7, *range(7), *range(8, CANDIDATES)]
    assert indices[2].tolist() == list(range(CANDIDATES))


def test_the_switch_keeps_pytorchs(monkeypatch):
    monkeypatch.setenv(top_candidates.SWITCH, "pytorch")
    top_candidates.build.cache_clear()
    try:
        assert top_candidates.build().library is None
        probs = torch.softmax(torch.randn(2, VOCAB), dim=-1)
        values, indices = top_candidates.top(probs, 8)
        assert torch.equal(indices, probs.topk(8, dim=-1).indices)
    finally:
        top_candidates.build.cache_clear()
