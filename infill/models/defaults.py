"""A model family's recommended sampler settings, applied where the user set nothing.

Each denoiser carries `recommended`, its authors' settings in their own words (Dream's README,
DreamOn's and Open-dLLM's evaluation scripts, LLaDA's generate.py: see the family modules). This
module turns those words into `SamplerConfig` fields, and fills in the fields a request left
unset. What a user sets (a CLI flag, a server setting) always wins.

    "alg" -> order (entropy, maskgit_plus, topk_margin, low_confidence; Open-dLLM's "p2", which
             this sampler does not implement, falls back to the default order)
    "temperature", "top_p", "top_k", "block_length" -> the fields of the same name
    "initial_masks" -> expand_start (DreamOn: masks a span starts with)
    "steps" -> nothing: this engine's step caps follow the span (infill.sampler.step_cap)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infill.options import ORDERS, SamplerConfig

TUNABLE = ("order", "temperature", "top_p", "top_k", "block_length", "expand_start")
"""The SamplerConfig fields a family's recommendation may set."""


def recommended_fields(denoiser: Any) -> dict[str, Any]:
    """The denoiser's recommendation as SamplerConfig fields ({} for the project's own models)."""
    words = getattr(denoiser, "recommended", None) or {}
    fields: dict[str, Any] = {}
    if words.get("alg") in ORDERS:
        fields["order"] = words["alg"]
    for name in ("temperature", "top_p", "top_k", "block_length"):
        if isinstance(words.get(name), (int, float)):
            fields[name] = words[name]
    if isinstance(words.get("initial_masks"), int):
        fields["expand_start"] = words["initial_masks"]
    return fields


def with_recommended(config: SamplerConfig, denoiser: Any, explicit: set[str]) -> SamplerConfig:
    """`config` with the denoiser's recommended settings in every tunable field not in `explicit`
    (the fields the user set)."""
    fields = {k: v for k, v in recommended_fields(denoiser).items() if k not in explicit}
    return replace(config, **fields) if fields else config
