"""Syntax-guided re-masking: a fill that breaks the file's syntax is re-denoised where it broke.

The network is the oracle test double: it commits a confidently wrong token on the first pass
(while the whole span is masked) and knows the answer once only a few positions are masked,
which is what a retry asks of it. The sampler's own self-correction is switched off
(`max_revisions=0`) so that only the parser can notice the wrong token. The real tiny model
runs the same path at the end.
"""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
import torch
from plans import plan_canvases, remask_syntax

import infill.engine.repair.fresh_fills as fresh_fills
from infill.engine.canvas import Canvas
from infill.engine.decode import Decoder, filled_text, span_text
from infill.engine.pipeline import RequestStats
from infill.engine.pipeline import run as run_request
from infill.engine.repair.fresh_fills import FRESH_FILLS
from infill.engine.repair.problems import tokens_to_remask
from infill.engine.results import SampleResult, SampleStats
from infill.errors import InputError
from infill.modes.fill import FillRequest, infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.edits import apply_edits
from infill.text.spans import Span, line_span
from infill.text.syntax import file_problems, has_syntax_error

SOURCE = "def f(x):\n    y = x * 2\n    return y + 1\n\n\nprint(f(2))\n"
NO_SELF_CORRECTION = SamplerConfig(steps=8, max_revisions=0)


def swapped(probe, text: str, old: str, new: str) -> tuple[list[int], int, int]:
    """ids of `text`, the index of its token `old`, and the id of token `new`."""
    ids = probe.encode(text)
    [old_id], [new_id] = probe.encode(old), probe.encode(new)
    return ids, ids.index(old_id), new_id


def run(
    make_oracle, oracle_for_canvases, span: Span, wrong_tokens: list[tuple[str, str]], on_step=None, **options
):
    """Fill `span` of SOURCE with an oracle that first commits `wrong_tokens` (old -> new)."""
    document = document_from_bytes(SOURCE.encode())
    options = InfillOptions(NO_SELF_CORRECTION, **{"token_edits": 0, "fresh_fills": 0, **options})
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, [span], options)
    [slot] = canvas.slots
    answer = probe.encode(SOURCE[span.start : span.end])
    wrong = {}
    for old, new in wrong_tokens:
        _, index, new_id = swapped(probe, SOURCE[span.start : span.end], old, new)
        wrong[slot.start + index] = new_id
    oracle = oracle_for_canvases([(canvas, [answer])], wrong=wrong, wrong_until=len(answer) // 2)
    return infill(oracle, document, [span], options, on_step=on_step), document


def test_a_fill_that_breaks_the_syntax_is_retried_on_the_broken_line_only(make_oracle, oracle_for_canvases):
    span = Span(SOURCE.index("    y ="), SOURCE.index("\n\n\n"), "lines 2-3")
    # line 2 gets a wrong but valid token (- for *), line 3 a breaking one (= for +)
    wrong = [("*", "-"), ("+", "=")]

    broken, document = run(make_oracle, oracle_for_canvases, span, wrong, retries=0)
    assert broken.spans[0].new_text == "    y = x - 2\n    return y = 1"
    assert has_syntax_error(apply_edits(SOURCE, broken.edits)) and broken.stats.retries == 0

    steps = []
    mended, _ = run(make_oracle, oracle_for_canvases, span, wrong, lambda canvas, step: steps.append(step))
    assert mended.spans[0].new_text == "    y = x - 2\n    return y + 1"  # line 2 was not re-masked
    assert not has_syntax_error(apply_edits(SOURCE, mended.edits))
    assert mended.stats.retries == 1
    assert mended.stats.revisions >= 1
    assert mended.stats.steps > broken.stats.steps
    retried = [step for step in steps if step.retry]
    assert {step.retry for step in retried} == {1} and len(retried) == mended.stats.steps - broken.stats.steps
    assert steps[: len(steps) - len(retried)] == [step for step in steps if not step.retry]  # fill first


def test_the_stage_counters_are_the_pipelines_and_the_samplers_stats_keep_only_its_own(
    make_oracle, oracle_for_canvases
):
    """The mended fill above, through `run` with a request that keeps its canvases: the retry and
    the repair stage's passes are counted in the pipeline's statistics (the request's and the
    canvas's RequestStats), and the rows' own stats are the sampler's, with none of them."""
    span = Span(SOURCE.index("    y ="), SOURCE.index("\n\n\n"), "lines 2-3")
    document = document_from_bytes(SOURCE.encode())
    options = InfillOptions(NO_SELF_CORRECTION, token_edits=0, fresh_fills=0)
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, [span], options)
    answer = probe.encode(SOURCE[span.start : span.end])
    _, index, new_id = swapped(probe, SOURCE[span.start : span.end], "+", "=")
    oracle = oracle_for_canvases(
        [(canvas, [answer])], wrong={canvas.slots[0].start + index: new_id}, wrong_until=len(answer) // 2
    )

    class Kept(FillRequest):
        def finish(self, denoiser, filled, stats):
            self.filled = filled
            return super().finish(denoiser, filled, stats)

    request = Kept(document, [span], options)
    result = run_request(oracle, request)
    [part] = request.filled
    assert result.spans[0].new_text == SOURCE[span.start : span.end]  # mended by one retry
    assert isinstance(result.stats, RequestStats) and result.stats == part.stats
    assert (part.stats.retries, part.stats.token_edits, part.stats.fresh_fills) == (1, 0, 0)
    assert 1 <= part.stats.repair_passes < part.stats.forward_passes
    sampler = part.sampled.stats
    assert type(sampler) is SampleStats and sampler.forward_passes == part.stats.forward_passes
    assert {f.name for f in fields(SampleStats)} == {
        "steps", "forward_passes", "tokens", "revisions", "seconds", "converged", "cached_passes", "computed"
    }  # fmt: skip


def test_a_fill_still_broken_after_retries_is_filled_afresh_and_the_fresh_fill_kept(
    make_oracle, oracle_for_canvases
):
    span = Span(SOURCE.index("    y ="), SOURCE.index("\n\n\n"), "lines 2-3")
    wrong = [("*", "-"), ("+", "=")]  # committed on the first fill only: the oracle learns after it
    steps = []
    fresh, _ = run(
        make_oracle, oracle_for_canvases, span, wrong, lambda canvas, step: steps.append(step),
        retries=0, fresh_fills=2,
    )  # fmt: skip
    # The whole fill was drawn again, line 2 too (a retry would have left its "-"), and at another
    # length: the first fresh fill keeps FRESH_FILLS[0]'s share of the length the first pass decided.
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    answer = probe.encode(SOURCE[span.start : span.end])
    scale, _ = FRESH_FILLS[0]
    shorter = span_text(probe, answer[: round(scale * len(answer))])
    assert scale != 1 and shorter.startswith("    y = x * 2\n    return")
    assert fresh.spans[0].new_text == shorter
    assert fresh.stats.fresh_fills == 1  # the first fresh fill parses: no second one
    assert [step.restart for step in steps][:2] == [0, 0] and steps[-1].restart == 1
    first = [step for step in steps if not step.restart]
    assert fresh.stats.steps > len(first) and all(step.retry == 0 for step in steps)


def test_fresh_fills_follow_the_schedule_until_the_pass_budget_is_spent(
    make_oracle, oracle_for_canvases, monkeypatch
):
    document = document_from_bytes(SOURCE.encode())
    span = Span(SOURCE.index("    y ="), SOURCE.index("\n\n\n"), "lines 2-3")
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, [span], InfillOptions())
    answer = probe.encode("    y = = x * 2\n    return y")  # broken code, shortened or not
    configs = []  # each fresh fill's sampler settings, recorded on the way to the real sampler

    def recording(denoiser, ids, editable, config, *args):
        configs.append(config)
        return real_sample(denoiser, ids, editable, config, *args)

    real_sample = fresh_fills.sample
    monkeypatch.setattr(fresh_fills, "sample", recording)

    def fill(**options):
        configs.clear()
        oracle = oracle_for_canvases([(canvas, [answer])])
        options = InfillOptions(NO_SELF_CORRECTION, retries=0, token_edits=0, **options)
        return infill(oracle, document, [span], options)

    first = fill(fresh_fills=0).stats.forward_passes
    unbounded = fill(fresh_fills=len(FRESH_FILLS) + 1)
    assert unbounded.stats.fresh_fills == len(FRESH_FILLS) + 1  # every one still broken
    schedule = [*FRESH_FILLS, FRESH_FILLS[0]]  # in turn, then round again
    assert [(c.length_scale, c.order) for c in configs] == schedule
    assert len({c.seed for c in configs}) == len(configs)  # each a new draw

    assert fill(fresh_fills=3, pass_budget=first).stats.fresh_fills == 0
    assert fill(fresh_fills=3, pass_budget=first + 1).stats.fresh_fills == 1  # starts under it
    with pytest.raises(InputError, match="pass_budget"):
        InfillOptions(pass_budget=0)


def test_a_fresh_fill_counts_its_passes_once_against_the_budget(make_oracle, oracle_for_canvases):
    """A fill that stays broken spends the pass budget to the pass, across its fresh fills and
    their retries: each pass counts once (a fresh fill's had counted twice, so its retries
    stopped short of the budget)."""
    document = document_from_bytes(SOURCE.encode())
    span = Span(SOURCE.index("    y ="), SOURCE.index("\n\n\n"), "lines 2-3")
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, [span], InfillOptions())
    answer = probe.encode("    y = = x * 2\n    return y")  # broken whatever is asked again

    def fill(**options):
        oracle = oracle_for_canvases([(canvas, [answer])])
        options = InfillOptions(NO_SELF_CORRECTION, token_edits=0, **options)
        return infill(oracle, document, [span], options).stats

    first = fill(retries=0, fresh_fills=0).forward_passes
    unbounded = fill(retries=3, fresh_fills=2, pass_budget=None)
    assert unbounded.fresh_fills == 2 and unbounded.forward_passes > 4 * first
    spent = {budget: fill(retries=3, fresh_fills=2, pass_budget=budget).forward_passes
             for budget in range(first, unbounded.forward_passes + 2)}  # fmt: skip
    assert spent == {budget: min(budget, unbounded.forward_passes) for budget in spent}


def test_a_single_line_gets_no_fresh_fill(make_oracle, oracle_for_canvases):
    span = line_span(SOURCE, 3, 3)
    steps = []
    kept, _ = run(
        make_oracle, oracle_for_canvases, span, [("+", "=")], lambda canvas, step: steps.append(step),
        retries=0, fresh_fills=2,
    )  # fmt: skip
    assert kept.spans[0].new_text == "    return y = 1"  # still broken: only a fresh fill would mend it
    assert kept.stats.fresh_fills == 0 and not any(step.restart for step in steps)


def test_a_fill_that_keeps_breaking_stops_after_the_rounds_and_keeps_the_least_broken(
    make_oracle, oracle_for_canvases
):
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, 3, 3)
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, [span], InfillOptions())
    answer = probe.encode("    return y = = 1")  # the network insists on broken code
    oracle = oracle_for_canvases([(canvas, [answer])])
    options = InfillOptions(sampler=NO_SELF_CORRECTION, retries=3, token_edits=0, fresh_fills=0)
    result = infill(oracle, document, [span], options)
    assert result.stats.retries == 3
    assert result.spans[0].new_text == "    return y = = 1"


def test_in_a_broken_file_only_the_problems_that_touch_the_fill_are_retried(make_oracle, oracle_for_canvases):
    text = SOURCE + "def broken(:\n"  # a problem far from the span, not the fill's doing
    document = document_from_bytes(text.encode())
    span = line_span(text, 3, 3)
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, text, [span], InfillOptions())

    def fill(answer: str, **options):
        oracle = oracle_for_canvases([(canvas, [probe.encode(answer)])])
        return infill(oracle, document, [span], InfillOptions(sampler=NO_SELF_CORRECTION, **options))

    assert fill("    return y + 1").stats.retries == 0  # its own line is fine
    stubborn = fill("    return y = = 1", retries=2, fresh_fills=0)  # its own line is broken
    assert stubborn.stats.retries == 2

    answer = probe.encode("    return y + 1")
    _, index, wrong_id = swapped(probe, "    return y + 1", "+", "=")
    oracle = oracle_for_canvases(
        [(canvas, [answer])], wrong={canvas.slots[0].start + index: wrong_id}, wrong_until=len(answer) // 2
    )
    mended = infill(oracle, document, [span], InfillOptions(sampler=NO_SELF_CORRECTION))
    assert mended.spans[0].new_text == "    return y + 1" and mended.stats.retries == 1


def problem_lines(text: str) -> list[int]:
    return [text.count("\n", 0, p.start) for p in file_problems(text)]


@pytest.mark.parametrize(
    ("fill", "blamed"),
    [
        ("    y = x * 2\n    return y = 1", [" y", " ", "="]),  # the tokens of the problem ("y =")
        ("    y = x * 2\n    if y:", ["    if", " y", ":"]),  # reported after the fill: its last line
    ],
)
def test_tokens_on_the_problem_lines_are_the_ones_remasked(make_oracle, fill: str, blamed: list[str]):
    document = document_from_bytes(SOURCE.encode())
    span = Span(SOURCE.index("    y ="), SOURCE.index("\n\n\n"), "lines 2-3")
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, [span], InfillOptions())
    [slot] = canvas.slots
    ids = torch.tensor([canvas.ids])
    fill_ids = probe.encode(fill)
    padded = fill_ids + [probe.null_id] * (slot.length - len(fill_ids))
    ids[0, slot.start : slot.start + slot.length] = torch.tensor(padded)
    filled = filled_text(probe, document, canvas, ids)
    assert filled == SOURCE.replace(SOURCE[span.start : span.end], fill)

    remask = tokens_to_remask(Decoder(probe, document, canvas), ids, file_problems(filled))
    picked = [probe.decode([int(ids[0, i])]) for i in remask[0].nonzero().flatten()]
    assert "".join(picked).strip() == "".join(blamed).strip()
    assert not remask[0, : slot.start].any() and not remask[0, slot.start + len(fill_ids) :].any()


def test_the_tiny_model_runs_the_retries_and_leaves_the_rest_of_the_file(tiny_backend):
    document = document_from_bytes(SOURCE.encode())
    spans = [line_span(SOURCE, 2, 3)]
    no_edits = {"token_edits": 0, "fresh_fills": 0}
    options = InfillOptions(replace(SamplerConfig(), steps=4), retries=2, **no_edits)
    result = infill(tiny_backend, document, spans, options)
    assert result.stats.retries <= 2
    assert result.stats.forward_passes <= 4 + 2 * 4
    new = apply_edits(SOURCE, result.edits)
    assert new.startswith(SOURCE[: spans[0].start]) and new.endswith(SOURCE[spans[0].end :])
    again = infill(tiny_backend, document, spans, options)
    assert again.spans[0].new_text == result.spans[0].new_text  # seeded retries: reproducible


def test_a_canvas_with_two_fills_blames_each_its_own_lines(make_oracle):
    document = document_from_bytes(SOURCE.encode())
    spans = [line_span(SOURCE, 2, 2), line_span(SOURCE, 6, 6)]
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, spans, InfillOptions())
    assert isinstance(canvas, Canvas) and len(canvas.slots) == 2
    ids = torch.tensor([canvas.ids])
    for slot, fill in zip(canvas.slots, ["    y = x * 2", "print(f(2)"]):
        fill_ids = probe.encode(fill)
        ids[0, slot.start : slot.start + slot.length] = torch.tensor(
            fill_ids + [probe.null_id] * (slot.length - len(fill_ids))
        )
    filled = filled_text(probe, document, canvas, ids)
    assert problem_lines(filled) and has_syntax_error(filled)
    remask = tokens_to_remask(Decoder(probe, document, canvas), ids, file_problems(filled))
    first, second = canvas.slots
    assert not remask[0, first.start : first.start + first.length].any()
    assert remask[0, second.start : second.start + second.length].any()


def test_rows_are_retried_as_one_batch_and_only_those_that_break(make_oracle, oracle_for_canvases):
    document = document_from_bytes(SOURCE.encode())
    span = line_span(SOURCE, 3, 3)
    probe = make_oracle(torch.zeros(1, dtype=torch.long))
    [canvas] = plan_canvases(probe, SOURCE, [span], InfillOptions())
    [slot] = canvas.slots
    oracle = oracle_for_canvases([(canvas, [probe.encode("    return y + 1")])])
    rows = []
    for fill in ("    return y ) 1", "    return y - 1"):  # broken; fine (though not the answer)
        fill_ids = probe.encode(fill)
        row = list(canvas.ids)
        padding = [probe.null_id] * (slot.length - len(fill_ids))
        row[slot.start : slot.start + slot.length] = fill_ids + padding
        rows.append(row)
    ids = torch.tensor(rows)
    stats = SampleStats(steps=3, forward_passes=3, tokens=9, revisions=0, seconds=0.1, converged=True)
    sampled = SampleResult(ids, torch.full(ids.shape, 0.5), stats)

    repaired = remask_syntax(oracle, document, canvas, sampled, NO_SELF_CORRECTION, rounds=3)
    retried = repaired.sampled

    texts = [filled_text(probe, document, canvas, retried.ids[r : r + 1]) for r in range(2)]
    assert texts == [SOURCE, SOURCE.replace("y + 1", "y - 1")]
    assert oracle.calls == retried.stats.forward_passes - 3 and repaired.retries == 1
    assert all(len(batch) == 2 for batch in oracle.inputs)  # both rows went through, as one batch
    changed = retried.confidence != 0.5
    assert changed[0].any() and not changed[1].any()  # only the broken row's tokens were re-drawn
