"""LLaDA (LLaDA-8B Base / Instruct; config.json `model_type` "llada").

A Llama-shaped network under its own names (`model.transformer.blocks.N.q_proj`, `attn_out`,
`ff_proj` for the gate, `up_proj`, `ff_out` for the down projection, `attn_norm`, `ff_norm`,
`model.transformer.ln_f`, the output layer `model.transformer.ff_out` unless `weight_tying`), no
biases, RoPE with the config's `rope_theta` (500000), bidirectional attention, and NO shift: the
output at position i predicts the token at i. Source: ML-GSAI/LLaDA `generate.py` and the
checkpoint's configuration_llada.py / modeling_llada.py (read, never run).

Tokens: `<|mdm_mask|>` (126336) masks; the end-of-text `eos_token_id` (126081) pads an answer and
is the engine's null here; every canvas starts with the tokenizer's begin token
(`<|startoftext|>`, 126080), as every prompt of LLaDA's does.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from infill.engine.canvas import NO_FRAMING, Framing
from infill.errors import ModelError
from infill.models.decoder import Decoder, DecoderConfig, Rows, checkpoint_place
from infill.models.denoiser import CONTEXT_CAP, CachingCheckpointDenoiser, device_context, unusable_ids
from infill.models.vocabulary import load_tokenizer
from infill.models.weights import load_network, memory_note, weight_files

MASK = "<|mdm_mask|>"
BEGIN = "<|startoftext|>"  # what LLaDA's tokenizer puts before every prompt (its bos_token)

RECOMMENDED = {  # ML-GSAI/LLaDA generate.py: low-confidence remasking, semi-autoregressive blocks
    "alg": "low_confidence",
    "block_length": 32,
    "temperature": 0.0,
    "steps": "one per new token",
}


def network_config(config: dict) -> DecoderConfig:
    """LLaDA's config.json -> the decoder's config; ModelError for the variants it cannot run."""
    unsupported = {
        "block_type": ("llama", None),
        "layer_norm_type": ("rms", None),
        "activation_type": ("silu", "swiglu", None),
        "alibi": (False, None),
        "attention_layer_norm": (False, None),
        "include_bias": (False, None),
        "rope": (True, None),
    }
    for key, allowed in unsupported.items():
        if config.get(key) not in allowed:
            raise ModelError(f"LLaDA with {key} = {config[key]!r} is not supported")
    try:
        d, heads = int(config["d_model"]), int(config["n_heads"])
        kv = config.get("n_kv_heads") or (1 if config.get("multi_query_attention") else heads)
        return DecoderConfig(
            vocab_size=int(config.get("embedding_size") or config["vocab_size"]),
            hidden_size=d,
            intermediate_size=int(config.get("mlp_hidden_size") or config.get("mlp_ratio", 4) * d),
            num_layers=int(config["n_layers"]),
            num_heads=heads,
            num_kv_heads=int(kv),
            head_dim=d // heads,
            rope_theta=float(config.get("rope_theta", 10000.0)),
            norm_eps=float(config.get("rms_norm_eps", 1e-5)),
            qkv_bias=bool(config.get("include_qkv_bias", False)),
            tied_head=bool(config.get("weight_tying", False)),
            embed_scale=math.sqrt(d) if config.get("input_emb_norm") else 1.0,
            logit_scale=1 / math.sqrt(d) if config.get("scale_logits") else 1.0,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ModelError(f"config.json lacks or mangles a LLaDA setting: {error!r}") from error


def weight_names(c: DecoderConfig) -> dict[str, str | Rows]:
    """Checkpoint tensor name -> `Decoder` parameter name (or its rows in a fused layer)."""
    names = {"model.transformer.wte.weight": "embed.weight", "model.transformer.ln_f.weight": "norm.weight"}
    if not c.tied_head:
        names["model.transformer.ff_out.weight"] = "head.weight"
    projections = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "attn_out": "o", "ff_proj": "gate",
                   "up_proj": "up", "ff_out": "down"}  # fmt: skip
    for i in range(c.num_layers):
        theirs = f"model.transformer.blocks.{i}."
        names[theirs + "attn_norm.weight"] = f"layers.{i}.attn_norm.weight"
        names[theirs + "ff_norm.weight"] = f"layers.{i}.mlp_norm.weight"
        for name, proj in projections.items():
            names[f"{theirs}{name}.weight"] = checkpoint_place(c, i, proj)
        if c.qkv_bias:
            for proj in "qkv":
                names[f"{theirs}{proj}_proj.bias"] = checkpoint_place(c, i, proj, "bias")
    return names


def ignorable(c: DecoderConfig):
    """Tensors a checkpoint may carry that the network does not use: a tied output layer's own copy."""
    return lambda name: c.tied_head and name == "model.transformer.ff_out.weight"


def conventions(directory: Path, config: dict) -> dict:
    """The family's tokens and habits: everything of the denoiser but the network."""
    tokenizer = load_tokenizer(directory)
    mask_id = tokenizer.token_id(MASK)
    if mask_id is None:
        raise ModelError(f"the tokenizer in {directory} has no {MASK!r} (LLaDA's mask token)")
    if config.get("mask_token_id") is not None and int(config["mask_token_id"]) != mask_id:
        raise ModelError(
            f"config.json says mask_token_id {config['mask_token_id']}, "
            f"but the tokenizer has {MASK!r} at {mask_id}"
        )
    null_id = config.get("eos_token_id")
    if null_id is None or tokenizer.tokenizer.id_to_token(int(null_id)) is None:
        raise ModelError(
            f"config.json's eos_token_id {null_id} is not a token of the tokenizer in {directory}"
        )
    vocab_size = int(config.get("embedding_size") or config.get("vocab_size") or 0)
    begin = tokenizer.token_id(tokenizer.declared.get("bos_token", BEGIN))
    return dict(
        family="LLaDA",
        tokenizer=tokenizer,
        mask_id=mask_id,
        null_id=int(null_id),
        special_ids=unusable_ids(tokenizer, vocab_size, int(null_id)) | {mask_id},
        context_length=min(int(config.get("max_sequence_length") or CONTEXT_CAP), CONTEXT_CAP),
        shift=False,
        recommended=dict(RECOMMENDED),
        framing=NO_FRAMING if begin is None else Framing(begin=(begin,)),
    )


def load(
    directory: Path, config: dict, device: torch.device, dtype: torch.dtype, quantize: str = "none"
) -> CachingCheckpointDenoiser:
    c = network_config(config)
    files = weight_files(directory)
    family = conventions(directory, config)
    print(memory_note(f"LLaDA from {directory}", c.parameters, dtype, device), file=sys.stderr)
    network = load_network(lambda: Decoder(c), files, weight_names(c), ignorable(c), device, dtype, quantize)
    family["context_length"] = device_context(family["context_length"], device)
    return CachingCheckpointDenoiser(network=network, device=device, **family)
