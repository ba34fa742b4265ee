"""Denoising steps of several requests batched in one forward (iteration-level batching, issue 38).

Where the engine meets the network. A request runs as one call of `pipeline.run`, and every stage
that runs the model (the sampler through infill.engine.prediction, the repair stage, recall, fix
mode's scoring, span-length scoring, the authors' loops) calls one of the denoiser's two network
methods: `logits(ids)` or `cached_logits(ids, positions, cache, refresh)` (`new_cache` only makes
an empty cache). A pass (`infill.models.base.Pass`) is one such call as data, so a request is a
sequence of passes with the engine's own work (choosing tokens, parsing, repairing) between them.

Two drivers run the passes:

    in-process   each pass runs when the request asks (`Pass.run`: the denoiser itself). The CLI
                 and the language server run requests this way; nothing here is on their path.
    batching     `BatchingDriver` (here): each admitted request runs its ordinary `pipeline.run`
                 in a thread of its own, on a `PassDenoiser`: the same denoiser, except that a
                 call of a network method hands its pass to the driver and waits for its rows.

The driver's loop, between two forwards:

    admit      queued requests start, up to `max_live` at once
    gather     wait until every live request has a pass pending, or the oldest pending pass has
               waited `gather_s` (a request busy parsing does not hold the others up longer)
    take       pending passes, as the driver's schedule says (`SCHEDULES`): with "shared", all of
               them, oldest first, up to `max_rows` rows in all (at least one pass); with
               "fewest-passes", the pass of the request that has run the fewest, and small
               passes of others beside it (`SHARE_POSITIONS`);
               a cancelled request's pass is not run: the request gets Cancelled and leaves
    forward    the passes taken, one forward per kind ("full", "refresh", "span": the denoiser's
               `run_passes`, infill.models.batching), and for passes over whole canvases (full,
               refresh) one per canvas length (`forward_key`); a denoiser without
               `run_passes` runs them one by one
    deliver    each pass its own rows; a forward that raises is run again pass by pass, so that
               only the request at fault gets the error
    retire     a request whose `pipeline.run` returns or raises leaves; its result or error is
               its ticket's (`Ticket.result`, or `Ticket.future` for asyncio's wrap_future)

A request may bring a kept context (infill.engine.kept_context: the language server's, or a
team server's for one client's document): it then runs on a fork of it over its own pass
denoiser, so that its first pass computes only what changed since that document's last request,
and the context it ends with is kept for the next one.

So a request joins the running batch between two forwards and leaves it when its fill is done,
and each request keeps all of its own: its schedule (steps, refreshes, length decisions), its
repair and recall stages, its deadline (`Hooks.deadline`) and its cancellation (`Hooks.cancelled`,
or `Ticket.cancel()`: it leaves at its next pass).

Why threads rather than generators. The pipeline's stages are ordinary functions calling each
other down to the network (fill_canvas -> repair -> retries -> sample -> CanvasPredictor ->
cached_logits); making a request a generator of passes would turn every one of them into a
generator (`yield from` on every path to the model): a second shape of the engine to keep in
step with the first. A thread per request keeps one engine: the code that runs in-process runs
here line for line, and only the denoiser's two network methods differ. The threads change no
result: a request's passes are its own, in its own order, its random draws come from its own
seeded generators, and what it shares with the others is the forward alone. A row's numbers in a
batch are its own call's: bit for bit where the products are infill's bfloat16 kernel (each
output summed in one order whatever the rows beside it; the shipped model as served on a CPU),
to float32 rounding elsewhere; so greedy outputs are the in-process ones
(tests/engine/test_batching.py: every mode, in float32 and as served, and the authors' protocol).

Counters (`DriverStats`, what a server's /metrics reads): forwards run, rows they carried, the
most rows and requests in one, forwards shared by several requests, the queue and the live
requests, and how requests ended; then, to tell where a forward's time goes, the forwards, rows
and seconds of each kind of pass, and the takes that left before every live request had its
pass pending (the gather waited `gather_s` for a request still busy between its passes); and the
time the requests spent between an answer and their next pass (choosing tokens, parsing: the
engine's own work, in their threads), which is what a gather waits for.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch

from infill.engine.pipeline import Hooks, Request, run
from infill.errors import Cancelled
from infill.models.base import Pass

if TYPE_CHECKING:  # the interface of every model family (infill.models)
    from infill.engine.kept_context import KeptContext
    from infill.models.base import Denoiser

MAX_ROWS = 64  # rows in one forward (a pass with more runs alone)
MAX_LIVE = 16  # requests running at once; the others wait in the queue
GATHER_S = 0.005  # how long a pending pass may wait for the other live requests' passes
SHARE_POSITIONS = 32
"""fewest-passes: other requests' passes join the least served one's forward while the forward
computes at most this many positions (`Pass.work`). A pass's own cost on a CPU is a fixed part
(the operations' dispatch: about 2 ms for the shipped model) and a part for each position; a
forward of a few blocks of 4 shares the fixed part, one of a whole line (16-63 positions) would
make the least served request wait for the others' arithmetic."""

SCHEDULES = ("auto", "shared", "fewest-passes")
"""Which of the pending passes a forward takes (`BatchingDriver`'s `schedule`; `infill serve
--schedule`):

    shared         all of them, oldest first, up to `max_rows` rows: one forward for every request
                   waiting. For a device that a forward of one canvas leaves mostly idle (a GPU),
                   where a forward of several canvases costs about what one costs.
    fewest-passes  the pass of the pending request that has run the fewest passes (least
                   attained service; one past its deadline before any: it ends at that pass),
                   and beside it those of the others, least served first, while the forward
                   computes at most SHARE_POSITIONS positions. For a CPU, where a forward's time
                   grows with the positions it computes, so that sharing a forward of whole lines
                   saves nothing and slows every request in it alike. Least served first, a short
                   fill takes about its own time under load, and a long one (a fill whose repair
                   runs on) waits while the short ones that arrive go by.
    auto           fewest-passes on a CPU, shared elsewhere (`schedule_for`).

Either schedule changes when a request's passes run, never what they compute: its results are
the in-process ones.
"""


def schedule_for(schedule: str, on_cpu: bool) -> str:
    """`schedule` (one of SCHEDULES), with "auto" made the one for a CPU or not."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)} (got {schedule!r})")
    if schedule != "auto":
        return schedule
    return "fewest-passes" if on_cpu else "shared"


class PassDenoiser:
    """The denoiser as a request sees it when its passes run elsewhere: `logits` and
    `cached_logits` hand their pass to `execute` and return what it returns; everything else
    (tokens, special ids, caches, the family's settings) is the inner denoiser's. It is the
    innermost wrapper: a kept context (infill.engine.kept_context) wraps it, not the other way."""

    def __init__(self, inner: Denoiser, execute: Callable[[Pass], torch.Tensor]) -> None:
        self.inner = inner
        self.execute = execute
        if hasattr(inner, "cached_logits"):  # the engine reads the capability with hasattr
            self.cached_logits = self._cached_logits

    def __getattr__(self, name: str) -> Any:  # mask_id, encode, new_cache, framing, ...
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        return self.execute(Pass(ids))

    def _cached_logits(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        cache,
        refresh: bool,
        predicted: torch.Tensor | None = None,
    ) -> torch.Tensor:
        return self.execute(Pass(ids, positions, cache, refresh, predicted))


def forward_key(p: Pass) -> tuple[str, int]:
    """Which passes share a forward: those of one kind, and for passes over whole canvases (full,
    refresh) of one canvas length. Canvases of other lengths would be padded, and padded keys
    change a row's attention sums in their last bits (infill.models.batching): float32 keeps
    the greedy outputs, bfloat16's rounding (the shipped model on a CPU) does not. A span pass
    attends to its own cache only, so span passes over any canvases share one (packed side by
    side, none padded: infill.models.batching)."""
    return p.kind, 0 if p.kind == "span" else p.ids.shape[1]


def fewest_passes_first(pending: list[Ticket], now: float, budget: int = SHARE_POSITIONS) -> list[Ticket]:
    """What the "fewest-passes" schedule takes of the pending passes: the least served request's
    (one past its deadline first, then the fewest passes run, the longest waiting, the first
    submitted), and after it, in that order, every other that shares its forward (`forward_key`)
    while their positions (`Pass.work`) come to at most `budget` in all."""
    ordered = sorted(pending, key=lambda t: (not t.hooks.out_of_time(now), t.passes, t.since, t.number))
    first = ordered[0]
    taken, work, shared = [first], first.pending.work, forward_key(first.pending)
    for ticket in ordered[1:]:
        if forward_key(ticket.pending) == shared and work + ticket.pending.work <= budget:
            taken.append(ticket)
            work += ticket.pending.work
    return taken


@dataclass(frozen=True)
class DriverStats:
    """The driver's counters at one moment."""

    passes: int  # forwards run
    rows: int  # canvas rows those forwards carried
    most_rows: int  # the most rows in one forward
    most_requests: int  # the most requests in one forward
    shared_passes: int  # forwards that carried passes of two requests or more
    forward_seconds: float  # time spent in forwards
    queued: int  # submitted, not yet admitted
    live: int  # admitted, not yet done
    finished: int  # returned a result
    cancelled: int  # left on Cancelled
    failed: int  # raised anything else
    takes: int = 0  # times the loop took pending passes (each one forward or more: one per kind)
    early_takes: int = 0  # of those, taken while a live request had no pass pending yet
    gaps: int = 0  # times a request asked for a pass after an answer (its passes but the first)
    gap_seconds: float = 0.0  # the time between those answers and the next asks, in all
    by_kind: dict[str, tuple[int, int, float]] = field(default_factory=dict)  # kind: forwards, rows, s

    @property
    def rows_per_pass(self) -> float:
        return self.rows / self.passes if self.passes else 0.0

    @property
    def gap_ms(self) -> float:
        """A request's own work between two of its passes, on average (milliseconds)."""
        return 1000 * self.gap_seconds / self.gaps if self.gaps else 0.0


class Ticket:
    """One submitted request: its result (or error) once done, and a way to cancel it."""

    def __init__(self, request: Request, hooks: Hooks | None, wake: Callable[[], None], number: int,
                 kept: KeptContext | None = None) -> None:  # fmt: skip
        self.request = request
        self.hooks = hooks or Hooks()
        self.kept = kept  # the document's kept context, if the request runs on one
        self.number = number  # submission order
        self.future: Future = Future()
        self.passes = 0  # passes of this request the driver has run
        self._cancel = threading.Event()
        self._wake = wake
        # The pass waiting for its rows, since when, and its answer (the driver's lock guards them).
        self.pending: Pass | None = None
        self.since = 0.0
        self.answer: torch.Tensor | BaseException | None = None
        self.answered = threading.Event()
        self.answered_at: float | None = None  # when its last pass was answered

    def cancel(self) -> None:
        """Stop the request: it leaves at its next pass (or before it starts), with Cancelled."""
        self._cancel.set()
        self._wake()

    def cancelled(self) -> bool:
        """Cancelled by `cancel()` or by its own hook (a client that went away)."""
        return self._cancel.is_set() or (self.hooks.cancelled is not None and bool(self.hooks.cancelled()))

    def done(self) -> bool:
        return self.future.done()

    def result(self, timeout: float | None = None) -> Any:
        """The mode's result, as `pipeline.run` returns it; raises what the request raised."""
        return self.future.result(timeout)


class BatchingDriver:
    """Runs requests on `denoiser`, their passes batched; see the module's docstring.

    `submit` queues a request and returns its `Ticket`; the loop runs in a thread of its own from
    `start()` (or entering `with`) to `close()`, which lets the admitted and queued requests
    finish first. `schedule`: one of `SCHEDULES` ("auto" is resolved here: `self.schedule`)."""

    def __init__(self, denoiser: Denoiser, max_rows: int = MAX_ROWS, max_live: int = MAX_LIVE,
                 gather_s: float = GATHER_S, schedule: str = "shared") -> None:  # fmt: skip
        if max_rows < 1 or max_live < 1 or gather_s < 0:
            raise ValueError("max_rows and max_live must be at least 1, gather_s at least 0")
        self.denoiser = denoiser
        self.max_rows, self.max_live, self.gather_s = max_rows, max_live, gather_s
        device = getattr(denoiser, "device", None)  # none: a network double, on the CPU
        self.schedule = schedule_for(schedule, device is None or torch.device(device).type == "cpu")
        self._lock = threading.Condition()
        self._queue: deque[Ticket] = deque()
        self._live: list[Ticket] = []
        self._numbers = itertools.count()
        self._loop: threading.Thread | None = None
        self._closing = False
        self._stopped: BaseException | None = None  # what ended the loop, if anything did
        self._counts = dict(passes=0, rows=0, most_rows=0, most_requests=0, shared_passes=0,
                            forward_seconds=0.0, finished=0, cancelled=0, failed=0, takes=0,
                            early_takes=0, gaps=0, gap_seconds=0.0)  # fmt: skip
        self._by_kind: dict[str, tuple[int, int, float]] = {}

    # ------------------------------------------------------------------ the caller's side

    def submit(self, request: Request, hooks: Hooks | None = None, kept: KeptContext | None = None) -> Ticket:
        """Queue `request`; `kept`: a kept context over this driver's denoiser to run it on."""
        with self._lock:
            if self._closing or self._stopped is not None:
                raise RuntimeError("the batching driver is closed")
            ticket = Ticket(request, hooks, self._wake, next(self._numbers), kept)
            self._queue.append(ticket)
            self._lock.notify_all()
        return ticket

    def start(self) -> BatchingDriver:
        with self._lock:
            if self._loop is None:
                self._loop = threading.Thread(target=self._run_loop, name="infill-batching", daemon=True)
                self._loop.start()
        return self

    def close(self) -> None:
        """No new requests; those submitted finish, then the loop ends."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
            loop = self._loop
        if loop is None:  # never started: nothing ran, nothing will
            self.start()
            loop = self._loop
        loop.join()

    def __enter__(self) -> BatchingDriver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def stats(self) -> DriverStats:
        with self._lock:
            return DriverStats(**self._counts, queued=len(self._queue), live=len(self._live),
                               by_kind=dict(self._by_kind))  # fmt: skip

    # ------------------------------------------------------------------ the requests' threads

    def _wake(self) -> None:
        with self._lock:
            self._lock.notify_all()

    def _work(self, ticket: Ticket) -> None:
        """One request's `pipeline.run`, its passes through the driver."""
        denoiser = PassDenoiser(self.denoiser, lambda p: self._ask(ticket, p))
        if ticket.kept is not None:  # its document's context, kept again once the request ends
            denoiser = ticket.kept.fork(denoiser)
        hooks = replace(ticket.hooks, cancelled=ticket.cancelled)
        try:
            result, error = run(denoiser, ticket.request, hooks), None
        except BaseException as caught:  # the request's own end; the others go on
            result, error = None, caught
        if ticket.kept is not None:  # before the answer: the client's next request starts from it
            ticket.kept.keep(denoiser)
        if error is None:
            self._retire(ticket, "finished")
            ticket.future.set_result(result)
        else:
            self._retire(ticket, "cancelled" if isinstance(error, Cancelled) else "failed")
            ticket.future.set_exception(error)

    def _ask(self, ticket: Ticket, p: Pass) -> torch.Tensor:
        """In the request's thread: hand the pass to the loop and wait for its rows."""
        with self._lock:
            if ticket.cancelled():
                raise Cancelled("request cancelled")
            if self._stopped is not None:
                raise RuntimeError("the batching driver's loop has ended") from self._stopped
            ticket.answered.clear()
            ticket.pending, ticket.since = p, time.monotonic()
            if ticket.answered_at is not None:  # the request's own work since its last answer
                self._counts["gaps"] += 1
                self._counts["gap_seconds"] += ticket.since - ticket.answered_at
            self._lock.notify_all()
        ticket.answered.wait()
        answer, ticket.answer = ticket.answer, None
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _retire(self, ticket: Ticket, how: str) -> None:
        with self._lock:
            self._live.remove(ticket)
            self._counts[how] += 1
            self._lock.notify_all()

    # ------------------------------------------------------------------ the loop

    def _run_loop(self) -> None:
        while True:
            with self._lock:
                taken = self._next_passes()
                if taken is None:
                    return
            try:
                self._forward(taken)
            except BaseException as error:  # not a pass's own (those are caught): the loop ends,
                with self._lock:  # and no request may wait for it for ever
                    self._stopped = error
                    for ticket in self._live:
                        if ticket.pending is not None:
                            self._answer(ticket, error)
                raise

    def _next_passes(self) -> list[Ticket] | None:
        """Under the lock: wait for passes worth a forward and take them (None: closed and idle)."""
        while True:
            self._admit()
            if self._closing and not self._live and not self._queue:
                return None
            pending = [t for t in self._live if t.pending is not None]
            for ticket in [t for t in pending if t.cancelled()]:
                self._answer(ticket, Cancelled("request cancelled"))  # it leaves at this pass
                pending.remove(ticket)
            if pending:
                waited = time.monotonic() - min(t.since for t in pending)
                if len(pending) == len(self._live) or waited >= self.gather_s:
                    self._counts["takes"] += 1
                    self._counts["early_takes"] += int(len(pending) < len(self._live))
                    return self._take(pending)
                self._lock.wait(self.gather_s - waited)
            else:
                self._lock.wait()

    def _admit(self) -> None:
        while self._queue and len(self._live) < self.max_live:
            ticket = self._queue.popleft()
            self._live.append(ticket)
            if ticket.cancelled():  # cancelled while queued: it leaves without a pass
                self._live.remove(ticket)
                self._counts["cancelled"] += 1
                ticket.future.set_exception(Cancelled("request cancelled"))
                continue
            threading.Thread(target=self._work, args=(ticket,), name=f"infill-request-{ticket.number}",
                             daemon=True).start()  # fmt: skip

    def _take(self, pending: list[Ticket]) -> list[Ticket]:
        if self.schedule == "fewest-passes":
            return fewest_passes_first(pending, time.monotonic())
        taken, rows = [], 0
        for ticket in sorted(pending, key=lambda t: (t.since, t.number)):
            if taken and rows + ticket.pending.rows > self.max_rows:
                break
            taken.append(ticket)
            rows += ticket.pending.rows
        return taken

    def _answer(self, ticket: Ticket, answer: torch.Tensor | BaseException) -> None:
        ticket.pending, ticket.answer, ticket.answered_at = None, answer, time.monotonic()
        ticket.answered.set()

    def _forward(self, taken: list[Ticket]) -> None:
        """Outside the lock: the taken passes, one forward per kind (and per canvas length for
        passes over whole canvases: `forward_key`); each ticket its answer."""
        by_kind: dict[tuple[str, int], list[Ticket]] = {}
        for ticket in taken:
            by_kind.setdefault(forward_key(ticket.pending), []).append(ticket)
        groups = list(by_kind.values())
        if not hasattr(self.denoiser, "run_passes"):  # a network that cannot batch: one by one
            groups = [[ticket] for ticket in taken]
        for group in groups:
            passes = [t.pending for t in group]
            started = time.perf_counter()
            answers = self._outputs(passes)
            seconds = time.perf_counter() - started
            with self._lock:
                self._count(group, seconds)
                for ticket, answer in zip(group, answers):
                    ticket.passes += 1
                    self._answer(ticket, answer)

    def _outputs(self, passes: list[Pass]) -> list[torch.Tensor | BaseException]:
        if len(passes) > 1:
            try:
                return self.denoiser.run_passes(passes)
            except Exception:  # run them one by one: only the pass at fault gets its error
                pass
        return [self._alone(p) for p in passes]

    def _alone(self, p: Pass) -> torch.Tensor | BaseException:
        try:
            return p.run(self.denoiser)
        except Exception as error:
            return error

    def _count(self, group: list[Ticket], seconds: float) -> None:
        rows = sum(t.pending.rows for t in group)
        counts = self._counts
        counts["passes"] += 1
        counts["rows"] += rows
        counts["most_rows"] = max(counts["most_rows"], rows)
        counts["most_requests"] = max(counts["most_requests"], len(group))
        counts["shared_passes"] += int(len(group) > 1)
        counts["forward_seconds"] += seconds
        forwards, kind_rows, kind_seconds = self._by_kind.get(group[0].pending.kind, (0, 0, 0.0))
        self._by_kind[group[0].pending.kind] = (forwards + 1, kind_rows + rows, kind_seconds + seconds)
