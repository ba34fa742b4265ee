"""The recall stage (infill/engine/recall.py): which lines are offered for a one-line span, how the
model's one pass ranks them against its own fill, the syntax guard, and the stage in the
pipeline with the shipped model."""

from __future__ import annotations

import dataclasses

import torch

from infill.engine.canvas import build_canvas
from infill.engine.decode import Decoder
from infill.engine.recall import Candidate, candidates, recall, whole_line
from infill.engine.results import SampleResult, SampleStats
from infill.models.native import DEFAULT_MODEL_DIR, load_backend
from infill.modes.fill import infill
from infill.options import InfillOptions
from infill.text.document import Document
from infill.text.spans import Span

TESTS = """\
import networkx as nx


def test_one():
    G = nx.Graph()
    G.add_edge(1, 2)
    assert len(G) == 2


def test_two():
    G = nx.Graph()
    G.add_edge(1, 2)
    assert G.number_of_edges() == 1


def test_three():
    G = nx.Graph()
    G.add_edge(1, 2)
    assert 1 in G
"""


def span_of(text: str, line: str, occurrence: int = -1) -> Span:
    starts = [
        i for i in range(len(text)) if text.startswith(line + "\n", i) and (i == 0 or text[i - 1] == "\n")
    ]
    start = starts[occurrence]
    return Span(start, start + len(line), "test")


def test_a_span_is_one_line_only_when_it_covers_a_whole_line_of_code():
    text = "def f():\n    x = 1\r\n    return x\n"
    x = text.index("    x = 1")
    assert whole_line(text, Span(x, x + len("    x = 1"), "t"))  # with its indentation
    assert whole_line(text, Span(x + 4, x + len("    x = 1"), "t"))  # without it
    assert not whole_line(text, Span(x + 4, x + 7, "t"))  # part of the line
    assert not whole_line(text, Span(x, text.index("    return"), "t"))  # the line and its newline
    assert not whole_line(text, Span(0, text.index("    return") - 1, "t"))  # two lines
    assert not whole_line(text, Span(x + 2, x + len("    x = 1"), "t"))  # from inside the indentation


def test_candidates_are_the_lines_next_to_the_same_neighbours_most_frequent_first():
    span = span_of(TESTS, "    G.add_edge(1, 2)")
    offered = candidates(TESTS, span, "    G.remove(3)")
    # After "G = nx.Graph()" twice elsewhere; nothing else sits before "assert 1 in G".
    assert offered == [Candidate("    G.add_edge(1, 2)", 2)]
    inner = Span(span.start + 4, span.end, "test")  # a span without the indentation: none added
    assert candidates(TESTS, inner, "G.remove(3)") == [Candidate("G.add_edge(1, 2)", 2)]
    assert candidates(TESTS, span, "    G.add_edge(1, 2)") == []  # the fill itself is not offered
    assert candidates("x = 1\n", Span(0, 5, "t"), "y = 2") == []  # no neighbours, nothing to offer


def test_candidates_count_the_line_after_the_previous_and_before_the_next_and_vary_the_indentation():
    text = "a = 1\nb = 2\nc = 3\n\nif a:\n    a = 1\n    X\n    c = 3\n"
    span = span_of(text, "    X")
    offered = candidates(text, span, "z = 0")
    # "b = 2" follows "a = 1" and precedes "c = 3": counted twice; at the fill's indentation
    # ("") and the neighbours' ("    ").
    assert offered == [Candidate("b = 2", 2), Candidate("    b = 2", 2)]


def filled(denoiser, text: str, span: Span, fill: str):
    """A canvas of `span` and a sampler result that wrote `fill` into it (padded with nulls)."""
    canvas = build_canvas(denoiser, text, [span])
    slot = canvas.slots[0]
    tokens = denoiser.encode(fill)
    ids = torch.tensor([canvas.ids])
    ids[0, slot.start : slot.start + slot.length] = torch.tensor(
        tokens + [denoiser.null_id] * (slot.length - len(tokens))
    )
    stats = SampleStats(
        steps=3, forward_passes=3, tokens=slot.length, revisions=0, seconds=0.0, converged=True
    )
    return canvas, SampleResult(ids, torch.ones(ids.shape), stats)


def slot_answer(denoiser, text: str, slot_length: int) -> list[int]:
    tokens = denoiser.encode(text)
    return tokens + [denoiser.null_id] * (slot_length - len(tokens))


def test_the_model_ranks_a_recalled_line_above_its_own_fill_and_the_slot_takes_it(
    tiny_tokenizer, oracle_for_canvases
):
    span = span_of(TESTS, "    G.add_edge(1, 2)")
    document = Document(TESTS, bom=False, newline="\n")
    probe = oracle_for_canvases([])
    canvas, sampled = filled(probe, TESTS, span, "    G.remove(3)")
    # A model whose masked pass believes the recalled line:
    oracle = oracle_for_canvases(
        [(canvas, [slot_answer(probe, "    G.add_edge(1, 2)", canvas.slots[0].length)])]
    )
    result, taken = recall(oracle, Decoder(oracle, document, canvas), sampled)
    slot = canvas.slots[0]
    got = oracle.decode(
        [t for t in result.ids[0, slot.start : slot.start + slot.length].tolist() if t != oracle.null_id]
    )
    assert got == "    G.add_edge(1, 2)"
    assert taken == 1 and result.stats.forward_passes == sampled.stats.forward_passes + 1
    assert torch.equal(result.ids[0, : slot.start], sampled.ids[0, : slot.start])  # context untouched


def test_a_model_sure_of_its_own_fill_keeps_it(oracle_for_canvases):
    span = span_of(TESTS, "    G.add_edge(1, 2)")
    probe = oracle_for_canvases([])
    canvas, sampled = filled(probe, TESTS, span, "    G.remove(3)")
    oracle = oracle_for_canvases([(canvas, [slot_answer(probe, "    G.remove(3)", canvas.slots[0].length)])])
    decoder = Decoder(oracle, Document(TESTS, bom=False, newline="\n"), canvas)
    result, taken = recall(oracle, decoder, sampled)
    assert torch.equal(result.ids, sampled.ids) and taken == 0
    assert result.stats.forward_passes == sampled.stats.forward_passes + 1  # the ranking pass counts


def test_a_recalled_line_that_would_break_the_syntax_is_not_taken(oracle_for_canvases):
    text = "def f(x):\n    x = 1\n    if x:\n        pass\n\n\ndef g(x):\n    x = 1\n    X\n    return x\n"
    span = span_of(text, "    X")
    probe = oracle_for_canvases([])
    assert candidates(text, span, "    y = 2")[0].text == "    if x:"  # offered...
    canvas, sampled = filled(probe, text, span, "    y = 2")
    oracle = oracle_for_canvases([(canvas, [slot_answer(probe, "    if x:", canvas.slots[0].length)])])
    document = Document(text, bom=False, newline="\n")
    result, taken = recall(oracle, Decoder(oracle, document, canvas), sampled)
    assert torch.equal(result.ids, sampled.ids) and taken == 0  # ...but it breaks the file
    # Where the fill broke the file already, the guard does not hold the line back.
    canvas, broken = filled(probe, text, span, "    y = (")
    oracle = oracle_for_canvases([(canvas, [slot_answer(probe, "    if x:", canvas.slots[0].length)])])
    assert recall(oracle, Decoder(oracle, document, canvas), broken)[1] == 1


def test_models_without_a_null_token_are_not_recalled_for(oracle_for_canvases):
    span = span_of(TESTS, "    G.add_edge(1, 2)")
    probe = oracle_for_canvases([])
    canvas, sampled = filled(probe, TESTS, span, "    G.remove(3)")
    oracle = oracle_for_canvases(
        [(canvas, [slot_answer(probe, "    G.add_edge(1, 2)", canvas.slots[0].length)])]
    )
    oracle.__class__ = type("WithoutNull", (type(oracle),), {"null_id": None})
    decoder = Decoder(oracle, Document(TESTS, bom=False, newline="\n"), canvas)
    result, taken = recall(oracle, decoder, sampled)
    assert result is sampled and taken == 0


# A long line repeated two functions apart. The shipped model copies short lines like TESTS's
# `G.add_edge(1, 2)` by itself (since 2026-11-26's second GPU model); this one it does not.
FAR_LINE = "    G.add_weighted_edges_from([(1, 2, 0.5), (2, 3, 1.5)])"
FAR = f"""import networkx as nx


def test_one():
    G = nx.Graph()
{FAR_LINE}
    assert len(G) == 3


def helper(values):
    total = 0
    for value in values:
        total += value
    return total


def test_three():
    G = nx.Graph()
{FAR_LINE}
    assert 1 in G
"""


def test_the_shipped_model_fills_a_repeated_line_exactly_with_recall_and_not_without():
    """Through the pipeline, the shipped model: the last test's line, masked, is the line the
    first one has there; without the recall stage the model writes something else."""
    backend = load_backend(DEFAULT_MODEL_DIR, threads=2)
    span = span_of(FAR, FAR_LINE)
    document = Document(FAR, bom=False, newline="\n")
    on = infill(backend, document, [span], InfillOptions())
    off = infill(backend, document, [span], InfillOptions(recall=False))
    assert on.spans[0].new_text == FAR_LINE and on.stats.recalled == 1
    assert off.spans[0].new_text != FAR_LINE and off.stats.recalled == 0
    assert on.stats.forward_passes == off.stats.forward_passes  # recall ranks on the first pass


def test_ranking_on_the_samplers_first_pass_is_ranking_on_a_pass_of_recalls_own():
    """The sampler's first pass sees the canvas as laid out, every slot masked: the log-probs it
    keeps are those of recall's own exact pass, so the decisions are the same."""
    from infill.engine.pipeline import denoise
    from infill.engine.recall import SlotLogProbs

    backend = load_backend(DEFAULT_MODEL_DIR, threads=2)
    document = Document(FAR, bom=False, newline="\n")
    for line in (FAR_LINE, "    assert 1 in G"):
        canvas = build_canvas(backend, FAR, [span_of(FAR, line)])
        ids = torch.tensor([canvas.ids])
        editable = torch.tensor([canvas.editable()])
        config = dataclasses.replace(InfillOptions().sampler, steps=16, first_view=True)
        sampled = denoise(backend, ids, editable, config, None, None)
        columns, logp = sampled.first_view
        own = SlotLogProbs.of(backend, canvas)
        assert torch.equal(columns, editable[0].nonzero().flatten())
        assert (logp - own.logp).abs().max() < 1e-5
        decoder = Decoder(backend, document, canvas)
        with_view, _ = recall(backend, decoder, sampled, sampled.first_view)
        without, _ = recall(backend, decoder, sampled)
        assert torch.equal(with_view.ids, without.ids)
        # With the first view recall runs no pass of its own; without it, one where it ranks
        # offers (FAR_LINE's repeat always; the other line's fill may have no candidate lines).
        assert with_view.stats.forward_passes == sampled.stats.forward_passes
        own_pass = without.stats.forward_passes - sampled.stats.forward_passes
        assert own_pass == 1 if line == FAR_LINE else own_pass in (0, 1), (line, own_pass)


def test_the_cli_recalls_a_line_and_says_so_and_no_recall_turns_it_off(tmp_path, capsys):
    from infill.cli import main

    path = tmp_path / "tests.py"
    path.write_text(FAR)
    line = FAR[: span_of(FAR, FAR_LINE).start].count("\n") + 1
    assert main([str(path), "--lines", str(line), "--stats", "--threads", "2"]) == 0
    out = capsys.readouterr()
    assert "lines recalled: 1" in out.err and f"+{FAR_LINE}" not in out.out  # the line as it was
    assert main([str(path), "--lines", str(line), "--stats", "--threads", "2", "--no-recall"]) == 0
    out = capsys.readouterr()
    assert "lines recalled" not in out.err and f"-{FAR_LINE}" in out.out  # the model's own line


def test_inline_completion_on_a_blank_line_offers_the_recalled_line_first():
    from infill.engine.pipeline import run
    from infill.modes.inline import InlineRequest

    backend = load_backend(DEFAULT_MODEL_DIR, threads=2)
    span = span_of(TESTS, "    G.add_edge(1, 2)")
    text = TESTS[: span.start] + "    " + TESTS[span.end :]  # the user is on a blank, indented line
    document = Document(text, bom=False, newline="\n")
    cursor = span.start + 4
    on = run(backend, InlineRequest(document, cursor, InfillOptions()))
    off = run(backend, InlineRequest(document, cursor, InfillOptions(recall=False)))
    assert on.texts[0] == "G.add_edge(1, 2)" and on.stats.recalled == 1
    assert "G.add_edge(1, 2)" not in off.texts and off.stats.recalled == 0


def test_the_syntax_guard_parses_only_the_top_level_statement_around_the_line():
    from infill.engine.recall import top_level_block

    text = (
        "import os\n\n\ndef f(x):\n    if x:\n        y = 1\n    else:\n        y = 2\n    return y\n"
        "\n\nz = f(1)\n"
    )
    y = text.index("        y = 2")
    first, last = top_level_block(text, y, y + len("        y = 2"))
    assert text[first:last] == text[text.index("def f") : text.index("z = f")]
    block = "if a:\n    b = 1\nelse:\n    b = 2\n"  # "else" goes on the statement above it
    b = block.index("    b = 2")
    assert top_level_block(block, b, b + 9) == (0, len(block))


class OutputSpy:
    """The shipped model, recording which positions the output layer ran at."""

    def __init__(self, inner):
        self.inner, self.asked = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def logits(self, ids):
        raise AssertionError("recall ran the output layer over the whole canvas")

    def cached_logits(self, ids, positions, cache, refresh, predicted=None):
        self.asked.append(positions.tolist())
        return self.inner.cached_logits(ids, positions, cache, refresh, predicted)


def test_recall_scores_only_the_slot_positions():
    """The output layer runs at the slots alone (a 2,048-token canvas x 152k rows is 1.2 GB)."""
    import torch

    from infill.engine.canvas import build_canvas
    from infill.engine.recall import SlotLogProbs
    from infill.models import load
    from infill.text.spans import Span

    denoiser = load(None)
    text = "def mean(values):\n    total = sum(values)\n    return total / len(values)\n"
    start = text.index("total = sum")
    canvas = build_canvas(denoiser, text, [Span(start, start + len("total = sum(values)"))])
    spy = OutputSpy(denoiser)
    logp = SlotLogProbs.of(spy, canvas)
    slot = canvas.slots[0]
    assert spy.asked == [list(range(slot.start, slot.start + slot.length))]
    full = torch.log_softmax(denoiser.logits(torch.tensor([canvas.ids]))[0], -1)
    positions = torch.arange(slot.start, slot.start + slot.length)
    tokens = full[positions].argmax(-1)
    assert torch.allclose(logp.at(positions, tokens), full[positions, tokens], atol=1e-4)
