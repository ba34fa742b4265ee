"""Draw docs/results/block_passes_fills.png: the fills of the 0.5B and 7B shapes with int4, by
what a pass computes (the line's budget, a decided line of 16 tokens, blocks of 4), from the
`infill-bench shapes` results that docs/models.md ("Block passes") lists.

    python docs/experiments/block_passes_plot.py
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"
SHAPES = {  # title: (results file prefix, issue 37's ready-fill target in seconds)
    "Open-dCoder 0.5B shape, int4": ("shapes_open_dcoder_cpu_int4", 0.2),
    "Dream 7B shape, int4": ("shapes_dream7b_cpu_int4", 2.0),
}
SETTINGS = {  # results file suffix: what a pass computes
    "gqa": "the line's budget",
    "line16": "a line of 16",
    "line16_blocks4": "a line of 16,\nblocks of 4",
}
FILLS = {"fill_ms": "first fill", "kept_fill_ms": "next fill", "ready_fill_ms": "ready fill"}


def main() -> None:
    figure, axes = plt.subplots(1, len(SHAPES), figsize=(11, 4.2))
    for ax, (title, (prefix, target)) in zip(axes, SHAPES.items()):
        rows = {key: json.loads((RESULTS / f"{prefix}_{key}.json").read_text())["rows"][0]
                for key in SETTINGS}  # fmt: skip
        width = 0.8 / len(FILLS)
        for i, (field, label) in enumerate(FILLS.items()):
            seconds = [rows[key][field]["8"] / 1000 for key in SETTINGS]
            ax.bar([x + (i - 1) * width for x in range(len(SETTINGS))], seconds, width, label=label)
        ax.axhline(target, color="black", linestyle="--", linewidth=1,
                   label=f"target, ready fill ({target:g} s)")  # fmt: skip
        ax.set_xticks(range(len(SETTINGS)), list(SETTINGS.values()))
        ax.set_ylabel("seconds (8 passes, 2 threads)")
        ax.set_title(title)
        ax.legend(fontsize=8)
    figure.suptitle("A one-line fill on 2 CPU cores, random weights of the real shapes")
    figure.tight_layout()
    out = RESULTS / "block_passes_fills.png"
    figure.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
