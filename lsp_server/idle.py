"""The document's kept context refreshed while the user is idle (infill.engine.kept_context).

A fill's first pass reuses the keys and values the document's last pass left, moved to where the
same tokens are now, and computes only what changed. After the user edits, the edited text and
the context around it then come from a pass that saw the old text. When the document has been
quiet for ``idleRefresh`` seconds (default :data:`IDLE_SECONDS`) after a change, the server runs
one exact full pass over the model's window around the change, in the model's worker thread, so
that the next request computes its span alone on context that is exact for the text as it is.

A document that opens is prepared the same way (a refresh around its start, after the same
quiet), so that the first fill in an open file costs what a fill on a prepared context costs.

The refresh is skipped when it would be in the way or of no use: the model is not loaded yet
(the first fill loads it), another change came in, a request for the document is under way, or
the fill actions run the authors' loops (which keep no context). A refresh that has started
stops between two layers of its pass when the document changes or any request comes in, and
the kept context stays as it was (infill.engine.kept_context.KeptContext.refresh): a request
waits for one layer of it at most (a 7B network's layer on two CPU cores: about a second), an
inline completion too. The quiet it waits for is at least :data:`QUIET_PER_REFRESH` times what
the last refresh took: a few milliseconds for the shipped model, about 1.5 s for a 0.5B one on
two CPU cores, which then refreshes after 6 s of quiet. A refresh that takes longer than a second
shows as progress (the server's), which the user can cancel.

After the refresh, the same quiet runs what else waits for it (``after``: the review
diagnostics, lsp_server.review), with the same test of whether it is still wanted; its time does
not count in the quiet waited for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from infill.text.parse_cache import common_prefix

logger = logging.getLogger("infill-lsp")

IDLE_SECONDS = 0.5
"""Quiet time after a change before the refresh (the ``idleRefresh`` setting; 0: never)."""
QUIET_PER_REFRESH = 4
"""The quiet waited for is at least this many times the last refresh's duration."""


def change_offset(old: str, new: str) -> int:
    """Where ``new`` first differs from ``old`` (the start of the change a full-text sync sent);
    the length of the shorter one if one starts the other."""
    return common_prefix(old, new)


class IdleRefresh:
    """Per document: its last text, and the refresh waiting for quiet."""

    def __init__(
        self,
        refresh: Callable[[str, str, int, Callable[[], bool]], Awaitable[int]],
        after: Callable[[str, Callable[[], bool]], Awaitable[None]] | None = None,
    ) -> None:
        """``refresh(uri, text, offset, still_wanted)``: refreshes the document's context around
        ``offset`` of ``text`` unless ``still_wanted()`` has turned false, and returns the tokens
        it computed (0: skipped); the server's. ``after(uri, still_wanted)``: runs next, while
        ``still_wanted()``."""
        self._refresh = refresh
        self._after = after
        self._texts: dict[str, str] = {}
        self._waiting: dict[str, asyncio.TimerHandle] = {}
        self._generation: dict[str, int] = {}
        self.last_seconds = 0.0  # what the last refresh took

    def opened(self, uri: str, text: str, seconds: float = 0) -> None:
        """The document opened with ``text``: prepare its context around its start after
        ``seconds`` of quiet (0: not)."""
        self._texts[uri] = text
        self._schedule(uri, text, 0, seconds)

    def changed(self, uri: str, text: str, seconds: float) -> None:
        """The document is now ``text``: refresh around the change after ``seconds`` of quiet."""
        old = self._texts.get(uri)
        self._texts[uri] = text
        if old is None or old == text:
            self._schedule(uri, text, 0, 0)  # nothing to refresh: only a waiting refresh goes
            return
        self._schedule(uri, text, change_offset(old, text), seconds)

    def _schedule(self, uri: str, text: str, offset: int, seconds: float) -> None:
        """Drop the refresh waiting for ``uri``; then, unless ``seconds`` is 0, refresh around
        ``offset`` of ``text`` after that much quiet."""
        self._cancel(uri)
        self._generation[uri] = self._generation.get(uri, 0) + 1
        if seconds <= 0:
            return
        generation = self._generation[uri]
        loop = asyncio.get_running_loop()

        def start() -> None:
            self._waiting.pop(uri, None)
            loop.create_task(self._refresh_if_quiet(uri, text, offset, generation))

        self._waiting[uri] = loop.call_later(max(seconds, QUIET_PER_REFRESH * self.last_seconds), start)

    def quiet(self, uri: str, generation: int) -> bool:
        """No change to ``uri`` since ``generation``."""
        return self._generation.get(uri) == generation

    def closed(self, uri: str) -> None:
        self._cancel(uri)
        self._texts.pop(uri, None)
        self._generation.pop(uri, None)

    def _cancel(self, uri: str) -> None:
        waiting = self._waiting.pop(uri, None)
        if waiting is not None:
            waiting.cancel()

    async def _refresh_if_quiet(self, uri: str, text: str, offset: int, generation: int) -> None:
        if not self.quiet(uri, generation):
            return
        started = time.perf_counter()
        try:
            tokens = await self._refresh(uri, text, offset, lambda: self.quiet(uri, generation))
        except Exception:  # never the user's problem: the next fill works without it
            logger.exception("idle refresh of %s failed", uri)
            tokens = 0
        if tokens:
            self.last_seconds = time.perf_counter() - started
            logger.info("idle refresh of %s: %d tokens in %.0f ms", uri, tokens,
                        1000 * (time.perf_counter() - started))  # fmt: skip
        if self._after is None or not self.quiet(uri, generation):
            return
        try:
            await self._after(uri, lambda: self.quiet(uri, generation))
        except Exception:
            logger.exception("idle work on %s failed", uri)
