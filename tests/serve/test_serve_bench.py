"""`infill-bench serve`'s load and its figures, against the team server's app on a socket (the
fixture `url`): every fill a client asked for is counted once, as answered or as failed, and the
level's figures are what its own requests and the server's /metrics say."""

from __future__ import annotations

import json

import httpx
import pytest
from serve_support import TOKEN

from infill.bench import serve as bench

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def test_a_level_counts_its_fills_and_reads_the_servers_passes_and_memory(url):
    bodies = bench.fill_bodies(8)
    assert len({json.dumps(b["spans"]) for b in bodies}) == 8 and bodies[0]["text"].count("\n") >= 200
    with httpx.Client(base_url=url, headers=HEADERS) as http:
        before = bench.read_metrics(http)
    level = bench.run_level(url, HEADERS, bodies, clients=3, seconds=2.0)
    with httpx.Client(base_url=url, headers=HEADERS) as http:
        after = bench.read_metrics(http)
    answered = after['infill_requests_total{endpoint="/v1/infill",status="200"}'] - before.get(
        'infill_requests_total{endpoint="/v1/infill",status="200"}', 0
    )
    assert level.fills == answered > 0 and level.failed == 0
    assert level.throughput == pytest.approx(level.fills / level.seconds)
    assert level.seconds >= 2.0 and level.p50 <= level.p95 <= level.p99
    assert 1.0 <= level.rows_per_pass <= 3 * 8  # at most every client's rows (8: a fill's alternatives)
    assert level.memory_mib is not None and level.memory_mib > 50


def test_refused_fills_are_counted_as_failed_with_their_status(url):
    nobody = {"Authorization": "Bearer nobody"}
    level = bench.run_level(url, nobody, bench.fill_bodies(4), clients=2, seconds=0.5)
    assert level.fills == 0 and level.failed >= 2
    assert all(error.startswith("401") for error in level.errors)


def test_the_soak_samples_the_memory_and_the_plot_is_drawn(url, monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "MEMORY_EVERY", 0.5)
    soak = bench.run_soak(url, HEADERS, bench.fill_bodies(4), clients=2, seconds=2.0)
    assert soak.fills > 0 and soak.failed == 0 and len(soak.memory) >= 3
    assert [t for t, _ in soak.memory] == sorted(t for t, _ in soak.memory)
    assert soak.after_first_minute_mib is None and soak.growth is None  # a soak under a minute
    level = bench.run_level(url, HEADERS, bench.fill_bodies(4), clients=1, seconds=0.5)
    result = {"levels": [bench.asdict(level)], "soak": {**bench.asdict(soak), "growth": None}}
    bench.plot(result, tmp_path / "serve.png")
    assert (tmp_path / "serve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
