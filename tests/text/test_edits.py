"""Tests for infill.text.edits: minimal edits, applying them, and presenting them as diff / JSON."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
import unidiff
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infill.text.edits import (
    TextEdit,
    apply_edits,
    edits_to_json,
    minimal_edit,
    offset_to_position,
    unified_diff,
)

# Pieces that make CRLF pairs, lone CRs, tabs and multi-byte characters frequent.
PIECES = ["a", "b", "x", " ", "\t", "\n", "\r\n", "\r", "é", "日本", "😀", "ab\n", "\r\n\r\n"]
# Characters that str.splitlines() would treat as line breaks but a diff must not.
DIFF_PIECES = [*PIECES, "\x0c", "\x1c", "\x85", "\u2028"]
# Line content for texts whose lines are all distinct (no line breaks inside).
CONTENT_PIECES = ["a", "b", " ", "\t", "é", "😀", "\r"]

Span = tuple[int, int]

# Property tests: no per-example deadline and no "too slow" health check, which only measure
# how busy the machine is.
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def joined(pieces: list[str], max_size: int) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(pieces), max_size=max_size).map("".join)


@st.composite
def spans_and_replacements(draw: st.DrawFn, text: str, pieces: list[str] = PIECES) -> list[tuple[Span, str]]:
    """Non-overlapping (possibly touching or empty) spans, each with a replacement.

    Half of the replacements are variations of the replaced text, so that trimming matters.
    """
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=8)))
    result = []
    for start, end in zip(cuts[::2], cuts[1::2]):
        old = text[start:end]
        if draw(st.booleans()):
            keep_start = draw(st.integers(0, len(old)))
            keep_end = draw(st.integers(keep_start, len(old)))
            replacement = old[:keep_start] + draw(joined(pieces, 3)) + old[keep_end:]
        else:
            replacement = draw(joined(pieces, 6))
        result.append(((start, end), replacement))
    return result


@st.composite
def text_with_replacements(draw: st.DrawFn, pieces: list[str] = PIECES) -> tuple[str, list[tuple[Span, str]]]:
    text = draw(joined(pieces, 30))
    return text, draw(spans_and_replacements(text, pieces))


@st.composite
def distinct_lines_with_replacements(draw: st.DrawFn) -> tuple[str, list[tuple[Span, str]]]:
    """A text whose lines are all different, each starting and ending with its own marker.

    No replacement contains a marker, so an old line can survive the edits at most once, in
    order: a line diff of such texts has exactly one right answer.
    """
    lines = []
    for number in range(draw(st.integers(0, 12))):
        marker = chr(0x3400 + number)
        content = draw(joined(CONTENT_PIECES, 4))
        lines.append(marker + content + marker + draw(st.sampled_from(["\n", "\r\n"])))
    if lines and draw(st.booleans()):
        lines[-1] = lines[-1].rstrip("\r\n")
    text = "".join(lines)
    return text, draw(spans_and_replacements(text))


def naive_replace(text: str, replacements: list[tuple[Span, str]]) -> str:
    for (start, end), new_text in reversed(replacements):
        text = text[:start] + new_text + text[end:]
    return text


def minimal_edits(text: str, replacements: list[tuple[Span, str]]) -> list[TextEdit]:
    edits = [minimal_edit(text, start, end, new) for (start, end), new in replacements]
    return [edit for edit in edits if edit is not None]


def splits_crlf(text: str, offset: int) -> bool:
    return 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n"


def split_lines(text: str) -> list[str]:
    """Lines with terminators, split after "\\n" only."""
    *complete, last = text.split("\n")
    return [line + "\n" for line in complete] + ([last] if last else [])


# --- minimal_edit and apply_edits ------------------------------------------------------------


@settings(PROPERTY, max_examples=400)
@given(case=text_with_replacements())
def test_minimal_edits_equal_naive_replacement(case: tuple[str, list[tuple[Span, str]]]) -> None:
    text, replacements = case
    expected = naive_replace(text, replacements)

    assert apply_edits(text, minimal_edits(text, replacements)) == expected

    # Text outside the spans is byte-identical.
    shift = 0
    previous_end = 0
    for (start, end), new_text in replacements:
        gap = text[previous_end:start]
        assert expected[previous_end + shift : start + shift].encode() == gap.encode()
        shift += len(new_text) - (end - start)
        previous_end = end
    assert expected[previous_end + shift :].encode() == text[previous_end:].encode()


@settings(PROPERTY, max_examples=400)
@given(case=text_with_replacements())
@example(case=("\r\r\n", [((0, 3), "\r\n")]))  # trimming the end made the kept start half a new pair
def test_each_minimal_edit_is_inside_its_span_and_minimal(
    case: tuple[str, list[tuple[Span, str]]],
) -> None:
    text, replacements = case
    for (start, end), new_text in replacements:
        edit = minimal_edit(text, start, end, new_text)
        if edit is None:
            assert text[start:end] == new_text
            continue

        assert start <= edit.start <= edit.end <= end
        result = apply_edits(text, [edit])
        assert result == text[:start] + new_text + text[end:]
        assert_minimal(text, result, edit)
        assert_no_crlf_split(text, result, edit, (start, end))


def assert_minimal(text: str, result: str, edit: TextEdit) -> None:
    """Old and new parts differ at both ends, unless that would split a "\\r\\n" pair."""
    old_part, new_part = text[edit.start : edit.end], edit.new_text
    assert old_part != new_part
    if not (old_part and new_part):
        return
    new_end = edit.start + len(new_part)
    if old_part[0] == new_part[0]:
        assert old_part[0] == "\r"
        assert "\n" in (
            text[edit.start + 1 : edit.start + 2],
            result[edit.start + 1 : edit.start + 2],
        )
    if old_part[-1] == new_part[-1]:
        assert old_part[-1] == "\n"
        assert "\r" in (text[edit.end - 2 : edit.end - 1], result[new_end - 2 : new_end - 1])


def assert_no_crlf_split(text: str, result: str, edit: TextEdit, span: Span) -> None:
    """No edit boundary falls inside a "\\r\\n" of the old text, and no "\\r\\n" of the new text
    is half kept, half inserted, except where the caller's span boundary already does so."""
    start, end = span
    for boundary in (edit.start, edit.end):
        if boundary not in (start, end):
            assert not splits_crlf(text, boundary)
    if edit.new_text:
        new_end = edit.start + len(edit.new_text)
        if edit.start != start:
            assert not (result[edit.start - 1] == "\r" and edit.new_text[0] == "\n")
        if edit.end != end:
            assert not (edit.new_text[-1] == "\r" and result[new_end : new_end + 1] == "\n")


@pytest.mark.parametrize(
    ("text", "start", "end", "new_text", "expected"),
    [
        ("hello world", 0, 11, "hello there", TextEdit(6, 11, "there")),
        ("hello world", 0, 11, "hello world", None),
        ("aaa", 0, 3, "aaaa", TextEdit(3, 3, "a")),
        ("x = 1\ny = 2\n", 0, 12, "x = 1\ny = 3\n", TextEdit(10, 11, "3")),
        ("f(a, b)", 2, 6, "a, c", TextEdit(5, 6, "c")),
        ("日本語", 0, 3, "日本人", TextEdit(2, 3, "人")),
        # An insertion between "\r" and "\n" would split the pair: the pair is replaced instead.
        ("a\r\nb", 0, 4, "a\rX\nb", TextEdit(1, 3, "\rX\n")),
        # Inserting a "\r" before a "\r\n" is fine.
        ("a\r\nb", 0, 4, "a\r\r\nb", TextEdit(1, 1, "\r")),
        # CRLF -> LF and LF -> CRLF replace the whole line break.
        ("x\r\n", 0, 3, "x\n", TextEdit(1, 3, "\n")),
        ("x\n", 0, 2, "x\r\n", TextEdit(1, 2, "\r\n")),
        # Deleting what separates a kept "\r" from a kept "\n" splits nothing.
        ("\rX\n", 0, 3, "\r\n", TextEdit(1, 2, "")),
        # Trimming never leaves the span.
        ("abcabc", 3, 6, "abd", TextEdit(5, 6, "d")),
        ("abcabc", 3, 3, "abc", TextEdit(3, 3, "abc")),
    ],
)
def test_minimal_edit_examples(
    text: str, start: int, end: int, new_text: str, expected: TextEdit | None
) -> None:
    assert minimal_edit(text, start, end, new_text) == expected


def test_minimal_edit_rejects_bad_range() -> None:
    with pytest.raises(ValueError):
        minimal_edit("abc", 2, 4, "x")
    with pytest.raises(ValueError):
        minimal_edit("abc", 2, 1, "x")


def test_apply_edits_in_any_order() -> None:
    text = "one two three four"
    edits = [
        TextEdit(0, 3, "1"),
        TextEdit(4, 7, "2"),
        TextEdit(8, 8, "(3) "),
        TextEdit(18, 18, "!"),
    ]
    expected = "1 2 (3) three four!"
    rng = random.Random(0)
    for _ in range(10):
        shuffled = list(edits)
        rng.shuffle(shuffled)
        assert apply_edits(text, shuffled) == expected


def test_apply_edits_keeps_order_of_insertions_at_one_offset() -> None:
    assert apply_edits("ab", [TextEdit(1, 1, "X"), TextEdit(1, 1, "Y")]) == "aXYb"
    assert apply_edits("ab", [TextEdit(1, 1, "Y"), TextEdit(1, 1, "X")]) == "aYXb"
    # Touching edits are not overlapping.
    assert apply_edits("abcd", [TextEdit(2, 4, "Z"), TextEdit(0, 2, "Y"), TextEdit(2, 2, "-")]) == ("Y-Z")


def test_apply_edits_rejects_overlap_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="overlapping"):
        apply_edits("abcdef", [TextEdit(3, 5, "x"), TextEdit(0, 4, "y")])
    with pytest.raises(ValueError, match="overlapping"):
        apply_edits("abcdef", [TextEdit(1, 3, "x"), TextEdit(2, 2, "y")])
    with pytest.raises(ValueError, match="outside"):
        apply_edits("abc", [TextEdit(2, 4, "x")])
    with pytest.raises(ValueError):
        TextEdit(3, 2, "x")


# --- positions and JSON ----------------------------------------------------------------------


def test_offset_to_position() -> None:
    text = "ab\r\ncé\n😀x\rz"
    positions = [offset_to_position(text, offset) for offset in range(len(text) + 1)]
    assert positions == [
        (0, 0), (0, 1), (0, 2), (0, 3),  # "a", "b", "\r", "\n"
        (1, 0), (1, 1), (1, 2),  # "c", "é", "\n"
        (2, 0), (2, 1), (2, 2), (2, 3), (2, 4),  # "😀", "x", "\r" (not a break), "z", end
    ]  # fmt: skip
    assert offset_to_position("", 0) == (0, 0)
    assert offset_to_position("a\n", 2) == (1, 0)
    with pytest.raises(ValueError):
        offset_to_position("abc", 4)


def test_edits_to_json() -> None:
    text = "def f():\r\n    return 1\r\n# 日本\n"
    edits = [TextEdit(26, 28, "中国"), TextEdit(21, 22, "2")]

    assert edits_to_json(text, edits) == [
        {
            "start": 21,
            "end": 22,
            "new_text": "2",
            "old_text": "1",
            "range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 12}},
        },
        {
            "start": 26,
            "end": 28,
            "new_text": "中国",
            "old_text": "日本",
            "range": {"start": {"line": 2, "character": 2}, "end": {"line": 2, "character": 4}},
        },
    ]
    assert edits_to_json(text, []) == []


# --- unified_diff ----------------------------------------------------------------------------


def test_unified_diff_of_equal_texts_is_empty() -> None:
    assert unified_diff("a\nb\n", "a\nb\n", "x.py") == ""
    assert unified_diff("", "", "x.py") == ""


def test_unified_diff_format() -> None:
    old = "a\nb\nc\nd\ne\nf\ng\n"
    new = "a\nb\nc\nD\ne\nf\ng\n"
    assert unified_diff(old, new, "src/x.py") == (
        "--- a/src/x.py\n+++ b/src/x.py\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n"
    )


def test_unified_diff_marks_missing_newline_at_end() -> None:
    assert unified_diff("x = 1", "x = 2", "m.py") == (
        "--- a/m.py\n"
        "+++ b/m.py\n"
        "@@ -1 +1 @@\n"
        "-x = 1\n"
        "\\ No newline at end of file\n"
        "+x = 2\n"
        "\\ No newline at end of file\n"
    )
    assert unified_diff("a\nb", "a\nb\n", "m.py").endswith("-b\n\\ No newline at end of file\n+b\n")


def test_unified_diff_keeps_crlf_and_does_not_split_on_form_feed() -> None:
    diff = unified_diff("a\r\nb\x0cc\r\n", "a\r\nB\x0cc\r\n", "w.py")
    assert diff.endswith(" a\r\n-b\x0cc\r\n+B\x0cc\r\n")


@settings(PROPERTY, max_examples=300)
@given(case=text_with_replacements(DIFF_PIECES))
def test_unified_diff_parses_and_applies(case: tuple[str, list[tuple[Span, str]]]) -> None:
    old, replacements = case
    new = apply_edits(old, minimal_edits(old, replacements))

    diff = unified_diff(old, new, "pkg/mod.py")

    if old == new:
        assert diff == ""
        return
    (patched_file,) = unidiff.PatchSet(diff)
    assert patched_file.source_file == "a/pkg/mod.py"
    assert patched_file.target_file == "b/pkg/mod.py"
    assert apply_patch(old, patched_file) == new


@settings(PROPERTY, max_examples=300)
@given(case=distinct_lines_with_replacements())
def test_unified_diff_reports_exactly_the_changed_lines(
    case: tuple[str, list[tuple[Span, str]]],
) -> None:
    """Every line the diff reports is touched by an edit, and every line an edit changed (whose
    content no longer appears) is reported; lines that survive intact are context."""
    old, replacements = case
    edits = minimal_edits(old, replacements)
    new = apply_edits(old, edits)

    diff = unified_diff(old, new, "f.py")

    removed, added = set(), set()
    for hunk in unidiff.PatchSet(diff)[0] if diff else []:
        removed |= {line.source_line_no for line in hunk if line.is_removed}
        added |= {line.target_line_no for line in hunk if line.is_added}
    old_lines, new_lines = split_lines(old), split_lines(new)
    assert removed == {n for n, line in enumerate(old_lines, 1) if line not in new_lines}
    assert added == {n for n, line in enumerate(new_lines, 1) if line not in old_lines}
    old_ranges = [(edit.start, edit.end) for edit in edits]
    assert removed <= touched_lines(old, old_ranges)
    assert added <= touched_lines(new, new_ranges(edits))


def new_ranges(edits: list[TextEdit]) -> list[Span]:
    """Where the edits' new text lies in the edited text."""
    ranges, shift = [], 0
    for edit in sorted(edits, key=lambda edit: (edit.start, edit.end)):
        start = edit.start + shift
        ranges.append((start, start + len(edit.new_text)))
        shift += len(edit.new_text) - (edit.end - edit.start)
    return ranges


def touched_lines(text: str, ranges: list[Span]) -> set[int]:
    """1-based numbers of the lines that overlap or border one of the ranges."""
    touched, line_start = set(), 0
    for number, line in enumerate(split_lines(text), 1):
        line_end = line_start + len(line)
        if any(start <= line_end and end >= line_start for start, end in ranges):
            touched.add(number)
        line_start = line_end
    return touched


def apply_patch(old: str, patched_file: unidiff.PatchedFile) -> str:
    """Apply parsed hunks to `old`, checking every context and removed line."""
    old_lines = split_lines(old)
    output: list[str] = []
    position = 0
    for hunk in patched_file:
        hunk_start = hunk.source_start - 1 if hunk.source_length else hunk.source_start
        output += old_lines[position:hunk_start]
        position = hunk_start
        for kind, value in hunk_lines(hunk):
            if kind in (" ", "-"):
                assert old_lines[position] == value
                position += 1
            if kind in (" ", "+"):
                output.append(value)
        assert position == hunk_start + hunk.source_length
    return "".join(output + old_lines[position:])


def hunk_lines(hunk: unidiff.Hunk) -> list[tuple[str, str]]:
    """(kind, text) of each hunk line, with the line break removed where a "\\ No newline at end
    of file" marker follows."""
    lines: list[tuple[str, str]] = []
    for line in hunk:
        if line.line_type == "\\":
            kind, value = lines[-1]
            assert value.endswith("\n")
            lines[-1] = (kind, value[:-1])
        else:
            lines.append((line.line_type, line.value))
    return lines


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\nc", "a\nB\nc"),
        ("a\r\nb\r\n", "a\r\nb\r\nc"),
        ("x", ""),
        ("", "é 日本 😀\n"),
        ("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\nthree\n4\n5\n6\n7\neight\n9\n"),
    ],
)
def test_unified_diff_is_accepted_by_gnu_patch(tmp_path: Path, old: str, new: str) -> None:
    target = tmp_path / "f.py"
    target.write_bytes(old.encode())
    diff = unified_diff(old, new, "f.py")

    subprocess.run(
        ["patch", "-p1", "--batch", "--silent", "--no-backup-if-mismatch"],
        input=diff.encode(),
        cwd=tmp_path,
        check=True,
    )

    assert target.read_bytes() == new.encode()
