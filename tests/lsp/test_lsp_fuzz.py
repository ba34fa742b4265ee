"""Fuzz: the real infill-lsp, driven over stdio by a seeded random client that gets everything wrong.

One test runs a few hundred generated cases (bounded in count and in wall time) against
``python -m lsp_server.server`` (tests/lsp_raw.py, the tiny random model, so that fills are
fast). A case is one of :data:`CASES`: broken frames, params of the wrong JSON type, positions
out of range, didOpen/didChange with random versions and texts, listing and resolving code
actions (stale, tampered, cancelled), ``$/cancelRequest`` at random times, unknown methods, and
now and then the end of the session. After every case the server must either answer a probe
(a code action listing on a document no case touches) in time (:data:`PROBE_TIMEOUT_S`), or have
exited by itself with a log line on stderr; then a fresh server takes the remaining cases.

Invariants over the whole run:

- **Exactly one response per request.** Every request we sent that is syntactically valid
  JSON-RPC (a JSON object with ``"jsonrpc": "2.0"``, a string ``method`` and an integer or
  string ``id``, its body bytes intact) gets exactly one response, whatever its header looked
  like (any case, LF line ends, a wrong, non-numeric or huge ``Content-Length``: the transport
  resynchronises and answers). A request whose body we corrupted or cut may be answered
  (when its id can be salvaged) but never twice. Requests still running when the session ends
  (``exit``) are exempt. No response may carry an id we never sent.
- **No edit outside the selection.** Every edit a resolve (or a listing, for the alternatives
  it returns resolved) answers with is applied, by an independent UTF-16 implementation, to the
  text (version and content) the action was listed against: everything outside the action's
  span is byte-identical. And an edit only comes for a document that is still at that version
  with that text, as far as the client knows: otherwise the answer must be an error
  (ContentModified).
- **No internal errors, no bare errors.** InternalError (-32603) means an exception escaped a
  handler; an error whose message is pygls' default ("Request Failed") one raised without a
  reason. Either is a bug.

The seed is printed in every assertion message; ``INFILL_FUZZ_SEED`` replays another run.
"""

from __future__ import annotations

import json
import os
import random
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import utf16_client
from lsp_raw import RawServer
from lsp_support import tiny_model_dir

pytestmark = pytest.mark.external  # the language server, as another process

SEED = int(os.environ.get("INFILL_FUZZ_SEED", "20240611"))
MAX_CASES = 300
MAX_SECONDS = 60.0
PROBE_TIMEOUT_S = 1.0
"""How long the probe after a case may take (a listing runs on the event loop, never waits for
the model). Its first try may be eaten by the broken bytes of the case before it: a second try
gets :data:`PROBE_RETRY_S`."""
PROBE_RETRY_S = 10.0
"""How long the second try may take: while the worker thread loads the model for the first time,
importing the engine holds the GIL for up to about a second at a time (loading torch's library,
garbage collections among the import's objects: 0.4-1.1 s on a 2-core Zen 3 machine), and the
event loop waits that long. A server that does not answer in this time is stuck."""
DRAIN_TIMEOUT_S = 60.0
"""How long the end of a session waits for the answers still owed (fills queue in one thread)."""

MAIN, OTHER, PROBE = "file:///fuzz/main.py", "file:///fuzz/other.py", "file:///fuzz/probe.py"
PLAIN, UNOPENED = "file:///fuzz/notes.txt", "file:///fuzz/never-opened.py"
TAMPERED = "file:///fuzz/tampered.py"  # only ever in tampered action data: never open
FUZZED_URIS = [MAIN, MAIN, MAIN, OTHER, PLAIN, UNOPENED]  # the probe document is never fuzzed
PROBE_TEXT = "def probe(x):\n    return x + 1\n"

INTERNAL_ERROR = -32603
BARE_MESSAGES = {"", None, "Request Failed", "Internal Error", "Invalid Params"}
"""pygls' default messages: an error raised without saying why (see the invariants)."""

# Pieces of Python and of trouble: line endings of every kind, tabs, astral characters, a syntax
# error, a lone surrogate (JSON may carry one as an escape).
PIECES = [
    "def f(a, b):\n    return a + b\n",
    "class C:\r\n\tdef m(self):\r\n\t\treturn 1\r\n",
    "x = '😀🐍'  # 𝔘𝔫𝔦\n",
    "y = [1, 2,\n",  # unclosed
    "if x:\r    pass\r",
    "print('é☕')",  # no final newline
    "\n",
    "\r\n",
    "\t# 日本語\n",
    "z = (\n",
    "s = '\ud83d'\n",
    "\x0c\n",
    "def g(:\n    pass\n",
]


def random_text(rng: random.Random) -> str:
    text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8)))
    if rng.random() < 0.15:
        text = "\ufeff" + text  # a UTF-8 BOM, as an editor may keep it in the text
    return text


# ------------------------------------------------------------------------------------ the test


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory)


def test_the_server_survives_a_fuzzing_client(tiny_model):
    fuzz = Fuzz(random.Random(SEED), tiny_model)
    started = time.monotonic()
    try:
        while fuzz.cases < MAX_CASES and time.monotonic() - started < MAX_SECONDS:
            fuzz.run_case()
        fuzz.end_session()
    finally:
        fuzz.close()
    seconds = time.monotonic() - started
    print(
        f"fuzz (seed {SEED}): {fuzz.cases} cases in {seconds:.1f} s, {len(fuzz.requests)} requests, "
        f"{fuzz.edits_checked} edits checked, {fuzz.sessions} server(s), {fuzz.exits} exit(s) by "
        f"request, {fuzz.self_exits} by itself; cases: {dict(sorted(fuzz.kinds.items()))}; "
        f"answers: {dict(sorted(fuzz.answers.items()))}; slowest probe {fuzz.slowest_probe:.2f} s"
    )
    assert fuzz.cases >= 100, f"seed {SEED}: only {fuzz.cases} cases ran in {seconds:.1f} s"
    assert fuzz.edits_checked > 0, f"seed {SEED}: no resolve answered with an edit to check"


# ------------------------------------------------------------------------------------ bookkeeping


@dataclass
class Listed:
    """The text an action was listed against, and the span it may edit (from the data sent)."""

    uri: str
    version: Any
    text: str
    start: int
    end: int


@dataclass
class Sent:
    """A request we sent: whether it must be answered, and what its answer may edit."""

    msg_id: Any
    method: str
    must_answer: bool
    server: RawServer
    case: int
    listed: Listed | None = None  # a resolve: what its edit is checked against
    churn: int = 0  # document notifications sent before it (to tell whether one came since)
    checked: bool = False  # its answer came and was checked


@dataclass
class Doc:
    """What the client knows of a document on the server (mirrors lsp_server.integrity)."""

    version: Any
    text: str
    in_sync: bool = True
    known: bool = True  # False: a notification of the wrong shape may or may not have applied


@dataclass
class Fuzz:
    """The random client: runs cases against one server at a time and checks every answer."""

    rng: random.Random
    model: Any
    server: RawServer | None = None
    docs: dict[str, Doc] = field(default_factory=dict)
    requests: dict[Any, Sent] = field(default_factory=dict)
    listed: list[tuple[dict, Listed]] = field(default_factory=list)  # actions listed, to resolve
    churn: int = 0  # document notifications sent so far
    cases: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    sessions: int = 0
    exits: int = 0
    self_exits: int = 0
    edits_checked: int = 0
    exit_sent: bool = False
    exempt: bool = False  # exit came while requests ran: those may go unanswered
    next_id: int = 0
    case_name: str = ""
    answers: dict[str, int] = field(default_factory=dict)  # "result" or the error code -> count
    slowest_probe: float = 0.0  # seconds

    # ------------------------------------------------------------ a case

    def run_case(self) -> None:
        if self.server is None:
            self.start_session()
        name, case = self.rng.choices(CASES, weights=[weight for _, _, weight in CASES])[0][:2]
        self.cases += 1
        self.kinds[name] = self.kinds.get(name, 0) + 1
        self.case_name = name
        case(self)
        self.collect()
        if self.exit_sent:
            self.end_session()
            return
        self.check_alive()

    def where(self) -> str:
        tail = self.server.tail() if self.server is not None else ""
        return f"seed {SEED}, case {self.cases} ({self.case_name}); server stderr:\n{tail}"

    def check_alive(self) -> None:
        """A probe is answered in time, or the process exited by itself and said why."""
        server = self.server
        assert server is not None
        for timeout in (PROBE_TIMEOUT_S, PROBE_RETRY_S):  # the first may be eaten by broken bytes
            answer = self.probe(server, timeout)
            if answer is not None and "result" in answer:
                return
            if server.process.poll() is not None:
                break
        time.sleep(0.3)
        assert server.process.poll() is not None, f"the server is alive but does not answer; {self.where()}"
        assert "infill-lsp exits" in server.tail(), f"the server died without a log line; {self.where()}"
        self.self_exits += 1
        self.end_session(exited=True)

    def probe(self, server: RawServer, timeout: float) -> dict | None:
        msg_id = server.request_nowait("textDocument/codeAction", code_action_params(PROBE, 1, 4, 1, 8))
        sent = time.monotonic()
        try:
            answer = server.wait_response(msg_id, timeout)
        except TimeoutError:
            return None
        self.slowest_probe = max(self.slowest_probe, time.monotonic() - sent)
        return answer

    # ------------------------------------------------------------ sessions

    def start_session(self) -> None:
        self.server = RawServer()
        self.sessions += 1
        self.exit_sent, self.exempt = False, False
        capabilities = {"workspace": {"workspaceEdit": {"documentChanges": self.rng.random() < 0.7}}}
        if self.rng.random() < 0.3:
            capabilities["workspace"]["workspaceEdit"]["changeAnnotationSupport"] = {}
        options = {"modelPath": str(self.model), "threads": 1, "steps": 4, "alternatives": 3}
        self.server.initialize(options, capabilities)
        self.docs, self.listed = {}, []
        self.server.open(PROBE, PROBE_TEXT)
        self.open_doc(MAIN, 1, random_text(self.rng) or PROBE_TEXT)

    def end_session(self, exited: bool = False) -> None:
        """Wait for the answers still owed, check them all, and stop this server."""
        server = self.server
        if server is None:
            return
        if not exited and not self.exit_sent:
            self.drain(server)
        self.collect()
        self.check_exactly_once(server, exempt_outstanding=exited or self.exempt)
        server.close()
        self.server = None

    def drain(self, server: RawServer) -> None:
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        owed = [sent for sent in self.requests.values() if sent.server is server and sent.must_answer]
        for sent in owed:
            left = max(0.1, deadline - time.monotonic())
            try:
                server.wait_response(sent.msg_id, left)
            except TimeoutError:
                pass  # reported by check_exactly_once
        time.sleep(0.2)  # a second response would be right behind the first

    def check_exactly_once(self, server: RawServer, exempt_outstanding: bool) -> None:
        ours = {msg_id for msg_id, sent in self.requests.items() if sent.server is server}
        for msg_id, found in server.responses.items():
            if isinstance(msg_id, str) and msg_id.startswith("fz"):
                assert msg_id in ours, f"a response to {msg_id!r}, which was never sent; {self.where()}"
            assert msg_id is None or len(found) == 1, f"{len(found)} responses to {msg_id!r}; {self.where()}"
        for msg_id in ours:
            sent = self.requests[msg_id]
            count = len(server.responses.get(msg_id, []))
            if sent.must_answer and not exempt_outstanding:
                assert count == 1, (
                    f"request {msg_id!r} ({sent.method}, case {sent.case}) got {count} responses; "
                    f"{self.where()}"
                )

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    # ------------------------------------------------------------ sending

    def new_id(self) -> str:
        self.next_id += 1
        return f"fz{self.next_id}"

    def request(
        self, method: str, params: Any, must_answer: bool = True, listed: Listed | None = None
    ) -> str:
        """Send a well-framed request; its answer is checked when it comes."""
        msg_id = self.new_id()
        self.track(msg_id, method, must_answer, listed)
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not OMIT:
            message["params"] = params
        assert self.server is not None
        self.server.send(message)
        return msg_id

    def track(self, msg_id: Any, method: str, must_answer: bool, listed: Listed | None = None) -> None:
        assert self.server is not None
        self.requests[msg_id] = Sent(msg_id, method, must_answer, self.server, self.cases, listed, self.churn)

    def notify(self, method: str, params: Any) -> None:
        if method.startswith("textDocument/did"):
            self.churn += 1
        assert self.server is not None
        self.server.notify(method, params)

    def answer(self, msg_id: Any, timeout: float = 5.0) -> dict | None:
        assert self.server is not None
        try:
            response = self.server.wait_response(msg_id, timeout)
        except TimeoutError:
            return None
        self.collect()
        return response

    # ------------------------------------------------------------ documents (client side)

    def open_doc(self, uri: str, version: Any, text: str, language: str = "python") -> None:
        item = {"uri": uri, "languageId": language, "version": version, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": item})
        if uri == PLAIN:
            return
        if is_int32(version):
            self.docs[uri] = Doc(version, text)
        elif uri in self.docs:
            self.docs[uri].known = False  # refused by the transport: the old text stays

    def change_doc(self, uri: str, version: Any, text: str) -> None:
        params = {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}
        self.notify("textDocument/didChange", params)
        doc = self.docs.get(uri)
        if doc is None:
            return
        if not is_int32(version):
            doc.known = False  # refused by the transport (not an LSP integer)
        elif version > doc.version:  # taken: in sync again
            self.docs[uri] = Doc(version, text, known=doc.known)
        elif text != doc.text:  # refused: out of sync until a newer full text
            doc.in_sync = False

    def close_doc(self, uri: str) -> None:
        self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        self.docs.pop(uri, None)

    def current(self, uri: str) -> Doc | None:
        return self.docs.get(uri)

    # ------------------------------------------------------------ answers

    def collect(self) -> None:
        """Check every answer that has come in since the last call."""
        assert self.server is not None
        with self.server.lock:
            arrived = [(msg_id, found[0]) for msg_id, found in self.server.responses.items()]
        for msg_id, response in arrived:
            sent = self.requests.get(msg_id)
            if sent is None or sent.checked:
                continue
            sent.checked = True
            self.check_response(sent, response)

    def check_response(self, sent: Sent, response: dict) -> None:
        error = response.get("error")
        outcome = "result" if error is None else str(error.get("code"))
        self.answers[outcome] = self.answers.get(outcome, 0) + 1
        if error is not None:
            assert error.get("message") not in BARE_MESSAGES, (
                f"{sent.method} {sent.msg_id!r} (case {sent.case}) answered an error that says not why: "
                f"{error}; {self.where()}"
            )
            assert error.get("code") != INTERNAL_ERROR, (
                f"{sent.method} {sent.msg_id!r} (case {sent.case}) answered InternalError: {error}; "
                f"{self.where()}"
            )
            return
        result = response.get("result")
        if sent.method == "codeAction/resolve" and sent.listed is not None and isinstance(result, dict):
            self.check_edit(result.get("edit"), sent.listed, stale_check=sent.churn == self.churn)
        if sent.method == "textDocument/codeAction" and isinstance(result, list):
            for action in result:
                self.remember_listed(sent, action)

    def remember_listed(self, sent: Sent, action: dict) -> None:
        """A listed action, with the text it was listed against (when that is known for sure)."""
        doc = self.current(MAIN)
        data = action.get("data") or {}
        if doc is None or sent.churn != self.churn or not doc.known or data.get("uri") != MAIN:
            return
        listed = Listed(MAIN, doc.version, doc.text, data.get("start"), data.get("end"))
        if action.get("edit") is not None:  # an alternative, already resolved
            self.check_edit(action["edit"], listed, stale_check=True)
        self.listed.append((action, listed))
        del self.listed[:-20]

    def check_edit(self, edit: Any, listed: Listed, stale_check: bool) -> None:
        """The edit, applied to the listed text, leaves every byte outside the span as it was."""
        if edit is None:
            return
        edits, version = edits_of(edit, listed.uri)
        assert version in (None, listed.version), (
            f"edit of version {version}, listed at {listed}; {self.where()}"
        )
        if not edits:
            return
        doc = self.current(listed.uri)
        if stale_check and (doc is None or doc.known):  # no document notification since the request
            assert (
                doc is not None and doc.in_sync and (doc.version, doc.text) == (listed.version, listed.text)
            ), (
                f"an edit for text the document no longer has: listed {listed.version}, now {doc}; "
                f"{self.where()}"
            )
        after = apply_utf16(listed.text, edits)
        before_span, after_span = listed.text[: listed.start], listed.text[listed.end :]
        fits = len(after) >= len(before_span) + len(after_span)
        assert fits and utf8(after).startswith(utf8(before_span)), (
            f"an edit changed text before its span {listed.start}-{listed.end}: {edits}; {self.where()}"
        )
        assert utf8(after).endswith(utf8(after_span)), (
            f"an edit changed text after its span {listed.start}-{listed.end}: {edits}; {self.where()}"
        )
        self.edits_checked += 1


OMIT = object()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_int32(value: Any) -> bool:
    """An LSP ``integer``: anything else makes the transport refuse the whole message."""
    return _is_int(value) and -(2**31) <= value < 2**31


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------------------------ edits, independently


def edits_of(edit: dict, uri: str) -> tuple[list[dict], Any]:
    """The text edits of ``uri`` in a WorkspaceEdit, and the version they are for (None: any)."""
    if edit.get("documentChanges") is not None:
        [change] = edit["documentChanges"]
        assert change["textDocument"]["uri"] == uri, edit
        return change["edits"], change["textDocument"]["version"]
    return edit.get("changes", {}).get(uri, []), None


def apply_utf16(text: str, edits: list[dict]) -> str:
    """Apply LSP text edits as a UTF-16 client does (tests/utf16_client.py)."""
    return utf16_client.apply(
        text,
        [(*lsp_position(e["range"]["start"]), *lsp_position(e["range"]["end"]), e["newText"]) for e in edits],
    )


def lsp_position(position: dict) -> tuple[int, int]:
    return position["line"], position["character"]


# ------------------------------------------------------------------------------------ params


def code_action_params(uri: str, line: int, character: int, end_line: int, end_character: int) -> dict:
    return {
        "textDocument": {"uri": uri},
        "range": {
            "start": {"line": line, "character": character},
            "end": {"line": end_line, "character": end_character},
        },
        "context": {"diagnostics": []},
    }


def random_range(fuzz: Fuzz, uri: str) -> tuple[int, int, int, int]:
    """A range inside the document (a selection or a cursor), in LSP lines and UTF-16 units."""
    doc = fuzz.current(uri)
    lines = utf16_client.lines(utf16_client.code_units(doc.text if doc is not None else PROBE_TEXT))
    a, b = sorted(fuzz.rng.randrange(len(lines)) for _ in range(2))
    ca = fuzz.rng.randint(0, lines[a][1] - lines[a][0])
    cb = fuzz.rng.randint(0, lines[b][1] - lines[b][0])
    if (a, ca) > (b, cb) or fuzz.rng.random() < 0.3:
        b, cb = a, ca  # a cursor
    return a, ca, b, cb


def wrong_value(rng: random.Random) -> Any:
    return rng.choice(
        [None, True, -1, 2**31, 2**63, 1.5, "", "x" * 50, "😀", [], [1, "a"], {}, {"line": 0}, -(2**31) - 1]
    )


def mutate(rng: random.Random, value: Any) -> Any:
    """``value`` with one leaf or subtree replaced by a value of another JSON type (or dropped)."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(sorted(value))
        copy = dict(value)
        if rng.random() < 0.15:
            del copy[key]
        else:
            copy[key] = mutate(rng, value[key])
        return copy
    if isinstance(value, list) and value and rng.random() < 0.8:
        index = rng.randrange(len(value))
        return [*value[:index], mutate(rng, value[index]), *value[index + 1 :]]
    return wrong_value(rng)


# ------------------------------------------------------------------------------------ the cases


def case_broken_frame(fuzz: Fuzz) -> None:
    """A code action request in a frame with one thing wrong; the body is intact unless said."""
    rng = fuzz.rng
    msg_id = fuzz.new_id()
    message = {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/codeAction"}
    message["params"] = code_action_params(MAIN, *random_range(fuzz, MAIN))
    body = json.dumps(message).encode()
    how = rng.choice(
        ["lowercase", "lf", "content-type", "abc", "shorter", "longer", "huge", "garbage-before",
         "split", "two-in-one", "corrupt-body", "truncated", "no-header"]
    )  # fmt: skip
    intact = how not in ("corrupt-body", "truncated", "no-header")
    fuzz.track(msg_id, message["method"], must_answer=intact)
    data = framed(rng, body, how)
    assert fuzz.server is not None
    if how == "split":
        for piece in split(rng, data):
            fuzz.server.send_raw(piece)
            time.sleep(rng.choice([0, 0, 0.001, 0.02]))
        return
    if how == "two-in-one":
        second = fuzz.new_id()
        fuzz.track(second, "fuzz/unknown", must_answer=True)
        other = json.dumps({"jsonrpc": "2.0", "id": second, "method": "fuzz/unknown"}).encode()
        data += b"Content-Length: %d\r\n\r\n" % len(other) + other
    fuzz.server.send_raw(data)


def framed(rng: random.Random, body: bytes, how: str) -> bytes:
    header = b"Content-Length: %d\r\n\r\n" % len(body)
    garbage = bytes(rng.choice(b'\x00\xff{}[]":,abc \t\r\n') for _ in range(rng.randint(1, 40)))
    return {
        "lowercase": b"content-length: %d\r\n\r\n" % len(body) + body,
        "lf": b"Content-Length: %d\n\n" % len(body) + body,
        "content-type": header[:-2]
        + b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
        + body,
        "abc": b"Content-Length: abc\r\n\r\n" + body,
        "shorter": b"Content-Length: %d\r\n\r\n" % max(0, len(body) - rng.randint(1, 30)) + body,
        "longer": b"Content-Length: %d\r\n\r\n" % (len(body) + rng.randint(1, 300)) + body,
        "huge": b"Content-Length: %d\r\n\r\n" % 10**12 + body,
        "garbage-before": garbage + b"\r\n" + header + body,
        "split": header + body,
        "two-in-one": header + body,
        "corrupt-body": header + corrupt(rng, body),
        "truncated": header + body[: rng.randrange(len(body))],
        "no-header": body,
    }[how]


def corrupt(rng: random.Random, body: bytes) -> bytes:
    """One byte of the params replaced (not of the id: a body that stays JSON is answered, and
    by the id it has then)."""
    at = rng.randrange(body.index(b'"params"'), len(body))
    return body[:at] + bytes([rng.choice(b'\x00\xff{"]')]) + body[at + 1 :]


def split(rng: random.Random, data: bytes) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 6))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def case_wrong_types(fuzz: Fuzz) -> None:
    """Valid params of a method, with one part of the wrong JSON type (or missing)."""
    rng = fuzz.rng
    uri = rng.choice(FUZZED_URIS)
    method, params = rng.choice(
        [
            ("textDocument/codeAction", code_action_params(uri, 0, 0, 1, 2)),
            ("codeAction/resolve", fuzz.listed[-1][0] if fuzz.listed else {"title": "x", "data": {}}),
            ("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": {"line": 0, "character": 0},
                "context": {"triggerKind": 1},
            }),
            ("textDocument/didOpen", {
                "textDocument": {"uri": uri, "languageId": "python", "version": 5, "text": "x = 1\n"}
            }),
            ("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": 50}, "contentChanges": [{"text": "y = 2\n"}]
            }),
            ("textDocument/didClose", {"textDocument": {"uri": uri}}),
            ("workspace/didChangeConfiguration", {"settings": {"infill": {"steps": 4}}}),
        ]
    )  # fmt: skip
    params = mutate(rng, params) if rng.random() < 0.9 else wrong_value(rng)
    if method.startswith("textDocument/did"):
        if uri in fuzz.docs:
            fuzz.docs[uri].known = False  # it may or may not have been taken
        fuzz.notify(method, params)
    elif method == "workspace/didChangeConfiguration":
        fuzz.notify(method, params)
    else:
        fuzz.request(method, params)


def case_positions_out_of_range(fuzz: Fuzz) -> None:
    rng = fuzz.rng
    doc = fuzz.current(MAIN)
    lines = len(utf16_client.lines(utf16_client.code_units(doc.text))) if doc is not None else 1
    bad = [-1, -(2**31), 2**31 - 1, 2**31, 2**32, lines, lines + 7, 10**6]
    values = [rng.choice(bad) if rng.random() < 0.5 else rng.randint(0, 3) for _ in range(4)]
    if rng.random() < 0.5:
        msg_id = fuzz.request("textDocument/codeAction", code_action_params(MAIN, *values))
    else:
        position = {"line": values[0], "character": values[1]}
        params = {"textDocument": {"uri": MAIN}, "position": position, "context": {"triggerKind": 1}}
        msg_id = fuzz.request("textDocument/inlineCompletion", params)
    fuzz.answer(msg_id, timeout=0.5)


def case_document_churn(fuzz: Fuzz) -> None:
    """didOpen / didChange / didClose with random versions (repeated, lower, huge) and texts."""
    rng = fuzz.rng
    uri = rng.choice([MAIN, MAIN, OTHER, PLAIN, UNOPENED])
    doc = fuzz.current(uri)
    now = doc.version if doc is not None else 1
    version = rng.choice([now, now + 1, now + 1, now - 1, 0, -5, 2**31 - 1, now + rng.randint(2, 100)])
    text = random_text(rng) if rng.random() < 0.7 or doc is None else doc.text
    what = rng.choices(["open", "change", "close", "incremental"], weights=[3, 8, 1, 1])[0]
    if what == "open":
        fuzz.open_doc(uri, version, text, "plaintext" if uri == PLAIN else "python")
    elif what == "change":
        fuzz.change_doc(uri, version, text)
    elif what == "close":
        fuzz.close_doc(uri)
    else:
        if doc is not None:
            if is_int32(version):
                doc.in_sync = False  # refused: the server syncs in full
            else:
                doc.known = False  # refused by the transport, or not
        change = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}
        params = {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{**change, "text": "#"}],
        }
        fuzz.notify("textDocument/didChange", params)


def case_list_and_resolve(fuzz: Fuzz) -> None:
    """List actions on the main document, then resolve one: now, after a change, tampered, or
    cancelled at a random moment."""
    rng = fuzz.rng
    doc = fuzz.current(MAIN)
    if doc is None or not (doc.in_sync and doc.known) or rng.random() < 0.1:  # mostly a fresh listing
        fuzz.open_doc(MAIN, rng.randint(1, 5), random_text(rng) or PROBE_TEXT)
    fuzz.answer(fuzz.request("textDocument/codeAction", code_action_params(MAIN, *random_range(fuzz, MAIN))))
    if not fuzz.listed:
        return
    action, listed = fuzz.listed[-1] if rng.random() < 0.85 else rng.choice(fuzz.listed)
    if rng.random() < 0.15:
        case_document_churn(fuzz)  # stale: the document may have changed since the listing
    action, listed = tampered(rng, action, listed) if rng.random() < 0.2 else (action, listed)
    msg_id = fuzz.request("codeAction/resolve", action, listed=listed)
    if rng.random() < 0.3:
        time.sleep(rng.choice([0, 0.01, 0.05, 0.2]))
        fuzz.notify("$/cancelRequest", {"id": msg_id})
    outstanding = [s for s in fuzz.requests.values() if s.method == "codeAction/resolve" and not s.checked]
    if len(outstanding) > 3 or rng.random() < 0.5:
        fuzz.answer(msg_id, timeout=10)  # keep the model's queue short


def tampered(rng: random.Random, action: dict, listed: Listed) -> tuple[dict, Listed]:
    """The action with its data changed as a buggy client might; the span checked is the one sent."""
    data = dict(action.get("data") or {})
    key = rng.choice(["version", "digest", "start", "end", "mode", "kind", "candidate", "uri", "data"])
    if key == "data":
        return {**action, "data": wrong_value(rng)}, listed
    length = len(listed.text)
    data[key] = {
        "version": rng.choice([None, -1, 0, (listed.version or 0) + 1, (listed.version or 0) - 1]),
        "digest": rng.choice(["0" * 32, "", "zz"]),
        "start": rng.choice([0, 1, length, length + 1, -1]),
        "end": rng.choice([0, length, length + 5, -3]),
        "mode": rng.choice(["fill", "node", "fix", "document", "alternative", "nope"]),
        "kind": rng.choice(["selection", "statement", "file", "definition", "lines", "other"]),
        "candidate": rng.choice([0, 1, 7, -1, None]),
        "uri": rng.choice([TAMPERED, PLAIN]),
    }[key]
    start, end = data.get("start"), data.get("end")
    span_ok = _is_int(start) and _is_int(end) and 0 <= start <= end <= length
    listed = Listed(listed.uri, listed.version, listed.text, start, end) if span_ok else listed
    if data.get("uri") != listed.uri:
        listed = Listed(listed.uri, object(), "", 0, 0)  # no edit may come for it: version never matches
    return {**action, "data": data}, listed


def case_cancel(fuzz: Fuzz) -> None:
    """$/cancelRequest of a request still running, one long answered, one never sent, or nonsense."""
    rng = fuzz.rng
    running = [s.msg_id for s in fuzz.requests.values() if not s.checked]
    target = rng.choice(
        [rng.choice(running) if running else "fz0", "fz0", rng.randint(-5, 10**6), None, [], {"x": 1}]
    )
    params = {"id": target} if rng.random() < 0.9 else wrong_value(rng)
    fuzz.notify("$/cancelRequest", params)


def case_unknown_method(fuzz: Fuzz) -> None:
    rng = fuzz.rng
    name = rng.choice(
        ["fuzz/nothing", "textDocument/hover", "$/setTrace", "$/unknown", "workspace/executeCommand", ""]
        + ["".join(rng.choice(string.printable) for _ in range(rng.randint(1, 20)))]
    )
    params = rng.choice([OMIT, None, {}, [], wrong_value(rng)])
    if rng.random() < 0.6:
        fuzz.answer(fuzz.request(name, params), timeout=0.5)
    else:
        assert fuzz.server is not None
        message = {"jsonrpc": "2.0", "method": name}
        if params is not OMIT:
            message["params"] = params
        fuzz.server.send(message)


def case_end_of_session(fuzz: Fuzz) -> None:
    """shutdown then exit (0), exit alone (1), or initialize again first (refused)."""
    rng = fuzz.rng
    if rng.random() < 0.3:
        fuzz.answer(fuzz.request("initialize", {"processId": None, "capabilities": {}}))
    if rng.random() < 0.7:
        fuzz.answer(fuzz.request("shutdown", OMIT), timeout=DRAIN_TIMEOUT_S)
        fuzz.drain(fuzz.server)
    else:
        fuzz.exempt = True  # exit at once: requests still running are dropped with the process
    fuzz.exit_sent = True
    fuzz.exits += 1
    assert fuzz.server is not None
    fuzz.server.notify("exit")
    assert fuzz.server.wait_exit() is not None, f"exit did not end the process; {fuzz.where()}"


CASES: list[tuple[str, Callable[[Fuzz], None], float]] = [
    ("broken frame", case_broken_frame, 20),
    ("wrong types", case_wrong_types, 15),
    ("positions out of range", case_positions_out_of_range, 8),
    ("document churn", case_document_churn, 12),
    ("list and resolve", case_list_and_resolve, 25),
    ("cancel", case_cancel, 6),
    ("unknown method", case_unknown_method, 6),
    ("end of session", case_end_of_session, 1),
]
