"""A replica's counters as Prometheus text (GET /metrics): requests by endpoint and status, their
latency, and the batching driver's own (infill.engine.batching.DriverStats): the queue, the
forward passes, the rows they carried and how many requests shared them.

    infill_requests_total{endpoint,status}          counter: answered requests
    infill_request_seconds{endpoint}                histogram: time from arrival to the answer
    infill_queue_length, infill_live_requests       gauges: waiting for the model, being filled
    infill_forward_passes_total                     counter: the model's forwards
    infill_forward_rows_total                       counter: canvas rows those forwards carried
    infill_forward_shared_passes_total              counter: forwards that carried several requests
    infill_rows_per_pass                            gauge: rows / passes so far
    infill_forward_most_rows, ..._most_requests     gauges: the most in one forward
    infill_forward_seconds_total                    counter: time in forwards
    infill_forward_{passes,rows,seconds}_by_kind_total{kind}
                                                    counters: the same by kind of pass (full,
                                                    refresh, span)
    infill_forward_takes_total, ..._early_takes_total
                                                    counters: the loop's takes of pending passes,
                                                    and those that left while a request was busy
    infill_requests_ended_total{how}                counter: finished, cancelled, failed (the driver's)
    process_resident_memory_bytes                   gauge: the replica process's resident memory
                                                    (Prometheus' standard name; Linux's /proc)
    infill_replica_info{replica}                    gauge, 1: which replica answered (host:process)

Each replica counts its own and a read of /metrics reaches one of them (a scraper asks each
replica, or Ray's metrics export is used; `infill-bench serve` reads until it has seen them all
and adds them up, by `infill_replica_info`); no counter holds text of a request, only its
endpoint, status and time.
"""

from __future__ import annotations

import bisect
import os
import socket
import threading
from collections import Counter, defaultdict
from typing import Any

ENDS = ("finished", "cancelled", "failed")  # how requests leave the driver
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)  # seconds


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, int]] = Counter()
        self._latency: dict[str, list[int]] = defaultdict(lambda: [0] * (len(BUCKETS) + 1))
        self._latency_sum: Counter[str] = Counter()
        self.replica = f"{socket.gethostname()}:{os.getpid()}"  # which replica counts these

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        with self._lock:
            self._requests[endpoint, status] += 1
            self._latency[endpoint][bisect.bisect_left(BUCKETS, seconds)] += 1
            self._latency_sum[endpoint] += seconds

    def requests(self, endpoint: str, status: int) -> int:
        with self._lock:
            return self._requests[endpoint, status]

    def render(self, driver: Any = None) -> str:
        """Prometheus' text format (version 0.0.4); `driver`: the driver's DriverStats, if any."""
        lines: list[str] = []

        def metric(name: str, kind: str, what: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {name} {what}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(f"{name}{labels} {value:g}" for labels, value in samples)

        with self._lock:
            requests = sorted(self._requests.items())
            latency = {endpoint: list(counts) for endpoint, counts in sorted(self._latency.items())}
            sums = dict(self._latency_sum)
        metric("infill_requests_total", "counter", "Requests answered, by endpoint and status.",
               [(f'{{endpoint="{e}",status="{s}"}}', n) for (e, s), n in requests])  # fmt: skip
        samples = []
        for endpoint, counts in latency.items():
            total = 0
            for bound, count in zip([*BUCKETS, float("inf")], counts):
                total += count
                le = "+Inf" if bound == float("inf") else f"{bound:g}"
                samples.append((f'_bucket{{endpoint="{endpoint}",le="{le}"}}', total))
            samples.append((f'_sum{{endpoint="{endpoint}"}}', sums[endpoint]))
            samples.append((f'_count{{endpoint="{endpoint}"}}', total))
        lines.append("# HELP infill_request_seconds Time from a request's arrival to its answer.")
        lines.append("# TYPE infill_request_seconds histogram")
        lines.extend(f"infill_request_seconds{labels} {value:g}" for labels, value in samples)
        for name, kind, what, samples in driver_metrics(driver) if driver is not None else []:
            metric(name, kind, what, samples)
        resident = resident_bytes()
        if resident is not None:
            metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                   [("", resident)])  # fmt: skip
        metric("infill_replica_info", "gauge", "The replica that answered: its host and process.",
               [(f'{{replica="{self.replica}"}}', 1)])  # fmt: skip
        return "\n".join(lines) + "\n"


Metric = tuple[str, str, str, list[tuple[str, float]]]
"""(name, kind, help, [(labels, value)]): one metric of the Prometheus text."""


def driver_metrics(driver: Any) -> list[Metric]:
    """The batching driver's counters (infill.engine.batching.DriverStats) as /metrics names
    them: the replica's /metrics and `infill-bench serve --in-process` read them from here."""
    kinds = sorted(driver.by_kind.items())
    per_kind = [("passes", "Forward passes"), ("rows", "Canvas rows"), ("seconds", "Time in forward passes")]
    return [
        ("infill_queue_length", "gauge", "Requests waiting for the model.", [("", driver.queued)]),
        ("infill_live_requests", "gauge", "Requests being filled.", [("", driver.live)]),
        ("infill_forward_passes_total", "counter", "Forward passes of the model.", [("", driver.passes)]),
        ("infill_forward_rows_total", "counter", "Canvas rows the forward passes carried.",
         [("", driver.rows)]),
        ("infill_forward_shared_passes_total", "counter",
         "Forward passes that carried passes of several requests.", [("", driver.shared_passes)]),
        ("infill_rows_per_pass", "gauge", "Rows per forward pass so far.", [("", driver.rows_per_pass)]),
        ("infill_forward_most_rows", "gauge", "The most rows in one forward pass.", [("", driver.most_rows)]),
        ("infill_forward_most_requests", "gauge", "The most requests in one forward pass.",
         [("", driver.most_requests)]),
        ("infill_forward_seconds_total", "counter", "Time spent in forward passes.",
         [("", driver.forward_seconds)]),
        *[(f"infill_forward_{name}_by_kind_total", "counter",
           f"{what}, by kind of pass (full, refresh, span).",
           [(f'{{kind="{kind}"}}', counts[index]) for kind, counts in kinds])
          for index, (name, what) in enumerate(per_kind)],
        ("infill_forward_takes_total", "counter",
         "Times the batching loop took pending passes (one forward or more: one per kind).",
         [("", driver.takes)]),
        ("infill_forward_early_takes_total", "counter",
         "Takes that left while a live request was still busy between its passes.",
         [("", driver.early_takes)]),
        ("infill_request_gaps_total", "counter",
         "Times a request asked for its next pass after an answer.", [("", driver.gaps)]),
        ("infill_request_gap_seconds_total", "counter",
         "Time requests spent between an answer and their next pass (the engine's own work).",
         [("", driver.gap_seconds)]),
        ("infill_requests_ended_total", "counter", "Requests that left the model, by how.",
         [(f'{{how="{how}"}}', getattr(driver, how)) for how in ENDS]),
    ]  # fmt: skip


def resident_bytes() -> int | None:
    """This process's resident memory now (VmRSS of /proc/self/status), None where there is no /proc."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def parse(text: str) -> dict[str, float]:
    """Prometheus text -> {"name{labels}": value} (for tests and scripts that read /metrics)."""
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values
