"""`infill-bench serve`: a team server (`infill serve`) under the load of N editors at once.

    infill-bench serve [--clients 1,2,4,8,16] [--seconds 30] [--soak SECONDS] [--soak-clients 8]
                       [--url URL --token T | --threads 2 --model DIR] [--json PATH] [--plot PNG]
    infill-bench serve --in-process [--shapes dream-7b] [--device cuda --dtype bfloat16] ...

Each client is an editor that asks for the next fill as soon as the last one came back (a closed
loop): a one-line fill (`POST /v1/infill`, mode fill, greedy) of the next code line of a
held-out file of 200 lines or more (infill.bench.tasks: never trained on). Each client works in
its own copy of the file (its own path), going down its code lines from its own starting place
(client k of n from line k/n of the way down): n editors, each where one editor alone would be,
so a server that keeps each client's context (`--kept-contexts`) keeps n of them. Every level
runs for `--seconds` after one warm-up fill; for each it prints the fills answered per second,
latency percentiles (p50, p95, p99), the rows each forward pass carried, the share of passes
shared by several requests and the model's forward time per fill (the server's /metrics, before
and after the level, every replica's added up), failed requests, and the server's resident
memory (/metrics `process_resident_memory_bytes`, all replicas'), and each level's throughput
and p50 against one client's.
`--soak` then runs `--soak-clients` clients for that many seconds and samples the memory every
few seconds: its value after the first minute and at the end, and the failures.

Without `--url` it starts `infill serve` itself on a free port of 127.0.0.1 (one replica, the
shipped model or `--model`, `--threads` torch threads) and stops it at the end. Traffic goes to
that one address only; every loop is bounded by its time.

`--in-process` measures the batching core alone, without HTTP or Ray (a machine without them: a
lent GPU): the replica's batching driver (infill.engine.batching) in this process, each client
a thread that submits its fill and waits for it, the counters read from the driver itself. With
`--kept-context` each client keeps its document's context between its fills, as the language
server does in-process: the first pass of a next fill computes only what changed instead of the
whole window. With
`--shapes NAME` the model is that published shape with random weights (infill.bench.shapes: the
real sizes without their weights); random weights never settle, so each fill runs its step cap
(8 passes here), without syntax retries or recall.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infill.bench.tasks import code_lines, heldout_sources

START_SECONDS = 180  # for `infill serve` to answer /health (a local Ray starts first)
MEMORY_EVERY = 5.0  # seconds between the soak's memory samples
MIN_LINES = 200
QUIET_READS = 8  # /metrics reads in a row that find no replica not seen yet: all have been seen
MOST_READS = 64
WAIT_FOR_REPLICA = 2.0  # seconds a read of /metrics waits for a replica seen before, reading again
#   every READ_PAUSE, before it counts that replica's last values as its own
READ_PAUSE = 0.02
FORGET_AFTER = 3  # reads of /metrics in a row that miss a replica: it is gone (stopped, killed)


@dataclass
class Level:
    """One level of load: `clients` editors for `seconds`."""

    clients: int
    seconds: float
    fills: int  # answered 200
    failed: int  # any other answer, or none
    throughput: float  # fills per second
    p50: float  # seconds
    p95: float
    p99: float
    rows_per_pass: float  # canvas rows a forward pass carried, on average over the level
    forward_ms_per_fill: float  # the model's forward time over the level, per fill answered: what
    #   batching saves shows here (on a device that a forward of one canvas leaves mostly idle, a
    #   forward of several costs about as much, and this falls with the clients)
    shared: float  # share of the level's passes that carried several requests
    memory_mib: float | None  # the server's resident memory at the level's end (all its replicas')
    errors: list[str] = field(default_factory=list)  # the first few failures' statuses and words
    # Where the forward time went, by kind of pass (full, refresh, span): forwards, rows per
    # forward and forward ms per fill answered; and the share of the driver's takes that left
    # while a live request was still busy between its passes (/metrics' *_by_kind_*, *_takes_*).
    by_kind: dict[str, dict[str, float]] = field(default_factory=dict)
    early_takes: float | None = None
    gap_ms: float | None = None  # a request's own work between two of its passes, mean (/metrics' *_gap_*)


@dataclass
class Soak:
    clients: int
    seconds: float
    fills: int
    failed: int
    memory: list[tuple[float, float]]  # (seconds since the soak began, MiB)
    after_first_minute_mib: float | None  # the first sample at 60 s or later
    at_end_mib: float | None  # the last sample while the clients were still asking
    idle_after_mib: float | None  # once the load is over
    stood_in: int = 0  # samples in which a replica not reached counted with its last values

    @property
    def growth(self) -> float | None:
        """Memory at the end over memory after the first minute, less one."""
        if not self.after_first_minute_mib or self.at_end_mib is None:
            return None
        return self.at_end_mib / self.after_first_minute_mib - 1


def fill_bodies(count: int = 64) -> list[dict]:
    """/v1/infill bodies: one-line fills of `count` code lines of a held-out file, spread over it."""
    path, text = long_heldout_file()
    lines = code_lines(text)
    picks = [lines[k * len(lines) // count] for k in range(count)]
    return [{"text": text, "path": path, "spans": [{"lines": n}], "mode": "fill"} for n in picks]


@functools.cache
def long_heldout_file() -> tuple[str, str]:
    """The first held-out file (by path) of at least MIN_LINES lines, 64 of them code."""
    for path, text in heldout_sources():
        if text.count("\n") >= MIN_LINES and len(code_lines(text)) >= 64:
            return path, text
    raise RuntimeError(f"no held-out file of {MIN_LINES} lines or more (infill.train.corpus)")


def random_weight_options() -> Any:
    """A fill on random weights (`--shapes`): they never settle, so it runs its step cap (8
    passes); no syntax retries, token edits, fresh fills or recall (random text breaks the syntax
    every time), as infill-bench shapes fills."""
    from infill.options import InfillOptions, SamplerConfig

    return InfillOptions(sampler=SamplerConfig(steps=8), retries=0, token_edits=0, fresh_fills=0,
                         recall=False)  # fmt: skip


def with_sampler(options: Any, rules: dict) -> Any:
    """`options` (InfillOptions) with `rules` (SamplerConfig fields) set in its sampler."""
    return dataclasses.replace(options, sampler=dataclasses.replace(options.sampler, **rules))


def setting_names(rules: dict) -> dict:
    """SamplerConfig fields -> a request's "options" under the server's names (REQUEST_OPTIONS)."""
    from infill.options import REQUEST_OPTIONS

    return {key: rules[name] for key, (where, name, _) in REQUEST_OPTIONS.items()
            if where == "sampler" and name in rules}  # fmt: skip


def bearer(token: str | None) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}


def memory_mib(values: dict[str, float]) -> float | None:
    found = values.get("process_resident_memory_bytes")
    return None if found is None else found / 2**20


class HttpTarget:
    """A team server over HTTP: POST /v1/infill, GET /metrics (one connection per client thread)."""

    def __init__(self, url: str, headers: dict, options: dict | None = None) -> None:
        import httpx

        self.url, self.headers, self.httpx = url, headers, httpx
        self.options = options or {}  # the request's "options" (the server's setting names)
        self.local = threading.local()
        self.known: dict[str, dict[str, float]] = {}  # each replica's last /metrics values...
        self.missed: dict[str, int] = {}  # ...and the reads in a row that did not reach it
        self.wait_for_replica = WAIT_FOR_REPLICA
        self.stood_in = 0  # the last read's replicas not reached (`metrics`)

    def client(self) -> Any:
        if not hasattr(self.local, "client"):
            self.local.client = self.httpx.Client(base_url=self.url, headers=self.headers, timeout=300)
        return self.local.client

    def ask(self, body: dict) -> str | None:
        """None if the fill was answered, else what went wrong."""
        body = {**body, "options": self.options} if self.options else body
        try:
            reply = self.client().post("/v1/infill", json=body)
        except self.httpx.HTTPError as error:
            return f"{type(error).__name__}: {error}"
        return None if reply.status_code == 200 else f"{reply.status_code}: {reply.text[:200]}"

    def metrics(self) -> dict[str, float]:
        """The server's /metrics as {"name{labels}": value}, every replica's added up ({} if it
        does not answer them): each replica counts its own and a read reaches one of them, so
        /metrics is read until QUIET_READS reads in a row found no replica not seen yet and every
        replica seen before has answered. Under load Ray Serve sends a read to the less busy of
        two replicas, so 64 reads a millisecond apart could all reach one of them: a soak's
        memory samples fell to one replica's 7 times in 122 (2026-12-04, 574-668 MiB among
        1,167-1,342), and its "growth" read +99.5%. So a replica seen before is waited for,
        reading every READ_PAUSE for up to `wait_for_replica` seconds; one still not reached
        counts with its last values (counters never go back, memory stays the replica's), and
        after FORGET_AFTER such reads in a row it is gone (stopped, killed) and drops out."""
        from team_server.metrics import parse

        seen: dict[str, dict[str, float]] = {}
        quiet, deadline = 0, time.monotonic() + self.wait_for_replica
        for read in itertools.count(1):
            reply = self.client().get("/metrics")
            if reply.status_code != 200:
                break
            values = parse(reply.text)
            replica = next((name for name in values if name.startswith("infill_replica_info")), "")
            quiet = quiet + 1 if replica in seen else 0
            seen[replica] = values
            if quiet < QUIET_READS:
                continue
            if self.known.keys() <= seen.keys() or time.monotonic() > deadline:
                break
            if read >= MOST_READS:  # reads a moment apart meet the same replica: wait for the other
                time.sleep(READ_PAUSE)
        self.stood_in = 0  # replicas of this read that counted with their last values
        for replica, values in self.known.items():
            self.missed[replica] = 0 if replica in seen else self.missed.get(replica, 0) + 1
            if replica not in seen and self.missed[replica] < FORGET_AFTER:
                seen[replica], self.stood_in = values, self.stood_in + 1
        self.known = seen
        self.missed = {replica: self.missed.get(replica, 0) for replica in seen}
        return added_up(list(seen.values()))


def added_up(replicas: list[dict[str, float]]) -> dict[str, float]:
    """Several replicas' /metrics as one server's: each value the sum of theirs (the counters'
    totals, the resident memory of all; the replica labels are left out)."""
    total: dict[str, float] = {}
    for values in replicas:
        for name, value in values.items():
            if not name.startswith("infill_replica_info"):
                total[name] = total.get(name, 0.0) + value
    return total


class DriverTarget:
    """The batching driver in this process (no HTTP, no Ray): each body a FillRequest submitted
    to it; the counters are the driver's own, under /metrics' names. `kept_context`: each client
    (its copy of the file) keeps its document's context between its fills, as a language server
    keeps an open document's (infill.engine.kept_context): a next fill's first pass computes what changed."""

    def __init__(self, denoiser: Any, options: Any = None, kept_context: bool = False,
                 schedule: str = "auto") -> None:  # fmt: skip
        from infill.engine.batching import MAX_LIVE, BatchingDriver
        from infill.engine.kept_context import DocumentContexts

        self.denoiser, self.options = denoiser, options
        self.driver = BatchingDriver(denoiser, schedule=schedule).start()
        self.contexts = DocumentContexts(documents=4 * MAX_LIVE) if kept_context else None

    def ask(self, body: dict) -> str | None:
        from infill.engine.pipeline import Hooks
        from infill.modes import FillRequest
        from infill.options import InfillOptions
        from infill.text.document import document_from_bytes
        from infill.text.spans import line_span

        document = document_from_bytes(body["text"].encode("utf-8"))
        line = body["spans"][0]["lines"]
        options = self.options or InfillOptions()
        request = FillRequest(document, [line_span(document.text, line, line)], options)
        kept = None
        if self.contexts is not None:  # this client's document's (its own path: `Load.walk`)
            kept = self.contexts.denoiser(body["path"], self.denoiser)
            kept = kept if kept is not self.denoiser else None  # a network that cannot cache
        try:
            self.driver.submit(request, Hooks(), kept=kept).future.result()
        except Exception as error:  # the fill's own failure: counted, the load goes on
            return f"{type(error).__name__}: {error}"
        return None

    def metrics(self) -> dict[str, float]:
        """The driver's counters as /metrics names them (team_server.metrics), and the memory:
        this process's resident memory on the CPU, the device's allocation on a GPU."""
        import torch

        from infill.bench.shapes import resident_mib
        from team_server.metrics import driver_metrics

        device = getattr(self.denoiser, "device", None)
        memory = resident_mib(device if device is not None else torch.device("cpu"))
        values = {name + labels: value for name, _, _, samples in driver_metrics(self.driver.stats())
                  for labels, value in samples}  # fmt: skip
        return {**values, "process_resident_memory_bytes": memory * 2**20}

    def close(self) -> None:
        self.driver.close()


class Load:
    """`clients` threads, each asking for its next body as soon as its last one was answered."""

    def __init__(self, target: Any, bodies: list[dict], clients: int) -> None:
        self.target, self.bodies, self.clients = target, bodies, clients
        self.latencies: list[float] = []
        self.failed: list[str] = []
        self.lock = threading.Lock()

    def walk(self, client: int):
        """Client `client`'s bodies: from its own starting place on, one after another, each in
        the client's own copy of the file."""
        start = client * len(self.bodies) // self.clients
        for turn in itertools.count(start):
            body = self.bodies[turn % len(self.bodies)]
            yield {**body, "path": own_path(body["path"], client)}

    def client(self, number: int, until: float) -> None:
        bodies = self.walk(number)
        while time.monotonic() < until:
            body = next(bodies)
            started = time.perf_counter()
            outcome = self.target.ask(body)
            seconds = time.perf_counter() - started
            with self.lock:
                if outcome is None:
                    self.latencies.append(seconds)
                else:
                    self.failed.append(outcome)

    def run(self, seconds: float, on_tick=None) -> float:
        """Run every client for `seconds` (each finishes its last request); wall seconds taken.
        `on_tick(elapsed)` is called about every MEMORY_EVERY seconds meanwhile."""
        started = time.monotonic()
        until, tick = started + seconds, MEMORY_EVERY
        threads = [threading.Thread(target=self.client, args=(n, until), name=f"client-{n}", daemon=True)
                   for n in range(self.clients)]  # fmt: skip
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads):
            time.sleep(0.2)
            if on_tick is not None and time.monotonic() - started >= tick:
                on_tick(time.monotonic() - started)
                tick += MEMORY_EVERY
        return time.monotonic() - started


def own_path(path: str, client: int) -> str:
    """Client `client`'s copy of the file at `path`: another directory, the same name."""
    return str(Path(f"client-{client}") / Path(path).name)


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run_level(target: Any, bodies: list[dict], clients: int, seconds: float) -> Level:
    before = target.metrics()
    load = Load(target, bodies, clients)
    wall = load.run(seconds)
    after = target.metrics()

    def grown(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    passes, rows = grown("infill_forward_passes_total"), grown("infill_forward_rows_total")
    takes, gaps = grown("infill_forward_takes_total"), grown("infill_request_gaps_total")
    shared = grown("infill_forward_shared_passes_total")
    fills = len(load.latencies)
    return Level(
        clients=clients,
        seconds=wall,
        fills=fills,
        failed=len(load.failed),
        throughput=fills / wall,
        p50=statistics.median(load.latencies) if load.latencies else float("nan"),
        p95=percentile(load.latencies, 0.95),
        p99=percentile(load.latencies, 0.99),
        rows_per_pass=rows / passes if passes else 0.0,
        forward_ms_per_fill=grown("infill_forward_seconds_total") * 1000 / fills if fills else 0.0,
        shared=shared / passes if passes else 0.0,
        memory_mib=memory_mib(after),
        errors=load.failed[:3],
        by_kind=forwards_by_kind(grown, after, fills),
        early_takes=grown("infill_forward_early_takes_total") / takes if takes else None,
        gap_ms=1000 * grown("infill_request_gap_seconds_total") / gaps if gaps else None,
    )


def forwards_by_kind(grown, after: dict[str, float], fills: int) -> dict[str, dict[str, float]]:
    """Per kind of pass named in the /metrics read `after` the level: its forwards, rows per
    forward and forward ms per fill over the level (`grown(name)`: the growth of a counter)."""
    counters = [name for name in after if name.startswith("infill_forward_passes_by_kind_total")]
    kinds = sorted(name.split('"')[1] for name in counters)
    found = {}
    for kind in kinds:
        label = f'{{kind="{kind}"}}'
        forwards = grown(f"infill_forward_passes_by_kind_total{label}")
        if forwards:
            rows = grown(f"infill_forward_rows_by_kind_total{label}")
            seconds = grown(f"infill_forward_seconds_by_kind_total{label}")
            found[kind] = {"forwards": forwards, "rows_per_forward": rows / forwards,
                           "ms_per_fill": seconds * 1000 / fills if fills else 0.0}  # fmt: skip
    return found


def run_soak(target: Any, bodies: list[dict], clients: int, seconds: float) -> Soak:
    samples: list[tuple[float, float]] = []

    stood_in = 0

    def sample(elapsed: float) -> None:
        nonlocal stood_in
        found = memory_mib(target.metrics())
        stood_in += bool(getattr(target, "stood_in", 0))  # (HttpTarget.metrics)
        if found is not None:
            samples.append((round(elapsed, 1), round(found, 1)))

    load = Load(target, bodies, clients)
    sample(0.0)
    wall = load.run(seconds, on_tick=sample)
    under_load = [mib for at, mib in samples if at <= seconds]
    sample(wall)  # once every client has had its last answer
    after_minute = next((mib for at, mib in samples if at >= 60), None)
    return Soak(clients, wall, len(load.latencies), len(load.failed), samples, after_minute,
                under_load[-1] if under_load else None, samples[-1][1] if samples else None,
                stood_in)  # fmt: skip


# --------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalServer:
    """`infill serve` in a process of its own, on a free port of 127.0.0.1, until `stop`."""

    def __init__(self, threads: int, model: str | None, log: Path, schedule: str = "auto") -> None:
        self.port = free_port()
        command = [sys.executable, "-m", "infill.cli", "serve", "--port", str(self.port),
                   "--threads", str(threads), "--cpus", str(os.cpu_count() or 2),
                   "--schedule", schedule]  # fmt: skip
        if model:
            command += ["--model", model]
        self.log = log.open("w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"

    def wait(self) -> None:
        import httpx

        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"infill serve exited with {code} (log: {self.log.name})")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"infill serve did not answer in {START_SECONDS} s (log: {self.log.name})")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


# --------------------------------------------------------------------------- the run


def bench_serve(target: Any, clients: list[int], seconds: float, soak: float = 0.0, soak_clients: int = 8,
                where: str = "") -> dict:  # fmt: skip
    """Every level of `clients` against `target` (HttpTarget, DriverTarget), then the soak; the
    results as a dict (each level printed as it ends)."""
    bodies = fill_bodies()
    failure = target.ask(bodies[0])  # warm up
    if failure is not None:
        raise RuntimeError(f"the warm-up fill failed: {failure}")
    levels: list[Level] = []
    print(f"{'clients':>7} {'fills/s':>8} {'x1':>6} {'p50 s':>7} {'x1':>6} {'p95 s':>7} {'p99 s':>7} "
          f"{'rows/pass':>9} {'shared':>7} {'fwd ms/fill':>11} {'failed':>6} {'MiB':>6}")  # fmt: skip
    for count in clients:
        level = run_level(target, bodies, count, seconds)
        levels.append(level)
        one = levels[0]
        print(f"{level.clients:>7} {level.throughput:>8.2f} {level.throughput / one.throughput:>6.2f} "
              f"{level.p50:>7.3f} {level.p50 / one.p50:>6.2f} {level.p95:>7.3f} {level.p99:>7.3f} "
              f"{level.rows_per_pass:>9.2f} {level.shared:>7.0%} {level.forward_ms_per_fill:>11.0f} "
              f"{level.failed:>6} {level.memory_mib or 0:>6.0f}", flush=True)  # fmt: skip
        kinds = "; ".join(f"{kind} {k['forwards']:.0f} forwards x {k['rows_per_forward']:.1f} rows, "
                          f"{k['ms_per_fill']:.0f} ms/fill" for kind, k in level.by_kind.items())  # fmt: skip
        if kinds:
            early = level.early_takes
            early = "" if early is None else f"; takes before all were pending {early:.0%}"
            gap = "" if level.gap_ms is None else f"; {level.gap_ms:.1f} ms between a request's passes"
            print(f"        by kind: {kinds}{early}{gap}", flush=True)
        for error in level.errors:
            print(f"        failed: {error}", file=sys.stderr)
    result: dict = {"target": where, "seconds": seconds, "levels": [asdict(level) for level in levels]}
    if soak:
        print(f"soak: {soak_clients} clients for {soak:.0f} s ...", file=sys.stderr, flush=True)
        found = run_soak(target, bodies, soak_clients, soak)
        growth = found.growth
        change = "n/a" if growth is None else f"{growth:+.1%}"
        print(f"soak: {found.fills} fills, {found.failed} failed, {found.fills / found.seconds:.2f} "
              f"fills/s; memory {found.after_first_minute_mib} MiB after the first minute, "
              f"{found.at_end_mib} MiB at the end ({change}), {found.idle_after_mib} MiB once "
              f"idle; {found.stood_in} of {len(found.memory)} samples with a replica not reached, "
              "counted at its last values")  # fmt: skip
        result["soak"] = {**asdict(found), "growth": growth}
    return result


def plot(result: dict, path: Path) -> None:
    """Throughput and p50 against the clients; the soak's memory against time, if there was one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = result["levels"]
    draw_levels = len(levels) > 1 or not result.get("soak")  # one level alone is no curve
    panels = int(draw_levels) + int(bool(result.get("soak")))
    figure, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    if draw_levels:
        draw_load(result, axes[0][0])
    if result.get("soak"):
        soak = result["soak"]
        axis = axes[0][-1]
        axis.plot([t for t, _ in soak["memory"]], [m for _, m in soak["memory"]], ".-")
        axis.set_ylim(bottom=0)
        axis.set_xlabel("seconds")
        axis.set_ylabel("server resident memory (MiB)")
        axis.set_title(f"soak: {soak['clients']} clients, {soak['fills']} fills, {soak['failed']} failed")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def draw_load(result: dict, left: Any) -> None:
    """Throughput (left axis) and p50 latency (right axis) against the clients."""
    levels = result["levels"]
    clients = [level["clients"] for level in levels]
    left.plot(clients, [level["throughput"] for level in levels], "o-", label="fills/s")
    left.set_xscale("log", base=2)
    left.set_xlabel("clients")
    left.set_ylabel("fills per second")
    right = left.twinx()
    right.plot(clients, [level["p50"] for level in levels], "s--", color="tab:red", label="p50 latency")
    right.set_ylabel("p50 latency (s)")
    left.set_ylim(bottom=0)
    right.set_ylim(bottom=0)
    left.figure.legend(loc="upper left", bbox_to_anchor=(0.08, 0.88))
    left.set_title(f"team server under load: {result.get('target', '')}")
