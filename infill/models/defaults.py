"""A model family's recommended sampler settings, applied where the user set nothing.

Each denoiser carries `recommended`, its authors' settings in their own words (Dream's README,
DreamOn's and Open-dLLM's evaluation scripts, LLaDA's generate.py: see the family modules). This
module turns those words into `SamplerConfig` fields, and fills in the fields a request left
unset. What a user sets (a CLI flag, a server setting) always wins.

    "alg" -> order (entropy, maskgit_plus, topk_margin, low_confidence; Open-dLLM's "p2", which
             this sampler does not implement, falls back to the default order)
    "temperature", "top_p", "top_k", "block_length" -> the fields of the same name
    "initial_masks" -> expand_start (DreamOn: masks a span starts with)
    "steps": "one per new token" (Dream, LLaDA, DiffuCoder with one token a step) -> cap_per_position:
             a step cap left unset is one pass per masked position; numbers (DreamOn's 256,
             Open-dLLM's 64) -> nothing: this engine's step caps follow the span (step_cap)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infill.options import ORDERS, SamplerConfig

TUNABLE = ("order", "temperature", "top_p", "top_k", "block_length", "expand_start", "cap_per_position")
PER_TOKEN_STEPS = ("one per new token", "new tokens / tokens per step")  # the READMEs' steps = new tokens
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
    if words.get("steps") in PER_TOKEN_STEPS:
        fields["cap_per_position"] = True
    return fields


def with_recommended(config: SamplerConfig, denoiser: Any, explicit: set[str]) -> SamplerConfig:
    """`config` with the denoiser's recommended settings in every tunable field not in `explicit`
    (the fields the user set)."""
    fields = {k: v for k, v in recommended_fields(denoiser).items() if k not in explicit}
    return replace(config, **fields) if fields else config


PUBLISHED_PASS_BUDGET = 48
"""Forward passes a request's canvas may take in all (its fill, then the repair stage's retries,
edits and fresh fills) with a published checkpoint, unless the user says otherwise: each of its
passes costs a 152k-row output layer, and the repair steps were tuned on the shipped model. A
two-line fill with a 20M-parameter Dream-layout checkpoint: docs/models.md."""


def recommended_pass_budget(denoiser: Any, default: int | None) -> int | None:
    """The pass budget a request gets unless the user set one: PUBLISHED_PASS_BUDGET for a
    published checkpoint (a denoiser with a `family`), else `default`."""
    return PUBLISHED_PASS_BUDGET if getattr(denoiser, "family", None) is not None else default
