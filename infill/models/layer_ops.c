/* A layer's small operations for the CPU, in float32: the normalisations, the rotary positions and
   the attention of a span pass over the cached canvas. Built at first use by
   infill/models/layer_ops.py (with infill/models/c_build.py) for the CPU it runs on.

   Why: a span pass of a small network is hundreds of operations of a few microseconds each. The
   0.5B shape's pass over 4 positions spent about as long in PyTorch's normalisation (a dozen
   operations of its own on a CPU), rotation and attention calls as in its weights' products
   (docs/models.md, "A layer's small operations in C"). Each function here is one call.

   Layouts: rows of `n` (or `D`) contiguous floats; every pointer to its first element. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#define PARALLEL_FROM 65536 /* elements from which a norm runs on every thread */

/* bfloat16: the high half of a float32; rounded to nearest, ties to even (as PyTorch rounds) */
static inline float from_bf16(uint16_t h) {
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static inline uint16_t to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return (uint16_t)((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

static void norm_row(const float *x, const float *w, int64_t n, float eps, float *out) {
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int64_t i = 0; i < n; i++) squares += x[i] * x[i];
    const float inverse = 1.0f / sqrtf(squares / (float)n + eps);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = w[i] * (x[i] * inverse);
}

/* out = w * x / sqrt(mean(x^2) + eps), row by row (RMSNorm) */
void infill_rms_norm(const float *x, const float *w, int64_t rows, int64_t n, float eps, float *out,
                     int threads) {
#pragma omp parallel for num_threads(threads) if (rows * n >= PARALLEL_FROM)
    for (int64_t r = 0; r < rows; r++) norm_row(x + r * n, w, n, eps, out + r * n);
}

/* sum = x + delta, then out = RMSNorm(sum): a layer's residual and its next normalisation */
void infill_add_rms_norm(const float *x, const float *delta, const float *w, int64_t rows, int64_t n,
                         float eps, float *sum, float *out, int threads) {
#pragma omp parallel for num_threads(threads) if (rows * n >= PARALLEL_FROM)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n, *dr = delta + r * n;
        float *sr = sum + r * n;
#pragma omp simd
        for (int64_t i = 0; i < n; i++) sr[i] = xr[i] + dr[i];
        norm_row(sr, w, n, eps, out + r * n);
    }
}

/* The two above for bfloat16 numbers, computed in float32: the sum rounded to bfloat16 (as
   PyTorch's bfloat16 sum), the norm rounded once at the end */
static void norm_row_bf16(const uint16_t *x, const uint16_t *w, int64_t n, float eps, uint16_t *out) {
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int64_t i = 0; i < n; i++) squares += from_bf16(x[i]) * from_bf16(x[i]);
    const float inverse = 1.0f / sqrtf(squares / (float)n + eps);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) out[i] = to_bf16(from_bf16(w[i]) * (from_bf16(x[i]) * inverse));
}

void infill_rms_norm_bf16(const uint16_t *x, const uint16_t *w, int64_t rows, int64_t n, float eps,
                          uint16_t *out, int threads) {
#pragma omp parallel for num_threads(threads) if (rows * n >= PARALLEL_FROM)
    for (int64_t r = 0; r < rows; r++) norm_row_bf16(x + r * n, w, n, eps, out + r * n);
}

void infill_add_rms_norm_bf16(const uint16_t *x, const uint16_t *delta, const uint16_t *w, int64_t rows,
                              int64_t n, float eps, uint16_t *sum, uint16_t *out, int threads) {
#pragma omp parallel for num_threads(threads) if (rows * n >= PARALLEL_FROM)
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *xr = x + r * n, *dr = delta + r * n;
        uint16_t *sr = sum + r * n;
#pragma omp simd
        for (int64_t i = 0; i < n; i++) sr[i] = to_bf16(from_bf16(xr[i]) + from_bf16(dr[i]));
        norm_row_bf16(sr, w, n, eps, out + r * n);
    }
}

/* Rotary positions in place (rotate-half layout): `rows` rows of `heads` heads of D numbers; the
   first `turned` heads of each row are turned by the angles of table row (r % table_rows) of cos
   and sin (table_rows x D): (a, b) at (i, i + D/2) -> (a cos - b sin, b cos + a sin). */
void infill_rotate(float *x, int64_t rows, int64_t heads, int64_t turned, int64_t D, const float *cos,
                   const float *sin, int64_t table_rows) {
    const int64_t half = D / 2;
    for (int64_t r = 0; r < rows; r++) {
        const float *c = cos + (r % table_rows) * D, *s = sin + (r % table_rows) * D;
        for (int64_t h = 0; h < turned; h++) {
            float *v = x + (r * heads + h) * D;
#pragma omp simd
            for (int64_t i = 0; i < half; i++) {
                const float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i + half] + a * s[i + half];
            }
        }
    }
}

/* The same for bfloat16 numbers and tables of D/2 angles a row (the shipped family's layout, in
   its weights' dtype), each step rounded to bfloat16 as PyTorch's bfloat16 operations round it:
   (a cos - b sin) is round(round(a cos) - round(b sin)). A product of two bfloat16 numbers is
   exact in float32, so this is PyTorch's result bit for bit. */
void infill_rotate_halves_bf16(uint16_t *x, int64_t rows, int64_t heads, int64_t turned, int64_t D,
                               const uint16_t *cos, const uint16_t *sin, int64_t table_rows) {
    const int64_t half = D / 2;
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *c = cos + (r % table_rows) * half, *s = sin + (r % table_rows) * half;
        for (int64_t h = 0; h < turned; h++) {
            uint16_t *v = x + (r * heads + h) * D;
#pragma omp simd
            for (int64_t i = 0; i < half; i++) {
                const float a = from_bf16(v[i]), b = from_bf16(v[i + half]);
                const float ci = from_bf16(c[i]), si = from_bf16(s[i]);
                v[i] = to_bf16(from_bf16(to_bf16(a * ci)) - from_bf16(to_bf16(b * si)));
                v[i + half] = to_bf16(from_bf16(to_bf16(a * si)) + from_bf16(to_bf16(b * ci)));
            }
        }
    }
}

/* The attention and SwiGLU's vectors: 16 floats with AVX-512, 8 with AVX2 and FMA (most laptops'
   CPUs), the same code over `vec` for both. Elsewhere there is no attention here (the caller keeps
   PyTorch's) and SwiGLU is plain C. */
#if defined(__AVX512F__)
#define LANES 16
#define KEYS 4   /* keys scored at a time: independent sums hide the latency */
#define CHUNK 16 /* a value row's registers summed at a time: all of them (D <= 256) */
typedef __m512 vec;
#define vzero _mm512_setzero_ps
#define vset _mm512_set1_ps
#define vload _mm512_loadu_ps
#define vstore _mm512_storeu_ps
#define vfma _mm512_fmadd_ps
#define vfnma _mm512_fnmadd_ps
#define vadd _mm512_add_ps
#define vsub _mm512_sub_ps
#define vmul _mm512_mul_ps
#define vdiv _mm512_div_ps
#define vmax _mm512_max_ps
#define vmin _mm512_min_ps
/* 2^n for whole numbers n in [-126, 127], times p */
static inline vec times_two_to(vec p, vec n) { return _mm512_scalef_ps(p, n); }
static inline vec nearest(vec x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* LANES bfloat16 numbers from p as floats, and back (rounded to nearest, ties to even) */
static inline vec from_bf16_lanes(const uint16_t *p) {
    const __m256i halves = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16));
}
static inline vec rounded_to_bf16(vec x) {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i up = _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd));
    return _mm512_castsi512_ps(_mm512_and_si512(up, _mm512_set1_epi32((int)0xFFFF0000u)));
}
#elif defined(__AVX2__) && defined(__FMA__)
#define LANES 8
#define KEYS 3  /* of 16 registers: three keys' sums of up to 4 vectors of queries, their column */
#define CHUNK 4 /* four queries' sums of four value registers (2-4 keys, 1-4 registers timed) */
typedef __m256 vec;
#define vzero _mm256_setzero_ps
#define vset _mm256_set1_ps
#define vload _mm256_loadu_ps
#define vstore _mm256_storeu_ps
#define vfma _mm256_fmadd_ps
#define vfnma _mm256_fnmadd_ps
#define vadd _mm256_add_ps
#define vsub _mm256_sub_ps
#define vmul _mm256_mul_ps
#define vdiv _mm256_div_ps
#define vmax _mm256_max_ps
#define vmin _mm256_min_ps
static inline vec times_two_to(vec p, vec n) {
    const __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}
static inline vec nearest(vec x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vec from_bf16_lanes(const uint16_t *p) {
    const __m128i halves = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));
}
static inline vec rounded_to_bf16(vec x) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i up = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd));
    return _mm256_castsi256_ps(_mm256_and_si256(up, _mm256_set1_epi32((int)0xFFFF0000u)));
}
#endif

#if defined(LANES)
#define QUERIES 64                /* queries a head's run takes at most (its scratch's width) */
#define VECTORS (QUERIES / LANES) /* ... in vectors of LANES queries */
#define RUN (4 * LANES)           /* queries a run takes: 4 vectors, whose loops are constant */
/* A head's queries a call takes: up to 256, a span pass of 32 positions at 7 query heads a
   key/value head runs its layers in C, which gains over PyTorch's attention and the layers as
   modules with AVX2 and with AVX-512 alike (docs/models.md) */
#define MOST_QUERIES 256

/* e^x for LANES floats: x = n ln 2 + r with |r| <= ln 2 / 2, e^r by Cephes' degree-6 polynomial
   (relative error about 1e-7), 2^n into the exponent; clamped to float's range */
static inline vec exp_lanes(vec x) {
    x = vmin(vmax(x, vset(-87.3f)), vset(88.3f));
    const vec n = nearest(vmul(x, vset(1.44269504088896341f)));
    vec r = vfnma(n, vset(0.693359375f), x);
    r = vfnma(n, vset(-2.12194440e-4f), r);
    vec p = vset(1.9875691500e-4f);
    p = vfma(p, r, vset(1.3981999507e-3f));
    p = vfma(p, r, vset(8.3334519073e-3f));
    p = vfma(p, r, vset(4.1665795894e-2f));
    p = vfma(p, r, vset(1.6666665459e-1f));
    p = vfma(p, r, vset(5.0000001201e-1f));
    p = vfma(p, vmul(r, r), vadd(r, vset(1.0f)));
    return times_two_to(p, n);
}

/* element i of a float32 (BF = 0) or bfloat16 (BF = 1) array */
static inline float element(const int BF, const void *p, int64_t i) {
    return BF ? from_bf16(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
/* LANES elements from element i on, and back */
static inline vec lanes(const int BF, const void *p, int64_t i) {
    return BF ? from_bf16_lanes((const uint16_t *)p + i) : vload((const float *)p + i);
}
static inline void put_lanes(const int BF, void *p, int64_t i, vec value) {
    if (!BF) {
        vstore((float *)p + i, value);
        return;
    }
    float numbers[LANES];
    vstore(numbers, value);
    for (int j = 0; j < LANES; j++) ((uint16_t *)p)[i + j] = to_bf16(numbers[j]);
}

/* One key/value head: M queries (rows of D) over S keys and values (rows of D) -> out (M rows of
   D). The queries are held transposed (`qt`: D rows of QUERIES), so that each key's D numbers
   score LANES queries a multiply-add with no sums across lanes; `scores` (S rows of QUERIES) holds
   the scores, then their exponentials. W (vectors of queries: lanes past M score zeros, never
   read) and D are constants where it is called, so that the sums stay in registers. Each score
   and each output number is one sum in a fixed order, whatever KEYS and CHUNK are. */
static inline __attribute__((always_inline)) void attend_head(
    const int BF, const int64_t W, const int64_t D, const void *q, int64_t M, const void *k, const void *v,
    int64_t S, float scale, void *out, float *scores, float *qt) {
    memset(qt, 0, sizeof(float) * D * QUERIES);
    for (int64_t m = 0; m < M; m++)
        for (int64_t d = 0; d < D; d++) qt[d * QUERIES + m] = element(BF, q, m * D + d) * scale;
    vec best[VECTORS], total[VECTORS];
    for (int64_t w = 0; w < W; w++) best[w] = vset(-INFINITY), total[w] = vzero();
    int64_t s = 0;
    for (; s + KEYS <= S; s += KEYS) {
        vec sums[KEYS][VECTORS];
        for (int a = 0; a < KEYS; a++)
            for (int64_t w = 0; w < W; w++) sums[a][w] = vzero();
        for (int64_t d = 0; d < D; d++)
            for (int64_t w = 0; w < W; w++) {
                const vec column = vload(qt + d * QUERIES + LANES * w);
                for (int a = 0; a < KEYS; a++)
                    sums[a][w] = vfma(column, vset(element(BF, k, (s + a) * D + d)), sums[a][w]);
            }
        for (int a = 0; a < KEYS; a++)
            for (int64_t w = 0; w < W; w++) {
                vstore(scores + (s + a) * QUERIES + LANES * w, sums[a][w]);
                best[w] = vmax(best[w], sums[a][w]);
            }
    }
    for (; s < S; s++) {
        vec sums[VECTORS];
        for (int64_t w = 0; w < W; w++) sums[w] = vzero();
        for (int64_t d = 0; d < D; d++)
            for (int64_t w = 0; w < W; w++)
                sums[w] = vfma(vload(qt + d * QUERIES + LANES * w), vset(element(BF, k, s * D + d)), sums[w]);
        for (int64_t w = 0; w < W; w++) {
            vstore(scores + s * QUERIES + LANES * w, sums[w]);
            best[w] = vmax(best[w], sums[w]);
        }
    }
    for (s = 0; s < S; s++)
        for (int64_t w = 0; w < W; w++) {
            const vec e = exp_lanes(vsub(vload(scores + s * QUERIES + LANES * w), best[w]));
            vstore(scores + s * QUERIES + LANES * w, e);
            total[w] = vadd(total[w], e);
        }
    float inverse[QUERIES];
    for (int64_t w = 0; w < W; w++) vstore(inverse + LANES * w, vdiv(vset(1.0f), total[w]));
    const int64_t V = D / LANES; /* registers of a value row */
    for (int64_t m0 = 0; m0 < M; m0 += 4) { /* four queries at a time share each value's loads */
        const int64_t count = M - m0 < 4 ? M - m0 : 4;
        for (int64_t j0 = 0; j0 < V; j0 += CHUNK) {
            const int64_t chunk = V - j0 < CHUNK ? V - j0 : CHUNK;
            vec sums[4][CHUNK];
            for (int64_t a = 0; a < count; a++)
                for (int64_t j = 0; j < chunk; j++) sums[a][j] = vzero();
            for (int64_t t = 0; t < S; t++)
                for (int64_t j = 0; j < chunk; j++) {
                    const vec value = lanes(BF, v, t * D + LANES * (j0 + j));
                    for (int64_t a = 0; a < count; a++)
                        sums[a][j] = vfma(vset(scores[t * QUERIES + m0 + a]), value, sums[a][j]);
                }
            for (int64_t a = 0; a < count; a++) {
                const vec share = vset(inverse[m0 + a]);
                for (int64_t j = 0; j < chunk; j++)
                    put_lanes(BF, out, (m0 + a) * D + LANES * (j0 + j), vmul(sums[a][j], share));
            }
        }
    }
}

/* W (rounded up to 1, 2 or 4 vectors) and D as constants for the common shapes, so that the sums
   stay in registers */
#define ATTEND_SHAPES(BF)                                                                    \
    if (D == 32 && W == 1) attend_head(BF, 1, 32, q, M, k, v, S, scale, out, scores, qt);            \
    else if (D == 32 && W == 2) attend_head(BF, 2, 32, q, M, k, v, S, scale, out, scores, qt);       \
    else if (D == 32 && W <= 4) attend_head(BF, 4, 32, q, M, k, v, S, scale, out, scores, qt);       \
    else if (D == 64 && W == 1) attend_head(BF, 1, 64, q, M, k, v, S, scale, out, scores, qt);       \
    else if (D == 64 && W == 2) attend_head(BF, 2, 64, q, M, k, v, S, scale, out, scores, qt);       \
    else if (D == 64 && W <= 4) attend_head(BF, 4, 64, q, M, k, v, S, scale, out, scores, qt);       \
    else if (D == 128 && W == 1) attend_head(BF, 1, 128, q, M, k, v, S, scale, out, scores, qt);     \
    else if (D == 128 && W == 2) attend_head(BF, 2, 128, q, M, k, v, S, scale, out, scores, qt);     \
    else if (D == 128 && W <= 4) attend_head(BF, 4, 128, q, M, k, v, S, scale, out, scores, qt);     \
    else attend_head(BF, W, D, q, M, k, v, S, scale, out, scores, qt);

static void attend_one(int bf16, const void *q, int64_t M, const void *k, const void *v, int64_t S, int64_t D,
                       float scale, void *out, float *scores, float *qt) {
    const int64_t W = (M + LANES - 1) / LANES;
    if (bf16) {
        ATTEND_SHAPES(1)
    } else {
        ATTEND_SHAPES(0)
    }
}
#endif

/* How many queries a head's attention call takes at most (0: this build has no attention; the
   caller keeps PyTorch's), and which head sizes: a multiple of 16 up to 256. */
int64_t infill_attention_queries(void) {
#if defined(LANES)
    return MOST_QUERIES;
#else
    return 0;
#endif
}

/* Softmax attention without a mask, heads x M queries over heads x S keys and values (each head's
   rows contiguous: q and out heads x M x D, k and v heads x S x D), scores scaled by `scale`; the
   numbers float32, or bfloat16 where `bf16` (computed in float32, the output rounded once). A
   head's queries go in runs of at most RUN, as even as vectors allow, each run a task for a
   thread. 0 done; 1 a shape this build does not take (nothing written); 2 no memory. */
int infill_attend(const void *q, int64_t heads, int64_t M, const void *k, const void *v, int64_t S,
                  int64_t D, float scale, void *out, int bf16, int threads) {
#if defined(LANES)
    if (M > MOST_QUERIES || D % 16 || D > 256 || M < 1 || S < 1) return 1;
    const int64_t size = bf16 ? 2 : 4, runs = (M + RUN - 1) / RUN;
    const int64_t per_run = ((M + runs - 1) / runs + LANES - 1) / LANES * LANES;
    int failed = 0;
#pragma omp parallel num_threads(threads) reduction(| : failed)
    {
        /* each thread's scratch, kept between calls: a fresh one this size (128 KiB at 512 keys)
           is a fresh mapping of memory, its pages faulted in at every call */
        static __thread float *scores = NULL, *qt = NULL;
        static __thread int64_t held = 0;
        if (held < S) {
            free(scores), free(qt);
            scores = aligned_alloc(64, sizeof(float) * (size_t)(S * QUERIES));
            qt = aligned_alloc(64, sizeof(float) * 256 * QUERIES);
            held = scores && qt ? S : 0;
        }
        if (held < S) failed = 1;
#pragma omp for schedule(static)
        for (int64_t task = 0; task < heads * runs; task++) {
            const int64_t h = task / runs, m0 = task % runs * per_run;
            const int64_t count = M - m0 < per_run ? M - m0 : per_run, at = (h * M + m0) * D * size;
            if (held >= S && count > 0)
                attend_one(bf16, (const char *)q + at, count, (const char *)k + h * S * D * size,
                           (const char *)v + h * S * D * size, S, D, scale, (char *)out + at, scores, qt);
        }
    }
    return failed ? 2 : 0;
#else
    (void)q, (void)heads, (void)M, (void)k, (void)v, (void)S, (void)D, (void)scale, (void)out, (void)bf16,
        (void)threads;
    return 1;
#endif
}

/* The MLP's SwiGLU on the fused gate/up product: x (rows x 2n, each row's gate then its up) ->
   out (rows x n) = silu(gate) * up, silu(g) = g / (1 + e^-g); float32, or bfloat16 rounded as
   PyTorch's bfloat16 operations round (silu's result, then the product). With AVX-512 or AVX2
   the exponential is exp_lanes' (relative error about 1e-7), elsewhere the C library's. */
static inline float silu(float g) { return g / (1.0f + expf(-g)); }

void infill_swiglu(const void *x, int64_t rows, int64_t n, void *out, int bf16, int threads) {
#pragma omp parallel for num_threads(threads) if (rows * n >= PARALLEL_FROM)
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = 0;
#if defined(LANES)
        for (; i + LANES <= n; i += LANES) {
            const vec g = lanes(bf16, x, r * 2 * n + i), u = lanes(bf16, x, r * 2 * n + n + i);
            vec s = vdiv(g, vadd(vset(1.0f), exp_lanes(vsub(vzero(), g))));
            if (bf16) s = rounded_to_bf16(s); /* silu's result rounded before the product, as PyTorch's */
            put_lanes(bf16, out, r * n + i, vmul(s, u));
        }
#endif
        for (; i < n; i++) {
            if (bf16) {
                const uint16_t *h = (const uint16_t *)x + r * 2 * n;
                const float s = from_bf16(to_bf16(silu(from_bf16(h[i]))));
                ((uint16_t *)out)[r * n + i] = to_bf16(s * from_bf16(h[n + i]));
            } else {
                const float *f = (const float *)x + r * 2 * n;
                ((float *)out)[r * n + i] = silu(f[i]) * f[n + i];
            }
        }
    }
}

/* A span layer's attention (the two span layers below): each run's fresh keys and values from qkv
   (T tokens x (H + 2 KV) heads x Dh numbers of `size` bytes: the queries', the keys', the values')
   written into its cache at its positions, then its queries' attention over that cache, into y
   (T x H x Dh). Run s: rows[s] canvas rows of counts[s] positions positions[s], its cache
   keys[s], values[s] (rows[s] x KV x lengths[s] x Dh). A key/value head's group of H / KV query
   heads goes in as one run of queries. q and att: scratch of H x (the most positions) x Dh. */
static int attend_runs(const char *qkv, int64_t size, int64_t H, int64_t KV, int64_t Dh, int64_t segments,
                       const int64_t *rows, const int64_t *counts, const int64_t *lengths, char *const *keys,
                       char *const *values, const int64_t *const *positions, float scale, char *q, char *att,
                       char *y, int threads) {
    const int64_t width = (H + 2 * KV) * Dh, head = Dh * size, group = H / KV;
    int64_t t0 = 0; /* the run's first token */
    for (int64_t s = 0; s < segments; s++) {
        const int64_t P = counts[s], S = lengths[s];
        for (int64_t r = 0; r < rows[s]; r++) {
            char *k = keys[s] + r * KV * S * head, *v = values[s] + r * KV * S * head;
            for (int64_t p = 0; p < P; p++) {
                const char *token = qkv + (t0 + r * P + p) * width * size;
                for (int64_t h = 0; h < H; h++) memcpy(q + (h * P + p) * head, token + h * head, head);
                for (int64_t h = 0; h < KV; h++) {
                    memcpy(k + (h * S + positions[s][p]) * head, token + (H + h) * head, head);
                    memcpy(v + (h * S + positions[s][p]) * head, token + (H + KV + h) * head, head);
                }
            }
            const int failed = infill_attend(q, KV, group * P, k, v, S, Dh, scale, att, size == 2, threads);
            if (failed) return failed;
            for (int64_t p = 0; p < P; p++)
                for (int64_t h = 0; h < H; h++)
                    memcpy(y + ((t0 + r * P + p) * H + h) * head, att + (h * P + p) * head, head);
        }
        t0 += rows[s] * P;
    }
    return 0;
}

/* One allocation for a span layer's scratch: n parts of sizes[i] numbers of `size` bytes, part[i]
   where each starts. NULL where there is no memory (the caller frees the allocation). */
static void *scratch(const int64_t *sizes, int n, size_t size, void **part) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)sizes[i] * size;
    char *memory = malloc(total);
    for (size_t i = 0, at = 0; memory && i < (size_t)n; at += (size_t)sizes[i] * size, i++) part[i] = memory + at;
    return memory;
}

static int64_t most_positions(int64_t segments, const int64_t *counts) {
    int64_t most = 1;
    for (int64_t s = 0; s < segments; s++) most = counts[s] > most ? counts[s] : most;
    return most;
}

/* A span layer's scratch (the two span layers below), T tokens of E, numbers of `size` bytes:
   part 0 the norm's output and then the residual sum (T x E), 1 the qkv product (T x width),
   2 and 3 the queries and the attention by head (most positions x `queries`: heads x their
   size), 4 the attention by token (T x queries), 5 the output product, 6 the second norm's
   output (T x E each), 7 the gate/up product (T x 2 inner), 8 the gate (T x inner), 9 the down
   product (T x E). */
static void *layer_scratch(int64_t T, int64_t E, int64_t width, int64_t queries, int64_t most, int64_t inner,
                           size_t size, void **part) {
    const int64_t sizes[] = {T * E, T * width, most * queries, most * queries, T * queries, T * E,
                             T * E, T * 2 * inner, T * inner, T * E};
    return scratch(sizes, 10, size, part);
}

/* One layer of the shipped family's span pass in bfloat16, in one call: what Block.forward does
   for its T query tokens with this file's operations and infill's bfloat16 product (`linear`:
   bf16_native.c's infill_bf16_linear, handed over as a pointer), in the same order, so the same
   numbers bit for bit; one call instead of some forty of PyTorch's and ours from Python.

   x (T x E) is the layer's input, replaced by its output. The tokens are `segments` runs one after
   another (attend_runs); cos and sin (T x Dh/2): each token's angles. Weights packed for `linear`
   (qkv: 3E outputs, out: E, gate_up: 2 inner, down: E), no biases. 0 done; else the attention's
   code (x then unchanged, the caches part written). */
typedef void (*bf16_linear_fn)(const uint16_t *, int64_t, int64_t, const uint16_t *, int64_t, const float *,
                               uint16_t *, int);

int infill_span_block_bf16(uint16_t *x, int64_t T, int64_t E, int64_t H, const uint16_t *cos,
                           const uint16_t *sin, const uint16_t *norm1, float eps1, const uint16_t *norm2,
                           float eps2, bf16_linear_fn linear, const uint16_t *w_qkv, const uint16_t *w_out,
                           const uint16_t *w_gate_up, const uint16_t *w_down, int64_t inner, int64_t segments,
                           const int64_t *rows, const int64_t *counts, const int64_t *lengths,
                           char *const *keys, char *const *values, const int64_t *const *positions,
                           float scale, int threads) {
    const int64_t Dh = E / H;
    void *part[10];
    void *memory = layer_scratch(T, E, 3 * E, E, most_positions(segments, counts), inner, sizeof(uint16_t), part);
    if (!memory) return 2;
    uint16_t *h = part[0], *qkv = part[1], *q = part[2], *att = part[3], *y = part[4], *o = part[5];
    uint16_t *normed = part[6], *gu = part[7], *g = part[8], *m = part[9];

    infill_rms_norm_bf16(x, norm1, T, E, eps1, h, threads);
    linear(h, T, E, w_qkv, 3 * E, NULL, qkv, threads);
    infill_rotate_halves_bf16(qkv, T, 3 * H, 2 * H, Dh, cos, sin, T);
    const int failed = attend_runs((const char *)qkv, 2, H, H, Dh, segments, rows, counts, lengths, keys, values,
                                   positions, scale, (char *)q, (char *)att, (char *)y, threads);
    if (!failed) {
        linear(y, T, E, w_out, E, NULL, o, threads);
        infill_add_rms_norm_bf16(x, o, norm2, T, E, eps2, h, normed, threads); /* h: the residual sum */
        linear(normed, T, E, w_gate_up, 2 * inner, NULL, gu, threads);
        infill_swiglu(gu, T, inner, g, 1, threads);
        linear(g, T, inner, w_down, E, NULL, m, threads);
        for (int64_t i = 0; i < T * E; i++) x[i] = to_bf16(from_bf16(h[i]) + from_bf16(m[i]));
    }
    free(memory);
    return failed;
}

/* One layer of a published family's span pass (infill/models/decoder.py's Layer) with 4-bit
   weights and float32 numbers, in one call: what its modules do with this file's operations and
   infill's 4-bit product (`int4`: int4_native.c's infill_int4_linear, handed over as a pointer),
   in the same order, so the same numbers. x (T x E) float32, replaced by the layer's output; H
   query heads and KV key/value heads of Dh; cos and sin (T x Dh): each token's angles (each angle
   twice). Products p = 0..3 (qkv, o, gate_up, down): tiles[p], scales[p], offsets[p] in groups
   of groups[p] inputs; qkv_bias (H + 2 KV) x Dh floats or none. Runs as in attend_runs. 0 done;
   else the product's or the attention's code. */
typedef int (*int4_linear_fn)(const float *, int64_t, int64_t, int64_t, const void *, const void *,
                              const void *, int64_t, float *, int);

int infill_span_layer_int4(float *x, int64_t T, int64_t E, int64_t H, int64_t KV, int64_t Dh,
                           const float *cos, const float *sin, const float *norm1, float eps1,
                           const float *norm2, float eps2, int4_linear_fn int4, const void *const *tiles,
                           const void *const *scales, const void *const *offsets, const int64_t *groups,
                           const float *qkv_bias, int64_t inner, int64_t segments, const int64_t *rows,
                           const int64_t *counts, const int64_t *lengths, char *const *keys,
                           char *const *values, const int64_t *const *positions, float scale, int threads) {
    const int64_t width = (H + 2 * KV) * Dh;
    void *part[10];
    void *memory = layer_scratch(T, E, width, H * Dh, most_positions(segments, counts), inner, sizeof(float), part);
    if (!memory) return 2;
    float *h = part[0], *qkv = part[1], *q = part[2], *att = part[3], *y = part[4], *o = part[5];
    float *normed = part[6], *gu = part[7], *g = part[8], *m = part[9];

    infill_rms_norm(x, norm1, T, E, eps1, h, threads);
    int failed = int4(h, T, E, groups[0], tiles[0], scales[0], offsets[0], width, qkv, threads);
    if (!failed && qkv_bias)
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < width; i++) qkv[t * width + i] += qkv_bias[i];
    if (!failed) {
        infill_rotate(qkv, T, H + 2 * KV, H + KV, Dh, cos, sin, T);
        failed = attend_runs((const char *)qkv, 4, H, KV, Dh, segments, rows, counts, lengths, keys, values,
                             positions, scale, (char *)q, (char *)att, (char *)y, threads);
    }
    if (!failed) failed = int4(y, T, H * Dh, groups[1], tiles[1], scales[1], offsets[1], E, o, threads);
    if (!failed) {
        infill_add_rms_norm(x, o, norm2, T, E, eps2, h, normed, threads); /* h: the residual sum */
        failed = int4(normed, T, E, groups[2], tiles[2], scales[2], offsets[2], 2 * inner, gu, threads);
    }
    if (!failed) {
        infill_swiglu(gu, T, inner, g, 0, threads);
        failed = int4(g, T, inner, groups[3], tiles[3], scales[3], offsets[3], E, m, threads);
    }
    if (!failed)
        for (int64_t i = 0; i < T * E; i++) x[i] = h[i] + m[i];
    free(memory);
    return failed;
}
