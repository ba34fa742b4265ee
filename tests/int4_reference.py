"""What a 4-bit layer should compute, written here independently of infill.models.int4 and
int4_native: the weights' min-max quantization by groups and the activations' int8 rounding by
blocks of 32, each turned back into float32 (tests/models/test_int4.py, test_int4_native.py)."""

from __future__ import annotations

import torch


def reference_int4(weight: torch.Tensor, group: int, native: bool = False) -> torch.Tensor:
    """Min-max 4-bit quantization by groups of `group` inputs, turned back into float32, with the
    scale and offset rounded to bfloat16 as the kernel stores them: PyTorch's (q - 8) * scale + zero,
    where zero = low + 8 * scale; infill's own (`native`) q * scale + low."""
    w = weight.detach().float().reshape(weight.shape[0], -1, group)
    low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
    scale = ((high - low) / 15).clamp(min=1e-10)
    q = torch.clamp(torch.round((w - low) / scale), 0, 15)
    if native:
        return (q * scale.bfloat16().float() + low.bfloat16().float()).reshape(weight.shape)
    zero = (low + 8 * scale).bfloat16().float()
    return ((q - 8) * scale.bfloat16().float() + zero).reshape(weight.shape)


def int8_blocks(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """`x` with each `block` inputs of a row rounded to int8 steps of |max| / 127 (x * (127 /
    |max|), rounded), turned back into float32 (what infill's own kernel multiplies)."""
    rows = x.float().reshape(*x.shape[:-1], -1, block)
    largest = rows.abs().amax(-1, keepdim=True)
    inverse = torch.where(largest > 0, 127 / largest, 0)
    return (torch.round(rows * inverse) * (largest / 127)).reshape(x.shape)
