/* Fused elementwise ops of a Llama decode step (bf16 tensors, fp32 math).
 *
 * Each replaces a chain of 4-8 torch ops whose per-op overhead dominates at decode batch sizes,
 * and reproduces that chain's roundings: wherever the torch code materialises a bf16 tensor,
 * the value is rounded to bf16 here too, so results match the pure-torch path except where
 * fp32 reductions are summed in another order (RMSNorm's mean) or exp differs by an ulp (SiLU).
 * Rows are split across OpenMP threads.
 */
#include <math.h>
#include <stdint.h>
#include "bf16.h"

/* x <- bf16(x + delta) (delta may be NULL), then
 * out = bf16(w * bf16(x * rsqrt(mean(x^2) + eps)))   (transformers' LlamaRMSNorm in bf16).
 * x, delta, out: [R, H] rows of stride H; w: [H]. */
void add_rms_norm_bf16(uint16_t *x, const uint16_t *delta, const uint16_t *w, float eps,
                       uint16_t *out, int64_t R, int64_t H, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < R; r++) {
        uint16_t *xr = x + r * H, *o = out + r * H;
        const uint16_t *dr = delta ? delta + r * H : 0;
        float sum = 0.0f;
#ifdef __AVX512F__
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < H; i += 16) {
            const __mmask16 m = tail_mask(H - i);
            __m512 v = load_bf16_masked(xr + i, m);
            if (dr) {
                v = round_bf16x16(_mm512_add_ps(v, load_bf16_masked(dr + i, m)));
                store_bf16_masked(xr + i, v, m);
            }
            acc = _mm512_fmadd_ps(v, v, acc);
        }
        sum = _mm512_reduce_add_ps(acc);
        const __m512 inv = _mm512_set1_ps(1.0f / sqrtf(sum / (float)H + eps));
        for (int64_t i = 0; i < H; i += 16) {
            const __mmask16 m = tail_mask(H - i);
            const __m512 normed = round_bf16x16(_mm512_mul_ps(load_bf16_masked(xr + i, m), inv));
            store_bf16_masked(o + i, _mm512_mul_ps(load_bf16_masked(w + i, m), normed), m);
        }
#else
        for (int64_t i = 0; i < H; i++) {
            float v = bf16_to_f32(xr[i]);
            if (dr) {
                v = round_bf16(v + bf16_to_f32(dr[i]));
                xr[i] = f32_to_bf16(v);
            }
            sum += v * v;
        }
        const float inv = 1.0f / sqrtf(sum / (float)H + eps);
        for (int64_t i = 0; i < H; i++)
            o[i] = f32_to_bf16(bf16_to_f32(w[i]) * round_bf16(bf16_to_f32(xr[i]) * inv));
#endif
    }
}

/* Rotary embedding of `heads` heads per row: out = bf16(bf16(x * cos) + bf16(roll(x) * ssin))
 * with roll(x) = cat(x2, x1) and ssin = cat(-sin1, sin2) (= x cos + rotate_half(x) sin).
 * x: [R, heads, D] with row stride x_row_stride; cos, ssin: [R, D]; out: [R, heads, D]. */
void rope_bf16(const uint16_t *x, int64_t x_row_stride, const uint16_t *cos,
               const uint16_t *ssin, uint16_t *out, int64_t R, int64_t heads, int64_t D,
               int threads) {
    const int64_t half = D / 2;
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < R; r++) {
        const uint16_t *c = cos + r * D, *s = ssin + r * D;
        for (int64_t h = 0; h < heads; h++) {
            const uint16_t *xh = x + r * x_row_stride + h * D;
            uint16_t *o = out + (r * heads + h) * D;
#ifdef __AVX512F__
            for (int64_t i = 0; i < half; i += 16) {
                const __mmask16 m = tail_mask(half - i);
                const __m512 lo = load_bf16_masked(xh + i, m), hi = load_bf16_masked(xh + half + i, m);
                const __m512 a = round_bf16x16(_mm512_mul_ps(lo, load_bf16_masked(c + i, m)));
                const __m512 b = round_bf16x16(_mm512_mul_ps(hi, load_bf16_masked(s + i, m)));
                store_bf16_masked(o + i, _mm512_add_ps(a, b), m);
                const __m512 a2 = round_bf16x16(_mm512_mul_ps(hi, load_bf16_masked(c + half + i, m)));
                const __m512 b2 = round_bf16x16(_mm512_mul_ps(lo, load_bf16_masked(s + half + i, m)));
                store_bf16_masked(o + half + i, _mm512_add_ps(a2, b2), m);
            }
#else
            for (int64_t i = 0; i < D; i++) {
                const float rolled = bf16_to_f32(xh[(i + half) % D]);
                o[i] = f32_to_bf16(round_bf16(bf16_to_f32(xh[i]) * bf16_to_f32(c[i]))
                                   + round_bf16(rolled * bf16_to_f32(s[i])));
            }
#endif
        }
    }
}

/* SwiGLU: out = bf16(bf16(silu(gate)) * up), gate = gu[:, :I], up = gu[:, I:].
 * gu: [R, 2 I]; out: [R, I]. silu(g) = g / (1 + exp(-g)) in fp32. */
void silu_mul_bf16(const uint16_t *gu, uint16_t *out, int64_t R, int64_t I, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < R; r++) {
        const uint16_t *g = gu + r * 2 * I, *u = g + I;
        uint16_t *o = out + r * I;
#ifdef __AVX512F__
        const __m512 one = _mm512_set1_ps(1.0f);
        for (int64_t i = 0; i < I; i += 16) {
            const __mmask16 m = tail_mask(I - i);
            const __m512 gv = load_bf16_masked(g + i, m);
            const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv));
            const __m512 act = round_bf16x16(_mm512_div_ps(gv, _mm512_add_ps(one, e)));
            store_bf16_masked(o + i, _mm512_mul_ps(act, load_bf16_masked(u + i, m)), m);
        }
#else
        for (int64_t i = 0; i < I; i++) {
            const float gv = bf16_to_f32(g[i]);
            o[i] = f32_to_bf16(round_bf16(gv / (1.0f + expf(-gv))) * bf16_to_f32(u[i]));
        }
#endif
    }
}
