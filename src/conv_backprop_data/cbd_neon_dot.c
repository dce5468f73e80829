/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's kernels of the neon_dot level: the I8 direct tiles by int8 quads, SDOT
 * on words of four output channels' bytes (the contract of gradref__cbd_i8_quad_tile32). */
#include "cbd_kernels.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>
#  include <string.h>

/* The lanes of bits b (0..15) as a 4-lane mask (all ones where the bit is set). */
static inline int32x4_t lanes4(unsigned b) {
    static const uint32_t bit[4] = {1, 2, 4, 8};
    const uint32x4_t v = vld1q_u32(bit);
    return vreinterpretq_s32_u32(vceqq_u32(vandq_u32(vdupq_n_u32(b), v), v));
}

/* One tap's 8 words of a block: whole vectors (inside 1 or 2; inside 1 clears the lanes
 * outside the tap), else whole vectors when every lane is the tap's and word by word where not
 * (the lanes outside are never read). */
__attribute__((always_inline)) static inline void
tap_words(int inside, const int32_t *src, unsigned m, int8x16_t *b0, int8x16_t *b1) {
    int32x4_t v0, v1;
    if (inside || m == 0xffu) {
        v0 = vld1q_s32(src), v1 = vld1q_s32(src + 4);
        if (inside == 1 && m != 0xffu) {
            v0 = vandq_s32(v0, lanes4(m & 15u));
            v1 = vandq_s32(v1, lanes4(m >> 4));
        }
    } else {
        int32_t tmp[8];
        for (int l = 0; l < 8; l++)
            tmp[l] = (m >> l) & 1u ? src[l] : 0;
        v0 = vld1q_s32(tmp), v1 = vld1q_s32(tmp + 4);
    }
    *b0 = vreinterpretq_s8_s32(v0), *b1 = vreinterpretq_s8_s32(v1);
}

/* Columns [8h, 8h + 8) of a tile: 12 rows x 2 accumulators, SDOT by lane of the panel's 12
 * words (four products each, added in int32), a tap without lanes in the block skipped; then
 * rows < `rows`, columns < cols stored. */
static void quad_block(int inside, int h, const int32_t *image, int64_t channel_stride,
                       int64_t quads, const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                       const int32_t *a, int rows, int32_t *c, int64_t ldc, int64_t cols,
                       int load) {
    const int64_t left = cols - 8 * h < 8 ? cols - 8 * h : 8;
    int32_t *out = c + 8 * h;
    int32x4_t acc[12][2];
#  pragma GCC unroll 12
    for (int i = 0; i < 12; i++) {
        acc[i][0] = acc[i][1] = vdupq_n_s32(0);
        if (load && i < rows) { /* the sums go on from c */
            int32_t tmp[8] = {0};
            memcpy(tmp, out + i * ldc, (size_t)left * sizeof *tmp);
            acc[i][0] = vld1q_s32(tmp);
            acc[i][1] = vld1q_s32(tmp + 4);
        }
    }
    for (int64_t t = 0; t < ntaps; t++) {
        const unsigned m = (unsigned)(masks[2 * t + (h >> 1)] >> (8 * (h & 1))) & 0xffu;
        if (m == 0) continue;
        const int32_t *src = image + offset[t] + 8 * h;
        const int32_t *w = a + t * quads * 12;
        for (int64_t j = 0; j < quads; j++, src += channel_stride, w += 12) {
            int8x16_t b0, b1;
            tap_words(inside, src, m, &b0, &b1);
            const int8x16_t wv[3] = {vreinterpretq_s8_s32(vld1q_s32(w)),
                                     vreinterpretq_s8_s32(vld1q_s32(w + 4)),
                                     vreinterpretq_s8_s32(vld1q_s32(w + 8))};
#  pragma GCC unroll 12
            for (int i = 0; i < 12; i++) {
                acc[i][0] = vdotq_laneq_s32(acc[i][0], b0, wv[i / 4], i % 4);
                acc[i][1] = vdotq_laneq_s32(acc[i][1], b1, wv[i / 4], i % 4);
            }
        }
    }
#  pragma GCC unroll 12
    for (int i = 0; i < 12; i++) {
        if (i >= rows) break;
        if (left == 8) {
            vst1q_s32(out + i * ldc, acc[i][0]);
            vst1q_s32(out + i * ldc + 4, acc[i][1]);
            continue;
        }
        int32_t tmp[8];
        vst1q_s32(tmp, acc[i][0]);
        vst1q_s32(tmp + 4, acc[i][1]);
        memcpy(out + i * ldc, tmp, (size_t)left * sizeof *tmp);
    }
}

void gradref__cbd_i8_quad_tile32_neon_dot(const int32_t *image, int64_t channel_stride,
                                          int64_t quads, const int64_t *offset,
                                          const uint16_t *masks, int64_t ntaps, int64_t cols,
                                          int inside, const int32_t *a, int rows, int32_t *c,
                                          int64_t ldc, int load) {
    for (int h = 0; h < 4 && 8 * h < cols; h++)
        quad_block(inside, h, image, channel_stride, quads, offset, masks, ntaps, a, rows, c, ldc,
                   cols, load);
}

#else
typedef int gradref__cbd_neon_dot_unused;
#endif
