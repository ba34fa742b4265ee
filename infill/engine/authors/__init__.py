"""The authors' protocol: each published family fills a hole exactly as its authors' code does.

This engine's own protocol (infill.engine.sampler and the repair, recall and length stages around it)
is tuned for speed and for the small shipped model. A user who wants what a published model's
authors measured asks for their protocol instead (`infill --protocol authors`, server setting
`protocol: "authors"`): the same canvas, the same length handling and the same unmasking loop,
token for token, with nothing of this engine's added (no commit threshold, no re-masking, no
syntax repair, no recall, no cache: every step is a full pass, as theirs are).

    family                   canvas (prefix, suffix: the file around the hole)   loop (infill.engine.authors.)
    Dream, Dream-Coder,      [<|beginoftext|>] prefix [mask] x N suffix          dream
      DiffuCoder
    DreamOn                  [bos] prefix [mask] x 4 suffix [eos], grows/shrinks  dreamon
    LLaDA                    [<|startoftext|>] prefix [mask] x N suffix          llada
    Open-dCoder              prefix [mask] x N suffix                            open_dcoder

N is `--budget` (default: the hole's current length in tokens, the "true length" setting of
the published evaluations). Each hole is filled on its own canvas, as the published evaluations
fill one hole at a time. Only the settings a user gives apply (`AuthorsSettings`); what is not
given is the published function's own default, not a per-family recommendation. Greedy
(temperature 0) gives the authors' token ids; sampling draws from the same distributions with
this engine's seeded generator (their code draws from the global one).

Each loop takes the canvas row (with the hole's masks), where the hole is, and the settings, and
returns a `LoopResult`: the final row in the canvas's fixed layout (the hole's slot holding its
tokens, then <null> padding where a loop shrank it) and every id it committed, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from infill.errors import Cancelled, InputError
from infill.options import FAMILY_ORDERS, AuthorsSettings

__all__ = ["AuthorsSettings", "LoopResult", "Network", "loop_family", "seeded"]


def loop_family(denoiser) -> str:
    """Which published loop a denoiser's family runs ("DiffuCoder-Instruct" runs Dream's)."""
    family = getattr(denoiser, "family", None)
    if family in ("Dream", "DiffuCoder-Instruct"):
        return "Dream"
    if family in FAMILY_ORDERS:
        return family
    raise InputError(
        "--protocol authors runs the published models' own loops (Dream, Dream-Coder, DiffuCoder, "
        "DreamOn, LLaDA, Open-dCoder); this model has none: use this engine's protocol"
    )


def seeded(settings: AuthorsSettings) -> torch.Generator | None:
    """The seeded generator draws come from (temperature above 0)."""
    return torch.Generator().manual_seed(settings.seed) if settings.seed is not None else None


@dataclass
class LoopResult:
    ids: list[int]  # the canvas row after the loop, in its fixed layout
    by_step: list[list[int]] = field(default_factory=list)  # the ids each step committed, in order

    def commit(self, ids: list[int]) -> None:
        """One step (one forward pass) committed `ids`."""
        self.by_step.append(ids)

    @property
    def tokens(self) -> list[int]:
        """Every id committed, in order."""
        return [token for step in self.by_step for token in step]

    @property
    def passes(self) -> int:
        return len(self.by_step)

    def commit_at(self, x: torch.Tensor, where: torch.Tensor, tokens: torch.Tensor, chosen: torch.Tensor,
                  mask_id: int) -> None:  # fmt: skip
        """One step: of `tokens` (one for each position of the bool mask `where` of row x[0]),
        write those at `chosen` (positions or a bool mask) into x and record them."""
        proposed = torch.full_like(x[0], mask_id)
        proposed[where] = tokens
        x[0, chosen] = proposed[chosen]
        self.commit(proposed[chosen].tolist())


Network = Callable[[torch.Tensor], torch.Tensor]  # ids (1, L) -> logits (1, L, vocab), shift applied


def check_cancelled(cancelled: Callable[[], bool] | None) -> None:
    if cancelled is not None and cancelled():
        raise Cancelled("sampling cancelled")
