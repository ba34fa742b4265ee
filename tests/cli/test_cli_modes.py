"""The `infill` command's editing modes (--fix, --document, --alternatives) on a tiny saved model."""

from __future__ import annotations

import ast
import codecs
import json
import subprocess
import sys
from pathlib import Path

import pytest
from samples import COUNTER_MODULE, LEAKS

from infill.cli import EXIT_INPUT, EXIT_MODEL, EXIT_OK, main

SOURCE = COUNTER_MODULE



@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tiny_backend) -> Path:
    """The tiny random model saved like a real one (config.json, model.safetensors, tokenizer.json)."""
    directory = tmp_path_factory.mktemp("tiny-model")
    tiny_backend.model.save_pretrained(directory)
    tiny_backend.tokenizer.save(directory)
    return directory


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "infill.cli", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_fix_reports_flagged_tokens_and_edits_inside_the_span(tmp_path, model_dir):
    path = tmp_path / "fix.py"
    path.write_text(SOURCE)
    span_start = SOURCE.index("    total = 0")
    span_end = SOURCE.index("len(values)") + len("len(values)")

    done = run_cli(str(path), "--model", str(model_dir), "--lines", "10-13", "--fix", "--json", "--stats")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == {"edits", "spans", "flagged", "stats"}
    for item in report["edits"] + report["flagged"]:
        assert span_start <= item["start"] <= item["end"] <= span_end
    assert report["spans"][0]["label"] == "lines 10-13"
    assert report["stats"]["forward_passes"] >= 1  # the scoring pass, at least
    assert "token(s) flagged" in done.stderr and "forward passes" in done.stderr
    assert path.read_text() == SOURCE


@pytest.mark.slow
def test_document_writes_docstrings_into_a_tab_indented_crlf_file(tmp_path, model_dir):
    text = SOURCE.replace("    ", "\t").replace("\n", "\r\n")
    path = tmp_path / "doc.py"
    path.write_bytes(codecs.BOM_UTF8 + text.encode())

    done = run_cli(
        str(path), "--model", str(model_dir), "--document", "--write", "--temperature", "1.5", "--seed", "3"
    )

    assert done.returncode == 0, done.stderr
    data = path.read_bytes()
    assert data.startswith(codecs.BOM_UTF8)
    after = data[len(codecs.BOM_UTF8) :].decode()
    assert after.count("\n") == after.count("\r\n")
    for leak in LEAKS:
        assert leak not in after
    tree = ast.parse(after)
    documented = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and ast.get_docstring(node) is not None
    ]
    assert len(documented) > 1  # circle_area had one already; the random model wrote some others
    # Taking out the inserted docstring lines gives back the original file, byte for byte.
    inserted = {
        line
        for node in documented
        if node.name != "circle_area"
        for line in range(node.body[0].lineno, node.body[0].end_lineno + 1)
    }
    kept = [line for number, line in enumerate(after.split("\r\n"), 1) if number not in inserted]
    assert "\r\n".join(kept) == text


@pytest.mark.slow
def test_alternatives_print_ranked_candidates(tmp_path, model_dir):
    path = tmp_path / "alt.py"
    path.write_text(SOURCE)

    done = run_cli(str(path), "--model", str(model_dir), "--lines", "13", "--alternatives", "4", "--json")
    shown = run_cli(
        str(path), "--model", str(model_dir), "--lines", "13", "--alternatives", "2", "--seed", "1"
    )

    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert 1 <= len(listing) <= 4 and [c["rank"] for c in listing] == list(range(1, len(listing) + 1))
    keys = [(not c["breaks_syntax"], c["score"]) for c in listing]  # syntax-keeping ones first
    assert keys == sorted(keys, reverse=True)
    assert len({c["new_text"] for c in listing}) == len(listing)
    line_start, line_end = SOURCE.index("    return total"), SOURCE.index("len(values)") + len("len(values)")
    for candidate in listing:
        assert candidate["changed"] == bool(candidate["edits"])
        for edit in candidate["edits"]:
            assert line_start <= edit["start"] <= edit["end"] <= line_end
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("# candidate 1 of ") and "(mean log-probability)" in shown.stdout
    assert path.read_text() == SOURCE


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lines", "10", "--alternatives", "3", "--write"], "cannot --write"),
        (["--lines", "10", "--lines", "12", "--alternatives", "3"], "exactly one span"),
        (["--lines", "10", "--alternatives", "0"], "from 1 to"),
        (["--fix"], "--lines"),
        (["--lines", "10", "--fix", "--fix-threshold", "2"], "threshold"),
    ],
)
def test_bad_mode_requests_are_refused_before_the_model_loads(tmp_path, capsys, args, message):
    path = tmp_path / "bad.py"
    path.write_text(SOURCE)
    code = main([str(path), "--model", str(tmp_path / "no-model"), *args])
    assert code == EXIT_INPUT
    assert message in capsys.readouterr().err
    assert path.read_text() == SOURCE


def test_modes_exclude_each_other(tmp_path):
    path = tmp_path / "x.py"
    path.write_text(SOURCE)
    with pytest.raises(SystemExit) as exited:
        main([str(path), "--lines", "10", "--fix", "--document"])
    assert exited.value.code == 2


def test_nothing_to_document_needs_no_model(tmp_path, capsys):
    path = tmp_path / "done.py"
    path.write_text('def f():\n    """Done."""\n    return 1\n')
    assert main([str(path), "--document", "--model", str(tmp_path / "no-model")]) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.out == "" and "has a docstring" in captured.err
    assert main([str(path), "--document", "--json", "--model", str(tmp_path / "no-model")]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["docstrings"] == []


def test_a_missing_model_is_a_model_error(tmp_path, capsys):
    path = tmp_path / "x.py"
    path.write_text(SOURCE)
    assert main([str(path), "--lines", "10", "--fix", "--model", str(tmp_path / "no-model")]) == EXIT_MODEL
    assert "model error" in capsys.readouterr().err
