"""How fast and how big infill-lsp is, measured from outside as an editor sees it.

Starts ``infill-lsp`` (``python -m lsp_server.server``) as a subprocess over stdio with a model
path (default: the model shipped with infill), opens a 200-line Python file and measures:

- the time from starting the process to the ``initialize`` answer;
- the time to list code actions (median of several requests; no model run);
- the first fill, which loads the model (and imports torch);
- a one-line fill in the 200-line file (median of ``--runs``, after the first);
- an inline completion at the end of a line (median of ``--runs``);
- the server's resident memory (``VmRSS`` from ``/proc/<pid>/status``) after the fills.

Usage::

    python -m lsp_server.measure --model DIR [--runs 5] [--steps N] [--threads N] [--json]

Prints a small table, or the numbers as JSON with ``--json``. ``infill-bench lsp`` runs the same
measurements (:func:`measure`, :func:`format_table`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lsprotocol import types

URI = "file:///infill-measure/example.py"
FILL_LINE = 100  # 0-based line of the one-line fill
LIST_REPEATS = 20


def sample_file(lines: int = 200) -> str:
    """Deterministic Python source of exactly ``lines`` lines (small functions, one after another)."""
    out: list[str] = ['"""A module to measure fills in."""', "", "import math", ""]
    index = 0
    while len(out) < lines:
        out += [
            "",
            f"def step_{index}(value, scale={index % 7 + 1}):",
            f'    """Scale ``value`` and add {index}."""',
            f"    total = value * scale + {index}",
            "    return math.floor(total) if total > 0 else -total",
        ]
        index += 1
    return "\n".join(out[:lines]) + "\n"


def rss_mib(pid: int) -> float | None:
    """Resident memory of process ``pid`` in MiB (Linux ``/proc``), None where unavailable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        return None
    return None


async def _timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call()
    return time.perf_counter() - started, result


async def measure_async(
    model: str | None = None,
    runs: int = 5,
    steps: int | None = None,
    threads: int | None = None,
    server_command: list[str] | None = None,
) -> dict[str, Any]:
    """Run the measurements; the result's times are in seconds, memory in MiB."""
    from pygls.lsp.client import LanguageClient

    command = server_command or [sys.executable, "-m", "lsp_server.server"]
    options: dict[str, Any] = {}
    if model is not None:
        options["modelPath"] = model
    if steps is not None:
        options["steps"] = steps
    if threads is not None:
        options["threads"] = threads

    client = LanguageClient("infill-measure", "1")
    errors: list[str] = []
    stderr_tail: list[bytes] = []

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def _show(params: types.ShowMessageParams) -> None:
        if params.type == types.MessageType.Error:
            errors.append(params.message)

    for method in (types.WINDOW_LOG_MESSAGE, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS):
        client.feature(method)(lambda params: None)

    started = time.perf_counter()
    await client.start_io(*command)
    server = client._server  # the subprocess (pygls keeps it here)
    assert server is not None and server.stderr is not None

    async def drain_stderr() -> None:  # a full pipe would block the server
        while line := await server.stderr.readline():
            stderr_tail[:] = [*stderr_tail[-20:], line]

    draining = asyncio.create_task(drain_stderr())
    results: dict[str, Any] = {"model": model or "(shipped)", "runs": runs, "pid": server.pid}
    try:
        await client.initialize_async(
            types.InitializeParams(capabilities=types.ClientCapabilities(), initialization_options=options)
        )
        results["initialize_s"] = time.perf_counter() - started
        client.initialized(types.InitializedParams())

        text = sample_file()
        lines = text.split("\n")
        item = types.TextDocumentItem(uri=URI, language_id="python", version=1, text=text)
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
        results["file_lines"] = len(lines) - 1

        line = lines[FILL_LINE]
        selection = types.Range(
            start=types.Position(line=FILL_LINE, character=0),
            end=types.Position(line=FILL_LINE, character=len(line)),
        )
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            range=selection,
            context=types.CodeActionContext(diagnostics=[]),
        )
        list_times = []
        for _ in range(LIST_REPEATS):
            seconds, listed = await _timed(lambda: client.text_document_code_action_async(params))
            list_times.append(seconds)
        results["list_actions_s"] = statistics.median(list_times)
        [fill] = [action for action in listed if (action.data or {}).get("mode") == "fill"]

        async def resolve() -> Any:
            return await client.code_action_resolve_async(fill)

        try:
            results["first_fill_s"], _ = await _timed(resolve)
        except Exception as error:
            raise RuntimeError(f"the first fill failed: {error}; {' '.join(errors)}") from error
        fill_times = [(await _timed(resolve))[0] for _ in range(runs)]
        results["fill_s"] = statistics.median(fill_times)

        end_of_line = types.Position(line=FILL_LINE, character=len(line))
        inline_params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=URI),
            position=end_of_line,
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        )
        inline_times = []
        for _ in range(runs):
            seconds, _ = await _timed(lambda: client.text_document_inline_completion_async(inline_params))
            inline_times.append(seconds)
        results["inline_s"] = statistics.median(inline_times)
        results["rss_mib"] = rss_mib(server.pid)

        await client.shutdown_async(None)
        client.exit(None)
        await asyncio.wait_for(server.wait(), 10)
    except Exception as error:
        tail = b"".join(stderr_tail).decode("utf-8", "replace")
        raise RuntimeError(f"{error}\nserver stderr:\n{tail}") from error
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
        draining.cancel()
        await client.stop()
    return results


def measure(**kwargs: Any) -> dict[str, Any]:
    """:func:`measure_async` for callers without an event loop (e.g. infill-bench)."""
    return asyncio.run(measure_async(**kwargs))


def format_table(results: dict[str, Any]) -> str:
    runs = results["runs"]
    rss = results.get("rss_mib")
    rows = [
        ("server start to initialize answer", f"{results['initialize_s']:.2f} s"),
        (f"list code actions (median of {LIST_REPEATS})", f"{results['list_actions_s'] * 1000:.1f} ms"),
        ("first fill (loads the model)", f"{results['first_fill_s']:.2f} s"),
        (
            f"one-line fill, {results['file_lines']}-line file (median of {runs})",
            f"{results['fill_s'] * 1000:.0f} ms",
        ),
        (f"inline completion (median of {runs})", f"{results['inline_s'] * 1000:.0f} ms"),
        ("server memory after the fills (VmRSS)", "n/a" if rss is None else f"{rss:.0f} MiB"),
    ]
    width = max(len(name) for name, _ in rows)
    header = f"infill-lsp, model: {results['model']}"
    return "\n".join([header, *(f"  {name:<{width}}  {value:>9}" for name, value in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsp_server.measure",
        description="Time and memory of infill-lsp, as an editor sees it.",
    )
    parser.add_argument("--model", help="model directory (default: the model shipped with infill)")
    parser.add_argument("--runs", type=int, default=5, help="fills to take the median of (default 5)")
    parser.add_argument("--steps", type=int, help="step cap per fill (default: the sampler's)")
    parser.add_argument("--threads", type=int, help="torch threads in the server (default: torch's choice)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        results = measure(model=args.model, runs=args.runs, steps=args.steps, threads=args.threads)
    except RuntimeError as error:
        print(f"measure: {error}", file=sys.stderr)
        return 1
    print(json.dumps(results, indent=2) if args.json else format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
