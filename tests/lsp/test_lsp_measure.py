"""lsp_server.measure runs a real infill-lsp and reports positive times and memory."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

import pytest
from lsp_support import tiny_model_dir

from lsp_server.measure import FILL_LINE, format_table, line_counts, middle_line, sample_file

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    return tiny_model_dir(tmp_path_factory)


def test_the_sample_file_has_200_lines_and_parses():
    text = sample_file()
    assert text.count("\n") == 200
    compile(text, "sample.py", "exec")


@pytest.mark.external
def test_measure_runs_with_a_tiny_model(tiny_model):
    command = [sys.executable, "-m", "lsp_server.measure", "--model", str(tiny_model)]
    command += ["--runs", "2", "--threads", "1", "--steps", "8", "--file-lines", "2000", "--json"]
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
    assert set(results["fill_by_lines"]) == {"200", "2000"} and results["fill_by_lines"]["2000"] > 0
    assert results["fill_by_lines"]["200"] == results["fill_s"]
    table = format_table(results)
    assert "one-line fill, 200-line file (median of 2)" in table and "MiB" in table
    assert "one-line fill, 2000-line file (median of 2)" in table and "ratio, 2000 to 200 lines" in table


@pytest.mark.parametrize("lines", [20, 200, 2_000, 20_000])
def test_the_fill_in_every_file_length_is_the_same_kind_of_line(lines):
    text = sample_file(lines)
    assert text.count("\n") == lines
    here, there = text.split("\n")[middle_line(lines)], sample_file(200).split("\n")[FILL_LINE]
    assert here.startswith("def step_") and there.startswith("def step_")
    assert abs(middle_line(lines) - lines // 2) <= 5


def test_file_lines_are_parsed_and_checked():
    assert line_counts("2000,20000") == (2000, 20000) and line_counts("") == ()
    for bad in ("abc", "10", "2000,x"):
        with pytest.raises(argparse.ArgumentTypeError):
            line_counts(bad)


@pytest.mark.external
def test_measure_reports_a_model_that_cannot_load(tmp_path):
    command = [sys.executable, "-m", "lsp_server.measure", "--model", str(tmp_path / "missing")]
    command += ["--runs", "1", "--threads", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 1 and "cannot load the model" in done.stderr


@pytest.mark.external
def test_infill_bench_lsp_runs_on_a_tiny_model(tiny_model, tmp_path, capsys):
    from infill.bench import main

    written = tmp_path / "lsp.json"
    argv = ["lsp", "--model", str(tiny_model), "--runs", "1", "--threads", "1", "--steps", "4"]
    argv += ["--file-lines", "400"]
    assert main([*argv, "--json", str(written)]) == 0
    table = capsys.readouterr().out
    assert (
        f"infill-lsp, model: {tiny_model}" in table and "one-line fill, 200-line file (median of 1)" in table
    )
    results = json.loads(written.read_text())
    assert results["runs"] == 1 and results["file_lines"] == 200
    for key in ("initialize_s", "list_actions_s", "first_fill_s", "fill_s", "inline_s"):
        assert results[key] > 0, key
    assert set(results["fill_by_lines"]) == {"200", "400"} and "ratio, 400 to 200 lines" in table


@pytest.mark.external
def test_infill_bench_lsp_fails_cleanly_without_a_model(tmp_path, capsys):
    from infill.bench import main

    assert main(["lsp", "--model", str(tmp_path / "missing"), "--runs", "1", "--threads", "1"]) == 1
    assert "infill-bench lsp:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["lsp", "--runs", "0"])
    assert main(["lsp", "--file-lines", "2000,x", "--runs", "1"]) == 1
    assert "--file-lines" in capsys.readouterr().err
