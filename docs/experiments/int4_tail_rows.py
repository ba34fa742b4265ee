"""infill's 4-bit kernel on the 7B MLP's layers at the row counts a shifted family's passes have
(a block of 4 computes 5 positions; a block and what the last pass changed, 9 to 21): ms a layer,
the median of 15 rounds over four copies so that the weights come from memory, 2 threads
(docs/models.md: "Fewer operations a layer", the kernel's tails; "Asking for the weights ahead").
It times whichever `infill` Python imports, so two versions of the code compare on one machine:

    python docs/experiments/int4_tail_rows.py [--rows 1,4,5,8,16,32] [--down]
    cd OTHER_CHECKOUT && PYTHONPATH=. python ~/infill/docs/experiments/int4_tail_rows.py

--down times the MLP's down layer (3,584 x 18,944) too, after the up/gate layer (18,944 x 3,584).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import infill.models.int4_native as int4_native

ROWS = "4,5,8,9,16,17,21,33"


def layer_ms(layers: list, rows: int) -> float:
    x = torch.randn(rows, layers[0].in_features)
    for layer in layers:  # warm
        layer(x)
    rounds = []
    for _ in range(15):
        started = time.perf_counter()
        for layer in layers:
            layer(x)
        rounds.append((time.perf_counter() - started) / len(layers))
    return 1000 * statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=ROWS, help="rows of activations, comma-separated")
    parser.add_argument("--down", action="store_true", help="also the MLP's down layer")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    shapes = {"up/gate": (18944, 3584), **({"down": (3584, 18944)} if args.down else {})}
    for name, shape in shapes.items():
        layers = [int4_native.NativeInt4Linear(torch.randn(*shape) * 0.02, None) for _ in range(4)]
        timings = [f"{rows} rows {layer_ms(layers, rows):.2f} ms" for rows in map(int, args.rows.split(","))]
        print(f"{name}: " + ", ".join(timings))
        del layers


if __name__ == "__main__":
    main()
