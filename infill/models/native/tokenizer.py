"""A byte-level BPE tokenizer for code, trained with the `tokenizers` library.

Pre-tokenization keeps a newline together with the indentation that follows it ("\\n    "), so
indentation runs become single tokens, then applies GPT-2 style byte-level splitting. Byte-level
means every string round-trips exactly: `decode(encode(s)) == s`.

Special tokens (fixed ids, shared with `InfillConfig`):
  <pad> 0, <mask> 1 (a position to denoise), <null> 2 (an unused position of a span's budget,
  dropped from the output), <unk> 3, <eos> 4.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIAL_TOKENS = ["<pad>", "<mask>", "<null>", "<unk>", "<eos>"]
PAD, MASK, NULL, UNK, EOS = range(len(SPECIAL_TOKENS))


class CodeTokenizer:
    """Thin wrapper: plain lists of ids in and out, special ids as attributes."""

    pad_id, mask_id, null_id, unk_id, eos_id = PAD, MASK, NULL, UNK, EOS

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        for index, token in enumerate(SPECIAL_TOKENS):
            if tokenizer.token_to_id(token) != index:
                raise ValueError(f"tokenizer has {token!r} at id {tokenizer.token_to_id(token)}")

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def token_text(self, token_id: int) -> str:
        """How one token reads on its own (for showing the canvas)."""
        if token_id < len(SPECIAL_TOKENS):
            return SPECIAL_TOKENS[token_id]
        return self.decode([token_id])

    def save(self, directory: str | Path) -> None:
        self.tokenizer.save(str(Path(directory) / "tokenizer.json"))

    @classmethod
    def load(cls, directory: str | Path) -> CodeTokenizer:
        path = Path(directory) / "tokenizer.json"
        return cls(Tokenizer.from_file(str(path)))


def new_bpe_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\n[ \t]*"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192) -> CodeTokenizer:
    """Train the BPE merges on an iterator of source texts."""
    tokenizer = new_bpe_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=True,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return CodeTokenizer(tokenizer)
