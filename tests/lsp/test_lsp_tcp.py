"""infill-lsp over TCP (`--tcp --port`): a raw JSON-RPC client on a socket, framed by hand."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
from lsp_support import tiny_model_dir

pytestmark = pytest.mark.external  # the language server, as another process

SOURCE = "def area(w, h):\n    return w * h\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Connection:
    """Content-Length framed JSON-RPC over one socket (the LSP base protocol)."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer, self.next_id = sock, b"", 0

    def send(self, method: str, params: dict | None = None, request: bool = True) -> int | None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return message.get("id")

    def receive(self) -> dict:
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._read()
        header, rest = self.buffer.split(b"\r\n\r\n", 1)
        fields = dict(line.split(b":", 1) for line in header.split(b"\r\n"))
        length = int({k.strip().lower(): v for k, v in fields.items()}[b"content-length"])
        while len(rest) < length:
            rest += self._read()
        self.buffer = rest[length:]
        return json.loads(rest[:length])

    def response_to(self, request_id: int) -> dict:
        while True:
            message = self.receive()
            if message.get("id") == request_id and "method" not in message:
                return message

    def _read(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        return chunk


def connect(port: int, server: subprocess.Popen) -> socket.socket:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read().decode()
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=60)
        except OSError:
            time.sleep(0.2)
    raise TimeoutError("infill-lsp did not listen")


def test_the_server_answers_over_tcp_and_exits_when_told(model):
    port = free_port()
    command = [sys.executable, "-m", "lsp_server.server", "--tcp", "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with connect(port, server) as sock:
            rpc = Connection(sock)
            init = rpc.response_to(rpc.send("initialize", {
                "processId": None, "rootUri": None, "capabilities": {},
                "initializationOptions": {"modelPath": str(model)},
            }))  # fmt: skip
            capabilities = init["result"]["capabilities"]
            assert capabilities["codeActionProvider"]["resolveProvider"] is True
            rpc.send("initialized", {}, request=False)
            uri = "file:///tmp/area.py"
            document = {"uri": uri, "languageId": "python", "version": 1, "text": SOURCE}
            rpc.send("textDocument/didOpen", {"textDocument": document}, request=False)

            listed = rpc.response_to(rpc.send("textDocument/codeAction", {
                "textDocument": {"uri": uri},
                "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 16}},
                "context": {"diagnostics": []},
            }))  # fmt: skip
            fill = next(a for a in listed["result"] if a["title"] == "Infill: fill selection")
            assert "edit" not in fill  # listing is instant; the model runs on resolve
            resolved = rpc.response_to(rpc.send("codeAction/resolve", fill))["result"]
            for change in resolved["edit"].get("changes", {}).get(uri, []):
                assert change["range"]["start"]["line"] == change["range"]["end"]["line"] == 1
            unknown = rpc.response_to(rpc.send("textDocument/codeAction", {
                "textDocument": {"uri": "file:///tmp/never-opened.py"},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                "context": {"diagnostics": []},
            }))  # fmt: skip
            assert "error" in unknown or unknown["result"] in (None, [])

            assert rpc.response_to(rpc.send("shutdown"))["result"] is None
            rpc.send("exit", request=False)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
