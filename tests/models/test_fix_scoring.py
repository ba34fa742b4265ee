"""How fix mode scores a span's tokens (infill.modes.fix.score_tokens), by what the model was
trained on: the published checkpoints (a loss at masked positions only) score each token with its
own position masked, checked against transformers' own Qwen2 / Llama models on tiny Dream and
LLaDA checkpoints; the shipped model scores the visible tokens in one pass.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import pytest
import torch
from checkpoints import DREAM_ADDED, LLADA_ADDED, base_bpe, reference_logits, write_checkpoint
from plans import plan_canvases

from infill.engine.prediction import token_probabilities
from infill.errors import InputError
from infill.models import load
from infill.models.denoiser import CheckpointDenoiser
from infill.modes.fix import fix, scores_visible_tokens, select_unlikely
from infill.options import FixOptions, InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.spans import Span

CODE = """import math


def area(radius):
    return math.pi * radius ** 2
"""
START = Span(0, len("import math"))  # a span at the very start of the file
MIDDLE = Span(CODE.index("math.pi"), CODE.index(" ** 2"))
FLAG_EVERY_TOKEN = dict(threshold=1.0, ratio=2.0, max_fraction=1.0)  # each score then comes back


@dataclass(frozen=True)
class Conventions:
    """A family's tokens as its authors publish them, and whether row i-1 predicts the token at i."""

    begin: int
    mask: int
    end_of_text: int
    shift: bool


CONVENTIONS = {
    "Dream": Conventions(
        DREAM_ADDED["<|beginoftext|>"], DREAM_ADDED["<|mask|>"], DREAM_ADDED["<|endoftext|>"], shift=True
    ),
    "LLaDA": Conventions(
        LLADA_ADDED["<|startoftext|>"], LLADA_ADDED["<|mdm_mask|>"], LLADA_ADDED["<|endoftext|>"], shift=False
    ),
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """family -> (folder, denoiser) of a tiny checkpoint, written on first use."""
    root = tmp_path_factory.mktemp("fix-scoring")
    built, markers = {}, []

    def get(family: str):
        if family not in built:
            markers.append(write_checkpoint(root / family, family))
            built[family] = (root / family, load(root / family, "cpu", torch.float32))
        return built[family]

    yield get
    assert not any(marker.exists() for marker in markers), "a checkpoint's remote code was executed"


@pytest.fixture(scope="module")
def dream(checkpoint):
    return checkpoint("Dream")


def independent_canvas(family: str, text: str, spans: list[Span]) -> tuple[list[int], list[int]]:
    """(ids, span positions) of the canvas fix mode scores, tokenized by the BPE the checkpoint's
    tokenizer files were written from: the family's begin token, then each piece of text between
    span bounds on its own."""
    encode = base_bpe().encode
    ids, positions, cut = [CONVENTIONS[family].begin], [], 0
    for span in spans:
        ids += encode(text[cut : span.start]).ids
        inside = encode(text[span.start : span.end]).ids
        positions += range(len(ids), len(ids) + len(inside))
        ids += inside
        cut = span.end
    return ids + encode(text[cut:]).ids, positions


def oracle_probabilities(
    folder, family: str, ids: list[int], positions: list[int], masked: bool = True
) -> torch.Tensor:
    """(P, vocab): transformers' Qwen2 / Llama on the checkpoint's weights, bidirectional, one
    canvas per position with that position masked (or, `masked=False`, the canvas as it is); with
    the shift the token at i is predicted by row i-1. Softmax over the tokens a model may write:
    the BPE's and end-of-text (every other added token, and the rows no token has, ruled out)."""
    conventions = CONVENTIONS[family]
    canvases = torch.tensor([ids] * len(positions))
    rows = torch.arange(len(positions))
    if masked:
        canvases[rows, positions] = conventions.mask
    predicting = [p - 1 if conventions.shift else p for p in positions]
    logits = reference_logits(folder, family, canvases)[rows, predicting]
    writable = [*base_bpe().get_vocab().values(), conventions.end_of_text]
    ruled_out = torch.ones(logits.shape[-1], dtype=torch.bool)
    ruled_out[writable] = False
    return torch.softmax(logits.masked_fill(ruled_out, float("-inf")), dim=-1)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["Dream", "LLaDA"])
def test_a_checkpoint_scores_each_span_token_with_its_position_masked(family, checkpoint):
    folder, denoiser = checkpoint(family)
    spans = [START, MIDDLE]
    ids, positions = independent_canvas(family, CODE, spans)
    assert positions[0] == 1  # the first token of the file, right after the begin token
    options = FixOptions(SamplerConfig(seed=0, steps=2), **FLAG_EVERY_TOKEN, retries=0, token_edits=0)

    result = fix(denoiser, document_from_bytes(CODE.encode()), spans, options)

    flagged = result.flagged
    assert len(flagged) == len(positions)
    for span in spans:  # one flagged token per span token, in order
        texts = [t.text for t in flagged if span.start <= t.start < span.end]
        assert "".join(texts) == CODE[span.start : span.end]
    oracle = oracle_probabilities(folder, family, ids, positions)
    expected = oracle[range(len(positions)), [ids[p] for p in positions]]
    ours = torch.tensor([t.probability for t in flagged])
    assert torch.allclose(ours, expected, rtol=1e-3, atol=0)
    favourite = torch.tensor([t.suggestion_probability for t in flagged])
    assert torch.allclose(favourite, oracle.max(-1).values, rtol=1e-3, atol=0)
    # The test tells the rules apart: the same canvas with the tokens in place scores otherwise.
    visible = oracle_probabilities(folder, family, ids, positions, masked=False)
    in_place = visible[range(len(positions)), [ids[p] for p in positions]]
    assert ((in_place - expected).abs() / expected).max() > 0.01  # (10x the tolerance above)


def test_the_score_does_not_depend_on_how_many_canvases_share_a_pass(dream):
    """Each canvas of a batch masks its own position only, and a denoiser without the output-
    layer-at-positions path (the checkpoint's own code, --trust-remote-code: one canvas per pass)
    scores the same."""
    folder, denoiser = dream
    fields = {f.name: getattr(denoiser, f.name) for f in dataclasses.fields(CheckpointDenoiser)}
    plain = CheckpointDenoiser(**fields)
    (canvas,) = plan_canvases(denoiser, CODE, [MIDDLE], InfillOptions(), keep_text=True)
    ids = torch.tensor([canvas.ids])
    one_by_one = select_unlikely(denoiser, canvas, ids, FixOptions(scoring_rows=1)).probs
    slot = canvas.slots[0]
    where = slice(slot.start, slot.start + slot.length)
    for scorer, rows, passes in (
        (denoiser, 3, math.ceil(slot.length / 3)),
        (denoiser, 64, 1),
        (plain, 4, slot.length),
    ):
        selection = select_unlikely(scorer, canvas, ids, FixOptions(scoring_rows=rows))
        assert selection.stats.forward_passes == passes
        assert torch.allclose(selection.probs[where], one_by_one[where], rtol=1e-4, atol=1e-9)


@pytest.mark.parametrize("rows", [1, 3, 8, 100])
def test_a_span_of_t_tokens_takes_ceil_t_over_k_scoring_passes(dream, rows, monkeypatch):
    folder, denoiser = dream
    (canvas,) = plan_canvases(denoiser, CODE, [MIDDLE], InfillOptions(), keep_text=True)
    slot = canvas.slots[0]
    span_positions = set(range(slot.start, slot.start + slot.length))
    assert len(span_positions) > 8
    batches = []
    real = denoiser.cached_logits

    def counted(x, positions, cache, refresh):
        batches.append(x.clone())
        return real(x, positions, cache, refresh)

    monkeypatch.setattr(denoiser, "cached_logits", counted)
    monkeypatch.setattr(denoiser, "logits", lambda x: pytest.fail("a scoring pass without the cached path"))

    selection = select_unlikely(denoiser, canvas, torch.tensor([canvas.ids]), FixOptions(scoring_rows=rows))

    assert selection.stats.forward_passes == len(batches) == math.ceil(len(span_positions) / rows)
    masked = []
    for batch in batches:
        assert 1 <= len(batch) <= rows
        for row in batch:
            (position,) = (row == denoiser.mask_id).nonzero().flatten().tolist()
            assert row[position + 1 :].tolist() == canvas.ids[position + 1 :]
            assert row[:position].tolist() == canvas.ids[:position]
            masked.append(position)
    assert sorted(masked) == sorted(span_positions)  # each span position masked once, nothing else


def test_fix_counts_every_scoring_pass(dream, monkeypatch):
    """FixResult.stats.forward_passes: the masked scoring passes plus the sampler's, every pass
    the network ran."""
    folder, denoiser = dream
    calls = []
    for name in ("logits", "cached_logits"):
        real = getattr(denoiser, name)
        monkeypatch.setattr(denoiser, name, lambda *a, real=real, **k: calls.append(1) or real(*a, **k))
    options = FixOptions(SamplerConfig(seed=0, steps=2), **FLAG_EVERY_TOKEN, retries=0, scoring_rows=4)

    result = fix(denoiser, document_from_bytes(CODE.encode()), [START, MIDDLE], options)

    tokens = len(independent_canvas("Dream", CODE, [START, MIDDLE])[1])
    assert result.stats.forward_passes == len(calls) == math.ceil(tokens / 4) + 2


def test_the_shipped_model_scores_the_visible_tokens_in_one_pass(monkeypatch):
    backend = load(None, "cpu")
    assert scores_visible_tokens(backend)
    (canvas,) = plan_canvases(backend, CODE, [MIDDLE], InfillOptions(), keep_text=True)
    ids = torch.tensor([canvas.ids])
    inputs = []
    real = backend.logits
    monkeypatch.setattr(backend, "logits", lambda x: inputs.append(x.clone()) or real(x))

    selection = select_unlikely(backend, canvas, ids, FixOptions(scoring_rows=2))

    assert selection.stats.forward_passes == 1 and len(inputs) == 1
    assert inputs[0].tolist() == ids.tolist()  # the tokens in place: nothing masked
    assert torch.equal(selection.probs, token_probabilities(backend, ids)[0])


def test_every_published_family_declares_masked_scoring(dream):
    assert not scores_visible_tokens(dream[1])
    assert not scores_visible_tokens(object())  # a model that does not say was not trained on visible tokens


def test_scoring_rows_must_be_positive():
    with pytest.raises(InputError, match="scoring_rows must be at least 1"):
        FixOptions(scoring_rows=0)


def test_the_language_servers_kept_context_never_stands_in_for_a_scoring_pass(dream):
    """The server runs requests through a document's kept context (infill.engine.kept_context), whose
    first pass of a request reuses the last request's keys and values: the masked scores must
    still be exact, one canvas per pass too, and leave the kept context as the last fill left it."""
    from infill.engine.kept_context import KeptContext

    folder, denoiser = dream
    kept = KeptContext(denoiser)
    (canvas,) = plan_canvases(denoiser, CODE, [MIDDLE], InfillOptions(), keep_text=True)
    ids = torch.tensor([canvas.ids])
    exact = select_unlikely(denoiser, canvas, ids, FixOptions(scoring_rows=1)).probs
    for _ in range(2):  # a second request finds the first one's context
        probs = select_unlikely(kept, canvas, ids, FixOptions(scoring_rows=1)).probs
        assert torch.equal(probs, exact)
    assert kept.reused_passes == 0 and kept.cache is None
