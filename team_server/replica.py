"""What one replica holds: the model, one batching driver, the gate and the counters; and how a
request of the event loop becomes a ticket of the driver and back.

    submit    the queue bound first (503), then `BatchingDriver.submit` with a deadline: the
              server's request timeout, or less where the client asked for less. Past the
              deadline a fill ends at its next pass and skips the repair and recall stages (the
              best fill so far: infill.engine.pipeline.Hooks.deadline)
    await     the ticket's future, shielded: a handler that is cancelled (Ray Serve cancels it
              when its client disconnects or its own timeout passes) or that gives up cancels
              the ticket, and the request leaves the batch at its next pass (Ticket.cancel). A
              request still running DEADLINE_GRACE seconds past its deadline is cancelled and
              answered 504
    tune      the options a client asked for, with the model family's recommended settings in
              the fields it left unset, as the CLI and the language server do
    keep      with `kept_contexts` (`infill serve --kept-contexts N`), the context of each client's
              last document (the client: its token's name, or its address without tokens; and
              the file's path where the request names one), for the last N clients: its next
              request's first pass computes what changed (infill.engine.kept_context), as the
              language server's does in-process

Requests run as the in-process path runs them (`pipeline.run`, in a thread of the driver), on the
same denoiser: a replica's answers are the CLI's for the same request and settings.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from infill.engine.batching import BatchingDriver, Ticket
from infill.engine.kept_context import DocumentContexts, KeptContext
from infill.engine.pipeline import Hooks
from infill.models.defaults import TUNABLE, recommended_pass_budget, with_recommended
from infill.models.model_info import model_card
from infill.options import InfillOptions
from team_server.auth import Gate, Refusal, busy
from team_server.config import ServerConfig
from team_server.memory import Trimmer
from team_server.metrics import Metrics
from team_server.protocols import ModelInfo

DEADLINE_GRACE = 5.0  # seconds past its deadline before a request still running is cancelled (504)
DISCONNECT_POLL = 0.05  # seconds between checks that a client is still there


class Refused(Exception):
    """A request turned away before or instead of running (its Refusal says how)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class Replica:
    """A loaded model and its driver (`start`), until `close`."""

    def __init__(self, denoiser: Any, config: ServerConfig, info: ModelInfo) -> None:
        self.denoiser = denoiser
        self.config = config
        self.info = info
        self.driver = BatchingDriver(denoiser, config.max_rows, config.max_live, config.gather_s,
                                     config.schedule).start()
        self.trimmer = Trimmer().start()  # freed memory back to the system (team_server.memory)
        self.gate = Gate(config.digests(), config.limits())
        self.contexts = DocumentContexts(config.kept_contexts) if config.kept_contexts else None
        self.metrics = Metrics()
        self.started = time.time()

    @classmethod
    def start(cls, config: ServerConfig) -> Replica:
        """Load the model as the CLI does (infill.models.load; its ModelError says what failed)."""
        from infill.models import load

        denoiser = load(config.model, config.device, config.dtype, threads=config.threads,
                        quantize=config.quantize)  # fmt: skip
        card = model_card(config.model)
        name = "-".join(card.name.split())  # a model id without spaces ("infill-recipe-model")
        family = getattr(denoiser, "family", None)
        engine = {"family": family, "recommended": dict(getattr(denoiser, "recommended", None) or {}),
                  "context_length": getattr(denoiser, "context_length", None)}  # fmt: skip
        return cls(denoiser, config, ModelInfo(name, card.params, family or "infill-diffusion", engine))

    def close(self) -> None:
        self.driver.close()
        self.trimmer.stop()

    def tune(self, options: InfillOptions, explicit: frozenset[str]) -> InfillOptions:
        """The family's recommended sampler settings and pass budget where the client set none."""
        sampler = with_recommended(options.sampler, self.denoiser, set(explicit) & set(TUNABLE))
        options = replace(options, sampler=sampler)
        if "pass_budget" not in explicit:
            budget = recommended_pass_budget(self.denoiser, options.pass_budget)
            options = replace(options, pass_budget=budget)
        return options

    def deadline(self, timeout: float | None) -> float:
        """Seconds the request may take: the client's, at most the server's."""
        limit = self.config.request_timeout
        return min(timeout, limit) if timeout else limit

    def submit(self, request: Any, timeout: float | None = None,
               client: str | None = None) -> tuple[Ticket, float]:  # fmt: skip
        """Queue `request` (503 when the queue is full): its ticket and its time limit in seconds.
        `client`: whose document it is, for its kept context (None: none is kept)."""
        queued = self.driver.stats().queued
        if queued >= self.config.max_queue:
            raise Refused(busy(queued))
        seconds = self.deadline(timeout)
        hooks = Hooks(deadline=time.monotonic() + seconds)
        return self.driver.submit(request, hooks, kept=self.kept_context(client)), seconds

    def kept_context(self, client: str | None) -> KeptContext | None:
        """The client's kept context, where contexts are kept and the network can keep one."""
        if self.contexts is None or client is None:
            return None
        kept = self.contexts.denoiser(client, self.denoiser)
        return kept if isinstance(kept, KeptContext) else None

    async def result(self, ticket: Ticket, seconds: float,
                     disconnected: Callable[[], Awaitable[bool]] | None = None) -> Any:  # fmt: skip
        """The ticket's result, awaited without blocking the event loop; the ticket is cancelled
        when this is (a client gone), when `disconnected()` says so, or DEADLINE_GRACE after its
        deadline (TimeoutError)."""
        ticket_done = asyncio.wrap_future(ticket.future)
        ticket_done.add_done_callback(retrieved)  # a ticket cancelled after its client left ends unawaited
        waiting = asyncio.ensure_future(asyncio.shield(ticket_done))
        watcher = asyncio.ensure_future(watch(disconnected)) if disconnected is not None else None
        try:
            waits = {waiting} | ({watcher} if watcher is not None else set())
            done, _ = await asyncio.wait(waits, timeout=seconds + DEADLINE_GRACE,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if waiting in done:
                return waiting.result()
            ticket.cancel()
            if watcher is not None and watcher in done:
                raise ClientGone("the client disconnected")
            raise TimeoutError(f"the request ran past its {seconds:g} s deadline")
        except asyncio.CancelledError:
            ticket.cancel()
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
            if not waiting.done():
                waiting.cancel()  # the shield's outer future: the ticket's own future is left alone

    async def run(self, request: Any, timeout: float | None = None,
                  disconnected: Callable[[], Awaitable[bool]] | None = None,
                  client: str | None = None) -> Any:  # fmt: skip
        ticket, seconds = self.submit(request, timeout, client)
        return await self.result(ticket, seconds, disconnected)


def retrieved(future: asyncio.Future) -> None:
    """Take the future's exception, so that asyncio does not log it as never retrieved when the
    future is collected (a log line formatted inside the collector, which may be inside the
    parser: Python 3.11's ast then fails the parse it interrupted)."""
    if not future.cancelled():
        future.exception()


class ClientGone(Exception):
    """The client went away while its request ran (its ticket is cancelled)."""


async def watch(disconnected: Callable[[], Awaitable[bool]]) -> None:
    """Returns once `disconnected()` is true (a check that fails stops the watching, not the request)."""
    try:
        while not await disconnected():
            await asyncio.sleep(DISCONNECT_POLL)
    except Exception:
        await asyncio.Event().wait()  # until cancelled
