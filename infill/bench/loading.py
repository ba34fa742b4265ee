"""The memory a real checkpoint takes while it loads: `infill-bench loading`.

A checkpoint of a shape's real size (dream-7b: 15 GB) is written once in the published layout:
Qwen2's weight names, bfloat16, shards of at most SHARD_BYTES with `model.safetensors.index.json`,
random numbers (the memory does not depend on them). Then a fresh Python process loads it through
the families' own loader (`infill.models.weights.load_network` with the Dream family's names, the
path `infill.models.load` takes after reading config.json and the tokenizer), with the asked
quantization, and reports its peak resident memory (the kernel's high-water mark, VmHWM),
the time it took and what it holds once loaded. A fresh process, so nothing measured before counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from infill.models.decoder import DecoderConfig, Rows
from infill.models.packed_cache import SWITCH

SHARD_BYTES = 4 * 10**9  # the published 7B checkpoints' shards are about 4 GB


@dataclass
class LoadingRow:
    shape: str
    quantize: str
    checkpoint_gb: float  # bytes on disk / 1e9
    seconds: float
    peak_mib: float  # the loading process's peak resident memory
    loaded_mib: float  # what it holds once loaded
    way: str = "packed"  # "packed" (not kept), "packed, kept" (and written), "kept file" (read back)


def write_checkpoint(shape: str, directory: Path) -> float:
    """A random bfloat16 checkpoint of `shape` (infill.bench.shapes.SHAPES) in `directory`, in the
    published layout, unless one is there already; its size in GB."""
    from infill.bench.shapes import SHAPES, TINY_SHAPES
    from infill.models.dream import weight_names

    index = directory / "model.safetensors.index.json"
    if not index.is_file():
        config = {**SHAPES, **TINY_SHAPES}[shape][0]
        shards = plan_shards(weight_names(config), parameter_shapes(config))
        directory.mkdir(parents=True, exist_ok=True)
        generator = torch.Generator().manual_seed(0)
        weight_map = {}
        for number, shard in enumerate(
            tqdm(shards, desc=f"writing a random {shape} checkpoint", file=sys.stderr)
        ):
            name = f"model-{number + 1:05d}-of-{len(shards):05d}.safetensors"
            tensors = {key: torch.empty(size, dtype=torch.bfloat16).normal_(0, 0.02, generator=generator)
                       for key, size in shard.items()}  # fmt: skip
            save_file(tensors, str(directory / name), metadata={"format": "pt"})
            del tensors
            weight_map |= dict.fromkeys(shard, name)
        index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
    return sum(path.stat().st_size for path in directory.glob("*.safetensors")) / 1e9


def plan_shards(
    names: dict[str, str | Rows], shapes: dict[str, tuple[int, ...]]
) -> list[dict[str, tuple[int, ...]]]:
    """The checkpoint's tensors (name -> shape) in order, cut into shards of at most SHARD_BYTES."""
    shards: list[dict[str, tuple[int, ...]]] = [{}]
    size = 0
    for key, place in names.items():
        shape = place.shape(shapes[place.parameter]) if isinstance(place, Rows) else shapes[place]
        nbytes = 2 * torch.Size(shape).numel()
        if size and size + nbytes > SHARD_BYTES:
            shards.append({})
            size = 0
        shards[-1][key] = shape
        size += nbytes
    return shards


def parameter_shapes(config: DecoderConfig) -> dict[str, tuple[int, ...]]:
    from infill.models.decoder import Decoder
    from infill.models.weights import build_meta

    network = build_meta(lambda: Decoder(config))
    return {name: tuple(parameter.shape) for name, parameter in network.named_parameters()}


def measure_loading(
    shape: str, directory: Path, quantize: str, threads: int | None, keep: bool = False
) -> LoadingRow:
    """Load the checkpoint in `directory` in a fresh process with `quantize`; its figures. `keep`:
    with infill's kept packed networks at any size (infill.models.packed_cache; else switched off),
    so that a 4-bit load writes its file, or reads the one an earlier load wrote."""
    command = [
        sys.executable,
        "-m",
        "infill.bench.loading",
        shape,
        str(directory),
        quantize,
        str(threads or 0),
    ]
    environment = {**os.environ, SWITCH: "always" if keep else "off"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)
    if done.returncode != 0:
        raise SystemExit(f"infill-bench loading: loading {directory} failed:\n{done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    size = sum(path.stat().st_size for path in directory.glob("*.safetensors")) / 1e9
    way = "kept file" if "the packed network from" in done.stderr else "packed"
    way += ", kept" if "kept the packed network" in done.stderr else ""
    return LoadingRow(shape=shape, quantize=quantize, checkpoint_gb=size, way=way, **figures)


def load_here(shape: str, directory: Path, quantize: str, threads: int) -> dict:
    """(In the fresh process) load the checkpoint as `infill.models.dream.load` does; the figures."""
    from infill.bench.shapes import SHAPES, TINY_SHAPES, peak_mib, resident_mib
    from infill.models.decoder import Decoder
    from infill.models.dream import ignorable, weight_names
    from infill.models.weights import load_network, weight_files

    if threads:
        torch.set_num_threads(threads)
    config = {**SHAPES, **TINY_SHAPES}[shape][0]
    cpu = torch.device("cpu")
    started = time.perf_counter()
    files = weight_files(directory)
    network = load_network(lambda: Decoder(config), files, weight_names(config), ignorable(config), cpu,
                           torch.float32, quantize)  # fmt: skip
    seconds = time.perf_counter() - started
    peak = peak_mib(cpu)
    loaded = resident_mib(cpu)
    del network
    return {"seconds": seconds, "peak_mib": peak, "loaded_mib": loaded}


def format_rows(rows: list[LoadingRow]) -> str:
    lines = [f"{'shape':18} {'quantize':>8} {'on disk':>8} {'load s':>7} {'peak MiB':>9} {'loaded MiB':>10}"
             "  how"]  # fmt: skip
    for r in rows:
        lines.append(f"{r.shape:18} {r.quantize:>8} {r.checkpoint_gb:6.1f}GB {r.seconds:7.1f} {r.peak_mib:9.0f} "  # noqa: E501
                     f"{r.loaded_mib:10.0f}  {r.way}")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":  # the fresh process of `measure_loading`
    name, folder, mode, thread_count = sys.argv[1:5]
    print(json.dumps(load_here(name, Path(folder), mode, int(thread_count))))
