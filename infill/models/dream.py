"""The Dream family (Dream-v0, Dream-Coder-v0, DiffuCoder, DreamOn; config.json `model_type`
"Dream") and Open-dCoder (`model_type` "qwen2" with a mask token in its tokenizer files).

All of them are Qwen2 networks (grouped-query attention, biases on q/k/v, RoPE, RMSNorm, SwiGLU)
trained as masked-diffusion models: attention is bidirectional and the output at position i-1
predicts the token at i (the shift, applied in `infill.models.denoiser`). Weight names are
Qwen2's (`model.layers.N.self_attn.q_proj.weight`, ...); the output layer is `lm_head` unless
`tie_word_embeddings`. Sources: DreamLM/Dream `eval/eval.py` and the checkpoints' own
configuration_dream.py / modeling_dream.py (read, never run); pengzhangzhi/Open-dLLM
`veomni/models/transformers/qwen2/generation_utils.py` for Open-dCoder.

Tokens: `<|mask|>` masks (Dream family; Open-dCoder: the `mask_token` its tokenizer files
declare); the token an answer is padded with is the engine's null here: `<|dlm_pad|>` where the
tokenizer has it (DiffuCoder-Instruct, whose README cuts outputs there), else `<|endoftext|>`;
DreamOn's `<|expand|>` asks for one more position.

Sampler settings (`recommended`): each family's authors' own. Dream-Coder-v0 has Dream-v0's
tokens and DiffuCoder-cpGRPO DiffuCoder-Instruct's, so nothing in the files tells them apart but
the name they are published under: the folder's (`recommended_by_name`); any other name gets the
family's settings.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from infill.engine.canvas import NO_FRAMING, Framing
from infill.errors import ModelError
from infill.models.decoder import Decoder, DecoderConfig, Rows, checkpoint_place
from infill.models.denoiser import CONTEXT_CAP, CachingCheckpointDenoiser, device_context, unusable_ids
from infill.models.hub_cache import model_name
from infill.models.vocabulary import CheckpointTokenizer, load_tokenizer
from infill.models.weights import load_network, memory_note, weight_files

MASK, END_OF_TEXT, EXPAND, DLM_PAD = "<|mask|>", "<|endoftext|>", "<|expand|>", "<|dlm_pad|>"
BEGIN = "<|beginoftext|>"  # the Dream family's begin token (config.json's bos_token_id is end-of-text)

# The authors' sampler settings (`recommended` on the denoiser; infill.models.defaults applies them).
DREAM_RECOMMENDED = {  # DreamLM/Dream README, diffusion_generate example
    "alg": "entropy", "temperature": 0.2, "top_p": 0.95, "steps": "one per new token",
}  # fmt: skip
DREAM_CODER_RECOMMENDED = {  # DreamLM/Dream-Coder README quick start (Dream-Coder-v0-Instruct-7B)
    "alg": "entropy", "temperature": 0.1, "top_p": 0.95, "steps": "one per new token",
}  # fmt: skip
DREAMON_RECOMMENDED = {  # DreamLM/DreamOn eval/generator.py evaluation settings
    "alg": "entropy", "temperature": 0.2, "top_p": 0.9, "steps": 256, "initial_masks": 4, "max_length": 64,
}  # fmt: skip
DIFFUCODER_RECOMMENDED = {  # apple/ml-diffucoder README and inference_demo (DiffuCoder-7B-Instruct)
    "alg": "entropy", "temperature": 0.3, "top_p": 0.95, "steps": "new tokens / tokens per step",
}  # fmt: skip
DIFFUCODER_CPGRPO_RECOMMENDED = {  # apple/DiffuCoder-7B-cpGRPO model card example
    "alg": "entropy", "temperature": 0.4, "top_p": 0.95, "steps": "new tokens / tokens per step",
}  # fmt: skip
# Checkpoints whose tokens are another's (Dream-Coder: Dream-v0's; cpGRPO: DiffuCoder-Instruct's),
# told apart by the name they are published under (`model_name`; the NAME of ORG/NAME, any case).
RECOMMENDED_BY_NAME = {
    "dream-coder-v0-instruct-7b": DREAM_CODER_RECOMMENDED,
    "diffucoder-7b-instruct": DIFFUCODER_RECOMMENDED,
    "diffucoder-7b-cpgrpo": DIFFUCODER_CPGRPO_RECOMMENDED,
}
OPEN_DCODER_RECOMMENDED = {  # pengzhangzhi/Open-dLLM eval/eval_infill (README infilling command)
    "alg": "p2", "temperature": 0.6, "top_p": 0.95, "steps": 64,
}  # fmt: skip


def network_config(config: dict) -> DecoderConfig:
    """A Qwen2-shaped config.json -> the decoder's config; ModelError for what it cannot run."""
    try:
        hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        rope = config.get("rope_parameters") or {}  # transformers 5 writes rope_theta in here
        scaling = config.get("rope_scaling") or (
            rope if rope.get("rope_type", "default") != "default" else None
        )
        if scaling:
            raise ModelError(f"RoPE scaling {scaling} is not supported")
        if config.get("use_sliding_window"):
            raise ModelError("sliding-window attention (use_sliding_window) is not supported")
        if config.get("hidden_act", "silu") != "silu":
            raise ModelError(f"activation {config['hidden_act']!r} is not supported (silu only)")
        return DecoderConfig(
            vocab_size=int(config["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(config["intermediate_size"]),
            num_layers=int(config["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads),
            rope_theta=float(config.get("rope_theta") or rope.get("rope_theta") or 10000.0),
            norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            qkv_bias=True,
            tied_head=bool(config.get("tie_word_embeddings", False)),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ModelError(f"config.json lacks or mangles a Qwen2 setting: {error!r}") from error


def weight_names(c: DecoderConfig) -> dict[str, str | Rows]:
    """Checkpoint tensor name -> `Decoder` parameter name (or its rows in a fused layer)."""
    names = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight"}
    if not c.tied_head:
        names["lm_head.weight"] = "head.weight"
    for i in range(c.num_layers):
        ours, theirs = f"layers.{i}.", f"model.layers.{i}."
        names[theirs + "input_layernorm.weight"] = ours + "attn_norm.weight"
        names[theirs + "post_attention_layernorm.weight"] = ours + "mlp_norm.weight"
        for proj in "qkvo":
            names[f"{theirs}self_attn.{proj}_proj.weight"] = checkpoint_place(c, i, proj)
        for proj in "qkv":
            names[f"{theirs}self_attn.{proj}_proj.bias"] = checkpoint_place(c, i, proj, "bias")
        for proj in ("gate", "up", "down"):
            names[f"{theirs}mlp.{proj}_proj.weight"] = checkpoint_place(c, i, proj)
    return names


def ignorable(c: DecoderConfig):
    """Tensors a checkpoint may carry that the network does not use."""
    return lambda name: name.endswith("rotary_emb.inv_freq") or (c.tied_head and name == "lm_head.weight")


def declared_mask(tokenizer: CheckpointTokenizer) -> str | None:
    """The mask token an Open-dCoder-style checkpoint declares (None: an ordinary Qwen2 model)."""
    return tokenizer.declared.get("mask_token")


def token_id(tokenizer: CheckpointTokenizer, text: str, directory: Path, role: str) -> int:
    found = tokenizer.token_id(text)
    if found is None:
        raise ModelError(f"the tokenizer in {directory} has no {text!r} ({role})")
    return found


def conventions(directory: Path, config: dict) -> dict:
    """The family's tokens and habits: everything of the denoiser but the network."""
    tokenizer = load_tokenizer(directory)
    open_dcoder = config.get("model_type") == "qwen2"
    mask_text = declared_mask(tokenizer) if open_dcoder else MASK
    if mask_text is None:
        raise ModelError(f"{directory} is a Qwen2 checkpoint without a mask token: an autoregressive model")
    mask_id = token_id(tokenizer, mask_text, directory, "the mask token")
    if config.get("mask_token_id") is not None and int(config["mask_token_id"]) != mask_id:
        raise ModelError(
            f"config.json says mask_token_id {config['mask_token_id']}, but the tokenizer has "
            f"{mask_text!r} at {mask_id}"
        )
    padding = tokenizer.token_id(DLM_PAD)
    null_id = padding if padding is not None else token_id(tokenizer, END_OF_TEXT, directory, "the padding")
    expand_id = tokenizer.token_id(EXPAND)
    framing = NO_FRAMING if open_dcoder else Framing(begin=(begin_token(tokenizer, directory),))
    if open_dcoder:  # Open-dLLM's prompts are prefix + masks + suffix: Qwen2.5's tokenizer adds nothing
        family, recommended = "Open-dCoder", OPEN_DCODER_RECOMMENDED
    elif expand_id is not None:  # DreamOn: [bos] prefix masks suffix [eos]
        family, recommended = "DreamOn", DREAMON_RECOMMENDED
        end = token_id(tokenizer, tokenizer.declared.get("eos_token", END_OF_TEXT), directory, "end-of-text")
        framing = Framing(begin=framing.begin, end=(end,))
    elif padding is not None:
        family, recommended = "DiffuCoder-Instruct", DIFFUCODER_RECOMMENDED
    else:  # Dream-v0, Dream-Coder-v0, DiffuCoder-Base: the same network and tokens
        family, recommended = "Dream", DREAM_RECOMMENDED
    recommended = recommended_by_name(directory) or recommended
    return dict(
        family=family,
        tokenizer=tokenizer,
        mask_id=mask_id,
        null_id=null_id,
        special_ids=unusable_ids(tokenizer, int(config.get("vocab_size") or 0), null_id) | {mask_id},
        context_length=min(int(config.get("max_position_embeddings") or CONTEXT_CAP), CONTEXT_CAP),
        shift=True,
        expand_id=expand_id,
        recommended=dict(recommended),
        framing=framing,
    )


def recommended_by_name(directory: Path) -> dict | None:
    """The authors' settings for the checkpoint the folder's name says it is (None: a name
    without settings of its own). config.json holds no name (transformers leaves `_name_or_path`
    out when it saves one), and a model card's `base_model` names the model it was made from."""
    name = model_name(directory).rsplit("/", 1)[-1].casefold()
    return RECOMMENDED_BY_NAME.get(name)


def begin_token(tokenizer: CheckpointTokenizer, directory: Path) -> int:
    """The begin token every Dream-family prompt starts with: the tokenizer files' `bos_token`
    (`<|beginoftext|>`), else `<|beginoftext|>` itself."""
    return token_id(tokenizer, tokenizer.declared.get("bos_token", BEGIN), directory, "the begin token")


def load(
    directory: Path, config: dict, device: torch.device, dtype: torch.dtype, quantize: str = "none"
) -> CachingCheckpointDenoiser:
    c = network_config(config)
    files = weight_files(directory)
    family = conventions(directory, config)
    print(memory_note(f"{family['family']} from {directory}", c.parameters, dtype, device), file=sys.stderr)
    network = load_network(lambda: Decoder(c), files, weight_names(c), ignorable(c), device, dtype, quantize)
    family["context_length"] = device_context(family["context_length"], device)
    return CachingCheckpointDenoiser(network=network, device=device, **family)
