"""infill's bfloat16 product for the CPU (`Bf16Linear`): a bfloat16 network's linear layers with
their weights packed once for AVX-512 BF16's pair dot products, from the C source beside this file
(bf16_native.c), built at first use for the CPU it runs on (infill.models.c_build). Where it cannot
be built (a CPU without AVX512_BF16, no C compiler) or `INFILL_BF16_KERNEL=pytorch` says so, the
layers stay PyTorch's; `build().reason` says why.

Why: PyTorch's bfloat16 product on a CPU (oneDNN's) rearranges the weights on every call, so a
span pass's products of a few rows cost several times their reading (docs/models.md, "bfloat16
products of our own"). The sums are float32 as oneDNN's, rounded to bfloat16 once; each output's
sum runs over the inputs in one order whatever the rows beside it, so a canvas gets the same
numbers alone or in a batch (infill.models.batching).

`pack_network` swaps a loaded network's `nn.Linear` layers for `Bf16Linear`, which keeps the layer's
own weight (a tied output layer stays tied; the state dict is unchanged) beside its packed copy,
packed again if the weight changes; gradients, autocast and other dtypes take PyTorch's product.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from infill.models.c_build import Build, build_unless_switched, inference_on_cpu

SOURCE = Path(__file__).with_name("bf16_native.c")
GROUP = 64  # output rows a packed group holds (the C source's GROUP)
SWITCH = "INFILL_BF16_KERNEL"  # "pytorch": PyTorch's products (for comparisons)
NO_INSTRUCTIONS = "this CPU has no AVX512_BF16"  # the C source's #error


@functools.cache
def build() -> Build:
    """The kernel for this CPU, built once per machine (and again when the source changes)."""
    return build_unless_switched(SWITCH, SOURCE, declared, refusal=NO_INSTRUCTIONS)


def declared(library: ctypes.CDLL) -> ctypes.CDLL:
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    library.infill_bf16_linear.argtypes = [pointer, size, size, pointer, size, pointer, pointer, ctypes.c_int]
    library.infill_bf16_linear.restype = None
    return library


def pack(weight: torch.Tensor) -> torch.Tensor:
    """`weight` (N, K) bfloat16, K even -> the kernel's layout: (groups, K/2, 64, 2), the rows
    padded with zeros to a multiple of 64."""
    rows, columns = weight.shape
    padded = torch.zeros(-(-rows // GROUP) * GROUP, columns, dtype=torch.bfloat16)
    padded[:rows] = weight.detach()
    return padded.view(-1, GROUP, columns // 2, 2).transpose(1, 2).contiguous()


def linear(
    x: torch.Tensor, packed: torch.Tensor, out_features: int, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x (..., K) bfloat16 times the packed weights (N, K) transposed, plus `bias`: (..., N) bfloat16."""
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.empty(len(rows), out_features, dtype=torch.bfloat16)
    bias = None if bias is None else bias.float().contiguous()
    build().library.infill_bf16_linear(
        rows.data_ptr(), len(rows), rows.shape[1], packed.data_ptr(), out_features,
        None if bias is None else bias.data_ptr(), out.data_ptr(), torch.get_num_threads(),
    )  # fmt: skip
    return out.view(*x.shape[:-1], out_features)


class Bf16Linear(nn.Linear):
    """nn.Linear whose bfloat16 products on the CPU, without gradients, run by infill's kernel on a
    packed copy of its weight (not saved: the state dict is nn.Linear's)."""

    def __init__(self, layer: nn.Linear):
        nn.Module.__init__(self)
        self.in_features, self.out_features = layer.in_features, layer.out_features
        self.weight, self.bias = layer.weight, layer.bias  # the same parameters (a tie stays)
        self.register_buffer("packed", pack(self.weight), persistent=False)
        self.packed_version = self.weight._version

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not takes(x, self.weight):
            return F.linear(x, self.weight, self.bias)
        return linear(x, self.packed_weight(), self.out_features, self.bias)

    def packed_weight(self) -> torch.Tensor:
        """The weight as the kernel reads it, packed again if it changed in place since."""
        if self.weight._version != self.packed_version:
            self.packed, self.packed_version = pack(self.weight), self.weight._version
        return self.packed


def takes(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the kernel serves this product: x and the weight bfloat16, `inference_on_cpu`, the
    library built."""
    bfloat16 = x.dtype == weight.dtype == torch.bfloat16
    return bfloat16 and inference_on_cpu(x, weight) and available()


def kernel_address() -> int:
    """Where `infill_bf16_linear` is, for C code that calls it (layer_ops.c's span layer)."""
    return ctypes.cast(build().library.infill_bf16_linear, ctypes.c_void_p).value


def available() -> bool:
    return build().library is not None


def packable(layer: nn.Module) -> bool:
    """An nn.Linear of bfloat16 weights on the CPU with an even number of inputs."""
    weight = getattr(layer, "weight", None)
    return (
        type(layer) is nn.Linear
        and weight.dtype == torch.bfloat16
        and weight.device.type == "cpu"
        and layer.in_features % 2 == 0
    )


def pack_network(network: nn.Module) -> int:
    """`network`'s packable linear layers swapped for Bf16Linear, in place, where the kernel
    builds; how many were."""
    if not available():
        return 0
    swapped = 0
    for parent in list(network.modules()):
        for name, child in list(parent.named_children()):
            if packable(child):
                setattr(parent, name, Bf16Linear(child))
                swapped += 1
    return swapped
