"""4-bit weights (`--quantize int4`), on the CPU and on CUDA: a linear layer's weights as 4-bit
integers with one scale and one offset for each group of GROUP_SIZE consecutive inputs of an output
row (`Int4Layer`). This module's `Int4Linear` multiplies them by PyTorch's own weight-only kernel
(`torch.ops.aten._weight_int4pack_mm_for_cpu`, the one PyTorch's CPU LLM examples and torchao use):
on CUDA, and on a CPU where infill's own kernel (infill.models.int4_native, int8 activations)
cannot be built. Its activations stay bfloat16 and are never quantized; each group of weights is
turned back into numbers inside the kernel, so a pass reads 4.25 bits a weight (4, plus two
bfloat16 numbers per group of 128) instead of 16: a 7B network's layers in 3.5 GB.

    weight ~= (q - 8) * scale + zero      q in 0..15, per (row, group): scale = (max - min) / 15,
                                          zero = min + 8 * scale (min-max, asymmetric)

Quantizing runs over row blocks of a weight (QUANTIZE_ROWS at a time) with in-place arithmetic, so
that a layer of a 7B network (18,944 x 3,584) takes 0.1 s and needs a few MiB besides its own
weights; the packed layout keeps blocks of 64 rows apart, so the blocks pack one by one.

The kernel unpacks each group again for every 4 rows of activations, so on many rows (a full pass
over the window: 512) its products run at a third of the bfloat16 matrix product's rate. From
UNPACK_ROWS rows on, a layer instead turns its weights back into bfloat16, about UNPACK_WEIGHTS
at a time, and multiplies them with the bfloat16 product: unpacking a layer once costs about what
the kernel spends on 64-96 rows (measured in docs/models.md, "4-bit weights"). The two ways round
the same numbers at different places (bfloat16 weights here, float32 ones inside the kernel). The
unpacking reads the kernel's packed layout, which depends on the CPU (`packed_block_width`); where
it is not one this module knows, every product goes through the kernel.

The kernel asks for an output size that is a multiple of 16 and a group size of 32, 64, 128 or 256
that divides the input size; a layer that cannot meet that keeps its float weights (`packable`).
How big a group: measured in docs/models.md ("4-bit weights"): smaller groups follow the weights
more closely at no speed cost in the kernel but more memory for the scales.

On CUDA the same numbers go to PyTorch's CUDA kernel (`torch.ops.aten._weight_int4pack_mm`, `kernel`),
each layer packed whole (`quantize_int4`); the byte order its packing expects is found by a probe
on the GPU (`cuda_high_nibble_first`). Measured on an H100 in docs/models.md ("int4 on a GPU").
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from infill.errors import ModelError

GROUP_SIZE = 128  # inputs sharing one scale and offset (docs/models.md, "4-bit weights")
GROUP_SIZES = (256, 128, 64, 32)  # what the kernel accepts
INNER_K_TILES = 2  # the kernel's packing parameter (2, 4, 8: equally fast here)
QUANTIZE_ROWS = 1024  # rows quantized at a time (a multiple of the packing's 64-row blocks)
UNPACK_ROWS = 192  # activation rows from which a product unpacks the weights (docs/models.md)
UNPACK_WEIGHTS = 1 << 21  # weights unpacked at a time (4 MiB in bfloat16: whole output-row blocks)


def group_size_for(in_features: int, preferred: int = GROUP_SIZE) -> int | None:
    """The group size a layer of `in_features` inputs gets: `preferred`, or the largest the kernel
    accepts below it that divides `in_features`; None when none does."""
    for size in GROUP_SIZES:
        if size <= preferred and in_features % size == 0:
            return size
    return None


def packable(linear: nn.Linear, preferred: int = GROUP_SIZE) -> bool:
    """Whether the kernel can hold `linear`'s weights in 4 bits."""
    return linear.out_features % 16 == 0 and group_size_for(linear.in_features, preferred) is not None


class Int4Layer(nn.Module):
    """A linear layer whose weights are 4-bit integers with a scale and offset per group (above):
    `Int4Linear` (PyTorch's kernel) or `infill.models.int4_native.NativeInt4Linear` (infill's).
    Each has `in_features`, `out_features`, `group_size`, `dequantized()` and `nbytes()`."""

    in_features: int
    out_features: int
    group_size: int

    def dequantized(self) -> torch.Tensor:
        """The weights as the kernel sees them, (out, in) in float32."""
        raise NotImplementedError

    def nbytes(self) -> int:
        """Bytes a pass reads for this layer's weights: the packed numbers and the group scales."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        bias = getattr(self, "bias", None) is not None
        return f"in={self.in_features}, out={self.out_features}, group={self.group_size}, bias={bias}"


class Int4Linear(Int4Layer):
    """A linear layer whose weights are 4-bit integers with a scale and offset per group (above),
    multiplied by PyTorch's kernel. Made from a float layer's weights (any float dtype; the bias is
    kept as it is)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, group_size: int = GROUP_SIZE):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        group = group_size_for(self.in_features, group_size)
        if group is None or self.out_features % 16:
            raise ValueError(
                f"a {tuple(weight.shape)} weight cannot be packed in 4 bits (groups of {group_size})"
            )
        self.group_size = group
        packed, scales_and_zeros = quantize_int4(weight.detach(), group)
        self.register_buffer("packed", packed)
        self.register_buffer("scales_and_zeros", scales_and_zeros)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)
        width = packed_block_width() if self.packed.device.type == "cpu" else None
        self.block_width = width if width and self.out_features % width == 0 else None

    @classmethod
    def of(cls, linear: nn.Linear, group_size: int = GROUP_SIZE) -> Int4Linear:
        return cls(linear.weight, linear.bias, group_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16).contiguous()
        if len(rows) >= UNPACK_ROWS and self.block_width and not rows.requires_grad:  # out= takes no grad
            y = self.unpacked_product(rows)
        else:
            y = kernel(self.packed)(rows, self.packed, self.group_size, self.scales_and_zeros)
        y = y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)
        return y if self.bias is None else y + self.bias.to(x.dtype)

    def unpacked_product(self, rows: torch.Tensor) -> torch.Tensor:
        """`rows` (bfloat16, n x in) times the weights, unpacking whole blocks of output rows,
        about UNPACK_WEIGHTS weights at a time, into one scratch tensor made once a product (when
        blocks of a MiB or more were mapped afresh each time they were made, filling new pages
        for every block cost more than unpacking saved; infill.models.memory)."""
        out = torch.empty(len(rows), self.out_features, dtype=torch.bfloat16)
        step = max(1, UNPACK_WEIGHTS // (self.in_features * self.block_width)) * self.block_width
        scratch = torch.empty(min(step, self.out_features) * self.in_features, dtype=torch.bfloat16)
        for start in range(0, self.out_features, step):
            stop = min(start + step, self.out_features)
            torch.mm(rows, self.unpacked(start, stop, scratch), out=out[:, start:stop])
        return out

    def unpacked(self, start: int, stop: int, scratch: torch.Tensor | None = None) -> torch.Tensor:
        """Output rows `start:stop` of the weights in bfloat16, transposed: (in, stop - start), in
        `scratch` (default: a new tensor). Both bounds are multiples of `block_width`. Each byte of
        a block holds the row of its place in its low four bits and the row half a block on in
        its high four."""
        width, columns, group = self.block_width, self.in_features, self.group_size
        blocks, count = (stop - start) // width, (stop - start) * columns
        scratch = torch.empty(count, dtype=torch.bfloat16) if scratch is None else scratch
        nibbles = self.packed[start:stop].view(blocks, columns, width // 2)
        weights = scratch[:count].view(columns, blocks, width)  # transposed as they go
        by_block = weights.permute(1, 0, 2)
        torch.bitwise_and(nibbles, 15, out=by_block[..., : width // 2])
        torch.bitwise_right_shift(nibbles, 4, out=by_block[..., width // 2 :])
        table = self.scales_and_zeros[:, start:stop].float().view(columns // group, 1, blocks, width, 2)
        scale, zero = table[..., 0], table[..., 1]
        offset = (zero - 8 * scale).to(torch.bfloat16, memory_format=torch.contiguous_format)
        by_group = weights.view(columns // group, group, blocks, width)
        torch.addcmul(offset, by_group, scale.to(torch.bfloat16), out=by_group)  # (q - 8) * scale + zero
        return weights.view(columns, stop - start)

    def dequantized(self) -> torch.Tensor:
        """The weights as the kernel sees them, (out, in) in float32: the layer applied to the
        identity (for tests and measurements; as big as the float weights)."""
        eye = torch.eye(self.in_features, dtype=torch.bfloat16, device=self.packed.device)
        y = kernel(self.packed)(eye, self.packed, self.group_size, self.scales_and_zeros)
        return y.float().t().contiguous()

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.packed, self.scales_and_zeros))


@functools.cache
def packed_block_width() -> int | None:
    """The kernel's packed layout on this CPU, found by packing a probe: blocks of this many output
    rows (64 with AVX-512, 32 with AVX2), as `Int4Linear.unpacked` reads them; None where the
    layout is another one (then every product goes through the kernel)."""
    rows, columns = 128, 64
    q = (torch.arange(rows * columns) * 7 % 16).reshape(rows, columns).to(torch.int32)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, INNER_K_TILES)
    for width in (64, 32):
        nibbles = packed.view(-1, columns, width // 2)
        unpacked = torch.cat([nibbles & 15, nibbles >> 4], dim=-1).permute(0, 2, 1).reshape(rows, columns)
        if torch.equal(unpacked.to(torch.int32), q):
            return width
    return None


def kernel(packed: torch.Tensor):
    """PyTorch's 4-bit product for weights packed on `packed`'s device: the CPU's or CUDA's."""
    if packed.device.type == "cuda":
        return torch.ops.aten._weight_int4pack_mm
    return torch.ops.aten._weight_int4pack_mm_for_cpu


def quantize_int4(weight: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`weight` (out, in) -> the kernel's packed 4-bit weights and its (in / group, out, 2)
    bfloat16 table of scales and offsets, a block of QUANTIZE_ROWS rows at a time, on the weight's
    device (on CUDA the blocks' bytes, `nibble_bytes`, are packed at the end, all at once)."""
    rows, columns = weight.shape
    groups = columns // group_size
    on_cuda = weight.device.type == "cuda"
    packed, scales, zeros = [], [], []
    for start in range(0, rows, QUANTIZE_ROWS):
        block = (
            weight[start : start + QUANTIZE_ROWS].to(torch.float32, copy=True).reshape(-1, groups, group_size)
        )
        low = block.amin(-1, keepdim=True)
        scale = (block.amax(-1, keepdim=True) - low).div_(15).clamp_(min=1e-10)
        q = block.sub_(low).div_(scale).round_().clamp_(0, 15).to(torch.int32).reshape(-1, columns)
        if on_cuda:  # packed whole below: CUDA's layout is not one of row blocks
            packed.append(nibble_bytes(q, cuda_high_nibble_first(weight.device)))
        else:
            packed.append(torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, INNER_K_TILES))
        scales.append(scale.squeeze(-1))
        zeros.append(low.squeeze(-1) + 8 * scales[-1])
        del block, q
    table = torch.stack([torch.cat(scales).t(), torch.cat(zeros).t()], dim=-1).to(torch.bfloat16).contiguous()
    if on_cuda:
        nibbles = torch.cat(packed)
        return torch.ops.aten._convert_weight_to_int4pack(nibbles, cuda_inner_k_tiles(columns)), table
    return torch.cat(packed), table


def nibble_bytes(q: torch.Tensor, high_first: bool) -> torch.Tensor:
    """(out, in) values 0-15 -> (out, in / 2) bytes, two neighbouring inputs a byte: the first
    in the high four bits (`high_first`) or the low four."""
    first, second = q[:, 0::2], q[:, 1::2]
    high, low = (first, second) if high_first else (second, first)
    return (high << 4 | low).to(torch.uint8)


def cuda_inner_k_tiles(in_features: int) -> int:
    """CUDA's packing parameter for a layer of `in_features` inputs: the largest of 8, 4, 2 with
    `in_features` a multiple of 16 times it (a group size of 32 or more makes 2 always fit)."""
    return next(tiles for tiles in (8, 4, 2) if in_features % (16 * tiles) == 0)


@functools.cache
def cuda_high_nibble_first(device: torch.device) -> bool:
    """Which of a byte's halves CUDA's packing reads first, found by packing a probe on `device`
    and multiplying the identity by it (scales 1, offsets 8: the weights come back as they went
    in). ModelError where neither order does: then this GPU cannot run int4."""
    rows, columns = 64, 128
    q = (torch.arange(rows * columns, device=device) * 7 % 16).reshape(rows, columns).to(torch.int32)
    table = torch.ones(1, rows, 2, dtype=torch.bfloat16, device=device) * torch.tensor(
        [1.0, 8.0], dtype=torch.bfloat16, device=device
    )
    eye = torch.eye(columns, dtype=torch.bfloat16, device=device)
    for high_first in (True, False):
        packed = torch.ops.aten._convert_weight_to_int4pack(
            nibble_bytes(q, high_first), cuda_inner_k_tiles(columns)
        )
        weights = torch.ops.aten._weight_int4pack_mm(eye, packed, columns, table).t()
        if torch.equal(weights.to(torch.int32), q):
            return high_first
    raise ModelError(f"--quantize int4: PyTorch's 4-bit packing on {device} is not one infill reads")
