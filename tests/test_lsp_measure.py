"""lsp_server.measure runs a real infill-lsp and reports positive times and memory."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from lsp_support import tiny_model_dir

from lsp_server.measure import format_table, sample_file

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    return tiny_model_dir(tmp_path_factory)


def test_the_sample_file_has_200_lines_and_parses():
    text = sample_file()
    assert text.count("\n") == 200
    compile(text, "sample.py", "exec")


def test_measure_runs_with_a_tiny_model(tiny_model):
    command = [sys.executable, "-m", "lsp_server.measure", "--model", str(tiny_model)]
    command += ["--runs", "2", "--threads", "1", "--steps", "8", "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    assert results["model"] == str(tiny_model) and results["file_lines"] == 200
    for key in ("initialize_s", "list_actions_s", "first_fill_s", "fill_s", "inline_s", "rss_mib"):
        assert results[key] > 0, key
    assert results["list_actions_s"] < results["first_fill_s"]  # listing never loads the model
    assert results["rss_mib"] > 50  # torch is loaded in the server
    table = format_table(results)
    assert "one-line fill, 200-line file (median of 2)" in table and "MiB" in table


def test_measure_reports_a_model_that_cannot_load(tmp_path):
    command = [sys.executable, "-m", "lsp_server.measure", "--model", str(tmp_path / "missing")]
    command += ["--runs", "1", "--threads", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 1 and "cannot load the model" in done.stderr


def test_infill_bench_lsp_runs_on_a_tiny_model(tiny_model, tmp_path, capsys):
    from infill.bench import main

    written = tmp_path / "lsp.json"
    argv = ["lsp", "--model", str(tiny_model), "--runs", "1", "--threads", "1", "--steps", "4"]
    assert main([*argv, "--json", str(written)]) == 0
    table = capsys.readouterr().out
    assert (
        f"infill-lsp, model: {tiny_model}" in table and "one-line fill, 200-line file (median of 1)" in table
    )
    results = json.loads(written.read_text())
    assert results["runs"] == 1 and results["file_lines"] == 200
    for key in ("initialize_s", "list_actions_s", "first_fill_s", "fill_s", "inline_s"):
        assert results[key] > 0, key


def test_infill_bench_lsp_fails_cleanly_without_a_model(tmp_path, capsys):
    from infill.bench import main

    assert main(["lsp", "--model", str(tmp_path / "missing"), "--runs", "1", "--threads", "1"]) == 1
    assert "infill-bench lsp:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["lsp", "--runs", "0"])
