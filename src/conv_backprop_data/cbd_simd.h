/* Depthwise rows of the conv_backprop_data fast path (stride 1): each grad element is the
 * reference's chain of fused multiply-adds over its taps, with taps outside diff read as 0
 * (exact for a finite filter). AVX-512 and AVX2+FMA kernels, chosen at run time, and a
 * portable loop give the same bits. */
#ifndef GRADREF_CBD_SIMD_H
#define GRADREF_CBD_SIMD_H

#include "cbd_internal.h"

/* One channel: w holds the K0*K1*K2 taps (stored order), diff and grad are dense planes of
 * O and I pixels. `kernel` is the highest family allowed (common/gemm.h numbering). */
void gradref__cbd_depthwise_plane(const gradref__cbd_plan *p, const float *w, const float *diff,
                                  float *grad, int kernel);

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#  define GRADREF_CBD_PACK_FLAT 1
/* The GEMM's B packer (16- or 32-column panels, AVX-512) for a stride phase whose sub-grid has
 * diff's last two sizes (Q1 == O1, Q2 == O2): then diff pixel q + shift is at flat offset flat(q) +
 * flat(shift), and one masked load fills 16 columns. image is diff[n, g*OCpg]. */
void gradref__cbd_pack_b_flat(const float *image, int64_t channel_stride, int64_t ocpg,
                              const int64_t *tap, const int64_t *Q, const int64_t *O,
                              int64_t j_start, int64_t k0, int64_t kc, int64_t count, int width,
                              float *dst);
#endif

#endif
