"""The HTTP face of one replica: a FastAPI app over a `Replica` (team_server.replica), built per
replica (`build_app`), with no state outside it.

    GET  /health              {"status": "ok"} (llama.cpp's; no token needed)
    GET  /metrics             Prometheus text (team_server.metrics)
    GET  /v1/models           OpenAI's model list
    POST /v1/completions      OpenAI: prompt + suffix or a FIM template; SSE ending `data: [DONE]`
    POST /infill              llama.cpp: input_prefix, input_suffix, n_predict, t_max_predict_ms
    POST /api/generate        Ollama: prompt + suffix; NDJSON lines when streamed (its default)
    POST /api/show            Ollama: the model's template (it mentions .Suffix: Continue fills in the middle)
    GET  /api/tags            Ollama: the model list
    GET  /api/version         Ollama: the server's version
    POST /v1/infill           this project's: a file, spans, a mode -> the CLI's --json report

Every request passes the gate first (team_server.auth: a token 401, the body's size 413, the rate
429), in `GateMiddleware`, which also counts it (endpoint, status, time) and logs one line of
sizes and times, never a request's text. A handler reads the JSON body (400 when it is not JSON,
413 past the limit while reading), turns it into the project's requests (team_server.protocols:
400 when a field is wrong), and awaits them on the replica's batching driver (503 when its queue
is full, 504 past the deadline); a client that disconnects cancels its requests, which leave the
batch at their next pass. Errors are answered in each API's shape: Ollama's `{"error": "..."}`,
the others' `{"error": {"message", "type", "code"}}`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from infill import __version__
from infill.errors import Cancelled, InputError, ModelError
from team_server.auth import Refusal, too_large
from team_server.protocols import (
    BadRequest,
    Choice,
    Completion,
    cut_at_stop,
    infill_request,
    llama_infill,
    llama_response,
    ollama_generate,
    ollama_response,
    ollama_show,
    ollama_tags,
    openai_chunk,
    openai_completions,
    openai_models,
    openai_response,
)
from team_server.replica import ClientGone, Refused, Replica

log = logging.getLogger("ray.serve.infill")  # under Ray Serve's logger: a replica's log file, beside its
#   access lines (Serve sets its level and handlers; elsewhere nothing is written unless configured)

ENDPOINTS = ("/health", "/metrics", "/v1/models", "/v1/completions", "/infill", "/api/generate",
             "/api/show", "/api/tags", "/api/version", "/v1/infill")  # fmt: skip
HANDLED = (Refused, BadRequest, InputError, TimeoutError, Cancelled, ClientGone, ModelError)
STATUS_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                413: "invalid_request_error", 429: "rate_limit_error", 500: "server_error",
                503: "server_busy", 504: "timeout"}  # fmt: skip


def build_app(replica: Replica) -> FastAPI:
    app = FastAPI(title="infill team server", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url=None)  # fmt: skip
    app.add_middleware(GateMiddleware, replica=replica)
    model = replica.info

    async def failed(request: Request, error: Exception) -> Response:
        headers = error.refusal.headers if isinstance(error, Refused) else None
        return error_response(request.url.path, *status_of(error), headers)

    for kind in HANDLED:  # anything else is a bug: a 500, and its traceback in the log
        app.add_exception_handler(kind, failed)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics() -> Response:
        text = replica.metrics.render(replica.driver.stats())
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models() -> dict:
        return openai_models(model, int(replica.started))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        asked, stream = openai_completions(await read_json(request, replica.config.body_limit))
        runs = start_all(replica, asked, client_of(request))
        ident, created = f"cmpl-{secrets.token_hex(12)}", int(time.time())
        if stream:
            async def events() -> AsyncIterator[str]:
                async for index, choice in as_done(replica, runs):
                    yield sse(openai_chunk(ident, created, model.name, index, choice))
                yield "data: [DONE]\n\n"

            return StreamingResponse(guarded(events(), runs, sse_error), media_type="text/event-stream")
        choices = await all_choices(replica, runs, request)
        return JSONResponse(openai_response(ident, created, model.name, choices))

    @app.post("/infill")
    async def infill(request: Request) -> Response:
        asked, stream = llama_infill(await read_json(request, replica.config.body_limit))
        runs = start_all(replica, [asked], client_of(request))
        if stream:
            async def events() -> AsyncIterator[str]:
                async for _, choice in as_done(replica, runs):
                    yield sse(llama_response(model.name, choice))

            return StreamingResponse(guarded(events(), runs, sse_error), media_type="text/event-stream")
        (choice,) = await all_choices(replica, runs, request)
        return JSONResponse(llama_response(model.name, choice))

    @app.post("/api/generate")
    async def generate(request: Request) -> Response:
        asked, stream = ollama_generate(await read_json(request, replica.config.body_limit))
        started = time.perf_counter()
        if not asked.prefix and not asked.suffix:  # Ollama's way of loading a model: nothing to fill
            return JSONResponse(ollama_response(model.name, now(), "", True, 0))
        runs = start_all(replica, [asked], client_of(request))
        if stream:
            async def lines() -> AsyncIterator[str]:
                async for _, choice in as_done(replica, runs):
                    yield json.dumps(ollama_response(model.name, now(), choice.text, False)) + "\n"
                nanoseconds = int((time.perf_counter() - started) * 1e9)
                yield json.dumps(ollama_response(model.name, now(), "", True, nanoseconds)) + "\n"

            return StreamingResponse(guarded(lines(), runs, ndjson_error), media_type="application/x-ndjson")
        (choice,) = await all_choices(replica, runs, request)
        nanoseconds = int((time.perf_counter() - started) * 1e9)
        return JSONResponse(ollama_response(model.name, now(), choice.text, True, nanoseconds))

    @app.post("/api/show")
    async def show(request: Request) -> dict:
        await read_json(request, replica.config.body_limit)  # any model name: there is one
        return ollama_show(model, started_at(replica))

    @app.get("/api/tags")
    async def tags() -> dict:
        return ollama_tags(model, started_at(replica))

    @app.get("/api/version")
    async def version() -> dict:
        return {"version": __version__}

    @app.post("/v1/infill")
    async def edit(request: Request) -> Response:
        body = await read_json(request, replica.config.body_limit)
        asked = infill_request(body, replica.tune)
        path = body.get("path") if isinstance(body.get("path"), str) else ""
        result = await replica.run(asked.request, asked.timeout, request.is_disconnected,
                                   client_of(request, path))  # fmt: skip
        return JSONResponse(asked.report(result))

    return app


# --------------------------------------------------------------------------- running completions


class Run:
    """One completion's requests on the driver: their tickets, and which choices each answers."""

    def __init__(self, completion: Completion, first_index: int, tickets: list) -> None:
        self.completion = completion
        self.first_index = first_index
        self.tickets = tickets  # [(ticket, seconds)]: one per request

    def indices(self, k: int) -> list[int]:
        """The choice indices request k answers: all n when one request stands for them."""
        n = self.completion.n
        if len(self.tickets) == 1:
            return [self.first_index + i for i in range(n)]
        return [self.first_index + k]


def client_of(request: Request, path: str = "") -> str:
    """Whose document a request is (its kept context's key, team_server.replica): the client the
    gate let in (`GateMiddleware`), and the file's path where the request names one."""
    return f"{getattr(request.state, 'client', '')}\n{path}"


def start_all(replica: Replica, asked: list[Completion], client: str | None = None) -> list[Run]:
    """Every completion's requests submitted; if one is refused (503), those submitted are cancelled."""
    runs: list[Run] = []
    try:
        index = 0
        for completion in asked:
            run = Run(completion, index, [])
            runs.append(run)
            for request in completion.requests(replica.tune):
                run.tickets.append(replica.submit(request, completion.timeout, client))
            index += completion.n
    except BaseException:
        cancel_all(runs)
        raise
    return runs


def cancel_all(runs: list[Run]) -> None:
    for run in runs:
        for ticket, _ in run.tickets:
            if not ticket.done():
                ticket.cancel()


async def all_choices(replica: Replica, runs: list[Run], request: Request) -> list[Choice]:
    """Every choice, in index order (a client that disconnects cancels them all)."""
    try:
        results = await asyncio.gather(*(replica.result(ticket, seconds, request.is_disconnected)
                                          for run in runs for ticket, seconds in run.tickets))  # fmt: skip
    finally:
        cancel_all(runs)
    choices: list[Choice] = []
    for run in runs:
        own, results = results[: len(run.tickets)], results[len(run.tickets) :]
        choices += run.completion.choices(own)
    return choices


async def as_done(replica: Replica, runs: list[Run]) -> AsyncIterator[tuple[int, Choice]]:
    """(choice index, choice) as each request finishes."""

    async def one(run: Run, k: int) -> tuple[Run, int, Any]:
        ticket, seconds = run.tickets[k]
        return run, k, await replica.result(ticket, seconds)

    waiting = [asyncio.ensure_future(one(run, k)) for run in runs for k in range(len(run.tickets))]
    try:
        for next_done in asyncio.as_completed(waiting):
            run, k, result = await next_done
            text = result.texts[0] if result.texts else ""
            for index in run.indices(k):
                yield index, cut_at_stop(text, run.completion.stop)
    finally:
        for task in waiting:
            task.cancel()


async def guarded(chunks: AsyncIterator[str], runs: list[Run], error_chunk) -> AsyncIterator[str]:
    """A stream that ends with an error chunk if a request fails after the answer has begun, and
    cancels what is left when it ends early (the client went away)."""
    try:
        async for chunk in chunks:
            yield chunk
    except (Exception, Cancelled) as error:
        status, message = status_of(error)
        yield error_chunk(status, message)
    finally:
        cancel_all(runs)


def sse(value: dict) -> str:
    return f"data: {json.dumps(value)}\n\n"


def sse_error(status: int, message: str) -> str:
    return sse(error_body("/v1/completions", status, message)) + "data: [DONE]\n\n"


def ndjson_error(status: int, message: str) -> str:
    return json.dumps({"error": message}) + "\n"


# --------------------------------------------------------------------------- requests and errors


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON: 413 past `limit` bytes (counted as it is read), 400 if it is not JSON."""
    size, chunks = 0, []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Refused(too_large(limit))
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        raise BadRequest("the request body is not valid JSON") from None


def status_of(error: BaseException) -> tuple[int, str]:
    """The status and message a failed request is answered with."""
    if isinstance(error, Refused):
        return error.refusal.status, error.refusal.message
    if isinstance(error, (BadRequest, InputError)):
        return 400, str(error)
    if isinstance(error, TimeoutError):
        return 504, str(error) or "the request ran past its deadline"
    if isinstance(error, (Cancelled, ClientGone)):
        return 499, "the request was cancelled"
    if isinstance(error, ModelError):
        return 500, f"the model failed: {error}"
    return 500, f"the request failed ({type(error).__name__})"


def error_body(path: str, status: int, message: str) -> dict:
    if path.startswith("/api/"):
        return {"error": message}
    return {"error": {"message": message, "type": STATUS_TYPES.get(status, "error"), "code": status}}


def error_response(path: str, status: int, message: str, headers: dict | None = None) -> JSONResponse:
    headers = headers or {}
    if status in (429, 503) and "Retry-After" not in headers:
        headers = {**headers, "Retry-After": "1"}
    return JSONResponse(error_body(path, status, message), status_code=status, headers=headers)


def now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def started_at(replica: Replica) -> str:
    return datetime.fromtimestamp(replica.started, timezone.utc).isoformat().replace("+00:00", "Z")


class GateMiddleware:
    """Pure ASGI (so streams and cancellation pass through untouched): the gate's checks, and one
    count and one log line per request (endpoint, status, body size, time; never its text)."""

    def __init__(self, app, replica: Replica) -> None:
        self.app = app
        self.replica = replica

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        path = scope.get("path", "")
        endpoint = path if path in ENDPOINTS else "other"
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        client = (scope.get("client") or ("", 0))[0]
        status = [500]

        async def counted(message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            name, refusal = self.replica.gate.check(path, headers, client)
            scope.setdefault("state", {})["client"] = name  # request.state.client: client_of
            if refusal is not None:
                await refuse(path, refusal, scope, receive, counted)
            else:
                await self.app(scope, receive, counted)
        finally:
            seconds = time.perf_counter() - started
            self.replica.metrics.observe(endpoint, status[0], seconds)
            log.info("%s %s %d in=%s bytes %.0f ms", scope.get("method", ""), endpoint, status[0],
                     headers.get("content-length", "0"), seconds * 1000)  # fmt: skip


async def refuse(path: str, refusal: Refusal, scope, receive, send) -> None:
    await error_response(path, refusal.status, refusal.message, refusal.headers)(scope, receive, send)
