"""infill.engine.kept_context: a fill's first pass reuses the last fill's keys and values, moved.

With one layer, a position's keys and values depend only on its token and position, so moving
them (with the rotary turn) must give exactly what a full pass over the new canvas gives: that
checks the alignment and the rotation. With more layers the moved context is an approximation,
except for the same canvas, where it must again be exact.
"""

from __future__ import annotations

import random

import pytest
import torch

from infill.engine.kept_context import DocumentContexts, KeptContext, aligned_runs, moved_cache, rotated
from infill.models.decoder import Decoder, DecoderConfig
from infill.models.denoiser import CachingCheckpointDenoiser
from infill.models.native import InfillBackend
from infill.models.native.model import InfillConfig, InfillModel, LayerCache

VOCAB = 97


def native(layers: int) -> InfillBackend:
    torch.manual_seed(0)
    config = InfillConfig(
        vocab_size=VOCAB, hidden_size=32, num_layers=layers, num_heads=2, context_length=256
    )
    return InfillBackend(InfillModel(config).eval(), tokenizer=None)


def decoder(layers: int, shift: bool) -> CachingCheckpointDenoiser:
    """The network of the Dream/LLaDA families (grouped key/value heads, q/k/v biases)."""
    torch.manual_seed(0)
    config = DecoderConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_layers=layers, num_heads=4,
        num_kv_heads=2, head_dim=8, rope_theta=10000.0, norm_eps=1e-6, qkv_bias=True, tied_head=False,
    )  # fmt: skip
    network = Decoder(config).eval()
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.normal_(0, 0.3)
    return CachingCheckpointDenoiser(
        family="test", network=network, tokenizer=None, mask_id=VOCAB - 1, null_id=None,
        special_ids=frozenset(), context_length=256, shift=shift, device=torch.device("cpu"),
    )  # fmt: skip


MODELS = {
    "native": lambda layers: native(layers),
    "decoder": lambda layers: decoder(layers, shift=False),
    "decoder, shifted (Dream)": lambda layers: decoder(layers, shift=True),
}


def canvases(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A canvas, and the next request's: the window moved (tokens dropped at the start, others
    added at the end), a span of masks of another length in the middle. And its span positions."""
    rng = random.Random(seed)
    text = [rng.randrange(VOCAB - 1) for _ in range(160)]
    first = text[:120]
    mask = VOCAB - 1
    second = text[17:70] + [mask] * 9 + text[75:160]
    span = torch.arange(53, 62)
    return torch.tensor([first]), torch.tensor([second]), span


@pytest.mark.parametrize("name", MODELS)
def test_with_one_layer_the_moved_context_gives_the_full_pass_exactly(name):
    inner = MODELS[name](1)
    kept = KeptContext(inner)
    first, second, span = canvases()
    kept.cached_logits(first, torch.arange(40, 50), kept.new_cache(), refresh=True)  # a first fill
    got = kept.cached_logits(second, span, kept.new_cache(), refresh=True)  # the next one's first pass
    assert kept.reused_passes == 1
    assert kept.computed_positions == 9 + 40  # the span and the window's new end only
    expected = inner.logits(second)[:, span]
    assert (got - expected).abs().max() < 1e-4


@pytest.mark.parametrize("name", MODELS)
def test_positions_computed_for_the_cache_alone_get_no_logits_and_change_nothing_else(name):
    """`predicted`: the logits at some of the positions computed (the output layer at those rows
    alone); the cache and those logits are what the pass without it gives. Through a kept
    context's reuse too, whose own extra positions (the window's new end) are cache-only."""
    inner = MODELS[name](3)
    first, second, span = canvases()
    predicted = torch.tensor([0, 3, 4, 8])
    for refresh in (True, False):
        every_cache, some_cache = inner.new_cache(), inner.new_cache()
        if not refresh:  # a span pass on a full pass's cache
            inner.cached_logits(second, span, every_cache, True)
            inner.cached_logits(second, span, some_cache, True)
        every = inner.cached_logits(second, span, every_cache, refresh)
        some = inner.cached_logits(second, span, some_cache, refresh, predicted)
        assert some.shape == every[:, predicted].shape
        torch.testing.assert_close(some, every[:, predicted], rtol=0, atol=1e-5)  # a product's last
        #   bits depend on its row count
        for theirs, ours in zip(every_cache, some_cache):
            assert torch.equal(theirs.keys, ours.keys) and torch.equal(theirs.values, ours.values)
    kept = KeptContext(inner)
    kept.cached_logits(first, torch.arange(40, 50), kept.new_cache(), refresh=True)
    got = kept.cached_logits(second, span, kept.new_cache(), True, predicted)  # reused
    assert kept.reused_passes == 1 and got.shape[1] == len(predicted)
    again = KeptContext(inner)
    again.cached_logits(first, torch.arange(40, 50), again.new_cache(), refresh=True)
    every = again.cached_logits(second, span, again.new_cache(), refresh=True)
    torch.testing.assert_close(got, every[:, predicted], rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_the_same_canvas_again_is_exact_at_any_depth(name):
    inner = MODELS[name](3)
    kept = KeptContext(inner)
    first, _, _ = canvases()
    positions = torch.arange(30, 38)
    kept.cached_logits(first, positions, kept.new_cache(), refresh=True)
    got = kept.cached_logits(first, positions, kept.new_cache(), refresh=True)
    assert kept.reused_passes == 1
    assert (got - inner.logits(first)[:, positions]).abs().max() < 1e-4


def test_a_refresh_within_a_fill_is_a_real_full_pass():
    inner = native(2)
    kept = KeptContext(inner)
    first, second, span = canvases()
    kept.cached_logits(first, span, kept.new_cache(), refresh=True)
    cache = kept.new_cache()
    kept.cached_logits(second, span, cache, refresh=True)  # reused
    got = kept.cached_logits(second, span, cache, refresh=True)  # the fill's own refresh
    assert kept.reused_passes == 1
    assert (got - inner.logits(second)[:, span]).abs().max() < 1e-4


def test_a_canvas_that_hardly_aligns_gets_a_full_pass():
    inner = native(2)
    kept = KeptContext(inner)
    first, _, span = canvases(0)
    other, _, _ = canvases(1)
    kept.cached_logits(first, span, kept.new_cache(), refresh=True)
    got = kept.cached_logits(other, span, kept.new_cache(), refresh=True)
    assert kept.reused_passes == 0
    assert (got - inner.logits(other)[:, span]).abs().max() < 1e-4


def test_turning_keys_twice_adds_the_angles():
    keys = torch.randn(1, 2, 5, 8)
    deltas, more = torch.tensor([0, 3, -4, 7, 100]), torch.tensor([2, -3, 4, 1, -50])
    assert torch.allclose(rotated(rotated(keys, deltas, 10000.0), more, 10000.0),
                          rotated(keys, deltas + more, 10000.0), atol=1e-5)  # fmt: skip
    assert torch.allclose(rotated(keys, torch.zeros(5, dtype=torch.long), 10000.0), keys)


def test_a_moved_cache_holds_each_kept_key_turned_by_its_own_move():
    keys, values = torch.randn(1, 2, 40, 8), torch.randn(1, 2, 40, 8)
    runs = [(0, 0, 10), (14, 11, 5), (22, 19, 2), (25, 30, 6)]  # stayed, moved left twice, right
    (layer,) = moved_cache([LayerCache(keys, values)], runs, 44, 10000.0)
    assert layer.keys.shape == layer.values.shape == (1, 2, 44, 8)
    kept = torch.zeros(44, dtype=torch.bool)
    for i, j, n in runs:
        kept[j : j + n] = True
        for t in range(n):  # each position on its own, as the keys of one token at a new place
            turned = rotated(keys[:, :, i + t : i + t + 1], torch.tensor([j - i]), 10000.0)
            assert torch.equal(layer.keys[:, :, j + t : j + t + 1], turned)
            assert torch.equal(layer.values[:, :, j + t], values[:, :, i + t])
    assert not layer.keys[:, :, ~kept].any() and not layer.values[:, :, ~kept].any()


def test_every_layer_moved_at_once_is_a_layer_at_a_time_to_the_bit():
    """What a GPU runs (every layer's keys and values stacked and moved at once) gives each layer
    the numbers a layer at a time gives (the CPU's), for float32 and bfloat16 caches, and launches
    the same operations for 2 layers as for 6."""
    runs = [(0, 0, 10), (14, 11, 5), (22, 19, 2), (25, 30, 6)]

    def operations(cache: list) -> int:
        with torch.profiler.profile() as profile:
            moved_cache(cache, runs, 44, 10000.0, all_layers=True)
        return sum(1 for event in profile.events() if event.cpu_parent is None)

    for dtype in (torch.float32, torch.bfloat16):
        cache = [
            LayerCache(torch.randn(1, 2, 40, 8).to(dtype), torch.randn(1, 2, 40, 8).to(dtype))
            for _ in range(6)
        ]
        each = moved_cache(cache, runs, 44, 10000.0, all_layers=False)
        every = moved_cache(cache, runs, 44, 10000.0, all_layers=True)
        for one, other in zip(each, every, strict=True):
            assert other.keys.dtype == dtype and other.keys.is_contiguous() and other.values.is_contiguous()
            assert torch.equal(one.keys, other.keys) and torch.equal(one.values, other.values)
        assert operations(cache[:2]) == operations(cache)


def test_aligned_runs_find_the_moved_window():
    old = list(range(100))
    new = old[10:50] + [500] * 3 + old[60:100] + [600, 601]
    assert aligned_runs(old, new) == [(10, 0, 40), (60, 43, 40)]


def test_documents_keep_their_own_context_and_forget_when_closed():
    backend, contexts = native(1), DocumentContexts(documents=2)
    a = contexts.denoiser("file:///a.py", backend)
    assert contexts.denoiser("file:///a.py", backend) is a and a.context_length == backend.context_length
    assert contexts.denoiser("file:///b.py", backend) is not a
    contexts.denoiser("file:///c.py", backend)  # a is the oldest of three: dropped
    assert contexts.denoiser("file:///a.py", backend) is not a
    b = contexts.denoiser("file:///b.py", backend)
    contexts.forget("file:///b.py")
    assert contexts.denoiser("file:///b.py", backend) is not b
    assert contexts.denoiser("file:///a.py", native(1)) is not contexts.denoiser("file:///a.py", backend)


def filled_then_edited(kept: KeptContext) -> torch.Tensor:
    """A fill near the start of a canvas, then the canvas edited far from there (3 tokens)."""
    first, _, _ = canvases()
    kept.cached_logits(first, torch.arange(10, 14), kept.new_cache(), refresh=True)
    edited = first.clone()
    edited[0, 90:93] = torch.tensor([1, 2, 3])
    return edited


def test_an_edit_far_from_the_span_recomputes_only_the_edit_and_the_span():
    kept = KeptContext(native(2))
    edited = filled_then_edited(kept)  # the user typed far from the next span
    span = torch.arange(30, 38)
    edited[0, span] = VOCAB - 1
    kept.cached_logits(edited, span, kept.new_cache(), refresh=True)
    assert kept.reused_passes == 1
    assert kept.computed_positions == len(span) + 3  # nothing else of the 120 positions


def test_an_idle_refresh_makes_the_kept_context_exact_for_the_text_as_it_is():
    inner = native(3)
    kept = KeptContext(inner)
    edited = filled_then_edited(kept)
    kept.refresh(edited)  # the user stopped typing
    assert kept.refreshes == 1
    positions = torch.arange(40, 50)
    got = kept.cached_logits(edited, positions, kept.new_cache(), refresh=True)  # a request on the same text
    assert kept.computed_positions == len(positions)  # only what was asked for
    assert (got - inner.logits(edited)[:, positions]).abs().max() < 1e-4  # exact at any depth


def test_reuse_in_a_row_is_bounded_then_a_full_pass_runs():
    from infill.engine.kept_context import MAX_REUSES

    inner = native(2)
    kept = KeptContext(inner)
    first, _, span = canvases()
    kept.cached_logits(first, span, kept.new_cache(), refresh=True)
    for _ in range(MAX_REUSES):
        kept.cached_logits(first, span, kept.new_cache(), refresh=True)
    assert kept.reused_passes == MAX_REUSES
    kept.cached_logits(first, span, kept.new_cache(), refresh=True)  # stale enough: a full pass
    assert kept.reused_passes == MAX_REUSES and kept.reuses_in_a_row == 0
    kept.cached_logits(first, span, kept.new_cache(), refresh=True)
    assert kept.reused_passes == MAX_REUSES + 1


def test_context_ids_are_the_canvas_a_fill_at_that_offset_sees_without_its_span(tiny_backend):
    from infill.engine.canvas import build_canvas
    from infill.engine.kept_context import context_ids
    from infill.text.document import document_from_bytes
    from infill.text.spans import Span

    text = "".join(f"value_{i} = compute({i}, scale={i % 5})\n" for i in range(400))
    offset = text.index("value_200")
    ids = context_ids(tiny_backend, document_from_bytes(text.encode()), offset)[0].tolist()
    fill = build_canvas(tiny_backend, text, [Span(offset, offset + 30)])
    assert len(ids) <= tiny_backend.context_length
    aligned = sum(n for _, _, n in aligned_runs(ids, fill.ids))
    assert aligned >= len(fill.ids) - fill.slots[0].length - 16  # all but the span and its seams


@pytest.mark.slow
def test_where_nothing_changed_near_the_span_the_kept_context_fills_as_the_exact_pass_does():
    """The shipped model, a real module: each line filled on a fresh cache, and on the document's
    kept context after a request on the same line and an edit ~25 lines away (outside the
    window): the same text (repair off: its retries would multiply any difference)."""
    import calendar
    import inspect

    from infill.bench.tasks import code_lines
    from infill.models.native import load_backend
    from infill.modes.fill import infill
    from infill.options import InfillOptions
    from infill.text.document import document_from_bytes
    from infill.text.spans import Span, line_span

    backend = load_backend(threads=2)
    options = InfillOptions(retries=0, token_edits=0, fresh_fills=0)
    text = "".join(inspect.getsource(calendar).splitlines(keepends=True)[:200])
    code = code_lines(text)
    for index in range(37, 110, 18):
        span = line_span(text, code[index], code[index])
        exact = infill(backend, document_from_bytes(text.encode()), [span], options).spans[0].new_text
        kept = KeptContext(backend)
        infill(kept, document_from_bytes(text.encode()), [span], options)  # the document's last request
        far = line_span(text, code[index - 25], code[index - 25])
        edited = text[: far.end] + "  # edited" + text[far.end :]
        moved = Span(span.start + 10, span.end + 10)
        again = infill(kept, document_from_bytes(edited.encode()), [moved], options)
        assert kept.reused_passes >= 1  # the second fill started from the kept context
        assert again.spans[0].new_text == exact, index


def test_a_refresh_told_to_stop_leaves_the_kept_context_as_it_was():
    inner = native(3)
    kept = KeptContext(inner)
    edited = filled_then_edited(kept)
    before_ids, before_cache = kept.ids, kept.cache
    seen = []
    finished = kept.refresh(edited, stop=lambda: len(seen) == 2, on_layer=lambda *done: seen.append(done))
    layers = len(inner.layers())
    assert not finished and seen == [(0, layers), (1, layers)]  # asked before each layer; stopped at the 2nd
    assert kept.ids is before_ids and kept.cache is before_cache and kept.refreshes == 0
    assert not any(layer._forward_pre_hooks for layer in inner.layers())  # the checks are gone
    seen.clear()
    assert kept.refresh(edited, on_layer=lambda done, total: seen.append(done))
    assert seen == list(range(layers)) and kept.refreshes == 1 and torch.equal(kept.ids, edited)
