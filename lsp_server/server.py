"""infill-lsp: the language server, a thin pygls layer over plain functions.

- ``initialize`` reads ``initializationOptions`` and names the model they point at in
  ``serverInfo.version`` (:mod:`infill.models.model_info`; a ``window/logMessage`` names it again when
  it is loaded); after ``initialized`` the server asks for the
  client's ``infill`` configuration section (``workspace/configuration``) when the client can
  answer, and again on ``workspace/didChangeConfiguration`` (:mod:`lsp_server.settings`).
- ``didOpen``/``didChange`` publish the document's syntax errors (tree-sitter ERROR and MISSING
  nodes) as diagnostics with the document version; a fixed document gets an empty list
  (:mod:`lsp_server.diagnostics`). With the ``review`` setting, the same list carries the review
  diagnostics: the tokens the model doubts, scored in the background once the document is quiet
  (on open the whole file, after an edit the lines around it; :mod:`lsp_server.review`), with
  quick fixes that put the model's preferred text in their place.
- ``textDocument/codeAction`` lists fills, fixes (repair), docstrings, alternatives and quick
  fixes for syntax errors without running the model (instant; :mod:`lsp_server.actions`), and
  the alternatives already sampled for the range (:mod:`lsp_server.alternatives`), resolved.
- ``codeAction/resolve`` and ``textDocument/inlineCompletion`` (:mod:`lsp_server.inline`) run the
  model in a worker thread (one job at a time), so the server keeps answering; the model is
  loaded there on first use and kept (loaded again when the model path changes). Denoising
  steps of a resolve are reported as ``$/progress`` when the client supports work-done progress.
  ``$/cancelRequest``, a cancelled progress, a newer inline completion of the same document or
  a newer resolve of the same action (:mod:`lsp_server.jobs`) stop the sampler at its next step;
  the request then answers RequestCancelled; ``requestTimeout`` seconds of model time end it
  with RequestFailed. Distinct actions resolved at once are each answered, in turn. If the
  document changed since the action was listed (its version or its text:
  :mod:`lsp_server.integrity`), the answer is a ContentModified error, never a stale edit. An
  edit that needs the user's confirmation is annotated as such when the client supports change
  annotations. A resolve that changes nothing says why in a ``window/showMessage`` (Info).
- Bad requests (unknown document, range past the end, a language turned off, foreign action data) get a
  JSON-RPC error; a model that cannot be loaded is shown once (``window/showMessage``) and its
  requests fail; the server keeps running.

Over stdio, frames are read by :mod:`lsp_server.transport` (not pygls' reader): malformed frames
are skipped and answered, params that do not fit get InvalidParams, the lifecycle is enforced
(see docs/lsp-robustness.md).

Documents are synchronised in full (``TextDocumentSyncKind.Full``): pygls' incremental sync
splits lines with ``str.splitlines``, which disagrees with LSP on form feeds and other
separators that Python source may contain.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlparse

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
from infill.models.model_info import language_notice, model_card
from infill.text.languages import Language, detect
from lsp_server import actions, diagnostics, inline, review
from lsp_server.alternatives import AlternativeSets, StaleAlternatives, sample_alternatives
from lsp_server.idle import IDLE_SECONDS, IdleRefresh
from lsp_server.integrity import IntegrityProtocol, check_current, strict_converter, text_digest
from lsp_server.jobs import INLINE, RESOLVE, DocumentJobs
from lsp_server.positions import (
    ENCODINGS,
    UTF16,
    PositionError,
    position_to_offset,
    range_to_offsets,
)
from lsp_server.progress import PROGRESS_AFTER, LayerProgress, StepProgress
from lsp_server.settings import SECTION, Settings, parse_settings, renamed_notices, section_of
from lsp_server.transport import serve_stdio

if TYPE_CHECKING:  # the engine (and torch) is imported only when a model job runs
    from infill.engine.pipeline import Hooks

logger = logging.getLogger("infill-lsp")

REQUEST_FAILED = -32803  # LSP ErrorCodes.RequestFailed
CONFIGURATION_WAIT_S = 5.0
"""How long a model job waits for the client's answer to ``workspace/configuration``."""
REVIEW_POLL_S = 0.1
"""How often a review waiting for a request to end looks again."""

T = TypeVar("T")


class RequestFailed(JsonRpcException):
    CODE = REQUEST_FAILED
    MESSAGE = "Request Failed"


class InfillLanguageServer(LanguageServer):
    """The server; all state (settings, the loaded model, the worker thread, jobs) lives here."""

    def __init__(self) -> None:
        super().__init__(
            "infill-lsp",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Full,
            protocol_cls=IntegrityProtocol,
            converter_factory=strict_converter,
        )
        self.initial_settings = Settings()  # from initializationOptions
        self.settings = Settings()  # the above, overridden by the client's configuration
        self.configured = asyncio.Event()  # set while no configuration request is unanswered
        self._pulls = 0  # configuration requests in flight
        self.backend: Any = None  # the loaded Denoiser, on the first fill
        self.backend_key: tuple | None = None  # Settings.model_key() of the model loaded
        self.backend_error: str | None = None  # why loading backend_key failed (not retried)
        self._backend_lock = asyncio.Lock()
        self.contexts: Any = None  # infill.engine.kept_context.DocumentContexts, from the first fill
        # each document's context refreshed when quiet, then its review diagnostics
        self.idle = IdleRefresh(self.refresh_context, self.review_when_quiet)
        self.reviews = review.DocumentReviews()  # each document's review findings (setting `review`)
        self.model_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="infill-model")
        self.jobs = DocumentJobs()
        self.alternatives = AlternativeSets()  # the candidates last sampled, per document
        self.over_tcp = False
        self.shown_warnings: set[str] = set()  # warnings shown once per session

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

    @property
    def supports_change_annotations(self) -> bool:
        return self.supports_document_changes and bool(
            self._capability("workspace", "workspace_edit", "change_annotation_support")
        )

    @property
    def supports_configuration(self) -> bool:
        return bool(self._capability("workspace", "configuration"))

    def cancel_all_jobs(self) -> None:
        """Stop every model job at its next step (the process is about to end)."""
        for job in self.jobs.all():
            job.cancel.set()

    # ------------------------------------------------------------------ documents

    def open_document(self, uri: str) -> tuple[TextDocument, Language]:
        """The open document ``uri`` and its language; InvalidParams if it is not open or its
        language is not one the ``languages`` setting turns on."""
        document = self.workspace.text_documents.get(unquote(uri))
        if document is None:
            raise JsonRpcInvalidParams(f"unknown document {uri}: it is not open (send didOpen first)")
        language = self.language_of(document, uri)
        if language is None:
            raise JsonRpcInvalidParams(
                f"{uri} is a {document.language_id or 'plain text'} document; the languages setting "
                f"turns infill on for {', '.join(self.settings.languages or ())} only"
            )
        check_current(document, uri, document.version, None, self.protocol.out_of_sync)
        return document, language

    def language_of(self, document: TextDocument, uri: str) -> Language | None:
        """The document's language: its languageId's, else its file extension's (infill.text.languages);
        plain text for a language without a grammar. None when the ``languages`` setting leaves
        it out. What there is to say about it (filled as text; the shipped model knows only
        Python) is said once per session."""
        detected = detect(document.language_id or None, uri_path(uri))
        language = detected.language
        enabled = self.settings.languages
        if enabled is not None and language.name not in enabled:
            return None
        notices = [detected.notice, language_notice(language, self.settings.model_path)]
        self.show_once([notice for notice in notices if notice], types.MessageType.Info)
        return language

    def check_current(self, uri: str, version: int | None, digest: str | None) -> None:
        """ContentModified unless ``uri`` is open, in sync, at ``version`` with text of ``digest``."""
        document = self.workspace.text_documents.get(unquote(uri))
        check_current(document, uri, version, digest, self.protocol.out_of_sync)

    def publish_diagnostics(self, uri: str) -> None:
        """Publish the syntax errors of the open document ``uri`` in its language (none: an empty
        list; a document of a language that is off or has no grammar gets none)."""
        document = self.workspace.text_documents.get(unquote(uri))
        language = self.language_of(document, uri) if document is not None else None
        if document is None or language is None or not language.has_grammar:
            return
        found = diagnostics.diagnostics(document.source, self.position_encoding, language)
        found += review.to_diagnostics(document.source, self.shown_doubts(uri, document.source),
                                       self.position_encoding)  # fmt: skip
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=document.version)
        )

    def shown_doubts(self, uri: str, text: str) -> list[review.Doubt]:
        """The review findings ``uri`` shows at ``text`` (none with the ``review`` setting off):
        the ``reviewMaxPerFile`` least likely."""
        if not self.settings.review:
            return []
        return review.lowest(self.reviews.doubts(uri, text), self.settings.review_max_per_file)

    @property
    def quiet_seconds(self) -> float:
        """The quiet after an edit that the idle refresh and the review wait for (0: nothing
        waits): ``idleRefresh``, or its default when only the review waits."""
        settings = self.settings
        return settings.idle_refresh or (IDLE_SECONDS if settings.review else 0.0)

    # ------------------------------------------------------------------ settings

    def apply_settings(self, options: Any, source: str) -> None:
        """The initial settings overridden by ``options`` (the client's ``infill`` section)."""
        settings, warnings = parse_settings(options, self.initial_settings, source)
        self.show_warnings(warnings)
        self.show_once(renamed_notices(options), types.MessageType.Warning)
        if settings != self.settings:
            logger.info("settings: %s", settings)
            before, self.settings = self.settings, settings
            self.review_settings_changed(before)

    def review_settings_changed(self, before: Settings) -> None:
        """Review turned on or off, or another threshold: every open document is scored again
        (when on) and published again; another count: published again."""
        now = self.settings
        if (before.review, before.review_threshold) != (now.review, now.review_threshold):
            for uri in self.reviews.uris():
                self.reviews.reset(uri)
                document = self.workspace.text_documents.get(unquote(uri))
                if now.review and document is not None:
                    self.idle.opened(uri, document.source, self.quiet_seconds)
                self.publish_diagnostics(uri)
        elif now.review and before.review_max_per_file != now.review_max_per_file:
            for uri in self.reviews.uris():
                self.publish_diagnostics(uri)

    async def pull_configuration(self) -> None:
        """Ask the client for the ``infill`` section; its answer (if any) overrides the initial
        settings. A client that cannot answer keeps them. Model jobs wait for the answer."""
        self._pulls += 1
        self.configured.clear()
        try:
            params = types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            [section, *_] = await self.workspace_configuration_async(params)
        except Exception as error:  # an error answer, or an empty list
            logger.warning("workspace/configuration failed: %s", error)
        else:
            self.apply_settings(section, f"configuration '{SECTION}'")
        finally:
            self._pulls -= 1
            if self._pulls == 0:
                self.configured.set()

    def show_warnings(self, warnings: list[str]) -> None:
        for warning in warnings:
            logger.warning("%s", warning)
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=warning))

    def show_once(self, messages: list[str], kind: types.MessageType) -> None:
        """Show each message the first time only (this session); log it at its kind's level."""
        level = logging.WARNING if kind == types.MessageType.Warning else logging.INFO
        for message in messages:
            if message not in self.shown_warnings:
                self.shown_warnings.add(message)
                logger.log(level, "%s", message)
                self.window_show_message(types.ShowMessageParams(type=kind, message=f"infill: {message}"))

    # ------------------------------------------------------------------ model

    def kept_context(self, uri: str, backend: Any) -> Any:
        """The denoiser for a job on ``uri``: ``backend`` with the document's context kept from
        its last job (infill.engine.kept_context: the next fill's first pass computes what changed)."""
        if hasattr(backend, "for_path"):  # a team server (infill.models.served): it keeps contexts, per file
            return backend.for_path(uri_path(uri))
        if self.contexts is None:
            from infill.engine.kept_context import DocumentContexts  # imports torch: not before a fill

            self.contexts = DocumentContexts()
        return self.contexts.denoiser(uri, backend)

    async def refresh_context(
        self, uri: str, text: str, offset: int, still_wanted: Callable[[], bool]
    ) -> int:
        """The idle refresh (lsp_server.idle): one exact full pass over the model's window of
        ``text`` around ``offset``, kept as the document's context; the tokens it computed, 0 if
        skipped (no model loaded yet, a request under way, the authors' loops, a model that
        keeps no context) or stopped (the document changed, a request came in, the user
        cancelled its progress: it stops between two layers and keeps the context it had)."""
        from infill.engine.kept_context import KeptContext, context_ids

        settings, backend = self.settings, self.backend
        if backend is None or self.backend_key != settings.model_key() or settings.protocol == "authors":
            return 0
        if settings.idle_refresh <= 0:  # the quiet came for the review alone
            return 0
        if self.jobs.of_document(uri):
            return 0
        denoiser = self.kept_context(uri, backend)
        opened = self.workspace.text_documents.get(unquote(uri))
        language = self.language_of(opened, uri) if opened is not None else None
        if not isinstance(denoiser, KeptContext) or language is None:
            return 0
        context_length = clamp_options(self, settings.infill_options(backend), backend).context_length
        loop = asyncio.get_running_loop()
        progress = LayerProgress(self, f"infill: preparing {uri.rsplit('/', 1)[-1]}")

        def stop() -> bool:  # in the worker thread, before each layer
            return not still_wanted() or self.jobs.busy() or progress.cancelled.is_set()

        def work() -> int:  # in the worker thread, after any job queued before it
            if stop():
                return 0
            try:
                document = actions.text_document(text, language)
            except InputError:  # a lone surrogate: no fill can run on this text either
                return 0
            ids = context_ids(backend, document, offset, context_length)
            on_layer = partial(loop.call_soon_threadsafe, progress.report)
            return ids.shape[1] if denoiser.refresh(ids, stop, on_layer) else 0

        shown = loop.call_later(PROGRESS_AFTER, lambda: loop.create_task(progress.begin()))
        try:
            return await loop.run_in_executor(self.model_executor, work)
        finally:
            shown.cancel()
            progress.end()

    async def review_when_quiet(self, uri: str, still_wanted: Callable[[], bool]) -> None:
        """The review diagnostics of ``uri`` (lsp_server.review), after the idle refresh, while
        ``still_wanted()`` (the document has not changed since the quiet began) and the setting
        is on: rounds of windows, each round bounded by the pass budget; a round that a request
        stopped goes on once that request has ended and the quiet has come again."""
        while still_wanted() and self.settings.review:
            if self.jobs.busy():
                await asyncio.sleep(REVIEW_POLL_S)
                continue
            if await self.review_round(uri, still_wanted):
                return
            await asyncio.sleep(self.quiet_seconds)

    async def review_round(self, uri: str, still_wanted: Callable[[], bool]) -> bool:
        """Score the windows of ``uri`` still to be scored, nearest the last edit first, one at
        a time in the worker thread, publishing after each; stops before a window once the
        round has taken ``passBudget`` forward passes, and before any pass once the document
        changes or a request comes in (what it scored of the text as it was is dropped). True
        when nothing is left to do (or nothing can be done: no model, a language it does not
        review)."""
        from infill.options import FixOptions  # no torch: the engine is imported with the model

        def current() -> TextDocument | None:
            return self.workspace.text_documents.get(unquote(uri))

        document = current()
        language = self.language_of(document, uri) if document is not None else None
        if document is None or language is None or not language.has_grammar:
            return True
        try:
            backend = await self.load_backend()
        except RequestFailed:  # said once already (window/showMessage)
            return True
        settings = self.settings
        options = clamp_options(self, settings.infill_options(backend), backend)
        fix_options = FixOptions.from_infill(options, threshold=settings.review_threshold)
        budget, used = options.pass_budget, 0
        document = current()
        if document is None:
            return True
        text = document.source
        loop = asyncio.get_running_loop()

        def stop() -> bool:  # in the worker thread too, before each forward pass
            return not still_wanted() or self.jobs.busy() or not self.settings.review

        for window in self.reviews.windows(uri):
            if stop():
                logger.info("review of %s stopped: the document changed or a request came in", uri)
                return False
            if budget is not None and used >= budget:
                logger.info("review of %s: the pass budget (%d) is spent; the rest after the next quiet",
                            uri, budget)  # fmt: skip
                return False
            try:
                work = partial(review.review_window, backend, text, *window, fix_options, stop, language)
                found, passes = await loop.run_in_executor(self.model_executor, work)
            except Cancelled:
                logger.info("review of %s stopped: the document changed or a request came in", uri)
                return False
            except InputError as error:  # text no file could hold: nothing to review
                logger.info("no review of %s: %s", uri, error)
                return True
            used += passes
            document = current()
            if stop() or document is None or document.source != text:
                logger.info("review of %s: result dropped, the document changed", uri)
                return False
            if self.reviews.scored(uri, text, window, found):
                logger.info("review of %s: characters %d-%d, %d finding(s), %d pass(es)", uri, *window,
                            len(found), passes)  # fmt: skip
                self.publish_diagnostics(uri)
        return not self.reviews.pending(uri)

    async def load_backend(self) -> Any:
        """The model for the current settings, loaded in the worker thread on first use (and
        again after the model path changes); RequestFailed if it cannot be, shown once. With an
        `endpoint`, the team server's description, asked for again after a failure (the server
        may have come up since)."""
        async with self._backend_lock:
            settings = self.settings
            key = settings.model_key()
            if key != self.backend_key:
                self.backend, self.backend_key, self.backend_error = None, key, None
                where = settings.model_path or "the model shipped with infill"
                if settings.endpoint:
                    where = f"the team server at {settings.endpoint}"
                loop = asyncio.get_running_loop()
                started = time.perf_counter()
                try:
                    self.backend = await loop.run_in_executor(self.model_executor, _load_backend, *key)
                    logger.info("loaded %s in %.2f s", where, time.perf_counter() - started)
                    loaded = f"infill: model {model_card(settings.model_path).summary()}"
                    if settings.endpoint:
                        loaded = f"infill: model {self.backend.describe()}"
                    if settings.quantize == "int8":
                        loaded += f", {settings.quantize} weights"
                    info = types.MessageType.Info  # in the client's log: which model fills the code
                    self.window_log_message(types.LogMessageParams(type=info, message=loaded))
                except asyncio.CancelledError:
                    # The request was cancelled while the model loaded: nothing was loaded, and
                    # the key must not say otherwise, or every later request would fail.
                    self.backend_key = None
                    raise
                except Exception as error:  # ModelError, and anything a broken file raises
                    self.backend_error = f"infill: cannot load the model ({where}): {error}"
                    logger.error("%s", self.backend_error)
                    if self.backend_error not in self.shown_warnings:  # a server down: said once
                        self.window_show_message(
                            types.ShowMessageParams(type=types.MessageType.Error, message=self.backend_error)
                        )
                    if settings.endpoint:  # a server may come up: the next request asks again
                        self.backend_key = None
                        self.shown_warnings.add(self.backend_error)
            error = self.backend_error
        if self.backend is None:
            raise RequestFailed(error)
        return self.backend

    async def run_model_job(
        self,
        uri: str,
        work: Callable[[Any, Any, Hooks], T],
        kind: str = RESOLVE,
        progress_title: str | None = None,
        key: str | None = None,
    ) -> T:
        """Run ``work(backend, options, hooks)`` in the worker thread as the job of document
        ``uri``, superseding that document's previous job of the same ``kind`` and ``key``. The
        hooks (the pipeline's, infill.engine.pipeline.Hooks) check the job's cancellation and, with
        a ``progress_title``, report each denoising step and each group of docstrings as progress.

        RequestCancelled if the job is superseded or its progress is cancelled; asyncio
        cancellation (``$/cancelRequest``) stops the sampler too; RequestFailed for bad input, a
        model that cannot be loaded, or work that ran past ``requestTimeout``.
        """
        job = self.jobs.start(uri, kind, key)
        progress = StepProgress(self, job.cancel)
        loop = asyncio.get_running_loop()
        on_step = on_site = None
        if progress_title is not None:

            def on_step(canvas: Any, step: Any) -> None:  # in the worker thread
                report = (step.index, step.cap, step.masked_left, step.retry, step.restart)
                loop.call_soon_threadsafe(progress.report, *report)

            def on_site(done: int, total: int) -> None:  # in the worker thread
                loop.call_soon_threadsafe(progress.report_site, done, total)

        outcome = "failed"
        try:
            if progress_title is not None:
                await progress.begin(progress_title)
            try:
                await asyncio.wait_for(self.configured.wait(), CONFIGURATION_WAIT_S)
            except asyncio.TimeoutError:  # TimeoutError from 3.11 on
                logger.warning("no answer to workspace/configuration: going on with the initial settings")
            backend = await self.load_backend()
            options = self.settings.infill_options(backend)  # imports the engine: torch is loaded by now
            options = clamp_options(self, options, backend)
            from infill.engine.pipeline import Hooks  # the engine: imported with the model by now

            hooks = Hooks(on_step=on_step, cancelled=job.cancelled, on_progress=on_site)
            if job.cancelled():
                raise Cancelled("cancelled before it started")
            timeout = self.settings.request_timeout

            denoiser = self.kept_context(uri, backend)

            def timed_work() -> T:  # in the worker thread: the budget starts when the job runs
                if job.cancelled():
                    raise Cancelled("cancelled while it waited for the model")
                job.start_clock(timeout)
                return work(denoiser, options, hooks)

            before = kept_counts(denoiser)
            result = await loop.run_in_executor(self.model_executor, timed_work)
            passes, positions = (now - then for now, then in zip(kept_counts(denoiser), before))
            if passes:
                logger.info(
                    "%s: %d first pass(es) on the document's kept context (%d positions computed)",
                    uri, passes, positions,
                )  # fmt: skip
            outcome = "done"
            return result
        except asyncio.CancelledError:  # $/cancelRequest: stop the sampler at its next step
            job.cancel.set()
            outcome = "cancelled"
            raise
        except Cancelled:
            outcome = "cancelled"
            if job.timed_out:
                raise RequestFailed(
                    f"stopped after the time budget of {timeout:g} s (setting infill.requestTimeout): "
                    "select less, or raise the budget"
                ) from None
            if job.superseded:
                raise JsonRpcRequestCancelled(
                    "superseded: a newer infill request for the same document replaced this one"
                ) from None
            raise JsonRpcRequestCancelled("the fill was cancelled") from None
        except InputError as error:
            raise RequestFailed(str(error)) from None
        finally:
            progress.end(outcome)
            self.jobs.finish(job)


def uri_path(uri: str) -> str:
    """The file path a document's URI names (`file:///a/b%20c.py` -> `/a/b c.py`)."""
    return unquote(urlparse(uri).path)


def kept_counts(denoiser: Any) -> tuple[int, int]:
    """Full passes a kept context replaced so far, and the positions they computed."""
    return getattr(denoiser, "reused_passes", 0), getattr(denoiser, "computed_positions", 0)


def clamp_options(ls: InfillLanguageServer, options: Any, backend: Any) -> Any:
    """The options with a context length above the model's own clamped to it (said once)."""
    model_context = getattr(backend, "context_length", None)
    if options.context_length is None or model_context is None or options.context_length <= model_context:
        return options
    warning = (
        f"infill.contextLength {options.context_length} is above the model's context of "
        f"{model_context} tokens: using {model_context}"
    )
    if warning not in ls.shown_warnings:
        ls.shown_warnings.add(warning)
        ls.show_warnings([warning])
    options.context_length = model_context
    return options


def _load_backend(
    path: str | None, threads: int | None, device: str, dtype: str, trust_remote_code: bool, quantize: str,
    endpoint: str | None = None, token: str | None = None,
) -> Any:  # fmt: skip
    """In the worker thread: importing torch and transformers alone takes seconds. With an
    `endpoint`, the team server there runs the model (infill.models.served): nothing is loaded."""
    if endpoint:
        from infill.models.served import TeamServer

        return TeamServer.connect(endpoint, token)
    from infill.models import load

    return load(path, device, dtype, threads=threads, trust_remote_code=trust_remote_code, quantize=quantize)


# ---------------------------------------------------------------------- handlers


def initialize(ls: InfillLanguageServer, params: types.InitializeParams) -> None:
    ls.initial_settings, warnings = parse_settings(params.initialization_options)
    ls.settings = ls.initial_settings
    ls.show_warnings(warnings)
    ls.show_once(renamed_notices(params.initialization_options), types.MessageType.Warning)
    # serverInfo names the model the settings point at (read from its directory, not loaded)
    card = model_card(ls.settings.model_path)
    version = f"{__version__}; model: {card.summary()}"
    ls.protocol.server_info = types.ServerInfo(name=ls.name, version=version)
    if not ls.supports_configuration:
        ls.configured.set()


async def initialized(ls: InfillLanguageServer, params: types.InitializedParams) -> None:
    if ls.supports_configuration:
        await ls.pull_configuration()


async def did_change_configuration(
    ls: InfillLanguageServer, params: types.DidChangeConfigurationParams
) -> None:
    """Pull the section again if the client can answer; else take it from the notification."""
    if ls.supports_configuration:
        await ls.pull_configuration()
    else:
        ls.apply_settings(section_of(params.settings), f"settings.{SECTION}")


def did_open(ls: InfillLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    document = ls.workspace.text_documents.get(unquote(uri))
    if document is not None:  # opened again without a close: its alternatives may be of other text
        ls.alternatives.changed(uri, document.version, document.source)
        ls.reviews.opened(uri, document.source)  # reviewed (setting `review`) after the quiet
        ls.idle.opened(uri, document.source, ls.quiet_seconds)  # prepared when the model is in
    ls.publish_diagnostics(uri)


def did_change(ls: InfillLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    document = ls.workspace.text_documents.get(unquote(uri))
    if document is not None:  # the alternatives follow an applied candidate, else are dropped
        ls.alternatives.changed(uri, document.version, document.source)
        if ls.settings.review:  # findings of edited lines dropped, later ones moved
            ls.reviews.changed(uri, document.source)
        else:  # nothing to move: all of it is to be scored if review is turned on
            ls.reviews.opened(uri, document.source)
        ls.idle.changed(uri, document.source, ls.quiet_seconds)
    ls.publish_diagnostics(uri)


def did_close(ls: InfillLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    for job in ls.jobs.of_document(uri):
        job.cancel.set()  # nobody waits for this document's edits any more
    ls.alternatives.closed(uri)
    ls.idle.closed(uri)
    ls.reviews.closed(uri)
    if ls.contexts is not None:
        ls.contexts.forget(uri)
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


def code_action(ls: InfillLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """List quick fixes, fills, fixes, docstrings and alternatives for the range; instant (no
    model run): the alternatives already sampled for it come resolved."""
    uri = params.text_document.uri
    document, language = ls.open_document(uri)
    text = document.source
    try:
        start, end = range_to_offsets(text, params.range, ls.position_encoding)
    except PositionError as error:
        raise JsonRpcInvalidParams(f"{uri}: {error}") from None
    only, version, encoding = params.context.only, document.version, ls.position_encoding
    edit_options = (encoding, ls.supports_document_changes, ls.supports_change_annotations)
    shown = ls.shown_doubts(uri, text)  # review findings: their quick fixes
    ready = review.quick_fixes(uri, version, text, shown, start, end, only, *edit_options[:2])
    ready += ls.alternatives.actions(uri, version, start, end, *edit_options)
    alternatives = ls.settings.alternatives
    listed = actions.list_actions(
        uri, version, text, start, end, only, encoding, alternatives, ready, language
    )
    digest = text_digest(text)  # resolving checks the text too, not only the version
    for action in listed:
        action.data = {**action.data, "digest": digest}
    return listed


async def resolve_code_action(ls: InfillLanguageServer, action: types.CodeAction) -> types.CodeAction:
    """Run the action in the worker thread; the action comes back with its ``edit``.

    An "alternative" action with a candidate is answered from the sampled set (no model run);
    one without samples the set (one batch) and answers with the best candidate.
    """
    try:
        data = actions.ActionData.from_json(action.data)
    except InputError as error:
        raise JsonRpcInvalidParams(str(error)) from None
    document, language = ls.open_document(data.uri)
    ls.check_current(data.uri, data.version, data.digest)
    text = document.source
    edit_options = (ls.position_encoding, ls.supports_document_changes, ls.supports_change_annotations)
    if data.mode == actions.REVIEW:  # a review finding's quick fix: the model's text in its range
        found = [d for d in ls.shown_doubts(data.uri, text) if (d.start, d.end) == (data.start, data.end)]
        edit = found and review.replacement_edit(data.uri, data.version, text, found[0], *edit_options[:2])
        if not edit:
            raise JsonRpcContentModified("the review finding is gone: the document changed since the listing")
        return attrs.evolve(action, edit=edit)
    if data.mode == actions.ALTERNATIVE and data.candidate is not None:
        try:
            return attrs.evolve(action, edit=ls.alternatives.edit(data, *edit_options))
        except StaleAlternatives as error:
            raise JsonRpcContentModified(str(error)) from None
        except InputError as error:
            raise JsonRpcInvalidParams(str(error)) from None

    def work(backend, options, hooks: Hooks) -> tuple[Any, actions.Outcome]:
        if data.mode != actions.DOCUMENT:  # progress counts docstrings; a fill's is its steps alone
            hooks = dataclasses.replace(hooks, on_progress=None)
        if data.mode != actions.ALTERNATIVE:
            return None, actions.run_action(backend, text, data, options, hooks, language)
        found = sample_alternatives(backend, text, data, ls.settings.alternatives, options, hooks, language)
        return found, found.outcome(0)

    started = time.perf_counter()
    key = json.dumps(data.to_json(), sort_keys=True)  # the same action again supersedes; others queue
    found, outcome = await ls.run_model_job(data.uri, work, RESOLVE, action.title, key)
    seconds = time.perf_counter() - started
    message = f"infill: {action.title}: {seconds:.3f} s; {outcome.summary}"
    ls.window_log_message(types.LogMessageParams(type=types.MessageType.Log, message=message))
    # Edited (or closed) while the model ran: drop the result.
    ls.check_current(data.uri, data.version, text_digest(text))
    if found is not None:
        ls.alternatives.put(found)
    if not outcome.edits:
        shown = f"infill: {action.title}: no change ({outcome.nothing})"
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=shown))
    edit = actions.workspace_edit(data.uri, data.version, text, outcome, *edit_options)
    return attrs.evolve(action, edit=edit)


async def inline_completion(
    ls: InfillLanguageServer, params: types.InlineCompletionParams
) -> types.InlineCompletionList:
    """What goes at the cursor, written with the code before and after it as context."""
    uri = params.text_document.uri
    document, language = ls.open_document(uri)
    text, version = document.source, document.version
    try:
        offset = position_to_offset(text, params.position, ls.position_encoding)
    except PositionError as error:
        raise JsonRpcInvalidParams(f"{uri}: {error}") from None

    def work(backend, options, hooks: Hooks) -> list[types.InlineCompletionItem]:
        alternatives = ls.settings.alternatives
        return inline.inline_completions(
            backend, text, offset, options, ls.position_encoding, alternatives, hooks, language
        )

    items = await ls.run_model_job(uri, work, INLINE)
    ls.check_current(uri, version, text_digest(text))
    return types.InlineCompletionList(items=items)


def exit_server(ls: InfillLanguageServer, params: Any) -> None:
    """Over TCP, pygls 2.1's own ``exit`` leaves the process serving: close the listener first."""
    if ls.over_tcp:
        ls.shutdown()


# ---------------------------------------------------------------------- assembly and main


def create_server() -> InfillLanguageServer:
    """A server with every feature registered (a new one per call; no module state)."""
    server = InfillLanguageServer()
    server.feature(types.INITIALIZE)(initialize)
    server.feature(types.INITIALIZED)(initialized)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    options = types.CodeActionOptions(
        code_action_kinds=list(actions.CODE_ACTION_KINDS), resolve_provider=True
    )
    server.feature(types.TEXT_DOCUMENT_CODE_ACTION, options)(code_action)
    server.feature(types.CODE_ACTION_RESOLVE)(resolve_code_action)
    if hasattr(types, "TEXT_DOCUMENT_INLINE_COMPLETION"):  # LSP 3.18, lsprotocol >= 2024
        server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())(
            inline_completion
        )
    server.feature(types.EXIT)(exit_server)
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="infill-lsp", description="Language server for infill.")
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
        serve_stdio(server)


if __name__ == "__main__":
    main()
