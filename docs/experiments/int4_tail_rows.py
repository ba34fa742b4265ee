"""infill's 4-bit kernel on the 7B MLP up/gate layer (18,944 x 3,584) at the row counts a
shifted family's passes have (a block of 4 computes 5 positions; a block and what the last pass
changed, 9 to 21): ms a layer, the median of 15 rounds over four copies so that the weights come
from memory, 2 threads (docs/models.md, "Fewer operations a layer", the kernel's tails). It times
whichever `infill` Python imports, so two versions of the code compare on one machine:

    python docs/experiments/int4_tail_rows.py
    cd OTHER_CHECKOUT && PYTHONPATH=. python ~/infill/docs/experiments/int4_tail_rows.py
"""

from __future__ import annotations

import statistics
import time

import torch

import infill.models.int4_native as int4_native

ROWS = (4, 5, 8, 9, 16, 17, 21, 33)


def main() -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    layers = [int4_native.NativeInt4Linear(torch.randn(18944, 3584) * 0.02, None) for _ in range(4)]
    timings = []
    for rows in ROWS:
        x = torch.randn(rows, 3584)
        for layer in layers:  # warm
            layer(x)
        rounds = []
        for _ in range(15):
            started = time.perf_counter()
            for layer in layers:
                layer(x)
            rounds.append((time.perf_counter() - started) / len(layers))
        timings.append(f"{rows} rows {1000 * statistics.median(rounds):.2f} ms")
    print(", ".join(timings))


if __name__ == "__main__":
    main()
