"""The pipeline's stages one at a time, and every mode through the same `run`.

    plan (each mode's request) -> canvas (lay_out) -> mask -> denoise -> repair -> decode -> edits

The stage tests use small inputs and the oracle denoiser (a network double whose answers are
known); the end-to-end tests run every mode on the real tiny model.
"""

from __future__ import annotations

import pytest
import torch
from samples import AREA_MODULE

from infill.engine.decode import Decoder
from infill.engine.pipeline import Hooks, Job, denoise, in_window, lay_out, mask, run
from infill.engine.repair import RepairPolicy, repair
from infill.engine.results import SampleResult, SampleStats
from infill.errors import Cancelled, InputError
from infill.modes import (
    AlternativesRequest,
    DocstringRequest,
    FillRequest,
    FixRequest,
    InlineRequest,
)
from infill.modes.docstrings import DOCSTRING_BUDGET
from infill.options import MULTI_LINE_STEPS, FixOptions, InfillOptions, SamplerConfig
from infill.text.docstring_sites import missing_docstrings
from infill.text.document import document_from_bytes
from infill.text.edits import apply_edits
from infill.text.spans import Span, line_span

SOURCE = AREA_MODULE
BROKEN = "def f(x):\n    return (x +\n\n\nprint(f(2))\n"


def document(text: str = SOURCE):
    return document_from_bytes(text.encode())


# --------------------------------------------------------------------------- plan


def test_a_fill_plan_is_one_job_of_the_spans_with_the_options_repair_policy():
    spans = [line_span(SOURCE, 2, 2), line_span(SOURCE, 5, 5)]
    options = InfillOptions(budget=20, retries=2, token_edits=1, fresh_fills=3, pass_budget=50)
    [job] = FillRequest(document(), spans, options).plan(None)
    assert job.spans == spans and job.budget == 20 and job.rows == 1 and not job.keep_text
    assert job.repair == RepairPolicy(retries=2, token_edits=1, fresh_fills=3, pass_budget=50)
    with pytest.raises(InputError, match="nothing to fill"):
        FillRequest(document(), []).plan(None)


def test_a_fix_plan_keeps_the_text_and_repairs_only_broken_spans_without_fresh_fills():
    [job] = FixRequest(document(), [line_span(SOURCE, 2, 2)], FixOptions(retries=3)).plan(None)
    assert job.keep_text and job.select is not None
    assert job.repair.only_where_broken and job.repair.fresh_fills == 0 and job.repair.retries == 3


def test_a_docstring_plan_puts_the_quotes_in_and_masks_between_them():
    sites = missing_docstrings(SOURCE)
    model = SimpleModel(context_length=4096)
    [job] = DocstringRequest(document(), sites).plan(model)
    assert [(span.start, span.end) for span in job.spans] == [(site.start, site.end) for site in sites]
    assert job.budget == DOCSTRING_BUDGET and job.sampler.steps == MULTI_LINE_STEPS
    assert job.repair.token_edits == 0
    staged = in_window(model, job).staged  # the window (here the whole file) with the quotes in place
    assert len(staged.spans) == len(sites)
    for span in staged.spans:
        assert span.start == span.end
        assert staged.document.text[span.start - 3 : span.start + 3] == '""' + '""""'[:4]


def test_docstrings_of_a_long_file_are_planned_as_one_job_per_window():
    text = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(200))
    sites = missing_docstrings(text)
    model = SimpleModel(context_length=128)
    jobs = DocstringRequest(document(text), sites).plan(model)
    assert len(jobs) > 1 and sum(len(job.spans) for job in jobs) == len(sites)
    assert all(len(in_window(model, job).staged.document.text) < len(text) for job in jobs)  # its window only


def test_an_alternatives_plan_samples_n_rows_at_a_temperature_and_an_inline_plan_one_job_a_seed():
    span = line_span(SOURCE, 2, 2)
    [job] = AlternativesRequest(document(), span, 5).plan(None)
    assert job.rows == 5 and job.sampler.temperature > 0 and job.repair.fresh_fills == 0
    with pytest.raises(InputError, match="temperature above 0"):
        AlternativesRequest(document(), span, 5, temperature=0).plan(None)
    options = InfillOptions(sampler=SamplerConfig(temperature=0.5, seed=7))
    jobs = InlineRequest(document(), 10, options, samples=3).plan(None)
    assert [job.sampler.seed for job in jobs] == [7, 8, 9]
    assert all(job.repair.token_edits == 0 and job.repair.retries <= 1 for job in jobs)
    assert len(InlineRequest(document(), 10, InfillOptions(), samples=3).plan(None)) == 1  # deterministic


# --------------------------------------------------------------------------- canvas, mask, denoise


def test_spans_that_do_not_fit_one_window_are_laid_out_on_several_canvases(make_oracle):
    text = "".join(f"v{i} = {i}\n" for i in range(120))
    probe = make_oracle(None, context_length=64)
    spans = [line_span(text, 3, 3), line_span(text, 110, 110)]
    job = Job(document(text), spans, SamplerConfig(), RepairPolicy())
    canvases = lay_out(probe, job)
    assert [[slot.span for slot in c.slots] for c in canvases] == [[spans[0]], [spans[1]]]
    assert all(len(c.ids) <= 64 for c in canvases)


def test_the_mask_stage_takes_every_slot_position_of_every_row_unless_the_mode_chooses(make_oracle):
    probe = make_oracle(None)
    job = Job(document(), [line_span(SOURCE, 2, 2)], SamplerConfig(), RepairPolicy(), rows=3)
    [canvas] = lay_out(probe, job)
    ids = torch.tensor([canvas.ids]).repeat(3, 1)
    selection = mask(probe, job, canvas, ids)
    assert selection.editable.shape == (3, len(canvas.ids))
    assert (selection.editable == torch.tensor(canvas.editable())).all()


def test_fix_mode_masks_only_the_token_the_model_doubts(make_oracle):
    text = "x = 1\ny = 2\n"
    probe = make_oracle(None)
    span = line_span(text, 2, 2)
    [job] = FixRequest(document(text), [span]).plan(probe)
    [canvas] = lay_out(probe, job)
    targets = torch.tensor(canvas.ids)
    [slot] = canvas.slots
    doubted = slot.start + 2  # the oracle expects another token here
    targets[doubted] = probe.encode("3")[0]
    oracle = make_oracle(targets)
    selection = mask(oracle, job, canvas, torch.tensor([canvas.ids]))
    assert selection.editable[0].nonzero().flatten().tolist() == [doubted]
    assert selection.stats.forward_passes == 1 and selection.probs is not None


def test_nothing_to_denoise_costs_no_pass(make_oracle):
    oracle = make_oracle(None)
    ids = torch.tensor([[1, 2, 3]])
    sampled = denoise(oracle, ids, torch.zeros(1, 3, dtype=torch.bool), SamplerConfig(), None, None)
    assert oracle.calls == 0 and sampled.stats.forward_passes == 0 and torch.equal(sampled.ids, ids)


# --------------------------------------------------------------------------- repair


def test_the_repair_stage_mends_a_broken_fill_with_the_retries_the_policy_allows(make_oracle):
    text = "def f(x):\n    return x + 1\n\n\nprint(f(2))\n"
    span = line_span(text, 2, 2)
    probe = make_oracle(None)
    job = Job(document(text), [span], SamplerConfig(steps=8), RepairPolicy())
    [canvas] = lay_out(probe, job)
    [slot] = canvas.slots
    answer = probe.encode(text[span.start : span.end])
    targets = torch.tensor(canvas.ids)
    targets[slot.start : slot.start + slot.length] = probe.null_id
    targets[slot.start : slot.start + len(answer)] = torch.tensor(answer)
    broken = targets.clone()
    broken[slot.start + answer.index(probe.encode("+")[0])] = probe.encode("(")[0]  # "return x ( 1"
    sampled = SampleResult(broken[None], torch.ones(1, len(broken)), SampleStats(8, 8, 16, 0, 0.0, True))
    oracle = make_oracle(targets)
    decoder = Decoder(oracle, job.document, canvas)
    off = repair(oracle, decoder, sampled, SamplerConfig(steps=8), RepairPolicy(0, 0, 0))
    assert off.sampled is sampled and off.retries == 0  # every step off: the fill as it came
    mended = repair(oracle, decoder, sampled, SamplerConfig(steps=8), RepairPolicy(2, 0, 0))
    assert torch.equal(mended.sampled.ids[0], targets) and mended.retries >= 1


def test_a_policy_gives_no_fresh_fills_to_one_line_and_none_at_all_where_nothing_was_broken(make_oracle):
    probe = make_oracle(None)
    one_line = Job(document(), [line_span(SOURCE, 2, 2)], SamplerConfig(), RepairPolicy())
    [canvas] = lay_out(probe, one_line)
    assert RepairPolicy(fresh_fills=4).for_canvas(one_line.document, canvas).fresh_fills == 0
    fine = RepairPolicy(only_where_broken=True).for_canvas(one_line.document, canvas)
    assert (fine.retries, fine.token_edits) == (0, 0)
    broken_doc = document(BROKEN)
    broken = Job(broken_doc, [line_span(BROKEN, 2, 2)], SamplerConfig(), RepairPolicy())
    [canvas] = lay_out(probe, broken)
    kept = RepairPolicy(only_where_broken=True).for_canvas(broken_doc, canvas)
    assert (kept.retries, kept.token_edits) == (4, 6)


# --------------------------------------------------------------------------- every mode through run


def requests():
    span = line_span(SOURCE, 2, 2)
    options = InfillOptions(sampler=SamplerConfig(steps=4, seed=0))
    return {
        "fill": FillRequest(document(), [span], options),
        "fix": FixRequest(document(), [span], FixOptions(sampler=options.sampler, threshold=0.5)),
        "docstrings": DocstringRequest(document(), missing_docstrings(SOURCE), options),
        "alternatives": AlternativesRequest(document(), span, 3, options),
        "inline": InlineRequest(document(), span.start, options),
    }


@pytest.mark.parametrize("mode", list(requests()))
def test_every_mode_runs_through_the_same_stages_and_reports_its_passes(tiny_backend, mode):
    request = requests()[mode]
    jobs = request.plan(tiny_backend)
    steps, progress = [], []
    hooks = Hooks(on_step=lambda canvas, step: steps.append(step), on_progress=lambda *p: progress.append(p))
    result = run(tiny_backend, request, hooks)
    total = sum(len(job.spans) for job in jobs)
    assert progress == [(sum(len(job.spans) for job in jobs[:i]), total) for i in range(len(jobs))]
    stats = result[0].stats if mode == "alternatives" else result.stats
    assert stats.forward_passes >= len(steps) > 0 or mode == "fix"  # fix: nothing doubted, no step
    edits = [c.edit for c in result if c.edit] if mode == "alternatives" else getattr(result, "edits", [])
    for edit in edits:  # bytes outside the spans never change
        new = apply_edits(SOURCE, [edit])
        assert new.startswith(SOURCE[: edit.start]) and new.endswith(SOURCE[edit.end :])


@pytest.mark.parametrize("mode", list(requests()))
def test_every_mode_stops_when_cancelled_before_its_first_canvas(tiny_backend, mode):
    with pytest.raises(Cancelled):
        run(tiny_backend, requests()[mode], Hooks(cancelled=lambda: True))


class SimpleModel:
    """Enough of a denoiser for planning: its context length."""

    def __init__(self, context_length: int):
        self.context_length = context_length


def test_a_span_past_the_end_is_refused_by_every_mode_before_any_pass(make_oracle):
    oracle = make_oracle(None)
    past = Span(len(SOURCE) + 5, len(SOURCE) + 9, "past the end")
    for request in (
        FillRequest(document(), [past]),
        FixRequest(document(), [past]),
        AlternativesRequest(document(), past, 2),
        InlineRequest(document(), len(SOURCE) + 5),
    ):
        with pytest.raises(InputError):
            run(oracle, request)
    assert oracle.calls == 0
