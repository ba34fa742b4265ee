"""Which model runs: the model card read from a model directory, `infill --version`, and the
language server's initialize result and log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from checkpoints import SIZES, write_checkpoint
from lsp_support import SERVER, initialize_params, list_actions, open_document, tiny_model_dir
from lsprotocol import types
from pytest_lsp import LanguageClient
from train_fixtures import tiny_model

from infill.models.catalog import examine, listing
from infill.models.model_info import SHIPPED_MODEL_DIR, count_parameters, model_card, native_model_problem
from infill.models.native import DEFAULT_MODEL_DIR, load_backend

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_model_directory_is_the_backends():
    assert SHIPPED_MODEL_DIR.resolve() == DEFAULT_MODEL_DIR.resolve()


@pytest.mark.slow
def test_version_names_the_shipped_model_its_size_and_data():
    done = subprocess.run([sys.executable, "-m", "infill.cli", "--version"], capture_output=True, text=True,
                          cwd=REPO, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    params = sum(p.numel() for p in load_backend().model.parameters())
    title = json.loads((DEFAULT_MODEL_DIR / "training.json").read_text())["name"]  # what infill-train wrote
    assert done.stdout.startswith("infill ")
    assert f"model: {title}" in done.stdout
    assert f"{params / 1e6:.2f}M parameters" in done.stdout
    assert "Python files of the standard library" in done.stdout and "shipped with infill" in done.stdout


def test_a_bare_directory_gets_a_card_from_its_config_and_weights(tmp_path: Path):
    directory = tiny_model(tmp_path / "bare")
    (directory / "training.json").unlink()
    card = model_card(directory)
    params = sum(p.numel() for p in load_backend(directory).model.parameters())
    assert card.name == "bare" and card.params == params == count_parameters(directory)
    assert "hidden 32 x 1 layers, context 128" in card.architecture
    assert card.data == "not recorded"


def test_native_model_problems_are_named(tmp_path: Path):
    assert native_model_problem(tiny_model(tmp_path / "ok")) is None
    assert "no model directory" in native_model_problem(tmp_path / "missing")
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert "llama" in native_model_problem(other)
    (other / "config.json").write_text(json.dumps({"model_type": "infill-diffusion"}))
    assert "lacks its weights" in native_model_problem(other)


SOURCE = "def mean(values):\n    total = sum(values)\n    return total / len(values)\n"


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path_factory):
    model = tiny_model_dir(tmp_path_factory)
    options = {"modelPath": str(model), "threads": 1, "steps": 2}
    lsp_client.initialize_result = await lsp_client.initialize_session(
        initialize_params("visual-studio-code", options)
    )
    lsp_client.model_dir = model
    yield
    await lsp_client.shutdown_session()


@pytest.mark.external
@pytest.mark.asyncio
async def test_the_server_names_its_model_at_initialize_and_when_it_loads_it(client: LanguageClient):
    info = client.initialize_result.server_info
    card = model_card(client.model_dir)
    assert info.name == "infill-lsp" and card.summary() in info.version
    uri = "file:///project/mean.py"
    open_document(client, uri, SOURCE)
    actions = await list_actions(client, uri, types.Position(line=1, character=4))
    await client.code_action_resolve_async(actions[0])
    logged = [m.message for m in client.log_messages if m.message.startswith("infill: model ")]
    assert logged == [f"infill: model {card.summary()}"]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """family -> a tiny checkpoint of it in the released layout (tests/checkpoints.py)."""
    root = tmp_path_factory.mktemp("published")
    for family in ("Dream", "DreamOn", "LLaDA", "Open-dCoder"):
        write_checkpoint(root / family, family)
    return root


@pytest.mark.parametrize("family", ["Dream", "DreamOn", "LLaDA", "Open-dCoder"])
def test_a_published_checkpoint_is_described_as_what_it_is(family, published):
    """--version's card: the family the loader runs it as, its size and layers, where it came from."""
    folder = published / family
    card = model_card(folder)
    found = examine(family, folder)  # what `infill models` (and infill.models.load) make of it
    shape = f"hidden {SIZES['hidden']} x {SIZES['layers']} layers"
    assert card.architecture.startswith(f"{found.family}, {shape}")
    assert card.params == found.parameters == count_parameters(folder)
    assert card.origin == "published checkpoint, from its folder" and "not recorded" in card.data
    assert (found.layers, found.hidden) == (SIZES["layers"], SIZES["hidden"])
    listing_line = next(line for line in listing([found], "here").splitlines() if str(folder) in line)
    assert f"{SIZES['layers']} x {SIZES['hidden']}" in listing_line and found.family in listing_line


def test_a_folder_that_is_no_model_says_so(tmp_path: Path):
    card = model_card(tmp_path)
    assert card.origin.startswith("not a model folder") and card.params is None
