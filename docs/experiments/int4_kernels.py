"""PyTorch's 4-bit product against infill's own (infill.models.int4_native): milliseconds per layer
of the 7B and 0.5B shapes at 1-256 rows of activations, beside the layer's reading floor (its
packed bytes over the memory bandwidth measured in the same run).

Each layer is made several times over (about 200M weights in all), so that its packed weights come
from memory, not the cache, as in a pass. Milliseconds per layer, the best of 3:

    python docs/experiments/int4_kernels.py --threads 2 --out docs/results/int4_kernels.json \
        --plot docs/results/int4_kernels.png
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from int4_unpacking import LAYERS  # the same layers (docs/experiments is this script's folder)

from infill.bench.shapes import memory_bandwidth
from infill.models import int4_native
from infill.models.int4 import Int4Linear
from infill.models.int4_native import NativeInt4Linear
from infill.models.memory import return_big_blocks

ROWS = (1, 4, 8, 16, 32, 64, 256)
KERNELS = {"pytorch": Int4Linear, "infill": NativeInt4Linear}
LABELS = {"pytorch": "PyTorch's kernel", "infill": "infill's kernel"}


def best_ms(x: torch.Tensor, layers: list, repeat: int = 3) -> float:
    layers[0](x)
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for layer in layers:
            layer(x)
        best = min(best, time.perf_counter() - started)
    return 1000 * best / len(layers)


def measure(name: str, outputs: int, inputs: int, bandwidth: float) -> dict:
    copies = max(1, int(2e8 // (outputs * inputs)))
    weights = [torch.randn(outputs, inputs, dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
    row = {"layer": name, "outputs": outputs, "inputs": inputs}
    for kernel, layer_class in KERNELS.items():
        layers = [layer_class(weight, None) for weight in weights]
        row["floor_ms"] = round(1000 * layers[0].nbytes() / (bandwidth * 1e9), 3)
        row[f"{kernel}_ms"] = {rows: round(best_ms(torch.randn(rows, inputs), layers), 3) for rows in ROWS}
        del layers
    return row


def plot(table: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [row for row in table if row["layer"] in ("7B MLP up/gate", "0.5B MLP up/gate")]
    figure, axes = plt.subplots(1, len(shown), figsize=(5.5 * len(shown), 4))
    for axis, row in zip(axes, shown):
        for kernel, style in (("pytorch", "o-"), ("infill", "s-")):
            times = {int(rows): ms for rows, ms in row[f"{kernel}_ms"].items()}  # JSON's keys are text
            over_floor = [times[r] / row["floor_ms"] for r in ROWS]
            axis.plot(ROWS, over_floor, style, label=LABELS[kernel])
        axis.axhline(1, color="grey", linestyle=":", label="reading floor")
        title = f"{row['layer']} ({row['outputs']} x {row['inputs']})"
        axis.set(xscale="log", yscale="log", xlabel="rows of activations (positions a pass computes)",
                 ylabel="time / reading floor", title=title)  # fmt: skip
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="write the table as JSON here")
    parser.add_argument("--plot", help="write a PNG of the MLP layers' times over their floors here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not int4_native.available():
        raise SystemExit(f"infill's kernel is not built here: {int4_native.build().reason}")
    return_big_blocks()
    bandwidth = memory_bandwidth(torch.device("cpu"))
    print(f"{args.threads} threads, {int4_native.description()}, memory bandwidth {bandwidth:.1f} GB/s")
    print("ms per layer, PyTorch's / infill's kernel, at each count of rows; floor: packed bytes / bandwidth")
    print(f"{'layer':<20}{'floor':>7}" + "".join(f"{rows:>14}" for rows in ROWS))
    table = []
    for name, (outputs, inputs) in LAYERS.items():
        row = measure(name, outputs, inputs, bandwidth)
        table.append(row)
        cells = (f"{row['pytorch_ms'][r]:6.2f}/{row['infill_ms'][r]:<6.2f}" for r in ROWS)
        print(f"{name:<20}{row['floor_ms']:7.2f}" + "".join(f"{cell:>14}" for cell in cells), flush=True)
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"threads": args.threads, "bandwidth_gb_s": round(bandwidth, 1),
                       "kernel": int4_native.description(), "rows": ROWS, "layers": table},
                      out, indent=1)  # fmt: skip
    if args.plot:
        plot(table, args.plot)


if __name__ == "__main__":
    main()
