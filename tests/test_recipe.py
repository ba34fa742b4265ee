"""The GPU recipe at toy scale on the CPU, end to end: corpus, training, sharded export, reload,
a fill through the CLI; and what makes it safe to cut into commands (resume, SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from infill.backend import load_backend
from infill.model import InfillModel
from infill.model_info import count_parameters, model_card
from infill.train.cli import main as train_main
from infill.train.export import MAX_FILES, MAX_SHARD_BYTES
from infill.train.train import StopSignal

REPO = Path(__file__).resolve().parents[1]


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
    assert training["steps"] == 6 and training["complete"] is True
    assert [row["step"] for row in training["log"] if "loss" in row][-1] == 6
    assert model_card(export).name == "infill recipe model (tiny)"


def test_the_exported_model_fills_a_file_through_the_cli(tiny_run: Path, tmp_path: Path):
    source = tmp_path / "example.py"
    text = "def add(a, b):\n    total = a + b\n    return total\n"
    source.write_text(text)
    model = str(tiny_run / "export")
    command = [sys.executable, "-m", "infill.cli", str(source), "--lines", "2", "--model", model,
               "--json", "--steps", "4", "--syntax-rounds", "0", "--syntax-restarts", "0"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "edits" in report
    assert source.read_text() == text  # without --write the file is not touched


def test_the_same_command_resumes_and_a_finished_run_is_not_trained_again(tmp_path: Path):
    run = tmp_path / "run"
    args = ["recipe", "--device", "cpu", "--tiny", "--out", str(run), "--workers", "1"]  # a DataLoader worker
    assert train_main(args) == 0
    settings = json.loads((run / "recipe.json").read_text())
    settings["steps"] = 9  # as if the first command had been cut after 6 of 9 steps
    (run / "recipe.json").write_text(json.dumps(settings))
    assert train_main(args) == 0
    steps = [json.loads(line)["step"] for line in (run / "log.jsonl").read_text().splitlines()]
    assert steps[-1] == 9 and steps == sorted(steps)
    assert train_main(args) == 0  # finished: exports again, trains no further
    assert json.loads((run / "export" / "training.json").read_text())["steps"] == 9


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
    code = f"{blocked}; import infill.train.cli, infill.train.recipe, infill.train.train"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr


def test_cuda_without_a_gpu_is_a_clear_error(tmp_path: Path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(SystemExit, match="sees no GPU"):
        train_main(["recipe", "--device", "cuda", "--out", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()
