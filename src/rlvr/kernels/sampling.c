/* Next-token sampling from bf16 or fp32 logits at a temperature, without top-k / top-p: one
 * call per decode step instead of a softmax, two cumulative sums, two searches and a gather
 * (about 5 ms per step at 256 rows x 49k vocabulary in torch ops, most of it passes over fp32
 * copies).
 *
 * The same two-level inverse CDF as rlvr.rollout.sampling._sample_blocked, on the unnormalised
 * exps e_j = exp(l_j / T - max / T) (inverse-CDF draws are scale-invariant): per row, the mass
 * of each block of BLOCK tokens, their running sum (the CDF over blocks), the row's uniform u
 * picks the first block whose running sum exceeds u x total (clamped just below the total, so
 * rounding never selects past the end), then the token inside that block the same way. Tokens
 * with zero mass (logit -inf, or an exp below fp32's range) are never drawn. The log-prob is
 * log(e_token / total) = (l_token - max) / T - log(total): the log of the fp32 probability the
 * token was drawn from.
 * Rows are split across OpenMP threads; each reads its logits twice (max, then exps) and one
 * block a third time. One source serves both logit types (an always-inline core with the type
 * as a constant flag) and all three code paths of simd_f32.h (AVX-512, AVX2, portable).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "simd_f32.h"

#define BLOCK 128

/* Logits [i, i + min(n, VW)) as fp32 lanes, `fill` past n. */
static inline __attribute__((always_inline)) vf load_logits(
        const int bf16, const void *l, int64_t i, int64_t n, float fill) {
    if (n >= VW)
        return bf16 ? vf_load_bf16((const uint16_t *)l + i) : vf_load((const float *)l + i);
    if (bf16) return vf_load_bf16_part((const uint16_t *)l + i, n, fill);
    return vf_load_part((const float *)l + i, n, fill);
}

static inline __attribute__((always_inline)) float logit(const int bf16, const void *l, int64_t i) {
    return bf16 ? bf16_to_f32(((const uint16_t *)l)[i]) : ((const float *)l)[i];
}

static inline __attribute__((always_inline)) float row_max(
        const int bf16, const void *l, int64_t V) {
    vf m = vf_set1(-INFINITY);
    for (int64_t i = 0; i < V; i += VW) m = vf_max(m, load_logits(bf16, l, i, V - i, -INFINITY));
    return vf_hmax(m);
}

/* Sum of exp(l * inv_t - shift) over l[i .. i + n), n <= BLOCK; exps below fp32's range
 * (and -inf logits) are 0. */
static inline __attribute__((always_inline)) float block_mass(
        const int bf16, const void *l, int64_t i, int64_t n, vf inv_t, vf shift) {
    vf total = vf_zero();
    for (int64_t k = 0; k < n; k += VW) {
        const vf x = vf_mul(load_logits(bf16, l, i + k, n - k, -INFINITY), inv_t);
        total = vf_add(total, vf_exp_flush(vf_sub(x, shift)));
    }
    return vf_hsum(total);
}

static inline float one_exp(float l, float inv_t, float shift) {
    const float x = l * inv_t - shift;
    return x >= EXP_LO ? expf(x) : 0.0f;
}

/* Draw one token per row.
 *   logits [R, V] (bf16 as uint16, or fp32; row stride V); inv_t = 1 / temperature (> 0);
 *   u [R] uniforms in [0, 1); tokens [R] (int64), logprobs [R] (fp32): outputs.
 * Returns 0, or 1 if a work buffer could not be allocated. */
static inline __attribute__((always_inline)) int sample_rows(
        const int bf16, const void *logits, int64_t R, int64_t V, float inv_t, const float *u,
        int64_t *tokens, float *logprobs, int threads) {
    const int64_t blocks = (V + BLOCK - 1) / BLOCK;
    int failed = 0;
    #pragma omp parallel num_threads(threads) reduction(|:failed)
    {
        float *cdf = malloc(sizeof(float) * blocks);
        if (!cdf) {
            failed = 1;
        } else {
            #pragma omp for schedule(static)
            for (int64_t r = 0; r < R; r++) {
                const void *l = bf16 ? (const void *)((const uint16_t *)logits + r * V)
                                     : (const void *)((const float *)logits + r * V);
                const float shift = row_max(bf16, l, V) * inv_t;
                const vf vinv = vf_set1(inv_t), vshift = vf_set1(shift);
                float running = 0.0f;
                for (int64_t b = 0; b < blocks; b++) {
                    const int64_t n = V - b * BLOCK < BLOCK ? V - b * BLOCK : BLOCK;
                    running += block_mass(bf16, l, b * BLOCK, n, vinv, vshift);
                    cdf[b] = running;
                }
                const float total = running;
                float target = u[r] * total;
                if (target > total * (1.0f - 0x1p-22f)) target = total * (1.0f - 0x1p-22f);
                int64_t b = 0;
                while (b < blocks - 1 && !(cdf[b] > target)) b++;
                const float before = b ? cdf[b - 1] : 0.0f;
                const int64_t lo = b * BLOCK, hi = lo + BLOCK < V ? lo + BLOCK : V;
                float inside = target - before, acc = 0.0f;
                int64_t token = -1, last = lo;
                for (int64_t j = lo; j < hi; j++) {
                    const float e = one_exp(logit(bf16, l, j), inv_t, shift);
                    if (e > 0.0f) last = j;
                    acc += e;
                    if (acc > inside && e > 0.0f) { token = j; break; }
                }
                if (token < 0) token = last;  /* rounding left the target at the block's end */
                tokens[r] = token;
                logprobs[r] = (logit(bf16, l, token) * inv_t - shift) - logf(total);
            }
            free(cdf);
        }
    }
    return failed;
}

int sample_bf16(const uint16_t *logits, int64_t R, int64_t V, float inv_t, const float *u,
                int64_t *tokens, float *logprobs, int threads) {
    return sample_rows(1, logits, R, V, inv_t, u, tokens, logprobs, threads);
}

int sample_f32(const float *logits, int64_t R, int64_t V, float inv_t, const float *u,
               int64_t *tokens, float *logprobs, int threads) {
    return sample_rows(0, logits, R, V, inv_t, u, tokens, logprobs, threads);
}
