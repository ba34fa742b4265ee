"""Document integrity: an edit is only ever computed against the exact text it was asked for.

- An action's ``data`` carries the document version *and* a digest of its text
  (:func:`text_digest`); resolving it (and an inline completion, and every result when the model
  is done) compares both with the open document (:func:`check_current`) and answers
  ContentModified otherwise: a client that reuses a version number for other text cannot get an
  edit over text the user never selected.
- ``didChange`` (:class:`IntegrityProtocol`, which replaces pygls' own handler) must move the
  version forward and, the server syncing in full, carry the whole text. A change that does not
  is refused with a log line (stderr and ``window/logMessage``), and the document is marked out
  of sync: every request on it answers ContentModified until the client sends its full text
  with a newer version (or opens it again), since the client's text and the server's may differ
  from then on. A change that repeats the current text is taken as a no-op.
- Strings must be strings (:func:`strict_converter`): lsprotocol's converter would make
  ``"text": null`` the document text ``"None"`` (``str(value)``), so the server would fill text
  the client never had; such a message is refused as not fitting the protocol instead.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Generator
from typing import Any
from urllib.parse import unquote

import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified
from pygls.protocol import default_converter
from pygls.protocol.language_server import LanguageServerProtocol, lsp_method
from pygls.workspace import TextDocument

logger = logging.getLogger("infill-lsp")


def text_digest(text: str) -> str:
    """A short digest of ``text`` (32 hex digits), to tell two texts of one version apart."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def strict_converter() -> cattrs.Converter:
    """pygls' converter, but a string field (and a ``languageId``) takes only a JSON string.

    lsprotocol's converter structures a ``str`` field with ``str(value)`` and passes anything
    through as a ``languageId``: ``{"text": null}`` would open a document whose text is "None",
    and ``{"languageId": 5}`` crash every later request on it. Refused, such params get
    InvalidParams (a request) or are ignored with a log line (a notification).
    """
    converter = default_converter()
    converter.register_structure_hook(str, _string)
    converter.register_structure_hook(types.LanguageKind | str, _string)
    return converter


def _string(value: Any, _type: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__} {value!r:.40}")
    return value


def check_current(
    document: TextDocument | None,
    uri: str,
    version: int | None,
    digest: str | None,
    out_of_sync: dict[str, str],
) -> None:
    """ContentModified unless ``document`` is open, in sync, at ``version`` and (when ``digest``
    is given) holds the text it was taken of."""
    if document is None:
        raise JsonRpcContentModified(f"{uri} is not open (closed while the request ran?)")
    reason = out_of_sync.get(unquote(uri))
    if reason is not None:
        raise JsonRpcContentModified(
            f"{uri} is out of sync ({reason}): send its full text with a newer version, or reopen it"
        )
    if document.version != version:
        raise JsonRpcContentModified(
            f"{uri} changed (version {version} -> {document.version}) since this request was made: ask again"
        )
    if digest is not None and text_digest(document.source) != digest:
        raise JsonRpcContentModified(
            f"{uri} has other text than when this action was listed (same version {version}): ask again"
        )


def refusal(document: TextDocument | None, params: types.DidChangeTextDocumentParams) -> str | None:
    """Why this ``didChange`` cannot be taken (None: it can)."""
    version = params.text_document.version
    if document is None:
        return "a change to a document that is not open"
    for change in params.content_changes:
        if not isinstance(change, types.TextDocumentContentChangeWholeDocument):
            return "an incremental change, but the server syncs documents in full (TextDocumentSyncKind.Full)"
    if document.version is not None and version <= document.version:
        last = params.content_changes[-1] if params.content_changes else None
        if last is not None and last.text == document.source:
            return None  # the same text again: harmless
        return f"version {version} does not move forward from {document.version}"
    return None


class IntegrityProtocol(LanguageServerProtocol):
    """pygls' protocol with a ``didChange`` that refuses what would desynchronise the document."""

    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self.out_of_sync: dict[str, str] = {}  # uri -> why

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> Generator:
        self.out_of_sync.pop(unquote(params.text_document.uri), None)
        yield from super().lsp_text_document__did_open(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Generator:
        uri = params.text_document.uri
        document = self.workspace.text_documents.get(unquote(uri))
        why = refusal(document, params)
        if why is not None:
            message = (
                f"infill: refused a didChange of {uri}: {why}; "
                "the document is out of sync until its full text comes with a newer version"
            )
            logger.warning("%s", message)
            if document is not None:
                self.out_of_sync[unquote(uri)] = why
            self.notify(
                types.WINDOW_LOG_MESSAGE,
                types.LogMessageParams(type=types.MessageType.Warning, message=message),
            )
            return
        if not params.content_changes:
            return
        if (
            document is not None
            and document.version is not None
            and params.text_document.version <= document.version
        ):
            return  # the same text again
        self.out_of_sync.pop(unquote(uri), None)
        yield from super().lsp_text_document__did_change(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Generator:
        self.out_of_sync.pop(unquote(params.text_document.uri), None)
        if unquote(params.text_document.uri) not in self.workspace.text_documents:
            logger.warning("infill: didClose of %s, which is not open: ignored", params.text_document.uri)
            return
        yield from super().lsp_text_document__did_close(params)
