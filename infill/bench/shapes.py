"""Speed and memory of the published families at their real sizes, without their weights.

Speed does not depend on the weights, so each shape is built randomly initialised (the project's
own `Decoder`, as `infill.models` loads real checkpoints into) with the shipped tokenizer standing
in for the family's (its ids are valid in every vocabulary here; mask, end-of-text and the ~400
ruled-out special ids are placed where the real ones are). Measured on a one-line span of a
200-line file, through the real engine, in the window the device gets (CPU_CONTEXT tokens on the
CPU, infill.models.denoiser.device_context) unless `context_length` says otherwise:
  full pass    one pass over the whole canvas (the file's window), the output layer at the
               positions a cached pass computes (below)
  cached pass  a span-only pass on the cached context (the engine's steps between full passes):
               over the span's positions, the decided line's (`line_tokens`) or a block's;
               timed after one such pass untimed, as every fill's are (a process's first span
               pass pays for what later ones reuse: 270 against 180 ms for the 7B shape's)
  fill         the engine's one-line fill at each of several pass counts (`passes`; random
               weights never settle, so a fill runs exactly that many passes): the first fill
               after the document is opened, one full pass and span-only passes after it
               (syntax retries and recall off: random weights would break the syntax every time)
  next fill    the next line's fill in the same document, on the context kept from the last
               fill (infill.engine.kept_context, as the language server runs it)
  ready fill   the same fill once the context was prepared while the user was idle (the language
               server's idle refresh, KeptContext.refresh, not timed): its first pass computes
               only the span
  line tokens  random weights never decide a span's length (every position of its budget stays
               content); with `line_tokens` N the span is a line of N tokens, its budget the
               engine's for such a line (infill.engine.canvas.default_budget), and the fills'
               first pass decides N tokens as a trained network's does (`DecidedLength`: the
               network's own pass, then <null> likeliest after the first N positions), so the
               passes after it compute N
  peak memory  the process's peak resident memory (CPU) or the device's peak allocation (GPU)
  now memory   what it holds at the end: resident memory (CPU) or the device's allocation (GPU)
  floor        what a span pass must cost at least, both measured in the same run: the bytes of
               weights it reads (every layer's and the output layer's; the embedding is only
               looked up) over the memory bandwidth (`memory_bandwidth`), and its multiply-adds
               over the best bfloat16 matrix product rate (`matmul_rate`; float32's on a CPU
               that would emulate bfloat16: `product_dtype`), or, for a 4-bit network that
               infill's kernel multiplies, over the peak of the integer dot products it uses
               (`products_rate`); on 2 CPU cores a 16-position pass of a 7B network is bound by
               the second
  ready floor  the same for the ready fill: its passes one after another, each computing the
               positions the engine asked of it (`CountedPasses`; the output layer at those given
               logits alone), each at the larger of its two floors (`passes_floor_ms`)
"""

from __future__ import annotations

import resource
import statistics
import time
from dataclasses import dataclass, field, replace
from functools import partial

import torch

from infill.bench.cpu_peaks import integer_peak
from infill.engine.kept_context import KeptContext, context_ids
from infill.models.decoder import Decoder, DecoderConfig
from infill.models.denoiser import CONTEXT_CAP, CachingCheckpointDenoiser, device_context
from infill.models.loader import cpu_has_bfloat16
from infill.models.memory import loading_blocks
from infill.models.native import DEFAULT_MODEL_DIR
from infill.models.native.tokenizer import CodeTokenizer
from infill.models.quantize import quantized_kind, quantizing
from infill.models.vocabulary import CheckpointTokenizer
from infill.models.weights import build_meta, parameter_setter
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.spans import Span

# name: (decoder config, mask id, end-of-text id, shifted, first special id) — from the published configs
SHAPES = {
    "open-dcoder-0.5b": (
        DecoderConfig(151936, 896, 4864, 24, 14, 2, 64, 1e6, 1e-6, qkv_bias=True, tied_head=True),
        151665, 151643, True, 151643,
    ),
    "dream-7b": (
        DecoderConfig(152064, 3584, 18944, 28, 28, 4, 128, 1e6, 1e-6, qkv_bias=True, tied_head=False),
        151666, 151643, True, 151643,
    ),
    "llada-8b": (
        DecoderConfig(126464, 4096, 12288, 32, 32, 32, 128, 5e5, 1e-5, qkv_bias=False, tied_head=False),
        126336, 126081, False, 126080,
    ),
}  # fmt: skip

TINY_SHAPES = {
    f"{name}-tiny": (replace(config, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                             num_kv_heads=min(config.num_kv_heads, 4), head_dim=16), *ids)
    for name, (config, *ids) in SHAPES.items()
}  # fmt: skip
"""The same families with 2 layers of width 64 and their real vocabularies (`--tiny`): the
benchmark's every step in seconds, for CI."""


@dataclass
class ShapeRow:
    shape: str
    params: int
    dtype: str  # the weights': float32, bfloat16, ... or int8 (the linear layers', --quantize int8)
    device: str
    canvas: int  # tokens in the file's window
    span: int  # positions the cached pass computes: the line's budget, or its decided tokens, or a block
    load_s: float  # building the random model (a real checkpoint also reads its files)
    full_pass_ms: float
    cached_pass_ms: float
    fill_ms: dict[int, float]  # by passes: the first fill in the document
    kept_fill_ms: dict[int, float]  # by passes: the next line's fill, on the document's kept context
    ready_fill_ms: dict[int, float] = field(default_factory=dict)  # by passes: that fill once the
    #   context was prepared (an idle refresh)
    peak_mib: float = 0.0
    resident_mib: float = 0.0  # the process's resident memory at the end (CPU) or the device's allocation
    fill_passes: dict[int, int] = field(default_factory=dict)  # by passes asked: the passes run
    weights_read_mib: float = 0.0  # the weights a span pass reads (`weights_read`)
    bandwidth_gbs: float = 0.0  # memory read rate measured in the same run (`memory_bandwidth`)
    matmul_gflops: float = 0.0  # the products' rate measured in the same run (`products_rate`)
    matmul_dtype: str = "bfloat16"  # what they multiply in: "int8" (a 4-bit network's integer
    #   dot products, at the CPU's peak), else a float matrix product's dtype (`product_dtype`)
    read_floor_ms: float = 0.0  # weights_read / bandwidth
    compute_floor_ms: float = 0.0  # 2 x span x the layers' multiply-adds / matmul rate
    ready_fill_positions: dict[int, list[int]] = field(default_factory=dict)  # by passes: the
    #   positions each of the ready fill's passes computed (`CountedPasses`)
    ready_fill_floor_ms: dict[int, float] = field(default_factory=dict)  # by passes: those
    #   passes, each at the larger of its floors (`passes_floor_ms`)

    @property
    def cached_over_floor(self) -> float:
        """The cached pass over the larger of its two floors."""
        return self.cached_pass_ms / max(self.read_floor_ms, self.compute_floor_ms, 1e-9)


def random_denoiser(
    name: str, device: torch.device, dtype: torch.dtype, quantize: str = "auto"
) -> CachingCheckpointDenoiser:
    """The published shape `name` with random weights, its window what a checkpoint of that shape
    gets on `device` (infill.models.denoiser.device_context)."""
    config, mask_id, null_id, shift, first_special = {**SHAPES, **TINY_SHAPES}[name]
    network = random_network(config, device, dtype, quantize)
    code = CodeTokenizer.load(DEFAULT_MODEL_DIR).tokenizer
    tokenizer = CheckpointTokenizer(code, {"<|mask|>": mask_id, "<|endoftext|>": null_id}, {})
    special = set(range(first_special, config.vocab_size)) - {null_id}
    special = {i for i in special if i - first_special < 420} | {mask_id}  # as many as the real ones
    return CachingCheckpointDenoiser(
        family=name, network=network, tokenizer=tokenizer, mask_id=mask_id, null_id=null_id,
        special_ids=frozenset(special), context_length=device_context(CONTEXT_CAP, device), shift=shift,
        device=device,
    )  # fmt: skip


def random_network(config: DecoderConfig, device: torch.device, dtype: torch.dtype, quantize: str) -> Decoder:
    """A `Decoder` of `config` with random weights (norms 1, the rest normal(0, 0.02), seed 0),
    made parameter by parameter on the meta-built network, as a checkpoint loads
    (infill.models.weights): with quantized weights each layer is quantized as soon as it is
    filled, so that the float network never exists whole (Open-dCoder 0.5B: docs/models.md); the
    weights int4 packs are made in bfloat16, as a published checkpoint stores them."""
    with loading_blocks():  # as a checkpoint loads (infill.models.weights.load_network)
        network = build_meta(lambda: Decoder(config))
        loading = quantizing(quantize, network, device, dtype)
        set_parameter = parameter_setter(network)
        generator = torch.Generator(device=device).manual_seed(0)
        for parameter_name, parameter in list(network.named_parameters()):
            stored = loading is not None and loading.stored(parameter_name)
            value = torch.empty(parameter.shape, dtype=torch.bfloat16 if stored else dtype, device=device)
            if parameter_name.endswith("norm.weight"):
                value.fill_(1.0)
            else:
                value.normal_(0.0, 0.02, generator=generator)
            set_parameter(parameter_name, value)
            if loading is not None:
                loading.loaded(parameter_name)
    return network


def resident_mib(device: torch.device) -> float:
    """Memory held now: resident pages (CPU, Linux) or the device's allocation (GPU)."""
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device) / 2**20
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def peak_mib(device: torch.device) -> float:
    """The most memory held so far: this process's resident high-water mark (CPU, Linux: VmHWM)
    or the device's peak allocation (GPU). Not `ru_maxrss`: a process started by another keeps
    the parent's resident size at the fork in it (1.5 GiB for a tiny shape started from a test run)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kilobytes
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # no /proc: the kernel's own


def weights_read(network: torch.nn.Module) -> tuple[int, int]:
    """(bytes, numbers) of the weights a span pass multiplies by: every linear layer's, the output
    layer's (a tied float one: the embedding's); the embedding itself is only looked up."""
    from infill.models.int4 import Int4Layer

    total, numbers = 0, 0
    for module in network.modules():
        if isinstance(module, Int4Layer):
            total, numbers = total + module.nbytes(), numbers + module.in_features * module.out_features
        elif isinstance(module, torch.nn.Linear):
            total += module.weight.numel() * module.weight.element_size()
            numbers += module.weight.numel()
        elif callable(getattr(module, "weight", None)):  # PyTorch's dynamic int8 linear layer
            weight = module.weight()
            total, numbers = total + weight.numel(), numbers + weight.numel()
    if getattr(network, "head", 1) is None:  # a tied, float output layer reads the embedding
        weight = network.embed.weight
        total, numbers = total + weight.numel() * weight.element_size(), numbers + weight.numel()
    return total, numbers


def memory_bandwidth(device: torch.device, mib: int = 1024, repeat: int = 5) -> float:
    """GB/s reading a `mib`-MiB tensor (a sum over it) on `device` with this process's threads:
    the best of `repeat` reads."""
    data = torch.ones(mib * 2**20 // 4, device=device)
    best = float("inf")
    for _ in range(repeat + 1):
        started = time.perf_counter()
        data.sum().item()
        best = min(best, time.perf_counter() - started)
    return data.numel() * 4 / best / 1e9


def product_dtype(device: torch.device) -> torch.dtype:
    """The dtype of `device`'s fastest float matrix product: bfloat16, but float32 on a CPU that
    would emulate bfloat16 (AVX2 alone: 20 GFLOP/s there, a floor no pass is held to, which made
    every pass read 0.1x its floor)."""
    return torch.float32 if device.type == "cpu" and not cpu_has_bfloat16() else torch.bfloat16


RATE_NAMES = {"int8": "int8 dot products' peak"}  # else "bfloat16", "float32": a matrix product's


def products_rate(network: torch.nn.Module, device: torch.device) -> tuple[str, float]:
    """What a pass of `network` multiplies in and the most GFLOP/s (GOP/s) it could: int8 at the
    peak of the integer dot products infill's kernel multiplies with (infill.bench.cpu_peaks),
    for a 4-bit network on a CPU where the kernel serves it (its products are integer ones:
    against bfloat16's or float32's rate a pass could read below its floor, 0.4x on a Zen 3);
    else the best `product_dtype` matrix product (`matmul_rate`)."""
    if device.type == "cpu" and quantized_kind(network) == "int4":
        peak = integer_peak(torch.get_num_threads())
        if peak is not None:
            return "int8", 2 * peak.gmacs
    multiplied = product_dtype(device)
    return str(multiplied).removeprefix("torch."), matmul_rate(device, dtype=multiplied)


def matmul_rate(
    device: torch.device,
    rows: int = 64,
    size: tuple[int, int] = (3584, 18944),
    repeat: int = 5,
    dtype: torch.dtype = torch.bfloat16,
) -> float:
    """GFLOP/s of a `dtype` product of `rows` rows by a (size) weight on `device` (the 7B shape's
    MLP): the best of `repeat`; the most a span pass's products can go at."""
    x = torch.randn(rows, size[0], device=device, dtype=dtype)
    w = torch.randn(size[1], size[0], device=device, dtype=dtype)
    best = float("inf")
    for _ in range(repeat + 1):
        started = time.perf_counter()
        torch.nn.functional.linear(x, w).sum().item()
        best = min(best, time.perf_counter() - started)
    return 2 * rows * size[0] * size[1] / best / 1e9


def measure_shape(
    name: str,
    text: str,
    span: Span,
    device: torch.device,
    dtype: torch.dtype,
    passes: tuple[int, ...],
    repeat: int,
    next_span: Span | None = None,
    quantize: str = "auto",
    context_length: int | None = None,
    rules: dict | None = None,
    line_tokens: int | None = None,
) -> ShapeRow:
    """Times of one shape: a pass, and a fill at each count of `passes`; ``next_span`` (default:
    ``span``): the span of the fill timed after a fill of ``span`` in the same document, as the
    language server runs it (infill.engine.kept_context); ``quantize``: its weights' form
    (infill.models.quantize); ``context_length``: the window (default: the device's); ``rules``:
    SamplerConfig fields for the fills (block_length, block_passes: the cached pass timed is then
    one block's); ``line_tokens``: the span is a line of this many tokens, with the engine's
    budget for it, and the fills' first pass decides that many (`DecidedLength`; None: the
    line's own budget, which random weights fill whole)."""
    from infill.engine.canvas import default_budget
    from infill.engine.pipeline import Job, in_window, lay_out
    from infill.engine.repair import RepairPolicy

    started = time.perf_counter()
    denoiser = random_denoiser(name, device, dtype, quantize)
    load_s = time.perf_counter() - started
    document = document_from_bytes(text.encode())
    window = context_length or device_context(CONTEXT_CAP, device)

    rules = rules or {}
    budget = default_budget(line_tokens, window) if line_tokens else None  # the engine's, for such a line

    def options(count: int) -> InfillOptions:
        sampler = SamplerConfig(steps=count, commit_threshold=1.0, **rules)  # exactly `count` passes
        return InfillOptions(sampler=sampler, retries=0, token_edits=0, fresh_fills=0,
                             recall=False, context_length=window, budget=budget)  # fmt: skip

    first = options(passes[0])
    job = Job(document, [span], first.sampler, RepairPolicy.of(first), budget=budget, context_length=window)
    [canvas] = lay_out(denoiser, in_window(denoiser, job).staged)  # the canvas a fill lays out
    ids = torch.tensor([canvas.ids])
    positions = torch.tensor(canvas.editable()).nonzero().flatten()
    ids[0, positions] = denoiser.mask_id
    # The cached pass a fill runs most: over the line's content, or one block of it.
    positions = positions[: line_tokens or len(positions)]
    if first.sampler.block_passes:
        positions = positions[: first.sampler.block_length]

    def filling(d):  # the denoiser the fills run on
        return DecidedLength(d, line_tokens) if line_tokens else d

    def timed(run, before=lambda: None) -> float:
        times = []
        for _ in range(repeat):
            before()  # not timed
            t = time.perf_counter()
            run()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times.append(time.perf_counter() - t)
        return 1000 * statistics.median(times)

    cache = denoiser.new_cache()
    full_ms = timed(lambda: denoiser.cached_logits(ids, positions, cache, refresh=True))
    denoiser.cached_logits(ids, positions, cache, refresh=False)  # untimed: the process's first
    cached_ms = timed(lambda: denoiser.cached_logits(ids, positions, cache, refresh=False))
    fill_ms, kept_fill_ms, ready_fill_ms, fill_passes, ready_passes = {}, {}, {}, {}, {}
    next_span = next_span or span
    prepared = context_ids(denoiser, document, next_span.start, window)  # the idle refresh's canvas
    for count in passes:
        results: list = []  # the timed fills' results (the last one's passes are reported)
        fill = partial(infill, filling(denoiser), document, [span], options(count))
        fill_ms[count] = timed(partial(keep, results, fill))
        fill_passes[count] = results[-1].stats.forward_passes
        counted = CountedPasses(denoiser)  # the passes the kept context runs
        kept = KeptContext(counted)
        next_fill = partial(infill, filling(kept), document, [next_span], options(count))
        infill(filling(kept), document, [span], options(count))
        kept_fill_ms[count] = timed(next_fill)
        ready_fill_ms[count] = timed(next_fill, before=partial(ready_again, kept, counted, prepared))
        ready_passes[count] = list(counted.passes)  # the last ready fill's
    read, numbers = weights_read(denoiser.network)
    peak, now = peak_mib(device), resident_mib(device)  # before the probes' own GiB of data
    bandwidth = memory_bandwidth(device)
    multiplied, rate = products_rate(denoiser.network, device)
    config = denoiser.network.config
    head = config.vocab_size * config.hidden_size  # the output layer's multiply-adds a position
    read_s = read / (bandwidth * 1e9)
    floors = partial(passes_floor_ms, read_s=read_s, layers=numbers - head, head=head, rate=rate)
    return ShapeRow(
        shape=name,
        params=denoiser.network.config.parameters,
        dtype=weights_form(denoiser.network, dtype),
        device=str(device),
        canvas=len(canvas.ids),
        span=len(positions),
        load_s=load_s,
        full_pass_ms=full_ms,
        cached_pass_ms=cached_ms,
        fill_ms=fill_ms,
        kept_fill_ms=kept_fill_ms,
        ready_fill_ms=ready_fill_ms,
        peak_mib=peak,
        resident_mib=now,
        fill_passes=fill_passes,
        weights_read_mib=read / 2**20,
        bandwidth_gbs=bandwidth,
        matmul_gflops=rate,
        matmul_dtype=multiplied,
        read_floor_ms=1000 * read_s,
        compute_floor_ms=1000 * 2 * numbers * len(positions) / (rate * 1e9),
        ready_fill_positions={count: [rows for rows, _ in kept] for count, kept in ready_passes.items()},
        ready_fill_floor_ms={count: floors(kept) for count, kept in ready_passes.items()},
    )


def ready_again(kept: KeptContext, counted: CountedPasses, prepared: torch.Tensor) -> None:
    """Before a timed ready fill: the idle refresh, then every pass before it forgotten."""
    kept.refresh(prepared)
    counted.passes.clear()


def passes_floor_ms(
    passes: list[tuple[int, int]], read_s: float, layers: int, head: int, rate: float
) -> float:
    """What `passes` (each: positions computed, those of them given logits) must cost at least, one
    after another: each reads the weights (`read_s`) and does 2 x its multiply-adds (`layers` a
    position, `head` more a position given logits) at `rate` GFLOP/s, whichever takes longer."""
    arithmetic = [2 * (layers * rows + head * given) / (rate * 1e9) for rows, given in passes]
    return 1000 * sum(max(read_s, seconds) for seconds in arithmetic)


class StandIn:
    """A denoiser standing in for `inner`, whose passes its subclass changes or watches: every
    other attribute is the inner one's."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        if name == "inner":  # (not set yet: a copy being made)
            raise AttributeError(name)
        return getattr(self.inner, name)


class CountedPasses(StandIn):
    """A denoiser that keeps the size of each pass asked of the inner one, (positions it computes,
    those of them it returns logits for), in `passes` (a pass that refreshes computes the whole
    canvas). Under a kept context (infill.engine.kept_context), the passes that context runs: the
    positions a ready fill's passes compute."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.passes: list[tuple[int, int]] = []

    def cached_logits(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache,
        refresh: bool,
        predicted: torch.Tensor | None = None,
    ) -> torch.Tensor:
        rows = ids.shape[1] if refresh else len(positions)
        if predicted is None:
            given = len(positions)
        else:
            given = int(predicted.sum()) if predicted.dtype == torch.bool else predicted.numel()
        self.passes.append((rows, given))
        return self.inner.cached_logits(ids, positions, cache, refresh, predicted)


class DecidedLength(StandIn):
    """A denoiser whose passes decide a span's length as a trained network's first pass does:
    the inner one's pass (every position asked for computed), then, where a pass is asked for more
    than `tokens` positions of a span (its first, over the whole budget), <null> made the likeliest
    token at those after the first `tokens`. Random weights find content everywhere; through this
    the engine narrows the span to `tokens` positions, as it does for a trained network's line."""

    def __init__(self, inner, tokens: int) -> None:
        super().__init__(inner)
        self.tokens = tokens

    def cached_logits(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache,
        refresh: bool,
        predicted: torch.Tensor | None = None,
    ) -> torch.Tensor:
        logits = self.inner.cached_logits(ids, positions, cache, refresh, predicted)
        if predicted is None and len(positions) > self.tokens:  # (passes predicting some of their
            #   positions come after the length is decided)
            logits[:, self.tokens :, self.null_id] = logits.max() + 30.0
        return logits


def weights_form(network: torch.nn.Module, dtype: torch.dtype) -> str:
    """"int4", "int8", or the float dtype's name ("bfloat16")."""
    kind = quantized_kind(network)
    return kind if kind != "none" else str(dtype).removeprefix("torch.")


def keep(results: list, run) -> None:
    """Run ``run()`` and keep its result (what a timed fill wrote, without running it again)."""
    results.append(run())


def format_rows(rows: list[ShapeRow]) -> str:
    """One line a shape; a first, a next and a ready fill column for each pass count."""
    counts = sorted({count for row in rows for count in row.fill_ms})
    fills = "".join(f"{f'{kind}@{c} ms':>12}" for kind in ("fill", "next", "ready") for c in counts)
    lines = [f"{'shape':22} {'params':>7} {'dtype':>8} {'device':>6} {'canvas':>6} {'span':>4} "
             f"{'full ms':>8} {'cached ms':>9} {'read fl.':>8} {'comp fl.':>8} {'x floor':>7}{fills} "
             f"{'peak MiB':>8} {'now MiB':>8}"]  # fmt: skip
    for r in rows:
        kinds = (r.fill_ms, r.kept_fill_ms, r.ready_fill_ms)
        times = "".join(f"{ms.get(c, float('nan')):12.0f}" for ms in kinds for c in counts)
        lines.append(
            f"{r.shape:22} {r.params / 1e9:6.2f}B {r.dtype:>8} {r.device:>6} {r.canvas:6d} {r.span:4d} "
            f"{r.full_pass_ms:8.0f} {r.cached_pass_ms:9.0f} {r.read_floor_ms:8.1f} {r.compute_floor_ms:8.1f} "
            f"{r.cached_over_floor:7.1f}{times} {r.peak_mib:8.0f} {r.resident_mib:8.0f}"
        )
    if rows:
        read = ", ".join(f"{r.weights_read_mib:.0f}" for r in rows)
        bandwidth = ", ".join(f"{r.bandwidth_gbs:.1f}" for r in rows)
        named = [(RATE_NAMES.get(r.matmul_dtype, r.matmul_dtype), r.matmul_gflops) for r in rows]
        rate = ", ".join(f"{name} {gflops:.0f}" for name, gflops in named)
        lines.append(
            f"floors: read fl. = weights a span pass reads ({read} MiB) / memory bandwidth "
            f"({bandwidth} GB/s); comp fl. = its multiply-adds / the products' rate ({rate} "
            f"GFLOP/s); x floor: the cached pass over the larger floor"
        )
    for r in rows:
        for count, floor in sorted(r.ready_fill_floor_ms.items()):
            positions = ", ".join(map(str, r.ready_fill_positions[count]))
            ms = r.ready_fill_ms[count]
            lines.append(
                f"{r.shape} ready@{count}: {ms:.0f} ms, {ms / floor:.1f}x its floor of {floor:.0f} ms "
                f"(passes of {positions} positions, each at its larger floor)"
            )
    return "\n".join(lines)
