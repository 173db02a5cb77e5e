/* Fused decode attention over a shared-prompt KV cache, fp32 throughout.
 *
 * The fp32 sibling of decode_attention.c (same semantics, see there): one new query token per
 * row attends over its prompt's keys (stored once per prompt, left padded: columns before
 * `prompt_start[p]` are padding) followed by the row's own completion keys (columns 0..T-1),
 * in one exact softmax (all scores, then max, exp, sum), the G query heads of a kv head
 * sharing every key and value load (grouped-query attention).
 *
 * Keys are stored in blocks of 16 columns, transposed inside a block ([..., column / 16, D, 16]:
 * element (j, d) of a block at d * 16 + j): one item's keys are one contiguous stream, and the
 * score loop computes VW columns per vector (16 on AVX-512, 8 on AVX2, 4 portable; see
 * simd_f32.h) with the G query heads' partial sums held in registers, no horizontal
 * reductions. Values are plain rows ([..., column, D]): the weighted sum broadcasts one
 * probability per (head, column) against VW dims of the value row.
 *
 * Layouts (element strides, fp32):
 *   q    [R, Hq, D], row stride q_row_stride
 *   pk   [P, Hkv, ceil(W / 16), D, 16]        pv [P, Hkv, W, D]
 *   ck   [rows, Hkv, ceil(Tmax / 16), D, 16]  cv [rows, Hkv, Tmax, D]   (row r of the batch)
 *   out  [R, Hq * D]
 *   new_k, new_v [R, Hkv, D] with row strides k_row_stride / v_row_stride: this step's keys and
 *        values, written into column T - 1 of ck / cv before attending (NULL: already there)
 * Key lanes past a block's last real column are read (their scores are discarded), value
 * rows past the attended columns never are: neither needs initialising.
 * Query head h belongs to kv head h / G (G = Hq / Hkv), as in transformers' repeat_kv.
 */
#include <stdlib.h>
#include "simd_f32.h"

#define MAX_GROUP 8
#define KEY_BLOCK 16
#define MAX_LANES 8  /* lane vectors (scores) / dim vectors (values) per pass, at most */
/* Register budget: partial sums held at once, (query heads) x (vectors per pass). With 16
 * vector registers (AVX2, SSE, NEON) 9 sums, their 3 loads and a broadcast fit (9 independent
 * FMA chains hide the 4-cycle latency on 2 FMA ports); AVX-512 has 32 registers. */
#if VW == 16
#define ACC_BUDGET 18
#else
#define ACC_BUDGET 9
#endif
#define VALUE_ROWS 64  /* value rows per pass (16 KiB at D = 64): re-read from L1 per dim chunk */

/* Vectors per pass for G query heads: as many as the register budget allows. */
#define PER_PASS(G) \
    ((G) * MAX_LANES <= ACC_BUDGET ? MAX_LANES : ACC_BUDGET / (G) < 1 ? 1 : ACC_BUDGET / (G))

/* Software prefetch of the next item's completion keys / values, mirrored: every load of this
 * item's completion data also prefetches the same offset `ahead` floats further (the next
 * item's row of the cache; 0 for none). The cache is cold (each step's weight stream evicts
 * it); the hardware prefetcher alone leaves the memory idle while an item computes, and one
 * burst of the next item's lines at an item's start stalls on the line-fill buffers instead of
 * overlapping with the arithmetic. */
static inline __attribute__((always_inline)) void prefetch_ahead(const float *p, int64_t ahead) {
    if (ahead) __builtin_prefetch(p + ahead, 0, 3);
}

/* s[g * LS + c] = sum_d q[g][d] k[c][d] for the LP lane vectors starting at vector v0 (VW
 * columns each, possibly in two blocks): the G x LP sums stay in registers over the d loop
 * (G and LP are compile-time constants at every call, so the loops unroll). */
static inline __attribute__((always_inline)) void scores_chunk(
        const int G, const int LP, const int64_t D, const float *q, const float *kb, int64_t v0,
        float *s, int64_t LS, int64_t ahead) {
    const float *k[MAX_LANES];
    vf acc[MAX_GROUP][MAX_LANES];
    for (int i = 0; i < LP; i++) {
        const int64_t c = (v0 + i) * VW;
        k[i] = kb + (c / KEY_BLOCK) * D * KEY_BLOCK + c % KEY_BLOCK;
        for (int g = 0; g < G; g++) acc[g][i] = vf_zero();
    }
    for (int64_t d = 0; d < D; d++) {
        vf kv[MAX_LANES];
        for (int i = 0; i < LP; i++) {
            prefetch_ahead(k[i] + d * KEY_BLOCK, ahead);
            kv[i] = vf_load(k[i] + d * KEY_BLOCK);
        }
        for (int g = 0; g < G; g++) {
            const vf qg = vf_set1(q[g * D + d]);
            for (int i = 0; i < LP; i++) acc[g][i] = vf_fmadd(qg, kv[i], acc[g][i]);
        }
    }
    for (int g = 0; g < G; g++)
        for (int i = 0; i < LP; i++) vf_store(s + g * LS + (v0 + i) * VW, acc[g][i]);
}

/* Scores of columns 0 .. n-1 (and up to the end of the last block) into s[g * LS + c]: passes
 * of LP vectors, the remainder in passes of 4, 2 and 1 (each a compile-time width). */
static inline __attribute__((always_inline)) void scores(
        const int G, const int64_t D, const float *q, const float *kb, int64_t n, float *s,
        int64_t LS, int64_t ahead) {
    const int LP = PER_PASS(G);
    const int64_t vectors = (n + KEY_BLOCK - 1) / KEY_BLOCK * (KEY_BLOCK / VW);
    int64_t v = 0;
    for (; v + LP <= vectors; v += LP) scores_chunk(G, LP, D, q, kb, v, s, LS, ahead);
    if (LP > 4 && v + 4 <= vectors) scores_chunk(G, 4, D, q, kb, v, s, LS, ahead), v += 4;
    if (LP > 2 && v + 2 <= vectors) scores_chunk(G, 2, D, q, kb, v, s, LS, ahead), v += 2;
    if (LP > 1 && v < vectors) scores_chunk(G, 1, D, q, kb, v, s, LS, ahead), v += 1;
}

/* s[lo..hi) <- exp(scale * (s - max)) in place; returns their sum. */
static float softmax_numerators(float *s, int64_t lo, int64_t hi, float scale) {
    vf vmax = vf_set1(-INFINITY);
    int64_t j = lo;
    for (; j + VW <= hi; j += VW) vmax = vf_max(vmax, vf_load(s + j));
    if (j < hi) vmax = vf_max(vmax, vf_load_part(s + j, hi - j, -INFINITY));
    const vf shift = vf_set1(vf_hmax(vmax) * scale), vscale = vf_set1(scale);
    vf total = vf_zero();
    for (j = lo; j + VW <= hi; j += VW) {
        const vf e = vf_exp(vf_sub(vf_mul(vf_load(s + j), vscale), shift));
        vf_store(s + j, e);
        total = vf_add(total, e);
    }
    if (j < hi) {
        const vf e = vf_exp(vf_sub(vf_mul(vf_load_part(s + j, hi - j, 0.0f), vscale), shift));
        vf_store_part(s + j, e, hi - j);
        total = vf_add(total, vf_load_part(s + j, hi - j, 0.0f));  /* the real lanes only */
    }
    return vf_hsum(total);
}

/* acc[g][c0 .. c0 + CH VW) += sum_{j < n} p[g][j] v[j][c0 ..]: the G x CH sums in registers. */
static inline __attribute__((always_inline)) void weighted_values_chunk(
        const int G, const int CH, const int64_t D, int64_t c0, const float *p, int64_t LS,
        const float *v, int64_t n, float *acc, int64_t ahead) {
    vf a[MAX_GROUP][MAX_LANES];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < CH; c++) a[g][c] = vf_load(acc + g * D + c0 + c * VW);
    for (int64_t j = 0; j < n; j++) {
        vf vv[MAX_LANES];
        for (int c = 0; c < CH; c++) {
            prefetch_ahead(v + j * D + c0 + c * VW, ahead);
            vv[c] = vf_load(v + j * D + c0 + c * VW);
        }
        for (int g = 0; g < G; g++) {
            const vf pg = vf_set1(p[g * LS + j]);
            for (int c = 0; c < CH; c++) a[g][c] = vf_fmadd(pg, vv[c], a[g][c]);
        }
    }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < CH; c++) vf_store(acc + g * D + c0 + c * VW, a[g][c]);
}

/* acc[g][:] += sum_{j < n} p[g][j] v[j][:] (p at stride LS per query head, v rows of D):
 * VALUE_ROWS rows at a time, so each pass over the dims re-reads them from L1; passes of CH
 * dim vectors, the remainder in passes of 4, 2 and 1 (as in scores()). */
static inline __attribute__((always_inline)) void weighted_values(
        const int G, const int64_t D, const float *p, int64_t LS, const float *v, int64_t n,
        float *acc, int64_t ahead) {
    const int CH = PER_PASS(G);
    const int64_t dims = D / VW;
    for (int64_t j = 0; j < n; j += VALUE_ROWS) {
        const int64_t m = n - j < VALUE_ROWS ? n - j : VALUE_ROWS;
        const float *pj = p + j, *vj = v + j * D;
        int64_t c = 0;
#define PASS(ch) weighted_values_chunk(G, ch, D, c * VW, pj, LS, vj, m, acc, ahead), c += (ch)
        while (c + CH <= dims) PASS(CH);
        if (CH > 4 && c + 4 <= dims) PASS(4);
        if (CH > 2 && c + 2 <= dims) PASS(2);
        if (CH > 1 && c < dims) PASS(1);
#undef PASS
    }
}

/* Prompt scores at s[0 .. W) (padding included: cheaper than a ragged first block), completion
 * scores at s + W (written second: they overwrite the prompt's last-block overhang); softmax
 * over [start, W + T); then the values over the same range. Loads of the completion keys /
 * values prefetch `key_ahead` / `value_ahead` floats further: the next item's (0: last item). */
static inline __attribute__((always_inline)) void attend_one(
        const int G, const int64_t D, const float *q, float scale, const float *pk,
        const float *pv, int64_t W, int64_t start, const float *ck, const float *cv, int64_t T,
        float *s, int64_t LS, float *acc, float *out, int64_t key_ahead, int64_t value_ahead) {
    const int64_t L = W + T;
    scores(G, D, q, pk, W, s, LS, 0);
    scores(G, D, q, ck, T, s + W, LS, key_ahead);
    float inv[MAX_GROUP];
    for (int g = 0; g < G; g++) inv[g] = 1.0f / softmax_numerators(s + g * LS, start, L, scale);
    memset(acc, 0, sizeof(float) * G * D);
    weighted_values(G, D, s + start, LS, pv + start * D, W - start, acc, 0);
    weighted_values(G, D, s + W, LS, cv, T, acc, value_ahead);
    for (int g = 0; g < G; g++) {
        const vf ig = vf_set1(inv[g]);
        for (int64_t d = 0; d < D; d += VW)
            vf_store(out + g * D + d, vf_mul(vf_load(acc + g * D + d), ig));
    }
}

/* Returns 0 on success, 1 if a work buffer could not be allocated, 2 for unsupported shapes
 * (G = Hq / Hkv above MAX_GROUP, D not a multiple of the vector width VW). */
int decode_attention_f32(
        const float *q, int64_t q_row_stride,
        const float *pk, const float *pv, int64_t W, const int64_t *prompt_start,
        float *ck, float *cv, int64_t Tmax, int64_t T,
        const float *new_k, int64_t k_row_stride, const float *new_v, int64_t v_row_stride,
        const int64_t *row_prompt, int64_t R, int64_t Hq, int64_t Hkv, int64_t D, float scale,
        float *out, int threads) {
    const int G = (int)(Hq / Hkv);
    if (Hkv < 1 || G < 1 || G > MAX_GROUP || Hq % Hkv || D % VW || T < 1 || T > Tmax)
        return 2;
    const int64_t wb = (W + KEY_BLOCK - 1) / KEY_BLOCK * KEY_BLOCK;
    const int64_t tb = (Tmax + KEY_BLOCK - 1) / KEY_BLOCK * KEY_BLOCK;
    /* per query head: W + T scores plus the last block's overhang, in whole 64-byte lines */
    const int64_t LS = (W + T + 2 * KEY_BLOCK - 1) / KEY_BLOCK * KEY_BLOCK;
    int failed = 0;
    #pragma omp parallel num_threads(threads) reduction(|:failed)
    {
        float *s = NULL;
        if (posix_memalign((void **)&s, 64, sizeof(float) * (size_t)(G * LS + G * D))) {
            failed = 1;
        } else {
            float *acc = s + G * LS;
            #pragma omp for schedule(static)
            for (int64_t item = 0; item < R * Hkv; item++) {
                const int64_t r = item / Hkv, h = item % Hkv, p = row_prompt[r];
                const float *qr = q + r * q_row_stride + h * G * D;
                const float *pkh = pk + (p * Hkv + h) * D * wb;
                const float *pvh = pv + (p * Hkv + h) * W * D;
                float *ckh = ck + (r * Hkv + h) * D * tb;
                float *cvh = cv + (r * Hkv + h) * Tmax * D;
                if (new_k) {  /* column c = T - 1: block c / 16, lane c % 16 */
                    const int64_t c = T - 1;
                    const float *nk = new_k + r * k_row_stride + h * D;
                    float *kblock = ckh + (c / KEY_BLOCK) * D * KEY_BLOCK + c % KEY_BLOCK;
                    for (int64_t d = 0; d < D; d++) kblock[d * KEY_BLOCK] = nk[d];
                    memcpy(cvh + c * D, new_v + r * v_row_stride + h * D, sizeof(float) * D);
                }
                const int64_t last = item + 1 == R * Hkv;
                const int64_t ka = last ? 0 : D * tb, va = last ? 0 : Tmax * D;
                float *o = out + r * Hq * D + h * G * D;
                const int64_t st = prompt_start[p];
                /* A constant G per branch lets the compiler unroll the query-head loops. */
#define ATTEND(g) attend_one(g, D, qr, scale, pkh, pvh, W, st, ckh, cvh, T, s, LS, acc, o, ka, va)
                switch (G) {
                case 1: ATTEND(1); break;
                case 2: ATTEND(2); break;
                case 3: ATTEND(3); break;
                case 4: ATTEND(4); break;
                case 5: ATTEND(5); break;
                case 6: ATTEND(6); break;
                case 7: ATTEND(7); break;
                default: ATTEND(8);
                }
#undef ATTEND
            }
            free(s);
        }
    }
    return failed;
}
