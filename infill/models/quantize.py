"""8-bit weights on the CPU (`--quantize int8`, the server's `quantize`): every linear layer of a
network (attention q/k/v/o, the MLP's gate/up/down, the output layer) keeps its weights as int8,
one scale per output row, through PyTorch's own dynamic quantization
(`torch.ao.quantization.quantize_dynamic`): each call quantizes the activations on the fly and
multiplies in int8 (the fbgemm / oneDNN kernels shipped with torch). Those weights take a
quarter of their float32 memory; the embedding table and the norms stay float32 (a tied output
layer gets an int8 copy of the embedding).

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

import torch
from torch import nn

from infill.errors import ModelError
from infill.options import QUANTIZE_MODES

INT8_FROM = 100_000_000
"""Parameters from which "auto" means int8 (on the CPU, float32): every published family (0.49B
and up), not the shipped model (7M), whose held-out quality decided it (docs/models.md)."""


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
    """"none" or "int8": what `quantize` means for `network` (infill's own implementation) on
    `device` in `dtype`. "auto": int8 where it can run (the CPU, float32) for a network of
    INT8_FROM parameters or more."""
    if quantize != "auto":
        return quantize
    can_run = device.type == "cpu" and dtype == torch.float32
    big = sum(parameter.numel() for parameter in network.parameters()) >= INT8_FROM
    return "int8" if can_run and big else "none"


def quantize_network(network: nn.Module, quantize: str, device: torch.device, dtype: torch.dtype) -> None:
    """`network`'s linear layers' weights in int8, changed in place, if `quantize` says so
    (`chosen_quantization`; "auto" says on stderr when it chooses int8). A network whose output
    layer reuses the embedding (`untie_head`) gets an int8 copy of it as its output layer, the
    embedding lookup staying float."""
    if chosen_quantization(quantize, network, device, dtype) == "none":
        return
    if quantize == "auto":
        print("infill: int8 weights (--quantize auto; --quantize none keeps float32)", file=sys.stderr)
    untie_head = getattr(network, "untie_head", None)
    if untie_head is not None:
        untie_head()
    with warnings.catch_warnings():  # torch.ao.quantization's deprecation notices (see above)
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        quantize_dynamic(network, {nn.Linear: per_channel_dynamic_qconfig}, torch.qint8, inplace=True)


def quantized_layers(network: nn.Module) -> list[str]:
    """The names of the layers of `network` whose weights are int8."""
    return [name for name, module in network.named_modules() if is_quantized(module)]


def is_quantized(module: nn.Module) -> bool:
    weight = getattr(module, "weight", None)
    return callable(weight) and weight().dtype == torch.qint8  # quantized layers: weight is a method
