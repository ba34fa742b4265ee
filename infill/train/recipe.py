"""The GPU recipe: corpus -> model -> export in one command, made for short, rare GPU time.

    infill-train recipe --device cuda --out runs/gpu --minutes 20 --session-minutes 8.5
    infill-train recipe --device cpu --tiny --out /tmp/tiny      # the whole recipe at toy scale

A GPU comes in commands of at most 10 minutes, 30 minutes in all, on a machine whose disk is kept
only while commands follow each other closely. So everything lives in `--out` and the command
is re-entrant: run it again and it goes on where it stopped. Each run

1. builds the corpus from the Python sources of the machine it runs on (`infill.train.corpus`:
   the same filters, deduplication, license manifest and held-out packages as always; the
   per-file work in `--workers` processes), once;
2. takes the shipped tokenizer, and the batch size: the largest of `BATCH_SIZES` whose training
   step fits in the GPU's memory (a probe, once; both are kept in `recipe.json`);
3. trains (`infill.train.train`: bfloat16 autocast, fused attention through PyTorch's
   scaled_dot_product_attention, `--workers` DataLoader processes making batches) until the
   training budget (`--minutes`, counted over all runs; the learning rate decays over it) or this
   run's own time (`--session-minutes`) is used up, checkpointing every few minutes, on SIGTERM
   and at the end;
4. exports the checkpoint to `<out>/export`: float16 safetensors shards of at most 15 MB with
   their index, config.json, tokenizer.json, training.json (with the training log) and loss.png,
   at most 8 files, the files to bring back. Every run exports, so each command hands back a
   usable model; training.json says whether the budget was used up ("complete").

The model size comes from CPU measurements (`infill-bench sizes`, docs/gpu-recipe.md): the largest
whose one-line fill stays under 250 ms on two cores with the context cache at a 512-token canvas.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from infill.backend import DEFAULT_MODEL_DIR
from infill.model import InfillConfig, InfillModel
from infill.tokenizer import CodeTokenizer
from infill.train.corpus import build_corpus, source_roots, stdlib_root
from infill.train.export import MAX_SHARD, export_model, read_log
from infill.train.train import TrainConfig, finished, train

# The largest size measured whose one-line fill at a 512-token canvas stays under 250 ms on two
# cores with the context cache (`infill-bench sizes`; the figures are in docs/gpu-recipe.md).
RECIPE_MODEL = {"hidden_size": 256, "num_layers": 4, "num_heads": 4}
RECIPE_CONTEXT = 512
BATCH_SIZES = (256, 128, 64, 32)  # largest first; more than 256 x 512 tokens a step leaves too few steps
TINY_MODEL = {"hidden_size": 64, "num_layers": 2, "num_heads": 2}
TINY_SHARD = "400KB"


@dataclass
class RecipeSettings:
    """What a recipe run trains; written to recipe.json by the first run and reused by the next."""

    device: str
    tiny: bool
    seq_len: int
    batch_size: int
    lr: float
    budget_minutes: float | None
    steps: int
    model: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> RecipeSettings:
        return cls(**json.loads(path.read_text()))


def recipe(
    out: Path,
    device: str = "cuda",
    tiny: bool = False,
    minutes: float = 20.0,
    session_minutes: float | None = 8.5,
    workers: int | None = None,
    batch_size: int | None = None,
    limit_files: int | None = None,
) -> Path:
    """Run (or go on with) the recipe in `out`; returns `out/export`."""
    started = time.time()
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("infill-train recipe: --device cuda, torch sees no GPU (or: --device cpu --tiny)")
    if workers is None:  # on a GPU machine all cores but two make batches; on a CPU they train
        workers = 0 if tiny or not device.startswith("cuda") else max(1, (os.cpu_count() or 4) - 2)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "corpus.jsonl.gz").exists():
        roots = [stdlib_root()] if tiny else source_roots()
        limit = limit_files or (40 if tiny else None)
        manifest = build_corpus(out, roots=roots, limit=limit, workers=max(1, workers))
        print(f"recipe: corpus {json.dumps(manifest['counts'])}", flush=True)
    tokenizer_path = out / "tokenizer.json"
    if not tokenizer_path.exists():
        shutil.copyfile(DEFAULT_MODEL_DIR / "tokenizer.json", tokenizer_path)
    tok = CodeTokenizer.load(out)
    settings = recipe_settings(out, tok, device, tiny, minutes, batch_size)
    config = TrainConfig(
        out=out,
        corpus=out / "corpus.jsonl.gz",
        seq_len=settings.seq_len,
        batch_size=settings.batch_size,
        steps=settings.steps,
        lr=settings.lr,
        warmup=5 if tiny else 200,
        budget_minutes=settings.budget_minutes,
        checkpoint_every=10**9,  # by time instead: a GPU makes many steps a second
        checkpoint_minutes=3,
        eval_every=2 if tiny else 100,
        device=settings.device,
        workers=workers,
        model=settings.model,
    )
    if not finished(config):
        if session_minutes is not None:
            left = session_minutes - (time.time() - started) / 60
            if left <= 0.5:
                print("recipe: no time left in this run; run the same command again to train", flush=True)
                return export(out, settings, config)
            config.minutes = left
        if device.startswith("cuda"):
            torch.backends.cuda.matmul.allow_tf32 = True
        train(config, tok)
    return export(out, settings, config)


def recipe_settings(
    out: Path, tok: CodeTokenizer, device: str, tiny: bool, minutes: float, batch_size: int | None
) -> RecipeSettings:
    path = out / "recipe.json"
    if path.exists():
        settings = RecipeSettings.load(path)
        if settings.tiny != tiny:
            raise SystemExit(f"infill-train recipe: {out} holds a {'tiny' if settings.tiny else 'full'} run")
        settings.device = device  # the same run may go on elsewhere (e.g. checked on a CPU)
        return settings
    if tiny:
        settings = RecipeSettings(device, True, 128, batch_size or 4, 2e-3, None, 6, TINY_MODEL)
    else:
        model = dict(RECIPE_MODEL)
        if batch_size is None:
            batch_size = probe_batch_size(tok, model, RECIPE_CONTEXT, device)
        settings = RecipeSettings(device, False, RECIPE_CONTEXT, batch_size, 2e-3, minutes, 10**9, model)
    path.write_text(json.dumps(settings.__dict__, indent=1))
    print(f"recipe: {json.dumps(settings.__dict__)}", flush=True)
    return settings


def probe_batch_size(tok: CodeTokenizer, model_args: dict, seq_len: int, device: str) -> int:
    """The largest of BATCH_SIZES whose training step (forward, backward, AdamW) fits in the GPU
    with a quarter of its memory to spare; on a CPU the smallest."""
    if not device.startswith("cuda"):
        return BATCH_SIZES[-1]
    config = InfillConfig(vocab_size=tok.vocab_size, context_length=seq_len, **model_args)
    total = torch.cuda.get_device_properties(device).total_memory
    for size in BATCH_SIZES:
        model = InfillModel(config).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        try:
            torch.cuda.reset_peak_memory_stats(device)
            ids = torch.randint(3, tok.vocab_size, (size, seq_len), device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(ids, torch.ones_like(ids), labels=ids).loss
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize(device)
            fits = torch.cuda.max_memory_allocated(device) < 0.75 * total
        except torch.OutOfMemoryError:
            fits = False
        del model, optimizer
        torch.cuda.empty_cache()
        if fits:
            print(f"recipe: batch {size} x {seq_len} fits", flush=True)
            return size
    return BATCH_SIZES[-1]


def export(out: Path, settings: RecipeSettings, config: TrainConfig) -> Path:
    """Export the checkpoint (if any) to out/export; what the model card reads goes in training.json."""
    checkpoint = out / "checkpoint"
    if not (checkpoint / "state.pt").exists():
        return out / "export"
    state = torch.load(checkpoint / "state.pt", weights_only=True, map_location="cpu")
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["counts"]
    device = torch.cuda.get_device_name() if settings.device.startswith("cuda") else "CPU"
    info = {
        "name": "infill recipe model" + (" (tiny)" if settings.tiny else ""),
        "origin": f"infill-train recipe, {state['seconds'] / 60:.1f} min on {device}",
        "data": f"{counts.get('kept', 0)} Python files of the standard library and installed packages "
        f"({counts.get('chars_train', 0) / 1e6:.0f}M characters), deduplicated; held out: "
        + ", ".join(manifest["heldout_packages"]),
        "steps": state["step"],
        "tokens": state["tokens"],
        "seconds": state["seconds"],
        "batch_size": settings.batch_size,
        "complete": finished(config),
        "licenses": manifest.get("licenses", {}),
    }
    shard = TINY_SHARD if settings.tiny else MAX_SHARD  # tiny: shards all the same, to check them
    target = export_model(checkpoint, out / "export", info, log=read_log(out), shard=shard)
    files = sorted(f.name for f in target.iterdir())
    print(f"recipe: exported {state['step']} steps, {state['tokens'] / 1e6:.1f}M tokens -> {target}: "
          f"{', '.join(files)}", flush=True)  # fmt: skip
    return target
