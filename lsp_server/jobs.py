"""One model job per document and kind: a newer request supersedes the older one.

A job is a fill or quick fix (kind "resolve") or an inline completion (kind "inline"); a newer
job of the same document and kind supersedes the older one (an inline completion, which editors
send as the user types, does not cancel a fill the user asked for). The sampler polls
:meth:`Job.cancelled` before every denoising step, so a superseded (or cancelled) job stops
within one step and its request can answer "cancelled" instead of an edit nobody waits for.

Used from the server's event loop only (start/finish); the sampler thread only reads the event.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

RESOLVE, INLINE = "resolve", "inline"


@dataclass
class Job:
    uri: str
    kind: str = RESOLVE
    cancel: threading.Event = field(default_factory=threading.Event)
    superseded: bool = False

    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def supersede(self) -> None:
        self.superseded = True
        self.cancel.set()


class DocumentJobs:
    """The latest job of each document and kind."""

    def __init__(self) -> None:
        self._latest: dict[tuple[str, str], Job] = {}

    def start(self, uri: str, kind: str = RESOLVE) -> Job:
        """A new job for ``uri``; the one of the same kind it replaces (if any) is superseded."""
        previous = self._latest.get((uri, kind))
        if previous is not None:
            previous.supersede()
        job = self._latest[uri, kind] = Job(uri, kind)
        return job

    def finish(self, job: Job) -> None:
        """Forget ``job`` (if a newer one has not replaced it already)."""
        if self._latest.get((job.uri, job.kind)) is job:
            del self._latest[job.uri, job.kind]

    def running(self, uri: str, kind: str = RESOLVE) -> Job | None:
        return self._latest.get((uri, kind))

    def of_document(self, uri: str) -> list[Job]:
        """Every job of ``uri``, whatever its kind."""
        return [job for (job_uri, _), job in self._latest.items() if job_uri == uri]
