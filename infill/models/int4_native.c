/* infill's 4-bit product for the CPU: int4 weights times int8 activations in integer dot products
   (AVX-512 VNNI's vpdpbusd: 64 byte products an instruction, against 16 float multiply-adds; on
   CPUs without AVX-512, AVX-VNNI's or AVX2's 256-bit ones). Built at first use by
   infill/models/int4_native.py for the CPU it runs on (-march=native); where this CPU has none of
   these the build stops at the #error below and infill keeps PyTorch's kernel.

   Layouts (infill/models/int4_native.py packs them):
     weights  (N/16) x (K/8) x 64 bytes: for each tile of 16 output rows and each 8 inputs, byte
              4j+i holds row j's input i in its low four bits and input 4+i in its high four,
              so one 64-byte load feeds the 16 rows' int32 lanes four inputs at a time;
     scales, offsets  (N/16) x (K/G) x 16 bfloat16: weight = q * scale + offset, q in 0..15;
     activations  int8, one scale for each 32 inputs of a row (quantize_row), and for each
              group of G the sum of the quantized activations, so that the offsets' term cancels
              the products' exactly: sum_k w_k x_k = scale * sum_k q_k x_k + offset * sum_k x_k.

   The loops (multiply_rows) are written once over "16 lanes": one 512-bit register, or two
   256-bit ones; the few operations they use are defined for each below. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#define BLOCK 32 /* inputs sharing one activation scale */
/* Bytes of packed weights ahead of the loads that each loop asks the memory for. Without it the
   loads wait for memory and the dot products wait for the loads: at a few rows of activations a
   layer took its reading time plus its arithmetic (7B MLP up/gate, 5 rows: 1.42-1.46 ms, where
   reading it takes about 0.8 ms). With it the reading runs under the arithmetic: 0.76-0.82 ms
   (2 threads; 4,096-12,288 measured alike; docs/models.md, "Asking for the weights ahead"). The
   scales and offsets, 32 times smaller, are asked for as far ahead in groups. */
#define PREFETCH 8192
/* Blocks of WIDE rows from WIDE_FROM rows on: 9-22% faster from 32 rows (2026-11-27); from 9 since
   2026-12-07, when the fills could be compared with the layers switched too: the 7B's MLP layers at
   9-21 rows 0.86-0.98 times as long on an Intel Xeon, about 0.9 on a Zen 4 and 0.93-0.95 on a
   Zen 5, and there its ready and next fills 0.98 (docs/models.md, "Blocks of 8 rows from 9") */
#define WIDE_FROM 9
/* From GROUPED_FROM rows on (a pass over the whole canvas), a thread takes its tiles TILE_GROUP at
   a time and each block of rows through all of them before the next block (multiply_tiles): the
   block's activations stay in the first cache, and each row's outputs are written 16 x 16
   columns in a run, where a tile at a time wrote them 64 bytes at a time a whole row apart.
   Measured (docs/models.md, "Tiles in groups for the whole canvas's passes"): a 0.5B full pass
   0.94-0.96 times as long, the 7B's as before (the same numbers); below 64 rows no faster. */
#define GROUPED_FROM 64
#define TILE_GROUP 16

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define ROWS 4 /* 4 or 2: activation rows multiplied with each loaded piece of weights */
#define WIDE 8 /* the same for products of WIDE_FROM rows or more (fewer unpackings, more registers) */
#define TAIL 8 /* the most rows one call takes: the rows left after the blocks above */
typedef __m512i ints;  /* 16 int32 lanes: one output row each */
typedef __m512 floats; /* 16 float lanes */
static inline ints ints_zero(void) { return _mm512_setzero_si512(); }
static inline floats floats_zero(void) { return _mm512_setzero_ps(); }
static inline void nibbles(const uint8_t *chunk, ints *low, ints *high) {
    const __m512i mask = _mm512_set1_epi8(0x0F), packed = _mm512_loadu_si512((const void *)chunk);
    *low = _mm512_and_si512(packed, mask);
    *high = _mm512_and_si512(_mm512_srli_epi16(packed, 4), mask);
}
/* each lane + its 4 weights (unsigned bytes) times the same 4 activations (signed bytes) */
static inline ints dot(ints sums, ints weights, const int8_t *x) {
    return _mm512_dpbusd_epi32(sums, weights, _mm512_broadcastd_epi32(_mm_loadu_si32(x)));
}
static inline floats scaled(floats sums, ints dots, float step) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), _mm512_set1_ps(step), sums);
}
static inline floats times_plus(floats a, floats b, floats c) { return _mm512_fmadd_ps(a, b, c); }
static inline floats broadcast(float value) { return _mm512_set1_ps(value); }
static inline floats bfloat16s(const uint16_t *p) {
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
static inline void store(float *out, floats value) { _mm512_storeu_ps(out, value); }

#elif defined(__AVX2__) && defined(__FMA__)
#if defined(__AVXVNNI__)
#define WIDE 2
#define TAIL 2
#define ROWS 2 /* 16 ymm registers: two rows' three sums of two registers each, and the weights
                  (4 rows, as AVX2 alone below, not yet measured on a CPU with AVX-VNNI) */
#else
/* AVX2 alone: 4 rows a load of weights (their block sums in registers, the rest on the stack)
   beat 2 rows all in registers: the 7B MLP's layers on an AMD Zen 3, 4-64 rows, 0.79-0.94 times
   as long (by hand); and a tail of 5 rows in one call (a 4-position pass of a shifted family)
   beat 4 and a tail of 1 (docs/models.md, "AVX2 alone") */
#define WIDE 4
#define TAIL 5
#define ROWS 4
#define AVX2_ALONE /* chunk_products: its own order */
#endif
typedef struct { __m256i low, high; } ints; /* lanes 0-7, 8-15 */
typedef struct { __m256 low, high; } floats;
static inline ints ints_zero(void) { return (ints){_mm256_setzero_si256(), _mm256_setzero_si256()}; }
static inline floats floats_zero(void) { return (floats){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline void nibbles(const uint8_t *chunk, ints *low, ints *high) {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    __m256i first = _mm256_loadu_si256((const __m256i *)chunk);
    __m256i second = _mm256_loadu_si256((const __m256i *)(chunk + 32));
    *low = (ints){_mm256_and_si256(first, mask), _mm256_and_si256(second, mask)};
    *high = (ints){_mm256_and_si256(_mm256_srli_epi16(first, 4), mask),
                   _mm256_and_si256(_mm256_srli_epi16(second, 4), mask)};
}
#if defined(__AVXVNNI__)
/* 8 int32 lanes + their 4 weights (unsigned bytes) times the same 4 activations (signed bytes) */
static inline __m256i dot8(__m256i sums, __m256i weights, __m256i x) {
    return _mm256_dpbusd_avx_epi32(sums, weights, x);
}
static inline __m256i widened(__m256i sums) { return sums; }
#else
/* AVX2 has no 4-byte dot product: vpmaddubsw multiplies the bytes and adds them in pairs into 16
   int16 lanes, and the pairs are added up in those lanes for the whole block of 32 inputs, then
   widened to int32 (vpmaddwd with ones) once, before the block's scale: one multiply an input
   pair instead of two, the same integers. Each int16 lane sums 2 inputs a chunk, twice a chunk
   (its low and high nibbles), BLOCK / 8 chunks: 2 * BLOCK / 4 products of at most 15 x 127
   (quantize_row's activations are -127..127). */
_Static_assert(2 * BLOCK / 4 * 15 * 127 <= 32767, "a block's int16 sums must not overflow");
static inline __m256i dot8(__m256i sums, __m256i weights, __m256i x) {
    return _mm256_add_epi16(sums, _mm256_maddubs_epi16(weights, x));
}
static inline __m256i widened(__m256i sums) { return _mm256_madd_epi16(sums, _mm256_set1_epi16(1)); }
#endif
static inline ints dot(ints sums, ints weights, const int8_t *x) {
    __m256i four = _mm256_set1_epi32(*(const int32_t *)x);
    return (ints){dot8(sums.low, weights.low, four), dot8(sums.high, weights.high, four)};
}
static inline floats scaled(floats sums, ints dots, float step) {
    __m256 s = _mm256_set1_ps(step);
    return (floats){_mm256_fmadd_ps(_mm256_cvtepi32_ps(widened(dots.low)), s, sums.low),
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(widened(dots.high)), s, sums.high)};
}
static inline floats times_plus(floats a, floats b, floats c) {
    return (floats){_mm256_fmadd_ps(a.low, b.low, c.low), _mm256_fmadd_ps(a.high, b.high, c.high)};
}
static inline floats broadcast(float value) { return (floats){_mm256_set1_ps(value), _mm256_set1_ps(value)}; }
static inline __m256 bfloat16s8(const uint16_t *p) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
static inline floats bfloat16s(const uint16_t *p) { return (floats){bfloat16s8(p), bfloat16s8(p + 8)}; }
static inline void store(float *out, floats value) {
    _mm256_storeu_ps(out, value.low);
    _mm256_storeu_ps(out + 8, value.high);
}

#endif

/* the instructions this build multiplies with */
const char *infill_int4_instructions(void) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
    return "AVX-512 VNNI";
#elif defined(__AVXVNNI__)
    return "AVX-VNNI";
#else
    return "AVX2";
#endif
}

#if !defined(__AVX2__) || !defined(__FMA__)
#error "this CPU has neither AVX-512 VNNI nor AVX2: infill keeps PyTorch's 4-bit kernel"
#endif

/* the largest |x[i]| of a block of 32 floats, NaNs left out (0 if every one is NaN or zero), as
   the scalar loop before found it: a maximum is exact in any order. max(a, b) takes b where a is
   NaN, so max(|x|, 0) is 0 there. The compiler left that loop scalar: in vectors the activations'
   quantization takes half as long (docs/models.md, "The activations' largest magnitudes in
   vectors"). */
static inline float largest_magnitude(const float *x) {
#if defined(__AVX512F__)
    const __m512 zero = _mm512_setzero_ps();
    const __m512 a = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x)), zero);
    const __m512 b = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 16)), zero);
    return _mm512_reduce_max_ps(_mm512_max_ps(a, b));
#else
    const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    __m256 m = zero;
    for (int i = 0; i < BLOCK; i += 8)
        m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), zero), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
#endif
}

/* sum + a * b, rounded after the product and after the sum: never one fused multiply-add, which
   a compiler makes where it may (GCC here did in the AVX2 build, and in the AVX-512 one once the
   loops around it changed), so that every build and compiler rounds the groups' sums alike */
static inline float plus_product(float sum, float a, float b) {
    return _mm_cvtss_f32(_mm_add_ss(_mm_set_ss(sum), _mm_mul_ss(_mm_set_ss(a), _mm_set_ss(b))));
}

/* one row of activations -> its int8 numbers (x * 127 / |max|, rounded to nearest even), a scale
   for each 32 (|max| / 127) and a sum for each group (of the int8 numbers times their scales) */
static void quantize_row(const float *row, int64_t K, int64_t G, int8_t *xq, float *sx, float *xsum) {
    for (int64_t g = 0; g < K / G; g++) {
        float sum = 0.f;
        for (int64_t b = g * (G / BLOCK); b < (g + 1) * (G / BLOCK); b++) {
            const float *x = row + b * BLOCK;
            const float amax = largest_magnitude(x);
            const float inverse = amax > 0.f ? 127.f / amax : 0.f;
            int32_t total = 0;
            for (int i = 0; i < BLOCK; i++) {
                int32_t q = (int32_t)__builtin_nearbyintf(x[i] * inverse);
                xq[b * BLOCK + i] = (int8_t)q;
                total += q;
            }
            sx[b] = amax / 127.f;
            sum = plus_product(sum, sx[b], (float)total);
        }
        xsum[g] = sum;
    }
}

#if defined(AVX2_ALONE)
/* each row's 4 inputs at x + r * K times one nibble of each byte of a chunk (a: outputs 0-7, c:
   8-15), each product added to its sum at once (the empty asms: GCC may not set it aside) */
static inline __attribute__((always_inline)) void nibble_products(const int rows, ints *dots, __m256i a, __m256i c,
                                                                  const int8_t *x, int64_t K) {
    for (int r = 0; r < rows; r++) {
        const __m256i four = _mm256_set1_epi32(*(const int32_t *)(x + r * K));
        dots[r].low = dot8(dots[r].low, a, four), dots[r].high = dot8(dots[r].high, c, four);
        __asm__("" : "+x"(dots[r].low));
        __asm__("" : "+x"(dots[r].high));
    }
}

/* multiply_rows' chunk of 8 inputs (64 bytes of the tile) with AVX2 alone: every row's sums take
   the low nibbles' products (inputs 0-3 with x[0..3]), then every row's the high ones' (4-7).
   Row by row, both at once, as with AVX-512, left the 4 unpacked weights beside 4-5 rows' sums
   (2 registers each) in AVX2's 16 registers: GCC put sums on the stack and added each row's low
   and high products together before its sum (integers: it may), keeping 8-10 products aside.
   Each half is unpacked where it is used, not both by nibbles() first: with all four unpacked
   registers live beside the sums, 5 rows took 1.06 times as long (one core, by hand). The same
   integers: the 7B MLP's layers 0.85-0.95 times as long at 4-64 rows (docs/models.md, "AVX2's
   sums in registers"). */
static inline __attribute__((always_inline)) void chunk_products(const int rows, ints *dots, const uint8_t *chunk,
                                                                 const int8_t *x, int64_t K) {
    const __m256i mask = _mm256_set1_epi8(0x0F), *packed = (const __m256i *)chunk;
    nibble_products(rows, dots, _mm256_and_si256(_mm256_loadu_si256(packed), mask),
                    _mm256_and_si256(_mm256_loadu_si256(packed + 1), mask), x, K);
    nibble_products(rows, dots, _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256(packed), 4), mask),
                    _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256(packed + 1), 4), mask), x + 4, K);
}
#endif

/* rows m0 .. m0 + rows - 1 of the output's 16 columns of tile t: the quantized activations times
   the tile's 4-bit weights (inlined for each constant `rows`, so that the sums stay in registers) */
static inline __attribute__((always_inline)) void multiply_rows(
    const int rows, int64_t m0, int64_t t, const int8_t *xq, const float *sx, const float *xsum,
    int64_t K, int64_t G, const uint8_t *weights, const uint16_t *scales, const uint16_t *offsets,
    int64_t N, float *out) {
    const int64_t groups = K / G, blocks = K / BLOCK;
    const uint8_t *tile = weights + t * (K / 8) * 64;
    const uint16_t *scale = scales + t * groups * 16, *offset = offsets + t * groups * 16;
    floats total[TAIL];
    for (int r = 0; r < rows; r++) total[r] = floats_zero();
    for (int64_t g = 0; g < groups; g++) {
        floats group[TAIL];
        _mm_prefetch((const char *)(scale + g * 16) + PREFETCH / 32, _MM_HINT_T0);
        _mm_prefetch((const char *)(offset + g * 16) + PREFETCH / 32, _MM_HINT_T0);
        for (int r = 0; r < rows; r++) group[r] = floats_zero();
        for (int64_t b = g * (G / BLOCK); b < (g + 1) * (G / BLOCK); b++) {
            ints dots[TAIL];
            for (int r = 0; r < rows; r++) dots[r] = ints_zero();
            for (int64_t chunk = b * (BLOCK / 8); chunk < (b + 1) * (BLOCK / 8); chunk++) {
                _mm_prefetch((const char *)(tile + chunk * 64 + PREFETCH), _MM_HINT_T0);
#if defined(AVX2_ALONE)
                chunk_products(rows, dots, tile + chunk * 64, xq + m0 * K + chunk * 8, K);
#else
                ints low, high;
                nibbles(tile + chunk * 64, &low, &high);
                for (int r = 0; r < rows; r++) {
                    const int8_t *x = xq + (m0 + r) * K + chunk * 8; /* 4 + 4 inputs to every lane */
                    dots[r] = dot(dot(dots[r], low, x), high, x + 4);
                }
#endif
            }
            for (int r = 0; r < rows; r++) group[r] = scaled(group[r], dots[r], sx[(m0 + r) * blocks + b]);
        }
        floats s = bfloat16s(scale + g * 16), z = bfloat16s(offset + g * 16);
        for (int r = 0; r < rows; r++)
            total[r] = times_plus(z, broadcast(xsum[(m0 + r) * groups + g]), times_plus(group[r], s, total[r]));
    }
    for (int r = 0; r < rows; r++) store(out + (m0 + r) * N + t * 16, total[r]);
}

/* rows m0 .. m0 + rows - 1 (1 <= rows <= TAIL) in one call: one unpacking of the tile's weights */
static inline __attribute__((always_inline)) void multiply_some(
    int64_t rows, int64_t m0, int64_t t, const int8_t *xq, const float *sx, const float *xsum, int64_t K,
    int64_t G, const uint8_t *weights, const uint16_t *scales, const uint16_t *offsets, int64_t N, float *out) {
    switch (rows) { /* a constant for each case, so that the sums stay in registers */
#if TAIL > 5
    case 8: multiply_rows(8, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out); break;
    case 7: multiply_rows(7, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out); break;
    case 6: multiply_rows(6, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out); break;
#endif
#if TAIL > 4
    case 5: multiply_rows(5, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out); break;
#endif
#if TAIL > 2
    case 4: multiply_rows(4, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out); break;
    case 3: multiply_rows(3, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out); break;
#endif
    case 2: multiply_rows(2, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out); break;
    case 1: multiply_rows(1, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out); break;
    }
}

/* the 16 output columns of each tile first .. end - 1: ROWS (from WIDE_FROM rows on, WIDE) rows of
   activations at a time while more than TAIL are left, then the rest in one call, each block of
   rows through every one of the tiles before the next block (one tile, or a group of them: each
   output number is the same sum either way). A tail of 1-4 rows after blocks of 4 unpacked the
   weights again for itself, and a shifted family computes one position more than it asks for: 5
   for a block of 4 (7B MLP up/gate, by hand: 5 rows 1.62 -> 1.42 ms, 17 rows 3.53 -> 2.64 ms;
   docs/models.md) */
static void multiply_tiles(int64_t first, int64_t end, const int8_t *xq, const float *sx, const float *xsum,
                           int64_t M, int64_t K, int64_t G, const uint8_t *weights, const uint16_t *scales,
                           const uint16_t *offsets, int64_t N, float *out) {
    const int64_t step = M >= WIDE_FROM ? WIDE : ROWS;
    int64_t m0 = 0;
    for (; M - m0 > TAIL; m0 += step)
        for (int64_t t = first; t < end; t++)
            multiply_some(step, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out);
    for (int64_t t = first; t < end; t++)
        multiply_some(M - m0, m0, t, xq, sx, xsum, K, G, weights, scales, offsets, N, out);
}

/* out (M x N float32) = x (M x K float32) times the 4-bit weights (N x K) transposed, on `threads`
   OpenMP threads. 1 when the scratch for the quantized activations could not be had (nothing
   written), else 0. */
int infill_int4_linear(const float *x, int64_t M, int64_t K, int64_t G, const uint8_t *weights,
                       const uint16_t *scales, const uint16_t *offsets, int64_t N, float *out,
                       int threads) {
    if (M == 0) return 0; /* nothing to multiply (malloc(0) may give no pointer) */
    int8_t *xq = malloc((size_t)(M * K));
    float *sx = malloc(sizeof(float) * (size_t)(M * (K / BLOCK)));
    float *xsum = malloc(sizeof(float) * (size_t)(M * (K / G)));
    if (!xq || !sx || !xsum) {
        free(xq), free(sx), free(xsum);
        return 1;
    }
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(static)
        for (int64_t m = 0; m < M; m++)
            quantize_row(x + m * K, K, G, xq + m * K, sx + m * (K / BLOCK), xsum + m * (K / G));
        if (M >= GROUPED_FROM) { /* each thread an even share of the tiles, TILE_GROUP at a time */
            const int64_t tiles = N / 16, me = omp_get_thread_num(), team = omp_get_num_threads();
            const int64_t end = tiles * (me + 1) / team;
            for (int64_t t = tiles * me / team; t < end; t += TILE_GROUP)
                multiply_tiles(t, end - t < TILE_GROUP ? end : t + TILE_GROUP, xq, sx, xsum, M, K, G, weights,
                               scales, offsets, N, out);
        } else {
#pragma omp for schedule(static)
            for (int64_t t = 0; t < N / 16; t++)
                multiply_tiles(t, t + 1, xq, sx, xsum, M, K, G, weights, scales, offsets, N, out);
        }
    }
    free(xq), free(sx), free(xsum);
    return 0;
}
