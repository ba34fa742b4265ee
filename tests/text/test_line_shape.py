"""The line-boundary rule (infill/text/line_shape.py): a selection of whole lines gets whole lines back.

An editor's linewise selection is a range from column 0 of its first line to column 0 of the
line after its last. Through the engine, the language server's edits and the CLI, whatever the
model writes, the text outside the selection and its line structure stay as they were: the
lines before and after the selection are still lines of their own (the blank line after it is
kept), and the fill ends with a line break.
"""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_support import resolve, tiny_model_dir

from infill.cli import main
from infill.models.native import load_backend
from infill.modes.fill import infill
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.edits import apply_edits
from infill.text.line_shape import keep_line_shape
from infill.text.spans import Span
from lsp_server import actions
from lsp_server.positions import position_to_offset

# Quick settings: the rule must hold after syntax retries, token edits and fresh fills as well.
OPTIONS = InfillOptions(sampler=SamplerConfig(steps=6), retries=1, token_edits=1, fresh_fills=1)
CLI_OPTIONS = ["--steps", "6", "--retries", "1", "--token-edits", "1", "--fresh-fills", "1"]

LINES = [
    "import os",
    "def area(w, h):",
    "    return w * h",
    "",
    "    ",
    "x = [1, 2,",
    "     3]",
    "# café ☕ 𝔘",
    "\tif x:",
    "class Point:",
    "        pass",
    '    """Docs."""',
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> pathlib.Path:
    return tiny_model_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_backend(tiny_dir, threads=1)


# ---------------------------------------------------------------------- the rule itself


@pytest.mark.parametrize(
    "text, start, end, fill, expected",
    [
        # a linewise selection (ends at column 0 of the next line): the fill ends with a line break
        ("a = 1\nb = 2\n\nc = 3\n", 6, 12, "b = 3", "b = 3\n"),
        ("a = 1\nb = 2\n\nc = 3\n", 6, 12, "b = 3\n    ", "b = 3\n"),  # no indent for the next line
        ("a = 1\nb = 2\n\nc = 3\n", 6, 12, "", "\n"),
        ("a = 1\r\nb = 2\r\n\r\nc = 3\r\n", 7, 14, "b = 3", "b = 3\r\n"),  # the file's line breaks
        # it starts at column 0: leading blank lines go (its first line was not blank)
        ("a = 1\nb = 2\n\nc = 3\n", 6, 12, "\n\n  \nb = 3\n", "b = 3\n"),
        ("a = 1\n\nb = 2\n", 6, 13, "\nb = 3\n", "\nb = 3\n"),  # ...it was: kept
        # ends at the end of a line (the CLI's --lines): no trailing blank lines
        ("a = 1\nb = 2\n\nc = 3\n", 6, 11, "b = 3\n\n    ", "b = 3"),
        ("a = 1\nb = 2\n\nc = 3\n", 6, 11, "b = 3  ", "b = 3  "),
        ("a = 1\nb = 2\n", 10, 11, "3\n", "3"),  # charwise to the end of a line too
        # starts with the line break of the line before: so does the fill
        ("a = 1\nb = 2\n", 5, 11, "  b = 3", "\nb = 3"),
        ("a = 1\nb = 2\n", 5, 11, "\nb = 3", "\nb = 3"),
        # a charwise selection inside a line, and an insertion point: as the model wrote it
        ("a = 1\nb = 2\n", 8, 9, "+\n", "+\n"),
        ("a = 1\nb = 2\n", 6, 6, "\n\nx = 0\n", "\n\nx = 0\n"),
    ],
)
def test_keep_line_shape(text, start, end, fill, expected):
    assert keep_line_shape(text, start, end, fill, "\r\n" if "\r\n" in text else "\n") == expected


def test_the_shipped_model_keeps_the_blank_line_after_a_linewise_selection():
    """The issue's case: lines 28-29 of tests/data/linewise_sample.py.txt (the text of
    infill/canvas.py when the issue was filed) selected linewise (the range ends at
    column 0 of line 30, a blank line). The shipped model writes these lines without a final
    line break (6 seeds of 6 before the rule), which took the blank line away."""
    source = pathlib.Path(__file__).resolve().parents[1] / "data" / "linewise_sample.py.txt"
    text = source.read_text(encoding="utf-8")
    lines = text.split("\n")
    assert lines[29] == ""
    start, end = line_offset(text, 27), line_offset(text, 29)
    backend = load_backend(threads=1)
    options = InfillOptions(sampler=SamplerConfig(seed=0, temperature=0.8), fresh_fills=0)
    result = infill(backend, document_from_bytes(text.encode()), [Span(start, end)], options)
    new = apply_edits(text, result.edits)
    assert_whole_lines_replaced(text, new, 27, 28)


# ---------------------------------------------------------------------- property: engine, server, CLI


def line_offset(text: str, line: int) -> int:
    """Offset of the start of 0-based `line` (len(text) past the last)."""
    offset = 0
    for _ in range(line):
        found = text.find("\n", offset)
        if found == -1:
            return len(text)
        offset = found + 1
    return offset


def assert_whole_lines_replaced(text: str, new: str, first: int, last: int) -> None:
    """`new` is `text` with lines first..last (0-based, with their line breaks) replaced by
    whole lines: everything before and after is unchanged and still starts its own line."""
    start, end = line_offset(text, first), line_offset(text, last + 1)
    before, after = text[:start], text[end:]
    assert new.startswith(before) and new.endswith(after)
    fill = new[len(before) : len(new) - len(after)]
    assert fill.endswith("\n"), f"the fill {fill!r} does not end with a line break"
    old_lines, new_lines = text.split("\n"), new.split("\n")
    outside_after = len(old_lines) - (last + 1)
    assert new_lines[:first] == old_lines[:first]
    assert new_lines[len(new_lines) - outside_after :] == old_lines[last + 1 :]  # the blank line too
    assert len(new_lines) - fill.count("\n") == len(old_lines) - (last - first + 1)  # lines outside
    if text[start:end].split("\n")[0].strip():  # the first line selected was not blank
        assert fill.split("\n")[0].strip() or not fill.strip(), f"a leading blank line in {fill!r}"


@st.composite
def files_and_selections(draw):
    lines = draw(st.lists(st.sampled_from(LINES), min_size=2, max_size=10))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    final = draw(st.booleans())
    text = newline.join(lines) + (newline if final else "")
    last_possible = len(lines) - 1 if final else len(lines) - 2  # the line after must start somewhere
    first = draw(st.integers(0, last_possible))
    last = draw(st.integers(first, min(last_possible, first + 3)))
    return text, first, last


QUICK = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture]}
SETTINGS = settings(max_examples=12, **QUICK)


@SETTINGS
@given(case=files_and_selections(), seed=st.integers(0, 3))
def test_engine_fills_a_linewise_selection_with_whole_lines(tiny, case, seed):
    text, first, last = case
    start, end = line_offset(text, first), line_offset(text, last + 1)
    document = document_from_bytes(text.encode())
    options = InfillOptions(sampler=SamplerConfig(steps=6, seed=seed, temperature=0.8), retries=1,
                            token_edits=1, fresh_fills=1)  # fmt: skip
    result = infill(tiny, document, [Span(start, end)], options)
    assert_whole_lines_replaced(text, apply_edits(text, result.edits), first, last)


def apply_lsp_edits(text: str, edits) -> str:
    """Apply LSP text edits (UTF-16 ranges) of `text`, as an editor does: back to front."""
    offsets = [
        (position_to_offset(text, e.range.start), position_to_offset(text, e.range.end), e) for e in edits
    ]
    for start, end, edit in sorted(offsets, key=lambda item: item[0], reverse=True):
        text = text[:start] + edit.new_text + text[end:]
    return text


@SETTINGS
@given(case=files_and_selections())
def test_server_edits_fill_a_linewise_selection_with_whole_lines(tiny, case):
    """What the server's codeAction/resolve does for "fill selection" over an editor's linewise
    range (first:0 to last+1:0), applied as an editor applies LSP text edits."""
    text, first, last = case
    start, end = line_offset(text, first), line_offset(text, last + 1)
    data = actions.ActionData("file:///x.py", 1, actions.SELECTION, start, end, actions.FILL)
    edit = resolve(tiny, text, data, OPTIONS)
    [document_edit] = edit.document_changes or [None]
    assert_whole_lines_replaced(text, apply_lsp_edits(text, document_edit.edits), first, last)


@settings(max_examples=6, **QUICK)
@given(case=files_and_selections())
def test_cli_fills_a_linewise_range_with_whole_lines(tiny_dir, tmp_path, case):
    text, first, last = case
    path = tmp_path / "example.py"
    path.write_bytes(text.encode())
    selection = f"{first + 1}:1-{last + 2}:1"  # 1-based; ends at column 1 of the line after
    assert main([str(path), "--range", selection, "--model", str(tiny_dir), "--write", *CLI_OPTIONS]) == 0
    assert_whole_lines_replaced(text, path.read_bytes().decode(), first, last)


@settings(max_examples=6, **QUICK)
@given(case=files_and_selections())
def test_cli_lines_keep_the_line_after(tiny_dir, tmp_path, case):
    """`--lines A-B` spans end before the last line's line break: the fill adds no blank line
    at the end (unless the last line selected was blank) and the lines after stay as they were."""
    text, first, last = case
    path = tmp_path / "example.py"
    path.write_bytes(text.encode())
    assert main([str(path), "--lines", f"{first + 1}-{last + 1}", "--model", str(tiny_dir), "--write",
                 *CLI_OPTIONS]) == 0  # fmt: skip
    new = path.read_bytes().decode()
    start, end = line_offset(text, first), line_offset(text, last + 1)
    end -= len("\r\n") if text[:end].endswith("\r\n") else len("\n")  # the span leaves the line break
    assert new.startswith(text[:start]) and new.endswith(text[end:])
    fill = new[start : len(new) - len(text) + end]
    if not text[start:end].endswith("\n"):
        assert not fill.rstrip(" \t").endswith("\n"), f"a trailing blank line in {fill!r}"
