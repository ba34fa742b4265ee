"""infill-lsp end to end: a real server process over stdio, driven by pytest-lsp.

The server runs a tiny randomly initialised model (built once per session in a temp dir), so the
fills are gibberish; what is checked is the protocol: actions, versioned edits that touch only
the span, progress, cancellation, stale versions and errors.
"""

from __future__ import annotations

import asyncio
import hashlib
import pathlib
import re
import time

import lsp_support
import pytest
import pytest_lsp
from lsp_support import (
    CONTENT_MODIFIED,
    REQUEST_FAILED,
    SERVER,
    change_document,
    initialize_params,
    list_actions,
    slow_model_dir,
    tiny_model_dir,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcRequestCancelled
from pytest_lsp import LanguageClient, client_capabilities

# external: the language server, as another process
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.external]
PY_URI = "file:///project/example.py"

SOURCE = (
    "# Café ☕ and 🐍\r\n"
    "import math\r\n"
    "\r\n"
    "def area(radius):\r\n"
    '    """Area of a circle 🙂."""\r\n'
    "    return math.pi * radius ** 2\r\n"
    "\r\n"
    "def mean(values):\r\n"
    '    tag = "🐍"; total = sum(values)\r\n'
    "    return total / len(values)\r\n"
)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    return tiny_model_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def slow_model(tmp_path_factory) -> pathlib.Path:
    return slow_model_dir(tmp_path_factory)


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, tiny_model):
    options = {"modelPath": str(tiny_model), "threads": 1, "steps": 16}
    lsp_client.initialize_result = await lsp_client.initialize_session(
        initialize_params("visual-studio-code", options)
    )
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, scope="module")
async def slow_client(lsp_client: LanguageClient, slow_model):
    options = {"modelPath": str(slow_model), "threads": 1, "steps": 60}
    await lsp_client.initialize_session(initialize_params("visual-studio-code", options))
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, loop_scope="module")
async def broken_client(lsp_client: LanguageClient, tmp_path):
    options = {"modelPath": str(tmp_path / "no-model-here"), "threads": 1}
    await lsp_client.initialize_session(initialize_params("visual-studio-code", options))
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, loop_scope="module")
async def lsp_client_utf8(lsp_client: LanguageClient):
    """A client that prefers UTF-8 positions; only lists actions (no model is loaded)."""
    capabilities = client_capabilities("visual-studio-code")
    capabilities.general.position_encodings = [
        types.PositionEncodingKind.Utf8,
        types.PositionEncodingKind.Utf16,
    ]
    lsp_client.initialize_result = await lsp_client.initialize_session(initialize_params(capabilities, {}))
    yield
    await lsp_client.shutdown_session()


# ------------------------------------------------------------------------------------ helpers


def utf16_position(text: str, offset: int) -> types.Position:
    """Independent of lsp_server.positions: the text here has CRLF line ends only."""
    before = text[:offset]
    line = before.count("\r\n")
    column_text = before[before.rfind("\r\n") + 2 :] if line else before
    return types.Position(line=line, character=len(column_text.encode("utf-16-le")) // 2)


def apply_utf16(text: str, edits) -> str:
    """Apply LSP text edits as a UTF-16 client does."""
    lines = text.split("\r\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len((line + "\r\n").encode("utf-16-le")) // 2)
    data = text.encode("utf-16-le")
    ordered = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True)
    for edit in ordered:
        a = starts[edit.range.start.line] + edit.range.start.character
        b = starts[edit.range.end.line] + edit.range.end.character
        data = data[: 2 * a] + edit.new_text.encode("utf-16-le") + data[2 * b :]
    return data.decode("utf-16-le")


def open_document(client: LanguageClient, uri: str, text: str = SOURCE, language: str = "python") -> None:
    lsp_support.open_document(client, uri, text, language)


def node_actions(actions: list[types.CodeAction]) -> list[types.CodeAction]:
    """The "fill <node>" actions (a cursor also gets fix and docstring actions)."""
    return [action for action in actions if action.kind == "refactor.rewrite.infill.node"]


def span_of(needle: str) -> tuple[int, int]:
    start = SOURCE.index(needle)
    return start, start + len(needle)


async def resolve_and_apply(client: LanguageClient, action: types.CodeAction, uri: str, version: int) -> str:
    resolved = await client.code_action_resolve_async(action)
    assert resolved.title == action.title and resolved.edit is not None
    [document_edit] = resolved.edit.document_changes
    assert document_edit.text_document.uri == uri
    assert document_edit.text_document.version == version
    return apply_utf16(SOURCE, document_edit.edits)


# ------------------------------------------------------------------------------------ tests


async def test_initialize_advertises_resolvable_fill_actions(client: LanguageClient):
    capabilities = client.initialize_result.capabilities
    assert capabilities.code_action_provider.resolve_provider is True
    assert "refactor.rewrite.infill.selection" in capabilities.code_action_provider.code_action_kinds
    assert capabilities.position_encoding == types.PositionEncodingKind.Utf16
    assert capabilities.text_document_sync.change == types.TextDocumentSyncKind.Full
    assert client.initialize_result.server_info.name == "infill-lsp"


async def test_listing_is_unresolved_and_resolving_fills_only_the_selection(client: LanguageClient):
    uri = "file:///project/selection.py"
    open_document(client, uri)
    start, end = span_of("sum(values)")
    actions = await list_actions(client, uri, utf16_position(SOURCE, start), utf16_position(SOURCE, end))
    assert [(a.title, a.kind) for a in actions[:2]] == [
        ("Infill: fill selection", "refactor.rewrite.infill.selection"),
        ("Infill: fill statement on line 9", "refactor.rewrite.infill.node"),
    ]
    assert all(a.edit is None and a.command is None for a in actions)  # nothing computed yet
    digest = hashlib.blake2b(SOURCE.encode("utf-8"), digest_size=16).hexdigest()  # of the text listed
    expected = {"uri": uri, "version": 1, "kind": "selection", "start": start, "end": end, "mode": "fill"}
    assert actions[0].data == {**expected, "digest": digest}

    filled = await resolve_and_apply(client, actions[0], uri, version=1)
    assert filled.startswith(SOURCE[:start]) and filled.endswith(SOURCE[end:])


async def test_fill_node_at_cursor(client: LanguageClient):
    uri = "file:///project/node.py"
    open_document(client, uri)
    cursor = SOURCE.index("math.pi") + 2
    [action] = node_actions(await list_actions(client, uri, utf16_position(SOURCE, cursor)))
    assert action.kind == "refactor.rewrite.infill.node"
    assert action.title.startswith("Infill: fill expression on line 6")
    start, end = action.data["start"], action.data["end"]
    assert start <= cursor <= end and "\r\n" not in SOURCE[start:end]

    filled = await resolve_and_apply(client, action, uri, version=1)
    assert filled.startswith(SOURCE[:start]) and filled.endswith(SOURCE[end:])


async def test_progress_reports_denoising_steps(client: LanguageClient):
    uri = "file:///project/progress.py"
    open_document(client, uri)
    start, end = span_of("total / len(values)")
    before = set(client.progress_reports)
    [selection, *_] = await list_actions(
        client, uri, utf16_position(SOURCE, start), utf16_position(SOURCE, end)
    )
    await client.code_action_resolve_async(selection)
    [token] = set(client.progress_reports) - before
    begin, *reports, done = client.progress_reports[token]
    assert begin.kind == "begin" and begin.title == "Infill: fill selection" and begin.cancellable
    assert reports and all(r.kind == "report" for r in reports)
    fill = [r for r in reports if r.message.startswith("denoising step")]
    retries = reports[len(fill) :]  # a random model's fill may break the syntax: retried after
    assert fill and fill[0].message.startswith("denoising step 1/16")
    retry = r"syntax retry \d+: step \d+, \d+ masked"  # then fresh fills, with their own retries:
    fresh = r"fresh fill \d+: (denoising step \d+/\d+|syntax retry \d+: step \d+), \d+ masked"
    assert all(re.fullmatch(retry, r.message) or re.fullmatch(fresh, r.message) for r in retries)
    percentages = [r.percentage for r in reports]
    assert percentages == sorted(percentages) and all(p <= 99 for p in percentages)
    assert done.kind == "end" and done.message == "done"


async def test_a_stale_action_is_refused(client: LanguageClient):
    uri = "file:///project/stale.py"
    open_document(client, uri)
    start, end = span_of("math.pi * radius")
    [selection, *_] = await list_actions(
        client, uri, utf16_position(SOURCE, start), utf16_position(SOURCE, end)
    )
    change_document(client, uri, 2, "# edited meanwhile\r\n" + SOURCE)
    with pytest.raises(JsonRpcException) as refused:
        await client.code_action_resolve_async(selection)
    assert refused.value.code == CONTENT_MODIFIED and "version 1 -> 2" in refused.value.message


async def test_cancel_request_stops_the_fill_and_the_server_goes_on(client: LanguageClient):
    uri = "file:///project/cancel.py"
    open_document(client, uri)
    start, end = span_of("return math.pi * radius ** 2")
    [selection, *_] = await list_actions(
        client, uri, utf16_position(SOURCE, start), utf16_position(SOURCE, end)
    )
    pending = asyncio.ensure_future(
        client.protocol.send_request_async(types.CODE_ACTION_RESOLVE, selection, msg_id="fill-to-cancel")
    )
    await asyncio.sleep(0)  # the request is on its way: cancel it before the fill even starts
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="fill-to-cancel"))
    with pytest.raises(JsonRpcRequestCancelled):
        await pending
    filled = await resolve_and_apply(client, selection, uri, version=1)
    assert filled.startswith(SOURCE[:start]) and filled.endswith(SOURCE[end:])


async def test_bad_requests_get_errors_and_the_server_keeps_answering(client: LanguageClient):
    uri = "file:///project/bad.py"
    open_document(client, uri)
    open_document(client, "file:///project/notes.txt", "just some notes\r\n", language="plaintext")
    origin = types.Position(line=0, character=0)

    with pytest.raises(JsonRpcInvalidParams, match="unknown document"):
        await list_actions(client, "file:///project/never-opened.py", origin)
    with pytest.raises(JsonRpcInvalidParams, match="past the end"):
        await list_actions(client, uri, origin, types.Position(line=40, character=0))
    # plain text is filled as text: a selection, no nodes, fixes of statements or docstrings
    word = types.Position(line=0, character=4)
    as_text = await list_actions(client, "file:///project/notes.txt", origin, word)
    assert [action.title for action in as_text] == ["Infill: fill selection", "Infill: fix selection",
                                                    "Infill: fill selection (3 alternatives)"]  # fmt: skip
    foreign = types.CodeAction(title="not ours", data={"something": "else"})
    with pytest.raises(JsonRpcInvalidParams, match="lacks"):
        await client.code_action_resolve_async(foreign)
    past_end = types.CodeAction(title="past the end", data={"uri": uri, "version": 1, "kind": "selection"})
    past_end.data.update(start=5, end=10_000)
    with pytest.raises(JsonRpcException) as failed:
        await client.code_action_resolve_async(past_end)
    assert failed.value.code == REQUEST_FAILED

    actions = await list_actions(client, uri, types.Position(line=5, character=12))
    assert actions and actions[0].kind == "refactor.rewrite.infill.node"


async def test_a_model_that_cannot_load_is_shown_once_and_requests_fail(broken_client: LanguageClient):
    open_document(broken_client, PY_URI)
    [action] = node_actions(await list_actions(broken_client, PY_URI, types.Position(line=5, character=12)))
    # Loading (importing torch) takes seconds, in the worker thread: listing still answers at once.
    first = asyncio.ensure_future(broken_client.code_action_resolve_async(action))
    await asyncio.sleep(0)
    assert await list_actions(broken_client, PY_URI, types.Position(line=5, character=12))
    assert not first.done()
    with pytest.raises(JsonRpcException):
        await first
    for _ in range(2):
        with pytest.raises(JsonRpcException) as failed:
            await broken_client.code_action_resolve_async(action)
        assert failed.value.code == REQUEST_FAILED and "cannot load the model" in failed.value.message
    [shown] = broken_client.messages
    assert shown.type == types.MessageType.Error and "no-model-here" in shown.message
    assert await list_actions(broken_client, PY_URI, types.Position(line=5, character=12))


async def test_a_negotiated_utf8_encoding_is_used_for_positions(lsp_client_utf8: LanguageClient):
    result = lsp_client_utf8.initialize_result
    assert result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
    open_document(lsp_client_utf8, PY_URI)
    line = '    tag = "🐍"; total = sum(values)'
    start = line.index("sum")
    column = len(line[:start].encode("utf-8"))  # 26 bytes; 24 in UTF-16
    [action] = node_actions(
        await list_actions(lsp_client_utf8, PY_URI, types.Position(line=8, character=column))
    )
    assert SOURCE[action.data["start"] : action.data["end"]] == "sum"


# ------------------------------------------------------------------ fills long enough to interrupt

LONG_SOURCE = (
    "def long_function(value_0):\r\n"
    + "".join(f"    value_{i} = compute(value_{i - 1}, {i}) * 2\r\n" for i in range(1, 12))
    + "    return value_11\r\n"
)


async def start_long_fill(client: LanguageClient, uri: str, msg_id: str):
    """Open LONG_SOURCE, list, send the resolve of the body's statements; return once it is running."""
    item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=LONG_SOURCE)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
    [selection, *_] = await list_actions(
        client, uri, types.Position(line=1, character=0), types.Position(line=11, character=0)
    )
    tokens = set(client.progress_reports)
    pending = asyncio.ensure_future(
        client.protocol.send_request_async(types.CODE_ACTION_RESOLVE, selection, msg_id)
    )
    deadline = time.monotonic() + 60
    while not any(
        report.kind == "report"
        for token in set(client.progress_reports) - tokens
        for report in client.progress_reports[token]
    ):
        assert time.monotonic() < deadline, "the fill never reported a step"
        await asyncio.sleep(0.005)
    [token] = set(client.progress_reports) - tokens
    return pending, client.progress_reports[token]


async def test_cancel_while_denoising_stops_at_the_next_step(slow_client: LanguageClient):
    pending, progress = await start_long_fill(slow_client, "file:///project/long-cancel.py", "long-fill")
    slow_client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="long-fill"))
    with pytest.raises(JsonRpcRequestCancelled):
        await pending
    assert progress[-1].kind == "end" and progress[-1].message == "cancelled"
    steps_run = sum(report.kind == "report" for report in progress)
    assert steps_run < 60  # the cap: it did not run to the end
    # The worker is free again: the next fill runs (and the sampler stopped, or this would wait).
    started = len(progress)
    actions = await list_actions(
        slow_client, "file:///project/long-cancel.py", types.Position(line=12, character=11)
    )
    resolved = await slow_client.code_action_resolve_async(actions[0])
    assert resolved.edit is not None and len(progress) == started


async def test_an_edit_while_denoising_drops_the_result(slow_client: LanguageClient):
    uri = "file:///project/long-edit.py"
    pending, progress = await start_long_fill(slow_client, uri, "long-edit")
    # The server answers while the model runs in its worker thread.
    assert await list_actions(slow_client, uri, types.Position(line=12, character=11))
    assert not pending.done()
    change_document(slow_client, uri, 2, "# edited while the model ran\r\n" + LONG_SOURCE)
    with pytest.raises(JsonRpcException) as refused:
        await pending
    assert refused.value.code == CONTENT_MODIFIED and "version 1 -> 2" in refused.value.message
    assert progress[-1].kind == "end" and progress[-1].message == "done"  # it ran, then was dropped


async def test_distinct_actions_resolved_at_once_each_get_their_edit(slow_client: LanguageClient):
    """A client that resolves several listed actions at once (VS Code's executeCodeActionProvider
    with a resolve count) gets every edit: the resolves queue, none supersedes another."""
    uri = "file:///project/long-queue.py"
    older, progress = await start_long_fill(slow_client, uri, "queued-fill")
    [statement] = node_actions(await list_actions(slow_client, uri, types.Position(line=12, character=11)))
    newer = asyncio.ensure_future(slow_client.code_action_resolve_async(statement))
    first, second = await older, await newer
    assert first.edit is not None and second.edit is not None
    assert first.edit.document_changes and second.edit.document_changes
    assert progress[-1].kind == "end" and progress[-1].message == "done"


async def test_resolving_the_same_action_again_supersedes_the_running_one(slow_client: LanguageClient):
    uri = "file:///project/long-supersede.py"
    older, progress = await start_long_fill(slow_client, uri, "older-fill")
    [again, *_] = await list_actions(
        slow_client, uri, types.Position(line=1, character=0), types.Position(line=11, character=0)
    )
    newer = asyncio.ensure_future(slow_client.code_action_resolve_async(again))
    with pytest.raises(JsonRpcRequestCancelled, match="superseded"):
        await older
    assert progress[-1].kind == "end" and progress[-1].message == "cancelled"
    assert sum(report.kind == "report" for report in progress) < 60  # stopped early
    resolved = await newer
    assert resolved.edit is not None
    # Another document's fill does not supersede: both finish.
    other_uri = "file:///project/long-other.py"
    [statement] = node_actions(await list_actions(slow_client, uri, types.Position(line=12, character=11)))
    pending, _ = await start_long_fill(slow_client, other_uri, "other-fill")
    other = await slow_client.code_action_resolve_async(statement)  # the first document again
    assert other.edit is not None and (await pending).edit is not None
