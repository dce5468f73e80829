/* SPDX-License-Identifier: Apache-2.0 */
/* The F16C array conversions (the AVX2 level: AVX2 with F16C), bit for bit convert.h's. */
#include "convert.h"
#include "convert_array.h"
#include "isa.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

/* 8 elements from i. F16C converts NaNs quietly: a block holding one is redone with the
 * scalar routine so the payloads come out as convert.h makes them. */
static inline void f16_to_f32_block8(const void *from, void *to, size_t i) {
    const uint16_t *src = from;
    float *dst = to;
    const __m128i abs = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    const __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    if (_mm_movemask_epi8(_mm_cmpgt_epi16(_mm_and_si128(h, abs), inf)))
        for (size_t j = i; j < i + 8; j++)
            dst[j] = gradref__f16_to_f32(src[j]);
}

/* One element: a lane of the instruction, NaNs by convert.h. */
static inline void f16_to_f32_one(const void *from, void *to, size_t i) {
    const uint16_t h = ((const uint16_t *)from)[i];
    ((float *)to)[i] = (h & 0x7fffu) > 0x7c00u ? gradref__f16_to_f32(h) : _cvtsh_ss(h);
}

void gradref__f16_to_f32_f16c(const uint16_t *src, float *dst, size_t n) {
    gradref__convert_by_8(src, dst, n, f16_to_f32_block8, f16_to_f32_one);
}

static inline void f32_to_f16_block8(const void *from, void *to, size_t i) {
    const float *src = from;
    uint16_t *dst = to;
    const __m256 v = _mm256_loadu_ps(src + i);
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
        for (size_t j = i; j < i + 8; j++)
            dst[j] = gradref__f32_to_f16(src[j]);
}

static inline void f32_to_f16_one(const void *from, void *to, size_t i) {
    ((uint16_t *)to)[i] = gradref__f32_to_f16(((const float *)from)[i]);
}

void gradref__f32_to_f16_f16c(const float *src, uint16_t *dst, size_t n) {
    gradref__convert_by_8(src, dst, n, f32_to_f16_block8, f32_to_f16_one);
}

/* BF16 by integer lanes (AVX2): widening is a shift; narrowing rounds to nearest even with
 * the carry of x + 0x7fff + (bit 16), a NaN keeping its top bits (quiet bit set if they would
 * read as infinity), as gradref__f32_to_bf16. */
static inline void bf16_to_f32_block8(const void *from, void *to, size_t i) {
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)from + i));
    _mm256_storeu_si256((__m256i *)((float *)to + i),
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline void bf16_to_f32_one(const void *from, void *to, size_t i) {
    ((float *)to)[i] = gradref__bf16_to_f32(((const uint16_t *)from)[i]);
}

static void bf16_to_f32_avx2(const uint16_t *src, float *dst, size_t n) {
    gradref__convert_by_8(src, dst, n, bf16_to_f32_block8, bf16_to_f32_one);
}

GRADREF__WIDEN_ROWS_KERNELS(avx2, f16_to_f32_block8, f16_to_f32_one, bf16_to_f32_block8,
                            bf16_to_f32_one)

static inline void f32_to_bf16_block8(const void *from, void *to, size_t i) {
    const __m256i x = _mm256_loadu_si256((const __m256i *)((const float *)from + i));
    const __m256i top = _mm256_srli_epi32(x, 16), one = _mm256_set1_epi32(1);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)),
                                           _mm256_and_si256(top, one)),
                          16);
    const __m256i quiet = _mm256_and_si256(
        _mm256_cmpeq_epi32(_mm256_and_si256(top, _mm256_set1_epi32(0x7f)), _mm256_setzero_si256()),
        _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i h = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, quiet), nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
    _mm_storeu_si128((__m128i *)((uint16_t *)to + i), _mm256_castsi256_si128(packed));
}

static inline void f32_to_bf16_one(const void *from, void *to, size_t i) {
    ((uint16_t *)to)[i] = gradref__f32_to_bf16(((const float *)from)[i]);
}

static void f32_to_bf16_avx2(const float *src, uint16_t *dst, size_t n) {
    gradref__convert_by_8(src, dst, n, f32_to_bf16_block8, f32_to_bf16_one);
}

const gradref__array_kernels gradref__array_kernels_avx2 = {
    .isa = "avx2",
    .f16_to_f32 = gradref__f16_to_f32_f16c,
    .f32_to_f16 = gradref__f32_to_f16_f16c,
    .bf16_to_f32 = bf16_to_f32_avx2,
    .f32_to_bf16 = f32_to_bf16_avx2,
    .f16_rows_to_f32 = f16_rows_to_f32_avx2,
    .bf16_rows_to_f32 = bf16_rows_to_f32_avx2,
    .transpose32x32_32 = gradref__transpose32x32_u32_avx2,
    .transpose32x32_32_stream = gradref__transpose32x32_u32_stream_avx2,
};

#else
typedef int gradref__convert_array_avx2_unused;
#endif
