"""The project's own clients of a team server: `infill FILE --server URL` and the language
server's `endpoint` (infill.models.served), against the real app and replica (team_server.app over
team_server.replica and its batching driver) on a real socket, served by uvicorn in a thread; the
same clients against Ray Serve itself are in test_server.py.

What must hold: a request sent to the server gives the in-process run's edits (the shipped model,
greedy); what travels is the request the client would have run (each mode, its options whole:
read back by the server's own parser); a server that is down, refuses the token, or answers for
another text changes nothing and says so; a cancelled request closes its connection and leaves
the batch.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from samples import COUNTER_MODULE
from serve_support import TOKEN, free_port

from infill import cli
from infill.engine.pipeline import Hooks, run
from infill.errors import Cancelled, InputError, ModelError
from infill.models.served import TeamServer, check_url, request_body
from infill.modes import (
    AlternativesRequest,
    DocstringRequest,
    FillRequest,
    FixRequest,
    InlineRequest,
    ReviewRequest,
)
from infill.modes.reports import (
    candidates_report,
    docstring_report,
    fix_report,
    inline_report,
    json_report,
    result_of,
    review_report,
)
from infill.options import FixOptions, InfillOptions, SamplerConfig
from infill.text.docstring_sites import missing_docstrings
from infill.text.document import document_from_bytes
from infill.text.spans import line_span
from team_server.protocols import infill_request

DOCUMENT = document_from_bytes(COUNTER_MODULE.encode())
LINE_13 = line_span(DOCUMENT.text, 13, 13)  # return total / len(values)


@pytest.fixture(scope="module")
def served(url):
    return TeamServer.connect(url, TOKEN)


def requests() -> list:
    sites = missing_docstrings(DOCUMENT.text)
    options = InfillOptions(sampler=SamplerConfig(steps=8), retries=1, token_edits=2, pass_budget=None)
    return [
        FillRequest(DOCUMENT, [LINE_13], options),
        FixRequest(DOCUMENT, [LINE_13], FixOptions(threshold=0.2, retries=0)),
        DocstringRequest(DOCUMENT, sites, InfillOptions(sampler=SamplerConfig(steps=8))),
        AlternativesRequest(
            DOCUMENT, LINE_13, 3, InfillOptions(sampler=SamplerConfig(seed=3)), temperature=0.7
        ),
        ReviewRequest(DOCUMENT, [], FixOptions(), top=4),
        InlineRequest(DOCUMENT, DOCUMENT.text.index("total / len"), InfillOptions(recall=False), 2),
    ]


# ------------------------------------------------------------------ what travels, without a model


@pytest.mark.parametrize("request_", requests(), ids=lambda r: type(r).__name__)
def test_the_server_reads_back_the_request_the_client_would_have_run(request_):
    """request_body -> the server's own parser (team_server.protocols.infill_request) -> the same
    request: text, spans, every option."""
    asked = infill_request(json.loads(json.dumps(request_body(request_))))
    got = asked.request
    assert type(got) is type(request_) and got.document.text == request_.document.text
    if isinstance(request_, DocstringRequest):
        assert got.sites == request_.sites
    elif isinstance(request_, AlternativesRequest):
        assert (got.span.start, got.span.end, got.n) == (request_.span.start, request_.span.end, request_.n)
        assert got.options.sampler.temperature == request_.temperature
    elif isinstance(request_, InlineRequest):
        assert (got.offset, got.samples, got.options) == (request_.offset, request_.samples, request_.options)
    else:
        assert [(s.start, s.end) for s in got.spans] == [(s.start, s.end) for s in request_.spans]
        assert got.options == request_.options
    if isinstance(request_, ReviewRequest):
        assert got.top == request_.top


def test_a_file_read_from_disk_travels_with_its_path():
    """The path names the client's file to a server that keeps contexts (`--kept-contexts`);
    a text without a file travels without one."""
    from_disk = replace(DOCUMENT, path=Path("src/counter.py"))
    assert request_body(FillRequest(from_disk, [LINE_13]))["path"] == "src/counter.py"
    assert "path" not in request_body(FillRequest(DOCUMENT, [LINE_13]))


def test_the_language_servers_requests_name_their_document(url):
    """In the language server, a team server's requests name the editor's file (its kept context's
    key on a server that keeps contexts); the server answers them as any other."""
    from lsp_server.server import InfillLanguageServer

    server = TeamServer.connect(url, TOKEN)
    sent = []
    real_send = server.send

    def send(method, path, body, deadline, cancelled=None):  # what goes over the wire, then the wire
        sent.append(body)
        return real_send(method, path, body, deadline, cancelled)

    ls = InfillLanguageServer()
    for_file = ls.kept_context("file:///project/src/counter%201.py", server)
    for_file.send = send
    result = for_file.run_request(FillRequest(DOCUMENT, [LINE_13]))
    assert sent[0]["path"] == "/project/src/counter 1.py" and result.spans[0].new_text is not None


def test_the_authors_protocol_and_unknown_requests_stay_here():
    authors = FillRequest(DOCUMENT, [LINE_13], InfillOptions(protocol="authors"))
    with pytest.raises(InputError, match="in-process only"):
        request_body(authors)

    @dataclass
    class Elsewhere:  # a request of no mode the server runs
        document: object = DOCUMENT
        options: InfillOptions = field(default_factory=InfillOptions)

    with pytest.raises(InputError, match="does not run"):
        request_body(Elsewhere())


@pytest.mark.parametrize(
    "url", ["localhost:8000", "ftp://host", "http://", "http://h:99999", "http://h/?q=1"]
)
def test_a_bad_address_is_bad_input(url):
    with pytest.raises(InputError):
        check_url(url)


def test_reports_read_back_into_the_modes_results(denoiser):
    """report(result) read back (infill.modes.reports.result_of) gives the result's edits, spans,
    findings and texts; a report about another text is refused."""
    fill, fix, docs, alternatives, review, inline = requests()
    for request_, report in ((fill, json_report), (fix, fix_report)):
        result = run(denoiser, request_)
        back = result_of(request_, report(DOCUMENT, result))
        assert back.edits == result.edits and back.stats == result.stats
        assert [(s.span.start, s.span.end, s.new_text) for s in back.spans] == [
            (s.span.start, s.span.end, s.new_text) for s in result.spans
        ]
    result = run(denoiser, docs)
    back = result_of(docs, docstring_report(DOCUMENT, result))
    assert back.edits == result.edits and [f.docstring for f in back.fills] == [
        f.docstring for f in result.fills
    ]
    candidates = run(denoiser, alternatives)
    back = result_of(alternatives, candidates_report(DOCUMENT, candidates))
    assert [(c.new_text, c.edit, c.breaks_syntax) for c in back] == [
        (c.new_text, c.edit, c.breaks_syntax) for c in candidates
    ]
    result = run(denoiser, review)
    back = result_of(review, review_report(result))
    assert [(f.line, f.column, f.text, f.expected, f.start, f.end) for f in back.findings] == [
        (f.line, f.column, f.text, f.expected, f.start, f.end) for f in result.findings
    ]
    completions = run(denoiser, inline)
    assert result_of(inline, inline_report(completions)).texts == completions.texts

    other = document_from_bytes(COUNTER_MODULE.replace("total", "summed").encode())
    report = json_report(DOCUMENT, run(denoiser, fill))
    with pytest.raises(ValueError):
        result_of(replace(fill, document=other), report)


# ------------------------------------------------------------------ over a socket


@pytest.mark.parametrize("index", range(6), ids=lambda i: type(requests()[i]).__name__)
def test_each_mode_on_the_server_gives_the_in_process_result(served, denoiser, index):
    request_ = requests()[index]
    here, there = run(denoiser, request_), run(served, request_)
    if isinstance(request_, AlternativesRequest):
        assert [c.new_text for c in there] == [c.new_text for c in here]
    elif isinstance(request_, InlineRequest):
        assert there.texts == here.texts
    elif isinstance(request_, ReviewRequest):
        assert [(f.start, f.end, f.expected) for f in there.findings] == [
            (f.start, f.end, f.expected) for f in here.findings
        ]
        assert len(there.findings) == 4
    else:
        assert there.edits == here.edits


def test_the_cli_with_server_prints_and_writes_what_it_would_in_process(url, tmp_path, capsys, monkeypatch):
    path = tmp_path / "counter.py"
    path.write_bytes(COUNTER_MODULE.replace("\n", "\r\n").encode())  # CRLF: kept on both paths
    monkeypatch.setenv("INFILL_TOKEN", TOKEN)
    assert cli.main([str(path), "--lines", "13", "--json", "--threads", "1"]) == 0
    here = json.loads(capsys.readouterr().out)
    assert cli.main([str(path), "--lines", "13", "--json", "--server", url]) == 0
    there = json.loads(capsys.readouterr().out)
    assert there["edits"] == here["edits"] and there["spans"] == here["spans"]

    copy = tmp_path / "copy.py"
    copy.write_bytes(path.read_bytes())
    assert cli.main([str(path), "--lines", "9-13", "--write", "--threads", "1"]) == 0
    assert cli.main([str(copy), "--lines", "9-13", "--write", "--server", url]) == 0
    assert copy.read_bytes() == path.read_bytes()
    assert b"\r\n" in copy.read_bytes()

    capsys.readouterr()
    assert cli.main(["review", str(copy), "--top", "3", "--json", "--server", url]) == cli.EXIT_FINDINGS
    assert len(json.loads(capsys.readouterr().out)["findings"]) == 3


def test_a_server_that_is_down_or_refuses_changes_nothing_and_says_why(url, tmp_path, capsys, monkeypatch):
    path = tmp_path / "counter.py"
    path.write_text(COUNTER_MODULE)
    before = path.read_bytes()
    down = f"http://127.0.0.1:{free_port()}"
    monkeypatch.delenv("INFILL_TOKEN", raising=False)
    assert cli.main([str(path), "--lines", "13", "--write", "--server", down]) == cli.EXIT_MODEL
    assert "cannot reach the team server" in capsys.readouterr().err
    assert cli.main([str(path), "--lines", "13", "--write", "--server", url]) == cli.EXIT_MODEL
    assert "refused the token" in capsys.readouterr().err
    wrong = tmp_path / "token"
    wrong.write_text("carol-not-this-one\n")
    assert cli.main([str(path), "--lines", "13", "--write", "--server", url, "--token-file", str(wrong)]) == 3
    assert "refused the token" in capsys.readouterr().err
    monkeypatch.setenv("INFILL_TOKEN", TOKEN)
    assert cli.main([str(path), "--lines", "13", "--server", url, "--model", "x"]) == cli.EXIT_INPUT
    assert "--model belong to a model run here" in capsys.readouterr().err
    assert cli.main([str(path), "--lines", "13", "--server", url, "--steps", "0"]) == cli.EXIT_INPUT
    assert path.read_bytes() == before


def test_an_answer_about_another_text_is_refused(served, monkeypatch):
    """The edits that come back must fit the text sent (old_text), or nothing is changed."""
    import infill.models.served as module

    real = module.request_body

    def other_text(request_):
        body = real(request_)
        body["text"] = body["text"].replace("total", "summed")
        return body

    monkeypatch.setattr(module, "request_body", other_text)
    with pytest.raises(ModelError, match="answered what was not asked"):
        run(served, FillRequest(DOCUMENT, [line_span(DOCUMENT.text, 9, 13)], InfillOptions()))


def test_a_cancelled_request_hangs_up_and_leaves_the_batch(served, url):
    """Cancelled mid-fill: the call raises at once and the server's driver has nothing live."""
    import httpx

    long = InfillOptions(sampler=SamplerConfig(steps=2000, commit_threshold=1.0), pass_budget=None)
    request_ = FillRequest(DOCUMENT, [line_span(DOCUMENT.text, 5, 22)], replace(long, budget=400))
    started = time.monotonic()
    with pytest.raises(Cancelled):
        run(served, request_, Hooks(cancelled=lambda: time.monotonic() - started > 0.5))
    assert time.monotonic() - started < 2
    headers = {"Authorization": f"Bearer {TOKEN}"}
    deadline = time.monotonic() + 5  # the fill alone would take about 20 s more
    while True:
        metrics = httpx.get(url + "/metrics", headers=headers).text
        live = [line for line in metrics.splitlines() if line.startswith("infill_live_requests ")]
        if live and float(live[0].split()[1]) == 0:
            break
        assert time.monotonic() < deadline, live
        time.sleep(0.2)


# ------------------------------------------------------------------ the language server as a client

URI = "file:///project/counter.py"


def lsp_answers(options: dict) -> tuple[list, list, list]:
    """A real language server (another process) with `options`: the inline completion in the
    middle of line 13, and the edits of "fill selection" and of "fix selection" on that line, as
    the client gets them. Each asks of a document of its own (the same text under three names):
    in-process, a document's later passes that start a fill run on the context its first one
    kept (infill.engine.kept_context), which a server does not keep. So each request is one fill:
    its first pass computes the context exactly, as a server does (idleRefresh 0: no context is
    prepared ahead; no syntax retries, token edits or fresh fills, whose fills would start on
    the kept context)."""
    from lsp_raw import RawServer

    one_fill = {"retries": 0, "tokenEdits": 0, "freshFills": 0}
    with RawServer() as server:
        server.initialize({**options, **one_fill, "idleRefresh": 0})
        uris = [f"file:///project/counter_{n}.py" for n in range(3)]
        for uri in uris:
            server.open(uri, COUNTER_MODULE)
        cursor = {"line": 12, "character": 17}
        inline = server.request("textDocument/inlineCompletion", {"textDocument": {"uri": uris[0]},
                                "position": cursor, "context": {"triggerKind": 1}}, timeout=120)  # fmt: skip
        assert "result" in inline, (inline, server.tail())
        items = inline["result"]["items"] if isinstance(inline["result"], dict) else inline["result"]
        line = {"start": {"line": 12, "character": 4}, "end": {"line": 12, "character": 30}}
        edits = []
        for uri, title in zip(uris[1:], ("Infill: fill selection", "Infill: fix selection")):
            listed = server.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": line,
                                    "context": {"diagnostics": []}}, timeout=60)["result"]  # fmt: skip
            action = next(a for a in listed if a["title"] == title)
            answer = server.request("codeAction/resolve", action, timeout=120)
            assert "result" in answer, (answer, server.tail())
            edit = answer["result"].get("edit") or {}
            edits.append([e for change in edit.get("documentChanges", []) for e in change["edits"]]
                         + edit.get("changes", {}).get(uri, []))  # fmt: skip
        return [item["insertText"] for item in items], edits[0], edits[1]


def test_the_language_server_with_an_endpoint_gives_the_in_process_edits(url):
    here = lsp_answers({"threads": 1})
    there = lsp_answers({"endpoint": url, "token": TOKEN})
    assert there == here
    assert here[0] and here[1]  # something to compare: the model wrote something


def test_the_language_server_says_when_its_endpoint_is_down_and_asks_again(url):
    from lsp_raw import RawServer

    down = f"http://127.0.0.1:{free_port()}"
    with RawServer() as server:
        server.initialize({"endpoint": down})
        server.open(URI, COUNTER_MODULE)
        cursor = {"line": 12, "character": 17}
        params = {"textDocument": {"uri": URI}, "position": cursor, "context": {"triggerKind": 1}}
        answer = server.request("textDocument/inlineCompletion", params, timeout=60)
        assert "cannot reach the team server" in json.dumps(answer), answer
        shown = [n for n in server.notifications if n["method"] == "window/showMessage"]
        assert len(shown) == 1 and down in shown[0]["params"]["message"]
        server.notify("workspace/didChangeConfiguration", {"settings": {"infill": {"endpoint": url,
                      "token": TOKEN}}})  # fmt: skip
        answer = server.request("textDocument/inlineCompletion", params, timeout=60)
        assert "result" in answer, answer
