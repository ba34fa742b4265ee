"""A layer's small operations in one C call each, on the CPU (layer_ops.c beside this file, built
by infill.models.c_build): RMSNorm, a residual sum with the next RMSNorm, and the attention of a
span pass (a few queries, no mask) over the cache, in float32 or bfloat16 (computed in float32);
the rotary positions in place, in float32, and in bfloat16 for the shipped family; the MLP's
silu(gate) * up; and a whole layer of a span pass in one call, made of these: the shipped
family's as served (`span_block_`: bfloat16, infill's product; from infill.models.native.model)
and the published families' with 4-bit weights (`span_layer_int4_`: float32, infill's 4-bit
product; from infill.models.decoder).

infill.models.decoder and the shipped family's model call these where `applies` says so, else
PyTorch's operations: on a GPU, in other dtypes, where the library cannot be built, or with
`INFILL_LAYER_OPS=pytorch` (for comparisons). They compute what PyTorch's do up to rounding: float32's,
or one bfloat16 step where PyTorch rounds between its operations (tests/models/test_layer_ops.py).

Why: a span pass of a small network is hundreds of operations of a few microseconds each; PyTorch's
RMSNorm alone is a dozen of them on a CPU (docs/models.md, "A layer's small operations in C").
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from infill.models.c_build import Build, build_unless_switched, inference_on_cpu

SOURCE = Path(__file__).with_name("layer_ops.c")
SWITCH = "INFILL_LAYER_OPS"  # "pytorch": PyTorch's operations everywhere


@functools.cache
def build() -> Build:
    """The library for this CPU, built once per machine (and again when the source changes)."""
    return build_unless_switched(SWITCH, SOURCE, declared)


def declared(library: ctypes.CDLL) -> ctypes.CDLL:
    pointer, size, number, integer = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int
    library.infill_rms_norm.argtypes = [pointer, pointer, size, size, number, pointer, integer]
    library.infill_rms_norm.restype = None
    library.infill_add_rms_norm.argtypes = [
        pointer, pointer, pointer, size, size, number, pointer, pointer, integer
    ]  # fmt: skip
    library.infill_add_rms_norm.restype = None
    library.infill_rms_norm_bf16.argtypes = library.infill_rms_norm.argtypes
    library.infill_rms_norm_bf16.restype = None
    library.infill_add_rms_norm_bf16.argtypes = library.infill_add_rms_norm.argtypes
    library.infill_add_rms_norm_bf16.restype = None
    library.infill_rotate.argtypes = [pointer, size, size, size, size, pointer, pointer, size]
    library.infill_rotate.restype = None
    library.infill_rotate_halves_bf16.argtypes = library.infill_rotate.argtypes
    library.infill_rotate_halves_bf16.restype = None
    library.infill_swiglu.argtypes = [pointer, size, size, pointer, integer, integer]
    library.infill_swiglu.restype = None
    library.infill_attention_queries.argtypes = []
    library.infill_attention_queries.restype = size
    library.infill_attend.argtypes = [
        pointer, size, size, pointer, pointer, size, size, number, pointer, integer, integer
    ]  # fmt: skip
    library.infill_attend.restype = integer
    library.infill_span_block_bf16.argtypes = [
        pointer, size, size, size, pointer, pointer, pointer, number, pointer, number, pointer, pointer,
        pointer, pointer, pointer, size, size, pointer, pointer, pointer, pointer, pointer, pointer, number,
        integer,
    ]  # fmt: skip
    library.infill_span_block_bf16.restype = integer
    library.infill_span_layer_int4.argtypes = [
        pointer, size, size, size, size, size, pointer, pointer, pointer, number, pointer, number, pointer,
        pointer, pointer, pointer, pointer, pointer, size, size, pointer, pointer, pointer, pointer, pointer,
        pointer, number, integer,
    ]  # fmt: skip
    library.infill_span_layer_int4.restype = integer
    return library


@functools.cache
def most_queries() -> int:
    """The queries a head the built attention takes at most (0: it has none), asked once."""
    return build().library.infill_attention_queries()


def applies(*tensors: torch.Tensor, bfloat16: bool = False) -> bool:
    """Whether these operations serve `tensors`: float32 (or bfloat16, where the caller's
    operation takes it) on the CPU, all of one dtype, no gradient wanted, no autocast (which
    changes the dtypes of PyTorch's operations: training's held-out loss), the library built."""
    dtype = tensors[0].dtype
    if dtype not in ((torch.float32, torch.bfloat16) if bfloat16 else (torch.float32,)):
        return False
    if any(t.dtype != dtype for t in tensors) or not inference_on_cpu(*tensors):
        return False
    return build().library is not None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * x / sqrt(mean(x^2) + eps) over the last dimension."""
    x = x.contiguous()
    out = torch.empty_like(x)
    rows, n = x.numel() // x.shape[-1], x.shape[-1]
    library = build().library
    norm = library.infill_rms_norm_bf16 if x.dtype == torch.bfloat16 else library.infill_rms_norm
    norm(x.data_ptr(), weight.data_ptr(), rows, n, eps, out.data_ptr(), torch.get_num_threads())
    return out


def add_rms_norm(
    x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x + delta, rms_norm(x + delta)) in one pass over the numbers."""
    x, delta = x.contiguous(), delta.contiguous()
    total, out = torch.empty_like(x), torch.empty_like(x)
    rows, n = x.numel() // x.shape[-1], x.shape[-1]
    library = build().library
    norm = library.infill_add_rms_norm_bf16 if x.dtype == torch.bfloat16 else library.infill_add_rms_norm
    norm(
        x.data_ptr(), delta.data_ptr(), weight.data_ptr(), rows, n, eps, total.data_ptr(), out.data_ptr(),
        torch.get_num_threads(),
    )  # fmt: skip
    return total, out


def added_norm(
    x: torch.Tensor,
    delta: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    norm: Callable[[torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's residual sum and the normalisation after it, (x + delta, norm(x + delta)): one C
    call where these operations apply to all three tensors, else PyTorch's sum and `norm` (the
    caller's own RMSNorm, whose `weight` and `eps` these are)."""
    if applies(x, delta, weight, bfloat16=True):
        return add_rms_norm(x, delta, weight, eps)
    total = x + delta
    return total, norm(total)


def rotate_(x: torch.Tensor, turned: int, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """Rotary positions in place on the first `turned` heads of x (B, L, heads, D), contiguous;
    cos and sin: (L, D) for every row of the batch, or (B, 1, L, D) row by row."""
    B, L, heads, D = x.shape
    assert x.is_contiguous() and cos.shape[-1] == D
    cos, sin = cos.contiguous(), sin.contiguous()
    build().library.infill_rotate(
        x.data_ptr(), B * L, heads, turned, D, cos.data_ptr(), sin.data_ptr(), cos.numel() // D
    )


def rotate_halves_(x: torch.Tensor, turned: int, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """The shipped family's rotary positions in place on the first `turned` heads of x (B, L,
    heads, D), contiguous bfloat16; cos and sin bfloat16 of D/2 angles: (L, D/2) for every row of
    the batch, or (B, 1, L, D/2) row by row. PyTorch's bfloat16 result bit for bit."""
    B, L, heads, D = x.shape
    assert x.is_contiguous() and x.dtype == cos.dtype == torch.bfloat16 and 2 * cos.shape[-1] == D
    cos, sin = cos.contiguous(), sin.contiguous()
    build().library.infill_rotate_halves_bf16(
        x.data_ptr(), B * L, heads, turned, D, cos.data_ptr(), sin.data_ptr(), 2 * cos.numel() // D
    )


def swiglu(x: torch.Tensor) -> torch.Tensor:
    """The MLP's silu(gate) * up from its fused gate/up product x (..., 2n): gate the first n."""
    x = x.contiguous()
    n = x.shape[-1] // 2
    out = x.new_empty(*x.shape[:-1], n)
    build().library.infill_swiglu(
        x.data_ptr(), x.numel() // (2 * n), n, out.data_ptr(), int(x.dtype == torch.bfloat16),
        torch.get_num_threads(),
    )  # fmt: skip
    return out


def gated(x: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of a fused gate/up product (the published families' and the shipped
    family's MLP): one C call where these operations apply, else PyTorch's."""
    if applies(x, bfloat16=True):
        return swiglu(x)
    gate, up = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor | None:
    """Grouped-query attention without a mask, q (B, H, L, D) over k, v (B, KV, S, D), float32 or
    bfloat16 (query head h uses key/value head h // (H / KV)), -> (B, H, L, D); None where this
    build does not take the shape (more than its queries a head, a head size not a multiple of 16,
    no memory)."""
    library = build().library
    B, H, L, D = q.shape
    KV, S = k.shape[1], k.shape[2]
    queries = H // KV * L  # each key/value head's group of query heads, one run of queries
    if queries > most_queries() or D % 16 or D > 256:
        return None
    q = q.reshape(B, KV, queries, D).contiguous()
    k, v = k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    failed = library.infill_attend(
        q.data_ptr(), B * KV, queries, k.data_ptr(), v.data_ptr(), S, D, D**-0.5, out.data_ptr(),
        int(q.dtype == torch.bfloat16), torch.get_num_threads(),
    )  # fmt: skip
    return None if failed else out.view(B, H, L, D)


def span_block_(x: torch.Tensor, norms: tuple, weights: tuple, heads: int, cos: torch.Tensor,
                sin: torch.Tensor, runs: list, linear_at: int, scale: float) -> None:  # fmt: skip
    """One layer of the shipped family's span pass in one call (layer_ops.c,
    `infill_span_block_bf16`), x (T, E) bfloat16 contiguous replaced by its output. `norms`:
    (weight, eps) of the two norms; `weights`: the packed qkv, out, gate/up and down products and
    the MLP's inner size; `runs`: (rows, positions (P,), keys, values) of each pass, its tokens
    the next rows * P of x, its cache's keys and values contiguous (rows, heads, S, D) bfloat16;
    cos, sin (T, D/2): each token's angles; `linear_at`: the bfloat16 product's address."""
    (norm1, eps1), (norm2, eps2) = norms
    qkv, out, gate_up, down, inner = weights
    failed = build().library.infill_span_block_bf16(
        x.data_ptr(), x.shape[0], x.shape[1], heads, cos.data_ptr(), sin.data_ptr(), norm1.data_ptr(), eps1,
        norm2.data_ptr(), eps2, linear_at, qkv.data_ptr(), out.data_ptr(), gate_up.data_ptr(),
        down.data_ptr(), inner, *run_arguments(runs), scale, torch.get_num_threads(),
    )  # fmt: skip
    if failed:
        raise MemoryError("the span layer's C call found no memory for its scratch")


@dataclass(frozen=True)
class Int4Layer:
    """A layer's fixed arguments to `infill_span_layer_int4` (`int4_layer`): its norms, its four
    4-bit products' tiles, scales, offsets and groups, the qkv product's bias, the MLP's inner
    size; `tensors`, what they point into, held with them."""

    arguments: tuple
    tensors: tuple


def int4_layer(norms: tuple, products: tuple, qkv_bias: torch.Tensor | None, int4_at: int) -> Int4Layer:
    """`span_layer_int4_`'s layer: `norms`, (weight, eps) of the two norms; `products`, the qkv,
    o, gate/up and down layers (infill.models.int4_native.NativeInt4Linear); `qkv_bias` the first's
    bias or None; `int4_at`, the 4-bit product's address. Made once for a network's layer (a
    pass made them for 24 layers in a tenth of a 0.5B cached pass: docs/models.md)."""
    (norm1, eps1), (norm2, eps2) = norms
    four = ctypes.c_void_p * 4
    arguments = (
        norm1.data_ptr(), eps1, norm2.data_ptr(), eps2, int4_at,
        four(*(p.tiles.data_ptr() for p in products)), four(*(p.scales.data_ptr() for p in products)),
        four(*(p.offsets.data_ptr() for p in products)),
        (ctypes.c_int64 * 4)(*(p.in_features // p.scales.shape[1] for p in products)),
        None if qkv_bias is None else qkv_bias.data_ptr(), products[3].in_features,
    )  # fmt: skip
    tensors = (norm1, norm2, qkv_bias, *(t for p in products for t in (p.tiles, p.scales, p.offsets)))
    return Int4Layer(arguments, tensors)


def span_layer_int4_(x: torch.Tensor, layer: Int4Layer, heads: tuple[int, int], cos: torch.Tensor,
                     sin: torch.Tensor, runs: tuple, caches: list, scale: float) -> None:  # fmt: skip
    """One layer of a published family's span pass with 4-bit weights (float32 numbers) in one
    call (layer_ops.c, `infill_span_layer_int4`), x (T, E) float32 contiguous replaced by its
    output. `layer`: `int4_layer`'s; `heads`: (query heads, key/value heads); cos and sin (T, D),
    as `span_block_`'s; `runs`: `pass_runs` of the pass's runs; `caches`: each run's cache of
    this layer, (keys, values) contiguous (rows, heads, S, D)."""
    count, rows, counts, positions = runs
    failed = build().library.infill_span_layer_int4(
        x.data_ptr(), x.shape[0], x.shape[1], heads[0], heads[1], cos.shape[1], cos.data_ptr(),
        sin.data_ptr(), *layer.arguments, count, rows, counts, *cache_arguments(caches), positions, scale,
        torch.get_num_threads(),
    )  # fmt: skip
    if failed:
        raise MemoryError("the span layer's C call found no memory for its scratch or activations")


def pass_runs(runs: list) -> tuple:
    """What the span layers of one pass share of its runs ((rows, positions (P,)) each), as their
    C calls take it: the runs' count, their canvas rows, their positions' counts, where those are."""
    count = len(runs)
    return (
        count,
        (ctypes.c_int64 * count)(*(rows for rows, _ in runs)),
        (ctypes.c_int64 * count)(*(len(where) for _, where in runs)),
        (ctypes.c_void_p * count)(*(where.data_ptr() for _, where in runs)),
    )


def cache_arguments(caches: list) -> tuple:
    """What a span layer's C call takes of its runs' caches ((keys, values) each, contiguous
    (rows, heads, S, D)): their lengths S, where their keys are, where their values are."""
    count = len(caches)
    pointers = ctypes.c_void_p * count
    return (
        (ctypes.c_int64 * count)(*(keys.shape[2] for keys, _ in caches)),
        pointers(*(keys.data_ptr() for keys, _ in caches)),
        pointers(*(values.data_ptr() for _, values in caches)),
    )


def run_arguments(runs: list) -> tuple:
    """A span layer's runs ((rows, positions, keys, values) each) as its C call takes them: their
    count, their canvas rows and positions' counts (`pass_runs`), their caches (`cache_arguments`),
    where their positions are."""
    count, rows, counts, positions = pass_runs([(rows, where) for rows, where, _, _ in runs])
    return count, rows, counts, *cache_arguments([(keys, values) for _, _, keys, values in runs]), positions
