"""`load`: a checkpoint folder (or a name in the local Hugging Face cache) into the denoiser of
its family, on the device and in the dtype asked, with the weights' form asked (infill.models.quantize).
The package's docstring (infill/models/__init__.py) has the map of families."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import torch

import infill.models.bf16_native as bf16_native
from infill.errors import ModelError
from infill.models.base import CachingDenoiser, Denoiser
from infill.models.hub_cache import resolve_model
from infill.models.quantize import check_quantizable, check_quantize, own_model_quantization, quantize_network

__all__ = ["CachingDenoiser", "Denoiser", "SUPPORTED", "family_module", "load", "pick_device", "pick_dtype"]

SUPPORTED = (
    "Dream (Dream-v0, Dream-Coder-v0, DiffuCoder, DreamOn), llada (LLaDA), qwen2 with a mask token "
    "(Open-dCoder), infill-diffusion (this project's)"
)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load(
    path: str | Path | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    *,
    threads: int | None = None,
    trust_remote_code: bool = False,
    quantize: str = "auto",
) -> Denoiser:
    """The denoiser for a checkpoint folder, or a name ORG/NAME[@REVISION] in the Hugging Face cache
    (None: the model shipped with infill). `device`: "cuda", "mps", "cpu" or None/"auto" (the first
    available, in that order); `dtype`: "float32", "bfloat16", "float16" or None/"auto" (bfloat16
    on a GPU, float32 on the CPU; this project's own models: `pick_native_dtype`); `quantize`:
    "int4" or "int8" (the linear layers' weights in 4 or 8 bits, on the CPU, int8 in float32
    only: infill.models.quantize; device "auto" then picks the CPU), "none", or "auto" (for
    models of QUANTIZE_FROM parameters or more on the CPU, int8 where it fits, else int4; this
    project's own model with the dtype left to auto: int4 on a CPU without native bfloat16,
    `own_model_quantization`).
    ModelError when the folder cannot be found or loaded; nothing is changed then."""
    if threads:
        torch.set_num_threads(threads)
    if quantize in ("int8", "int4") and device in (None, "auto"):
        device = "cpu"
    check_quantize(quantize, device)
    device = pick_device(device)
    native_dtype = pick_native_dtype(dtype, quantize)
    asked_dtype, dtype = dtype, pick_dtype(dtype, device)
    import infill.models.native as native

    directory = resolve_model(path)
    config = read_config(directory) if directory is not None else None
    family = family_module(directory, config) if directory is not None else native
    check_quantizable(quantize, native_dtype if family is native else dtype, trust_remote_code)
    if family is native:
        backend = native.load_backend(directory, device=device, dtype=native_dtype)
        own_quantize = own_model_quantization(quantize, asked_dtype, device, native_dtype)
        quantize_network(backend.model, own_quantize, device, native_dtype)
        bf16_native.pack_network(backend.model)  # bfloat16 on the CPU: infill's product
        return backend
    if trust_remote_code:
        from infill.models.remote import load_remote

        return load_remote(directory, config, device, dtype, family)
    return family.load(directory, config, device, dtype, quantize)  # int8 as it loads


def family_module(directory: Path, config: dict) -> ModuleType:
    """The module that runs a checkpoint of config.json's `model_type`: infill.models.dream
    ("Dream", "qwen2"), .llada ("llada") or .native ("infill-diffusion"); ModelError otherwise.
    Within a module, its `conventions` tell the families apart (DreamOn, Open-dCoder, ...)."""
    model_type = config.get("model_type")
    if model_type == "infill-diffusion":
        import infill.models.native as native

        return native
    if model_type == "llada":
        import infill.models.llada as llada

        return llada
    if model_type in ("Dream", "qwen2"):
        import infill.models.dream as dream

        return dream
    raise ModelError(
        f"{directory / 'config.json'} has model_type {model_type!r}, which infill cannot run; "
        f"supported: {SUPPORTED}"
    )


def read_config(directory: Path) -> dict:
    path = directory / "config.json"
    if not path.is_file():
        raise ModelError(f"no config.json in {directory}: not a model folder")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ModelError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(config, dict):
        raise ModelError(f"{path} is not a JSON object")
    return config


def pick_device(device: str | torch.device | None) -> torch.device:
    if device is None or device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ModelError(f"unknown device {device!r} (cuda, mps, cpu or auto)") from error
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    if not available.get(device.type, False):
        raise ModelError(f"device {device} is not available on this machine")
    return device


def cpu_has_bfloat16() -> bool:
    """Whether this CPU computes in bfloat16 natively (AVX512-BF16 or AMX-BF16). Without it
    PyTorch emulates bfloat16, many times slower than float32 (infill.train.train.bf16_pays_off)."""
    capabilities = torch.cpu.get_capabilities()
    return bool(capabilities.get("avx512_bf16") or capabilities.get("amx_bf16"))


def pick_native_dtype(dtype: str | torch.dtype | None, quantize: str = "auto") -> torch.dtype:
    """The dtype of this project's own (small) model, which runs on the CPU: as asked; for "auto"
    bfloat16 where the CPU computes it natively, else float32 (and float32 for int8 weights,
    which are made from float32 ones; with quantize "auto" those float32 weights become int4:
    `own_model_quantization`). bfloat16 halves the weights read per pass: a span-only
    pass of the shipped model 8.3 -> 4.5 ms, its held-out line fills within one point of
    float32's (docs/models.md, "The shipped model's dtype")."""
    if dtype in (None, "auto"):
        native = quantize != "int8" and cpu_has_bfloat16()
        return torch.bfloat16 if native else torch.float32
    return pick_dtype(dtype, torch.device("cpu"))


def pick_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    if dtype is None or dtype == "auto":
        return torch.float32 if device.type == "cpu" else torch.bfloat16
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ModelError(f"unknown dtype {dtype!r} ({', '.join(DTYPES)} or auto)")
    return DTYPES[dtype]
