"""``$/progress`` for one model job (a report per step) and for a context refresh (a report per
layer): a server-initiated work-done token."""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from lsprotocol import types

logger = logging.getLogger("infill-lsp")


async def new_token(server: Any, on_cancel: threading.Event) -> str | None:
    """A work-done progress token the client accepted (None: it does not do progress, or refused),
    whose cancellation by the user sets `on_cancel`."""
    if not server.supports_progress:
        return None
    token = f"infill-{uuid.uuid4()}"
    try:
        await server.work_done_progress.create_async(token)
    except Exception as error:  # the client refused: go on without progress
        logger.info("no progress: %s", error)
        return None
    cancel_future = server.work_done_progress.tokens.get(token)
    if cancel_future is not None:
        cancel_future.add_done_callback(lambda _: on_cancel.set())
    return token


class StepProgress:
    """``$/progress`` for one fill (server-initiated token); does nothing if not supported."""

    def __init__(self, server: Any, on_cancel: threading.Event) -> None:
        self.server = server
        self.token: str | None = None
        self.on_cancel = on_cancel
        self.sites: tuple[int, int] | None = None  # (done, total) of a docstring job

    async def begin(self, title: str) -> None:
        token = await new_token(self.server, self.on_cancel)
        if token is None:
            return
        self.token = token
        message = "loading the model" if self.server.backend is None else "starting"
        begin = types.WorkDoneProgressBegin(title=title, cancellable=True, message=message, percentage=0)
        self.server.work_done_progress.begin(token, begin)

    def report(self, index: int, cap: int, masked_left: int, retry: int = 0, restart: int = 0) -> None:
        """Called on the event loop after denoising step ``index`` (0-based, of at most ``cap``)
        of the fill, or of its ``retry``-th syntax retry, or of its ``restart``-th fresh fill."""
        if self.token is None:
            return
        done, cap = index + 1, max(1, cap)
        message = f"denoising step {done}/{cap}, {masked_left} masked"
        percentage = min(99, done * 100 // cap)
        if retry:  # after the fill's own steps: the percentage does not go back
            message, percentage = f"syntax retry {retry}: step {done}, {masked_left} masked", 99
        if restart:
            message, percentage = f"fresh fill {restart}: {message}", 99
        if self.sites is not None:  # a job of many sites: its percentage counts sites
            done_sites, total = self.sites
            message = f"docstring {done_sites + 1}/{total}: {message}"
            percentage = min(99, done_sites * 100 // max(1, total))
        report = types.WorkDoneProgressReport(message=message, percentage=percentage)
        self.server.work_done_progress.report(self.token, report)

    def report_site(self, done: int, total: int) -> None:
        """Called on the event loop before each group of sites (``done`` of ``total`` done)."""
        self.sites = (done, total)
        if self.token is None:
            return
        message = f"docstring {done + 1}/{total}"
        report = types.WorkDoneProgressReport(
            message=message, percentage=min(99, done * 100 // max(1, total))
        )
        self.server.work_done_progress.report(self.token, report)

    def end(self, message: str) -> None:
        if self.token is None:
            return
        self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
        self.server.work_done_progress.tokens.pop(self.token, None)
        self.token = None


PROGRESS_AFTER = 1.0
"""Seconds a context refresh runs before it shows as progress (the shipped model's take a few ms)."""


class LayerProgress:
    """``$/progress`` for one context refresh (lsp_server.idle): begun once it has run for
    PROGRESS_AFTER seconds, a report per layer of its pass, cancellable (``cancelled`` is set,
    and the refresh stops before its next layer); nothing if the client has no work-done progress.
    `end` may come before `begin` has its token: the progress then never shows."""

    def __init__(self, server: Any, title: str) -> None:
        self.server = server
        self.title = title
        self.token: str | None = None
        self.cancelled = threading.Event()
        self.finished = False

    async def begin(self) -> None:
        if self.finished:
            return
        token = await new_token(self.server, self.cancelled)
        if token is None or self.finished:  # no progress, or the refresh ended while the client answered
            return
        self.token = token
        begin = types.WorkDoneProgressBegin(title=self.title, cancellable=True, message="context",
                                            percentage=0)  # fmt: skip
        self.server.work_done_progress.begin(token, begin)

    def report(self, done: int, total: int) -> None:
        """Called on the event loop before layer ``done`` (0-based) of ``total``."""
        if self.token is None:
            return
        message = f"layer {done + 1}/{total}"
        percentage = min(99, done * 100 // max(1, total))
        report = types.WorkDoneProgressReport(message=message, percentage=percentage)
        self.server.work_done_progress.report(self.token, report)

    def end(self) -> None:
        self.finished = True
        if self.token is None:
            return
        message = "stopped" if self.cancelled.is_set() else "ready"
        self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
        self.server.work_done_progress.tokens.pop(self.token, None)
        self.token = None
