"""`infill models [FOLDER ...]`: the checkpoints on this machine that infill can run, and why the
others cannot be run, read without loading any weights (config.json, the tokenizer files, the
safetensors index or headers).

Looked at: every model repository in the Hugging Face cache (infill.models.hub_cache: its refs/main
snapshot, else the newest), and each FOLDER given, with its direct subfolders that hold a
config.json. A checkpoint's family is what `infill.models.load` would run it as: the module
`family_module` picks, then that module's `conventions` (Dream, DreamOn, DiffuCoder-Instruct,
Open-dCoder, LLaDA) and `network_config` (its size). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import infill.models.native as native
from infill.errors import ModelError
from infill.models.hub_cache import CachedRepo, cache_root, cached_repos
from infill.models.loader import SUPPORTED, family_module, read_config
from infill.models.model_info import count_parameters, native_model_problem
from infill.models.weights import count_text, weight_files, weights_size

NATIVE_FAMILY = "infill (own)"
EXIT_OK, EXIT_INPUT = 0, 2


@dataclass(frozen=True)
class Found:
    name: str  # ORG/NAME for a repository of the cache, else the folder's name
    path: Path
    family: str | None = None  # None: infill cannot run it, `problem` says why
    parameters: int | None = None
    problem: str | None = None
    layers: int | None = None  # the network's layers (config.json)
    hidden: int | None = None  # its width

    def to_json(self) -> dict:
        return {**asdict(self), "path": str(self.path)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infill models",
        description="List the checkpoints infill can run (name, family, parameters, memory for the "
        "weights, folder) found in the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else "
        "~/.cache/huggingface/hub) and in the given folders, and why the others cannot be run. "
        "Reads config.json and the tokenizer files only; never downloads.",
    )
    parser.add_argument("folders", type=Path, nargs="*", metavar="FOLDER",
                        help="a checkpoint folder, or a folder of checkpoint folders")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    return parser


def models_command(argv: list[str]) -> int:
    """`infill models ...`: exit 0 whatever is found; 2 when a FOLDER does not exist."""
    args = build_parser().parse_args(argv)
    missing = [str(folder) for folder in args.folders if not folder.is_dir()]
    if missing:
        print(f"infill: error: no such folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_INPUT
    root = cache_root()
    found = [examine_repo(repo) for repo in cached_repos(root)]
    for folder in args.folders:
        found += [examine(path.name, path) for path in model_folders(folder)]
    where = root.describe() + "".join(f", {folder}" for folder in args.folders)
    if args.json:
        print(json.dumps([f.to_json() for f in found], indent=1))
    elif not found:
        print(
            f"infill: no models found; looked in {where}. infill never downloads: on a machine with "
            "network access, `huggingface-cli download ORG/NAME` fills the cache (or copy a model's "
            "folder here and pass it)"
        )
    else:
        print(listing(found, where))
    return EXIT_OK


def model_folders(folder: Path) -> list[Path]:
    """`folder` and its direct subfolders that hold a config.json; `folder` alone if none does
    (then its listing says why it is not a model)."""
    inside = sorted(sub for sub in folder.iterdir() if sub.is_dir() and (sub / "config.json").is_file())
    if (folder / "config.json").is_file() or not inside:
        return [folder, *inside]
    return inside


def examine_repo(repo: CachedRepo) -> Found:
    try:
        snapshot = repo.snapshot()
    except ModelError as error:
        return Found(repo.name, repo.folder, problem=str(error))
    return examine(repo.name, snapshot)


def examine(name: str, directory: Path) -> Found:
    """What `infill.models.load` would run `directory` as, and its size; or why it cannot."""
    try:
        config = read_config(directory)
        family = family_module(directory, config)
        if family is native:
            problem = native_model_problem(directory)
            if problem:
                raise ModelError(problem)
            native_config = read_config(directory)
            layers, hidden = native_config.get("num_layers"), native_config.get("hidden_size")
            parameters = count_parameters(directory)
            return Found(name, directory, NATIVE_FAMILY, parameters, layers=layers, hidden=hidden)
        network = family.network_config(config)
        label = family.conventions(directory, config)["family"]
        weight_files(directory)
    except (ModelError, OSError, ValueError, KeyError, TypeError) as error:
        return Found(name, directory, problem=reason(error, directory))
    parameters, layers, hidden = network.parameters, network.num_layers, network.hidden_size
    return Found(name, directory, label, parameters, layers=layers, hidden=hidden)


def reason(error: Exception, directory: Path) -> str:
    """The error, short: without the folder's path (listed beside it) or the list of what is supported."""
    text = str(error) if isinstance(error, ModelError) else f"{type(error).__name__}: {error}"
    text = text.replace(f"{directory}/", "").replace(str(directory), "the folder")
    return text.replace(f"; supported: {SUPPORTED}", "").split(". ")[0]


def listing(found: list[Found], where: str) -> str:
    runnable = [f for f in found if f.family]
    others = [f for f in found if not f.family]
    lines = [f"infill: looked in {where}"]
    if runnable:
        rows = [("NAME", "FAMILY", "PARAMETERS", "LAYERS", "BF16", "FP32", "PATH")]
        for f in runnable:
            n = f.parameters or 0
            sizes = [weights_size(n, dtype) if n else "?" for dtype in (torch.bfloat16, torch.float32)]
            shape = f"{f.layers} x {f.hidden}" if f.layers and f.hidden else "?"
            rows.append((f.name, f.family, count_text(n) if n else "?", shape, *sizes, str(f.path)))
        widths = [max(len(row[i]) for row in rows) for i in range(6)]
        use = "layers x width; memory for the weights at bf16 and fp32; use: --model NAME or PATH"
        lines.append(f"runs ({len(runnable)}; {use}):")
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[6] for row in rows]
    else:
        lines.append("runs: none of them")
    if others:
        lines.append(f"cannot run ({len(others)}):")
        lines += [f"  {f.name}: {f.problem}  ({f.path})" for f in others]
    return "\n".join(lines)
