"""Published model families (infill.models): tiny random checkpoints in each family's exact layout,
checked against transformers' own Qwen2 / Llama models, then run through the CLI and the server.

The checkpoints (tests/checkpoints.py) carry the special tokens at their real ids and "remote
code" files that leave a marker if imported: no test may find a marker unless it opted in.
"""

from __future__ import annotations

import json
import shutil

import pytest
import pytest_lsp
import torch
from checkpoints import FAMILIES, reference_logits, write_checkpoint
from lsp_support import SERVER, initialize_params, list_actions, open_document
from lsprotocol import types
from pytest_lsp import LanguageClient

from infill.cli import EXIT_MODEL, EXIT_OK, main
from infill.engine.decode import span_text
from infill.errors import ModelError
from infill.models import load, pick_device, pick_dtype
from infill.models.denoiser import CachingCheckpointDenoiser
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.spans import line_span
from lsp_server.settings import parse_settings

CODE = '''import math


def circle_area(radius):
    """Area of a circle."""
    return math.pi * radius ** 2


def mean(values):
    total = 0
    for value in values:
        total += value
    return total / len(values)


class Counter:
    def __init__(self):
        self.count = 0
'''


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory):
    """family -> (folder, remote-code marker); plus "<family>-eos": one prone to end-of-text."""
    root = tmp_path_factory.mktemp("checkpoints")
    built = {}
    for family in FAMILIES:
        built[family] = (root / family, write_checkpoint(root / family, family))
        built[f"{family}-eos"] = (
            root / f"{family}-eos",
            write_checkpoint(root / f"{family}-eos", family, eos_prone=True),
        )
    yield built
    for folder, marker in built.values():
        assert not marker.exists(), f"the remote code of {folder.name} was executed"


@pytest.fixture(scope="session")
def loaded(checkpoints):
    cache = {}

    def get(family: str) -> CachingCheckpointDenoiser:
        if family not in cache:
            cache[family] = load(checkpoints[family][0], "cpu", torch.float32)
        return cache[family]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_predictions_match_transformers_with_a_non_causal_mask(family, checkpoints, loaded):
    denoiser = loaded(family)
    ids = torch.tensor([denoiser.encode(CODE)[:48], denoiser.encode(CODE)[10:58]])
    ids[:, 20:26] = denoiser.mask_id
    ours = denoiser.logits(ids)
    theirs = reference_logits(checkpoints[family][0], family, ids)
    if family != "LLaDA":  # the shift: row i predicts the token at i from the network's row i-1
        theirs = torch.cat([theirs[:, :1], theirs[:, :-1]], dim=1)
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max() < 1e-3
    if family == "LLaDA":
        other_convention = torch.cat([theirs[:, :1], theirs[:, :-1]], dim=1)
    else:
        other_convention = torch.cat([theirs[:, 1:], theirs[:, -1:]], dim=1)
    assert (ours - other_convention).abs().max() > 1e-2  # the shift (or its absence) is checked


@pytest.mark.parametrize("family", FAMILIES)
def test_cached_logits_equal_full_logits_at_the_positions(family, loaded):
    denoiser = loaded(family)
    ids = torch.tensor([denoiser.encode(CODE)[:60]] * 2)
    ids[1, 30:40] = denoiser.mask_id
    positions = torch.tensor([0, 5, 6, 7, 30, 31, 39])
    full = denoiser.logits(ids)[:, positions]
    cache = denoiser.new_cache()
    refreshed = denoiser.cached_logits(ids, positions, cache, refresh=True)
    assert (refreshed - full).abs().max() < 1e-4
    partial = denoiser.cached_logits(ids, positions, cache, refresh=False)  # same canvas: same answer
    assert (partial - full).abs().max() < 1e-4


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_shipped_models_cache_holds_keys_and_values_of_their_own(dtype):
    """A refresh leaves each layer's keys and values contiguous in memory of their own, not views
    of its qkv product (which kept the product alive and made every span pass's attention copy
    the values whole, at every layer); span passes then give what they gave."""
    backend = load(None, "cpu", dtype, quantize="none")
    ids = torch.tensor([backend.encode(CODE)[:60]])
    cache = backend.new_cache()
    backend.cached_logits(ids, torch.arange(60), cache, refresh=True)
    for layer in cache:
        for held in (layer.keys, layer.values):
            assert held.is_contiguous()
            assert held.untyped_storage().nbytes() == held.numel() * held.element_size()
    positions = torch.tensor([5, 6, 7])
    again = backend.new_cache()
    backend.cached_logits(ids, torch.arange(60), again, refresh=True)
    for layer in again:  # the old layout: values a view of a larger tensor
        whole = torch.zeros(*layer.values.shape[:2], layer.values.shape[2], 3, layer.values.shape[3],
                            dtype=layer.values.dtype)  # fmt: skip
        whole[:, :, :, 2] = layer.values
        layer.values = whole[:, :, :, 2]
    assert torch.equal(
        backend.cached_logits(ids, positions, cache, refresh=False),
        backend.cached_logits(ids, positions, again, refresh=False),
    )


@pytest.mark.parametrize("family", ["Dream", "LLaDA"])
def test_the_output_layer_at_some_rows_gives_those_rows_logits(family, loaded):
    network = loaded(family).network
    ids = torch.tensor([loaded(family).encode(CODE)[:60]])
    positions, rows = torch.tensor([3, 4, 5, 20, 21]), torch.tensor([0, 2, 3])
    cache = network.new_cache()
    for refresh in (True, False):  # a refresh, then a span pass on its cache
        every = network.logits_at(ids, positions, cache, refresh)
        some = network.logits_at(ids, positions, cache, refresh, rows=rows)
        assert some.shape == every[:, rows].shape  # a float product's last bits depend on its row count
        torch.testing.assert_close(some, every[:, rows], rtol=0, atol=1e-5)
        assert torch.equal(some.argmax(-1), every[:, rows].argmax(-1))


@pytest.mark.parametrize(
    ("family", "mask", "null", "expand"),
    [("Dream", 151666, 151643, None), ("DreamOn", 151666, 151643, 151667),
     ("Open-dCoder", 151665, 151643, None), ("LLaDA", 126336, 126081, None)],
)  # fmt: skip
def test_special_tokens_come_from_the_files(family, mask, null, expand, checkpoints, loaded):
    denoiser = loaded(family)
    assert (denoiser.mask_id, denoiser.null_id, denoiser.expand_id) == (mask, null, expand)
    added = denoiser.tokenizer.added
    assert set(added.values()) - {null} <= denoiser.special_ids  # no added token is ever written...
    assert null not in denoiser.special_ids  # ...but end-of-text, which is the null
    assert denoiser.recommended and "temperature" in denoiser.recommended
    text = "x = '<|mask|>' + '<|endoftext|>'  # <|mdm_mask|> <M>\n"
    encoded = denoiser.encode(text)
    assert not set(encoded) & (denoiser.special_ids | {null})  # the user's text is only text
    assert denoiser.decode(encoded) == text


def test_dream_tokenizer_matches_transformers_qwen2_tokenizer(checkpoints, loaded):
    from transformers import Qwen2Tokenizer

    folder = checkpoints["Dream"][0]
    theirs = Qwen2Tokenizer(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"))
    ours = loaded("Dream")
    for text in (CODE, "naïve café = 12345\r\n\ttabs  and   spaces\n\n\n", "x='don't'; y = \"It's\"\n"):
        assert ours.encode(text) == theirs.encode(text, add_special_tokens=False)


# ----------------------------------------------------------------------------- end to end


def leaks_of(denoiser) -> list[str]:
    """Texts that must never reach the user's file: every added token, and the step printer's marks."""
    return [*denoiser.tokenizer.added, "░"]


SMALL = """import math


def mean(values):
    total = sum(values)
    return total / len(values)


class Counter:
    count = 0
"""


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_cli_fill_fix_document_and_alternatives(family, checkpoints, loaded, tmp_path, capsys):
    """Each mode through the real CLI on each family: exit 0, no special token in what comes out,
    nothing outside the span touched. (Random weights: what the model writes is gibberish; a
    vocabulary of the real size makes every step cost, hence the small spans and few steps.)"""
    leaks = leaks_of(loaded(family))
    path = tmp_path / "sample.py"
    path.write_text(SMALL)
    model = ["--model", str(checkpoints[family][0]), "--device", "cpu", "--dtype", "float32", "--seed", "0"]
    quick = [*model, "--steps", "2", "--budget", "6", "--retries", "0", "--token-edits", "0"]
    lines = SMALL.splitlines(keepends=True)

    assert main([str(path), "--lines", "5", "--write", *quick, "--fresh-fills", "0"]) == EXIT_OK
    assert "parameters in float32 on cpu" in capsys.readouterr().err  # said before loading
    after = path.read_text()
    assert after.startswith("".join(lines[:4])) and after.endswith("".join(lines[5:]))
    assert not [leak for leak in leaks if leak in after]
    path.write_text(SMALL)

    assert main([str(path), "--lines", "5-6", "--fix", "--json", *quick]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert [s["start"] for s in report["spans"]] == [SMALL.index("    total =")]
    assert not [leak for leak in leaks if leak in json.dumps(report, ensure_ascii=False)]

    assert main([str(path), "--document", "--json", *quick]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert {d["name"] for d in report["docstrings"]} == {"function mean", "class Counter"}
    assert not [leak for leak in leaks if leak in json.dumps(report, ensure_ascii=False)]

    assert main([str(path), "--lines", "6", "--alternatives", "2", "--json", *quick]) == EXIT_OK
    candidates = json.loads(capsys.readouterr().out)
    assert 1 <= len(candidates) <= 2
    for candidate in candidates:
        assert not [leak for leak in leaks if leak in candidate["new_text"]]
    assert path.read_text() == SMALL  # only --write writes


@pytest.mark.parametrize("family", FAMILIES)
def test_end_of_text_in_a_span_is_the_null_and_never_text(family, checkpoints):
    """A model that writes end-of-text into the span (as these models pad answers): the engine
    takes it as its null, so the span's new text holds none of it (here: the lines go away)."""
    denoiser = load(checkpoints[f"{family}-eos"][0], "cpu", torch.float32)
    document = document_from_bytes(CODE.encode())
    steps = []
    options = InfillOptions(SamplerConfig(seed=0, steps=8), retries=0, token_edits=0, fresh_fills=0)
    span = line_span(CODE, 9, 12)
    result = infill(
        denoiser, document, [span], options, on_step=lambda canvas, step: steps.append((canvas, step))
    )
    canvas, last = steps[-1]
    slot = canvas.slots[0]
    filled = last.ids[0, slot.start : slot.start + slot.length].tolist()
    assert filled.count(denoiser.null_id) > slot.length // 2  # the model did write end-of-text
    new_text = result.spans[0].new_text
    assert "<|endoftext|>" not in new_text and len(new_text) < 20
    end_of_text = denoiser.null_id
    content = denoiser.encode("return 1")
    assert span_text(denoiser, [*content, end_of_text, end_of_text]) == "return 1"
    assert span_text(denoiser, [end_of_text, *content, end_of_text]) == "return 1"


def test_settings_name_the_device_dtype_and_remote_code_opt_in():
    settings, warnings = parse_settings({"modelPath": "/m", "device": "cuda", "dtype": "bfloat16"})
    assert warnings == [] and (settings.device, settings.dtype, settings.trust_remote_code) == (
        "cuda",
        "bfloat16",
        False,
    )
    assert settings.model_key() != parse_settings({"trustRemoteCode": True}, settings)[0].model_key()
    assert settings.model_key() != parse_settings({"dtype": "float32"}, settings)[0].model_key()
    assert settings.model_key() == parse_settings({"steps": 3}, settings)[0].model_key()
    assert parse_settings({"dtype": "int8"})[1] == [
        "initializationOptions.dtype should be one of auto, float32, bfloat16, float16, got 'int8': ignored"
    ]


# ----------------------------------------------------------------------------- bad input


def broken_copy(checkpoints, tmp_path, family: str = "Dream"):
    folder = tmp_path / "broken"
    shutil.copytree(checkpoints[family][0], folder)
    return folder


def edit_json(path, **changes):
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def no_weights(folder):
    for shard in folder.glob("*.safetensors"):
        shard.unlink()
    (folder / "model.safetensors.index.json").unlink()


def pickle_only(folder):
    no_weights(folder)
    (folder / "pytorch_model.bin").write_bytes(b"not even a pickle")


def missing_shard(folder):
    (folder / "model-00002-of-00003.safetensors").unlink()


def unknown_model_type(folder):
    edit_json(folder / "config.json", model_type="mamba")


def mask_not_in_tokenizer(folder):
    added = json.loads((folder / "added_tokens.json").read_text())
    del added["<|mask|>"]
    (folder / "added_tokens.json").write_text(json.dumps(added))
    config = json.loads((folder / "tokenizer_config.json").read_text())
    del config["added_tokens_decoder"]["151666"]
    del config["mask_token"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "special_tokens_map.json").write_text("{}")


def wrong_shape(folder):
    edit_json(folder / "config.json", intermediate_size=48)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (no_weights, "no weights in"),
        (pickle_only, "only pickle weights (pytorch_model.bin)"),
        (missing_shard, "model-00002-of-00003.safetensors is not in the folder"),
        (unknown_model_type, "model_type 'mamba', which infill cannot run; supported: Dream"),
        (mask_not_in_tokenizer, "has no '<|mask|>'"),
        (wrong_shape, "config.json implies"),
    ],
)
def test_a_broken_checkpoint_is_refused_and_nothing_changes(damage, message, checkpoints, tmp_path, capsys):
    folder = broken_copy(checkpoints, tmp_path)
    damage(folder)
    path = tmp_path / "sample.py"
    path.write_text(CODE)
    code = main([str(path), "--lines", "9-12", "--write", "--model", str(folder), "--device", "cpu"])
    assert code == EXIT_MODEL
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error
    assert path.read_text() == CODE
    if damage is pickle_only:
        assert "safetensors" in error and "save_file" in error  # how to convert


def test_a_qwen2_checkpoint_without_a_mask_token_is_not_a_diffusion_model(checkpoints, tmp_path):
    folder = broken_copy(checkpoints, tmp_path, "Open-dCoder")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    del config["mask_token"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="without a mask token"):
        load(folder, "cpu")


def test_remote_code_runs_only_when_the_user_opts_in(checkpoints, tmp_path, monkeypatch, capsys):
    folder = broken_copy(checkpoints, tmp_path, "LLaDA")
    marker = folder.parent / f"{folder.name}.REMOTE-CODE-RAN"
    from checkpoints import write_remote_code

    assert write_remote_code(folder, ["configuration_llada.py", "modeling_llada.py"]) == marker
    path = tmp_path / "sample.py"
    path.write_text(CODE)
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "hf-modules"))
    args = [str(path), "--lines", "9", "--model", str(folder), "--device", "cpu", "--steps", "2"]
    args += ["--budget", "4", "--retries", "0", "--token-edits", "0", "--fresh-fills", "0"]
    assert main(args) == EXIT_OK and not marker.exists()
    assert main([*args, "--trust-remote-code"]) == EXIT_MODEL  # our dummy remote code raises...
    assert marker.exists()  # ...after proving that the opt-in really hands over to it
    assert "could not load it" in capsys.readouterr().err
    assert path.read_text() == CODE


# ----------------------------------------------------------------------------- the language server


@pytest_lsp.fixture(config=SERVER, scope="module")
async def lsp_client(lsp_client: LanguageClient, checkpoints):
    lsp_client.set_configuration(server_settings(checkpoints, "Dream"), section="infill")
    await lsp_client.initialize_session(initialize_params("visual-studio-code", {"threads": 1}))
    yield lsp_client
    await lsp_client.shutdown_session()


def server_settings(checkpoints, family: str) -> dict:
    folder = str(checkpoints[family][0])
    quick = {"steps": 2, "retries": 0, "tokenEdits": 0, "freshFills": 0}
    return {"modelPath": folder, "device": "cpu", "dtype": "float32", **quick}


def apply_lsp_edits(text: str, edits) -> str:
    """LSP edits on an ASCII text with "\\n" line ends."""
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        a = starts[edit.range.start.line] + edit.range.start.character
        b = starts[edit.range.end.line] + edit.range.end.character
        text = text[:a] + edit.new_text + text[b:]
    return text


@pytest.mark.external
@pytest.mark.asyncio(loop_scope="module")
async def test_the_server_fills_a_selection_with_each_family(lsp_client: LanguageClient, checkpoints, loaded):
    """One server; each family in turn through `modelPath` (a new path reloads the model)."""
    start = SMALL.index("sum(values)")
    end = start + len("sum(values)")
    line = SMALL[:start].count("\n")
    column = start - SMALL.rindex("\n", 0, start) - 1
    for family in FAMILIES:
        lsp_client.set_configuration(server_settings(checkpoints, family), section="infill")
        lsp_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        uri = f"file:///project/{family}.py"
        open_document(lsp_client, uri, SMALL)
        selection = (
            types.Position(line=line, character=column),
            types.Position(line=line, character=column + 11),
        )
        [action, *_] = await list_actions(lsp_client, uri, *selection)
        resolved = await lsp_client.code_action_resolve_async(action)
        [document_edit] = (
            resolved.edit.document_changes if resolved.edit else [types.TextDocumentEdit(None, [])]
        )
        filled = apply_lsp_edits(SMALL, document_edit.edits)
        assert filled.startswith(SMALL[:start]) and filled.endswith(SMALL[end:])
        assert not [leak for leak in leaks_of(loaded(family)) if leak in filled]
    errors = [m.message for m in lsp_client.messages if m.type == types.MessageType.Error]
    assert errors == []


def test_the_shapes_benchmark_times_a_family_shape(monkeypatch, capsys, tmp_path):
    """infill-bench shapes on a tiny stand-in shape (the real ones take minutes on a CPU)."""
    from infill.bench import cli as bench
    from infill.bench import shapes
    from infill.models.decoder import DecoderConfig

    tiny = DecoderConfig(151936, 32, 64, 2, 4, 2, 8, 1e6, 1e-6, qkv_bias=True, tied_head=True)
    monkeypatch.setitem(shapes.SHAPES, "tiny-qwen2", (tiny, 151665, 151643, True, 151643))
    monkeypatch.setattr(bench, "heldout_sources", lambda: [("sample.py", SMALL * 30)])
    out = tmp_path / "shapes.json"
    argv = [
        "shapes",
        "--shapes",
        "tiny-qwen2",
        "--passes",
        "3",
        "--repeat",
        "1",
        "--device",
        "cpu",
        "--json",
        str(out),
    ]
    assert bench.main(argv) == 0
    [row] = json.loads(out.read_text())["rows"]
    assert row["fill_passes"] == {"3": 3} and row["span"] >= 1 and row["canvas"] > row["span"]
    assert row["full_pass_ms"] > 0 and row["cached_pass_ms"] > 0 and row["peak_mib"] > 0
    assert row["kept_fill_ms"]["3"] > 0  # the next line's fill on the document's kept context
    printed = capsys.readouterr().out
    assert "tiny-qwen2" in printed and "next@3 ms" in printed


def test_device_and_dtype_choices(checkpoints, tmp_path, capsys):
    assert pick_dtype("auto", torch.device("cpu")) == torch.float32
    assert pick_dtype(None, torch.device("cuda")) == torch.bfloat16
    assert pick_device("cpu") == torch.device("cpu")
    path = tmp_path / "sample.py"
    path.write_text(SMALL)
    if not torch.cuda.is_available():
        args = [
            str(path),
            "--lines",
            "5",
            "--write",
            "--model",
            str(checkpoints["Dream"][0]),
            "--device",
            "cuda",
        ]
        assert main(args) == EXIT_MODEL
        assert "device cuda is not available" in capsys.readouterr().err
    with pytest.raises(ModelError, match="unknown device"):
        pick_device("tpu-of-dreams")
    assert path.read_text() == SMALL


def test_diffucoder_instruct_pads_with_dlm_pad(checkpoints, tmp_path):
    """DiffuCoder-Instruct's tokenizer adds <|dlm_pad|>, the token its answers are padded with:
    that is the null then, and end-of-text is ruled out like any other special token."""
    folder = broken_copy(checkpoints, tmp_path, "Dream")
    added = json.loads((folder / "added_tokens.json").read_text())
    (folder / "added_tokens.json").write_text(json.dumps({**added, "<|dlm_pad|>": 151667}))
    denoiser = load(folder, "cpu")
    assert (denoiser.family, denoiser.null_id, denoiser.expand_id) == ("DiffuCoder-Instruct", 151667, None)
    assert 151643 in denoiser.special_ids and 151667 not in denoiser.special_ids
    assert denoiser.recommended["temperature"] == 0.3  # its README's example (cpGRPO, by name: 0.4)


# -- each family's recommended sampler settings, where the user set nothing (infill.models.defaults)


@pytest.mark.parametrize(
    "family, order, temperature, block_length",
    [
        ("Dream", "entropy", 0.2, None),
        ("DreamOn", "entropy", 0.2, None),
        ("LLaDA", "low_confidence", 0.0, 32),
    ],
)
def test_a_family_recommends_its_sampler_settings(family, order, temperature, block_length, loaded):
    from infill.models.defaults import with_recommended

    config = with_recommended(SamplerConfig(), loaded(family), explicit=set())
    assert (config.order, config.temperature, config.block_length) == (order, temperature, block_length)
    # what the user set wins
    mine = with_recommended(
        SamplerConfig(order="margin", temperature=0.0), loaded(family), {"order", "temperature"}
    )
    assert (mine.order, mine.temperature) == ("margin", 0.0)


def test_the_shipped_model_keeps_the_engine_defaults():
    from infill.models.defaults import with_recommended

    assert with_recommended(SamplerConfig(), load(None, "cpu"), explicit=set()) == SamplerConfig()


def test_the_server_applies_the_recommendation_unless_a_setting_says_otherwise(loaded):
    settings, _ = parse_settings({})
    assert settings.infill_options(loaded("Dream")).sampler.order == "entropy"
    assert settings.infill_options(loaded("Dream")).sampler.temperature == 0.2
    settings, _ = parse_settings({"temperature": 0.0})
    assert settings.infill_options(loaded("Dream")).sampler.temperature == 0.0
    assert settings.infill_options().sampler == SamplerConfig()


def test_the_cli_counts_only_flags_the_user_gave_as_set():
    from infill.cli import build_parser, explicit_sampler_fields

    assert explicit_sampler_fields(build_parser().parse_args(["f.py", "--lines", "1"])) == set()
    given = build_parser().parse_args(["f.py", "--lines", "1", "--order", "margin", "--temperature", "0"])
    assert explicit_sampler_fields(given) == {"order", "temperature"}
