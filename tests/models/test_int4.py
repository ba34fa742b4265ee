"""4-bit weights on the CPU (infill.models.int4, `--quantize int4`): the packed layer computes what the
min-max group quantization in tests/int4_reference.py computes; every packable linear layer of each
family's tiny checkpoint is 4-bit and the network predicts as the float32 one does with those
weights; against float32 itself, the agreement at masked positions and the largest log-probability
difference are reported and bounded; the weights are packed from the checkpoint's bfloat16 as they
load; "auto" picks int4 for big models on the CPU; where it cannot run it is refused.

Tiny random checkpoints have near-ties among their likeliest tokens almost everywhere (no masked
position of these canvases has a margin of 0.5 between its two best log-probabilities), so
agreement with float32 says little there: what is asserted against float32 is the log-probability
difference (int4 0.21-0.25 on these canvases, int8 0.04-0.05, a broken quantization several
units); the token-for-token check is against the reference network below.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from checkpoints import SAMPLE, agreement, masked_canvas, write_checkpoint
from int4_reference import int8_blocks, reference_int4
from torch import nn

import infill.models.int4 as int4
from infill.cli import EXIT_MODEL, main
from infill.errors import ModelError
from infill.models import c_build, int4_native, load, quantize
from infill.models.int4 import Int4Layer, Int4Linear, group_size_for
from infill.models.quantize import Int8Embedding, chosen_quantization, quantized_kind, quantized_layers

FAMILIES = ["Dream", "DreamOn", "LLaDA", "Open-dCoder"]
LOGP_BOUND = 0.5  # largest |log p(int4) - log p(float32)| at masked positions of the tiny checkpoints


def reference_int8_rows(weight: torch.Tensor) -> torch.Tensor:
    """Symmetric int8 rows (one scale per row, |max| / 127.5), turned back into float32."""
    scale = (weight.detach().float().abs().amax(-1, keepdim=True) / 127.5).clamp(min=torch.finfo().eps)
    return torch.clamp(torch.round(weight.detach().float() / scale), -128, 127) * scale


class RoundedInputLinear(nn.Module):
    """A float linear layer on given weights whose inputs are rounded first as the kernel takes
    them: to bfloat16 (PyTorch's) or to int8 blocks (infill's own, `native`)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, native: bool):
        super().__init__()
        self.weight, self.bias, self.native = weight, bias, native

    def forward(self, x):
        return F.linear(int8_blocks(x) if self.native else x.bfloat16().float(), self.weight, self.bias)


def reference_network(network: nn.Module) -> nn.Module:
    """`network` (a float32 Decoder) with the weights int4 gives each packable linear layer and the
    embedding as int8 rows, computed by the references above, for the kernel this CPU runs."""
    native = int4_native.available()
    network.untie_head()
    for name, module in list(network.named_modules()):
        if isinstance(module, nn.Linear) and module.out_features % 16 == 0:
            group = group_size_for(module.in_features)
            swap = RoundedInputLinear(reference_int4(module.weight, group, native), module.bias, native)
            parent, _, attribute = name.rpartition(".")
            setattr(network.get_submodule(parent), attribute, swap)
    network.embed.weight = nn.Parameter(reference_int8_rows(network.embed.weight), requires_grad=False)
    return network


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("int4")

    def folder(family: str):
        if not (root / family).exists():
            write_checkpoint(root / family, family)
        return root / family

    return folder


def test_a_packed_layer_computes_the_reference_quantization():
    torch.manual_seed(0)
    for rows, columns, group in [(48, 256, 128), (32, 96, 32), (1040, 384, 128)]:
        weight = torch.randn(rows, columns) * 0.02
        original = weight.clone()
        layer = Int4Linear(weight, torch.randn(rows), group)
        assert torch.equal(weight, original)  # quantizing leaves the float weights alone
        expected = reference_int4(weight, layer.group_size)
        assert (layer.dequantized() - expected).abs().max() < 1e-2 * weight.abs().max()  # bfloat16 output
        groups = weight.reshape(rows, -1, group)
        step = (groups.amax(-1) - groups.amin(-1)) / 15
        assert (layer.dequantized() - weight).abs().max() <= 0.51 * step.max() + 1e-4  # half a step off
        x = torch.randn(3, 5, columns)
        want = F.linear(x.bfloat16().float(), expected, layer.bias)
        assert (layer(x) - want).abs().max() < 1e-2 * want.abs().max()  # a bfloat16 output
        assert layer.nbytes() < rows * columns  # 4.25 bits a weight, not 8


def test_shapes_the_kernel_cannot_pack():
    assert group_size_for(4096) == 128 and group_size_for(96) == 32 and group_size_for(100) is None
    assert group_size_for(4096, preferred=64) == 64
    with pytest.raises(ValueError, match="cannot be packed"):
        Int4Linear(torch.zeros(24, 64), None)  # outputs not a multiple of 16
    with pytest.raises(ValueError, match="cannot be packed"):
        Int4Linear(torch.zeros(16, 100), None)  # no group size divides 100


@pytest.mark.parametrize("family", FAMILIES)
def test_int4_predicts_as_its_reference_and_close_to_float32(family, tiny):
    folder = tiny(family)
    floats = load(folder, "cpu", "float32")
    int4s = load(folder, "cpu", "float32", quantize="int4")
    reference = reference_network(load(folder, "cpu", "float32").network)
    ids, masked = masked_canvas(floats, SAMPLE, 200)
    got = int4s.logits(ids)
    expected, rows = reference(ids), int4s.network(ids)  # the networks' rows, before any shift
    assert agreement(expected[masked], rows[masked]) >= 0.95
    assert (expected - rows).abs().max() < 0.05 * expected.abs().max()
    full = floats.logits(ids).float().log_softmax(-1)
    logp = got.float().log_softmax(-1)
    difference = (full[masked] - logp[masked]).abs().max().item()
    print(f"{family}: int4 agrees with float32 at {agreement(full[masked], logp[masked]):.0%} of masked "
          f"positions; largest log-probability difference {difference:.3f}")  # fmt: skip
    assert 1e-3 < difference < LOGP_BOUND
    positions = masked[0].nonzero().flatten()
    cache = int4s.new_cache()
    refreshed = int4s.cached_logits(ids, positions, cache, refresh=True)
    partial = int4s.cached_logits(ids, positions, cache, refresh=False)
    # the full pass multiplies 200 rows with unpacked weights, the refreshed one its few output
    # rows with the kernel: the same numbers, rounded to bfloat16 at different places
    assert (refreshed - got[0, positions]).abs().max() < 1e-2 * got.abs().max()
    assert (partial.float().log_softmax(-1) - full[0, positions]).abs().max() < LOGP_BOUND


@pytest.mark.parametrize("family", ["Dream", "Open-dCoder"])
def test_every_packable_layer_is_int4_and_packed_from_bfloat16(family, tiny, monkeypatch):
    packed_from = []
    module, function = (int4_native, "pack") if int4_native.available() else (int4, "quantize_int4")
    packing = getattr(module, function)
    monkeypatch.setattr(module, function, lambda w, g: packed_from.append(w.dtype) or packing(w, g))
    network = load(tiny(family), "cpu", "float32", quantize="int4").network
    assert quantized_kind(network) == "int4"
    linear = [name for name, m in network.named_modules() if isinstance(m, Int4Layer)]
    assert "head" in linear and len(linear) == 1 + 4 * len(network.layers)  # qkv, o, gate_up, down
    assert not [m for m in network.modules() if type(m) in (nn.Linear, nn.Embedding)]
    assert isinstance(network.embed, Int8Embedding) and network.embed.rows.dtype == torch.int8
    assert set(packed_from) == {torch.bfloat16}  # as stored: no float32 copy of a packed weight
    assert sorted(quantized_layers(network)) == sorted([*linear, "embed"])


def test_the_shipped_model_in_int4():
    floats, int4s = load(None, "cpu", "float32"), load(None, "cpu", quantize="int4")
    assert quantized_kind(int4s.model) == "int4"
    ids, masked = masked_canvas(floats, SAMPLE * 3, 500)
    assert agreement(floats.logits(ids)[masked], int4s.logits(ids)[masked]) >= 0.8


def test_auto_takes_the_fastest_form_that_fits_in_memory_else_int4(tiny, monkeypatch, capsys):
    folder = tiny("Dream")  # 9.8M parameters
    assert quantized_kind(load(folder, "cpu", "float32").network) == "none"  # small: float
    monkeypatch.setattr(quantize, "QUANTIZE_FROM", 1_000_000)  # as if the tiny model were big
    monkeypatch.setattr(quantize, "machine_memory", lambda: 2**40)
    assert quantized_kind(load(folder, "cpu", "float32").network) == "int8"
    monkeypatch.setattr(quantize, "machine_memory", lambda: 16 * 2**20)  # int8 would take 10 of 16 MiB
    capsys.readouterr()
    assert quantized_kind(load(folder, "cpu", "float32").network) == "int4"
    assert "infill: int4 weights (--quantize auto" in capsys.readouterr().err
    network = load(folder, "cpu", "float32", quantize="none").network
    cpu, cuda, mib = torch.device("cpu"), torch.device("cuda"), 2**20
    assert chosen_quantization("auto", network, cpu, torch.bfloat16, memory=64 * mib) == "none"  # 20 of 32
    assert chosen_quantization("auto", network, cpu, torch.bfloat16, memory=32 * mib) == "int4"
    assert chosen_quantization("auto", network, cpu, torch.float32, memory=32 * mib) == "int8"
    assert chosen_quantization("auto", network, cuda, torch.bfloat16, memory=2**40) == "none"
    assert chosen_quantization("int4", network, cpu, torch.float32) == "int4"


def test_int4_is_refused_where_it_cannot_run(tmp_path, capsys):
    path = tmp_path / "sample.py"
    path.write_text("def f(x):\n    return x + 1\n")
    assert main([str(path), "--lines", "2", "--quantize", "int4", "--device", "mps"]) == EXIT_MODEL
    assert "--quantize int4 runs on cpu and cuda" in capsys.readouterr().err
    quantize.check_quantize("int4", "cuda")  # CUDA has a 4-bit kernel of its own: not refused
    with pytest.raises(ModelError, match="float32 or bfloat16 networks"):
        load(None, "cpu", "float16", quantize="int4")
    with pytest.raises(ModelError, match="unknown quantization 'int2'"):
        load(None, "cpu", quantize="int2")
    assert path.read_text() == "def f(x):\n    return x + 1\n"


def test_a_fill_with_int4_weights_from_the_command_line(tmp_path, capsys):
    path = tmp_path / "sample.py"
    text = "def add(a, b):\n    total = a + b\n    return total\n"
    path.write_text(text)
    assert main([str(path), "--lines", "2", "--quantize", "int4", "--json"]) == 0
    assert '"edits"' in capsys.readouterr().out and path.read_text() == text


def test_many_rows_multiply_unpacked_weights_as_the_kernel_does():
    """From UNPACK_ROWS rows on, a layer turns its packed weights back into bfloat16 (reading the
    kernel's layout) and multiplies with the bfloat16 product: the weights are the kernel's own
    (the kernel applied to the identity) and the products agree to bfloat16 rounding."""
    if int4.packed_block_width() is None:
        pytest.skip("this CPU's packed layout is not one Int4Linear.unpacked reads: the kernel does it all")
    torch.manual_seed(0)
    for rows, columns, group in [(4096, 256, 128), (192, 1024, 64), (64, 384, 128)]:
        layer = Int4Linear(torch.randn(rows, columns) * 0.02, torch.randn(rows), group)
        assert layer.block_width == int4.packed_block_width()
        kernels = layer.dequantized()
        unpacked = layer.unpacked(0, rows).float().t()
        assert (unpacked - kernels).abs().max() <= 2**-7 * kernels.abs().max()  # bfloat16 rounding
        x = torch.randn(int4.UNPACK_ROWS, columns)
        many = layer(x)
        assert torch.equal(many, layer.unpacked_product(x.bfloat16()).float() + layer.bias)
        kernel = torch.ops.aten._weight_int4pack_mm_for_cpu(
            x.bfloat16(), layer.packed, layer.group_size, layer.scales_and_zeros
        )
        assert (many - layer.bias - kernel.float()).abs().max() < 1e-2 * kernel.float().abs().max()
        few = x[: int4.UNPACK_ROWS - 1]
        assert torch.equal(layer(few), kernel[: len(few)].float() + layer.bias)  # the kernel's own


def test_the_product_is_split_into_blocks_of_output_rows(monkeypatch):
    """Unpacking a few blocks at a time gives what unpacking the whole layer at once gives."""
    if int4.packed_block_width() is None:
        pytest.skip("this CPU's packed layout is not one Int4Linear.unpacked reads")
    torch.manual_seed(1)
    layer = Int4Linear(torch.randn(1024, 512) * 0.02, None)
    x = torch.randn(200, 512).bfloat16()
    whole = x @ layer.unpacked(0, 1024)
    monkeypatch.setattr(int4, "UNPACK_WEIGHTS", 3 * 512 * layer.block_width)  # 3 blocks, then 3, ..., 1
    assert torch.equal(layer.unpacked_product(x), whole)


def test_a_layer_not_in_whole_blocks_uses_the_kernel():
    torch.manual_seed(2)
    layer = Int4Linear(torch.randn(48, 256) * 0.02, None)  # 48 outputs: no whole block of 32 or 64
    assert layer.block_width is None
    x = torch.randn(int4.UNPACK_ROWS, 256)
    kernel = torch.ops.aten._weight_int4pack_mm_for_cpu(
        x.bfloat16(), layer.packed, layer.group_size, layer.scales_and_zeros
    )
    assert torch.equal(layer(x), kernel.float())


@pytest.mark.parametrize("capability, width", [("avx2", 32), ("avx512", 64)])
def test_the_packed_layout_is_read_for_each_cpu_capability(capability, width):
    """PyTorch packs 4-bit weights differently for AVX2 and AVX-512 (ATEN_CPU_CAPABILITY picks the
    kernels, as the CPU would): the probe finds each, and the unpacked weights are the kernel's."""
    script = (
        "import torch; from infill.models import int4; torch.manual_seed(0)\n"
        "layer = int4.Int4Linear(torch.randn(256, 512) * 0.02, None)\n"
        "kernels = layer.dequantized()\n"
        "unpacked = layer.unpacked(0, 256).float().t()\n"
        "print(int4.packed_block_width(), float((unpacked - kernels).abs().max() / kernels.abs().max()))\n"
    )
    if capability == "avx512" and "avx512f" not in c_build.cpu_flags().split():
        pytest.skip("NOT TESTED: this CPU has no AVX-512 (PyTorch's AVX-512 kernels would stop on SIGILL)")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    found, error = done.stdout.split()
    if capability == "avx512" and found == "32":
        pytest.skip("NOT TESTED: PyTorch fell back to its AVX2 kernels on this CPU")
    assert int(found) == width
    assert float(error) <= 2**-7


def test_cuda_packing_bytes_and_tiles():
    """What CUDA's packing is given (its kernel runs on a GPU only: docs/gpu-recipe.md's check
    runs it, and `cuda_high_nibble_first` finds the byte order there with a probe): two inputs a
    byte in either order, and the tile parameter the layer's inputs allow."""
    q = torch.tensor([[1, 2, 3, 4], [15, 0, 7, 8]], dtype=torch.int32)
    assert int4.nibble_bytes(q, high_first=True).tolist() == [[0x12, 0x34], [0xF0, 0x78]]
    assert int4.nibble_bytes(q, high_first=False).tolist() == [[0x21, 0x43], [0x0F, 0x87]]
    assert int4.nibble_bytes(q, True).dtype == torch.uint8
    assert [int4.cuda_inner_k_tiles(n) for n in (3584, 896, 96, 64, 32)] == [8, 8, 2, 4, 2]


def test_int4_on_cuda_keeps_the_embedding_as_stored(tiny):
    """On CUDA the linear layers are packed and the embedding table stays as stored (its int8 rows
    are the CPU's quantized tensors). The quantizer is asked for CUDA's plan and run on the CPU's
    tensors: which layers are packed does not depend on where they are."""
    network = load(tiny("Dream"), "cpu", "bfloat16").network
    loading = quantize.quantizing("int4", network, torch.device("cuda"), torch.bfloat16)
    for name, _ in list(network.named_parameters()):
        loading.loaded(name)
    assert type(network.embed) is nn.Embedding and network.embed.weight.dtype == torch.bfloat16
    linear = [name for name, m in network.named_modules() if isinstance(m, Int4Layer)]
    assert "head" in linear and len(linear) == 1 + 4 * len(network.layers)
