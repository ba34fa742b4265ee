"""Parser-checked token edits: a fill still broken after the syntax retries gets single-token edits.

The network is the oracle test double: it insists on a broken fill (so the retries cannot mend
it), and only the parser-checked edits can. The real tiny model runs the same path at the end.
"""

from __future__ import annotations

import pytest
import torch
from plans import plan_canvases

from infill.engine.decode import Decoder, filled_text
from infill.engine.prediction import token_probabilities
from infill.engine.repair.problems import tokens_to_remask
from infill.engine.repair.token_edits import Edit, SlotProbabilities, candidates
from infill.models import load
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.edits import apply_edits
from infill.text.spans import line_span
from infill.text.syntax import file_problems

SOURCE = "def f(x):\n    y = x * 2\n    return y + 1\n\n\nprint(f(2))\n"
NO_SELF_CORRECTION = SamplerConfig(steps=8, max_revisions=0)


def insisting_oracle(make_oracle, oracle_for_canvases, fill: str, line: int = 6):
    """The document, the line's span, its canvas and an oracle that always answers `fill`."""
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, line, line)
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, [span], InfillOptions())
    oracle = oracle_for_canvases([(canvas, [probe.encode(fill)])])
    return document, span, canvas, oracle


def test_a_fill_the_retries_cannot_mend_is_mended_by_one_edit(make_oracle, oracle_for_canvases):
    document, span, _, oracle = insisting_oracle(make_oracle, oracle_for_canvases, "print(f(2)")

    def fill(edits: int):
        options = InfillOptions(NO_SELF_CORRECTION, retries=2, token_edits=edits, fresh_fills=0)
        return infill(oracle, document, [span], options)

    broken = fill(edits=0)
    assert broken.spans[0].new_text == "print(f(2)" and file_problems(apply_edits(SOURCE, broken.edits))
    assert broken.stats.retries == 2 and broken.stats.token_edits == 0

    mended = fill(edits=3)
    new = apply_edits(SOURCE, mended.edits)
    assert not file_problems(new)
    assert mended.stats.token_edits == 1 and mended.stats.revisions >= broken.stats.revisions + 1
    assert mended.stats.forward_passes == broken.stats.forward_passes + 2  # one edit, one last pass
    assert new.startswith(SOURCE[: span.start]) and new.endswith(SOURCE[span.end :])
    assert mended.spans[0].new_text != broken.spans[0].new_text


def test_a_fill_no_single_edit_mends_is_left_as_it_was(make_oracle, oracle_for_canvases):
    # five stray brackets: any one edit leaves the same one problem (an edit must leave fewer)
    document, span, _, oracle = insisting_oracle(make_oracle, oracle_for_canvases, ")))))")
    options = InfillOptions(NO_SELF_CORRECTION, retries=0, token_edits=4, fresh_fills=0)
    result = infill(oracle, document, [span], options)
    assert result.spans[0].new_text == ")))))"
    assert result.stats.token_edits == 0
    assert result.stats.forward_passes == oracle.calls  # the fill's passes, then one to rank the edits


def broken_last_line(make_oracle):
    """The document, a probe network, the canvas of line 6 and its ids filled with "print(f(2)"
    (an unclosed bracket) followed by the slot's <null> padding."""
    document = document_from_bytes(SOURCE.encode())
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, [line_span(SOURCE, 6, 6)], InfillOptions())
    [slot] = canvas.slots
    ids = torch.tensor([canvas.ids])
    fill_ids = probe.encode("print(f(2)")
    ids[0, slot.start : slot.start + slot.length] = torch.tensor(
        fill_ids + [probe.null_id] * (slot.length - len(fill_ids))
    )
    return document, probe, canvas, slot, ids


def test_an_insertion_shifts_the_fill_onto_its_padding_and_a_deletion_leaves_a_null(make_oracle):
    document, probe, canvas, slot, ids = broken_last_line(make_oracle)
    end = slot.start + len(probe.encode("print(f(2)"))
    [close] = probe.encode(")")

    inserted = Edit(end, close, insert=True, gain=0.0).apply(ids, slot, probe.null_id)
    assert filled_text(probe, document, canvas, inserted) == SOURCE
    assert int((inserted[0] == probe.null_id).sum()) == int((ids[0] == probe.null_id).sum()) - 1
    assert torch.equal(inserted[0, : slot.start], ids[0, : slot.start])  # context untouched
    assert torch.equal(inserted[0, slot.start + slot.length :], ids[0, slot.start + slot.length :])

    [open_id] = probe.encode("(")
    first_open = slot.start + probe.encode("print(f(2)").index(open_id)
    deleted = Edit(first_open, None, insert=False, gain=0.0).apply(ids, slot, probe.null_id)
    assert filled_text(probe, document, canvas, deleted) == SOURCE.replace("print(f(2))", "printf(2)")


def test_candidates_bring_in_no_comment_and_insert_only_where_there_is_room(make_oracle):
    document, probe, canvas, slot, ids = broken_last_line(make_oracle)
    [hash_id] = probe.encode("#")
    [close], [plus] = probe.encode(")"), probe.encode("+")
    every = torch.full((ids.size(1), probe.tokenizer.vocab_size), 1e-6)
    every[:, hash_id] = 0.9  # the model's favourite everywhere: a comment
    every[:, plus] = 0.05
    probs = SlotProbabilities(row=torch.arange(ids.size(1)), probs=every)
    problems = file_problems(filled_text(probe, document, canvas, ids))
    blamed = tokens_to_remask(Decoder(probe, document, canvas), ids, problems)
    assert blamed.any()

    found = [edit for edit, _ in candidates(probe, canvas, ids, probs, blamed, [close])]
    assert all(edit.token != hash_id for edit in found)
    replaced = {edit.token for edit in found if edit.token is not None and not edit.insert}
    assert replaced == {plus}  # not the comment, nor the tokens the model all but rules out
    assert any(edit.insert for edit in found) and any(edit.token is None for edit in found)
    assert all(slot.start <= edit.position < slot.start + slot.length for edit in found)
    gains = [edit.gain for edit in found]
    assert gains == sorted(gains, reverse=True)  # the likeliest first

    full = ids.clone()
    full[0, slot.start : slot.start + slot.length] = close  # no <null> left: nothing can be inserted
    assert not any(edit.insert for edit, _ in candidates(probe, canvas, full, probs, blamed, [close]))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_slots_probabilities_are_a_full_pass_probabilities_there(dtype):
    """The shipped model, in float32 and as served on a CPU (bfloat16, infill's products): the
    probabilities at the slots, from a pass whose output layer runs there alone, are those of a
    pass over every position, bit for bit; each slot token's own probability too, 0 elsewhere."""
    denoiser = load(None, "cpu", dtype)
    document = document_from_bytes(SOURCE.encode())
    [canvas] = plan_canvases(denoiser, SOURCE, [line_span(SOURCE, 2, 3)], InfillOptions())
    ids = torch.tensor([canvas.ids])
    slots = torch.tensor(canvas.editable())
    ids[0, slots] = torch.tensor(denoiser.encode("z = x + 3")[:1] * int(slots.sum()))
    full = token_probabilities(denoiser, ids)[0]
    found = SlotProbabilities.of(denoiser, canvas, ids)
    for position in slots.nonzero().flatten().tolist():
        assert torch.equal(found.at(position), full[position])
    own = found.of_tokens(ids)
    assert torch.equal(own[0, slots], full[slots].gather(-1, ids[0, slots, None]).squeeze(-1))
    assert not own[0, ~slots].any() and document.text == SOURCE


def test_the_tiny_model_runs_the_edits_and_leaves_the_rest_of_the_file(tiny_backend):
    document = document_from_bytes(SOURCE.encode())
    spans = [line_span(SOURCE, 2, 3)]
    options = InfillOptions(SamplerConfig(steps=4), retries=1, token_edits=2, fresh_fills=0)
    result = infill(tiny_backend, document, spans, options)
    assert result.stats.token_edits <= 2
    assert result.stats.forward_passes <= 4 + 4 + 3  # fill, one retry, two edits and a last pass
    new = apply_edits(SOURCE, result.edits)
    assert new.startswith(SOURCE[: spans[0].start]) and new.endswith(SOURCE[spans[0].end :])
    again = infill(tiny_backend, document, spans, options)
    assert again.spans[0].new_text == result.spans[0].new_text  # reproducible


def test_two_edits_mend_what_one_cannot_when_the_first_moves_the_problem_on(make_oracle, oracle_for_canvases):
    document, span, _, oracle = insisting_oracle(make_oracle, oracle_for_canvases, "x = [f(2, 3")
    options = InfillOptions(NO_SELF_CORRECTION, retries=0, token_edits=4, fresh_fills=0)
    result = infill(oracle, document, [span], options)
    new = apply_edits(SOURCE, result.edits)
    assert not file_problems(new) and result.stats.token_edits == 2  # ")" then "]"
    assert new.startswith(SOURCE[: span.start]) and new.endswith(SOURCE[span.end :])

    one_edit = InfillOptions(NO_SELF_CORRECTION, retries=0, token_edits=1, fresh_fills=0)
    one = infill(oracle, document, [span], one_edit)
    assert one.spans[0].new_text == "x = [f(2, 3" and one.stats.token_edits == 0  # half a mend is not kept
