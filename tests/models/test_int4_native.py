"""infill's own 4-bit product (infill.models.int4_native): the kernel built from its C source computes
what the quantization in tests/int4_reference.py computes (weights min-max by groups, activations
int8 by blocks of 32), for every row count around its blocking, every group size and odd shapes,
built for this CPU and for the CPUs without AVX-512 that it can stand in for (AVX-VNNI, AVX2); its
weights come back as `dequantized()` says; threads change nothing; and where it cannot be built (no
compiler, a CPU with neither AVX-512 VNNI nor AVX2, INFILL_INT4_KERNEL=pytorch) 4-bit layers keep
PyTorch's kernel, with the reason, and the build is never half-written.

The kernel's agreement with float32 on the families' tiny checkpoints is tested with PyTorch's in
tests/models/test_int4.py (its reference network follows the kernel this CPU runs).
"""

from __future__ import annotations

import pytest
import torch
from external import require_built, require_program
from int4_builds import OTHER_CPUS, built_for
from int4_reference import int8_blocks, reference_int4
from torch import nn

from infill.models import int4_native, quantize
from infill.models.int4 import Int4Linear
from infill.models.int4_native import NativeInt4Linear

CPU_REASONS = ("this CPU has neither AVX-512 VNNI nor AVX2", "built for Linux on x86-64 only")


@pytest.fixture
def native():
    """The built kernel; skipped where this CPU cannot run it, a failure where it should build."""
    return require_built(int4_native.build, "infill's 4-bit kernel", CPU_REASONS)


@pytest.fixture
def fresh_build(tmp_path, monkeypatch):
    """`int4_native.build()` from nothing, into a cache folder of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    int4_native.build.cache_clear()
    yield tmp_path / "infill" / "kernels"
    int4_native.build.cache_clear()


def expected(x: torch.Tensor, weight: torch.Tensor, group: int) -> torch.Tensor:
    return (int8_blocks(x).double() @ reference_int4(weight, group, native=True).double().t()).float()


@pytest.mark.parametrize("group", [32, 64, 128, 256])
def test_the_product_is_the_quantized_product(native, group):
    torch.manual_seed(group)
    weight = torch.randn(48, 512) * 0.02  # three tiles of 16 outputs
    layer = NativeInt4Linear(weight, None, group)
    assert layer.group_size == group
    assert torch.allclose(layer.dequantized(), reference_int4(weight, group, native=True), atol=1e-6)
    # blocks of 4, of 8 from 32 rows on; the tails; tiles in groups from 64 rows on
    for rows in (1, 3, 4, 5, 6, 7, 8, 9, 17, 21, 33, 41, 47, 64, 73):
        x = torch.randn(rows, 512)
        want = expected(x, weight, group)
        assert (layer(x) - want).abs().max() <= 1e-5 * want.abs().max(), rows


@pytest.mark.parametrize("march", sorted(OTHER_CPUS))
def test_the_256_bit_paths_compute_the_same_product(native, march, tmp_path):
    library = built_for(march, tmp_path)
    torch.manual_seed(3)
    weight = torch.randn(48, 256) * 0.02
    layer = NativeInt4Linear(weight, None, 64)
    for rows in (1, 2, 3, 4, 5, 7, 64, 67):  # around its 2 rows a load of weights; tiles in groups from 64
        x = torch.randn(rows, 256)
        want = expected(x, weight, 64)
        got = int4_native.matmul(x, layer.tiles, layer.scales, layer.offsets, library)
        assert (got - want).abs().max() <= 1e-5 * want.abs().max(), rows
        # and what this CPU's build gives, to the bit: the integer sums are exact in every build,
        # and each float step is rounded alike (no multiply-add left to the compiler to fuse)
        assert torch.equal(got, layer(x)), rows


@pytest.mark.parametrize("march", ["native", *sorted(OTHER_CPUS)])
@pytest.mark.parametrize("sign", [1, -1])
def test_the_integer_sums_at_their_largest(native, march, sign, tmp_path):
    """Every weight at the top of its 4-bit range (15) but one a group, every activation at +-127:
    the sums the kernel keeps in integers are at their largest (AVX2's int16 sums of a block of
    32 inputs at 16 x 15 x 127 = 30,480, just under 32,767) and still exact."""
    library = built_for(march, tmp_path)
    weight = torch.ones(32, 256)
    weight[:, ::64] = -1.0  # the group's low end: q = 0 there, 15 everywhere else
    layer = NativeInt4Linear(weight, None, 64)
    for rows in (1, 2, 4, 5, 9, 33):
        x = torch.full((rows, 256), float(sign))
        want = expected(x, weight, 64)
        got = int4_native.matmul(x, layer.tiles, layer.scales, layer.offsets, library)
        assert (got - want).abs().max() <= 1e-5 * want.abs().max(), rows


def test_odd_shapes_batches_bias_and_dtypes(native):
    torch.manual_seed(0)
    weight, bias = torch.randn(80, 96, dtype=torch.bfloat16), torch.randn(80)  # 96: groups of 32
    layer = NativeInt4Linear(weight, bias)
    assert layer.group_size == 32
    x = torch.randn(2, 3, 96)
    want = expected(x.reshape(6, 96), weight, 32).reshape(2, 3, 80) + bias
    assert torch.allclose(layer(x), want, atol=1e-4)
    assert layer(x.bfloat16()).dtype == torch.bfloat16
    zeros = torch.zeros(2, 96)  # a block of zeros has no scale: it contributes nothing
    assert torch.equal(layer(zeros), bias.expand(2, 80))
    assert layer(torch.zeros(0, 96)).shape == (0, 80)  # no rows: nothing multiplied
    with pytest.raises(ValueError, match="cannot be packed"):
        NativeInt4Linear(torch.zeros(24, 64), None)  # outputs not whole tiles of 16


def test_the_error_against_float_weights_is_the_quantizations(native):
    """Against the float layer: about what 4-bit weights alone cost, plus int8 activations' 0.5%."""
    torch.manual_seed(1)
    weight = torch.randn(256, 1024) * 0.02
    x = torch.randn(16, 1024)
    exact = x @ weight.t()
    error = lambda y: ((y - exact).norm() / exact.norm()).item()  # noqa: E731
    native_error = error(NativeInt4Linear(weight, None)(x))
    pytorch_error = error(Int4Linear(weight, None)(x).float())
    assert 0.05 < pytorch_error < native_error < pytorch_error + 0.02, (native_error, pytorch_error)


@pytest.mark.parametrize("rows", [7, 70])  # tiles one by one; in groups (from 64 rows)
def test_threads_change_nothing(native, rows):
    torch.manual_seed(2)
    layer = NativeInt4Linear(torch.randn(21 * 16, 256), None)  # 21 tiles: a group of 16 and a short one
    x = torch.randn(rows, 256)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = layer(x)
        torch.set_num_threads(3)
        three = layer(x)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, three)


def test_a_rows_numbers_do_not_depend_on_the_other_rows(native):
    """Each row of activations is the same sums in the same order, however many rows a product
    has and however its tiles are taken (one by one, or in groups from 64 rows): so passes over a
    few positions and over the whole canvas agree to the bit where they compute the same row."""
    torch.manual_seed(4)
    layer = NativeInt4Linear(torch.randn(40 * 16, 384) * 0.02, None)
    x = torch.randn(130, 384)
    whole = layer(x)
    for start, rows in ((0, 1), (3, 5), (10, 33), (40, 63), (50, 64), (60, 70)):
        assert torch.equal(layer(x[start : start + rows]), whole[start : start + rows]), (start, rows)


def test_quantizing_picks_the_kernel_and_the_switch_keeps_pytorchs(native, fresh_build, monkeypatch):
    linear = nn.Linear(64, 32)
    assert isinstance(quantize.int4_layer(linear), NativeInt4Linear)
    assert int4_native.description().startswith("infill's kernel (AVX")
    assert list(fresh_build.glob("int4_native-*.so"))  # built into the cache folder, nothing else
    assert not list(fresh_build.glob("*.tmp")) and not list(fresh_build.glob("*.failed"))
    monkeypatch.setenv(int4_native.SWITCH, "pytorch")
    int4_native.build.cache_clear()
    assert int4_native.build().reason == "INFILL_INT4_KERNEL=pytorch"
    assert int4_native.description() == "PyTorch's kernel (infill's own: INFILL_INT4_KERNEL=pytorch)"
    assert type(quantize.int4_layer(linear)) is Int4Linear


def test_where_it_cannot_build_the_reason_is_kept_and_pytorchs_kernel_runs(fresh_build, monkeypatch):
    require_program("cc", install="apt-get install -y gcc")
    monkeypatch.setattr(int4_native, "FLAGS", ("-O2", "-march=x86-64", "-shared", "-fPIC"))  # SSE2 only
    build = int4_native.build()
    assert build.library is None and build.reason == "this CPU has neither AVX-512 VNNI nor AVX2"
    assert [path.suffix for path in fresh_build.iterdir()] == [".failed"]  # no library, no partial one
    int4_native.build.cache_clear()
    assert int4_native.build().reason == build.reason  # read back, not built again
    assert type(quantize.int4_layer(nn.Linear(64, 32))) is Int4Linear


def test_without_a_compiler(fresh_build, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-anywhere")
    assert int4_native.build().reason == "no C compiler (cc) to build it with"
    assert not fresh_build.exists() or not list(fresh_build.iterdir())


def test_a_compiler_that_fails_is_tried_again_in_the_next_process(fresh_build, monkeypatch):
    monkeypatch.setenv("CC", "false")  # on PATH, and fails
    assert int4_native.build().reason.startswith("the C compiler failed")
    assert not list(fresh_build.iterdir())  # no marker: installing what was missing is enough
