"""Model size against speed: the measurements behind the default model's size.

Speed does not depend on the weights, so each candidate architecture is built randomly
initialised with the shipped tokenizer, and the real engine runs a one-line fill in a 200-line
file with a fixed number of denoising passes (the commit threshold is set to 1, so the sampler
commits by quota and runs exactly `passes` passes). Reported per size: parameters, size of the
float16 safetensors, ms per forward pass and engine ms per fill. Quality per size needs a trained
model of that size: see `infill-bench quality --model DIR`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from infill.models.native import InfillBackend
from infill.models.native.model import InfillConfig, InfillModel
from infill.models.native.tokenizer import CodeTokenizer
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.spans import Span

# (hidden size, layers): the shipped size, and the candidates for the GPU recipe's larger model
SIZES = ((256, 4), (256, 6), (320, 6), (384, 4), (384, 5), (448, 4), (384, 6), (448, 6), (512, 6))
CONTEXTS = (256, 512)


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """`256x6,384x6` -> [(256, 6), (384, 6)] (hidden size x layers)."""
    sizes = []
    for item in text.split(","):
        hidden, _, layers = item.strip().partition("x")
        if not (hidden.isdigit() and layers.isdigit()):
            raise ValueError(f"{item!r} is not HIDDENxLAYERS (e.g. 384x6)")
        sizes.append((int(hidden), int(layers)))
    return sizes


@dataclass
class SizeRow:
    hidden: int
    layers: int
    context: int
    params: int
    fp16_mb: float
    pass_ms: float
    fill_ms: float
    passes: int


def measure_size(
    tokenizer: CodeTokenizer,
    text: str,
    span: Span,
    hidden: int,
    layers: int,
    context: int,
    passes: int,
    repeat: int = 3,
) -> SizeRow:
    torch.manual_seed(0)
    config = InfillConfig(
        vocab_size=tokenizer.vocab_size,
        context_length=context,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=max(2, hidden // 64),
    )
    backend = InfillBackend(InfillModel(config).eval(), tokenizer)
    sampler = SamplerConfig(steps=passes, commit_threshold=1.0)
    options = InfillOptions(sampler=sampler, retries=0, token_edits=0, fresh_fills=0, recall=False)
    document = document_from_bytes(text.encode())
    infill(backend, document, [span], options)  # warm-up
    seconds, forward = [], []
    for _ in range(repeat):
        result = infill(backend, document, [span], options)
        seconds.append(result.stats.seconds)
        forward.append(result.stats.forward_passes)
    params = sum(p.numel() for p in backend.model.parameters())
    fill = statistics.median(seconds)
    return SizeRow(
        hidden=hidden,
        layers=layers,
        context=context,
        params=params,
        fp16_mb=params * 2 / 2**20,
        pass_ms=1000 * fill / statistics.median(forward),
        fill_ms=1000 * fill,
        passes=int(statistics.median(forward)),
    )


def format_rows(rows: list[SizeRow]) -> str:
    lines = [f"{'hidden':>6} {'layers':>6} {'context':>7} {'params':>8} {'fp16 MB':>8} "
             f"{'ms/pass':>8} {'passes':>6} {'fill ms':>8}"]  # fmt: skip
    for r in rows:
        lines.append(
            f"{r.hidden:6d} {r.layers:6d} {r.context:7d} {r.params / 1e6:7.2f}M {r.fp16_mb:8.1f} "
            f"{r.pass_ms:8.1f} {r.passes:6d} {r.fill_ms:8.0f}"
        )
    return "\n".join(lines)
