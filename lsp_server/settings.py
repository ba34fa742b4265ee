"""Server settings from the client's ``initializationOptions``.

Recognised keys (all optional)::

    {"modelPath": "/path/to/model/dir",   # default: the model shipped in the package
     "steps": 32,                          # cap on denoising passes per fill
     "temperature": 0.0,                   # 0: most likely token; > 0: sample
     "contextLength": 256,                 # canvas length; default: the model's own
     "threads": 2}                         # CPU threads for torch; default: torch's choice

A value of the wrong type is ignored with a warning (the server still starts with its default);
unknown keys are ignored too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infill.engine import InfillOptions


@dataclass(frozen=True)
class Settings:
    model_path: str | None = None
    steps: int | None = None
    temperature: float | None = None
    context_length: int | None = None
    threads: int | None = None

    def infill_options(self) -> InfillOptions:
        """Engine options: the sampler's defaults, overridden by what was set."""
        from infill.engine import InfillOptions
        from infill.sampler import SamplerConfig

        sampler = SamplerConfig()
        if self.steps is not None:
            sampler.steps = self.steps
        if self.temperature is not None:
            sampler.temperature = self.temperature
        return InfillOptions(sampler=sampler, context_length=self.context_length)


_KEYS = {
    # option name: (Settings field, check, what it must be)
    "modelPath": ("model_path", lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    "steps": ("steps", lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "temperature": (
        "temperature",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
        "a number >= 0",
    ),
    "contextLength": ("context_length", lambda v: _is_int(v) and v >= 8, "an integer >= 8"),
    "threads": ("threads", lambda v: _is_int(v) and v >= 1, "a positive integer"),
}


def parse_settings(options: Any) -> tuple[Settings, list[str]]:
    """Settings from ``initializationOptions`` (any JSON value), and a warning per bad value."""
    if options is None:
        return Settings(), []
    if not isinstance(options, Mapping):
        return Settings(), [f"initializationOptions should be an object, got {type(options).__name__}"]
    values: dict[str, Any] = {}
    warnings = []
    for key, (field, check, expected) in _KEYS.items():
        value = options.get(key)
        if value is None:
            continue
        if check(value):
            values[field] = float(value) if field == "temperature" else value
        else:
            warnings.append(f"initializationOptions.{key} should be {expected}, got {value!r}: ignored")
    return Settings(**values), warnings


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
