"""Tests for the unmasking rules (infill.engine.unmasking) and blockwise decoding in the sampler loop,
driven by denoisers whose distributions the test sets (network doubles)."""

from __future__ import annotations

import math

import pytest
import torch

from infill.engine.results import Step
from infill.engine.sampler import sample
from infill.engine.unmasking import rule_scores, sampling_distribution
from infill.errors import InputError
from infill.options import ORDERS, SamplerConfig

VOCAB = 11
MASK = 10  # the one special id; ids 0..9 are ordinary tokens


class TableDenoiser:
    """A network double: at position i it returns log(table[i]) (the test writes the table), the
    same for every row and every step; records the batches it saw."""

    def __init__(self, table: torch.Tensor, null_id: int | None = None):
        self.table = table  # (L, VOCAB) probabilities (0 on MASK)
        self.mask_id = MASK
        self.null_id = null_id
        self.special_ids = frozenset({MASK})
        self.context_length = 512
        self.inputs: list[torch.Tensor] = []

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        self.inputs.append(ids.clone())
        logits = self.table.clamp_min(1e-30).log()
        return logits.expand(ids.size(0), -1, -1).clone()


def dist(*probs: float) -> torch.Tensor:
    """A distribution over the VOCAB ids: the given probabilities for ids 0, 1, ..., the rest 0."""
    row = torch.zeros(VOCAB)
    row[: len(probs)] = torch.tensor(probs)
    assert math.isclose(float(row.sum()), 1.0, abs_tol=1e-6)
    return row


# Three positions whose distributions each rule ranks differently:
LOW_ENTROPY = dist(0.5, 0.5)  # entropy ln 2 = 0.69 (lowest), top-1 0.5 (lowest), margin 0
HIGH_TOP1 = dist(0.6, 0.35, 0.05)  # top-1 0.6 (highest), margin 0.25, entropy 0.82
WIDE_MARGIN = dist(0.55, *[0.05] * 9)  # margin 0.5 (widest), top-1 0.55, entropy 1.68


def three_way(order: str) -> tuple[TableDenoiser, torch.Tensor, torch.Tensor]:
    context = dist(0.0, 0.0, 0.0, 1.0)
    table = torch.stack([context, LOW_ENTROPY, HIGH_TOP1, WIDE_MARGIN, context])
    canvas = torch.tensor([[3, MASK, MASK, MASK, 3]])
    editable = torch.tensor([[False, True, True, True, False]])
    return TableDenoiser(table), canvas, editable


@pytest.mark.parametrize(
    ("order", "first"),
    [
        ("entropy", 1),
        ("maskgit_plus", 2),
        ("low_confidence", 2),
        ("confidence", 2),
        ("topk_margin", 3),
        ("margin", 3),
        ("left-to-right", 1),
    ],
)
def test_each_rule_commits_the_position_it_ranks_first(order, first):
    denoiser, canvas, editable = three_way(order)
    steps: list[Step] = []
    config = SamplerConfig(steps=3, order=order, commit_threshold=1.0, remask_threshold=0.0)

    result = sample(denoiser, canvas, editable, config, on_step=steps.append)

    assert steps[0].committed[0].nonzero().flatten().tolist() == [first]
    assert result.ids[0, 1:4].tolist() == [0, 0, 0]  # the argmax everywhere (temperature 0)
    assert torch.equal(result.ids[0, [0, 4]], canvas[0, [0, 4]])


def test_rule_scores_follow_the_published_definitions():
    probs = torch.stack([LOW_ENTROPY, HIGH_TOP1, WIDE_MARGIN])[None]  # (1, 3, VOCAB)
    picked = probs.argmax(-1)
    model_p = probs.max(-1).values

    def entropy(p: torch.Tensor) -> float:
        return -sum(float(q) * math.log(float(q)) for q in p if q > 0)

    assert torch.allclose(
        rule_scores("maskgit_plus", probs, picked, model_p), torch.tensor([[0.5, 0.6, 0.55]])
    )
    assert torch.allclose(
        rule_scores("topk_margin", probs, picked, model_p), torch.tensor([[0.0, 0.25, 0.5]])
    )
    expected = torch.tensor([[-entropy(LOW_ENTROPY), -entropy(HIGH_TOP1), -entropy(WIDE_MARGIN)]])
    assert torch.allclose(rule_scores("entropy", probs, picked, model_p), expected)


def test_maskgit_plus_scores_the_sampling_distribution_and_low_confidence_the_models():
    """Dream's maskgit_plus scores the token under the distribution it was drawn from (after
    top-p); LLaDA's low_confidence under the model's own softmax."""
    probs = HIGH_TOP1[None, None]  # 0.6, 0.35, 0.05
    shaped = sampling_distribution(probs, 0.0, top_p=0.9)  # keeps 0.6 and 0.35 (0.95 >= 0.9)
    assert torch.allclose(shaped[0, 0, :3], torch.tensor([0.6, 0.35, 0.0]) / 0.95)
    picked = torch.tensor([[0]])
    assert torch.allclose(
        rule_scores("maskgit_plus", shaped, picked, torch.tensor([[0.6]])), torch.tensor(0.6 / 0.95)
    )
    assert torch.allclose(
        rule_scores("low_confidence", shaped, picked, torch.tensor([[0.6]])), torch.tensor(0.6)
    )


def test_top_p_keeps_the_smallest_set_reaching_p_and_top_k_the_k_most_likely():
    probs = WIDE_MARGIN[None, None]  # 0.55, then nine of 0.05
    assert int((sampling_distribution(probs, 0.0, top_p=0.5) > 0).sum()) == 1  # 0.55 alone reaches 0.5
    assert int((sampling_distribution(probs, 0.0, top_p=0.58) > 0).sum()) == 2  # 0.55 + 0.05 = 0.6
    assert int((sampling_distribution(probs, 0.0, top_p=0.62) > 0).sum()) == 3  # 0.6 + 0.05
    kept = sampling_distribution(HIGH_TOP1[None, None], 0.0, top_k=2)
    assert torch.allclose(kept[0, 0, :3], torch.tensor([0.6, 0.35, 0.0]) / 0.95)
    assert torch.allclose(kept.sum(-1), torch.tensor(1.0))


def test_temperature_sharpens_or_flattens_the_distribution():
    probs = HIGH_TOP1[None, None]
    cold = sampling_distribution(probs, 0.5)[0, 0, :3]
    expected = torch.tensor([0.6, 0.35, 0.05]) ** 2
    assert torch.allclose(cold, expected / expected.sum())
    assert float(sampling_distribution(probs, 2.0)[0, 0, 0]) < 0.6 < float(cold[0])


def test_top_k_one_samples_only_the_most_likely_token_at_any_temperature():
    table = torch.stack([HIGH_TOP1] * 6)
    denoiser = TableDenoiser(table)
    canvas = torch.full((4, 6), MASK)
    editable = torch.ones(4, 6, dtype=torch.bool)
    config = SamplerConfig(steps=3, temperature=5.0, top_k=1, seed=3)
    assert (sample(denoiser, canvas, editable, config).ids == 0).all()
    config = SamplerConfig(steps=3, temperature=5.0, seed=3)  # without it: other tokens too
    assert (sample(denoiser, canvas, editable, config).ids != 0).any()


@pytest.mark.parametrize("name", ["top_p", "top_k", "block_length", "expand_start"])
def test_bad_rule_options_are_refused(name):
    with pytest.raises(InputError, match=name):
        SamplerConfig(**{name: 0})


def test_every_published_name_is_an_order():
    assert {"entropy", "maskgit_plus", "topk_margin", "low_confidence", "confidence", "margin"} <= set(ORDERS)


def rising_confidence_problem(length: int, start: int, count: int):
    """Editable positions whose most likely token (id 0) gets likelier to the right (0.55 ..
    0.95), so every rule without blocks would commit the last ones first."""
    table = torch.zeros(length, VOCAB)
    table[:, 3] = 1.0
    for i, p in enumerate(torch.linspace(0.55, 0.95, count).tolist()):
        table[start + i] = dist(p, 1 - p)
    canvas = torch.full((1, length), 3)
    editable = torch.zeros(1, length, dtype=torch.bool)
    editable[0, start : start + count] = True
    return TableDenoiser(table), canvas, editable


@pytest.mark.parametrize("order", ["confidence", "entropy", "maskgit_plus", "topk_margin"])
def test_blocks_are_decoded_left_to_right_and_never_commit_outside_the_current_block(order):
    denoiser, canvas, editable = rising_confidence_problem(length=16, start=2, count=12)
    steps: list[Step] = []
    config = SamplerConfig(steps=6, block_length=4, order=order, commit_threshold=1.0, remask_threshold=0.0)

    result = sample(denoiser, canvas, editable, config, on_step=steps.append)

    committed = [step.committed[0].nonzero().flatten().tolist() for step in steps]
    # 3 blocks of 4 (positions 2-5, 6-9, 10-13), 2 steps each, 2 positions a step, the likelier
    # (rightmost) of the block first.
    assert committed == [[4, 5], [2, 3], [8, 9], [6, 7], [12, 13], [10, 11]]
    assert (result.ids[0, 2:14] == 0).all()


def test_without_blocks_the_same_problem_commits_across_the_span():
    denoiser, canvas, editable = rising_confidence_problem(length=16, start=2, count=12)
    steps: list[Step] = []
    config = SamplerConfig(steps=6, commit_threshold=1.0, remask_threshold=0.0)
    sample(denoiser, canvas, editable, config, on_step=steps.append)
    assert steps[0].committed[0].nonzero().flatten().tolist() == [12, 13]


def test_the_step_cap_is_split_between_blocks_with_the_remainder_first():
    """10 positions in blocks of 5, 5 steps: block 1 gets steps 0-1 (3 then 2 positions, LLaDA's
    spread), block 2 steps 2-4 (2, 2, 1)."""
    denoiser, canvas, editable = rising_confidence_problem(length=12, start=1, count=10)
    steps: list[Step] = []
    config = SamplerConfig(steps=5, block_length=5, commit_threshold=1.0, remask_threshold=0.0)
    sample(denoiser, canvas, editable, config, on_step=steps.append)
    assert [int(step.committed.sum()) for step in steps] == [3, 2, 2, 2, 1]
    assert all(step.committed[0, 6:].sum() == 0 for step in steps[:2])


def test_threshold_decoding_commits_all_confident_positions_of_the_block_and_at_least_one():
    """Fast-dLLM: with a step cap of at least the span's length, a step commits every masked
    position of its block at least `commit_threshold` sure, or the best one if none is."""
    table = torch.zeros(10, VOCAB)
    table[:, 3] = 1.0
    sure = {1: 0.95, 3: 0.92, 6: 0.97}  # 6 is in the second block: it must wait
    for i in range(1, 9):
        p = sure.get(i, 0.5 + 0.02 * i)
        table[i] = dist(p, 1 - p)
    denoiser = TableDenoiser(table)
    canvas = torch.full((1, 10), 3)
    editable = torch.zeros(1, 10, dtype=torch.bool)
    editable[0, 1:9] = True
    steps: list[Step] = []
    config = SamplerConfig(steps=8, block_length=4, commit_threshold=0.9, remask_threshold=0.0)

    sample(denoiser, canvas, editable, config, on_step=steps.append)

    committed = [step.committed[0].nonzero().flatten().tolist() for step in steps]
    assert committed[0] == [1, 3]  # both sure ones of block 1 (positions 1-4), nothing else
    assert committed[1] == [4]  # then the best of the rest (0.58 beats 0.54), one at a time
    assert committed[2] == [2]
    assert committed[3] == [6]  # block 2 (positions 5-8): the sure one
    assert committed[4:7] == [[8], [7], [5]]  # then the best of the rest, one at a time
    assert len(steps) == 8


@pytest.mark.parametrize("order", ["entropy", "maskgit_plus", "topk_margin", "low_confidence"])
@pytest.mark.parametrize("block_length", [None, 4])
def test_remasking_and_early_stop_work_under_every_rule(tiny_tokenizer, make_oracle, order, block_length):
    generator = torch.Generator().manual_seed(0)
    canvas = torch.randint(5, tiny_tokenizer.vocab_size, (1, 20), generator=generator)
    target = canvas[0].clone()
    target[4:16] = torch.randint(5, tiny_tokenizer.vocab_size, (12,), generator=generator)
    editable = torch.zeros(1, 20, dtype=torch.bool)
    editable[0, 4:16] = True
    wrong = {6: int(target[7])}  # confidently wrong at 6 until at most 3 positions are masked
    confidence = torch.full((20,), 0.5)
    confidence[6] = 0.99
    oracle = make_oracle(target, confidence=confidence, wrong=wrong, wrong_until=3)
    steps: list[Step] = []
    config = SamplerConfig(steps=30, order=order, block_length=block_length, remask_threshold=0.2)

    result = sample(oracle, canvas, editable, config, on_step=steps.append)

    assert int(steps[0].ids[0, 6]) == wrong[6]  # committed in the first pass (0.99 >= 0.9)
    remasked = torch.stack([step.remasked[0] for step in steps]).sum(0)
    assert remasked.nonzero().flatten().tolist() == [6]
    assert torch.equal(result.ids[0], target)
    assert result.stats.converged is True
    assert result.stats.forward_passes < 30  # stopped early, not by the cap
