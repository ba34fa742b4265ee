"""Train the denoiser with the masked-diffusion objective on infill-shaped examples.

One loop for one CPU, one GPU, or many under `torchrun` (DistributedDataParallel: each rank
draws its own examples from a rank-seeded generator; rank 0 logs and checkpoints). Examples are
made on the CPU (tokenizing, masking); `workers` > 0 makes them in that many DataLoader
processes, each with its own generator, so that a GPU is not kept waiting for them.
Checkpoints are written atomically every `checkpoint_every` steps into `<out>/checkpoint/`
(model as safetensors, tokenizer.json, trainer state) and training resumes from there.
A run can also start from trained weights (`init_from`, e.g. the shipped default model): a fresh
optimizer and learning-rate schedule, with steps, tokens and seconds counted on from the model's
training.json so the totals stay honest.
The log is `<out>/log.jsonl` (train loss, held-out loss, tokens, seconds).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm import tqdm

from infill.model import InfillConfig, InfillModel
from infill.tokenizer import CodeTokenizer
from infill.train.corpus import CorpusFile, load_corpus
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
    minutes: float | None = None  # stop (after a checkpoint) when this much wall time has passed
    threads: int | None = None
    workers: int = 0  # processes making batches (0: the training process itself)
    seed: int = 0
    bf16: bool = True  # autocast matmuls to bfloat16 (about 1.7x faster on CPUs with AVX512-BF16)
    init_from: Path | None = None  # start from these weights (no checkpoint yet); `steps` counts on
    model: dict = field(default_factory=lambda: {"hidden_size": 256, "num_layers": 6, "num_heads": 8})
    mix: MaskMix = field(default_factory=MaskMix)


def learning_rate(step: int, config: TrainConfig, first: int = 0) -> float:
    """Warmup then cosine decay, over the steps from `first` (where this schedule began) to `steps`."""
    step, total = step - first, config.steps - first
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = min(1.0, (step - config.warmup) / max(1, total - config.warmup))
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
        stream, batch_size=None, num_workers=config.workers, persistent_workers=True, prefetch_factor=4
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


def train(config: TrainConfig, tok: CodeTokenizer) -> Path:
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank() if distributed else 0
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)

    records: list[CorpusFile] = load_corpus(config.corpus, split="train")
    heldout: list[CorpusFile] = load_corpus(config.corpus, split="heldout")
    weights = [min(len(r.text), 20_000) for r in records]
    checkpoint = config.out / "checkpoint"
    state = {"step": 0, "tokens": 0, "seconds": 0.0}
    if (checkpoint / "model.safetensors").exists():
        model = InfillModel.from_pretrained(checkpoint)
        state = torch.load(checkpoint / "state.pt", weights_only=True)
    elif config.init_from is not None:
        model = InfillModel.from_pretrained(config.init_from).float()
        prior = json.loads((config.init_from / "training.json").read_text())
        state = {"step": prior["steps"], "tokens": prior["tokens"], "seconds": prior.get("seconds") or 0.0}
        state["schedule_start"] = state["step"]
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
    log = (config.out / "log.jsonl").open("a") if rank == 0 else None
    bar = tqdm(
        range(start_step, config.steps),
        initial=start_step,
        total=config.steps,
        disable=rank != 0,
        desc="train",
    )
    step = start_step
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config, first)
        batch = {name: tensor.to(device) for name, tensor in next(stream).items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.bf16):
            loss = objective(**batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        tokens += int(batch["attention_mask"].sum()) * (dist.get_world_size() if distributed else 1)
        bar.set_postfix(loss=f"{loss.item():.3f}")
        done = step + 1
        out_of_time = config.minutes is not None and time.time() - started > config.minutes * 60
        if distributed:  # every rank must stop at the same step, or the others wait forever
            flag = torch.tensor(float(out_of_time), device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            out_of_time = bool(flag.item())
        if rank == 0 and (done % config.eval_every == 0 or done == config.steps or out_of_time):
            record = {
                "step": done,
                "loss": loss.item(),
                "tokens": tokens,
                "seconds": seconds_before + time.time() - started,
                "lr": learning_rate(step, config, first),
            }
            if eval_batch is not None:
                model.eval()
                with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.bf16):
                    record["heldout_loss"] = plain_objective(**eval_batch).item()
                model.train()
            log.write(json.dumps(record) + "\n")
            log.flush()
        if rank == 0 and (done % config.checkpoint_every == 0 or done == config.steps or out_of_time):
            seconds = seconds_before + time.time() - started
            progress = {"step": done, "tokens": tokens, "seconds": seconds, "schedule_start": first}
            save_checkpoint(checkpoint, model, tok, optimizer, progress)
        if out_of_time:
            break
    if distributed:  # rank 0 may still be checkpointing: meet, drop DDP's hooks, then leave together
        dist.barrier()
        del objective
        dist.destroy_process_group()
    if log:
        log.close()
        (config.out / "train_config.json").write_text(json.dumps(asdict(config), default=str, indent=1))
    return checkpoint
