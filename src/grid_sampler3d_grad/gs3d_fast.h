/* SPDX-License-Identifier: Apache-2.0 */
/* The fast path's working state, shared by the portable passes (gs3d_fast.c) and the AVX2
 * kernels (gs3d_avx2.c, gs3d_avx512.c).
 *
 * Pass 1 computes each output point's geometry once (corner offsets, in-bounds mask, weights,
 * distances, multipliers). Pass 2 (dgrid) owns blocks of points and loops the channels of
 * each point in order; pass 3 (dx) owns channel blocks of an image and scatters every point of
 * them in point order. Each output element is thus made by one thread in the reference's order,
 * so the bits do not depend on the thread count. */
#ifndef GRADREF_GS3D_FAST_H
#define GRADREF_GS3D_FAST_H

#include <stdint.h>

#include "common/internal.h"
#include "gs3d_internal.h"

/* Per point p of all N*P points (index n*P + q); T is float or double as the pass's type. On the
 * nearest voxel path (gs3d_voxels) the AVX-512 geometry writes the voxel index instead, and
 * these arrays hold only what the scalar tail wrote. */
typedef struct gs3d_geom {
    void *w;         /* T[8][N*P]: corner weights tnw..bse */
    void *dist;      /* T[6][N*P]: x1-ix, ix-x0, y1-iy, iy-y0, z1-iz, iz-z0 */
    void *mult;      /* T[3][N*P]: d(index)/d(grid) for x, y, z */
    int64_t *offx;   /* corner tnw's element offset in x[n, c] (0 when mask is 0) */
    int64_t *offa;   /* corner tnw's offset in its z plane of the dx accumulator */
    int64_t *zplane; /* corner tnw's z (nearest: the voxel's z) */
    int64_t *offg;   /* the point's element offset in grad[n, c] */
    uint8_t *mask;   /* bit k: corner k in bounds (nearest: bit 0, the rounded voxel) */
} gs3d_geom;

/* One point's corners on one accumulator plane (z0 for the top four, z0 + 1 for the bottom
 * four), for f32 and for f64 weights. */
typedef struct gs3d_record_f {
    int64_t a;   /* corner (0, 0)'s offset in the plane */
    int64_t g;   /* the point's offset in grad[n, c] */
    float w[4];  /* weights of corners (dy, dx) = 00, 01, 10, 11 */
    uint32_t on; /* bit j: corner j in bounds */
} gs3d_record_f;

typedef struct gs3d_record_d {
    int64_t a, g;
    double w[4];
    uint32_t on;
} gs3d_record_d;

/* dx work is bucketed by destination z plane so that each (channel, plane) of the accumulator
 * stays in L1 while it is updated. Plane z's bucket holds, in point order, one record per point
 * with corners on that plane (the point's top or bottom four). */
typedef struct gs3d_buckets {
    void *records;  /* per image 2*P records of the pass's record type */
    int64_t *start; /* per image D+1 entries: bucket z is [start[z], start[z+1]) */
    /* per thread 3*D entries: its counts of two images (by parity), then its fill cursors */
    int64_t *counts;
} gs3d_buckets;

/* Nearest mode: each image's points grouped by voxel (v = (z * H + y) * W + x), so that dx is
 * made voxel by voxel: the sum of the voxel's points in point order, written once. A voxel's
 * first two points are kept per voxel; its later points go to the image's overflow list, by
 * block of 16 voxels and in point order within a block. Per image: V = D*H*W voxels and P
 * points.
 *
 * The sums read grad through a stage of GS3D_STAGE_CHANNELS channels: one row of those
 * channels per point, so that one random read brings a point's value in every channel. Rows
 * are in the order an in-register transpose leaves them (gs3d_stage_row), and row
 * gs3d_zero_row(P) is zeros, the second point of a voxel that has none. A point is named by
 * its row's offset in floats. */
typedef struct gs3d_voxels {
    int32_t *vox;   /* [N][P]: each point's voxel, -1 outside (written by the geometry) */
    int32_t *slots; /* [N][V][2]: the voxel's first and second point, the zero row when none */
    int32_t *later; /* [N][2P]: (voxel, point) of each later point in point order (scratch) */
    int32_t *over;  /* [N][2P]: the same, by voxel block */
    int32_t *block_start; /* [N][blocks + 1]: block b's later points: over[start[b]..start[b+1]) */
    int64_t lead;         /* block 0 is voxels [0, lead), block b > 0 [lead + 16(b-1), +16) */
    int stream;           /* dx's blocks start on cache lines in every plane */
} gs3d_voxels;

#define GS3D_STAGE_CHANNELS 4

/* Point q = 16b + 4j + k sits in stage row 16b + 4k + j. */
static inline int64_t gs3d_stage_row(int64_t q) {
    return (q & ~(int64_t)15) | (q & 3) << 2 | (q >> 2 & 3);
}

static inline int64_t gs3d_zero_row(int64_t P) {
    return (P + 15) & ~(int64_t)15;
}

/* The slot value of "no point": the zero row's offset in floats. */
static inline int32_t gs3d_no_point(int64_t P) {
    return (int32_t)(GS3D_STAGE_CHANNELS * gs3d_zero_row(P));
}

/* Voxel blocks of an image (gs3d_voxels) when block 1 starts at `lead` (0..15). */
static inline int64_t gs3d_voxel_blocks(int64_t V, int64_t lead) {
    return (V - lead + 31) / 16;
}

static inline int64_t gs3d_voxel_block(int64_t v, int64_t lead) {
    return (v + 16 - lead) / 16;
}

/* The floats of one thread's stage, a whole number of cache lines. */
static inline int64_t gs3d_stage_floats(int64_t P) {
    return (gs3d_zero_row(P) + 4) * GS3D_STAGE_CHANNELS;
}

struct gradref__gs3d_kernels;

/* The sizes, modes and grid/dgrid views the kernels read (the plan's, copied: the kernels take
 * the run, never the plan). */
typedef struct gs3d_shape {
    int64_t N, C, D, H, W, Ho, Wo;
    int32_t interp, padding, align_corners, dtype;
    size_t elem_size;
    gradref__gs3d_view grid, dgrid;
} gs3d_shape;

typedef struct gs3d_run {
    const gradref__gs3d_plan *p;           /* the portable passes' (gs3d_fast.c) */
    gs3d_shape shape;                      /* the kernels' */
    const struct gradref__gs3d_kernels *k; /* the vector kernels (gs3d_simd.h) */
    int64_t P;                             /* points per image: Do*Ho*Wo */
    const void *x, *grad;                  /* T data (the plan's, or f32 copies) */
    int64_t xs[5], gs[5];                  /* their strides */
    int grad_points_dense;                 /* grad[n, c] is contiguous over the points */
    void *acc;                             /* A data: dx itself; NULL: per-thread planes or no dx */
    int64_t as[5];                         /* its strides (plane-local ones for the planes) */
    char *acc_planes; /* per thread, one dense channels-last A plane (dx_item copies it out) */
    size_t acc_plane_bytes;
    int64_t dx_corner[8]; /* corner k's offset from tnw in x */
    int64_t da_plane[4];  /* corner (dy, dx) offset from tnw within an accumulator plane */
    gs3d_geom g;
    gs3d_buckets b;
    gs3d_voxels v;
} gs3d_run;

/* Image n's accumulator plane z: in dx, or this thread's plane buffer. */
static inline void *gs3d_acc_plane(const gs3d_run *r, int64_t n, int64_t z, size_t elem) {
    if (r->acc_planes) return r->acc_planes + r->acc_plane_bytes * (size_t)gradref__thread_num();
    return (char *)r->acc + (size_t)(n * r->as[0] + z * r->as[2]) * elem;
}

/* The NaN rule (common/nan.h) on a finished plane (gs3d_acc_plane's: the thread's buffer, or
 * dx's own plane), while it is in the cache. */
void gradref__gs3d_canon_plane(const gs3d_run *r, void *plane, int wide);

/* A finished plane buffer (f32, or f64 when wide) to dx[n, :, z], rounded to dx's dtype. */
void gradref__gs3d_plane_out(const gs3d_run *r, const void *plane, int wide, int64_t n, int64_t z);

/* Points per dgrid work item. */
#define GS3D_POINT_BLOCK 256

#endif
