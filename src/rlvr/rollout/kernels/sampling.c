/* Next-token sampling from bf16 logits at a temperature, without top-k / top-p: one call per
 * decode step instead of a softmax, two cumulative sums, two searches and a gather (about 5 ms
 * per step at 256 rows x 49k vocabulary in torch ops, most of it passes over fp32 copies).
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
 * block a third time.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "bf16.h"

#define BLOCK 128

#ifdef __AVX512F__
static float row_max(const uint16_t *l, int64_t V) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < V; i += 16) {
        const __mmask16 k = tail_mask(V - i);
        m = _mm512_mask_max_ps(m, k, m, load_bf16_masked(l + i, k));
    }
    return _mm512_reduce_max_ps(m);
}

/* Sum of exp(l * inv_t - shift) over l[0 .. n), n <= BLOCK; exps below fp32's range are 0. */
static float block_mass(const uint16_t *l, int64_t n, __m512 inv_t, __m512 shift) {
    __m512 total = _mm512_setzero_ps();
    const __m512 floor = _mm512_set1_ps(-87.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 x = _mm512_fmsub_ps(load_bf16_masked(l + i, k), inv_t, shift);
        const __mmask16 live = k & _mm512_cmp_ps_mask(x, floor, _CMP_GE_OQ);
        total = _mm512_mask_add_ps(total, live, total, exp16(x));
    }
    return _mm512_reduce_add_ps(total);
}
#else
static float row_max(const uint16_t *l, int64_t V) {
    float m = -INFINITY;
    for (int64_t i = 0; i < V; i++) m = bf16_to_f32(l[i]) > m ? bf16_to_f32(l[i]) : m;
    return m;
}

static float block_mass(const uint16_t *l, int64_t n, float inv_t, float shift) {
    float total = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float x = bf16_to_f32(l[i]) * inv_t - shift;
        total += x >= -87.0f ? expf(x) : 0.0f;
    }
    return total;
}
#endif

static inline float one_exp(uint16_t l, float inv_t, float shift) {
    const float x = bf16_to_f32(l) * inv_t - shift;
    return x >= -87.0f ? expf(x) : 0.0f;
}

/* Draw one token per row.
 *   logits [R, V] bf16 (row stride V); inv_t = 1 / temperature (> 0); u [R] uniforms in [0, 1)
 *   tokens [R] (int64), logprobs [R] (fp32): outputs.
 * Returns 0, or 1 if a work buffer could not be allocated. */
int sample_bf16(const uint16_t *logits, int64_t R, int64_t V, float inv_t, const float *u,
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
                const uint16_t *l = logits + r * V;
                const float shift = row_max(l, V) * inv_t;
#ifdef __AVX512F__
                const __m512 vinv = _mm512_set1_ps(inv_t), vshift = _mm512_set1_ps(shift);
#else
                const float vinv = inv_t, vshift = shift;
#endif
                float running = 0.0f;
                for (int64_t b = 0; b < blocks; b++) {
                    const int64_t n = V - b * BLOCK < BLOCK ? V - b * BLOCK : BLOCK;
                    running += block_mass(l + b * BLOCK, n, vinv, vshift);
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
                    const float e = one_exp(l[j], inv_t, shift);
                    if (e > 0.0f) last = j;
                    acc += e;
                    if (acc > inside && e > 0.0f) { token = j; break; }
                }
                if (token < 0) token = last;  /* rounding left the target at the block's end */
                tokens[r] = token;
                logprobs[r] = (bf16_to_f32(l[token]) * inv_t - shift) - logf(total);
            }
            free(cdf);
        }
    }
    return failed;
}
