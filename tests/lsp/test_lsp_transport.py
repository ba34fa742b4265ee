"""The stdio transport under a buggy client: frames, lifecycle, params, integrity (lsp_server.transport).

The parser is checked on its own (frames cut at every byte boundary); the rest drives the real
server process over pipes with raw bytes (tests/lsp_raw.py). No model runs here except where a
resolve must be answered: those use the tiny random model.
"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsp_raw import RawServer
from lsp_support import tiny_model_dir

from lsp_server.transport import MAX_FRAME_BYTES, Frame, FrameParser, Skipped, request_id_in

URI = "file:///project/t.py"
TEXT = "def area(w, h):\n    return w * h\n\n\ndef mean(values):\n    return sum(values) / len(values)\n"


def frame(
    message: dict, header: str = "Content-Length", eol: str = "\r\n", length: int | None = None
) -> bytes:
    body = json.dumps(message).encode()
    size = len(body) if length is None else length
    return f"{header}: {size}{eol}{eol}".encode() + body


REQUEST = {"jsonrpc": "2.0", "id": 7, "method": "textDocument/codeAction", "params": {"x": "é ☕"}}


def bodies(items: list[Frame | Skipped]) -> list[dict]:
    return [json.loads(item.body) for item in items if isinstance(item, Frame)]


# ------------------------------------------------------------------------------------ the parser


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(
        st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "id": st.integers(0, 10**6), "method": st.text(max_size=20)}
        ),
        min_size=1,
        max_size=8,
    ),
    cuts=st.lists(st.integers(1, 300), min_size=1, max_size=50),
    style=st.sampled_from(["Content-Length", "content-length", "CONTENT-LENGTH"]),
    eol=st.sampled_from(["\r\n", "\n"]),
    content_type=st.booleans(),
)
def test_well_formed_frames_come_out_whole_however_the_bytes_are_cut(
    messages, cuts, style, eol, content_type
):
    """Header names in any case, LF or CRLF, a Content-Type header or not: accepted (tolerant)."""
    extra = f"Content-Type: application/vscode-jsonrpc; charset=utf-8{eol}" if content_type else ""
    data = b""
    for message in messages:
        body = json.dumps(message).encode()
        data += f"{style}: {len(body)}{eol}{extra}{eol}".encode() + body
    parser, out, at = FrameParser(), [], 0
    for cut in cuts * (len(data) // max(1, sum(cuts)) + 1):
        out += parser.feed(data[at : at + cut])
        at += cut
        if at >= len(data):
            break
    out += parser.feed(data[at:]) + parser.end()
    assert bodies(out) == messages and all(isinstance(item, Frame) and item.note is None for item in out)


def test_a_bad_content_length_is_skipped_and_the_next_frame_read():
    parser = FrameParser()
    out = parser.feed(b"Content-Length: abc\r\n\r\n" + json.dumps(REQUEST).encode() + frame(REQUEST))
    assert [item.refuse is not None for item in out] == [True, False]
    assert bodies(out) == [REQUEST, REQUEST]  # the refused one is read to answer its id


def test_a_length_shorter_or_longer_than_the_body_resynchronises():
    parser = FrameParser()
    short = parser.feed(frame(REQUEST, length=10) + frame(REQUEST))
    assert bodies(short) == [REQUEST, REQUEST] and "shorter" in short[0].note
    long = parser.feed(frame(REQUEST, length=500) + frame(REQUEST))
    assert bodies(long) == [REQUEST, REQUEST] and "next frame starts" in long[0].note
    # A length too long and nothing after it: the body is taken when the stream stalls.
    assert parser.feed(frame(REQUEST, length=500)) == [] and parser.waiting()
    stalled = parser.stalled()
    assert bodies(stalled) == [REQUEST] and "stopped after" in stalled[0].note


def test_a_huge_length_is_refused_without_reading_it():
    parser = FrameParser()
    out = parser.feed(b"Content-Length: 1000000000000\r\n\r\n" + json.dumps(REQUEST).encode())
    assert isinstance(out[0], Skipped) and str(MAX_FRAME_BYTES) in out[0].reason
    assert len(parser.buffer) < 1000  # nothing was allocated for it
    [skipped] = parser.stalled()  # its body is garbage: reported, and its id can be answered
    assert request_id_in(skipped.data) == 7
    assert bodies(parser.feed(frame(REQUEST))) == [REQUEST]


def test_garbage_between_frames_is_skipped():
    parser = FrameParser()
    out = parser.feed(b"hello\r\n\r\n" + frame(REQUEST) + b"\x00\xff junk" + frame(REQUEST))
    assert bodies(out) == [REQUEST, REQUEST]
    assert [type(item).__name__ for item in out] == ["Skipped", "Frame", "Skipped", "Frame"]


def test_only_requests_ids_are_salvaged():
    assert request_id_in(b'{"jsonrpc":"2.0","id":"a-1","method":"x","params":{"broken') == "a-1"
    assert request_id_in(b'{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":3}') is None
    assert request_id_in(b'{"jsonrpc":"2.0","method":"x","params":{"id":3}') is None  # inside params
    assert request_id_in(b'{"jsonrpc":"2.0","id":3,"result":{') is None  # a response


# ------------------------------------------------------------------------------------ the process


@pytest.fixture
def server():
    with RawServer() as raw:
        yield raw


def code_action(line: int = 0, character: int = 0, uri: str = URI) -> dict:
    position = {"line": line, "character": character}
    return {
        "textDocument": {"uri": uri},
        "range": {"start": position, "end": position},
        "context": {"diagnostics": []},
    }


def error_code(response: dict) -> int | None:
    return response.get("error", {}).get("code")


@pytest.mark.external
def test_lifecycle_errors_and_exit_codes(server: RawServer):
    assert error_code(server.request("textDocument/codeAction", code_action())) == -32002
    server.initialize()
    assert error_code(server.request("initialize", {"capabilities": {}})) == -32600
    assert server.request("shutdown")["result"] is None
    assert error_code(server.request("textDocument/codeAction", code_action())) == -32600
    server.notify("exit")
    assert server.wait_exit() == 0


@pytest.mark.external
def test_exit_without_shutdown_exits_1_with_a_log_line(server: RawServer):
    server.initialize()
    server.notify("exit")
    assert server.wait_exit() == 1
    time.sleep(0.2)
    assert "exit without shutdown" in server.tail()


@pytest.mark.external
def test_a_closed_stdin_ends_the_process_within_a_second(server: RawServer):
    server.initialize()
    started = time.monotonic()
    server.process.stdin.close()
    assert server.wait_exit(timeout=1.5) == 1
    assert time.monotonic() - started < 1.5
    time.sleep(0.2)
    assert "stdin was closed" in server.tail()


BAD_PARAMS = [
    None,  # a code action with no params
    {"textDocument": {"uri": URI}},  # no range
    {**code_action(), "range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}}},
    {
        **code_action(),
        "range": {"start": {"line": 2**31, "character": 0}, "end": {"line": 0, "character": 0}},
    },
    {
        **code_action(),
        "range": {"start": {"line": "one", "character": 0}, "end": {"line": 0, "character": 0}},
    },
    {**code_action(), "textDocument": {"uri": 5}},
    [1, 2, 3],
]


@pytest.mark.external
@pytest.mark.parametrize("params", BAD_PARAMS, ids=range(len(BAD_PARAMS)))
def test_params_that_do_not_fit_get_invalid_params(server: RawServer, params):
    server.initialize()
    server.open(URI, TEXT)
    answer = server.request("textDocument/codeAction", params)
    assert error_code(answer) == -32602 and answer["error"]["message"]
    assert "result" in server.request("textDocument/codeAction", code_action(1, 4))  # still serving


@pytest.mark.external
def test_malformed_frames_are_answered_or_skipped_and_the_server_goes_on(server: RawServer):
    server.initialize()
    server.open(URI, TEXT)
    good = {"jsonrpc": "2.0", "method": "textDocument/codeAction", "params": code_action(1, 4)}
    cases = [
        b"Content-Length: abc\r\n\r\n" + json.dumps({**good, "id": "abc"}).encode(),
        frame({**good, "id": "lower"}, header="content-length"),  # accepted
        frame({**good, "id": "lf"}, eol="\n"),  # accepted
        frame({**good, "id": "short"}, length=20),  # accepted: the body runs to the next frame
        b'Content-Length: 40\r\n\r\n{"jsonrpc":"2.0","id":"bad-json","method":',
        b"Content-Length: 1000000000000\r\n\r\n" + json.dumps({**good, "id": "huge"}).encode(),
        frame({"jsonrpc": "2.0", "id": 1.5, "method": "x"}),
        frame({"jsonrpc": "1.0", "id": "old", "method": "x"}),
        b"Content-Length: 2\r\n\r\n[]",
    ]
    for case in cases:
        server.send_raw(case)
        answer = server.request("textDocument/codeAction", code_action(1, 4), timeout=5)
        assert "result" in answer, answer
    time.sleep(0.5)
    got = {key: error_code(found[0]) for key, found in server.responses.items()}
    assert got["abc"] == -32600 and got["old"] == -32600
    assert got["lower"] is None and got["lf"] is None and got["short"] is None
    assert got["bad-json"] == -32700 and got["huge"] == -32700
    assert [error_code(r) for r in server.responses[None]] == [-32600, -32600]  # id 1.5, a batch
    assert all(len(found) == 1 for key, found in server.responses.items() if key is not None)
    assert "MemoryError" not in server.tail() and server.process.poll() is None


@pytest.mark.external
@pytest.mark.parametrize(
    "item",
    [{"text": None}, {"text": 5}, {"languageId": 5}, {"languageId": None}, {"uri": ["a"]}],
    ids=["text-null", "text-number", "language-number", "language-null", "uri-list"],
)
def test_a_string_field_that_is_no_string_is_refused_not_made_one(server: RawServer, item: dict):
    """Found by tests/lsp/test_lsp_fuzz.py: lsprotocol made ``"text": null`` the text "None" (so the
    server filled text the client never had) and kept ``"languageId": 5``, which crashed every
    later request on the document with InternalError. The didOpen is now ignored."""
    server.initialize()
    document = {"uri": URI, "languageId": "python", "version": 1, "text": TEXT, **item}
    server.notify("textDocument/didOpen", {"textDocument": document})
    answer = server.request("textDocument/codeAction", code_action(0, 0))
    assert error_code(answer) == -32602 and "not open" in answer["error"]["message"], answer
    server.open(URI, TEXT)
    server.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": item.get("text", 7)}]},
    )
    assert error_code(server.request("textDocument/codeAction", code_action(3, 0))) is None  # TEXT kept


@pytest.mark.external
def test_listing_right_after_initialize_is_never_cancelled(server: RawServer):
    server.initialize({"modelPath": "/nonexistent"})
    server.open(URI, TEXT)
    ids = [server.request_nowait("textDocument/codeAction", code_action(line % 6, 2)) for line in range(30)]
    answers = [server.wait_response(msg_id) for msg_id in ids]
    assert all("result" in answer and answer["result"] for answer in answers)


# ------------------------------------------------------------------------------------ integrity


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory)


def listed_fill(server: RawServer, uri: str = URI) -> dict:
    params = code_action(1, 4)
    params["range"]["end"] = {"line": 1, "character": 16}
    [fill] = [
        a for a in server.request("textDocument/codeAction", params)["result"] if a["data"]["mode"] == "fill"
    ]
    return fill


@pytest.mark.external
def test_a_version_reused_for_other_text_is_refused(server: RawServer, tiny_model):
    server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 4})
    server.open(URI, TEXT)
    fill = listed_fill(server)
    server.change(URI, 1, "# other text, same version\n" + TEXT)  # a buggy client
    answer = server.request("codeAction/resolve", fill)
    assert error_code(answer) == -32801, answer
    assert any("refused a didChange" in line for line in server.stderr)


@pytest.mark.external
def test_a_resolve_of_the_listed_text_with_a_reused_version_and_new_digest_is_refused(server, tiny_model):
    """The version matches, the text does not: the digest in the action's data catches it."""
    server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 4})
    server.open(URI, TEXT)
    fill = listed_fill(server)
    server.notify("textDocument/didClose", {"textDocument": {"uri": URI}})
    server.open(URI, "# reopened with other text\n" + TEXT, version=1)
    answer = server.request("codeAction/resolve", fill)
    assert error_code(answer) == -32801 and "other text" in answer["error"]["message"]


@pytest.mark.external
def test_a_resolve_cancelled_while_the_model_loads_does_not_break_later_ones(server: RawServer, tiny_model):
    """Found by tests/lsp/test_lsp_fuzz.py: a $/cancelRequest during the first model load left the
    server believing the model was loaded; every later fill failed with a bare RequestFailed."""
    server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 4})
    server.open(URI, TEXT)
    fill = listed_fill(server)
    first = server.request_nowait("codeAction/resolve", fill)
    time.sleep(0.3)  # importing torch and loading take longer than this
    server.notify("$/cancelRequest", {"id": first})
    assert error_code(server.wait_response(first, timeout=60)) == -32800  # RequestCancelled
    answer = server.request("codeAction/resolve", fill, timeout=60)
    assert "result" in answer, answer


@pytest.mark.external
def test_alternatives_of_a_document_opened_again_with_other_text_are_dropped(server: RawServer, tiny_model):
    """Found by tests/lsp/test_lsp_fuzz.py: a didOpen of an open document (no didClose) with other
    text at the same version kept the alternatives sampled for the old text: the next listing
    offered edits computed for text the document no longer had."""
    server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 4, "alternatives": 3})
    server.open(URI, TEXT)
    params = code_action(1, 4)
    params["range"]["end"] = {"line": 1, "character": 16}
    listed = server.request("textDocument/codeAction", params)["result"]
    [sample] = [a for a in listed if a["data"]["mode"] == "alternative"]
    assert "result" in server.request("codeAction/resolve", sample, timeout=60)
    assert any("edit" in a for a in server.request("textDocument/codeAction", params)["result"])
    server.open(URI, "# opened again\n" + TEXT, version=1)
    assert not any("edit" in a for a in server.request("textDocument/codeAction", params)["result"])


@pytest.mark.external
def test_an_incremental_change_is_refused_and_the_document_is_out_of_sync(server: RawServer):
    server.initialize()
    server.open(URI, TEXT)
    change = {
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}},
        "text": "xyz",
    }
    server.notify(
        "textDocument/didChange", {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [change]}
    )
    assert error_code(server.request("textDocument/codeAction", code_action(1, 4))) == -32801
    server.change(URI, 3, TEXT)  # the full text with a newer version: in sync again
    assert "result" in server.request("textDocument/codeAction", code_action(1, 4))
    server.change(URI, 2, TEXT + "\n")  # backwards
    assert error_code(server.request("textDocument/codeAction", code_action(1, 4))) == -32801
