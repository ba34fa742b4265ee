"""Fine-tune a native model on your own repository, and measure what it gained.

    infill-train finetune --source ~/src/project --out ~/models/project --minutes 20
    infill --model ~/models/project file.py --lines 10-12

The Python files under `--source` (those git tracks or would track: `git ls-files` in a git
repository, else the .gitignore files read here) are the corpus, less vendored and generated ones
(`vendor/`, `third_party/`, `site-packages/`, ..., `*_pb2.py`, files whose head says they are
generated, minified or huge files). A share of the files (`--heldout`, chosen by a hash of each
path, so the same files every time) is held out: never trained on, used for the held-out loss and
for the before/after table, which fills single lines (`--kinds`: also blocks, bodies, ...) of
the held-out files with the model before and after (`infill.bench`'s tasks and scores: exact
match, edit similarity, parse rate), prints it and writes it to `finetune.json` in the model
directory.

Training goes on from the model's weights with its tokenizer (`infill.train.train`, a learning
rate that decays over the `--minutes`), in a work directory beside the target,
`.<name>.partial/`, that holds the corpus, checkpoints and log: run the same command again after
an interruption and it resumes. The model directory itself appears (by a rename) only when it is
complete and measured, so a failed or interrupted run never leaves a half-written model where
`--model` or the language server's `modelPath` would find it.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from infill.errors import InputError, ModelError
from infill.models.model_info import model_card, native_model_problem
from infill.models.native import DEFAULT_MODEL_DIR
from infill.models.native.tokenizer import CodeTokenizer
from infill.train.corpus import CorpusFile
from infill.train.export import export_model, read_log
from infill.train.masking import MaskMix
from infill.train.repository import HELDOUT_SHARE, RepoFiles, collect
from infill.train.train import TrainConfig, finished, prior_training, train


@dataclass
class FinetuneConfig:
    source: Path
    out: Path
    model: Path = DEFAULT_MODEL_DIR
    minutes: float = 20.0
    heldout: float = HELDOUT_SHARE
    kinds: tuple[str, ...] = ("line",)
    tasks: int = 100  # held-out tasks per kind, before and after
    seed: int = 0
    batch_size: int = 16
    lr: float = 5e-4
    threads: int | None = None
    max_steps: int | None = None  # stop after this many steps even if time is left
    mix: MaskMix = field(default_factory=MaskMix)  # the kinds of training example


def write_corpus(files: RepoFiles, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as out:
        for record in files.train + files.heldout:
            out.write(json.dumps(record.__dict__) + "\n")
    tmp.replace(path)


# --------------------------------------------------------------------------- before and after


def heldout_table(model_dir: Path, heldout: list[CorpusFile], config: FinetuneConfig, desc: str) -> dict:
    """Fill held-out single lines and blocks with the model; exact match, edit similarity, parse rate."""
    from tqdm import tqdm

    from infill.bench.quality import parses, score_task, summarize
    from infill.bench.tasks import make_tasks
    from infill.models.native import load_backend
    from infill.options import InfillOptions

    backend = load_backend(model_dir, threads=config.threads)
    sources = [(f.path, f.text) for f in heldout if parses(f.text)]
    tasks = make_tasks(sources, list(config.kinds), config.tasks, seed=config.seed)
    scores = [score_task(backend, task, InfillOptions()) for task in tqdm(tasks, desc=desc, unit="task")]
    table = summarize(scores)
    return {kind: {k: row[k] for k in ("tasks", "exact_match", "edit_similarity", "parses", "mean_ms")}
            for kind, row in table.items()}  # fmt: skip


def format_comparison(before: dict, after: dict) -> str:
    lines = [f"{'kind':<8} {'tasks':>5}  {'exact before -> after':>22}  {'edit-sim before -> after':>24}  "
             f"{'parses before -> after':>22}"]  # fmt: skip
    for kind, b in before.items():
        a = after.get(kind, {})
        lines.append(
            f"{kind:<8} {b['tasks']:>5}  {b['exact_match']:>9.1%} -> {a.get('exact_match', 0):>9.1%}  "
            f"{b['edit_similarity']:>11.3f} -> {a.get('edit_similarity', 0):>9.3f}  "
            f"{b['parses']:>9.1%} -> {a.get('parses', 0):>9.1%}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- the run


def work_dir(out: Path) -> Path:
    return out.with_name(f".{out.name}.partial")


def finetune(config: FinetuneConfig, report=print) -> Path | None:
    """Fine-tune, measure, and move the finished model directory to `config.out` (returned; None
    if training was stopped early). Re-entrant: resumes an interrupted run; a finished one is
    reported, not redone."""
    out = config.out
    if (out / "finetune.json").is_file():
        result = json.loads((out / "finetune.json").read_text())
        report(f"finetune: {out} is finished already")
        report(format_comparison(result["before"], result["after"]))
        return out
    if out.exists():
        raise InputError(f"{out} exists and is not a finished fine-tuned model; choose another --out")
    problem = native_model_problem(config.model)
    if problem:
        raise ModelError(problem)
    if not 0 < config.heldout < 1:
        raise InputError(f"--heldout must be between 0 and 1 (got {config.heldout})")
    work = work_dir(out)
    corpus = work / "corpus.jsonl.gz"
    if corpus.exists():
        sources = json.loads((work / "sources.json").read_text())
        files = RepoFiles([], [], sources["skipped"])
        from infill.train.corpus import load_corpus

        files.train, files.heldout = load_corpus(corpus, "train"), load_corpus(corpus, "heldout")
        report(f"finetune: resuming in {work}")
    else:
        files = collect(config.source, config.heldout, report)  # raises before anything is written
        work.mkdir(parents=True, exist_ok=True)
        write_corpus(files, corpus)
        listing = {"source": str(config.source.resolve()), "train": [f.path for f in files.train],
                   "heldout": [f.path for f in files.heldout], "skipped": files.skipped}  # fmt: skip
        (work / "sources.json").write_text(json.dumps(listing, indent=1))
    skipped = ", ".join(f"{len(v)} {k}" for k, v in files.skipped.items()) or "none"
    report(f"finetune: {len(files.train)} to train on, {len(files.heldout)} held out, skipped {skipped}")
    tok = CodeTokenizer.load(config.model)
    tok.save(work)
    before_path = work / "before.json"
    if not before_path.exists():
        before_path.write_text(json.dumps(heldout_table(config.model, files.heldout, config, "before")))
    context = json.loads((config.model / "config.json").read_text()).get("context_length", 256)
    train_config = TrainConfig(
        out=work,
        corpus=corpus,
        seq_len=context,
        batch_size=config.batch_size,
        steps=10**9 if config.max_steps is None else prior_training(config.model)["step"] + config.max_steps,
        lr=config.lr,
        warmup=20,
        budget_minutes=config.minutes,
        checkpoint_every=10**9,
        checkpoint_minutes=2,
        eval_every=10,
        threads=config.threads,
        device="cpu",
        init_from=config.model,
        model={},
        mix=config.mix,
    )
    if not finished(train_config):
        cpu = time.process_time()
        train(train_config, tok)
        (work / "cpu_seconds.txt").write_text(str(time.process_time() - cpu + cpu_seconds(work)))
    if not finished(train_config):
        report(f"finetune: stopped before its {config.minutes:g} minutes; run the same command to resume")
        return None
    model_dir = export(work, config, files)
    after = heldout_table(model_dir, files.heldout, config, "after")
    before = json.loads(before_path.read_text())
    result = {"source": str(config.source.resolve()), "base": str(config.model), "minutes": config.minutes,
              "cpu_seconds": cpu_seconds(work), "threads": torch_threads(config.threads),
              "heldout_files": [f.path for f in files.heldout], "kinds": list(config.kinds),
              "tasks": config.tasks, "seed": config.seed, "mix": asdict(config.mix),
              "before": before, "after": after}  # fmt: skip
    (model_dir / "finetune.json").write_text(json.dumps(result, indent=1))
    model_dir.rename(out)
    shutil.rmtree(work, ignore_errors=True)
    report(format_comparison(before, after))
    report(f"finetune: model in {out} (use --model {out})")
    return out


def cpu_seconds(work: Path) -> float:
    """CPU seconds this fine-tune's training has had so far (over resumed runs): on a busy
    machine far less than its minutes times its threads."""
    path = work / "cpu_seconds.txt"
    return float(path.read_text()) if path.is_file() else 0.0


def torch_threads(threads: int | None) -> int:
    import torch

    return threads or torch.get_num_threads()


def export(work: Path, config: FinetuneConfig, files: RepoFiles) -> Path:
    import torch

    state = torch.load(work / "checkpoint" / "state.pt", weights_only=True, map_location="cpu")
    base = model_card(config.model)
    chars = sum(len(f.text) for f in files.train)
    source = config.source.resolve()
    log = read_log(work)
    info = {
        "name": f"{base.name}, fine-tuned on {source.name}",
        "origin": f"infill-train finetune --source {source} ({config.minutes:g} min) from {base.path}",
        "data": f"{base.data}; then {len(files.train)} Python files of {source} "
        f"({chars / 1e6:.2f}M characters; {len(files.heldout)} held out)",
        "base": base.name,
        "steps": state["step"],
        "tokens": state["tokens"],
        "seconds": state["seconds"],
        "finetune_steps": state["step"] - state.get("schedule_start", 0),
        "finetune_seconds": state["seconds"] - state.get("schedule_seconds", 0.0),
    }
    return export_model(work / "checkpoint", work / "model", info, log=log)


def main(args) -> int:
    config = FinetuneConfig(
        source=args.source,
        out=args.out,
        model=args.model or DEFAULT_MODEL_DIR,
        minutes=args.minutes,
        heldout=args.heldout,
        kinds=tuple(args.kinds.split(",")),
        tasks=args.tasks,
        seed=args.seed,
        batch_size=args.batch_size,
        lr=args.lr,
        threads=args.threads,
        max_steps=args.steps,
        mix=args.mix,
    )
    try:
        done = finetune(config)
    except InputError as error:
        print(f"infill-train: error: {error}", file=sys.stderr)
        return 2
    except ModelError as error:
        print(f"infill-train: model error: {error}", file=sys.stderr)
        return 3
    return 0 if done else 1
