/* bf16 <-> fp32 helpers shared by the kernels (bf16 stored as uint16; rounding is
 * round-to-nearest-even, as torch's casts). */
#ifndef RLVR_BF16_H
#define RLVR_BF16_H
#include <stdint.h>
#include <string.h>

static inline float bf16_to_f32(uint16_t x) {
    uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* f rounded to bf16 precision, kept in fp32 (an intermediate bf16 tensor of a torch op). */
static inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

#ifdef __AVX512F__
#include <immintrin.h>

static inline __mmask16 tail_mask(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

static inline __m512 load_bf16x16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

static inline __m512 load_bf16_masked(const uint16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

/* Round-to-nearest-even bf16 bits of 16 floats, in the low half of each 32-bit lane. */
static inline __m512i bf16_bits(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    return _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
}

static inline void store_bf16_masked(uint16_t *p, __m512 v, __mmask16 m) {
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(bf16_bits(v)));
}

static inline __m512 round_bf16x16(__m512 v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(bf16_bits(v), 16));
}

/* exp(x) on 16 lanes, x clamped to [-87, 88]: Cephes' expf polynomial on |r| <= ln2/2, then
 * x 2^n (scalef). Relative error < 2e-7. */
static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
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
#endif
#endif
