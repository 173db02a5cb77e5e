/* A small fp32 SIMD layer, so one kernel source serves three code paths, chosen at compile
 * time by the -march flags (the library is built per machine, so this is selection by the CPU's
 * features):
 *
 *   AVX-512F      VW = 16 lanes (__m512, masked loads / stores for tails)
 *   AVX2 + FMA    VW = 8 lanes  (__m256; most laptops, AMD Zen 2/3; the fp32 target)
 *   portable      VW = 4 lanes  (GCC / clang generic vectors: SSE2 on x86-64, NEON on ARM)
 *
 * `vf` is one vector of VW floats. Tails (n < VW lanes) go through vf_load_part / vf_store_part,
 * which never touch memory past the n-th element. vf_exp is Cephes' expf polynomial (the one
 * of exp16 in bf16.h) on every path, so the paths differ only in summation order.
 */
#ifndef RLVR_SIMD_F32_H
#define RLVR_SIMD_F32_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "bf16.h"

/* exp's argument range: below -87 the result would be subnormal (flushed to 0 where asked),
 * above 88 it would overflow. */
#define EXP_LO (-87.0f)
#define EXP_HI 88.0f

#if defined(__AVX512F__)
#include <immintrin.h>
#define VW 16
typedef __m512 vf;

static inline __mmask16 vf_mask(int64_t n) { return tail_mask(n); }
static inline vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf vf_load_part(const float *p, int64_t n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), vf_mask(n), p);
}
static inline void vf_store_part(float *p, vf v, int64_t n) {
    _mm512_mask_storeu_ps(p, vf_mask(n), v);
}
static inline vf vf_load_bf16_part(const uint16_t *p, int64_t n, float fill) {
    return _mm512_mask_mov_ps(_mm512_set1_ps(fill), vf_mask(n), load_bf16_masked(p, vf_mask(n)));
}
static inline vf vf_load_bf16(const uint16_t *p) { return load_bf16x16(p); }
static inline vf vf_set1(float x) { return _mm512_set1_ps(x); }
static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf vf_fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline float vf_hsum(vf v) { return _mm512_reduce_add_ps(v); }
static inline float vf_hmax(vf v) { return _mm512_reduce_max_ps(v); }
static inline vf vf_exp(vf x) { return exp16(x); }
/* exp(x), with lanes below EXP_LO (-inf included) exactly 0. */
static inline vf vf_exp_flush(vf x) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_LO), _CMP_GE_OQ), exp16(x));
}

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VW 8
typedef __m256 vf;

static inline __m256i vf_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? n : 8)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf vf_load_part(const float *p, int64_t n, float fill) {
    const __m256i m = vf_mask(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline void vf_store_part(float *p, vf v, int64_t n) {
    _mm256_maskstore_ps(p, vf_mask(n), v);
}
static inline vf vf_load_bf16_part(const uint16_t *p, int64_t n, float fill) {
    uint16_t bits[8] = {0};
    memcpy(bits, p, sizeof(uint16_t) * (size_t)(n < 8 ? n : 8));
    const vf v = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)bits)), 16));
    return _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(vf_mask(n)));
}
static inline vf vf_load_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
static inline vf vf_set1(float x) { return _mm256_set1_ps(x); }
static inline vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vf_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf vf_fmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline float vf_hsum(vf v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline float vf_hmax(vf v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
/* exp16's algorithm on 8 lanes; x 2^n by adding n to the exponent bits (n in [-126, 127]
 * after the clamp, so 2^n is a normal float). */
static inline vf vf_exp(vf x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(EXP_LO)), _mm256_set1_ps(EXP_HI));
    const vf n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    vf p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i bits = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
static inline vf vf_exp_flush(vf x) {
    return _mm256_and_ps(vf_exp(x), _mm256_cmp_ps(x, _mm256_set1_ps(EXP_LO), _CMP_GE_OQ));
}

#else
/* Generic vectors: the compiler lowers them to whatever SIMD the target has (or scalars). */
#define VW 4
typedef float vf __attribute__((vector_size(16)));
typedef int32_t vi __attribute__((vector_size(16)));

static inline vf vf_load(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void vf_store(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline vf vf_load_part(const float *p, int64_t n, float fill) {
    vf v = {fill, fill, fill, fill};
    for (int64_t i = 0; i < n && i < VW; i++) v[i] = p[i];
    return v;
}
static inline void vf_store_part(float *p, vf v, int64_t n) {
    for (int64_t i = 0; i < n && i < VW; i++) p[i] = v[i];
}
static inline vf vf_load_bf16_part(const uint16_t *p, int64_t n, float fill) {
    vf v = {fill, fill, fill, fill};
    for (int64_t i = 0; i < n && i < VW; i++) v[i] = bf16_to_f32(p[i]);
    return v;
}
static inline vf vf_load_bf16(const uint16_t *p) {
    return (vf){bf16_to_f32(p[0]), bf16_to_f32(p[1]), bf16_to_f32(p[2]), bf16_to_f32(p[3])};
}
static inline vf vf_set1(float x) { return (vf){x, x, x, x}; }
static inline vf vf_add(vf a, vf b) { return a + b; }
static inline vf vf_sub(vf a, vf b) { return a - b; }
static inline vf vf_mul(vf a, vf b) { return a * b; }
static inline vf vf_div(vf a, vf b) { return a / b; }
/* a where keep, else b (keep: all-ones / all-zeros lanes of a comparison). */
static inline vf vf_select(vi keep, vf a, vf b) { return (vf)(((vi)a & keep) | ((vi)b & ~keep)); }
static inline vf vf_max(vf a, vf b) { return vf_select(a > b, a, b); }
static inline vf vf_fmadd(vf a, vf b, vf c) { return a * b + c; }
static inline float vf_hsum(vf v) { return (v[0] + v[2]) + (v[1] + v[3]); }
static inline float vf_hmax(vf v) {
    const float a = v[0] > v[1] ? v[0] : v[1], b = v[2] > v[3] ? v[2] : v[3];
    return a > b ? a : b;
}
/* Round to nearest even by the 1.5 x 2^23 trick (exact for |x| < 2^22; needs IEEE
 * arithmetic, i.e. no -ffast-math), 2^n through the exponent bits. */
static inline vf vf_exp(vf x) {
    x = vf_select(x > vf_set1(EXP_LO), x, vf_set1(EXP_LO));
    x = vf_select(x < vf_set1(EXP_HI), x, vf_set1(EXP_HI));
    const vf magic = vf_set1(12582912.0f);
    const vf n = (x * vf_set1(1.44269504088896341f) + magic) - magic;
    vf r = x - n * vf_set1(0.693359375f);
    r = r - n * vf_set1(-2.12194440e-4f);
    vf p = vf_set1(1.9875691500e-4f);
    p = p * r + vf_set1(1.3981999507e-3f);
    p = p * r + vf_set1(8.3334519073e-3f);
    p = p * r + vf_set1(4.1665795894e-2f);
    p = p * r + vf_set1(1.6666665459e-1f);
    p = p * r + vf_set1(5.0000001201e-1f);
    p = (p * r) * r + (r + vf_set1(1.0f));
    const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
    return p * (vf)bits;
}
static inline vf vf_exp_flush(vf x) { return (vf)((vi)vf_exp(x) & (x >= vf_set1(EXP_LO))); }
#endif

static inline vf vf_zero(void) { return vf_set1(0.0f); }
#endif
