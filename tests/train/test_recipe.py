"""The GPU recipe at toy scale on the CPU, end to end: corpus, training, sharded export, reload,
a fill through the CLI; its time plan (phases that add up to one command, a phase that runs long
cut, never the export); a further command going on from the first one's checkpoint; and a first
command starting from an exported model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from infill.models.model_info import count_parameters, model_card
from infill.models.native import load_backend
from infill.models.native.model import InfillModel
from infill.train.cli import main as train_main
from infill.train.corpus import MIN_FILES_WHEN_CUT
from infill.train.export import MAX_FILES, MAX_SHARD_BYTES
from infill.train.recipe import (
    COMMAND_SECONDS,
    GPU_PLAN,
    MORE_LR,
    TINY_MORE_STEPS,
    TINY_STEPS,
    Deadlines,
    Phase,
    TimePlan,
    from_plan,
    more_plan,
    recipe,
)
from infill.train.train import StopSignal

pytestmark = [pytest.mark.training, pytest.mark.slow]  # infill.train; training takes seconds

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("recipe")
    assert train_main(["recipe", "--device", "cpu", "--tiny", "--out", str(run)]) == 0
    return run


def test_tiny_recipe_builds_a_corpus_with_its_manifest(tiny_run: Path):
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    assert manifest["counts"]["kept"] > 10
    assert "json" in manifest["heldout_packages"] and manifest["sources"]
    shipped = REPO / "infill" / "default_model" / "tokenizer.json"
    assert (tiny_run / "tokenizer.json").read_bytes() == shipped.read_bytes()


def test_tiny_recipe_exports_shards_with_an_index_that_the_loader_reads(tiny_run: Path):
    export = tiny_run / "export"
    files = sorted(p.name for p in export.iterdir())
    assert len(files) <= MAX_FILES and all((export / f).stat().st_size <= MAX_SHARD_BYTES for f in files)
    index = json.loads((export / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) >= 2 and all(name in files for name in shards)
    assert {"config.json", "tokenizer.json", "training.json", "loss.png"} <= set(files)

    backend = load_backend(export)
    trained = InfillModel.from_pretrained(tiny_run / "checkpoint")
    for name, weight in trained.state_dict().items():  # float16 on disk, float32 once loaded
        loaded = backend.model.state_dict()[name]
        assert loaded.dtype == torch.float32
        torch.testing.assert_close(loaded, weight.half().float())
    assert count_parameters(export) == sum(p.numel() for p in backend.model.parameters())

    training = json.loads((export / "training.json").read_text())
    assert training["steps"] == TINY_STEPS and training["complete"] is True
    assert [row["step"] for row in training["log"] if "loss" in row][-1] == TINY_STEPS
    assert set(training["phases"]) == {"corpus", "probe", "train"}  # the export's own is not over yet
    assert training["sources"] and all("license" in entry for entry in training["sources"].values())
    assert model_card(export).name == "infill recipe model (tiny)"


def test_the_exported_model_fills_a_file_through_the_cli(tiny_run: Path, tmp_path: Path):
    source = tmp_path / "example.py"
    text = "def add(a, b):\n    total = a + b\n    return total\n"
    source.write_text(text)
    model = str(tiny_run / "export")
    command = [sys.executable, "-m", "infill.cli", str(source), "--lines", "2", "--model", model,
               "--json", "--steps", "4", "--retries", "0", "--fresh-fills", "0"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "edits" in report
    assert source.read_text() == text  # without --write the file is not touched


def test_a_further_command_goes_on_from_the_checkpoint_with_a_new_schedule_and_exports_again(tmp_path: Path):
    run = tmp_path / "run"
    args = ["recipe", "--device", "cpu", "--tiny", "--out", str(run), "--workers", "1"]  # a DataLoader worker
    assert train_main(args) == 0
    assert json.loads((run / "export" / "training.json").read_text())["steps"] == TINY_STEPS
    with pytest.raises(SystemExit, match="first command follows"):  # the first command has its plan
        train_main(["recipe", "--device", "cpu", "--tiny", "--out", str(tmp_path / "new"), "--minutes", "2"])

    assert train_main([*args, "--minutes", "2"]) == 0
    rows = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    steps = [row["step"] for row in rows]
    assert steps[-1] == TINY_STEPS + TINY_MORE_STEPS and steps == sorted(steps)
    further = [row for row in rows if "lr" in row and row["step"] > TINY_STEPS]
    assert further and all(row["lr"] <= MORE_LR for row in further)  # its own, lower schedule
    training = json.loads((run / "export" / "training.json").read_text())
    assert training["steps"] == TINY_STEPS + TINY_MORE_STEPS and set(training["phases"]) == {"train"}


def test_a_first_command_can_train_on_from_an_exported_model(tiny_run: Path, tmp_path: Path):
    start = tiny_run / "export"
    run = tmp_path / "on"
    args = [
        "recipe",
        "--device",
        "cpu",
        "--tiny",
        "--out",
        str(run),
        "--init-from",
        str(start),
        "--minutes",
        "9",
    ]
    assert train_main(args) == 0

    before = load_backend(start).model.state_dict()
    after = InfillModel.from_pretrained(run / "checkpoint").state_dict()
    assert before.keys() == after.keys()
    # A few steps at the lower peak move each weight by about the learning rate a step; a model
    # trained from a fresh initialisation instead differs from the start by the weights' own size.
    moved = max(float((after[name] - before[name]).abs().max()) for name in before)
    assert 0 < moved < 20 * MORE_LR

    training = json.loads((run / "export" / "training.json").read_text())
    prior = json.loads((start / "training.json").read_text())
    assert training["steps"] == TINY_STEPS + TINY_MORE_STEPS and training["tokens"] > prior["tokens"]
    assert "trained on from 6 steps of: infill-train recipe" in training["origin"]
    steps = [row["step"] for row in training["log"]]
    assert (
        steps == sorted(steps)
        and steps[0] == prior["log"][0]["step"]
        and steps[-1] == TINY_STEPS + TINY_MORE_STEPS
    )
    earlier = [row for row in prior["log"] if row["step"] < TINY_STEPS]
    assert earlier and [row for row in training["log"] if row["step"] < TINY_STEPS] == earlier
    new = [row for row in training["log"] if "lr" in row and row["step"] > TINY_STEPS]
    assert new and all(row["lr"] <= MORE_LR for row in new)
    assert (run / "tokenizer.json").read_bytes() == (start / "tokenizer.json").read_bytes()


def test_init_from_a_folder_that_is_not_a_native_model_is_refused(tiny_run: Path, tmp_path: Path):
    args = ["recipe", "--device", "cpu", "--tiny", "--out", str(tmp_path / "run")]
    with pytest.raises(SystemExit, match="no model directory"):
        train_main([*args, "--init-from", str(tmp_path / "nothing")])
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text('{"model_type": "qwen2"}')
    with pytest.raises(SystemExit, match="only infill's own"):
        train_main([*args, "--init-from", str(tmp_path / "other")])
    with pytest.raises(SystemExit, match="is a tiny model; add --tiny"):
        train_main(
            [
                "recipe",
                "--device",
                "cpu",
                "--out",
                str(tmp_path / "run"),
                "--init-from",
                str(tiny_run / "export"),
            ]
        )
    assert not (tmp_path / "run").exists()


def test_the_gpu_plan_fits_one_command_and_ends_with_the_export():
    names = [phase.name for phase in GPU_PLAN.phases]
    assert names == ["launch", "corpus", "probe", "train", "export"]
    assert GPU_PLAN.seconds <= COMMAND_SECONDS <= 9 * 60  # a command may take 10; the copies follow
    assert GPU_PLAN.deadline("corpus") - GPU_PLAN.deadline("launch") <= 120  # the corpus: 2 minutes
    assert GPU_PLAN.deadline("export") == GPU_PLAN.seconds
    assert max(GPU_PLAN.phases, key=lambda phase: phase.seconds).name == "train"
    assert all(phase.seconds > 0 and phase.basis for phase in GPU_PLAN.phases)
    further = more_plan(3)
    assert [p.name for p in further.phases] == ["launch", "train", "export"] and further.seconds == 180
    start = from_plan(7)  # from an exported model: all of GPU_PLAN's phases, in --minutes
    assert [p.name for p in start.phases] == names and start.seconds == 7 * 60
    default = from_plan(GPU_PLAN.seconds / 60)  # its default: the first command's plan
    assert [p.seconds for p in default.phases] == [p.seconds for p in GPU_PLAN.phases]
    with pytest.raises(SystemExit, match="no time to train"):
        from_plan(3)


class FakeClock:
    """Seconds that pass only when the test says so, or `tick` seconds at every reading."""

    def __init__(self, tick: float = 0.0):
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def test_a_phase_that_runs_long_takes_its_time_from_training_not_from_the_export():
    clock = FakeClock()
    deadlines = Deadlines(GPU_PLAN, clock, origin=0.0)
    with deadlines.phase("corpus"):
        clock.now += 400  # far over the corpus's 120 s
    assert deadlines.took["corpus"] == 400 and deadlines.passed("corpus")
    assert deadlines.left("train") == GPU_PLAN.deadline("train") - 400  # training is what gets shorter
    assert deadlines.left("export") == GPU_PLAN.seconds - 400  # the command's end does not move
    with pytest.raises(KeyError):
        deadlines.phase("nap").__enter__()


def test_an_overrunning_corpus_is_cut_training_makes_one_step_and_the_export_is_written(tmp_path: Path):
    budgets = {"launch": 0, "corpus": 5, "probe": 1, "train": 1, "export": 5}
    plan = TimePlan(tuple(Phase(name, seconds, "a test") for name, seconds in budgets.items()))
    clock = FakeClock(tick=1.0)  # every reading of the clock is a second: each phase runs long
    run = tmp_path / "run"
    recipe(run, device="cpu", tiny=True, workers=0, deadlines=Deadlines(plan, clock, origin=0.0))

    counts = json.loads((run / "manifest.json").read_text())["counts"]
    assert counts["cut"] > 0 and MIN_FILES_WHEN_CUT <= counts["kept"] < 40  # 40: the tiny corpus uncut
    training = json.loads((run / "export" / "training.json").read_text())
    assert training["steps"] == 1 and training["phases"]["corpus"] > plan.deadline("corpus")
    assert load_backend(run / "export").model is not None


def test_sigterm_becomes_a_flag_the_training_loop_checks():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignal() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.raised
    assert signal.getsignal(signal.SIGTERM) == before


def test_the_training_code_imports_without_tree_sitter():
    """The GPU machine has torch, transformers and tokenizers but not tree-sitter or pygls."""
    missing = ["tree_sitter", "tree_sitter_python", "unidiff", "pygls"]
    blocked = f"import sys; sys.modules.update(dict.fromkeys({missing!r}))"
    modules = "infill.train.cli, infill.train.recipe, infill.train.train, infill.models.model_info"
    code = f"{blocked}; import {modules}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr


def test_cuda_without_a_gpu_is_a_clear_error(tmp_path: Path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(SystemExit, match="sees no GPU"):
        train_main(["recipe", "--device", "cuda", "--out", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


def test_a_long_lived_process_starts_the_plan_when_it_calls_the_recipe(monkeypatch):
    """The plan counts from the command's start: a process an hour old (a test session) that
    calls the recipe gets the whole plan, not deadlines long passed (found when this test file
    ran eight minutes into the suite and its tiny run trained one step)."""
    import infill.train.recipe as recipe_module

    monkeypatch.setattr(recipe_module, "process_age", lambda: 3600.0)
    deadlines = recipe_module.Deadlines(recipe_module.GPU_PLAN)
    launch = recipe_module.GPU_PLAN.phases[0].seconds
    assert deadlines.left("train") >= recipe_module.GPU_PLAN.deadline("train") - launch - 1
