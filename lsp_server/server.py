"""infill-lsp: the language server, a thin pygls layer over :mod:`lsp_server.actions`.

- ``initialize`` reads ``initializationOptions`` (:mod:`lsp_server.settings`).
- ``textDocument/codeAction`` lists fills without running the model (instant).
- ``codeAction/resolve`` runs the fill in a worker thread (one fill at a time), so the server
  keeps answering; the model is loaded there on the first fill and kept on the server object.
  Denoising steps are reported as ``$/progress`` when the client supports work-done progress;
  ``$/cancelRequest`` and a cancelled progress stop the sampler at its next step. If the
  document changed since the action was listed, the answer is a ContentModified error, never a
  stale edit.
- Bad requests (unknown document, range past the end, not Python, foreign action data) get a
  JSON-RPC error; the server keeps running.

Documents are synchronised in full (``TextDocumentSyncKind.Full``): pygls' incremental sync
splits lines with ``str.splitlines``, which disagrees with LSP on form feeds and other
separators that Python source may contain.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any
from urllib.parse import unquote

import attrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcContentModified,
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcRequestCancelled,
)
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from infill import __version__
from infill.errors import Cancelled, InputError
from lsp_server import actions
from lsp_server.positions import ENCODINGS, UTF16, PositionError, range_to_offsets
from lsp_server.settings import Settings, parse_settings

logger = logging.getLogger("infill-lsp")

REQUEST_FAILED = -32803  # LSP ErrorCodes.RequestFailed
PYTHON_SUFFIXES = (".py", ".pyi")


class RequestFailed(JsonRpcException):
    CODE = REQUEST_FAILED
    MESSAGE = "Request Failed"


class InfillLanguageServer(LanguageServer):
    """The server; all state (settings, the loaded model, the worker thread) lives here."""

    def __init__(self) -> None:
        super().__init__("infill-lsp", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.settings = Settings()
        self.backend: Any = None  # the loaded Denoiser, on the first fill
        self.backend_error: str | None = None  # why loading failed (not retried)
        self._backend_lock = asyncio.Lock()
        self.model_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="infill-model")
        self.over_tcp = False

    # ------------------------------------------------------------------ client facts

    @property
    def position_encoding(self) -> str:
        encoding = self.workspace.position_encoding
        encoding = getattr(encoding, "value", encoding)
        return encoding if encoding in ENCODINGS else UTF16

    def _capability(self, *path: str) -> Any:
        value: Any = self.client_capabilities
        for name in path:
            value = getattr(value, name, None)
            if value is None:
                return None
        return value

    @property
    def supports_progress(self) -> bool:
        return bool(self._capability("window", "work_done_progress"))

    @property
    def supports_document_changes(self) -> bool:
        return bool(self._capability("workspace", "workspace_edit", "document_changes"))

    # ------------------------------------------------------------------ documents

    def python_document(self, uri: str) -> TextDocument:
        """The open document ``uri``; InvalidParams if it is not open or not Python."""
        document = self.workspace.text_documents.get(unquote(uri))
        if document is None:
            raise JsonRpcInvalidParams(f"unknown document {uri}: it is not open (send didOpen first)")
        language = (document.language_id or "").lower()
        if language != "python" and not (language == "" and uri.endswith(PYTHON_SUFFIXES)):
            raise JsonRpcInvalidParams(
                f"{uri} is a {document.language_id or 'plain text'} document; infill fills Python only"
            )
        return document

    # ------------------------------------------------------------------ model

    async def load_backend(self) -> Any:
        """The model, loaded in the worker thread on first use; RequestFailed if it cannot be."""
        async with self._backend_lock:
            if self.backend is None and self.backend_error is None:
                settings = self.settings
                where = settings.model_path or "the model shipped with infill"
                loop = asyncio.get_running_loop()
                started = time.perf_counter()
                try:
                    self.backend = await loop.run_in_executor(
                        self.model_executor, _load_backend, settings.model_path, settings.threads
                    )
                    logger.info("loaded %s in %.2f s", where, time.perf_counter() - started)
                except Exception as error:  # ModelError, and anything a broken file raises
                    self.backend_error = f"infill: cannot load the model ({where}): {error}"
                    logger.error("%s", self.backend_error)
                    self.window_show_message(
                        types.ShowMessageParams(type=types.MessageType.Error, message=self.backend_error)
                    )
        if self.backend is None:
            raise RequestFailed(self.backend_error)
        return self.backend


def _load_backend(path: str | None, threads: int | None) -> Any:
    """In the worker thread: importing torch and transformers alone takes seconds."""
    from infill.backend import load_backend

    return load_backend(path, threads=threads)


class StepProgress:
    """``$/progress`` for one fill (server-initiated token); does nothing if not supported."""

    def __init__(self, server: InfillLanguageServer, on_cancel: threading.Event) -> None:
        self.server = server
        self.token: str | None = None
        self.on_cancel = on_cancel
        self.steps = 1  # the step cap, known once the engine is imported

    async def begin(self, title: str) -> None:
        if not self.server.supports_progress:
            return
        token = f"infill-{uuid.uuid4()}"
        try:
            await self.server.work_done_progress.create_async(token)
        except Exception as error:  # the client refused: go on without progress
            logger.info("no progress: %s", error)
            return
        self.token = token
        cancel_future = self.server.work_done_progress.tokens.get(token)
        if cancel_future is not None:
            cancel_future.add_done_callback(lambda _: self.on_cancel.set())
        message = "loading the model" if self.server.backend is None else "starting"
        begin = types.WorkDoneProgressBegin(title=title, cancellable=True, message=message, percentage=0)
        self.server.work_done_progress.begin(token, begin)

    def report(self, index: int, masked_left: int) -> None:
        """Called on the event loop after denoising step ``index`` (0-based)."""
        if self.token is None:
            return
        done = index + 1
        message = f"denoising step {done}/{self.steps}, {masked_left} masked"
        percentage = min(99, done * 100 // self.steps)
        report = types.WorkDoneProgressReport(message=message, percentage=percentage)
        self.server.work_done_progress.report(self.token, report)

    def end(self, message: str) -> None:
        if self.token is None:
            return
        self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
        self.server.work_done_progress.tokens.pop(self.token, None)
        self.token = None


# ---------------------------------------------------------------------- handlers


def initialize(ls: InfillLanguageServer, params: types.InitializeParams) -> None:
    ls.settings, warnings = parse_settings(params.initialization_options)
    for warning in warnings:
        logger.warning("%s", warning)
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=warning))


def code_action(ls: InfillLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """List fills for the range; instant (no model run)."""
    uri = params.text_document.uri
    document = ls.python_document(uri)
    text = document.source
    try:
        start, end = range_to_offsets(text, params.range, ls.position_encoding)
    except PositionError as error:
        raise JsonRpcInvalidParams(f"{uri}: {error}") from None
    return actions.code_actions(uri, document.version, text, start, end, params.context.only)


async def resolve_code_action(ls: InfillLanguageServer, action: types.CodeAction) -> types.CodeAction:
    """Run the fill in the worker thread; the action comes back with its ``edit``."""
    try:
        data = actions.ActionData.from_json(action.data)
    except InputError as error:
        raise JsonRpcInvalidParams(str(error)) from None
    document = ls.python_document(data.uri)
    _check_version(document, data)
    text = document.source

    cancel = threading.Event()
    progress = StepProgress(ls, cancel)
    loop = asyncio.get_running_loop()

    def on_step(canvas: Any, step: Any) -> None:  # in the worker thread
        loop.call_soon_threadsafe(progress.report, step.index, step.masked_left)

    outcome = "failed"
    try:
        await progress.begin(action.title)
        backend = await ls.load_backend()
        options = ls.settings.infill_options()  # imports the engine: torch is loaded by now
        progress.steps = max(1, options.sampler.steps)
        run = partial(
            actions.resolve,
            backend,
            text,
            data,
            options,
            ls.position_encoding,
            ls.supports_document_changes,
            on_step,
            cancel.is_set,
        )
        started = time.perf_counter()
        edit = await loop.run_in_executor(ls.model_executor, run)
        outcome = "done"
        ls.window_log_message(
            types.LogMessageParams(
                type=types.MessageType.Log,
                message=f"infill: {action.title}: model ran {time.perf_counter() - started:.3f} s",
            )
        )
    except asyncio.CancelledError:  # $/cancelRequest: stop the sampler at its next step
        cancel.set()
        outcome = "cancelled"
        raise
    except Cancelled:  # the user cancelled the progress
        outcome = "cancelled"
        raise JsonRpcRequestCancelled("the fill was cancelled") from None
    except InputError as error:
        raise RequestFailed(str(error)) from None
    finally:
        progress.end(outcome)

    # Edited (or closed) while the model ran: drop the result.
    _check_version(ls.workspace.text_documents.get(unquote(data.uri)), data)
    return attrs.evolve(action, edit=edit)


def exit_server(ls: InfillLanguageServer, params: Any) -> None:
    """Over TCP, pygls 2.1's own ``exit`` leaves the process serving: close the listener first."""
    if ls.over_tcp:
        ls.shutdown()


def _check_version(document: TextDocument | None, data: actions.ActionData) -> None:
    if document is None:
        raise JsonRpcContentModified(f"{data.uri} was closed while the fill ran")
    if document.version != data.version:
        raise JsonRpcContentModified(
            f"{data.uri} changed (version {data.version} -> {document.version}) "
            "since this code action was listed: list code actions again"
        )


# ---------------------------------------------------------------------- assembly and main


def create_server() -> InfillLanguageServer:
    """A server with every feature registered (a new one per call; no module state)."""
    server = InfillLanguageServer()
    server.feature(types.INITIALIZE)(initialize)
    options = types.CodeActionOptions(
        code_action_kinds=list(actions.CODE_ACTION_KINDS), resolve_provider=True
    )
    server.feature(types.TEXT_DOCUMENT_CODE_ACTION, options)(code_action)
    server.feature(types.CODE_ACTION_RESOLVE)(resolve_code_action)
    server.feature(types.EXIT)(exit_server)
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="infill-lsp", description="Language server for infill (Python).")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default)")
    transport.add_argument("--tcp", action="store_true", help="listen on --host:--port")
    parser.add_argument("--host", default="127.0.0.1", help="TCP host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")
    parser.add_argument("--log-file", help="write the log here instead of stderr")
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="default WARNING",
    )
    args = parser.parse_args(argv)

    logging.basicConfig(
        filename=args.log_file, level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    server = create_server()
    if args.tcp:
        server.over_tcp = True
        server.start_tcp(args.host, args.port)
    else:
        server.start_io()


if __name__ == "__main__":
    main()
