"""Weights from a checkpoint folder into a model, safetensors only, one tensor at a time.

A folder holds `model.safetensors`, or shards listed in `model.safetensors.index.json`. The model
is built on the meta device (no memory) and each checkpoint tensor, read from the memory-mapped
file and turned into the target dtype and device, becomes its parameter as it comes: the weights
are never held twice, and a caller that quantizes each layer as soon as its weights are in
(`infill.models.quantize.Quantizing`) never holds the float network at all. Pickle checkpoints
(`pytorch_model.bin`, `*.pt`, `*.pth`) can run arbitrary code when loaded and are refused.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import nn
from tqdm import tqdm

import infill.models.packed_cache as packed_cache
from infill.errors import ModelError
from infill.models.decoder import Rows
from infill.models.memory import loading_blocks
from infill.models.quantize import quantizing

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


def build_meta(make: Callable[[], nn.Module]) -> nn.Module:
    """The module built on the meta device: shapes, no memory; `parameter_setter` fills it."""
    with torch.device("meta"):
        return make().eval()


def parameter_setter(module: nn.Module) -> Callable[[str, torch.Tensor], None]:
    """set(name, value): the parameter `name` of `module` replaced by `value`, in every submodule
    that shares it (a tied output layer holds the embedding's). Where each parameter sits is looked
    up once (walking the modules for each of the 0.5B shape's 290 parameters took 1.2 s), by
    name: holding the submodules would keep a float layer alive after int8 replaced it."""
    places: dict[str, list[str]] = {}  # parameter -> its names in every submodule holding it
    first_name: dict[int, str] = {}
    for name, parameter in module.named_parameters(remove_duplicate=False):
        places.setdefault(first_name.setdefault(id(parameter), name), []).append(name)

    def set_parameter(name: str, value: torch.Tensor) -> None:
        new = nn.Parameter(value, requires_grad=False)
        for place in places[name]:
            owner, _, attribute = place.rpartition(".")
            setattr(module.get_submodule(owner), attribute, new)

    return set_parameter


def load_network(
    make: Callable[[], nn.Module],
    files: list[Path],
    names: dict[str, str | Rows],
    ignore: Callable[[str], bool],
    device: torch.device,
    dtype: torch.dtype,
    quantize: str,
) -> nn.Module:
    """The module `make` builds, its weights read from `files` (`load_weights`); with quantized
    weights (`quantize`: infill.models.quantize) each layer quantized as soon as its weights are in.
    The allocator maps big blocks apart while loading and keeps them for the passes after
    (infill.models.memory)."""
    with loading_blocks():
        module = build_meta(make)
        loading = quantizing(quantize, module, device, dtype)
        if loading is None:
            load_weights(module, files, names, ignore, device=device, dtype=dtype)
            return module
        key = packed_cache.key_for(loading.kind, module, files, names, device, dtype)
        if key is not None:  # read into a module of its own: a file that does not fit leaves this one as is
            kept = packed_cache.read(lambda: build_meta(make), key)
            if kept is not None:
                return kept
        load_weights(module, files, names, ignore, device=device, dtype=dtype, loaded=loading.loaded,
                     stored=loading.stored)  # fmt: skip
        if key is not None:
            packed_cache.keep(module, key)
    return module


def load_weights(
    module: nn.Module,
    files: list[Path],
    names: dict[str, str | Rows],
    ignore: Callable[[str], bool] = lambda name: False,
    *,
    device: torch.device,
    dtype: torch.dtype,
    loaded: Callable[[str], None] = lambda name: None,
    stored: Callable[[str], bool] = lambda name: False,
) -> None:
    """Each checkpoint tensor named in `names` (checkpoint name -> the module's parameter, or its
    `Rows` in a fused one), in `dtype` (or as stored, for a parameter `stored` accepts) on `device`,
    as that parameter of `module` (built by `build_meta`); once a parameter is whole, `loaded(its
    name)`. Tensors `ignore` accepts are skipped. ModelError on an unknown tensor, a shape mismatch
    or a parameter no file provides."""
    params = {name: tuple(param.shape) for name, param in module.named_parameters()}
    set_parameter = parameter_setter(module)
    done: set[str] = set()
    parts = FusedParts(names)
    show = sum(f.stat().st_size for f in files) > 256 * 2**20  # a bar for real checkpoints only
    for path in tqdm(files, desc="loading weights", unit="shard", disable=not show, file=sys.stderr):
        for key in shard_keys(path):
            place = names.get(key)
            if place is None:
                if ignore(key):
                    continue
                raise ModelError(f"{path.name} holds {key!r}, which this model family does not have")
            if key in done:
                raise ModelError(f"{path.name} holds {key!r} a second time")
            part = place if isinstance(place, Rows) else None  # one part of a fused parameter
            target = part.parameter if part is not None else place
            expected = part.shape(params[target]) if part is not None else params[target]
            tensor = read_tensor(path, key)
            if tuple(tensor.shape) != expected:
                raise ModelError(
                    f"{path.name}: {key} has shape {tuple(tensor.shape)}, but config.json implies {expected}"
                )
            kept = tensor.dtype if stored(target) and tensor.is_floating_point() else dtype
            if part is not None:  # copied straight into its rows: the whole parameter once every part is in
                value = parts.put(part, tensor, params[target], device, kept)
            else:
                value = tensor.to(device=device, dtype=kept).contiguous()
            del tensor
            done.add(key)
            if value is not None:
                set_parameter(target, value)
                loaded(target)
    missing = [key for key in names if key not in done]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ModelError(f"the checkpoint lacks {', '.join(missing[:3])}{more}")


class FusedParts:
    """The fused parameters being assembled from their checkpoint tensors (`Rows`): each held
    until its last part is in, then handed over whole."""

    def __init__(self, names: dict[str, str | Rows]):
        self.expected: dict[str, int] = {}  # parameter -> parts still to come
        for place in names.values():
            if isinstance(place, Rows):
                self.expected[place.parameter] = self.expected.get(place.parameter, 0) + 1
        self.partial: dict[str, torch.Tensor] = {}

    def put(self, place: Rows, value: torch.Tensor, shape: tuple[int, ...], device: torch.device,
            dtype: torch.dtype) -> torch.Tensor | None:  # fmt: skip
        """`value` into its rows of `place.parameter` (of `shape`, made on `device` in `dtype` at its
        first part): the whole parameter once every part is in, else None."""
        whole = self.partial.get(place.parameter)
        if whole is None:
            whole = self.partial[place.parameter] = torch.empty(shape, dtype=dtype, device=device)
        whole[place.start : place.stop] = value
        self.expected[place.parameter] -= 1
        if self.expected[place.parameter]:
            return None
        return self.partial.pop(place.parameter)


def shard_keys(path: Path) -> list[str]:
    with opened(path) as shard:
        return list(shard.keys())


def read_tensor(path: Path, key: str) -> torch.Tensor:
    """One tensor of a safetensors file, the file mapped for this one read: each page of a mapping
    read counts in the process's resident memory until the file is closed (Open-dCoder 0.5B's one
    988 MB file, read in one opening, added its whole size to the loading peak)."""
    with opened(path) as shard:
        return shard.get_tensor(key)


@contextmanager
def opened(path: Path) -> Iterator:
    try:
        with safe_open(str(path), framework="pt", device="cpu") as shard:
            yield shard
    except (SafetensorError, OSError) as error:
        raise ModelError(f"cannot read {path}: {error}") from error
