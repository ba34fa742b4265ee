"""Canvases of different lengths in one forward (infill.models.batching): every row of a padded
batch gets the logits, and leaves the cache, that its own call gets and leaves (to float32
rounding: the attention sums over another length), for the shipped model and the four published
families' tiny checkpoints, in each kind of pass: full logits, a refresh that fills a cache and a
span-only pass on it."""

from __future__ import annotations

import pytest
import torch
from checkpoints import FAMILIES, write_checkpoint
from samples import COUNTER_MODULE

import infill.models.layer_ops as layer_ops
from infill.models import load
from infill.models.base import Pass
from infill.models.native import load_backend
from infill.models.native.model import LayerCache

CODE = COUNTER_MODULE[COUNTER_MODULE.index("def mean") :]  # a mean function and a class
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def shipped():
    return load_backend()


@pytest.fixture(scope="module")
def denoisers(shipped, tmp_path_factory):
    """name -> denoiser: the shipped model and each family's tiny checkpoint (float32, CPU)."""
    root = tmp_path_factory.mktemp("batched")
    made = {"shipped": shipped}
    for family in FAMILIES:
        write_checkpoint(root / family, family, head_scale=20.0)
        made[family] = load(root / family, "cpu", torch.float32)
    return made


def canvases(denoiser) -> list[torch.Tensor]:
    """Three passes' canvases of different lengths, some positions masked: 2 rows of 40 tokens
    (the second with other masks), 1 of 57, 1 of 33."""
    tokens = denoiser.encode(CODE)
    first = torch.tensor([tokens[:40]] * 2)
    first[0, 10:16] = denoiser.mask_id
    first[1, 20:30] = denoiser.mask_id
    second = torch.tensor([tokens[5:62]])
    second[0, 30:41] = denoiser.mask_id
    third = torch.tensor([tokens[20:53]])
    third[0, 3:5] = denoiser.mask_id
    return [first, second, third]


POSITIONS = [torch.tensor([10, 11, 12, 13, 14, 15, 20, 25]), torch.arange(30, 41), torch.tensor([3, 4])]


def assert_same_rows(batched: torch.Tensor, alone: torch.Tensor) -> None:
    assert batched.shape == alone.shape
    assert batched.dtype == alone.dtype == torch.float32
    assert torch.allclose(batched, alone, atol=TOLERANCE, rtol=TOLERANCE), (batched - alone).abs().max()
    assert torch.equal(batched.argmax(-1), alone.argmax(-1))


def assert_same_cache(batched: list, alone: list) -> None:
    for ours, theirs in zip(batched, alone, strict=True):
        assert ours.keys.shape == theirs.keys.shape and ours.values.shape == theirs.values.shape
        assert torch.allclose(ours.keys, theirs.keys, atol=TOLERANCE)
        assert torch.allclose(ours.values, theirs.values, atol=TOLERANCE)


def span_passes(denoiser) -> tuple[list, list, list, list]:
    """`canvases` refreshed each on its own cache, then some masks committed: (the span passes on
    copies of those caches, to run batched; each pass's own call's logits; the caches those calls
    left; the copies)."""
    ids = canvases(denoiser)
    alone_caches = [denoiser.new_cache() for _ in ids]
    for x, p, c in zip(ids, POSITIONS, alone_caches):
        denoiser.cached_logits(x, p, c, refresh=True)
    batch_caches = [[LayerCache(own.keys.clone(), own.values.clone()) for own in c] for c in alone_caches]
    for x, p in zip(ids, POSITIONS):
        x[:, p[::2]] = torch.tensor(denoiser.encode("x = 1"))[0]
    alone = [denoiser.cached_logits(x, p, c, refresh=False) for x, p, c in zip(ids, POSITIONS, alone_caches)]
    passes = [Pass(x, p, c, False) for x, p, c in zip(ids, POSITIONS, batch_caches)]
    return passes, alone, alone_caches, batch_caches


@pytest.mark.slow
@pytest.mark.parametrize("name", ["shipped", *FAMILIES])
def test_each_row_of_a_padded_batch_is_the_row_run_alone(name, denoisers):
    denoiser = denoisers[name]
    ids = canvases(denoiser)

    # Full logits, every position.
    batched = denoiser.run_passes([Pass(x) for x in ids])
    for out, x in zip(batched, ids, strict=True):
        assert_same_rows(out, denoiser.logits(x))

    # A refresh: the whole canvas computed, each pass's cache filled, logits at its positions.
    alone_caches = [denoiser.new_cache() for _ in ids]
    batch_caches = [denoiser.new_cache() for _ in ids]
    alone = [denoiser.cached_logits(x, p, c, refresh=True) for x, p, c in zip(ids, POSITIONS, alone_caches)]
    batched = denoiser.run_passes([Pass(x, p, c, True) for x, p, c in zip(ids, POSITIONS, batch_caches)])
    for out, own, a, b in zip(batched, alone, alone_caches, batch_caches, strict=True):
        assert_same_rows(out, own)
        assert_same_cache(b, a)

    # A span-only pass on those caches, some masks committed since: each row on its own cache.
    for x, p in zip(ids, POSITIONS):
        x[:, p[::2]] = torch.tensor(denoiser.encode("x = 1"))[0]
    alone = [denoiser.cached_logits(x, p, c, refresh=False) for x, p, c in zip(ids, POSITIONS, alone_caches)]
    batched = denoiser.run_passes([Pass(x, p, c, False) for x, p, c in zip(ids, POSITIONS, batch_caches)])
    for out, own, a, b in zip(batched, alone, alone_caches, batch_caches, strict=True):
        assert_same_rows(out, own)
        assert_same_cache(b, a)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["shipped", *FAMILIES])
def test_packed_span_passes_attend_in_one_call_a_layer_where_the_c_attention_does_not(
    name, denoisers, monkeypatch
):
    """Where infill's C attention does not run (a GPU; here it is switched off), a packed span
    forward attends for all its passes in one call a layer, over their caches one after another,
    each query masked to its own canvas row's keys: each pass's logits and cache are still its own
    call's (to float32 rounding; a pass of 2 canvas rows among them), and the attention runs once
    a layer, not once a pass and layer."""
    denoiser = denoisers[name]
    monkeypatch.setenv(layer_ops.SWITCH, "pytorch")
    layer_ops.build.cache_clear()
    try:
        assert not layer_ops.applies(torch.zeros(1))
        passes, alone, alone_caches, batch_caches = span_passes(denoiser)
        with torch.profiler.profile() as profile:
            batched = denoiser.run_passes(passes)
    finally:
        layer_ops.build.cache_clear()
    for out, own, a, b in zip(batched, alone, alone_caches, batch_caches, strict=True):
        assert_same_rows(out, own)
        assert_same_cache(b, a)
    calls = [event for event in profile.events() if event.name == "aten::scaled_dot_product_attention"]
    assert len(calls) == len(denoiser.layers())


def test_canvases_of_one_length_are_batched_without_padding(shipped):
    """Nothing padded: the forward is a single call's with more rows, the rows equal to the bit."""
    denoiser = shipped
    tokens = denoiser.encode(CODE)
    ids = [torch.tensor([tokens[:50]]), torch.tensor([tokens[10:60]])]
    batched = denoiser.run_passes([Pass(x) for x in ids])
    for out, x in zip(batched, ids):
        assert torch.equal(out, denoiser.logits(x))


def test_without_the_key_mask_a_padded_row_would_change(shipped):
    """The check above can fail: a short canvas padded and run WITHOUT the key mask (its queries
    attend to the padding) gets other logits than alone; with the mask, its own."""
    denoiser = shipped
    short, long = canvases(denoiser)[2], canvases(denoiser)[1]
    padded = torch.zeros(2, long.shape[1], dtype=torch.long)
    padded[0, : short.shape[1]], padded[1] = short[0], long[0]
    unmasked = denoiser.model(padded).logits[0, : short.shape[1]]
    alone = denoiser.logits(short)[0]
    assert (unmasked - alone).abs().max() > 1e-2
    key_mask = torch.arange(long.shape[1])[None] < torch.tensor([[short.shape[1]], [long.shape[1]]])
    masked = denoiser.model(padded, attention_mask=key_mask).logits[0, : short.shape[1]]
    assert_same_rows(masked, alone)


def test_passes_of_two_kinds_are_refused(shipped):
    denoiser = shipped
    ids = canvases(denoiser)[2]
    with pytest.raises(ValueError, match="one kind"):
        denoiser.run_passes([Pass(ids), Pass(ids, POSITIONS[2], denoiser.new_cache(), True)])


def test_span_passes_packed_in_one_row_are_their_own_calls_to_the_bit_as_served():
    """Span passes share a forward packed (one row of every pass's query tokens, none padded):
    with the shipped model as served on a CPU (bfloat16, infill's kernels: each output summed in
    one order whatever sits beside it), each pass's logits and cache are its own call's, bit for
    bit, for passes of 1 and 2 canvases and of 2 to 11 positions."""
    denoiser = load_backend(dtype=torch.bfloat16)
    passes, alone, alone_caches, batch_caches = span_passes(denoiser)
    batched = denoiser.run_passes(passes)
    for out, own, a, b in zip(batched, alone, alone_caches, batch_caches, strict=True):
        assert torch.equal(out, own)
        for ours, theirs in zip(b, a, strict=True):
            assert torch.equal(ours.keys, theirs.keys) and torch.equal(ours.values, theirs.values)
