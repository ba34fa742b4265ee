"""Requests batched pass by pass (infill.engine.batching): each gets the result it gets in-process.

The end-to-end tests run every mode (fill, fix, docstrings, alternatives and inline completions,
greedy and seeded) and the authors' protocol through one `BatchingDriver`, all at once beside
other requests of other lengths, on the shipped model and on a tiny Dream checkpoint, and compare
each result with `pipeline.run`'s for the same request: the same texts, edits, flagged tokens,
ids the authors' loop committed, and counts of steps, passes and repairs. The driver's own
behaviour (sharing, queueing, cancellation, failures, the bound on rows) is checked on the tiny
real architecture, whose random weights make fills cheap.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass, field

import pytest
import torch
from checkpoints import write_checkpoint
from samples import AREA_MODULE, COUNTER_MODULE

from infill.engine.batching import BatchingDriver, PassDenoiser, Ticket, fewest_passes_first, schedule_for
from infill.engine.pipeline import Hooks, run
from infill.errors import Cancelled
from infill.models import load
from infill.models.base import Pass
from infill.models.denoiser import CheckpointDenoiser
from infill.models.native import load_backend
from infill.modes import AlternativesRequest, DocstringRequest, FillRequest, FixRequest, InlineRequest
from infill.options import AuthorsSettings, FixOptions, InfillOptions, SamplerConfig
from infill.text.docstring_sites import missing_docstrings
from infill.text.document import document_from_bytes
from infill.text.spans import Span, line_span

BROKEN = COUNTER_MODULE.replace("total += value", "total += value)")


def document(text: str):
    return document_from_bytes(text.encode())


def comparable(result):
    """A mode's result as plain data, its times left out (they differ from run to run)."""
    if dataclasses.is_dataclass(result):
        return {f.name: comparable(getattr(result, f.name)) for f in dataclasses.fields(result)
                if f.name not in ("seconds", "repair_seconds")}  # fmt: skip
    if isinstance(result, (list, tuple)):
        return [comparable(item) for item in result]
    return result


def assert_same(batched, alone) -> None:
    """Equal, floats (scores, probabilities) to float32 rounding."""
    if isinstance(alone, dict):
        assert batched.keys() == alone.keys()
        for key in alone:
            assert_same(batched[key], alone[key])
    elif isinstance(alone, list):
        assert len(batched) == len(alone)
        for ours, theirs in zip(batched, alone):
            assert_same(ours, theirs)
    elif isinstance(alone, float):
        assert math.isclose(batched, alone, rel_tol=1e-4, abs_tol=1e-6), (batched, alone)
    else:
        assert batched == alone


def run_batched(denoiser, requests: dict, **settings) -> tuple[dict, object]:
    """Every request submitted at once to one driver (before it starts: the first forward finds
    them all): name -> result, and the driver's stats."""
    driver = BatchingDriver(denoiser, **settings)
    tickets = {name: driver.submit(request) for name, request in requests.items()}
    with driver:
        results = {name: ticket.result(timeout=600) for name, ticket in tickets.items()}
    return results, driver.stats()


def assert_as_in_process(denoiser, requests: dict, **settings):
    alone = {name: run(denoiser, request) for name, request in requests.items()}
    batched, stats = run_batched(denoiser, requests, **settings)
    for name in requests:
        assert_same(comparable(batched[name]), comparable(alone[name]))
    assert stats.finished == len(requests) and stats.live == 0 and stats.queued == 0
    return alone, stats


def fills(text: str, lines: list[tuple[int, int]], **options) -> dict:
    doc = document(text)
    options = InfillOptions(**options)
    return {f"fill {a}-{b}": FillRequest(doc, [line_span(text, a, b)], options) for a, b in lines}


# ----------------------------------------------------------------------------- the real models


@pytest.fixture(scope="module", params=["float32", "as served"])
def shipped(request):
    """The shipped model in float32, and as `infill serve` loads it: bfloat16 where the CPU
    computes it (its products then infill's kernel where it builds: infill.models.bf16_native),
    whose rounding makes any difference in a row's sums visible."""
    return load_backend() if request.param == "float32" else load(None, "cpu")


@pytest.fixture(scope="module")
def dream(tmp_path_factory):
    folder = tmp_path_factory.mktemp("batching") / "Dream"
    write_checkpoint(folder, "Dream", head_scale=20.0)
    return load(folder, "cpu", torch.float32)


@pytest.mark.slow
def test_every_mode_gives_its_in_process_result_batched_with_the_others(shipped):
    doc, broken = document(COUNTER_MODULE), document(BROKEN)
    seeded = InfillOptions(sampler=SamplerConfig(temperature=0.8, seed=3))
    other_seed = InfillOptions(sampler=SamplerConfig(seed=5))
    two_spans = [line_span(COUNTER_MODULE, 4, 4), line_span(COUNTER_MODULE, 19, 19)]
    cursor, later = COUNTER_MODULE.index("total = 0") + 8, COUNTER_MODULE.index("return self") + 7
    requests = {
        **fills(COUNTER_MODULE, [(6, 6), (11, 11), (12, 13)]),
        "fill two spans": FillRequest(doc, two_spans),
        "fix": FixRequest(broken, [line_span(BROKEN, 12, 12)], FixOptions()),
        "docstrings": DocstringRequest(doc, missing_docstrings(doc.text)),
        "alternatives": AlternativesRequest(doc, line_span(COUNTER_MODULE, 12, 12), 3, seeded),
        "alternatives at 0.5": AlternativesRequest(doc, line_span(COUNTER_MODULE, 6, 6), 2, other_seed, 0.5),
        "inline": InlineRequest(doc, cursor, InfillOptions()),
        "inline samples": InlineRequest(doc, later, seeded, samples=2),
    }
    alone, stats = assert_as_in_process(shipped, requests)
    assert alone["fix"].flagged and alone["docstrings"].fills  # the modes did their work
    assert stats.rows_per_pass > 1 and stats.most_requests >= 2 and stats.shared_passes >= 2  # thread timing


NO_REPAIR = dict(retries=0, token_edits=0, fresh_fills=0)


@pytest.mark.slow
def test_a_published_family_and_its_authors_loop_give_their_in_process_results(dream):
    """A shifted family (Dream: row i-1 predicts the token at i) in the engine's protocol, fix
    mode's masked scoring (a pass of one canvas per token) and the authors' loops (full logits)."""
    text = AREA_MODULE
    hole = Span(text.index("width * height"), text.index("width * height") + len("width * height"))
    authors = InfillOptions(protocol="authors", budget=6, authors=AuthorsSettings())
    maskgit = dataclasses.replace(authors, authors=AuthorsSettings(order="maskgit_plus"))
    requests = {
        **fills(text, [(5, 5), (8, 8)], **NO_REPAIR),
        "authors": FillRequest(document(text), [hole], authors),
        "authors, maskgit_plus": FillRequest(document(text), [Span(0, 6)], maskgit),
        "fix": FixRequest(document(text), [line_span(text, 8, 8)], FixOptions(retries=0, token_edits=0)),
    }
    alone, stats = assert_as_in_process(dream, requests)
    assert alone["authors"].spans[0].tokens  # the loop's committed ids were compared
    assert stats.most_requests >= 2 and stats.rows_per_pass > 1  # how many join a pass depends on the threads


@pytest.mark.slow
def test_a_network_that_cannot_batch_runs_each_pass_alone(dream):
    """The checkpoint's own modeling code (--trust-remote-code) has no run_passes: the driver
    still interleaves requests, one pass per forward."""
    plain_type = CheckpointDenoiser
    plain = plain_type(**{f.name: getattr(dream, f.name) for f in dataclasses.fields(plain_type)})
    _, stats = assert_as_in_process(
        plain, fills(AREA_MODULE, [(5, 5), (8, 8)], sampler=SamplerConfig(steps=6), **NO_REPAIR)
    )
    assert stats.most_requests == 1 and stats.passes >= 2


def test_requests_on_a_kept_context_give_what_the_language_server_gives(shipped):
    """A document's requests in turn on its kept context (a team server's for one client): each
    first pass after the first request computes only what changed, and every result is the one
    the language server gets in-process on a kept context of its own, with another request
    sharing the forwards."""
    from infill.engine.kept_context import KeptContext

    doc = document(COUNTER_MODULE)
    turns = [FillRequest(doc, [line_span(COUNTER_MODULE, a, b)]) for a, b in [(6, 6), (11, 11), (12, 13)]]
    in_process = KeptContext(shipped)
    alone = [run(in_process, request) for request in turns]
    kept = KeptContext(shipped)
    with BatchingDriver(shipped) as driver:
        for request, expected in zip(turns, alone):
            beside = driver.submit(fills(AREA_MODULE, [(5, 5)])["fill 5-5"])
            got = driver.submit(request, kept=kept).result(timeout=600)
            assert_same(comparable(got), comparable(expected))
            beside.result(timeout=600)
    assert kept.reused_passes == in_process.reused_passes >= len(turns) - 1
    assert kept.computed_positions == in_process.computed_positions
    assert torch.equal(kept.ids, in_process.ids)


# ----------------------------------------------------------------------------- the driver


@dataclass
class Passes:
    """A request of the pipeline's protocol that asks `count` refresh passes of `ids` in its plan
    and checks nothing itself, so that only the driver can stop it; `pause` between passes."""

    ids: torch.Tensor
    count: int
    pause: float = 0.0
    outputs: list = field(default_factory=list)

    def plan(self, denoiser):
        for _ in range(self.count):
            positions = torch.arange(3)
            self.outputs.append(denoiser.cached_logits(self.ids, positions, denoiser.new_cache(), True))
            time.sleep(self.pause)
        return []

    def finish(self, denoiser, filled, stats):
        return self.outputs


def canvas(backend, length: int, start: int = 0) -> torch.Tensor:
    return torch.tensor([backend.encode(AREA_MODULE * 3)[start : start + length]])


def test_the_pass_denoiser_run_in_process_is_the_denoiser(tiny_backend):
    requests = fills(AREA_MODULE, [(5, 5), (7, 8)])
    for request in requests.values():
        through = run(PassDenoiser(tiny_backend, lambda p: p.run(tiny_backend)), request)
        assert_same(comparable(through), comparable(run(tiny_backend, request)))
    assert hasattr(PassDenoiser(tiny_backend, None), "cached_logits")


def test_whole_canvases_share_forwards_with_canvases_of_their_length(tiny_backend):
    """Refresh passes of one canvas length share a forward; a canvas of another length gets one of
    its own (padded keys would change its attention's sums in the last bits: bfloat16 shows them)."""
    lengths = {"short": (30, 0), "long": (70, 5), "mid": (50, 9), "long too": (70, 20)}
    requests = {name: Passes(canvas(tiny_backend, *at), 4) for name, at in lengths.items()}
    results, stats = run_batched(tiny_backend, requests, gather_s=5.0)  # wait for all: one take a round
    for name, request in requests.items():
        alone = tiny_backend.cached_logits(request.ids, torch.arange(3), tiny_backend.new_cache(), True)
        for out in results[name]:  # float32: a batch's products may sum in another order
            assert torch.allclose(out, alone, atol=1e-5) and torch.equal(out.argmax(-1), alone.argmax(-1))
    assert stats.passes == 12 and stats.rows == 16 and stats.most_requests == 2 and stats.shared_passes == 4
    forwards, rows, seconds = stats.by_kind["refresh"]
    assert list(stats.by_kind) == ["refresh"] and (forwards, rows) == (12, 16)
    assert math.isclose(seconds, stats.forward_seconds)
    assert (stats.takes, stats.early_takes) == (4, 0)  # every take waited for all four


def test_a_take_that_leaves_while_a_request_is_busy_is_counted_early(tiny_backend):
    """A request busy between its passes (parsing, choosing tokens) for longer than `gather_s`
    does not hold the other up: the other's pass leaves without it, and the take is counted."""
    busy = Passes(canvas(tiny_backend, 30), 3, pause=0.2)
    quick = Passes(canvas(tiny_backend, 40), 12, pause=0.0)
    _, stats = run_batched(tiny_backend, {"busy": busy, "quick": quick}, gather_s=0.005)
    assert stats.early_takes >= 5 and stats.takes >= stats.early_takes
    assert stats.passes == stats.by_kind["refresh"][0] and stats.rows == 15
    # The time between an answer and the next pass: the busy one's two pauses, the quick one's 11
    # gaps of next to nothing (the last pause of each comes after its last pass).
    assert stats.gaps == 2 + 11
    assert 0.4 <= stats.gap_seconds < 0.4 + 0.3  # (threads wake late on a busy machine)
    assert stats.gap_ms == pytest.approx(1000 * stats.gap_seconds / 13)


@pytest.mark.parametrize("schedule", ["shared", "fewest-passes"])
def test_fills_and_alternatives_on_the_tiny_model_batched(tiny_backend, schedule):
    seeded = InfillOptions(sampler=SamplerConfig(seed=1))
    alternatives = AlternativesRequest(document(AREA_MODULE), line_span(AREA_MODULE, 8, 8), 3, seeded)
    requests = {**fills(AREA_MODULE, [(5, 5), (3, 3)], retries=1), "alternatives": alternatives}
    _, stats = assert_as_in_process(tiny_backend, requests, schedule=schedule)  # in either order
    if schedule == "shared":
        assert stats.shared_passes >= 1 and stats.most_rows >= 4


@dataclass
class Logged(Passes):
    """`Passes` that writes its name in `log` after each of its passes, and calls `after(k)` once
    its k-th pass is answered."""

    name: str = ""
    log: list = field(default_factory=list)
    after: object = None

    def plan(self, denoiser):
        for k in range(1, self.count + 1):
            positions = torch.arange(3)
            self.outputs.append(denoiser.cached_logits(self.ids, positions, denoiser.new_cache(), True))
            self.log.append(self.name)
            if self.after is not None:
                self.after(k)
        return []


def test_fewest_passes_runs_whole_canvas_passes_one_a_forward_the_least_served_first(tiny_backend):
    """Passes over whole canvases (30-50 positions each, more than SHARE_POSITIONS together) run
    one a forward. With every live request's pass pending at each take (gather_s: 5 s), the
    requests take turns; one that arrives later runs until it has run as many passes as the
    others."""
    log: list[str] = []
    driver = BatchingDriver(tiny_backend, gather_s=5.0, schedule="fewest-passes")
    two = [Logged(canvas(tiny_backend, 30 + 10 * i), 4, name=name, log=log) for i, name in enumerate("AB")]
    pair = [driver.submit(request) for request in two]
    with driver:
        for ticket in pair:
            ticket.result(timeout=60)
    assert log in (list("ABABABAB"), list("BABABABA"))  # which starts is the threads' race
    assert driver.stats().most_requests == 1 and driver.stats().passes == 8

    log.clear()
    late: list[Ticket] = []
    driver = BatchingDriver(tiny_backend, gather_s=5.0, schedule="fewest-passes")
    join = Logged(canvas(tiny_backend, 50), 4, name="B", log=log)
    first = Logged(canvas(tiny_backend, 40), 6, name="A", log=log,
                   after=lambda k: late.append(driver.submit(join)) if k == 3 else None)  # fmt: skip
    with driver:
        driver.submit(first).result(timeout=60)
        late[0].result(timeout=60)
    # B runs 3 passes to catch up, then A (it has waited longer), then B's last: B finishes first
    assert "".join(log) == "AAABBBABAA"


def test_fewest_passes_first_takes_one_past_its_deadline_then_the_least_served_and_small_ones_beside():
    now = time.monotonic()

    def ticket(number, passes, since, deadline=None, span=4, canvas=40):
        made = Ticket(None, Hooks(deadline=deadline), lambda: None, number)
        made.passes, made.since = passes, since
        ids = torch.zeros((1, canvas), dtype=torch.long)
        made.pending = Pass(ids, torch.arange(span or 3), refresh=not span)  # span=0: a refresh
        return made

    def first(pending):
        return fewest_passes_first(pending, now, budget=1)[0]  # nothing fits beside it

    few, many, waited = ticket(0, 2, now), ticket(1, 9, now), ticket(2, 2, now - 1)
    assert first([few, many]) is few
    assert first([few, many, waited]) is waited  # as few passes, waiting longer
    late = ticket(3, 20, now, deadline=now - 0.1)
    assert first([few, many, waited, late]) is late  # it ends at this pass
    assert first([few, ticket(4, 20, now, deadline=now + 5)]) is few  # not late yet
    # Beside the first, least served first, span passes while the positions come to 32 at most
    big = ticket(5, 0, now, span=30)
    assert fewest_passes_first([many, few, waited, big], now) == [big]  # 30 + 4 > 32
    assert fewest_passes_first([many, few, waited], now) == [waited, few, many]  # 4 + 4 + 4
    refresh = ticket(6, 0, now, span=0)  # a whole canvas of 40 positions: alone
    assert fewest_passes_first([refresh, few, waited], now) == [refresh]
    small_refresh = ticket(7, 3, now, span=0, canvas=10)  # small, but another kind of forward
    assert fewest_passes_first([few, small_refresh], now) == [few]


def test_auto_schedules_fewest_passes_on_a_cpu_and_shared_elsewhere(tiny_backend):
    assert schedule_for("auto", on_cpu=True) == "fewest-passes"
    assert schedule_for("auto", on_cpu=False) == "shared"
    assert schedule_for("shared", on_cpu=True) == "shared"
    assert BatchingDriver(tiny_backend, schedule="auto").schedule == "fewest-passes"
    assert BatchingDriver(tiny_backend).schedule == "shared"
    with pytest.raises(ValueError, match="schedule must be one of"):
        BatchingDriver(tiny_backend, schedule="fastest")


def test_a_cancelled_request_leaves_at_its_next_pass_and_the_others_finish(tiny_backend):
    with BatchingDriver(tiny_backend) as driver:
        endless = driver.submit(Passes(canvas(tiny_backend, 40), 10_000))
        other = driver.submit(Passes(canvas(tiny_backend, 60), 30, pause=0.002))
        while endless.passes < 3:
            time.sleep(0.001)
        endless.cancel()
        with pytest.raises(Cancelled):
            endless.result(timeout=60)
        assert endless.passes < 100
        assert len(other.result(timeout=60)) == 30
    stats = driver.stats()
    assert (stats.cancelled, stats.finished, stats.live) == (1, 1, 0)


def test_a_request_whose_hook_says_cancelled_leaves(tiny_backend):
    """The caller's own hook (a client that disconnected): the pipeline's checks and the
    driver's both read it; the fill stops with Cancelled, the other fills finish."""
    gone = threading.Event()
    requests = fills(AREA_MODULE, [(7, 8), (5, 5)], retries=0)
    hooks = Hooks(cancelled=gone.is_set, on_step=lambda canvas, step: gone.set())
    with BatchingDriver(tiny_backend) as driver:
        leaving = driver.submit(requests["fill 7-8"], hooks)
        staying = driver.submit(requests["fill 5-5"])
        with pytest.raises(Cancelled):
            leaving.result(timeout=60)
        alone = run(tiny_backend, requests["fill 5-5"])
        assert_same(comparable(staying.result(timeout=60)), comparable(alone))
    assert leaving.passes == 1


def test_each_request_keeps_its_own_deadline(tiny_backend):
    """A request past its deadline ends its fill at its next pass (and skips the repair stage),
    as in-process; the request beside it runs its whole schedule."""
    requests = fills(AREA_MODULE, [(7, 8), (5, 5)])
    driver = BatchingDriver(tiny_backend)
    late = driver.submit(requests["fill 7-8"], Hooks(deadline=time.monotonic() - 1))
    on_time = driver.submit(requests["fill 5-5"])
    with driver:
        ended, finished = late.result(timeout=60), on_time.result(timeout=60)
    alone = run(tiny_backend, requests["fill 7-8"], Hooks(deadline=time.monotonic() - 1))
    assert_same(comparable(ended), comparable(alone))
    assert ended.stats.forward_passes == 1
    assert_same(comparable(finished), comparable(run(tiny_backend, requests["fill 5-5"])))
    assert finished.stats.forward_passes > 1


def test_a_request_that_raises_does_not_stop_the_others(tiny_backend):
    def fail(canvas, step):
        if step.index == 2:
            raise RuntimeError("the caller's hook broke")

    requests = fills(AREA_MODULE, [(7, 8), (5, 5)])
    with BatchingDriver(tiny_backend) as driver:
        failing = driver.submit(requests["fill 7-8"], Hooks(on_step=fail))
        fine = driver.submit(requests["fill 5-5"])
        with pytest.raises(RuntimeError, match="hook broke"):
            failing.result(timeout=60)
        assert_same(comparable(fine.result(timeout=60)), comparable(run(tiny_backend, requests["fill 5-5"])))
    assert (driver.stats().failed, driver.stats().finished) == (1, 1)


def test_a_pass_that_fails_in_a_shared_forward_fails_alone(tiny_backend):
    """A forward that raises is run again pass by pass: only the request at fault gets the error."""
    good = Passes(canvas(tiny_backend, 30), 1)
    bad = Passes(torch.full((1, 20), 10_000), 1)  # ids past the vocabulary
    driver = BatchingDriver(tiny_backend, gather_s=5.0)
    tickets = [driver.submit(good), driver.submit(bad)]
    with driver:
        with pytest.raises(IndexError):
            tickets[1].result(timeout=60)
        [out] = tickets[0].result(timeout=60)
    alone = tiny_backend.cached_logits(good.ids, torch.arange(3), tiny_backend.new_cache(), True)
    assert torch.equal(out, alone)  # run alone after the shared forward failed
    assert (driver.stats().failed, driver.stats().finished) == (1, 1)


def test_requests_past_max_live_wait_in_the_queue(tiny_backend):
    driver = BatchingDriver(tiny_backend, max_live=1)
    tickets = [driver.submit(Passes(canvas(tiny_backend, 20 + 10 * i), 2)) for i in range(3)]
    assert driver.stats().queued == 3  # not started: nothing admitted yet
    driver.start()
    driver.close()
    assert all(len(ticket.result()) == 2 for ticket in tickets)
    stats = driver.stats()
    assert stats.most_requests == 1 and stats.passes == 6 and stats.queued == 0


def test_max_rows_bounds_a_forward(tiny_backend):
    rows3 = Passes(canvas(tiny_backend, 30).repeat(3, 1), 3)
    ones = {f"one {i}": Passes(canvas(tiny_backend, 25 + i), 3) for i in range(3)}
    requests = {"three rows": rows3, **ones}
    _, stats = run_batched(tiny_backend, requests, max_rows=4, gather_s=5.0)
    assert stats.most_rows <= 4 and stats.rows == 18 and stats.passes >= 5


def test_settings_are_checked():
    with pytest.raises(ValueError):
        BatchingDriver(None, max_rows=0)
    driver = BatchingDriver(None)
    driver.close()
    with pytest.raises(RuntimeError, match="closed"):
        driver.submit(None)
