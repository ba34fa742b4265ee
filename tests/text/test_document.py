"""Tests for infill.text.document: lossless decoding, clear errors, atomic writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infill.errors import InputError
from infill.text.document import (
    DEFAULT_MAX_BYTES,
    Document,
    document_from_bytes,
    load_document,
    write_atomic,
)

BOM = b"\xef\xbb\xbf"

# Property tests: no per-example deadline and no "too slow" health check, which only measure
# how busy the machine is.
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces that make line endings, tabs and multi-byte characters frequent.
PIECES = ["a", "x = 1", " ", "\t", "\n", "\r\n", "\r", "é", "日本", "😀", "\ufeff", "\u2028"]

texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=30).map("".join),
    st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=50),
)


@settings(PROPERTY, max_examples=300)
@given(text=texts, bom=st.booleans())
def test_bytes_round_trip_through_document(text: str, bom: bool) -> None:
    data = (BOM if bom else b"") + text.encode("utf-8")

    document = document_from_bytes(data)

    assert document.encode() == data
    assert ("\ufeff" if document.bom else "") + document.text == ("\ufeff" if bom else "") + text
    assert document.newline in ("\n", "\r\n")


def test_document_keeps_bom_and_line_endings_exactly() -> None:
    data = BOM + "def f():\r\n\treturn 'é'\n\r\n# 日本 😀".encode()

    document = document_from_bytes(data)

    assert document.bom
    assert document.text == "def f():\r\n\treturn 'é'\n\r\n# 日本 😀"
    assert document.newline == "\r\n"
    assert document.encode() == data


def test_bom_only_file_is_empty_text() -> None:
    document = document_from_bytes(BOM)
    assert document == Document(text="", bom=True, newline="\n")
    assert document.encode() == BOM


@pytest.mark.parametrize(
    ("text", "newline"),
    [
        ("", "\n"),
        ("no line break", "\n"),
        ("a\nb\n", "\n"),
        ("a\r\nb\r\n", "\r\n"),
        ("a\r\nb\r\nc\n", "\r\n"),
        ("a\r\nb\nc\n", "\n"),
        ("a\r\nb\n", "\n"),  # a tie is not a majority
        ("a\rb\r", "\n"),  # a lone CR is not a line terminator here
    ],
)
def test_dominant_newline(text: str, newline: str) -> None:
    assert document_from_bytes(text.encode()).newline == newline


def test_encode_other_text_keeps_bom() -> None:
    document = document_from_bytes(BOM + b"old")
    assert document.encode("new é") == BOM + "new é".encode()
    assert document_from_bytes(b"old").encode("new") == b"new"


def test_adapt_generated() -> None:
    crlf = Document(text="a\r\n", bom=False, newline="\r\n")
    lf = Document(text="a\n", bom=False, newline="\n")

    assert crlf.adapt_generated("x\ny\r\nz") == "x\r\ny\r\nz"
    assert lf.adapt_generated("x\ny\r\nz") == "x\ny\nz"
    assert lf.adapt_generated("lone\rcr\r") == "lone\ncr\n"  # as Python reads a lone CR
    assert crlf.adapt_generated("lone\rcr") == "lone\r\ncr"
    assert lf.adapt_generated("a\x00b\r\x00\nc") == "ab\nc"  # a NUL would make the file binary


@settings(PROPERTY, max_examples=100)
@given(generated=texts | st.lists(st.sampled_from([*PIECES, "\x00"]), max_size=30).map("".join))
def test_adapt_generated_leaves_only_the_document_terminator_and_no_nul(generated: str) -> None:
    crlf = Document(text="", bom=False, newline="\r\n")
    lf = Document(text="", bom=False, newline="\n")
    adapted = crlf.adapt_generated(generated)
    assert adapted.count("\n") == adapted.count("\r\n") == adapted.count("\r")
    as_lines = generated.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
    assert adapted.replace("\r\n", "\n") == as_lines == lf.adapt_generated(generated)
    assert "\r" not in lf.adapt_generated(generated)
    assert "\x00" not in adapted


# --- bad input -------------------------------------------------------------------------------


def test_nul_byte_is_rejected_as_binary() -> None:
    with pytest.raises(InputError, match=r"binary.*NUL byte at byte offset 3"):
        document_from_bytes(b"abc\x00def")


def test_invalid_utf8_names_line_and_byte_offset() -> None:
    with pytest.raises(InputError) as caught:
        document_from_bytes(b"x = 1\n\xff\n", path=Path("bad.py"))
    message = str(caught.value)
    assert "bad.py" in message
    assert "not valid UTF-8" in message
    assert "line 2" in message
    assert "byte offset 6" in message
    assert "0xff" in message


def test_invalid_utf8_offset_counts_the_bom() -> None:
    with pytest.raises(InputError, match=r"line 1, byte offset 4"):
        document_from_bytes(BOM + b"a\xc3(")


def test_truncated_utf8_at_end_is_rejected() -> None:
    with pytest.raises(InputError, match=r"not valid UTF-8.*line 3, byte offset 4"):
        document_from_bytes(b"\n\nab\xe6\x97")


def test_too_large_names_size_and_limit() -> None:
    with pytest.raises(InputError, match=r"too large \(11 bytes; the limit is 10 bytes\)"):
        document_from_bytes(b"0123456789\n", max_bytes=10)
    assert document_from_bytes(b"0123456789", max_bytes=10).text == "0123456789"


def test_load_document(tmp_path: Path) -> None:
    path = tmp_path / "code.py"
    path.write_bytes(b"a = 1\r\nb = 2\r\n")

    document = load_document(path)

    assert document.path == path
    assert document.text == "a = 1\r\nb = 2\r\n"
    assert document.newline == "\r\n"
    assert document.encode() == path.read_bytes()


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing\.py: no such file"):
        load_document(tmp_path / "missing.py")


def test_load_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"is a directory"):
        load_document(tmp_path)


def test_load_too_large_file_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "big.py"
    path.write_bytes(b"x" * 100)
    with pytest.raises(InputError, match=r"too large \(100 bytes; the limit is 99 bytes\)"):
        load_document(path, max_bytes=99)
    assert DEFAULT_MAX_BYTES == 4 * 1024 * 1024


def test_load_binary_and_invalid_files(tmp_path: Path) -> None:
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    invalid = tmp_path / "latin1.py"
    invalid.write_bytes("x = 'café'\n".encode("latin-1"))

    with pytest.raises(InputError, match=r"image\.png: looks like a binary file"):
        load_document(binary)
    with pytest.raises(InputError, match=r"latin1\.py: not valid UTF-8.*line 1, byte offset 8"):
        load_document(invalid)


# --- write_atomic ----------------------------------------------------------------------------


def test_write_atomic_replaces_content_and_keeps_permissions(tmp_path: Path) -> None:
    path = tmp_path / "script.sh"
    path.write_bytes(b"old\n")
    path.chmod(0o751)

    write_atomic(path, b"new\r\ncontent")

    assert path.read_bytes() == b"new\r\ncontent"
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert os.listdir(tmp_path) == ["script.sh"]


def test_write_atomic_creates_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "new.py"
    write_atomic(str(path), b"x = 1\n")
    assert path.read_bytes() == b"x = 1\n"
    assert os.listdir(tmp_path) == ["new.py"]


def test_write_atomic_writes_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "real.py"
    target.write_bytes(b"old")
    link = tmp_path / "link.py"
    link.symlink_to(target)

    write_atomic(link, b"new")

    assert link.is_symlink()
    assert target.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == ["link.py", "real.py"]


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_write_atomic_failure_leaves_original_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = tmp_path / "code.py"
    path.write_bytes(b"original\n")
    path.chmod(0o640)

    def fail(*args: object) -> None:
        raise OSError("simulated failure")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OSError, match="simulated failure"):
        write_atomic(path, b"replacement\n")
    monkeypatch.undo()

    assert path.read_bytes() == b"original\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["code.py"]


def test_written_document_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "code.py"
    path.write_bytes(BOM + "a = 'é'\r\nb = 2\r\n".encode())
    document = load_document(path)

    new_text = document.text + document.adapt_generated("c = 3\nd = 4\n")
    write_atomic(path, document.encode(new_text))

    assert path.read_bytes() == BOM + "a = 'é'\r\nb = 2\r\nc = 3\r\nd = 4\r\n".encode()
