"""When a 4-bit layer should unpack its weights (infill.models.int4.UNPACK_ROWS): the kernel's
product against unpacking the weights into bfloat16 and using the bfloat16 matrix product, for the
7B shape's and the 0.5B shape's layers at 64-512 rows of activations.

Each layer is made several times over (about 200M weights in all), so that its packed weights come
from memory, not the cache, as in a pass; the process maps big blocks apart as the engine's does
(`return_big_blocks`). Milliseconds per layer, the best of 3:

    python docs/experiments/int4_unpacking.py --threads 2 --out docs/results/int4_unpacking.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from infill.models.int4 import Int4Linear, kernel, packed_block_width
from infill.models.memory import return_big_blocks

LAYERS = {  # (outputs, inputs)
    "7B MLP up/gate": (18944, 3584),
    "7B MLP down": (3584, 18944),
    "7B attention q/o": (3584, 3584),
    "7B attention k/v": (512, 3584),
    "0.5B MLP up/gate": (4864, 896),
    "0.5B MLP down": (896, 4864),
    "0.5B attention q/o": (896, 896),
}
ROWS = (64, 96, 128, 192, 256, 512)


def kernel_product(x: torch.Tensor, layer: Int4Linear) -> torch.Tensor:
    return kernel(layer.packed)(x, layer.packed, layer.group_size, layer.scales_and_zeros)


def best_ms(product, x: torch.Tensor, layers: list[Int4Linear], repeat: int = 3) -> float:
    product(x, layers[0])
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for layer in layers:
            product(x, layer)
        best = min(best, time.perf_counter() - started)
    return 1000 * best / len(layers)


def measure(name: str, outputs: int, inputs: int) -> dict:
    copies = max(1, int(2e8 // (outputs * inputs)))
    weights = (torch.randn(outputs, inputs, dtype=torch.bfloat16) * 0.02 for _ in range(copies))
    layers = [Int4Linear(weight, None) for weight in weights]
    row = {"layer": name, "outputs": outputs, "inputs": inputs, "kernel_ms": {}, "unpacked_ms": {}}
    for rows in ROWS:
        x = torch.randn(rows, inputs).bfloat16()
        row["kernel_ms"][rows] = round(best_ms(kernel_product, x, layers), 2)
        unpacked = best_ms(lambda x, layer: layer.unpacked_product(x), x, layers)
        row["unpacked_ms"][rows] = round(unpacked, 2)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="write the table as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if packed_block_width() is None:
        raise SystemExit("this CPU's packed layout is not one Int4Linear.unpacked reads")
    return_big_blocks()
    print(f"{args.threads} threads; ms per layer, kernel / unpacked, at each count of rows")
    print(f"{'layer':<20}" + "".join(f"{rows:>14}" for rows in ROWS))
    table = []
    for name, (outputs, inputs) in LAYERS.items():
        row = measure(name, outputs, inputs)
        table.append(row)
        cells = (f"{row['kernel_ms'][r]:6.1f}/{row['unpacked_ms'][r]:<6.1f}" for r in ROWS)
        print(f"{name:<20}" + "".join(f"{cell:>14}" for cell in cells), flush=True)
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"threads": args.threads, "rows": list(ROWS), "layers": table}, out, indent=1)


if __name__ == "__main__":
    main()
