"""Tests for infill.fix (fix mode): score the span in one pass, re-predict only unlikely tokens."""

from __future__ import annotations

import codecs

import pytest
import torch
from plans import plan_canvases
from samples import AREA_MODULE

from infill.errors import Cancelled, InputError
from infill.modes.fix import document_offsets, fix
from infill.options import FixOptions, InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.edits import TextEdit, apply_edits
from infill.text.spans import Span, line_span, validate_spans

CORRECT = AREA_MODULE
BROKEN = CORRECT.replace("width * height", "width - height")  # line 5
BROKEN_TWICE = BROKEN.replace("math.pi * radius", "math.pi + radius")  # and line 8
LEAKS = ("<mask>", "<null>", "<pad>", "<unk>", "<eos>")


def scoring_canvases(denoiser, text, spans, context_length=None):
    options = InfillOptions(context_length=context_length)
    return plan_canvases(denoiser, text, validate_spans(text, spans), options, keep_text=True)


def oracle_knowing(make_oracle, correct: str, broken: str, spans, **options):
    """An oracle whose answer is the canvas of `correct` (same tokens count as `broken`)."""
    probe = make_oracle(None)
    (right,) = scoring_canvases(probe, correct, spans)
    (wrong,) = scoring_canvases(probe, broken, spans)
    assert len(right.ids) == len(wrong.ids), "the corruption must keep the token count"
    return make_oracle(torch.tensor(right.ids), **options)


def test_one_corrupted_token_is_flagged_and_corrected(make_oracle):
    document = document_from_bytes(BROKEN.encode())
    span = line_span(BROKEN, 5, 5)
    oracle = oracle_knowing(make_oracle, CORRECT, BROKEN, [span])

    result = fix(oracle, document, [span])

    minus = BROKEN.index("-")
    assert result.edits == [TextEdit(minus, minus + 1, "*")]
    assert apply_edits(BROKEN, result.edits) == CORRECT
    (token,) = result.flagged
    assert (token.start, token.end, token.text, token.replacement) == (minus, minus + 1, "-", "*")
    assert token.probability < 0.001 and token.suggestion == "*" and token.suggestion_probability > 0.9
    (only,) = result.spans
    assert only.span == span and only.new_text == "    return width * height"
    # One scoring pass with the span visible, then the sampler with that one position masked.
    assert not (oracle.inputs[0] == oracle.mask_id).any()
    assert [int((x == oracle.mask_id).sum()) for x in oracle.inputs[1:]] == [1, 0]
    assert result.stats.forward_passes == oracle.calls == 3
    assert result.stats.tokens == 1 and result.stats.converged


def test_correct_code_gets_no_edit_and_no_pass_beyond_scoring(make_oracle):
    document = document_from_bytes(CORRECT.encode())
    spans = [line_span(CORRECT, 3, 5)]
    oracle = oracle_knowing(make_oracle, CORRECT, CORRECT, spans)

    result = fix(oracle, document, spans)

    assert result.edits == [] and result.flagged == []
    assert result.spans[0].new_text == CORRECT[spans[0].start : spans[0].end]
    assert oracle.calls == 1
    assert (result.stats.forward_passes, result.stats.steps, result.stats.tokens) == (1, 0, 0)


def test_a_wrong_token_outside_the_spans_is_left_alone(make_oracle):
    document = document_from_bytes(BROKEN_TWICE.encode())
    span = line_span(BROKEN_TWICE, 8, 8)
    oracle = oracle_knowing(make_oracle, CORRECT, BROKEN_TWICE, [span])

    result = fix(oracle, document, [span])

    new = apply_edits(BROKEN_TWICE, result.edits)
    assert new == BROKEN_TWICE.replace("math.pi + radius", "math.pi * radius")
    assert "width - height" in new  # line 5 is outside the span: still broken, untouched
    assert new[: span.start] == BROKEN_TWICE[: span.start] and new[span.end :] == BROKEN_TWICE[span.end :]


@pytest.mark.parametrize(
    ("confidence", "flagged"),
    [(0.99, 1), (0.01, 0)],
    ids=["sure-model-flags", "unsure-model-flags-nothing"],
)
def test_a_token_is_flagged_only_if_the_model_clearly_prefers_another(make_oracle, confidence, flagged):
    # At 0.01 the current "-" is below the 0.05 threshold, but the model's favourite "*" is
    # hardly more likely than it: less than 1/ratio times. Correct tokens sit at 0.01 too, yet
    # each is the favourite at its position.
    document = document_from_bytes(BROKEN.encode())
    span = line_span(BROKEN, 5, 5)
    oracle = oracle_knowing(make_oracle, CORRECT, BROKEN, [span], confidence=confidence)

    result = fix(oracle, document, [span])

    assert len(result.flagged) == flagged and len(result.edits) == flagged
    assert oracle.calls == (3 if flagged else 1)


def test_at_most_a_share_of_the_span_is_flagged_least_likely_first(make_oracle):
    broken = CORRECT.replace("return width * height", "return width - height;")
    correct = CORRECT.replace("return width * height", "return width * height ")  # as many tokens
    document = document_from_bytes(broken.encode())
    span = line_span(broken, 5, 5)
    probe = make_oracle(None)
    (right,) = scoring_canvases(probe, correct, [span])
    (wrong,) = scoring_canvases(probe, broken, [span])
    assert len(right.ids) == len(wrong.ids)
    (slot,) = wrong.slots
    differ = [i for i in range(len(wrong.ids)) if wrong.ids[i] != right.ids[i]]
    assert len(differ) == 2 and all(slot.start <= i < slot.start + slot.length for i in differ)
    confidence = torch.full((len(right.ids),), 0.99)
    confidence[differ[1]] = 0.9999  # the model is surer there: the broken token is less likely
    oracle = make_oracle(torch.tensor(right.ids), confidence=confidence)
    cap = 1 / slot.length  # room for one token only

    result = fix(oracle, document, [span], FixOptions(max_fraction=cap))

    (token,) = result.flagged
    assert token.text == ";" and token.replacement == " "
    assert apply_edits(broken, result.edits).splitlines()[4] == "    return width - height "


def test_a_token_replaced_by_null_is_deleted(make_oracle):
    broken = CORRECT.replace("width * height", "width * * height")
    document = document_from_bytes(broken.encode())
    span = line_span(broken, 5, 5)
    probe = make_oracle(None)
    (canvas,) = scoring_canvases(probe, broken, [span])
    target = list(canvas.ids)
    star = canvas.slots[0].start + probe.encode("    return width * * height").index(probe.encode("*")[0])
    target[star + 2] = probe.null_id  # the second "*" (after " ") should not be there
    oracle = make_oracle(torch.tensor(target))

    result = fix(oracle, document, [span])

    assert [t.text for t in result.flagged] == ["*"] and result.flagged[0].replacement == ""
    second = broken.index("* *") + 2
    assert result.edits == [TextEdit(second, second + 1, "")]
    assert apply_edits(broken, result.edits) == broken.replace("* * height", "*  height")


def test_crlf_and_bom_offsets_are_in_the_documents_own_text(make_oracle):
    correct, broken = CORRECT.replace("\n", "\r\n"), BROKEN_TWICE.replace("\n", "\r\n")
    document = document_from_bytes(codecs.BOM_UTF8 + broken.encode())
    spans = [line_span(broken, 4, 8)]  # several CRLF line breaks before each broken token
    oracle = oracle_knowing(make_oracle, correct, broken, spans)

    result = fix(oracle, document, spans)

    assert sorted(t.text for t in result.flagged) == ["+", "-"]
    for token in result.flagged:
        assert broken[token.start : token.end] == token.text
    assert apply_edits(broken, result.edits) == correct
    assert all(edit.end - edit.start == 1 for edit in result.edits)


def test_a_character_split_between_tokens_is_replaced_whole(make_oracle):
    correct = 'NAME = "caf\u00e8"\n'  # è and é share their first UTF-8 byte
    broken = 'NAME = "caf\u00e9"\n'
    document = document_from_bytes(broken.encode())
    span = line_span(broken, 1, 1)
    oracle = oracle_knowing(make_oracle, correct, broken, [span])

    result = fix(oracle, document, [span])

    (token,) = result.flagged  # the token holding the second byte only
    at = broken.index("\u00e9")
    assert result.edits == [TextEdit(at, at + 1, "\u00e8")]
    assert apply_edits(broken, result.edits) == correct
    assert (token.start, token.end) == (at, at + 1)  # a part of a character stands for all of it


def test_spans_in_different_windows_are_scored_each_in_its_own(make_oracle, oracle_for_canvases):
    long_correct = "".join(f"v{i} = {i} * 2\n" for i in range(80))
    long_broken = long_correct.replace("v3 = 3 * 2", "v3 = 3 - 2").replace("v70 = 70 * 2", "v70 = 70 - 2")
    document = document_from_bytes(long_broken.encode())
    spans = [line_span(long_broken, 4, 4), line_span(long_broken, 71, 71)]
    probe = make_oracle(None)
    canvases = scoring_canvases(probe, long_broken, spans, context_length=48)
    assert len(canvases) == 2
    answers = [
        (c, [probe.encode(long_correct[s.span.start : s.span.end]) for s in c.slots]) for c in canvases
    ]
    oracle = oracle_for_canvases(answers)

    result = fix(oracle, document, spans, FixOptions(context_length=48))

    assert apply_edits(long_broken, result.edits) == long_correct
    assert all(len(x[0]) <= 48 for x in oracle.inputs)
    assert result.stats.forward_passes == oracle.calls == 2 * 3  # per window: score + 2 sampler passes


def test_document_offsets_map_crlf_pairs_to_their_cr():
    assert document_offsets("a\r\nb\r\r\n", 10) == [10, 11, 13, 14, 15, 17]


def test_bad_options_and_requests_are_input_errors(make_oracle):
    document = document_from_bytes(CORRECT.encode())
    for bad in ({"threshold": 1.5}, {"max_fraction": -0.1}, {"ratio": -1}, {"context_length": 2}):
        with pytest.raises(InputError):
            FixOptions(**bad)
    oracle = make_oracle(None)
    with pytest.raises(InputError):
        fix(oracle, document, [])
    with pytest.raises(InputError):
        fix(oracle, document, [Span(0, len(CORRECT) + 1)])
    with pytest.raises(Cancelled):
        fix(oracle, document, [line_span(CORRECT, 5, 5)], cancelled=lambda: True)
    assert oracle.calls == 0


# --------------------------------------------------------------------- the real (tiny) model


def test_the_tiny_random_model_repairs_mechanically(tiny_backend):
    document = document_from_bytes(CORRECT.encode())
    spans = [line_span(CORRECT, 4, 5), line_span(CORRECT, 8, 8)]
    # Threshold 1 and a ratio above 1 flag every token, so the cap decides how many.
    options = FixOptions(SamplerConfig(steps=4), threshold=1.0, ratio=2.0, max_fraction=0.25)

    result = fix(tiny_backend, document, spans, options)
    again = fix(tiny_backend, document, spans, options)

    new = apply_edits(CORRECT, result.edits)
    for repaired, span in zip(result.spans, spans):
        count = len(tiny_backend.encode(CORRECT[span.start : span.end]))
        assert len(repaired.flagged) == int(0.25 * count)
        for edit in repaired.edits:
            assert span.start <= edit.start <= edit.end <= span.end
        for token in repaired.flagged:
            assert span.start <= token.start <= token.end <= span.end
        for leak in LEAKS:
            assert leak not in repaired.new_text
    assert new[: spans[0].start] == CORRECT[: spans[0].start]
    assert new[len(new) - (len(CORRECT) - spans[1].end) :] == CORRECT[spans[1].end :]
    assert result.stats.tokens == len(result.flagged)
    assert 2 <= result.stats.forward_passes <= 1 + 4
    assert [s.new_text for s in again.spans] == [s.new_text for s in result.spans]


def test_a_span_that_still_does_not_parse_gets_syntax_retries(make_oracle):
    broken = CORRECT.replace("width * height", "width ) height")  # a syntax error, line 5
    document = document_from_bytes(broken.encode())
    span = line_span(broken, 5, 5)
    blind = FixOptions(threshold=0.0)  # flags nothing: only the parser sees the problem

    oracle = oracle_knowing(make_oracle, CORRECT, broken, [span])
    unmended = fix(oracle, document, [span], FixOptions(threshold=0.0, retries=0, token_edits=0))
    assert unmended.edits == [] and oracle.calls == 1

    oracle = oracle_knowing(make_oracle, CORRECT, broken, [span])
    edited = fix(oracle, document, [span], FixOptions(threshold=0.0, retries=0))
    assert apply_edits(broken, edited.edits) == CORRECT  # one token edit, the parser's check: ")" -> "*"
    assert edited.stats.token_edits == 1 and edited.stats.retries == 0

    oracle = oracle_knowing(make_oracle, CORRECT, broken, [span])
    mended = fix(oracle, document, [span], blind)
    paren = broken.index("width ) height") + len("width ")
    assert mended.edits == [TextEdit(paren, paren + 1, "*")]  # the line was re-drawn: one edit
    assert apply_edits(broken, mended.edits) == CORRECT
    assert mended.stats.retries == 1 and [t.text for t in mended.flagged] != []
    assert ")" in [t.text for t in mended.flagged]


def test_the_pass_budget_bounds_a_fixs_repair(make_oracle):
    """Fix mode takes --pass-budget as a fill does: its fill and repair within it (the scoring
    pass before them is its own)."""
    broken = CORRECT.replace("width * height", "width ) height")
    document = document_from_bytes(broken.encode())
    span = line_span(broken, 5, 5)
    def passes(budget):
        oracle = oracle_knowing(make_oracle, CORRECT, broken, [span])
        options = FixOptions(threshold=0.0, token_edits=0, pass_budget=budget)
        stats = fix(oracle, document, [span], options).stats
        assert stats.forward_passes == oracle.calls
        return stats.forward_passes - 1, stats.repair_passes  # the scoring pass left out

    unbounded = passes(None)
    assert unbounded[1] == 2  # two retry passes: the budget below binds
    assert passes(1) == (1, 1)
    assert passes(2) == passes(400) == unbounded
