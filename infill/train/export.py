"""A training checkpoint -> a model directory that `--model` and the language server load.

The directory holds float16 safetensors (one file, or shards of at most `MAX_SHARD` bytes with
`model.safetensors.index.json` beside them), config.json, tokenizer.json, training.json (what the
model is and how it was trained: `infill.models.model_info` reads it) and, where there is a log, the
loss plot. It is written next to its target and renamed into place, so a half-written export is
never left where a model is looked for.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from infill.models.native.model import InfillModel
from infill.models.native.tokenizer import CodeTokenizer

MAX_SHARD = "15MB"  # 15 * 10**6 bytes: under the 16 MiB a file may have to come back from a GPU machine
MAX_SHARD_BYTES = 16 * 2**20
MAX_FILES = 8  # files a GPU machine hands back


def export_model(
    checkpoint: Path, to: Path, info: dict, log: list[dict] | None = None, shard: str | None = None
) -> Path:
    """Write the checkpoint's weights as float16 (in shards of at most `shard` bytes, e.g. "15MB",
    if given: then also at most MAX_FILES files of at most 16 MiB), its tokenizer and config,
    training.json (`info` plus the parameter count and, if given, the training log) and loss.png
    (from the log) into `to`, replacing what was there only once everything is written."""
    model = InfillModel.from_pretrained(checkpoint)
    params = sum(p.numel() for p in model.parameters())
    tmp = to.with_name(to.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if shard:
        model.to(torch.float16).save_pretrained(tmp, max_shard_size=shard)
    else:
        model.to(torch.float16).save_pretrained(tmp)
    CodeTokenizer.load(checkpoint).save(tmp)
    training = {"params": params, **info}
    if log:
        training["log"] = log
        plot_loss(log, tmp / "loss.png")
    (tmp / "training.json").write_text(json.dumps(training, indent=1))
    if shard:
        check_shards(tmp)
    replace_dir(tmp, to)
    return to


def check_shards(directory: Path) -> None:
    """A GPU machine hands back at most MAX_FILES files of at most 16 MiB each: refuse more."""
    files = [f for f in directory.iterdir() if f.is_file()]
    too_big = [f.name for f in files if f.stat().st_size > MAX_SHARD_BYTES]
    if len(files) > MAX_FILES or too_big:
        big = ", ".join(too_big) or "none"
        message = f"{len(files)} files (at most {MAX_FILES}); over 16 MiB: {big}"
        raise RuntimeError(f"export in {directory}: {message}")


def replace_dir(new: Path, target: Path) -> None:
    """Move `new` to `target`, replacing an older `target` (the old one is removed last)."""
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    new.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def read_log(run: Path) -> list[dict]:
    path = run / "log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def plot_loss(rows: list[dict], path: Path) -> None:
    """Training and held-out loss against training tokens."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.figure(figsize=(7, 4))
    trained = [r for r in rows if "loss" in r]
    plt.plot(
        [r["tokens"] / 1e6 for r in trained],
        [r["loss"] for r in trained],
        label="train loss (batch)",
        alpha=0.6,
    )
    heldout = [r for r in rows if "heldout_loss" in r]
    if heldout:
        plt.plot(
            [r["tokens"] / 1e6 for r in heldout], [r["heldout_loss"] for r in heldout], label="held-out loss"
        )
    plt.xlabel("training tokens (M)")
    plt.ylabel("diffusion loss")
    plt.legend()
    plt.grid(alpha=0.3)
    plt.tight_layout()
    plt.savefig(path, dpi=100)
    plt.close()
