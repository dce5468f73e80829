/* SPDX-License-Identifier: Apache-2.0 */
/* The conv_backprop_data kernels, one ISA per file: depthwise rows (stride 1; each grad
 * element is the reference's chain of fused multiply-adds over its taps, with taps outside
 * diff read as 0, exact for a finite filter) in cbd_kernels.c (portable, and the choice),
 * cbd_avx2.c and cbd_avx512.c, all giving the same bits; and the AVX-512 direct tiles. */
#ifndef GRADREF_CBD_SIMD_H
#define GRADREF_CBD_SIMD_H

#include "cbd_internal.h"
#include "common/isa.h"

/* The depthwise kernels of one ISA: one grad row from the nrows diff rows its row taps reach
 * (rows, with the stored row-tap index base), never NULL; four rows at once (NULL: row by row);
 * a whole plane for K <= 3 x 3 and one depth (NULL: rows). */
typedef struct gradref__cbd_depthwise_kernels {
    const char *isa;
    void (*row)(const gradref__cbd_plan *p, const float *w, const float *const *rows,
                const int64_t *base, int64_t nrows, float *out);
    void (*rows4)(const gradref__cbd_plan *p, const float *w, const float *diff,
                  const float *const rows[4][64], const int64_t base[4][64], const int64_t *nr,
                  int64_t nrow, float *out);
    void (*plane_small)(const gradref__cbd_plan *p, const float *w, const float *diff, float *grad);
} gradref__cbd_depthwise_kernels;

/* The table of the widest family the CPU runs, at most `kernel` (common/gemm.h numbering). */
const gradref__cbd_depthwise_kernels *gradref__cbd_depthwise_kernels_for(int kernel);

/* One channel: w holds the K0*K1*K2 taps (stored order), diff and grad are dense planes of
 * O and I pixels. `kernel` is the highest family allowed (common/gemm.h numbering). */
void gradref__cbd_depthwise_plane(const gradref__cbd_plan *p, const float *w, const float *diff,
                                  float *grad, int kernel);

/* The diff column of grad column i2 through tap position kp2 (stride 1). */
static inline int64_t gradref__cbd_column_shift(const gradref__cbd_plan *p, int64_t kp2) {
    return p->pad_begin[2] - kp2 * p->dil[2];
}

/* The stored index of tap position kp along dim j (flipped in CONVOLUTION mode). */
static inline int64_t gradref__cbd_stored(const gradref__cbd_plan *p, int j, int64_t kp) {
    return p->mode == GRADREF_CONV_CROSS_CORRELATION ? kp : p->K[j] - 1 - kp;
}

#ifdef GRADREF_X86
/* The depthwise kernels gradref__cbd_depthwise_plane chooses among (cbd_avx2.c, cbd_avx512.c):
 * one grad row from the nrows diff rows its row taps reach (rows, with the stored row-tap
 * index base); four rows at once; a whole plane for K <= 3 x 3 and one depth. */
void gradref__cbd_row_avx2(const gradref__cbd_plan *p, const float *w, const float *const *rows,
                           const int64_t *base, int64_t nrows, float *out);
void gradref__cbd_rows4_avx512(const gradref__cbd_plan *p, const float *w, const float *diff,
                               const float *const rows[4][64], const int64_t base[4][64],
                               const int64_t *nr, int64_t nrow, float *out);
void gradref__cbd_plane_small_avx512(const gradref__cbd_plan *p, const float *w, const float *diff,
                                     float *grad);
/* Rows of the AVX-512 GEMM panels (gradref__sgemm_mr for that family). */
#  define GRADREF_CBD_TILE_ROWS 14
/* Stride 1 and grad's last two sizes equal to diff's: grad[ic0 + i][j0 .. j0 + cols) for
 * i < rows (cols <= 32) straight from diff, without packing: the GEMM chain over k = (phase
 * tap, oc) with A one prepacked 14-row filter panel (k-major, K = ntaps * ocpg). Tap t reads
 * image + offset[t] + oc * channel_stride (image already at pixel j0) in the lanes of its two
 * 16-lane masks (gradref__cbd_tile_masks: the lanes whose tap falls inside diff), zero
 * elsewhere, and a tap without lanes is skipped (exact for a finite filter). `inside` 1 promises
 * that the 32 floats at every such address are readable (then whole vectors are loaded); 2 says
 * the image is a packed tile (gradref__cbd_pack_tile_avx512) whose lanes outside the taps
 * already hold zeros, so only the skipping of taps without lanes uses the masks. c is grad at
 * (ic0, j0), ldc its channel stride. The CPU must have AVX-512F. */
void gradref__cbd_tile_avx512(const float *image, int64_t channel_stride, int64_t ocpg,
                              const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                              int64_t cols, int inside, const float *a, int rows, float *c,
                              int64_t ldc);
/* The diff a tile of gradref__cbd_tile_avx512 reads (same arguments), packed: dst[(t * ocpg +
 * oc) * 32 + l] = lane l of tap t, channel oc, zero where the tap's mask has no lane. Taps
 * without lanes are not written. */
void gradref__cbd_pack_tile_avx512(const float *image, int64_t channel_stride, int64_t ocpg,
                                   const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                                   float *dst);
/* row[r * row_stride + 2 * x] = from[r * len + x] for x < len and r < rows, the odd elements
 * untouched (AVX-512F). */
void gradref__cbd_scatter2_avx512(const float *from, int64_t len, int64_t rows, float *row,
                                  int64_t row_stride);
/* The two masks per tap of the tile of cols (<= 32) sub-grid pixels from j0. */
void gradref__cbd_tile_masks(const int64_t *tap, int64_t ntaps, const int64_t *Q, const int64_t *O,
                             int64_t j0, int64_t cols, uint16_t *masks);
#endif

#endif
