/* SPDX-License-Identifier: Apache-2.0 */
/* recat's portable kernel (SSE2 where the compiler targets it, as every x86-64 does) and the
 * choice of table. */
#include "recat_kernels.h"

#include <string.h>
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif

#include "common/isa.h"
#include "common/stream.h"

/* Up to 64 bytes: two overlapping moves of the largest power-of-two width that fits (two pairs
 * of 16-byte moves from 32 bytes up), instead of a memcpy call. */
static void copy_small(char *dst, const char *src, size_t bytes) {
#if defined(__SSE2__)
    if (bytes >= 32) {
        __m128i a = _mm_loadu_si128((const __m128i *)src);
        __m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + bytes - 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(src + bytes - 16));
        _mm_storeu_si128((__m128i *)dst, a);
        _mm_storeu_si128((__m128i *)(dst + 16), b);
        _mm_storeu_si128((__m128i *)(dst + bytes - 32), c);
        _mm_storeu_si128((__m128i *)(dst + bytes - 16), e);
        return;
    }
    if (bytes >= 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)src);
        __m128i b = _mm_loadu_si128((const __m128i *)(src + bytes - 16));
        _mm_storeu_si128((__m128i *)dst, a);
        _mm_storeu_si128((__m128i *)(dst + bytes - 16), b);
        return;
    }
#endif
    if (bytes >= 8) {
        size_t i = 0;
        for (; i + 8 < bytes; i += 8) {
            uint64_t v;
            memcpy(&v, src + i, 8);
            memcpy(dst + i, &v, 8);
        }
        uint64_t last;
        memcpy(&last, src + bytes - 8, 8);
        memcpy(dst + bytes - 8, &last, 8);
    } else if (bytes >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + bytes - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + bytes - 4, &b, 4);
    } else {
        for (size_t i = 0; i < bytes; i++)
            dst[i] = src[i];
    }
}

/* One row of stream_rows: prev is the previous row's segment (in L1) when this thread wrote
 * it, else NULL. */
static void stream_segment(char *dst, const char *src, const char *prev, size_t bytes,
                           int has_next) {
    const size_t a = (uintptr_t)dst & 63u, head = a ? 64 - a : 0;
    if (head) {
        if (prev) { /* the shared line is bytes [64 - a, 128 - a) of these two */
            char both[128];
            memcpy(both, prev + bytes - 64, 64);
            memcpy(both + 64, src, 64);
            gradref__copy_stream(dst - a, both + 64 - a, 64);
        } else {
            memcpy(dst, src, head);
        }
    }
    const size_t body = (bytes - head) & ~(size_t)63, tail = bytes - head - body;
    gradref__copy_stream(dst + head, src + head, body);
    if (tail && !has_next) memcpy(dst + head + body, src + head + body, tail);
}

void gradref__recat_stream_rows(char *dst, const char *src, size_t pitch, size_t bytes,
                                int64_t rows, int has_prev, int has_next) {
    for (int64_t b = 0; b < rows; b++, src += pitch, dst += bytes)
        stream_segment(dst, src, b > 0 || has_prev ? src - pitch : NULL, bytes,
                       b + 1 < rows || has_next);
}

void gradref__recat_small_rows(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                               size_t ahead) {
    for (int64_t b = 0; b < rows; b++, src += pitch, dst += bytes) {
        __builtin_prefetch(dst + ahead, 1, 3);
        copy_small(dst, src, bytes);
    }
}

const gradref__recat_kernels gradref__recat_kernels_portable = {
    .isa = "portable",
    .small_rows = gradref__recat_small_rows,
    .stream_rows = gradref__recat_stream_rows,
};

const gradref__recat_kernels *gradref__recat_kernels_for(int max_isa) {
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &gradref__recat_kernels_portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &gradref__recat_kernels_avx2,
        [GRADREF__ISA_AVX512] = &gradref__recat_kernels_avx512,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &gradref__recat_kernels_neon,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}
