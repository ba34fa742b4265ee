"""Tests for DreamOn-style variable-length spans (infill.engine.expansion): <|expand|> grows a span,
end-of-text shrinks it; the engine's edits stay exact. The network is a double that knows the
span's answer and asks for room (expand) while the span is shorter than the answer."""

from __future__ import annotations

import torch

from infill.engine.results import Step
from infill.engine.sampler import sample
from infill.modes.alternatives import alternatives
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.spans import Span

NO_SYNTAX_HELP = {"retries": 0, "token_edits": 0, "fresh_fills": 0}


class ExpandOracle:
    """A network double with an <|expand|> token (id: one past the tokenizer's vocabulary).

    It knows the context (`prefix` + span + `suffix`, the span of any length) and the span's
    answer `content`. At a masked span position j of a span now n long it predicts: <|expand|>
    at the last masked position while n < len(content) (with content[j] as runner-up); else
    content[j]; past the content, end-of-text (this project's <null>). Records the span lengths
    and batch shapes it saw."""

    def __init__(self, tokenizer, prefix: list[int], suffix: list[int], content: list[int]):
        self.tokenizer = tokenizer
        self.prefix, self.suffix, self.content = prefix, suffix, content
        self.mask_id = tokenizer.mask_id
        self.null_id = tokenizer.null_id
        self.expand_id = tokenizer.vocab_size
        self.special_ids = frozenset(
            {tokenizer.pad_id, tokenizer.mask_id, tokenizer.unk_id, tokenizer.eos_id}
        )
        self.context_length = 256
        self.shapes: list[tuple[int, int]] = []
        self.lengths: list[int] = []

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.token_text(token_id)

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        self.shapes.append(tuple(ids.shape))
        batch, length = ids.shape
        logits = torch.zeros(batch, length, self.tokenizer.vocab_size + 1)
        start, end = len(self.prefix), length - len(self.suffix)
        for row in range(batch):
            x = ids[row].tolist()
            assert x[:start] == self.prefix and x[end:] == self.suffix, "the context changed"
            for i in range(start):
                logits[row, i, x[i]] = 10.0
            for i in range(end, length):
                logits[row, i, x[i]] = 10.0
            n = end - start
            masked = [j for j in range(n) if x[start + j] == self.mask_id]
            for j in range(n):
                if j < len(self.content):
                    logits[row, start + j, self.content[j]] = 6.0
                else:
                    logits[row, start + j, self.null_id] = 10.0
                if masked and j == masked[-1] and n < len(self.content):
                    logits[row, start + j, self.expand_id] = 10.0
            self.lengths.append(n)
        return logits


def span_problem(tokenizer, content_text: str, budget: int):
    prefix, suffix = tokenizer.encode("x = 1\n"), tokenizer.encode("\ny = 2\n")
    content = tokenizer.encode(content_text)
    canvas = torch.tensor([prefix + [tokenizer.mask_id] * budget + suffix])
    editable = torch.zeros_like(canvas, dtype=torch.bool)
    editable[0, len(prefix) : len(prefix) + budget] = True
    return ExpandOracle(tokenizer, prefix, suffix, content), canvas, editable


def span_of(oracle: ExpandOracle, ids: torch.Tensor, budget: int) -> list[int]:
    start = len(oracle.prefix)
    return ids[0, start : start + budget].tolist()


def test_expand_grows_the_span_one_position_at_a_time_to_the_length_the_model_wants(tiny_tokenizer):
    oracle, canvas, editable = span_problem(tiny_tokenizer, "self.value += step", budget=20)
    content = oracle.content
    assert 4 < len(content) < 20
    steps: list[Step] = []
    config = SamplerConfig(steps=64, order="entropy", commit_threshold=1.0, expand_start=4)

    result = sample(oracle, canvas, editable, config, on_step=steps.append)

    grow = len(content) - 4
    # DreamOn's rule: one commit a step; each expand turns a mask into two (the span grows by 1).
    assert oracle.lengths[: grow + 1] == list(range(4, len(content) + 1))
    assert max(oracle.lengths) == len(content)
    span = span_of(oracle, result.ids, 20)
    assert span == content + [tiny_tokenizer.null_id] * (20 - len(content))  # written back, padded
    assert torch.equal(result.ids[~editable], canvas[~editable])
    slot = result.confidence[0, len(oracle.prefix) : len(oracle.prefix) + 20].log()
    assert torch.isclose(slot.mean(), slot[: len(content)].mean())  # padding: the content's mean
    assert result.stats.converged is True
    assert result.stats.forward_passes == grow + len(content) + 1  # expands, commits, the check
    assert all(shape[0] == 1 for shape in oracle.shapes)
    assert all(int(step.committed.sum()) <= 1 for step in steps)  # one token a step
    assert all(step.ids.shape == canvas.shape for step in steps)


def test_end_of_text_deletes_its_position_and_the_masks_after_it(tiny_tokenizer):
    oracle, canvas, editable = span_problem(tiny_tokenizer, "z", budget=16)
    assert len(oracle.content) <= 2
    config = SamplerConfig(steps=32, order="entropy", commit_threshold=1.0, expand_start=6)

    result = sample(oracle, canvas, editable, config)

    # The first pass commits an end-of-text at position len(content): it and every mask after
    # it go, so the second pass already sees the span at its final length.
    assert oracle.lengths[:2] == [6, len(oracle.content)]
    span = span_of(oracle, result.ids, 16)
    assert span == oracle.content + [tiny_tokenizer.null_id] * (16 - len(oracle.content))
    assert result.stats.converged is True


def test_expand_is_forbidden_once_the_span_reaches_its_budget(tiny_tokenizer):
    oracle, canvas, editable = span_problem(tiny_tokenizer, "self.value += step", budget=6)
    assert len(oracle.content) > 6
    config = SamplerConfig(steps=64, commit_threshold=1.0, expand_start=4)

    result = sample(oracle, canvas, editable, config)

    assert max(oracle.lengths) == 6
    span = span_of(oracle, result.ids, 6)
    assert span == oracle.content[:6]  # the runner-up (the content) where expand was ruled out
    assert oracle.expand_id not in result.ids.tolist()[0]


def test_the_step_cap_leaves_no_mask_and_no_expand_behind(tiny_tokenizer):
    oracle, canvas, editable = span_problem(tiny_tokenizer, "self.value += step", budget=20)
    config = SamplerConfig(steps=3, expand_start=4)

    result = sample(oracle, canvas, editable, config)

    ids = result.ids[0].tolist()
    assert tiny_tokenizer.mask_id not in ids and oracle.expand_id not in ids
    assert result.stats.forward_passes == 3
    assert result.stats.converged is False


def test_a_span_that_deletes_itself_entirely_is_an_empty_fill(tiny_tokenizer):
    oracle, canvas, editable = span_problem(tiny_tokenizer, "", budget=8)
    assert oracle.content == []
    result = sample(oracle, canvas, editable, SamplerConfig(steps=8, expand_start=3))
    assert span_of(oracle, result.ids, 8) == [tiny_tokenizer.null_id] * 8
    assert result.stats.converged is True


def engine_problem(tokenizer, content_text: str):
    before, after = "x = 1\n", "\ny = 2\n"
    text = before + "old_value = compute(1, 2, 3)" + after
    span = Span(len(before), len(text) - len(after))
    oracle = ExpandOracle(
        tokenizer, tokenizer.encode(before), tokenizer.encode(after), tokenizer.encode(content_text)
    )
    return document_from_bytes(text.encode()), span, oracle


def test_the_engine_turns_a_grown_span_into_an_exact_edit(tiny_tokenizer):
    document, span, oracle = engine_problem(tiny_tokenizer, "self.value += step")
    options = InfillOptions(SamplerConfig(steps=64, commit_threshold=1.0), budget=24, **NO_SYNTAX_HELP)

    result = infill(oracle, document, [span], options)

    (filled,) = result.spans
    assert filled.new_text == tiny_tokenizer.decode(oracle.content)
    assert max(oracle.lengths) == len(oracle.content) > SamplerConfig.expand_start
    edited = document.text[: filled.edit.start] + filled.edit.new_text + document.text[filled.edit.end :]
    assert edited == "x = 1\n" + filled.new_text + "\ny = 2\n"  # bytes outside the span unchanged


def test_the_engine_turns_a_shrunk_span_into_an_exact_edit(tiny_tokenizer):
    document, span, oracle = engine_problem(tiny_tokenizer, "z")
    options = InfillOptions(SamplerConfig(steps=16), **NO_SYNTAX_HELP)

    result = infill(oracle, document, [span], options)

    (filled,) = result.spans
    assert filled.new_text == tiny_tokenizer.decode(oracle.content)
    edited = document.text[: filled.edit.start] + filled.edit.new_text + document.text[filled.edit.end :]
    assert edited == "x = 1\n" + filled.new_text + "\ny = 2\n"


def test_alternatives_of_an_expand_model_are_denoised_row_by_row(tiny_tokenizer):
    document, span, oracle = engine_problem(tiny_tokenizer, "value = start")
    options = InfillOptions(SamplerConfig(steps=32, seed=0), budget=20, **NO_SYNTAX_HELP)

    candidates = alternatives(oracle, document, span, 3, options, temperature=0.5)

    assert all(shape[0] == 1 for shape in oracle.shapes)  # one row at a time
    assert candidates[0].new_text == tiny_tokenizer.decode(oracle.content)
    assert sorted(row for c in candidates for row in c.rows) == [0, 1, 2]
