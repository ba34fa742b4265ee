"""Tiny randomly initialised checkpoints in the exact on-disk layout of the published families.

Each writer produces a folder as its authors publish it: config.json with the real model_type,
architectures and auto_map; the real weight names in sharded bf16 safetensors with an index; the
family's tokenizer files with the special tokens at their real ids (the embedding table is as
big as the real one, with a tiny hidden size); and "remote code" files that record it if anyone
imports them and then raise. The weights come from transformers' own Qwen2 / Llama classes with
every parameter randomised (biases and norms too), so the reference models in the tests read
exactly what infill reads.
"""

from __future__ import annotations

import json
import pathlib

import torch
from safetensors.torch import load_file, save_file
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from infill.models.vocabulary import QWEN2_SPLIT

QWEN2_ADDED = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|object_ref_start|>": 151646,
    "<|object_ref_end|>": 151647,
    "<|box_start|>": 151648,
    "<|box_end|>": 151649,
    "<|quad_start|>": 151650,
    "<|quad_end|>": 151651,
    "<|vision_start|>": 151652,
    "<|vision_end|>": 151653,
    "<|vision_pad|>": 151654,
    "<|image_pad|>": 151655,
    "<|video_pad|>": 151656,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<|fim_prefix|>": 151659,
    "<|fim_middle|>": 151660,
    "<|fim_suffix|>": 151661,
    "<|fim_pad|>": 151662,
    "<|repo_name|>": 151663,
    "<|file_sep|>": 151664,
}
DREAM_ADDED = {**QWEN2_ADDED, "<|beginoftext|>": 151665, "<|mask|>": 151666}
DREAMON_ADDED = {**DREAM_ADDED, "<|expand|>": 151667}
OPEN_DCODER_ADDED = {**QWEN2_ADDED, "<M>": 151665}
LLADA_ADDED = {
    "<|startoftext|>": 126080,
    "<|endoftext|>": 126081,
    "<|mdm_mask|>": 126336,
    "<|start_header_id|>": 126346,
    "<|end_header_id|>": 126347,
    "<|eot_id|>": 126348,
}
# Two project files as they were when these checkpoints' tokenizer was fixed (infill/text/edits.py
# and document.py): frozen here so that editing the package never changes the test tokenizers.
TOKENIZER_TEXTS = pathlib.Path(__file__).parent / "data" / "tokenizer_texts"


def tokenizer_texts() -> list[str]:
    """The texts the tests' tokenizers are trained on (this module's and tests/lsp_support.py's)."""
    names = ("edits.py.txt", "document.py.txt")
    return [(TOKENIZER_TEXTS / name).read_text(encoding="utf-8") for name in names]


SAMPLE = tokenizer_texts()[0][:1500]
FAMILIES = ("Dream", "DreamOn", "Open-dCoder", "LLaDA")
SIZES = dict(hidden=32, intermediate=64, layers=2, heads=4)

_bpe: list[Tokenizer] = []


def base_bpe() -> Tokenizer:
    """A 400-token byte-level BPE with Qwen2's pre-tokenizer, trained on two project files."""
    if not _bpe:
        texts = tokenizer_texts()
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        )
        tokenizer.train_from_iterator(texts, trainer=trainer)
        _bpe.append(tokenizer)
    return _bpe[0]


def vocab_and_merges() -> tuple[dict[str, int], list[str]]:
    data = json.loads(base_bpe().to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["merges"]]
    return data["vocab"], merges


def write_vocab_merges(directory: pathlib.Path, added: dict[str, int]) -> None:
    """The Dream layout: vocab.json + merges.txt + added_tokens.json (no tokenizer.json)."""
    vocab, merges = vocab_and_merges()
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    (directory / "added_tokens.json").write_text(json.dumps(added, indent=2))


def write_tokenizer_json(directory: pathlib.Path, added: dict[str, int]) -> None:
    """tokenizer.json with the added tokens at their ids (LLaDA, Qwen2.5-based checkpoints)."""
    vocab, merges = vocab_and_merges()
    tokenizer = Tokenizer(models.BPE(vocab={**vocab, **added}, merges=[tuple(m.split(" ")) for m in merges]))
    tokenizer.pre_tokenizer = base_bpe().pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(text, special=True, normalized=False) for text in added])
    tokenizer.save(str(directory / "tokenizer.json"))


def tokenizer_config(added: dict[str, int], **roles: str) -> dict:
    decoder = {
        str(i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t, i in added.items()
    }
    return {
        "added_tokens_decoder": decoder,
        "model_max_length": 32768,
        "tokenizer_class": "Qwen2Tokenizer",
        **roles,
    }


def write_remote_code(directory: pathlib.Path, names: list[str]) -> pathlib.Path:
    """Files that leave a marker and raise if anything imports them; returns the marker's path."""
    marker = directory.parent / f"{directory.name}.REMOTE-CODE-RAN"
    for name in names:
        (directory / name).write_text(
            f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported {name}')\n"
            f"raise RuntimeError('remote code of {name} was executed')\n"
        )
    return marker


def randomised(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Every parameter random (norms around 1, biases non-zero), as bf16 tensors."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, param in model.named_parameters():
        noise = torch.randn(param.shape, generator=generator)
        value = 1 + 0.1 * noise if name.endswith("norm.weight") else 0.05 * noise
        state[name] = value.to(torch.bfloat16)
    return state


def write_shards(directory: pathlib.Path, state: dict[str, torch.Tensor], shards: int = 3) -> None:
    names = sorted(state)
    weight_map, total = {}, 0
    for k in range(shards):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: state[n].contiguous() for n in names[k::shards]}
        save_file(part, str(directory / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
        total += sum(t.numel() * t.element_size() for t in part.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def qwen2_model(vocab_size: int, tied: bool):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=SIZES["hidden"],
        intermediate_size=SIZES["intermediate"],
        num_hidden_layers=SIZES["layers"],
        num_attention_heads=SIZES["heads"],
        num_key_value_heads=2,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=tied,
        max_position_embeddings=4096,
    )
    return Qwen2ForCausalLM(config)


def llama_model(vocab_size: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=SIZES["hidden"],
        intermediate_size=SIZES["intermediate"],
        num_hidden_layers=SIZES["layers"],
        num_attention_heads=SIZES["heads"],
        num_key_value_heads=SIZES["heads"],
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        max_position_embeddings=4096,
    )
    return LlamaForCausalLM(config)


LLAMA_TO_LLADA = [
    ("model.embed_tokens.", "model.transformer.wte."), ("model.norm.", "model.transformer.ln_f."),
    ("lm_head.", "model.transformer.ff_out."), ("model.layers.", "model.transformer.blocks."),
    (".input_layernorm.", ".attn_norm."), (".post_attention_layernorm.", ".ff_norm."),
    (".self_attn.q_proj.", ".q_proj."), (".self_attn.k_proj.", ".k_proj."),
    (".self_attn.v_proj.", ".v_proj."), (".self_attn.o_proj.", ".attn_out."),
    (".mlp.gate_proj.", ".ff_proj."), (".mlp.up_proj.", ".up_proj."),
    (".mlp.down_proj.", ".ff_out."),
]  # fmt: skip


def llada_name(llama_name: str) -> str:
    for theirs, ours in LLAMA_TO_LLADA:
        llama_name = llama_name.replace(theirs, ours)
    return llama_name


def end_of_text_prone(model, state: dict[str, torch.Tensor], head: str, null_id: int, mask_id: int) -> None:
    """Make the output layer choose end-of-text at masked positions (spans are then all
    end-of-text, which the engine must read as null)."""
    token_prone(model, state, head, {null_id: 12.0}, mask_id)


def token_prone(
    model, state: dict[str, torch.Tensor], head: str, logits: dict[int, float], mask_id: int
) -> None:
    """Give each token of `logits` about that logit at masked positions: its row of the output
    layer along the mean final hidden state of masked positions on a sample canvas, computed by
    `model` (transformers' own class holding `state`)."""
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    ids = torch.tensor([base_bpe().encode(SAMPLE).ids])
    ids[0, 20:80] = mask_id
    length = ids.shape[1]
    with torch.no_grad():
        open_mask = torch.zeros(1, 1, length, length)
        out = model(input_ids=ids, attention_mask=open_mask, output_hidden_states=True)
    mean = out.hidden_states[-1][0, 20:80].float().mean(0)
    for token, logit in logits.items():
        state[head][token] = (logit * mean / (mean @ mean)).to(torch.bfloat16)


def sharpened(state: dict[str, torch.Tensor], scale: float) -> None:
    """Logits times `scale` (the final norm's weight scaled, so a tied embedding is untouched): a
    random model's near-uniform predictions made decisive, so that a sampler's choices do not sit
    on near-ties."""
    state["model.norm.weight"] = (state["model.norm.weight"].float() * scale).to(torch.bfloat16)


def write_checkpoint(
    directory: pathlib.Path,
    family: str,
    seed: int = 0,
    eos_prone: bool = False,
    head_scale: float = 1.0,
    prone: dict[int, float] | None = None,
) -> pathlib.Path:
    """A tiny `family` checkpoint in `directory`; returns the remote-code marker path.
    `eos_prone`: end-of-text wins at masked positions; `prone`: token id -> its logit there (the
    Dream family); `head_scale`: logits scaled (see `sharpened`)."""
    directory.mkdir(parents=True, exist_ok=True)
    if family == "LLaDA":
        model = llama_model(126464)
        state = randomised(model, seed)
        if eos_prone:
            end_of_text_prone(model, state, "lm_head.weight", 126081, 126336)
        sharpened(state, head_scale)
        state = {llada_name(k): v for k, v in state.items()}
        config = {
            "architectures": ["LLaDAModelLM"],
            "auto_map": {
                "AutoConfig": "configuration_llada.LLaDAConfig",
                "AutoModel": "modeling_llada.LLaDAModelLM",
                "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
            },
            "model_type": "llada",
            "activation_type": "silu",
            "alibi": False,
            "attention_layer_norm": False,
            "block_type": "llama",
            "d_model": SIZES["hidden"],
            "embedding_size": 126464,
            "eos_token_id": 126081,
            "include_bias": False,
            "include_qkv_bias": False,
            "input_emb_norm": False,
            "layer_norm_type": "rms",
            "mask_token_id": 126336,
            "max_sequence_length": 4096,
            "mlp_hidden_size": SIZES["intermediate"],
            "mlp_ratio": 4,
            "n_heads": SIZES["heads"],
            "n_kv_heads": SIZES["heads"],
            "n_layers": SIZES["layers"],
            "pad_token_id": 126081,
            "rms_norm_eps": 1e-05,
            "rope": True,
            "rope_theta": 500000.0,
            "scale_logits": False,
            "vocab_size": 126464,
            "weight_tying": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.46.3",
        }
        write_tokenizer_json(directory, LLADA_ADDED)
        roles = {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}
        (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(LLADA_ADDED, **roles)))
        remote = ["configuration_llada.py", "modeling_llada.py"]
    elif family == "Open-dCoder":
        model = qwen2_model(151936, tied=True)
        state = randomised(model, seed)
        state.pop("lm_head.weight", None)  # tied: Qwen2.5-0.5B ships no lm_head
        if eos_prone:
            end_of_text_prone(model, state, "model.embed_tokens.weight", 151643, 151665)
        sharpened(state, head_scale)
        config = {
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "bos_token_id": 151643,
            "eos_token_id": 151643,
            "hidden_act": "silu",
            "hidden_size": SIZES["hidden"],
            "intermediate_size": SIZES["intermediate"],
            "max_position_embeddings": 32768,
            "max_window_layers": 24,
            "num_attention_heads": SIZES["heads"],
            "num_hidden_layers": SIZES["layers"],
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 1000000.0,
            "sliding_window": None,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": 151936,
            "transformers_version": "4.46.2",
        }
        write_vocab_merges(directory, OPEN_DCODER_ADDED)
        write_tokenizer_json(directory, OPEN_DCODER_ADDED)
        roles = {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "mask_token": "<M>"}
        (directory / "tokenizer_config.json").write_text(
            json.dumps(tokenizer_config(OPEN_DCODER_ADDED, **roles))
        )
        remote = []
    else:  # the Dream family
        added = DREAMON_ADDED if family == "DreamOn" else DREAM_ADDED
        model = qwen2_model(152064, tied=False)
        state = randomised(model, seed)
        if eos_prone:
            end_of_text_prone(model, state, "lm_head.weight", 151643, 151666)
        if prone:
            token_prone(model, state, "lm_head.weight", prone, 151666)
        sharpened(state, head_scale)
        config = {
            "architectures": ["DreamModel"],
            "auto_map": {
                "AutoConfig": "configuration_dream.DreamConfig",
                "AutoModel": "modeling_dream.DreamModel",
            },
            "model_type": "Dream",
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "eos_token_id": 151643,
            "hidden_act": "silu",
            "hidden_size": SIZES["hidden"],
            "initializer_range": 0.02,
            "intermediate_size": SIZES["intermediate"],
            "mask_token_id": 151666,
            "max_position_embeddings": 131072,
            "max_window_layers": 28,
            "num_attention_heads": SIZES["heads"],
            "num_hidden_layers": SIZES["layers"],
            "num_key_value_heads": 2,
            "pad_token_id": 151643,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 1000000.0,
            "sliding_window": None,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.46.2",
            "use_cache": False,
            "use_sliding_window": False,
            "vocab_size": 152064,
        }
        write_vocab_merges(directory, added)
        roles = {"bos_token": "<|beginoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                 "mask_token": "<|mask|>"}  # fmt: skip
        config_json = tokenizer_config(added, **roles)
        config_json["auto_map"] = {"AutoTokenizer": ["tokenization_dream.DreamTokenizer", None]}
        (directory / "tokenizer_config.json").write_text(json.dumps(config_json))
        (directory / "special_tokens_map.json").write_text(json.dumps(roles))
        (directory / "generation_config.json").write_text(json.dumps({"alg": "origin", "steps": 512}))
        remote = [
            "configuration_dream.py",
            "modeling_dream.py",
            "tokenization_dream.py",
            "generation_utils.py",
        ]
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    write_shards(directory, state)
    return write_remote_code(directory, remote or ["modeling_qwen2.py"])


def reference_logits(folder, family: str, ids: torch.Tensor) -> torch.Tensor:
    """transformers' own model on the checkpoint's weights, attention made non-causal."""
    state = {}
    for shard in sorted(folder.glob("*.safetensors")):
        state.update({k: v.float() for k, v in load_file(str(shard)).items()})
    if family == "LLaDA":
        model = llama_model(126464)
        state = {name: state[llada_name(name)] for name in model.state_dict()}
    else:
        model = qwen2_model(151936 if family == "Open-dCoder" else 152064, tied=family == "Open-dCoder")
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    model = model.float().eval()
    length = ids.shape[1]
    open_mask = torch.zeros(ids.shape[0], 1, length, length)  # every position sees every other
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=open_mask).logits


def masked_canvas(denoiser, text: str, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `length` tokens of `text`, 30% of them masked (seeded); and the mask."""
    ids = torch.tensor([denoiser.encode(text)[:length]])
    masked = torch.rand(ids.shape, generator=torch.Generator().manual_seed(seed)) < 0.3
    ids[masked] = denoiser.mask_id
    return ids, masked


def agreement(logits: torch.Tensor, other: torch.Tensor) -> float:
    """The share of rows whose likeliest token is the same in both."""
    return (logits.argmax(-1) == other.argmax(-1)).float().mean().item()
