"""infill's own 4-bit product for the CPU (`NativeInt4Linear`): 4-bit weights times 8-bit
activations in integer dot products, from the C source beside this file (int4_native.c), built at
first use for the CPU it runs on (`-march=native`: AVX-512 VNNI, else AVX-VNNI or AVX2) and kept in
infill's cache folder. Where it cannot be built (no C compiler, a CPU with neither, not Linux on
x86-64) or `INFILL_INT4_KERNEL=pytorch` says so, 4-bit layers keep PyTorch's kernel
(`infill.models.int4.Int4Linear`); `build().reason` says why.

Why a kernel of our own: PyTorch's 4-bit CPU kernel turns each group of weights back into float32
and multiplies in float32, so on two cores a pass over a line's few positions costs its
arithmetic, not its weights' bytes (docs/models.md, "4-bit weights"). Here the activations are
quantized to int8 as they come in (one scale for each 32 inputs of a row, as llama.cpp's Q8_0
does) and the products are integer dot products, 64 an AVX-512 VNNI instruction. The weights are
the same numbers as Int4Linear's (min-max, groups of GROUP_SIZE inputs, q in 0..15, kept as
q * scale + offset); rounding the activations adds about 0.5% of an output to the weights' error
(tests/models/test_int4_native.py).

The library is plain C called through ctypes (no Python or PyTorch headers: it builds in a fraction
of a second); its OpenMP threads are PyTorch's own (the process's one libgomp), as many as
`torch.get_num_threads()`, and the interpreter is free during a call.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

import torch

from infill.models.int4 import GROUP_SIZE, QUANTIZE_ROWS, Int4Layer, group_size_for

SOURCE = Path(__file__).with_name("int4_native.c")
TILE = 16  # output rows a packed tile holds (one AVX-512 register of int32 lanes)
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
SWITCH = "INFILL_INT4_KERNEL"  # "pytorch": keep PyTorch's kernel (for comparisons)
NO_INSTRUCTIONS = "this CPU has neither AVX-512 VNNI nor AVX2"  # the C source's #error


class Build(NamedTuple):
    """The built library, or None and the reason there is none."""

    library: ctypes.CDLL | None
    reason: str = ""


@functools.cache
def build() -> Build:
    """The kernel for this CPU, built once per machine (and again when the source changes)."""
    if os.environ.get(SWITCH, "native") == "pytorch":
        return Build(None, f"{SWITCH}=pytorch")
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return Build(None, f"built for Linux on x86-64 only, not {platform.system()} on {platform.machine()}")
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return Build(None, "no C compiler (cc) to build it with")
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + " ".join((compiler, *FLAGS, cpu_flags())).encode()).hexdigest()[:16]
    folder = cache_folder()
    library, failed = folder / f"int4_native-{key}.so", folder / f"int4_native-{key}.failed"
    if failed.exists():
        return Build(None, failed.read_text().strip())
    if not library.exists():
        reason = compile_library(compiler, library, FLAGS)
        if reason == NO_INSTRUCTIONS:  # this CPU's for good: not tried again
            write_atomically(failed, reason)
        if reason:  # a compiler's failure: tried again in the next process (it may be installed by then)
            return Build(None, reason)
    return Build(declared(ctypes.CDLL(str(library))))


def cpu_flags() -> str:
    """This CPU's feature flags as Linux lists them (what -march=native builds for)."""
    try:
        with open("/proc/cpuinfo") as info:
            return next((line for line in info if line.startswith("flags")), "")
    except OSError:
        return platform.processor()


def cache_folder() -> Path:
    """$XDG_CACHE_HOME/infill/kernels (~/.cache/...), or a temporary folder where that cannot be made."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = base / "infill" / "kernels"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # a library loaded from here runs as the user
        return folder
    except OSError:
        return Path(tempfile.mkdtemp(prefix="infill-kernels-"))


def compile_library(compiler: str, library: Path, flags: tuple[str, ...] = FLAGS) -> str:
    """Build `library` (written whole or not at all); the reason it could not be, else ""."""
    partial = library.with_name(f"{library.name}.{os.getpid()}.tmp")
    command = [compiler, *flags, str(SOURCE), "-o", str(partial)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the C compiler failed: {error}"
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        if "neither AVX-512 VNNI nor AVX2" in done.stderr:
            return NO_INSTRUCTIONS
        last = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return f"the C compiler failed: {last[0]}"
    os.replace(partial, library)
    return ""


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(text + "\n")
    os.replace(partial, path)


def declared(library: ctypes.CDLL) -> ctypes.CDLL:
    pointer, size, integer = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    library.infill_int4_linear.argtypes = [
        pointer, size, size, size, pointer, pointer, pointer, size, pointer, integer
    ]  # fmt: skip
    library.infill_int4_linear.restype = integer
    library.infill_int4_instructions.argtypes = []
    library.infill_int4_instructions.restype = ctypes.c_char_p
    return library


def available() -> bool:
    return build().library is not None


def description() -> str:
    """Which kernel 4-bit layers on this CPU use, in words, for the loading message."""
    library, reason = build()
    if library is None:
        return f"PyTorch's kernel (infill's own: {reason})"
    return f"infill's kernel ({library.infill_int4_instructions().decode()})"


def pack(weight: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`weight` (out, in; any float dtype) -> (tiles, scales, offsets) in the kernel's layout (the
    C source's comment), QUANTIZE_ROWS rows at a time."""
    rows, columns = weight.shape
    tiles, scales, offsets = [], [], []
    for start in range(0, rows, QUANTIZE_ROWS):
        block = weight[start : start + QUANTIZE_ROWS].to(torch.float32, copy=True)
        count = len(block)
        grouped = block.view(count, columns // group, group)
        low = grouped.amin(-1, keepdim=True)
        scale = (grouped.amax(-1, keepdim=True) - low).div_(15).clamp_(min=1e-10)
        q = grouped.sub_(low).div_(scale).round_().clamp_(0, 15).to(torch.uint8)
        # (tiles, 16 rows, in / 8, 2 halves, 4 inputs) -> (tiles, in / 8, halves, rows, inputs)
        q = q.view(count // TILE, TILE, columns // 8, 2, 4).permute(0, 2, 3, 1, 4)
        tiles.append((q[:, :, 0] | (q[:, :, 1] << 4)).reshape(count // TILE, columns // 8, 64))
        for table, values in ((scales, scale), (offsets, low)):
            table.append(values.view(count // TILE, TILE, -1).transpose(1, 2).to(torch.bfloat16))
        del block, q
    return tuple(torch.cat(parts).contiguous() for parts in (tiles, scales, offsets))


def unpacked(tiles: torch.Tensor, scales: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The weights `pack` made, (out, in) in float32: q * scale + offset."""
    count, chunks, _ = tiles.shape
    halves = torch.stack([tiles & 15, tiles >> 4], dim=2).view(count, chunks, 2, TILE, 4)
    q = halves.permute(0, 3, 1, 2, 4).reshape(count * TILE, chunks * 8).float()
    group = chunks * 8 // scales.shape[1]

    def by_input(table: torch.Tensor) -> torch.Tensor:  # (tiles, groups, 16) -> (out, in)
        return table.float().transpose(1, 2).reshape(count * TILE, -1).repeat_interleave(group, 1)

    return q * by_input(scales) + by_input(offsets)


def matmul(
    x: torch.Tensor,
    tiles: torch.Tensor,
    scales: torch.Tensor,
    offsets: torch.Tensor,
    library: ctypes.CDLL | None = None,
) -> torch.Tensor:
    """`x` (rows, in) times the packed weights (out, in) transposed: (rows, out) float32, by
    `library` (default: `build()`'s)."""
    rows, columns = x.shape
    out = torch.empty(rows, len(tiles) * TILE)
    x = x.to(torch.float32).contiguous()
    failed = (library or build().library).infill_int4_linear(
        x.data_ptr(), rows, columns, columns // scales.shape[1], tiles.data_ptr(), scales.data_ptr(),
        offsets.data_ptr(), out.shape[1], out.data_ptr(), torch.get_num_threads(),
    )  # fmt: skip
    if failed:
        raise MemoryError(f"no memory for the int8 activations of a {rows} x {columns} product")
    return out


class NativeInt4Linear(Int4Layer):
    """A linear layer with 4-bit weights multiplied by this module's kernel (CPU only)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, group_size: int = GROUP_SIZE):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        group = group_size_for(self.in_features, group_size)
        if group is None or self.out_features % TILE:
            raise ValueError(
                f"a {tuple(weight.shape)} weight cannot be packed in 4 bits (groups of {group_size})"
            )
        self.group_size = group
        tiles, scales, offsets = pack(weight.detach(), group)
        self.register_buffer("tiles", tiles)
        self.register_buffer("scales", scales)
        self.register_buffer("offsets", offsets)
        self.bias = None if bias is None else torch.nn.Parameter(bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        y = matmul(rows, self.tiles, self.scales, self.offsets).reshape(*x.shape[:-1], self.out_features)
        y = y.to(x.dtype)
        return y if self.bias is None else y + self.bias.to(x.dtype)

    def dequantized(self) -> torch.Tensor:
        return unpacked(self.tiles, self.scales, self.offsets)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.tiles, self.scales, self.offsets))
