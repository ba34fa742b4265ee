"""4-bit weights on the CPU (`--quantize int4`): a linear layer's weights as 4-bit integers with
one scale and one offset for each group of GROUP_SIZE consecutive inputs of an output row, multiplied
by PyTorch's own weight-only kernel (`torch.ops.aten._weight_int4pack_mm_for_cpu`, the one PyTorch's
CPU LLM examples and torchao use). The activations stay bfloat16 and are never quantized; each group
of weights is turned back into numbers inside the kernel, so a pass reads 4.25 bits a weight
(4, plus two bfloat16 numbers per group of 128) instead of 16: a 7B network's layers in 3.5 GB.

    weight ~= (q - 8) * scale + zero      q in 0..15, per (row, group): scale = (max - min) / 15,
                                          zero = min + 8 * scale (min-max, asymmetric)

Quantizing runs over row blocks of a weight (QUANTIZE_ROWS at a time) with in-place arithmetic, so
that a layer of a 7B network (18,944 x 3,584) takes 0.1 s and needs a few MiB besides its own
weights; the packed layout keeps blocks of 64 rows apart, so the blocks pack one by one.

The kernel asks for an output size that is a multiple of 16 and a group size of 32, 64, 128 or 256
that divides the input size; a layer that cannot meet that keeps its float weights (`packable`).
How big a group: measured in docs/models.md ("4-bit weights"): smaller groups follow the weights
more closely at no speed cost in the kernel but more memory for the scales.
"""

from __future__ import annotations

import torch
from torch import nn

GROUP_SIZE = 128  # inputs sharing one scale and offset (docs/models.md, "4-bit weights")
GROUP_SIZES = (256, 128, 64, 32)  # what the kernel accepts
INNER_K_TILES = 2  # the kernel's packing parameter (2, 4, 8: equally fast here)
QUANTIZE_ROWS = 1024  # rows quantized at a time (a multiple of the packing's 64-row blocks)


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


class Int4Linear(nn.Module):
    """A linear layer whose weights are 4-bit integers with a scale and offset per group (above).
    Made from a float layer's weights (any float dtype; the bias is kept as it is)."""

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

    @classmethod
    def of(cls, linear: nn.Linear, group_size: int = GROUP_SIZE) -> Int4Linear:
        return cls(linear.weight, linear.bias, group_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(
            rows, self.packed, self.group_size, self.scales_and_zeros
        )
        y = y.reshape(*x.shape[:-1], self.out_features).to(x.dtype)
        return y if self.bias is None else y + self.bias.to(x.dtype)

    def dequantized(self) -> torch.Tensor:
        """The weights as the kernel sees them, (out, in) in float32: the layer applied to the
        identity (for tests and measurements; as big as the float weights)."""
        eye = torch.eye(self.in_features, dtype=torch.bfloat16)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(
            eye, self.packed, self.group_size, self.scales_and_zeros
        )
        return y.float().t().contiguous()

    def nbytes(self) -> int:
        """Bytes a pass reads for this layer's weights: the packed numbers and the group scales."""
        return sum(t.numel() * t.element_size() for t in (self.packed, self.scales_and_zeros))

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"in={self.in_features}, out={self.out_features}, group={self.group_size}, bias={bias}"


def quantize_int4(weight: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`weight` (out, in) -> the kernel's packed 4-bit weights and its (in / group, out, 2)
    bfloat16 table of scales and offsets, a block of QUANTIZE_ROWS rows at a time."""
    rows, columns = weight.shape
    groups = columns // group_size
    packed, scales, zeros = [], [], []
    for start in range(0, rows, QUANTIZE_ROWS):
        block = (
            weight[start : start + QUANTIZE_ROWS].to(torch.float32, copy=True).reshape(-1, groups, group_size)
        )
        low = block.amin(-1, keepdim=True)
        scale = (block.amax(-1, keepdim=True) - low).div_(15).clamp_(min=1e-10)
        q = block.sub_(low).div_(scale).round_().clamp_(0, 15).to(torch.int32).reshape(-1, columns)
        packed.append(torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, INNER_K_TILES))
        scales.append(scale.squeeze(-1))
        zeros.append(low.squeeze(-1) + 8 * scales[-1])
        del block, q
    table = torch.stack([torch.cat(scales).t(), torch.cat(zeros).t()], dim=-1)
    return torch.cat(packed), table.to(torch.bfloat16).contiguous()
