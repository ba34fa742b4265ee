/* The k most likely tokens of each position (infill/engine/top_candidates.py): what a pass of a
   model with a large vocabulary chooses among (infill.engine.unmasking.candidates). PyTorch's
   topk takes 0.4 ms for 4 positions of a 152k-token vocabulary and 3.6 ms for 32 on two cores,
   a part of what a 0.5B network's whole pass costs; here each row is read once against a floor
   that a strided sample of it gives, and only the few values above the floor go through a heap.

   The answer is topk's: the k largest values, largest first, each with its index; among equal
   values the lowest indices, the first one first (topk leaves the order of ties open). */
#include <stdint.h>
#include <stdlib.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

/* whether (va, ia) ranks below (vb, ib): a smaller value, or an equal one at a larger index */
static inline int below(float va, int64_t ia, float vb, int64_t ib) { return va < vb || (va == vb && ia > ib); }

/* a heap of n, its lowest-ranked at the root: item i moved down to its place */
static void sift_down(float *v, int64_t *ix, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && below(v[l], ix[l], v[m], ix[m])) m = l;
        if (r < n && below(v[r], ix[r], v[m], ix[m])) m = r;
        if (m == i) return;
        const float tv = v[i];
        const int64_t ti = ix[i];
        v[i] = v[m], ix[i] = ix[m], v[m] = tv, ix[m] = ti;
        i = m;
    }
}

/* the k highest-ranked of values p[0 .. n) (n >= k), with their indices at[j] (j where at is NULL),
   into v and ix, highest first */
static void heap_top(const float *p, const int64_t *at, int64_t n, int64_t k, float *v, int64_t *ix) {
    for (int64_t i = 0; i < k; i++) v[i] = p[i], ix[i] = at ? at[i] : i;
    for (int64_t i = k / 2 - 1; i >= 0; i--) sift_down(v, ix, k, i);
    for (int64_t j = k; j < n; j++) {
        const int64_t index = at ? at[j] : j;
        if (below(v[0], ix[0], p[j], index)) {
            v[0] = p[j], ix[0] = index;
            sift_down(v, ix, k, 0);
        }
    }
    for (int64_t m = k - 1; m > 0; m--) { /* the lowest-ranked to the end, one by one */
        const float tv = v[0];
        const int64_t ti = ix[0];
        v[0] = v[m], ix[0] = ix[m], v[m] = tv, ix[m] = ti;
        sift_down(v, ix, m, 0);
    }
}

#define STRIDE 16 /* the sample: every STRIDE-th value of a row */

/* one row of V values: its k largest. The floor is the sample's (2k / STRIDE + 8)-th largest, so
   that about twice k values of a row lie above it; every value at least the floor is gathered
   (scratch bv, bi of `room` items) and the k largest of those kept. Where the floor would leave
   fewer than k, or more than the scratch holds (many equal values), or k is too small for such a
   floor (under 10), every value goes through the heap. */
static void top_row(const float *p, int64_t V, int64_t k, float *v, int64_t *ix, float *bv, int64_t *bi,
                    int64_t room) {
    const int64_t sampled = (V + STRIDE - 1) / STRIDE, rank = 2 * k / STRIDE + 8;
    if (rank <= k && rank <= sampled && sampled <= room) { /* (the sample's heap is v and ix: k long) */
        for (int64_t i = 0; i < sampled; i++) bv[i] = p[i * STRIDE];
        heap_top(bv, NULL, sampled, rank, v, ix);
        const float floor = v[rank - 1];
        int64_t count = 0, j = 0;
#if defined(__AVX512F__)
        const __m512 f = _mm512_set1_ps(floor);
        for (; j + 16 <= V && count + 16 <= room; j += 16) {
            const __m512 x = _mm512_loadu_ps(p + j);
            __mmask16 m = _mm512_cmp_ps_mask(x, f, _CMP_GE_OQ);
            if (m) {
                _mm512_mask_compressstoreu_ps(bv + count, m, x);
                for (; m; m &= m - 1) bi[count++] = j + __builtin_ctz(m);
            }
        }
#endif
        for (; j < V && count < room; j++)
            if (p[j] >= floor) bv[count] = p[j], bi[count++] = j;
        if (j == V && count >= k) {
            heap_top(bv, bi, count, k, v, ix);
            return;
        }
    }
    heap_top(p, NULL, V, k, v, ix);
}

/* p: rows x V float32; values (rows x k) and indices (rows x k) written, 1 <= k <= V. 0 done, 1 no
   memory for the scratch (nothing written). */
int infill_top_candidates(const float *p, int64_t rows, int64_t V, int64_t k, float *values, int64_t *indices,
                          int threads) {
    const int64_t sampled = (V + STRIDE - 1) / STRIDE, room = 16 * k > sampled ? 16 * k : sampled;
    int failed = 0;
#pragma omp parallel num_threads(threads) if (rows > 1) reduction(| : failed)
    {
        float *bv = malloc(sizeof(float) * (size_t)room);
        int64_t *bi = malloc(sizeof(int64_t) * (size_t)room);
        if (!bv || !bi) failed = 1;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            if (bv && bi) top_row(p + r * V, V, k, values + r * k, indices + r * k, bv, bi, room);
        free(bv), free(bi);
    }
    return failed;
}
