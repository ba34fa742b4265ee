"""Each family's canvas is framed as its authors frame every prompt: the begin token first (so a
span at the start of a file is never position 0), DreamOn's end-of-text last, kept when the window
cuts a long file."""

from __future__ import annotations

import pytest
import torch
from checkpoints import write_checkpoint

from infill.engine.canvas import build_canvas
from infill.models import load
from infill.text.spans import Span

TEXT = "def mean(values):\n    return sum(values) / len(values)\n" * 40
FRAMES = {  # family: (first id, last id or None)
    "Dream": (151665, None),  # <|beginoftext|>, from the tokenizer files (config.json says 151643)
    "DreamOn": (151665, 151643),  # [bos] prefix masks suffix [eos]
    "LLaDA": (126080, None),  # <|startoftext|>
    "Open-dCoder": (None, None),  # Open-dLLM's prompt: prefix masks suffix
}


@pytest.fixture(scope="module")
def denoisers(tmp_path_factory):
    root = tmp_path_factory.mktemp("framing")
    loaded = {}
    for family in FRAMES:
        write_checkpoint(root / family, family)
        loaded[family] = load(root / family, "cpu", torch.float32)
    return loaded


@pytest.mark.parametrize("family", FRAMES)
@pytest.mark.parametrize("where", ["start of file", "middle", "end of file"])
def test_the_canvas_is_framed_as_the_authors_frame_prompts(family, where, denoisers):
    denoiser = denoisers[family]
    start = {"start of file": 0, "middle": TEXT.index("return", 900), "end of file": len(TEXT) - 10}[where]
    span = Span(start, start + 6)
    for context in (None, 64):  # the whole file, and a window cut around the span
        canvas = build_canvas(denoiser, TEXT, [span], 8, context)
        begin, end = FRAMES[family]
        assert len(canvas.ids) <= (context or denoiser.context_length)
        if begin is not None:
            assert canvas.ids[0] == begin and canvas.ids.count(begin) == 1
            assert canvas.slots[0].start >= 1  # position 0 is never a span's
        else:
            assert canvas.ids[0] != denoiser.mask_id or where == "start of file"
        if end is not None:
            assert canvas.ids[-1] == end
        slot = canvas.slots[0]
        assert canvas.ids[slot.start : slot.start + slot.length] == [denoiser.mask_id] * 8
        if context is not None:
            assert len(canvas.ids) == context  # the window is full, framing included


def test_a_published_model_gets_a_cpu_sized_window(denoisers):
    """On the CPU the window is 512 tokens around the spans (each pass costs with the canvas);
    a GPU gets 2,048, and a model's own limit is never exceeded."""
    from infill.models.denoiser import CONTEXT_CAP, CPU_CONTEXT, device_context

    assert all(d.context_length == CPU_CONTEXT for d in denoisers.values())
    assert device_context(4096, torch.device("cuda")) == CONTEXT_CAP
    assert device_context(300, torch.device("cpu")) == 300
