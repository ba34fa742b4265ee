"""The pipeline's window step (infill.engine.pipeline.in_window): on a file longer than the model's
window every mode's job runs on the text around its spans, the edits come back in the file's
offsets, and the CLI and the language server run the same fill of the same file the same way.

The tiny real model (128 tokens of context: a window of about 1,000 characters) on a file of
about 14,000; its fills are gibberish, so what is compared is what it was given and what it wrote.
"""

from __future__ import annotations

import json

from samples import generated_file

import infill.cli
from infill.engine.pipeline import in_window, run
from infill.modes import DocstringRequest, FillRequest
from infill.options import FixOptions, InfillOptions
from infill.text.docstring_sites import missing_docstrings
from infill.text.document import document_from_bytes
from infill.text.edits import TextEdit, apply_edits
from infill.text.spans import line_span
from infill.text.syntax import file_problems
from infill.text.window import CHARS_PER_TOKEN, parsing_window, window_around
from lsp_server.actions import FILL, FIX, LINES, ActionData, run_action

URI = "file:///project/long.py"


LONG = generated_file(60)  # 600 lines
FILL_LINES = (304, 304)  # "        total = total // 2" of step_30
FIX_LINES = (302, 303)


class Recording:
    """A denoiser that notes every text it tokenizes; the rest is the wrapped one's."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.encoded: list[str] = []

    def encode(self, text: str) -> list[int]:
        self.encoded.append(text)
        return self.inner.encode(text)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def in_cli(monkeypatch, tmp_path, capsys, denoiser, *flags: str) -> tuple[list[TextEdit], object]:
    """`infill long.py FLAGS --json` with `denoiser` as the model: its edits and its request."""
    requests = []

    def recorded_run(model, request, hooks=None):
        requests.append(request)
        return run(model, request, hooks)

    monkeypatch.setattr(infill.cli, "load", lambda *args, **kwargs: denoiser)
    monkeypatch.setattr(infill.cli, "run", recorded_run)
    path = tmp_path / "long.py"
    path.write_text(LONG)
    assert infill.cli.main([str(path), *flags, "--json"]) == infill.cli.EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert path.read_text() == LONG
    [request] = requests
    return [TextEdit(e["start"], e["end"], e["new_text"]) for e in report["edits"]], request


def lines_data(lines: tuple[int, int], mode: str) -> ActionData:
    span = line_span(LONG, *lines)
    return ActionData(URI, 1, LINES, span.start, span.end, mode)


def assert_only_inside(edits: list[TextEdit], start: int, end: int) -> None:
    """Every edit lies in [start, end), and the text outside it is the file's."""
    assert all(start <= edit.start <= edit.end <= end for edit in edits), (start, end, edits)
    after = apply_edits(LONG, edits)
    assert after[:start] == LONG[:start]
    assert after[len(after) - (len(LONG) - end) :] == LONG[end:]


def reach(context_length: int) -> int:
    """The most characters a window around a one-line span takes (infill.text.window)."""
    return 2 * context_length * CHARS_PER_TOKEN + 2_000  # whole lines, a top-level definition each side


def test_the_cli_fills_a_long_file_as_the_server_does(tiny_backend, monkeypatch, tmp_path, capsys):
    assert len(LONG) > reach(tiny_backend.context_length)
    cli_model = Recording(tiny_backend)
    first, last = FILL_LINES
    cli_edits, request = in_cli(monkeypatch, tmp_path, capsys, cli_model, "--lines", f"{first}-{last}")
    server_model = Recording(tiny_backend)
    outcome = run_action(server_model, LONG, lines_data(FILL_LINES, FILL), request.options)

    assert cli_model.encoded == server_model.encoded  # the same text tokenized, piece for piece...
    assert sum(map(len, cli_model.encoded)) < reach(tiny_backend.context_length)  # the window's, not the file
    assert cli_edits == outcome.edits  # ...and the same edits of the file
    span = line_span(LONG, *FILL_LINES)
    assert_only_inside(cli_edits, span.start, span.end)


def test_the_cli_fixes_a_long_file_as_the_server_does(tiny_backend, monkeypatch, tmp_path, capsys):
    cli_model = Recording(tiny_backend)
    first, last = FIX_LINES
    flags = ("--lines", f"{first}-{last}", "--fix")
    cli_edits, request = in_cli(monkeypatch, tmp_path, capsys, cli_model, *flags)
    assert request.options == FixOptions.from_infill(InfillOptions())  # the server's, from its defaults
    server_model = Recording(tiny_backend)
    outcome = run_action(server_model, LONG, lines_data(FIX_LINES, FIX), InfillOptions())

    assert cli_model.encoded == server_model.encoded
    assert sum(map(len, cli_model.encoded)) < reach(tiny_backend.context_length)
    assert cli_edits == outcome.edits
    span = line_span(LONG, *FIX_LINES)
    assert_only_inside(cli_edits, span.start, span.end)


class OneLetter:
    """Writes one letter everywhere (a letter a token, no nulls): a fill is that letter repeated."""

    mask_id, null_id, special_ids = 1, 2, frozenset({0, 1, 3, 4})

    def __init__(self, context_length: int = 128, letter: str = "x") -> None:
        self.context_length = context_length
        self.vocab: dict[str, int] = {}
        self.letters: dict[int, str] = {}
        self.encoded: list[str] = []  # every text tokenized
        self.letter = self.encode(letter)[0]

    def encode(self, text: str) -> list[int]:
        self.encoded.append(text)
        for char in text:
            if char not in self.vocab:
                self.vocab[char] = 5 + len(self.vocab)
                self.letters[self.vocab[char]] = char
        return [self.vocab[char] for char in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.letters[i] for i in ids)

    def token_text(self, token_id: int) -> str:
        return self.letters.get(token_id, "?")

    def logits(self, ids):
        import torch

        logits = torch.full((*ids.shape, 128), -10.0)
        logits[..., self.letter] = 10.0
        return logits


def windows_of(denoiser, request) -> list:
    return [in_window(denoiser, job) for job in request.plan(denoiser)]


def test_far_apart_docstrings_get_a_window_each_and_edits_only_at_their_sites():
    model = OneLetter(context_length=128)
    sites = missing_docstrings(LONG)
    far = [sites[0], sites[30], sites[59]]
    request = DocstringRequest(document_from_bytes(LONG.encode()), far)

    windowed = windows_of(model, request)
    assert [[span.start for span in w.planned.spans] for w in windowed] == [[s.start] for s in far]
    for w, site in zip(windowed, far, strict=True):
        assert w.window.start <= site.start <= site.end <= w.window.end
        assert w.window.end - w.window.start < reach(model.context_length) < len(LONG)
        assert w.staged.document.text.count('"""') == 2  # its own site's quotes, no other's
    assert all(a.window.end <= b.window.start for a, b in zip(windowed, windowed[1:]))  # apart, in order

    result = run(model, request)
    assert [fill.site for fill in result.fills] == far
    assert len(result.edits) == 3
    for fill in result.fills:  # each edit at its site, in the file's offsets
        assert fill.site.start <= fill.edit.start <= fill.edit.end <= fill.site.end
        assert '"""x' in fill.edit.new_text
    stripped = apply_edits(LONG, result.edits)
    for fill in result.fills:  # the docstrings taken out again: the file as it was
        stripped = stripped.replace(fill.edit.new_text, "", 1)
    assert stripped == LONG


def test_docstring_sites_near_each_other_share_a_job_and_a_file_that_fits_is_one_job():
    model = OneLetter(context_length=128)
    sites = missing_docstrings(LONG)
    request = DocstringRequest(document_from_bytes(LONG.encode()), [sites[10], sites[11]])
    [windowed] = windows_of(model, request)
    assert len(windowed.staged.spans) == 2 and windowed.staged.document.text.count('"""') == 4

    short = generated_file(3)
    whole = DocstringRequest(document_from_bytes(short.encode()), missing_docstrings(short))
    [windowed] = windows_of(OneLetter(context_length=len(short) // CHARS_PER_TOKEN + 1), whole)
    assert (windowed.window.start, windowed.window.end) == (0, len(short))
    assert len(windowed.staged.spans) == 3


def test_every_mode_runs_on_the_window_of_a_long_file_and_on_the_whole_of_a_short_one():
    from infill.modes import AlternativesRequest, FixRequest, InlineRequest

    model = OneLetter(context_length=128)
    span = line_span(LONG, *FILL_LINES)
    document = document_from_bytes(LONG.encode())
    requests = [FillRequest(document, [span]), FixRequest(document, [span]),
                AlternativesRequest(document, span, 2), InlineRequest(document, span.start)]  # fmt: skip
    for request in requests:
        [windowed] = windows_of(model, request)
        assert windowed.window.start <= span.start and span.end <= windowed.window.end
        assert len(windowed.staged.document.text) < reach(model.context_length) < len(LONG)
        [planned], [staged] = windowed.planned.spans, windowed.staged.spans
        assert windowed.staged.document.text[staged.start : staged.end] == LONG[planned.start : planned.end]

    short = generated_file(2)
    job_span = line_span(short, 4, 4)
    [windowed] = windows_of(model, FillRequest(document_from_bytes(short.encode()), [job_span]))
    assert windowed.staged.document is windowed.planned.document and windowed.staged.spans == [job_span]


def test_a_long_file_fill_edits_only_its_span_in_the_files_offsets():
    model = OneLetter(context_length=128)
    span = line_span(LONG, *FILL_LINES)
    result = run(model, FillRequest(document_from_bytes(LONG.encode()), [span], InfillOptions(recall=False)))
    [edit] = result.edits
    assert set(edit.new_text) == {"x"}
    assert_only_inside(result.edits, span.start, span.end)
    assert sum(map(len, model.encoded)) < reach(model.context_length)


def test_a_window_cut_inside_a_class_body_is_widened_to_whole_statements():
    """A window that starts among a class's methods does not parse (an indented first line), and
    the repair stage would then miss the problems a fill causes: it is widened to the class."""
    methods = "".join(f"    def m{i}(self):\n        return {i}\n\n" for i in range(400))
    text = f"import os\n\n\nclass Big:\n{methods}\n\ndef after():\n    return 1\n"
    document = document_from_bytes(text.encode())
    middle = text.index("    def m200")
    cut = window_around(text, middle, middle + 10, 64)
    assert cut.start > text.index("class Big") and file_problems(text[cut.start : cut.end])
    wide = parsing_window(document, cut)
    assert not file_problems(text[wide.start : wide.end])
    assert wide.start == text.index("class Big") and wide.end >= cut.end
    assert parsing_window(document, wide) == wide  # a window that parses is kept


def test_a_file_that_does_not_parse_keeps_its_window():
    methods = "".join(f"    def m{i}(self):\n        return {i}\n\n" for i in range(400))
    text = f"class Big:\n{methods}    def broken(:\n"
    middle = text.index("    def m200")
    cut = window_around(text, middle, middle + 10, 64)
    assert parsing_window(document_from_bytes(text.encode()), cut) == cut
