"""A bidirectional decoder of the Qwen2 / Llama shape, in one file: the network behind the Dream
family, Open-dCoder and LLaDA (each family maps its own weight names onto this module's).

    ids -> embedding (x embed_scale)
        -> layers: x + attention(norm(x)), then x + mlp(norm(x))
           attention: grouped-query (num_kv_heads <= num_heads), optional q/k/v biases, rotary
                      positions (rotate-half layout), NO causal mask: every position sees all
           mlp: down(silu(gate(x)) * up(x))  (SwiGLU)
        -> final RMSNorm -> output layer (its own weights, or the embedding's when tied) x logit_scale

The checkpoints' q, k and v projections are one layer here (`attn.qkv`, their weights one above
the other), and so are the MLP's gate and up (`mlp.gate_up`): a layer makes 4 products, not 7, and
the queries and keys turn in one rotation. Each checkpoint tensor loads into its rows of the fused
weight (`Rows`, `checkpoint_place`; infill.models.weights). The arithmetic of every row is the
one its own layer did; what it saves is operations: a span pass of the 7B shape on a GPU is bound
by launching them, not by the weights (docs/serving.md, "Measured").

Row i of the output is what the network computes at position i. Whether that predicts the token
at i (LLaDA) or at i + 1 (Dream, Open-dCoder: the shift) is the family's business
(`infill.models.denoiser`).

The speed path (`logits_at(..., cache, refresh=False)`): only the given positions are computed;
their queries attend to the keys and values of the whole canvas, taken from the cache of the
last full pass except at those positions, which are refreshed (Fast-dLLM's "dual cache", as in
`infill.models.native.model.InfillModel.cached_logits`).

A batch of canvases of different lengths (infill.models.batching): right-padded, with a key mask
(B, L), True at each row's real positions, so that no query attends to a padded key; in the
speed path each row has its own positions (B, P) and its own rows of the cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import infill.models.int4_native as int4_native
import infill.models.layer_ops as layer_ops
from infill.models.native.model import (
    CacheRows,
    LayerCache,
    at_positions,
    attend_cached,
    c_span_runs,
    contiguous,
    key_padding,
    span_tokens,
    token_rows,
)


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int  # rows of the embedding and the output layer
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float
    norm_eps: float
    qkv_bias: bool  # Qwen2 / Dream: biases on q, k, v (not on o); LLaDA: none
    tied_head: bool  # the output layer reuses the embedding matrix
    embed_scale: float = 1.0  # LLaDA's input_emb_norm multiplies embeddings by sqrt(d_model)
    logit_scale: float = 1.0  # LLaDA's scale_logits multiplies logits by 1/sqrt(d_model)

    @property
    def parameters(self) -> int:
        """How many numbers the weights hold (for the memory estimate printed before loading)."""
        d, kv = self.hidden_size, self.num_kv_heads * self.head_dim
        q = self.num_heads * self.head_dim
        attention = d * q + 2 * d * kv + q * d + (q + 2 * kv if self.qkv_bias else 0)
        layer = attention + 3 * d * self.intermediate_size + 2 * d
        head = 0 if self.tied_head else self.vocab_size * d
        return self.vocab_size * d + self.num_layers * layer + d + head


@dataclass(frozen=True)
class Rows:
    """Rows start:stop of the parameter `parameter`: where a checkpoint tensor that is one part of
    a fused layer (q, k, v in `attn.qkv`; gate, up in `mlp.gate_up`) goes."""

    parameter: str
    start: int
    stop: int

    def shape(self, whole: tuple[int, ...]) -> tuple[int, ...]:
        """The checkpoint tensor's shape, for a fused parameter of shape `whole`."""
        return (self.stop - self.start, *whole[1:])


def checkpoint_place(c: DecoderConfig, layer: int, projection: str, kind: str = "weight") -> str | Rows:
    """Where the checkpoint's `projection` ("q", "k", "v", "o", "gate", "up", "down") of `layer`
    lives in `Decoder`: a parameter's name, or its rows in a fused one. `kind`: "weight" or "bias"."""
    q, kv, inner = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim, c.intermediate_size
    fused = {
        "q": ("attn.qkv", 0, q),
        "k": ("attn.qkv", q, q + kv),
        "v": ("attn.qkv", q + kv, q + 2 * kv),
        "gate": ("mlp.gate_up", 0, inner),
        "up": ("mlp.gate_up", inner, 2 * inner),
    }
    if projection in fused:
        module, start, stop = fused[projection]
        return Rows(f"layers.{layer}.{module}.{kind}", start, stop)
    return f"layers.{layer}.{'attn' if projection == 'o' else 'mlp'}.{projection}.{kind}"


class RMSNorm(nn.Module):
    """x / rms(x) * weight, the normalisation computed in float32 (as Qwen2's and LLaDA's are)."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if layer_ops.applies(x, self.weight, bfloat16=True):
            return layer_ops.rms_norm(x, self.weight, self.eps)
        return self.weight * F.rms_norm(x.float(), self.weight.shape, eps=self.eps).to(x.dtype)

    def added(self, x: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(x + delta, the norm of that): a residual sum and the normalisation after it."""
        return layer_ops.added_norm(x, delta, self.weight, self.eps, self)


def rotary_tables(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (len(positions), head_dim) in float32 (each angle twice: rotate-half
    layout); for positions (B, P), row by row: (B, 1, P, head_dim), to turn (B, H, P, head_dim)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim)
    if positions.dim() == 2:
        angles = positions.float()[..., None] * inv_freq
        angles = torch.cat([angles, angles], dim=-1)[:, None]
        return angles.cos(), angles.sin()
    angles = torch.outer(positions.float(), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions on x (B, H, L, D): pairs (i, i + D/2) turned by their angle, in float32."""
    x32 = x.float()
    x1, x2 = x32.chunk(2, dim=-1)
    return (x32 * cos + torch.cat([-x2, x1], dim=-1) * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        heads = c.num_heads + 2 * c.num_kv_heads  # the queries', then the keys', then the values'
        self.qkv = nn.Linear(c.hidden_size, heads * c.head_dim, bias=c.qkv_bias)
        self.o = nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=False)

    def forward(self, x, cos, sin, cache: LayerCache | CacheRows | None = None,
                positions: torch.Tensor | None = None, attn_mask: torch.Tensor | None = None):  # fmt: skip
        """x (B, L, hidden) -> (B, L, hidden). With `cache` and `positions` (the canvas positions x
        holds: (P,), or (B, P) row by row), keys and values of every other position come from the
        cache, which then holds the fresh ones of `positions`; with `cache` alone (a full pass),
        the cache is filled. `attn_mask` (B, 1, 1, L): the keys each row may attend to (None: all)."""
        B, L, _ = x.shape
        H, KV = self.num_heads, self.num_kv_heads
        qkv = self.qkv(x).view(B, L, H + 2 * KV, self.head_dim)
        if layer_ops.applies(qkv, cos) and qkv.is_contiguous():  # turned where they are, in one call
            layer_ops.rotate_(qkv, H + KV, cos, sin)
            qkv = qkv.transpose(1, 2)
            q, k, v = qkv[:, :H], qkv[:, H : H + KV], qkv[:, H + KV :]
        else:
            qkv = qkv.transpose(1, 2)
            turned = rotate(qkv[:, : H + KV], cos, sin)  # the queries and the keys in one go
            q, k, v = turned[:, :H], turned[:, H:], qkv[:, H + KV :]
        if cache is not None and positions is not None:  # the given positions' keys are fresh
            y = attend_cached(q, k, v, cache, positions, attn_mask, grouped_attention)
        else:
            if cache is not None:  # copies: views would keep the queries' and the products' memory
                cache.keys, cache.values = own(k), own(v)
            y = grouped_attention(q, k, v, attn_mask)
        return self.o(y.transpose(1, 2).reshape(B, L, H * self.head_dim))


def own(x: torch.Tensor) -> torch.Tensor:
    """x in memory of its own, contiguous."""
    return x.clone(memory_format=torch.contiguous_format)


def grouped_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None
) -> torch.Tensor:
    """Bidirectional attention of q (B, H, L, D) over k, v (B, KV, S, D), where KV divides H
    (grouped-query: query head h uses key/value head h // (H / KV)), -> (B, H, L, D).

    Each key/value head's group of query heads goes in as one longer run of queries, so that the
    keys and values are read where they are: copied once for every query head of its group, the
    whole cached window's keys were copied at every span pass (a third of the 0.5B shape's span
    pass at 4 positions, docs/models.md)."""
    if attn_mask is None and layer_ops.applies(q, k, v, bfloat16=True):
        y = layer_ops.attention(q, k, v)  # a span pass's few queries: one call (None: not taken)
        if y is not None:
            return y
    B, H, L, D = q.shape
    group = H // k.shape[1]
    if group == 1:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    queries = q.reshape(B, k.shape[1], group * L, D)  # head h = kv * group + g: its kv's run
    if attn_mask is not None and attn_mask.shape[-2] > 1:  # a row for each query: a run has them group times
        attn_mask = attn_mask.repeat(1, 1, group, 1)
    y = F.scaled_dot_product_attention(queries, k, v, attn_mask=attn_mask)
    return y.view(B, H, L, D)


class MLP(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.gate_up = nn.Linear(c.hidden_size, 2 * c.intermediate_size, bias=False)  # gate's rows, then up's
        self.down = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down(layer_ops.gated(self.gate_up(x)))


class Layer(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.attn_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.attn = Attention(c)
        self.mlp_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, cache=None, positions=None, attn_mask=None):
        attended = self.attn(self.attn_norm(x), cos, sin, cache, positions, attn_mask)
        x, normed = self.mlp_norm.added(x, attended)
        return x + self.mlp(normed)


def fused_span_layers(network: Decoder, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                      cache: list, positions: torch.Tensor) -> torch.Tensor | None:  # fmt: skip
    """x (B, P, hidden), a span pass's query tokens, through every layer, each layer in one C
    call (layer_ops.span_layer_int4_: what the layer's modules compute, with the same C operations
    and 4-bit product in the same order, so the same numbers); None where that call does not
    serve the pass (not float32 on the CPU, products not infill's 4-bit kernel, more queries a
    key/value head than its attention takes, ...): the layers then run as modules."""
    c = network.config
    runs = c_span_runs(x, cos, cache, positions, torch.float32, c.head_dim, c.num_heads // c.num_kv_heads)
    if runs is None or not int4_native.available():
        return None
    layers = network.span_layer_calls()
    if layers is None:
        return None
    flat, cos, sin = token_rows(x, cos, sin)
    heads, scale = (c.num_heads, c.num_kv_heads), c.head_dim**-0.5
    shared = layer_ops.pass_runs([(rows, where) for rows, where, _ in runs])
    for index, layer in enumerate(layers):
        own = [contiguous(caches[index]) for _, _, caches in runs]
        layer_ops.span_layer_int4_(flat, layer, heads, cos, sin, shared, own, scale)
    return flat.view(x.shape)


def fused_layer(layer: Layer) -> tuple | None:
    """A layer's norms (weight, eps), its four 4-bit products and the qkv product's bias as
    `layer_ops.span_layer_int4_` takes them; None unless every product is infill's 4-bit kernel
    (only qkv with a bias), the norms float32."""
    attn, mlp = layer.attn, layer.mlp
    products = (attn.qkv, attn.o, mlp.gate_up, mlp.down)
    if not all(type(p) is int4_native.NativeInt4Linear for p in products):
        return None
    if any(p.bias is not None for p in products[1:]):
        return None
    norms = (layer.attn_norm, layer.mlp_norm)
    if any(norm.weight.dtype != torch.float32 for norm in norms):
        return None
    bias = attn.qkv.bias
    return tuple((norm.weight, norm.eps) for norm in norms), products, None if bias is None else bias.float()


def held_tensors(layer: Layer) -> tuple:
    """The tensors a layer's C call is made from: its norms' weights, the qkv bias and the
    products' tiles, scales and offsets (None for one it lacks), read from the modules' own
    tables: nn.Module's attribute lookup, asked for every layer at every pass, would cost what
    the call's arguments did."""
    modules = layer._modules
    attn, mlp = modules["attn"]._modules, modules["mlp"]._modules
    products = (attn["qkv"], attn["o"], mlp["gate_up"], mlp["down"])
    norms = (modules["attn_norm"]._parameters["weight"], modules["mlp_norm"]._parameters["weight"])
    return (*norms, attn["qkv"]._parameters.get("bias"),
            *(p._buffers.get(name) for p in products for name in ("tiles", "scales", "offsets")))  # fmt: skip


def still_held(made_from: list[tuple], layers: nn.ModuleList) -> bool:
    """Whether each layer still holds the tensors (`held_tensors`) its call was made from, the
    same objects."""
    return len(made_from) == len(layers) and all(
        was is now for tensors, layer in zip(made_from, layers)
        for was, now in zip(tensors, held_tensors(layer), strict=True)
    )  # fmt: skip


class Decoder(nn.Module):
    """ids (B, L) -> logits (B, L, vocab), every position attending to every other."""

    def __init__(self, c: DecoderConfig):
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.num_layers))
        self.norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.head = None if c.tied_head else nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.span_calls: list[layer_ops.Int4Layer] | None = None  # `span_layer_calls`, once made,
        self.span_calls_from: list[tuple] = []  # from these `held_tensors`

    def output(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x)
        logits = F.linear(x, self.embed.weight) if self.head is None else self.head(x)
        return logits * self.config.logit_scale if self.config.logit_scale != 1.0 else logits

    def untie_head(self) -> None:
        """A tied output layer as a layer of its own, on the embedding's weights (shared, not
        copied), so that it can be quantized apart from the embedding (infill.models.quantize)."""
        if self.head is None:
            weight = self.embed.weight
            self.head = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device="meta")
            self.head.weight = weight

    def embedding(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        return x * self.config.embed_scale if self.config.embed_scale != 1.0 else x

    def tables(self, positions: torch.Tensor):
        return rotary_tables(positions, self.config.head_dim, self.config.rope_theta)

    @torch.no_grad()
    def forward(self, ids: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """`key_mask` (B, L): True at real tokens of right-padded canvases (None: no padding)."""
        positions = torch.arange(ids.shape[1], device=ids.device)
        cos, sin = self.tables(positions)
        attn_mask = key_padding(key_mask)
        x = self.embedding(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, attn_mask=attn_mask)
        return self.output(x)

    def span_layer_calls(self) -> list[layer_ops.Int4Layer] | None:
        """Each layer's fixed arguments to its span layer's C call (`fused_layer`,
        `layer_ops.int4_layer`), made again whenever a layer no longer holds the tensors they
        point into (a product quantized or loaded anew); None where a layer has no such call."""
        if self.span_calls is None or not still_held(self.span_calls_from, self.layers):
            self.span_calls_from = [held_tensors(layer) for layer in self.layers]
            layers = [fused_layer(layer) for layer in self.layers]
            int4_at = int4_native.kernel_address()
            fused = all(layer is not None for layer in layers)
            self.span_calls = [layer_ops.int4_layer(*layer, int4_at) for layer in layers] if fused else None
        return self.span_calls

    def new_cache(self) -> list[LayerCache]:
        return [LayerCache() for _ in self.layers]

    @torch.no_grad()
    def logits_at(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache: list[LayerCache],
        refresh: bool,
        key_mask: torch.Tensor | None = None,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, P, vocab) at `positions` (P,) only. `refresh`: one pass over the whole canvas
        that also fills `cache`; otherwise only `positions` are computed, on the cached context.
        A padded batch: `key_mask` (B, L) True at real tokens, `positions` (B, P) row by row.
        `rows` (R,): only these of the P positions' logits are wanted, (B, R, vocab): the output
        layer (a 152k-token vocabulary's: a fifth of a 0.5B network) runs there alone."""
        attn_mask = key_padding(key_mask)
        if refresh:
            cos, sin = self.tables(torch.arange(ids.shape[1], device=ids.device))
            x = self.embedding(ids)
            for layer, layer_cache in zip(self.layers, cache):
                x = layer(x, cos, sin, layer_cache, attn_mask=attn_mask)
            x = at_positions(x, positions)
        else:
            cos, sin = self.tables(positions)
            x = self.embedding(span_tokens(ids, positions, cache))
            fused = fused_span_layers(self, x, cos, sin, cache, positions)
            if fused is not None:
                x = fused
            else:
                for layer, layer_cache in zip(self.layers, cache):
                    x = layer(x, cos, sin, layer_cache, positions, attn_mask)
        return self.output(x if rows is None else x[:, rows])
