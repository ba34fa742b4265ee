"""Small things the training tests share: a tiny random model in the shipped layout, and a
synthetic repository with its own identifier vocabulary."""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch

from infill.models.native import DEFAULT_MODEL_DIR
from infill.models.native.model import InfillConfig, InfillModel
from infill.models.native.tokenizer import CodeTokenizer

WORDS = ["zorblax", "quuxen", "frobnitz", "wibblet", "grommet", "snarkle", "plonk", "vexil"]


def tiny_model(directory: Path, context: int = 128, seed: int = 0) -> Path:
    """A randomly initialised native model (the shipped tokenizer) written as `load_backend` reads it."""
    torch.manual_seed(seed)
    tok = CodeTokenizer.load(DEFAULT_MODEL_DIR)
    config = InfillConfig(vocab_size=tok.vocab_size, hidden_size=32, num_layers=1, num_heads=2,
                          context_length=context)  # fmt: skip
    InfillModel(config).save_pretrained(directory)
    tok.save(directory)
    (directory / "training.json").write_text(json.dumps({"name": "tiny test model", "steps": 0, "tokens": 0}))
    return directory


def synthetic_repository(root: Path, files: int = 12, seed: int = 0) -> Path:
    """A package of small modules that use a vocabulary no corpus has (zorblax_plonk, ...)."""
    rng = random.Random(seed)
    package = root / "zorb"
    package.mkdir(parents=True)
    for i in range(files):
        lines = [f'"""Module {i} of the zorb package."""', "", f"from zorb.base_{i % 3} import Quuxen", ""]
        for j in range(6):
            a, b = rng.sample(WORDS, 2)
            lines += [
                f"def {a}_{b}_{j}({a}_count, {b}_items):",
                f"    {a}_total = {a}_count * len({b}_items)",
                f"    for {b} in {b}_items:",
                f"        {a}_total += Quuxen.{b}_weight({b})",
                f"    return {a}_total",
                "",
            ]
        (package / f"mod_{i:02d}.py").write_text("\n".join(lines))
    return root
