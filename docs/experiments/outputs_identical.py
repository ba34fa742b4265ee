"""Outputs of every mode, for checking that a refactoring changed none (issue 30's check).

    python docs/experiments/outputs_identical.py --write before.json   # on the old tree
    python docs/experiments/outputs_identical.py --check before.json   # on the new one: exit 1 if any differs

Runs a fixed set of requests on three held-out files (the benchmark's held-out packages), with the
shipped model and with a tiny Dream-format checkpoint (tests/checkpoints.py): through the CLI
(`infill.cli.main ... --json`: fill, fix, docstrings, seeded alternatives at a temperature, and
the authors' protocol on the tiny checkpoint) and through the language server's functions
(`lsp_server.actions.run_action` for fill, fix and docstrings, `sample_alternatives` at a
temperature with a seed, `inline_completions` with 3 samples). Only the entry points that callers
use, so the script runs unchanged before and after a move. Timings are left out of the record.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))


def untimed(value):
    """`value` without the keys that hold times (they differ from run to run)."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if "seconds" not in k}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def cli(argv: list[str]):
    from infill.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    text = out.getvalue()
    try:
        report = untimed(json.loads(text)) if text.strip() else None
    except json.JSONDecodeError:
        report = text
    return {"exit": code, "out": report, "err": err.getvalue() if code else ""}


def held_out_files(tmp: Path) -> list[Path]:
    """Three held-out files (small, middle-sized, larger), copied so the CLI reads them by path."""
    from infill.bench.tasks import heldout_sources

    sources = [(path, text) for path, text in heldout_sources(12_000) if text.count("\ndef ") >= 2]
    picked = [sources[len(sources) * k // 3] for k in range(3)]
    files = []
    for index, (_, text) in enumerate(picked):
        path = tmp / f"heldout_{index}.py"
        path.write_text(text, encoding="utf-8")
        files.append(path)
    return files


def spans_of(text: str) -> tuple[str, str, int]:
    """A one-line span, a block of lines and a cursor offset (the start of a body line)."""
    lines = text.split("\n")
    code = [i + 1 for i, line in enumerate(lines)
            if line.strip() and not line.lstrip().startswith(("#", '"'))]
    one = code[len(code) // 3]
    block = code[len(code) // 2]
    cursor_line = code[2 * len(code) // 3]
    offset = sum(len(line) + 1 for line in lines[: cursor_line - 1]) + len(lines[cursor_line - 1]) // 2
    return str(one), f"{block}-{block + 3}", offset


def record(model: str | None, files: list[Path], tiny: bool) -> dict:
    """Every request on every file. The tiny checkpoint (a 152k vocabulary, 32k positions, random
    weights: its fills rarely parse) at a context of 256 tokens, the shipped model's, and a pass
    budget of 40, so that its repairs stay cheap; its docstrings on the first file only."""
    from infill.models import load
    from infill.options import InfillOptions
    from lsp_server.actions import DOCUMENT, FILE, FILL, FIX, LINES, ActionData, run_action
    from lsp_server.alternatives import sample_alternatives
    from lsp_server.inline import inline_completions

    tiny_flags = ["--model", str(model), "--context-length", "256", "--pass-budget", "40"]
    base = ["--threads", "2"] + (tiny_flags if tiny else [])
    cheap = {"context_length": 256, "pass_budget": 40 if tiny else InfillOptions.pass_budget}
    options = InfillOptions(**cheap)
    results: dict = {}
    denoiser = load(model, device="cpu") if model else load(None, device="cpu")
    for path in files:
        text = path.read_text(encoding="utf-8")
        line, block, offset = spans_of(text)
        out = results[path.name] = {"sha256": hashlib.sha256(text.encode()).hexdigest()}
        print(f"{model or 'shipped'}: {path.name}", file=sys.stderr, flush=True)
        out["fill"] = cli([str(path), "--lines", line, "--lines", block, "--json", *base])
        out["fix"] = cli([str(path), "--lines", block, "--fix", "--json", *base])
        out["alternatives"] = cli([str(path), "--lines", line, "--alternatives", "4", "--temperature", "0.8",
                                   "--seed", "3", "--json", *base])
        if not tiny or path == files[0]:
            out["docstrings"] = cli([str(path), "--document", "--json", *base])
        if tiny:
            out["authors"] = cli([str(path), "--lines", line, "--protocol", "authors", "--json", *base])
        # the language server's functions
        lines = text.split("\n")
        first, last = (int(x) for x in block.split("-"))
        start = sum(len(x) + 1 for x in lines[: first - 1])
        end = sum(len(x) + 1 for x in lines[:last]) - 1
        server = out["server"] = {}
        for mode in (FILL, FIX):
            data = ActionData("file:///x.py", 1, LINES, start, end, mode)
            outcome = run_action(denoiser, text, data, options)
            server[mode] = [[e.start, e.end, e.new_text] for e in outcome.edits] + [outcome.summary,
                                                                                  outcome.nothing]
        if not tiny:
            data = ActionData("file:///x.py", 1, FILE, 0, len(text), DOCUMENT)
            outcome = run_action(denoiser, text, data, options)
            server[DOCUMENT] = [[e.start, e.end, e.new_text] for e in outcome.edits] + [outcome.summary,
                                                                                      outcome.nothing]
        data = ActionData("file:///x.py", 1, LINES, start, end, FILL)
        hot = InfillOptions(sampled(0.7, seed=5), **cheap)
        found = sample_alternatives(denoiser, text, data, 4, hot)
        server["alternatives"] = [list(c) for c in found.candidates]
        hot = InfillOptions(sampled(0.9, seed=2), **cheap)
        items = inline_completions(denoiser, text, offset, hot, alternatives=3)
        server["inline"] = [item.insert_text for item in items]
        greedy = inline_completions(denoiser, text, offset, options)
        server["inline_greedy"] = [item.insert_text for item in greedy]
    return results


def sampled(temperature: float, seed: int):
    """Sampler settings at a temperature, with a fixed seed."""
    from infill.options import SamplerConfig

    return SamplerConfig(temperature=temperature, seed=seed)


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", type=Path)
    what.add_argument("--check", type=Path)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    from checkpoints import write_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        files = held_out_files(tmp_path)
        write_checkpoint(tmp_path / "dream", "Dream", head_scale=4.0)
        found = {
            "shipped": record(None, files, tiny=False),
            "tiny-dream": record(str(tmp_path / "dream"), files, tiny=True),
        }
    text = json.dumps(found, indent=1, ensure_ascii=False, sort_keys=True)
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        print(f"wrote {args.write} ({len(text)} characters)")
        return 0
    before = args.check.read_text(encoding="utf-8")
    if before == text:
        print(f"identical to {args.check} ({len(text)} characters)")
        return 0
    after = args.check.with_suffix(".after.json")
    after.write_text(text, encoding="utf-8")
    print(f"DIFFERENT from {args.check}: see {after}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
