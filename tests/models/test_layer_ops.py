"""A layer's small operations in C (infill.models.layer_ops): each computes what PyTorch's
operations compute, up to float32 rounding (or one bfloat16 rounding), over the shapes the
networks give it (a span pass's few rows, a full pass's many, batches, grouped heads, tables per
row); both networks give the same logits with them as without them, on a span pass and a full one,
in float32 and (the shipped model's dtype on a CPU with native bfloat16) in bfloat16; shapes the
attention does not take are left to PyTorch; and `INFILL_LAYER_OPS=pytorch` turns them off."""

from __future__ import annotations

import platform

import pytest
import torch
import torch.nn.functional as F
from external import require_built

from infill.models import c_build, decoder, layer_ops


@pytest.fixture
def built():
    return require_built(layer_ops.build, "infill's layer operations", ("built for Linux on x86-64 only",))


@pytest.fixture
def attention(built):
    """The build's attention, where it has one (AVX-512 or AVX2: elsewhere PyTorch's runs)."""
    if layer_ops.most_queries() == 0:
        pytest.skip("NOT TESTED: infill's C attention: neither AVX-512 nor AVX2 here (PyTorch's runs)")
    return built


def close(got: torch.Tensor, want: torch.Tensor, tolerance: float = 2e-6) -> bool:
    return bool((got - want).abs().max() <= tolerance * max(1.0, float(want.abs().max())))


@pytest.mark.parametrize("shape", [(1, 4, 896), (2, 3, 64), (1, 512, 896), (5, 7, 48)])
def test_norms(built, shape):
    torch.manual_seed(sum(shape))
    x, delta, weight = torch.randn(shape) * 3, torch.randn(shape), torch.rand(shape[-1]) + 0.5
    want = weight * F.rms_norm(x, weight.shape, eps=1e-6)
    assert close(layer_ops.rms_norm(x, weight, 1e-6), want)
    total, normed = layer_ops.add_rms_norm(x, delta, weight, 1e-5)
    assert torch.equal(total, x + delta)
    assert close(normed, weight * F.rms_norm(x + delta, weight.shape, eps=1e-5))


@pytest.mark.parametrize(
    "batch,length,positions_by_row", [(1, 4, False), (3, 5, False), (2, 6, True), (1, 300, False)]
)
def test_rotation_in_place(built, batch, length, positions_by_row):
    heads, turned, D = 7, 5, 64
    torch.manual_seed(length)
    x = torch.randn(batch, length, heads, D)
    if positions_by_row:
        positions = torch.randint(0, 500, (batch, length))
    else:
        positions = torch.randint(0, 500, (length,))
    cos, sin = decoder.rotary_tables(positions, D, 10000.0)
    want = x.clone().transpose(1, 2)
    want[:, :turned] = decoder.rotate(want[:, :turned], cos, sin)
    layer_ops.rotate_(x, turned, cos, sin)
    assert close(x.transpose(1, 2), want)


@pytest.mark.parametrize("batch,length,positions_by_row", [(1, 4, False), (3, 5, False), (2, 6, True)])
def test_the_shipped_familys_rotation_in_bfloat16_is_pytorchs(built, batch, length, positions_by_row):
    from infill.models.native.model import apply_rotary, rotary_tables

    heads, turned, D = 9, 6, 64
    torch.manual_seed(length)
    x = (torch.randn(batch, length, heads, D) * 4).bfloat16()
    cos, sin = rotary_tables(600, D, 10000.0, dtype=torch.bfloat16)
    positions = torch.randint(0, 600, (batch, length) if positions_by_row else (length,))
    cos, sin = cos[positions], sin[positions]
    if positions_by_row:  # (B, P, D/2) -> (B, 1, P, D/2), as the model hands them over
        cos, sin = cos[:, None], sin[:, None]
    want = x.clone().transpose(1, 2)
    want[:, :turned] = apply_rotary(want[:, :turned], cos, sin)
    layer_ops.rotate_halves_(x, turned, cos, sin)
    assert torch.equal(x.transpose(1, 2), want)


@pytest.mark.parametrize("rows,n", [(1, 4864), (5, 1056), (3, 37), (600, 64)])
def test_the_mlps_gate(built, rows, n):
    torch.manual_seed(n)
    x = torch.randn(2, rows, 2 * n) * 4
    gate, up = x.chunk(2, dim=-1)
    assert close(layer_ops.swiglu(x), F.silu(gate) * up, 1e-6)
    x16 = x.bfloat16()
    gate, up = x16.chunk(2, dim=-1)
    want, got = F.silu(gate) * up, layer_ops.swiglu(x16)
    assert got.dtype == torch.bfloat16
    # each step rounded as PyTorch's: equal but where the exponential's last bit moves a rounding
    assert (got == want).float().mean() > 0.999
    assert close(got.float(), want.float(), 2**-7)


@pytest.mark.parametrize(
    "batch,heads,kv,queries,keys,D",
    [
        (1, 14, 2, 4, 512, 64),
        (1, 14, 2, 1, 37, 64),
        (2, 4, 4, 16, 100, 128),
        (1, 28, 4, 9, 513, 128),
        (3, 8, 2, 2, 5, 32),
        (1, 14, 2, 3, 50, 64),  # 21 queries a head: 3 vectors of 8 (AVX2) rounded up to 4
        (1, 10, 2, 8, 70, 64),  # 40: 3 vectors of 16 (AVX-512) rounded up to 4, 5 of 8 (AVX2)
        (1, 14, 2, 12, 512, 64),  # 84 queries a head: two runs of 48 and 36
        (2, 28, 4, 32, 100, 128),  # 224: four runs of 56
    ],
)
def test_attention(attention, batch, heads, kv, queries, keys, D):
    torch.manual_seed(keys)
    q = torch.randn(batch, heads, queries, D)
    k, v = torch.randn(batch, kv, keys, D) * 2, torch.randn(batch, kv, keys, D)
    group = heads // kv
    want = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
    got = layer_ops.attention(q, k, v)
    if heads // kv * queries > layer_ops.most_queries():  # more than this build takes (256)
        assert got is None
        return
    assert got is not None and got.shape == want.shape
    assert close(got, want, 1e-5)


def test_the_avx2_build_attends_and_gates_as_pytorch(built, tmp_path, monkeypatch):
    """The build for AVX2 alone (8 floats a vector: most laptops' CPUs), run where this CPU can,
    so that a CPU with AVX-512 tests it too."""
    if not {"avx2", "fma"} <= set(c_build.cpu_flags().split()):
        pytest.skip("NOT TESTED: this CPU cannot run code built for x86-64-v3 (no AVX2 and FMA)")
    flags = c_build.flags_for("x86-64-v3")
    avx2 = c_build.build_elsewhere(layer_ops.SOURCE, tmp_path, layer_ops.declared, flags)
    assert avx2.library is not None, avx2.reason
    monkeypatch.setattr(layer_ops, "build", lambda: avx2)
    layer_ops.most_queries.cache_clear()
    try:
        assert layer_ops.most_queries() == 256
        for heads, kv, queries, keys, D in [(14, 2, 4, 512, 64), (28, 4, 32, 100, 128), (8, 2, 3, 5, 32)]:
            torch.manual_seed(keys)
            q = torch.randn(1, heads, queries, D)
            k, v = torch.randn(1, kv, keys, D), torch.randn(1, kv, keys, D)
            k_all, v_all = (t.repeat_interleave(heads // kv, 1) for t in (k, v))
            want = F.scaled_dot_product_attention(q, k_all, v_all)
            assert close(layer_ops.attention(q, k, v), want, 1e-5)
        x = torch.randn(3, 2 * 1056) * 4
        gate, up = x.chunk(2, dim=-1)
        assert close(layer_ops.swiglu(x), F.silu(gate) * up, 1e-6)
    finally:
        layer_ops.most_queries.cache_clear()  # the build's own, asked again after the test


def test_attention_in_bfloat16(attention):
    torch.manual_seed(5)
    q = torch.randn(1, 6, 11, 64).bfloat16()
    k, v = (torch.randn(1, 6, 512, 64) * 2).bfloat16(), torch.randn(1, 6, 512, 64).bfloat16()
    got = layer_ops.attention(q, k, v)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float()).bfloat16()  # rounded once
    assert got is not None and got.dtype == torch.bfloat16
    assert (got.float() - want.float()).abs().max() <= 2**-8 * want.float().abs().max()  # one step


def test_attention_leaves_what_it_does_not_take_to_pytorch(built):
    keys = torch.randn(1, 2, 9, 64)
    more = layer_ops.most_queries() // 7 + 1  # positions: 7 query heads a key/value head
    assert layer_ops.attention(torch.randn(1, 14, more, 64), keys, keys) is None  # too many queries
    keys = torch.randn(1, 2, 9, 24)
    assert layer_ops.attention(torch.randn(1, 2, 4, 24), keys, keys) is None  # head size 24


def small_decoder() -> decoder.Decoder:
    config = decoder.DecoderConfig(
        vocab_size=97, hidden_size=64, intermediate_size=96, num_layers=3, num_heads=4, num_kv_heads=2,
        head_dim=16, rope_theta=10000.0, norm_eps=1e-6, qkv_bias=True, tied_head=False,
    )  # fmt: skip
    torch.manual_seed(0)
    network = decoder.Decoder(config)
    for parameter in network.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    return network.eval()


def test_the_decoder_computes_the_same_with_them_and_without(built, monkeypatch):
    network = small_decoder()
    ids = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(1))
    positions = torch.tensor([3, 4, 5, 30])

    def passes():
        cache, changed = network.new_cache(), ids.clone()
        full = network.logits_at(ids, positions, cache, refresh=True)
        changed[:, positions] = 7
        span = network.logits_at(changed, positions, cache, refresh=False)
        return network(changed), full, span

    with_them = passes()
    monkeypatch.setattr(layer_ops, "applies", lambda *tensors, bfloat16=False: False)
    without = passes()
    for got, want in zip(with_them, without):
        assert close(got, want, 1e-5)


def test_the_switch_turns_them_off(monkeypatch):
    monkeypatch.setenv(layer_ops.SWITCH, "pytorch")
    layer_ops.build.cache_clear()
    try:
        assert layer_ops.build().reason == "INFILL_LAYER_OPS=pytorch"
        assert not layer_ops.applies(torch.randn(2, 3))
    finally:
        layer_ops.build.cache_clear()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_shipped_family_computes_the_same_with_them_and_without(built, monkeypatch, dtype):
    from infill.models.native.model import InfillConfig, InfillModel, LayerCache

    torch.manual_seed(0)
    config = InfillConfig(vocab_size=120, hidden_size=128, num_layers=2, num_heads=2, context_length=64)
    network = InfillModel(config).eval().to(dtype)
    ids = torch.randint(3, 120, (2, 40), generator=torch.Generator().manual_seed(2))
    positions = torch.tensor([10, 11, 12])

    @torch.no_grad()
    def passes():
        cache, changed = [LayerCache() for _ in network.blocks], ids.clone()
        full = network.cached_logits(ids, positions, cache, refresh=True)
        changed[:, positions] = 5
        span = network.cached_logits(changed, positions, cache, refresh=False)
        return network(changed).logits, full, span

    with_them = passes()
    monkeypatch.setattr(layer_ops, "applies", lambda *tensors, bfloat16=False: False)
    without = passes()
    for got, want in zip(with_them, without):
        if dtype == torch.float32:
            assert close(got, want, 1e-5)
        else:  # bfloat16 rounds where the operations differ: a few of its steps at most
            assert close(got.float(), want.float(), 2**-5)
    if dtype == torch.bfloat16:  # the rotation alone changes nothing: it rounds as PyTorch's does
        turned, rotate = [], layer_ops.rotate_halves_

        def rotation_only(*tensors, bfloat16=False):  # (qkv, cos, sin): the rotation's question
            return len(tensors) == 3 and tensors[0].dim() == 4 and tensors[1].dim() <= 2

        monkeypatch.setattr(layer_ops, "applies", rotation_only)
        monkeypatch.setattr(layer_ops, "rotate_halves_", lambda *args: turned.append(1) or rotate(*args))
        for got, want in zip(passes(), without):
            assert torch.equal(got, want)
        assert turned


def test_under_autocast_and_across_dtypes_pytorch_computes(built, monkeypatch):
    """Training's held-out loss runs the shipped family under bfloat16 autocast, where a layer's
    sum meets a float32 residual: these operations must not take mixed or autocast dtypes."""
    from infill.models.native.model import InfillConfig, InfillModel

    assert not layer_ops.applies(torch.randn(2, 3), torch.randn(2, 3).bfloat16(), bfloat16=True)
    torch.manual_seed(0)
    network = InfillModel(InfillConfig(vocab_size=120, hidden_size=64, num_layers=2, num_heads=2)).eval()
    ids = torch.randint(3, 120, (2, 40), generator=torch.Generator().manual_seed(3))

    @torch.no_grad()
    def logits():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return network(ids).logits.float()

    with_them = logits()
    monkeypatch.setattr(layer_ops, "applies", lambda *tensors, bfloat16=False: False)
    assert torch.isfinite(with_them).all() and torch.equal(with_them, logits())


def test_a_source_that_cannot_be_read_builds_nothing_and_says_why(tmp_path):
    """An install without a C source keeps PyTorch's operations (and the reason), not an error."""
    built = c_build.build_library(tmp_path / "gone.c")
    assert built.library is None
    if platform.system() == "Linux" and platform.machine() == "x86_64":  # (elsewhere nothing is built)
        assert "cannot be read" in built.reason
