"""Training examples shaped like real infill requests.

An example is a window of one file laid out exactly as the engine lays out a request:

    [prefix tokens][span tokens + k <null>][suffix tokens][<pad> ...]

Prefix, span and suffix are tokenized *separately* (as `infill.engine.canvas` does), the span region
(content plus null padding, so the model learns where a span ends) is partly masked with a ratio
t ~ U(0, 1), and the model learns to predict the original token at every region position.
Kinds of span, mixed by `MaskMix`: a single line, a block of lines, a random character span, an
AST node recorded in the corpus (body, docstring, statement, expression, arguments), several
spans of those kinds in one window (a multi-span request: many more supervised positions per
example than one short span gives), and plain whole-window masking (MDLM style), which keeps the
model a general denoiser.

Null padding: half of the spans get exactly the padding the engine's default budget gives a span
of that length (`infill.engine.canvas.default_budget`), the others a random 0..max(8, n) nulls.

Random-token corruption: a share of the visible region tokens (and, in some examples, of the
context) is replaced by random tokens, with the original as the target. It teaches the model to
give low probability to wrong tokens that are not masked, which the sampler's re-masking
(self-correction) and the fix mode rely on.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from infill.engine.canvas import default_budget
from infill.models.native.tokenizer import SPECIAL_TOKENS, CodeTokenizer
from infill.train.corpus import CorpusFile

IGNORE = -100


@dataclass
class MaskMix:
    line: float = 0.15
    lines: float = 0.10
    chars: float = 0.05
    ast: float = 0.25
    multi: float = 0.35
    window: float = 0.10
    max_spans: int = 6  # spans in a multi-span example: 2..max_spans
    region_corruption: float = 0.05  # share of visible region tokens replaced by random ones
    context_corruption_examples: float = 0.2  # share of examples whose context is corrupted too
    context_corruption: float = 0.04


SPAN_KINDS = ["line", "lines", "chars", "ast"]
EXAMPLE_KINDS = (*SPAN_KINDS, "multi", "window")  # MaskMix's weights


def parse_mix(text: str) -> MaskMix:
    """A mix from `kind=weight,...` (e.g. `line=0.1,lines=0.3,multi=0.2,window=0.4`): the kinds
    named get those weights, the others 0; corruption settings keep their defaults."""
    weights = dict.fromkeys(EXAMPLE_KINDS, 0.0)
    for item in text.split(","):
        kind, _, value = item.strip().partition("=")
        if kind not in weights:
            raise ValueError(f"unknown example kind {kind!r} (kinds: {', '.join(EXAMPLE_KINDS)})")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"{kind}: weight {value!r} is not a number") from None
        if not 0 <= weight < math.inf:
            raise ValueError(f"{kind}: weight {value} is not a finite number of 0 or more")
        weights[kind] = weight
    if not sum(weights.values()) > 0:
        raise ValueError("no example kind has a weight above 0")
    return MaskMix(**weights)


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


def code_lines(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """(start, end) of the non-blank lines lying wholly inside text[lo:hi] (end before the newline).
    Only that stretch is scanned: windows of a large file stay cheap."""
    first = lo if lo == 0 or text[lo - 1] == "\n" else text.find("\n", lo, hi) + 1 or hi
    end = hi if hi == len(text) or text[hi] == "\n" else text.rfind("\n", first, hi)
    bounds = [(first + a, first + b) for a, b in line_bounds(text[first : max(first, end)])]
    return [(a, b) for a, b in bounds if text[a:b].strip()]


def pick_span(
    rng: random.Random, record: CorpusFile, kind: str, within: tuple[int, int] | None = None
) -> tuple[int, int] | None:
    """A span of the given kind, as (start, end) characters; inside `within` when given."""
    text = record.text
    lo, hi = within or (0, len(text))
    lines = code_lines(text, lo, hi) if kind in ("line", "lines") else []
    if kind == "line" and lines:
        return rng.choice(lines)
    if kind == "lines" and lines:
        i = rng.randrange(len(lines))
        j = min(len(lines) - 1, i + rng.randint(1, 8))
        return lines[i][0], lines[j][1]
    if kind == "chars" and hi > lo:
        start = rng.randrange(lo, hi)
        return start, min(hi, start + rng.randint(1, 120))
    nodes = [(a, b) for _, a, b in record.spans if lo <= a and b <= hi]
    if kind == "ast" and nodes:
        return rng.choice(nodes)
    return None


def make_example(
    rng: random.Random,
    record: CorpusFile,
    tok: CodeTokenizer,
    seq_len: int,
    mix: MaskMix,
    max_span_tokens: int | None = None,
) -> Example:
    kind = rng.choices(EXAMPLE_KINDS, weights=[getattr(mix, k) for k in EXAMPLE_KINDS])[0]
    max_span_tokens = max_span_tokens or seq_len // 2
    if kind == "multi":
        example = multi_span_example(rng, record, tok, seq_len, mix)
        if example is not None:
            return example
        kind = "line"
    span = pick_span(rng, record, kind) if kind != "window" else None
    if span is not None:
        example = span_example(rng, record.text, span, tok, seq_len, mix, max_span_tokens)
        if example is not None:
            return example
    return window_example(rng, record.text, tok, seq_len, mix)


def corrupt(rng: random.Random, ids: list[int], share: float, vocab: int, first: int) -> list[int]:
    """Replace a share of ids by random non-special ids."""
    return [rng.randrange(first, vocab) if rng.random() < share else i for i in ids]


def null_padding(rng: random.Random, n: int, seq_len: int) -> int:
    if rng.random() < 0.5:
        return default_budget(n, seq_len) - n  # what the engine gives a span of n tokens
    return rng.randint(0, max(8, n))


def span_example(rng, text, span, tok, seq_len, mix, max_span_tokens) -> Example | None:
    start, end = span
    middle = tok.encode(text[start:end])
    if len(middle) > max_span_tokens:
        return None
    nulls = null_padding(rng, len(middle), seq_len)
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
    return assemble(rng, [(prefix, False), (region, True), (suffix, False)], tok, mix, seq_len)


def multi_span_example(rng, record: CorpusFile, tok, seq_len, mix) -> Example | None:
    """Several non-overlapping spans of one window, each tokenized on its own with null padding,
    between context pieces: the layout of a multi-span request. The window's tail is cut to fit."""
    text = record.text
    width = 4 * seq_len  # characters; about 1.2 windows of tokens, so the tail gets cut
    lo = rng.randrange(max(1, len(text) - width))
    hi = min(len(text), lo + width)
    wanted = rng.randint(2, mix.max_spans)
    spans: list[tuple[int, int]] = []
    for _ in range(3 * wanted):
        if len(spans) == wanted:
            break
        span = pick_span(rng, record, rng.choice(SPAN_KINDS), within=(lo, hi))
        if span and span[1] > span[0] and all(span[1] <= a or b <= span[0] for a, b in spans):
            spans.append(span)
    if len(spans) < 2:
        return None
    spans.sort()
    pieces: list[tuple[list[int], bool]] = []
    used, cursor = 0, lo
    for start, end in spans:
        context = tok.encode(text[cursor:start])
        if not pieces:
            context = context[-(seq_len // 4) :]  # the window's head: at most a quarter
        middle = tok.encode(text[start:end])
        region = middle + [tok.null_id] * null_padding(rng, len(middle), seq_len)
        if used + len(context) + len(region) > seq_len - 8:
            break
        pieces += [(context, False), (region, True)]
        used += len(context) + len(region)
        cursor = end
    if not pieces:
        return None
    pieces.append((tok.encode(text[cursor:hi])[: seq_len - used], False))
    return assemble(rng, pieces, tok, mix, seq_len)


def assemble(rng, pieces: list[tuple[list[int], bool]], tok, mix, seq_len) -> Example:
    """Context and region pieces -> one example. Region positions are masked with one ratio
    t ~ U(0, 1), the visible ones partly corrupted; in some examples the context is corrupted too.
    Targets: every region position, and each corrupted context position."""
    t = rng.random()
    vocab, first = tok.vocab_size, len(SPECIAL_TOKENS)
    noisy_context = rng.random() < mix.context_corruption_examples
    ids, targets, flags, region_positions = [], [], [], []
    for piece, is_region in pieces:
        if is_region:
            masked = [rng.random() < t for _ in piece]
            visible = corrupt(rng, piece, mix.region_corruption, vocab, first)
            region_positions += range(len(ids), len(ids) + len(piece))
            ids += [tok.mask_id if m else v for m, v in zip(masked, visible)]
            targets += piece
            flags += masked
        else:
            noisy = corrupt(rng, piece, mix.context_corruption, vocab, first) if noisy_context else piece
            ids += noisy
            targets += [a if a != b else IGNORE for a, b in zip(piece, noisy)]
            flags += [False] * len(piece)
    if region_positions and not any(flags):
        i = rng.choice(region_positions)
        ids[i], flags[i] = tok.mask_id, True
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
