"""int8 weights on the CPU (infill.models.quantize): every linear layer really quantized, the
predictions close to the float model's (full and cached passes), refused where it cannot run,
"auto" choosing int8 for big models only, and the server's `quantize` setting loading the model
again.

The share of agreeing predictions: random tiny checkpoints and the small shipped model have many
near-ties among their likeliest tokens, so int8 rounding flips some of them. Measured on these
canvases (200 tokens, 30% masked, seed 0): 97% (Dream), 100% (LLaDA), 89% (Open-dCoder), 86%
(the shipped model, 500 tokens); over other seeds the lowest was 86% (tiny checkpoints, seeds
0-2) and 79% (the shipped model, seeds 0-4). With the published families' embedding as int8 rows
too (tests/models/test_quantized_loading.py), the lowest over seeds 0-2 of full, refreshing and
span-only passes was 90% (with the float embedding, measured the same way: 80%). The tests ask
for AGREEMENT at a fixed seed; a broken quantization (a wrong scale, a layer left out of the
output) agrees on next to nothing.
"""

from __future__ import annotations

import pytest
import pytest_lsp
import torch
from checkpoints import SAMPLE, agreement, masked_canvas, write_checkpoint
from lsp_support import SERVER, initialize_params, list_actions, open_document
from lsprotocol import types
from pytest_lsp import LanguageClient
from torch import nn

import infill.models.int4_native as int4_native
import infill.models.loader
from infill.cli import EXIT_MODEL, main
from infill.errors import ModelError
from infill.models import load, pick_native_dtype
from infill.models.quantize import (
    chosen_quantization,
    own_model_quantization,
    quantized_kind,
    quantized_layers,
)
from lsp_server.settings import Settings, parse_settings

AGREEMENT = 0.8  # share of masked positions whose most likely token is the float model's


def check_close_to_float(floats, int8s, text: str, length: int) -> None:
    """Full and cached passes of the int8 model pick the float model's token at >= AGREEMENT of
    the masked positions, without being the float model (the logits differ)."""
    ids, masked = masked_canvas(floats, text, length)
    full, quantized = floats.logits(ids), int8s.logits(ids)
    assert agreement(full[masked], quantized[masked]) >= AGREEMENT
    assert (full - quantized).abs().max() > 1e-4  # the weights really changed
    positions = masked[0].nonzero().flatten()
    cache = int8s.new_cache()
    refreshed = int8s.cached_logits(ids, positions, cache, refresh=True)
    partial = int8s.cached_logits(ids, positions, cache, refresh=False)
    assert agreement(full[0, positions], refreshed[0]) >= AGREEMENT
    assert agreement(full[0, positions], partial[0]) >= AGREEMENT


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """family -> the folder of a tiny checkpoint of it (written once)."""
    root = tmp_path_factory.mktemp("quantize")

    def folder(family: str):
        if not (root / family).exists():
            write_checkpoint(root / family, family)
        return root / family

    return folder


@pytest.mark.slow
@pytest.mark.parametrize("family", ["Dream", "LLaDA", "Open-dCoder"])
def test_int8_weights_predict_as_the_float_ones(family, tiny):
    folder = tiny(family)
    floats, int8s = load(folder, "cpu", "float32"), load(folder, "cpu", "float32", quantize="int8")
    check_close_to_float(floats, int8s, SAMPLE, 200)


@pytest.mark.parametrize("family", ["Dream", "Open-dCoder"])
def test_every_linear_layer_and_the_embedding_are_int8(family, tiny):
    folder = tiny(family)
    floats = load(folder, "cpu", "float32").network
    network = load(folder, "cpu", "float32", quantize="int8").network
    linear = [name for name, module in floats.named_modules() if isinstance(module, nn.Linear)]
    if floats.head is None:  # Open-dCoder: tied, the output layer gets its own int8 weights
        linear.append("head")
    assert sorted(quantized_layers(network)) == sorted([*linear, "embed"])
    assert not [m for m in network.modules() if type(m) in (nn.Linear, nn.Embedding)]
    assert network.layers[0].mlp.down.weight().dtype == torch.qint8
    assert network.embed.rows.dtype == torch.int8
    assert not [name for name, p in network.named_parameters() if p.numel() > 1000]  # norms, biases only


def test_the_shipped_model_in_int8():
    floats, int8s = load(None, "cpu", "float32"), load(None, "cpu", quantize="int8")
    assert "lm_head" in quantized_layers(int8s.model)
    per_block = 4  # qkv, out, gate_up, down
    assert len(quantized_layers(int8s.model)) == 1 + per_block * int8s.model.config.num_layers
    check_close_to_float(floats, int8s, (SAMPLE * 3), 500)


def test_int8_is_refused_where_it_cannot_run(tmp_path, capsys):
    path = tmp_path / "sample.py"
    path.write_text("def f(x):\n    return x + 1\n")
    assert main([str(path), "--lines", "2", "--quantize", "int8", "--device", "cuda"]) == EXIT_MODEL
    assert "--quantize int8 runs on cpu (PyTorch's int8 kernels), not on cuda" in capsys.readouterr().err
    with pytest.raises(ModelError, match="runs on cpu"):
        load(None, "mps", quantize="int8")
    with pytest.raises(ModelError, match="quantizes float32 weights, not bfloat16"):
        load(None, "cpu", "bfloat16", quantize="int8")
    assert path.read_text() == "def f(x):\n    return x + 1\n"


def test_auto_leaves_small_models_float(tiny):
    """(auto's choice for big models: tests/models/test_int4.py)"""
    folder = tiny("Dream")
    assert not quantized_layers(load(folder, "cpu", "float32").network)  # 10M parameters: float
    assert not quantized_layers(load(None, "cpu", "float32").model)  # the shipped model (14M): float
    network = load(folder, "cpu", "float32", quantize="none").network
    assert chosen_quantization("auto", network, torch.device("cpu"), torch.float32) == "none"


def test_the_quantize_setting_is_part_of_the_model_key():
    settings, warnings = parse_settings({"quantize": "int8"})
    assert warnings == [] and settings.quantize == "int8" and Settings().quantize == "auto"
    assert Settings().model_key() != settings.model_key()
    assert settings.model_key() == parse_settings({"steps": 3}, settings)[0].model_key()
    assert parse_settings({"quantize": "int4"})[0].quantize == "int4"
    assert parse_settings({"quantize": "int2"})[1] == [
        "initializationOptions.quantize should be one of auto, none, int8, int4, got 'int2': ignored"
    ]


# ----------------------------------------------------------------------------- the language server

QUICK = {"device": "cpu", "steps": 2, "retries": 0, "tokenEdits": 0, "freshFills": 0}
CODE = "def double(x):\n    return x * 2\n"


@pytest_lsp.fixture(config=SERVER, scope="module")
async def lsp_client(lsp_client: LanguageClient):
    lsp_client.set_configuration(QUICK, section="infill")
    await lsp_client.initialize_session(initialize_params("visual-studio-code", {"threads": 1}))
    yield lsp_client
    await lsp_client.shutdown_session()


async def fill_actions(client: LanguageClient, uri: str) -> None:
    open_document(client, uri, CODE)
    line = types.Position(line=1, character=4)
    [action, *_] = await list_actions(client, uri, line, types.Position(line=1, character=16))
    await client.code_action_resolve_async(action)


@pytest.mark.external
@pytest.mark.asyncio(loop_scope="module")
async def test_the_server_reloads_the_model_when_quantize_changes(lsp_client: LanguageClient):
    def loads() -> list[str]:
        return [m.message for m in lsp_client.log_messages if m.message.startswith("infill: model")]

    await fill_actions(lsp_client, "file:///project/a.py")
    assert len(loads()) == 1 and "int8" not in loads()[0]
    lsp_client.set_configuration({**QUICK, "quantize": "int8"}, section="infill")
    lsp_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await fill_actions(lsp_client, "file:///project/b.py")
    assert len(loads()) == 2 and loads()[1].endswith(", int8 weights")
    errors = [m.message for m in lsp_client.messages if m.type == types.MessageType.Error]
    assert errors == []


def test_the_shipped_model_in_bfloat16():
    """bfloat16 weights (`--dtype bfloat16`): the rotary tables follow the weights' dtype, so the
    attention gets queries, keys and values of one dtype (it raised before), and the predictions
    stay the float ones'."""
    floats, halves = load(None, "cpu", "float32"), load(None, "cpu", "bfloat16")
    assert halves.model.lm_head.weight.dtype == torch.bfloat16
    check_close_to_float(floats, halves, (SAMPLE * 3), 500)


def test_a_bfloat16_fill_from_the_command_line(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("def f(a, b):\n    c = a + b\n    return c\n")
    assert main([str(path), "--lines", "2", "--dtype", "bfloat16", "--steps", "4"]) == 0


@pytest.mark.parametrize("native", [True, False])
def test_auto_dtype_of_the_shipped_model_follows_the_cpu(native, monkeypatch):
    """"auto": bfloat16 where the CPU computes it natively, float32 where it would be emulated
    (many times slower), and float32 for int8 weights; an asked dtype is kept."""
    monkeypatch.setattr(infill.models.loader, "cpu_has_bfloat16", lambda: native)
    expected = torch.bfloat16 if native else torch.float32
    assert pick_native_dtype("auto") == pick_native_dtype(None) == expected
    assert pick_native_dtype("auto", "int8") == torch.float32
    assert pick_native_dtype("float32") == torch.float32 and pick_native_dtype("bfloat16") == torch.bfloat16
    assert load(None, "cpu").model.norm.weight.dtype == expected
    assert load(None, "cpu", quantize="int8").model.norm.weight.dtype == torch.float32


@pytest.mark.parametrize("native", [True, False])
def test_auto_gives_the_shipped_model_int4_where_bfloat16_would_be_emulated(native, monkeypatch, capsys):
    """With "auto" and the dtype left to auto: as stored (bfloat16) on a CPU that computes bfloat16,
    int4 on one that would run the model in float32 (said on stderr); an asked dtype or quantize
    is kept, and a GPU is never quantized by it."""
    monkeypatch.setattr(infill.models.loader, "cpu_has_bfloat16", lambda: native)
    int4 = not native and int4_native.available()  # (PyTorch's 4-bit kernel multiplies in bfloat16)
    assert quantized_kind(load(None, "cpu").model) == ("int4" if int4 else "none")
    assert ("int4 weights (--quantize auto" in capsys.readouterr().err) == int4
    assert quantized_kind(load(None, "cpu", "float32").model) == "none"
    assert quantized_kind(load(None, "cpu", quantize="none").model) == "none"
    assert quantized_kind(load(None, "cpu", quantize="int8").model) == "int8"
    assert own_model_quantization("auto", None, torch.device("cuda"), pick_native_dtype("auto")) == "auto"
