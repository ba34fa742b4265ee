"""What bounds a span pass's arithmetic on this CPU, in one run (docs/models.md, "What bounds the
0.5B shape on two cores"):

  peak       the CPU's rate of AVX-512 VNNI (vpdpbusd: 64 byte multiply-adds) and AVX-512 BF16
             (vdpbf16ps: 32 bfloat16 ones) instructions, ten independent sums a loop, on every
             core at once (a small C program built here with -march=native; skipped without cc),
             in GMAC/s for all cores; on a CPU with AVX2 and not AVX-512, AVX2's byte products
             as infill's kernel does them there (vpmaddubsw, 32 of them, then vpaddw);
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
import shutil
import statistics
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from infill.bench.shapes import matmul_rate
from infill.models import c_build, int4_native, layer_ops

PEAK_SOURCE = r"""
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#define SUMS(op) op(a0); op(a1); op(a2); op(a3); op(a4); op(a5); op(a6); op(a7); op(a8); op(a9);
#define VNNI(a) a = _mm512_dpbusd_epi32(a, w, x)
#define BF16(a) a = (__m512i)_mm512_dpbf16_ps((__m512)a, (__m512bh)w, (__m512bh)x)
int main(void) {
    const long n = 50000000;
    double rates[2] = {0, 0};
#pragma omp parallel reduction(+ : rates[:2])
    for (int kind = 0; kind < 2; kind++) {
        __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(5);
        __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2),
                a3 = _mm512_set1_epi32(3), a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5),
                a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7), a8 = _mm512_set1_epi32(8),
                a9 = _mm512_set1_epi32(9);
#pragma omp barrier
        double t = omp_get_wtime();
        for (long i = 0; i < n; i++) {
            if (kind == 0) { SUMS(VNNI) } else { SUMS(BF16) }
            __asm__ volatile("" : "+v"(w), "+v"(x));
        }
        t = omp_get_wtime() - t;
        __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                                     _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
        s = _mm512_add_epi32(s, _mm512_add_epi32(a8, a9));
        if (_mm512_reduce_add_epi32(s) == 42) printf("!");
        rates[kind] += n * 10.0 * (kind == 0 ? 64 : 32) / t / 1e9;
    }
    printf("%.1f %.1f\n", rates[0], rates[1]);
    return 0;
}
"""

AVX2_PEAK_SOURCE = r"""
#include <omp.h>
#include <stdio.h>
/* eight vpmaddubsw a loop, each added (vpaddw) to one of eight sums, written out in asm: the C loop
   before it had ten products of the same two registers, which GCC made one (until 2026-12-02 this
   printed half the real rate), and in C GCC kept the sums on the stack; whatever ymm14 and ymm15
   hold, integer products take the same time */
#define PAIR(t, a) "vpmaddubsw %%ymm14, %%ymm15, %%ymm" #t "\n vpaddw %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n"
int main(void) {
    const long n = 50000000;
    double rate = 0;
#pragma omp parallel reduction(+ : rate)
    {
#pragma omp barrier
        double t = omp_get_wtime();
        for (long i = 0; i < n; i++)
            __asm__ volatile(PAIR(8, 0) PAIR(9, 1) PAIR(10, 2) PAIR(11, 3) PAIR(8, 4) PAIR(9, 5)
                             PAIR(10, 6) PAIR(11, 7)
                             ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                                 "xmm9", "xmm10", "xmm11");
        t = omp_get_wtime() - t;
        rate += n * 8.0 * 32 / t / 1e9;
    }
    printf("%.1f\n", rate);
    return 0;
}
"""


def run_program(source_text: str, threads: int) -> str:
    """What a C program built here for this CPU prints, run on `threads` OpenMP threads."""
    with tempfile.TemporaryDirectory() as folder:
        source, program = Path(folder, "peak.c"), Path(folder, "peak")
        source.write_text(source_text)
        build = [shutil.which("cc"), "-O2", "-march=native", "-fopenmp", str(source), "-o", str(program)]
        subprocess.run(build, check=True)
        return subprocess.run([str(program)], env={"OMP_NUM_THREADS": str(threads)}, capture_output=True,
                              text=True, check=True).stdout  # fmt: skip


def avx2_peak_rate(threads: int) -> float | None:
    """AVX2's byte products (vpmaddubsw then vpaddw), GMAC/s of `threads` cores at once; None
    without a compiler or AVX2, or on a CPU with AVX-512 VNNI (the kernel does not use them there)."""
    flags = c_build.cpu_flags().split()
    if shutil.which("cc") is None or "avx2" not in flags or "avx512_vnni" in flags:
        return None
    return float(run_program(AVX2_PEAK_SOURCE, threads))


def peak_rates(threads: int) -> tuple[float, float] | None:
    """(VNNI, BF16) GMAC/s of `threads` cores at once; None without a compiler or AVX-512 BF16."""
    flags = c_build.cpu_flags().split()
    if shutil.which("cc") is None or "avx512_bf16" not in flags or "avx512_vnni" not in flags:
        return None
    vnni, bf16 = map(float, run_program(PEAK_SOURCE, threads).split())
    return vnni, bf16


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
