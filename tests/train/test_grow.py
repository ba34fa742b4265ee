"""A deeper model grown from a trained one (infill.train.grow, `infill-train recipe --grow-layers`):
its layers are its parent's, then copies of the last ones; it predicts far closer to its parent
than a fresh model of its size does; the recipe trains it on and exports it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from infill.models.native.model import InfillConfig, InfillModel
from infill.train.cli import main as train_main
from infill.train.grow import grown, layer_sources

pytestmark = pytest.mark.training


def test_the_grown_layers_are_the_parents_then_copies_of_the_last():
    assert layer_sources(4, 6) == [0, 1, 2, 3, 2, 3]
    assert layer_sources(4, 5) == [0, 1, 2, 3, 3] and layer_sources(4, 4) == [0, 1, 2, 3]
    assert layer_sources(2, 7) == [0, 1, 1, 0, 1, 0, 1]
    with pytest.raises(ValueError, match="at least"):
        layer_sources(4, 3)


def trained_parent() -> tuple[InfillModel, torch.Tensor]:
    """A small model whose weights are not a fresh initialisation's (a few steps of a toy task),
    and the batch it learned."""
    torch.manual_seed(0)
    config = InfillConfig(vocab_size=64, hidden_size=32, num_layers=2, num_heads=2, context_length=64)
    model = InfillModel(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = torch.randint(5, 64, (8, 32))
    targets = ids.roll(1, dims=1)  # something to learn: the token before
    for _ in range(60):
        loss = torch.nn.functional.cross_entropy(model(ids).logits.transpose(1, 2), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), ids


def test_a_grown_model_starts_near_its_parent_and_leaves_it_alone():
    parent, ids = trained_parent()
    before = {name: value.clone() for name, value in parent.state_dict().items()}
    child = grown(parent, 3).eval()  # half as deep again, as 4 -> 6
    assert child.config.num_layers == 3 and parent.config.num_layers == 2
    for index, source in enumerate(layer_sources(2, 3)):
        for name, value in parent.blocks[source].state_dict().items():
            assert torch.equal(child.blocks[index].state_dict()[name], value)
    assert all(torch.equal(value, before[name]) for name, value in parent.state_dict().items())
    fresh = InfillModel(child.config).eval()
    with torch.no_grad():
        logp = {name: model(ids).logits.log_softmax(-1) for name, model in
                [("parent", parent), ("grown", child), ("fresh", fresh)]}  # fmt: skip
    targets = ids.roll(1, dims=1)
    loss = {name: torch.nn.functional.nll_loss(v.transpose(1, 2), targets).item() for name, v in logp.items()}
    assert loss["parent"] < loss["fresh"] - 1  # the parent learned something
    kl = {name: (logp["parent"].exp() * (logp["parent"] - logp[name])).sum(-1).mean().item() for name in logp}
    assert kl["grown"] < kl["fresh"] / 2, (kl, loss)  # it predicts far nearer its parent
    assert loss["grown"] < (loss["parent"] + loss["fresh"]) / 2


@pytest.mark.slow
def test_the_recipe_trains_a_grown_model_on_and_exports_it(tmp_path: Path):
    assert train_main(["recipe", "--device", "cpu", "--tiny", "--out", str(tmp_path / "start")]) == 0
    start = tmp_path / "start" / "export"
    layers = json.loads((start / "config.json").read_text())["num_layers"]

    def args(out: str, grow: int) -> list[str]:
        return ["recipe", "--device", "cpu", "--tiny", "--out", str(tmp_path / out), "--init-from",
                str(start), "--minutes", "9", "--grow-layers", str(grow)]  # fmt: skip

    assert train_main(args("grown", layers + 1)) == 0
    exported = json.loads((tmp_path / "grown" / "export" / "config.json").read_text())
    assert exported["num_layers"] == layers + 1
    origin = json.loads((tmp_path / "grown" / "export" / "training.json").read_text())["origin"]
    assert f"trained on from {layers} layers grown to {layers + 1} (infill.train.grow) from " in origin
    with pytest.raises(SystemExit, match="has .* layers already"):
        train_main(args("smaller", layers - 1))
    with pytest.raises(SystemExit, match="give both"):
        train_main(["recipe", "--device", "cpu", "--tiny", "--out", str(tmp_path / "x"), "--grow-layers=9"])
