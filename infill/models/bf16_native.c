/* infill's bfloat16 product for the CPU: bfloat16 activations times bfloat16 weights packed once
   for AVX-512 BF16's pair dot products (vdpbf16ps: 32 products an instruction, summed into 16
   float32 lanes), the sums in float32, rounded to bfloat16 once (round to nearest even). Built at
   first use by infill/models/bf16_native.py for the CPU it runs on (-march=native); where this
   CPU has no AVX512_BF16 the build stops at the #error below and infill keeps PyTorch's product.

   Why: PyTorch's bfloat16 product on a CPU (oneDNN's) takes weights as stored and rearranges them
   on every call, so a product of a few rows costs several times what reading its weights does
   (the shipped model's span pass: docs/models.md, "bfloat16 products of our own").

   Layout (infill/models/bf16_native.py packs it): the N output rows in groups of 64 (the last
   one padded with zeros), each group (K/2) x 64 x 2 bfloat16: for each pair of inputs k, k+1,
   the 64 rows' two weights side by side, so that one 256-byte step feeds four registers of 16
   output rows, and the group's weights are read front to back once a block of activation rows.

   Each output is the sum over k in the same order whatever the number of rows M or the threads:
   a row's result does not depend on the rows multiplied beside it (a batch of canvases, or one). */
#include <immintrin.h>
#include <stdint.h>

#if !defined(__AVX512F__) || !defined(__AVX512BF16__)
#error "this CPU has no AVX512_BF16"
#endif

#define GROUP 64  /* output rows a packed group holds: four registers of 16 lanes */
#define ROWS 6    /* activation rows a block: 6 x 4 sums in registers, 4 of weights, 1 broadcast */
#define AHEAD 2048 /* bytes of the group's weights asked for ahead of the loads (first block only) */

/* a float32 register rounded to 16 bfloat16 (nearest even) */
static inline __m256i rounded(__m512 sums) { return (__m256i)_mm512_cvtneps_pbh(sums); }

/* rows m0..m0+R-1 of out, the 64 columns of group g: R is a constant where it is inlined */
static inline __attribute__((always_inline)) void block(int R, int64_t m0, int64_t g, const uint16_t *x,
                                                        int64_t K, const uint16_t *packed, int64_t N,
                                                        const float *bias, uint16_t *out, int ahead) {
    const uint16_t *w = packed + g * K * GROUP; /* K/2 steps of 64 x 2 bfloat16 */
    __m512 sums[ROWS][4];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < 4; t++) sums[r][t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 2, w += 2 * GROUP) {
        if (ahead) _mm_prefetch((const char *)w + AHEAD, _MM_HINT_T0),
                   _mm_prefetch((const char *)w + AHEAD + 64, _MM_HINT_T0),
                   _mm_prefetch((const char *)w + AHEAD + 128, _MM_HINT_T0),
                   _mm_prefetch((const char *)w + AHEAD + 192, _MM_HINT_T0);
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512((const void *)w);
        const __m512bh w1 = (__m512bh)_mm512_loadu_si512((const void *)(w + 32));
        const __m512bh w2 = (__m512bh)_mm512_loadu_si512((const void *)(w + 64));
        const __m512bh w3 = (__m512bh)_mm512_loadu_si512((const void *)(w + 96));
        for (int r = 0; r < R; r++) {
            int32_t pair;
            __builtin_memcpy(&pair, x + (m0 + r) * K + k, sizeof pair);
            const __m512bh a = (__m512bh)_mm512_set1_epi32(pair); /* x[k], x[k+1] in every lane */
            sums[r][0] = _mm512_dpbf16_ps(sums[r][0], a, w0);
            sums[r][1] = _mm512_dpbf16_ps(sums[r][1], a, w1);
            sums[r][2] = _mm512_dpbf16_ps(sums[r][2], a, w2);
            sums[r][3] = _mm512_dpbf16_ps(sums[r][3], a, w3);
        }
    }
    for (int t = 0; t < 4; t++) {
        const int64_t n = g * GROUP + 16 * t;
        if (n >= N) break;
        const __mmask16 keep = N - n >= 16 ? 0xFFFF : (__mmask16)((1u << (N - n)) - 1);
        const __m512 b = bias ? _mm512_maskz_loadu_ps(keep, bias + n) : _mm512_setzero_ps();
        for (int r = 0; r < R; r++)
            _mm256_mask_storeu_epi16(out + (m0 + r) * N + n, keep, rounded(_mm512_add_ps(sums[r][t], b)));
    }
}

/* the 64 columns of group g for all M rows, ROWS at a time, the rest in one block */
static void multiply_group(int64_t g, const uint16_t *x, int64_t M, int64_t K, const uint16_t *packed,
                           int64_t N, const float *bias, uint16_t *out) {
    int64_t m0 = 0;
    for (; M - m0 >= ROWS; m0 += ROWS) block(ROWS, m0, g, x, K, packed, N, bias, out, m0 == 0);
    const int ahead = m0 == 0;
    switch (M - m0) {
    case 5: block(5, m0, g, x, K, packed, N, bias, out, ahead); break;
    case 4: block(4, m0, g, x, K, packed, N, bias, out, ahead); break;
    case 3: block(3, m0, g, x, K, packed, N, bias, out, ahead); break;
    case 2: block(2, m0, g, x, K, packed, N, bias, out, ahead); break;
    case 1: block(1, m0, g, x, K, packed, N, bias, out, ahead); break;
    }
}

/* out (M x N bfloat16) = x (M x K bfloat16) times the packed weights (N x K) transposed, plus
   `bias` (N float32, or none), on `threads` OpenMP threads; K even. */
void infill_bf16_linear(const uint16_t *x, int64_t M, int64_t K, const uint16_t *packed, int64_t N,
                        const float *bias, uint16_t *out, int threads) {
    const int64_t groups = (N + GROUP - 1) / GROUP;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t g = 0; g < groups; g++) multiply_group(g, x, M, K, packed, N, bias, out);
}
