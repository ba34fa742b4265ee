"""A document's context kept between requests: the next fill starts from the last one's cache.

Within one fill the sampler already reuses the context's keys and values between full passes
(:mod:`infill.engine.prediction`). Each fill still starts with a full pass over its canvas, which for a
0.5B-7B model is most of a one-line fill's time. In an editor the next request is nearly always
on the same file, and its canvas mostly holds the same tokens as the last one's: the same window
(or one that overlaps it), with another span masked.

:class:`KeptContext` wraps a caching denoiser for one document. It remembers the canvas and the
keys/values of the last pass it ran. When a new fill asks for its first full pass, the new
canvas is aligned with the remembered one (runs of equal tokens, :func:`aligned_runs`); the keys
and values of the aligned positions are moved to their new positions (keys turned by the rotary
angle of the move, :func:`moved_cache`), and only the other positions (the new span, what was
edited, the window's new edges) and the positions asked for are computed, attending to the moved
context. That is the approximation the sampler makes between its full passes (Fast-dLLM's
cache: context keys computed while the span held other tokens), carried across requests; the
fill's later full passes (every ``cache_refresh`` steps) are real ones. When too little of the
canvas aligns, the pass is a full one, as without a kept context.

Staleness is bounded two ways. While the user is idle after an edit, the language server runs
:meth:`KeptContext.refresh`: one exact full pass over the document as it is now, around where it
changed (:func:`context_ids`), so the next fill's first pass computes only its span, attending to
context that is exact but for the span's old text. And at most :data:`MAX_REUSES` first passes
in a row reuse moved context; the next one is a full pass.

Only the language server keeps contexts (one per open document, :class:`DocumentContexts`); the
CLI and the benchmarks run exactly as before.
"""

from __future__ import annotations

import difflib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from infill.engine.canvas import build_canvas
from infill.text.document import Document
from infill.text.spans import Span
from infill.text.window import staging_window

MIN_RUN = 8
"""Aligned runs shorter than this many tokens are computed afresh (chance matches)."""
MIN_KEPT_SHARE = 0.5
"""A first pass reuses the kept context only if at least this share of the canvas aligns."""
MAX_REUSES = 8
"""First passes in a row that may reuse moved context; the next is a full pass (a refresh, or a
fill's own refresh, counts as one)."""


class KeptContext:
    """A caching denoiser (``inner``) whose first full pass of each fill reuses the keys and
    values of the last pass it ran, moved to where the same tokens are now. Everything else is
    the inner denoiser's (attributes are looked up there)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ids: torch.Tensor | None = None  # (B, L) canvas of the kept cache
        self.cache: list | None = None  # the cache object the last pass wrote
        self.reused_passes = 0  # full passes replaced by passes over the changed positions
        self.computed_positions = 0  # positions computed in those passes
        self.reuses_in_a_row = 0  # since the last full pass: bounded by MAX_REUSES
        self.refreshes = 0  # idle refreshes run (refresh)

    def __getattr__(self, name: str) -> Any:  # mask_id, null_id, encode, recommended, ...
        return getattr(self.inner, name)

    def new_cache(self) -> list:
        return self.inner.new_cache()

    @torch.no_grad()
    def cached_logits(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache: list,
        refresh: bool,
        predicted: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """As the inner denoiser's; a full pass that starts a cache (not one that refreshes the
        cache of a fill under way) is replaced by a pass over the changed positions when enough
        of the canvas aligns with the kept one (the changed ones not asked for are computed for
        the cache alone)."""
        starts = refresh and cache is not self.cache
        changed = self._reuse(ids, cache) if starts and self.reuses_in_a_row < MAX_REUSES else None
        if changed is not None:
            asked = positions.cpu()
            computed = torch.unique(torch.cat([asked, changed]))  # sorted
            wanted = None if torch.equal(computed, asked) else torch.searchsorted(computed, asked)
            if predicted is not None:
                wanted = predicted if wanted is None else wanted[predicted]
            out = self.inner.cached_logits(ids, computed, cache, False, wanted)
            self.reused_passes += 1
            self.reuses_in_a_row += 1
            self.computed_positions += len(computed)
        else:
            out = self.inner.cached_logits(ids, positions, cache, refresh, predicted)
            if refresh:
                self.reuses_in_a_row = 0
        self.ids, self.cache = ids.clone(), cache
        return out

    def fork(self, inner: Any = None) -> KeptContext:
        """Another kept context starting from this one's (the kept cache is shared: a fill's
        first pass writes into a cache of its own, never into the kept one), over ``inner`` if
        given: the same network behind another wrapper (the batching driver's pass denoiser of
        one request, infill.engine.batching)."""
        other = KeptContext(self.inner if inner is None else inner)
        other.ids, other.cache, other.reuses_in_a_row = self.ids, self.cache, self.reuses_in_a_row
        return other

    def keep(self, fork: KeptContext) -> None:
        """Take a fork's context as this one's (the fork's request is done) and count its passes."""
        self.ids, self.cache, self.reuses_in_a_row = fork.ids, fork.cache, fork.reuses_in_a_row
        self.reused_passes += fork.reused_passes
        self.computed_positions += fork.computed_positions

    @torch.no_grad()
    def refresh(
        self,
        ids: torch.Tensor,
        stop: Callable[[], bool] = lambda: False,
        on_layer: Callable[[int, int], None] = lambda done, total: None,
    ) -> bool:
        """Keep the exact context of canvas ``ids`` (1, L): one full pass (its output layer at one
        position only), run while the user is idle; the next fill's first pass aligns with it.
        ``stop()`` is asked before each layer (``on_layer(layers done, layers)`` told): True
        abandons the pass and leaves the kept context as it was (the pass writes a cache of its
        own), so that a request never waits for more than a layer of a refresh (a 7B network's
        full pass on 2 cores: 20-40 s, a layer about 1 s). True if the refresh ran to its end."""
        cache = self.inner.new_cache()
        try:
            layers = self.inner.layers() if hasattr(self.inner, "layers") else []
            with layer_checks(layers, stop, on_layer):
                self.inner.cached_logits(ids, torch.tensor([ids.shape[1] - 1]), cache, refresh=True)
        except RefreshStopped:
            return False
        self.ids, self.cache, self.reuses_in_a_row = ids.clone(), cache, 0
        self.refreshes += 1
        return True

    def _reuse(self, ids: torch.Tensor, cache: list) -> torch.Tensor | None:
        """Fill ``cache`` from the kept one if enough of ``ids`` aligns with it, and return the
        positions left to compute; None (``cache`` untouched) if too little aligns."""
        if self.cache is None or self.ids is None or self.ids.shape[0] != ids.shape[0]:
            return None
        if any(layer.keys is None for layer in self.cache):
            return None
        old, new = self.ids[0].tolist(), ids[0].tolist()
        if any(not torch.equal(self.ids[row], self.ids[0]) or not torch.equal(ids[row], ids[0])
               for row in range(1, ids.shape[0])):  # fmt: skip
            return None  # rows that differ outside their spans: not this simple alignment
        runs = aligned_runs(old, new)
        kept = sum(length for _, _, length in runs)
        if kept < MIN_KEPT_SHARE * len(new):
            return None
        for layer, moved in zip(cache, moved_cache(self.cache, runs, len(new), self.inner.rope_theta)):
            layer.keys, layer.values = moved.keys, moved.values
        fresh = torch.ones(len(new), dtype=torch.bool)
        for _, j, n in runs:
            fresh[j : j + n] = False
        return fresh.nonzero().flatten()


class RefreshStopped(Exception):
    """A refresh's ``stop()`` said stop (raised between two layers of its pass)."""


@contextmanager
def layer_checks(
    layers: list[torch.nn.Module], stop: Callable[[], bool], on_layer: Callable[[int, int], None]
) -> Iterator[None]:
    """While inside: before each of ``layers`` runs, ``on_layer(its index, len(layers))``, then
    RefreshStopped if ``stop()``. The hooks are the network's for this one pass (the model's worker
    thread runs one pass at a time)."""

    def check(index: int) -> Callable:
        def before(module: torch.nn.Module, inputs: Any) -> None:
            on_layer(index, len(layers))
            if stop():
                raise RefreshStopped

        return before

    handles = [layer.register_forward_pre_hook(check(index)) for index, layer in enumerate(layers)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def context_ids(
    denoiser: Any, document: Document, offset: int, context_length: int | None = None
) -> torch.Tensor:
    """The canvas (1, L) a fill near ``offset`` of ``document`` would see, without its span: the
    window the pipeline's window step picks around ``offset`` (infill.engine.pipeline.in_window:
    the model's reach, widened to whole statements where it would not parse), tokenized as a
    fill at ``offset`` tokenizes it (split there), framed as the family frames it
    (infill.engine.canvas)."""
    context_length = context_length or denoiser.context_length
    part = staging_window(document, offset, offset, context_length)
    here = offset - part.start
    text = document.text[part.start : part.end]
    canvas = build_canvas(denoiser, text, [Span(here, here)], 0, context_length)
    return torch.tensor([canvas.ids])


def without_kept_context(denoiser: Any) -> Any:
    """The denoiser itself, not through a kept context: for passes that must be exact and must
    not replace the document's kept context (fix mode's masked scoring, whose canvases differ
    from each other in one position)."""
    return denoiser.inner if isinstance(denoiser, KeptContext) else denoiser


def aligned_runs(old: list[int], new: list[int], min_run: int = MIN_RUN) -> list[tuple[int, int, int]]:
    """(start in old, start in new, length) of the runs of equal tokens of two canvases, in
    order, each at least ``min_run`` long."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [(i, j, n) for i, j, n in matcher.get_matching_blocks() if n >= min_run]


def moved_cache(
    cache: list, runs: list[tuple[int, int, int]], length: int, theta: float, all_layers: bool | None = None
) -> list:
    """Per layer, keys and values (B, H, ``length``, D) holding each run (i, j, n) of
    ``aligned_runs`` (the cache's positions i .. i + n - 1) at j .. j + n - 1, zeros elsewhere (to
    be computed); the keys of a run that moved turned by the rotary angle of its move, so that
    each is the key of the same token at its new position. Runs are copied as slices (a run that
    stayed where it was is copied as it is: turning by 0 gives the same numbers).

    ``all_layers`` (None: off the CPU): every layer's keys and values stacked and moved at once,
    the same numbers, the layers' caches views of the two stacked tensors. The operations a move
    launches then do not grow with the layers: a 7B cache of 28 layers moved in two runs took 42
    operations, where a layer at a time took 686, each a kernel launch on a GPU. On the CPU a
    layer at a time is faster (its slices stay in the caches): that cache in 12.0 ms against 48.8,
    medians of 30 on two cores of a Zen 5 (2026-12-08, docs/experiments/moved_cache_ab.py)."""
    if not cache:
        return []
    kind, first = type(cache[0]), cache[0].keys
    # a move's angles as one row, for every key of each run that moved by it
    turns = {j - i: rotation(torch.tensor([j - i], device=first.device), first.shape[-1], theta)
             for i, j, _ in runs if i != j}  # fmt: skip
    if all_layers is None:
        all_layers = first.device.type != "cpu"
    if not all_layers:
        return [kind(*moved(layer.keys, layer.values, runs, length, turns)) for layer in cache]
    stacked = (torch.stack([layer.keys for layer in cache]), torch.stack([layer.values for layer in cache]))
    keys, values = moved(*stacked, runs, length, turns)
    return [kind(k, v) for k, v in zip(keys.unbind(0), values.unbind(0))]


def moved(keys: torch.Tensor, values: torch.Tensor, runs: list, length: int, turns: dict) -> tuple:
    """Keys and values (..., S, D) with `moved_cache`'s runs moved into new ones of `length`
    positions, the keys of each run that moved turned by its angles in `turns`."""
    shape = (*keys.shape[:-2], length, keys.shape[-1])
    new_keys, new_values = keys.new_zeros(shape), values.new_zeros(shape)
    for i, j, n in runs:
        new_values[..., j : j + n, :] = values[..., i : i + n, :]
        run = keys[..., i : i + n, :]
        new_keys[..., j : j + n, :] = run if i == j else turned(run, *turns[j - i])
    return new_keys, new_values


def rotated(keys: torch.Tensor, deltas: torch.Tensor, theta: float) -> torch.Tensor:
    """Keys (B, H, P, D) already turned for their positions, turned by ``deltas`` (P,) positions
    more: rotary embeddings (pairs i, i + D/2 turned by position x theta^(-2i/D), the layout of
    infill.models.native.model and infill.models.decoder) compose by adding angles."""
    return turned(keys, *rotation(deltas.to(keys.device), keys.shape[-1], theta))


def rotation(deltas: torch.Tensor, dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (P, dim / 2) of the angles that turn keys by ``deltas`` (P,) positions."""
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, device=deltas.device).float() / dim)
    angles = torch.outer(deltas.float(), inv_freq)
    return angles.cos(), angles.sin()


def turned(keys: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Keys (..., P, D) turned by the angles whose cos and sin (P, D / 2) are given."""
    k1, k2 = keys.float().chunk(2, dim=-1)
    return torch.cat([k1 * cos - k2 * sin, k1 * sin + k2 * cos], dim=-1).to(keys.dtype)


class DocumentContexts:
    """The kept contexts of the last few documents (the language server's), for one model."""

    def __init__(self, documents: int = 4) -> None:
        self.documents = documents
        self._kept: OrderedDict[str, KeptContext] = OrderedDict()
        self._lock = threading.Lock()

    def denoiser(self, uri: str, backend: Any) -> Any:
        """The denoiser a job on ``uri`` runs: ``backend`` with the document's kept context, or
        ``backend`` itself if it cannot cache (no ``cached_logits``/``rope_theta``)."""
        if not (hasattr(backend, "cached_logits") and hasattr(backend, "rope_theta")):
            return backend
        with self._lock:
            kept = self._kept.get(uri)
            if kept is None or kept.inner is not backend:  # a new document, or another model
                kept = KeptContext(backend)
            self._kept[uri] = kept
            self._kept.move_to_end(uri)
            while len(self._kept) > self.documents:
                self._kept.popitem(last=False)
            return kept

    def kept(self, uri: str) -> KeptContext | None:
        """The document's kept context, if it has one (no new one is made)."""
        with self._lock:
            return self._kept.get(uri)

    def forget(self, uri: str) -> None:
        """The document was closed: its context is dropped."""
        with self._lock:
            self._kept.pop(uri, None)
