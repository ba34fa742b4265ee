"""Shared fixtures: a tiny tokenizer, a tiny (untrained) real backend, and an oracle denoiser.

`OracleDenoiser` is a test double for the *network*: it implements the `Denoiser` Protocol over
the tiny tokenizer, knows the answer (the target ids of the canvas) and returns logits peaked
at it. It can be told how confident to be at each position, to be confidently wrong at some
positions for a while and then notice (self-correction), to never believe what was committed
(re-mask storms), or to favour special tokens. It counts its calls and remembers their inputs.
"""

from __future__ import annotations

import inspect
import string
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

import pytest
import torch

from infill.engine.canvas import Canvas
from infill.models.native import InfillBackend
from infill.models.native.model import InfillConfig, InfillModel
from infill.models.native.tokenizer import CodeTokenizer, train_tokenizer

TOKENIZER_VOCAB = 400

SAMPLE_SOURCE = '''\
import os
import sys


def add(a, b):
    """Return the sum of a and b."""
    return a + b


def greet(name: str) -> str:
    if not name:
        raise ValueError("name is empty")
    return f"hello, {name}"


class Counter:
    def __init__(self, start=0):
        self.value = start

    def increment(self, step=1):
        self.value += step
        return self.value


for index in range(10):
    print(index, add(index, 1))
'''


def tokenizer_corpus() -> list[str]:
    """A few KB of Python: the sample above and the start of two stdlib modules."""
    return [SAMPLE_SOURCE, inspect.getsource(textwrap)[:8000], inspect.getsource(string)[:6000]]


@pytest.fixture(scope="session")
def tiny_tokenizer() -> CodeTokenizer:
    return train_tokenizer(tokenizer_corpus(), vocab_size=TOKENIZER_VOCAB)


@pytest.fixture(scope="session")
def tiny_backend(tiny_tokenizer: CodeTokenizer) -> InfillBackend:
    """The real architecture, randomly initialised (seeded), with a 128-token context."""
    torch.manual_seed(1234)
    config = InfillConfig(
        vocab_size=tiny_tokenizer.vocab_size, hidden_size=32, num_layers=2, num_heads=2, context_length=128
    )
    return InfillBackend(InfillModel(config).eval(), tiny_tokenizer)


class OracleDenoiser:
    """A `Denoiser` whose logits are peaked at known target ids.

    targets: the answer for every canvas position, (L,) for every row or (B, L) row by row. Use
        `OracleDenoiser.for_canvases` instead when the canvases are built elsewhere (the engine).
    confidence: the probability the sampler will see for the predicted token (after it rules
        out special ids): a float, or a tensor broadcastable to (B, L).
    wrong: {position: token id}: while more than `wrong_until` positions of a row are still
        masked, predict that token there (confidently wrong). Once a row has had at most
        `wrong_until` masked positions the oracle knows better for good: it predicts the target,
        so the wrong token, if committed, gets a probability near 0.
    disbelieve: at every committed position, predict some token other than the one there, so
        the committed token always looks improbable.
    favour: token ids given an overwhelming logit everywhere (e.g. mask and pad), the first most.
    """

    def __init__(
        self,
        tokenizer: CodeTokenizer,
        targets: torch.Tensor | None = None,
        *,
        confidence: float | torch.Tensor = 0.99,
        context_length: int = 128,
        wrong: Mapping[int, int] | None = None,
        wrong_until: int = 0,
        disbelieve: bool = False,
        favour: Iterable[int] = (),
    ):
        self.tokenizer = tokenizer
        self.targets = None if targets is None else torch.as_tensor(targets)
        self.confidence = confidence
        self.context_length = context_length
        self.wrong = dict(wrong or {})
        self.wrong_until = wrong_until
        self.disbelieve = disbelieve
        self.favour = list(favour)
        self.candidates: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.calls = 0
        self.inputs: list[torch.Tensor] = []
        self.matched: list[int] = []  # candidate index used for each row of each call
        self.enlightened: set[int] = set()  # rows that have seen through their wrong tokens

    @classmethod
    def for_canvases(
        cls,
        tokenizer: CodeTokenizer,
        canvases: Sequence[tuple[Canvas, Sequence[Sequence[int]]]],
        **options,
    ) -> OracleDenoiser:
        """An oracle for canvases laid out elsewhere: each canvas comes with one list of target ids
        per slot (shorter than the slot: padded with <null>). A row is recognised by its length and
        its context (the ids outside the slots)."""
        oracle = cls(tokenizer, **options)
        for canvas, answers in canvases:
            ids = torch.tensor(canvas.ids)
            editable = torch.tensor(canvas.editable())
            target = ids.clone()
            assert len(answers) == len(canvas.slots)
            for slot, answer in zip(canvas.slots, answers, strict=True):
                assert len(answer) <= slot.length, "the answer does not fit the slot's budget"
                padded = list(answer) + [tokenizer.null_id] * (slot.length - len(answer))
                target[slot.start : slot.start + slot.length] = torch.tensor(padded)
            oracle.candidates.append((ids, editable, target))
        return oracle

    # ------------------------------------------------------------------ the Denoiser Protocol

    scores_visible_tokens = True  # like the shipped model: fix mode scores a span in one pass

    @property
    def mask_id(self) -> int:
        return self.tokenizer.mask_id

    @property
    def null_id(self) -> int:
        return self.tokenizer.null_id

    @property
    def special_ids(self) -> frozenset[int]:
        t = self.tokenizer
        return frozenset({t.pad_id, t.mask_id, t.unk_id, t.eos_id})

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.token_text(token_id)

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.inputs.append(ids.clone())
        B, L = ids.shape
        vocab = self.tokenizer.vocab_size
        targets = torch.stack([self.target_for(row, ids[row]) for row in range(B)])
        predicted = targets.clone()
        for row in range(B):
            masked_now = int((ids[row] == self.mask_id).sum())
            if masked_now <= self.wrong_until:
                self.enlightened.add(row)
            if row not in self.enlightened:
                for position, token in self.wrong.items():
                    predicted[row, position] = token
            if self.disbelieve:
                committed = ids[row] != self.mask_id
                other = torch.where(targets[row] == ids[row], self.alternative(targets[row]), targets[row])
                predicted[row] = torch.where(committed, other, predicted[row])

        confidence = torch.as_tensor(self.confidence, dtype=torch.float64).expand(B, L)
        logits = torch.zeros(B, L, vocab, dtype=torch.float32)
        logits.scatter_(
            -1, predicted.unsqueeze(-1), peak_logit(confidence, self.allowed).float().unsqueeze(-1)
        )
        for rank, token in enumerate(self.favour):
            logits[..., token] = 1000.0 - rank  # the first one most of all
        return logits

    # ------------------------------------------------------------------ helpers

    @property
    def allowed(self) -> int:
        """How many tokens the sampler may pick from."""
        return self.tokenizer.vocab_size - len(self.special_ids)

    def alternative(self, targets: torch.Tensor) -> torch.Tensor:
        """Some ordinary token different from each target (for `disbelieve`)."""
        first, second = sorted(set(range(self.tokenizer.vocab_size)) - self.special_ids)[:2]
        return torch.where(
            targets == first, torch.full_like(targets, second), torch.full_like(targets, first)
        )

    def target_for(self, row: int, x: torch.Tensor) -> torch.Tensor:
        if not self.candidates:
            assert self.targets is not None, "an oracle needs targets or candidates"
            target = self.targets if self.targets.dim() == 1 else self.targets[row]
            assert target.shape == x.shape, "the canvas is not the one the oracle knows"
            return target
        found = [
            index
            for index, (ids, editable, _) in enumerate(self.candidates)
            if ids.shape == x.shape
            and torch.equal(ids[~editable], x[~editable])
            and not bool((x[~editable] == self.mask_id).any())
        ]
        assert len(found) == 1, f"the oracle cannot tell which canvas it was given ({len(found)} match)"
        self.matched.append(found[0])
        return self.candidates[found[0]][2]


def peak_logit(confidence: torch.Tensor, allowed: int) -> torch.Tensor:
    """The logit (all others 0) that gives one token of `allowed` the probability `confidence`."""
    c = confidence.clamp(1e-9, 1 - 1e-12)
    return torch.log(c * (allowed - 1) / (1 - c))


@pytest.fixture
def make_oracle(tiny_tokenizer: CodeTokenizer) -> Callable[..., OracleDenoiser]:
    """`make_oracle(targets, **options)`: an `OracleDenoiser` over the tiny tokenizer."""
    return partial(OracleDenoiser, tiny_tokenizer)


@pytest.fixture
def oracle_for_canvases(tiny_tokenizer: CodeTokenizer) -> Callable[..., OracleDenoiser]:
    """`oracle_for_canvases([(canvas, [slot answer ids, ...]), ...], **options)`."""
    return partial(OracleDenoiser.for_canvases, tiny_tokenizer)
