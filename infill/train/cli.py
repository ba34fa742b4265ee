"""`infill-train`: corpus -> tokenizer -> model -> export, each stage resumable.

    infill-train all --out runs/v0 --minutes 60        # every stage, skipping finished ones
    infill-train corpus --out runs/v0                   # scan installed Python sources
    infill-train tokenizer --out runs/v0 --vocab 8192
    infill-train model --out runs/v0 --steps 2000       # resumes from runs/v0/checkpoint
    infill-train model --out runs/v1 --init-from infill/default_model --steps 6000
                                                        # go on from the shipped model (its tokenizer)
    infill-train export --out runs/v0 --to infill/default_model
    infill-train plot --out runs/v0                     # loss curves -> runs/v0/loss.png
    infill-train plot --out runs/a --compare runs/b runs/c --png cmp.png
                                                        # held-out loss of runs against hours
    infill-train recipe --device cuda --out runs/gpu   # the GPU recipe in 9 minutes (docs/gpu-recipe.md)
    infill-train recipe --device cuda --out runs/gpu --minutes 3
                                                        # a further command: trains on, exports again
    infill-train recipe --device cpu --tiny --out /tmp/tiny
                                                        # the same at toy scale
    infill-train finetune --source ~/src/project --out models/project --minutes 20
                                                        # your own code (docs/finetune.md)

Under torchrun the `model` stage runs DistributedDataParallel (one process per GPU, or gloo on CPU).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import torch

from infill.models.native.model import InfillModel
from infill.models.native.tokenizer import CodeTokenizer, train_tokenizer
from infill.train.corpus import build_corpus, load_corpus
from infill.train.export import plot_loss
from infill.train.masking import EXAMPLE_KINDS, MaskMix, parse_mix
from infill.train.train import TrainConfig, train

TOKENIZER_SAMPLE_CHARS = 40_000_000


def stage_corpus(args) -> None:
    if (args.out / "corpus.jsonl.gz").exists() and not args.force:
        print(f"corpus: {args.out / 'corpus.jsonl.gz'} exists (use --force to rebuild)")
        return
    manifest = build_corpus(args.out, limit=args.limit_files)
    print(json.dumps(manifest["counts"]))


def stage_tokenizer(args) -> None:
    if (args.out / "tokenizer.json").exists() and not args.force:
        print(f"tokenizer: {args.out / 'tokenizer.json'} exists")
        return
    records = load_corpus(args.out / "corpus.jsonl.gz", split="train")
    random.Random(0).shuffle(records)
    texts, total = [], 0
    for record in records:
        if total > TOKENIZER_SAMPLE_CHARS:
            break
        texts.append(record.text)
        total += len(record.text)
    tok = train_tokenizer(texts, vocab_size=args.vocab)
    tok.save(args.out)
    print(f"tokenizer: {tok.vocab_size} tokens from {total / 1e6:.1f}M chars")


def stage_model(args) -> None:
    if args.init_from is not None:
        adopt_tokenizer(args.init_from, args.out)
    tok = CodeTokenizer.load(args.out)
    config = TrainConfig(
        out=args.out,
        corpus=args.out / "corpus.jsonl.gz",
        seq_len=args.seq_len,
        batch_size=args.batch_size or 32,
        steps=args.steps or 2000,
        lr=args.lr or 2e-3,
        minutes=args.minutes,
        threads=args.threads,
        workers=args.workers or 0,
        bf16=not args.fp32,
        init_from=args.init_from,
        mix=args.mix,
        model={"hidden_size": args.hidden, "num_layers": args.layers, "num_heads": args.heads},
    )
    checkpoint = train(config, tok)
    print(f"model: checkpoint in {checkpoint}")


def adopt_tokenizer(model_dir: Path, run: Path) -> None:
    """Weights only make sense with their own tokenizer: use the model's, refuse a different one."""
    theirs = (model_dir / "tokenizer.json").read_text()
    ours = run / "tokenizer.json"
    if ours.exists() and ours.read_text() != theirs:
        raise SystemExit(f"infill-train: {ours} differs from {model_dir / 'tokenizer.json'}; use a new --out")
    ours.write_text(theirs)


def stage_export(args) -> None:
    """Copy the checkpoint's weights (as float16 safetensors), config and tokenizer to --to."""
    checkpoint = args.out / "checkpoint"
    model = InfillModel.from_pretrained(checkpoint)
    args.to.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(args.to)
    CodeTokenizer.load(checkpoint).save(args.to)
    state = torch.load(checkpoint / "state.pt", weights_only=True)
    params = sum(p.numel() for p in model.parameters())
    info = {
        "params": params,
        "steps": state["step"],
        "tokens": state["tokens"],
        "seconds": state.get("seconds"),
    }
    (args.to / "training.json").write_text(json.dumps(info, indent=1))
    (args.to / "README.md").write_text(model_card(model, info, args.out))
    print(f"export: {params / 1e6:.2f}M params, {state['step']} steps -> {args.to}")


def model_card(model: InfillModel, info: dict, run: Path) -> str:
    """A short model card: what the shipped weights are and what they were trained on."""
    c = model.config
    manifest_path = run / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    counts = manifest.get("counts", {})
    heldout = ", ".join(sorted(manifest.get("heldout_packages", [])))
    hours = (info.get("seconds") or 0) / 3600
    device = "GPU" if torch.cuda.is_available() else "CPU"
    return f"""# infill default model

A bidirectional transformer denoiser (masked diffusion) for Python infilling, trained by this
project with `infill-train` (see the project README for the objective). Weights: float16
safetensors; loaded as float32.

- Architecture: hidden {c.hidden_size}, {c.num_layers} layers, {c.num_heads} heads, context \
{c.context_length} tokens, vocabulary {c.vocab_size} (byte-level BPE); {info["params"] / 1e6:.2f}M parameters.
- Training: {info["steps"]} steps, {info["tokens"] / 1e6:.1f}M tokens, {hours:.2f} h on {device}.
- Corpus: {counts.get("kept", "?")} Python files of the standard library and installed packages \
({counts.get("chars_train", 0) / 1e6:.0f}M characters), deduplicated; per-package licenses in the \
run's manifest.json.
- Held out (never trained on; used by `infill-bench quality`): {heldout or "see infill/train/corpus.py"}.
"""


def read_log(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


def stage_plot(args) -> None:
    import matplotlib

    matplotlib.use("Agg")

    if args.compare:
        plot_comparison([args.out, *args.compare], args.png or args.out / "loss_compare.png")
        return
    path = args.png or args.out / "loss.png"
    plot_loss(read_log(args.out), path)
    print(f"plot: {path}")


def plot_comparison(runs: list[Path], path: Path) -> None:
    """Held-out loss of several runs against training time (e.g. model sizes on one budget)."""
    import matplotlib.pyplot as plt

    plt.figure(figsize=(7, 4))
    for run in runs:
        rows = [r for r in read_log(run) if "heldout_loss" in r]
        model = json.loads((run / "train_config.json").read_text())["model"]
        label = f"{model['hidden_size']} x {model['num_layers']} ({run.name})"
        plt.plot([r["seconds"] / 3600 for r in rows], [r["heldout_loss"] for r in rows], label=label)
    plt.xlabel("training time (hours)")
    plt.ylabel("held-out diffusion loss")
    save_plot(plt, path)


def save_plot(plt, path: Path) -> None:
    plt.legend()
    plt.grid(alpha=0.3)
    plt.tight_layout()
    plt.savefig(path, dpi=120)
    print(f"plot: {path}")


def stage_recipe(args) -> None:
    from infill.train.recipe import recipe

    if args.threads:
        torch.set_num_threads(args.threads)
    workers, batch, limit = args.workers, args.batch_size, args.limit_files
    recipe(args.out, args.device, args.tiny, args.minutes, workers, batch, limit, init_from=args.init_from,
           grow_layers=args.grow_layers)  # fmt: skip


def stage_finetune(args) -> None:
    from infill.train import finetune

    if args.source is None:
        raise SystemExit("infill-train finetune: --source DIR is required")
    args.minutes = 20.0 if args.minutes is None else args.minutes
    args.batch_size = args.batch_size or finetune.FinetuneConfig.batch_size
    args.lr = args.lr or finetune.FinetuneConfig.lr
    code = finetune.main(args)
    if code:
        raise SystemExit(code)


STAGES = {
    "corpus": stage_corpus,
    "tokenizer": stage_tokenizer,
    "model": stage_model,
    "export": stage_export,
    "plot": stage_plot,
    "recipe": stage_recipe,
    "finetune": stage_finetune,
}


def mix_argument(text: str) -> MaskMix:
    try:
        return parse_mix(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infill-train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("stage", choices=[*STAGES, "all"])
    parser.add_argument("--out", type=Path, required=True, help="run directory (finetune: the new model's)")
    parser.add_argument("--to", type=Path, default=Path("infill/default_model"), help="export target")
    parser.add_argument("--force", action="store_true", help="rebuild corpus/tokenizer")
    parser.add_argument("--limit-files", type=int, default=None, help="corpus, recipe: keep at most N files")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="sequences a step (model: 32; finetune: 16; recipe: the largest that fits)",
    )
    parser.add_argument("--steps", type=int, default=None,
                        help="model: the schedule's last step (default 2000); finetune: stop after this "
                        "many steps even if --minutes are left")  # fmt: skip
    parser.add_argument("--lr", type=float, default=None, help="peak (model: 2e-3; finetune: 5e-4)")
    parser.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="model: wall-clock budget for this run; finetune: the training time, "
        "counted over resumed runs (default 20); recipe: a further command's wall time "
        "(default 3; the first command follows its 9-minute plan, or with --init-from "
        "takes this long, default the first command's plan)",
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--workers", type=int, default=None,
                        help="model, recipe: processes making training batches (0: the training process; "
                        "model: 0; recipe: all cores but two on a GPU); on a GPU, enough that it "
                        "never waits")  # fmt: skip
    parser.add_argument("--init-from", type=Path, default=None,
                        help="model: start from these weights (e.g. infill/default_model); --steps counts "
                        "on; recipe: a first command that trains on from this exported model in --minutes "
                        "(default: the first command's plan)")  # fmt: skip
    parser.add_argument("--grow-layers", type=int, default=None, metavar="N",
                        help="recipe, with --init-from: train on a deeper model of N layers grown from it "
                        "(its layers, then copies of its last ones: infill.train.grow)")  # fmt: skip
    default_mix = ",".join(f"{kind}={getattr(MaskMix(), kind):g}" for kind in EXAMPLE_KINDS)
    parser.add_argument("--mix", type=mix_argument, default=MaskMix(), metavar="KIND=W,...",
                        help="model, finetune: the kinds of training example and their weights, e.g. "
                        "line=0.1,lines=0.3,multi=0.2,window=0.4 (kinds not named: 0; default: "
                        f"{default_mix})")  # fmt: skip
    parser.add_argument("--fp32", action="store_true", help="train in float32 (default: bfloat16 autocast)")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--compare", type=Path, nargs="*", default=[], help="plot: more runs to compare")
    parser.add_argument("--png", type=Path, default=None, help="plot: where to write the PNG")
    recipe = parser.add_argument_group("recipe")
    recipe.add_argument("--device", default="cuda", help="cuda or cpu (default cuda)")
    recipe.add_argument("--tiny", action="store_true", help="the whole recipe at toy scale")
    tune = parser.add_argument_group("finetune")
    tune.add_argument("--source", type=Path, default=None, help="the repository to fine-tune on")
    tune.add_argument("--model", type=Path, default=None, help="model to start from (default: shipped)")
    tune.add_argument("--heldout", type=float, default=0.1, help="share of files held out (by path hash)")
    tune.add_argument("--kinds", default="line", help="held-out task kinds of the before/after table")
    tune.add_argument("--tasks", type=int, default=100, help="held-out tasks per kind, before and after")
    tune.add_argument("--seed", type=int, default=0, help="task selection seed")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stages = ["corpus", "tokenizer", "model", "export", "plot"] if args.stage == "all" else [args.stage]
    for stage in stages:
        STAGES[stage](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
