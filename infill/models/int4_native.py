"""infill's own 4-bit product for the CPU (`NativeInt4Linear`): 4-bit weights times 8-bit
activations in integer dot products, from the C source beside this file (int4_native.c), built at
first use for the CPU it runs on (`-march=native`: AVX-512 VNNI, else AVX-VNNI or AVX2) and kept in
infill's cache folder. Where it cannot be built (no C compiler, a CPU with neither, not Linux on
x86-64) or `INFILL_INT4_KERNEL=pytorch` says so, 4-bit layers keep PyTorch's kernel
(`infill.models.int4.Int4Linear`); `build().reason` says why.

Why a kernel of our own: PyTorch's 4-bit CPU kernel turns each group of weights back into float32
and multiplies in float32, so on two cores a pass over a line's few positions costs its
arithmetic, not its weights' bytes (docs/models.md, "4-bit weights"). Here the activations are
quantized to int8 as they come in (one scale for each 32 inputs of a row, as llama.cpp's Q8_0
does) and the products are integer dot products, 64 an AVX-512 VNNI instruction. The weights are
the same numbers as Int4Linear's (min-max, groups of GROUP_SIZE inputs, q in 0..15, kept as
q * scale + offset); rounding the activations adds about 0.5% of an output to the weights' error
(tests/models/test_int4_native.py).

The library is plain C called through ctypes, built by infill.models.c_build; its OpenMP threads
are PyTorch's own, as many as `torch.get_num_threads()`, and the interpreter is free during a call.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from infill.models.c_build import FLAGS, Build, build_unless_switched
from infill.models.int4 import GROUP_SIZE, QUANTIZE_ROWS, Int4Layer, group_size_for

SOURCE = Path(__file__).with_name("int4_native.c")
TILE = 16  # output rows a packed tile holds (one AVX-512 register of int32 lanes)
SWITCH = "INFILL_INT4_KERNEL"  # "pytorch": keep PyTorch's kernel (for comparisons)
NO_INSTRUCTIONS = "this CPU has neither AVX-512 VNNI nor AVX2"  # the C source's #error


@functools.cache
def build() -> Build:
    """The kernel for this CPU, built once per machine (and again when the source changes)."""
    return build_unless_switched(SWITCH, SOURCE, declared, NO_INSTRUCTIONS, FLAGS)  # FLAGS: as tests set it


def declared(library: ctypes.CDLL) -> ctypes.CDLL:
    pointer, size, integer = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    library.infill_int4_linear.argtypes = [
        pointer, size, size, size, pointer, pointer, pointer, size, pointer, integer
    ]  # fmt: skip
    library.infill_int4_linear.restype = integer
    library.infill_int4_instructions.argtypes = []
    library.infill_int4_instructions.restype = ctypes.c_char_p
    return library


def available() -> bool:
    return build().library is not None


def kernel_address() -> int:
    """Where `infill_int4_linear` is, for C code that calls it (layer_ops.c's span layer)."""
    return ctypes.cast(build().library.infill_int4_linear, ctypes.c_void_p).value


def description() -> str:
    """Which kernel 4-bit layers on this CPU use, in words, for the loading message."""
    library, reason = build()
    if library is None:
        return f"PyTorch's kernel (infill's own: {reason})"
    return f"infill's kernel ({library.infill_int4_instructions().decode()})"


def pack(weight: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`weight` (out, in; any float dtype) -> (tiles, scales, offsets) in the kernel's layout (the
    C source's comment), QUANTIZE_ROWS rows at a time."""
    rows, columns = weight.shape
    tiles, scales, offsets = [], [], []
    for start in range(0, rows, QUANTIZE_ROWS):
        block = weight[start : start + QUANTIZE_ROWS].to(torch.float32, copy=True)
        count = len(block)
        grouped = block.view(count, columns // group, group)
        low = grouped.amin(-1, keepdim=True)
        scale = (grouped.amax(-1, keepdim=True) - low).div_(15).clamp_(min=1e-10)
        q = grouped.sub_(low).div_(scale).round_().clamp_(0, 15).to(torch.uint8)
        # (tiles, 16 rows, in / 8, 2 halves, 4 inputs) -> (tiles, in / 8, halves, rows, inputs)
        q = q.view(count // TILE, TILE, columns // 8, 2, 4).permute(0, 2, 3, 1, 4)
        tiles.append((q[:, :, 0] | (q[:, :, 1] << 4)).reshape(count // TILE, columns // 8, 64))
        for table, values in ((scales, scale), (offsets, low)):
            table.append(values.view(count // TILE, TILE, -1).transpose(1, 2).to(torch.bfloat16))
        del block, q
    return tuple(torch.cat(parts).contiguous() for parts in (tiles, scales, offsets))


def unpacked(tiles: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The weights `pack` made, (out, in) in float32: q * scale + offset."""
    count, chunks, _ = tiles.shape
    halves = torch.stack([tiles & 15, tiles >> 4], dim=2).view(count, chunks, 2, TILE, 4)
    q = halves.permute(0, 3, 1, 2, 4).reshape(count * TILE, chunks * 8).float()
    group = chunks * 8 // scales.shape[1]

    def by_input(table: torch.Tensor) -> torch.Tensor:  # (tiles, groups, 16) -> (out, in)
        return table.float().transpose(1, 2).reshape(count * TILE, -1).repeat_interleave(group, 1)

    return q * by_input(scales) + by_input(offsets)


def matmul(
    x: torch.Tensor,
    tiles: torch.Tensor,
    scales: torch.Tensor,
    offsets: torch.Tensor,
    library: ctypes.CDLL | None = None,
) -> torch.Tensor:
    """`x` (rows, in) times the packed weights (out, in) transposed: (rows, out) float32, by
    `library` (default: `build()`'s)."""
    rows, columns = x.shape
    out = torch.empty(rows, len(tiles) * TILE)
    x = x.to(torch.float32).contiguous()
    failed = (library or build().library).infill_int4_linear(
        x.data_ptr(), rows, columns, columns // scales.shape[1], tiles.data_ptr(), scales.data_ptr(),
        offsets.data_ptr(), out.shape[1], out.data_ptr(), torch.get_num_threads(),
    )  # fmt: skip
    if failed:
        raise MemoryError(f"no memory for the int8 activations of a {rows} x {columns} product")
    return out


class NativeInt4Linear(Int4Layer):
    """A linear layer with 4-bit weights multiplied by this module's kernel (CPU only)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, group_size: int = GROUP_SIZE):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        group = group_size_for(self.in_features, group_size)
        if group is None or self.out_features % TILE:
            raise ValueError(
                f"a {tuple(weight.shape)} weight cannot be packed in 4 bits (groups of {group_size})"
            )
        self.group_size = group
        tiles, scales, offsets = pack(weight.detach(), group)
        self.register_buffer("tiles", tiles)
        self.register_buffer("scales", scales)
        self.register_buffer("offsets", offsets)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        y = matmul(rows, self.tiles, self.scales, self.offsets).view(*x.shape[:-1], self.out_features)
        if self.bias is not None:
            y += self.bias  # in float32, as the product
        return y if x.dtype == torch.float32 else y.to(x.dtype)

    def dequantized(self) -> torch.Tensor:
        return unpacked(self.tiles, self.scales, self.offsets)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.tiles, self.scales, self.offsets))
