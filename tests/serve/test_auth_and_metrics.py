"""Tokens, rates and sizes (team_server.auth) and the Prometheus text (team_server.metrics), as
plain functions with a clock the test moves."""

from __future__ import annotations

import pytest

from infill.engine.batching import DriverStats
from team_server.auth import Gate, Limits, TokenBucket, bearer, digest, read_tokens, who
from team_server.metrics import Metrics, parse

ALICE = "alice-0123456789abcdef"
BOB = "bob-0123456789abcdef0"
TOKENS = f"# team tokens\nalice {ALICE}\n\n  bob   {BOB}  \n"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_tokens_are_kept_as_digests_by_name():
    digests = read_tokens(TOKENS)
    assert digests == {digest(ALICE): "alice", digest(BOB): "bob"}
    assert ALICE not in repr(digests)
    assert who(digests, ALICE) == "alice" and who(digests, BOB) == "bob"
    assert who(digests, "alice") is None and who(digests, None) is None


@pytest.mark.parametrize(
    "text, says",
    [
        ("alice\n", "line 1"),
        (f"alice {ALICE} extra\n", "two words"),
        ("alice short\n", "shorter than 16"),
        (f"alice {ALICE}\nalice {BOB}\n", "line 2"),
        (f"alice {ALICE}\nbob {ALICE}\n", "twice"),
        ("# nobody\n", "no `NAME TOKEN`"),
    ],
)
def test_a_bad_tokens_file_is_refused_without_showing_its_tokens(text, says):
    with pytest.raises(ValueError, match=says) as caught:
        read_tokens(text)
    assert ALICE not in str(caught.value) and BOB not in str(caught.value)


def test_bearer_header():
    assert bearer({"authorization": f"Bearer {ALICE}"}) == ALICE
    assert bearer({"authorization": f"bearer  {ALICE} "}) == ALICE
    assert bearer({"authorization": f"Basic {ALICE}"}) is None
    assert bearer({"authorization": "Bearer "}) is None and bearer({}) is None


def test_the_bucket_refills_at_its_rate():
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=3, clock=clock)
    assert [bucket.take() for _ in range(3)] == [0, 0, 0]
    assert bucket.take() == pytest.approx(0.5)
    clock.now += 0.5
    assert bucket.take() == 0
    clock.now += 10
    assert [bucket.take() for _ in range(4)][-1] > 0  # the burst, not 20 requests


def test_the_gate_asks_for_a_token_then_the_size_then_the_rate():
    clock = Clock()
    gate = Gate(read_tokens(TOKENS), Limits(rate=1.0, burst=2, body_limit=100), clock)
    headers = {"authorization": f"Bearer {ALICE}"}
    assert gate.check("/health", {}) == ("", None)
    name, refusal = gate.check("/v1/completions", {})
    assert name is None and refusal.status == 401 and "Bearer" in refusal.headers["WWW-Authenticate"]
    assert gate.check("/v1/completions", {"authorization": "Bearer wrong-token-0000000"})[1].status == 401
    assert gate.check("/v1/completions", {**headers, "content-length": "101"})[1].status == 413
    assert gate.check("/v1/completions", {**headers, "content-length": "100"}) == ("alice", None)
    assert gate.check("/v1/completions", headers) == ("alice", None)
    _, refusal = gate.check("/v1/completions", headers)
    assert refusal.status == 429 and refusal.headers["Retry-After"] == "1"
    bob = {"authorization": f"Bearer {BOB}"}
    assert gate.check("/v1/completions", bob) == ("bob", None)  # a bucket of its own
    clock.now += 1
    assert gate.check("/v1/completions", headers) == ("alice", None)


def test_metrics_needs_a_token_but_spends_no_rate():
    """A monitor (and `infill-bench serve`, which reads /metrics several times a sample) is never
    refused for the rate, nor does it spend the rate its token has for fills."""
    gate = Gate(read_tokens(TOKENS), Limits(rate=1.0, burst=1), Clock())
    headers = {"authorization": f"Bearer {ALICE}"}
    assert gate.check("/metrics", {})[1].status == 401
    assert [gate.check("/metrics", headers) for _ in range(50)] == [("alice", None)] * 50
    assert gate.check("/v1/completions", headers) == ("alice", None)
    assert gate.check("/v1/completions", headers)[1].status == 429
    assert gate.check("/metrics", headers) == ("alice", None)


def test_without_tokens_the_rate_is_per_client_address():
    gate = Gate(None, Limits(rate=1.0, burst=1), Clock())
    assert gate.check("/infill", {}, "10.0.0.1") == ("10.0.0.1", None)
    assert gate.check("/infill", {}, "10.0.0.1")[1].status == 429
    assert gate.check("/infill", {}, "10.0.0.2") == ("10.0.0.2", None)


def test_metrics_text_counts_requests_latency_and_the_drivers_passes():
    metrics = Metrics()
    metrics.observe("/v1/completions", 200, 0.07)
    metrics.observe("/v1/completions", 200, 3.0)
    metrics.observe("/v1/completions", 429, 0.001)
    stats = DriverStats(passes=10, rows=25, most_rows=6, most_requests=4, shared_passes=7,
                        forward_seconds=1.5, queued=2, live=3, finished=8, cancelled=1, failed=0, takes=9,
                        early_takes=4, by_kind={"refresh": (3, 5, 1.0), "span": (7, 20, 0.5)}, gaps=6,
                        gap_seconds=0.25)  # fmt: skip
    text = metrics.render(stats)
    assert "# TYPE infill_requests_total counter" in text
    assert "# TYPE infill_request_seconds histogram" in text
    values = parse(text)
    assert values['infill_requests_total{endpoint="/v1/completions",status="200"}'] == 2
    assert values['infill_requests_total{endpoint="/v1/completions",status="429"}'] == 1
    assert values['infill_request_seconds_bucket{endpoint="/v1/completions",le="0.1"}'] == 2
    assert values['infill_request_seconds_bucket{endpoint="/v1/completions",le="+Inf"}'] == 3
    assert values['infill_request_seconds_count{endpoint="/v1/completions"}'] == 3
    assert values["infill_rows_per_pass"] == 2.5 and values["infill_forward_shared_passes_total"] == 7
    assert values['infill_forward_rows_by_kind_total{kind="span"}'] == 20
    assert values['infill_forward_seconds_by_kind_total{kind="refresh"}'] == 1.0
    assert values["infill_forward_early_takes_total"] == 4
    assert values["infill_request_gaps_total"] == 6 and values["infill_request_gap_seconds_total"] == 0.25
    assert values["infill_queue_length"] == 2 and values['infill_requests_ended_total{how="cancelled"}'] == 1
    import os
    import socket

    assert values[f'infill_replica_info{{replica="{socket.gethostname()}:{os.getpid()}"}}'] == 1
    import resource  # the process's own resident memory: within its peak, and more than a few MiB

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert 8 * 2**20 < values["process_resident_memory_bytes"] <= peak * 1.1  # the peak is counted late


def test_the_trimmer_gives_freed_memory_back_on_its_beat_until_stopped():
    import sys
    import time

    from infill.models.memory import give_back
    from team_server.memory import Trimmer

    assert give_back() is sys.platform.startswith("linux")  # glibc's; nothing elsewhere
    trimmer = Trimmer(seconds=0.02).start()
    time.sleep(0.3)
    trimmer.stop()
    trimmer.thread.join(1)
    done = trimmer.trims
    assert not trimmer.thread.is_alive() and (done >= 3 or not sys.platform.startswith("linux"))
