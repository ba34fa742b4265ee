"""infill-lsp on big files: a whole-file docstring job stops when cancelled, and settings that
would make a request cost the file (a context length of 10^9) are clamped to the model's.

A real server process over stdio (tests/lsp_raw.py) with a tiny random model: the fills are
gibberish; what is checked is time, CPU and what the server says.
"""

from __future__ import annotations

import os
import re
import statistics
import time

import pytest
from lsp_raw import RawServer
from lsp_support import REQUEST_CANCELLED, tiny_model_dir
from samples import generated_file

pytestmark = pytest.mark.external  # the language server, as another process

SMALL_URI = "file:///project/small.py"
BIG_URI = "file:///project/big.py"
FILE_DOCSTRINGS = "source.infill.docstrings"
PROGRESS = {"window": {"workDoneProgress": True}}


SMALL = generated_file(20)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return tiny_model_dir(tmp_path_factory)


def actions(server: RawServer, uri: str, line: int, end_line: int | None = None) -> list[dict]:
    start = {"line": line, "character": 0}
    end = start if end_line is None else {"line": end_line, "character": 0}
    params = {
        "textDocument": {"uri": uri},
        "range": {"start": start, "end": end},
        "context": {"diagnostics": []},
    }
    return server.request("textDocument/codeAction", params, timeout=30)["result"]


def timed_fill(server: RawServer) -> float:
    """Seconds to resolve "fill selection" of lines 12-13 of the small file."""
    [fill] = [a for a in actions(server, SMALL_URI, 11, 13) if a["data"]["mode"] == "fill"]
    started = time.monotonic()
    answer = server.request("codeAction/resolve", fill, timeout=60)
    assert "result" in answer and answer["result"].get("edit"), answer
    return time.monotonic() - started


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used (Linux /proc)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def site_reports(server: RawServer) -> list[tuple[int, int]]:
    """(k, n) of every "docstring k/n" progress report so far."""
    found = []
    for message in list(server.notifications):
        if message.get("method") == "$/progress":
            text = (message["params"].get("value") or {}).get("message") or ""
            match = re.match(r"docstring (\d+)/(\d+)", text)
            if match:
                found.append((int(match[1]), int(match[2])))
    return found


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads CPU time from Linux /proc")
def test_cancelling_a_whole_file_docstring_job_on_20000_lines_stops_it_at_once(tiny_model):
    with RawServer() as server:
        server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 8}, capabilities=PROGRESS)
        server.open(SMALL_URI, SMALL)
        timed_fill(server)  # loads the model
        before = statistics.median(timed_fill(server) for _ in range(3))

        big = generated_file(2_000)
        assert big.count("\n") == 20_000
        server.open(BIG_URI, big)
        [job] = [a for a in actions(server, BIG_URI, 0) if a["kind"] == FILE_DOCSTRINGS]
        assert job["title"].endswith("(2000)")
        server.request_nowait("codeAction/resolve", job, msg_id="docstrings")

        # It reports progress site by site; let it run into its sites, then cancel.
        deadline = time.monotonic() + 120
        while len({k for k, _ in site_reports(server)}) < 3:
            assert time.monotonic() < deadline, f"no progress per site: {server.tail()}"
            assert "docstrings" not in server.responses, server.responses["docstrings"]
            time.sleep(0.05)
        assert {n for _, n in site_reports(server)} == {2_000}
        cancelled_at = time.monotonic()
        server.notify("$/cancelRequest", {"id": "docstrings"})
        answer = server.wait_response("docstrings", timeout=5)
        assert time.monotonic() - cancelled_at < 1.0, "the cancelled job went on for a second or more"
        assert answer.get("error", {}).get("code") == REQUEST_CANCELLED, answer

        # Idle within a second: no work goes on behind the answer.
        time.sleep(1.0)
        pid = server.process.pid
        used = cpu_seconds(pid)
        time.sleep(1.0)
        assert cpu_seconds(pid) - used < 0.25, "the server kept working after the cancel"

        # The next fill runs at its usual speed (nothing queued ahead of it).
        after = timed_fill(server)
        assert after < max(3 * before, before + 1.0), (before, after)


def test_a_context_length_of_a_billion_is_clamped_to_the_model_with_a_warning(tiny_model):
    big = generated_file(750)  # 7,500 lines
    with RawServer() as server:
        server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 8, "contextLength": 10**9})
        server.open(BIG_URI, big)
        server.open(SMALL_URI, SMALL)
        timed_fill(server)  # loads the model
        [fill] = [a for a in actions(server, BIG_URI, 3_701, 3_703) if a["data"]["mode"] == "fill"]
        started = time.monotonic()
        answer = server.request("codeAction/resolve", fill, timeout=60)
        seconds = time.monotonic() - started
        assert "result" in answer and answer["result"].get("edit"), answer
        assert seconds < max(5 * timed_fill(server), 2.0), seconds
        shown = [
            m["params"]["message"] for m in server.notifications if m.get("method") == "window/showMessage"
        ]
        assert any("contextLength 1000000000 is above the model's context of 128" in s for s in shown), shown


def test_a_client_that_disappears_during_the_docstring_job_ends_the_process_within_a_second(tiny_model):
    with RawServer() as server:
        server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 8}, capabilities=PROGRESS)
        server.open(BIG_URI, generated_file(2_000))
        [job] = [a for a in actions(server, BIG_URI, 0) if a["kind"] == FILE_DOCSTRINGS]
        server.request_nowait("codeAction/resolve", job)
        deadline = time.monotonic() + 120
        while len({k for k, _ in site_reports(server)}) < 2:
            assert time.monotonic() < deadline, f"the job never started: {server.tail()}"
            time.sleep(0.05)
        assert server.process.stdin is not None
        server.process.stdin.close()  # the editor crashed
        closed_at = time.monotonic()
        assert server.wait_exit(timeout=5) is not None, "the server outlived its client"
        assert time.monotonic() - closed_at < 1.0


def test_a_second_fill_in_a_document_starts_from_its_kept_context(tiny_model):
    """infill.engine.kept_context in the server: the next fill's first pass computes what changed."""
    with RawServer("--log-level", "INFO") as server:
        no_retries = {"retries": 0, "tokenEdits": 0, "freshFills": 0}  # one sampling per fill
        server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 8, **no_retries})
        server.open(SMALL_URI, SMALL)
        timed_fill(server)
        assert not any("kept context" in line for line in server.stderr)
        timed_fill(server)  # the same action again: the canvas is the one kept
        [line] = logged(server, "kept context", 1)
        assert SMALL_URI in line and "1 first pass(es)" in line
        server.notify("textDocument/didClose", {"textDocument": {"uri": SMALL_URI}})
        server.open(SMALL_URI, SMALL)
        timed_fill(server)  # closed and opened again: nothing kept
        assert len([line for line in server.stderr if "kept context" in line]) == 1


def logged(server: RawServer, text: str, count: int, timeout: float = 10.0) -> list[str]:
    """The server's log lines holding `text`, once there are `count` of them: the log comes on
    stderr, read apart from the answers on stdout, so a line logged before an answer may be read
    after it."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [line for line in server.stderr if text in line]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.02)


def computed_positions(server: RawServer) -> list[int]:
    """Positions each kept-context first pass computed, from the server's log, in order."""
    found = (re.search(r"\((\d+) positions computed\)", line) for line in server.stderr)
    return [int(m.group(1)) for m in found if m]


def fill_line_12(server: RawServer, uri: str = SMALL_URI) -> None:
    [fill] = [a for a in actions(server, uri, 12, 13) if a["data"]["mode"] == "fill"]
    answer = server.request("codeAction/resolve", fill, timeout=60)
    assert "result" in answer and answer["result"].get("edit"), answer


def fill_after_an_edit(tiny_model, idle_refresh: float) -> tuple[RawServer, int]:
    """A fill of line 12, an edit of the line above it, quiet, the fill again: the server and
    the positions that fill's first pass computed."""
    server = RawServer("--log-level", "INFO")
    no_retries = {"retries": 0, "tokenEdits": 0, "freshFills": 0}
    server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 8, "idleRefresh": idle_refresh,
                       **no_retries})  # fmt: skip
    server.open(SMALL_URI, SMALL)
    fill_line_12(server)  # loads the model; the document's context is kept
    line_11 = "    total = value * scale + 1\n"
    assert SMALL.split("\n")[11] + "\n" == line_11
    server.change(SMALL_URI, 2, SMALL.replace(line_11, "    total = value * scale + 1 - offset\n", 1))
    deadline = time.monotonic() + 10
    while idle_refresh and not any("idle refresh" in line for line in server.stderr):
        assert time.monotonic() < deadline, "no idle refresh within 10 s"
        time.sleep(0.05)
    time.sleep(0.3)
    fill_line_12(server)
    deadline = time.monotonic() + 10  # the log line comes on stderr, maybe after the answer
    while not computed_positions(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    [positions] = computed_positions(server)
    return server, positions


def test_after_an_edit_the_idle_refresh_leaves_the_next_fill_its_span_alone(tiny_model):
    with fill_after_an_edit(tiny_model, idle_refresh=0.2)[0] as server:
        [line] = [line for line in server.stderr if "idle refresh" in line]
        assert SMALL_URI in line and "tokens in" in line
        refreshed = computed_positions(server)[0]
    with fill_after_an_edit(tiny_model, idle_refresh=0)[0] as server:
        assert not any("idle refresh" in line for line in server.stderr)
        stale = computed_positions(server)[0]
    assert refreshed < stale  # without the refresh the edited tokens are computed too


def test_a_document_that_opens_is_prepared_so_its_first_fill_computes_its_span_alone(tiny_model):
    other = "file:///project/other.py"
    with RawServer("--log-level", "INFO") as server:
        server.initialize({"modelPath": str(tiny_model), "threads": 1, "steps": 8, "idleRefresh": 0.2,
                           "retries": 0, "tokenEdits": 0, "freshFills": 0})  # fmt: skip
        server.open(SMALL_URI, SMALL)
        fill_line_12(server)  # loads the model
        server.open(other, SMALL.replace("total", "amount"))
        deadline = time.monotonic() + 10
        while not any(f"idle refresh of {other}" in line for line in server.stderr):
            assert time.monotonic() < deadline, "the opened document was not prepared within 10 s"
            time.sleep(0.05)
        fill_line_12(server, other)
        deadline = time.monotonic() + 10
        while not computed_positions(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        [positions] = computed_positions(server)  # the first pass of the new document's first fill
        [prepared] = [line for line in server.stderr if f"idle refresh of {other}" in line]
        tokens = int(re.search(r"(\d+) tokens in", prepared).group(1))
        assert positions < tokens / 2  # its span and the window's new edge, not the whole window
