"""Quantized weights on the CPU (`--quantize int8|int4`, the server's `quantize`).

int8: every linear layer of a
network (attention q/k/v/o, the MLP's gate/up/down, the output layer) keeps its weights as int8,
one scale per output row, through PyTorch's own dynamic quantization
(`torch.ao.quantization.quantize_dynamic`): each call quantizes the activations on the fly and
multiplies in int8 (the fbgemm / oneDNN kernels shipped with torch). Those weights take a
quarter of their float32 memory. In the published families' network (`Decoder`) the embedding
table is int8 rows too (`Int8Embedding`), and a tied output layer gets its own int8 copy of the
embedding; the norms and biases stay float32. The published families are quantized while they
load, one layer at a time (`Int8Loading`): their float32 network never exists whole.

int4: every linear layer whose shape the kernel takes as 4-bit weights with group-wise scales and
offsets (`int4_layer`): on a CPU where infill's own kernel builds, multiplied with int8 activations
in integer dot products (`NativeInt4Linear`, infill.models.int4_native); elsewhere by PyTorch's
weight-only kernel with bfloat16 activations (`Int4Linear`, infill.models.int4); the embedding table
as int8 rows (a lookup reads a few rows, so 4 bits would save memory only), a tied output layer its
own 4-bit copy. The weights to be packed are read in the checkpoint's dtype (`Quantizing.stored`),
so a 7B bfloat16 checkpoint never has a float32 layer.

    "none"  the weights as stored
    "int8"  as above; the CPU in float32 only (those kernels exist nowhere else), on infill's own
            implementation of each family (not under `trust_remote_code`): refused otherwise
    "int4"  as above; the CPU (float32 or bfloat16 networks) or CUDA (the embedding table stays
            as stored there), infill's own implementation
    "auto"  (the default) on the CPU, for networks of QUANTIZE_FROM parameters or more, the form
            that keeps quality where it fits in memory (`chosen_quantization`): int8 (a bfloat16
            network: as stored), else int4; this project's own model int4 on a CPU without
            native bfloat16 (`own_model_quantization`), else as stored

PyTorch marks `torch.ao.quantization` deprecated in favour of the separate `torchao` package (its
notice names 2.10 for the removal; the torch infill pins, 2.13, still runs it); the notice is
silenced here, the one place that calls it.

Quality and speed against float32: docs/models.md, "int8 weights on the CPU" and "4-bit weights".
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

import infill.models.int4_native as int4_native
from infill.errors import ModelError
from infill.models.decoder import Decoder
from infill.models.int4 import Int4Layer, Int4Linear, packable
from infill.options import QUANTIZE_MODES

TABLE_ROWS = 16384  # embedding rows quantized at a time
MEMORY_SHARE = 0.5  # "auto" takes a faster form than int4 only if its weights fit in this share of memory
QUANTIZE_FROM = 100_000_000
"""Parameters from which "auto" quantizes (on the CPU): every published family (0.49B and up), not
the shipped model (10.4M), whose held-out quality decided it (docs/models.md)."""


def check_quantize(quantize: str, device: str | torch.device | None) -> None:
    """ModelError, before anything is loaded, when `quantize` is unknown or `device` (as asked:
    "cuda", "mps", "cpu") has no kernel for it: int8 runs on the CPU, int4 on the CPU and CUDA."""
    if quantize not in QUANTIZE_MODES:
        raise ModelError(f"unknown quantization {quantize!r} ({', '.join(QUANTIZE_MODES)})")
    if quantize not in ("int8", "int4") or device is None:
        return
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        return  # not a device at all: infill.models.pick_device says so
    devices = ("cpu", "cuda") if quantize == "int4" else ("cpu",)
    if kind not in devices:
        raise ModelError(
            f"--quantize {quantize} runs on {' and '.join(devices)} (PyTorch's {quantize} kernels), "
            f"not on {device}: use --device cpu, or drop --quantize"
        )


def check_quantizable(quantize: str, dtype: torch.dtype, trust_remote_code: bool) -> None:
    """ModelError, before the weights are read, when the model cannot be quantized as loaded."""
    if quantize not in ("int8", "int4"):
        return
    if quantize == "int4" and dtype not in (torch.float32, torch.bfloat16):
        raise ModelError("--quantize int4 runs float32 or bfloat16 networks: use --dtype bfloat16 or float32")
    if quantize == "int8" and dtype != torch.float32:
        dtype_name = str(dtype).removeprefix("torch.")
        raise ModelError(f"--quantize {quantize} quantizes float32 weights, not {dtype_name}: drop --dtype")
    if trust_remote_code:
        raise ModelError(
            f"--quantize {quantize} runs on infill's own implementation: drop --trust-remote-code"
        )


def chosen_quantization(
    quantize: str, network: nn.Module, device: torch.device, dtype: torch.dtype, memory: int | None = None
) -> str:
    """What `quantize` means for `network` (infill's own implementation) on `device` in `dtype`:
    "none", "int8" or "int4". "auto", on the CPU for a network of QUANTIZE_FROM parameters or more:
    the form that keeps the network's quality, if its weights take at most MEMORY_SHARE of the
    machine's `memory` (bytes; default: all of it), else int4: int8 for a float32 network, the
    weights as stored for a bfloat16 one (int8 runs float32 networks only). With infill's own
    4-bit kernel int4 is the fastest of the three at a line's span on a CPU, and bfloat16 as
    stored the slowest (docs/models.md, "What a laptop should pick, measured on 2026-12-02"), but
    int8 keeps the shipped model's held-out quality and int4 costs it one to two points
    (docs/models.md, "infill's own 4-bit kernel"), so int4 is chosen only where the other does
    not fit. Elsewhere "none"."""
    if quantize != "auto":
        return quantize
    parameters = sum(parameter.numel() for parameter in network.parameters())
    if device.type != "cpu" or dtype not in (torch.float32, torch.bfloat16) or parameters < QUANTIZE_FROM:
        return "none"
    room = MEMORY_SHARE * (memory or machine_memory())
    fastest = ("none", 2.0) if dtype == torch.bfloat16 else ("int8", 1.0)  # (form, bytes a weight)
    return fastest[0] if parameters * fastest[1] <= room else "int4"


def own_model_quantization(
    quantize: str, dtype: str | torch.dtype | None, device: torch.device, native_dtype: torch.dtype
) -> str:
    """What `quantize` means for this project's own model, with `dtype` as asked and
    `native_dtype` what `pick_native_dtype` made of it: "auto" with the dtype left to auto where
    that is float32 (a CPU without native bfloat16) is int4. There a float32 span pass of the shipped model is
    PyTorch's float32 products at a few rows (17.7 ms on a Zen 3, 7.1 ms in int4), its one-line
    fill 1.6 times as long as int4's and `infill serve` 1.5-1.8 times slower, for held-out quality
    within a point (docs/models.md, "The shipped model on a CPU without bfloat16"); only where
    infill's own 4-bit kernel builds (PyTorch's multiplies in bfloat16). Elsewhere `quantize` as
    asked (then `chosen_quantization`: "auto" leaves so small a model as stored); an asked dtype
    keeps its float weights."""
    float32 = dtype in (None, "auto") and device.type == "cpu" and native_dtype == torch.float32
    if quantize == "auto" and float32 and int4_native.available():
        print("infill: int4 weights (--quantize auto on a CPU without native bfloat16; "
              "--quantize none keeps float32)", file=sys.stderr)  # fmt: skip
        return "int4"
    return quantize


def machine_memory() -> int:
    """Bytes of memory this machine has (0 where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows)
        return 0


def quantize_network(network: nn.Module, quantize: str, device: torch.device, dtype: torch.dtype) -> None:
    """`network`'s linear layers' weights quantized, changed in place, once its float weights are
    all loaded, if `quantize` says so (`quantizing`). The shipped model's path (its 10M parameters
    load in a moment); the published families quantize while loading, to the same weights."""
    loading = quantizing(quantize, network, device, dtype)
    if loading is None:
        return
    for name, _ in list(network.named_parameters()):
        loading.loaded(name)


def quantizing(
    quantize: str, network: nn.Module, device: torch.device, dtype: torch.dtype
) -> Quantizing | None:
    """The quantizer of `network` (built, on the meta device or not) as `chosen_quantization` says,
    None for float weights; "auto" says on stderr what it chose."""
    kind = chosen_quantization(quantize, network, device, dtype)
    if kind == "none":
        return None
    if quantize == "auto":
        print(f"infill: {kind} weights (--quantize auto; --quantize none keeps them as stored)",
              file=sys.stderr)  # fmt: skip
    if kind == "int4" and device.type == "cpu":
        print(f"infill: int4 products by {int4_native.description()}", file=sys.stderr)
    return Quantizing(network, kind, dtype, int8_embedding=device.type == "cpu")


def quantized_kind(network: nn.Module) -> str:
    """"int4", "int8" or "none": how `network`'s linear layers hold their weights."""
    modules = list(network.modules())
    if any(isinstance(module, Int4Layer) for module in modules):
        return "int4"
    return "int8" if any(is_quantized(module) for module in modules) else "none"


class Quantizing:
    """Quantizes each layer of a network the moment all its float weights are in, so that a network
    loaded tensor by tensor never holds its float weights all at once, only the layers whose
    tensors are not all in yet (Open-dCoder 0.5B's shape, int8: the loading peak 2.7 -> 1.4 GiB,
    docs/models.md "Speed and memory at Open-dCoder 0.5B's shape").

    `kind` "int8": each `nn.Linear` becomes PyTorch's dynamic int8 linear layer (`int8_linear`);
    "int4": each `nn.Linear` the kernel can pack becomes an `Int4Linear` (the others keep their
    weights). In infill's own decoder (`Decoder`, the published families) the embedding table
    becomes int8 rows (`Int8Embedding`) and a tied output layer gets a quantized copy of the
    embedding (`untie_head`): its float table (Qwen2.5's 151,936 x 896: 519 MiB in float32, more
    than all int8 layers together) need not stay. The shipped model (`InfillModel`) keeps its float
    embedding: its held-out quality was measured so (docs/models.md) and its table is 8 MiB.

    Call `loaded(name)` after the parameter `name` (as `named_parameters` names it) got its value;
    `stored(name)`: whether that parameter may keep the checkpoint's dtype (int4 packs any float)."""

    def __init__(
        self,
        network: nn.Module,
        kind: str = "int8",
        dtype: torch.dtype = torch.float32,
        int8_embedding: bool = True,
    ):
        self.network = network
        self.kind = kind
        self.dtype = dtype  # the network's: what the embedding's rows are turned back into
        untie_head = getattr(network, "untie_head", None)
        if untie_head is not None:
            untie_head()
        rows = isinstance(network, Decoder) and int8_embedding  # not on a GPU: its table stays bfloat16
        kinds = (nn.Linear, nn.Embedding) if rows else (nn.Linear,)
        canonical = {id(parameter): name for name, parameter in network.named_parameters()}
        self.waiting: dict[str, set[str]] = {}  # layer -> its parameters not loaded yet
        for name, module in network.named_modules():
            packs = kind == "int8" or not isinstance(module, nn.Linear) or packable(module)
            if isinstance(module, kinds) and packs:
                self.waiting[name] = {canonical[id(p)] for p in module.parameters()}
        self.packed_weights = {  # int4: the weights of every layer waiting here, packed or int8 rows
            canonical[id(module.weight)] for name, module in network.named_modules() if name in self.waiting
        } if kind == "int4" else set()  # fmt: skip

    def stored(self, parameter: str) -> bool:
        """Whether `parameter` may load in its checkpoint's dtype: a weight int4 packs or makes int8
        rows of (a float32 copy of a 7B network's output layer alone would take 2.2 GB)."""
        return parameter in self.packed_weights

    def loaded(self, parameter: str) -> None:
        complete = []
        for layer, missing in self.waiting.items():
            missing.discard(parameter)
            if not missing:
                complete.append(layer)
        for layer in sorted(complete, key=lambda name: name == "embed"):  # a tied head before the table
            del self.waiting[layer]
            module = self.network.get_submodule(layer)
            set_submodule(self.network, layer, self.swap(module))

    def swap(self, module: nn.Module) -> nn.Module:
        if isinstance(module, nn.Embedding):
            return Int8Embedding.of(self.rows(module), self.dtype)
        return int8_linear(module) if self.kind == "int8" else int4_layer(module)

    def rows(self, embedding: nn.Embedding) -> list[torch.Tensor]:
        """The embedding table in int8 (`int8_rows`), in blocks of rows (a 7B network's table in
        float32 would take 2.2 GB); with a tied output layer already int8, its weights: the same
        numbers, without quantizing the table twice (1 s of the 0.5B's load)."""
        if self.network.config.tied_head and self.kind == "int8":
            return [self.network.head.weight()]
        table = embedding.weight
        starts = range(0, len(table), TABLE_ROWS)
        return [int8_rows(table[start : start + TABLE_ROWS].float()) for start in starts]


def int4_layer(linear: nn.Linear) -> Int4Layer:
    """`linear` with 4-bit weights: infill's own kernel on a CPU that builds it (int8 activations,
    AVX-512 VNNI: infill.models.int4_native), else PyTorch's (bfloat16 activations)."""
    if linear.weight.device.type == "cpu" and int4_native.available():
        return int4_native.NativeInt4Linear(linear.weight, linear.bias)
    return Int4Linear.of(linear)


def set_submodule(network: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, attribute = name.rpartition(".")
    setattr(network.get_submodule(parent), attribute, module)


def int8_linear(linear: nn.Linear) -> nn.Module:
    """`linear` as PyTorch's dynamic int8 linear layer: int8 weights, one scale per output row."""
    with quiet_deprecation():
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        holder = nn.Sequential(linear)  # quantize_dynamic swaps children, not the module it is given
        quantize_dynamic(holder, {nn.Linear: per_channel_dynamic_qconfig}, torch.qint8, inplace=True)
    # quantize_dynamic leaves `linear.qconfig`, whose observer factory's closure holds `linear`: a
    # reference cycle that kept every float layer alive until Python's collector ran (Open-dCoder
    # 0.5B: 1.1 GiB still held after loading, freed by gc.collect() only). Broken here, the float
    # weights go the moment their layer is swapped.
    vars(linear).pop("qconfig", None)
    return holder[0]


def int8_rows(weight: torch.Tensor) -> torch.Tensor:
    """`weight` (rows, columns) quantized as `int8_linear` quantizes a layer's weights: qint8, one
    symmetric scale per row (PyTorch's per-channel weight observer)."""
    with quiet_deprecation():
        from torch.ao.quantization import per_channel_dynamic_qconfig

        observer = per_channel_dynamic_qconfig.weight()
        observer(weight.detach())
        scales, zero_points = observer.calculate_qparams()
        return torch.quantize_per_channel(weight.detach(), scales, zero_points, 0, torch.qint8)


@contextmanager
def quiet_deprecation() -> Iterator[None]:
    """torch.ao.quantization's deprecation notices silenced (see above)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")
        yield


class Int8Embedding(nn.Module):
    """An embedding table as int8 rows and one float scale per row (`quantized`: the table as
    `int8_rows` makes it; for a tied output layer, the very numbers of its int8 copy), each row
    looked up turned back into `dtype` (the table's before quantizing): a quarter of the float32
    table's memory."""

    def __init__(self, rows: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.dtype = dtype
        self.register_buffer("rows", rows)
        self.register_buffer("scales", scales)

    @classmethod
    def of(
        cls, quantized: torch.Tensor | list[torch.Tensor], dtype: torch.dtype = torch.float32
    ) -> Int8Embedding:
        """From the table as `int8_rows` makes it (or its blocks of rows, in order; the list is
        emptied as the rows are copied, so that each block goes once it is in the table: a 0.5B
        model's 151,936 rows were held three times over while they were joined, 0.4 GB)."""
        blocks = quantized if isinstance(quantized, list) else [quantized]
        count, width = sum(len(block) for block in blocks), blocks[0].shape[1]
        rows, scales = torch.empty(count, width, dtype=torch.int8), torch.empty(count)
        start = 0
        while blocks:
            block = blocks.pop(0)
            rows[start : start + len(block)] = block.int_repr()
            scales[start : start + len(block)] = block.q_per_channel_scales()
            start += len(block)
        return cls(rows, scales, dtype)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return (self.rows[ids].float() * self.scales[ids].unsqueeze(-1)).to(self.dtype)


def quantized_layers(network: nn.Module) -> list[str]:
    """The names of the layers of `network` whose weights are int8 or int4."""
    return [name for name, module in network.named_modules() if is_quantized(module)]


def is_quantized(module: nn.Module) -> bool:
    if isinstance(module, (Int8Embedding, Int4Layer)):
        return True
    weight = getattr(module, "weight", None)
    return callable(weight) and weight().dtype == torch.qint8  # quantized layers: weight is a method
