"""A running team server under load: N completions at once, against the same N one at a time.

    infill serve --threads 1 &                       # or any server; then:
    python docs/experiments/serve_load.py [--url http://127.0.0.1:8000] [--token T] [--requests 16]
                                          [--repeat 3]

Sends the same N OpenAI completions (each an insertion point at the end of a different line of a
frozen copy of one of this project's files, tests/data/tokenizer_texts/document.py.txt, greedy,
max_tokens 16) once one after the other and once all at once (N threads), alternating the two
`--repeat` times; prints the median wall time of each, the latencies (median, 95th percentile) of
the concurrent round, whether both rounds wrote the same texts, and what the server's /metrics
says the concurrent rounds' forward passes carried (rows and requests per pass).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import time
from pathlib import Path

import httpx

TEXT = (Path(__file__).parents[2] / "tests" / "data" / "tokenizer_texts" / "document.py.txt").read_text()


def prompts(count: int) -> list[tuple[str, str]]:
    """(prefix, suffix) at the end of `count` code lines spread over the file."""
    lines = TEXT.split("\n")
    code = [i for i, line in enumerate(lines) if line.strip() and not line.strip().startswith("#")]
    picks = [code[k * len(code) // count] for k in range(count)]
    out = []
    for i in picks:
        head = "\n".join(lines[:i]) + "\n" + lines[i][: max(1, len(lines[i]) // 2)]
        out.append((head, TEXT[len(head) :]))
    return out


def metrics(client: httpx.Client) -> dict[str, float]:
    values = {}
    for line in client.get("/metrics").text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", default=None)
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    client = httpx.Client(base_url=args.url, headers=headers, timeout=300)
    asked = prompts(args.requests)

    def one(pair: tuple[str, str]) -> tuple[str, float]:
        started = time.perf_counter()
        reply = client.post("/v1/completions", json={"prompt": pair[0], "suffix": pair[1], "max_tokens": 16,
                                                     "temperature": 0})  # fmt: skip
        reply.raise_for_status()
        return reply.json()["choices"][0]["text"], time.perf_counter() - started

    one(asked[0])  # warm up
    alone, together, latencies, same = [], [], [], True
    passes = rows = shared = 0.0
    most = 0.0
    for _ in range(args.repeat):
        started = time.perf_counter()
        texts_alone = [one(pair)[0] for pair in asked]
        alone.append(time.perf_counter() - started)
        before = metrics(client)
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.requests) as pool:
            answers = list(pool.map(one, asked))
        together.append(time.perf_counter() - started)
        after = metrics(client)
        latencies += [seconds for _, seconds in answers]
        same &= [text for text, _ in answers] == texts_alone
        passes += after["infill_forward_passes_total"] - before["infill_forward_passes_total"]
        rows += after["infill_forward_rows_total"] - before["infill_forward_rows_total"]
        shared += after["infill_forward_shared_passes_total"] - before["infill_forward_shared_passes_total"]
        most = max(most, after["infill_forward_most_requests"])
    latencies.sort()
    print(f"{args.requests} completions, {args.repeat} rounds (medians): one at a time "
          f"{statistics.median(alone):.2f} s, all at once {statistics.median(together):.2f} s")
    print(f"latency at once: median {statistics.median(latencies) * 1000:.0f} ms, "
          f"95th percentile {latencies[int(0.95 * (len(latencies) - 1))] * 1000:.0f} ms")
    print(f"concurrent rounds: {rows / passes:.2f} rows a forward pass, {shared / passes:.0%} of passes "
          f"shared, at most {most:.0f} requests in one; same texts as one at a time: {same}")


if __name__ == "__main__":
    main()
