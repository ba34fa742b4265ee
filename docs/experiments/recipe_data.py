"""The figures behind the GPU recipe's corpus decision (docs/gpu-recipe.md, "The corpus").

    python docs/experiments/recipe_data.py runs/corpus-here [--seconds 60]

For a corpus built here (`infill.train.corpus.build_corpus`), prints

- its size in tokens of the shipped tokenizer (training and held-out split), and what those
  tokens would weigh carried in as pre-tokenized shards: 2 bytes a token (the vocabulary has 8,192
  entries), raw and gzip-compressed (level 6, on a 20 MB sample of the shards);
- how fast one process makes training batches from it (`infill.train.train.sample_batch`:
  the tokenizing and masking that DataLoader workers do on the GPU machine), in tokens a second,
  at the recipe's canvas and batch: the ceiling on what the GPU can be fed per worker;
- with --profile, where that time goes (cProfile over 30 batches, the costliest functions).
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import pstats
import random
import time
from pathlib import Path

import numpy as np
import torch

from infill.models.native import DEFAULT_MODEL_DIR
from infill.models.native.tokenizer import CodeTokenizer
from infill.train.corpus import load_corpus
from infill.train.recipe import RECIPE_CONTEXT
from infill.train.train import TrainConfig, sample_batch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path, help="a directory holding corpus.jsonl.gz")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to make batches")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--profile", action="store_true", help="also profile 30 batches")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tok = CodeTokenizer.load(DEFAULT_MODEL_DIR)

    started = time.time()
    records = load_corpus(args.run / "corpus.jsonl.gz")
    print(f"loaded {len(records)} files in {time.time() - started:.1f} s")
    started = time.time()
    sample = bytearray()
    for split in ("train", "heldout"):
        texts = [r.text for r in records if r.split == split]
        ids = tok.encode_batch(texts)
        tokens = sum(len(i) for i in ids)
        chars = sum(len(t) for t in texts)
        per_token = chars / max(1, tokens)
        print(f"{split}: {len(texts)} files, {chars / 1e6:.1f}M chars, {tokens / 1e6:.1f}M tokens "
              f"({per_token:.2f} chars a token), {2 * tokens / 2**20:.0f} MiB as uint16")  # fmt: skip
        for row in ids:
            if len(sample) < 20 * 10**6:
                sample += np.asarray(row, dtype=np.uint16).tobytes()
    ratio = len(gzip.compress(bytes(sample), 6)) / len(sample)
    print(f"tokenized in {time.time() - started:.1f} s; gzip keeps {ratio:.0%} of uint16 shards")

    train = [r for r in records if r.split == "train"]
    weights = [min(len(r.text), 20_000) for r in train]
    config = TrainConfig(out=args.run, corpus=args.run, seq_len=RECIPE_CONTEXT, batch_size=args.batch_size)
    rng = random.Random(0)
    made, started = 0, time.time()
    while time.time() - started < args.seconds:
        batch = sample_batch(rng, train, weights, tok, config, "cpu")
        made += int(batch["attention_mask"].sum())
    rate = made / (time.time() - started)
    print(f"batches of {args.batch_size} x {RECIPE_CONTEXT}: {rate:,.0f} tokens/s in one process")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: [sample_batch(rng, train, weights, tok, config, "cpu") for _ in range(30)])
        pstats.Stats(profile).sort_stats("tottime").print_stats(8)


if __name__ == "__main__":
    main()
