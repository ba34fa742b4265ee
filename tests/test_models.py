"""Published model families (infill.models): tiny random checkpoints in each family's exact layout,
checked against transformers' own Qwen2 / Llama models, then run through the CLI and the server.

The checkpoints (tests/checkpoints.py) carry the special tokens at their real ids and "remote
code" files that leave a marker if imported: no test may find a marker unless it opted in.
"""

from __future__ import annotations

import pytest
import torch
from checkpoints import FAMILIES, llama_model, qwen2_model, write_checkpoint
from safetensors.torch import load_file

import infill.models
from infill.models.denoiser import CachingCheckpointDenoiser

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
            cache[family] = infill.models.load(checkpoints[family][0], "cpu", torch.float32)
        return cache[family]

    return get


def reference_logits(folder, family: str, ids: torch.Tensor) -> torch.Tensor:
    """transformers' own model on the checkpoint's weights, attention made non-causal."""
    state = {}
    for shard in sorted(folder.glob("*.safetensors")):
        state.update({k: v.float() for k, v in load_file(str(shard)).items()})
    if family == "LLaDA":
        model = llama_model(126464)
        from checkpoints import llada_name

        state = {name: state[llada_name(name)] for name in model.state_dict()}
    else:
        model = qwen2_model(151936 if family == "Open-dCoder" else 152064, tied=family == "Open-dCoder")
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    model = model.float().eval()
    length = ids.shape[1]
    open_mask = torch.zeros(ids.shape[0], 1, length, length)  # every position sees every other
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=open_mask).logits


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
