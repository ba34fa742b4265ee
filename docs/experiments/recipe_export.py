"""How long the GPU recipe's last checkpoint and export take at its model size (docs/gpu-recipe.md,
"The time plan"): a randomly initialised model of `RECIPE_MODEL` after one AdamW step, saved as
the recipe saves a checkpoint, then exported as the recipe exports it (float16 shards of at most
`MAX_SHARD`, with a loss plot of a 3,000-row log).

    python docs/experiments/recipe_export.py /tmp/export-time
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from infill.models.native import DEFAULT_MODEL_DIR
from infill.models.native.model import InfillConfig, InfillModel
from infill.models.native.tokenizer import CodeTokenizer
from infill.train.export import MAX_SHARD, export_model
from infill.train.recipe import RECIPE_CONTEXT, RECIPE_MODEL
from infill.train.train import save_checkpoint


def main() -> None:
    run = Path(sys.argv[1])
    run.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    tok = CodeTokenizer.load(DEFAULT_MODEL_DIR)
    config = InfillConfig(vocab_size=tok.vocab_size, context_length=RECIPE_CONTEXT, **RECIPE_MODEL)
    model = InfillModel(config)
    optimizer = torch.optim.AdamW(model.parameters())
    ids = torch.randint(3, tok.vocab_size, (2, 64))
    model(ids, torch.ones_like(ids), labels=ids).loss.backward()
    optimizer.step()  # so that the optimizer state has its moments, as in a real checkpoint

    started = time.time()
    save_checkpoint(run / "checkpoint", model, tok, optimizer, {"step": 1, "tokens": 1, "seconds": 1.0})
    print(f"checkpoint: {time.time() - started:.1f} s")
    log = [{"step": i, "loss": 3.0, "tokens": i * 131_072, "seconds": i / 10, "heldout_loss": 3.1}
           for i in range(3000)]  # fmt: skip
    started = time.time()
    info = {"name": "export timing"}
    export = export_model(run / "checkpoint", run / "export", info, log=log, shard=MAX_SHARD)
    sizes = ", ".join(f"{f.name} {f.stat().st_size / 1e6:.1f} MB" for f in sorted(export.iterdir()))
    print(f"export: {time.time() - started:.1f} s: {sizes}")


if __name__ == "__main__":
    main()
