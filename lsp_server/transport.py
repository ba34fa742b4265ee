"""The stdio transport: LSP frames in, pygls' message handling behind, never a silent hang.

pygls 2.1's reader (``pygls.io_.run_async``) trusts the client: a header it cannot match (a
lowercase ``content-length``, LF-only line ends, ``Content-Length: abc``) is skipped but leaves
the reader waiting for a length that never comes, so the server stays alive and never answers
again; a length of 10^12 is passed to ``read``; a body whose params do not fit the protocol is
logged and dropped without a response. This module replaces that loop for ``--stdio``:

- :class:`FrameParser` (no I/O, no threads) cuts the byte stream into bodies. Header names are
  case-insensitive and lines may end in LF or CRLF (the base protocol borrows HTTP's header
  syntax, whose names are case-insensitive: accepting them is the tolerant choice). A header
  block without a valid ``Content-Length``, or with one above :data:`MAX_FRAME_BYTES`, is
  skipped, and so is everything up to the next ``Content-Length`` header (resynchronisation).
  A length that does not match the body is caught two ways: a raw ``Content-Length: N`` line
  inside a body (impossible in valid JSON, whose strings cannot hold a raw line break) cuts the
  body there, and a body that stops growing for :data:`STALL_S` seconds is taken as it is.
- :class:`Session` (on the event loop) answers what pygls would drop: a body that is not JSON
  gets ParseError (-32700) when the request's id can be read from it, a request whose params
  do not fit the protocol InvalidParams (-32602) with what was wrong, a request before
  ``initialize`` ServerNotInitialized (-32002), one after ``shutdown`` InvalidRequest (-32600).
  ``exit`` ends the process at once with 0 after ``shutdown``, else 1; so does a closed stdin
  (the client is gone) or stdout: every model job is cancelled and the process exits within a
  second, whatever a worker thread is doing, with a log line saying why.

Every request gets exactly one response: pygls answers each request it handles once, and a
request this module refuses never reaches pygls. What belongs upstream in pygls is listed in
docs/lsp-robustness.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import select
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

logger = logging.getLogger("infill-lsp")

MAX_FRAME_BYTES = 64 * 1024 * 1024
"""The largest body accepted (64 MiB); a longer frame is skipped with an error."""
MAX_HEADER_BYTES = 8192
"""A header block longer than this (without its blank line) is garbage."""
STALL_S = 2.0
"""A frame whose body stops growing for this long is taken as it is (a length longer than the
body); garbage held since as long is reported (and its request answered)."""
SALVAGE_BYTES = 4096
"""How much of a skipped chunk is kept to look for a request id in it."""

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32602, -32603
SERVER_NOT_INITIALIZED = -32002

_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*([^\r\n]*)\r?\n", re.IGNORECASE)
# A length line inside a body: valid JSON has no raw line break inside a string, so this can
# only be the next frame's header after a Content-Length that was too long.
_EMBEDDED_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*[0-9]+[ \t]*\r?\n", re.IGNORECASE)
_HEADER_LINE = re.compile(rb"[A-Za-z0-9-]+[ \t]*:[^\r\n]*\r?\n")
_HEADER_LINES = re.compile(rb"(?:[A-Za-z0-9-]+[ \t]*:[^\r\n]*\r?\n|\r?\n)*")
_BLANK_LINE = re.compile(rb"\r?\n")
_REQUEST_ID = re.compile(rb'"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")')


@dataclass(frozen=True)
class Frame:
    """One body, and what was odd about its framing (None: nothing)."""

    body: bytes
    note: str | None = None  # logged
    refuse: str | None = None  # why this frame is refused (its request gets an error)


@dataclass(frozen=True)
class Skipped:
    """Bytes that were not a frame, why, and (the start of) them, to find a request id in."""

    reason: str
    data: bytes = b""


class FrameParser:
    """Cuts a byte stream into LSP frames (:class:`Frame`) and what it skips (:class:`Skipped`).

    :meth:`feed` takes the bytes as they come; :meth:`stalled` is called when none came for
    :data:`STALL_S` seconds while :meth:`waiting` (a partial body, or skipped bytes not yet
    reported); :meth:`end` at the end of the stream.
    """

    def __init__(self, max_frame: int = MAX_FRAME_BYTES) -> None:
        self.max_frame = max_frame
        self.buffer = bytearray()
        self.length: int | None = None  # the body's declared length, while reading a body
        self.scanned = 0  # body bytes already searched for an embedded header
        self.refuse: str | None = None  # the current body is read only to refuse it (a bad header)
        self.short: str | None = None  # the current body runs past its declared length
        self.garbage = bytearray()  # skipped bytes not reported yet (the first SALVAGE_BYTES)
        self.garbage_size = 0
        self.garbage_reason = ""

    def waiting(self) -> bool:
        """Whether a stall should be reported: a partial body, or skipped bytes held back."""
        if self.length is not None:
            return bool(self.buffer)
        return bool(self.garbage.strip() or self.buffer.strip())

    def feed(self, data: bytes) -> list[Frame | Skipped]:
        self.buffer += data
        out: list[Frame | Skipped] = []
        while self._step(out):
            pass
        return out

    def stalled(self) -> list[Frame | Skipped]:
        """Nothing came for a while: a partial body is the whole body; bytes outside any frame
        (a partial header included) are reported as skipped."""
        out: list[Frame | Skipped] = []
        if self.length is not None:
            if self.buffer:
                body = bytes(self.buffer)
                self.buffer.clear()
                out.append(self._frame(body, f"the body stopped after {len(body)} bytes"))
        elif self.buffer.strip():
            self._skip(self.buffer, "bytes outside any frame")
            self.buffer.clear()
        self._flush_garbage(out)
        return out

    def end(self) -> list[Frame | Skipped]:
        """The stream ended: what is left is reported."""
        return self.stalled()

    # ------------------------------------------------------------------ the state machine

    def _step(self, out: list[Frame | Skipped]) -> bool:
        """Make progress on the buffer; False when more bytes are needed."""
        if self.length is not None:
            return self._read_body(out)
        match = _HEADER.search(self.buffer)
        if match is None:
            keep = 64  # a header may be arriving: keep its start
            if len(self.buffer) > keep:
                self._skip(self.buffer[:-keep], "bytes outside any frame")
                del self.buffer[:-keep]
            return False
        if match.start() and not _HEADER_LINES.fullmatch(self.buffer, 0, match.start()):
            self._skip(self.buffer[: match.start()], "bytes outside any frame")
        header_end = self._header_end(match.end())
        if header_end is None:
            if len(self.buffer) - match.start() > MAX_HEADER_BYTES:
                self._skip(self.buffer[: match.end()], "a header block without its blank line")
                del self.buffer[: match.end()]
                return True
            if match.start():
                del self.buffer[: match.start()]
            return False
        if header_end < 0:  # a line that is no header before the blank line
            self._skip(self.buffer[: match.end()], "a header block without its blank line")
            del self.buffer[: match.end()]
            return True
        self._flush_garbage(out)
        value = match.group(1).strip()
        del self.buffer[:header_end]
        if not value.isdigit() or not value.isascii():  # read the body to the next header, to refuse it
            self.refuse = f"the frame's Content-Length {value[:40].decode('latin-1')!r} is not a number"
            self.length, self.scanned = self.max_frame + 1, 0
            return True
        length = int(value)
        if length > self.max_frame:
            self._skip(b"", f"skipped a frame of {length} bytes: the limit is {self.max_frame}")
            self._flush_garbage(out)
            return True
        self.length, self.scanned = length, 0
        return True

    def _header_end(self, position: int) -> int | None:
        """Offset after the header block's blank line; None: not all here yet; -1: malformed."""
        while True:
            blank = _BLANK_LINE.match(self.buffer, position)
            if blank is not None:
                return blank.end()
            line = _HEADER_LINE.match(self.buffer, position)
            if line is not None:
                position = line.end()
                continue
            if b"\n" in self.buffer[position : position + MAX_HEADER_BYTES]:
                return -1
            return None

    def _read_body(self, out: list[Frame | Skipped]) -> bool:
        """A body of ``self.length`` bytes; an open-ended one (``self.refuse`` or ``self.short``)
        runs to the next header, or to a stall."""
        assert self.length is not None
        window = self.buffer[: self.length]
        embedded = _EMBEDDED_HEADER.search(window, max(0, self.scanned - 64))
        self.scanned = len(window)
        if embedded is not None:  # the body ends where the next frame's header starts
            cut = embedded.start()
            body = bytes(self.buffer[:cut])
            del self.buffer[:cut]
            out.append(self._frame(body, f"the next frame starts after {cut} bytes"))
            return True
        if len(self.buffer) < self.length:
            return False
        if self.length == self.max_frame + 1:  # an open-ended body longer than any frame: dropped
            self._skip(window, f"a frame body longer than {self.max_frame} bytes")
            del self.buffer[: self.length]
            self.length = None
            return True
        if not window.rstrip().endswith(b"}") and not self.refuse:  # cut short: no JSON object ends so
            self.short = f"Content-Length {self.length} is shorter than the body"
            self.length = self.max_frame + 1
            return True
        del self.buffer[: self.length]
        out.append(self._frame(bytes(window), None))
        return True

    def _frame(self, body: bytes, how: str | None) -> Frame:
        """The frame that ends here; ``how``: why it ends here, if not at its declared length."""
        declared = None if self.refuse or self.short else self.length
        note = self.short or (
            f"Content-Length {declared}, but {how}" if how and declared is not None else None
        )
        frame = Frame(body, note, self.refuse)
        self.length, self.refuse, self.short = None, None, None
        return frame

    def _skip(self, data: bytes | bytearray, reason: str) -> None:
        if not self.garbage_reason:
            self.garbage_reason = reason
        room = SALVAGE_BYTES - len(self.garbage)
        if room > 0:
            self.garbage += data[:room]
        self.garbage_size += len(data)
        if not data:  # a reason of its own (a bad header): reported at once by the caller
            self.garbage_reason = reason

    def _flush_garbage(self, out: list[Frame | Skipped]) -> None:
        if self.garbage.strip() or (self.garbage_reason and not self.garbage_size):
            reason = self.garbage_reason
            if self.garbage_size:
                reason += f" ({self.garbage_size} bytes skipped)"
            out.append(Skipped(reason, bytes(self.garbage)))
        self.garbage.clear()
        self.garbage_size = 0
        self.garbage_reason = ""


def request_id_in(data: bytes) -> int | str | None:
    """The id of the request that ``data`` (a broken or cut body) seems to be, if any: an ``"id"``
    key of the top-level object, in a body with a ``"method"`` that is not ``$/...``. A
    notification or a response is never answered (nor is an ``id`` inside the params)."""
    if b'"method"' not in data or re.search(rb'"method"\s*:\s*"\$/', data):
        return None
    for found in _REQUEST_ID.finditer(data):
        if _depth(data, found.start()) == 1:
            try:
                value = json.loads(found.group(1))
            except ValueError:
                return None
            return value if isinstance(value, (int, str)) else None
    return None


def _depth(data: bytes, end: int) -> int:
    """How deep in objects and arrays ``data[end]`` is (-1 if inside a string)."""
    depth, in_string, escaped = 0, False, False
    for byte in data[:end]:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x7B, 0x5B):  # { [
            depth += 1
        elif byte in (0x7D, 0x5D):  # } ]
            depth -= 1
    return -1 if in_string else depth


# ---------------------------------------------------------------------------------- the session


class Session:
    """Takes frames on the event loop: checks them, answers what pygls would drop, hands the rest
    to the server's protocol. ``terminate(code, reason)`` ends the process."""

    def __init__(self, server: Any, terminate: Callable[[int, str], None]) -> None:
        self.server = server
        self.protocol = server.protocol
        self.terminate = terminate
        self.initialized = False  # an initialize request came
        self.shut_down = False  # a shutdown request came

    # ------------------------------------------------------------ input

    def take(self, item: Frame | Skipped) -> None:
        if isinstance(item, Skipped):
            self.skipped(item)
            return
        if item.note:
            logger.warning("transport: %s", item.note)
        try:
            message = json.loads(item.body)
        except Exception as error:  # ValueError, UnicodeDecodeError, RecursionError
            reason = item.refuse or f"a body that is not JSON ({error})"
            self.skipped(Skipped(reason, item.body[:SALVAGE_BYTES]))
            return
        if item.refuse:
            is_request = isinstance(message, dict) and "method" in message and _valid_id(message.get("id"))
            logger.warning("transport: skipped a frame: %s", item.refuse)
            if is_request and message.get("method") != types.EXIT:
                self.reply(message["id"], INVALID_REQUEST, f"request refused: {item.refuse}")
            return
        try:
            self.message(message)
        except Exception:  # a bug of ours: log it; the request (if any) is answered below
            logger.exception("transport: could not handle a message")
            if isinstance(message, dict) and _valid_id(message.get("id")) and "method" in message:
                self.reply(message["id"], INTERNAL_ERROR, "internal error: see the server log")

    def skipped(self, item: Skipped) -> None:
        msg_id = request_id_in(item.data)
        answer = f"; answered request {msg_id!r} with ParseError" if msg_id is not None else ""
        logger.warning("transport: skipped %s%s", item.reason, answer)
        if msg_id is not None:
            self.reply(msg_id, PARSE_ERROR, f"the request could not be read: {item.reason}")

    def message(self, message: Any) -> None:
        if not isinstance(message, dict):
            logger.warning("transport: a message must be a JSON object, got %s", type(message).__name__)
            self.reply(None, INVALID_REQUEST, "a message must be a JSON object (LSP has no batches)")
            return
        method, has_id, msg_id = message.get("method"), "id" in message, message.get("id")
        if method is None:  # a response to one of our requests
            self.response(message)
            return
        if has_id and not _valid_id(msg_id):
            self.reply(None, INVALID_REQUEST, f"a request id must be an integer or a string, got {msg_id!r}")
            return
        if not isinstance(method, str) or message.get("jsonrpc") != "2.0":
            what = "method must be a string" if not isinstance(method, str) else 'jsonrpc must be "2.0"'
            if has_id:
                self.reply(msg_id, INVALID_REQUEST, f"invalid request: {what}")
            else:
                logger.warning("transport: ignored a notification: %s", what)
            return
        if method == types.EXIT:
            code = 0 if self.shut_down else 1
            why = "after shutdown" if self.shut_down else "without shutdown first"
            self.terminate(code, f"exit {why}")
            return
        if has_id and not self.lifecycle_allows(method, msg_id):
            return
        if not has_id and (not self.initialized or self.shut_down):
            logger.info(
                "transport: ignored %s (%s)",
                method,
                "not initialized" if not self.initialized else "shut down",
            )
            return
        try:
            structured = self.structure(message, method, has_id)
        except Exception as error:
            detail = describe_structure_error(error)
            if has_id:
                self.reply(msg_id, INVALID_PARAMS, f"invalid params for {method}: {detail}")
            else:
                logger.warning("transport: ignored %s: invalid params: %s", method, detail)
            return
        if has_id and method == types.INITIALIZE:
            self.initialized = True
        if has_id and method == types.SHUTDOWN:
            self.shut_down = True
        self.protocol.handle_message(structured)

    def lifecycle_allows(self, method: str, msg_id: int | str) -> bool:
        if method == types.INITIALIZE and self.initialized:
            self.reply(msg_id, INVALID_REQUEST, "initialize may be sent only once")
            return False
        if method != types.INITIALIZE and not self.initialized:
            self.reply(msg_id, SERVER_NOT_INITIALIZED, f"{method} before initialize")
            return False
        if self.shut_down:
            self.reply(msg_id, INVALID_REQUEST, f"{method} after shutdown: only exit is accepted")
            return False
        return True

    def structure(self, message: dict, method: str, has_id: bool) -> Any:
        from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

        fallback = JsonRPCRequestMessage if has_id else JsonRPCNotification
        kind = self.protocol.get_message_type(method) or fallback
        if kind is not fallback and "params" not in message and _needs_params(kind):
            raise ValueError("params are missing")
        return self.protocol._converter.structure(message, kind)

    def response(self, message: dict) -> None:
        try:
            structured = self.protocol.structure_message(message)
            self.protocol.handle_message(structured)
        except Exception as error:
            logger.warning("transport: ignored a response that does not fit: %s", error)

    # ------------------------------------------------------------ output

    def reply(self, msg_id: int | str | None, code: int, message: str) -> None:
        error = types.ResponseError(code=code, message=message)
        self.protocol._send_data(types.ResponseErrorMessage(id=msg_id, error=error))


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _needs_params(kind: type) -> bool:
    import attrs

    fields = {field.name: field for field in attrs.fields(kind)}
    params = fields.get("params")
    return params is not None and params.default is attrs.NOTHING


def describe_structure_error(error: BaseException) -> str:
    """What cattrs (or lsprotocol's validators) found wrong, in one line."""
    try:
        from cattrs import transform_error

        found = transform_error(error)  # type: ignore[arg-type]
        if found:
            return "; ".join(found[:5])
    except Exception:
        pass
    return str(error) or type(error).__name__


# ---------------------------------------------------------------------------------- stdio


class _Writer:
    """stdout for pygls; a closed pipe (the client is gone) ends the process."""

    def __init__(self, stream: Any, terminate: Callable[[int, str], None]) -> None:
        self.stream = stream
        self.terminate = terminate

    def write(self, data: bytes) -> None:
        try:
            self.stream.write(data)
            self.stream.flush()
        except (BrokenPipeError, OSError, ValueError) as error:
            self.terminate(1, f"stdout is closed ({error}): the client is gone")

    def close(self) -> None:
        pass


def serve_stdio(server: Any, stdin: Any = None, stdout: Any = None) -> None:
    """Serve ``server`` (a pygls LanguageServer) over stdin/stdout until ``exit``, the end of
    stdin or a closed stdout; never returns (the process ends with os._exit)."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer

    def terminate(code: int, reason: str) -> None:
        level = logging.INFO if code == 0 else logging.WARNING
        logger.log(level, "infill-lsp exits (%d): %s", code, reason)
        cancel_all = getattr(server, "cancel_all_jobs", None)
        if cancel_all is not None:
            cancel_all()
        for handler in logging.getLogger().handlers + logger.handlers:
            handler.flush()
        try:
            stdout.flush()
        except Exception:
            pass
        sys.stderr.flush()
        os._exit(code)

    server.protocol.set_writer(_Writer(stdout, terminate))
    session = Session(server, terminate)
    asyncio.run(_serve(stdin, session, terminate))


async def _serve(stdin: Any, session: Session, terminate: Callable[[int, str], None]) -> None:
    loop = asyncio.get_running_loop()
    done = asyncio.Event()

    def post(items: list[Frame | Skipped]) -> None:
        for item in items:
            session.take(item)

    def ended(reason: str) -> None:
        code = 0 if session.shut_down else 1
        terminate(code, reason)

    def read() -> None:  # in a daemon thread: a blocked read never keeps the process alive
        parser = FrameParser()
        fd = stdin.fileno()
        try:
            while True:
                timeout = STALL_S if parser.waiting() else None
                ready, _, _ = select.select([fd], [], [], timeout)
                if not ready:
                    loop.call_soon_threadsafe(post, parser.stalled())
                    continue
                data = os.read(fd, 1 << 16)
                if not data:
                    loop.call_soon_threadsafe(post, parser.end())
                    loop.call_soon_threadsafe(ended, "stdin was closed: the client is gone")
                    return
                loop.call_soon_threadsafe(post, parser.feed(data))
        except Exception as error:  # a read error: nothing more can come
            loop.call_soon_threadsafe(ended, f"cannot read stdin: {error}")

    threading.Thread(target=read, name="infill-stdin", daemon=True).start()
    await done.wait()
