"""What a replica is started with: the model to load, the batching driver's settings and the
limits. One frozen dataclass, made by `infill serve` (team_server.cli) and handed to every
replica, wherever Ray places it, so it holds plain values only: the tokens as their digests
(team_server.auth), never the tokens file's path, which another node may not have."""

from __future__ import annotations

from dataclasses import dataclass

from infill.engine.batching import GATHER_S, MAX_LIVE, MAX_ROWS
from team_server.auth import BODY_LIMIT, BURST, RATE, Limits

REQUEST_TIMEOUT = 60.0  # seconds a request may take at most (a client may ask for less)
MAX_QUEUE = 64  # requests waiting for the model beyond the live ones; more: 503


@dataclass(frozen=True)
class ServerConfig:
    model: str | None = None  # a folder or ORG/NAME in the local Hugging Face cache; None: the shipped one
    device: str = "auto"
    dtype: str = "auto"
    quantize: str = "auto"
    threads: int | None = None  # torch's CPU threads in a replica
    max_rows: int = MAX_ROWS  # the batching driver's (infill.engine.batching)
    max_live: int = MAX_LIVE
    gather_s: float = GATHER_S
    schedule: str = "auto"  # which pending passes a forward takes: one of infill.engine.batching.SCHEDULES
    max_queue: int = MAX_QUEUE
    request_timeout: float = REQUEST_TIMEOUT
    tokens: tuple[tuple[str, str], ...] | None = None  # (digest, name) pairs; None: no token asked
    rate: float = RATE
    burst: int = BURST
    body_limit: int = BODY_LIMIT
    kept_contexts: int = 0  # clients' documents whose context is kept between requests; 0: none

    def limits(self) -> Limits:
        return Limits(self.rate, self.burst, self.body_limit)

    def digests(self) -> dict[str, str] | None:
        return dict(self.tokens) if self.tokens is not None else None
