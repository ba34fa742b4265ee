"""Review diagnostics (lsp_server.review) as plain functions: findings -> LSP diagnostics in each
position encoding (multi-byte characters, CRLF), the quick fix's edit (its range only), what an
edit keeps, moves and sends to be scored again, the cap per file, the settings; and review
windows on the shipped model (a finding on an injected bug, stopping before a pass)."""

from __future__ import annotations

import re

import pytest
from lsprotocol import types

from infill.errors import Cancelled
from infill.options import REVIEW_THRESHOLD, FixOptions
from lsp_server import actions
from lsp_server.positions import UTF8, UTF16, UTF32, range_to_offsets
from lsp_server.review import (
    CONTEXT_LINES,
    DocumentReviews,
    Doubt,
    Interruptible,
    lowest,
    quick_fixes,
    replacement_edit,
    review_window,
    to_diagnostic,
)
from lsp_server.settings import DEFAULT_REVIEW_THRESHOLD, parse_settings

URI = "file:///project/bill.py"
BUGGY = (
    "def total_price(items, tax):\n"
    "    subtotal = 0\n"
    "    for item in items:\n"
    "        subtotal -= item.price * item.count\n"
    "    return subtotal * (1 + tax)\n"
)


def doubt_of(text: str, needle: str, expected: str, score: float = 0.01, after: int = 0) -> Doubt:
    start = text.index(needle, after)
    return Doubt(start, start + len(needle), needle, expected, score)


def apply(text: str, edit: types.WorkspaceEdit, encoding: str = UTF16) -> str:
    [change] = edit.document_changes
    [lsp_edit] = change.edits
    start, end = range_to_offsets(text, lsp_edit.range, encoding)
    return text[:start] + lsp_edit.new_text + text[end:]


# ------------------------------------------------------------------------------------ diagnostics


def test_a_finding_is_a_hint_from_infill_with_the_expected_text_in_message_and_data():
    doubt = doubt_of(BUGGY, " -=", " =", 0.0063)
    diagnostic = to_diagnostic(BUGGY, doubt)
    assert diagnostic.severity == types.DiagnosticSeverity.Hint and diagnostic.source == "infill"
    assert diagnostic.code == "review"
    assert diagnostic.message == "infill expected `=`, not `-=` (probability 0.0063)"
    column = BUGGY.splitlines()[3].index("-=")  # the token's space, shared with `expected`, left out
    assert diagnostic.range == types.Range(
        start=types.Position(line=3, character=column), end=types.Position(line=3, character=column + 2)
    )
    assert diagnostic.data == {"expected": "=", "text": "-=", "score": 0.0063}
    nothing = to_diagnostic(BUGGY, doubt_of(BUGGY, "tax", "", 0.2))
    assert nothing.message.startswith("infill expected nothing here, not `tax`")


@pytest.mark.parametrize("encoding", [UTF16, UTF8, UTF32])
def test_positions_with_multi_byte_characters_and_crlf_in_each_encoding(encoding):
    line = '    s = "🐍é" + valeur_élevée'
    text = f"# ok\r\n{line}\r\nx = 1\r\n"
    doubt = doubt_of(text, " valeur_élevée", " valeur")
    diagnostic = to_diagnostic(text, doubt, encoding)
    before = line[: line.index("valeur")]
    width = {UTF16: len(before.encode("utf-16-le")) // 2, UTF8: len(before.encode()), UTF32: len(before)}
    assert diagnostic.range.start == types.Position(line=1, character=width[encoding])
    assert width[UTF16] == width[UTF32] + 1 and width[UTF8] == width[UTF32] + 4  # 🐍: 2 units; 4 bytes
    end = {UTF16: len(line.encode("utf-16-le")) // 2, UTF8: len(line.encode()), UTF32: len(line)}
    assert diagnostic.range.end == types.Position(line=1, character=end[encoding])
    assert range_to_offsets(text, diagnostic.range, encoding) == (doubt.start + 1, doubt.end)


def test_a_finding_that_ends_inside_a_crlf_stops_before_it():
    text = "x = f(1)\r\ny = 2\r\n"
    start = text.index(")")
    doubt = Doubt(start, start + 2, ")\r", "]", 0.01)  # a token's "\r" without its "\n"
    diagnostic = to_diagnostic(text, doubt)
    assert diagnostic.range.end == types.Position(line=0, character=len("x = f(1)"))
    assert apply(text, replacement_edit(URI, 3, text, doubt)) == "x = f(1]\r\ny = 2\r\n"


# ------------------------------------------------------------------------------------ quick fixes


@pytest.mark.parametrize("encoding", [UTF16, UTF8])
def test_the_quick_fix_changes_only_its_range(encoding):
    text = BUGGY.replace("item", "pièce🐍").replace("\n", "\r\n")
    doubt = doubt_of(text, " -=", " +=")
    actions_found = quick_fixes(URI, 7, text, [doubt], doubt.start + 2, doubt.start + 2, None, encoding)
    replace, fix_line = actions_found
    assert (
        replace.title == "Infill: replace `-=` with `+=`"
        and replace.kind == "quickfix"
        and replace.is_preferred
    )
    assert replace.diagnostics == [to_diagnostic(text, doubt, encoding)]
    [change] = replace.edit.document_changes
    assert change.text_document.version == 7
    [lsp_edit] = change.edits
    assert lsp_edit.range == replace.diagnostics[0].range  # exactly the diagnostic's range
    assert apply(text, replace.edit, encoding) == text.replace(" -= ", " += ")
    data = actions.ActionData.from_json(replace.data)
    assert (data.mode, data.kind, data.start, data.end) == ("review", "finding", doubt.start, doubt.end)
    # the other one runs fix mode on the finding's line (resolved by the model, as any fix)
    data = actions.ActionData.from_json(fix_line.data)
    assert fix_line.title == "Infill: fix line 4" and (data.mode, data.kind) == ("fix", "lines")
    assert text[data.start : data.end] == "        subtotal -= pièce🐍.price * pièce🐍.count"


def test_no_quick_fix_that_deletes_code_or_changes_nothing_and_none_out_of_range():
    deletes = doubt_of(BUGGY, "tax", "")
    same = doubt_of(BUGGY, " -=", " -=")
    assert replacement_edit(URI, 1, BUGGY, deletes) is None and replacement_edit(URI, 1, BUGGY, same) is None
    found = quick_fixes(URI, 1, BUGGY, [deletes, same], 0, len(BUGGY))
    assert [a.title for a in found] == ["Infill: fix line 1", "Infill: fix line 4"]
    assert quick_fixes(URI, 1, BUGGY, [same], 0, 5) == []  # the range does not touch it
    assert quick_fixes(URI, 1, BUGGY, [same], 0, len(BUGGY), only=["refactor"]) == []


def test_a_multi_line_expected_text_gets_the_documents_line_ends():
    text = "if a:\r\n    pass\r\n"
    doubt = doubt_of(text, "pass", "x = 1\n    pass")
    assert apply(text, replacement_edit(URI, 1, text, doubt)) == "if a:\r\n    x = 1\r\n    pass\r\n"


def test_the_cap_per_file_keeps_the_least_likely_in_document_order():
    doubts = [
        Doubt(10 * i, 10 * i + 2, "ab", "cd", score) for i, score in enumerate([0.04, 0.001, 0.03, 0.002])
    ]
    assert lowest(doubts, 2) == [doubts[1], doubts[3]]
    assert lowest(doubts, 10) == doubts and lowest(doubts, 0) == []


# ------------------------------------------------------------------------------------ edits


def reviews_of(text: str, doubts: list[Doubt]) -> DocumentReviews:
    reviews = DocumentReviews()
    reviews.opened(URI, text)
    assert reviews.windows(URI) == [(0, len(text))]  # on open: the whole file (5 lines: one window)
    assert reviews.scored(URI, text, (0, len(text)), doubts)
    assert reviews.pending(URI) == []
    return reviews


def test_an_edit_drops_the_findings_on_its_lines_moves_later_ones_and_keeps_earlier_ones():
    first, bug, last = doubt_of(BUGGY, "tax", "t"), doubt_of(BUGGY, " -=", " ="), doubt_of(BUGGY, "1 +", "x")
    reviews = reviews_of(BUGGY, [first, bug, last])
    edited = BUGGY.replace("subtotal -=", "subtotal_sum -=")  # line 4
    reviews.changed(URI, edited)
    assert reviews.doubts(URI, BUGGY) == []  # of other text
    kept = reviews.doubts(URI, edited)
    assert kept == [first, last.shifted(4)]
    assert edited[kept[1].start : kept[1].end] == "1 +"
    # the edited line and CONTEXT_LINES either side are to be scored again, nearest the edit first
    lines = edited.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: 3 - CONTEXT_LINES])
    assert reviews.pending(URI) == [(start, len(edited))]
    assert reviews.windows(URI) == [(start, len(edited))]


def test_a_stale_window_is_not_kept_and_windows_go_nearest_the_edit_first():
    text = "".join(f"v{i} = {i}\n" for i in range(40))
    reviews = DocumentReviews()
    reviews.opened(URI, text)
    windows = reviews.windows(URI, lines=8)
    assert len(windows) == 5 and windows[0][0] == 0 and windows[-1][1] == len(text)
    assert all(text[a:b].count("\n") == 8 for a, b in windows)
    changed = text.replace("v30 = 30", "v30 = 31")
    reviews.changed(URI, changed)
    assert not reviews.scored(URI, text, windows[0], [])  # scored on the old text: dropped
    assert changed[slice(*reviews.windows(URI, lines=8)[0])].startswith("v24 = 24")  # the edit's window
    assert reviews.scored(URI, changed, (0, len(changed)), [])
    assert reviews.pending(URI) == []
    reviews.closed(URI)
    assert reviews.windows(URI) == [] and reviews.doubts(URI, changed) == []


# ------------------------------------------------------------------------------------ settings


def test_review_settings_and_bad_values():
    settings, warnings = parse_settings({})
    assert (settings.review, settings.review_threshold, settings.review_max_per_file) == (
        False, DEFAULT_REVIEW_THRESHOLD, 20
    )  # fmt: skip
    assert DEFAULT_REVIEW_THRESHOLD == REVIEW_THRESHOLD  # review mode's (infill review's default)
    settings, warnings = parse_settings({"review": True, "reviewThreshold": 1, "reviewMaxPerFile": 3})
    assert (settings.review, settings.review_threshold, settings.review_max_per_file, warnings) == (
        True, 1.0, 3, []
    )  # fmt: skip
    bad = {"review": "yes", "reviewThreshold": 1.5, "reviewMaxPerFile": 0}
    settings, warnings = parse_settings(bad)
    assert settings == parse_settings({})[0] and len(warnings) == 3
    assert all(any(key in w for w in warnings) for key in bad)
    assert parse_settings({"reviewThreshold": True})[1] and parse_settings({"reviewMaxPerFile": 2.5})[1]


def test_bad_action_data_for_a_review_fix_is_refused():
    from infill.errors import InputError

    good = actions.ActionData(URI, 1, actions.FINDING, 3, 5, actions.REVIEW).to_json()
    assert actions.ActionData.from_json(good).mode == "review"
    for broken in ({**good, "start": -1}, {**good, "kind": "token"}, {**good, "end": "5"}):
        with pytest.raises(InputError):
            actions.ActionData.from_json(broken)


# ------------------------------------------------------------------------------------ the model


@pytest.fixture(scope="module")
def shipped():
    from infill.models import load

    return load(None, "cpu", "float32")


def test_a_window_on_the_shipped_model_finds_the_injected_bug(shipped):
    line = BUGGY.index("        subtotal -=")
    window = (line, BUGGY.index("\n", line) + 1)
    found, passes = review_window(shipped, BUGGY, *window, FixOptions(threshold=0.05))
    assert passes >= 1 and found
    assert all(window[0] <= d.start < d.end <= window[1] and BUGGY[d.start : d.end] == d.text for d in found)
    [bug] = [d for d in found if "-=" in d.text]
    assert bug.score < 0.05 and bug.expected.strip() != "-="
    assert all(a.end < b.start for a, b in zip(found, found[1:]))  # a run of tokens is one finding
    assert review_window(shipped, BUGGY, 0, 0, FixOptions()) == ([], 0)  # nothing to score


class Counted:
    """The shipped model, counting its forward passes."""

    def __init__(self, inner) -> None:
        self.inner, self.passes = inner, 0

    def __getattr__(self, name: str):
        value = getattr(self.inner, name)
        if name not in ("logits", "cached_logits"):
            return value

        def counted(*args, **kwargs):
            self.passes += 1
            return value(*args, **kwargs)

        return counted


@pytest.mark.slow
def test_a_review_stops_before_its_next_forward_pass(shipped):
    whole = Counted(shipped)
    _, passes = review_window(whole, BUGGY, 0, len(BUGGY), FixOptions())
    assert passes == whole.passes >= 4
    stopped = Counted(shipped)
    with pytest.raises(Cancelled):  # the user types after two passes: no third one
        review_window(stopped, BUGGY, 0, len(BUGGY), FixOptions(), lambda: stopped.passes >= 2)
    assert stopped.passes == 2
    assert Interruptible(shipped, lambda: False).mask_id == shipped.mask_id
    assert not hasattr(Interruptible(object(), lambda: False), "cached_logits")  # none if the model has none


# ------------------------------------------------------------------------------------ the server


PUBLISH = "textDocument/publishDiagnostics"


def published(server, uri: str) -> list[dict]:
    with server.arrived:
        return [
            n["params"] for n in server.notifications if n["method"] == PUBLISH and n["params"]["uri"] == uri
        ]


def hints(params: dict) -> list[dict]:
    return [d for d in params["diagnostics"] if d.get("code") == "review"]


def wait_for(server, test, timeout: float = 90.0, what: str = "it"):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = test()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no {what} in {timeout} s; stderr: {server.tail()}")


def text_at(text: str, lsp_range: dict) -> str:
    start, end = range_to_offsets(text, types.Range(
        start=types.Position(**lsp_range["start"]), end=types.Position(**lsp_range["end"])))  # fmt: skip
    return text[start:end]


def check_hints(params: dict, text: str) -> list[dict]:
    """The review diagnostics of one publish: hints from infill that point at their text."""
    found = hints(params)
    for diagnostic in found:
        assert diagnostic["severity"] == types.DiagnosticSeverity.Hint and diagnostic["source"] == "infill"
        assert diagnostic["message"].startswith("infill expected")
        assert text_at(text, diagnostic["range"]) == diagnostic["data"]["text"], diagnostic
    return found


@pytest.fixture
def server():
    from lsp_raw import RawServer

    with RawServer("--log-level", "INFO") as started:
        yield started


def code_actions(server, uri: str, lsp_range: dict) -> list[dict]:
    answer = server.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": lsp_range,
                                                        "context": {"diagnostics": []}})  # fmt: skip
    return answer["result"]


@pytest.mark.external
def test_the_server_publishes_review_hints_whose_quick_fix_edits_only_its_range(server):
    text = "# prix en € 🐍\r\n" + BUGGY.replace("\n", "\r\n")  # CRLF, non-ASCII before the code
    server.initialize({"review": True, "reviewThreshold": 0.05, "idleRefresh": 0.2},
                      {"workspace": {"workspaceEdit": {"documentChanges": True}}})  # fmt: skip
    server.open(URI, text)
    first = wait_for(server, lambda: [p for p in published(server, URI) if hints(p)], what="review hints")[0]
    assert first["version"] == 1
    found = check_hints(first, text)
    [bug] = [d for d in found if d["data"]["text"] == "-="]
    assert bug["range"]["start"]["line"] == 4
    listed = code_actions(server, URI, bug["range"])
    fix = listed[0]
    assert fix["title"].startswith("Infill: replace `-=` with") and fix["kind"] == "quickfix"
    assert fix["diagnostics"] == [bug] and fix["isPreferred"]
    [change] = fix["edit"]["documentChanges"]
    [edit] = change["edits"]
    assert change["textDocument"]["version"] == 1 and edit["range"] == bug["range"]
    start, end = range_to_offsets(text, types.Range(start=types.Position(**edit["range"]["start"]),
                                                    end=types.Position(**edit["range"]["end"])))  # fmt: skip
    fixed = text[:start] + edit["newText"] + text[end:]
    assert fixed[:start] == text[:start] and fixed[start + len(edit["newText"]) :] == text[end:]
    resolved = server.request("codeAction/resolve", fix)["result"]
    assert resolved["edit"] == fix["edit"]
    assert any(a["title"] == "Infill: fix line 5" for a in listed)
    # Applied: the finding goes at once (its line was edited), the others stay where their text is.
    server.change(URI, 2, fixed)
    after = wait_for(server, lambda: [p for p in published(server, URI) if p["version"] == 2], what="v2")[0]
    assert not [d for d in check_hints(after, fixed) if d["range"]["start"]["line"] == 4]
    stale = server.request("codeAction/resolve", fix)
    assert stale["error"]["code"] == -32801  # ContentModified
    bad = server.request("codeAction/resolve", {**fix, "data": {**fix["data"], "version": 2, "digest": None,
                                                                "start": 0}})  # fmt: skip
    assert "error" in bad


@pytest.mark.external
def test_review_is_off_by_default_and_its_settings_apply_when_they_change(server):
    server.initialize({"idleRefresh": 0.2})
    server.open(URI, BUGGY)
    import time

    time.sleep(2.0)
    assert published(server, URI) and not any(hints(p) for p in published(server, URI))
    assert "review of" not in "".join(server.stderr)
    # on, with every token doubted (threshold 1) and two shown: the two least likely
    settings = {"review": True, "reviewThreshold": 1.0, "reviewMaxPerFile": 2}
    server.notify("workspace/didChangeConfiguration", {"settings": {"infill": settings}})
    two = wait_for(server, lambda: [p for p in published(server, URI) if hints(p)], what="hints")[0]
    assert len(check_hints(two, BUGGY)) == 2
    count = len(published(server, URI))
    settings["reviewMaxPerFile"] = 50  # more shown: no new scoring needed
    server.notify("workspace/didChangeConfiguration", {"settings": {"infill": settings}})
    many = wait_for(server, lambda: published(server, URI)[count:], what="a new publish")[0]
    shown = check_hints(many, BUGGY)
    assert len(shown) > 2 and all(d in shown for d in hints(two))
    assert max(d["data"]["score"] for d in hints(two)) <= min(
        d["data"]["score"] for d in shown if d not in hints(two)
    )
    count = len(published(server, URI))
    server.notify("workspace/didChangeConfiguration", {"settings": {"infill": {**settings, "review": False}}})
    off = wait_for(server, lambda: published(server, URI)[count:], what="a publish without hints")[0]
    assert off["diagnostics"] == []


LONGER = BUGGY + "".join(
    f"\n\ndef price_{i}(items, tax):\n    total = 0\n    for item in items:\n"
    f"        total += item.price\n    return total * (1 + tax)\n"
    for i in range(4)
)  # 33 lines: 5 windows, the first (on open: from the top) with the bug


@pytest.mark.external
def test_typing_stops_a_running_review_and_nothing_stale_is_published(server):
    body = LONGER
    server.initialize({"review": True, "reviewThreshold": 0.05, "idleRefresh": 0.2})
    server.open(URI, body)
    log = lambda: "".join(server.stderr)  # noqa: E731
    wait_for(server, lambda: "review of file:///project/bill.py: characters" in log(), what="a first window")
    typed = body.replace("def price_3(", "def price_three(")
    server.change(URI, 2, typed)
    stopped = wait_for(
        server, lambda: re.search(r"review of \S+ stopped|result dropped", log()), what="a stop"
    )
    wait_for(server, lambda: "characters" in log()[stopped.end() :], what="a window of the new text")
    versions = [p["version"] for p in published(server, URI)]
    assert versions[0] == 1 and 2 in versions
    assert 1 not in versions[versions.index(2) :]  # nothing of the old text once the new one is in
    for params in published(server, URI):
        check_hints(params, body if params["version"] == 1 else typed)
    assert any(hints(p) for p in published(server, URI))


@pytest.mark.external
def test_a_review_gives_way_to_an_inline_completion_and_goes_on_after_it(server):
    server.initialize({"review": True, "reviewThreshold": 0.05, "idleRefresh": 0.2, "steps": 4})
    server.open(URI, LONGER)
    log = lambda: "".join(server.stderr)  # noqa: E731
    wait_for(server, lambda: "review of file:///project/bill.py: characters" in log(), what="a first window")
    line = LONGER.split("\n").index("    subtotal = 0")
    params = {"textDocument": {"uri": URI}, "position": {"line": line, "character": 15},
              "context": {"triggerKind": 1}}  # fmt: skip
    answer = server.request("textDocument/inlineCompletion", params, timeout=120)
    assert "result" in answer, answer
    stopped = wait_for(server, lambda: re.search(r"review of \S+ stopped", log()), what="a stop")
    wait_for(server, lambda: "characters" in log()[stopped.end() :], what="the review going on")
    assert {p["version"] for p in published(server, URI)} == {1}


@pytest.mark.external
def test_review_hints_and_syntax_errors_go_out_in_one_publish(server):
    text = BUGGY + "x = = 1\n"
    server.initialize({"review": True, "reviewThreshold": 0.05, "idleRefresh": 0.2})
    server.open(URI, text)
    both = wait_for(server, lambda: [p for p in published(server, URI) if hints(p)], what="hints")[0]
    errors = [d for d in both["diagnostics"] if d["severity"] == types.DiagnosticSeverity.Error]
    assert errors and errors[0]["message"] == 'syntax error: unexpected "="'
    assert check_hints(both, text)
    fixed = text.replace("x = = 1", "x = 1")  # the error goes (and any hint on its line), the others stay
    server.change(URI, 2, fixed)
    after = wait_for(server, lambda: [p for p in published(server, URI) if p["version"] == 2], what="v2")[0]
    assert not [d for d in after["diagnostics"] if d["severity"] == types.DiagnosticSeverity.Error]
    above = [d for d in check_hints(both, text) if d["range"]["start"]["line"] < 5]  # not the edited line
    assert above and check_hints(after, fixed) == above


@pytest.mark.external
def test_a_round_stops_past_the_pass_budget_and_the_next_one_goes_on(server):
    server.initialize({"review": True, "reviewThreshold": 0.05, "idleRefresh": 0.2, "passBudget": 3})
    server.open(URI, LONGER)
    log = lambda: "".join(server.stderr)  # noqa: E731
    spent = wait_for(server, lambda: re.search(r"the pass budget \(3\) is spent", log()), what="budget")
    windows = re.findall(r"characters (\d+)-(\d+), \d+ finding\(s\), (\d+) pass", log()[: spent.start()])
    assert len(windows) == 1 and int(windows[0][2]) >= 3  # one window in the first round: it took 3+
    wait_for(server, lambda: "characters" in log()[spent.end() :], what="the next round")
