"""What bounds a span pass's arithmetic on this CPU, in one run (docs/models.md, "What bounds the
0.5B shape on two cores"):

  peak       the CPU's rate of AVX-512 VNNI (vpdpbusd: 64 byte multiply-adds) and AVX-512 BF16
             (vdpbf16ps: 32 bfloat16 ones) instructions, in GMAC/s for all cores; on a CPU with
             AVX2 and not AVX-512, AVX2's byte products as infill's kernel does them there
             (vpmaddubsw, 32 of them, then vpaddw): infill.bench.cpu_peaks' small C programs
             (skipped without cc);
  kernel     infill's 4-bit product (infill.models.int4_native) on one layer that stays in the
             cores' caches (the 0.5B shape's MLP up, half its rows a thread), 1-64 rows of
             activations: its best rate, GMAC/s, and its share of the integer peak;
  bfloat16   PyTorch's bfloat16 product of the 7B MLP's shape at 64 rows (infill-bench shapes'
             matmul_rate, its compute floor);
  attention  a span pass's attention of the 0.5B shape (14 query heads on 2 key/value heads of 64,
             over 512 cached positions) at 1-32 positions: infill's C attention (in pieces of 64
             queries a head above that, as a C span layer would need) against PyTorch's
             scaled_dot_product_attention, medians in microseconds.

    python docs/experiments/cpu_rates.py [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import torch
import torch.nn.functional as F

from infill.bench.cpu_peaks import avx2_peak_rate, peak_rates
from infill.bench.shapes import matmul_rate
from infill.models import int4_native, layer_ops


def best_seconds(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def kernel_rates(threads: int) -> dict[int, float]:
    """GMAC/s of infill's 4-bit product on a layer that stays in the caches, by rows."""
    out_rows = 2432 * threads // 2  # about 0.55 MiB of packed weights a thread
    tiles, scales, offsets = int4_native.pack(torch.randn(out_rows, 896) * 0.02, 128)
    rates = {}
    for rows in (1, 2, 5, 9, 16, 33, 64):
        x = torch.randn(rows, 896)
        seconds = best_seconds(partial(int4_native.matmul, x, tiles, scales, offsets), 200)
        rates[rows] = rows * out_rows * 896 / seconds / 1e9
    return rates


def in_pieces(runs: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """The C attention over each key/value head's run of queries, 64 a call (one piece)."""
    for start in range(0, runs.shape[2], 64):
        layer_ops.attention(runs[:, :, start : start + 64], k, v)


def attention_times() -> dict[int, tuple[float, float]]:
    """Microseconds of a span pass's attention (C in pieces, PyTorch's) by positions, medians."""
    times = {}
    for positions in (1, 4, 8, 16, 32):
        runs = torch.randn(1, 2, 7 * positions, 64)  # 14 query heads: 7 on each key/value head
        k, v = torch.randn(1, 2, 512, 64), torch.randn(1, 2, 512, 64)
        ways = [partial(in_pieces, runs, k, v), partial(F.scaled_dot_product_attention, runs, k, v)]
        samples: list[list[float]] = [[], []]
        for _ in range(60):
            for way, kept in zip(ways, samples):
                started = time.perf_counter()
                way()
                kept.append(1e6 * (time.perf_counter() - started))
        times[positions] = (statistics.median(samples[0]), statistics.median(samples[1]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    peaks, avx2 = peak_rates(args.threads), avx2_peak_rate(args.threads)
    if peaks:
        print(f"peak on {args.threads} cores: VNNI {peaks[0]:.0f} GMAC/s, BF16 {peaks[1]:.0f} GMAC/s")
    elif avx2:
        print(f"peak on {args.threads} cores: AVX2 byte products {avx2:.0f} GMAC/s (no AVX-512 VNNI)")
    else:
        print("peak: not measured (no cc, or neither AVX-512 VNNI and BF16 nor AVX2)")
    integer_peak = (peaks[0], "VNNI") if peaks else (avx2, "AVX2") if avx2 else None
    if int4_native.available():
        for rows, rate in kernel_rates(args.threads).items():
            share = f" ({rate / integer_peak[0]:.0%} of the {integer_peak[1]} peak)" if integer_peak else ""
            print(f"4-bit kernel, layer in cache, {rows:>2} rows: {rate:.0f} GMAC/s{share}")
    bf16 = matmul_rate(torch.device("cpu")) / 2
    share = f" ({bf16 / peaks[1]:.0%} of the BF16 peak)" if peaks else ""
    print(f"PyTorch's bfloat16 product, 7B MLP at 64 rows: {bf16:.0f} GMAC/s{share}")
    if layer_ops.build().library is not None and layer_ops.most_queries():
        for positions, (ours, theirs) in attention_times().items():
            print(f"attention, 0.5B shape, {positions:>2} positions: C {ours:.0f} us, "
                  f"PyTorch's {theirs:.0f} us")  # fmt: skip


if __name__ == "__main__":
    main()
