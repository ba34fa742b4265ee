"""Tests for span lengths by scoring (infill.engine.span_length): a model with neither <null> nor
<|expand|> gets the span length its first pass is surest of, scored for a few candidate lengths
as one batch. The network is a double that is sure of a span's tokens only at the length it
favours."""

from __future__ import annotations

import pytest
import torch

from infill.engine.span_length import candidate_lengths, choose_lengths
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.spans import Span

NO_SYNTAX_HELP = {"retries": 0, "token_edits": 0, "fresh_fills": 0}
PREFIX = "import os\nimport sys\n\n\ndef add(a, b):\n    return a + b\n\n\nx = "
SUFFIX = "\ny = add(x, 1)\nprint(x, y)\nfor index in range(10):\n    print(index)\n"


class LengthOracle:
    """A network double without <null> or <|expand|>. Its span positions are those holding a mask
    or one of the spans' answer ids (never used in the context); span s (the s-th run of them)
    predicts answers[s][j] at its j-th position: with probability 0.9 when the run is
    favoured[s] long, else 0.3. Records the batches it saw."""

    def __init__(self, tokenizer, answers: list[list[int]], favoured: list[int]):
        self.tokenizer = tokenizer
        self.answers, self.favoured = answers, favoured
        self.mask_id = tokenizer.mask_id
        self.null_id = None
        t = tokenizer
        self.special_ids = frozenset({t.pad_id, t.mask_id, t.unk_id, t.eos_id, t.null_id})
        self.context_length = 256
        self.shapes: list[tuple[int, int]] = []
        self.vocab = tokenizer.vocab_size

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.token_text(token_id)

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        self.shapes.append(tuple(ids.shape))
        batch, length = ids.shape
        logits = torch.zeros(batch, length, self.vocab)
        allowed = self.vocab - len(self.special_ids)
        answer_ids = {token for answer in self.answers for token in answer} | {self.mask_id}
        for row in range(batch):
            x = ids[row].tolist()
            in_span = [token in answer_ids for token in x]
            runs, i = [], 0
            while i < length:
                if in_span[i]:
                    j = i
                    while j < length and in_span[j]:
                        j += 1
                    runs.append((i, j))
                    i = j
                else:
                    logits[row, i, x[i]] = 10.0
                    i += 1
            assert len(runs) == len(self.answers), "the oracle cannot find the spans"
            for (start, end), answer, favoured in zip(runs, self.answers, self.favoured):
                p = 0.9 if end - start == favoured else 0.3
                peak = torch.log(torch.tensor(p * (allowed - 1) / (1 - p)))
                for j in range(end - start):
                    logits[row, start + j, answer[j % len(answer)]] = peak
        return logits


def answer_ids(tokenizer, text: str, count: int, skip: int = 0) -> list[int]:
    """`count` ordinary ids that the text's tokens never use."""
    used = set(tokenizer.encode(text))
    special = {tokenizer.pad_id, tokenizer.mask_id, tokenizer.unk_id, tokenizer.eos_id, tokenizer.null_id}
    free = [i for i in range(tokenizer.vocab_size) if i not in used and i not in special]
    return free[skip : skip + count]


def one_span(tokenizer, favoured: int, current: str = "compute(1, 2)"):
    text = PREFIX + current + SUFFIX
    span = Span(len(PREFIX), len(PREFIX) + len(current))
    oracle = LengthOracle(tokenizer, [answer_ids(tokenizer, text, 16)], [favoured])
    return text, span, oracle


@pytest.mark.parametrize("favoured", [2, 8, 16])
def test_the_length_the_model_is_surest_of_is_chosen_in_one_batch(tiny_tokenizer, favoured):
    text, span, oracle = one_span(tiny_tokenizer, favoured)
    assert favoured in candidate_lengths(16) == [2, 4, 8, 12, 16]

    (length,) = choose_lengths(oracle, text, [span], budget=16)

    assert length == favoured
    assert len(oracle.shapes) == 1  # one forward pass...
    rows, width = oracle.shapes[0]
    assert rows == 5  # ...over the five candidate canvases, cut to one width
    narrowest = len(tiny_tokenizer.encode(PREFIX)) + 2 + len(tiny_tokenizer.encode(SUFFIX))
    assert width == narrowest


def test_each_span_gets_its_own_length(tiny_tokenizer):
    current = "compute(1, 2)"
    middle = "\nz = 3\n"
    text = PREFIX + current + middle + current + SUFFIX
    first = Span(len(PREFIX), len(PREFIX) + len(current))
    second = Span(first.end + len(middle), first.end + len(middle) + len(current))
    answers = [answer_ids(tiny_tokenizer, text, 16), answer_ids(tiny_tokenizer, text, 16, skip=16)]
    oracle = LengthOracle(tiny_tokenizer, answers, [4, 12])

    lengths = choose_lengths(oracle, text, [first, second], budget=16)

    assert lengths == [4, 12]
    assert [shape[0] for shape in oracle.shapes] == [5]


def test_without_context_to_give_up_the_candidates_go_in_one_pass_per_width(tiny_tokenizer):
    text = "compute(1, 2)"
    oracle = LengthOracle(tiny_tokenizer, [answer_ids(tiny_tokenizer, text, 16)], [12])

    (length,) = choose_lengths(oracle, text, [Span(0, len(text))], budget=16)

    assert length == 12
    assert sorted(oracle.shapes) == [(1, 2), (1, 4), (1, 8), (1, 12), (1, 16)]


def test_the_engine_denoises_at_the_chosen_length_and_edits_only_the_span(tiny_tokenizer):
    text, span, oracle = one_span(tiny_tokenizer, favoured=8)
    document = document_from_bytes(text.encode())
    options = InfillOptions(SamplerConfig(steps=8), budget=16, **NO_SYNTAX_HELP)

    result = infill(oracle, document, [span], options)

    (filled,) = result.spans
    assert filled.new_text == tiny_tokenizer.decode(oracle.answers[0][:8])
    edit = filled.edit
    assert text[: edit.start] + edit.new_text + text[edit.end :] == PREFIX + filled.new_text + SUFFIX
    assert oracle.shapes[0][0] == 5  # the scoring batch, then the fill itself, one row
    assert {shape for shape in oracle.shapes[1:]} == {(1, len(document_ids(tiny_tokenizer, text, span)) + 8)}


def document_ids(tokenizer, text: str, span: Span) -> list[int]:
    return tokenizer.encode(text[: span.start]) + tokenizer.encode(text[span.end :])


def test_a_given_length_is_not_scored(tiny_tokenizer):
    text, span, oracle = one_span(tiny_tokenizer, favoured=8)
    document = document_from_bytes(text.encode())
    options = InfillOptions(SamplerConfig(steps=4, length="given"), budget=16, **NO_SYNTAX_HELP)

    result = infill(oracle, document, [span], options)

    assert all(shape[0] == 1 for shape in oracle.shapes)
    assert result.spans[0].new_text == tiny_tokenizer.decode(oracle.answers[0][:16])


class WithoutNull:
    """The tiny real backend seen as a model with no <null> (its null ruled out like a special
    token); `cache`: whether it offers span-only passes (infill.engine.prediction)."""

    def __init__(self, backend, cache: bool):
        self.backend = backend
        self.null_id = None
        self.special_ids = backend.special_ids | {backend.null_id}
        if cache:
            self.new_cache, self.cached_logits = backend.new_cache, backend.cached_logits

    def __getattr__(self, name: str):
        if name in ("new_cache", "cached_logits"):  # (set on the instance when offered)
            raise AttributeError(name)
        return getattr(self.backend, name)


def test_scores_from_span_only_outputs_equal_those_of_full_passes(tiny_backend):
    from infill.engine.canvas import build_canvas
    from infill.engine.span_length import same_width, score_canvases

    text, span, _ = one_span(tiny_backend.tokenizer, favoured=8)
    canvases = same_width([build_canvas(tiny_backend, text, [span], [k], 128) for k in (2, 4, 8, 12, 16)])

    cached = score_canvases(WithoutNull(tiny_backend, cache=True), canvases)
    full = score_canvases(WithoutNull(tiny_backend, cache=False), canvases)

    assert torch.allclose(cached, full, atol=1e-5)
    assert cached.shape == (5, 1) and torch.isfinite(cached).all()
