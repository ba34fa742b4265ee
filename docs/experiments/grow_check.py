"""The shipped model grown from 4 to 6 layers (infill.train.grow), before any training: masked-token
loss and accuracy on 8 held-out canvases (500 tokens, 30% masked) against its parent and a fresh
6-layer model. `python docs/experiments/grow_check.py` (docs/gpu-recipe.md, "The next lease")."""

import torch, statistics
from infill.bench.tasks import heldout_sources
from infill.models import load
from infill.train.grow import grown
from infill.models.native.model import InfillModel
torch.set_num_threads(2)
b = load(None, "cpu", "float32", quantize="none")
parent = b.model.eval()
child = grown(parent, 6).eval()
torch.manual_seed(0)
fresh = InfillModel(child.config).eval()
g = torch.Generator().manual_seed(0)
acc = {"parent": [], "grown": [], "fresh": []}
for _, text in heldout_sources()[:8]:
    ids = torch.tensor([b.encode(text)[:500]])
    masked = torch.rand(ids.shape, generator=g) < 0.3
    truth = ids[masked]
    x = ids.clone(); x[masked] = b.mask_id
    with torch.no_grad():
        for name, m in [("parent", parent), ("grown", child), ("fresh", fresh)]:
            logp = m(x).logits.float().log_softmax(-1)[masked]
            acc[name].append((-logp.gather(-1, truth[:, None]).mean().item(), (logp.argmax(-1) == truth).float().mean().item()))
for name, v in acc.items():
    print(name, "masked-token loss %.3f accuracy %.1f%%" % (statistics.mean(a for a, _ in v), 100 * statistics.mean(b for _, b in v)))
