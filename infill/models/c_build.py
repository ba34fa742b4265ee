"""Building infill's C sources for the CPU they run on: `build_library` compiles a source beside
this file once per machine (`-march=native`), into infill's cache folder, and loads it with
ctypes; again when the source, the compiler or the CPU changes. Where it cannot be built (not Linux
on x86-64, no C compiler, a CPU the source refuses) the caller gets the reason and keeps
PyTorch's operations. A library is written whole or not at all.

The sources: int4_native.c (the 4-bit product, infill.models.int4_native), bf16_native.c (the
bfloat16 product, infill.models.bf16_native), layer_ops.c (a layer's small operations,
infill.models.layer_ops) and, beside the sampler, infill/engine/top_candidates.c (a pass's most
likely tokens, infill.engine.top_candidates). They are plain C (no Python or PyTorch
headers: each builds in a fraction of a second); their OpenMP threads are PyTorch's own (the
process's one libgomp).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch

FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
# -march of a CPU without AVX-512 (the sources' 256-bit paths) -> the flag a CPU needs to run that code
OTHER_CPUS = {"x86-64-v3": "avx2", "alderlake": "avx_vnni"}  # AVX2 alone; AVX-VNNI (Intel's laptops)
NO_COMPILER = "no C compiler (cc) to build it with"


class Build(NamedTuple):
    """The built library, or None and the reason there is none."""

    library: ctypes.CDLL | None
    reason: str = ""


def build_library(source: Path, flags: tuple[str, ...] = FLAGS, refusal: str | None = None) -> Build:
    """`source` built for this CPU and loaded (not declared: the caller sets the argument types).
    `refusal`: the message of the source's #error for a CPU it cannot serve; that failure is this
    CPU's for good and is remembered, other failures are tried again in the next process."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return Build(None, f"built for Linux on x86-64 only, not {platform.system()} on {platform.machine()}")
    try:
        text = source.read_bytes()
    except OSError as error:  # an install that left it out: PyTorch's operations, not a crash
        return Build(None, f"its source cannot be read: {error}")
    compiler = c_compiler()
    if compiler is None:
        return Build(None, NO_COMPILER)
    key = hashlib.sha256(text + " ".join((compiler, *flags, cpu_flags())).encode()).hexdigest()[:16]
    folder = cache_folder()
    library, failed = folder / f"{source.stem}-{key}.so", folder / f"{source.stem}-{key}.failed"
    if failed.exists():
        return Build(None, failed.read_text().strip())
    if not library.exists():
        reason = compile_library(compiler, source, library, flags, refusal)
        if reason and reason == refusal:  # this CPU's for good: not tried again
            write_atomically(failed, reason)
        if reason:  # a compiler's failure: tried again in the next process (it may be installed by then)
            return Build(None, reason)
    return Build(ctypes.CDLL(str(library)))


def build_unless_switched(
    switch: str,
    source: Path,
    declare: Callable[[ctypes.CDLL], ctypes.CDLL],
    refusal: str | None = None,
    flags: tuple[str, ...] = FLAGS,
) -> Build:
    """`source` built for this CPU (`build_library`) and its functions declared by `declare`, unless
    the environment variable `switch` says "pytorch" (PyTorch's operations kept, for comparisons)."""
    if os.environ.get(switch, "native") == "pytorch":
        return Build(None, f"{switch}=pytorch")
    built = build_library(source, flags, refusal)
    return built if built.library is None else Build(declare(built.library))


def build_elsewhere(
    source: Path, folder: Path, declare: Callable[[ctypes.CDLL], ctypes.CDLL], flags: tuple[str, ...] = FLAGS
) -> Build:
    """`source` built into `folder`, not the cache (another version of a library, which an
    experiment compares with today's), and its functions declared by `declare`."""
    compiler = c_compiler()
    if compiler is None:
        return Build(None, NO_COMPILER)
    library = folder / f"{source.stem}.so"
    reason = compile_library(compiler, source, library, flags)
    return Build(None, reason) if reason else Build(declare(ctypes.CDLL(str(library))))


def flags_for(march: str, flags: tuple[str, ...] = FLAGS) -> tuple[str, ...]:
    """`flags` with `-march=native` made `-march=march`: the code another kind of CPU would build
    (tests and experiments run it where this CPU has what it needs: OTHER_CPUS)."""
    return tuple(f"-march={march}" if flag == "-march=native" else flag for flag in flags)


def c_compiler() -> str | None:
    """The C compiler's path ($CC, else cc), or None where there is none."""
    return shutil.which(os.environ.get("CC", "cc"))


def inference_on_cpu(*tensors: torch.Tensor) -> bool:
    """Whether infill's C calls may serve `tensors` (the callers add their dtypes and whether their
    library is built): all on the CPU, no gradient wanted (the C calls have none), no autocast
    (which changes the dtypes of PyTorch's operations: training's held-out loss)."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return False
    return not torch.is_autocast_enabled("cpu") and all(t.device.type == "cpu" for t in tensors)


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


def compile_library(
    compiler: str, source: Path, library: Path, flags: tuple[str, ...] = FLAGS, refusal: str | None = None
) -> str:
    """Build `library` from `source` (written whole or not at all); the reason it could not be
    (`refusal` when the source's #error says so), else ""."""
    partial = library.with_name(f"{library.name}.{os.getpid()}.tmp")
    command = [compiler, *flags, str(source), "-o", str(partial)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the C compiler failed: {error}"
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        if refusal and refusal in done.stderr:
            return refusal
        last = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return f"the C compiler failed: {last[0]}"
    os.replace(partial, library)
    return ""


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(text + "\n")
    os.replace(partial, path)
