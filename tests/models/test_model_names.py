"""Models by name from the local Hugging Face cache (never the network), `infill models`, and
`--trust-remote-code` refused where a checkpoint ships no modeling code.

The cache is built here in huggingface_hub's layout: models--ORG--NAME/ with blobs/ (the files'
contents), snapshots/<commit>/ (links into blobs/) and refs/<branch or tag> (a commit), holding
the tiny checkpoints of tests/checkpoints.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from checkpoints import write_checkpoint
from lsp_support import SERVER, initialize_params, list_actions, open_document
from lsprotocol import types
from pytest_lsp import LanguageClient
from safetensors import safe_open

from infill.cli import EXIT_INPUT, EXIT_MODEL, EXIT_OK, main
from infill.errors import ModelError
from infill.models.hub_cache import cache_root, resolve_model
from infill.models.model_info import model_card
from infill.models.weights import count_text

MAIN, TAG = "a" * 40, "b" * 40  # commits: main is Dream, the tag "dreamon" DreamOn
CODE = "def mean(values):\n    total = sum(values)\n    return total / len(values)\n"
QUICK = ["--device", "cpu", "--dtype", "float32", "--seed", "0", "--steps", "2", "--budget", "4"]
QUICK += ["--retries", "0", "--token-edits", "0", "--fresh-fills", "0"]


def add_snapshot(cache: Path, name: str, commit: str, files: Path, refs: tuple[str, ...] = ("main",)) -> Path:
    """`files`' contents into blobs/, linked from snapshots/<commit>/, named by refs/<ref>."""
    repo = cache / f"models--{name.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for file in sorted(files.iterdir()):
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    for ref in refs:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


def edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> dict:
    """A Hugging Face cache of tiny checkpoints, and what to expect of each; HF_HUB_CACHE names it
    for the tests of this module (and the language servers they start)."""
    root = tmp_path_factory.mktemp("hub")
    cache, staging = root / "cache", root / "staging"
    built = {}
    for family in ("Dream", "DreamOn", "Open-dCoder", "LLaDA"):
        marker = write_checkpoint(staging / family, family)
        built[family] = (staging / family, marker)
    snapshots = {
        "org/dream": add_snapshot(cache, "org/dream", MAIN, built["Dream"][0]),
        "org/dream@dreamon": add_snapshot(cache, "org/dream", TAG, built["DreamOn"][0], refs=("dreamon",)),
        "org/open-dcoder": add_snapshot(cache, "org/open-dcoder", MAIN, built["Open-dCoder"][0]),
        "org/llada": add_snapshot(cache, "org/llada", MAIN, built["LLaDA"][0]),
    }
    autoregressive = root / "qwen-ar"  # an ordinary Qwen2 model: no mask token in its tokenizer files
    shutil.copytree(built["Open-dCoder"][0], autoregressive)
    edit_json(autoregressive / "tokenizer_config.json", mask_token=None)
    add_snapshot(cache, "org/qwen-ar", MAIN, autoregressive)
    llama = root / "llama"
    llama.mkdir()
    (llama / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 32}))
    add_snapshot(cache, "org/llama", MAIN, llama)
    broken = root / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{ not json")
    add_snapshot(cache, "org/broken", MAIN, broken)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_CACHE", str(cache))
        patch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
        yield {"cache": cache, "snapshots": snapshots, "built": built, "root": root}
    for folder, marker in built.values():
        assert not marker.exists(), f"the remote code of {folder.name} was executed"


def files_under(folder: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(folder)), p.lstat().st_size) for p in folder.rglob("*"))


def stored_parameters(folder: Path) -> int:
    """The numbers the checkpoint's safetensors files hold."""
    total = 0
    for shard in folder.glob("*.safetensors"):
        with safe_open(str(shard), framework="pt") as f:
            total += sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())
    return total


# ---------------------------------------------------------------------------- names -> folders


def test_a_name_resolves_to_its_snapshot_and_the_cli_fills_with_it(hub, tmp_path, capsys):
    snapshot = hub["snapshots"]["org/dream"]
    assert resolve_model("org/dream") == snapshot
    path = tmp_path / "sample.py"
    path.write_text(CODE)
    assert main([str(path), "--lines", "2", "--json", "--model", "org/dream", *QUICK]) == EXIT_OK
    captured = capsys.readouterr()
    assert f"loading Dream from {snapshot}" in captured.err
    assert json.loads(captured.out)["spans"][0]["start"] == CODE.index("    total")


def test_the_cache_is_found_the_way_huggingface_hub_finds_it(hub, tmp_path, monkeypatch):
    home = tmp_path / "hf-home"
    home.mkdir()
    (home / "hub").symlink_to(hub["cache"])
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(home))
    assert cache_root().path == home / "hub" and cache_root().source == "HF_HOME"
    assert resolve_model("org/llada") == home / "hub" / "models--org--llada" / "snapshots" / MAIN
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(hub["root"]))
    assert cache_root().path == hub["root"] / "huggingface" / "hub"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(hub["root"]))
    assert cache_root().path == hub["root"] / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(hub["cache"].parent))  # HF_HOME/hub is not the cache here...
    monkeypatch.setenv("HF_HUB_CACHE", str(hub["cache"]))  # ...HF_HUB_CACHE wins
    assert resolve_model("org/llada") == hub["snapshots"]["org/llada"]


def test_a_revision_picks_its_ref_or_commit(hub, tmp_path, capsys):
    tagged = hub["snapshots"]["org/dream@dreamon"]
    assert resolve_model("org/dream@dreamon") == tagged
    assert resolve_model(f"org/dream@{TAG}") == tagged  # a commit
    assert resolve_model("org/dream@main") == hub["snapshots"]["org/dream"]
    with pytest.raises(ModelError, match="no revision 'v9' .refs: dreamon, main; snapshots: a+, b+"):
        resolve_model("org/dream@v9")
    with pytest.raises(ModelError, match="no model folder at"):
        resolve_model("org/dream@../../dream")  # never a path out of refs/
    bad_ref = hub["cache"] / "models--org--dream" / "refs" / "bad"
    bad_ref.write_text("../../../models--org--llada/snapshots/" + MAIN)
    try:
        with pytest.raises(ModelError, match="refs/bad holds '../../.*', not a commit hash"):
            resolve_model("org/dream@bad")  # nor out of snapshots/
    finally:
        bad_ref.unlink()
    path = tmp_path / "sample.py"
    path.write_text(CODE)
    assert main([str(path), "--lines", "2", "--json", "--model", "org/dream@dreamon", *QUICK]) == EXIT_OK
    assert f"loading DreamOn from {tagged}" in capsys.readouterr().err


def test_without_refs_the_newest_snapshot_is_taken_and_a_folder_wins_over_a_name(hub, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.json").write_text("{}")
    old = add_snapshot(cache, "org/m", "1" * 40, config, refs=())
    new = add_snapshot(cache, "org/m", "2" * 40, config, refs=())
    os.utime(old, (2_000_000_000, 2_000_000_000))
    os.utime(new, (1_000_000_000, 1_000_000_000))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    assert resolve_model("org/m") == old  # newest by time, not by name
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "m").symlink_to(hub["snapshots"]["org/llada"])
    assert resolve_model("org/m") == Path("org/m")


@pytest.mark.parametrize("cache", ["has-other-models", "empty", "missing"])
def test_a_name_not_in_the_cache_is_a_model_error_and_changes_nothing(
    cache, hub, tmp_path, monkeypatch, capsys
):
    if cache != "has-other-models":
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
        if cache == "empty":
            (tmp_path / "hub").mkdir()
    root = cache_root().path
    before = files_under(hub["cache"])
    path = tmp_path / "sample.py"
    path.write_text(CODE)
    code = main([str(path), "--lines", "2", "--write", "--model", "apple/DiffuCoder-7B-Instruct", *QUICK])
    assert code == EXIT_MODEL
    error = capsys.readouterr().err
    assert f"the Hugging Face cache {root} (from HF_HUB_CACHE" in error
    assert "has no models--apple--DiffuCoder-7B-Instruct" in error and "infill never downloads" in error
    assert "huggingface-cli download apple/DiffuCoder-7B-Instruct" in error and "Traceback" not in error
    assert ("which does not exist" in error) == (cache == "missing")
    assert path.read_text() == CODE and files_under(hub["cache"]) == before
    assert not (tmp_path / "hub").exists() or not any((tmp_path / "hub").iterdir())


# ---------------------------------------------------------------------------- infill models


def test_infill_models_lists_the_families_with_their_size_and_why_others_cannot_run(hub, capsys):
    assert main(["models", "--json"]) == EXIT_OK
    found = {entry["name"]: entry for entry in json.loads(capsys.readouterr().out)}
    families = {name: entry["family"] for name, entry in found.items()}
    assert families == {
        "org/dream": "Dream",
        "org/open-dcoder": "Open-dCoder",
        "org/llada": "LLaDA",
        "org/qwen-ar": None,
        "org/llama": None,
        "org/broken": None,
    }
    for name in ("org/dream", "org/open-dcoder", "org/llada"):
        snapshot = hub["snapshots"][name]
        assert found[name]["path"] == str(snapshot)
        assert found[name]["parameters"] == stored_parameters(snapshot)  # from config.json alone
    assert "without a mask token: an autoregressive model" in found["org/qwen-ar"]["problem"]
    assert found["org/llama"]["problem"] == "config.json has model_type 'llama', which infill cannot run"
    assert "config.json is not valid JSON" in found["org/broken"]["problem"]

    assert main(["models"]) == EXIT_OK
    text = capsys.readouterr().out
    dream = next(line for line in text.splitlines() if line.strip().startswith("org/dream "))
    parameters = stored_parameters(hub["snapshots"]["org/dream"])
    assert dream.split()[:3] == ["org/dream", "Dream", count_text(parameters)]
    autoregressive = "the folder is a Qwen2 checkpoint without a mask token: an autoregressive model"
    assert f"org/qwen-ar: {autoregressive}" in text
    assert f"looked in the Hugging Face cache {hub['cache']}" in text


def test_infill_models_reads_given_folders_and_their_subfolders(hub, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-cache"))
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    (shelf / "dreamon").symlink_to(hub["built"]["DreamOn"][0])
    no_weights = shelf / "no-weights"
    shutil.copytree(hub["built"]["LLaDA"][0], no_weights)
    for shard in no_weights.glob("*.safetensors*"):
        shard.unlink()
    (shelf / "notes").mkdir()  # no config.json: not looked at
    assert main(["models", str(shelf), "--json"]) == EXIT_OK
    found = {entry["name"]: entry for entry in json.loads(capsys.readouterr().out)}
    assert set(found) == {"dreamon", "no-weights"}
    assert found["dreamon"]["family"] == "DreamOn"
    assert found["no-weights"]["family"] is None
    assert found["no-weights"]["problem"].startswith("no weights in")
    assert main(["models", str(hub["built"]["Open-dCoder"][0]), "--json"]) == EXIT_OK
    [entry] = json.loads(capsys.readouterr().out)
    assert entry["family"] == "Open-dCoder"
    assert main(["models", str(tmp_path / "nowhere")]) == EXIT_INPUT
    assert "no such folder" in capsys.readouterr().err


def test_infill_models_says_where_it_looked_when_nothing_is_there(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert main(["models"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith(f"infill: no models found; looked in the Hugging Face cache {tmp_path / 'hub'}")
    assert "which does not exist" in out and "never downloads" in out


# ---------------------------------------------------------------------------- --trust-remote-code


@pytest.mark.parametrize("how", ["folder", "name"])
def test_trust_remote_code_is_refused_where_there_is_no_remote_code(how, hub, tmp_path, capsys):
    folder, marker = hub["built"]["Open-dCoder"]
    path = tmp_path / "sample.py"
    path.write_text(CODE)
    model = str(folder) if how == "folder" else "org/open-dcoder"
    code = main([str(path), "--lines", "2", "--write", "--model", model, "--trust-remote-code", *QUICK])
    assert code == EXIT_MODEL
    error = capsys.readouterr().err
    assert "names none (no auto_map.AutoModel): infill's own implementation runs this model" in error
    assert "Traceback" not in error and "AttributeError" not in error
    assert path.read_text() == CODE and not marker.exists()


def test_trust_remote_code_is_refused_when_the_named_code_is_not_in_the_folder(hub, tmp_path, capsys):
    folder = tmp_path / "dream"
    shutil.copytree(hub["built"]["Dream"][0], folder)
    (folder / "modeling_dream.py").unlink()
    path = tmp_path / "sample.py"
    path.write_text(CODE)
    args = [str(path), "--lines", "2", "--model", str(folder), "--trust-remote-code", *QUICK]
    assert main(args) == EXIT_MODEL
    assert "modeling_dream.py is not in the folder (infill never downloads code)" in capsys.readouterr().err
    assert path.read_text() == CODE


# ---------------------------------------------------------------------------- the language server


def test_the_card_of_a_name_is_its_snapshot(hub):
    card = model_card("org/llada")
    assert (card.name, card.path) == ("org/llada", str(hub["snapshots"]["org/llada"]))
    assert card.params == stored_parameters(hub["snapshots"]["org/llada"])
    assert "Hugging Face cache" in card.origin
    assert model_card("org/not-cached").params is None  # a card, not an error: initialize answers


# --------------------------------------------------- the authors' sampler settings, by name


@pytest.mark.parametrize(
    "layout, name, dlm_pad, temperature",
    [
        ("cache", "Dream-org/Dream-Coder-v0-Instruct-7B", False, 0.1),  # its README's quick start
        ("cache", "Dream-org/Dream-v0-Instruct-7B", False, 0.2),  # the same tokens: Dream's README
        ("cache", "Dream-org/Dream-Coder-v0-Base-7B", False, 0.2),  # no settings of its own: Dream's
        ("cache", "apple/DiffuCoder-7B-Instruct", True, 0.3),
        ("cache", "apple/DiffuCoder-7B-cpGRPO", True, 0.4),  # DiffuCoder-Instruct's tokens
        ("folder", "Dream-Coder-v0-Instruct-7B", False, 0.1),  # huggingface-cli download --local-dir
        ("folder", "dream-coder-v0-instruct-7b", False, 0.1),
        ("folder", "Dream-Coder-v0-Instruct-7B-finetuned", False, 0.2),  # not the published model
        ("folder", "DiffuCoder-7B-cpGRPO", True, 0.4),
        ("folder", "checkpoint", True, 0.3),  # no name: what the tokens say (DiffuCoder-Instruct)
    ],
)
def test_a_checkpoint_gets_the_settings_its_authors_give_for_its_name(
    layout, name, dlm_pad, temperature, hub, tmp_path, monkeypatch
):
    from infill.models import load
    from infill.models.defaults import with_recommended
    from infill.options import SamplerConfig

    files = tmp_path / "files" / name.split("/")[-1]
    shutil.copytree(hub["built"]["Dream"][0], files)
    if dlm_pad:  # DiffuCoder-Instruct's tokenizer adds the token its answers are padded with
        edit_json(files / "added_tokens.json", **{"<|dlm_pad|>": 151667})
    if layout == "cache":
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
        add_snapshot(tmp_path / "cache", name, MAIN, files)
        denoiser = load(name, "cpu")
    else:
        denoiser = load(files, "cpu")

    config = with_recommended(SamplerConfig(), denoiser, explicit=set())
    family = "DiffuCoder-Instruct" if dlm_pad else "Dream"
    assert (denoiser.family, config.order, config.temperature, config.top_p) == (
        family, "entropy", temperature, 0.95,
    )  # fmt: skip
    mine = with_recommended(SamplerConfig(temperature=0.7), denoiser, explicit={"temperature"})
    assert mine.temperature == 0.7  # what the user sets still wins


@pytest_lsp.fixture(config=SERVER, scope="module")
async def named_client(lsp_client: LanguageClient, hub):
    """A server started with HF_HUB_CACHE set (by `hub`) and modelPath a name."""
    quick = {"steps": 2, "retries": 0, "tokenEdits": 0, "freshFills": 0}
    options = {"modelPath": "org/dream", "device": "cpu", "dtype": "float32", "threads": 1, **quick}
    lsp_client.initialize_result = await lsp_client.initialize_session(
        initialize_params("visual-studio-code", options)
    )
    yield
    await lsp_client.shutdown_session()


@pytest.mark.external
@pytest.mark.asyncio(loop_scope="module")
async def test_the_server_setting_model_path_takes_a_name(named_client: LanguageClient, hub):
    assert "model: org/dream (" in named_client.initialize_result.server_info.version
    uri = "file:///project/sample.py"
    open_document(named_client, uri, CODE)
    selection = (types.Position(line=1, character=12), types.Position(line=1, character=23))
    [action, *_] = await list_actions(named_client, uri, *selection)
    resolved = await named_client.code_action_resolve_async(action)
    assert resolved.edit is not None
    errors = [m.message for m in named_client.messages if m.type == types.MessageType.Error]
    assert errors == []
    logs = [m.message for m in named_client.log_messages]
    assert any("infill: model org/dream (" in message for message in logs)
