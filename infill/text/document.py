"""Reading and writing user files without ever corrupting them.

A `Document` is the decoded text of a UTF-8 file plus what is needed to write it back byte for
byte: whether it started with a byte order mark, and its dominant line terminator (used to give
model output, which always uses "\\n", the file's own line endings). The text keeps every line
ending exactly as in the file, so `document_from_bytes(data).encode() == data` for any valid file.

Bad files (missing, a directory, too large, binary, not UTF-8) raise `InputError` with a message
that names the problem. `write_atomic` replaces a file so that a reader (or a crash) sees either
the old content or the new one, never a mix.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from infill.errors import InputError
from infill.text.languages import PYTHON, Language, detect

DEFAULT_MAX_BYTES = 4 * 1024 * 1024

_BOM = codecs.BOM_UTF8


@dataclass(frozen=True)
class Document:
    """The text of a file and how to write it back.

    text: decoded UTF-8 with the BOM stripped, line endings exactly as in the file.
    bom: the file started with the UTF-8 byte order mark.
    newline: the dominant line terminator, "\\r\\n" if CRLF endings are the majority, else "\\n".
    path: where the document was read from, if anywhere.
    language: its language (infill.text.languages): which grammar checks and selects its syntax.
    """

    text: str
    bom: bool
    newline: str
    path: Path | None = None
    language: Language = PYTHON

    def encode(self, text: str | None = None) -> bytes:
        """Bytes of `text` (default: this document's text), with the BOM re-added if it had one."""
        body = (self.text if text is None else text).encode("utf-8")
        return _BOM + body if self.bom else body

    def adapt_generated(self, generated: str) -> str:
        """Model output as text of this document: its line terminator, and no NUL character.

        A lone "\\r" in model output is read as a line break too (as Python reads source), so no
        stray carriage return reaches the file, and none can pair with a "\\n" that follows.
        A NUL is dropped: a file holding one is binary (`load_document` refuses it, git diffs it as
        binary), and an editor may place its next edits wrong on a line holding one (Neovim 0.7
        counts a line's characters only up to its first NUL, so an edit there can cut a
        character in two). A byte-level vocabulary has a token for that byte, and a model
        trained on little text may write it.
        """
        unified = generated.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
        if self.newline == "\n":
            return unified
        return unified.replace("\n", self.newline)


def load_document(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> Document:
    """Read and decode the file at `path`; InputError if it is missing or not a UTF-8 text file."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as error:
        raise InputError(f"{path}: cannot read file: {error.strerror}") from None

    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{path}: is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path}: is not a regular file")
    _check_size(info.st_size, max_bytes, str(path))

    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"{path}: cannot read file: {error.strerror}") from None
    return document_from_bytes(data, path=path, max_bytes=max_bytes)


def document_from_bytes(
    data: bytes, path: Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> Document:
    """Decode file content; InputError if it is too large, binary or not valid UTF-8."""
    label = str(path) if path is not None else "input"
    _check_size(len(data), max_bytes, label)

    nul = data.find(b"\x00")
    if nul != -1:
        raise InputError(f"{label}: looks like a binary file (NUL byte at byte offset {nul})")

    bom = data.startswith(_BOM)
    body_start = len(_BOM) if bom else 0
    try:
        text = data[body_start:].decode("utf-8")
    except UnicodeDecodeError as error:
        offset = body_start + error.start
        line = data.count(b"\n", 0, offset) + 1
        raise InputError(
            f"{label}: not valid UTF-8: byte 0x{data[offset]:02x} at line {line}, "
            f"byte offset {offset} ({error.reason})"
        ) from None

    first_line = text[: text.find("\n")] if text.startswith("#!") else ""
    language = detect(None, path, first_line).language if path is not None else PYTHON
    return Document(text=text, bom=bom, newline=_dominant_newline(text), path=path, language=language)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the content of the file at `path` by `data`, atomically.

    The data goes to a temporary file in the same directory, which is flushed, fsynced, given
    the original file's permission bits and then renamed over the original. On any failure the
    original is untouched, the temporary file is removed and the error propagates. A symbolic
    link is written through: its target is replaced, the link itself stays.
    """
    target = Path(os.path.realpath(path))
    mode = _permission_bits(target)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")

    # 0o666 lets the umask decide the permissions of a new file; an existing file's are copied.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    _fsync_directory(target.parent)


def _check_size(size: int, max_bytes: int, label: str) -> None:
    if size > max_bytes:
        raise InputError(f"{label}: file is too large ({size} bytes; the limit is {max_bytes} bytes)")


def _dominant_newline(text: str) -> str:
    """CRLF ("\\r\\n") if more lines end in CRLF than in a bare LF, else "\\n"."""
    crlf = text.count("\r\n")
    bare_lf = text.count("\n") - crlf
    return "\r\n" if crlf > bare_lf else "\n"


def _permission_bits(path: Path) -> int | None:
    """The permission bits of an existing file, None if there is no file yet."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable; best effort, as not every platform can open a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
