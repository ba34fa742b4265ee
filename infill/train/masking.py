"""Training examples shaped like real infill requests.

An example is a window of one file laid out exactly as the engine lays out a request:

    [prefix tokens][span tokens + k <null>][suffix tokens][<pad> ...]

Prefix, span and suffix are tokenized *separately* (as `infill.canvas` does), the span region
(content plus null padding, so the model learns where a span ends) is partly masked with a ratio
t ~ U(0, 1), and the model learns to predict the original token at every region position.
Kinds of span, mixed by `MaskMix`: a single line, a block of lines, a random character span, an
AST node recorded in the corpus (body, docstring, statement, expression, arguments), and plain
whole-window masking (MDLM style), which keeps the model a general denoiser.

Random-token corruption: a share of the visible region tokens (and, in some examples, of the
context) is replaced by random tokens, with the original as the target. It teaches the model to
give low probability to wrong tokens that are not masked, which the sampler's re-masking
(self-correction) and the fix mode rely on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from infill.tokenizer import SPECIAL_TOKENS, CodeTokenizer
from infill.train.corpus import CorpusFile

IGNORE = -100


@dataclass
class MaskMix:
    line: float = 0.25
    lines: float = 0.15
    chars: float = 0.10
    ast: float = 0.35
    window: float = 0.15
    region_corruption: float = 0.05  # share of visible region tokens replaced by random ones
    context_corruption_examples: float = 0.2  # share of examples whose context is corrupted too
    context_corruption: float = 0.04


@dataclass
class Example:
    input_ids: list[int]
    targets: list[int]  # IGNORE where no loss is taken
    masked: list[bool]  # position was <mask> in the input (weighted as the main objective)


def line_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, end excluding the newline."""
    bounds, start = [], 0
    for line in text.split("\n"):
        bounds.append((start, start + len(line)))
        start += len(line) + 1
    return bounds


def pick_span(rng: random.Random, record: CorpusFile, kind: str) -> tuple[int, int] | None:
    text = record.text
    lines = [b for b in line_bounds(text) if text[b[0] : b[1]].strip()]
    if not lines:
        return None
    if kind == "line":
        return rng.choice(lines)
    if kind == "lines":
        i = rng.randrange(len(lines))
        j = min(len(lines) - 1, i + rng.randint(1, 8))
        return lines[i][0], lines[j][1]
    if kind == "chars":
        start = rng.randrange(len(text))
        return start, min(len(text), start + rng.randint(1, 120))
    if kind == "ast" and record.spans:
        _, start, end = rng.choice(record.spans)
        return start, end
    return None


def make_example(
    rng: random.Random,
    record: CorpusFile,
    tok: CodeTokenizer,
    seq_len: int,
    mix: MaskMix,
    max_span_tokens: int | None = None,
) -> Example:
    kinds = ["line", "lines", "chars", "ast", "window"]
    kind = rng.choices(kinds, weights=[getattr(mix, k) for k in kinds])[0]
    max_span_tokens = max_span_tokens or seq_len // 2
    span = pick_span(rng, record, kind) if kind != "window" else None
    if span is not None:
        example = span_example(rng, record.text, span, tok, seq_len, mix, max_span_tokens)
        if example is not None:
            return example
    return window_example(rng, record.text, tok, seq_len, mix)


def corrupt(rng: random.Random, ids: list[int], share: float, vocab: int, first: int) -> list[int]:
    """Replace a share of ids by random non-special ids."""
    return [rng.randrange(first, vocab) if rng.random() < share else i for i in ids]


def span_example(rng, text, span, tok, seq_len, mix, max_span_tokens) -> Example | None:
    start, end = span
    middle = tok.encode(text[start:end])
    if len(middle) > max_span_tokens:
        return None
    nulls = rng.randint(0, max(8, len(middle)))
    nulls = min(nulls, max_span_tokens - len(middle), seq_len - len(middle) - 16)
    region = middle + [tok.null_id] * max(nulls, 0)
    room = seq_len - len(region)
    # Prefix and suffix share the room; a random split, both ends cut at the file's edges.
    left_chars = text[max(0, start - 8 * room) : start]
    right_chars = text[end : end + 8 * room]
    prefix, suffix = tok.encode(left_chars), tok.encode(right_chars)
    want_prefix = int(room * rng.uniform(0.25, 0.75))
    n_prefix = min(len(prefix), max(want_prefix, room - len(suffix)))
    n_suffix = min(len(suffix), room - n_prefix)
    prefix = prefix[len(prefix) - n_prefix :]
    suffix = suffix[:n_suffix]

    t = rng.random()
    masked = [rng.random() < t for _ in region]
    if not any(masked):
        masked[rng.randrange(len(region))] = True
    vocab, first = tok.vocab_size, len(SPECIAL_TOKENS)
    visible = corrupt(rng, region, mix.region_corruption, vocab, first)
    region_input = [tok.mask_id if m else v for m, v in zip(masked, visible)]
    targets = [IGNORE] * len(prefix) + list(region) + [IGNORE] * len(suffix)
    context = prefix + suffix
    if rng.random() < mix.context_corruption_examples:
        noisy = corrupt(rng, context, mix.context_corruption, vocab, first)
        for i, (a, b) in enumerate(zip(context, noisy)):
            if a != b:
                pos = i if i < len(prefix) else i + len(region)
                targets[pos] = a
        context = noisy
    ids = context[: len(prefix)] + region_input + context[len(prefix) :]
    flags = [False] * len(prefix) + masked + [False] * len(suffix)
    return pad(Example(ids, targets, flags), seq_len, tok.pad_id)


def window_example(rng, text, tok, seq_len, mix) -> Example:
    """Whole-window masking: a random window of the file, every token masked with ratio t."""
    start = rng.randrange(max(1, len(text) - 4 * seq_len))
    ids = tok.encode(text[start : start + 6 * seq_len])[:seq_len]
    t = rng.random()
    masked = [rng.random() < t for _ in ids]
    if ids and not any(masked):
        masked[rng.randrange(len(ids))] = True
    vocab, first = tok.vocab_size, len(SPECIAL_TOKENS)
    visible = corrupt(rng, ids, mix.region_corruption, vocab, first)
    inputs = [tok.mask_id if m else v for m, v in zip(masked, visible)]
    return pad(Example(inputs, list(ids), masked), seq_len, tok.pad_id)


def pad(example: Example, seq_len: int, pad_id: int) -> Example:
    n = seq_len - len(example.input_ids)
    return Example(
        example.input_ids + [pad_id] * n,
        example.targets + [IGNORE] * n,
        example.masked + [False] * n,
    )


def collate(examples: list[Example], pad_id: int) -> dict[str, torch.Tensor]:
    ids = torch.tensor([e.input_ids for e in examples])
    return {
        "input_ids": ids,
        "attention_mask": (ids != pad_id).long(),
        "targets": torch.tensor([e.targets for e in examples]),
        "masked": torch.tensor([e.masked for e in examples]),
    }
