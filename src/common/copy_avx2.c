/* SPDX-License-Identifier: Apache-2.0 */
/* gradref_copy's AVX2 kernel: 8 x 8 blocks of 32-bit elements transposed in registers. */
#include "convert_array.h"
#include "isa.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

#  include "transpose_avx2.h"

/* t[i] lane j = s[j * sstride + i] for an 8 x 8 block of 32-bit elements. */
__attribute__((always_inline)) static inline void transpose8x8_regs(const uint32_t *s,
                                                                    int64_t sstride, __m256 t[8]) {
    for (int k = 0; k < 8; k++)
        t[k] = _mm256_loadu_ps((const float *)(s + k * sstride));
    gradref__transpose8x8_ps(t);
}

/* d[i * dstride + j] = s[j * sstride + i] for an 8 x 8 block; streaming stores when `stream`
 * (d's rows 32-byte aligned). */
__attribute__((always_inline)) static inline void
transpose8x8(const uint32_t *s, int64_t sstride, uint32_t *d, int64_t dstride, int stream) {
    __m256 t[8];
    transpose8x8_regs(s, sstride, t);
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
 * apart (a channel-major output); no line is read for ownership. Where d's rows start on cache
 * lines, two 8 x 8 blocks are transposed and each line's two halves are stored back to back:
 * a write-combining buffer left half full while others open is written out in parts (eight
 * rows of interleaved half lines stream at a fifth of the full-line rate on an Intel core). */
void gradref__transpose32x32_u32_stream_avx2(const uint32_t *s, int64_t sstride, uint32_t *d,
                                             int64_t dstride) {
    if ((uintptr_t)d % 64 != 0 || dstride % 16 != 0) {
        transpose32x32(s, sstride, d, dstride, 0, 1);
        return;
    }
    for (int64_t i = 0; i < 32; i += 8)
        for (int64_t j = 0; j < 32; j += 16) {
            __m256 lo[8], hi[8];
            transpose8x8_regs(s + j * sstride + i, sstride, lo);
            transpose8x8_regs(s + (j + 8) * sstride + i, sstride, hi);
            for (int k = 0; k < 8; k++) {
                float *row = (float *)(d + (i + k) * dstride + j);
                _mm256_stream_ps(row, lo[k]);
                _mm256_stream_ps(row + 8, hi[k]);
            }
        }
}
#else
typedef int gradref__copy_avx2_unused;
#endif
