"""Tests for infill.engine.canvas: laying out a file with masked slots, budgets and context windows."""

from __future__ import annotations

import pytest

from infill.engine.canvas import MIN_BUDGET, Canvas, Slot, build_canvas, default_budget, window
from infill.errors import InputError
from infill.text.spans import Span, line_span

SOURCE = (
    "import os\r\n"
    "\r\n"
    "def area(width, height):\r\n"
    '    """Area of a rectangle."""\r\n'
    "    return width * height\r\n"
    "\r\n"
    "def greet(name):\r\n"
    '    return f"hello, {name}"\r\n'
)

LONG_SOURCE = "".join(f"value_{i} = compute({i}, name_{i % 7})\n" for i in range(80))


@pytest.fixture
def denoiser(make_oracle):
    """Only the tokenizer side of a Denoiser is used here (encode, decode, mask id, context)."""
    return make_oracle(None, context_length=512)


def pieces_outside(canvas: Canvas) -> list[list[int]]:
    """The canvas ids before, between and after its slots."""
    bounds = [0] + [b for s in canvas.slots for b in (s.start, s.start + s.length)] + [len(canvas.ids)]
    return [canvas.ids[a:b] for a, b in zip(bounds[0::2], bounds[1::2])]


def text_outside(text: str, spans: list[Span]) -> list[str]:
    bounds = [0] + [b for s in spans for b in (s.start, s.end)] + [len(text)]
    return [text[a:b] for a, b in zip(bounds[0::2], bounds[1::2])]


def two_spans() -> list[Span]:
    body = line_span(SOURCE, 5, 5)  # "    return width * height"
    middle = Span(SOURCE.index("hello"), SOURCE.index("hello") + 5)  # inside a string literal
    return [body, middle]


def test_slots_hold_masks_at_the_right_places(denoiser):
    spans = two_spans()

    canvas = build_canvas(denoiser, SOURCE, spans, budget=10)

    lf = [piece.replace("\r\n", "\n") for piece in text_outside(SOURCE, spans)]
    first = len(denoiser.encode(lf[0]))
    second = first + 10 + len(denoiser.encode(lf[1]))
    assert [(s.span, s.start, s.length) for s in canvas.slots] == [
        (spans[0], first, 10),
        (spans[1], second, 10),
    ]
    mask = denoiser.mask_id
    editable = canvas.editable()
    assert [i for i, flag in enumerate(editable) if flag] == [
        *range(first, first + 10),
        *range(second, second + 10),
    ]
    assert all((token == mask) == flag for token, flag in zip(canvas.ids, editable))
    assert len(canvas.ids) == sum(len(denoiser.encode(piece)) for piece in lf) + 20


def test_segments_are_tokenized_separately_and_decode_to_the_text_outside_the_spans(denoiser):
    spans = two_spans()

    canvas = build_canvas(denoiser, SOURCE, spans)

    outside = text_outside(SOURCE, spans)
    assert any("\r\n" in piece for piece in outside)
    for ids, piece in zip(pieces_outside(canvas), outside, strict=True):
        lf = piece.replace("\r\n", "\n")
        assert ids == denoiser.encode(lf)  # each segment on its own, as in training
        assert denoiser.decode(ids) == lf
        assert "\r" not in denoiser.decode(ids)


def test_a_span_that_cuts_a_word_does_not_change_how_the_rest_is_tokenized(denoiser):
    text = "def compute_total(values):\n    return sum(values)\n"
    cut = text.index("total")
    span = Span(cut, cut + 2)  # "to" of "compute_total"

    canvas = build_canvas(denoiser, text, [span], budget=4)

    before, after = pieces_outside(canvas)
    assert before == denoiser.encode(text[:cut])
    assert after == denoiser.encode(text[cut + 2 :])
    assert canvas.ids == before + [denoiser.mask_id] * 4 + after


@pytest.mark.parametrize(
    ("span_tokens", "context_length", "expected"),
    [(0, 512, MIN_BUDGET), (5, 512, 16), (6, 512, 17), (10, 512, 23), (100, 512, 158), (400, 512, 256)],
)
def test_default_budget(span_tokens, context_length, expected):
    assert default_budget(span_tokens, context_length) == expected


def test_default_budgets_come_from_each_span_s_current_length(denoiser):
    long_span = Span(0, SOURCE.index("def greet"))  # most of the file
    insertion = Span(len(SOURCE), len(SOURCE))  # an insertion point at the very end
    spans = [long_span, insertion]

    canvas = build_canvas(denoiser, SOURCE, spans, context_length=512)

    tokens = len(denoiser.encode(SOURCE[: long_span.end].replace("\r\n", "\n")))
    assert tokens * 3 // 2 + 8 > MIN_BUDGET
    assert [s.length for s in canvas.slots] == [tokens * 3 // 2 + 8, MIN_BUDGET]


def test_default_budget_is_capped_at_half_the_context(denoiser):
    span = Span(0, len(LONG_SOURCE))

    canvas = build_canvas(denoiser, LONG_SOURCE, [span], context_length=100)

    assert canvas.slots[0].length == 50
    assert canvas.ids == [denoiser.mask_id] * 50


def test_explicit_budget_applies_to_every_span(denoiser):
    spans = [line_span(SOURCE, 1, 1), line_span(SOURCE, 3, 5), Span(len(SOURCE), len(SOURCE))]

    canvas = build_canvas(denoiser, SOURCE, spans, budget=7)

    assert [s.length for s in canvas.slots] == [7, 7, 7]
    assert [s.span for s in canvas.slots] == spans


def test_context_length_defaults_to_the_denoiser_s(make_oracle):
    span = line_span(LONG_SOURCE, 40, 40)
    short = make_oracle(None, context_length=64)

    assert len(build_canvas(short, LONG_SOURCE, [span], budget=8).ids) == 64
    assert len(build_canvas(short, LONG_SOURCE, [span], budget=8, context_length=96).ids) == 96


def test_a_canvas_that_fits_is_not_windowed(denoiser):
    canvas = build_canvas(denoiser, SOURCE, two_spans(), budget=10)

    assert window(canvas, len(canvas.ids)) == canvas
    assert canvas.ids[: canvas.slots[0].start] == denoiser.encode(
        SOURCE[: two_spans()[0].start].replace("\r\n", "\n")
    )


# ------------------------------------------------------------------------------------- windows


def synthetic(length: int, slots: list[tuple[int, int]]) -> Canvas:
    return Canvas(list(range(length)), [Slot(Span(0, 0), start, size) for start, size in slots])


@pytest.mark.parametrize(
    ("slots", "context_length", "expected_start"),
    [
        ([(500, 10)], 100, 455),  # middle: 45 before, 45 after
        ([(500, 10)], 101, 455),  # odd room: the extra position goes after
        ([(400, 10), (560, 20)], 300, 340),  # several slots: room shared around the whole run
        ([(10, 10)], 100, 0),  # near the start: 10 before, the other 80 after
        ([(0, 10)], 100, 0),  # at the very start
        ([(980, 10)], 100, 900),  # near the end: 10 after, the other 80 before
        ([(990, 10)], 100, 900),  # at the very end: the same window
    ],
)
def test_window_shares_the_room_around_the_slots(slots, context_length, expected_start):
    canvas = synthetic(1000, slots)

    cut = window(canvas, context_length)

    assert len(cut.ids) == context_length
    assert cut.ids == canvas.ids[expected_start : expected_start + context_length]
    for before, after in zip(canvas.slots, cut.slots, strict=True):
        assert after.start == before.start - expected_start and after.length == before.length
        assert 0 <= after.start and after.start + after.length <= len(cut.ids)


def long_canvases(denoiser, line: int, context_length: int = 64, budget: int = 12):
    span = line_span(LONG_SOURCE, line, line)
    full = build_canvas(denoiser, LONG_SOURCE, [span], budget=budget, context_length=10**6)
    cut = build_canvas(denoiser, LONG_SOURCE, [span], budget=budget, context_length=context_length)
    assert len(full.ids) > 4 * context_length  # the file really is longer than the context
    return full, cut


def check_window(full: Canvas, cut: Canvas, context_length: int) -> tuple[int, int]:
    """The window is a contiguous part of the full canvas holding every slot; returns the
    amount of context kept before and after the slots."""
    assert len(cut.ids) <= context_length
    offset = full.slots[0].start - cut.slots[0].start
    assert offset >= 0
    assert cut.ids == full.ids[offset : offset + len(cut.ids)]
    for whole, part in zip(full.slots, cut.slots, strict=True):
        assert part.span == whole.span and part.length == whole.length
        assert part.start == whole.start - offset
        assert 0 <= part.start and part.start + part.length <= len(cut.ids)
        assert cut.ids[part.start : part.start + part.length] == whole_slot_ids(full, whole)
    last = cut.slots[-1]
    return cut.slots[0].start, len(cut.ids) - (last.start + last.length)


def whole_slot_ids(canvas: Canvas, slot: Slot) -> list[int]:
    return canvas.ids[slot.start : slot.start + slot.length]


def test_window_in_the_middle_of_a_long_file_splits_the_context_evenly(denoiser):
    full, cut = long_canvases(denoiser, line=40)

    before, after = check_window(full, cut, 64)

    assert len(cut.ids) == 64
    assert before + after == 64 - 12
    assert abs(before - after) <= 1


def test_window_near_the_start_gives_the_unused_room_to_the_end(denoiser):
    full, cut = long_canvases(denoiser, line=2)

    before, after = check_window(full, cut, 64)

    assert before == full.slots[0].start  # everything before the span is kept ...
    assert before < (64 - 12) // 2
    assert after == 64 - 12 - before  # ... and the rest of the room goes after it
    assert cut.ids[:before] == denoiser.encode(LONG_SOURCE[: line_span(LONG_SOURCE, 2, 2).start])


def test_window_near_the_end_gives_the_unused_room_to_the_start(denoiser):
    full, cut = long_canvases(denoiser, line=80)

    before, after = check_window(full, cut, 64)

    slot = full.slots[0]
    assert after == len(full.ids) - (slot.start + slot.length)  # everything after is kept
    assert after < (64 - 12) // 2
    assert before == 64 - 12 - after
    assert cut.ids[len(cut.ids) - after :] == denoiser.encode("\n")


def test_window_around_several_spans_keeps_them_all(denoiser):
    spans = [line_span(LONG_SOURCE, 30, 30), line_span(LONG_SOURCE, 32, 32)]
    full = build_canvas(denoiser, LONG_SOURCE, spans, budget=10, context_length=10**6)

    cut = build_canvas(denoiser, LONG_SOURCE, spans, budget=10, context_length=80)

    before, after = check_window(full, cut, 80)
    between = full.slots[1].start - (full.slots[0].start + 10)
    assert before + after == 80 - 20 - between
    assert abs(before - after) <= 1


def test_a_span_larger_than_the_context_is_an_input_error(denoiser):
    span = line_span(LONG_SOURCE, 10, 10)

    with pytest.raises(InputError, match="context"):
        build_canvas(denoiser, LONG_SOURCE, [span], budget=65, context_length=64)


def test_spans_too_far_apart_for_one_window_are_an_input_error(denoiser):
    spans = [line_span(LONG_SOURCE, 5, 5), line_span(LONG_SOURCE, 60, 60)]

    with pytest.raises(InputError, match="context"):
        build_canvas(denoiser, LONG_SOURCE, spans, budget=8, context_length=128)


def test_spans_exactly_filling_the_context_are_accepted(denoiser):
    span = line_span(LONG_SOURCE, 10, 10)

    canvas = build_canvas(denoiser, LONG_SOURCE, [span], budget=64, context_length=64)

    assert canvas.ids == [denoiser.mask_id] * 64
    assert canvas.slots[0].start == 0
