"""Who may ask, how often, how much: the checks every request passes before it reaches the model.

    tokens     a file of `NAME TOKEN` lines (`#` comments and blank lines skipped); a request
               names itself with `Authorization: Bearer TOKEN`, else 401. Without a tokens file
               every request is let in (the server then listens on 127.0.0.1 unless told otherwise)
    rate       a token bucket per name (per client address without tokens): `rate` requests a
               second, bursts of `burst`; past it 429 with Retry-After (whole seconds)
    size       a body above `body_limit` bytes (1 MiB) is refused with 413, by its Content-Length
               before it is read, and by what is read (`BodyReader`)
    queue      more than `max_queue` requests waiting for the model: 503 with Retry-After
               (team_server.replica, which knows the queue)

Tokens are kept as SHA-256 digests (`read_tokens`), compared in constant time, and never
written to a log or a message; the names are what logs and limits know a client by. Each replica
keeps its own buckets: with N replicas a client may reach N times the rate (docs/serving.md).

Plain functions and small classes with an injectable clock, unit-tested without a server.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

BODY_LIMIT = 1024 * 1024  # bytes
RATE = 10.0  # requests a second a client may keep up...
BURST = 40  # ...and in one burst (an editor asks on every pause in typing)
OPEN_PATHS = frozenset({"/health"})  # answered without a token (load balancers' probes)
UNMETERED = frozenset({"/metrics"})  # a token, but no rate: a monitor's reads cost no model time, and
#   `infill-bench serve` reads it several times a sample (each read meets one replica): metered,
#   its reads ran out a test server's burst of 40 and a soak's samples lost their replica (429)


@dataclass(frozen=True)
class Refusal:
    """A request turned away: its status, what to tell the client, and the headers to send."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def read_tokens(text: str, source: str = "tokens file") -> dict[str, str]:
    """`NAME TOKEN` lines -> {digest of TOKEN: NAME}. ValueError (naming the line, never the
    token) for a line that is not two words, a name or token given twice, or no token at all."""
    found: dict[str, str] = {}
    names: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if len(words) != 2:
            raise ValueError(f"{source}, line {number}: expected `NAME TOKEN` (two words)")
        name, token = words
        if len(token) < 16:
            raise ValueError(f"{source}, line {number}: the token of {name} is shorter than 16 characters")
        key = digest(token)
        if name in names or key in found:
            raise ValueError(f"{source}, line {number}: {name} or its token is listed twice")
        found[key] = name
        names.add(name)
    if not found:
        raise ValueError(f"{source}: no `NAME TOKEN` line")
    return found


def load_tokens(path: str | Path) -> dict[str, str]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"{path}: cannot read the tokens file: {error.strerror}") from None
    return read_tokens(text, str(path))


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header (header names in lower case)."""
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def who(digests: Mapping[str, str], token: str | None) -> str | None:
    """The name whose token this is, None if none is (every digest compared, in constant time)."""
    if token is None:
        return None
    key = digest(token)
    found = None
    for known, name in digests.items():
        if hmac.compare_digest(known, key):
            found = name
    return found


class TokenBucket:
    """`rate` requests a second, up to `burst` at once; `take()` -> 0, or the seconds to wait."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be above 0 and burst at least 1")
        self.rate, self.burst, self.clock = rate, burst, clock
        self.level = float(burst)
        self.last = clock()

    def take(self) -> float:
        now = self.clock()
        self.level = min(self.burst, self.level + (now - self.last) * self.rate)
        self.last = now
        if self.level >= 1:
            self.level -= 1
            return 0.0
        return (1 - self.level) / self.rate


@dataclass(frozen=True)
class Limits:
    rate: float = RATE
    burst: int = BURST
    body_limit: int = BODY_LIMIT


class Gate:
    """The checks in order: a token (401), the body's announced size (413), the client's rate
    (429; not for UNMETERED paths). `check` -> (the client's name, None) or (None, a Refusal)."""

    def __init__(self, digests: Mapping[str, str] | None, limits: Limits = Limits(),
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.digests = dict(digests) if digests else None
        self.limits = limits
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()

    def check(self, path: str, headers: Mapping[str, str],
              client: str = "") -> tuple[str | None, Refusal | None]:  # fmt: skip
        if path in OPEN_PATHS:
            return "", None
        name = client or "anonymous"
        if self.digests is not None:
            found = who(self.digests, bearer(headers))
            if found is None:
                return None, Refusal(401, "a valid token is needed: Authorization: Bearer TOKEN",
                                     {"WWW-Authenticate": 'Bearer realm="infill"'})  # fmt: skip
            name = found
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limits.body_limit):
            return None, too_large(self.limits.body_limit)
        wait = 0.0 if path in UNMETERED else self.bucket(name).take()
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            rate, burst = self.limits.rate, self.limits.burst
            message = f"too many requests: at most {rate:g} a second (bursts of {burst})"
            return None, Refusal(429, message, {"Retry-After": str(seconds)})
        return name, None

    def bucket(self, name: str) -> TokenBucket:
        with self._lock:
            if name not in self._buckets:
                self._buckets[name] = TokenBucket(self.limits.rate, self.limits.burst, self.clock)
            return self._buckets[name]


def too_large(limit: int) -> Refusal:
    return Refusal(413, f"the request body is larger than {limit} bytes")


def busy(queued: int, retry_after: int = 1) -> Refusal:
    return Refusal(503, f"the server is busy ({queued} requests waiting): try again shortly",
                   {"Retry-After": str(retry_after)})  # fmt: skip
