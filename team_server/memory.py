"""A replica's resident memory: given back to the system as requests come and go.

A replica runs each request in a thread of its own (infill.engine.batching), and glibc's malloc
gives threads arenas of their own and keeps what they free for later: the process's resident
memory then climbs to the most that any mix of requests has ever held at once, slowly, for
minutes (a 10-minute soak at 8 clients, `infill-bench serve --soak 600`: still +12-17% after
the first minute, then flat, docs/serving.md). And PyTorch's bfloat16 products on a CPU go
through oneDNN, which keeps each product shape it has run, compiled, in a cache of up to 1,024
of them: a server whose canvases come in many lengths fills it, a few hundred MiB over minutes
(the shipped model's bfloat16 products are infill's own where its kernel builds,
infill.models.bf16_native, and never reach oneDNN). These settings keep the memory near what is
in use:

    MALLOC_ARENA_MAX=2   fewer arenas to keep freed memory in
    ONEDNN_PRIMITIVE_CACHE_CAPACITY=64
                         the product shapes oneDNN keeps (0 keeps none: 20-28% fewer fills a
                         second at one client; 64 as fast as 1,024 in the same bench)
    malloc_trim(0)       every TRIM_SECONDS, the free memory of every arena goes back to the
                         system (`Trimmer`)

The first two are read when the process starts (the deployment, team_server.deployment, sets
them for the replica's process: `REPLICA_ENV`). Elsewhere than glibc (macOS, musl) the arenas
and the trim do not exist, and nothing is done for them.
"""

from __future__ import annotations

import threading

from infill.models.memory import give_back

REPLICA_ENV = {"MALLOC_ARENA_MAX": "2", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"}
TRIM_SECONDS = 10.0


class Trimmer:
    """malloc_trim every `seconds` in a daemon thread, until `stop`."""

    def __init__(self, seconds: float = TRIM_SECONDS) -> None:
        self.seconds = seconds
        self.stopped = threading.Event()
        self.trims = 0
        self.thread = threading.Thread(target=self._run, name="infill-malloc-trim", daemon=True)

    def start(self) -> Trimmer:
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stopped.wait(self.seconds):
            if not give_back():
                return
            self.trims += 1

    def stop(self) -> None:
        self.stopped.set()
