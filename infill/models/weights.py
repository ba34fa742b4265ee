"""Weights from a checkpoint folder into a model, safetensors only, one tensor at a time.

A folder holds `model.safetensors`, or shards listed in `model.safetensors.index.json`. The model
is built on the meta device (no memory), given uninitialised storage in the target dtype and
device once, and each checkpoint tensor is then copied into its place straight from the
memory-mapped file: the weights are never held twice. Pickle checkpoints (`pytorch_model.bin`,
`*.pt`, `*.pth`) can run arbitrary code when loaded and are refused.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import nn
from tqdm import tqdm

from infill.errors import ModelError

INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
CONVERT_HINT = (
    "infill loads safetensors only: pickle files can run arbitrary code when loaded. Convert once, "
    'in an environment you trust, e.g. python -c "import torch; from safetensors.torch import save_file; '
    "save_file({k: v.contiguous() for k, v in torch.load('pytorch_model.bin', weights_only=True).items()}, "
    "'model.safetensors')\" (or transformers' save_pretrained(..., safe_serialization=True))"
)


def weight_files(directory: Path) -> list[Path]:
    """The safetensors files of a checkpoint folder; ModelError naming what is missing."""
    index = directory / INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError, TypeError) as error:
            raise ModelError(f"{index} is not a safetensors index (no weight_map): {error}") from error
        shards = sorted(set(weight_map.values()))
        missing = [name for name in shards if not (directory / name).is_file()]
        if missing:
            raise ModelError(
                f"{directory}: the index lists {len(shards)} shard(s) but {', '.join(missing)} "
                "is not in the folder (an interrupted download? fetch the missing file(s))"
            )
        return [directory / name for name in shards]
    if (directory / "model.safetensors").is_file():
        return [directory / "model.safetensors"]
    found = sorted(directory.glob("*.safetensors"))
    if found:
        return found
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise ModelError(f"{directory} has only pickle weights ({', '.join(pickles)}). {CONVERT_HINT}")
    raise ModelError(f"no weights in {directory}: expected model.safetensors, or {INDEX} and its shards")


def memory_note(label: str, parameters: int, dtype: torch.dtype, device: torch.device) -> str:
    """What loading will take, printed before it starts (parameters x bytes per number)."""
    count, memory = count_text(parameters), weights_size(parameters, dtype)
    kind = str(dtype).removeprefix("torch.")
    return f"infill: loading {label}: {count} parameters in {kind} on {device}, {memory} for the weights"


def count_text(parameters: int) -> str:
    """7615616512 -> "7.62B", 494032768 -> "494.0M"."""
    return f"{parameters / 1e9:.2f}B" if parameters >= 1e9 else f"{parameters / 1e6:.1f}M"


def weights_size(parameters: int, dtype: torch.dtype) -> str:
    """The memory `parameters` numbers take in `dtype`: "14.2 GiB", "943 MiB"."""
    size = parameters * torch.empty((), dtype=dtype).element_size()
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"


def build_empty(make: Callable[[], nn.Module], device: torch.device, dtype: torch.dtype) -> nn.Module:
    """The module built on the meta device, then given uninitialised storage on `device`."""
    with torch.device("meta"):
        module = make()
    return module.to(dtype).to_empty(device=device).eval()


def load_weights(
    module: nn.Module,
    files: list[Path],
    names: dict[str, str],
    ignore: Callable[[str], bool] = lambda name: False,
) -> None:
    """Copy each checkpoint tensor named in `names` (checkpoint name -> the module's parameter)
    into `module`; tensors `ignore` accepts are skipped. ModelError on an unknown tensor, a shape
    mismatch or a parameter no file provides."""
    params = dict(module.named_parameters())
    loaded: set[str] = set()
    show = sum(f.stat().st_size for f in files) > 256 * 2**20  # a bar for real checkpoints only
    for path in tqdm(files, desc="loading weights", unit="shard", disable=not show, file=sys.stderr):
        try:
            with safe_open(str(path), framework="pt", device="cpu") as shard:
                for key in shard.keys():
                    target = names.get(key)
                    if target is None:
                        if ignore(key):
                            continue
                        raise ModelError(f"{path.name} holds {key!r}, which this model family does not have")
                    tensor = shard.get_tensor(key)
                    param = params[target]
                    if tuple(tensor.shape) != tuple(param.shape):
                        raise ModelError(
                            f"{path.name}: {key} has shape {tuple(tensor.shape)}, but config.json "
                            f"implies {tuple(param.shape)}"
                        )
                    with torch.no_grad():
                        param.copy_(tensor)
                    loaded.add(target)
                    del tensor
        except (SafetensorError, OSError) as error:
            raise ModelError(f"cannot read {path}: {error}") from error
    missing = [key for key, target in names.items() if target not in loaded]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ModelError(f"the checkpoint lacks {', '.join(missing[:3])}{more}")
