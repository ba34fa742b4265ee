"""Code actions as plain functions: listing (no model) and resolving (with a fake denoiser)."""

from __future__ import annotations

import pytest
from lsp_support import resolve

from infill.engine.pipeline import Hooks
from infill.errors import Cancelled, InputError
from infill.modes.inline import TOKEN_EDITS
from infill.text.edits import TextEdit, apply_edits
from lsp_server.actions import (
    MODES,
    NODE_KIND,
    QUICK_FIX_KIND,
    SELECTION_KIND,
    ActionData,
    code_actions,
    kind_allowed,
    node_at_cursor,
    quick_fixes,
    run_action,
    text_document,
)
from lsp_server.diagnostics import diagnostics
from lsp_server.inline import inline_completions
from lsp_server.positions import offset_to_position, position_to_offset

URI = "file:///work/example.py"

SOURCE = (
    "# Café ☕ and 🐍\r\n"
    "import math\r\n"
    "\r\n"
    "def area(radius):\r\n"
    '    """Area of a circle 🙂."""\r\n'
    "    return math.pi * radius ** 2\r\n"
    "\r\n"
    "def mean(values):\r\n"
    '    tag = "🐍"; total = sum(values)\r\n'
    "    return total / len(values)\r\n"
)


class ConstantDenoiser:
    """Predicts one character everywhere: a fill becomes that character repeated (no nulls)."""

    mask_id, null_id, special_ids, context_length = 1, 2, frozenset({0, 1, 3, 4}), 512

    def __init__(self, char: str = "x") -> None:
        self.vocab: dict[str, int] = {}
        self.chars: dict[int, str] = {}
        self.char_id = self.encode(char)[0]

    def encode(self, text: str) -> list[int]:
        for char in text:
            if char not in self.vocab:
                self.vocab[char] = 5 + len(self.vocab)
                self.chars[self.vocab[char]] = char
        return [self.vocab[char] for char in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)

    def token_text(self, token_id: int) -> str:
        return self.chars.get(token_id, "?")

    def logits(self, ids):
        import torch

        logits = torch.full((*ids.shape, 128), -10.0)
        logits[..., self.char_id] = 10.0
        return logits


def offset_of(needle: str, nth: int = 0) -> int:
    offset = -1
    for _ in range(nth + 1):
        offset = SOURCE.index(needle, offset + 1)
    return offset


FILLS = [SELECTION_KIND, NODE_KIND]


def test_cursor_offers_the_smallest_node_without_any_edit():
    cursor = offset_of("radius ** 2")
    [action] = code_actions(URI, 7, SOURCE, cursor, cursor, only=FILLS)
    assert action.kind == NODE_KIND
    assert action.title == "Infill: fill expression on line 6"
    assert action.edit is None and action.command is None
    data = ActionData.from_json(action.data)
    assert data == ActionData(URI, 7, "expression", cursor, cursor + len("radius"), "node")


def test_selection_offers_fill_selection_and_the_node_around_it():
    start, end = offset_of("math.pi"), offset_of(" ** 2") + len(" ** 2")
    selection, node = code_actions(URI, 1, SOURCE, start, end, only=FILLS)
    assert (selection.title, selection.kind) == ("Infill: fill selection", SELECTION_KIND)
    assert ActionData.from_json(selection.data) == ActionData(URI, 1, "selection", start, end)
    assert node.title == "Infill: fill statement on line 6"
    node_data = ActionData.from_json(node.data)
    assert SOURCE[node_data.start : node_data.end] == "    return math.pi * radius ** 2"


def test_a_selection_that_is_a_node_is_offered_once():
    start = offset_of("radius ** 2")
    only = FILLS
    assert [a.kind for a in code_actions(URI, 1, SOURCE, start, start + len("radius"), only)] == [
        SELECTION_KIND
    ]


def test_body_and_nothing():
    body = node_at_cursor(SOURCE, offset_of('"""Area') - 2)
    assert body is not None and body[1] in ("body", "statement")
    assert node_at_cursor("\n\n\n", 1) is None
    assert code_actions(URI, 1, "\n\n\n", 1, 1) == []


def test_context_only_filters_kinds():
    start, end = offset_of("math.pi"), offset_of("math.pi") + 4
    assert kind_allowed(SELECTION_KIND, ["refactor"]) and kind_allowed(NODE_KIND, ["refactor.rewrite"])
    assert not kind_allowed(SELECTION_KIND, ["quickfix", "refactor.extract"])
    assert [a.kind for a in code_actions(URI, 1, SOURCE, start, end, only=[SELECTION_KIND])] == [
        SELECTION_KIND
    ]
    assert code_actions(URI, 1, SOURCE, start, end, only=["quickfix"]) == []


@pytest.mark.parametrize(
    "data",
    [None, "x", {"uri": URI}, {"uri": URI, "version": 1, "kind": "everything", "start": 0, "end": 1}]
    + [{"uri": URI, "version": 1, "kind": "selection", "start": 5, "end": 2}]
    + [{"uri": URI, "version": 1, "kind": "selection", "start": 0, "end": 2, "mode": "guess"}],
)
def test_foreign_action_data_is_an_input_error(data):
    with pytest.raises(InputError):
        ActionData.from_json(data)


def test_resolve_returns_a_versioned_edit_inside_the_span():
    start, end = offset_of("sum(values)"), offset_of("sum(values)") + len("sum(values)")
    data = ActionData(URI, 12, "selection", start, end)
    steps = []
    hooks = Hooks(on_step=lambda canvas, step: steps.append(step.index))
    edit = resolve(ConstantDenoiser(), SOURCE, data, hooks=hooks)
    assert steps and steps[0] == 0
    [document_edit] = edit.document_changes
    assert document_edit.text_document.uri == URI and document_edit.text_document.version == 12
    [lsp_edit] = document_edit.edits
    # UTF-16: '    tag = "🐍"; total = ' is 23 code points but 24 UTF-16 units.
    assert lsp_edit.range.start.line == 8 and lsp_edit.range.start.character == 24
    edit_start = position_to_offset(SOURCE, lsp_edit.range.start)
    edit_end = position_to_offset(SOURCE, lsp_edit.range.end)
    assert start <= edit_start <= edit_end <= end
    result = apply_edits(SOURCE, [TextEdit(edit_start, edit_end, lsp_edit.new_text)])
    assert result.startswith(SOURCE[:start]) and result.endswith(SOURCE[end:])
    assert set(result[start : len(result) - (len(SOURCE) - end)]) == {"x"}


def test_a_fill_that_breaks_the_syntax_says_how_many_retries_it_had():
    from infill.options import InfillOptions

    start, end = offset_of("sum(values)"), offset_of("sum(values)") + len("sum(values)")
    data = ActionData(URI, 1, "selection", start, end)
    options = InfillOptions(retries=2, fresh_fills=0)
    retried = run_action(ConstantDenoiser(")"), SOURCE, data, options)
    assert retried.summary.endswith(", 2 syntax retry(ies)")  # ")))" never parses: both rounds run
    options = InfillOptions(retries=2, fresh_fills=1)
    one_line = run_action(ConstantDenoiser(")"), SOURCE, data, options)
    assert one_line.summary.endswith(", 2 syntax retry(ies)")  # fresh fills are for several lines
    lines = ActionData(URI, 1, "selection", offset_of("sum(values)"), offset_of("len(values)"))
    restarted = run_action(ConstantDenoiser(")"), SOURCE, lines, options)
    assert restarted.summary.endswith(", 4 syntax retry(ies), 1 fresh fill(s)")  # with its own 2 rounds
    plain = run_action(ConstantDenoiser("x"), SOURCE, data, InfillOptions(retries=2))
    assert "syntax retr" not in plain.summary


def test_resolve_without_document_changes_uses_changes():
    data = ActionData(URI, 3, "selection", offset_of("math.pi"), offset_of("math.pi") + 7)
    edit = resolve(ConstantDenoiser(), SOURCE, data, document_changes=False)
    assert edit.document_changes is None and list(edit.changes) == [URI]


def test_resolve_stops_when_cancelled():
    data = ActionData(URI, 3, "selection", offset_of("math.pi"), offset_of("math.pi") + 7)
    steps = []
    with pytest.raises(Cancelled):
        resolve(
            ConstantDenoiser(),
            SOURCE,
            data,
            hooks=Hooks(
                on_step=lambda canvas, step: steps.append(step.index),
                cancelled=lambda: len(steps) >= 1,  # the fake would converge in 2 steps
            ),
        )
    assert steps == [0]


def test_resolve_rejects_data_past_the_end():
    with pytest.raises(InputError, match="has only"):
        resolve(ConstantDenoiser(), "x = 1\n", ActionData(URI, 1, "selection", 2, 40))


# ------------------------------------------------------------------ modes and quick fixes

BROKEN = SOURCE.replace("radius ** 2", "radius ** = 2")


def test_action_data_modes_round_trip_and_default_from_the_kind():
    for mode in MODES:
        data = ActionData(URI, 2, "lines", 0, 4, mode)
        assert ActionData.from_json(data.to_json()) == data
    legacy = {"uri": URI, "version": 1, "kind": "selection", "start": 0, "end": 2}
    assert ActionData.from_json(legacy).mode == "fill"
    assert ActionData.from_json({**legacy, "kind": "statement"}).mode == "node"


def test_no_quick_fix_for_valid_code():
    assert quick_fixes(URI, 1, SOURCE, 0, len(SOURCE)) == []


def test_a_quick_fix_for_a_syntax_error_under_the_cursor():
    cursor = BROKEN.index("** = 2") + 3
    [fix] = quick_fixes(URI, 4, BROKEN, cursor, cursor)
    assert fix.kind == QUICK_FIX_KIND == "quickfix" and fix.is_preferred and fix.edit is None
    assert fix.title == "Infill: fix syntax error (repair statement on line 6)"
    assert fix.diagnostics == diagnostics(BROKEN)  # the published ones, as they were published
    data = ActionData.from_json(fix.data)
    assert (data.mode, data.kind, data.version) == ("fix", "statement", 4)
    assert BROKEN[data.start : data.end] == "    return math.pi * radius ** = 2"
    # Away from the error, or filtered out by context.only: none.
    assert quick_fixes(URI, 4, BROKEN, 0, 5) == []
    assert quick_fixes(URI, 4, BROKEN, cursor, cursor, only=["refactor"]) == []
    assert quick_fixes(URI, 4, BROKEN, cursor, cursor, only=["quickfix"]) != []
    assert kind_allowed(QUICK_FIX_KIND, ["quickfix"]) and not kind_allowed(QUICK_FIX_KIND, ["refactor"])


def test_errors_fixed_by_the_same_span_share_one_action():
    text = "def f():\n    x = (1 + ) * (2 + )\n    return x\n"
    problems = diagnostics(text)
    assert len(problems) == 2
    [fix] = quick_fixes(URI, 1, text, 0, len(text))
    assert fix.diagnostics == problems


def test_resolving_a_quick_fix_repairs_its_span():
    cursor = BROKEN.index("** = 2") + 3
    [fix] = quick_fixes(URI, 4, BROKEN, cursor, cursor)
    data = ActionData.from_json(fix.data)
    [document_edit] = resolve(ConstantDenoiser(), BROKEN, data).document_changes
    assert document_edit.edits
    for lsp_edit in document_edit.edits:  # the fake believes only in "x": tokens become "x"
        start = position_to_offset(BROKEN, lsp_edit.range.start)
        end = position_to_offset(BROKEN, lsp_edit.range.end)
        assert data.start <= start <= end <= data.end and set(lsp_edit.new_text) <= {"x"}


def test_alternative_actions_are_not_resolved_by_run_action():
    with pytest.raises(InputError, match="not resolved here"):
        resolve(ConstantDenoiser(), SOURCE, ActionData(URI, 1, "selection", 0, 4, "alternative"))


# ------------------------------------------------------------------ inline completion


def test_inline_completion_inserts_at_the_cursor():
    cursor = SOURCE.index("sum(values)")
    [item] = inline_completions(ConstantDenoiser("y"), SOURCE, cursor)
    position = offset_to_position(SOURCE, cursor)  # UTF-16: after an astral character
    assert position.character == 24
    assert item.range.start == item.range.end == position
    assert set(item.insert_text) == {"y"}


class CountingDenoiser(ConstantDenoiser):
    """ConstantDenoiser that counts its passes."""

    passes = 0

    def logits(self, ids):
        self.passes += 1
        return super().logits(ids)


def test_ghost_text_that_breaks_the_syntax_gets_one_retry_at_most():
    from infill.options import InfillOptions, SamplerConfig

    cursor = SOURCE.index("sum(values)")
    passes = {}
    for rounds in (0, 4):
        network = CountingDenoiser(")")  # "))))": always breaks the file, retried in vain
        options = InfillOptions(SamplerConfig(steps=4), retries=rounds)
        [item] = inline_completions(network, SOURCE, cursor, options)
        assert set(item.insert_text) == {")"}
        passes[rounds] = network.passes
    edit_passes = TOKEN_EDITS + 1 if TOKEN_EDITS else 0  # token edits and the pass that ranks them
    assert passes[0] < passes[4] <= passes[0] + 4 + edit_passes  # one retry of at most 4 passes


def test_inline_completion_of_nothing_gives_no_items():
    assert inline_completions(ConstantDenoiser(" "), SOURCE, 0) == []  # blank: not offered
    assert inline_completions(ConstantDenoiser(), "", 0) == []


def test_inline_alternatives_are_distinct_samples():
    from infill.options import InfillOptions, SamplerConfig

    hot = InfillOptions(sampler=SamplerConfig(temperature=1.0))
    items = inline_completions(ConstantDenoiser(), SOURCE, 10, hot, alternatives=3)
    assert len(items) == 1  # the fake always writes the same: duplicates are dropped
    runs = []
    cancelled = lambda: runs.append(1) and False  # noqa: E731 - counts sampler steps
    inline_completions(ConstantDenoiser(), SOURCE, 10, hot, alternatives=3, hooks=Hooks(cancelled=cancelled))
    steps_per_run = len(runs)
    runs.clear()
    inline_completions(ConstantDenoiser(), SOURCE, 10, alternatives=3, hooks=Hooks(cancelled=cancelled))
    assert len(runs) * 3 == steps_per_run  # temperature 0: one run, not three


def test_a_text_with_a_lone_surrogate_is_refused_with_a_clear_message():
    """An editor's text with ill-formed UTF-16 (a lone surrogate) has no UTF-8 form: the fill is
    refused saying which character and where, not "not valid UTF-8"."""
    with pytest.raises(InputError, match=r"lone surrogate U\+D83D on line 2 .*no UTF-8 file can hold"):
        text_document("x = 1\ny = '\ud83d'\n")
    assert text_document("y = '🐍'\n").text == "y = '🐍'\n"  # a pair is fine


def test_documentation_actions_say_docstring_in_python_and_doc_comment_elsewhere():
    from infill.text.languages import RUST, TYPESCRIPT
    from lsp_server.actions import DOCSTRING_KIND, FILE_DOCSTRINGS_KIND, run_action

    only = [DOCSTRING_KIND, FILE_DOCSTRINGS_KIND]
    cursor = offset_of("total / len")
    python = [a.title for a in code_actions(URI, 1, SOURCE, cursor, cursor, only)]
    assert python == ["Infill: add docstring to function mean", "Infill: add missing docstrings in file (1)"]
    ts = "export function plain(x: number): number {\n  return x;\n}\n"
    titles = [a.title for a in code_actions(URI, 1, ts, 30, 30, only, language=TYPESCRIPT)]
    assert titles == [
        "Infill: add doc comment to function plain",
        "Infill: add missing doc comments in file (1)",
    ]
    rust = "use std::io;\n\n/// Reads.\npub fn read() {}\n"
    [module] = code_actions(URI, 1, rust, 2, 2, [DOCSTRING_KIND], language=RUST)
    assert module.title == "Infill: add doc comment to module"

    [action] = code_actions(URI, 1, ts, 30, 30, [DOCSTRING_KIND], language=TYPESCRIPT)
    outcome = run_action(ConstantDenoiser(), ts, ActionData.from_json(action.data), language=TYPESCRIPT)
    assert outcome.summary.startswith("1 of 1 doc comment(s) written (function plain)")
    assert apply_edits(ts, outcome.edits).startswith("/** x")
