/* SPDX-License-Identifier: Apache-2.0 */
/* gradref_copy's AVX2 kernel: 8 x 8 blocks of 32-bit elements transposed in registers. */
#include "convert_array.h"
#include "isa.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

/* d[i * dstride + j] = s[j * sstride + i] for an 8 x 8 block of 32-bit elements; streaming
 * stores when `stream` (d's rows 32-byte aligned). */
__attribute__((always_inline)) static inline void
transpose8x8(const uint32_t *s, int64_t sstride, uint32_t *d, int64_t dstride, int stream) {
    __m256 r[8], t[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps((const float *)(s + k * sstride));
    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) {
        r[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int k = 0; k < 4; k++) {
        t[k] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x20);
        t[k + 4] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x31);
    }
    for (int k = 0; k < 8; k++) {
        if (stream)
            _mm256_stream_ps((float *)(d + k * dstride), t[k]);
        else
            _mm256_storeu_ps((float *)(d + k * dstride), t[k]);
    }
}

void gradref__transpose8x8_u32_avx2(const uint32_t *s, int64_t sstride, uint32_t *d,
                                    int64_t dstride) {
    transpose8x8(s, sstride, d, dstride, 0);
}

/* The same for a 32 x 32 tile, in one call instead of sixteen (saving the calls' overhead).
 * With `by_src_rows`, the source is walked eight rows at a time: when its stride is the larger,
 * its 32 rows often share one L1 and L2 set (channel planes a power of two apart), and eight
 * rows' two lines each stay in L1 while their four blocks are moved; taken block-column-wise
 * they were fetched twice. */
__attribute__((always_inline)) static inline void transpose32x32(const uint32_t *s, int64_t sstride,
                                                                 uint32_t *d, int64_t dstride,
                                                                 int by_src_rows, int stream) {
    for (int64_t a = 0; a < 32; a += 8)
        for (int64_t b = 0; b < 32; b += 8) {
            const int64_t i = by_src_rows ? b : a, j = by_src_rows ? a : b;
            transpose8x8(s + j * sstride + i, sstride, d + i * dstride + j, dstride, stream);
        }
}

void gradref__transpose32x32_u32_avx2(const uint32_t *s, int64_t sstride, uint32_t *d,
                                      int64_t dstride) {
    if (sstride > dstride)
        transpose32x32(s, sstride, d, dstride, 1, 0);
    else
        transpose32x32(s, sstride, d, dstride, 0, 0);
}

/* The same with streaming stores, for a destination too large for the cache whose rows lie far
 * apart (a channel-major output): each destination row's two lines are completed eight rows at
 * a time, so at most eight lines wait in the write-combining buffers, and no line is read for
 * ownership. */
void gradref__transpose32x32_u32_stream_avx2(const uint32_t *s, int64_t sstride, uint32_t *d,
                                             int64_t dstride) {
    transpose32x32(s, sstride, d, dstride, 0, 1);
}
#else
typedef int gradref__copy_avx2_unused;
#endif
