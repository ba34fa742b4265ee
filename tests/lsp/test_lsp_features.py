"""infill-lsp end to end (pytest-lsp): diagnostics, quick fixes, configuration, inline completion.

A real server process over stdio with a tiny randomly initialised model: what is checked is the
protocol (what is published, what is offered, which settings the server uses), not the fills.
"""

from __future__ import annotations

import asyncio
import pathlib

import pytest
import pytest_lsp
from lsp_support import (
    SERVER,
    change_document,
    initialize_params,
    list_actions,
    open_document,
    tiny_model_dir,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient, client_capabilities

# external: the language server, as another process
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.external]

PUBLISH = types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
REQUEST_FAILED = -32803

VALID = "import math\n\n\ndef area(radius):\n    return math.pi * radius ** 2\n"
# "🐍" is two UTF-16 units: the diagnostic's columns must count them.
BROKEN = 'import math\n\n\ndef area(radius):\n    tag = "🐍"; return math.pi * radius ** = 2\n'


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    return tiny_model_dir(tmp_path_factory)


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, tiny_model):
    """VS Code's capabilities (configuration, progress); the configuration overrides ``steps``."""
    lsp_client.set_configuration({"steps": 5}, section="infill")
    options = {"modelPath": str(tiny_model), "threads": 1, "steps": 16}
    lsp_client.initialize_result = await lsp_client.initialize_session(
        initialize_params("visual-studio-code", options)
    )
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, loop_scope="module")
async def unconfigurable_client(lsp_client: LanguageClient, tmp_path):
    """A client that cannot answer workspace/configuration, started with a model that is not there."""
    capabilities = client_capabilities("visual-studio-code")
    capabilities.workspace.configuration = False
    options = {"modelPath": str(tmp_path / "no-model-here"), "threads": 1}
    await lsp_client.initialize_session(initialize_params(capabilities, options))
    yield
    await lsp_client.shutdown_session()


# ------------------------------------------------------------------------------------ helpers


async def within(notification, seconds: float = 30):
    """A notification awaited with a deadline: a server that never sends it fails, not hangs."""
    return await asyncio.wait_for(notification, seconds)


def utf16_column(line: str, prefix_end: int) -> int:
    return len(line[:prefix_end].encode("utf-16-le")) // 2


async def steps_cap_of_a_fill(client: LanguageClient, uri: str, text: str = VALID) -> int:
    """Resolve a fill and read the step cap the server used from its progress ("step 1/N")."""
    before = set(client.progress_reports)
    line = text.splitlines()[-1]
    [action, *_] = await list_actions(
        client, uri, types.Position(line=4, character=4), types.Position(line=4, character=len(line))
    )
    await client.code_action_resolve_async(action)
    [token] = set(client.progress_reports) - before
    first_report = next(r for r in client.progress_reports[token] if r.kind == "report")
    return int(first_report.message.split()[2].split("/")[1].rstrip(","))


# ------------------------------------------------------------------------------------ diagnostics


async def test_syntax_errors_are_published_with_the_version_and_cleared_when_fixed(client: LanguageClient):
    uri = "file:///project/diagnostics.py"
    published = client.wait_for_notification(PUBLISH)
    open_document(client, uri, BROKEN)
    params = await within(published)
    assert (params.uri, params.version) == (uri, 1)
    [diagnostic] = params.diagnostics
    line = BROKEN.splitlines()[4]
    column = utf16_column(line, line.index("= 2"))
    assert diagnostic.range == types.Range(
        start=types.Position(line=4, character=column), end=types.Position(line=4, character=column + 1)
    )
    assert diagnostic.source == "infill" and diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.message == 'syntax error: unexpected "="'

    published = client.wait_for_notification(PUBLISH)
    change_document(client, uri, 2, BROKEN.replace("** = 2", "** (2"))  # still broken, elsewhere
    params = await within(published)
    assert params.version == 2 and params.diagnostics and params.diagnostics != [diagnostic]

    published = client.wait_for_notification(PUBLISH)
    change_document(client, uri, 3, VALID)
    params = await within(published)
    assert (params.version, list(params.diagnostics)) == (3, [])

    published = client.wait_for_notification(PUBLISH)
    change_document(client, uri, 4, BROKEN)
    assert (await within(published)).diagnostics
    published = client.wait_for_notification(PUBLISH)
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    params = await within(published)
    assert params.uri == uri and list(params.diagnostics) == []


async def test_no_diagnostics_for_other_languages(client: LanguageClient):
    published = client.wait_for_notification(PUBLISH)
    open_document(client, "file:///project/notes.txt", "this ( is not python\n", language="plaintext")
    open_document(client, "file:///project/after-notes.py", VALID)
    assert (await within(published)).uri == "file:///project/after-notes.py"  # the text file got none
    assert "file:///project/notes.txt" not in client.diagnostics


async def test_a_quick_fix_repairs_the_statement_around_the_error(client: LanguageClient):
    uri = "file:///project/quickfix.py"
    published = client.wait_for_notification(PUBLISH)
    open_document(client, uri, BROKEN)
    [diagnostic] = (await within(published)).diagnostics
    actions = await list_actions(
        client, uri, diagnostic.range.start, diagnostic.range.end, diagnostics=[diagnostic]
    )
    [fix] = [action for action in actions if action.kind == "quickfix"]
    assert actions[0] is fix and fix.is_preferred  # first: it is what the user most likely wants
    assert fix.title == "Infill: fix syntax error (repair statement on line 5)"
    assert list(fix.diagnostics) == [diagnostic]
    assert fix.data["mode"] == "fix" and fix.edit is None
    assert BROKEN[fix.data["start"] : fix.data["end"]] == "return math.pi * radius ** = 2"  # not `tag = ..`
    only_fixes = types.CodeActionContext(diagnostics=[diagnostic], only=[types.CodeActionKind.QuickFix])
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diagnostic.range, context=only_fixes
    )
    assert [a.kind for a in await client.text_document_code_action_async(params)] == ["quickfix"]

    resolved = await client.code_action_resolve_async(fix)
    [document_edit] = resolved.edit.document_changes
    assert document_edit.text_document.version == 1
    line = BROKEN.splitlines()[4]
    for edit in document_edit.edits:  # only the return statement changes (tiny model: no edit;
        # test_lsp_editing repairs with a model that flags tokens)
        assert edit.range.start.line == edit.range.end.line == 4
        assert edit.range.start.character >= utf16_column(line, line.index("return"))
        assert "<mask>" not in edit.new_text and "<null>" not in edit.new_text


# ------------------------------------------------------------------------------------ configuration


async def test_the_configuration_pulled_after_initialized_overrides_initialization_options(
    client: LanguageClient,
):
    open_document(client, "file:///project/configured.py", VALID)
    assert await steps_cap_of_a_fill(client, "file:///project/configured.py") == 5  # not 16


async def test_did_change_configuration_pulls_the_new_settings(client: LanguageClient):
    uri = "file:///project/reconfigured.py"
    open_document(client, uri, VALID)
    client.set_configuration({"steps": 7, "temperature": "hot"}, section="infill")
    warning = client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    shown = await within(warning)
    assert shown.type == types.MessageType.Warning and "temperature" in shown.message
    assert await steps_cap_of_a_fill(client, uri) == 7
    client.set_configuration({}, section="infill")  # back to initializationOptions
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    assert await steps_cap_of_a_fill(client, uri) == 16


async def test_without_configuration_support_the_notification_carries_the_settings(
    unconfigurable_client: LanguageClient, tiny_model
):
    client = unconfigurable_client
    uri = "file:///project/unconfigurable.py"
    open_document(client, uri, VALID)
    [action, *_] = await list_actions(client, uri, types.Position(line=4, character=4))
    for _ in range(2):  # the missing model is shown once; every fill fails, the server goes on
        with pytest.raises(JsonRpcException) as failed:
            await client.code_action_resolve_async(action)
        assert failed.value.code == REQUEST_FAILED and "cannot load the model" in failed.value.message
    [shown] = [m for m in client.messages if m.type == types.MessageType.Error]
    assert "no-model-here" in shown.message

    settings = {"infill": {"modelPath": str(tiny_model), "steps": 4}, "python": {"other": 1}}
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))
    assert await steps_cap_of_a_fill(client, uri) == 4  # the new model loads and fills


# ------------------------------------------------------------------------------------ inline completion


async def test_inline_completion_is_advertised_and_inserts_at_the_cursor(client: LanguageClient):
    assert client.initialize_result.capabilities.inline_completion_provider is not None
    uri = "file:///project/inline.py"
    text = "import math\n\n\ndef area(radius):\n    return \n\n\nprint(area(2))\n"
    open_document(client, uri, text)
    cursor = types.Position(line=4, character=len("    return "))
    params = types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=cursor,
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
    )
    result = await client.text_document_inline_completion_async(params)
    [item] = result.items  # temperature 0: one completion
    assert item.range == types.Range(start=cursor, end=cursor)
    assert isinstance(item.insert_text, str) and item.insert_text.strip()
    assert "<mask>" not in item.insert_text and "<null>" not in item.insert_text


async def test_inline_completion_errors(client: LanguageClient):
    params = types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri="file:///project/never-opened.py"),
        position=types.Position(line=0, character=0),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
    )
    with pytest.raises(JsonRpcException, match="not open"):
        await client.text_document_inline_completion_async(params)
    open_document(client, "file:///project/short.py", "x = 1\n")
    params.text_document.uri = "file:///project/short.py"
    params.position = types.Position(line=9, character=0)
    with pytest.raises(JsonRpcException, match="past the end"):
        await client.text_document_inline_completion_async(params)
