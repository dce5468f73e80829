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

#endif
