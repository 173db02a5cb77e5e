/* Fused decode attention over a shared-prompt KV cache (bf16 in, fp32 math, bf16 out).
 *
 * One new query token per row attends over its prompt's keys (stored once per prompt, left
 * padded: columns before `prompt_start[p]` are padding) followed by the row's own completion
 * keys (columns 0..T-1). This replaces two flash-attention calls and their log-sum-exp merge
 * (cascade attention) with one pass per (row, kv head), whose G query heads share every key and
 * value load (grouped-query attention). Softmax is exact (all scores, then max, exp, sum), fp32.
 *
 * Keys are stored in blocks of 16 columns, transposed inside a block ([..., column / 16, D, 16]):
 * one item's keys are one contiguous stream, and the score loop computes 16 columns per vector
 * with the G query heads' partial sums held in registers (no horizontal reductions). Values keep
 * the usual [..., column, D] layout: acc[g][:] += p[g][j] * v[j][:] vectorises over d.
 *
 * Layouts (element strides; bf16 stored as uint16):
 *   q    [R, Hq, D], row stride q_row_stride
 *   pk   [P, Hkv, ceil(W / 16), D, 16]       pv [P, Hkv, W, D]
 *   ck   [rows, Hkv, ceil(Tmax / 16), D, 16] cv [rows, Hkv, Tmax, D]   (row r of the batch)
 *   out  [R, Hq * D]
 * Query head h belongs to kv head h / G (G = Hq / Hkv), as in transformers' repeat_kv.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUP 8

static inline float bf16_to_f32(uint16_t x) {
    uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {  /* round to nearest even, as torch does */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#ifdef __AVX512F__
#include <immintrin.h>

static inline __m512 load_bf16x16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

/* s[g * L + j] = sum_d q[g][d] * k[j][d] for j < n, k in 16-column blocks. */
static inline __attribute__((always_inline)) void scores(
        const int G, const int64_t D, const float *qf, const uint16_t *kb, int64_t n,
        float *s, int64_t L) {
    for (int64_t j = 0; j < n; j += 16, kb += D * 16) {
        __m512 acc[MAX_GROUP];
        for (int g = 0; g < G; g++) acc[g] = _mm512_setzero_ps();
        for (int64_t d = 0; d < D; d++) {
            const __m512 k = load_bf16x16(kb + d * 16);
            for (int g = 0; g < G; g++)
                acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(qf[g * D + d]), k, acc[g]);
        }
        const __mmask16 m = tail_mask(n - j);
        for (int g = 0; g < G; g++) _mm512_mask_storeu_ps(s + g * L + j, m, acc[g]);
    }
}

/* exp(x) for x <= 0, 16 lanes: Cephes' expf polynomial on |r| <= ln2/2, then x 2^n (scalef).
 * Relative error < 2e-7; inputs below -87 are clamped (their weight is < 1e-37 of the max). */
static inline __m512 exp_nonpositive(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
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
        const __m512 e = exp_nonpositive(
            _mm512_fmsub_ps(_mm512_maskz_loadu_ps(m, s + j), vscale, shift));
        _mm512_mask_storeu_ps(s + j, m, e);
        total = _mm512_mask_add_ps(total, m, total, e);
    }
    return _mm512_reduce_add_ps(total);
}

/* out[g][:] += sum_j p[g * L + j] * v[j][:] for j < n: D in chunks of CH x 16 lanes whose
 * G x CH accumulators stay in registers across the j loop. Needs D % 16 == 0. */
static inline __attribute__((always_inline)) void weighted_values(
        const int G, const int64_t D, const float *p, int64_t L, const uint16_t *v, int64_t n,
        float *out) {
    const int CH = G <= 4 ? 4 : 2;
    for (int64_t c0 = 0; c0 < D; c0 += 16 * CH) {
        const int chunks = (int)((D - c0) / 16 < CH ? (D - c0) / 16 : CH);
        __m512 acc[MAX_GROUP][4], vv[4];
        for (int g = 0; g < G; g++)
            for (int c = 0; c < chunks; c++) acc[g][c] = _mm512_loadu_ps(out + g * D + c0 + 16 * c);
        for (int64_t j = 0; j < n; j++) {
            for (int c = 0; c < chunks; c++) vv[c] = load_bf16x16(v + j * D + c0 + 16 * c);
            for (int g = 0; g < G; g++) {
                const __m512 w = _mm512_set1_ps(p[g * L + j]);
                for (int c = 0; c < chunks; c++) acc[g][c] = _mm512_fmadd_ps(w, vv[c], acc[g][c]);
            }
        }
        for (int g = 0; g < G; g++)
            for (int c = 0; c < chunks; c++) _mm512_storeu_ps(out + g * D + c0 + 16 * c, acc[g][c]);
    }
}
#define HEAD_DIM_MULTIPLE 16
#else
#include <math.h>
/* Portable loops (the compiler vectorises what it can). */
static inline __attribute__((always_inline)) void scores(
        const int G, const int64_t D, const float *qf, const uint16_t *kb, int64_t n,
        float *s, int64_t L) {
    for (int64_t j = 0; j < n; j++) {
        const uint16_t *k = kb + (j / 16) * D * 16 + j % 16;
        for (int g = 0; g < G; g++) {
            float acc = 0.0f;
            for (int64_t d = 0; d < D; d++) acc += qf[g * D + d] * bf16_to_f32(k[d * 16]);
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

static inline __attribute__((always_inline)) void weighted_values(
        const int G, const int64_t D, const float *p, int64_t L, const uint16_t *v, int64_t n,
        float *out) {
    for (int64_t j = 0; j < n; j++)
        for (int g = 0; g < G; g++)
            for (int64_t d = 0; d < D; d++) out[g * D + d] += p[g * L + j] * bf16_to_f32(v[j * D + d]);
}
#define HEAD_DIM_MULTIPLE 1
#endif

/* Scores for prompt columns 0..W-1 (padding included: cheaper than a ragged first block) and
 * completion columns at s + W; softmax over [start, W + T); then values over the same range. */
static inline __attribute__((always_inline)) void attend_one(
        const int G, const int64_t D, const float *qf, float scale,
        const uint16_t *pk, const uint16_t *pv, int64_t W, int64_t start,
        const uint16_t *ck, const uint16_t *cv, int64_t T, float *s, float *acc, uint16_t *out) {
    const int64_t L = W + T;
    scores(G, D, qf, pk, W, s, L);
    scores(G, D, qf, ck, T, s + W, L);
    float inv[MAX_GROUP];
    for (int g = 0; g < G; g++) inv[g] = 1.0f / softmax_numerators(s + g * L, start, L, scale);
    memset(acc, 0, sizeof(float) * G * D);
    weighted_values(G, D, s + start, L, pv + start * D, W - start, acc);
    weighted_values(G, D, s + W, L, cv, T, acc);
    for (int g = 0; g < G; g++)
        for (int64_t d = 0; d < D; d++) out[g * D + d] = f32_to_bf16(acc[g * D + d] * inv[g]);
}

/* Returns 0 on success, 1 if a work buffer could not be allocated, 2 for unsupported shapes
 * (G = Hq / Hkv above MAX_GROUP, or D not a multiple of HEAD_DIM_MULTIPLE). */
int decode_attention_bf16(
        const uint16_t *q, int64_t q_row_stride,
        const uint16_t *pk, const uint16_t *pv, int64_t W, const int64_t *prompt_start,
        const uint16_t *ck, const uint16_t *cv, int64_t Tmax, int64_t T,
        const int64_t *row_prompt, int64_t R, int64_t Hq, int64_t Hkv, int64_t D, float scale,
        uint16_t *out, int threads) {
    const int G = (int)(Hq / Hkv);
    if (G < 1 || G > MAX_GROUP || Hq % Hkv || D % HEAD_DIM_MULTIPLE) return 2;
    const int64_t wb = (W + 15) / 16 * 16, tb = (Tmax + 15) / 16 * 16;
    int failed = 0;
    #pragma omp parallel num_threads(threads) reduction(|:failed)
    {
        const int64_t L = W + T;
        float *s = malloc(sizeof(float) * (G * (L + 16) + 2 * G * D));
        if (!s) {
            failed = 1;
        } else {
            float *qf = s + G * (L + 16), *acc = qf + G * D;
            #pragma omp for schedule(static)
            for (int64_t item = 0; item < R * Hkv; item++) {
                const int64_t r = item / Hkv, h = item % Hkv, p = row_prompt[r];
                const uint16_t *qr = q + r * q_row_stride + h * G * D;
                for (int64_t i = 0; i < G * D; i++) qf[i] = bf16_to_f32(qr[i]);
                const uint16_t *pkh = pk + (p * Hkv + h) * D * wb;
                const uint16_t *pvh = pv + (p * Hkv + h) * W * D;
                const uint16_t *ckh = ck + (r * Hkv + h) * D * tb;
                const uint16_t *cvh = cv + (r * Hkv + h) * Tmax * D;
                uint16_t *o = out + r * Hq * D + h * G * D;
                const int64_t st = prompt_start[p];
                /* A constant G per branch lets the compiler unroll the query-head loops. */
                switch (G) {
                case 1: attend_one(1, D, qf, scale, pkh, pvh, W, st, ckh, cvh, T, s, acc, o); break;
                case 2: attend_one(2, D, qf, scale, pkh, pvh, W, st, ckh, cvh, T, s, acc, o); break;
                case 3: attend_one(3, D, qf, scale, pkh, pvh, W, st, ckh, cvh, T, s, acc, o); break;
                case 4: attend_one(4, D, qf, scale, pkh, pvh, W, st, ckh, cvh, T, s, acc, o); break;
                default: attend_one(G, D, qf, scale, pkh, pvh, W, st, ckh, cvh, T, s, acc, o);
                }
            }
            free(s);
        }
    }
    return failed;
}
