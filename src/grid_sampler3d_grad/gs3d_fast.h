/* The fast path's working state, shared by the portable passes (gs3d_fast.c) and the AVX2
 * kernels (gs3d_simd.c).
 *
 * Pass 1 computes each output point's geometry once (corner offsets, in-bounds mask, weights,
 * distances, multipliers). Pass 2 (dgrid) owns blocks of points and loops the channels of
 * each point in order; pass 3 (dx) owns channel blocks of an image and scatters every point of
 * them in point order. Each output element is thus made by one thread in the reference's order,
 * so the bits do not depend on the thread count. */
#ifndef GRADREF_GS3D_FAST_H
#define GRADREF_GS3D_FAST_H

#include <stdint.h>

#include "gs3d_internal.h"

/* Per point p of all N*P points (index n*P + q); T is float or double as the pass's type. */
typedef struct gs3d_geom {
    void *w;       /* T[N*P][8]: corner weights tnw..bse */
    void *dist;    /* T[6][N*P]: x1-ix, ix-x0, y1-iy, iy-y0, z1-iz, iz-z0 */
    void *mult;    /* T[3][N*P]: d(index)/d(grid) for x, y, z */
    int64_t *offx; /* corner tnw's element offset in x[n, c] (0 when mask is 0) */
    int64_t *offa; /* the same in the dx accumulator */
    int64_t *offg; /* the point's element offset in grad[n, c] */
    uint8_t *mask; /* bit k: corner k in bounds (nearest: bit 0, the rounded voxel) */
} gs3d_geom;

typedef struct gs3d_run {
    const gradref__gs3d_plan *p;
    int64_t P;            /* points per image: Do*Ho*Wo */
    const void *x, *grad; /* T data (the plan's, or f32 copies of F16/BF16 inputs) */
    int64_t xs[5], gs[5]; /* their strides */
    void *acc;            /* A data: dx itself, or a dense buffer; NULL: no dx */
    int64_t as[5];        /* its strides */
    int64_t dx_corner[8]; /* corner k's offset from tnw in x */
    int64_t da_corner[8]; /* ... and in acc */
    gs3d_geom g;
} gs3d_run;

/* Points per dgrid work item. */
#define GS3D_POINT_BLOCK 256

#endif
