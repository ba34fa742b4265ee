"""Tests for infill.alternatives: n candidates for one span, sampled as one batch, deduplicated, ranked."""

from __future__ import annotations

import math

import pytest
import torch
from plans import plan_canvases
from samples import AREA_MODULE

from infill.errors import InputError
from infill.modes.alternatives import alternatives
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.edits import minimal_edit
from infill.text.spans import Span, line_span

SOURCE = AREA_MODULE
LEAKS = ("<mask>", "<null>", "<pad>", "<unk>", "<eos>")


def batch_oracle(make_oracle, text, span, answers, confidences, options):
    """An oracle whose row i writes answers[i] into the span, with confidence confidences[i]."""
    probe = make_oracle(None)
    (canvas,) = plan_canvases(probe, text, [span], options)
    (slot,) = canvas.slots
    rows = []
    for answer in answers:
        ids = probe.encode(answer)
        row = list(canvas.ids)
        row[slot.start : slot.start + slot.length] = ids + [probe.null_id] * (slot.length - len(ids))
        rows.append(row)
    confidence = torch.tensor(confidences, dtype=torch.float64)[:, None].expand(len(answers), len(canvas.ids))
    return make_oracle(torch.tensor(rows), confidence=confidence)


class ShapeRecorder:
    """Wraps a denoiser (the network) and records the shape of every batch it is given."""

    def __init__(self, inner):
        self.inner, self.shapes = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def logits(self, ids):
        self.shapes.append(tuple(ids.shape))
        return self.inner.logits(ids)

    def cached_logits(self, ids, positions, cache, refresh, predicted=None):
        self.shapes.append(tuple(ids.shape))
        return self.inner.cached_logits(ids, positions, cache, refresh, predicted)


def test_candidates_come_from_one_batch_deduplicated_and_ranked(make_oracle):
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, 5, 5)
    a, b, c = "    return width * height", "    return height * width", "    return (width) * (height)"
    options = InfillOptions(SamplerConfig(steps=8, seed=0))
    oracle = batch_oracle(make_oracle, SOURCE, span, [c, a, b, a], [0.9990, 0.9995, 0.9999, 0.9998], options)

    candidates = alternatives(oracle, document, span, 4, options)

    assert [x.new_text for x in candidates] == [b, a, c]  # by score; a was sampled twice
    assert [x.rows for x in candidates] == [[2], [1, 3], [0]]
    assert [x.score for x in candidates] == pytest.approx(
        [math.log(0.9999), math.log(0.9998), math.log(0.999)], rel=0.01
    )
    assert candidates[1].edit is None  # the span as it is
    for x in candidates:
        assert x.edit == minimal_edit(SOURCE, span.start, span.end, x.new_text)
    assert all(x.shape[0] == 4 for x in oracle.inputs)  # every pass saw the whole batch
    assert candidates[0].stats.forward_passes == oracle.calls
    assert candidates[0].stats is candidates[-1].stats


@pytest.mark.parametrize("parses_now", [True, False], ids=["parsing-file", "broken-file"])
def test_a_candidate_that_breaks_the_syntax_ranks_after_those_that_keep_it(make_oracle, parses_now):
    """In a file that parses, syntax comes first; in one that does not, the score alone ranks."""
    text = SOURCE if parses_now else SOURCE + "\ndef unfinished(:\n"
    document = document_from_bytes(text.encode())
    span = line_span(text, 5, 5)
    broken, kept = "    return (width * height", "    return width + height"
    options = InfillOptions(SamplerConfig(steps=8, seed=0), token_edits=0)  # (an edit would mend it)
    oracle = batch_oracle(make_oracle, text, span, [broken, kept], [0.9999, 0.999], options)

    candidates = alternatives(oracle, document, span, 2, options)

    by_text = {x.new_text: x for x in candidates}
    assert by_text[broken].score > by_text[kept].score
    assert by_text[broken].breaks_syntax is parses_now and not by_text[kept].breaks_syntax
    expected = [kept, broken] if parses_now else [broken, kept]
    assert [x.new_text for x in candidates] == expected


def test_a_crlf_document_gets_crlf_candidates(make_oracle):
    crlf = SOURCE.replace("\n", "\r\n")
    document = document_from_bytes(crlf.encode())
    span = line_span(crlf, 4, 5)
    answer = '    """Area."""\n    return width * height'
    options = InfillOptions(SamplerConfig(seed=1))
    oracle = batch_oracle(make_oracle, crlf, span, [answer, answer], [0.9999, 0.9999], options)

    (only,) = alternatives(oracle, document, span, 2, options)

    assert only.new_text == answer.replace("\n", "\r\n") and only.rows == [0, 1]
    assert only.edit == minimal_edit(crlf, span.start, span.end, only.new_text)


@pytest.mark.parametrize(
    ("n", "temperature"),
    [(0, None), (65, None), (2, 0.0)],
    ids=["none", "too-many", "greedy"],
)
def test_bad_requests_are_input_errors_before_any_pass(make_oracle, n, temperature):
    oracle = make_oracle(None)
    with pytest.raises(InputError):
        alternatives(
            oracle, document_from_bytes(SOURCE.encode()), line_span(SOURCE, 5, 5), n, None, temperature
        )
    assert oracle.calls == 0


def test_a_span_past_the_end_is_an_input_error(make_oracle):
    with pytest.raises(InputError):
        alternatives(make_oracle(None), document_from_bytes(SOURCE.encode()), Span(0, 10_000), 2)


# --------------------------------------------------------------------- the real (tiny) model


def test_the_tiny_random_model_gives_distinct_seeded_candidates_in_one_batch(tiny_backend):
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, 7, 8)
    options = InfillOptions(SamplerConfig(steps=5, seed=7), token_edits=0)  # (edits go row by row)
    recorder = ShapeRecorder(tiny_backend)

    candidates = alternatives(recorder, document, span, 6, options)
    again = alternatives(tiny_backend, document, span, 6, options)
    other_seed = alternatives(tiny_backend, document, span, 6, InfillOptions(SamplerConfig(steps=5, seed=8)))

    texts = [x.new_text for x in candidates]
    assert 2 <= len(texts) == len(set(texts)) <= 6
    assert sorted(row for x in candidates for row in x.rows) == list(range(6))
    assert [x.score for x in candidates] == sorted((x.score for x in candidates), reverse=True)
    assert all(math.isfinite(x.score) and x.score <= 0 for x in candidates)
    stats = candidates[0].stats  # syntax retries run as one batch of the same 6 rows, 5 passes at most
    assert {shape[0] for shape in recorder.shapes} == {6}
    assert 1 <= len(recorder.shapes) == stats.forward_passes <= 5 * (1 + stats.retries)
    assert [x.new_text for x in again] == texts  # a seed makes the set reproducible
    assert [x.new_text for x in other_seed] != texts
    for x in candidates:
        for leak in LEAKS:
            assert leak not in x.new_text
        if x.edit is not None:
            assert span.start <= x.edit.start <= x.edit.end <= span.end
