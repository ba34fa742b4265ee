"""A team server in the model's place: `infill FILE --server URL` and the language server's
`endpoint` setting send each request to `infill serve` (team_server) instead of loading a model.

    connect   GET /v1/models: the served model's family, its authors' recommended settings and
              its window, so that the options are tuned here exactly as they would be in-process
              (infill.models.defaults) and sent whole: the server runs what this process would
    run       the mode's request (infill.modes) as POST /v1/infill: the document's text and
              language, its spans as offsets, the mode, every option under its camelCase name
              (infill.options.options_json); the answer, the mode's report, read back into the
              mode's result against the document sent (infill.modes.reports.result_of)

Parsing, spans and edits stay in this process: only the text and the spans travel, and the
edits that come back must fit the text that was sent, or nothing is changed. A request is
cancelled by closing its connection (the server drops it at its next pass); its deadline travels
as the request's `timeout`. The engine's `run` hands a whole request to any denoiser that has
`run_request` (infill.engine.pipeline.run), so the callers need not know where the model runs.

Errors say what happened and where: ModelError when the server cannot be reached, refuses the
token, is busy or fails (a request the server failed, 500 or 502, is sent once more: Ray Serve
answers so when the replica that held it died, and another replica takes it); InputError for a
request the server calls bad (400, 413); TimedOut for 504. Standard library only (http.client).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from infill.errors import Cancelled, InputError, ModelError, TimedOut
from infill.options import options_json

CONNECT_SECONDS = 10.0  # to open a connection and to list the model
DEFAULT_TIMEOUT = 300.0  # seconds a request may take when its caller set no deadline
GRACE_SECONDS = 10.0  # past a request's own deadline, how long the answer may still take to come
POLL_SECONDS = 0.05  # how often a running request checks whether its caller cancelled it
RETRIED = (500, 502)  # statuses a request is sent once more for


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def message(self) -> str:
        """The error's words: the JSON `error.message` (or `error`, `detail`) or the body's text."""
        value = self.json()
        if isinstance(value, dict):
            error = value.get("error", value.get("detail"))
            if isinstance(error, dict):
                error = error.get("message")
            if isinstance(error, str):
                return error
        return self.body.decode("utf-8", "replace").strip()[:300] or f"HTTP {self.status}"


@dataclass
class TeamServer:
    """A team server's address, and what it said of its model (`connect` fills these in)."""

    url: str  # http(s)://host:port[/prefix]
    token: str | None = None
    family: str | None = None  # the published family (Dream, LLaDA, ...); None: infill's own model
    recommended: dict = field(default_factory=dict)  # its authors' sampler settings
    context_length: int | None = None
    name: str = ""
    path: str | None = None  # the file its requests are of (an editor's document): a server that
    #   keeps contexts (`infill serve --kept-contexts N`) keeps one per file

    def for_path(self, path: str) -> TeamServer:
        """The same server, its requests naming `path` as their file (the language server's
        document: infill.engine.kept_context's DocumentContexts does this in-process)."""
        return replace(self, path=path)

    @classmethod
    def connect(cls, url: str, token: str | None = None) -> TeamServer:
        """The server at `url`, after asking it which model it runs; ModelError if it cannot be
        reached, refuses the token, or is no infill team server."""
        server = cls(check_url(url), token or None)
        answer = server.send("GET", "/v1/models", None, deadline=time.monotonic() + CONNECT_SECONDS)
        server.check(answer)
        listed = answer.json()
        entries = listed.get("data") if isinstance(listed, dict) else None
        entry = entries[0] if isinstance(entries, list) and entries and isinstance(entries[0], dict) else {}
        engine = entry.get("infill")
        if not isinstance(engine, dict):
            raise ModelError(f"{server.url} answers, but it is not an infill team server (`infill serve`)")
        return replace(
            server,
            family=engine.get("family") if isinstance(engine.get("family"), str) else None,
            recommended=engine.get("recommended") if isinstance(engine.get("recommended"), dict) else {},
            context_length=(
                engine.get("context_length") if type(engine.get("context_length")) is int else None
            ),
            name=str(entry.get("id", "")),
        )

    def describe(self) -> str:
        return f"{self.name or 'a model'} on the team server at {self.url}"

    # ---------------------------------------------------------------- requests

    def run_request(self, request: Any, hooks: Any = None) -> Any:
        """Run a mode's request (infill.modes) on the server: the mode's result, as in-process.
        Of the hooks, `cancelled`, `deadline` and `on_progress` apply; the denoising steps happen
        on the server, so `on_step` is never called."""
        from infill.modes.reports import result_of

        cancelled = getattr(hooks, "cancelled", None)
        deadline = getattr(hooks, "deadline", None)
        body = request_body(request)
        if self.path is not None:
            body.setdefault("path", self.path)
        if deadline is not None:
            body["timeout"] = max(deadline - time.monotonic(), 0.001)
        else:
            deadline = time.monotonic() + DEFAULT_TIMEOUT
        on_progress = getattr(hooks, "on_progress", None)
        if on_progress is not None:
            on_progress(0, 1)
        answer = self.send("POST", "/v1/infill", body, deadline + GRACE_SECONDS, cancelled)
        if answer.status in RETRIED:  # the replica that held it died: another one takes it
            answer = self.send("POST", "/v1/infill", body, deadline + GRACE_SECONDS, cancelled)
        self.check(answer)
        try:
            return result_of(request, answer.json())
        except ValueError as error:
            raise ModelError(f"the team server at {self.url} answered what was not asked: {error}") from None

    def check(self, answer: Answer) -> None:
        """Nothing for 200; else the error its status means, in the server's words."""
        status, said = answer.status, answer.message()
        if status == 200:
            return
        if status in (400, 413, 422):
            raise InputError(f"the team server refused the request: {said}")
        if status in (401, 403):
            raise ModelError(
                f"the team server at {self.url} refused the token ({said}): "
                "check the token you gave (--token-file, INFILL_TOKEN, the setting token)"
            )
        if status == 504:
            raise TimedOut(f"the team server at {self.url} stopped the request at its deadline")
        if status in (429, 503):
            after = answer.headers.get("retry-after")
            raise ModelError(f"the team server at {self.url} is busy ({said})"
                             + (f": try again in {after} s" if after else ""))  # fmt: skip
        raise ModelError(f"the team server at {self.url} failed the request (HTTP {status}): {said}")

    def send(self, method: str, path: str, body: Any, deadline: float, cancelled: Any = None) -> Answer:
        """One HTTP exchange, in a thread of its own so that `cancelled()` can close its
        connection (the server then drops the request at its next pass)."""
        parts = urlsplit(self.url)
        seconds = max(deadline - time.monotonic(), 0.001)
        if parts.scheme == "https":
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.hostname, parts.port, timeout=seconds, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=seconds)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        outcome: dict[str, Any] = {}

        def exchange() -> None:
            try:
                connection.request(method, parts.path.rstrip("/") + path, data, headers)
                response = connection.getresponse()
                heard = {k.lower(): v for k, v in response.getheaders()}
                outcome["answer"] = Answer(response.status, heard, response.read())
            except (OSError, http.client.HTTPException) as error:
                outcome["error"] = error

        worker = threading.Thread(target=exchange, name="infill-team-server", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(POLL_SECONDS if cancelled is not None else None)
            if cancelled is not None and worker.is_alive() and cancelled():
                hang_up(connection)
                raise Cancelled("request cancelled")
        connection.close()
        if "error" in outcome:
            error = outcome["error"]
            if isinstance(error, (TimeoutError, socket.timeout)):
                raise TimedOut(f"the team server at {self.url} did not answer in {seconds:.0f} s")
            raise ModelError(f"cannot reach the team server at {self.url}: {reason(error)}")
        return outcome["answer"]


def request_body(request: Any) -> dict:
    """A mode's request as POST /v1/infill's body (team_server.protocols.infill_request)."""
    from infill.modes import (
        AlternativesRequest,
        DocstringRequest,
        FillRequest,
        FixRequest,
        InlineRequest,
        ReviewRequest,
    )

    document = request.document
    body: dict[str, Any] = {"text": document.text, "language": document.language.name}
    if document.path is not None:  # whose file: a server that keeps contexts keeps one per file
        body["path"] = str(document.path)
    options = request.options
    if getattr(options, "protocol", "engine") != "engine":
        raise InputError("a team server runs infill's own protocol: --protocol authors runs in-process only")

    def offsets(spans) -> list[dict]:
        return [{"start": span.start, "end": span.end} for span in spans]

    if isinstance(request, FillRequest):
        body.update(mode="fill", spans=offsets(request.spans))
    elif isinstance(request, FixRequest):
        body.update(mode="fix", spans=offsets(request.spans))
    elif isinstance(request, DocstringRequest):  # each definition by its header's first line
        body.update(mode="document", spans=[{"lines": site.line} for site in request.sites])
        if not request.sites:
            raise InputError("no definition to document")
    elif isinstance(request, AlternativesRequest):
        body.update(mode="alternatives", spans=offsets([request.span]), n=request.n)
        if request.temperature is not None:
            options = replace(options, sampler=replace(options.sampler, temperature=request.temperature))
    elif isinstance(request, ReviewRequest):
        body.update(mode="review", spans=offsets(request.spans))
        if request.top is not None:
            body["top"] = request.top
    elif isinstance(request, InlineRequest):
        body.update(
            mode="inline", spans=[{"start": request.offset, "end": request.offset}], n=request.samples
        )
    else:
        raise InputError(f"a team server does not run a {type(request).__name__}")
    body["options"] = options_json(options)  # fix options carry their threshold (fixThreshold)
    return body


def check_url(url: str) -> str:
    """`url` without a trailing slash; InputError unless it is an http(s) address with a host."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"a team server's address is http(s)://HOST:PORT (got {url!r})")
    if parts.query or parts.fragment:
        raise InputError(f"a team server's address has no query or fragment (got {url!r})")
    try:
        parts.port  # noqa: B018 (a bad port raises)
    except ValueError:
        raise InputError(f"a team server's address has a bad port (got {url!r})") from None
    return url.strip().rstrip("/")


def hang_up(connection: http.client.HTTPConnection) -> None:
    """Close the connection under a thread still waiting on it (it then fails at once)."""
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    connection.close()


def reason(error: BaseException) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (is `infill serve` running there?)"
    if isinstance(error, socket.gaierror):
        return "no such host"
    if isinstance(error, ssl.SSLError):
        return f"TLS failed: {error.reason or error}"
    return str(error) or type(error).__name__
