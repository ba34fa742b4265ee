"""One replica's app in this process, without Ray (team_server.app over team_server.replica): the
streams' formats, the metrics, and a client that goes away mid-fill, whose request leaves the
batch at its next pass. The shipped model fills, through the batching driver (about 2 s in all,
the model's loading included: not marked slow)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from samples import COUNTER_MODULE

from infill.errors import Cancelled
from infill.models import load
from infill.modes import FillRequest
from infill.options import InfillOptions, SamplerConfig
from infill.text.document import document_from_bytes
from infill.text.spans import line_span
from team_server.app import build_app
from team_server.config import ServerConfig
from team_server.metrics import parse
from team_server.protocols import ModelInfo
from team_server.replica import ClientGone, Replica

CUT = COUNTER_MODULE.index("total / len(values)")
PREFIX, SUFFIX = COUNTER_MODULE[:CUT], "\n" + COUNTER_MODULE[CUT:].split("\n", 1)[1]


@pytest.fixture(scope="module")
def replica():
    replica = Replica(load(None), ServerConfig(), ModelInfo("infill-test", 10))
    yield replica
    replica.close()


def ask(replica: Replica, method: str, path: str, **kwargs) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(replica), client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=120) as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(go())


def test_openai_stream_is_server_sent_events_ending_with_done(replica):
    body = {"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16}
    reply = ask(replica, "POST", "/v1/completions", json={**body, "stream": True, "n": 2})
    assert reply.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in reply.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert sorted(c["choices"][0]["index"] for c in chunks) == [0, 1]
    assert len({c["choices"][0]["text"] for c in chunks}) == 1  # greedy: one fill given twice
    plain = ask(replica, "POST", "/v1/completions", json=body)
    assert plain.json()["choices"][0]["text"] == chunks[0]["choices"][0]["text"]


def test_ollama_stream_is_ndjson_ending_with_done(replica):
    reply = ask(replica, "POST", "/api/generate", json={"model": "m", "prompt": PREFIX, "suffix": SUFFIX})
    lines = [json.loads(line) for line in reply.text.splitlines()]
    assert [line["done"] for line in lines] == [False, True] and lines[-1]["done_reason"] == "stop"
    assert ask(replica, "POST", "/api/generate", json={"model": "m"}).json()["done"] is True  # a load request


def test_metrics_and_errors_in_each_apis_shape(replica):
    bad_json = ask(replica, "POST", "/api/generate", content=b"{")
    assert bad_json.json() == {"error": "the request body is not valid JSON"}
    unknown_mode = {"text": "x\n", "spans": [{"lines": 1}], "mode": "x"}
    error = ask(replica, "POST", "/v1/infill", json=unknown_mode).json()
    assert error["error"]["code"] == 400 and error["error"]["type"] == "invalid_request_error"
    assert ask(replica, "GET", "/nowhere").status_code == 404
    values = parse(ask(replica, "GET", "/metrics").text)
    assert values['infill_requests_total{endpoint="/api/generate",status="400"}'] >= 1
    assert values['infill_requests_total{endpoint="other",status="404"}'] >= 1
    assert values["infill_forward_passes_total"] >= 0


def test_a_client_that_goes_away_cancels_its_request_at_the_next_pass(replica):
    document = document_from_bytes(COUNTER_MODULE.encode())
    slow = InfillOptions(sampler=SamplerConfig(steps=128, cache_refresh=1, commit_threshold=1.0), budget=96)
    request = FillRequest(document, [line_span(COUNTER_MODULE, 9, 22)], slow)
    before = replica.driver.stats()
    gone_at = time.monotonic() + 0.3

    async def disconnected() -> bool:
        return time.monotonic() > gone_at

    async def go():
        ticket, seconds = replica.submit(request)
        with pytest.raises(ClientGone):
            await replica.result(ticket, seconds, disconnected)
        return ticket

    ticket = asyncio.run(go())
    with pytest.raises(Cancelled):
        ticket.result(timeout=30)
    after = replica.driver.stats()
    assert after.cancelled == before.cancelled + 1
    assert ticket.passes < 60  # it left early, not after its 128 steps and repairs


def without_times(report: dict) -> dict:
    return {**report, "stats": {k: v for k, v in report["stats"].items() if "seconds" not in k}}


def test_with_kept_contexts_a_clients_next_fill_starts_from_its_last_one():
    """`infill serve --kept-contexts N`: a client's requests on one file run on that file's kept
    context, as the language server's do in-process (the same reports), and each first pass
    after the first request computes only what changed; another client's file is its own."""
    from infill.engine.kept_context import KeptContext
    from infill.engine.pipeline import run
    from team_server.protocols import infill_request

    denoiser = load(None)
    kept_replica = Replica(denoiser, ServerConfig(kept_contexts=4), ModelInfo("infill-test", 10))
    try:
        file = {"text": COUNTER_MODULE, "path": "counter.py"}
        bodies = [{**file, "spans": [{"lines": n}]} for n in (6, 11, 13)]
        answers = [ask(kept_replica, "POST", "/v1/infill", json=body) for body in bodies]
        assert [a.status_code for a in answers] == [200, 200, 200]
        in_process = KeptContext(denoiser)
        for body, answer in zip(bodies, answers):
            asked = infill_request(body, kept_replica.tune)
            assert without_times(answer.json()) == without_times(asked.report(run(in_process, asked.request)))
        kept = kept_replica.contexts.kept("127.0.0.1\ncounter.py")  # the client `ask` is, its file
        assert kept.reused_passes == in_process.reused_passes >= 2
        assert kept_replica.contexts.kept("127.0.0.1\nother.py") is None  # a file of its own
        assert kept_replica.contexts.kept("10.0.0.2\ncounter.py") is None  # a client of its own
    finally:
        kept_replica.close()


def test_without_kept_contexts_every_request_starts_from_nothing(replica):
    assert replica.contexts is None and replica.kept_context("127.0.0.1\ncounter.py") is None
