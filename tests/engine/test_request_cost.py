"""A request's cost is bounded: the pass budget covers the fill and every repair step, a deadline
ends a fill early with the best fill so far, a published family's step cap is one pass per masked
position, and with a large vocabulary a pass chooses among each position's most likely tokens."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
import torch
from checkpoints import write_checkpoint

import infill.engine.pipeline
import infill.engine.sampler
import infill.engine.unmasking
from infill.cli import EXIT_OK, EXIT_TIMED_OUT, main
from infill.engine.sampler import sample
from infill.models import load
from infill.models.defaults import PUBLISHED_PASS_BUDGET
from infill.options import SamplerConfig

BROKEN = """def mean(values):
    total = 0
    for value in values:
        total += value
    return total / len(values)


def spread(values):
    low = min(values)
    high = max(values)
    return high - low
"""


@pytest.fixture(scope="module")
def dream(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cost") / "Dream"
    write_checkpoint(folder, "Dream", seed=1)
    return folder


def fill(tmp_path, capsys, *flags) -> tuple[int, dict, str]:
    path = tmp_path / "two.py"
    path.write_text(BROKEN)
    code = main([str(path), "--lines", "7-8", "--json", "--threads", "1", *flags])
    captured = capsys.readouterr()
    assert path.read_text() == BROKEN
    return code, json.loads(captured.out) if code == EXIT_OK else {}, captured.err


@pytest.mark.slow
def test_a_published_model_gets_its_pass_budget_in_all(dream, tmp_path, capsys):
    """Random weights never settle: the fill runs to its cap, the repair stage to the budget."""
    code, report, _ = fill(tmp_path, capsys, "--model", str(dream))
    assert code == EXIT_OK
    stats = report["stats"]
    assert stats["retries"] >= 1  # the repair stage ran...
    assert stats["forward_passes"] <= PUBLISHED_PASS_BUDGET  # ...within the budget, fill included
    assert stats["repair_passes"] >= 1  # --stats says what each stage cost: the fill took one
    assert stats["forward_passes"] - stats["repair_passes"] == stats["tokens"]  # pass a position
    stages = {"retries", "token_edits", "fresh_fills", "recalled", "repair_passes", "repair_seconds"}
    assert stages <= stats.keys() and not [key for key in stats if key.startswith("syntax_")]


@pytest.mark.slow
@pytest.mark.parametrize("budget", [20, 30])
def test_the_pass_budget_bounds_retries_edits_and_fresh_fills(budget, dream, tmp_path, capsys):
    flags = ["--model", str(dream), "--steps", "12", "--pass-budget", str(budget)]
    code, report, _ = fill(tmp_path, capsys, *flags)
    assert code == EXIT_OK
    assert 12 < report["stats"]["forward_passes"] <= budget


def test_the_step_cap_is_one_pass_per_position_for_the_dream_family(dream, tmp_path, capsys):
    no_repair = ["--retries", "0", "--token-edits", "0", "--fresh-fills", "0", "--no-recall"]
    code, report, _ = fill(tmp_path, capsys, "--model", str(dream), *no_repair)
    assert code == EXIT_OK
    assert report["stats"]["forward_passes"] == report["stats"]["tokens"]  # one per masked position


@pytest.fixture
def past_deadline(monkeypatch):
    """The pipeline's clock reads an hour later than the one the CLI set the deadline by."""
    later = SimpleNamespace(monotonic=lambda: time.monotonic() + 3600)
    monkeypatch.setattr(infill.engine.pipeline, "time", later)


def test_a_deadline_ends_the_fill_with_the_best_so_far(dream, tmp_path, capsys, past_deadline):
    code, report, _ = fill(tmp_path, capsys, "--model", str(dream), "--timeout", "60")
    assert code == EXIT_OK
    stats = report["stats"]
    assert stats["forward_passes"] == 1  # the first pass finishes the fill...
    assert stats["retries"] == 0 and stats["fresh_fills"] == 0  # ...and no repair starts
    assert report["spans"][0]["new_text"]


def test_the_authors_loop_past_its_deadline_keeps_nothing(dream, tmp_path, capsys, past_deadline):
    code, _, err = fill(tmp_path, capsys, "--model", str(dream), "--protocol", "authors", "--timeout", "60")
    assert code == EXIT_TIMED_OUT
    assert "--timeout" in err


def test_candidates_choose_as_the_whole_vocabulary_does_greedily(dream, monkeypatch):
    """Greedy choices and the confidence order are those of the whole vocabulary."""
    denoiser = load(dream, "cpu", torch.float32)
    ids = torch.tensor([[151665] + denoiser.encode(BROKEN)])
    editable = torch.zeros_like(ids, dtype=torch.bool)
    editable[0, 30:50] = True
    config = SamplerConfig(steps=6, order="confidence", commit_threshold=1.0, remask_threshold=0.0)
    reduced = sample(denoiser, ids, editable, config)
    monkeypatch.setattr(infill.engine.unmasking, "LARGE_VOCABULARY", 10**9)  # the whole vocabulary
    whole = sample(denoiser, ids, editable, config)
    assert torch.equal(reduced.ids, whole.ids)
    assert torch.allclose(reduced.confidence, whole.confidence)
