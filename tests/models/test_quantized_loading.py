"""int8 weights made while loading (infill.models.quantize.Int8Loading): each layer quantized as
soon as its weights are in gives the very weights and logits of quantizing the whole loaded float
network with PyTorch's `quantize_dynamic` (what infill did before), the float network never
exists whole, a damaged checkpoint is still a ModelError, and `infill-bench shapes`' random
networks are the same as when they were made whole.

Open-dCoder's checkpoint here is one `model.safetensors` without an index, as Qwen2.5-0.5B
publishes it; Dream's and LLaDA's are sharded with an index (tests/checkpoints.py).
"""

from __future__ import annotations

import gc
import json
import weakref
from contextlib import contextmanager

import pytest
import torch
from checkpoints import write_checkpoint
from safetensors.torch import load_file, save_file
from torch import nn

from infill.bench.shapes import random_network
from infill.errors import ModelError
from infill.models import load, weights
from infill.models.decoder import Decoder, DecoderConfig
from infill.models.quantize import Int8Embedding, int8_rows, quantized_layers, quiet_deprecation

FAMILIES = ["Dream", "LLaDA", "Open-dCoder"]
INDEX = "model.safetensors.index.json"


def single_file(folder) -> None:
    """The shards and their index as one model.safetensors (Qwen2.5-0.5B's layout)."""
    state = {}
    for shard in sorted(folder.glob("model-*.safetensors")):
        state.update(load_file(str(shard)))
        shard.unlink()
    (folder / INDEX).unlink()
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """family -> the folder of a tiny checkpoint of it (written once)."""
    root = tmp_path_factory.mktemp("int8-loading")

    def folder(family: str):
        if not (root / family).exists():
            write_checkpoint(root / family, family)
            if family == "Open-dCoder":
                single_file(root / family)
        return root / family

    return folder


def quantized_whole(network: Decoder) -> Decoder:
    """What infill did before: the whole float network quantized by torch's `quantize_dynamic`
    (a tied output layer untied first); the embedding table then made int8 rows."""
    table = network.embed.weight
    network.untie_head()
    with quiet_deprecation():  # torch.ao.quantization's notices, as infill.models.quantize silences them
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        quantize_dynamic(network, {nn.Linear: per_channel_dynamic_qconfig}, torch.qint8, inplace=True)
    network.embed = Int8Embedding.of(int8_rows(table))
    return network


def int8_state(network: nn.Module) -> dict[str, torch.Tensor]:
    """Every number the network computes with: int8 weights, their scales, biases, float parameters."""
    state = {name: p for name, p in network.named_parameters()}
    state |= {name: b for name, b in network.named_buffers()}
    for name, module in network.named_modules():
        if name in quantized_layers(network) and not isinstance(module, Int8Embedding):
            weight, bias = module._packed_params._weight_bias()
            state[f"{name}.int8"] = weight.int_repr()
            state[f"{name}.scales"] = weight.q_per_channel_scales()
            if bias is not None:
                state[f"{name}.bias"] = bias
    return state


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_int8_while_loading_is_quantizing_the_loaded_network(family, tiny):
    folder = tiny(family)
    loaded = load(folder, "cpu", "float32", quantize="int8")
    reference = quantized_whole(load(folder, "cpu", "float32", quantize="none").network)
    ours, theirs = int8_state(loaded.network), int8_state(reference)
    assert sorted(ours) == sorted(theirs)
    assert [name for name in ours if not torch.equal(ours[name], theirs[name])] == []
    ids = torch.randint(0, 400, (1, 120), generator=torch.Generator().manual_seed(0))
    ids[0, 30:60] = loaded.mask_id
    assert torch.equal(loaded.network(ids), reference(ids))
    positions = torch.arange(30, 60)
    for refresh in (True, False):
        ours_cache, theirs_cache = loaded.network.new_cache(), reference.new_cache()
        if not refresh:  # a span-only pass needs the cache of a full one
            loaded.network.logits_at(ids, positions, ours_cache, refresh=True)
            reference.logits_at(ids, positions, theirs_cache, refresh=True)
        ours_logits = loaded.network.logits_at(ids, positions, ours_cache, refresh)
        assert torch.equal(ours_logits, reference.logits_at(ids, positions, theirs_cache, refresh))


def test_the_embedding_rows_are_the_tied_output_layers_int8_weights(tiny):
    network = load(tiny("Open-dCoder"), "cpu", "float32", quantize="int8").network
    weight = network.head.weight()  # the output layer's int8 copy of the embedding
    assert torch.equal(network.embed.rows, weight.int_repr())
    assert torch.equal(network.embed.scales, weight.q_per_channel_scales().float())
    ids = torch.tensor([[0, 5, 399, 151643, 151665]])
    assert torch.equal(network.embed(ids), weight.dequantize()[ids])


# ------------------------------------------------------------------ the float network, never whole


@contextmanager
def float_matrices_alive():
    """Yields `alive`: after each parameter set while loading, how many of the float matrices (2-D
    weights) set so far were still alive, the collector off (a reference cycle keeps them too)."""
    made: list[weakref.ref] = []
    alive: list[int] = []
    parameter_setter = weights.parameter_setter

    def counting_setter(module):
        set_parameter = parameter_setter(module)

        def counting(name, value):
            alive.append(sum(ref() is not None for ref in made))
            set_parameter(name, value)
            if value.dim() == 2 and value.is_floating_point():
                made.append(weakref.ref(module.get_parameter(name)))

        return counting

    weights.parameter_setter = counting_setter
    gc.collect()
    gc.disable()
    try:
        yield alive
        alive.append(sum(ref() is not None for ref in made))  # when loading is done
    finally:
        gc.enable()
        weights.parameter_setter = parameter_setter


@pytest.mark.slow
@pytest.mark.parametrize("family", ["Open-dCoder", "Dream"])
def test_the_float_network_is_never_whole_while_loading_int8(family, tiny):
    folder = tiny(family)
    matrices = len([m for m in load(folder, "cpu", "float32", quantize="none").network.modules() if
                    isinstance(m, (nn.Linear, nn.Embedding))])  # fmt: skip
    with float_matrices_alive() as alive_float:
        floats = load(folder, "cpu", "float32", quantize="none")
    assert alive_float[-1] == matrices  # what the probe sees of a float network
    with float_matrices_alive() as alive:
        int8s = load(folder, "cpu", "float32", quantize="int8")
    assert quantized_layers(int8s.network) and not quantized_layers(floats.network)
    assert alive[-1] == 0  # every float matrix freed once its layer is int8, the collector off
    if family == "Open-dCoder":  # one file, tensors in order: each matrix quantized before the next
        assert max(alive) == 0
    else:  # three shards, each layer's tensors spread over them: a few wait for the rest
        assert max(alive) <= matrices // 2


# ------------------------------------------------------------------------- damaged checkpoints


def without(name: str):
    def damage(folder):
        state = load_file(str(folder / "model.safetensors"))
        del state[name]
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})

    return damage


def truncated(folder):
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])


def wrong_shape(folder):
    config = json.loads((folder / "config.json").read_text())
    config["intermediate_size"] = 48
    (folder / "config.json").write_text(json.dumps(config))


def a_tensor_twice(folder):
    """Two files without an index (both are read), the second repeating a tensor of the first."""
    (folder / "model.safetensors").rename(folder / "model-a.safetensors")
    name = "model.layers.0.mlp.up_proj.weight"
    again = {name: load_file(str(folder / "model-a.safetensors"))[name]}
    save_file(again, str(folder / "model-b.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (without("model.layers.1.mlp.up_proj.weight"), "lacks model.layers.1.mlp.up_proj.weight"),
        (without("model.layers.0.self_attn.k_proj.bias"), "lacks model.layers.0.self_attn.k_proj.bias"),
        (without("model.embed_tokens.weight"), "the checkpoint lacks model.embed_tokens.weight"),
        (truncated, "cannot read"),
        (wrong_shape, "config.json implies"),
        (a_tensor_twice, "holds 'model.layers.0.mlp.up_proj.weight' a second time"),
    ],
)
@pytest.mark.parametrize("quantize", ["int8", "none"])
def test_a_damaged_checkpoint_is_a_model_error(damage, message, quantize, tiny, tmp_path):
    import shutil

    folder = tmp_path / "Open-dCoder"
    shutil.copytree(tiny("Open-dCoder"), folder)
    damage(folder)
    with pytest.raises(ModelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load(folder, "cpu", "float32", quantize=quantize)


# ---------------------------------------------------------------- infill-bench shapes' networks


def random_network_made_whole(config: DecoderConfig) -> Decoder:
    """How `random_network` made its network before: all of it in float, then initialised."""
    with torch.device("meta"):
        network = Decoder(config)
    network = network.to(torch.float32).to_empty(device="cpu").eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in network.named_parameters():
            if name.endswith("norm.weight"):
                parameter.fill_(1.0)
            else:
                parameter.normal_(0.0, 0.02, generator=generator)
    return network


@pytest.mark.parametrize("tied", [True, False])
def test_random_networks_are_as_when_made_whole(tied):
    config = DecoderConfig(1000, 32, 64, 2, 4, 2, 8, 1e6, 1e-6, qkv_bias=True, tied_head=tied)
    whole = random_network_made_whole(config)
    float_network = random_network(config, torch.device("cpu"), torch.float32, "none")
    same_parameters = [torch.equal(p, whole.get_parameter(n)) for n, p in float_network.named_parameters()]
    assert len(same_parameters) == len(list(whole.parameters())) and all(same_parameters)
    int8_network = random_network(config, torch.device("cpu"), torch.float32, "int8")
    ours, theirs = int8_state(int8_network), int8_state(quantized_whole(whole))
    assert sorted(ours) == sorted(theirs)
    assert [name for name in ours if not torch.equal(ours[name], theirs[name])] == []


def test_an_embedding_made_of_blocks_of_rows_equals_the_whole_tables_and_lets_each_block_go():
    table = torch.randn(50, 8)
    whole = Int8Embedding.of(int8_rows(table))
    blocks = [int8_rows(table[start : start + 16]) for start in range(0, 50, 16)]  # 16, 16, 16, 2 rows
    joined = Int8Embedding.of(blocks)
    assert torch.equal(joined.rows, whole.rows) and torch.allclose(joined.scales, whole.scales)
    assert blocks == []  # each block left the list as its rows were copied: none is held twice
    ids = torch.tensor([0, 17, 49])
    assert torch.equal(joined(ids), whole(ids))
