"""8-bit weights on the CPU (`--quantize int8`, the server's `quantize`): every linear layer of a
network (attention q/k/v/o, the MLP's gate/up/down, the output layer) keeps its weights as int8,
one scale per output row, through PyTorch's own dynamic quantization
(`torch.ao.quantization.quantize_dynamic`): each call quantizes the activations on the fly and
multiplies in int8 (the fbgemm / oneDNN kernels shipped with torch). Those weights take a
quarter of their float32 memory. In the published families' network (`Decoder`) the embedding
table is int8 rows too (`Int8Embedding`), and a tied output layer gets its own int8 copy of the
embedding; the norms and biases stay float32. The published families are quantized while they
load, one layer at a time (`Int8Loading`): their float32 network never exists whole.

    "none"  the weights as stored
    "int8"  as above; the CPU in float32 only (those kernels exist nowhere else), on infill's own
            implementation of each family (not under `trust_remote_code`): refused otherwise
    "auto"  (the default) int8 where it can run for networks of INT8_FROM parameters or more

PyTorch marks `torch.ao.quantization` deprecated in favour of the separate `torchao` package (its
notice names 2.10 for the removal; the torch infill pins, 2.13, still runs it); the notice is
silenced here, the one place that calls it.

Quality and speed against float32: docs/models.md, "int8 weights on the CPU".
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from infill.errors import ModelError
from infill.models.decoder import Decoder
from infill.options import QUANTIZE_MODES

INT8_FROM = 100_000_000
"""Parameters from which "auto" means int8 (on the CPU, float32): every published family (0.49B
and up), not the shipped model (10.4M); held-out quality with int8 decided it (docs/models.md)."""


def check_quantize(quantize: str, device: str | torch.device | None) -> None:
    """ModelError, before anything is loaded, when `quantize` is unknown or `device` (as asked:
    "cuda", "mps", "cpu") is not the CPU."""
    if quantize not in QUANTIZE_MODES:
        raise ModelError(f"unknown quantization {quantize!r} ({', '.join(QUANTIZE_MODES)})")
    if quantize != "int8" or device is None:
        return
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError):
        return  # not a device at all: infill.models.pick_device says so
    if kind != "cpu":
        raise ModelError(
            f"--quantize {quantize} runs on the CPU only (PyTorch's int8 kernels are CPU ones), not on "
            f"{device}: use --device cpu, or drop --quantize"
        )


def check_quantizable(quantize: str, dtype: torch.dtype, trust_remote_code: bool) -> None:
    """ModelError, before the weights are read, when the model cannot be quantized as loaded."""
    if quantize != "int8":
        return
    if dtype != torch.float32:
        dtype_name = str(dtype).removeprefix("torch.")
        raise ModelError(f"--quantize {quantize} quantizes float32 weights, not {dtype_name}: drop --dtype")
    if trust_remote_code:
        raise ModelError(
            f"--quantize {quantize} runs on infill's own implementation: drop --trust-remote-code"
        )


def chosen_quantization(quantize: str, network: nn.Module, device: torch.device, dtype: torch.dtype) -> str:
    """What `quantize` means for `network` (infill's own implementation) on `device` in `dtype`:
    "none" or "int8". "auto": int8 where it can run (the CPU, float32) for a network of
    INT8_FROM parameters or more."""
    if quantize != "auto":
        return quantize
    can_run = device.type == "cpu" and dtype == torch.float32
    big = sum(parameter.numel() for parameter in network.parameters()) >= INT8_FROM
    return "int8" if can_run and big else "none"


def quantize_network(network: nn.Module, quantize: str, device: torch.device, dtype: torch.dtype) -> None:
    """`network`'s linear layers' weights in int8, changed in place, once its float weights are all
    loaded, if `quantize` says so (`use_int8`). The shipped model's path (its 7M parameters load in
    a moment); the published families quantize while loading (`Int8Loading`), to the same weights."""
    if not use_int8(quantize, network, device, dtype):
        return
    loading = Int8Loading(network)
    for name, _ in list(network.named_parameters()):
        loading.loaded(name)


def use_int8(quantize: str, network: nn.Module, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether `network` (built, on the meta device or not) gets int8 weights (`chosen_quantization`);
    "auto" says on stderr when it chooses int8."""
    if chosen_quantization(quantize, network, device, dtype) == "none":
        return False
    if quantize == "auto":
        print("infill: int8 weights (--quantize auto; --quantize none keeps float32)", file=sys.stderr)
    return True


class Int8Loading:
    """Quantizes each layer of a network the moment all its float weights are in, so that a network
    loaded tensor by tensor never holds its float32 weights all at once, only the layers whose
    tensors are not all in yet (Open-dCoder 0.5B's shape: the loading peak 2.7 -> 1.4 GiB,
    docs/models.md "Speed and memory at Open-dCoder 0.5B's shape").

    Each `nn.Linear` becomes PyTorch's dynamic int8 linear layer (`int8_linear`). In infill's own
    decoder (`Decoder`, the published families) the embedding table becomes int8 rows too
    (`Int8Embedding`) and a tied output layer gets an int8 copy of the embedding (`untie_head`):
    its float32 table (Qwen2.5's 151,936 x 896: 519 MiB, more than all int8 layers together) need
    not stay. The shipped model (`InfillModel`) keeps its float embedding: its held-out quality with
    int8 was measured so (docs/models.md) and its table is 8 MiB.

    Call `loaded(name)` after the parameter `name` (as `named_parameters` names it) got its value."""

    def __init__(self, network: nn.Module):
        self.network = network
        untie_head = getattr(network, "untie_head", None)
        if untie_head is not None:
            untie_head()
        kinds = (nn.Linear, nn.Embedding) if isinstance(network, Decoder) else (nn.Linear,)
        canonical = {id(parameter): name for name, parameter in network.named_parameters()}
        self.waiting: dict[str, set[str]] = {}  # layer -> its parameters not loaded yet
        for name, module in network.named_modules():
            if isinstance(module, kinds):
                self.waiting[name] = {canonical[id(p)] for p in module.parameters()}

    def loaded(self, parameter: str) -> None:
        complete = []
        for layer, missing in self.waiting.items():
            missing.discard(parameter)
            if not missing:
                complete.append(layer)
        for layer in sorted(complete, key=lambda name: name == "embed"):  # a tied head before the table
            del self.waiting[layer]
            module = self.network.get_submodule(layer)
            swap = int8_linear(module) if isinstance(module, nn.Linear) else Int8Embedding(self.rows(module))
            set_submodule(self.network, layer, swap)

    def rows(self, embedding: nn.Embedding) -> torch.Tensor:
        """The embedding table in int8 (`int8_rows`); with a tied output layer, already int8, its
        weights: the same numbers, without quantizing the table twice (1 s of the 0.5B's load)."""
        if self.network.config.tied_head:
            return self.network.head.weight()
        return int8_rows(embedding.weight)


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
    looked up turned back into float32: a quarter of the float table's memory."""

    def __init__(self, quantized: torch.Tensor):
        super().__init__()
        self.register_buffer("rows", quantized.int_repr())
        self.register_buffer("scales", quantized.q_per_channel_scales().float())

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.rows[ids].float() * self.scales[ids].unsqueeze(-1)


def quantized_layers(network: nn.Module) -> list[str]:
    """The names of the layers of `network` whose weights are int8."""
    return [name for name, module in network.named_modules() if is_quantized(module)]


def is_quantized(module: nn.Module) -> bool:
    if isinstance(module, Int8Embedding):
        return True
    weight = getattr(module, "weight", None)
    return callable(weight) and weight().dtype == torch.qint8  # quantized layers: weight is a method
