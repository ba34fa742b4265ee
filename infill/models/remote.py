"""Opt-in only (`--trust-remote-code`, server setting `trustRemoteCode`): the checkpoint's own
modeling code, the Python files published beside its weights, run through transformers'
AutoModel. infill's family conventions (tokenizer, mask, null, shift) still apply; the context
cache does not (every step is a full pass). Without the opt-in these files are never imported.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from infill.errors import ModelError
from infill.models.denoiser import CheckpointDenoiser


class RemoteNetwork(torch.nn.Module):
    """ids -> logits through the checkpoint's own model class."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids).logits


def load_remote(
    directory: Path, config: dict, device: torch.device, dtype: torch.dtype
) -> CheckpointDenoiser:
    from transformers import AutoModel

    if config.get("model_type") == "llada":
        from infill.models.llada import conventions
    else:
        from infill.models.dream import conventions
    family = conventions(directory, config)
    print(f"infill: running the modeling code shipped in {directory} (--trust-remote-code)", file=sys.stderr)
    try:
        model = AutoModel.from_pretrained(
            directory, trust_remote_code=True, dtype=dtype, use_safetensors=True
        )
    except Exception as error:  # whatever the checkpoint's own code raises
        raise ModelError(f"the checkpoint's own code could not load it: {error}") from error
    return CheckpointDenoiser(network=RemoteNetwork(model.to(device).eval()), device=device, **family)
