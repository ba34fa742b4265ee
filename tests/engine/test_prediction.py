"""The context cache: span-only passes on cached keys/values (infill.engine.prediction, InfillModel)."""

from __future__ import annotations

import pytest
import torch
from samples import COUNTER_MODULE

from infill.bench import cli as bench
from infill.engine.prediction import CanvasPredictor, allowed_softmax
from infill.engine.sampler import sample
from infill.errors import InputError
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.spans import line_span


class NoCache:
    """The same network without the caching methods: every pass runs over the whole canvas."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        if name in ("cached_logits", "new_cache"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def canvas_of(backend, length: int = 96, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(10, backend.tokenizer.vocab_size, (2, length), generator=generator)


def test_a_refresh_pass_and_a_cached_pass_on_the_same_canvas_equal_the_full_pass(tiny_backend):
    ids = canvas_of(tiny_backend)
    positions = torch.arange(30, 50)
    full = tiny_backend.logits(ids)[:, positions]
    cache = tiny_backend.new_cache()

    refreshed = tiny_backend.cached_logits(ids, positions, cache, refresh=True)
    cached = tiny_backend.cached_logits(ids, positions, cache, refresh=False)

    assert refreshed.shape == cached.shape == (2, 20, tiny_backend.tokenizer.vocab_size)
    torch.testing.assert_close(refreshed, full)
    torch.testing.assert_close(cached, full, rtol=1e-4, atol=1e-4)


def test_a_cached_pass_sees_the_span_change_but_not_the_contexts_update(tiny_backend):
    ids = canvas_of(tiny_backend, seed=1)
    positions = torch.arange(30, 50)
    cache = tiny_backend.new_cache()
    before = tiny_backend.cached_logits(ids, positions, cache, refresh=True)
    changed = ids.clone()
    changed[:, 35] = tiny_backend.mask_id

    cached = tiny_backend.cached_logits(changed, positions, cache, refresh=False)
    exact = tiny_backend.logits(changed)[:, positions]

    assert (cached - before).abs().max() > 1e-3  # the span's new token is seen
    # ...through fresh span keys and values, while the context's stay those of the last full pass:
    # close to the exact pass (the approximation), not equal to it.
    assert 0 < (cached - exact).abs().max() < (before - exact).abs().max()


def test_with_refresh_every_step_sampling_equals_the_network_without_a_cache(tiny_backend):
    ids = canvas_of(tiny_backend, seed=2)
    editable = torch.zeros_like(ids, dtype=torch.bool)
    editable[:, 40:60] = True
    config = SamplerConfig(steps=6, cache_refresh=1)

    with_cache = sample(tiny_backend, ids, editable, config)
    without = sample(NoCache(tiny_backend), ids, editable, config)

    assert torch.equal(with_cache.ids, without.ids)
    assert with_cache.stats.cached_passes == without.stats.cached_passes == 0


def test_full_passes_come_every_refresh_steps_and_the_rest_are_cached(tiny_backend):
    ids = canvas_of(tiny_backend, seed=3)
    editable = torch.zeros_like(ids, dtype=torch.bool)
    editable[:, 20:70] = True
    calls = []

    class Recording(NoCache):
        def new_cache(self):
            return self.inner.new_cache()

        def cached_logits(self, ids, positions, cache, refresh, predicted=None):
            calls.append(refresh)
            return self.inner.cached_logits(ids, positions, cache, refresh, predicted)

    config = SamplerConfig(steps=10, cache_refresh=4, commit_threshold=1.0, remask_threshold=0.0)
    result = sample(Recording(tiny_backend), ids, editable, config)

    assert calls == [True, False, False, False] * 2 + [True, False]
    assert result.stats.forward_passes == 10 and result.stats.cached_passes == 7
    assert not (result.ids[editable] == tiny_backend.mask_id).any()


def test_probabilities_are_given_at_the_editable_columns_only(tiny_backend):
    ids = canvas_of(tiny_backend, seed=4)
    editable = torch.zeros_like(ids, dtype=torch.bool)
    editable[0, 10:20] = True
    editable[1, 50:55] = True  # rows may differ; their union is predicted for every row
    predict = CanvasPredictor(tiny_backend, editable, refresh=8)

    columns, probs = predict(ids)

    assert columns.tolist() == [*range(10, 20), *range(50, 55)]
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 15))
    assert (probs[..., tiny_backend.mask_id] == 0).all()
    exact = torch.softmax(tiny_backend.logits(ids)[:, columns], -1)  # before ruling specials out
    assert (probs.argmax(-1) == exact.argmax(-1)).float().mean() > 0.9


def test_the_refresh_interval_is_validated():
    with pytest.raises(InputError, match="cache_refresh"):
        SamplerConfig(cache_refresh=0)


def test_the_engine_fills_through_the_cache_and_leaves_the_rest_alone(tiny_backend):
    document = document_from_bytes(COUNTER_MODULE.encode())
    span = line_span(COUNTER_MODULE, 4, 5)

    options = InfillOptions(SamplerConfig(steps=6, cache_refresh=3), token_edits=0)  # (edits: full passes)
    result = infill(tiny_backend, document, [span], options)

    assert result.stats.cached_passes == result.stats.forward_passes - (result.stats.forward_passes + 2) // 3
    for edit in result.edits:
        assert span.start <= edit.start <= edit.end <= span.end


@pytest.mark.slow
def test_the_speed_bench_compares_exact_and_cached_in_one_run(tmp_path, tiny_backend, capsys):
    tiny_backend.model.save_pretrained(tmp_path)
    tiny_backend.tokenizer.save(tmp_path)
    argv = ["speed", "--model", str(tmp_path), "--threads", "1", "--steps", "4", "--cache-refresh", "4"]
    argv += ["--repeat", "1", "--retries", "0", "--fresh-fills", "0"]
    args = bench.build_parser().parse_args(argv)

    results = bench.speed(args)

    for name in ("one_line", "ten_lines"):
        row = results[name]
        assert row["exact_ms"] > 0 and row["cached_ms"] > 0 and row["cli_ms"] > 0
        assert row["speedup"] == pytest.approx(row["exact_ms"] / row["cached_ms"])
        assert 1 <= row["cached_steps"] <= 4
    printed = capsys.readouterr().out
    assert "speed-up" in printed and "one_line" in printed


def test_a_network_without_a_cache_counts_every_pass_as_full(tiny_backend):
    ids = canvas_of(tiny_backend, seed=5)
    editable = torch.zeros_like(ids, dtype=torch.bool)
    editable[:, 40:60] = True

    result = sample(NoCache(tiny_backend), ids, editable, SamplerConfig(steps=6, cache_refresh=4))

    assert result.stats.forward_passes >= 1 and result.stats.cached_passes == 0


class Recording:
    """The tiny model, recording which positions each cached pass computes (None: full pass);
    with `pad_from`, it is sure that the canvas positions from there on are <null>."""

    def __init__(self, inner, pad_from: int | None = None):
        self.inner, self.passes, self.pad_from = inner, [], pad_from

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def cached_logits(self, ids, positions, cache, refresh, predicted=None):
        self.passes.append(None if refresh else positions.tolist())
        logits = self.inner.cached_logits(ids, positions, cache, refresh, predicted)
        at = positions if predicted is None else positions[predicted]  # the rows of `logits`
        if self.pad_from is not None:
            logits[:, at >= self.pad_from, self.inner.null_id] = 50.0
        return logits


def test_narrowing_drops_positions_after_one_more_pass_that_caches_their_final_tokens(tiny_backend):
    network = Recording(tiny_backend)
    ids = canvas_of(tiny_backend, seed=3)
    editable = torch.zeros_like(ids, dtype=torch.bool)
    editable[:, 40:60] = True
    predict = CanvasPredictor(network, editable, refresh=8)
    predict(ids)
    every = CanvasPredictor(tiny_backend, editable, refresh=8)  # the same passes, never narrowed
    every(ids)
    content = editable.clone()
    content[:, 50:] = False  # e.g. a span's padding, now final
    ids[:, 50:60] = tiny_backend.null_id
    predict.narrow(content)

    second, second_probs = predict(ids)
    third, probs = predict(ids)

    # the second pass computes the padding for the cache, its probabilities at the content alone
    assert network.passes == [None, list(range(40, 60)), list(range(40, 50))]
    assert second.tolist() == list(range(40, 50)) and third.tolist() == list(range(40, 50))
    assert predict.computed == 20 + 20 + 10
    _, all_probs = every(ids)
    torch.testing.assert_close(second_probs, all_probs[:, :10], rtol=0, atol=0)
    _, exact = CanvasPredictor(tiny_backend, content, refresh=1)(ids)  # the nulls in every position
    torch.testing.assert_close(probs, exact, rtol=1e-4, atol=1e-4)


def test_the_sampler_narrows_to_a_spans_content_once_its_length_is_decided(tiny_backend):
    network = Recording(tiny_backend, pad_from=55)
    ids = canvas_of(tiny_backend, seed=4)[:1]
    editable = torch.zeros_like(ids, dtype=torch.bool)
    editable[:, 30:70] = True

    result = sample(network, ids, editable, SamplerConfig(steps=6, cache_refresh=8))

    content = (result.ids[0, 30:70] != tiny_backend.null_id).sum()
    assert network.passes[0] is None and len(network.passes[1]) == 40
    assert content == 25
    assert len(network.passes) > 2 and all(p == list(range(30, 55)) for p in network.passes[2:])


class FixedSpecials:
    special_ids = frozenset({0, 5})


@pytest.mark.parametrize("vocab", [6, 50, 32_768, 151_936])
def test_probabilities_are_written_over_the_logits_with_softmaxs_own_numbers(vocab):
    logits = torch.randn(2, 7, vocab, generator=torch.Generator().manual_seed(vocab)) * 6
    expected = logits.clone()
    expected[..., [0, 5]] = float("-inf")
    expected = torch.softmax(expected, dim=-1)
    probs = allowed_softmax(FixedSpecials(), logits)
    assert probs.data_ptr() == logits.data_ptr()  # no second table
    assert torch.equal(probs, expected)  # bit for bit what a softmax into a new table gives
