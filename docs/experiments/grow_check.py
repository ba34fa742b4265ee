"""The shipped model grown from 4 to 6 layers (infill.train.grow), before any training: masked-token
loss and accuracy on 8 held-out canvases (500 tokens, 30% masked) against its parent and a fresh
6-layer model. `python docs/experiments/grow_check.py` (docs/gpu-recipe.md, "The next lease")."""

from __future__ import annotations

import statistics

import torch

from infill.bench.tasks import heldout_sources
from infill.models import load
from infill.models.native.model import InfillModel
from infill.train.grow import grown


def main() -> None:
    torch.set_num_threads(2)
    backend = load(None, "cpu", "float32", quantize="none")
    parent = backend.model.eval()
    child = grown(parent, 6).eval()
    torch.manual_seed(0)
    models = {"parent": parent, "grown": child, "fresh": InfillModel(child.config).eval()}
    generator = torch.Generator().manual_seed(0)
    losses: dict[str, list[float]] = {name: [] for name in models}
    accuracy: dict[str, list[float]] = {name: [] for name in models}
    for _, text in heldout_sources()[:8]:
        ids = torch.tensor([backend.encode(text)[:500]])
        masked = torch.rand(ids.shape, generator=generator) < 0.3
        canvas = ids.clone()
        canvas[masked] = backend.mask_id
        truth = ids[masked]
        for name, model in models.items():
            with torch.no_grad():
                logp = model(canvas).logits.float().log_softmax(-1)[masked]
            losses[name].append(-logp.gather(-1, truth[:, None]).mean().item())
            accuracy[name].append((logp.argmax(-1) == truth).float().mean().item())
    for name in models:
        loss, share = statistics.mean(losses[name]), statistics.mean(accuracy[name])
        print(f"{name}: masked-token loss {loss:.3f}, accuracy {share:.1%}")


if __name__ == "__main__":
    main()
