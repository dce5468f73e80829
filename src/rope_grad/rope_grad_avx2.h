/* SPDX-License-Identifier: Apache-2.0 */
/* The AVX2 + F16C helpers of rope_grad's x86 kernel files (rope_grad_avx2.c and, for tails and
 * BF16, rope_grad_avx512.h): 8-lane loads and stores of each dtype, prefetches, and the AVX2
 * kernels the AVX-512 ones fall back to. */
#ifndef GRADREF_ROPE_GRAD_AVX2_H
#define GRADREF_ROPE_GRAD_AVX2_H

#include "common/isa.h"
#include "rope_grad_kernels.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

/* ---- 8-lane loads and stores of each dtype ---- */

static inline __m256 load8(int32_t dt, const void *p) {
    if (dt == GRADREF_F32) return _mm256_loadu_ps((const float *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (dt == GRADREF_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* v with every NaN lane the canonical quiet NaN 0x7fc00000 (the NaN rule, common/nan.h). */
static inline __m256 canon8(__m256 v) {
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)),
                            _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/* f32 -> bf16 bits rounded to nearest even, left in the high half of each 32-bit lane (the low
 * half is left over), NaNs as they are: x + 0x7fff + lsb is gradref__f32_to_bf16 for every
 * value but a NaN with low bits set (the checked stores below). */
static inline __m256i round_bf16_high_raw(__m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    return _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
}

/* round_bf16_high_raw with a NaN made canonical first, which has no low bits set. */
static inline __m256i round_bf16_high(__m256 v) {
    return round_bf16_high_raw(canon8(v));
}

/* round_bf16_high with the bits in the low half of each lane. */
static inline __m256i round_bf16(__m256 v) {
    return _mm256_srli_epi32(round_bf16_high(v), 16);
}

/* f32 -> bf16 bits, round to nearest even, NaN kept NaN (as gradref__f32_to_bf16). */
static inline __m128i to_bf16(__m256 v) {
    __m256i x = _mm256_castps_si256(v);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i rounded = round_bf16(v);
    __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i payload_lost =
        _mm256_cmpeq_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(0x7f)), _mm256_setzero_si256());
    __m256i nan = _mm256_or_si256(hi, _mm256_and_si256(payload_lost, _mm256_set1_epi32(0x40)));
    __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
    r = _mm256_packus_epi32(r, r); /* per 128-bit lane: [a0..a3 a0..a3 | a4..a7 a4..a7] */
    r = _mm256_permute4x64_epi64(r, 0x08);
    return _mm256_castsi256_si128(r);
}

/* Inputs are read this far ahead with software prefetches: the hardware prefetcher alone leaves
 * a read-compute-stream loop well short of copy bandwidth. */
#  define PREFETCH_BYTES 2048

static inline void prefetch(const void *p) {
    _mm_prefetch((const char *)p + PREFETCH_BYTES, _MM_HINT_T0);
}

/* store8 without the NaN rule (the heads kernels' checked stores below). */
static inline void store8_raw(int32_t dt, void *p, __m256 v, int stream) {
    if (dt == GRADREF_F32) {
        if (stream && ((uintptr_t)p & 31u) == 0) {
            _mm256_stream_ps((float *)p, v);
        } else if (stream) {
            _mm_stream_ps((float *)p, _mm256_castps256_ps128(v));
            _mm_stream_ps((float *)p + 4, _mm256_extractf128_ps(v, 1));
        } else {
            _mm256_storeu_ps((float *)p, v);
        }
        return;
    }
    __m128i h = dt == GRADREF_F16 ? _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : to_bf16(v);
    if (stream)
        _mm_stream_si128((__m128i *)p, h);
    else
        _mm_storeu_si128((__m128i *)p, h);
}

static inline void store8(int32_t dt, void *p, __m256 v, int stream) {
    store8_raw(dt, p, canon8(v), stream);
}

/* store8 or, given `sum` (F32 and F16), store8_raw with v added into *sum: a NaN among the
 * values leaves the sum NaN (so does +Inf beside -Inf, which only costs a redo), and the caller
 * then stores the rows again under the NaN rule. A compare and a blend per vector become one
 * add. */
static inline void store8_checked(int32_t dt, void *p, __m256 v, int stream, __m256 *sum) {
    if (sum == NULL) {
        store8(dt, p, v, stream);
        return;
    }
    *sum = _mm256_add_ps(*sum, v);
    store8_raw(dt, p, v, stream);
}

/* Whether a checked sum met a NaN. */
static inline int sum_has_nan(__m256 sum) {
    return _mm256_movemask_ps(_mm256_cmp_ps(sum, sum, _CMP_UNORD_Q)) != 0;
}

/* store8 of a and then b (16 consecutive elements), for the heads kernels: BF16 skips to_bf16's
 * NaN handling (round_bf16_high says why) and packs the two at once. */
static inline void store8x2(int32_t dt, void *p, __m256 a, __m256 b, int stream) {
    if (dt == GRADREF_BF16) {
        const __m256i h =
            _mm256_permute4x64_epi64(_mm256_packus_epi32(round_bf16(a), round_bf16(b)), 0xd8);
        if (stream) {
            _mm_stream_si128((__m128i *)p, _mm256_castsi256_si128(h));
            _mm_stream_si128((__m128i *)p + 1, _mm256_extracti128_si256(h, 1));
        } else {
            _mm256_storeu_si256((__m256i *)p, h);
        }
        return;
    }
    store8(dt, p, a, stream);
    store8(dt, (char *)p + 8 * gradref__rope_esize(dt), b, stream);
}

/* store8x2 with store8_checked's sum (NULL: store8x2). */
static inline void store8x2_checked(int32_t dt, void *p, __m256 a, __m256 b, int stream,
                                    __m256 *sum) {
    if (sum == NULL || dt == GRADREF_BF16) {
        store8x2(dt, p, a, b, stream);
        return;
    }
    store8_checked(dt, p, a, stream, sum);
    store8_checked(dt, (char *)p + 8 * gradref__rope_esize(dt), b, stream, sum);
}

void gradref__rope_atb_row_avx2(int32_t dt, const void *g, void *out, const float *w, int64_t n,
                                int stream);
void gradref__rope_half_row_avx2(int32_t dt, const void *gf, const void *gb, void *out_f,
                                 void *out_b, const float *cf, const float *sb, const float *cb,
                                 const float *sf, int64_t n, int stream);
void gradref__rope_interleaved_row_avx2(int32_t dt, const void *g, void *out, const float *c,
                                        const float *s, int64_t n, int stream);

#endif
#endif
