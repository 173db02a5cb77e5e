/* Backward passes (and the flat SwiGLU forward) of the fused fp32 layer ops that the policy
 * update runs (rlvr.update.fused_layers); the forwards of RMSNorm and the rotary embedding are
 * fused_ops_f32.c's, and the rotary backward is the rotary forward with a permuted sine.
 *
 * Each replaces the 5-15 torch ops that autograd runs for one eager op chain (each a full pass
 * over memory, plus the zero-filled gradients of rotate_half's slices) with one pass. Rows are
 * split across OpenMP threads in static chunks, so a run is deterministic for a thread count.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include "simd_f32.h"

static inline vf sigmoid(vf g) {
    const vf one = vf_set1(1.0f);
    return vf_div(one, vf_add(one, vf_exp(vf_sub(vf_zero(), g))));
}

/* out = silu(g) * u = g * sigmoid(g) * u over n contiguous values. */
void silu_mul_flat_f32(const float *g, const float *u, float *out, int64_t n, int threads) {
    const int64_t blocks = (n + VW - 1) / VW;
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t i = b * VW, k = n - i < VW ? n - i : VW;
        const vf gv = vf_load_part(g + i, k, 0.0f);
        vf_store_part(out + i, vf_mul(vf_mul(gv, sigmoid(gv)), vf_load_part(u + i, k, 0.0f)), k);
    }
}

/* Gradients of out = silu(g) * u: du = dout * silu(g), dg = dout * u * s (1 + g (1 - s)) with
 * s = sigmoid(g) (d silu / dg; Elfwing et al. 2018, arXiv:1702.03118, eq. 5). */
void silu_mul_backward_f32(const float *g, const float *u, const float *dout, float *dg,
                           float *du, int64_t n, int threads) {
    const int64_t blocks = (n + VW - 1) / VW;
    const vf one = vf_set1(1.0f);
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t i = b * VW, k = n - i < VW ? n - i : VW;
        const vf gv = vf_load_part(g + i, k, 0.0f), d = vf_load_part(dout + i, k, 0.0f);
        const vf s = sigmoid(gv);
        vf_store_part(du + i, vf_mul(d, vf_mul(gv, s)), k);
        const vf ds = vf_mul(s, vf_fmadd(gv, vf_sub(one, s), one));
        vf_store_part(dg + i, vf_mul(vf_mul(d, vf_load_part(u + i, k, 0.0f)), ds), k);
    }
}

/* Gradients of y = w * x * r, r = (mean(x^2) + eps)^(-1/2), per row of H (Zhang & Sennrich
 * 2019, eq. 4): with a = w * dy, dx = r a - x r^3 (a . x) / H; dw = sum over rows of dy x r,
 * accumulated per thread into dw_part[thread, H] (zeroed by the caller, who sums the threads'
 * rows; NULL: no dw). r is recomputed from x (one pass) instead of being kept from the forward. */
void rms_norm_backward_f32(const float *x, const float *w, const float *dy, float eps,
                           float *dx, float *dw_part, int64_t R, int64_t H, int threads) {
    #pragma omp parallel num_threads(threads)
    {
        float *dw = dw_part ? dw_part + (int64_t)omp_get_thread_num() * H : 0;
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < R; r++) {
            const float *xr = x + r * H, *dyr = dy + r * H;
            float *dxr = dx + r * H;
            vf sq = vf_zero(), dot = vf_zero();
            for (int64_t i = 0; i < H; i += VW) {
                const int64_t k = H - i < VW ? H - i : VW;
                const vf xv = vf_load_part(xr + i, k, 0.0f);
                sq = vf_fmadd(xv, xv, sq);
                dot = vf_fmadd(vf_mul(vf_load_part(w + i, k, 0.0f),
                                      vf_load_part(dyr + i, k, 0.0f)), xv, dot);
            }
            const float rs = 1.0f / sqrtf(vf_hsum(sq) / (float)H + eps);
            const vf rv = vf_set1(rs), coef = vf_set1(-rs * rs * rs * vf_hsum(dot) / (float)H);
            for (int64_t i = 0; i < H; i += VW) {
                const int64_t k = H - i < VW ? H - i : VW;
                const vf xv = vf_load_part(xr + i, k, 0.0f), d = vf_load_part(dyr + i, k, 0.0f);
                const vf a = vf_mul(vf_load_part(w + i, k, 0.0f), d);
                vf_store_part(dxr + i, vf_fmadd(xv, coef, vf_mul(a, rv)), k);
                if (dw)
                    vf_store_part(dw + i, vf_fmadd(vf_mul(d, xv), rv, vf_load_part(dw + i, k, 0.0f)),
                                  k);
            }
        }
    }
}

/* Per row of z (N rows of V logits, row stride V) at inverse temperature inv_t, with
 * x = z * inv_t: lse = logsumexp(x), logp = x[id] - lse and, when ent is not NULL, the
 * entropy H = lse - sum(softmax(x) x) (= -sum p log p). Two passes per row (the maximum, then
 * the sums), no [N, V] output. */
void log_softmax_gather_f32(const float *z, const int64_t *ids, float inv_t, float *logp,
                            float *lse, float *ent, int64_t N, int64_t V, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < N; r++) {
        const float *zr = z + r * V;
        const vf it = vf_set1(inv_t);
        vf mx = vf_set1(-INFINITY);
        for (int64_t i = 0; i < V; i += VW) {
            const int64_t k = V - i < VW ? V - i : VW;
            mx = vf_max(mx, vf_mul(vf_load_part(zr + i, k, -INFINITY), it));
        }
        const float m = vf_hmax(mx);
        const vf mv = vf_set1(m);
        vf s = vf_zero(), w = vf_zero();
        for (int64_t i = 0; i < V; i += VW) {
            const int64_t k = V - i < VW ? V - i : VW;
            /* padded lanes: a finite logit far below the rest (exp flushes it to 0, and
             * 0 * (x - m) stays 0 where -inf would give 0 * inf) */
            const vf x = vf_mul(vf_load_part(zr + i, k, -1e30f), it);
            const vf e = vf_exp_flush(vf_sub(x, mv));
            s = vf_add(s, e);
            if (ent)
                w = vf_fmadd(e, vf_sub(x, mv), w);
        }
        const float sum = vf_hsum(s), l = m + logf(sum);
        lse[r] = l;
        logp[r] = zr[ids[r]] * inv_t - l;
        if (ent)  /* H = lse - E_p[x] = log(sum) - E_p[x - m] */
            ent[r] = logf(sum) - vf_hsum(w) / sum;
    }
}

/* The gradient of log_softmax_gather_f32's outputs with respect to z, written whole (no
 * zero-filled buffer, no scatter): with p = softmax(x), x = z inv_t,
 * dz_j = inv_t (g_logp (1[j = id] - p_j) - g_ent p_j (log p_j + H)) (d H / d x_j =
 * -p_j (log p_j + H)). g_ent and ent may be NULL (no entropy gradient). */
void log_softmax_gather_backward_f32(const float *z, const int64_t *ids, float inv_t,
                                     const float *lse, const float *ent, const float *g_logp,
                                     const float *g_ent, float *dz, int64_t N, int64_t V,
                                     int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < N; r++) {
        const float *zr = z + r * V;
        float *dr = dz + r * V;
        const vf it = vf_set1(inv_t), lv = vf_set1(lse[r]);
        const float ge = g_ent ? g_ent[r] : 0.0f;
        const vf gl = vf_set1(-g_logp[r] * inv_t), gev = vf_set1(-ge * inv_t);
        const vf hv = vf_set1(g_ent ? ent[r] : 0.0f);
        for (int64_t i = 0; i < V; i += VW) {
            const int64_t k = V - i < VW ? V - i : VW;
            const vf lp = vf_sub(vf_mul(vf_load_part(zr + i, k, 0.0f), it), lv);
            const vf p = vf_exp_flush(lp);
            vf d = vf_mul(p, gl);
            if (g_ent)
                d = vf_fmadd(vf_mul(p, vf_add(lp, hv)), gev, d);
            vf_store_part(dr + i, d, k);
        }
        dr[ids[r]] += g_logp[r] * inv_t;
    }
}
