"""Review mode (infill.modes.review, `infill review FILE`): each code token's score is the model's
probability of it with that position masked (checked against the masked prediction computed here
from the canvas); comments, strings and introduced names are left out; findings point at their
text (CRLF, non-ASCII); the command's exit codes mean findings (1), none (0), bad input (2)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from infill.cli import EXIT_FINDINGS, EXIT_INPUT, EXIT_OK, main
from infill.engine.pipeline import Job, in_window, lay_out, run
from infill.engine.repair import RepairPolicy
from infill.models import load
from infill.modes.review import REVIEW_THRESHOLD, ReviewRequest, in_ranges
from infill.options import FixOptions
from infill.text.document import document_from_bytes
from infill.text.edits import offset_to_position
from infill.text.syntax import introduced_names, prose_ranges

CODE = '''def total_price(items, tax):
    """What the items cost with tax."""
    subtotal = 0
    for item in items:
        subtotal += item.price * item.count  # each line of the bill
    return subtotal * (1 + tax)
'''


@pytest.fixture(scope="module")
def shipped():
    return load(None, "cpu", "float32")


def test_each_score_is_the_masked_prediction_of_its_token(shipped):
    document = document_from_bytes(CODE.encode())
    result = run(shipped, ReviewRequest(document, top=10_000))
    assert result.findings and result.stats.forward_passes >= 1
    # The canvas the review scored, laid out as the pipeline lays it out; each token masked alone.
    job = Job(document, ReviewRequest(document).plan(shipped)[0].spans, FixOptions().sampler,
              RepairPolicy(), keep_text=True)  # fmt: skip
    [canvas] = lay_out(shipped, in_window(shipped, job).staged)
    [slot] = canvas.slots
    ids = torch.tensor([canvas.ids])
    special = torch.tensor(sorted(shipped.special_ids | {shipped.mask_id}))
    scores, entropies = {}, {}
    for i in range(slot.start, slot.start + slot.length):
        masked = ids.clone()
        masked[0, i] = shipped.mask_id
        logits = shipped.logits(masked)[0, i].float()
        logits[special] = float("-inf")
        probs = torch.softmax(logits, -1)
        scores[i] = probs[ids[0, i]].item()
        entropies[i] = -sum(p * math.log(p) for p in probs.tolist() if p > 0)
    oracle = list(scores.values())
    for finding in result.findings:  # each score is one token's masked prediction
        assert min(abs(finding.score - score) for score in oracle) < 1e-5, finding
        i = min(scores, key=lambda i: abs(finding.score - scores[i]))
        assert finding.entropy == pytest.approx(entropies[i], abs=1e-3)  # the spread of that prediction
        assert finding.doubt == pytest.approx(-math.log(finding.score) - entropies[i], abs=1e-3)
    assert len(result.findings) < slot.length  # prose, names and whitespace left out
    visible = torch.softmax(shipped.logits(ids)[0, slot.start : slot.start + slot.length].float(), -1)
    seen = visible.gather(-1, ids[0, slot.start : slot.start + slot.length, None]).squeeze(-1)
    assert torch.tensor(oracle).mean() < seen.mean() - 0.2  # not the visible tokens' scores


def test_top_lists_the_most_doubted_tokens_first(shipped):
    document = document_from_bytes(CODE.encode())
    every = run(shipped, ReviewRequest(document, top=10_000)).findings
    doubts = [f.doubt for f in every]
    assert doubts == sorted(doubts, reverse=True)
    top = run(shipped, ReviewRequest(document, top=3)).findings
    assert [(f.start, f.end) for f in top] == [(f.start, f.end) for f in every[:3]]
    least_likely = sorted(every, key=lambda f: f.score)[:3]
    assert top != least_likely  # not the probability's order: on this file the two differ


def test_prose_and_introduced_names_are_left_out(shipped):
    document = document_from_bytes(CODE.encode())
    findings = run(shipped, ReviewRequest(document, top=10_000)).findings
    skipped = sorted(prose_ranges(CODE) + introduced_names(CODE))
    assert skipped and findings
    for f in findings:
        first = f.start + len(f.text) - len(f.text.lstrip())
        assert not in_ranges(skipped, first), f
    texts = {f.text.strip() for f in findings}
    assert not texts & {"total_price", "What", "bill"}  # the def's name, the docstring, a comment
    assert "subtotal" in texts or "+=" in texts  # code tokens are there


def test_findings_point_at_their_text_with_crlf_and_non_ascii(shipped):
    text = CODE.replace("subtotal", "sümme").replace("\n", "\r\n")
    document = document_from_bytes(text.encode())
    findings = run(shipped, ReviewRequest(document, top=10_000)).findings
    assert findings
    for f in findings:
        assert document.text[f.start : f.end] == f.text
        line, column = offset_to_position(document.text, f.start)
        assert (f.line, f.column) == (line + 1, column + 1)
    assert any("ü" in f.text for f in findings)  # a token holding part of "ü" stands for all of it


@pytest.mark.slow
def test_the_command_exits_1_with_findings_0_without_and_2_on_bad_input(tmp_path, capsys):
    path = tmp_path / "bill.py"
    path.write_text(CODE)
    assert main(["review", str(path), "--json", "--fix-threshold", "0.05"]) == EXIT_FINDINGS
    report = json.loads(capsys.readouterr().out)
    keys = {"line", "column", "text", "expected", "score"}
    assert report["findings"] and set(report["findings"][0]) == keys
    assert main(["review", str(path), "--fix-threshold", "0"]) == EXIT_OK  # nothing below 0
    assert main(["review", str(path), "--top", "3"]) == EXIT_FINDINGS
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith(f"{path}:") for line in lines)
    assert main([str(path), "--review", "--lines", "5", "--top", "2", "--json"]) == EXIT_FINDINGS
    assert {f["line"] for f in json.loads(capsys.readouterr().out)["findings"]} == {5}  # the span alone
    binary = tmp_path / "data.py"
    binary.write_bytes(b"\x00\x01\xff")
    assert main(["review", str(binary)]) == EXIT_INPUT
    assert main(["review", str(path), "--lines", "99"]) == EXIT_INPUT
    assert main(["review", str(path), "--top", "0"]) == EXIT_INPUT
    assert path.read_text() == CODE


def test_prose_and_introduced_names_in_two_grammars():
    from infill.text.languages import named

    python = 'def add(a: int, b=2):\n    """Sum."""\n    return a + b  # both\n'
    assert [python[a:b] for a, b in introduced_names(python)] == ["add", "a", "b"]  # not the type `int`
    assert [python[a:b] for a, b in prose_ranges(python)] == ['"""Sum."""', "# both"]
    js = "function add(a, b = 2) { return a + b } // sum\nclass K { m(x) { return `${x}` } }"
    assert [js[a:b] for a, b in introduced_names(js, named("javascript"))] == ["add", "a", "b", "K", "m", "x"]
    assert [js[a:b] for a, b in prose_ranges(js, named("javascript"))] == ["// sum", "`${x}`"]


def test_review_has_its_own_default_threshold_and_fix_keeps_its_own(
    tiny_backend, monkeypatch, tmp_path, capsys
):
    import infill.cli as cli

    thresholds = []

    def recording(backend, request, hooks=None):
        thresholds.append((type(request).__name__, request.options.threshold))
        return run(backend, request, hooks)

    monkeypatch.setattr(cli, "load", lambda *args, **kwargs: tiny_backend)
    monkeypatch.setattr(cli, "run", recording)
    path = tmp_path / "bill.py"
    path.write_text(CODE)
    main(["review", str(path), "--lines", "3"])
    main([str(path), "--lines", "3", "--fix"])
    main(["review", str(path), "--lines", "3", "--fix-threshold", "0.2"])
    main([str(path), "--lines", "3", "--fix", "--fix-threshold", "0.2"])
    capsys.readouterr()
    assert thresholds == [("ReviewRequest", REVIEW_THRESHOLD), ("FixRequest", FixOptions.threshold),
                          ("ReviewRequest", 0.2), ("FixRequest", 0.2)]  # fmt: skip
    assert REVIEW_THRESHOLD != FixOptions.threshold


def test_a_file_of_long_lines_is_laid_out_in_canvases_that_fit(shipped):
    """The whole-file review's spans are short enough that a dense block (a data table) fits the
    model's window: 40 such lines hold far more tokens than it."""
    row = '    "<tr><td class=\\"mon\\">Mon</td><td>Tue</td></tr>",\n'
    text = "TABLE = (\n" + row * 40 + ")\n"
    document = document_from_bytes(text.encode())
    assert len(shipped.encode(text)) > shipped.context_length
    [job] = ReviewRequest(document).plan(shipped)
    canvases = lay_out(shipped, in_window(shipped, job).staged)
    assert len(canvases) > 1 and all(len(c.ids) <= shipped.context_length for c in canvases)
    assert sum(slot.length for c in canvases for slot in c.slots) >= len(shipped.encode(text)) - 2
