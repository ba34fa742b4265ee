"""The GPU recipe: corpus -> model -> export in one command that keeps to a time plan.

    infill-train recipe --device cuda --out /tmp/infill-gpu       # the whole job, 9 minutes
    infill-train recipe --device cuda --out /tmp/infill-gpu --minutes 3
                                                                  # optional: train on, 3 minutes
    infill-train recipe --device cuda --out /tmp/infill-gpu --init-from infill/default_model --minutes 9
                                                                  # or: train on from a shipped model
    infill-train recipe --device cpu --tiny --out /tmp/tiny       # the same code at toy scale

GPU time comes in leases of 15 minutes, machine start included, at most 10 minutes a command. So
one command does the whole job, following `GPU_PLAN`: phases with budgets that add up to 9
minutes. Each phase ends by its deadline (the sum of the budgets up to it, counted from the
process's start), whatever the phases before it took: a phase that runs long is cut, never the
export. The phases:

1. launch: the interpreter, torch and CUDA starting (before this code runs);
2. corpus: built from the Python sources of the machine it runs on (`infill.train.corpus`: the
   same filters, deduplication, license manifest and held-out packages as always; the per-file
   work in `--workers` processes); at its deadline the files done so far make the corpus;
3. probe: the shipped tokenizer, and the batch size: the largest of `BATCH_SIZES` whose training
   step fits in the GPU's memory (both kept in `recipe.json`);
4. train (`infill.train.train`: bfloat16 autocast, fused attention, `--workers` DataLoader
   processes making batches): the learning rate warms up and decays over the time left until
   the phase's deadline, and training stops there (at least one step, so there is something to
   export); a checkpoint is written every few minutes, on SIGTERM and at the end;
5. export: float16 safetensors shards of at most 15 MB with their index, config.json,
   tokenizer.json, training.json (with the training log and the seconds each phase took) and
   loss.png in `<out>/export`, at most 8 files: the files to bring back.

A further command on the same `--out` (the machine's disk) goes on from the checkpoint, with a
new, lower schedule over its own `--minutes` (`more_plan`: launch, train, export), and exports
again: every command leaves a usable model.

A first command may instead start from an exported model (`--init-from`, e.g. the shipped
one): the same phases in `--minutes` (`from_plan`; default: the first command's 530 s), its size,
context and tokenizer taken from that model, training going on from its weights, step count and
token count on the further commands' lower schedule; training.json keeps its log before the new
one. So every lent GPU can add to the model instead of training the same one again.

The model size comes from CPU measurements (`infill-bench sizes`, docs/gpu-recipe.md): the largest
whose one-line fill stays within about 400 ms on two cores with the context cache at a 512-token
canvas (half the autoregressive baseline's 0.8 s).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from infill.models.native import DEFAULT_MODEL_DIR
from infill.models.native.model import InfillConfig, InfillModel
from infill.models.native.tokenizer import CodeTokenizer
from infill.train.corpus import build_corpus, source_roots, stdlib_root
from infill.train.export import MAX_SHARD, export_model, read_log
from infill.train.train import TrainConfig, prior_training, train

# The largest size measured whose one-line fill at a 512-token canvas stays within about 400 ms on
# two cores with the context cache (`infill-bench sizes`; the figures are in docs/gpu-recipe.md).
RECIPE_MODEL = {"hidden_size": 384, "num_layers": 4, "num_heads": 6}
RECIPE_CONTEXT = 512
BATCH_SIZES = (256, 128, 64, 32)  # largest first; more than 256 x 512 tokens a step leaves too few steps
LR = 2e-3
MORE_LR = LR / 4  # a further command's peak: the first schedule has already decayed
TINY_MODEL = {"hidden_size": 64, "num_layers": 2, "num_heads": 2}
TINY_STEPS, TINY_MORE_STEPS = 6, 3
TINY_SHARD = "400KB"


# --------------------------------------------------------------------------- the time plan


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float  # its budget
    basis: str  # where the figure comes from


@dataclass(frozen=True)
class TimePlan:
    """The phases of one command, in order. A phase's deadline is the sum of the budgets up to and
    including it, counted from the command's start."""

    phases: tuple[Phase, ...]

    @property
    def seconds(self) -> float:
        return sum(phase.seconds for phase in self.phases)

    def deadline(self, name: str) -> float:
        total = 0.0
        for phase in self.phases:
            total += phase.seconds
            if phase.name == name:
                return total
        raise KeyError(f"the plan has no phase {name!r}")

    def describe(self) -> str:
        rows = [f"{p.name} {p.seconds:.0f} s (by {self.deadline(p.name):.0f} s)" for p in self.phases]
        return ", ".join(rows)


COMMAND_SECONDS = 9 * 60  # one command: under the 10 a command may take, with room for the copies

# The GPU figures are estimates from CPU measurements (docs/gpu-recipe.md, "The time plan") until a
# GPU run reports its own: training.json's "phases" holds the seconds each phase took.
GPU_PLAN = TimePlan(
    (
        Phase("launch", 20, "python and the imports: 3.7 s on the CPU machine; then the CUDA context"),
        Phase("corpus", 120, "215 s in one CPU process: 18 s serial, 197 s over 14 processes: ~32 s, x2"),
        Phase("probe", 20, "a training step at batch 256 x 512 and the CUDA kernels' first use"),
        Phase("train", 340, "reading the corpus (15 s on the CPU), the DataLoader workers, steps to the end"),
        Phase("export", 30, "the last checkpoint (0.2 s on the CPU), the export (0.6 s), workers stopping"),
    )
)


def more_plan(minutes: float) -> TimePlan:
    """A further command of `minutes` on the same machine: train on, then export."""
    launch, export = GPU_PLAN.phases[0], GPU_PLAN.phases[-1]
    train = 60 * minutes - launch.seconds - export.seconds
    if train < 30:
        raise SystemExit(f"infill-train recipe: {minutes} minutes leave no time to train (at least 1.4)")
    return TimePlan((launch, Phase("train", train, "the rest of --minutes"), export))


def from_plan(minutes: float) -> TimePlan:
    """A first command that trains on from an exported model in `minutes`: GPU_PLAN's phases, its
    training the time the others leave."""
    others = sum(phase.seconds for phase in GPU_PLAN.phases if phase.name != "train")
    train = 60 * minutes - others
    if train < 30:
        least = (others + 30) / 60
        raise SystemExit(
            f"infill-train recipe: {minutes} minutes leave no time to train (at least {least:.1f})"
        )
    phases = (
        Phase("train", train, "the rest of --minutes") if p.name == "train" else p for p in GPU_PLAN.phases
    )
    return TimePlan(tuple(phases))


class Deadlines:
    """The plan against a clock: how long a phase has left, and the seconds each one took."""

    def __init__(self, plan: TimePlan, clock: Callable[[], float] = time.time, origin: float | None = None):
        self.plan, self.clock = plan, clock
        if origin is None:  # the command's start: the process's, counted at most as the first phase
            #   (the launch); a long-lived process (a test session) calling recipe() starts it now
            origin = clock() - min(process_age(), plan.phases[0].seconds)
        self.origin = origin
        self.took: dict[str, float] = {}

    def left(self, name: str) -> float:
        return self.origin + self.plan.deadline(name) - self.clock()

    def passed(self, name: str) -> bool:
        return self.left(name) <= 0

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.plan.deadline(name)  # a phase the plan does not have is an error
        began = self.clock()
        yield
        self.took[name] = round(self.clock() - began, 1)
        left = self.left(name)
        when = f"{abs(left):.0f} s {'before' if left >= 0 else 'after'} its deadline"
        print(f"recipe: {name} took {self.took[name]:.0f} s, ended {when}", flush=True)


def process_age() -> float:
    """Seconds since this process started (Linux's /proc; 0 where there is none)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))


# --------------------------------------------------------------------------- the recipe


@dataclass
class RecipeSettings:
    """What a recipe run trains; written to recipe.json by the first command, reused by the next."""

    device: str
    tiny: bool
    seq_len: int
    batch_size: int
    lr: float
    steps: int
    model: dict = field(default_factory=dict)
    init_from: str | None = None  # the exported model training started from (None: from scratch)

    @classmethod
    def load(cls, path: Path) -> RecipeSettings:
        return cls(**json.loads(path.read_text()))


def recipe(
    out: Path,
    device: str = "cuda",
    tiny: bool = False,
    minutes: float | None = None,
    workers: int | None = None,
    batch_size: int | None = None,
    limit_files: int | None = None,
    deadlines: Deadlines | None = None,
    init_from: Path | None = None,
    grow_layers: int | None = None,
) -> Path:
    """The first command (no checkpoint in `out`; from scratch, or from the exported model
    `init_from`, grown to `grow_layers` layers if given: infill.train.grow) or a further one of
    `minutes`; returns `out/export`."""
    if grow_layers is not None and init_from is None:
        raise SystemExit("infill-train recipe: --grow-layers grows the model of --init-from; give both")
    further = (out / "checkpoint" / "state.pt").exists()
    if minutes is not None and not further and init_from is None:
        plan = f"GPU_PLAN, {GPU_PLAN.seconds / 60:.0f} minutes"
        raise SystemExit(
            f"infill-train recipe: the first command follows {plan}; --minutes is for a further one"
            " (or for one that starts --init-from a model)"
        )
    if init_from is not None and not further:
        init_from = check_init_model(init_from, tiny)
    elif init_from is not None:
        print(f"recipe: {out} holds a checkpoint: training goes on from it, not from {init_from}", flush=True)
        init_from = None
    if deadlines is None:
        if further:
            deadlines = Deadlines(more_plan(minutes or 3.0))
        elif init_from is not None:
            deadlines = Deadlines(from_plan(minutes or GPU_PLAN.seconds / 60))
        else:
            deadlines = Deadlines(GPU_PLAN)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("infill-train recipe: --device cuda, torch sees no GPU (or: --device cpu --tiny)")
    if workers is None:  # on a GPU machine all cores but two make batches; on a CPU they train
        workers = 0 if tiny or not device.startswith("cuda") else max(1, (os.cpu_count() or 4) - 2)
    which = "a further command" if further else "the first command"
    print(f"recipe: {which}; {deadlines.plan.describe()}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    if not further:
        with deadlines.phase("corpus"):
            build_corpus_once(out, tiny, workers, limit_files, lambda: deadlines.passed("corpus"))
        with deadlines.phase("probe"):
            settings = recipe_settings(out, device, tiny, batch_size, init_from, grow_layers)
    else:
        settings = recipe_settings(out, device, tiny, batch_size)
    config = train_config(out, settings, workers, further, stop_at=time.time() + deadlines.left("train"))
    with deadlines.phase("train"):
        if device.startswith("cuda"):
            torch.backends.cuda.matmul.allow_tf32 = True
        train(config, CodeTokenizer.load(out))
    state = torch.load(out / "checkpoint" / "state.pt", weights_only=True, map_location="cpu")
    complete = state["step"] >= config.steps or deadlines.passed("train")  # not stopped by SIGTERM
    with deadlines.phase("export"):
        target = export(out, settings, state, complete, deadlines.took)
    return target


def check_init_model(folder: Path, tiny: bool) -> Path:
    """The absolute path of an exported native model to start from, or a clear refusal."""
    from infill.models.model_info import native_model_problem

    problem = native_model_problem(folder)
    if problem:
        raise SystemExit(f"infill-train recipe: --init-from {folder}: {problem}")
    if (
        not tiny
        and json.loads((folder / "config.json").read_text())["hidden_size"] <= TINY_MODEL["hidden_size"]
    ):
        raise SystemExit(f"infill-train recipe: --init-from {folder} is a tiny model; add --tiny")
    return folder.resolve()


def build_corpus_once(out: Path, tiny: bool, workers: int, limit: int | None, deadline) -> None:
    """The corpus of this machine's Python sources (the standard library alone when tiny), once."""
    if (out / "corpus.jsonl.gz").exists():
        return
    roots = [stdlib_root()] if tiny else source_roots()
    limit = limit or (40 if tiny else None)
    manifest = build_corpus(out, roots=roots, limit=limit, workers=max(1, workers), deadline=deadline)
    print(f"recipe: corpus {json.dumps(manifest['counts'])}", flush=True)


def train_config(
    out: Path, settings: RecipeSettings, workers: int, further: bool, stop_at: float
) -> TrainConfig:
    """Training until the train phase's deadline, `stop_at` (tiny: also until a few steps): the
    first command's schedule from step 0; a further command's a new, lower one from the checkpoint,
    and so does a first command that starts from an exported model (`settings.init_from`)."""
    init_from = None if further or settings.init_from is None else Path(settings.init_from)
    steps = settings.steps
    if settings.tiny and (further or init_from is not None):
        if further:
            state = torch.load(out / "checkpoint" / "state.pt", weights_only=True, map_location="cpu")
        else:
            state = prior_training(init_from)
        steps = state["step"] + TINY_MORE_STEPS
    lower = further or init_from is not None
    return TrainConfig(
        out=out,
        corpus=out / "corpus.jsonl.gz",
        seq_len=settings.seq_len,
        batch_size=settings.batch_size,
        steps=steps,
        lr=MORE_LR if lower else settings.lr,
        warmup=5 if settings.tiny else (50 if lower else 200),
        stop_at=stop_at,  # a phase already out of time still makes one step
        new_schedule=further,
        checkpoint_every=10**9,  # by time instead: a GPU makes many steps a second
        checkpoint_minutes=3,
        eval_every=2 if settings.tiny else 100,
        device=settings.device,
        workers=workers,
        model=settings.model,
        init_from=init_from,
    )


def recipe_settings(
    out: Path,
    device: str,
    tiny: bool,
    batch_size: int | None,
    init_from: Path | None = None,
    grow_layers: int | None = None,
) -> RecipeSettings:
    """The tokenizer (the shipped one, or `init_from`'s) into `out`, and what to train: read from
    recipe.json, else decided (the size: the recipe's or `init_from`'s; the batch size by a probe on
    the GPU) and written there."""
    tokenizer_path = out / "tokenizer.json"
    if not tokenizer_path.exists():
        shutil.copyfile((init_from or DEFAULT_MODEL_DIR) / "tokenizer.json", tokenizer_path)
    path = out / "recipe.json"
    if path.exists():
        settings = RecipeSettings.load(path)
        if settings.tiny != tiny:
            raise SystemExit(f"infill-train recipe: {out} holds a {'tiny' if settings.tiny else 'full'} run")
        settings.device = device  # the same run may go on elsewhere (e.g. checked on a CPU)
        return settings
    if init_from is not None:
        tok = CodeTokenizer.load(out)
        settings = settings_from_model(init_from, device, tiny, batch_size, tok, grow_layers)
    elif tiny:
        settings = RecipeSettings(device, True, 128, batch_size or 4, LR, TINY_STEPS, TINY_MODEL)
    else:
        model = dict(RECIPE_MODEL)
        if batch_size is None:
            batch_size = probe_batch_size(CodeTokenizer.load(out), model, RECIPE_CONTEXT, device)
        settings = RecipeSettings(device, False, RECIPE_CONTEXT, batch_size, LR, 10**9, model)
    path.write_text(json.dumps(asdict(settings), indent=1))
    print(f"recipe: {json.dumps(asdict(settings))}", flush=True)
    return settings


def settings_from_model(
    folder: Path,
    device: str,
    tiny: bool,
    batch_size: int | None,
    tok: CodeTokenizer,
    grow_layers: int | None = None,
) -> RecipeSettings:
    """What to train when starting from the exported model in `folder`: its size (with
    `grow_layers` layers, at least its own) and context."""
    config = json.loads((folder / "config.json").read_text())
    model = {
        name: config[name]
        for name in ("hidden_size", "num_layers", "num_heads", "mlp_ratio")
        if name in config
    }
    if grow_layers is not None:
        if grow_layers < model["num_layers"]:
            raise SystemExit(
                f"infill-train recipe: --grow-layers {grow_layers}: {folder} has "
                f"{model['num_layers']} layers already"
            )
        model["num_layers"] = grow_layers
    seq_len = config["context_length"]
    if tiny:
        return RecipeSettings(device, True, seq_len, batch_size or 4, MORE_LR, TINY_STEPS, model, str(folder))
    if batch_size is None:
        batch_size = probe_batch_size(tok, model, seq_len, device)
    return RecipeSettings(device, False, seq_len, batch_size, MORE_LR, 10**9, model, str(folder))


def probe_batch_size(tok: CodeTokenizer, model_args: dict, seq_len: int, device: str) -> int:
    """The largest of BATCH_SIZES whose training step (forward, backward, AdamW) fits in the GPU
    with a quarter of its memory to spare; on a CPU the smallest."""
    if not device.startswith("cuda"):
        return BATCH_SIZES[-1]
    config = InfillConfig(vocab_size=tok.vocab_size, context_length=seq_len, **model_args)
    total = torch.cuda.get_device_properties(device).total_memory
    for size in BATCH_SIZES:
        model = InfillModel(config).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        try:
            torch.cuda.reset_peak_memory_stats(device)
            ids = torch.randint(3, tok.vocab_size, (size, seq_len), device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(ids, torch.ones_like(ids), labels=ids).loss
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize(device)
            fits = torch.cuda.max_memory_allocated(device) < 0.75 * total
        except torch.OutOfMemoryError:
            fits = False
        except Exception as error:  # noqa: BLE001 - a probe that fails otherwise must not cost the lease
            print(f"recipe: the batch probe failed ({error!r}); batch {BATCH_SIZES[1]}", flush=True)
            return BATCH_SIZES[1]
        del model, optimizer
        torch.cuda.empty_cache()
        if fits:
            print(f"recipe: batch {size} x {seq_len} fits", flush=True)
            return size
    return BATCH_SIZES[-1]


def export(
    out: Path, settings: RecipeSettings, state: dict, complete: bool, phases: dict[str, float]
) -> Path:
    """Export the checkpoint (its trainer `state`) to out/export; what the model card reads goes in
    training.json, with whether training ran to its end and the seconds each phase took."""
    checkpoint = out / "checkpoint"
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["counts"]
    device = torch.cuda.get_device_name() if settings.device.startswith("cuda") else "CPU"
    log = read_log(out)
    origin = f"infill-train recipe, {state['seconds'] / 60:.1f} min on {device}"
    if settings.init_from is not None:  # its training before this run: the log and where it came from
        prior = json.loads((Path(settings.init_from) / "training.json").read_text())
        minutes = (state["seconds"] - (prior.get("seconds") or 0.0)) / 60
        before = f"{prior.get('steps', 0)} steps of: {prior.get('origin', settings.init_from)}"
        layers = json.loads((Path(settings.init_from) / "config.json").read_text())["num_layers"]
        if settings.model.get("num_layers", layers) != layers:  # --grow-layers (infill.train.grow)
            grown = settings.model["num_layers"]
            before = f"{layers} layers grown to {grown} (infill.train.grow) from {before}"
        origin = f"infill-train recipe, {minutes:.1f} min on {device}, trained on from {before}"
        first = log[0]["step"] if log else state["step"]
        log = [row for row in prior.get("log", []) if row.get("step", 0) < first] + log
    info = {
        "name": "infill recipe model" + (" (tiny)" if settings.tiny else ""),
        "origin": origin,
        "data": f"{counts.get('kept', 0)} Python files of the standard library and installed packages "
        f"({counts.get('chars_train', 0) / 1e6:.0f}M characters), deduplicated; held out: "
        + ", ".join(manifest["heldout_packages"]),
        "steps": state["step"],
        "tokens": state["tokens"],
        "seconds": state["seconds"],
        "batch_size": settings.batch_size,
        "complete": complete,
        "phases": phases,
        "licenses": manifest.get("licenses", {}),
        "sources": manifest.get("sources", {}),  # per package: origin, version, license (the manifest stays)
    }
    shard = TINY_SHARD if settings.tiny else MAX_SHARD  # tiny: shards all the same, to check them
    target = export_model(checkpoint, out / "export", info, log=log, shard=shard)
    files = sorted(f.name for f in target.iterdir())
    print(f"recipe: exported {state['step']} steps, {state['tokens'] / 1e6:.1f}M tokens -> {target}: "
          f"{', '.join(files)}", flush=True)  # fmt: skip
    return target
