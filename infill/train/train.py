"""Train the denoiser with the masked-diffusion objective on infill-shaped examples.

One loop for one CPU, one GPU, or many under `torchrun` (DistributedDataParallel: each rank
draws its own examples from a rank-seeded generator; rank 0 logs and checkpoints). Examples are
made on the CPU (tokenizing, masking); `workers` > 0 makes them in that many DataLoader
processes, each with its own generator, so that a GPU is not kept waiting for them.
Checkpoints are written atomically every `checkpoint_every` steps (and every
`checkpoint_minutes`, and when the run stops: its time is up or it got SIGTERM) into
`<out>/checkpoint/` (model as safetensors, tokenizer.json, trainer state) and training resumes
from there.
Two time limits: `minutes` bounds this run's wall time; `budget_minutes` bounds the training
time of the whole schedule, counted across resumed runs, and then the learning rate decays over
that time rather than over `steps` (a run measured in minutes, not steps: the GPU recipe and
fine-tuning). `stop_at` sets that budget from a deadline: the time left until it once the data
is loaded (the GPU recipe's train phase).
A resumed run can also start a new schedule (`new_schedule`: a further command of the GPU recipe,
after the first one's schedule has decayed). A run can start from trained weights (`init_from`,
e.g. the shipped default model): a fresh optimizer and learning-rate schedule, with steps, tokens
and seconds counted on from the model's training.json so the totals stay honest.
The log is `<out>/log.jsonl` (train loss, held-out loss, tokens, seconds).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm import tqdm

from infill.models.native.model import InfillConfig, InfillModel
from infill.models.native.tokenizer import CodeTokenizer
from infill.train.corpus import CorpusFile, load_corpus
from infill.train.grow import grown
from infill.train.masking import IGNORE, MaskMix, collate, make_example

VISIBLE_WEIGHT = 0.5  # loss weight of visible (possibly corrupted) positions vs masked ones


@dataclass
class TrainConfig:
    out: Path
    corpus: Path
    seq_len: int = 256
    batch_size: int = 32
    steps: int = 2000
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    checkpoint_every: int = 50
    eval_every: int = 50
    minutes: float | None = None  # stop (after a checkpoint) when this run has taken this much wall time
    budget_minutes: float | None = None  # stop when the schedule has trained this long (across resumes)
    checkpoint_minutes: float | None = None  # also checkpoint when this much time passed since the last
    device: str | None = None  # "cpu", "cuda", ... (default: cuda if there is one)
    threads: int | None = None
    workers: int = 0  # processes making batches (0: the training process itself)
    seed: int = 0
    bf16: bool = True  # autocast matmuls to bfloat16 (about 1.7x faster on CPUs with AVX512-BF16)
    init_from: Path | None = None  # start from these weights (no checkpoint yet); `steps` counts on
    new_schedule: bool = False  # resuming a checkpoint: a new warmup and decay from its step on
    stop_at: float | None = None  # a time.time(): the budget is the time until then (not budget_minutes)
    model: dict = field(default_factory=lambda: {"hidden_size": 256, "num_layers": 6, "num_heads": 8})
    mix: MaskMix = field(default_factory=MaskMix)


def learning_rate(step: int, config: TrainConfig, first: int = 0, elapsed: float | None = None) -> float:
    """Warmup then cosine decay, over the steps from `first` (where this schedule began) to `steps`,
    or, with a `budget_minutes`, over the time: `elapsed` seconds of it are gone."""
    step, total = step - first, config.steps - first
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = min(1.0, (step - config.warmup) / max(1, total - config.warmup))
    if config.budget_minutes is not None and elapsed is not None:
        progress = min(1.0, elapsed / (60 * config.budget_minutes))
    cosine = 0.5 * (1 + math.cos(math.pi * progress))
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine)


class DiffusionLoss(torch.nn.Module):
    """The training objective as a module (so DistributedDataParallel can wrap it).

    Cross-entropy at masked positions, plus a lighter term at visible target positions. The
    output layer runs only where there is a target: most positions are context without a loss."""

    def __init__(self, model: InfillModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, targets, masked):
        hidden = self.model.hidden_states(input_ids, attention_mask)
        has_target = targets != IGNORE
        logits = self.model.lm_head(hidden[has_target]).float()
        per_token = F.cross_entropy(logits, targets[has_target], reduction="none")
        masked = masked[has_target]
        loss = per_token[masked].sum() / masked.sum().clamp(min=1)
        if (~masked).any():
            loss = loss + VISIBLE_WEIGHT * per_token[~masked].mean()
        return loss


def sample_batch(rng, records, weights, tok, config: TrainConfig, device):
    picked = rng.choices(records, weights=weights, k=config.batch_size)
    examples = [make_example(rng, r, tok, config.seq_len, config.mix) for r in picked]
    return {k: v.to(device) for k, v in collate(examples, tok.pad_id).items()}


class BatchStream(torch.utils.data.IterableDataset):
    """Endless training batches (files drawn in proportion to `weights`). In a DataLoader worker
    the generator is seeded with `seed` and the worker's number, so workers draw different
    examples; in the training process itself (no workers) with `seed` alone."""

    def __init__(self, records, weights, tok: CodeTokenizer, config: TrainConfig, seed: int):
        self.records, self.weights, self.tok, self.config, self.seed = records, weights, tok, config, seed

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        rng = random.Random(self.seed if worker is None else f"{self.seed}:{worker.id}")
        while True:
            yield sample_batch(rng, self.records, self.weights, self.tok, self.config, "cpu")


def batches(records, weights, tok: CodeTokenizer, config: TrainConfig, seed: int):
    """An iterator of training batches, made by `config.workers` processes (or this one)."""
    stream = BatchStream(records, weights, tok, config, seed)
    if config.workers == 0:
        return iter(stream)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the workers are forked
    loader = torch.utils.data.DataLoader(
        stream,
        batch_size=None,
        num_workers=config.workers,
        persistent_workers=True,
        prefetch_factor=4,
        pin_memory=config.device != "cpu" and torch.cuda.is_available(),  # faster copies to the GPU
    )
    return iter(loader)


def save_checkpoint(directory: Path, model, tok, optimizer, state: dict) -> None:
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save(tmp)
    torch.save({"optimizer": optimizer.state_dict(), **state}, tmp / "state.pt")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


class StopSignal:
    """Turns SIGTERM (a job scheduler's or `timeout`'s stop) into a flag the loop checks, so the
    run checkpoints and exits cleanly; the old handler is restored afterwards."""

    def __init__(self):
        self.raised = False
        self.previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self.handle)
        return self

    def handle(self, signum, frame):
        self.raised = True

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def pick_device(name: str | None) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if name is None:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(f"cuda:{local_rank}" if name == "cuda" else name)


def prior_training(model_dir: Path) -> dict:
    """Steps, tokens and seconds a model directory says it was trained for (zeros if it says nothing)."""
    path = model_dir / "training.json"
    prior = json.loads(path.read_text()) if path.is_file() else {}
    seconds = prior.get("seconds") or 0.0
    return {"step": prior.get("steps", 0), "tokens": prior.get("tokens", 0), "seconds": seconds}


def train(config: TrainConfig, tok: CodeTokenizer) -> Path:
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank() if distributed else 0
    device = pick_device(config.device)
    if config.threads:
        torch.set_num_threads(config.threads)
    bf16 = config.bf16 and bf16_pays_off(device)
    if config.bf16 and not bf16 and rank == 0:
        print("train: bfloat16 autocast is slower than float32 on this CPU (no native bfloat16): float32")
    torch.manual_seed(config.seed)

    corpus: list[CorpusFile] = load_corpus(config.corpus)  # read once: 15 s for 240M characters
    records = [r for r in corpus if r.split == "train"]
    heldout = [r for r in corpus if r.split == "heldout"]
    weights = [min(len(r.text), 20_000) for r in records]
    checkpoint = config.out / "checkpoint"
    state = {"step": 0, "tokens": 0, "seconds": 0.0}
    if (checkpoint / "model.safetensors").exists():
        model = InfillModel.from_pretrained(checkpoint)
        state = torch.load(checkpoint / "state.pt", weights_only=True, map_location="cpu")
        if config.new_schedule:  # weights and optimizer go on; the schedule starts here
            state["schedule_start"], state["schedule_seconds"] = state["step"], state["seconds"]
    elif config.init_from is not None:
        model = InfillModel.from_pretrained(config.init_from).float()
        if config.model.get("num_layers", model.config.num_layers) > model.config.num_layers:
            model = grown(model, config.model["num_layers"])  # infill-train recipe --grow-layers
        state = prior_training(config.init_from)
        state["schedule_start"], state["schedule_seconds"] = state["step"], state["seconds"]
    else:
        model_config = InfillConfig(vocab_size=tok.vocab_size, context_length=config.seq_len, **config.model)
        model = InfillModel(model_config)
    model.to(device).train()
    plain_objective = DiffusionLoss(model)  # for evaluation: no collective calls on one rank
    objective = plain_objective
    if distributed:
        objective = torch.nn.parallel.DistributedDataParallel(plain_objective)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        betas=(0.9, 0.95),
        fused=device.type == "cuda",
    )
    if "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
    eval_rng = random.Random(12345)
    eval_batch = sample_batch(eval_rng, heldout, [1] * len(heldout), tok, config, device) if heldout else None

    # Each rank draws its own examples, and a resumed run fresh ones (seeded by the step).
    stream = batches(records, weights, tok, config, seed=config.seed * 1000 + rank + state["step"])
    start_step, tokens, started = state["step"], state["tokens"], time.time()
    first = state.get("schedule_start", 0)
    seconds_before = state.get("seconds", 0.0)
    schedule_seconds = state.get("schedule_seconds", 0.0)  # the run's seconds when this schedule began

    def elapsed() -> float:
        """Seconds of training in this schedule, over all runs."""
        return seconds_before + time.time() - started - schedule_seconds

    if config.stop_at is not None:  # the time until then is the schedule's budget (at least a step)
        config = replace(config, budget_minutes=(elapsed() + max(1e-3, config.stop_at - time.time())) / 60)
    budget = None if config.budget_minutes is None else 60 * config.budget_minutes
    fresh = not (config.out / "log.jsonl").exists()
    log = (config.out / "log.jsonl").open("a") if rank == 0 else None
    if log and fresh and eval_batch is not None:  # where the held-out loss starts from
        value = heldout_loss(plain_objective, eval_batch, device, bf16)
        record = {"step": start_step, "tokens": tokens, "seconds": seconds_before, "heldout_loss": value}
        log.write(json.dumps(record) + "\n")
    if budget is None:
        bar = tqdm(total=config.steps, initial=start_step, disable=rank != 0, desc="train", unit="step")
    else:  # a time budget: the bar counts seconds, so it shows the time left
        shape = "{l_bar}{bar}| {n}/{total} s [{elapsed}<{remaining}{postfix}]"
        initial = min(round(elapsed()), round(budget))
        bar = tqdm(total=round(budget), initial=initial, disable=rank != 0, desc="train", bar_format=shape)
    step, last_checkpoint, shown = start_step, time.time(), bar.n
    # Whether the budget is spent is decided from the checkpoint here (the same on every rank),
    # and after each step below from a flag all ranks agree on.
    spent = budget is not None and seconds_before - schedule_seconds >= budget
    with StopSignal() as stop:
        while step < config.steps and not spent:
            lr = learning_rate(step, config, first, elapsed())
            for group in optimizer.param_groups:
                group["lr"] = lr
            cpu_batch = next(stream)
            tokens += int(cpu_batch["attention_mask"].sum()) * (dist.get_world_size() if distributed else 1)
            batch = {name: tensor.to(device, non_blocking=True) for name, tensor in cpu_batch.items()}
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                loss = objective(**batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            step = done = step + 1
            if budget is None:
                bar.update(1)
            else:
                now = min(round(elapsed()), round(budget))
                bar.update(now - shown)
                shown = now
            if done % 10 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}", step=done)
            stopping = stop.raised or (budget is not None and elapsed() >= budget)
            run_over = config.minutes is not None and time.time() - started > 60 * config.minutes
            stopping = stopping or run_over
            if distributed:  # every rank must stop at the same step, or the others wait forever
                flag = torch.tensor(float(stopping), device=device)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                stopping = bool(flag.item())
            last = stopping or done == config.steps
            if rank == 0 and (done % config.eval_every == 0 or last):
                seconds = seconds_before + time.time() - started
                record = {
                    "step": done,
                    "loss": loss.item(),
                    "tokens": tokens,
                    "seconds": seconds,
                    "lr": lr,
                    "tokens_per_s": (tokens - state["tokens"]) / max(1e-9, time.time() - started),
                }
                if eval_batch is not None:
                    record["heldout_loss"] = heldout_loss(plain_objective, eval_batch, device, bf16)
                log.write(json.dumps(record) + "\n")
                log.flush()
            every = config.checkpoint_minutes
            due = every is not None and time.time() - last_checkpoint > 60 * every
            if rank == 0 and (done % config.checkpoint_every == 0 or last or due):
                seconds = seconds_before + time.time() - started
                progress = {"step": done, "tokens": tokens, "seconds": seconds, "schedule_start": first,
                            "schedule_seconds": schedule_seconds}  # fmt: skip
                save_checkpoint(checkpoint, model, tok, optimizer, progress)
                last_checkpoint = time.time()
            if stopping:
                break
    bar.close()
    if distributed:  # rank 0 may still be checkpointing: meet, drop DDP's hooks, then leave together
        dist.barrier()
        del objective
        dist.destroy_process_group()
    if log:
        log.close()
        (config.out / "train_config.json").write_text(json.dumps(asdict(config), default=str, indent=1))
    return checkpoint


def bf16_pays_off(device: torch.device) -> bool:
    """Whether bfloat16 autocast is worth it on ``device``: always on a GPU; on a CPU only if a
    training step of a small network is faster with it. A CPU without native bfloat16 (no
    AVX512-BF16 or AMX) emulates it: 20-40x slower than float32 (measured on this project's
    2-core AMD EPYC machines: 60 against 1,300 tokens/s for the shipped model's size)."""
    if device.type != "cpu":
        return True
    layer = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    x = torch.randn(128, 256)

    def step_seconds(enabled: bool) -> float:
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
                loss = layer(x).float().pow(2).mean()
            loss.backward()
            best = min(best, time.perf_counter() - started)
        return best

    return step_seconds(True) < step_seconds(False)


def heldout_loss(objective: DiffusionLoss, batch: dict, device: torch.device, bf16: bool) -> float:
    objective.model.eval()
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        value = objective(**batch).item()
    objective.model.train()
    return value


def finished(config: TrainConfig) -> bool:
    """Whether the checkpoint in `config.out` has used up its steps or its time budget."""
    path = config.out / "checkpoint" / "state.pt"
    if not path.is_file():
        return False
    state = torch.load(path, weights_only=True, map_location="cpu")
    if state["step"] >= config.steps:
        return True
    trained = state.get("seconds", 0.0) - state.get("schedule_seconds", 0.0)
    return config.budget_minutes is not None and trained >= 60 * config.budget_minutes
