"""The team server for real: a local Ray, Ray Serve, one replica of the shipped model, and the
editor plugins' own clients (openai, ollama) and plain HTTP talking to it over a socket.

Greedy answers are compared with `infill.engine.pipeline.run` of the same request in this process
(the shipped model, one torch thread on both sides): the server adds HTTP, the protocols and the
batching driver, and must change no text. Sixteen requests at once must all be answered, with
forward passes that carried rows of several requests (the server's own /metrics says so).
"""

from __future__ import annotations

import concurrent.futures
import json
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import pytest
import torch
from external import require_module
from samples import COUNTER_MODULE
from serve_support import free_port

from infill.engine.pipeline import run
from infill.models import load
from infill.modes import FillRequest, InlineRequest
from infill.modes.reports import json_report
from infill.options import InfillOptions, SamplerConfig
from infill.text.docstring_sites import missing_docstrings
from infill.text.document import document_from_bytes
from infill.text.spans import line_span
from team_server.auth import read_tokens
from team_server.config import ServerConfig
from team_server.metrics import parse

pytestmark = [pytest.mark.external, pytest.mark.slow]

TOKEN = "alice-0123456789abcdef"
HAMMER = "hammer-0123456789abcdef"  # the rate limit's test has a token of its own
TOKENS = f"alice {TOKEN}\nhammer {HAMMER}\n"
INSTALL = 'pip install -e ".[serve]"'
CUT = COUNTER_MODULE.index("total / len(values)")
PREFIX, SUFFIX = COUNTER_MODULE[:CUT], COUNTER_MODULE[CUT:].split("\n", 1)[1]
SUFFIX = "\n" + SUFFIX  # the rest of line 13 is the hole; its line break stays


@dataclass(frozen=True)
class Server:
    url: str
    headers: dict

    def get(self, path: str, **kwargs) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.headers, timeout=120, **kwargs)

    def post(self, path: str, body, **kwargs) -> httpx.Response:
        return httpx.post(self.url + path, json=body, headers=self.headers, timeout=120, **kwargs)

    def metrics(self) -> dict[str, float]:
        return parse(self.get("/metrics").text)


@pytest.fixture(scope="module")
def server():
    ray = require_module("ray", INSTALL)
    from ray import serve

    from team_server.deployment import application

    # schedule shared: the forwards of the CPU carry several requests' rows (the CPU's own, one
    # request a forward, runs in test_cluster.py's replicas)
    config = ServerConfig(threads=1, tokens=tuple(sorted(read_tokens(TOKENS).items())), rate=20, burst=40,
                          request_timeout=60, schedule="shared")  # fmt: skip
    port = free_port()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 2**20)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(application(config), name="infill", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while httpx.get(url + "/health").status_code != 200:
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.5)
        yield Server(url, {"Authorization": f"Bearer {TOKEN}"})
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.fixture(scope="module")
def reference():
    """The shipped model in this process, on one torch thread as the replica's (restored after)."""
    threads = torch.get_num_threads()
    denoiser = load(None, threads=1)
    yield denoiser
    torch.set_num_threads(threads)


def in_process(denoiser, prefix: str, suffix: str, **options) -> str:
    """What the language server's inline completion gives between prefix and suffix."""
    document = document_from_bytes((prefix + suffix).encode())
    result = run(denoiser, InlineRequest(document, len(prefix), InfillOptions(**options)))
    return result.texts[0] if result.texts else ""


def test_openai_client_completions_with_suffix_streamed_and_not(server, reference):
    openai = require_module("openai", "pip install openai")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0)
    expected = in_process(reference, PREFIX, SUFFIX, budget=16)
    reply = client.completions.create(model="infill", prompt=PREFIX, suffix=SUFFIX, max_tokens=16,
                                      temperature=0)  # fmt: skip
    assert [c.text for c in reply.choices] == [expected] and expected.strip()
    assert reply.object == "text_completion" and reply.choices[0].finish_reason == "stop"
    chunks = list(client.completions.create(model="infill", prompt=PREFIX, suffix=SUFFIX, max_tokens=16,
                                            temperature=0, stream=True))  # fmt: skip
    assert "".join(c.choices[0].text for c in chunks) == expected
    fim = f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>"
    reply = client.completions.create(model="infill", prompt=fim, max_tokens=16, temperature=0)
    assert reply.choices[0].text == expected
    assert [m.id for m in client.models.list()] == [reply.model]


def test_openai_n_choices_at_a_temperature_are_the_seeded_in_process_ones(server, reference):
    openai = require_module("openai", "pip install openai")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0)
    reply = client.completions.create(model="infill", prompt=PREFIX, suffix=SUFFIX, max_tokens=16,
                                      temperature=0.8, n=3, seed=5)  # fmt: skip
    samplers = [SamplerConfig(temperature=0.8, seed=seed) for seed in (5, 6, 7)]
    expected = [in_process(reference, PREFIX, SUFFIX, budget=16, sampler=s) for s in samplers]
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert [c.text for c in reply.choices] == expected


def test_ollama_client_generate_with_suffix(server, reference):
    ollama = require_module("ollama", "pip install ollama")
    client = ollama.Client(host=server.url, headers=server.headers)
    expected = in_process(reference, PREFIX, SUFFIX, budget=16)
    options = {"num_predict": 16, "temperature": 0}
    reply = client.generate(model="infill", prompt=PREFIX, suffix=SUFFIX, options=options, stream=False)
    assert reply.response == expected and reply.done
    parts = list(client.generate(model="infill", prompt=PREFIX, suffix=SUFFIX, options=options, stream=True))
    assert "".join(p.response for p in parts) == expected and parts[-1].done
    assert ".Suffix" in client.show("infill").template
    assert [m.model for m in client.list().models] == [reply.model]


def test_llama_cpp_infill_and_health(server, reference):
    expected = in_process(reference, PREFIX, SUFFIX, budget=24)
    reply = server.post("/infill", {"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 24,
                                    "input_extra": [{"filename": "other.py", "text": "x = 1\n"}],
                                    "t_max_predict_ms": 30000})  # fmt: skip
    assert reply.status_code == 200 and reply.json()["content"] == expected
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}  # no token needed


def without_times(report):
    if isinstance(report, dict):
        return {k: without_times(v) for k, v in report.items() if k not in ("seconds", "repair_seconds")}
    if isinstance(report, list):
        return [without_times(v) for v in report]
    return report


def test_own_infill_endpoint_answers_the_clis_json_report(server, reference):
    document = document_from_bytes(COUNTER_MODULE.encode())
    span = line_span(COUNTER_MODULE, 12, 13)
    expected = json_report(document, run(reference, FillRequest(document, [span], InfillOptions())))
    reply = server.post("/v1/infill", {"text": COUNTER_MODULE, "spans": [{"lines": "12-13"}], "mode": "fill"})
    assert reply.status_code == 200
    assert without_times(reply.json()) == without_times(json.loads(json.dumps(expected)))
    fix = server.post("/v1/infill", {"text": COUNTER_MODULE, "spans": [{"lines": 13}], "mode": "fix"}).json()
    assert set(fix) == {"edits", "spans", "flagged", "stats"}
    doc = server.post("/v1/infill", {"text": COUNTER_MODULE, "mode": "document"}).json()
    assert len(doc["docstrings"]) == len(missing_docstrings(COUNTER_MODULE)) == 4


def test_the_project_clients_through_ray_serve(server, reference, tmp_path, capsys, monkeypatch):
    """`infill FILE --server URL` and the engine's own client (the language server's `endpoint`)
    through Ray Serve's proxy: the in-process edits, and a wrong token changes nothing."""
    from infill import cli
    from infill.errors import ModelError
    from infill.models.served import TeamServer

    document = document_from_bytes(COUNTER_MODULE.encode())
    request = FillRequest(document, [line_span(COUNTER_MODULE, 12, 13)], InfillOptions())
    served = TeamServer.connect(server.url, TOKEN)
    assert run(served, request).edits == run(reference, request).edits
    with pytest.raises(ModelError, match="refused the token"):
        TeamServer.connect(server.url, "nobody-0123456789abcdef")
    path = tmp_path / "counter.py"
    path.write_text(COUNTER_MODULE)
    monkeypatch.setenv("INFILL_TOKEN", TOKEN)
    assert cli.main([str(path), "--lines", "12-13", "--json", "--server", server.url]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert without_times(printed) == without_times(
        json.loads(json.dumps(json_report(document, run(reference, request))))
    )


def test_sixteen_requests_at_once_share_forward_passes(server):
    before = server.metrics()
    lines = [6, 10, 11, 12, 13, 18, 21, 22] * 2

    def fill(line: int) -> httpx.Response:
        return server.post("/v1/infill", {"text": COUNTER_MODULE, "spans": [{"lines": line}]})

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(fill, lines))
    assert [r.status_code for r in replies] == [200] * 16
    assert all(r.json()["spans"] for r in replies)
    after = server.metrics()
    assert after["infill_forward_shared_passes_total"] > before["infill_forward_shared_passes_total"]
    assert after["infill_forward_most_requests"] >= 2
    assert after['infill_requests_total{endpoint="/v1/infill",status="200"}'] >= 16


def test_bad_requests_are_answered_400_401_413_429(server):
    bad_json = httpx.post(server.url + "/v1/completions", content=b'{"prompt": ', headers=server.headers)
    assert bad_json.status_code == 400 and "JSON" in bad_json.json()["error"]["message"]
    unknown = server.post("/v1/infill", {"text": "x = 1\n", "spans": [{"lines": 1}], "mode": "rewrite"})
    assert unknown.status_code == 400 and "mode" in unknown.json()["error"]["message"]
    ollama_style = server.post("/api/generate", {"prompt": 3})
    assert ollama_style.status_code == 400 and isinstance(ollama_style.json()["error"], str)
    for headers in ({}, {"Authorization": "Bearer not-a-token-at-all"}):
        refused = httpx.post(server.url + "/v1/completions", json={"prompt": "x"}, headers=headers)
        assert refused.status_code == 401
    big = server.post("/v1/infill", {"text": "x = 1\n" * 200_000, "spans": [{"lines": 1}]})
    assert big.status_code == 413
    hammer = {"Authorization": f"Bearer {HAMMER}"}
    statuses = []
    with httpx.Client(base_url=server.url, headers=hammer) as client:
        for _ in range(200):
            reply = client.get("/v1/models")
            statuses.append(reply.status_code)
            if reply.status_code == 429:
                assert int(reply.headers["Retry-After"]) >= 1
                break
    assert statuses[-1] == 429 and set(statuses[:-1]) == {200}
    assert server.get("/v1/models").status_code == 200  # the others' buckets are their own


def test_a_failing_request_takes_no_other_down(server):
    before = server.metrics()
    overlapping = {"text": COUNTER_MODULE, "spans": [{"lines": "10-12"}, {"lines": "11-13"}]}

    def ask(k: int) -> httpx.Response:
        if k % 3 == 0:
            return server.post("/v1/infill", overlapping)
        return server.post("/v1/infill", {"text": COUNTER_MODULE, "spans": [{"lines": 10 + k % 4}]})

    with concurrent.futures.ThreadPoolExecutor(9) as pool:
        replies = list(pool.map(ask, range(9)))
    assert [r.status_code for r in replies] == [400 if k % 3 == 0 else 200 for k in range(9)]
    assert "overlap" in replies[0].json()["error"]["message"]
    after = server.metrics()
    failed = 'infill_requests_ended_total{how="failed"}'
    assert after[failed] == before[failed] + 3
    assert server.get("/health").status_code == 200


def test_a_client_that_disconnects_frees_its_rows(server):
    """A fill of 14 lines, 128 full passes: once the server counts it live, the client closes
    its connection; Serve cancels the handler, which cancels the ticket, and the request leaves
    the batch at its next pass (the driver counts it cancelled, long before its fill would end).
    The client hangs up on a raw socket when /metrics shows the request live, not after a fixed
    wait: on a fast CPU the whole fill can end within a second."""
    cancelled, finished = (f'infill_requests_ended_total{{how="{how}"}}' for how in ("cancelled", "finished"))
    before = server.metrics()
    slow = {"text": COUNTER_MODULE, "spans": [{"lines": "9-22"}],
            "options": {"steps": 128, "cacheRefresh": 1, "commitThreshold": 1.0, "budget": 96}}  # fmt: skip
    body = json.dumps(slow).encode()
    address = urlsplit(server.url)
    lines = [
        "POST /v1/infill HTTP/1.1",
        f"Host: {address.netloc}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in server.headers.items()),
    ]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    started = time.monotonic()
    with socket.create_connection((address.hostname, address.port), timeout=30) as client:
        client.sendall(request)
        while server.metrics()["infill_live_requests"] == 0:
            assert time.monotonic() - started < 20, "the request never became live"
            time.sleep(0.02)
    while server.metrics()[cancelled] == before[cancelled]:
        assert time.monotonic() - started < 30, "the request was not cancelled"
        time.sleep(0.2)
    after = server.metrics()
    assert after["infill_live_requests"] == 0
    assert after[finished] == before[finished]  # it left cancelled, not done


def test_nothing_of_a_request_reaches_the_logs(server):
    """The replica logs sizes and times: a request's text is in no log file of the session."""
    import glob

    marker = "never_logged_marker_5d1f"
    reply = server.post("/v1/completions", {"prompt": f"{marker} = ", "suffix": "\n", "max_tokens": 8})
    assert reply.status_code == 200
    time.sleep(1)  # log lines reach their files
    logs = glob.glob("/tmp/ray/session_latest/logs/**/*", recursive=True)
    found = []
    for path in logs:
        try:
            with open(path, errors="replace") as handle:
                if marker in handle.read():
                    found.append(path)
        except (IsADirectoryError, PermissionError, FileNotFoundError):
            continue
    assert logs and found == []
