"""Time one pass of the shipped model: span-only (on a cached context) and full, per dtype,
optionally through torch.compile, with a profile of the span-only pass.

    python docs/experiments/pass_time.py --threads 2 --dtypes float32,bfloat16,float16
    python docs/experiments/pass_time.py --dtypes bfloat16 --compile     # eager and compiled
    python docs/experiments/pass_time.py --dtypes float32 --profile      # where a pass's time goes
    python docs/experiments/pass_time.py --canvases 128,256,512          # the window's cost

The canvas is 512 random ids (the model's window; `--canvases` for others) and the span 11
positions, as in the server's one-line fill; random ids cost what real ones do.
docs/measurements.md, "A pass of the shipped model", holds what this printed.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from infill.models.native import load_backend

SPAN = 11


def milliseconds(run, repeats: int) -> float:
    for _ in range(10):  # warm-up
        run()
    started = time.perf_counter()
    for _ in range(repeats):
        run()
    return (time.perf_counter() - started) / repeats * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--canvases", default="512", help="canvas lengths in tokens (default 512)")
    parser.add_argument("--repeats", type=int, default=200, help="span-only passes timed (full: a tenth)")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile(dynamic=True)")
    parser.add_argument("--profile", action="store_true", help="print torch.profiler's table of 50 passes")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.dtypes.split(","):
        backend = load_backend(dtype=getattr(torch, name))
        model, cache = backend.model, backend.new_cache()
        for canvas in map(int, args.canvases.split(",")):
            ids = torch.randint(10, 8000, (1, canvas), generator=torch.Generator().manual_seed(0))
            positions = torch.arange(canvas // 2 - SPAN // 2, canvas // 2 - SPAN // 2 + SPAN)
            with torch.no_grad():
                model.cached_logits(ids, positions, cache, True)
                span = milliseconds(partial(model.cached_logits, ids, positions, cache, False), args.repeats)
                full_pass = partial(model.cached_logits, ids, positions, cache, True)
                full = milliseconds(full_pass, args.repeats // 10)
            print(f"{name:9} canvas {canvas:4d}: span-only pass {span:6.2f} ms   full pass {full:6.1f} ms")
        with torch.no_grad():
            if args.compile:
                compiled = torch.compile(model.cached_logits, dynamic=True)
                started = time.perf_counter()
                compiled(ids, positions, cache, False)
                took = time.perf_counter() - started
                span = milliseconds(partial(compiled, ids, positions, cache, False), args.repeats)
                print(f"{name:9} compiled: span-only pass {span:6.2f} ms after {took:.1f} s of compiling")
            if args.profile:
                with torch.profiler.profile() as profile:
                    for _ in range(50):
                        model.cached_logits(ids, positions, cache, False)
                print(profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


if __name__ == "__main__":
    main()
