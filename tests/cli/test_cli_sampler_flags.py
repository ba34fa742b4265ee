"""The CLI's unmasking flags (--order with the published rule names, --block-length, --top-p,
--top-k) reach the sampler and bad values are refused before anything changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infill.cli import EXIT_INPUT, EXIT_OK, main

SOURCE = "def add(a, b):\n    total = a + b\n    return total\n\n\nprint(add(1, 2))\n"
QUICK = ["--steps", "4", "--retries", "0", "--token-edits", "0", "--fresh-fills", "0"]


@pytest.mark.parametrize("order", ["entropy", "maskgit_plus", "topk_margin", "low_confidence"])
def test_the_published_rules_run_through_the_cli(tmp_path: Path, capsys, order):
    path = tmp_path / "module.py"
    path.write_text(SOURCE)
    rules = [
        "--order",
        order,
        "--block-length",
        "4",
        "--top-p",
        "0.9",
        "--top-k",
        "20",
        "--temperature",
        "0.2",
    ]

    code = main([str(path), "--lines", "2", "--json", "--seed", "0", *rules, *QUICK])

    assert code == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    (span,) = report["spans"]
    new = SOURCE.replace("    total = a + b\n", span["new_text"] + "\n")
    lines = new.split("\n")
    assert lines[0] == "def add(a, b):" and lines[-4:] == ["", "", "print(add(1, 2))", ""]
    assert 1 <= report["stats"]["steps"] <= 4
    assert path.read_text() == SOURCE  # --json only reports


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--top-p", "0", "top_p"),
        ("--top-p", "1.5", "top_p"),
        ("--top-k", "0", "top_k"),
        ("--block-length", "0", "block_length"),
        ("--expand-start", "0", "expand_start"),
    ],
)
def test_bad_rule_values_are_refused_and_nothing_changes(tmp_path: Path, capsys, flag, value, message):
    path = tmp_path / "module.py"
    path.write_text(SOURCE)

    code = main([str(path), "--lines", "2", "--write", flag, value])

    assert code == EXIT_INPUT
    assert message in capsys.readouterr().err
    assert path.read_text() == SOURCE
