"""The project's own model family ("infill-diffusion"): `InfillModel` + `CodeTokenizer` behind the
`Denoiser` protocol; the model shipped in the package is one of these."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from infill.errors import ModelError
from infill.models.base import Pass
from infill.models.batching import run_batch
from infill.models.native.model import InfillModel, LayerCache
from infill.models.native.tokenizer import CodeTokenizer

DEFAULT_MODEL_DIR = Path(__file__).parents[2] / "default_model"


@dataclass
class InfillBackend:
    """The project's own model: `InfillModel` + `CodeTokenizer` (on the CPU, in the dtype `load` picks)."""

    model: InfillModel
    tokenizer: CodeTokenizer
    device: torch.device = torch.device("cpu")
    expand_id = None  # no <|expand|> token: spans get their length from <null>
    scores_visible_tokens = True  # trained to restore randomly replaced visible tokens too (fix mode)

    @property
    def mask_id(self) -> int:
        return self.tokenizer.mask_id

    @property
    def null_id(self) -> int:
        return self.tokenizer.null_id

    @property
    def special_ids(self) -> frozenset[int]:
        t = self.tokenizer
        return frozenset({t.pad_id, t.mask_id, t.unk_id, t.eos_id})

    @property
    def context_length(self) -> int:
        return self.model.config.context_length

    @property
    def rope_theta(self) -> float:
        """The rotary base (infill.engine.kept_context turns cached keys with it)."""
        return self.model.config.rope_theta

    @torch.no_grad()
    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids.to(self.device)).logits.float().cpu()

    def new_cache(self) -> list[LayerCache]:
        return [LayerCache() for _ in range(self.model.config.num_layers)]

    def layers(self) -> list:
        """The network's layers, in order (a refresh that may stop checks between them)."""
        return list(self.model.blocks)

    @torch.no_grad()
    def cached_logits(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache: list[LayerCache],
        refresh: bool,
        predicted: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, P, vocab) at `positions` only (at `positions[predicted]` if given), reusing
        the other positions' cached keys and values unless `refresh` (`InfillModel.cached_logits`)."""
        ids, positions = ids.to(self.device), positions.to(self.device)
        rows = None if predicted is None else predicted.to(self.device)
        return self.model.cached_logits(ids, positions, cache, refresh, rows=rows).float().cpu()

    @torch.no_grad()
    def run_passes(self, passes: list[Pass]) -> list[torch.Tensor]:
        """Passes of one kind (several requests' canvases) as one forward, each pass's logits as
        its own call returns them (infill.models.batching: right-padding and a key mask)."""

        def full(ids: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
            return self.model(ids, attention_mask=key_mask).logits

        outs = run_batch(passes, self.device, full, self.model.cached_logits, self.new_cache)
        return [(out if p.predicted is None else out[:, p.predicted.to(self.device)]).float().cpu()
                for p, out in zip(passes, outs)]  # fmt: skip

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.token_text(token_id)


def load_backend(
    path: str | Path | None = None,
    threads: int | None = None,
    device: torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> InfillBackend:
    """Load a model directory (config.json, model.safetensors or shards with their index
    model.safetensors.index.json, tokenizer.json); default: the shipped one."""
    directory = Path(path) if path else DEFAULT_MODEL_DIR
    names = ("model.safetensors", "model.safetensors.index.json")
    weights = any((directory / name).is_file() for name in names)
    if not weights or not (directory / "tokenizer.json").is_file():
        raise ModelError(
            f"no model in {directory} (expected config.json, model.safetensors or "
            "model.safetensors.index.json with its shards, tokenizer.json)"
        )
    if threads:
        torch.set_num_threads(threads)
    hf_logging.disable_progress_bar()
    try:
        model = InfillModel.from_pretrained(directory, dtype=torch.float32, use_safetensors=True)
        tokenizer = CodeTokenizer.load(directory)
    except (OSError, ValueError) as error:
        raise ModelError(f"cannot load the model in {directory}: {error}") from error
    device = device or torch.device("cpu")
    return InfillBackend(model.to(device=device, dtype=dtype).eval(), tokenizer, device)
