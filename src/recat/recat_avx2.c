/* SPDX-License-Identifier: Apache-2.0 */
/* recat's AVX2 kernel: streamed rows with 32-byte streaming stores and no call per row; the
 * line a row shares with the previous one is blended from both rows under a byte mask (AMD
 * microcodes AVX2's masked moves); small rows with two overlapping moves. */
#include <string.h>

#include "common/isa.h"
#include "recat_kernels.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

/* 64 bytes of all ones, then 64 of zeros: from ramp + 64 - a, the first a bytes are set */
static const int8_t ramp[128] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                 -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                 -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                 -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};

static void stream_rows_avx2(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                             int has_prev, int has_next) {
    for (int64_t b = 0; b < rows; b++, src += pitch, dst += bytes) {
        const size_t a = (uintptr_t)dst & 63u, head = a ? 64 - a : 0;
        if (head && (b > 0 || has_prev)) { /* the line is bytes [64 - a, 128 - a) of both */
            /* bytes [0, a) from the previous row's end, [a, 64) from this row's start, blended
             * under a mask read from a constant ramp (not assembled on the stack: a load
             * spanning two recent stores waits for them, a store-forwarding stall) */
            const char *prev = src - pitch + bytes - a, *mine = src - a;
            const __m256i m0 = _mm256_loadu_si256((const __m256i *)(ramp + 64 - a)),
                          m1 = _mm256_loadu_si256((const __m256i *)(ramp + 96 - a));
            _mm256_stream_si256((__m256i *)(dst - a),
                                _mm256_blendv_epi8(_mm256_loadu_si256((const __m256i *)mine),
                                                   _mm256_loadu_si256((const __m256i *)prev), m0));
            _mm256_stream_si256((__m256i *)(dst - a + 32),
                                _mm256_blendv_epi8(_mm256_loadu_si256((const __m256i *)(mine + 32)),
                                                   _mm256_loadu_si256((const __m256i *)(prev + 32)),
                                                   m1));
        } else if (head) {
            memcpy(dst, src, head);
        }
        size_t i = head;
        for (; i + 64 <= bytes; i += 64) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(src + i));
            const __m256i y = _mm256_loadu_si256((const __m256i *)(src + i + 32));
            _mm256_stream_si256((__m256i *)(dst + i), x);
            _mm256_stream_si256((__m256i *)(dst + i + 32), y);
        }
        if (i < bytes && b + 1 == rows && !has_next) /* else the next row streams it */
            memcpy(dst + i, src + i, bytes - i);
    }
}

/* Segments of 16 to 64 bytes as two overlapping moves of 16 or 32 bytes, the size class
 * chosen once for all rows (the portable kernel's four 16-byte moves and per-row tests took
 * 1.16 ns a segment in L1, these 0.5); shorter ones are the portable kernel's. */
static void small_rows_avx2(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                            size_t ahead) {
    if (bytes >= 32) {
        for (int64_t b = 0; b < rows; b++, src += pitch, dst += bytes) {
            __builtin_prefetch(dst + ahead, 1, 3);
            const __m256i x = _mm256_loadu_si256((const __m256i *)src);
            const __m256i y = _mm256_loadu_si256((const __m256i *)(src + bytes - 32));
            _mm256_storeu_si256((__m256i *)dst, x);
            _mm256_storeu_si256((__m256i *)(dst + bytes - 32), y);
        }
    } else if (bytes >= 16) {
        for (int64_t b = 0; b < rows; b++, src += pitch, dst += bytes) {
            __builtin_prefetch(dst + ahead, 1, 3);
            const __m128i x = _mm_loadu_si128((const __m128i *)src);
            const __m128i y = _mm_loadu_si128((const __m128i *)(src + bytes - 16));
            _mm_storeu_si128((__m128i *)dst, x);
            _mm_storeu_si128((__m128i *)(dst + bytes - 16), y);
        }
    } else {
        gradref__recat_small_rows(dst, src, pitch, bytes, rows, ahead);
    }
}

const gradref__recat_kernels gradref__recat_kernels_avx2 = {
    .isa = "avx2",
    .small_rows = small_rows_avx2,
    .stream_rows = stream_rows_avx2,
};

#else
typedef int gradref__recat_avx2_unused;
#endif
