"""Tests for infill.engine.sampler: the mechanics of the diffusion sampler, driven by an oracle network."""

from __future__ import annotations

import pytest
import torch

from infill.engine.prediction import token_probabilities
from infill.engine.results import Step
from infill.engine.sampler import sample, step_cap
from infill.engine.unmasking import rule_scores
from infill.errors import Cancelled, InputError
from infill.options import MULTI_LINE_STEPS, ONE_LINE_STEPS, SamplerConfig


def ordinary_ids(tokenizer, count: int, seed: int) -> torch.Tensor:
    """`count` random ids that are neither special nor <null>."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(5, tokenizer.vocab_size, (count,), generator=generator)


def problem(tokenizer, length: int = 28, start: int = 4, count: int = 20, seed: int = 0):
    """A one-row canvas with `count` editable positions from `start`, and the answer for them.

    The canvas holds arbitrary ids at the editable positions (the sampler must mask them itself).
    """
    canvas = ordinary_ids(tokenizer, length, seed)
    target = canvas.clone()
    target[start : start + count] = ordinary_ids(tokenizer, count, seed + 1000)
    editable = torch.zeros(length, dtype=torch.bool)
    editable[start : start + count] = True
    return canvas[None], editable[None], target


def run(denoiser, canvas, editable, **config):
    steps: list[Step] = []
    result = sample(denoiser, canvas, editable, SamplerConfig(**config), on_step=steps.append)
    return result, steps


def test_oracle_gives_the_sampler_the_configured_probabilities(tiny_tokenizer, make_oracle):
    canvas, editable, target = problem(tiny_tokenizer)
    confidence = torch.linspace(0.05, 0.999, canvas.shape[1])
    oracle = make_oracle(target, confidence=confidence)

    probs = token_probabilities(oracle, canvas)

    picked = probs[0].gather(-1, target[:, None]).squeeze(-1)
    assert torch.allclose(picked, confidence, atol=1e-4)
    assert torch.equal(probs[0].argmax(-1), target)


@pytest.mark.parametrize(
    ("commit_threshold", "committed_per_step"),
    [(0.99, [4, 4, 4, 4, 4]), (0.3, [20])],
    ids=["high-threshold-quota", "low-threshold-all-at-once"],
)
def test_commits_several_tokens_per_step(tiny_tokenizer, make_oracle, commit_threshold, committed_per_step):
    canvas, editable, target = problem(tiny_tokenizer, count=20)
    oracle = make_oracle(target, confidence=0.5)

    result, steps = run(oracle, canvas, editable, steps=5, commit_threshold=commit_threshold)

    committed = [int(step.committed.sum()) for step in steps if step.committed.any()]
    assert committed == committed_per_step  # 20 positions, 5 passes: at least 4 a pass
    assert [step.masked_left for step in steps][: len(committed)] == [
        20 - sum(committed[: i + 1]) for i in range(len(committed))
    ]
    assert torch.equal(result.ids[0], target)
    assert result.stats.tokens == 20


def test_commits_the_most_confident_positions_first(tiny_tokenizer, make_oracle):
    canvas, editable, target = problem(tiny_tokenizer, count=16)
    confidence = torch.ones(canvas.shape[1])
    shuffled = torch.randperm(16, generator=torch.Generator().manual_seed(3))
    confidence[4:20] = 0.3 + 0.02 * shuffled  # distinct, all below the threshold
    oracle = make_oracle(target, confidence=confidence)

    result, steps = run(oracle, canvas, editable, steps=4, commit_threshold=0.9)

    order = (4 + torch.argsort(confidence[4:20], descending=True)).tolist()
    for index, step in enumerate(steps[:4]):
        assert set(step.committed[0].nonzero().flatten().tolist()) == set(order[4 * index : 4 * index + 4])
    assert torch.equal(result.ids[0], target)


def test_left_to_right_order_commits_the_first_masked_positions_whatever_their_confidence(
    tiny_tokenizer, make_oracle
):
    canvas, editable, target = problem(tiny_tokenizer, count=16)
    confidence = torch.ones(canvas.shape[1])
    shuffled = torch.randperm(16, generator=torch.Generator().manual_seed(3))
    confidence[4:20] = 0.3 + 0.02 * shuffled  # distinct, all below the threshold
    oracle = make_oracle(target, confidence=confidence)

    result, steps = run(oracle, canvas, editable, steps=4, commit_threshold=0.9, order="left-to-right")

    for index, step in enumerate(steps[:4]):
        assert step.committed[0].nonzero().flatten().tolist() == list(range(4 + 4 * index, 8 + 4 * index))
    assert torch.equal(result.ids[0], target)


def order_score(probs: torch.Tensor, picked_p: torch.Tensor, order: str) -> torch.Tensor:
    """(B, P), higher first: which positions a pass commits first under `order`, the most likely
    tokens picked (`picked_p`: their probability)."""
    return rule_scores(order, probs, probs.argmax(-1), picked_p)


def test_margin_order_prefers_a_clear_winner_to_a_likelier_but_contested_token():
    probs = torch.tensor([[[0.50, 0.45, 0.05], [0.45, 0.30, 0.25], [0.34, 0.33, 0.33]]])
    picked_p = probs.max(-1).values

    def ranked(order: str) -> list[int]:
        return order_score(probs, picked_p, order)[0].argsort(descending=True).tolist()

    assert ranked("confidence") == [0, 1, 2]
    assert ranked("margin") == [1, 0, 2]
    assert torch.allclose(order_score(probs, picked_p, "margin"), torch.tensor([[0.05, 0.15, 0.01]]))
    assert ranked("left-to-right") == [0, 1, 2]


def test_an_unknown_order_is_refused():
    with pytest.raises(InputError, match="order must be one of"):
        SamplerConfig(order="random")


def test_every_position_above_the_threshold_is_committed_beyond_the_quota(tiny_tokenizer, make_oracle):
    canvas, editable, target = problem(tiny_tokenizer, count=20)
    confidence = torch.full((canvas.shape[1],), 0.5)
    sure = [5, 6, 9, 12, 13, 17, 18, 22]
    confidence[sure] = 0.95
    oracle = make_oracle(target, confidence=confidence)

    _, steps = run(oracle, canvas, editable, steps=10, commit_threshold=0.9)

    # The quota of the first pass is 2 (20 positions, 10 passes); all 8 sure ones go in at once.
    assert steps[0].committed[0].nonzero().flatten().tolist() == sure


@pytest.mark.parametrize("disbelieve", [False, True], ids=["oracle", "disbelieving-oracle"])
def test_context_positions_never_change(tiny_tokenizer, make_oracle, disbelieve):
    canvas, editable, target = problem(tiny_tokenizer, length=30, start=6, count=12)
    # The oracle would rewrite the context if it could: its answer there differs from the canvas.
    target[~editable[0]] = ordinary_ids(tiny_tokenizer, 18, seed=99)
    assert not torch.equal(target[~editable[0]], canvas[0, ~editable[0]])
    oracle = make_oracle(target, confidence=0.95, disbelieve=disbelieve)

    result, steps = run(oracle, canvas, editable, steps=8)

    context = ~editable
    for step in steps:
        assert torch.equal(step.ids[context], canvas[context])
        assert not (step.committed & context).any()
        assert not (step.remasked & context).any()
    assert torch.equal(result.ids[context], canvas[context])
    assert torch.all(result.confidence[context] == 1)
    # The editable positions were masked first, not kept from the canvas.
    assert torch.equal(oracle.inputs[0][editable], torch.full((12,), tiny_tokenizer.mask_id))


def test_confident_oracle_converges_long_before_the_cap(tiny_tokenizer, make_oracle):
    canvas, editable, target = problem(tiny_tokenizer, count=20)
    oracle = make_oracle(target, confidence=0.99)

    result, steps = run(oracle, canvas, editable, steps=32, commit_threshold=0.9)

    assert torch.equal(result.ids[0], target)
    assert result.stats.converged is True
    assert result.stats.forward_passes == oracle.calls == len(steps) == 2
    last, before = steps[-1], steps[-2]
    assert not last.committed.any() and not last.remasked.any() and last.masked_left == 0
    assert torch.equal(last.ids, before.ids)
    assert torch.allclose(result.confidence[editable], torch.tensor(0.99), atol=1e-4)


def test_step_cap_is_honoured(tiny_tokenizer, make_oracle):
    canvas, editable, target = problem(tiny_tokenizer, count=20)
    oracle = make_oracle(target, confidence=0.3)  # never above the commit threshold

    result, steps = run(oracle, canvas, editable, steps=4, commit_threshold=0.9)

    assert result.stats.forward_passes == result.stats.steps == oracle.calls == len(steps) == 4
    assert [step.masked_left for step in steps] == [15, 10, 5, 0]
    assert not (result.ids == tiny_tokenizer.mask_id).any()
    assert torch.equal(result.ids[0], target)
    assert result.stats.converged is False
    assert torch.allclose(result.confidence[editable], torch.tensor(0.3), atol=1e-4)
    assert torch.all(result.confidence[~editable] == 1)


@pytest.mark.parametrize("steps", [3, 4], ids=["last-pass-commits", "last-pass-would-remask"])
def test_step_cap_fills_every_position_even_when_the_model_keeps_disbelieving(
    tiny_tokenizer, make_oracle, steps
):
    canvas, editable, target = problem(tiny_tokenizer, count=10)
    oracle = make_oracle(target, confidence=0.99, disbelieve=True)

    result, trace = run(oracle, canvas, editable, steps=steps, max_revisions=5)

    assert oracle.calls == result.stats.forward_passes == steps
    assert trace[1].remasked[editable].all()  # the second pass took everything back
    assert not trace[-1].remasked.any()  # the last pass may not re-mask
    assert not (result.ids == tiny_tokenizer.mask_id).any()
    assert torch.equal(result.ids[0], target)
    if steps == 3:
        assert result.stats.converged is False  # the last pass still had to commit


def test_wrong_tokens_are_remasked_and_corrected(tiny_tokenizer, make_oracle):
    canvas, editable, target = problem(tiny_tokenizer, count=12)
    wrong_positions = [6, 11]
    wrong = {p: int(target[(p + 1) % len(target)]) for p in wrong_positions}
    assert all(wrong[p] != int(target[p]) for p in wrong_positions)
    confidence = torch.full((canvas.shape[1],), 0.5)
    confidence[wrong_positions] = 0.99  # confidently wrong: committed in the first pass
    oracle = make_oracle(target, confidence=confidence, wrong=wrong, wrong_until=3)

    result, steps = run(oracle, canvas, editable, steps=20, commit_threshold=0.9, remask_threshold=0.2)

    assert all(int(steps[0].ids[0, p]) == wrong[p] for p in wrong_positions)
    remasked = torch.stack([step.remasked[0] for step in steps]).sum(0)
    assert remasked.nonzero().flatten().tolist() == wrong_positions
    assert remasked[wrong_positions].tolist() == [1, 1]
    assert result.stats.revisions == 2
    assert torch.equal(result.ids[0], target)
    assert result.stats.converged is True
    assert result.stats.forward_passes < 20


@pytest.mark.parametrize("max_revisions", [0, 1, 3])
def test_max_revisions_bounds_self_correction(tiny_tokenizer, make_oracle, max_revisions):
    canvas, editable, target = problem(tiny_tokenizer, count=8)
    oracle = make_oracle(target, confidence=0.99, disbelieve=True)  # never believes a committed token

    result, steps = run(oracle, canvas, editable, steps=40, max_revisions=max_revisions)

    per_position = torch.stack([step.remasked[0] for step in steps]).sum(0)
    assert per_position[editable[0]].tolist() == [max_revisions] * 8
    assert result.stats.revisions == 8 * max_revisions
    assert result.stats.converged is True
    assert result.stats.forward_passes == oracle.calls < 40
    assert not (result.ids == tiny_tokenizer.mask_id).any()


@pytest.mark.parametrize("cancel_after", [0, 1, 3])
def test_cancelled_stops_within_one_step(tiny_tokenizer, make_oracle, cancel_after):
    canvas, editable, target = problem(tiny_tokenizer, count=20)
    oracle = make_oracle(target, confidence=0.3)
    flag = {"cancel": cancel_after == 0}

    def on_step(step: Step) -> None:
        if step.index + 1 == cancel_after:
            flag["cancel"] = True

    config = SamplerConfig(steps=10)
    with pytest.raises(Cancelled):
        sample(oracle, canvas, editable, config, on_step=on_step, cancelled=lambda: flag["cancel"])
    assert oracle.calls == cancel_after


def test_a_batch_of_two_rows_is_sampled_together(tiny_tokenizer, make_oracle):
    canvas_a, editable_a, target_a = problem(tiny_tokenizer, length=30, start=4, count=20, seed=1)
    canvas_b, editable_b, target_b = problem(tiny_tokenizer, length=30, start=10, count=8, seed=2)
    canvas = torch.cat([canvas_a, canvas_b])
    editable = torch.cat([editable_a, editable_b])
    targets = torch.stack([target_a, target_b])
    oracle = make_oracle(targets, confidence=0.5)

    result, steps = run(oracle, canvas, editable, steps=5, commit_threshold=0.9)

    assert torch.equal(result.ids, targets)
    assert all(batch.shape == (2, 30) for batch in oracle.inputs)
    assert result.stats.forward_passes == oracle.calls == 5
    # Each row has its own quota: 20 positions -> 4 a pass, 8 positions -> 2 a pass.
    assert steps[0].committed.sum(1).tolist() == [4, 2]
    assert result.stats.tokens == 20  # per canvas: the first row's count


def test_temperature_sampling_is_reproducible_with_a_seed(tiny_tokenizer, make_oracle):
    canvas, editable, target = problem(tiny_tokenizer, count=20)

    def sampled(seed: int) -> torch.Tensor:
        oracle = make_oracle(target, confidence=0.2)
        config = SamplerConfig(steps=6, temperature=1.0, seed=seed)
        return sample(oracle, canvas, editable, config).ids

    first, again, other = sampled(7), sampled(7), sampled(8)

    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert not torch.equal(first[0], target)  # it really sampled instead of taking the argmax
    assert torch.equal(first[~editable], canvas[~editable])
    special = torch.tensor(sorted(make_oracle(target).special_ids))
    assert not torch.isin(first, special).any()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_special_ids_are_never_produced(tiny_tokenizer, make_oracle, temperature):
    canvas, editable, target = problem(tiny_tokenizer, count=20)
    t = tiny_tokenizer
    favoured = [t.mask_id, t.pad_id, t.unk_id, t.eos_id]
    oracle = make_oracle(target, confidence=0.9, favour=favoured)
    assert (oracle.logits(canvas).argmax(-1) == t.mask_id).all()  # the network prefers <mask> everywhere

    result, steps = run(oracle, canvas, editable, steps=6, temperature=temperature, seed=0)

    for step in steps:
        assert not torch.isin(step.ids[editable], torch.tensor(favoured[1:])).any()
    assert not torch.isin(result.ids[editable], torch.tensor(favoured)).any()
    if temperature == 0:
        assert torch.equal(result.ids[0], target)


def test_special_ids_are_never_sampled_even_at_a_high_temperature(tiny_tokenizer, make_oracle):
    canvas, editable, target = problem(tiny_tokenizer, length=400, start=5, count=390)
    oracle = make_oracle(target, confidence=0.5)
    special = torch.tensor(sorted(oracle.special_ids))

    result, _ = run(oracle, canvas, editable, steps=1, temperature=1000.0, seed=0)

    assert not torch.isin(result.ids[editable], special).any()


def test_converged_is_false_when_only_the_step_cap_prevented_a_revision(tiny_tokenizer, make_oracle):
    canvas, editable, target = problem(tiny_tokenizer, count=10)
    oracle = make_oracle(target, confidence=0.99, disbelieve=True)

    result, trace = run(oracle, canvas, editable, steps=2, max_revisions=5)

    # The second (last) pass found every committed token improbable but was not allowed to re-mask.
    probs = token_probabilities(oracle, trace[-1].ids)
    believed = probs[0].gather(-1, trace[-1].ids[0, :, None]).squeeze(-1)
    assert (believed[editable[0]] < 0.2).all()
    assert result.stats.converged is False


@pytest.mark.parametrize("nulls_from_end", [True, False])
def test_nulls_grow_from_the_end_of_a_span(tiny_tokenizer, make_oracle, nulls_from_end):
    """A null in the middle of a span would tell the model the content is over: nulls are only
    committed at the span's end or just before another null, unless the rule is switched off."""
    canvas, editable, target = problem(tiny_tokenizer, count=12)
    null = tiny_tokenizer.null_id
    target[6] = null  # the model is sure of a null in the middle, before more content
    target[12:16] = null  # and of the padding at the end
    oracle = make_oracle(target, confidence=0.99)

    result, trace = run(oracle, canvas, editable, steps=12, length="free", nulls_from_end=nulls_from_end)

    def null_before_content(ids) -> bool:
        span = ids[0, 4:16].tolist()
        return any(a == null and b != null for a, b in zip(span, span[1:]))

    assert any(null_before_content(step.ids) for step in trace) is not nulls_from_end
    assert (result.ids[0, 12:16] == null).all()  # the padding is still found
    assert trace[0].committed[0, 12:16].all()  # the null run that ends the span commits at once
    assert not (result.ids == tiny_tokenizer.mask_id).any()


def test_first_pass_fixes_each_span_length_at_the_expected_count_of_content_tokens(
    tiny_tokenizer, make_oracle
):
    """length="first-pass": after the first pass each span keeps as many leading positions for
    content as it has positions where P(null) < 0.5 (no null may go there); the rest of its budget
    is padding at once."""
    null = tiny_tokenizer.null_id
    canvas, editable, target = problem(tiny_tokenizer, length=40, start=4, count=30)
    editable[0, 16:20] = False  # two spans: positions 4..15 and 20..33
    target[10:16] = null  # span 1: 6 content tokens, then padding the model is 0.99 sure of
    target[7] = null  # ...and a null the model believes in, inside the content
    target[28:34] = null  # span 2: 8 content tokens, then padding, 3 positions of it in doubt
    confidence = torch.full((40,), 0.99)
    confidence[28:31] = 0.4
    oracle = make_oracle(target, confidence=confidence)

    result, trace = run(oracle, canvas, editable, steps=8)

    ids = result.ids[0]
    # Span 1: 5 positions where null is unlikely; span 2: 8 + the 3 in doubt = 11.
    assert (ids[4:9] != null).all() and (ids[9:16] == null).all()
    assert (ids[20:31] != null).all() and (ids[31:34] == null).all()
    assert trace[0].committed[0, 9:16].all() and trace[0].committed[0, 31:34].all()
    assert torch.equal(ids[20:28], target[20:28])  # content the oracle knows is kept
    assert not (result.ids == tiny_tokenizer.mask_id).any()
    assert torch.equal(ids[~editable[0]], canvas[0][~editable[0]])  # context untouched


@pytest.mark.parametrize(("scale", "kept"), [(1.0, 6), (0.5, 3), (0.1, 1), (3.0, 12)])
def test_length_scale_shortens_or_lengthens_the_decided_length_within_the_budget(
    tiny_tokenizer, make_oracle, scale, kept
):
    null = tiny_tokenizer.null_id
    canvas, editable, target = problem(tiny_tokenizer, length=20, start=4, count=12)
    target[10:16] = null  # 6 content tokens, then padding
    oracle = make_oracle(target)

    result, _ = run(oracle, canvas, editable, steps=8, length_scale=scale)

    ids = result.ids[0]
    assert (ids[4 : 4 + kept] != null).all() and (ids[4 + kept : 16] == null).all()
    assert not (result.ids == tiny_tokenizer.mask_id).any()


def test_a_length_scale_of_zero_is_refused():
    with pytest.raises(InputError, match="length_scale"):
        SamplerConfig(length_scale=0)


@pytest.mark.parametrize(
    ("texts", "cap"),
    [
        (["x = 1"], ONE_LINE_STEPS),  # a line
        ([""], ONE_LINE_STEPS),  # an insertion point (inline completion)
        (["x = 1", "y = 2"], ONE_LINE_STEPS),  # several one-line spans
        (["if x:\n    y = 2"], MULTI_LINE_STEPS),
        (["x = 1", "a\r\nb"], MULTI_LINE_STEPS),  # one span of several lines is enough
    ],
)
def test_the_default_step_cap_follows_the_spans_and_a_set_one_is_kept(texts, cap):
    assert step_cap(SamplerConfig(), texts).steps == cap
    assert step_cap(SamplerConfig(steps=7), texts).steps == 7
    assert ONE_LINE_STEPS < MULTI_LINE_STEPS


def test_one_line_spans_get_no_refresh_pass_after_the_first():
    from infill.engine.sampler import step_cap
    from infill.options import MULTI_LINE_STEPS, ONE_LINE_STEPS, SamplerConfig

    one = step_cap(SamplerConfig(), ["x = 1"])
    assert (one.steps, one.cache_refresh) == (ONE_LINE_STEPS, ONE_LINE_STEPS)  # the first pass only
    several = step_cap(SamplerConfig(), ["x = 1\ny = 2"])
    assert (several.steps, several.cache_refresh) == (MULTI_LINE_STEPS, SamplerConfig.cache_refresh)
    assert step_cap(SamplerConfig(cache_refresh=4), ["x = 1"]).cache_refresh == 4  # as the user set it
