"""A span pass with each layer in one C call: the shipped family's as served on a CPU
(infill.models.native.model, `fused_span_layers`, layer_ops.c's `infill_span_block_bf16`:
bfloat16, infill's product) and the published families' with 4-bit weights
(infill.models.decoder, `fused_span_layers`, `infill_span_layer_int4`: float32 numbers, infill's
4-bit product). Each gives the logits and leaves the cache that the layers' modules give and
leave, bit for bit, for one canvas and several, for a pass alone and for passes packed in one
forward; where it does not serve a pass (more queries a head than its attention takes) the
modules run."""

from __future__ import annotations

import pytest
import torch
from external import require_built

import infill.models.bf16_native as bf16_native
import infill.models.decoder as decoder
import infill.models.int4_native as int4_native
import infill.models.native.model as native
from infill.bench.shapes import random_network
from infill.models import layer_ops, load
from infill.models.base import Pass
from infill.models.batching import run_batch
from infill.models.decoder import DecoderConfig
from infill.models.native.model import LayerCache

CPU_REASONS = (bf16_native.NO_INSTRUCTIONS, "built for Linux on x86-64 only")


@pytest.fixture(scope="module")
def served():
    """The shipped model as `infill serve` and the language server load it on this CPU."""
    require_built(bf16_native.build, "infill's bfloat16 kernel", CPU_REASONS)
    require_built(layer_ops.build, "infill's layer operations", ("built for Linux on x86-64 only",))
    denoiser = load(None, "cpu")
    assert denoiser.model.embed.weight.dtype == torch.bfloat16
    return denoiser


@pytest.fixture
def fused_calls(monkeypatch):
    """How many span passes ran their layers in C (each call's answer: None where it did not)."""
    answers, fused = [], native.fused_span_layers

    def counted(*args):
        answers.append(fused(*args))
        return answers[-1]

    monkeypatch.setattr(native, "fused_span_layers", counted)
    return answers


def modules_only(monkeypatch) -> None:
    monkeypatch.setattr(native, "fused_span_layers", lambda *args: None)


def canvas(denoiser, rows: int, seed: int) -> torch.Tensor:
    return torch.randint(10, 8000, (1, 300), generator=torch.Generator().manual_seed(seed)).repeat(rows, 1)


def refreshed(denoiser, ids: torch.Tensor, positions: torch.Tensor) -> list:
    cache = denoiser.new_cache()
    denoiser.cached_logits(ids, positions, cache, refresh=True)
    return cache


def copied(cache: list) -> list:
    return [LayerCache(layer.keys.clone(), layer.values.clone()) for layer in cache]


def assert_same_cache(ours: list, theirs: list) -> None:
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


@pytest.mark.parametrize(
    "rows,positions", [(1, [150]), (1, [40, 41, 42, 43]), (2, [3, 9, 10, 11, 200, 201, 202, 299])]
)
def test_a_span_pass_with_its_layers_in_c_is_the_modules_pass_bit_for_bit(
    served, monkeypatch, fused_calls, rows, positions
):
    positions = torch.tensor(positions)
    ids = canvas(served, rows, seed=rows)
    ours = refreshed(served, ids, positions)
    theirs = copied(ours)
    ids[:, positions[::2]] = 77  # some of the span committed since the refresh
    if rows == 2:
        ids[1, positions[1::2]] = 78  # the second canvas other tokens there
    got = served.cached_logits(ids, positions, ours, refresh=False)
    assert len(fused_calls) == 1 and fused_calls[0] is not None  # its layers ran in C
    modules_only(monkeypatch)
    want = served.cached_logits(ids, positions, theirs, refresh=False)
    assert torch.equal(got, want)
    assert_same_cache(ours, theirs)


def test_passes_packed_in_one_forward_run_their_layers_in_c_as_the_modules_do(
    served, monkeypatch, fused_calls
):
    spans = [torch.tensor([20, 21]), torch.tensor([100, 101, 102, 103, 104]), torch.tensor([7])]
    canvases = [canvas(served, rows, seed) for rows, seed in ((1, 4), (2, 5), (1, 6))]
    ours = [refreshed(served, ids, where) for ids, where in zip(canvases, spans)]
    theirs = [copied(cache) for cache in ours]
    for ids, where in zip(canvases, spans):
        ids[:, where] = 91
    got = served.run_passes(
        [Pass(ids, where, cache, False) for ids, where, cache in zip(canvases, spans, ours)]
    )
    assert [answer is not None for answer in fused_calls] == [True]  # one forward, in C
    modules_only(monkeypatch)
    want = served.run_passes([Pass(ids, where, c, False) for ids, where, c in zip(canvases, spans, theirs)])
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(ours, theirs, strict=True):
        assert_same_cache(a, b)


def test_more_positions_a_head_than_the_c_attention_takes_run_as_modules(served, fused_calls):
    positions = torch.arange(10, 11 + layer_ops.most_queries())
    ids = canvas(served, 1, seed=9)
    cache = refreshed(served, ids, positions)
    out = served.cached_logits(ids, positions, cache, refresh=False)
    assert fused_calls == [None] and out.shape == (1, len(positions), served.model.config.vocab_size)


INT4_CPU_REASONS = ("this CPU has neither AVX-512 VNNI nor AVX2", "built for Linux on x86-64 only")
SMALL = dict(
    vocab_size=512, hidden_size=128, intermediate_size=256, num_layers=2, rope_theta=10000.0, norm_eps=1e-6
)
SHAPES = {  # the published families' layouts, small (the tiny checkpoints' heads of 8 are too small for C)
    "Qwen2 (Dream, Open-dCoder)": DecoderConfig(
        **SMALL, num_heads=4, num_kv_heads=2, head_dim=32, qkv_bias=True, tied_head=False
    ),
    "LLaDA": DecoderConfig(
        **SMALL,
        num_heads=4,
        num_kv_heads=4,
        head_dim=32,
        qkv_bias=False,
        tied_head=False,
        embed_scale=11.3,
        logit_scale=0.088,
    ),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_4_bit_networks_span_layers_in_c_are_its_modules_bit_for_bit(shape, monkeypatch):
    require_built(int4_native.build, "infill's 4-bit kernel", INT4_CPU_REASONS)
    require_built(layer_ops.build, "infill's layer operations", ("built for Linux on x86-64 only",))
    if layer_ops.most_queries() == 0:  # the span layer's attention: AVX-512 or AVX2
        pytest.skip("NOT TESTED: span layers in C: this CPU has neither AVX-512 nor AVX2 (modules run)")
    network = random_network(SHAPES[shape], torch.device("cpu"), torch.float32, "int4")
    answers, fused = [], decoder.fused_span_layers
    monkeypatch.setattr(
        decoder, "fused_span_layers", lambda *args: answers.append(fused(*args)) or answers[-1]
    )
    spans = [torch.tensor([3, 4, 5]), torch.tensor([30]), torch.tensor([10, 12])]
    canvases = [torch.randint(5, 500, (rows, 48), generator=torch.Generator().manual_seed(rows))
                for rows in (1, 2, 1)]  # fmt: skip
    ours = []
    with torch.no_grad():
        for ids, where in zip(canvases, spans):
            ours.append(network.new_cache())
            network.logits_at(ids, where, ours[-1], True)
        theirs = [copied(cache) for cache in ours]
        for ids, where in zip(canvases, spans):
            ids[:, where] = 7
        passes = [Pass(ids, where, copied(cache), False) for ids, where, cache in zip(canvases, spans, ours)]
        packed = run_batch(passes, torch.device("cpu"), network, network.logits_at, network.new_cache)
        alone = [
            network.logits_at(ids, where, cache, False) for ids, where, cache in zip(canvases, spans, ours)
        ]
        assert len(answers) == 4 and all(answer is not None for answer in answers)  # one packed, three alone
        monkeypatch.setattr(decoder, "fused_span_layers", lambda *args: None)
        for ids, where, cache, got, batched in zip(canvases, spans, theirs, alone, packed):
            want = network.logits_at(ids, where, cache, False)
            assert torch.equal(got, want) and torch.equal(batched, want)
    for ours_, theirs_ in zip(ours, theirs, strict=True):
        assert_same_cache(ours_, theirs_)


def test_a_4_bit_layer_given_new_weights_after_a_pass_is_read_with_them(monkeypatch):
    """The C layers' fixed arguments are made once (`Decoder.span_layer_calls`): a product
    quantized anew, or its tiles replaced, after a pass must be what the next pass reads."""
    require_built(int4_native.build, "infill's 4-bit kernel", INT4_CPU_REASONS)
    require_built(layer_ops.build, "infill's layer operations", ("built for Linux on x86-64 only",))
    if layer_ops.most_queries() == 0:
        pytest.skip("NOT TESTED: span layers in C: this CPU has neither AVX-512 nor AVX2 (modules run)")
    network = random_network(SHAPES["Qwen2 (Dream, Open-dCoder)"], torch.device("cpu"), torch.float32, "int4")
    ids = torch.randint(5, 500, (1, 48), generator=torch.Generator().manual_seed(3))
    where = torch.tensor([10, 11, 12])
    fused, answers = decoder.fused_span_layers, []

    def pass_both_ways() -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            cache = network.new_cache()
            network.logits_at(ids, where, cache, True)
            theirs = copied(cache)
            monkeypatch.setattr(
                decoder, "fused_span_layers", lambda *args: answers.append(fused(*args)) or answers[-1]
            )
            got = network.logits_at(ids, where, cache, False)
            monkeypatch.setattr(decoder, "fused_span_layers", lambda *args: None)
            return got, network.logits_at(ids, where, theirs, False)

    first, _ = pass_both_ways()
    made = network.span_calls
    assert made is not None
    layer = network.layers[1]
    weight = torch.randn(
        layer.mlp.down.out_features, layer.mlp.down.in_features, generator=torch.Generator().manual_seed(4)
    )
    layer.mlp.down = int4_native.NativeInt4Linear(weight, None)  # a product quantized anew
    got, want = pass_both_ways()
    assert torch.equal(got, want) and not torch.equal(got, first) and network.span_calls is not made
    qkv = network.layers[0].attn.qkv
    qkv.register_buffer("tiles", torch.flip(qkv.tiles, dims=[0]).contiguous())  # its tiles replaced
    again, want = pass_both_ways()
    assert torch.equal(again, want) and not torch.equal(again, got)
    assert len(answers) == 3 and all(answer is not None for answer in answers)  # each pass's layers in C
