"""A raw stdio client for infill-lsp: sends any bytes, reads every frame the server writes.

pytest-lsp (pygls' client) can only send well-formed messages; these tests send broken ones.
Frames from the server are parsed here independently of lsp_server.transport (strict:
``Content-Length`` with CRLF, as the server writes them).
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any


class RawServer:
    """``python -m lsp_server.server`` over pipes; ``stderr`` is collected."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lsp_server.server", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self.messages: queue.Queue[dict] = queue.Queue()
        self.responses: dict[Any, list[dict]] = {}  # id -> every response with it
        self.notifications: list[dict] = []
        self.requests: list[dict] = []  # server -> client requests
        self.stderr: list[str] = []
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # ------------------------------------------------------------ reading

    def _read_stdout(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            line = stream.readline()
            if not line:
                return
            assert line.startswith(b"Content-Length: "), f"bad header from the server: {line!r}"
            length = int(line.split(b":")[1])
            while stream.readline() not in (b"\r\n", b""):
                pass
            message = json.loads(stream.read(length))
            with self.arrived:
                if "method" in message and "id" in message:
                    self.requests.append(message)
                    self._answer(message)
                elif "method" in message:
                    self.notifications.append(message)
                else:
                    self.responses.setdefault(message.get("id"), []).append(message)
                self.arrived.notify_all()

    def _answer(self, request: dict) -> None:
        """Answer the server's own requests (configuration: none; progress: ok)."""
        result: Any = None
        if request["method"] == "workspace/configuration":
            result = [None for _ in request["params"]["items"]]
        self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    def _read_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        for line in stream:
            self.stderr.append(line.decode("utf-8", "replace"))

    # ------------------------------------------------------------ writing

    def send_raw(self, data: bytes) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the server has gone: the caller checks how

    def send(self, message: Any) -> None:
        body = json.dumps(message).encode("utf-8")
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def request_nowait(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        msg_id = next(self.ids) if msg_id is None else msg_id
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    def wait_response(self, msg_id: Any, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while msg_id not in self.responses:
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None and msg_id not in self.responses:
                    if self.process.poll() is not None:
                        time.sleep(0.1)  # the last frames may still be in the pipe
                        if msg_id in self.responses:
                            break
                    raise TimeoutError(f"no response to {msg_id!r} in {timeout} s; stderr: {self.tail()}")
                self.arrived.wait(min(left, 0.1))
            return self.responses[msg_id][0]

    def request(self, method: str, params: Any = None, timeout: float = 10.0) -> dict:
        return self.wait_response(self.request_nowait(method, params), timeout)

    # ------------------------------------------------------------ session

    def initialize(self, options: dict | None = None, capabilities: dict | None = None) -> dict:
        params = {"processId": None, "rootUri": None, "capabilities": capabilities or {}}
        if options is not None:
            params["initializationOptions"] = options
        answer = self.request("initialize", params, timeout=30)
        self.notify("initialized", {})
        return answer

    def open(self, uri: str, text: str, version: int = 1) -> None:
        item = {"uri": uri, "languageId": "python", "version": version, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": item})

    def change(self, uri: str, version: int, text: str) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    def wait_exit(self, timeout: float = 5.0) -> int | None:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def tail(self) -> str:
        return "".join(self.stderr[-20:])

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()  # type: ignore[union-attr]
            except Exception:
                pass

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
