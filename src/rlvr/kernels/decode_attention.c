/* Fused decode attention over a shared-prompt KV cache (bf16 in, fp32 math, bf16 out).
 *
 * One new query token per row attends over its prompt's keys (stored once per prompt, left
 * padded: columns before `prompt_start[p]` are padding) followed by the row's own completion
 * keys (columns 0..T-1). This replaces two flash-attention calls and their log-sum-exp merge
 * (cascade attention) with one pass per (row, kv head), whose G query heads share every key and
 * value load (grouped-query attention). Softmax is exact (all scores, then max, exp, sum), fp32.
 *
 * Keys are stored in blocks of 16 columns, transposed inside a block by pairs of dims
 * ([..., column / 16, D / 2, 16, 2]: element (j, d) of a block at (d / 2) * 32 + j * 2 + d % 2):
 * one item's keys are one contiguous stream, the score loop computes 16 columns per vector
 * with the G query heads' partial sums held in registers (no horizontal reductions), and a
 * 512-bit load holds the (d, d + 1) pairs that vdpbf16ps multiplies. Values are stored by pairs
 * of columns ([..., column / 2, D, 2]: element (j, d) at (j / 2) * 2D + 2d + j % 2), so the
 * weighted sum of values is vdpbf16ps too: acc[g][d..d+15] += p[g][j] v[j][d..] + p[g][j+1]
 * v[j+1][d..], with the probabilities rounded to bf16 first, as torch's CPU flash attention
 * does for bf16 inputs (the normaliser is the fp32 sum of the unrounded exps).
 *
 * Layouts (element strides; bf16 stored as uint16):
 *   q    [R, Hq, D], row stride q_row_stride
 *   pk   [P, Hkv, ceil(W / 16), D / 2, 16, 2]       pv [P, Hkv, W / 2, D, 2]
 *   ck   [rows, Hkv, ceil(Tmax / 16), D / 2, 16, 2] cv [rows, Hkv, Tmax / 2, D, 2]  (row r)
 *   W and Tmax even; value columns that are never attended to must hold finite numbers
 *   (they are multiplied by zero probabilities).
 *   out  [R, Hq * D]
 *   new_k, new_v [R, Hkv, D] with row strides k_row_stride / v_row_stride: this step's keys and
 *        values, written into column T - 1 of ck / cv before attending (NULL: already there)
 * Query head h belongs to kv head h / G (G = Hq / Hkv), as in transformers' repeat_kv.
 */
#include <stdlib.h>
#include "bf16.h"

#define MAX_GROUP 8

/* Software prefetch of `count` bf16 elements from `p`, one hint per 64-byte line. */
static inline void prefetch(const uint16_t *p, int64_t count) {
    for (int64_t i = 0; i < count; i += 32) __builtin_prefetch(p + i, 0, 3);
}

#ifdef __AVX512F__
/* s[g * L + j] = sum_d q[g][d] * k[j][d] for j < n (keys in the blocked pair layout above):
 * 16 columns per vector, the G query heads' sums held in registers. With AVX512-BF16 each
 * instruction multiplies a pair of dims exactly in fp32 (vdpbf16ps); without it the pair is
 * split into two fp32 vectors. */
static inline __attribute__((always_inline)) void scores(
        const int G, const int64_t D, const float *qf, const uint16_t *qb, const uint16_t *kb,
        int64_t n, float *s, int64_t L) {
    for (int64_t j = 0; j < n; j += 16, kb += D * 16) {
        __m512 acc[MAX_GROUP];
        for (int g = 0; g < G; g++) acc[g] = _mm512_setzero_ps();
        for (int64_t dp = 0; dp < D / 2; dp++) {
            const __m512i k = _mm512_loadu_si512((const void *)(kb + dp * 32));
#ifdef __AVX512BF16__
            for (int g = 0; g < G; g++) {
                uint32_t pair;
                memcpy(&pair, qb + g * D + 2 * dp, sizeof pair);
                acc[g] = _mm512_dpbf16_ps(acc[g], (__m512bh)k, (__m512bh)_mm512_set1_epi32((int)pair));
            }
#else
            const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(k, 16));
            const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(k, _mm512_set1_epi32((int)0xFFFF0000u)));
            for (int g = 0; g < G; g++) {
                acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(qf[g * D + 2 * dp]), even, acc[g]);
                acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(qf[g * D + 2 * dp + 1]), odd, acc[g]);
            }
#endif
        }
        const __mmask16 m = tail_mask(n - j);
        for (int g = 0; g < G; g++) _mm512_mask_storeu_ps(s + g * L + j, m, acc[g]);
    }
}

/* s[lo..hi) <- exp(scale * (s - max)) in place; returns their sum. */
static inline float softmax_numerators(float *s, int64_t lo, int64_t hi, float scale) {
    __m512 vmax = _mm512_set1_ps(-3.0e38f);
    for (int64_t j = lo; j < hi; j += 16)
        vmax = _mm512_mask_max_ps(vmax, tail_mask(hi - j), vmax,
                                  _mm512_maskz_loadu_ps(tail_mask(hi - j), s + j));
    const __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(vmax) * scale);
    const __m512 vscale = _mm512_set1_ps(scale);
    __m512 total = _mm512_setzero_ps();
    for (int64_t j = lo; j < hi; j += 16) {
        const __mmask16 m = tail_mask(hi - j);
        const __m512 e = exp16(
            _mm512_fmsub_ps(_mm512_maskz_loadu_ps(m, s + j), vscale, shift));
        _mm512_mask_storeu_ps(s + j, m, e);
        total = _mm512_mask_add_ps(total, m, total, e);
    }
    return _mm512_reduce_add_ps(total);
}

/* pb[0 .. 2 ceil(n / 2)) <- bf16(s[0 .. n)), zero-padded to an even count. */
static inline void to_pairs(const float *s, int64_t n, uint16_t *pb) {
    const int64_t even = (n + 1) / 2 * 2;
    for (int64_t i = 0; i < even; i += 16)
        store_bf16_masked(pb + i, _mm512_maskz_loadu_ps(tail_mask(n - i), s + i), tail_mask(even - i));
}

/* out[g][c0 .. c0 + 16 CH) += sum over n column pairs of p[g][j] * v[j][c0 ..]: the G x CH
 * accumulators stay in registers across the pair loop (G and CH are compile-time constants
 * at every call, so the loops unroll; a run-time count would spill them to the stack). */
static inline __attribute__((always_inline)) void weighted_values_chunk(
        const int G, const int CH, const int64_t D, int64_t c0, const uint16_t *pb, int64_t LP,
        const uint16_t *v, int64_t n, float *out) {
    __m512 acc[MAX_GROUP][4];
    __m512i vv[4];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < CH; c++) acc[g][c] = _mm512_loadu_ps(out + g * D + c0 + 16 * c);
    for (int64_t jp = 0; jp < n; jp++) {
        for (int c = 0; c < CH; c++)
            vv[c] = _mm512_loadu_si512((const void *)(v + jp * 2 * D + 2 * (c0 + 16 * c)));
        for (int g = 0; g < G; g++) {
            uint32_t pair;
            memcpy(&pair, pb + g * 2 * LP + 2 * jp, sizeof pair);
#ifdef __AVX512BF16__
            const __m512bh w = (__m512bh)_mm512_set1_epi32((int)pair);
            for (int c = 0; c < CH; c++) acc[g][c] = _mm512_dpbf16_ps(acc[g][c], (__m512bh)vv[c], w);
#else
            const __m512 w0 = _mm512_set1_ps(bf16_to_f32((uint16_t)pair));
            const __m512 w1 = _mm512_set1_ps(bf16_to_f32((uint16_t)(pair >> 16)));
            for (int c = 0; c < CH; c++) {
                const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(vv[c], 16));
                const __m512 odd = _mm512_castsi512_ps(
                    _mm512_and_si512(vv[c], _mm512_set1_epi32((int)0xFFFF0000u)));
                acc[g][c] = _mm512_fmadd_ps(w1, odd, _mm512_fmadd_ps(w0, even, acc[g][c]));
            }
#endif
        }
    }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < CH; c++) _mm512_storeu_ps(out + g * D + c0 + 16 * c, acc[g][c]);
}

/* out[g][:] += sum_j p[g][j] * v[j][:] over n column pairs: pb holds the bf16 probabilities
 * by pairs (query head g at pb + g * 2 LP), v the values in pair layout. D in chunks of
 * 64 lanes (32 for G > 4, to fit the registers), then 16. */
static inline __attribute__((always_inline)) void weighted_values(
        const int G, const int64_t D, const uint16_t *pb, int64_t LP, const uint16_t *v,
        int64_t n, float *out) {
    int64_t c0 = 0;
    if (G <= 4)
        for (; c0 + 64 <= D; c0 += 64) weighted_values_chunk(G, 4, D, c0, pb, LP, v, n, out);
    else
        for (; c0 + 32 <= D; c0 += 32) weighted_values_chunk(G, 2, D, c0, pb, LP, v, n, out);
    for (; c0 < D; c0 += 16) weighted_values_chunk(G, 1, D, c0, pb, LP, v, n, out);
}
#define HEAD_DIM_MULTIPLE 16
#else
#include <math.h>
/* Portable loops (the compiler vectorises what it can). */
static inline __attribute__((always_inline)) void scores(
        const int G, const int64_t D, const float *qf, const uint16_t *qb, const uint16_t *kb,
        int64_t n, float *s, int64_t L) {
    (void)qb;
    for (int64_t j = 0; j < n; j++) {
        const uint16_t *k = kb + (j / 16) * D * 16 + (j % 16) * 2;
        for (int g = 0; g < G; g++) {
            float acc = 0.0f;
            for (int64_t d = 0; d < D; d++)
                acc += qf[g * D + d] * bf16_to_f32(k[(d / 2) * 32 + d % 2]);
            s[g * L + j] = acc;
        }
    }
}

static inline float softmax_numerators(float *s, int64_t lo, int64_t hi, float scale) {
    float m = s[lo], total = 0.0f;
    for (int64_t j = lo; j < hi; j++) m = s[j] > m ? s[j] : m;
    for (int64_t j = lo; j < hi; j++) { s[j] = expf(scale * (s[j] - m)); total += s[j]; }
    return total;
}

static inline void to_pairs(const float *s, int64_t n, uint16_t *pb) {
    for (int64_t i = 0; i < (n + 1) / 2 * 2; i++) pb[i] = i < n ? f32_to_bf16(s[i]) : 0;
}

static inline __attribute__((always_inline)) void weighted_values(
        const int G, const int64_t D, const uint16_t *pb, int64_t LP, const uint16_t *v,
        int64_t n, float *out) {
    for (int64_t jp = 0; jp < n; jp++)
        for (int g = 0; g < G; g++) {
            const float w0 = bf16_to_f32(pb[g * 2 * LP + 2 * jp]);
            const float w1 = bf16_to_f32(pb[g * 2 * LP + 2 * jp + 1]);
            for (int64_t d = 0; d < D; d++)
                out[g * D + d] += w0 * bf16_to_f32(v[jp * 2 * D + 2 * d])
                                  + w1 * bf16_to_f32(v[jp * 2 * D + 2 * d + 1]);
        }
}
#define HEAD_DIM_MULTIPLE 1
#endif

/* Scores for prompt columns 0..W-1 (padding included: cheaper than a ragged first block) and
 * completion columns at s + W; softmax over [start, W + T); the probabilities as bf16 pairs
 * (prompt pairs, then completion pairs); then values over the same range. */
static inline __attribute__((always_inline)) void attend_one(
        const int G, const int64_t D, const float *qf, const uint16_t *qb, float scale,
        const uint16_t *pk, const uint16_t *pv, int64_t W, int64_t start,
        const uint16_t *ck, const uint16_t *cv, int64_t T, float *s, uint16_t *pb, float *acc,
        uint16_t *out) {
    const int64_t L = W + T, LP = W / 2 + (T + 1) / 2, first = start / 2;
    scores(G, D, qf, qb, pk, W, s, L);
    scores(G, D, qf, qb, ck, T, s + W, L);
    float inv[MAX_GROUP];
    for (int g = 0; g < G; g++) {
        inv[g] = 1.0f / softmax_numerators(s + g * L, start, L, scale);
        memset(s + g * L, 0, sizeof(float) * start);  /* padding: probability 0 */
        to_pairs(s + g * L, W, pb + g * 2 * LP);
        to_pairs(s + g * L + W, T, pb + g * 2 * LP + W);
    }
    memset(acc, 0, sizeof(float) * G * D);
    weighted_values(G, D, pb + 2 * first, LP, pv + first * 2 * D, W / 2 - first, acc);
    weighted_values(G, D, pb + W, LP, cv, (T + 1) / 2, acc);
    for (int g = 0; g < G; g++) {
#ifdef __AVX512F__
        const __m512 scale_g = _mm512_set1_ps(inv[g]);
        for (int64_t d = 0; d < D; d += 16)
            store_bf16_masked(out + g * D + d, _mm512_mul_ps(_mm512_loadu_ps(acc + g * D + d), scale_g),
                              (__mmask16)0xFFFF);
#else
        for (int64_t d = 0; d < D; d++) out[g * D + d] = f32_to_bf16(acc[g * D + d] * inv[g]);
#endif
    }
}

/* Returns 0 on success, 1 if a work buffer could not be allocated, 2 for unsupported shapes
 * (G = Hq / Hkv above MAX_GROUP, D not a multiple of HEAD_DIM_MULTIPLE, odd W or Tmax). */
int decode_attention_bf16(
        const uint16_t *q, int64_t q_row_stride,
        const uint16_t *pk, const uint16_t *pv, int64_t W, const int64_t *prompt_start,
        uint16_t *ck, uint16_t *cv, int64_t Tmax, int64_t T,
        const uint16_t *new_k, int64_t k_row_stride, const uint16_t *new_v, int64_t v_row_stride,
        const int64_t *row_prompt, int64_t R, int64_t Hq, int64_t Hkv, int64_t D, float scale,
        uint16_t *out, int threads) {
    const int G = (int)(Hq / Hkv);
    if (G < 1 || G > MAX_GROUP || Hq % Hkv || D % HEAD_DIM_MULTIPLE || W % 2 || Tmax % 2)
        return 2;
    const int64_t wb = (W + 15) / 16 * 16, tb = (Tmax + 15) / 16 * 16;
    int failed = 0;
    #pragma omp parallel num_threads(threads) reduction(|:failed)
    {
        const int64_t L = W + T;
        const int64_t LP = W / 2 + (T + 1) / 2;
        float *s = malloc(sizeof(float) * (G * (L + 16) + 2 * G * D + G * (LP + 16)));
        if (!s) {
            failed = 1;
        } else {
            float *qf = s + G * (L + 16), *acc = qf + G * D;
            uint16_t *pb = (uint16_t *)(acc + G * D);  /* G x 2 LP bf16 probabilities */
            #pragma omp for schedule(static)
            for (int64_t item = 0; item < R * Hkv; item++) {
                const int64_t r = item / Hkv, h = item % Hkv, p = row_prompt[r];
                const uint16_t *qr = q + r * q_row_stride + h * G * D;
#ifndef __AVX512BF16__  /* the vdpbf16ps path multiplies the bf16 queries directly */
                for (int64_t i = 0; i < G * D; i++) qf[i] = bf16_to_f32(qr[i]);
#endif
                const uint16_t *pkh = pk + (p * Hkv + h) * D * wb;
                const uint16_t *pvh = pv + (p * Hkv + h) * W * D;
                uint16_t *ckh = ck + (r * Hkv + h) * D * tb;
                uint16_t *cvh = cv + (r * Hkv + h) * Tmax * D;  /* Tmax / 2 pairs of D x 2 */
                if (new_k) {  /* column c = T - 1: block c / 16, lane c % 16 */
                    const int64_t c = T - 1;
                    const uint16_t *nk = new_k + r * k_row_stride + h * D;
                    const uint16_t *nv = new_v + r * v_row_stride + h * D;
                    uint16_t *kblock = ckh + (c / 16) * D * 16 + (c % 16) * 2;
                    for (int64_t d = 0; d < D; d++) kblock[(d / 2) * 32 + d % 2] = nk[d];
                    uint16_t *vpair = cvh + (c / 2) * 2 * D + c % 2;
                    for (int64_t d = 0; d < D; d++) vpair[2 * d] = nv[d];
                }
                if (item + 1 < R * Hkv) {
                    /* The cache is cold (the step's weight stream evicts it): fetch the next
                     * item's completion keys / values while this one computes. */
                    const int64_t rn = (item + 1) / Hkv, hn = (item + 1) % Hkv;
                    prefetch(ck + (rn * Hkv + hn) * D * tb, (T + 15) / 16 * D * 16);
                    prefetch(cv + (rn * Hkv + hn) * Tmax * D, (T + 1) / 2 * 2 * D);
                }
                uint16_t *o = out + r * Hq * D + h * G * D;
                const int64_t st = prompt_start[p];
                /* A constant G per branch lets the compiler unroll the query-head loops. */
                switch (G) {
                case 1: attend_one(1, D, qf, qr, scale, pkh, pvh, W, st, ckh, cvh, T, s, pb, acc, o); break;
                case 2: attend_one(2, D, qf, qr, scale, pkh, pvh, W, st, ckh, cvh, T, s, pb, acc, o); break;
                case 3: attend_one(3, D, qf, qr, scale, pkh, pvh, W, st, ckh, cvh, T, s, pb, acc, o); break;
                case 4: attend_one(4, D, qf, qr, scale, pkh, pvh, W, st, ckh, cvh, T, s, pb, acc, o); break;
                default: attend_one(G, D, qf, qr, scale, pkh, pvh, W, st, ckh, cvh, T, s, pb, acc, o);
                }
            }
            free(s);
        }
    }
    return failed;
}
