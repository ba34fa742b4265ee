"""The most multiply-adds a second this CPU's vector instructions do, measured by small C programs
built here (`-march=native`, OpenMP on as many threads as asked): ten or eight independent sums a
loop, on every core at once, nothing read from memory.

  integer_peak   the byte dot products infill's 4-bit kernel multiplies with on this CPU
                 (infill.models.int4_native): AVX-512 VNNI's vpdpbusd (64 a instruction),
                 AVX-VNNI's 256-bit one (32), or AVX2's vpmaddubsw then vpaddw (32); None
                 without a compiler. `infill-bench shapes` sets a 4-bit pass's multiply-adds
                 against it: the arithmetic floor of a pass whose products are integer ones
  peak_rates     AVX-512 VNNI's and AVX-512 BF16's (vdpbf16ps, 32), where the CPU has both
  avx2_peak_rate AVX2's byte products, on a CPU with AVX2 and not AVX-512 VNNI

docs/experiments/cpu_rates.py prints them beside the kernel's own rates."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infill.models import c_build, int4_native

PEAK_SOURCE = r"""
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#define SUMS(op) op(a0); op(a1); op(a2); op(a3); op(a4); op(a5); op(a6); op(a7); op(a8); op(a9);
#define VNNI(a) a = _mm512_dpbusd_epi32(a, w, x)
#if defined(__AVX512BF16__)
#define KINDS 2
#define BF16(a) a = (__m512i)_mm512_dpbf16_ps((__m512)a, (__m512bh)w, (__m512bh)x)
#else /* VNNI alone (its BF16 rate printed as 0) */
#define KINDS 1
#define BF16(a)
#endif
int main(void) {
    const long n = 50000000;
    double rates[2] = {0, 0};
#pragma omp parallel reduction(+ : rates[:2])
    for (int kind = 0; kind < KINDS; kind++) {
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

AVX_VNNI_PEAK_SOURCE = r"""
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
/* AVX-VNNI's vpdpbusd on 256 bits (the 4-bit kernel's products on a CPU with it and without
   AVX-512: Intel's since 2021, Alder Lake on), ten independent sums as PEAK_SOURCE's */
#define SUMS(op) op(a0); op(a1); op(a2); op(a3); op(a4); op(a5); op(a6); op(a7); op(a8); op(a9);
#define VNNI(a) a = _mm256_dpbusd_avx_epi32(a, w, x)
int main(void) {
    const long n = 50000000;
    double rate = 0;
#pragma omp parallel reduction(+ : rate)
    {
        __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(5);
        __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2),
                a3 = _mm256_set1_epi32(3), a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5),
                a6 = _mm256_set1_epi32(6), a7 = _mm256_set1_epi32(7), a8 = _mm256_set1_epi32(8),
                a9 = _mm256_set1_epi32(9);
#pragma omp barrier
        double t = omp_get_wtime();
        for (long i = 0; i < n; i++) {
            SUMS(VNNI)
            __asm__ volatile("" : "+v"(w), "+v"(x));
        }
        t = omp_get_wtime() - t;
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                                     _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7)));
        s = _mm256_add_epi32(s, _mm256_add_epi32(a8, a9));
        int lanes[8];
        _mm256_storeu_si256((__m256i *)lanes, s);
        if (lanes[0] + lanes[7] == 42) printf("!");
        rate += n * 10.0 * 32 / t / 1e9;
    }
    printf("%.1f\n", rate);
    return 0;
}
"""

# the program measuring each kind of instructions infill_int4_instructions names
PEAK_PROGRAMS = {"AVX-512 VNNI": PEAK_SOURCE, "AVX-VNNI": AVX_VNNI_PEAK_SOURCE, "AVX2": AVX2_PEAK_SOURCE}

REPEAT = 5  # runs of a program, the best taken


@dataclass(frozen=True)
class Peak:
    gmacs: float  # multiply-adds a second, in billions, of all the threads together
    instructions: str  # as infill_int4_instructions names them: "AVX-512 VNNI", "AVX2"


def best_rates(source_text: str, threads: int, repeat: int = REPEAT) -> list[float]:
    """The rates a C program built here for this CPU prints, run `repeat` times on `threads`
    OpenMP threads: the best of each (a run lasts a few tenths of a second, and on a shared
    machine one in several loses a core for part of it: half the rate)."""
    with tempfile.TemporaryDirectory() as folder:
        source, program = Path(folder, "peak.c"), Path(folder, "peak")
        source.write_text(source_text)
        build = [c_build.c_compiler(), "-O2", "-march=native", "-fopenmp", str(source), "-o", str(program)]
        subprocess.run(build, check=True, capture_output=True)
        runs = [subprocess.run([str(program)], env={"OMP_NUM_THREADS": str(threads)}, capture_output=True,
                               text=True, check=True).stdout.split() for _ in range(repeat)]  # fmt: skip
    return [max(float(run[kind]) for run in runs) for kind in range(len(runs[0]))]


def peak_rates(threads: int) -> tuple[float, float] | None:
    """(VNNI, BF16) GMAC/s of `threads` cores at once; None without a compiler or AVX-512 BF16."""
    flags = c_build.cpu_flags().split()
    if c_build.c_compiler() is None or "avx512_bf16" not in flags or "avx512_vnni" not in flags:
        return None
    vnni, bf16 = best_rates(PEAK_SOURCE, threads)
    return vnni, bf16


def avx2_peak_rate(threads: int) -> float | None:
    """AVX2's byte products (vpmaddubsw then vpaddw), GMAC/s of `threads` cores at once; None
    without a compiler or AVX2, or on a CPU with AVX-512 VNNI (the kernel does not use them there)."""
    flags = c_build.cpu_flags().split()
    if c_build.c_compiler() is None or "avx2" not in flags or "avx512_vnni" in flags:
        return None
    return best_rates(AVX2_PEAK_SOURCE, threads)[0]


def integer_peak(threads: int, instructions: str | None = None) -> Peak | None:
    """The peak of the instructions infill's 4-bit kernel multiplies with here (or of
    `instructions`, a name of PEAK_PROGRAMS, on a CPU that has them), on `threads` cores; None
    where the kernel is not built or no program measures its instructions."""
    if instructions is None:
        if not int4_native.available():
            return None
        instructions = int4_native.build().library.infill_int4_instructions().decode()
    source = PEAK_PROGRAMS.get(instructions)
    if source is None or c_build.c_compiler() is None:
        return None
    try:
        return Peak(best_rates(source, threads)[0], instructions)
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):  # a compiler that fails
        return None
