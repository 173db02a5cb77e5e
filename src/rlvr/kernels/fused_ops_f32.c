/* Fused elementwise ops of a Llama decode step in fp32 (the siblings of fused_ops.c).
 *
 * Each replaces a chain of 4-8 torch ops whose per-op overhead and memory passes dominate the
 * non-matmul time of an fp32 decode step, with one pass over the rows. The arithmetic is the
 * torch ops' in fp32 up to summation order (RMSNorm's mean), fused multiply-adds (rotary
 * embedding) and exp's last bits (SiLU): ~1e-7 relative. AVX-512 / AVX2 / portable through
 * simd_f32.h; rows are split across OpenMP threads.
 */
#include <math.h>
#include <stdint.h>
#include "simd_f32.h"

/* x <- x + delta (delta may be NULL), then out = w * (x * rsqrt(mean(x^2) + eps))
 * (transformers' LlamaRMSNorm in fp32). x, delta, out: [R, H] rows of stride H; w: [H]. */
void add_rms_norm_f32(float *x, const float *delta, const float *w, float eps, float *out,
                      int64_t R, int64_t H, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < R; r++) {
        float *xr = x + r * H, *o = out + r * H;
        const float *dr = delta ? delta + r * H : 0;
        vf acc = vf_zero();
        int64_t i = 0;
        for (; i + VW <= H; i += VW) {
            vf v = vf_load(xr + i);
            if (dr) {
                v = vf_add(v, vf_load(dr + i));
                vf_store(xr + i, v);
            }
            acc = vf_fmadd(v, v, acc);
        }
        if (i < H) {
            vf v = vf_load_part(xr + i, H - i, 0.0f);
            if (dr) {
                v = vf_add(v, vf_load_part(dr + i, H - i, 0.0f));
                vf_store_part(xr + i, v, H - i);
            }
            acc = vf_fmadd(v, v, acc);
        }
        const vf inv = vf_set1(1.0f / sqrtf(vf_hsum(acc) / (float)H + eps));
        for (i = 0; i + VW <= H; i += VW)
            vf_store(o + i, vf_mul(vf_load(w + i), vf_mul(vf_load(xr + i), inv)));
        if (i < H)
            vf_store_part(o + i, vf_mul(vf_load_part(w + i, H - i, 0.0f),
                                        vf_mul(vf_load_part(xr + i, H - i, 0.0f), inv)), H - i);
    }
}

/* out[i] = lo * c + hi * s on `n` lanes (n <= VW), partial when n < VW. */
static inline void rotate_lanes(const float *lo, const float *hi, const float *c, const float *s,
                                float *o, int64_t n) {
    if (n >= VW) {
        vf_store(o, vf_fmadd(vf_load(lo), vf_load(c), vf_mul(vf_load(hi), vf_load(s))));
    } else {
        vf_store_part(o, vf_fmadd(vf_load_part(lo, n, 0.0f), vf_load_part(c, n, 0.0f),
                                  vf_mul(vf_load_part(hi, n, 0.0f), vf_load_part(s, n, 0.0f))), n);
    }
}

/* Rotary embedding of `heads` heads per row: out = x * cos + roll(x) * ssin with
 * roll(x) = cat(x2, x1) and ssin = cat(-sin1, sin2) (= x cos + rotate_half(x) sin).
 * x: [R, heads, D] with row stride x_row_stride; cos, ssin: [R, D]; out: [R, heads, D]. */
void rope_f32(const float *x, int64_t x_row_stride, const float *cos, const float *ssin,
              float *out, int64_t R, int64_t heads, int64_t D, int threads) {
    const int64_t half = D / 2;
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < R; r++) {
        const float *c = cos + r * D, *s = ssin + r * D;
        for (int64_t h = 0; h < heads; h++) {
            const float *xh = x + r * x_row_stride + h * D;
            float *o = out + (r * heads + h) * D;
            for (int64_t i = 0; i < half; i += VW) {
                const int64_t n = half - i;
                rotate_lanes(xh + i, xh + half + i, c + i, s + i, o + i, n);
                rotate_lanes(xh + half + i, xh + i, c + half + i, s + half + i, o + half + i, n);
            }
        }
    }
}

/* SwiGLU: out = silu(gate) * up, gate = gu[:, :I], up = gu[:, I:], silu(g) = g / (1 + exp(-g)).
 * gu: [R, 2 I]; out: [R, I]. */
void silu_mul_f32(const float *gu, float *out, int64_t R, int64_t I, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < R; r++) {
        const float *g = gu + r * 2 * I, *u = g + I;
        float *o = out + r * I;
        const vf one = vf_set1(1.0f);
        int64_t i = 0;
        for (; i + VW <= I; i += VW) {
            const vf gv = vf_load(g + i);
            const vf act = vf_div(gv, vf_add(one, vf_exp(vf_sub(vf_zero(), gv))));
            vf_store(o + i, vf_mul(act, vf_load(u + i)));
        }
        if (i < I) {
            const vf gv = vf_load_part(g + i, I - i, 0.0f);
            const vf act = vf_div(gv, vf_add(one, vf_exp(vf_sub(vf_zero(), gv))));
            vf_store_part(o + i, vf_mul(act, vf_load_part(u + i, I - i, 0.0f)), I - i);
        }
    }
}

/* Lanes per fp32 vector of this build (16 AVX-512, 8 AVX2 + FMA, 4 portable): which code path
 * of simd_f32.h the compiler flags selected. */
int simd_f32_width(void) { return VW; }
