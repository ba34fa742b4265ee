"""A checkpoint's 4-bit network kept on disk, so that the next load reads it instead of packing again.

Loading a published 7B checkpoint with `--quantize int4` reads its 15 GB of bfloat16 weights and
packs every layer into 4 bits (infill.models.int4, .int4_native): about 30-50 s on two cores, at
every start of the command line or the language server. What that makes is about 4 GB: the packed
layers, the int8 embedding rows, the norms. The first such load writes it to infill's cache folder
as one safetensors file; every later load of the same checkpoint, by the same code, builds the
network on the meta device and takes those tensors as they are (the same numbers, to the bit).

The file is found by a key over everything its numbers depend on (`cache_key`): the checkpoint's
weight files (path, size, modification time), the network's parameters (names and shapes) and
the checkpoint's names for them, the dtype, the kernel (infill's, or PyTorch's, whose packing
depends on the CPU), torch's version and the source of the modules that pack. Anything else is
another file; the older files of the same checkpoint are removed when a new one is written. A file
that cannot be read (cut short, changed) is removed and the checkpoint is loaded as without it.

Only 4-bit networks on the CPU, only checkpoints of MIN_BYTES or more (a test's tiny checkpoints
are not kept, unless INFILL_PACKED_CACHE=always), and never with INFILL_PACKED_CACHE=off. Nothing
but tensors is read back: safetensors, written here as the format says (a header, then each
tensor's bytes, one tensor at a time, so that writing needs no second copy of the network in
memory).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import torch
from torch import nn

import infill.models.c_build as c_build

SWITCH = "INFILL_PACKED_CACHE"  # "off": never read or write a kept network; "always": at any size
MIN_BYTES = 256 * 2**20  # checkpoints this big or bigger are kept (the loading bar's threshold)
FORMAT = 1  # the layout of the file below; a new one makes every old file another key's
FOLDER = "packed"  # under infill's cache folder (c_build.cache_folder's parent)
SPARE_BYTES = 2**30  # a file is written only where this much disk stays free beside it
SOURCES = ("decoder.py", "int4.py", "int4_native.py", "quantize.py", "weights.py", "packed_cache.py")
"""The modules (beside this one) whose code decides the tensors kept: a change to any is a new key."""

DTYPES = {  # safetensors' names of the dtypes a packed network holds
    torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.uint8: "U8",
    torch.int8: "I8", torch.int32: "I32", torch.int64: "I64", torch.bool: "BOOL",
}  # fmt: skip
SIMPLE = (bool, int, float, str, type(None))


def enabled(files: list[Path]) -> bool:
    """Whether a load of these weight files keeps (and looks for) its packed network."""
    switch = os.environ.get(SWITCH, "on").strip().lower()
    if switch in ("off", "0", "no", "false"):
        return False
    return switch == "always" or sum(path.stat().st_size for path in files) >= MIN_BYTES


def key_for(
    kind: str, network: nn.Module, files: list[Path], names: dict, device: torch.device, dtype: torch.dtype
) -> str | None:
    """The kept file's name for a load of `files` quantized as `kind` on `device` (`cache_key`),
    or None where that load keeps nothing: not 4-bit on the CPU, or not `enabled`."""
    if kind != "int4" or device.type != "cpu" or not enabled(files):
        return None
    import infill.models.int4_native as int4_native

    return cache_key(network, files, names, dtype, int4_native.description())


def cache_key(network: nn.Module, files: list[Path], names: dict, dtype: torch.dtype, kernel: str) -> str:
    """The file name (without its folder) for `network` (built, on the meta device) loaded from
    `files` with `names` in `dtype` by `kernel` (its description): "<where>-<everything>", where
    the first part names the checkpoint's files and the second everything the numbers depend on
    (the files' sizes and times among it)."""
    paths = [str(path.resolve()) for path in files]
    stats = [Path(path).stat() for path in paths]
    here = Path(__file__).parent
    everything = {
        "files": [(path, stat.st_size, stat.st_mtime_ns) for path, stat in zip(paths, stats)],
        "format": FORMAT,
        "torch": torch.__version__,
        "kernel": kernel,
        "cpu": c_build.cpu_flags(),
        "dtype": str(dtype),
        "parameters": [(name, tuple(p.shape)) for name, p in network.named_parameters()],
        "names": sorted((key, str(place)) for key, place in names.items()),
        "sources": [hashlib.sha256((here / name).read_bytes()).hexdigest() for name in SOURCES],
    }
    first = digest(paths)  # the checkpoint where it is: its older files share this part
    return f"{first}-{digest(everything)}.safetensors"


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def folder() -> Path:
    """$XDG_CACHE_HOME/infill/packed (beside the kernels' folder), made if need be."""
    path = c_build.cache_folder().parent / FOLDER
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


# ------------------------------------------------------------------------------- writing one


def quantized_modules(network: nn.Module) -> dict[str, nn.Module]:
    """The modules that packing made (4-bit layers, int8 embedding rows), by name."""
    from infill.models.int4 import Int4Layer
    from infill.models.quantize import Int8Embedding

    return {name: m for name, m in network.named_modules() if isinstance(m, (Int4Layer, Int8Embedding))}


def keepable(network: nn.Module) -> bool:
    """Whether `network` can be written and read back as tensors: no int8 layers of PyTorch's
    (their weights are not tensors one can write), no two entries sharing memory."""
    from infill.models.quantize import quantized_kind

    if quantized_kind(network) != "int4":
        return False
    state = network.state_dict(keep_vars=True)
    places = [t.untyped_storage().data_ptr() for t in state.values() if t.numel()]
    return len(places) == len(set(places)) and all(t.dtype in DTYPES for t in state.values())


def write(network: nn.Module, path: Path) -> bool:
    """`network`'s tensors and the make-up of its packed modules into `path` (written whole or not
    at all); False, with a note on stderr, where the disk has no room or refuses."""
    state = {name: tensor.detach() for name, tensor in network.state_dict().items()}
    modules = {name: {"class": type(m).__name__, "attributes": attributes(m),
                      "parameters": [n for n, _ in m.named_parameters(recurse=False)]}
               for name, m in quantized_modules(network).items()}  # fmt: skip
    header: dict = {"__metadata__": {"format": str(FORMAT), "modules": json.dumps(modules)}}
    offset = 0
    for name, tensor in state.items():
        size = tensor.numel() * tensor.element_size()
        header[name] = {
            "dtype": DTYPES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    if shutil.disk_usage(path.parent).free < offset + len(text) + SPARE_BYTES:
        room = f"too little disk free in {path.parent}"
        print(f"infill: not keeping the packed network ({offset / 1e9:.1f} GB): {room}", file=sys.stderr)
        return False
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(partial, "wb") as out:
            out.write(struct.pack("<Q", len(text)) + text)
            for tensor in state.values():
                out.write(memoryview(tensor.contiguous().view(-1).view(torch.uint8).numpy()))
        os.replace(partial, path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        print(f"infill: not keeping the packed network: {error}", file=sys.stderr)
        return False
    return True


def attributes(module: nn.Module) -> dict:
    """A packed module's own settings (sizes, group size, dtype), as JSON can hold them."""
    found = {}
    for name, value in vars(module).items():
        if name.startswith("_") or name == "training":
            continue
        if isinstance(value, torch.dtype):
            found[name] = {"dtype": str(value).removeprefix("torch.")}
        elif isinstance(value, SIMPLE):
            found[name] = value
    return found


def keep(network: nn.Module, key: str) -> None:
    """Write `network` as `key`'s file, and remove the older files of the same checkpoint."""
    if not keepable(network):
        return
    place = folder()
    started = time.perf_counter()
    if not write(network, place / key):
        return
    checkpoint = key.split("-")[0]
    for old in place.glob(f"{checkpoint}-*.safetensors"):
        if old.name != key:
            old.unlink(missing_ok=True)
    size, seconds = (place / key).stat().st_size / 1e9, time.perf_counter() - started
    print(f"infill: kept the packed network in {place / key} ({size:.1f} GB, {seconds:.1f} s): "
          f"the next load reads it ({SWITCH}=off: never)", file=sys.stderr)  # fmt: skip


# ------------------------------------------------------------------------------- reading one


def read(build: Callable[[], nn.Module], key: str) -> nn.Module | None:
    """The network `build` makes on the meta device (its tied output layer untied, as packing
    unties it) with the packed modules and tensors of `key`'s file; None where there is no such
    file, or it does not fit that network (then it is removed)."""
    path = folder() / key
    if not path.is_file():
        return None
    network = build()
    untie_head = getattr(network, "untie_head", None)
    if untie_head is not None:
        untie_head()
    try:
        with open(path, "rb") as kept:
            metadata, places = header_of(kept)
            modules = json.loads(metadata["modules"])
            for name, made in modules.items():
                parent, _, attribute = name.rpartition(".")
                setattr(network.get_submodule(parent), attribute, shell(made))
            for name in sorted(places):
                owner, _, attribute = name.rpartition(".")
                put(network.get_submodule(owner), attribute, tensor_from(kept, places[name]),
                    modules[owner]["parameters"] if owner in modules else None)  # fmt: skip
        state = network.state_dict(keep_vars=True)
        if set(state) != set(places) or any(t.is_meta for t in state.values()):
            raise ValueError("it holds other tensors than this network's")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError, struct.error) as error:
        print(f"infill: the kept packed network {path} does not fit ({error}): removed, packing again",
              file=sys.stderr)  # fmt: skip
        path.unlink(missing_ok=True)
        return None
    print(f"infill: the packed network from {path}", file=sys.stderr)
    return network


def shell(made: dict) -> nn.Module:
    """The packed module `made` describes (its class and settings), without its tensors (`put`
    gives them): the module packing made, without packing."""
    from infill.models.int4 import Int4Linear
    from infill.models.int4_native import NativeInt4Linear
    from infill.models.quantize import Int8Embedding

    classes = {cls.__name__: cls for cls in (Int4Linear, NativeInt4Linear, Int8Embedding)}
    module = classes[made["class"]].__new__(classes[made["class"]])
    nn.Module.__init__(module)
    for attribute, value in made["attributes"].items():
        setattr(module, attribute, getattr(torch, value["dtype"]) if isinstance(value, dict) else value)
    return module


def put(module: nn.Module, attribute: str, value: torch.Tensor, parameters: list[str] | None) -> None:
    """`value` as `module`'s tensor `attribute`: a packed module's (a `shell`: `parameters` names
    its parameters, the rest are buffers), or one the network was built with, of the same shape
    (ValueError otherwise)."""
    if parameters is None:
        built = module._parameters.get(attribute, module._buffers.get(attribute))
        if built is None or built.shape != value.shape:
            raise ValueError(f"{attribute} of {type(module).__name__} is not a tensor of that shape here")
        parameter = attribute in module._parameters
    else:
        parameter = attribute in parameters
    if parameter:
        setattr(module, attribute, nn.Parameter(value, requires_grad=False))
    else:
        module.register_buffer(attribute, value)


def header_of(kept: BinaryIO) -> tuple[dict, dict[str, tuple[torch.dtype, list[int], int, int]]]:
    """The file's metadata, and for each tensor its dtype, shape and bytes' place in the file
    (from, to); ValueError where the header does not describe a whole file of this format."""
    size = os.fstat(kept.fileno()).st_size
    (length,) = struct.unpack("<Q", kept.read(8))
    if length > size - 8:
        raise ValueError("its header runs past its end")
    header = json.loads(kept.read(length))
    metadata = header.pop("__metadata__", {})
    if metadata.get("format") != str(FORMAT):
        raise ValueError(f"format {metadata.get('format')!r}, not {FORMAT}")
    names = {name: dtype for dtype, name in DTYPES.items()}
    places, end = {}, 0
    for key, entry in header.items():
        dtype, shape, (start, stop) = names[entry["dtype"]], entry["shape"], entry["data_offsets"]
        if start != end or stop - start != torch.Size(shape).numel() * dtype.itemsize:
            raise ValueError(f"{key}'s bytes are not where its shape says")
        places[key], end = (dtype, shape, 8 + length + start, 8 + length + stop), stop
    if 8 + length + end != size:
        raise ValueError(f"it is {size} bytes, its header says {8 + length + end}")
    return metadata, places


def tensor_from(kept: BinaryIO, place: tuple[torch.dtype, list[int], int, int]) -> torch.Tensor:
    """One tensor, read from the file into memory of its own (the same memory as packing makes:
    the process's own, on huge pages where PyTorch asks for them)."""
    dtype, shape, start, stop = place
    tensor = torch.empty(shape, dtype=dtype)
    kept.seek(start)
    if stop > start and kept.readinto(memoryview(tensor.view(-1).view(torch.uint8).numpy())) != stop - start:
        raise ValueError("it ends inside a tensor")
    return tensor
