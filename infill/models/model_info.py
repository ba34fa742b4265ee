"""Which model is this? A model directory's card: name, size, training data, origin.

Read from the directory itself, without loading the weights: config.json (architecture),
training.json (what `infill-train` wrote: name, data, origin, parameters, steps, tokens) and,
for what training.json does not say, README.md (its title and its "Corpus:" line). The CLI's
`--version` and the language server's initialize result show it, so a user knows whether the
shipped demo model or their own fine-tuned one is filling their code.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from infill.errors import ModelError
from infill.models.hub_cache import resolve_model
from infill.text.languages import Language

NATIVE_MODEL_TYPE = "infill-diffusion"
# The shipped model: infill.models.native.DEFAULT_MODEL_DIR, named here without importing torch (the
# language server reads the card while it answers `initialize`).
SHIPPED_MODEL_DIR = Path(__file__).parents[1] / "default_model"
SHIPPED_MODEL_LANGUAGES = ("python",)  # what the shipped model was trained on (docs/training.md)


@dataclass
class ModelCard:
    name: str
    path: str
    params: int | None  # parameters (None: unknown)
    architecture: str  # e.g. "infill-diffusion, hidden 256 x 6 layers, context 256"
    data: str  # what it was trained on
    origin: str  # how it was made
    steps: int | None = None
    tokens: int | None = None

    def summary(self) -> str:
        """One line: name, size and where it came from."""
        size = f"{self.params / 1e6:.2f}M parameters" if self.params else "size unknown"
        return f"{self.name} ({size}; {self.origin})"

    def describe(self) -> str:
        """Several lines for a terminal."""
        size = f"{self.params / 1e6:.2f}M parameters" if self.params else "unknown"
        trained = ""
        if self.steps is not None and self.tokens is not None:
            trained = f", {self.steps} steps, {self.tokens / 1e6:.1f}M tokens"
        return "\n".join([
            f"model: {self.name}",
            f"  path: {self.path}",
            f"  size: {size} ({self.architecture})",
            f"  trained on: {self.data}{trained}",
            f"  origin: {self.origin}",
        ])  # fmt: skip

    def to_json(self) -> dict:
        return asdict(self)


def language_notice(language: Language, model: Path | None) -> str | None:
    """What to say once when the shipped model (``model`` None) is asked for a language it was
    not trained on: it fills anyway, but a published model is needed for useful text there."""
    if model is not None or not language.has_grammar or language.name in SHIPPED_MODEL_LANGUAGES:
        return None
    return (f"the shipped model was trained on Python only; for useful {language.title} text use a "
            "published model (--model, docs/models.md). Filling anyway")  # fmt: skip


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def weight_files(directory: Path) -> list[Path]:
    """The safetensors files of a model directory: model.safetensors, or the shards its index lists."""
    single = directory / "model.safetensors"
    if single.is_file():
        return [single]
    index = read_json(directory / "model.safetensors.index.json")
    return [directory / name for name in sorted(set(index.get("weight_map", {}).values()))]


def count_parameters(directory: Path) -> int | None:
    """Parameters stored in the safetensors files, read from their headers (an 8-byte length,
    then JSON with each tensor's shape): no weights loaded, no torch imported."""
    total = 0
    try:
        for path in weight_files(directory):
            with path.open("rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(size))
            for name, entry in header.items():
                if name != "__metadata__":
                    total += math.prod(entry["shape"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return total or None


def readme_facts(directory: Path) -> dict:
    try:
        text = (directory / "README.md").read_text()
    except OSError:
        return {}
    facts = {}
    title = re.search(r"^# (.+)$", text, re.M)
    if title:
        facts["name"] = title.group(1).strip()
    corpus = re.search(r"^- Corpus: (.+?)(?:;|$)", text, re.M)
    if corpus:
        facts["data"] = corpus.group(1).strip()
    hours = re.search(r"^- Training: .*?([\d.]+ h on \w+)", text, re.M)
    if hours:
        facts["hours"] = hours.group(1)
    return facts


def model_card(directory: str | Path | None = None) -> ModelCard:
    """The card of a model directory or cached ORG/NAME (default: the shipped model); a name the
    cache lacks gets the card of a folder of that name (unknown size, not recorded)."""
    spec = directory
    try:
        directory = resolve_model(spec) or SHIPPED_MODEL_DIR
    except ModelError:
        directory = Path(spec)
    cached = spec is not None and directory != Path(spec).expanduser()  # a name found in the cache
    config = read_json(directory / "config.json")
    training = read_json(directory / "training.json")
    readme = readme_facts(directory)
    kind = config.get("model_type", "unknown")
    published = bool(config) and kind != NATIVE_MODEL_TYPE
    architecture = published_family(directory, config) if published else kind
    hidden = first_of(config, "hidden_size", "d_model")
    if hidden is not None:
        layers = first_of(config, "num_layers", "num_hidden_layers", "n_layers") or "?"
        architecture += f", hidden {hidden} x {layers} layers"
    context = first_of(config, "context_length", "max_position_embeddings", "max_sequence_length")
    if context is not None:
        architecture += f", context {context}"
    shipped = directory.resolve() == SHIPPED_MODEL_DIR.resolve()
    origin = "shipped with infill" if shipped else "infill-train"
    if not config:
        origin = f"not a model folder: no readable config.json in {directory}"
    elif published:
        where = f" {spec}, from the Hugging Face cache" if cached else ", from its folder"
        origin = "published checkpoint" + where
    if "hours" in readme:
        origin += f" (trained {readme['hours']})"
    if training.get("origin"):  # how infill-train made it: "infill-train recipe, 9.8 min on ..."
        origin = f"shipped with infill ({training['origin']})" if shipped else training["origin"]
    data = "not recorded in the folder (see its authors' model card)" if published else "not recorded"
    return ModelCard(
        name=training.get("name") or readme.get("name") or (str(spec) if cached else directory.name),
        path=str(directory),
        params=training.get("params") or count_parameters(directory),
        architecture=architecture,
        data=training.get("data") or readme.get("data") or data,
        origin=origin,
        steps=training.get("steps"),
        tokens=training.get("tokens"),
    )


def first_of(config: dict, *keys: str):
    """The first of `keys` that config.json has (families name the same thing differently)."""
    return next((config[key] for key in keys if config.get(key) is not None), None)


def published_family(directory: Path, config: dict) -> str:
    """Which published family a checkpoint folder holds, told from config.json and its tokenizer
    files as infill.models.dream.conventions tells them (read as JSON here: no tokenizer, no torch)."""
    kind = config.get("model_type")
    if kind == "llada":
        return "LLaDA"
    settings = read_json(directory / "tokenizer_config.json")
    added = {entry.get("content") for entry in (settings.get("added_tokens_decoder") or {}).values()}
    added |= set(read_json(directory / "added_tokens.json"))
    tokenizer = read_json(directory / "tokenizer.json")
    added |= {entry.get("content") for entry in tokenizer.get("added_tokens", [])}
    if kind == "qwen2":
        special = read_json(directory / "special_tokens_map.json")
        declared = settings.get("mask_token") or special.get("mask_token")
        return "Open-dCoder" if declared else "Qwen2 (autoregressive: infill cannot run it)"
    if kind == "Dream":
        if "<|expand|>" in added:
            return "DreamOn"
        return "DiffuCoder-Instruct" if "<|dlm_pad|>" in added else "Dream"
    return str(kind or "unknown")


def native_model_problem(directory: Path) -> str | None:
    """Why `directory` is not a model of this project's own architecture, or None if it is."""
    if not directory.is_dir():
        return f"no model directory at {directory}"
    config = read_json(directory / "config.json")
    if not config:
        return f"{directory} has no readable config.json"
    kind = config.get("model_type")
    if kind != NATIVE_MODEL_TYPE:
        return (
            f"{directory} holds a {kind or 'model of unknown type'!s} model; only infill's own "
            f"({NATIVE_MODEL_TYPE}) models can be trained here"
        )
    if not weight_files(directory) or not (directory / "tokenizer.json").is_file():
        return f"{directory} lacks its weights (model.safetensors or an index of shards) or tokenizer.json"
    return None
