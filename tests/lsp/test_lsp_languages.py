"""infill-lsp on TypeScript and Go documents (and a language it has no grammar for), over stdio.

A real server process with a tiny random model: actions are listed in each document's language
(its nodes, its syntax errors), resolved into edits of the span only; the languages setting
narrows what the server answers for; an unknown languageId is filled as text, said once.
"""

from __future__ import annotations

import asyncio

import lsp_support
import pytest
import pytest_lsp
from language_samples import SAMPLES
from lsp_support import SERVER, initialize_params, list_actions, tiny_model_dir
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient

# external: the language server, as another process
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.external]
PUBLISH = types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
NODE_KIND = "refactor.rewrite.infill.node"


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    """VS Code's capabilities, the tiny model, no fresh fills (quick)."""
    model = str(tiny_model_dir(tmp_path_factory))
    settings = {"modelPath": model, "threads": 1, "steps": 8, "freshFills": 0}
    await lsp_client.initialize_session(initialize_params("visual-studio-code", settings))
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, scope="module")
async def narrowed(lsp_client: LanguageClient):
    """The shipped model (never loaded: only listing) and infill turned on for Python and Go."""
    await lsp_client.initialize_session(initialize_params("neovim@v0.7.0", {"languages": ["python", "go"]}))
    yield
    await lsp_client.shutdown_session()


def position(text: str, offset: int) -> types.Position:
    """ASCII text: UTF-16 columns are characters."""
    line = text.count("\n", 0, offset)
    return types.Position(line=line, character=offset - (text.rfind("\n", 0, offset) + 1))


def apply(text: str, edits) -> str:
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        a = starts[edit.range.start.line] + edit.range.start.character
        b = starts[edit.range.end.line] + edit.range.end.character
        text = text[:a] + edit.new_text + text[b:]
    return text


async def within(future, seconds: float = 10.0):
    return await asyncio.wait_for(future, seconds)


@pytest.mark.parametrize(("name", "language_id", "needle", "title"), [
    ("typescript", "typescript", "for (const shape", "Infill: fill statement on line 17"),
    ("go", "go", "return math.Sqrt(dx", "Infill: fill statement on line 17"),
])  # fmt: skip
async def test_actions_are_listed_and_resolved_in_the_document_s_language(
    client: LanguageClient, name, language_id, needle, title
):
    file_name, source, _ = SAMPLES[name]
    uri = f"file:///project/{file_name}"
    published = client.wait_for_notification(PUBLISH)
    lsp_support.open_document(client, uri, source, language_id)
    params = await within(published)
    assert params.uri == uri and list(params.diagnostics) == []  # valid in its own language

    cursor = source.index(needle) + 2
    listed = await list_actions(client, uri, position(source, cursor))
    [node] = [action for action in listed if action.kind == NODE_KIND]
    assert node.title == title
    start, end = node.data["start"], node.data["end"]
    assert source[start:end].strip().startswith(needle)
    resolved = await client.code_action_resolve_async(node)
    [document_edit] = resolved.edit.document_changes
    assert document_edit.text_document.version == 1
    filled = apply(source, document_edit.edits)
    assert filled.startswith(source[:start]) and filled.endswith(source[end:])

    selection = (source.index(needle), source.index(needle) + len(needle))
    listed = await list_actions(client, uri, position(source, selection[0]), position(source, selection[1]))
    assert listed[0].title == "Infill: fill selection"
    resolved = await client.code_action_resolve_async(listed[0])
    filled = apply(source, resolved.edit.document_changes[0].edits)
    assert filled.startswith(source[: selection[0]]) and filled.endswith(source[selection[1] :])


async def test_syntax_errors_are_those_of_the_document_s_grammar(client: LanguageClient):
    uri = "file:///project/broken.ts"
    text = "function f(x: number): number {\n  return (x +;\n}\n"
    published = client.wait_for_notification(PUBLISH)
    lsp_support.open_document(client, uri, text, "typescript")
    params = await within(published)
    assert params.diagnostics and all(d.range.start.line == 1 for d in params.diagnostics)
    listed = await list_actions(client, uri, types.Position(line=1, character=12))
    assert listed[0].kind == "quickfix" and listed[0].title.startswith("Infill: fix syntax error")


async def test_an_unknown_language_is_filled_as_text_and_said_once(client: LanguageClient):
    text = "IDENTIFICATION DIVISION.\nPROGRAM-ID. HELLO.\n"
    shown = len(client.messages)
    for index in range(2):
        uri = f"file:///project/hello{index}.cob"
        lsp_support.open_document(client, uri, text, "cobol")
        start, end = types.Position(line=1, character=0), types.Position(line=1, character=10)
        listed = await list_actions(client, uri, start, end)
        kinds = [action.kind.rsplit(".", 1)[-1] for action in listed]
        assert kinds == ["selection", "fix", "alternatives"]  # no nodes, statements or docs
    said = [m.message for m in client.messages[shown:] if "filled as text" in m.message]
    assert len(said) == 1 and "'cobol'" in said[0]
    assert "file:///project/hello0.cob" not in client.diagnostics


async def test_the_languages_setting_narrows_what_the_server_answers_for(narrowed: LanguageClient):
    _, go_source, _ = SAMPLES["go"]
    _, ts_source, _ = SAMPLES["typescript"]
    lsp_support.open_document(narrowed, "file:///project/shapes.ts", ts_source, "typescript")
    with pytest.raises(JsonRpcInvalidParams, match="turns infill on for python, go only"):
        await list_actions(narrowed, "file:///project/shapes.ts", types.Position(line=1, character=0))
    shown = len(narrowed.messages)
    lsp_support.open_document(narrowed, "file:///project/geometry.go", go_source, "go")
    cursor = position(go_source, go_source.index("dx :="))
    listed = await list_actions(narrowed, "file:///project/geometry.go", cursor)
    assert any(action.kind == NODE_KIND for action in listed)
    said = [m.message for m in narrowed.messages[shown:]]
    assert said == ["infill: the shipped model was trained on Python only; for useful Go text use a "
                    "published model (--model, docs/models.md). Filling anyway"]  # fmt: skip
    assert "file:///project/shapes.ts" not in narrowed.diagnostics
