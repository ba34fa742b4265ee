"""infill's bfloat16 product (infill.models.bf16_native) against PyTorch's: the same sums up to
float32 rounding, rounded to bfloat16 once; a row's numbers whatever rows are beside it; and the
shipped model's layers swapped for it, in bfloat16, predicting as with PyTorch's products."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from external import require_built
from torch import nn

import infill.models.bf16_native as bf16_native
from infill.models import load
from infill.models.c_build import Build
from infill.models.native import load_backend
from infill.models.native.model import LayerCache

CPU_REASONS = (bf16_native.NO_INSTRUCTIONS, "built for Linux on x86-64 only")


@pytest.fixture(scope="module", autouse=True)  # module: before the shipped model's fixture below
def kernel():
    return require_built(bf16_native.build, "infill's bfloat16 kernel", CPU_REASONS)


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """The product in float64 of the bfloat16 numbers (no rounding at all)."""
    y = x.double() @ weight.double().T
    return y if bias is None else y + bias.double()


@pytest.mark.parametrize("rows", [1, 5, 6, 7, 13, 64, 130])
@pytest.mark.parametrize("shape", [(384, 384), (100, 30), (2112, 384), (70, 1056)])
def test_the_product_is_the_exact_sums_rounded_to_bfloat16(rows, shape):
    torch.manual_seed(rows)
    out_features, in_features = shape
    x = torch.randn(rows, in_features).bfloat16()
    weight, bias = torch.randn(shape).bfloat16(), torch.randn(out_features).bfloat16()
    ours = bf16_native.linear(x, bf16_native.pack(weight), out_features, bias)
    exact = reference(x, weight, bias)
    assert ours.dtype == torch.bfloat16 and ours.shape == (rows, out_features)
    # one rounding to bfloat16 (half a unit in the last of 8 bits) and float32's sums
    bound = exact.abs() * 2.0**-8 + 1e-5 * in_features
    assert ((ours.double() - exact).abs() <= bound).all()
    theirs = F.linear(x, weight, bias)  # PyTorch's: float32 sums too, rounded once
    assert (ours == theirs).float().mean() > 0.99


def test_a_rows_numbers_do_not_depend_on_the_rows_beside_it():
    """Each output's sum runs over the inputs in one order: a canvas alone or in a batch."""
    torch.manual_seed(0)
    weight = torch.randn(200, 384).bfloat16()
    packed = bf16_native.pack(weight)
    x = torch.randn(23, 384).bfloat16()
    together = bf16_native.linear(x, packed, 200, None)
    for start, stop in [(0, 1), (3, 10), (5, 23), (12, 13), (0, 23)]:
        assert torch.equal(bf16_native.linear(x[start:stop], packed, 200, None), together[start:stop])


def test_leading_dimensions_are_kept_and_an_empty_batch_is_empty():
    weight = torch.randn(64, 32).bfloat16()
    packed = bf16_native.pack(weight)
    x = torch.randn(2, 3, 32).bfloat16()
    assert bf16_native.linear(x, packed, 64, None).shape == (2, 3, 64)
    assert bf16_native.linear(x[:, :0], packed, 64, None).shape == (2, 0, 64)


def layer(in_features=48, out_features=80, bias=True) -> nn.Linear:
    torch.manual_seed(1)
    return nn.Linear(in_features, out_features, bias=bias).to(torch.bfloat16)


def test_the_swapped_layer_keeps_its_parameters_and_its_state_dict():
    plain = layer()
    network = nn.Sequential(plain)
    assert bf16_native.pack_network(network) == 1
    swapped = network[0]
    assert isinstance(swapped, bf16_native.Bf16Linear)
    assert swapped.weight is plain.weight and swapped.bias is plain.bias
    assert list(network.state_dict()) == ["0.weight", "0.bias"]  # the packed copy is not saved


def test_a_weight_changed_in_place_is_packed_again():
    network = nn.Sequential(layer())
    bf16_native.pack_network(network)
    x = torch.randn(5, 48).bfloat16()
    with torch.no_grad():
        before = network(x)
        network[0].weight.mul_(-1)
        after = network(x)
    expected = F.linear(x, network[0].weight, network[0].bias)
    assert not torch.equal(before, after)
    assert ((after.float() - expected.float()).abs() <= expected.float().abs() * 2**-7 + 1e-2).all()


def test_gradients_autocast_and_float32_take_pytorchs_product(monkeypatch):
    network = nn.Sequential(layer())
    bf16_native.pack_network(network)
    calls = []
    monkeypatch.setattr(bf16_native, "linear", lambda *a: calls.append(a) or pytest.fail("kernel ran"))
    x = torch.randn(5, 48).bfloat16()
    network(x).float().sum().backward()  # gradients wanted: PyTorch's product, which has them
    assert network[0].weight.grad is not None
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        network(x)
    float_layer = nn.Sequential(nn.Linear(48, 8))
    assert bf16_native.pack_network(float_layer) == 0  # float32 weights stay PyTorch's
    assert not calls


def test_without_the_kernel_nothing_is_swapped(monkeypatch):
    monkeypatch.setattr(bf16_native, "build", lambda: Build(None, "INFILL_BF16_KERNEL=pytorch"))
    network = nn.Sequential(layer())
    assert bf16_native.pack_network(network) == 0 and type(network[0]) is nn.Linear


def test_odd_inputs_are_left_to_pytorch():
    assert bf16_native.pack_network(nn.Sequential(layer(in_features=33))) == 0


@pytest.fixture(scope="module")
def shipped_bf16():
    """The shipped model in bfloat16, as PyTorch runs it and as infill's kernel does."""
    theirs = load_backend(dtype=torch.bfloat16)
    ours = load_backend(dtype=torch.bfloat16)
    assert bf16_native.pack_network(ours.model) == 6 * 4 + 1  # every layer and the output layer
    return theirs.model, ours.model


def test_the_shipped_model_predicts_as_with_pytorchs_products(shipped_bf16):
    theirs, ours = shipped_bf16
    assert ours.lm_head.weight is ours.embed.weight  # still tied
    torch.manual_seed(0)
    ids = torch.randint(3, 8192, (2, 200))
    ids[:, 50:70] = 1  # masks
    positions = torch.arange(50, 70)
    full, span = [], []
    with torch.no_grad():
        for model in (theirs, ours):
            full.append(model(ids).logits.float())
            cache = [LayerCache() for _ in model.blocks]
            model.cached_logits(ids, positions, cache, refresh=True)
            span.append(model.cached_logits(ids, positions, cache, refresh=False).float())
    for a, b in (full, span):  # bfloat16 activations: a few units of their last bit apart
        assert (a - b).abs().max() <= 0.05 * a.abs().max()
        assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.97


def test_loading_the_shipped_model_in_bfloat16_uses_the_kernel():
    backend = load(None, "cpu", "bfloat16")
    layers = [m for m in backend.model.modules() if isinstance(m, nn.Linear)]
    assert layers and all(isinstance(m, bf16_native.Bf16Linear) for m in layers)
    float32 = load(None, "cpu", "float32")
    assert not any(isinstance(m, bf16_native.Bf16Linear) for m in float32.model.modules())
