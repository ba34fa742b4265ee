"""Opt-in only (`--trust-remote-code`, server setting `trustRemoteCode`): the checkpoint's own
modeling code, the Python files published beside its weights, run through transformers'
AutoModel. infill's family conventions (tokenizer, mask, null, shift) still apply; the context
cache does not (every step is a full pass). Without the opt-in these files are never imported.
A folder whose config.json names no modeling code of its own (no `auto_map.AutoModel`, e.g.
Open-dCoder's plain qwen2 config), or names code that is not in the folder (transformers would
fetch it), is refused: there is nothing of the checkpoint's own to run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import torch

from infill.errors import ModelError
from infill.models.denoiser import CheckpointDenoiser, device_context


class RemoteNetwork(torch.nn.Module):
    """ids -> logits through the checkpoint's own model class."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids).logits


def load_remote(
    directory: Path, config: dict, device: torch.device, dtype: torch.dtype, module: ModuleType
) -> CheckpointDenoiser:
    """The checkpoint's own modeling code behind the `Denoiser` interface; `module`: the family's
    (`infill.models.family_module`), whose `conventions` give the tokens and the context."""
    check_remote_code(directory, config)
    from transformers import AutoModel

    family = module.conventions(directory, config)
    print(f"infill: running the modeling code shipped in {directory} (--trust-remote-code)", file=sys.stderr)
    try:
        model = AutoModel.from_pretrained(
            directory, trust_remote_code=True, dtype=dtype, use_safetensors=True
        )
    except Exception as error:  # whatever the checkpoint's own code raises
        raise ModelError(f"the checkpoint's own code could not load it: {error}") from error
    family["context_length"] = device_context(family["context_length"], device)
    return CheckpointDenoiser(network=RemoteNetwork(model.to(device).eval()), device=device, **family)


def check_remote_code(directory: Path, config: dict) -> None:
    """ModelError unless config.json's `auto_map` names an AutoModel class in a file of the folder."""
    auto_map = config.get("auto_map")
    target = auto_map.get("AutoModel") if isinstance(auto_map, dict) else None
    refusal = "--trust-remote-code (trustRemoteCode) runs the modeling code a checkpoint ships"
    if not isinstance(target, str) or "." not in target:
        raise ModelError(
            f"{refusal}, but {directory / 'config.json'} names none (no auto_map.AutoModel): infill's own "
            "implementation runs this model; drop the option"
        )
    module = target.rsplit(".", 1)[0]
    if "--" in module or not (directory / f"{module}.py").is_file():
        raise ModelError(
            f"{refusal}, but {directory / 'config.json'} names {target!r}, whose file {module}.py is not in "
            "the folder (infill never downloads code)"
        )
