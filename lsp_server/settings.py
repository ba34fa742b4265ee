"""Server settings: from ``initializationOptions``, then from the client's configuration.

Recognised keys (all optional), the same in ``initializationOptions`` and in the ``infill``
section of the client's configuration (``workspace/configuration``,
``workspace/didChangeConfiguration``)::

    {"modelPath": "/path/to/model/dir",   # default: the model shipped in the package; any folder
                                           # infill.models.load takes (Dream, DiffuCoder, LLaDA, ...),
                                           # or a name ORG/NAME[@REVISION] in the local Hugging Face
                                           # cache (infill.models.hub_cache; never downloaded)
     "device": "auto",                     # cuda, mps, cpu or auto (the first available)
     "dtype": "auto",                      # float32, bfloat16, float16 or auto (docs/models.md)
     "trustRemoteCode": false,             # run the checkpoint's own modeling code (never otherwise)
     "quantize": "auto",                   # "int4" / "int8": linear layers' weights in 4 / 8 bits
                                           #   (CPU; int8 float32 only); "none"; "auto": for 100M
                                           #   parameters or more on the CPU, int8 where it fits in
                                           #   half the memory, else int4
     "steps": 32,                          # cap on denoising passes per fill; default: 16 for
                                           # spans of one line or less, 128 for longer ones
     "temperature": 0.0,                   # 0: most likely token; > 0: sample
     "blockLength": 4,                     # decode spans in blocks of this many positions, left to
                                           #   right (default: the model's recommendation, else none)
     "blockPasses": true,                  # with blocks: a cached pass computes the current block
                                           #   alone (a 7B model on a CPU: docs/models.md)
     "alternatives": 3,                    # candidates of "fill selection (N alternatives)",
                                           # and inline completions (when temperature > 0)
     "contextLength": 256,                 # context window (canvas length); default: the model's
     "retries": 4,                         # retries of a fill that breaks a file that parsed
     "tokenEdits": 6,                      # then parser-checked single-token edits
     "freshFills": 4,                      # then fresh fills of a multi-line fill still broken...
     "protocol": "engine",                 # "authors": fill actions run a published model's own
                                           #   loop, token for token (infill.engine.authors: steps and
                                           #   temperature apply, nothing else of the engine's)
     "passBudget": 400,                    # forward passes a fill and its repairs take in all
                                           #   (0: no bound; default 400, 48 for a published model)
     "recall": true,                       # a one-line fill may take a line of the file that the
                                           #   model ranks higher (infill.engine.recall)
     "threads": 2,                         # CPU threads for torch; default: torch's choice
     "requestTimeout": 300,                # seconds of model time a request may take (0: no
                                           # bound); past it the job stops with an error
     "idleRefresh": 0.5,                   # seconds of quiet after an edit before the document's
                                           #   kept context is refreshed around it (0: never;
                                           #   lsp_server.idle)
     "languages": ["python", "go"],        # the languages infill answers for (names of
                                           # infill.text.languages, or "text"); default: all
     "review": false,                      # review diagnostics: the tokens the model doubts, as
                                           #   hints, scored while the user is idle (lsp_server.review)
     "reviewThreshold": 5e-6,              # a token is doubted below this probability (default:
                                           #   review mode's, infill.modes.review)
     "reviewMaxPerFile": 20,               # at most this many review diagnostics a document, the
                                           #   least likely first
     "endpoint": "http://gpu-box:8000",    # a team server (`infill serve`) runs the model instead:
                                           #   modelPath, device, dtype, quantize, threads and
                                           #   trustRemoteCode are then the server's ("": none)
     "token": "..."}                       # the team server's bearer token, if it asks for one

Configuration overrides ``initializationOptions`` key by key; a key the configuration leaves out
keeps its ``initializationOptions`` value. A value of the wrong type is ignored with a warning
(the server keeps the value it had); unknown keys are ignored too.

One setting, one name: each key is the camelCase of its field in infill.options (InfillOptions,
or its SamplerConfig) and of its ``infill`` flag: ``tokenEdits``, ``InfillOptions.token_edits``,
``--token-edits``; the VS Code setting is ``infill.tokenEdits``. The keys that name no such field
are the server's own (SERVER_ONLY). A key's old name (RENAMED) is still read where the new one is
not set, and the server says once which name to use (``renamed_notices``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infill.options import QUANTIZE_MODES, REVIEW_THRESHOLD
from infill.text.languages import LANGUAGES, TEXT, named
from lsp_server.idle import IDLE_SECONDS

if TYPE_CHECKING:
    from infill.options import InfillOptions

DTYPES = ("auto", "float32", "bfloat16", "float16")
NAMES = (*(language.name for language in LANGUAGES), TEXT.name)
SECTION = "infill"
"""The configuration section the server asks the client for."""
DEFAULT_REQUEST_TIMEOUT = 300.0
"""Seconds of model time one request may take unless ``requestTimeout`` says otherwise."""
DEFAULT_REVIEW_THRESHOLD = REVIEW_THRESHOLD
"""Review mode's threshold (infill.options.REVIEW_THRESHOLD, chosen by `infill-bench review`)."""
DEFAULT_REVIEW_MAX = 20
"""Review diagnostics a document gets at most (the least likely tokens first)."""


@dataclass(frozen=True)
class Settings:
    model_path: str | None = None
    steps: int | None = None
    temperature: float | None = None
    context_length: int | None = None
    threads: int | None = None
    alternatives: int = 3  # 1: no "fill selection (N alternatives)" action
    retries: int | None = None
    token_edits: int | None = None
    fresh_fills: int | None = None
    pass_budget: int | None = None
    recall: bool = True  # one-line fills may take a line of the file (infill.engine.recall)
    protocol: str = "engine"  # "authors": fill actions run the model family's published loop
    device: str = "auto"  # these four: how infill.models.load loads model_path
    dtype: str = "auto"
    trust_remote_code: bool = False
    quantize: str = "auto"  # "int4", "int8", "none", "auto": linear layers' weights (infill.models.quantize)
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT  # seconds; None: no bound
    idle_refresh: float = IDLE_SECONDS  # seconds of quiet before the kept context is refreshed; 0: never
    languages: tuple[str, ...] | None = None  # names of infill.text.languages (and "text"); None: all
    review: bool = False  # review diagnostics (lsp_server.review)
    review_threshold: float = DEFAULT_REVIEW_THRESHOLD
    review_max_per_file: int = DEFAULT_REVIEW_MAX
    endpoint: str | None = None  # a team server's URL (infill.models.served); None: the model runs here
    token: str | None = None  # its bearer token
    block_length: int | None = None  # None: the model family's recommendation, else one block
    block_passes: bool = False  # with blocks: a cached pass computes the current block alone

    def infill_options(self, denoiser: Any = None) -> InfillOptions:
        """Engine options: the sampler's defaults, then the model family's recommended settings
        (given the loaded `denoiser`: infill.models.defaults), overridden by what was set."""
        from infill.models.defaults import recommended_pass_budget, with_recommended
        from infill.options import AuthorsSettings, InfillOptions, SamplerConfig

        if self.protocol == "authors":
            authors = AuthorsSettings(steps=self.steps, temperature=self.temperature or 0.0)
            return InfillOptions(context_length=self.context_length, protocol="authors", authors=authors)

        sampler = SamplerConfig()
        if self.steps is not None:
            sampler.steps = self.steps
        if self.temperature is not None:
            sampler.temperature = self.temperature
        if self.block_length is not None:
            sampler.block_length = self.block_length
        options = InfillOptions(sampler=sampler, context_length=self.context_length)
        for name in ("retries", "token_edits", "fresh_fills"):
            if getattr(self, name) is not None:
                setattr(options, name, getattr(self, name))
        if self.pass_budget is not None:
            options.pass_budget = self.pass_budget or None  # 0: no bound
        elif denoiser is not None:
            options.pass_budget = recommended_pass_budget(denoiser, options.pass_budget)
        options.recall = self.recall
        if denoiser is not None:
            given = {"temperature": self.temperature, "block_length": self.block_length}
            explicit = {name for name, value in given.items() if value is not None}
            options.sampler = with_recommended(options.sampler, denoiser, explicit)
        if self.block_passes and options.sampler.block_length is not None:  # no blocks: nothing to do
            options.sampler.block_passes = True
        return options

    def model_key(self) -> tuple:
        """What `infill.models.load` is called with: a change means loading the model again."""
        return (self.model_path, self.threads, self.device, self.dtype, self.trust_remote_code, self.quantize,
                self.endpoint, self.token)  # fmt: skip


_KEYS = {
    # option name: (Settings field, check, what it must be)
    "modelPath": ("model_path", lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    "device": ("device", lambda v: isinstance(v, str) and v != "", "a device name (cuda, mps, cpu, auto)"),
    "dtype": ("dtype", lambda v: v in DTYPES, f"one of {', '.join(DTYPES)}"),
    "trustRemoteCode": ("trust_remote_code", lambda v: isinstance(v, bool), "true or false"),
    "quantize": ("quantize", lambda v: v in QUANTIZE_MODES, f"one of {', '.join(QUANTIZE_MODES)}"),
    "steps": ("steps", lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "temperature": (
        "temperature",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
        "a number >= 0",
    ),
    "blockLength": ("block_length", lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "blockPasses": ("block_passes", lambda v: isinstance(v, bool), "true or false"),
    "alternatives": ("alternatives", lambda v: _is_int(v) and 1 <= v <= 16, "an integer from 1 to 16"),
    "contextLength": ("context_length", lambda v: _is_int(v) and v >= 8, "an integer >= 8"),
    "threads": ("threads", lambda v: _is_int(v) and v >= 1, "a positive integer"),
    "retries": ("retries", lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    "tokenEdits": ("token_edits", lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    "freshFills": ("fresh_fills", lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    "passBudget": ("pass_budget", lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    "protocol": ("protocol", lambda v: v in ("engine", "authors"), '"engine" or "authors"'),
    "recall": ("recall", lambda v: isinstance(v, bool), "true or false"),
    "requestTimeout": (
        "request_timeout",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1e6,
        "a number of seconds from 0 (no bound) to 1000000",
    ),
    "idleRefresh": (
        "idle_refresh",
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 3600,
        "a number of seconds from 0 (never) to 3600",
    ),
    "languages": ("languages", lambda v: _language_names(v) is not None,
                  f"a list of language names ({', '.join(NAMES)})"),
    "review": ("review", lambda v: isinstance(v, bool), "true or false"),
    "reviewThreshold": ("review_threshold", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                        and 0 <= v <= 1, "a probability from 0 to 1"),
    "reviewMaxPerFile": ("review_max_per_file", lambda v: _is_int(v) and 1 <= v <= 10_000,
                         "an integer from 1 to 10000"),
    "endpoint": ("endpoint", lambda v: isinstance(v, str) and _is_url_or_empty(v),
                 'an http(s)://HOST:PORT address, or "" for none'),
    "token": ("token", lambda v: isinstance(v, str), "a string"),
}  # fmt: skip

RENAMED = {  # a key's old name: its name now (issue 30: one name per setting, in every layer)
    "syntaxRounds": "retries",
    "syntaxEdits": "tokenEdits",
    "syntaxRestarts": "freshFills",
}
SERVER_ONLY = {  # the keys that name no field of infill.options: how the server loads and serves the model
    "modelPath", "device", "dtype", "trustRemoteCode", "quantize", "threads", "alternatives",
    "requestTimeout", "idleRefresh", "languages", "review", "reviewThreshold", "reviewMaxPerFile",
    "endpoint", "token",
}  # fmt: skip


def parse_settings(
    options: Any, base: Settings | None = None, source: str = "initializationOptions"
) -> tuple[Settings, list[str]]:
    """``base`` (default: all defaults) overridden by the keys set in ``options`` (any JSON
    value), and a warning per bad value. ``source`` names ``options`` in the warnings."""
    base = base or Settings()
    if options is None or options == []:  # [] is how some clients (Lua) send an empty object
        return base, []
    if not isinstance(options, Mapping):
        return base, [f"{source} should be an object, got {type(options).__name__}"]
    values: dict[str, Any] = {}
    warnings = []
    for key, (field, check, expected) in _KEYS.items():
        name, value = _given(options, key)
        if value is None:
            continue
        if check(value):
            values[field] = float(value) if field == "temperature" else value
            if field in ("idle_refresh", "review_threshold"):
                values[field] = float(value)
            if field == "request_timeout":
                values[field] = float(value) or None  # 0: no bound
            if field == "languages":
                values[field] = _language_names(value)
            if field in ("endpoint", "token"):
                values[field] = value.strip() or None  # "": none
        else:
            warnings.append(f"{source}.{name} should be {expected}, got {value!r}: ignored")
    return dataclasses.replace(base, **values), warnings


def _given(options: Mapping, key: str) -> tuple[str, Any]:
    """The value set for ``key`` in ``options`` (None: unset), and the name it was set under: the
    key, else its old name (RENAMED) if that one is set."""
    if options.get(key) is None:
        for old, new in RENAMED.items():
            if new == key and options.get(old) is not None:
                return old, options[old]
    return key, options.get(key)


def renamed_notices(options: Any) -> list[str]:
    """What to tell the user of each old key set in ``options``: its new name. One text per old
    key, whatever else is set, so that the server's show_once says it once a session."""
    if not isinstance(options, Mapping):
        return []
    return [
        f"the setting {SECTION}.{old} is deprecated: use {SECTION}.{new} (the old name is read only "
        "where the new one is not set)"
        for old, new in RENAMED.items()
        if options.get(old) is not None
    ]


def section_of(settings: Any) -> Any:
    """The ``infill`` section of a ``didChangeConfiguration`` payload (``{"infill": {...}}``);
    a payload that is itself our section (it has one of our keys) is taken as it is."""
    if isinstance(settings, Mapping):
        if SECTION in settings:
            return settings[SECTION]
        if any(key in settings for key in (*_KEYS, *RENAMED)):
            return settings
    return None


def _language_names(value: Any) -> tuple[str, ...] | None:
    """The names of infill.text.languages that a ``languages`` list gives (languageIds too), or None
    if it is not a list of such names."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    found = [named(item) for item in value]
    if any(language is None for language in found):
        return None
    return tuple(language.name for language in found if language is not None)


def _is_url_or_empty(value: str) -> bool:
    from infill.errors import InputError
    from infill.models.served import check_url

    try:
        return not value.strip() or bool(check_url(value))
    except InputError:
        return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
