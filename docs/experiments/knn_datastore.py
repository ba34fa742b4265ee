"""Experiment (not part of the package): a repository datastore instead of new weights (kNN-LM).

The model reads masked examples of a repository's training files, as fine-tuning would, but
instead of learning from them it stores, for every masked position, its final hidden state
(the key) and the token that belongs there (the value). At fill time each masked position's
own hidden state looks up its k nearest keys, and their values, weighted by
softmax(-squared distance / temperature), are mixed into the model's prediction:

    p(token) = (1 - lambda) * p_model(token) + lambda * p_neighbours(token)

(Khandelwal et al., "Generalization through memorization", 2020, for a left-to-right model;
here every masked position of the canvas, at every pass.) Results: docs/finetune.md.

    python docs/experiments/knn_datastore.py --source /tmp/nx/src/networkx --seed 0
    python docs/experiments/knn_datastore.py --source /tmp/nx/src/networkx --lam 0   # the model alone

The wrapper has no context cache, so every pass is a full one: compare it with `--lam 0`, not
with `infill-bench quality` figures, for time.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from infill.bench.cli import build_parser
from infill.bench.quality import run_quality
from infill.models.native import InfillBackend, load_backend
from infill.train.masking import MaskMix, collate, make_example
from infill.train.repository import collect

# mostly the single lines, blocks and several-span examples that fills look like
DATASTORE_MIX = MaskMix(line=0.35, lines=0.15, ast=0.1, chars=0.0, multi=0.3, window=0.1)


@torch.no_grad()
def build_datastore(
    backend: InfillBackend, files: list, examples: int, seed: int = 0, batch: int = 32
) -> tuple[torch.Tensor, torch.Tensor]:
    """(keys (N, hidden) float16, values (N,)): the hidden state and the target of every masked
    position of `examples` masked windows of `files`."""
    tok, seq_len = backend.tokenizer, backend.context_length
    rng = random.Random(seed)
    made = [make_example(rng, rng.choice(files), tok, seq_len, DATASTORE_MIX) for _ in range(examples)]
    keys, values = [], []
    for i in range(0, len(made), batch):
        rows = collate(made[i : i + batch], tok.pad_id)  # examples come padded to seq_len
        hidden = backend.model.hidden_states(rows["input_ids"], rows["attention_mask"])
        stored = (rows["input_ids"] == tok.mask_id) & (rows["targets"] >= 0)
        keys.append(hidden[stored].half())
        values.append(rows["targets"][stored])
    return torch.cat(keys), torch.cat(values)


class NeighbourMixed:
    """A Denoiser: `backend`'s predictions at masked positions mixed with the datastore's."""

    def __init__(self, backend: InfillBackend, keys, values, k: int, lam: float, temperature: float):
        self.backend, self.values = backend, values
        self.keys = keys.float()
        self.key_norms = (self.keys**2).sum(1)
        self.k, self.lam, self.temperature = k, lam, temperature
        self.mask_id, self.null_id = backend.mask_id, backend.null_id
        self.special_ids, self.context_length = backend.special_ids, backend.context_length
        self.encode, self.decode, self.token_text = backend.encode, backend.decode, backend.token_text
        self.tokenizer, self.expand_id = backend.tokenizer, None

    @torch.no_grad()
    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.backend.model.hidden_states(ids)
        log_p = torch.log_softmax(self.backend.model.lm_head(hidden).float(), -1)
        masked = ids == self.mask_id
        if self.lam == 0 or not masked.any():
            return log_p
        query = hidden[masked].float()
        distance = (query**2).sum(1, keepdim=True) - 2 * query @ self.keys.T + self.key_norms
        nearest, index = distance.topk(self.k, largest=False)
        weights = torch.softmax(-nearest / self.temperature, -1)
        p_neighbours = torch.zeros(query.size(0), log_p.size(-1)).scatter_add_(1, self.values[index], weights)
        log_p[masked] = torch.logaddexp(
            log_p[masked] + torch.tensor(1 - self.lam).log(),
            p_neighbours.clamp_min(1e-30).log() + torch.tensor(self.lam).log(),
        )
        return log_p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="the repository")
    parser.add_argument("--model", type=Path, default=None, help="default: the shipped model")
    parser.add_argument("--examples", type=int, default=6000, help="masked training windows stored")
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--lam", type=float, default=0.25)
    parser.add_argument("--temperature", type=float, default=150.0, help="nearest squared distances: 150-500")
    parser.add_argument("--seed", type=int, default=0, help="the task seed")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(2)
    backend = load_backend(args.model)
    started = time.perf_counter()
    keys, values = build_datastore(backend, collect(args.source, report=lambda _: None).train, args.examples)
    print(f"datastore: {len(values)} positions in {time.perf_counter() - started:.0f} s")
    mixed = NeighbourMixed(backend, keys, values, args.k, args.lam, args.temperature)
    quality = build_parser().parse_args(
        ["quality", "--source", str(args.source), "--kinds", "line", "--tasks", str(args.tasks),
         "--no-recall", "--seed", str(args.seed), "--threads", "2"]
    )  # fmt: skip
    results = run_quality(mixed, quality)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
