"""Fix, document and alternative actions as plain functions: listing (no model), resolving with
oracle denoisers (a test double for the network), alternative sets following document versions,
and change annotations."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from lsp_support import resolve
from lsprotocol import types
from plans import plan_canvases
from samples import AREA_MODULE

from infill.errors import InputError
from infill.options import InfillOptions, SamplerConfig
from infill.text.docstring_sites import missing_docstrings
from infill.text.document import document_from_bytes
from infill.text.edits import TextEdit, apply_edits
from infill.text.spans import Span, line_span, validate_spans
from lsp_server.actions import (
    ALTERNATIVES_KIND,
    DOCSTRING_KIND,
    FILE_DOCSTRINGS_KIND,
    FIX_KIND,
    NODE_KIND,
    QUICK_FIX_KIND,
    ActionData,
    Outcome,
    code_actions,
    list_actions,
    quick_fixes,
    run_action,
    workspace_edit,
)
from lsp_server.alternatives import AlternativeSet, AlternativeSets, StaleAlternatives, sample_alternatives
from lsp_server.positions import position_to_offset

URI = "file:///work/modes.py"
CORRECT = AREA_MODULE
BROKEN = CORRECT.replace("width * height", "width - height")  # line 5: one wrong token


def lsp_edits(workspace: types.WorkspaceEdit):
    [document_edit] = workspace.document_changes
    return document_edit.text_document.version, list(document_edit.edits)


def as_offsets(text: str, edits) -> list[TextEdit]:
    return [
        TextEdit(position_to_offset(text, e.range.start), position_to_offset(text, e.range.end), e.new_text)
        for e in edits
    ]


# ------------------------------------------------------------------ listing


def test_a_cursor_in_an_undocumented_function_offers_fill_fix_and_docstrings():
    cursor = CORRECT.index("radius ** 2")
    actions = code_actions(URI, 3, CORRECT, cursor, cursor)
    assert [(a.title, a.kind) for a in actions] == [
        ("Infill: fill expression on line 8", NODE_KIND),
        ("Infill: fix statement on line 8", FIX_KIND),
        ("Infill: add docstring to function circle", DOCSTRING_KIND),
        ("Infill: add missing docstrings in file (1)", FILE_DOCSTRINGS_KIND),
    ]
    assert all(a.edit is None for a in actions)
    fix, docstring, whole = (ActionData.from_json(a.data) for a in actions[1:])
    assert (fix.mode, fix.kind, CORRECT[fix.start : fix.end]) == (
        "fix",
        "statement",
        "    return math.pi * radius ** 2",
    )
    [site] = missing_docstrings(CORRECT)
    assert (docstring.mode, docstring.kind, docstring.start, docstring.end) == (
        "document",
        "definition",
        site.start,
        site.end,
    )
    assert (whole.mode, whole.kind, whole.start, whole.end) == ("document", "file", 0, len(CORRECT))


def test_a_documented_function_gets_no_docstring_action_and_a_documented_file_none_at_all():
    cursor = CORRECT.index("width * height")
    kinds = [a.kind for a in code_actions(URI, 1, CORRECT, cursor, cursor)]
    assert DOCSTRING_KIND not in kinds and FILE_DOCSTRINGS_KIND in kinds
    documented = CORRECT.replace("(radius):\n", '(radius):\n    """Circle."""\n')
    kinds = [a.kind for a in code_actions(URI, 1, documented, cursor, cursor)]
    assert DOCSTRING_KIND not in kinds and FILE_DOCSTRINGS_KIND not in kinds
    assert [a.kind for a in code_actions(URI, 1, documented, 0, 0, only=["source"])] == []
    assert [a.kind for a in code_actions(URI, 1, CORRECT, 0, 0, only=["source"])] == [FILE_DOCSTRINGS_KIND]


def test_a_selection_offers_fill_fix_and_alternatives_when_asked_for_several():
    start, end = CORRECT.index("width * height"), CORRECT.index("width * height") + len("width * height")
    titles = [a.title for a in code_actions(URI, 1, CORRECT, start, end, alternatives=4)]
    assert titles[:4] == [
        "Infill: fill selection",
        "Infill: fill statement on line 5",
        "Infill: fix selection",
        "Infill: fill selection (4 alternatives)",
    ]
    [several] = code_actions(URI, 1, CORRECT, start, end, only=[ALTERNATIVES_KIND], alternatives=4)
    assert ActionData.from_json(several.data) == ActionData(URI, 1, "selection", start, end, "alternative")
    assert code_actions(URI, 1, CORRECT, start, end, only=[ALTERNATIVES_KIND], alternatives=1) == []
    assert code_actions(URI, 1, CORRECT, start, start, only=[ALTERNATIVES_KIND], alternatives=4) == []


def test_quick_fixes_repair_tokens_that_are_there_and_fill_missing_ones():
    unexpected = "def f():\n    x = = 2\n"
    at = unexpected.index("= 2")
    [fix] = quick_fixes(URI, 1, unexpected, at, at)
    assert fix.data["mode"] == "fix" and fix.title == "Infill: fix syntax error (repair statement on line 2)"
    missing = "def f(:\n    return 1\n"
    [fix] = quick_fixes(URI, 1, missing, 6, 6)
    assert fix.data["mode"] == "fill" and fix.title.startswith("Infill: fix syntax error (fill ")


def test_list_actions_puts_quick_fixes_first_and_offers_a_span_once():
    text = "def f():\n    x = = 2\n"
    cursor = text.index("= 2")
    actions = list_actions(URI, 1, text, cursor, cursor)
    assert actions[0].kind == QUICK_FIX_KIND and actions[0].data["mode"] == "fix"
    fixes = [(a.data["mode"], a.data["start"], a.data["end"]) for a in actions if a.data["mode"] == "fix"]
    assert len(fixes) == len(set(fixes))  # "fix statement" would repair the quick fix's span again
    ready = types.CodeAction(title="ready", kind=ALTERNATIVES_KIND, data={"mode": "alternative"})
    ready.data.update(start=0, end=1, candidate=1)
    listed = list_actions(URI, 1, text, cursor, cursor, ready=[ready])
    assert listed[1] is ready
    assert ready not in list_actions(URI, 1, text, cursor, cursor, only=["quickfix"], ready=[ready])


def test_action_data_candidates():
    data = ActionData(URI, 2, "selection", 0, 4, "alternative", 3)
    assert ActionData.from_json(data.to_json()) == data
    assert "candidate" not in ActionData(URI, 2, "selection", 0, 4, "alternative").to_json()
    for bad in (-1, "2", True):
        with pytest.raises(InputError):
            ActionData.from_json({**data.to_json(), "candidate": bad})
    with pytest.raises(InputError):
        ActionData.from_json({**data.to_json(), "mode": "fill"})  # only alternatives have candidates


def test_listing_imports_no_torch():
    code = (
        "import sys; from lsp_server import actions, alternatives; "
        "t = open('/dev/stdin').read(); actions.list_actions('file:///a.py', 1, t, 30, 30, alternatives=3); "
        "print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], input=CORRECT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# ------------------------------------------------------------------ fix: repair


def oracle_knowing(make_oracle, correct: str, broken: str, span: Span):
    """An oracle whose answer is the scoring canvas of `correct` (same token count as `broken`)."""
    probe = make_oracle(None)
    options = InfillOptions()

    def canvas(text):
        [only] = plan_canvases(probe, text, validate_spans(text, [span]), options, keep_text=True)
        return only

    right, wrong = canvas(correct), canvas(broken)
    assert len(right.ids) == len(wrong.ids)
    return make_oracle(torch.tensor(right.ids))


def test_fix_re_predicts_only_the_unlikely_token(make_oracle):
    span = line_span(BROKEN, 5, 5)
    oracle = oracle_knowing(make_oracle, CORRECT, BROKEN, span)
    data = ActionData(URI, 9, "statement", span.start, span.end, "fix")

    outcome = run_action(oracle, BROKEN, data)

    minus = BROKEN.index("-")
    assert outcome.edits == [TextEdit(minus, minus + 1, "*")] and outcome.nothing is None
    assert "1 unlikely token(s) re-predicted" in outcome.summary
    again = oracle_knowing(make_oracle, CORRECT, BROKEN, span)
    version, [edit] = lsp_edits(resolve(again, BROKEN, data))
    assert version == 9 and edit.new_text == "*"
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.character) == (4, 17, 18)


def test_fix_of_code_the_model_believes_changes_nothing_and_says_why(make_oracle):
    span = line_span(CORRECT, 5, 5)
    oracle = oracle_knowing(make_oracle, CORRECT, CORRECT, span)
    outcome = run_action(oracle, CORRECT, ActionData(URI, 1, "selection", span.start, span.end, "fix"))
    assert outcome.edits == [] and outcome.nothing == "the model found no unlikely token"
    assert oracle.calls == 1  # the scoring pass only
    assert lsp_edits(workspace_edit(URI, 1, CORRECT, outcome)) == (1, [])


# ------------------------------------------------------------------ document: docstrings

DOCUMENTED = "class Shape:\n    def area(self):\n        return 0\n\n\ndef free(x):\n    return x\n"


def docstring_oracle(make_oracle, oracle_for_canvases, text, sites, answers):
    from infill.modes.docstrings import DOCSTRING_BUDGET, insertion_layout

    probe = make_oracle(None)
    layout, spans = insertion_layout(document_from_bytes(text.encode()), sites)
    by_span = dict(zip(spans, answers, strict=True))
    plan = plan_canvases(probe, layout.text, spans, InfillOptions(budget=DOCSTRING_BUDGET))
    return oracle_for_canvases([(c, [probe.encode(by_span[s.span]) for s in c.slots]) for c in plan])


def test_add_docstring_writes_one_at_the_definition_with_its_indentation(make_oracle, oracle_for_canvases):
    cursor = DOCUMENTED.index("return 0")
    [action] = code_actions(URI, 5, DOCUMENTED, cursor, cursor, only=[DOCSTRING_KIND])
    assert action.title == "Infill: add docstring to function Shape.area"
    data = ActionData.from_json(action.data)
    [site] = [s for s in missing_docstrings(DOCUMENTED) if s.start == data.start]
    oracle = docstring_oracle(make_oracle, oracle_for_canvases, DOCUMENTED, [site], ["Area of it."])

    version, [edit] = lsp_edits(resolve(oracle, DOCUMENTED, data))

    assert version == 5 and edit.new_text == '\n        """Area of it."""'
    assert edit.range.start == edit.range.end == types.Position(line=1, character=len("    def area(self):"))
    new = apply_edits(DOCUMENTED, as_offsets(DOCUMENTED, [edit]))
    assert new.splitlines()[1:4] == ["    def area(self):", '        """Area of it."""', "        return 0"]


def test_add_missing_docstrings_in_file_writes_every_one(make_oracle, oracle_for_canvases):
    [action] = code_actions(URI, 2, DOCUMENTED, 0, 0, only=[FILE_DOCSTRINGS_KIND])
    assert action.title == "Infill: add missing docstrings in file (3)"
    sites = missing_docstrings(DOCUMENTED)
    answers = ["A shape.", "Its area.", ""]  # nothing usable for free(): no edit there
    oracle = docstring_oracle(make_oracle, oracle_for_canvases, DOCUMENTED, sites, answers)

    outcome = run_action(oracle, DOCUMENTED, ActionData.from_json(action.data))

    new = apply_edits(DOCUMENTED, outcome.edits)
    assert new == (
        'class Shape:\n    """A shape."""\n    def area(self):\n        """Its area."""\n        return 0\n'
        "\n\ndef free(x):\n    return x\n"
    )
    assert outcome.summary.startswith("2 of 3 docstring(s) written (class Shape, function Shape.area)")


def test_a_file_docstring_action_edits_only_inside_its_span(make_oracle, oracle_for_canvases):
    """Found by tests/lsp/test_lsp_fuzz.py: "add missing docstrings in file" with a span a client
    narrowed (to 0-0) still wrote every docstring of the file, outside the span it declared."""
    free = DOCUMENTED.index("def free")
    [site] = [s for s in missing_docstrings(DOCUMENTED) if s.start >= free]
    oracle = docstring_oracle(make_oracle, oracle_for_canvases, DOCUMENTED, [site], ["Free it."])

    outcome = run_action(oracle, DOCUMENTED, ActionData(URI, 2, "file", free, len(DOCUMENTED), "document"))

    assert [edit.start for edit in outcome.edits] == [site.start]
    assert outcome.summary.startswith("1 of 1 docstring(s) written (function free)")
    nothing = run_action(make_oracle(None), DOCUMENTED, ActionData(URI, 2, "file", 0, 0, "document"))
    assert nothing.edits == []


def test_document_data_that_names_no_site_is_an_input_error(make_oracle):
    documented_area = CORRECT.index("width * height")
    with pytest.raises(InputError, match="no definition without a docstring"):
        run_action(
            make_oracle(None),
            CORRECT,
            ActionData(URI, 1, "definition", documented_area, documented_area, "document"),
        )
    everything = "x = 1\n"
    outcome = run_action(make_oracle(None), everything, ActionData(URI, 1, "file", 0, 6, "document"))
    assert outcome.edits == [] and "every function and class has a docstring" in outcome.nothing


# ------------------------------------------------------------------ alternatives


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


A, B, C = "width * height", "height * width", "(width) * (height)"


def sampled_set(make_oracle) -> AlternativeSet:
    start = CORRECT.index(A)
    span = Span(start, start + len(A), "selection")
    options = InfillOptions(SamplerConfig(steps=8, seed=0))
    oracle = batch_oracle(make_oracle, CORRECT, span, [C, A, B, C], [0.999, 0.9995, 0.9999, 0.999], options)
    data = ActionData(URI, 4, "selection", span.start, span.end, "alternative")
    return sample_alternatives(oracle, CORRECT, data, 4, options)


def test_candidates_are_sampled_once_ranked_and_the_best_is_the_edit(make_oracle):
    found = sampled_set(make_oracle)
    assert [text for text, _ in found.candidates] == [B, A, C]  # by the model's score; C twice
    scores = [score for _, score in found.candidates]
    assert scores == sorted(scores, reverse=True) and found.sampled == 4
    assert (found.version, found.current, found.text) == (4, None, CORRECT)
    best = found.outcome(0)
    assert apply_edits(CORRECT, best.edits) == CORRECT.replace(A, B)
    assert best.summary.startswith("alternative 1 of 3 (4 sampled in one batch), score ")
    # Listed at the sampled version: every candidate that differs from the text there.
    titles = [a.title for a in found.actions()]
    assert [t.split(" (")[0] for t in titles] == ["Infill: alternative 1 of 3", "Infill: alternative 3 of 3"]


def test_the_set_follows_an_applied_candidate_and_offers_the_others(make_oracle):
    sets = AlternativeSets()
    found = sampled_set(make_oracle)
    sets.put(found)
    start = found.start
    after_best = apply_edits(CORRECT, found.outcome(0).edits)
    sets.changed(URI, 5, after_best)  # the client applied the best candidate

    moved = sets.get(URI)
    assert (moved.version, moved.current, moved.start, moved.end) == (5, 0, start, start + len(B))
    assert sets.actions(URI, 4, start, start) == []  # the old version: nothing
    assert sets.actions(URI, 5, 0, 3) == []  # away from the span: nothing
    listed = sets.actions(URI, 5, start + 2, start + 2)
    assert [a.title.split(" (")[0] for a in listed] == [
        "Infill: alternative 2 of 3",
        "Infill: alternative 3 of 3",
    ]
    assert all(a.kind == ALTERNATIVES_KIND for a in listed)
    version, edits = lsp_edits(listed[1].edit)  # already resolved, against version 5
    assert version == 5
    with_c = apply_edits(after_best, as_offsets(after_best, edits))
    assert with_c == CORRECT.replace(A, C)
    data = ActionData.from_json(listed[1].data)
    assert data.candidate == 2 and sets.edit(data) == listed[1].edit

    sets.changed(URI, 6, with_c)  # applied alternative 3: alternatives 1 and 2 are offered now
    assert [a.data["candidate"] for a in sets.actions(URI, 6, start, start)] == [0, 1]
    with pytest.raises(StaleAlternatives):
        sets.edit(data)  # listed for version 5

    sets.changed(URI, 7, "# typed something\n" + with_c)  # any other change: stale, dropped
    assert sets.get(URI) is None and sets.actions(URI, 7, start, start) == []


def test_a_set_at_the_listed_version_offers_the_best_too_and_closing_drops_it(make_oracle):
    sets = AlternativeSets()
    sets.put(sampled_set(make_oracle))
    sets.changed(URI, 5, CORRECT)  # a change that changed nothing (say, a save hook): kept
    assert [a.data["candidate"] for a in sets.actions(URI, 5, 0, len(CORRECT))] == [0, 2]
    sets.closed(URI)
    assert sets.get(URI) is None


# ------------------------------------------------------------------ change annotations


def test_annotated_edits_need_confirmation_and_describe_the_run():
    outcome = Outcome([TextEdit(3, 5, "xy")], "fill selection: 4 denoising step(s)")
    edit = workspace_edit(URI, 7, CORRECT, outcome, annotate=True)
    [document_edit] = edit.document_changes
    assert document_edit.text_document.version == 7
    [text_edit] = document_edit.edits
    assert isinstance(text_edit, types.AnnotatedTextEdit) and text_edit.annotation_id == "infill"
    annotation = edit.change_annotations["infill"]
    assert annotation.needs_confirmation is True and annotation.label == "infill"
    assert annotation.description == "fill selection: 4 denoising step(s)"

    plain = workspace_edit(URI, 7, CORRECT, outcome)
    [text_edit] = plain.document_changes[0].edits
    assert not isinstance(text_edit, types.AnnotatedTextEdit) and plain.change_annotations is None
    without_versions = workspace_edit(URI, 7, CORRECT, outcome, document_changes=False, annotate=True)
    assert without_versions.change_annotations is None and list(without_versions.changes) == [URI]
