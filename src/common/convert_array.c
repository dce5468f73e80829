/* SPDX-License-Identifier: Apache-2.0 */
#include "convert_array.h"

#include <string.h>

#include "convert.h"
#include "cpu.h"
#include "isa.h"

#ifdef GRADREF_X86
#  define GRADREF_HAVE_F16C_KERNELS 1
#  include <immintrin.h>

/* F16C converts NaNs quietly; blocks holding a NaN are redone with the scalar routine so the
 * payloads come out as convert.h makes them. */
__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(const uint16_t *src, float *dst,
                                                                size_t n) {
    size_t i = 0;
    const __m128i abs = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
        if (_mm_movemask_epi8(_mm_cmpgt_epi16(_mm_and_si128(h, abs), inf)))
            for (size_t j = i; j < i + 8; j++)
                dst[j] = gradref__f16_to_f32(src[j]);
    }
    for (; i < n; i++)
        dst[i] = gradref__f16_to_f32(src[i]);
}

__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(const float *src, uint16_t *dst,
                                                                size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(src + i);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
            for (size_t j = i; j < i + 8; j++)
                dst[j] = gradref__f32_to_f16(src[j]);
    }
    for (; i < n; i++)
        dst[i] = gradref__f32_to_f16(src[i]);
}

static int have_f16c(void) {
    return gradref__cpu_has_avx_f16c();
}
#endif

void gradref__f16_to_f32_array(const uint16_t *src, float *dst, size_t n) {
#ifdef GRADREF_HAVE_F16C_KERNELS
    if (have_f16c()) {
        f16_to_f32_f16c(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = gradref__f16_to_f32(src[i]);
}

void gradref__f32_to_f16_array(const float *src, uint16_t *dst, size_t n) {
#ifdef GRADREF_HAVE_F16C_KERNELS
    if (have_f16c()) {
        f32_to_f16_f16c(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = gradref__f32_to_f16(src[i]);
}

/* Both bf16 directions are integer operations; written branch-free so they vectorize. */
void gradref__bf16_to_f32_array(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x = (uint32_t)src[i] << 16;
        memcpy(dst + i, &x, sizeof x);
    }
}

void gradref__f32_to_bf16_array(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, src + i, sizeof x);
        uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
        uint32_t nan = (x >> 16) | (((x >> 16) & 0x7fu) == 0u ? 0x40u : 0u);
        dst[i] = (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
}
