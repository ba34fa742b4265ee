"""How fast and how big infill-lsp is, measured from outside as an editor sees it.

Starts ``infill-lsp`` (``python -m lsp_server.server``) as a subprocess over stdio with a model
path (default: the model shipped with infill), opens a 200-line Python file and measures:

- the time from starting the process to the ``initialize`` answer;
- the time to list code actions (median of several requests; no model run);
- the first fill, which loads the model (and imports torch);
- a one-line fill in the 200-line file (median of ``--runs``, after the first);
- the same one-line fill in files of other lengths (``--file-lines``, default 2,000 and 20,000
  lines: the same code repeated, the same line in the middle of each), and each one's ratio to
  the 200-line file's: a request costs what the model's window costs, not the file;
- an inline completion at the end of a line (median of ``--runs``);
- the server's resident memory (``VmRSS`` from ``/proc/<pid>/status``) after the fills.

Usage::

    python -m lsp_server.measure --model DIR [--runs 5] [--steps N] [--threads N] [--quantize int8]
                                 [--file-lines 2000,20000] [--json]

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
from functools import partial
from typing import Any

from lsprotocol import types

from infill.options import QUANTIZE_MODES  # torch-free
from lsp_server.settings import DTYPES  # torch-free

URI = "file:///infill-measure/example.py"
FILL_LINE = 100  # 0-based line of the one-line fill
LIST_REPEATS = 20
BASE_LINES = 200
OTHER_LINES = (2_000, 20_000)
"""The files the one-line fill is timed in besides the 200-line one (``--file-lines``)."""


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


def middle_line(lines: int) -> int:
    """The line of a ``lines``-line :func:`sample_file` that the fill regenerates: the line in the
    middle that is like line :data:`FILL_LINE` of the 200-line file (a ``def`` line)."""
    return FILL_LINE + 5 * ((lines // 2 - FILL_LINE) // 5)


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
    file_lines: tuple[int, ...] = OTHER_LINES,
    quantize: str | None = None,
    dtype: str | None = None,
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
    if quantize is not None:
        options["quantize"] = quantize  # the server setting (infill.models.quantize)
    if dtype is not None:
        options["dtype"] = dtype  # the server setting (infill.models.pick_native_dtype for "auto")

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
    results: dict[str, Any] = {
        "model": model or "(shipped)",
        "runs": runs,
        "quantize": quantize or "auto",
        "dtype": dtype or "auto",
        "pid": server.pid,
    }
    try:
        await client.initialize_async(
            types.InitializeParams(capabilities=types.ClientCapabilities(), initialization_options=options)
        )
        results["initialize_s"] = time.perf_counter() - started
        client.initialized(types.InitializedParams())

        text = sample_file(BASE_LINES)
        lines = text.split("\n")
        open_file(client, URI, text)
        results["file_lines"] = len(lines) - 1

        line = lines[FILL_LINE]
        params = fill_params(URI, FILL_LINE, len(line))
        list_times = []
        for _ in range(LIST_REPEATS):
            seconds, listed = await _timed(lambda: client.text_document_code_action_async(params))
            list_times.append(seconds)
        results["list_actions_s"] = statistics.median(list_times)

        try:
            results["first_fill_s"] = await time_fill(client, listed)
        except Exception as error:
            raise RuntimeError(f"the first fill failed: {error}; {' '.join(errors)}") from error
        results["fill_s"] = statistics.median([await time_fill(client, listed) for _ in range(runs)])

        # The same fill in longer files: what it costs beyond the 200-line file's.
        results["fill_by_lines"] = {str(BASE_LINES): results["fill_s"]}
        results["list_by_lines"] = {str(BASE_LINES): results["list_actions_s"]}
        for count in file_lines:
            uri = URI.replace(".py", f"_{count}.py")
            longer, where = sample_file(count), middle_line(count)
            open_file(client, uri, longer)
            there = fill_params(uri, where, len(longer.split("\n")[where]))
            list_times = []
            for _ in range(runs):
                seconds, listed_there = await _timed(partial(client.text_document_code_action_async, there))
                list_times.append(seconds)
            results["list_by_lines"][str(count)] = statistics.median(list_times)
            await time_fill(client, listed_there)  # once first, as in the 200-line file
            times = [await time_fill(client, listed_there) for _ in range(runs)]
            results["fill_by_lines"][str(count)] = statistics.median(times)
            client.text_document_did_close(
                types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )

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


def open_file(client: Any, uri: str, text: str) -> None:
    item = types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))


def fill_params(uri: str, line: int, length: int) -> types.CodeActionParams:
    """Code actions for the selection of ``line`` (its first ``length`` characters)."""
    selection = types.Range(
        start=types.Position(line=line, character=0), end=types.Position(line=line, character=length)
    )
    return types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=selection,
        context=types.CodeActionContext(diagnostics=[]),
    )


async def time_fill(client: Any, listed: list[types.CodeAction]) -> float:
    """Seconds to resolve the listed "fill" action."""
    [fill] = [action for action in listed if (action.data or {}).get("mode") == "fill"]
    seconds, _ = await _timed(lambda: client.code_action_resolve_async(fill))
    return seconds


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
    base = str(results["file_lines"])
    longer = [lines for lines in results["fill_by_lines"] if lines != base]  # --file-lines
    for lines in longer:
        fill, listing = results["fill_by_lines"][lines], results["list_by_lines"][lines]
        rows += [
            (f"one-line fill, {lines}-line file (median of {runs})", f"{fill * 1000:.0f} ms"),
            (f"  ratio, {lines} to {base} lines", f"{fill / results['fill_s']:.2f}x"),
            (f"list code actions, {lines}-line file (median of {runs})", f"{listing * 1000:.1f} ms"),
        ]
    width = max(len(name) for name, _ in rows)
    weights = f"quantize: {results.get('quantize', 'auto')}, dtype: {results.get('dtype', 'auto')}"
    header = f"infill-lsp, model: {results['model']}, {weights}"
    return "\n".join([header, *(f"  {name:<{width}}  {value:>9}" for name, value in rows)])


def line_counts(value: str) -> tuple[int, ...]:
    """``--file-lines``: comma-separated line counts of at least 20 lines ('' for none)."""
    try:
        counts = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of line counts: {value!r}") from None
    if any(count < 20 for count in counts):
        raise argparse.ArgumentTypeError(f"a file needs at least 20 lines: {value!r}")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsp_server.measure",
        description="Time and memory of infill-lsp, as an editor sees it.",
    )
    parser.add_argument("--model", help="model directory (default: the model shipped with infill)")
    parser.add_argument("--runs", type=int, default=5, help="fills to take the median of (default 5)")
    parser.add_argument("--steps", type=int, help="step cap per fill (default: the sampler's)")
    parser.add_argument("--threads", type=int, help="torch threads in the server (default: torch's choice)")
    parser.add_argument("--quantize", choices=QUANTIZE_MODES,
                        help="the server's quantize setting (default: the server's own)")  # fmt: skip
    parser.add_argument("--dtype", choices=DTYPES,
                        help="the server's dtype setting (default: the server's own)")  # fmt: skip
    parser.add_argument("--file-lines", type=line_counts, default=OTHER_LINES, metavar="N,N",
                        help="other file lengths to time the one-line fill in (default 2000,20000; "
                        "'' for none)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        results = measure(
            model=args.model,
            runs=args.runs,
            steps=args.steps,
            threads=args.threads,
            quantize=args.quantize,
            dtype=args.dtype,
            file_lines=args.file_lines,
        )
    except RuntimeError as error:
        print(f"measure: {error}", file=sys.stderr)
        return 1
    print(json.dumps(results, indent=2) if args.json else format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
