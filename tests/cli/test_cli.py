"""The `infill` command: the shipped model through the real CLI, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from samples import COUNTER_MODULE, LEAKS
from unidiff import PatchSet

from infill.cli import EXIT_INPUT, build_parser, main
from infill.engine.repair.retries import RETRY_STEPS
from infill.models.native import DEFAULT_MODEL_DIR
from infill.options import InfillOptions

SOURCE = COUNTER_MODULE



def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "infill.cli", *args], capture_output=True, text=True, timeout=300
    )


def changed_line_numbers(diff: str) -> tuple[set[int], set[int]]:
    """(removed source line numbers, added target line numbers) of a unified diff."""
    removed, added = set(), set()
    for patched in PatchSet(diff):
        for hunk in patched:
            for line in hunk:
                if line.is_removed:
                    removed.add(line.source_line_no)
                elif line.is_added:
                    added.add(line.target_line_no)
    return removed, added


def test_default_model_is_shipped_as_safetensors():
    files = {p.name for p in DEFAULT_MODEL_DIR.iterdir()}
    assert {"config.json", "tokenizer.json"} <= files
    weights = {name for name in files if name.endswith(".safetensors")}
    assert weights  # one file, or shards named by model.safetensors.index.json
    assert len(weights) == 1 or "model.safetensors.index.json" in files
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in files)
    total = sum(p.stat().st_size for p in DEFAULT_MODEL_DIR.iterdir())
    assert total < 64 * 1024 * 1024


@pytest.mark.slow
def test_shipped_model_fills_lines_through_the_cli(tmp_path: Path):
    path = tmp_path / "sample.py"
    path.write_text(SOURCE)
    before = path.read_bytes()
    done = run_cli(str(path), "--lines", "11-12", "--stats")
    assert done.returncode == 0, done.stderr
    assert path.read_bytes() == before  # a diff is printed, the file is not touched
    for leak in LEAKS:
        assert leak not in done.stdout
    assert "forward passes" in done.stderr
    if done.stdout:  # the model may reproduce the lines exactly; then there is no diff
        removed, added = changed_line_numbers(done.stdout)
        assert removed <= {11, 12}
        new_lines = len(added)
        assert added <= set(range(11, 11 + max(new_lines, 2) + 1))
        # Applying the diff changes nothing outside the span: lines 1-10 and the last 10 lines.
        patched = PatchSet(done.stdout)[0]
        assert all(h.source_start >= 8 for h in patched)


@pytest.mark.slow
def test_write_keeps_bytes_outside_the_span_crlf_and_bom(tmp_path: Path):
    path = tmp_path / "crlf.py"
    data = b"\xef\xbb\xbf" + SOURCE.replace("\n", "\r\n").encode()
    path.write_bytes(data)
    lines = data.split(b"\r\n")
    prefix = b"\r\n".join(lines[:5]) + b"\r\n"  # lines 1-5
    suffix = b"\r\n" + b"\r\n".join(lines[6:])  # from the end of line 6 on
    done = run_cli(str(path), "--lines", "6", "--write", "--seed", "1")
    assert done.returncode == 0, done.stderr
    after = path.read_bytes()
    assert after.startswith(prefix) and after.endswith(suffix)
    middle = after[len(prefix) : len(after) - len(suffix)]
    assert b"\n" not in middle.replace(b"\r\n", b"") and b"\r" not in middle.replace(b"\r\n", b"")
    for leak in LEAKS:
        assert leak.encode() not in after
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


@pytest.mark.slow
def test_json_edits_stay_inside_a_node_and_show_steps(tmp_path: Path):
    path = tmp_path / "node.py"
    path.write_text(SOURCE)
    done = run_cli(str(path), "--node", "body:mean", "--json", "--show-steps", "--steps", "12")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    body_start = SOURCE.index("    total = 0")
    body_end = SOURCE.index("len(values)") + len("len(values)")
    for edit in report["edits"]:
        assert body_start <= edit["start"] <= edit["end"] <= body_end
    stats = report["stats"]  # the cap is per denoising run, a syntax retry's too (at most RETRY_STEPS)
    runs = 1 + stats["fresh_fills"]  # the fill and its fresh fills, each with retries and edits
    edit_passes = (InfillOptions.token_edits + 1) * runs if stats["retries"] else 0
    retry_passes = min(12, RETRY_STEPS) * stats["retries"]
    assert stats["forward_passes"] <= 12 * runs + retry_passes + edit_passes
    assert "--- step 1:" in done.stderr
    retries = done.stderr.count("--- syntax retry ")
    fresh = done.stderr.count("--- fresh fill ")
    assert done.stderr.count("--- step ") + retries + fresh == stats["steps"]
    assert (fresh > 0) == (stats["fresh_fills"] > 0)
    assert (retries > 0) == (stats["retries"] > 0)


# Bad input: a clear message, exit code 2, the file untouched. These never load the model.


@pytest.mark.parametrize(
    "content, args, message",
    [
        (b"\x00\x01binary\x00", ["--lines", "1"], "binary"),
        (b"x = 1\n\xff\xfe = 2\n", ["--lines", "1"], "UTF-8"),
        (SOURCE.encode(), ["--lines", "40-41"], "past the end"),
        (SOURCE.encode(), ["--lines", "3-6", "--lines", "5-8"], "overlap"),
        (b"", ["--lines", "1"], "empty"),
        (SOURCE.encode(), [], "--lines"),
        (SOURCE.encode(), ["--node", "function:nothing_here"], "nothing_here"),
        (SOURCE.encode(), ["--lines", "3-6", "--pass-budget", "-1"], "pass_budget"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(tmp_path, capsys, content, args, message):
    path = tmp_path / "bad.py"
    path.write_bytes(content)
    stat = path.stat()
    code = main([str(path), *args, "--write"])
    assert code == EXIT_INPUT
    err = capsys.readouterr().err
    assert err.startswith("infill: error:") and message.lower() in err.lower()
    assert path.read_bytes() == content and path.stat().st_mtime_ns == stat.st_mtime_ns


# The repair flags have their options' names (--retries: InfillOptions.retries); the old names
# still work, hidden from --help, and say which flag to use.
RENAMED = {
    "--syntax-rounds": "--retries",
    "--syntax-edits": "--token-edits",
    "--syntax-restarts": "--fresh-fills",
}


def test_the_repair_flags_are_named_after_their_options_and_the_old_names_are_hidden():
    args = build_parser().parse_args(["f.py", "--retries", "1", "--token-edits", "2", "--fresh-fills", "3",
                                      "--pass-budget", "5"])  # fmt: skip
    assert (args.retries, args.token_edits, args.fresh_fills, args.pass_budget) == (1, 2, 3, 5)
    defaults = build_parser().parse_args(["f.py"])
    options = InfillOptions()
    assert (defaults.retries, defaults.token_edits, defaults.fresh_fills) == (
        options.retries, options.token_edits, options.fresh_fills)  # fmt: skip
    usage = build_parser().format_help()
    assert all(new in usage and old not in usage for old, new in RENAMED.items())


def test_the_old_repair_flags_still_work_and_warn(tmp_path: Path, capsys):
    path = tmp_path / "sample.py"
    path.write_text(SOURCE)
    common = [str(path), "--lines", "11-12", "--json", "--steps", "4"]
    assert main([*common, "--retries", "1", "--token-edits", "0", "--fresh-fills", "2"]) == 0
    new = capsys.readouterr()
    assert main([*common, "--syntax-rounds", "1", "--syntax-edits", "0", "--syntax-restarts", "2"]) == 0
    old = capsys.readouterr()
    new_report, old_report = json.loads(new.out), json.loads(old.out)
    for report in (new_report, old_report):
        report["stats"].pop("seconds"), report["stats"].pop("repair_seconds", None)
    assert old_report == new_report  # the same fill
    assert "deprecated" not in new.err
    for old_flag, new_flag in RENAMED.items():
        assert f"infill: warning: {old_flag} is deprecated, use {new_flag}" in old.err


def test_an_old_flag_with_a_bad_value_is_refused_under_its_new_name(tmp_path: Path, capsys):
    path = tmp_path / "sample.py"
    path.write_text(SOURCE)
    assert main([str(path), "--lines", "3-6", "--syntax-edits", "-1"]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "--syntax-edits is deprecated, use --token-edits" in err
    assert "infill: error: token_edits must be 0 or more (got -1)" in err


def test_missing_file_is_bad_input(tmp_path, capsys):
    assert main([str(tmp_path / "nope.py"), "--lines", "1"]) == EXIT_INPUT
    assert "nope.py" in capsys.readouterr().err
