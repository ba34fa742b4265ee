"""`infill-bench serve`'s load and its figures: against the team server's app on a socket (the
fixture `url`), every fill a client asked for is counted once, as answered or as failed, and the
level's figures are what its own requests and the server's /metrics say; in-process (the GPU's
way: no HTTP, no Ray), the batching driver over a published shape with random weights."""

from __future__ import annotations

import itertools
import json

import pytest
from serve_support import TOKEN

from infill.bench import cli
from infill.bench import serve as bench

HEADERS = {"Authorization": f"Bearer {TOKEN}"}
ANSWERED = 'infill_requests_total{endpoint="/v1/infill",status="200"}'


def test_a_level_counts_its_fills_and_reads_the_servers_passes_and_memory(url):
    bodies = bench.fill_bodies(8)
    assert len({json.dumps(b["spans"]) for b in bodies}) == 8 and bodies[0]["text"].count("\n") >= 200
    target = bench.HttpTarget(url, HEADERS)
    before = target.metrics()
    level = bench.run_level(target, bodies, clients=3, seconds=2.0)
    answered = target.metrics()[ANSWERED] - before.get(ANSWERED, 0)
    assert level.fills == answered > 0 and level.failed == 0
    assert level.throughput == pytest.approx(level.fills / level.seconds)
    assert level.seconds >= 2.0 and level.p50 <= level.p95 <= level.p99
    assert 1.0 <= level.rows_per_pass <= 3 * 8  # at most every client's rows (8: a fill's alternatives)
    assert level.memory_mib is not None and level.memory_mib > 50
    # the server's /metrics by kind of pass: the fills' refreshes and span passes, nothing else
    assert set(level.by_kind) <= {"full", "refresh", "span"} and "refresh" in level.by_kind
    assert level.by_kind["refresh"]["forwards"] > 0 and level.early_takes is not None
    assert level.gap_ms is not None and level.gap_ms > 0  # the engine's own work between passes


def test_each_client_goes_down_its_own_copy_of_the_file_from_its_own_place():
    bodies = bench.fill_bodies(8)
    load = bench.Load(target=None, bodies=bodies, clients=4)
    walks = {client: [next(walk) for _ in range(3)] for client, walk in
             ((c, load.walk(c)) for c in range(4))}  # fmt: skip
    for client, taken in walks.items():
        assert [b["spans"] for b in taken] == [bodies[(2 * client + i) % 8]["spans"] for i in range(3)]
        assert {b["path"] for b in taken} == {f"client-{client}/{bodies[0]['path'].rsplit('/', 1)[-1]}"}
        assert all(b["text"] == bodies[0]["text"] for b in taken)


def test_refused_fills_are_counted_as_failed_with_their_status(url):
    nobody = bench.HttpTarget(url, bench.bearer("nobody"))
    level = bench.run_level(nobody, bench.fill_bodies(4), clients=2, seconds=0.5)
    assert level.fills == 0 and level.failed >= 2
    assert all(error.startswith("401") for error in level.errors)


def test_the_soak_samples_the_memory_and_the_plot_is_drawn(url, monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "MEMORY_EVERY", 0.5)
    target = bench.HttpTarget(url, HEADERS)
    soak = bench.run_soak(target, bench.fill_bodies(4), clients=2, seconds=2.0)
    assert soak.fills > 0 and soak.failed == 0 and len(soak.memory) >= 3
    assert soak.stood_in == 0  # one replica: every read reaches it
    assert [t for t, _ in soak.memory] == sorted(t for t, _ in soak.memory)
    assert soak.after_first_minute_mib is None and soak.growth is None  # a soak under a minute
    level = bench.run_level(target, bench.fill_bodies(4), clients=1, seconds=0.5)
    result = {"levels": [bench.asdict(level)], "soak": {**bench.asdict(soak), "growth": None}}
    bench.plot(result, tmp_path / "serve.png")
    assert (tmp_path / "serve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_in_process_the_driver_batches_a_random_shapes_fills(tmp_path, capsys):
    """The GPU's command on the CPU, with the 2-layer stand-in of the Dream 7B shape: every fill
    runs its 8 passes, and 4 clients share forwards (how many depends on the threads' timing)."""
    out = tmp_path / "serve.json"
    argv = ["serve", "--in-process", "--shapes", "dream-7b", "--tiny", "--clients", "1,4", "--seconds", "1.5",
            "--threads", "1", "--schedule", "shared", "--json", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["target"] == "in-process batching driver, schedule shared"
    one, four = result["levels"]
    assert one["fills"] > 0 and four["fills"] > 0 and one["failed"] == four["failed"] == 0
    assert one["rows_per_pass"] == 1.0 and four["rows_per_pass"] > 1.0 and four["shared"] > 0
    # random weights: a fill is one refresh and 7 span passes, whichever forwards they share
    refresh, span = (one["by_kind"][kind] for kind in ("refresh", "span"))
    assert set(one["by_kind"]) == {"refresh", "span"} and span["forwards"] == 7 * refresh["forwards"]
    assert refresh["rows_per_forward"] == span["rows_per_forward"] == 1.0 and one["early_takes"] == 0
    assert four["by_kind"]["span"]["rows_per_forward"] > 1.0 and 0 <= four["early_takes"] <= 1
    printed = capsys.readouterr().out
    assert "rows/pass" in printed and "by kind: refresh" in printed


def test_in_process_on_the_cpu_a_whole_canvas_pass_runs_alone(tmp_path):
    """The CPU's schedule (auto there): a pass over a whole canvas (a refresh) runs alone however
    many clients have one pending; small span passes may share a forward."""
    out = tmp_path / "serve.json"
    argv = ["serve", "--in-process", "--shapes", "dream-7b", "--tiny", "--clients", "3", "--seconds", "1.5",
            "--threads", "1", "--json", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["target"] == "in-process batching driver, schedule fewest-passes"
    (three,) = result["levels"]
    assert three["fills"] >= 3 and three["failed"] == 0
    refresh = three["by_kind"]["refresh"]  # random weights: a fill is one refresh and 7 span passes
    assert refresh["rows_per_forward"] == 1.0 and refresh["forwards"] >= 3


def test_in_process_clients_that_keep_their_documents_context_skip_most_full_passes(tmp_path):
    """`--kept-context`: each client's next fill starts from its last one's context, so most of
    its first passes compute what changed (span passes) instead of the whole window (a refresh)."""
    out = tmp_path / "serve.json"
    argv = ["serve", "--in-process", "--shapes", "dream-7b", "--tiny", "--clients", "2", "--seconds", "6",
            "--threads", "1", "--kept-context", "--json", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    (level,) = json.loads(out.read_text())["levels"]
    assert level["fills"] >= 4 and level["failed"] == 0
    # without it every fill is one refresh and 7 span passes (the test above)
    refresh = level["by_kind"].get("refresh", {"forwards": 0, "rows_per_forward": 0.0})
    clients = 2  # each client's first fill has no context to keep: a refresh
    later_fills = level["fills"] - clients
    later_refreshes = refresh["forwards"] * refresh["rows_per_forward"] - clients
    assert later_refreshes < later_fills / 2  # (however few fills a slow machine made in 6 s)


def test_the_unmasking_flags_reach_every_fill_in_process_and_over_http(url):
    """--block-length/--block-passes (and --top-p/--top-k): the in-process driver's fills take them
    as SamplerConfig fields, a server's as the request's "options" under the server's names."""
    args = cli.build_parser().parse_args(
        ["serve", "--in-process", "--shapes", "dream-7b", "--tiny", "--block-length", "4", "--block-passes"]
    )
    target = cli.in_process_target(args)
    try:
        assert (target.options.sampler.block_length, target.options.sampler.block_passes) == (4, True)
        assert target.options.retries == 0  # the random-weight settings kept beside them
    finally:
        target.close()
    assert bench.setting_names(cli.sampler_rules(args)) == {"blockLength": 4, "blockPasses": True}
    body = bench.fill_bodies(1)[0]
    assert bench.HttpTarget(url, HEADERS, {"blockLength": 4, "blockPasses": True}).ask(body) is None
    refused = bench.HttpTarget(url, HEADERS, {"blockLength": "four"}).ask(body)
    assert refused is not None and refused.startswith("400")  # so the options did reach the server


def test_the_metrics_of_a_server_of_two_replicas_are_added_up(monkeypatch):
    """Each replica counts its own and a read of /metrics reaches one of them (a network double
    here: two replicas' texts, answered in turn as a router might): the bench reads until it has
    seen both and adds them up, so a level's counters are the server's, not one replica's."""
    texts = [replica_text(replica, f"infill_forward_rows_total {rows}", answered=1)
             for rows, replica in ((10, "a:1"), (30, "b:2"))]  # fmt: skip
    values = answering(texts, [0, 0, 0, 1] + [0, 1] * 20).metrics()
    assert values["infill_forward_rows_total"] == 40
    assert values[ANSWERED] == 2
    assert not any(name.startswith("infill_replica_info") for name in values)
    assert bench.added_up([values]) == values


def test_a_replica_seen_before_is_waited_for_when_the_router_favours_the_other():
    """Under load the router sends reads to the less busy replica, many in a row (a network double
    answers in the order below): after a read that found both, a read that meets one replica for
    longer than MOST_READS reads still adds up both; a replica that no longer answers counts with
    its last values, so the sum does not fall to one replica's, until FORGET_AFTER reads in a row
    missed it: then it is gone."""
    texts = [replica_text(replica, f"process_resident_memory_bytes {memory * 2**20}")
             for memory, replica in ((600, "a:1"), (650, "b:2"))]  # fmt: skip
    first = [0, 1] + [0] * bench.QUIET_READS  # both, then enough reads of a
    second = [0] * (bench.MOST_READS + 10) + [1] + [0] * bench.QUIET_READS  # b after 74 reads of a
    target = answering(texts, first + second)  # then a alone, for ever
    b = 'infill_replica_info{replica="b:2"}'
    assert bench.memory_mib(target.metrics()) == 1250  # idle: both answer in turn
    assert bench.memory_mib(target.metrics()) == 1250 and target.missed[b] == 0  # b waited for
    assert target.stood_in == 0
    target.wait_for_replica = 0.1
    for missed in range(1, bench.FORGET_AFTER):
        assert bench.memory_mib(target.metrics()) == 1250  # b not reached: its last values
        assert target.missed[b] == missed and target.stood_in == 1
    assert bench.memory_mib(target.metrics()) == 600  # b gone
    assert set(target.known) == {'infill_replica_info{replica="a:1"}'}


def replica_text(replica: str, line: str, answered: int = 0) -> str:
    """A replica's /metrics text (`answered` fills of /v1/infill counted), with `line` added."""
    from team_server.metrics import Metrics

    metrics = Metrics()
    metrics.replica = replica
    for _ in range(answered):
        metrics.observe("/v1/infill", 200, 0.1)
    return metrics.render() + line + "\n"


def answering(texts: list[str], order: list[int]) -> bench.HttpTarget:
    """An HttpTarget whose /metrics reads a network double answers with `texts`, one after
    another in `order` (indexes), as a router choosing a replica for each read might."""
    import httpx

    answers = itertools.chain(order, itertools.repeat(order[-1]))  # the last one for ever after
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text=texts[next(answers)]))
    target = bench.HttpTarget("http://server", {})
    target.local.client = httpx.Client(base_url="http://server", transport=transport)
    return target
