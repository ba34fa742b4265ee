"""Model jobs by document, kind and key: a newer request supersedes only the same one.

A job is a fill or quick fix (kind "resolve") or an inline completion (kind "inline"). A newer
inline completion of a document supersedes the older one (ghost text is asked for as the user
types); a resolve supersedes only a running resolve of the *same* action (its ``key``): distinct
actions a client resolves at once each get their edit, one after the other in the worker
thread. An inline completion never cancels a fill the user asked for. The sampler polls
:meth:`Job.cancelled` before every denoising step (and the docstring job before every site),
so a superseded, cancelled or timed-out job stops within one step and its request can answer
"cancelled" (or "took too long") instead of an edit nobody waits for.

Used from the server's event loop only (start/finish); the sampler thread only reads the event.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

RESOLVE, INLINE = "resolve", "inline"


@dataclass
class Job:
    uri: str
    kind: str = RESOLVE
    key: str | None = None  # what the job does (a resolve: its action's data); None: any
    cancel: threading.Event = field(default_factory=threading.Event)
    superseded: bool = False
    deadline: float | None = None  # time.monotonic() after which the job stops (requestTimeout)
    timed_out: bool = False

    def cancelled(self) -> bool:
        if self.deadline is not None and not self.cancel.is_set() and time.monotonic() > self.deadline:
            self.timed_out = True
            self.cancel.set()
        return self.cancel.is_set()

    def start_clock(self, seconds: float | None) -> None:
        """The time budget starts now (in the worker thread, when the job starts running)."""
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def supersede(self) -> None:
        self.superseded = True
        self.cancel.set()


class DocumentJobs:
    """The latest job of each document, kind and key."""

    def __init__(self) -> None:
        self._latest: dict[tuple[str, str, str | None], Job] = {}

    def start(self, uri: str, kind: str = RESOLVE, key: str | None = None) -> Job:
        """A new job for ``uri``; the one of the same kind and key it replaces (if any) is superseded."""
        previous = self._latest.get((uri, kind, key))
        if previous is not None:
            previous.supersede()
        job = self._latest[uri, kind, key] = Job(uri, kind, key)
        return job

    def finish(self, job: Job) -> None:
        """Forget ``job`` (if a newer one has not replaced it already)."""
        if self._latest.get((job.uri, job.kind, job.key)) is job:
            del self._latest[job.uri, job.kind, job.key]

    def running(self, uri: str, kind: str = RESOLVE, key: str | None = None) -> Job | None:
        return self._latest.get((uri, kind, key))

    def of_document(self, uri: str) -> list[Job]:
        """Every job of ``uri``, whatever its kind."""
        return [job for (job_uri, _, _), job in self._latest.items() if job_uri == uri]

    def all(self) -> list[Job]:
        return list(self._latest.values())

    def busy(self) -> bool:
        """Whether any job is waiting or running; safe to ask from the worker thread (one read)."""
        return len(self._latest) > 0
