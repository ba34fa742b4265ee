"""Each API's request turned into the project's own, and its answer turned back: plain functions
on JSON values, no web framework and no Ray (team_server.app calls them; tests/serve checks them
one by one).

    OpenAI     POST /v1/completions   prompt + suffix, or a FIM template inside prompt -> choices[i].text
    llama.cpp  POST /infill           input_prefix + input_suffix                       -> content
    Ollama     POST /api/generate     prompt + suffix                                   -> response
    infill     POST /v1/infill        a file, its spans, a mode            -> the CLI's --json report

The plugins' three APIs ask one thing: the text between a prefix and a suffix. Each request
becomes a `Completion`, whose document is prefix + suffix with an insertion point between them,
run as the language server's inline completions are (infill.modes.inline: at most one syntax
retry, no token edits: ghost text is asked for as the user types). `max_tokens` (`n_predict`,
`num_predict`) is the fill's budget of masked positions, the most tokens it may write; `n` choices
at a temperature above 0 are `n` requests seeded one after the other (at temperature 0 they would
all be the same: one request, its text given `n` times); `stop` cuts a fill at the first stop
string. A diffusion model writes its fill all at once, not left to right, so a streamed answer
carries each choice whole, as soon as it is done.

FIM templates that plugins put into an OpenAI prompt (Continue, llm-ls, Tabby's openai/completion
backend) are read back into a prefix and a suffix (`split_fim`): Qwen's <|fim_prefix|>,
StarCoder's <fim_prefix> and CodeLlama's <PRE> families, prefix-suffix-middle order. Text before
the prefix sentinel (repository and file-name lines) is not part of the file; text after the
middle sentinel is the start of the fill, kept in the prefix.

The project's own request (`infill_request`) names a file's text, its spans (line ranges as the
CLI's --lines, offsets, line:column ranges, tree-sitter nodes) and a mode (fill, fix, document,
alternatives, review, inline), with options under their camelCase names
(infill.options.REQUEST_OPTIONS: each the camelCase of its field in infill.options and of its
`infill` flag, as the language server's settings are), and is answered with the report
`infill --json` prints (infill.modes.reports); the CLI's --server and the language server's
`endpoint` send it (infill.models.served).

A request that is not what its API defines raises `BadRequest` (the app answers 400); a value
that the engine refuses raises infill.errors.InputError (400 too).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from infill.modes import (
    AlternativesRequest,
    DocstringRequest,
    FillRequest,
    FixRequest,
    InlineRequest,
    ReviewRequest,
)
from infill.modes.alternatives import MAX_CANDIDATES
from infill.modes.reports import (
    candidates_report,
    docstring_report,
    fix_report,
    inline_report,
    json_report,
    review_report,
)
from infill.options import REQUEST_OPTIONS, FixOptions, InfillOptions, SamplerConfig
from infill.text.docstring_sites import missing_docstrings
from infill.text.document import Document, document_from_bytes
from infill.text.languages import detect
from infill.text.spans import Span, line_span, node_span, parse_lines, parse_range

MAX_CHOICES = 16  # n of one request (OpenAI's n)
MAX_FILL_TOKENS = 256  # the most masked positions a completion may ask for (max_tokens and its kin)
MAX_STOPS = 4  # stop strings (as OpenAI)
MODES = ("fill", "fix", "document", "alternatives", "review", "inline")

Tune = Callable[[InfillOptions, frozenset[str]], InfillOptions]
"""What the replica adds to the options a client asked for: the model family's recommended
settings in the fields the client left unset (the second argument: the fields it set)."""


def as_asked(options: InfillOptions, explicit: frozenset[str]) -> InfillOptions:
    """The Tune that adds nothing."""
    return options


class BadRequest(ValueError):
    """The request is not what its API defines (400)."""


# --------------------------------------------------------------------------- completions


@dataclass(frozen=True)
class Completion:
    """The text to write between `prefix` and `suffix`: what the plugins' APIs ask."""

    prefix: str
    suffix: str = ""
    max_tokens: int | None = None  # masked positions of the fill; None: the engine's default
    temperature: float | None = None  # None: the model's recommendation, else 0 (greedy)
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    n: int = 1
    timeout: float | None = None  # seconds the client gives it (llama.cpp's t_max_predict_ms)
    language: str | None = None  # the file's language; None: Python

    def document(self) -> Document:
        """prefix + suffix as a file (its line endings, no BOM); InputError for a binary text."""
        text = self.prefix + self.suffix
        try:
            document = document_from_bytes(text.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise BadRequest(f"the text is not valid Unicode: {error.reason}") from None
        if self.language:
            document = replace(document, language=detect(self.language, None).language)
        return document

    def requests(self, tune: Tune = as_asked) -> list[InlineRequest]:
        """The requests to run: `n` seeded ones at a temperature above 0, else one."""
        sampler = {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                   "seed": self.seed}  # fmt: skip
        explicit = frozenset(name for name, value in sampler.items() if value is not None)
        explicit |= {"budget"} if self.max_tokens is not None else set()
        given = {name: value for name, value in sampler.items() if value is not None}
        options = tune(InfillOptions(sampler=SamplerConfig(**given), budget=self.max_tokens), explicit)
        document = self.document()
        offset = len(self.prefix)
        if options.sampler.temperature <= 0 or self.n == 1:
            return [InlineRequest(document, offset, options)]
        first = self.seed if self.seed is not None else secrets.randbelow(2**31)
        seeded = [replace(options, sampler=replace(options.sampler, seed=first + i)) for i in range(self.n)]
        return [InlineRequest(document, offset, each) for each in seeded]

    def choices(self, results: Sequence[Any]) -> list[Choice]:
        """The `n` choices, from the results of `requests()` (infill.modes.Completions), in order."""
        texts = [result.texts[0] if result.texts else "" for result in results]
        if len(texts) == 1:
            texts = texts * self.n
        return [cut_at_stop(text, self.stop) for text in texts]


@dataclass(frozen=True)
class Choice:
    text: str
    stopped: bool  # cut at a stop string


def cut_at_stop(text: str, stop: Sequence[str]) -> Choice:
    """`text` up to the first stop string in it (OpenAI's and llama.cpp's `stop`)."""
    cuts = [text.find(s) for s in stop if s and s in text]
    if not cuts:
        return Choice(text, False)
    return Choice(text[: min(cuts)], True)


FIM_TEMPLATES = (  # (prefix, suffix, middle) sentinels
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),  # Qwen2.5-Coder, Codestral-style
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder, DeepSeek-style plugins' default
    ("<PRE>", "<SUF>", "<MID>"),  # CodeLlama: "<PRE> {prefix} <SUF>{suffix} <MID>"
)


def split_fim(prompt: str) -> tuple[str, str] | None:
    """(prefix, suffix) of a prompt written in one of FIM_TEMPLATES, else None."""
    for begin, middle_of, end in FIM_TEMPLATES:
        start = prompt.find(begin)
        suffix_at = prompt.find(middle_of, start + len(begin)) if start >= 0 else -1
        end_at = prompt.find(end, suffix_at + len(middle_of)) if suffix_at >= 0 else -1
        if end_at < 0:
            continue
        prefix = prompt[start + len(begin) : suffix_at]
        suffix = prompt[suffix_at + len(middle_of) : end_at]
        begun = prompt[end_at + len(end) :]
        if begin == "<PRE>":  # CodeLlama's spaces around its sentinels belong to the template
            prefix = prefix.removeprefix(" ").removesuffix(" ")
            suffix = suffix.removesuffix(" ")
        return prefix + begun, suffix
    return None


def openai_completions(body: Any) -> tuple[list[Completion], bool]:
    """POST /v1/completions: one Completion per prompt, and whether to stream."""
    body = an_object(body)
    prompts = body.get("prompt")
    if isinstance(prompts, str):
        prompts = [prompts]
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise BadRequest("prompt must be a string or a non-empty list of strings (token arrays: not served)")
    suffix = optional(body, "suffix", str) or ""
    common = dict(
        max_tokens=fill_tokens(optional(body, "max_tokens", int), "max_tokens"),
        temperature=number(body, "temperature", 0, 2),
        top_p=number(body, "top_p", 0, 1),
        seed=optional(body, "seed", int),
        stop=stops(body.get("stop"), "stop"),
        n=choices(body),
        language=optional(body, "language", str),
    )
    completions = []
    for prompt in prompts:
        split = split_fim(prompt)
        if split is not None and suffix:
            raise BadRequest("a prompt in a FIM template carries its suffix: leave `suffix` out")
        prefix, rest = split if split is not None else (prompt, suffix)
        completions.append(Completion(prefix, rest, **common))
    return completions, flag(body, "stream", False)


def llama_infill(body: Any) -> tuple[Completion, bool]:
    """POST /infill (llama.cpp's server): the Completion, and whether to stream. `input_extra`
    (chunks of other files) is read and not used: the model's canvas is this file's window."""
    body = an_object(body)
    extra = body.get("input_extra", [])
    if not isinstance(extra, list) or not all(isinstance(chunk, Mapping) for chunk in extra):
        raise BadRequest("input_extra must be a list of {filename, text} objects")
    n_predict = optional(body, "n_predict", int)
    limit_ms = number(body, "t_max_predict_ms", 0, None)
    completion = Completion(
        prefix=(optional(body, "input_prefix", str) or "") + (optional(body, "prompt", str) or ""),
        suffix=optional(body, "input_suffix", str) or "",
        max_tokens=fill_tokens(n_predict if n_predict is not None and n_predict > 0 else None, "n_predict"),
        temperature=number(body, "temperature", 0, None),
        top_p=number(body, "top_p", 0, 1),
        top_k=positive_or_none(optional(body, "top_k", int)),
        seed=seed_or_none(optional(body, "seed", int)),
        stop=stops(body.get("stop"), "stop"),
        timeout=limit_ms / 1000 if limit_ms else None,
        language=optional(body, "language", str),
    )
    return completion, flag(body, "stream", False)


def ollama_generate(body: Any) -> tuple[Completion, bool]:
    """POST /api/generate with a suffix (or a raw prompt in a FIM template): the Completion, and
    whether to stream (Ollama's default: yes)."""
    body = an_object(body)
    prompt = optional(body, "prompt", str) or ""
    suffix = optional(body, "suffix", str) or ""
    options = body.get("options") or {}
    if not isinstance(options, Mapping):
        raise BadRequest("options must be an object")
    split = split_fim(prompt) if not suffix else None
    prefix, suffix = split if split is not None else (prompt, suffix)
    num_predict = optional(options, "num_predict", int)
    completion = Completion(
        prefix=prefix,
        suffix=suffix,
        max_tokens=fill_tokens(num_predict if num_predict is not None and num_predict > 0 else None,
                               "num_predict"),  # fmt: skip
        temperature=number(options, "temperature", 0, None),
        top_p=number(options, "top_p", 0, 1),
        top_k=positive_or_none(optional(options, "top_k", int)),
        seed=optional(options, "seed", int),
        stop=stops(options.get("stop"), "options.stop"),
        language=optional(body, "language", str),
    )
    return completion, flag(body, "stream", True)


# --------------------------------------------------------------------------- answers


def openai_response(ident: str, created: int, model: str, choices: Sequence[Choice]) -> dict:
    return {
        "id": ident,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"text": c.text, "index": i, "logprobs": None, "finish_reason": "stop"}
                    for i, c in enumerate(choices)],  # fmt: skip
    }


def openai_chunk(ident: str, created: int, model: str, index: int, choice: Choice) -> dict:
    """One streamed event: choice `index`, whole."""
    return {
        "id": ident,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"text": choice.text, "index": index, "logprobs": None, "finish_reason": "stop"}],
    }


def llama_response(model: str, choice: Choice) -> dict:
    """llama.cpp's /infill answer: `content`, and why it stopped."""
    return {"content": choice.text, "model": model, "stop": True,
            "stop_type": "word" if choice.stopped else "eos", "truncated": False}  # fmt: skip


def ollama_response(model: str, created_at: str, text: str, done: bool, nanoseconds: int = 0) -> dict:
    """One Ollama /api/generate object (a line of the stream, or the whole answer)."""
    answer: dict[str, Any] = {"model": model, "created_at": created_at, "response": text, "done": done}
    if done:
        answer |= {"done_reason": "stop", "total_duration": nanoseconds}
    return answer


@dataclass(frozen=True)
class ModelInfo:
    """What the listing endpoints say of the served model (infill.models.model_info's card)."""

    name: str
    params: int | None = None
    family: str = "infill-diffusion"
    engine: dict = field(default_factory=dict)  # what the project's clients tune a request with, as
    #   in-process (infill.models.served): {"family": the published family or None, "recommended":
    #   its authors' settings, "context_length": the model's window}


OLLAMA_TEMPLATE = "{{ if .Suffix }}{{ .Prompt }}[infill]{{ .Suffix }}{{ else }}{{ .Prompt }}{{ end }}"
"""What /api/show gives as the model's template: it mentions .Suffix, which is how Continue tells
a model that fills in the middle; the server never renders it (it lays out its own canvas)."""


def ollama_tags(model: ModelInfo, modified_at: str) -> dict:
    return {"models": [{"name": model.name, "model": model.name, "modified_at": modified_at, "size": 0,
                        "digest": "", "details": ollama_details(model)}]}  # fmt: skip


def ollama_show(model: ModelInfo, modified_at: str) -> dict:
    return {"template": OLLAMA_TEMPLATE, "modelfile": "", "parameters": "", "details": ollama_details(model),
            "model_info": {"general.architecture": model.family}, "capabilities": ["completion", "insert"],
            "modified_at": modified_at}  # fmt: skip


def ollama_details(model: ModelInfo) -> dict:
    size = f"{model.params / 1e6:.1f}M" if model.params else ""
    return {"format": "safetensors", "family": model.family, "families": [model.family],
            "parameter_size": size, "quantization_level": ""}  # fmt: skip


def openai_models(model: ModelInfo, created: int) -> dict:
    entry = {"id": model.name, "object": "model", "created": created, "owned_by": "infill"}
    entry["infill"] = model.engine  # the project's own clients tune their requests with it
    return {"object": "list", "data": [entry]}


# --------------------------------------------------------------------------- the project's own




@dataclass(frozen=True)
class EditRequest:
    """POST /v1/infill as the project's request: what to run, and how to report its result."""

    document: Document
    mode: str
    request: Any  # a mode's request (infill.modes)
    report: Callable[[Any], dict | list]  # its result -> the CLI's --json report
    timeout: float | None = None
    spans: list[Span] = field(default_factory=list)


def infill_request(body: Any, tune: Tune = as_asked) -> EditRequest:
    """POST /v1/infill: {"text", "language"?, "path"?, "spans": [...], "mode"?, "n"?, "top"?,
    "options"?, "timeout"?}. A span is {"lines": "A-B" | [A, B]}, {"start": offset, "end": offset},
    {"range": "L:C-L:C"} or {"node": "KIND:TARGET"} (the CLI's --lines, --range and --node)."""
    body = an_object(body)
    text = body.get("text")
    if not isinstance(text, str):
        raise BadRequest("text must be the file's text, a string")
    mode = optional(body, "mode", str) or "fill"
    if mode not in MODES:
        raise BadRequest(f"mode must be one of {', '.join(MODES)} (got {mode!r})")
    try:
        document = document_from_bytes(text.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise BadRequest(f"text is not valid Unicode: {error.reason}") from None
    path = optional(body, "path", str)
    detected = detect(optional(body, "language", str), path) if (body.get("language") or path) else None
    if detected is not None:
        document = replace(document, language=detected.language)
    raw_spans = body.get("spans", [])
    if not isinstance(raw_spans, list):
        raise BadRequest("spans must be a list")
    spans = [span_of(document, item) for item in raw_spans]
    if not spans and mode not in ("document", "review"):
        raise BadRequest("say what to regenerate: spans, each {lines}, {start, end}, {range} or {node}")
    options, fix_threshold = options_of(body.get("options"), tune)
    timeout = number(body, "timeout", 0, None) or None
    threshold = {"threshold": fix_threshold} if fix_threshold is not None else {}
    if mode == "review":  # spans: what to review (none: the whole file); top: the K most doubted tokens
        top = optional(body, "top", int)
        review = ReviewRequest(document, spans, FixOptions.from_infill(options, **threshold), top)
        return EditRequest(document, mode, review, review_report, timeout, spans)
    if mode == "inline":  # one insertion point; n: samples at a temperature above 0
        n = optional(body, "n", int) or 1
        if len(spans) != 1 or spans[0].start != spans[0].end or not 1 <= n <= MAX_CHOICES:
            raise BadRequest(f"mode inline takes one empty span (the cursor) and n from 1 to {MAX_CHOICES}")
        inline = InlineRequest(document, spans[0].start, options, n)
        return EditRequest(document, mode, inline, inline_report, timeout, spans)
    if mode == "fill":
        return EditRequest(document, mode, FillRequest(document, spans, options),
                           lambda r: json_report(document, r), timeout, spans)  # fmt: skip
    if mode == "fix":
        fix = FixOptions.from_infill(options, **threshold)
        return EditRequest(document, mode, FixRequest(document, spans, fix),
                           lambda r: fix_report(document, r), timeout, spans)  # fmt: skip
    if mode == "document":
        if not document.language.has_grammar:
            raise BadRequest("mode document needs a language with a grammar (say it with language or path)")
        sites = missing_docstrings(document.text, within=spans or None, language=document.language)
        return EditRequest(document, mode, DocstringRequest(document, sites, options),
                           lambda r: docstring_report(document, r), timeout, spans)  # fmt: skip
    n = optional(body, "n", int)
    n = 3 if n is None else n
    if not 1 <= n <= MAX_CANDIDATES or len(spans) != 1:
        raise BadRequest(f"mode alternatives takes one span and n from 1 to {MAX_CANDIDATES}")
    return EditRequest(document, mode, AlternativesRequest(document, spans[0], n, options),
                       lambda r: candidates_report(document, r), timeout, spans)  # fmt: skip


def span_of(document: Document, item: Any) -> Span:
    """One span of a /v1/infill request, in the document's character offsets."""
    text = document.text
    if not isinstance(item, Mapping):
        raise BadRequest("each span is an object: {lines}, {start, end}, {range} or {node}")
    if "lines" in item:
        lines = item["lines"]
        if isinstance(lines, str):
            return parse_lines(text, lines)
        if (isinstance(lines, list) and len(lines) == 2 and all(is_int(v) for v in lines)) or is_int(lines):
            first, last = (lines, lines) if is_int(lines) else lines
            return line_span(text, first, last)
        raise BadRequest('lines is "A-B", "A", [A, B] or A (1-based, inclusive)')
    if "start" in item or "end" in item:
        start, end = item.get("start"), item.get("end")
        if not (is_int(start) and is_int(end)) or not 0 <= start <= end <= len(text):
            raise BadRequest(f"start and end are character offsets, 0 <= start <= end <= {len(text)}")
        return Span(start, end, f"offsets {start}-{end}")
    if isinstance(item.get("range"), str):
        return parse_range(text, item["range"])
    if isinstance(item.get("node"), str):
        return node_span(text, item["node"], document.language)
    raise BadRequest("each span is an object: {lines}, {start, end}, {range} or {node}")


def options_of(values: Any, tune: Tune = as_asked) -> tuple[InfillOptions, float | None]:
    """The request's options (camelCase names: REQUEST_OPTIONS) as InfillOptions, tuned, and fix mode's
    threshold if given."""
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise BadRequest("options must be an object")
    unknown = sorted(set(values) - set(REQUEST_OPTIONS))
    if unknown:
        raise BadRequest(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(REQUEST_OPTIONS)}")
    given: dict[str, dict[str, Any]] = {"sampler": {}, "infill": {}, "fix": {}}
    for key, value in values.items():
        where, name, kind = REQUEST_OPTIONS[key]
        if value is None:
            continue
        if not of_type(value, kind):
            raise BadRequest(f"options.{key} must be {TYPE_WORDS[kind]} (got {value!r})")
        given[where][name] = float(value) if kind is float else value
    if given["infill"].get("pass_budget") == 0:
        given["infill"]["pass_budget"] = None  # 0: no bound
    options = InfillOptions(sampler=SamplerConfig(**given["sampler"]), **given["infill"])
    explicit = frozenset(given["sampler"]) | frozenset(given["infill"])
    return tune(options, explicit), given["fix"].get("threshold")


# --------------------------------------------------------------------------- JSON values


TYPE_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def of_type(value: Any, kind: type) -> bool:
    if kind is int:
        return is_int(value)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, kind)


def an_object(body: Any) -> Mapping:
    if not isinstance(body, Mapping):
        raise BadRequest("the request body must be a JSON object")
    return body


def optional(body: Mapping, key: str, kind: type) -> Any:
    """body[key] if set (None if absent or null); BadRequest if it is not of `kind`."""
    value = body.get(key)
    if value is not None and not of_type(value, kind):
        raise BadRequest(f"{key} must be {TYPE_WORDS[kind]} (got {type(value).__name__})")
    return value


def number(body: Mapping, key: str, low: float, high: float | None) -> float | None:
    value = optional(body, key, float)
    if value is not None and not (low <= value and (high is None or value <= high)):
        raise BadRequest(f"{key} must be from {low} to {high if high is not None else 'any'} (got {value})")
    return None if value is None else float(value)


def flag(body: Mapping, key: str, default: bool) -> bool:
    value = optional(body, key, bool)
    return default if value is None else value


def fill_tokens(value: int | None, key: str) -> int | None:
    if value is None:
        return None
    if value < 1:
        raise BadRequest(f"{key} must be at least 1 (got {value})")
    return min(value, MAX_FILL_TOKENS)


def choices(body: Mapping) -> int:
    n = optional(body, "n", int)
    if n is None:
        return 1
    if not 1 <= n <= MAX_CHOICES:
        raise BadRequest(f"n must be from 1 to {MAX_CHOICES} (got {n})")
    return n


def stops(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value) or len(value) > MAX_STOPS:
        raise BadRequest(f"{key} must be a string or a list of at most {MAX_STOPS} strings")
    return tuple(value)


def positive_or_none(value: int | None) -> int | None:
    """llama.cpp's and Ollama's top_k: 0 (or less) means no top-k."""
    return value if value is not None and value > 0 else None


def seed_or_none(value: int | None) -> int | None:
    """llama.cpp's seed: -1 (its default) means a random one."""
    return value if value is not None and value >= 0 else None
