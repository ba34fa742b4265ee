"""A deeper model grown from a trained one (depth up-scaling): `infill-train recipe --init-from
MODEL --grow-layers N`.

The grown model keeps the trained model's embedding, final norm and output layer and its layers
in order, then copies of its last layers as the new ones (4 -> 6: layers 0, 1, 2, 3, 2, 3). Each
layer adds to the residual stream, so the copies refine what the layers before them computed,
starting from weights that already compute something useful: its loss starts near its parent's,
far below a fresh initialisation's, and training on from there keeps what the parent learned
(docs/gpu-recipe.md, "The next lease"). A fresh model of the bigger size would have to learn it all
again in one lease.
"""

from __future__ import annotations

import copy

from infill.models.native.model import InfillConfig, InfillModel


def layer_sources(layers: int, grown: int) -> list[int]:
    """For each layer of the grown model, the parent's layer it starts as: all of them in order,
    then copies of the last ones (cycling through them again when more are wanted)."""
    if grown < layers:
        raise ValueError(f"a grown model has at least its parent's {layers} layers, not {grown}")
    extra = grown - layers
    repeated = list(range(layers)) * -(-extra // layers)  # enough whole rounds of the parent's layers
    return list(range(layers)) + (repeated[-extra:] if extra else [])


def grown(model: InfillModel, layers: int) -> InfillModel:
    """A copy of `model` with `layers` layers (`layer_sources`); the parent is left as it is."""
    config = InfillConfig(**{**model.config.to_dict(), "num_layers": layers})
    bigger = InfillModel(config)
    state = {name: value for name, value in model.state_dict().items() if not name.startswith("blocks.")}
    for index, source in enumerate(layer_sources(model.config.num_layers, layers)):
        block = copy.deepcopy(model.blocks[source]).state_dict()
        state |= {f"blocks.{index}.{name}": value for name, value in block.items()}
    bigger.load_state_dict(state)
    return bigger
