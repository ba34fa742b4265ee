"""Tokenizers of published checkpoints, built from their files without running their code.

Two layouts:
  - `tokenizer.json` (LLaDA, most Qwen2 checkpoints): read by the `tokenizers` library.
  - `vocab.json` + `merges.txt` + `added_tokens.json` (the Dream family, which ships no
    tokenizer.json): Qwen2's byte-level BPE, rebuilt here: NFC normalisation, Qwen2's split
    pattern, byte-level mapping, and the added tokens at the ids the files give them.

Added tokens (`added_tokens.json`, `tokenizer_config.json`'s `added_tokens_decoder`,
`tokenizer.json`'s `added_tokens`) are all collected in `added`: the denoiser never lets the
model write any of them into code except the one it uses as its null. Text from the user's file
is encoded with special tokens read as plain text, so a file that contains "<|mask|>" does not
put a mask on the canvas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from infill.errors import ModelError

# Qwen2's pre-tokenization pattern (as in its tokenizer.json): contractions, letters with one
# leading non-letter, single digits, punctuation runs, newline runs, whitespace.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


@dataclass
class CheckpointTokenizer:
    tokenizer: Tokenizer
    added: dict[str, int]  # every added or special token: text -> id
    declared: dict[str, str]  # special-token roles the files declare ("mask_token": "<|mask|>", ...)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def token_id(self, text: str) -> int | None:
        return self.added.get(text, self.tokenizer.token_to_id(text))

    def known_ids(self) -> set[int]:
        return set(self.tokenizer.get_vocab(with_added_tokens=True).values())


def load_tokenizer(directory: Path) -> CheckpointTokenizer:
    config = read_json(directory / "tokenizer_config.json") or {}
    added = {
        entry["content"]: int(index) for index, entry in (config.get("added_tokens_decoder") or {}).items()
    }
    added.update({str(k): int(v) for k, v in (read_json(directory / "added_tokens.json") or {}).items()})
    if (directory / "tokenizer.json").is_file():
        try:
            tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        except Exception as error:  # the library raises plain Exceptions on a bad file
            raise ModelError(f"cannot read {directory / 'tokenizer.json'}: {error}") from error
        for entry in (read_json(directory / "tokenizer.json") or {}).get("added_tokens", []):
            added.setdefault(entry["content"], int(entry["id"]))
    elif (directory / "vocab.json").is_file() and (directory / "merges.txt").is_file():
        tokenizer = byte_level_bpe(directory, added)
    else:
        raise ModelError(
            f"no tokenizer in {directory}: expected tokenizer.json, or vocab.json and merges.txt"
        )
    tokenizer.encode_special_tokens = True  # "<|mask|>" in a user's file is text, not a mask
    declared = {}
    for source in (read_json(directory / "special_tokens_map.json") or {}, config):
        for role in ("bos_token", "eos_token", "pad_token", "unk_token", "mask_token"):
            value = source.get(role)
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str) and role not in declared:
                declared[role] = value
    for role, text in declared.items():  # a declared special token must exist in the vocabulary
        if tokenizer.token_to_id(text) is None and text not in added:
            raise ModelError(f"the tokenizer in {directory} declares {role} {text!r} but has no such token")
        added.setdefault(text, tokenizer.token_to_id(text))
    return CheckpointTokenizer(tokenizer, added, declared)


def byte_level_bpe(directory: Path, added: dict[str, int]) -> Tokenizer:
    """Qwen2's tokenizer from vocab.json + merges.txt, the added tokens at their own ids."""
    vocab = read_json(directory / "vocab.json")
    if not isinstance(vocab, dict):
        raise ModelError(f"{directory / 'vocab.json'} is not a JSON object of token -> id")
    lines = (directory / "merges.txt").read_text(encoding="utf-8").splitlines()
    merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
    taken = {index: text for text, index in vocab.items()}
    for text, index in added.items():
        if taken.get(index, text) != text:
            raise ModelError(f"added token {text!r} has id {index}, which vocab.json gives {taken[index]!r}")
        vocab[text] = index
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(text, special=True, normalized=False) for text in added])
    return tokenizer


def read_json(path: Path):
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ModelError(f"{path} is not valid JSON: {error}") from error
