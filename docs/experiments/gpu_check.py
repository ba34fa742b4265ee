"""Issue 26's GPU check, one script: the published families' tiny checkpoints on a device and
dtype, checked against transformers' own models, and the 7B Dream shape timed there.

    python docs/experiments/gpu_check.py --device cuda --dtype bfloat16 --out DIR
    python docs/experiments/gpu_check.py --device cpu --dtype float32 --shapes tiny --out DIR  # on a CPU

For each family (Dream, DreamOn, LLaDA, Open-dCoder) a tiny random checkpoint in its released
layout (tests/checkpoints.py) is loaded on the device:
- its predictions at the masked positions of a canvas against transformers' own Qwen2 / Llama
  classes on the same weights (float32 on the CPU, attention made non-causal): the share of
  positions whose likeliest token agrees, and the largest log-probability difference;
- the cached passes (a full one that fills the cache, then a span-only one) against that full pass;
- a greedy fill with `--protocol authors` on the device against the same on the CPU in float32:
  the committed ids, equal or not (a low-precision dtype can tip a near-tie);
- a fill with the engine's own protocol: its exit code and time.
- the same checkpoint with `--quantize int4` on the device: agreement with the float weights and
  the largest log-probability difference (CUDA's 4-bit kernel, its byte order found by a probe).
Then `infill-bench shapes` on `--shapes` (default dream-7b; "tiny" for the benchmark's tiny
stand-ins) for each form of `--quantize` (default: as stored, then int4): load, full pass, cached
pass, fills at 4/8/16 passes, peak memory.

Writes DIR/gpu_check.json, DIR/shapes.json and DIR/shapes_int4.json, prints a table; exit 1 if a
family's agreement with transformers, or its int4 weights' with its float ones, is under 0.8
(the share the int8 tests ask for: tests/models/test_quantize.py), or a fill failed. It
needs torch, transformers, tokenizers, safetensors, tree-sitter and tree-sitter-python; not
pytest, pygls or the other grammars (the GPU machines lack them: docs/gpu-recipe.md, "Issue 26's
GPU check", says how tree-sitter travels there).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from checkpoints import SAMPLE, agreement, masked_canvas, reference_logits, write_checkpoint  # noqa: E402

from infill.bench import cli as bench  # noqa: E402
from infill.cli import main as infill_main  # noqa: E402
from infill.models import load  # noqa: E402

FAMILIES = ("Dream", "DreamOn", "LLaDA", "Open-dCoder")
AGREEMENT = 0.8
HEAD_SCALE = 20.0  # decisions with clear margins, as tests/models/test_authors_protocol.py has them
HOLE_SOURCE = "def total(values):\n    result = 0\n    for value in values:\n        result += value\n"


def cli_json(folder: Path, source: Path, *flags: str) -> tuple[int, dict | None, float]:
    """`infill SOURCE --lines 3 --model FOLDER --json FLAGS`: exit code, report, seconds."""
    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = infill_main([str(source), "--lines", "3", "--model", str(folder), "--json", *flags])
    seconds = time.perf_counter() - started
    try:
        return code, json.loads(out.getvalue()), seconds
    except json.JSONDecodeError:
        return code, None, seconds


def check_family(family: str, root: Path, device: str, dtype: str) -> dict:
    folder = root / family
    write_checkpoint(folder, family, head_scale=HEAD_SCALE)
    denoiser = load(folder, device, dtype, quantize="none")
    ids, masked = masked_canvas(denoiser, SAMPLE, 200)
    ours = denoiser.logits(ids)
    reference = reference_logits(folder, family, ids)[..., : ours.shape[-1]]
    if family != "LLaDA":  # the Dream family's shift: row i predicts token i from the network's row i-1
        reference = torch.cat([reference[:, :1], reference[:, :-1]], dim=1)
    positions = masked[0].nonzero().flatten()
    cache = denoiser.new_cache()
    refreshed = denoiser.cached_logits(ids, positions, cache, refresh=True)
    span_only = denoiser.cached_logits(ids, positions, cache, refresh=False)
    difference = (ours.log_softmax(-1) - reference.log_softmax(-1))[masked].abs().max().item()
    row = {
        "family": family,
        "agreement_with_transformers": agreement(ours[masked], reference[masked]),
        "max_logprob_difference": difference,
        "refreshing_pass_agreement": agreement(ours[0, positions], refreshed[0]),
        "span_only_pass_agreement": agreement(ours[0, positions], span_only[0]),
    }
    if dtype in ("bfloat16", "float32"):  # int4 on the device (clear margins here: HEAD_SCALE)
        int4s = load(folder, device, dtype, quantize="int4")
        got = int4s.logits(ids)
        row["int4_agreement_with_float"] = agreement(ours[masked], got[masked])
        int4_difference = (ours.float().log_softmax(-1) - got.float().log_softmax(-1))[masked].abs().max()
        row["int4_max_logprob_difference"] = int4_difference.item()
    source = root / f"{family}_hole.py"
    source.write_text(HOLE_SOURCE)
    authors = ["--protocol", "authors", "--budget", "6", "--steps", "6"]
    code, here, seconds = cli_json(folder, source, "--device", device, "--dtype", dtype, *authors)
    cpu_code, on_cpu, _ = cli_json(folder, source, "--device", "cpu", "--dtype", "float32", *authors)
    tokens = [span.get("tokens") for span in (here or {}).get("spans", [])]
    cpu_tokens = [span.get("tokens") for span in (on_cpu or {}).get("spans", [])]
    row.update(authors_exit=code, authors_seconds=seconds)
    row["authors_ids_equal_cpu_float32"] = tokens == cpu_tokens
    code, _, seconds = cli_json(folder, source, "--device", device, "--dtype", dtype)
    row.update(engine_exit=code, engine_seconds=seconds, cpu_exit=cpu_code)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--shapes", default="dream-7b",
                        help="shapes to time ('tiny': the stand-ins; '' for none)")  # fmt: skip
    parser.add_argument("--quantize", default="none,int4",
                        help="the weights' forms the shapes are timed in, each a table")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": args.device, "dtype": args.dtype, "torch": torch.__version__}
    if args.device == "cuda" and torch.cuda.is_available():
        report["gpu"] = torch.cuda.get_device_name()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for family in args.families.split(","):
            row = check_family(family, Path(tmp), args.device, args.dtype)
            rows.append(row)
            print(json.dumps(row), flush=True)
            failed |= row["agreement_with_transformers"] < AGREEMENT
            failed |= any(row[key] != 0 for key in ("authors_exit", "engine_exit", "cpu_exit"))
            failed |= row.get("int4_agreement_with_float", 1.0) < AGREEMENT
        report["families"] = rows
    for form in args.quantize.split(",") if args.shapes else []:
        shapes = ["--tiny"] if args.shapes == "tiny" else ["--shapes", args.shapes]
        name = "shapes.json" if form == "none" else f"shapes_{form}.json"
        timing = ["--repeat", str(args.repeat), "--json", str(args.out / name)]
        weights = ["--device", args.device, "--dtype", args.dtype, "--quantize", form]
        code = bench.main(["shapes", *shapes, *weights, *timing])
        report["shapes_exit" if form == "none" else f"shapes_{form}_exit"] = code
        failed |= code != 0
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
