"""Tests for infill.engine: document + spans -> canvases -> sampler -> minimal edits."""

from __future__ import annotations

import codecs
from collections.abc import Mapping

import pytest
import torch
from plans import plan_canvases
from samples import AREA_MODULE

from infill.engine.canvas import default_budget
from infill.engine.decode import span_text
from infill.engine.results import SampleStats, merge_stats
from infill.errors import InputError
from infill.modes.fill import infill
from infill.options import MULTI_LINE_STEPS, ONE_LINE_STEPS, InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.edits import apply_edits, minimal_edit
from infill.text.spans import Span, line_span, validate_spans

SOURCE = AREA_MODULE

NO_SYNTAX_HELP = {"retries": 0, "token_edits": 0, "fresh_fills": 0}  # the sampler alone
LONG_SOURCE = "".join(f"v{i} = {i}\n" for i in range(120))


def oracle_for_request(make_oracle, oracle_for_canvases, text, spans, answers: Mapping[Span, str], options):
    """An oracle that answers `answers[span]` (text with "\\n" line ends) in every canvas the
    engine will build for this request."""
    probe = make_oracle(None)
    plan = plan_canvases(probe, text, validate_spans(text, spans), options)
    canvases = [(canvas, [probe.encode(answers[slot.span]) for slot in canvas.slots]) for canvas in plan]
    return oracle_for_canvases(canvases)


def outside_unchanged(old: str, new: str, spans: list[Span]) -> bool:
    """`new` keeps the text before the first span and after the last one exactly."""
    first, last = min(s.start for s in spans), max(s.end for s in spans)
    return new[:first] == old[:first] and new[len(new) - (len(old) - last) :] == old[last:]


def test_the_answer_becomes_a_minimal_edit_inside_the_span(make_oracle, oracle_for_canvases):
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, 5, 5)  # "    return width * height"
    answer = "    return width * height / 2"
    options = InfillOptions(SamplerConfig(steps=16))
    oracle = oracle_for_request(make_oracle, oracle_for_canvases, SOURCE, [span], {span: answer}, options)

    result = infill(oracle, document, [span], options)

    (only,) = result.spans
    assert only.span == span and only.new_text == answer
    assert only.edit == minimal_edit(SOURCE, span.start, span.end, answer)
    assert only.edit.new_text == " / 2" and only.edit.start == only.edit.end == span.end
    new = apply_edits(SOURCE, result.edits)
    assert new == SOURCE[: span.start] + answer + SOURCE[span.end :]
    assert outside_unchanged(SOURCE, new, [span])
    assert result.stats.converged and result.stats.forward_passes == oracle.calls


def test_reproducing_the_span_exactly_gives_no_edit(make_oracle, oracle_for_canvases):
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, 3, 5)
    options = InfillOptions()
    original = SOURCE[span.start : span.end]
    oracle = oracle_for_request(make_oracle, oracle_for_canvases, SOURCE, [span], {span: original}, options)

    result = infill(oracle, document, [span], options)

    assert result.spans[0].new_text == original
    assert result.spans[0].edit is None and result.edits == []


def test_a_nul_the_model_writes_never_reaches_the_file(make_oracle, oracle_for_canvases):
    """A byte-level vocabulary has a token for the byte 0: a file holding it is binary, and Neovim
    0.7 misplaces later edits on its line (it cut a character in two in a real session)."""
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, 5, 5)
    answer = "    return width\x00 * height\x00"
    options = InfillOptions(SamplerConfig(steps=16))
    oracle = oracle_for_request(make_oracle, oracle_for_canvases, SOURCE, [span], {span: answer}, options)
    assert oracle.tokenizer.decode(oracle.encode(answer)) == answer  # the model can write it

    result = infill(oracle, document, [span], options)

    assert result.spans[0].new_text == "    return width * height"
    assert result.edits == [] and "\x00" not in apply_edits(SOURCE, result.edits)


def test_crlf_document_gets_crlf_in_the_new_text_and_keeps_its_bom(make_oracle, oracle_for_canvases):
    crlf = SOURCE.replace("\n", "\r\n")
    data = codecs.BOM_UTF8 + crlf.encode()
    document = document_from_bytes(data)
    assert document.bom and document.newline == "\r\n" and document.text == crlf
    span = line_span(crlf, 3, 5)  # the whole of area(), its last "\r\n" left out
    answer = 'def area(width, height):\n    """Area."""\n    w, h = width, height\n    return w * h'
    options = InfillOptions()
    oracle = oracle_for_request(make_oracle, oracle_for_canvases, crlf, [span], {span: answer}, options)

    result = infill(oracle, document, [span], options)

    expected = answer.replace("\n", "\r\n")
    assert result.spans[0].new_text == expected
    assert result.spans[0].edit == minimal_edit(crlf, span.start, span.end, expected)
    new = apply_edits(document.text, result.edits)
    assert new == crlf[: span.start] + expected + crlf[span.end :]
    assert new.count("\n") == new.count("\r\n")  # no bare LF crept in
    assert document.encode(new) == codecs.BOM_UTF8 + new.encode()
    assert document_from_bytes(document.encode(new)).text == new


def test_several_spans_in_one_request(make_oracle, oracle_for_canvases):
    document = document_from_bytes(SOURCE.encode())
    docstring = line_span(SOURCE, 4, 4)
    insertion = Span(SOURCE.index("\n\ndef circle") + 1, SOURCE.index("\n\ndef circle") + 1)
    body = line_span(SOURCE, 8, 8)
    answers = {
        docstring: "",  # deleted: the slot is all <null>
        insertion: "# circles\n",
        body: "    return math.tau * radius * radius / 2",
    }
    spans = [body, docstring, insertion]  # any order
    options = InfillOptions(SamplerConfig(steps=20))
    oracle = oracle_for_request(make_oracle, oracle_for_canvases, SOURCE, spans, answers, options)

    result = infill(oracle, document, spans, options)

    assert [r.span for r in result.spans] == [docstring, insertion, body]
    assert len(set(oracle.matched)) == 1  # one canvas for all three
    for r in result.spans:
        assert r.new_text == answers[r.span]
        assert r.edit == minimal_edit(SOURCE, r.span.start, r.span.end, answers[r.span])
    expected = SOURCE
    for span in sorted(spans, key=lambda s: s.start, reverse=True):
        expected = expected[: span.start] + answers[span] + expected[span.end :]
    assert apply_edits(SOURCE, result.edits) == expected


def test_spans_that_do_not_fit_one_window_are_filled_group_by_group(make_oracle, oracle_for_canvases):
    document = document_from_bytes(LONG_SOURCE.encode())
    spans = [line_span(LONG_SOURCE, 5, 5), line_span(LONG_SOURCE, 7, 7), line_span(LONG_SOURCE, 100, 100)]
    answers = {spans[0]: "v4 = 'four'", spans[1]: "v6 = six()", spans[2]: "v99 = [99]"}
    options = InfillOptions(SamplerConfig(steps=12), budget=12, context_length=48)
    oracle = oracle_for_request(make_oracle, oracle_for_canvases, LONG_SOURCE, spans, answers, options)
    seen = []

    result = infill(
        oracle, document, spans, options, on_step=lambda canvas, step: seen.append((canvas, step))
    )

    # Lines 5 and 7 share a window; line 100 is far away and gets its own.
    assert sorted(set(oracle.matched)) == [0, 1]
    canvases = list({id(canvas): canvas for canvas, _ in seen}.values())
    assert [[s.span for s in canvas.slots] for canvas in canvases] == [
        spans[:2],
        spans[2:],
    ]
    assert all(step.ids.shape == (1, len(canvas.ids)) and len(canvas.ids) <= 48 for canvas, step in seen)
    assert [r.new_text for r in result.spans] == [answers[s] for s in spans]
    new = apply_edits(LONG_SOURCE, result.edits)
    assert new.splitlines()[4] == "v4 = 'four'" and new.splitlines()[99] == "v99 = [99]"
    assert outside_unchanged(LONG_SOURCE, new, spans)
    assert result.stats.forward_passes == oracle.calls == len(seen)
    assert result.stats.tokens == 3 * 12
    assert result.stats.converged is True


def test_each_group_sees_the_other_spans_original_text(make_oracle, oracle_for_canvases):
    document = document_from_bytes(LONG_SOURCE.encode())
    first, second = line_span(LONG_SOURCE, 50, 50), line_span(LONG_SOURCE, 51, 51)
    answers = {first: "v49 = None", second: "v50 = None"}
    options = InfillOptions(budget=36, context_length=64)  # 72 masked positions: too many for one window
    oracle = oracle_for_request(
        make_oracle, oracle_for_canvases, LONG_SOURCE, [first, second], answers, options
    )

    result = infill(oracle, document, [first, second], options)

    assert sorted(set(oracle.matched)) == [0, 1]
    first_window = oracle.inputs[[i for i, m in enumerate(oracle.matched) if m == 0][0]][0].tolist()
    second_window = oracle.inputs[[i for i, m in enumerate(oracle.matched) if m == 1][0]][0].tolist()
    mask = oracle.mask_id
    after_first_slot = first_window[len(first_window) - first_window[::-1].index(mask) :]
    before_second_slot = second_window[: second_window.index(mask)]
    assert "v50 = 50" in oracle.decode(after_first_slot)
    assert "v49 = 49" in oracle.decode(before_second_slot)
    assert [r.new_text for r in result.spans] == ["v49 = None", "v50 = None"]


def test_a_span_larger_than_the_context_is_an_input_error(make_oracle):
    document = document_from_bytes(LONG_SOURCE.encode())
    span = line_span(LONG_SOURCE, 10, 11)
    oracle = make_oracle(None)

    with pytest.raises(InputError):
        infill(oracle, document, [span], InfillOptions(budget=70, context_length=64))
    assert oracle.calls == 0


def test_no_span_is_an_input_error(make_oracle):
    with pytest.raises(InputError):
        infill(make_oracle(None), document_from_bytes(SOURCE.encode()), [])


def test_span_text_drops_nulls_and_special_ids(make_oracle):
    oracle = make_oracle(None)
    t = oracle.tokenizer
    left, right = oracle.encode("return x"), oracle.encode(" + 1")

    ids = [t.null_id, *left, t.mask_id, t.null_id, t.pad_id, *right, t.eos_id, t.unk_id, t.null_id]

    assert span_text(oracle, ids) == "return x + 1"


def test_merged_stats_add_up_and_converge_only_if_every_group_did():
    parts = [
        SampleStats(steps=3, forward_passes=3, tokens=10, revisions=1, seconds=0.5, converged=False),
        SampleStats(steps=2, forward_passes=2, tokens=6, revisions=0, seconds=0.25, converged=True),
    ]

    merged = merge_stats(parts)

    assert merged == SampleStats(
        steps=5, forward_passes=5, tokens=16, revisions=1, seconds=0.75, converged=False
    )
    assert merge_stats(parts[1:]).converged is True


# --------------------------------------------------------------------- the real (tiny) model


def test_the_tiny_random_model_fills_spans_end_to_end(tiny_backend):
    document = document_from_bytes(SOURCE.encode())
    spans = [line_span(SOURCE, 4, 4), line_span(SOURCE, 8, 8)]
    options = InfillOptions(SamplerConfig(steps=6))

    result = infill(tiny_backend, document, spans, options)

    assert [r.span for r in result.spans] == spans
    for r in result.spans:
        for marker in ("<mask>", "<null>", "<pad>", "<unk>", "<eos>"):
            assert marker not in r.new_text
        assert r.edit == minimal_edit(SOURCE, r.span.start, r.span.end, r.new_text)
        if r.edit is not None:
            assert r.span.start <= r.edit.start <= r.edit.end <= r.span.end
    new = apply_edits(SOURCE, result.edits)
    assert outside_unchanged(SOURCE, new, spans)
    budgets = [default_budget(len(tiny_backend.encode(SOURCE[s.start : s.end])), 128) for s in spans]
    stats = result.stats
    assert stats.tokens == sum(budgets)
    runs = 1 + stats.fresh_fills  # the fill and its fresh fills, each with retries and token edits
    assert stats.fresh_fills <= options.fresh_fills
    assert 1 <= stats.steps <= 6 * (runs + stats.retries)  # retries: 6 or less
    assert stats.steps <= stats.forward_passes <= stats.steps + (options.token_edits + 1) * runs
    assert stats.retries <= options.retries * runs
    assert stats.seconds > 0
    assert stats.revisions >= 0


def test_the_tiny_random_model_windows_a_long_file_and_is_deterministic(tiny_backend):
    document = document_from_bytes(LONG_SOURCE.encode())
    spans = [line_span(LONG_SOURCE, 3, 3), line_span(LONG_SOURCE, 110, 110)]
    assert len(tiny_backend.encode(LONG_SOURCE)) > 3 * tiny_backend.context_length
    options = InfillOptions(SamplerConfig(steps=4), budget=10, **NO_SYNTAX_HELP)  # windows
    last_step = {}

    def on_step(canvas, step):
        assert len(canvas.ids) <= tiny_backend.context_length
        assert step.ids.shape == (1, len(canvas.ids))
        last_step[id(canvas)] = (canvas, step)

    first = infill(tiny_backend, document, spans, options, on_step=on_step)
    again = infill(tiny_backend, document, spans, options)

    assert len(last_step) == 2  # the spans are too far apart for one window of 128
    for canvas, step in last_step.values():
        editable = torch.tensor([canvas.editable()])
        assert not (step.ids[editable] == tiny_backend.mask_id).any()
        assert step.ids[~editable].tolist() == [i for i, e in zip(canvas.ids, canvas.editable()) if not e]
    assert [r.new_text for r in first.spans] == [r.new_text for r in again.spans]
    assert first.stats.forward_passes <= 8
    assert first.stats.tokens == 20
    assert outside_unchanged(LONG_SOURCE, apply_edits(LONG_SOURCE, first.edits), spans)


@pytest.mark.parametrize(("first", "last", "cap"), [(4, 4, ONE_LINE_STEPS), (4, 5, MULTI_LINE_STEPS)])
def test_a_line_gets_the_short_step_cap_and_several_lines_the_long_one(tiny_backend, first, last, cap):
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, first, last)
    options = InfillOptions(SamplerConfig(commit_threshold=1.0), budget=40, **NO_SYNTAX_HELP)
    caps = []
    result = infill(tiny_backend, document, [span], options, lambda canvas, step: caps.append(step.cap))
    assert set(caps) == {cap}
    assert result.stats.steps <= cap  # commit_threshold 1: the quota commits, one token a pass at least


def test_left_to_right_order_reaches_the_sampler_and_fills_each_span_from_its_start(tiny_backend):
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, 4, 5)
    # one token a pass (nothing reaches a threshold of 1), and no re-masking to reorder them
    config = SamplerConfig(commit_threshold=1.0, remask_threshold=0.0, order="left-to-right")
    committed = []

    def on_step(canvas, step):
        if step.index > 0 and step.committed.any():  # the first pass also commits the <null> padding
            committed.append(step.committed[0].nonzero().flatten().tolist())

    infill(tiny_backend, document, [span], InfillOptions(config, budget=12, **NO_SYNTAX_HELP), on_step)

    positions = [p for step in committed for p in step]
    assert all(len(step) == 1 for step in committed)
    assert positions == sorted(positions) and len(positions) >= 2
