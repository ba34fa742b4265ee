"""The default denoiser: a small bidirectional transformer, in one file.

A masked-diffusion language model is an ordinary transformer encoder without the causal mask:
every position sees the whole canvas (prefix *and* suffix) and predicts, at each position, the
token that belongs there. The sampler (`infill.engine.sampler`) turns those predictions into text.

Architecture: token embedding (tied with the output layer), pre-norm blocks of RMSNorm ->
multi-head self-attention with rotary positions (no causal mask) -> RMSNorm -> SwiGLU MLP, a
final RMSNorm. Saved and loaded as safetensors through transformers' `save_pretrained` /
`from_pretrained`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput

import infill.models.bf16_native as bf16_native
import infill.models.layer_ops as layer_ops


class InfillConfig(PretrainedConfig):
    model_type = "infill-diffusion"

    def __init__(
        self,
        vocab_size: int = 8192,
        hidden_size: int = 256,
        num_layers: int = 6,
        num_heads: int = 8,
        mlp_ratio: float = 2.75,
        context_length: int = 512,
        rope_theta: float = 10000.0,
        norm_eps: float = 1e-5,
        mask_token_id: int = 1,
        null_token_id: int = 2,
        pad_token_id: int = 0,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.mlp_ratio = mlp_ratio
        self.context_length = context_length  # the canvas length the model was trained for
        self.rope_theta = rope_theta
        self.norm_eps = norm_eps
        self.mask_token_id = mask_token_id
        self.null_token_id = null_token_id
        kwargs.setdefault("tie_word_embeddings", True)
        super().__init__(pad_token_id=pad_token_id, **kwargs)


def rotary_tables(length: int, head_dim: int, theta: float, device=None, dtype=torch.float32):
    """cos/sin tables of shape (length, head_dim // 2) for rotary position embeddings, computed in
    float32 and given in `dtype` (the weights' dtype, so that queries, keys and values agree)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim)
    angles = torch.outer(torch.arange(length, device=device).float(), inv_freq)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (first half, second half) of the head dimension of x: (B, H, L, D)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


@dataclass
class LayerCache:
    """One layer's keys and values (B, H, L, head_dim) from the last pass over the whole canvas."""

    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None


def at_positions(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """x (B, L, ...) at `positions`: (P,) the same for every row, or (B, P) row by row (a batch
    of canvases, each with its own span: infill.models.batching) -> (B, P, ...)."""
    if positions.dim() == 1:
        return x[:, positions]
    return x[torch.arange(x.shape[0], device=x.device)[:, None], positions]


def write_at(cached: torch.Tensor, positions: torch.Tensor, fresh: torch.Tensor) -> None:
    """Keys or values (B, H, L, D) of a cache hold `fresh` (B, H, P, D) at `positions`, (P,) or (B, P)."""
    if positions.dim() == 1:  # one operation; a position listed twice (a padded pass,
        cached.index_copy_(2, positions, fresh)  # infill.models.batching) gets the same keys twice
    else:
        rows = torch.arange(fresh.shape[0], device=fresh.device)[:, None]
        cached[rows, :, positions] = fresh.transpose(1, 2)  # indexed (B, P, H, D)


@dataclass
class CacheRows:
    """One layer's caches of several span passes sharing a forward, packed (infill.models.batching):
    the forward has one row, and in it every pass's query positions one after another, none
    padded. Pass i has `sizes[i]` canvas rows, its own LayerCache `caches[i]` and its positions
    `where[i]` (P,) (the same for all its rows and all layers): its sizes[i] * P tokens, row by
    row, are the next ones of the forward's row. Each pass's queries attend to its own cache, and
    its fresh keys and values are written into it: nothing is copied."""

    caches: list[LayerCache]
    sizes: list[int]
    where: list[torch.Tensor]
    shared: dict = field(default_factory=dict)  # what every layer of the forward uses alike (`key_segments`)

    def key_segments(self, device: torch.device) -> torch.Tensor:
        """(1, 1, N, K) bool: which keys each packed query may attend to, where the passes' caches
        lie one after another along the keys (each canvas row's `lines_up`): a query token its
        own canvas row's keys alone. Made once a forward: the layers of a forward share `shared`."""
        if "mask" not in self.shared:
            queries = [len(where) for rows, where in zip(self.sizes, self.where) for _ in range(rows)]
            keys = [own.keys.shape[2] for rows, own in zip(self.sizes, self.caches) for _ in range(rows)]
            segment = torch.arange(len(queries))
            query_of = segment.repeat_interleave(torch.tensor(queries))
            key_of = segment.repeat_interleave(torch.tensor(keys))
            self.shared["mask"] = (query_of[:, None] == key_of[None, :])[None, None].to(device)
        return self.shared["mask"]


def span_tokens(ids: torch.Tensor, positions: torch.Tensor, cache: list) -> torch.Tensor:
    """The tokens a span pass computes: `ids` at `positions`; in a packed forward (its caches
    CacheRows), `ids` (1, N) are those tokens already, every pass's side by side."""
    return ids if cache and isinstance(cache[0], CacheRows) else at_positions(ids, positions)


def canvas_length(ids: torch.Tensor, cache: list) -> int:
    """The canvas length of a pass's `ids`; of a packed forward's (`span_tokens`), the longest
    canvas its passes' caches hold."""
    if cache and isinstance(cache[0], CacheRows):
        return max(own.keys.shape[2] for own in cache[0].caches)
    return ids.shape[1]


def attend_cached(q, k, v, cache: LayerCache | CacheRows, positions: torch.Tensor, attn_mask, attend):
    """A span pass's attention: the fresh keys k and values v (B, H, P, D) of `positions` go into
    `cache`, and the queries q (B, H', P, D) attend over the cache's whole canvas with `attend`
    (q, keys, values, mask) -> (B, H', P, D). A CacheRows cache: `attend_packed`."""
    if isinstance(cache, CacheRows):
        return attend_packed(q, k, v, cache, attend)
    write_at(cache.keys, positions, k)
    write_at(cache.values, positions, v)
    return attend(q, cache.keys, cache.values, attn_mask)


def attend_packed(q, k, v, cache: CacheRows, attend):
    """A packed forward's attention (q, k, v (1, H, N, D): several passes' tokens side by side):
    each pass's fresh keys and values go into its own cache, and each pass's queries attend to
    its own cache, as its own call attends them. Where infill's C attention takes them (the
    CPU), or for a single pass, a call a pass; elsewhere (a GPU) one call for every pass, over
    their caches laid one after another, each query masked to its own: a call a pass cost a GPU
    eight operations a layer for each further pass, launched one by one (docs/serving.md)."""
    counts = [rows * len(where) for rows, where in zip(cache.sizes, cache.where)]
    fresh = zip(cache.caches, cache.sizes, cache.where, k.split(counts, 2), v.split(counts, 2))
    for own, rows, where, keys, values in fresh:
        write_at(own.keys, where, unpacked(keys, rows))
        write_at(own.values, where, unpacked(values, rows))
    if len(counts) == 1 or layer_ops.applies(q, cache.caches[0].keys, bfloat16=True):
        out = []
        for own, rows, queries in zip(cache.caches, cache.sizes, q.split(counts, 2)):
            out.append(packed(attend(unpacked(queries, rows), own.keys, own.values, None)))
        return torch.cat(out, 2)
    keys = torch.cat([lines_up(own.keys) for own in cache.caches], 2)
    values = torch.cat([lines_up(own.values) for own in cache.caches], 2)
    return attend(q, keys, values, cache.key_segments(q.device))


def lines_up(t: torch.Tensor) -> torch.Tensor:
    """A cache's keys or values (rows, H, S, D) as one run (1, H, rows * S, D), row after row."""
    rows, heads, length, size = t.shape
    return t if rows == 1 else t.transpose(0, 1).reshape(1, heads, rows * length, size)


def unpacked(t: torch.Tensor, rows: int) -> torch.Tensor:
    """A pass's tokens of a packed forward (1, H, rows * P, D) as its own call has them: (rows, H, P, D)."""
    if rows == 1:
        return t
    _, heads, tokens, size = t.shape
    return t.reshape(heads, rows, tokens // rows, size).transpose(0, 1)


def packed(y: torch.Tensor) -> torch.Tensor:
    """(rows, H, P, D) -> (1, H, rows * P, D), row after row: `unpacked` undone."""
    rows, heads, tokens, size = y.shape
    return y if rows == 1 else y.transpose(0, 1).reshape(1, heads, rows * tokens, size)


def attention(q, k, v, attn_mask: torch.Tensor | None) -> torch.Tensor:
    """Bidirectional attention of q (B, H, L, D) over k, v (B, H, S, D)."""
    if attn_mask is None and layer_ops.applies(q, k, v, bfloat16=True):
        y = layer_ops.attention(q, k, v)  # a span pass's few queries: one call (None: not taken)
        if y is not None:
            return y
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def key_padding(key_mask: torch.Tensor | None) -> torch.Tensor | None:
    """A (B, L) mask, True at real tokens, as the attention's (B, 1, 1, L) mask over keys: a padded
    position is never attended (right-padded canvases of different lengths in one batch)."""
    return None if key_mask is None else key_mask.bool()[:, None, None, :]


class Attention(nn.Module):
    def __init__(self, config: InfillConfig):
        super().__init__()
        self.num_heads = config.num_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=False)
        self.out = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(self, x, cos, sin, attn_mask, cache: LayerCache | None = None, positions=None):
        """x (B, L, D) -> (B, L, D). With `cache` and `positions` (the P canvas positions x holds:
        (P,), or (B, P) row by row), queries come from those positions only and keys/values of
        every other position come from the cache; the cache then holds the fresh keys/values of
        `positions`. `attn_mask` (B, 1, 1, L): the keys each row may attend to (None: all)."""
        B, L, D = x.shape
        H = self.num_heads
        qkv = self.qkv(x).view(B, L, 3 * H, D // H)
        in_place = qkv.dtype == torch.bfloat16 and layer_ops.applies(qkv, cos, sin, bfloat16=True)
        if in_place:  # the queries and keys turned in one call, PyTorch's numbers
            layer_ops.rotate_halves_(qkv, 2 * H, cos, sin)
        q, k, v = (t.transpose(1, 2) for t in qkv.view(B, L, 3, H, D // H).unbind(2))  # (B, H, L, hd)
        if not in_place:
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if cache is not None and positions is not None:  # a partial pass: the given positions are fresh
            y = attend_cached(q, k, v, cache, positions, attn_mask, attention)
        else:
            if cache is not None:  # a full pass: remember every position's keys and values, in
                # tensors of their own: v is a view of the qkv product, which a span pass's
                # attention copied whole at every layer (0.8 ms of a 7-8 ms int4 pass on a Zen 3)
                cache.keys, cache.values = k.contiguous(), v.contiguous()
            y = attention(q, k, v, attn_mask)
        return self.out(y.transpose(1, 2).reshape(B, L, D))


class SwiGLU(nn.Module):
    def __init__(self, config: InfillConfig):
        super().__init__()
        inner = int(config.hidden_size * config.mlp_ratio)
        self.gate_up = nn.Linear(config.hidden_size, 2 * inner, bias=False)
        self.down = nn.Linear(inner, config.hidden_size, bias=False)

    def forward(self, x):
        return self.down(layer_ops.gated(self.gate_up(x)))


class Block(nn.Module):
    def __init__(self, config: InfillConfig):
        super().__init__()
        self.norm1 = nn.RMSNorm(config.hidden_size, eps=config.norm_eps)
        self.attn = Attention(config)
        self.norm2 = nn.RMSNorm(config.hidden_size, eps=config.norm_eps)
        self.mlp = SwiGLU(config)

    def forward(self, x, cos, sin, attn_mask, cache=None, positions=None):
        attended = self.attn(normalized(self.norm1, x), cos, sin, attn_mask, cache, positions)
        x, normed = layer_ops.added_norm(x, attended, self.norm2.weight, epsilon(self.norm2, x), self.norm2)
        return x + self.mlp(normed)


def normalized(norm: nn.RMSNorm, x: torch.Tensor) -> torch.Tensor:
    """norm(x), in one C call where infill's layer operations apply (infill.models.layer_ops)."""
    if layer_ops.applies(x, norm.weight, bfloat16=True):
        return layer_ops.rms_norm(x, norm.weight, epsilon(norm, x))
    return norm(x)


def epsilon(norm: nn.RMSNorm, x: torch.Tensor) -> float:
    """The norm's eps; nn.RMSNorm's own when it was given none."""
    return torch.finfo(x.dtype).eps if norm.eps is None else norm.eps


def fused_span_layers(model: InfillModel, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                      cache: list, positions: torch.Tensor) -> torch.Tensor | None:  # fmt: skip
    """x (B, P, E), a span pass's query tokens, through every layer, each layer in one C call
    (layer_ops.span_block_: what the block's modules compute, with the same C operations and
    bfloat16 product in the same order, so the same numbers); None where that call does not serve
    the pass (not bfloat16 on the CPU, products not infill's, more positions than its attention
    takes, ...): the blocks then run as modules. One call instead of some forty from Python a
    layer: a span pass of the shipped model was mostly their overhead."""
    heads, head_dim = model.config.num_heads, model.config.hidden_size // model.config.num_heads
    runs = c_span_runs(x, cos, cache, positions, torch.bfloat16, head_dim, group=1)
    if runs is None or not bf16_native.available():
        return None
    layers = [fused_layer(block, x) for block in model.blocks]
    if any(layer is None for layer in layers):
        return None
    flat, cos, sin = token_rows(x, cos, sin)
    scale, linear_at = head_dim**-0.5, bf16_native.kernel_address()
    for index, (norms, weights) in enumerate(layers):
        own = [(rows, where, *contiguous(caches[index])) for rows, where, caches in runs]
        layer_ops.span_block_(flat, norms, weights, heads, cos, sin, own, linear_at, scale)
    return flat.view(x.shape)


def token_rows(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple:
    """A span pass's tokens x (B, P, E) as the C layers take them: (B * P, E) contiguous, and each
    token's rotary angles, one table row a token (the tables have one a position, the same for
    every canvas row, or one a token already in a packed forward)."""
    B, P, E = x.shape
    flat = x.reshape(B * P, E).contiguous()
    cos, sin = (t.reshape(-1, t.shape[-1]) for t in (cos, sin))
    if cos.shape[0] != len(flat):
        cos, sin = cos.repeat(B, 1), sin.repeat(B, 1)
    return flat, cos.contiguous(), sin.contiguous()


def fused_layer(block: Block, x: torch.Tensor) -> tuple | None:
    """A block's norms (weight, eps) and packed products as `layer_ops.span_block_` takes them;
    None unless every product is infill's bfloat16 kernel without a bias, the norms bfloat16."""
    attn, mlp, norm1, norm2 = block.attn, block.mlp, block.norm1, block.norm2
    products = (attn.qkv, attn.out, mlp.gate_up, mlp.down)
    if not all(type(p) is bf16_native.Bf16Linear and p.bias is None for p in products):
        return None
    if norm1.weight.dtype != torch.bfloat16 or norm2.weight.dtype != torch.bfloat16:
        return None
    norms = ((norm1.weight, epsilon(norm1, x)), (norm2.weight, epsilon(norm2, x)))
    return norms, (*(p.packed_weight() for p in products), products[3].in_features)


def c_span_runs(x: torch.Tensor, cos: torch.Tensor, cache: list, positions: torch.Tensor,
                dtype: torch.dtype, head_dim: int, group: int) -> list | None:  # fmt: skip
    """`span_runs` where a C span layer (layer_ops.c) can take them: x, the angles and every
    run's cache in `dtype` (bfloat16 or float32) on the CPU, the caches filled, heads of a size
    its attention takes, and at most its queries for each key/value head (`group` query heads a
    key/value head, each at every position of a run); else None."""
    runs = span_runs(x, cache, positions)
    if runs is None or x.dtype != dtype or cos.dtype != dtype:
        return None
    if any(caches[0].keys is None or caches[0].keys.dtype != dtype for _, _, caches in runs):
        return None
    if head_dim % 16 or head_dim > 256 or not layer_ops.applies(x, cos, bfloat16=True):
        return None
    if group * max(len(where) for _, where, _ in runs) > layer_ops.most_queries():
        return None
    return runs


def span_runs(x: torch.Tensor, cache: list, positions: torch.Tensor) -> list | None:
    """(canvas rows, positions (P,), every layer's cache) of each pass whose tokens x holds, in
    order: a packed forward's passes (CacheRows), or one pass; None for positions row by row."""
    if isinstance(cache[0], CacheRows):
        first = cache[0]
        return [(rows, where.long().contiguous(), [layer.caches[s] for layer in cache])
                for s, (rows, where) in enumerate(zip(first.sizes, first.where))]  # fmt: skip
    if positions.dim() != 1:
        return None
    return [(x.shape[0], positions.long().contiguous(), list(cache))]


def contiguous(own: LayerCache) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer cache's keys and values, made contiguous in place where they were not (a full
    pass leaves views of its products), so that C writes into them."""
    if not own.keys.is_contiguous():
        own.keys = own.keys.contiguous()
    if not own.values.is_contiguous():
        own.values = own.values.contiguous()
    return own.keys, own.values


class InfillModel(PreTrainedModel):
    """Bidirectional transformer denoiser: ids (B, L) -> logits (B, L, vocab)."""

    config_class = InfillConfig
    base_model_prefix = "infill"
    _tied_weights_keys = {"lm_head.weight": "embed.weight"}

    def __init__(self, config: InfillConfig):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        self.norm = nn.RMSNorm(config.hidden_size, eps=config.norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        elif isinstance(module, nn.RMSNorm):
            nn.init.ones_(module.weight)

    def get_input_embeddings(self):
        return self.embed

    def get_output_embeddings(self):
        return self.lm_head

    def hidden_states(self, input_ids, attention_mask=None):
        """Final normalised hidden states (B, L, hidden): everything but the output layer."""
        L = input_ids.shape[1]
        head_dim = self.config.hidden_size // self.config.num_heads
        cos, sin = rotary_tables(
            L, head_dim, self.config.rope_theta, input_ids.device, self.embed.weight.dtype
        )
        attn_mask = key_padding(attention_mask)  # (B, 1, 1, L) over keys
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x, cos, sin, attn_mask)
        return self.norm(x)

    def cached_logits(
        self,
        input_ids,
        positions: torch.Tensor,
        cache: list[LayerCache],
        refresh: bool,
        key_mask: torch.Tensor | None = None,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, P, vocab) at `positions` (P,) of the canvas only; (B, R, vocab) at `rows`
        (R,) of them alone if given (the others computed for the cache only).

        `refresh`: one pass over the whole canvas that also fills `cache` with every layer's keys
        and values. Otherwise only `positions` are computed, attending to the cached keys and
        values of the rest of the canvas (the fixed context: Fast-dLLM's dual cache). Cached
        context keys are those of the last full pass, an approximation that costs little while
        only the editable positions change.

        A batch of canvases of different lengths (infill.models.batching): `input_ids` and the
        cache right-padded, `key_mask` (B, L) True at each row's real positions (padded keys are
        never attended), `positions` (B, P) each row's own."""
        head_dim = self.config.hidden_size // self.config.num_heads
        cos, sin = rotary_tables(
            canvas_length(input_ids, cache), head_dim, self.config.rope_theta, input_ids.device,
            self.embed.weight.dtype,
        )  # fmt: skip
        attn_mask = key_padding(key_mask)
        if refresh:
            x = self.embed(input_ids)
            for block, layer in zip(self.blocks, cache):
                x = block(x, cos, sin, attn_mask, layer)
            x = at_positions(x, positions)
        else:
            x = self.embed(span_tokens(input_ids, positions, cache))
            cos, sin = cos[positions], sin[positions]
            fused = fused_span_layers(self, x, cos, sin, cache, positions)
            if fused is not None:
                x = fused
            else:
                if positions.dim() == 2:  # (B, P, D/2) -> (B, 1, P, D/2): each row its positions' angles
                    cos, sin = cos[:, None], sin[:, None]
                for block, layer in zip(self.blocks, cache):
                    x = block(x, cos, sin, attn_mask, layer, positions)
        return self.lm_head(self.norm(x if rows is None else x[:, rows]))

    def forward(self, input_ids, attention_mask=None, labels=None, **unused):
        """attention_mask (B, L): 1 for real tokens, 0 for padding (padding keys are ignored).
        labels (B, L): target ids, -100 where no loss is taken."""
        logits = self.lm_head(self.hidden_states(input_ids, attention_mask))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), labels.view(-1))
        return MaskedLMOutput(loss=loss, logits=logits)
