"""Shared by the infill-lsp tests: tiny model directories (built once per session) and helpers.

The models are randomly initialised (their fills are gibberish): the LSP tests check the
protocol, not the quality.
"""

from __future__ import annotations

import pathlib
import sys

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from infill.text.languages import PYTHON
from lsp_server.actions import run_action, workspace_edit
from lsp_server.positions import UTF16, offset_to_position

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "lsp_server.server"])
CONTENT_MODIFIED, REQUEST_CANCELLED, REQUEST_FAILED = -32801, -32800, -32803

_built: dict[str, pathlib.Path] = {}


def tiny_model_dir(tmp_path_factory) -> pathlib.Path:
    """A randomly initialised InfillModel (hidden 32, 2 layers, context 128), 300-token tokenizer."""
    if "tiny" not in _built:
        import torch
        from checkpoints import tokenizer_texts

        from infill.models.native.model import InfillConfig, InfillModel
        from infill.models.native.tokenizer import train_tokenizer

        tokenizer = train_tokenizer(tokenizer_texts(), vocab_size=300)
        torch.manual_seed(0)
        config = InfillConfig(
            vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=2, num_heads=2, context_length=128
        )
        directory = tmp_path_factory.mktemp("tiny-model")
        InfillModel(config).save_pretrained(directory)
        tokenizer.save(directory)
        _built["tiny"] = directory
    return _built["tiny"]


def slow_model_dir(tmp_path_factory) -> pathlib.Path:
    """Bigger (hidden 128, 4 layers, context 512): a long fill runs ~1 s, long enough to interrupt."""
    if "slow" not in _built:
        import torch

        from infill.models.native.model import InfillConfig, InfillModel
        from infill.models.native.tokenizer import CodeTokenizer

        tiny = tiny_model_dir(tmp_path_factory)
        tokenizer = CodeTokenizer.load(tiny)
        torch.manual_seed(0)
        config = InfillConfig(
            vocab_size=tokenizer.vocab_size, hidden_size=128, num_layers=4, num_heads=4, context_length=512
        )
        directory = tmp_path_factory.mktemp("slow-model")
        InfillModel(config).save_pretrained(directory)
        tokenizer.save(directory)
        _built["slow"] = directory
    return _built["slow"]


def contrarian_model_dir(tmp_path_factory) -> pathlib.Path:
    """The tiny model with its final norm negated and scaled up (x -100): every visible token gets
    a probability near 0, so a repair (fix mode) flags as many tokens as it may and rewrites them.
    Random weights, still: it checks that fix actions repair (minimal edits), not what they write."""
    if "contrarian" not in _built:
        import torch

        from infill.models.native.model import InfillModel
        from infill.models.native.tokenizer import CodeTokenizer

        tiny = tiny_model_dir(tmp_path_factory)
        model = InfillModel.from_pretrained(tiny)
        with torch.no_grad():
            model.norm.weight.mul_(-100)
        directory = tmp_path_factory.mktemp("contrarian-model")
        model.save_pretrained(directory)
        CodeTokenizer.load(tiny).save(directory)
        _built["contrarian"] = directory
    return _built["contrarian"]


def initialize_params(capabilities: str | types.ClientCapabilities, options: dict) -> types.InitializeParams:
    if isinstance(capabilities, str):
        capabilities = client_capabilities(capabilities)
    return types.InitializeParams(capabilities=capabilities, initialization_options=options)


def open_document(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    item = types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))


def change_document(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def list_actions(
    client: LanguageClient,
    uri: str,
    start: types.Position,
    end: types.Position | None = None,
    diagnostics: list[types.Diagnostic] | None = None,
):
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=start, end=end or start),
        context=types.CodeActionContext(diagnostics=diagnostics or []),
    )
    return list(await client.text_document_code_action_async(params))


def offsets_to_range(text: str, start: int, end: int, encoding: str = UTF16) -> types.Range:
    """The LSP range of the characters ``[start, end)`` of ``text``."""
    return types.Range(
        start=offset_to_position(text, start, encoding), end=offset_to_position(text, end, encoding)
    )


def resolve(denoiser, text: str, data, options=None, encoding: str = UTF16, document_changes: bool = True,
            hooks=None, annotate: bool = False, language=PYTHON) -> types.WorkspaceEdit:
    """What the server's codeAction/resolve answers: `run_action`'s edits as a ``WorkspaceEdit``."""
    outcome = run_action(denoiser, text, data, options, hooks, language=language)
    return workspace_edit(data.uri, data.version, text, outcome, encoding, document_changes, annotate)

