"""Which group size for 4-bit weights (infill.models.int4.GROUP_SIZE): error and speed per size.

For each group size the kernel takes (32, 64, 128, 256):
  weights   the relative RMS error of the shipped model's linear weights after quantizing
  agreement on held-out canvases (the project's held-out packages, 30% of positions masked), the
            share of masked positions whose likeliest token is float32's; the mean KL divergence
            from float32's distribution there, and the mean and largest change of the log-probability
            of float32's likeliest token
  memory    bits a weight takes (4 plus two bfloat16 numbers per group)
  speed     the kernel's product at the 7B shape's MLP (3,584 -> 18,944) for 1, 16 and 64 rows

    python docs/experiments/int4_groups.py --threads 2 --out docs/results/int4_groups.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

from infill.bench.tasks import heldout_sources
from infill.models import int4, load
from infill.models.int4 import GROUP_SIZES, Int4Linear


def masked_canvases(denoiser, count: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    canvases = []
    generator = torch.Generator().manual_seed(0)
    for _, text in heldout_sources()[:count]:
        ids = torch.tensor([denoiser.encode(text)[:length]])
        masked = torch.rand(ids.shape, generator=generator) < 0.3
        ids[masked] = denoiser.mask_id
        canvases.append((ids, masked))
    return canvases


def weight_error(network: nn.Module, group: int) -> float:
    errors, norms = 0.0, 0.0
    for module in network.modules():
        if isinstance(module, nn.Linear) and int4.packable(module, group):
            layer = Int4Linear.of(module, group)
            errors += (layer.dequantized() - module.weight.float()).pow(2).sum().item()
            norms += module.weight.float().pow(2).sum().item()
    return (errors / norms) ** 0.5


def kernel_ms(group: int, rows: int) -> float:
    layer = Int4Linear(torch.randn(18944, 3584, dtype=torch.bfloat16) * 0.02, None, group)
    x = torch.randn(rows, 3584, dtype=torch.bfloat16)
    times = []
    for _ in range(6):
        started = time.perf_counter()
        layer(x)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--canvases", type=int, default=8)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    floats = load(None, "cpu", "float32", quantize="none")
    canvases = masked_canvases(floats, args.canvases, 500)
    reference = [floats.logits(ids)[masked].log_softmax(-1) for ids, masked in canvases]
    rows = []
    for group in GROUP_SIZES:
        # (the shipped model's 384 inputs take no group of 256: its layers get 128 there)
        quantized = load(None, "cpu", "float32", quantize="none")
        quantized.model.float()
        for name, module in list(quantized.model.named_modules()):
            if isinstance(module, nn.Linear) and int4.packable(module, group):
                parent, _, attribute = name.rpartition(".")
                setattr(quantized.model.get_submodule(parent), attribute, Int4Linear.of(module, group))
        agree, kl, mean, largest = [], [], [], 0.0
        for (ids, masked), want in zip(canvases, reference):
            got = quantized.logits(ids)[masked].log_softmax(-1)
            best = want.argmax(-1, keepdim=True)
            agree.append((got.argmax(-1) == best[:, 0]).float().mean().item())
            kl.append((want.exp() * (want - got)).sum(-1).mean().item())
            difference = (got.gather(-1, best) - want.gather(-1, best)).abs()
            mean.append(difference.mean().item())
            largest = max(largest, difference.max().item())
        rows.append({
            "group": group,
            "weight_rms_error": weight_error(floats.model, group),
            "agreement": statistics.mean(agree),
            "kl_divergence": statistics.mean(kl),
            "mean_logp_difference": statistics.mean(mean),
            "largest_logp_difference": largest,
            "bits_per_weight": 4 + 2 * 16 / group,
            "kernel_ms": {rows_: kernel_ms(group, rows_) for rows_ in (1, 16, 64)},
        })  # fmt: skip
        row = rows[-1]
        print(f"group {group:3d}: weights {row['weight_rms_error']:.4f}, agreement {row['agreement']:.1%}, "
              f"KL {row['kl_divergence']:.4f}, top log p mean {row['mean_logp_difference']:.3f} "
              f"max {row['largest_logp_difference']:.2f}, "
              f"{row['bits_per_weight']:.2f} bits, kernel ms {row['kernel_ms']}")  # fmt: skip
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"threads": args.threads, "canvases": args.canvases, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
