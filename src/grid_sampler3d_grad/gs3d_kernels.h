/* SPDX-License-Identifier: Apache-2.0 */
/* The x86 kernels of the grid_sampler3d_grad fast path (GCC or Clang), for f32 geometry and f32
 * sums, one ISA per file (gs3d_avx2.c, gs3d_avx512.c; gs3d_kernels.c chooses). They perform the
 * portable passes' operations in the same order, with no FMA, so the bits are the reference's. */
#ifndef GRADREF_GS3D_KERNELS_H
#define GRADREF_GS3D_KERNELS_H

#include <stdint.h>

#include "common/internal.h"
#include "common/isa.h"
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

/* The sizes, modes and grid/dgrid views the kernels read (the plan's, copied: the kernels never
 * take the plan). */
typedef struct gs3d_shape {
    int64_t N, C, D, H, W, Ho, Wo;
    int32_t interp, padding, align_corners, dtype;
    size_t elem_size;
    gradref__gs3d_view grid, dgrid;
} gs3d_shape;

/* What the kernels read and write: the sizes, modes and views, the data as the fast path
 * stages it, and the per-point arrays of the passes. The fast path's own state (gs3d_run in
 * gs3d_fast.h) holds one. */
typedef struct gs3d_kargs {
    gs3d_shape shape;
    int64_t P;             /* points per image: Do*Ho*Wo */
    const void *x, *grad;  /* T data (the plan's, or f32 copies) */
    int64_t xs[5], gs[5];  /* their strides */
    int grad_points_dense; /* grad[n, c] is contiguous over the points */
    void *acc;             /* A data: dx itself; NULL: per-thread planes or no dx */
    int64_t as[5];         /* its strides (plane-local ones for the planes) */
    int64_t dx_corner[8];  /* corner k's offset from tnw in x */
    int64_t da_plane[4];   /* corner (dy, dx) offset from tnw within an accumulator plane */
    gs3d_geom g;
    gs3d_voxels v;
} gs3d_kargs;

/* The vector kernels of one ISA, each replacing a part of the fast path's own loops (which are
 * the portable kernels: a NULL entry leaves that part to them). The widest table the plan's
 * max_isa and the CPU allow is picked once per call (gs3d_kernels.c). */
typedef struct gradref__gs3d_kernels {
    const char *isa;
    /* F32 trilinear dgrid from point q0 on, 16 or 8 points per step (the conditions below);
     * each returns how many points it did. */
    int64_t (*dgrid16)(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1);
    int64_t (*dgrid8)(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1);
    /* F32 geometry, 16 points per step; returns how many. */
    int64_t (*geometry16)(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1);
    /* nearest: the voxel index's pass, dx by channel, dx by voxel from the index */
    int64_t (*voxel_slots)(const gs3d_kargs *r, int64_t n);
    void (*nearest_dx)(const gs3d_kargs *r, int64_t n, int64_t c);
    void (*nearest_dx_voxels)(const gs3d_kargs *r, int64_t n, int64_t c0, float *stage);
    /* one dx accumulator plane with adjacent channels */
    void (*dx_plane)(const gs3d_kargs *r, const gs3d_record_f *rec, int64_t count, float *plane,
                     const float *gn);
} gradref__gs3d_kernels;

/* The table of the highest level at or below max_isa (common/isa.h) that the CPU runs. */
const gradref__gs3d_kernels *gradref__gs3d_kernels_for(int max_isa);

#ifdef GRADREF__X86
extern const gradref__gs3d_kernels gradref__gs3d_kernels_avx2;   /* gs3d_avx2.c */
extern const gradref__gs3d_kernels gradref__gs3d_kernels_avx512; /* gs3d_avx512.c */
#endif
#ifdef GRADREF__ARM64
extern const gradref__gs3d_kernels gradref__gs3d_kernels_neon; /* gs3d_neon.c */
#endif

/* Point (stage offset `row`) in voxel v: it takes the first or second slot if free, else it
 * is appended to `later` (without branches: which it is, is random); returns the new count. */
static inline int64_t gradref__gs3d_slot_point(int32_t *slots, int32_t *later, int64_t count,
                                               int32_t none, int64_t v, int32_t row) {
    const int32_t f = slots[2 * v], s = slots[2 * v + 1];
    const int is_first = f == none, is_second = !is_first && s == none;
    slots[2 * v] = is_first ? row : f;
    slots[2 * v + 1] = is_second ? row : s;
    later[2 * count] = (int32_t)v;
    later[2 * count + 1] = row;
    return count + (!is_first && !is_second);
}

/* The geometry pass's per-point stores for `lanes` points from i, as the portable pass makes
 * them (gs3d_kernels.c, for the vector bodies): trilinear, lane l's corner mask bits[l] and its
 * corner tnw (x[l], y[l], z[l]) as offsets (0 without a corner); nearest without a voxel
 * index, the rounded voxel, inside where hit[l] is nonzero. */
void gradref__gs3d_store_corners(const gs3d_kargs *r, int64_t i, int lanes, const int32_t *x,
                                 const int32_t *y, const int32_t *z, const uint32_t *bits);
void gradref__gs3d_store_voxels(const gs3d_kargs *r, int64_t i, int lanes, const int32_t *x,
                                const int32_t *y, const int32_t *z, const uint32_t *hit);

/* The voxel index's dx (nearest_dx_voxels) for voxels [u0, u1) of the cb planes at acc (as1
 * apart), one at a time: the two slots' stage rows, then the later points e0..e1 of `over`
 * (theirs, in point order), then the NaN rule (gs3d_kernels.c, for the ISA files). */
void gradref__gs3d_voxels_one_by_one(float *acc, int64_t as1, int cb, const float *stage,
                                     const int32_t *slots, int64_t u0, int64_t u1,
                                     const int32_t *over, int64_t e0, int64_t e1);

/* What a level's nearest_dx_voxels kernel supplies to the shared frame
 * (gradref__gs3d_nearest_dx_voxels): the staging of the grad rows (point q of the four channels
 * g[] at stage row gs3d_stage_row(q), each value +0 + g), and the blocks of 16 voxels from v
 * (block b) while they fit in V, returning where they stop; a level that streams its stores
 * fences them before it returns. */
typedef struct gs3d_voxel_frame {
    float *acc; /* channel c0's dx plane; the others as1 apart */
    int64_t as1;
    int cb;     /* channels of the call (1 .. GS3D_STAGE_CHANNELS) */
    int stream; /* dx's lines allow streaming stores */
    const float *stage;
    const int32_t *slots, *over, *start; /* image n's voxel index (gs3d_voxels) */
} gs3d_voxel_frame;
typedef void (*gs3d_stage_rows)(const float *const g[GS3D_STAGE_CHANNELS], int64_t P, float *stage);
typedef int64_t (*gs3d_block_pass)(const gs3d_voxel_frame *f, int64_t v, int64_t b, int64_t V);

/* nearest_dx_voxels for channels [c0, c0 + GS3D_STAGE_CHANNELS) of image n, a level's staging
 * and blocks inside the common frame (gs3d_kernels.c): the grad rows staged, the zero row, the
 * voxels before r->v.lead and past the last whole block one by one, the blocks between. */
void gradref__gs3d_nearest_dx_voxels(const gs3d_kargs *r, int64_t n, int64_t c0, float *stage,
                                     gs3d_stage_rows stage_rows, gs3d_block_pass blocks);

/* nearest_dx and voxel_slots point by point, for the levels without scatter and conflict
 * detection (gs3d_kernels.c; the AVX-512 ones below say what they compute). */
void gradref__gs3d_f32_nearest_dx_points(const gs3d_kargs *r, int64_t n, int64_t c);
/* dx[n, c] (the F32 accumulator, any strides) set to +0; returns its element (0, 0, 0). */
float *gradref__gs3d_zeroed_channel(const gs3d_kargs *r, int64_t n, int64_t c);
int64_t gradref__gs3d_voxel_slots_points(const gs3d_kargs *r, int64_t n);

/* dgrid of `count` consecutive points from q: out[k][j] is component k of point q + j
 * (gs3d_kernels.c, for the ISA files). */
void gradref__gs3d_store_dgrid(const gs3d_kargs *r, int64_t n, int64_t q, int count,
                               float out[3][16]);

#ifdef GRADREF__X86

/* dgrid of points [q0, q1) of image n, 8 points per step; returns how many it did (the rest,
 * fewer than 8, is left to the caller). Needs trilinear mode and x and grad offsets that fit
 * in int32. */
int64_t gradref__gs3d_f32_dgrid8_avx2(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1);
/* The same, 16 points per step (AVX-512). */
int64_t gradref__gs3d_f32_dgrid16_avx512(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1);

/* Geometry of points [q0, q1) of image n, 16 per step; returns how many it did. Needs F32
 * data, zeros or border padding (or nearest with either), a grid whose points are evenly
 * spaced (offset q * s[3]) within int32, grad offsets q * gs[4], and spatial sizes < 2^24. */
int64_t gradref__gs3d_f32_geometry16_avx512(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1);

/* Nearest mode, channel c of image n: zeroes dx[n, c] (the accumulator, F32, any strides
 * whose offsets fit int32) and adds grad[n, c, q] for every point q in order, 16 points per
 * gather-add-scatter; a group where two points share a voxel goes one point at a time. grad
 * must be contiguous over the points. */
void gradref__gs3d_f32_nearest_dx_avx512(const gs3d_kargs *r, int64_t n, int64_t c);

/* The voxel index's pass over the points of image n (build_voxels in gs3d_fast.c), 16 points
 * at a time (a group with two points on one voxel goes one point at a time): each voxel's slots
 * (all "none" before) take its first two points, and later points are appended to r->v.later in
 * point order. Returns how many were appended. */
int64_t gradref__gs3d_voxel_slots_avx512(const gs3d_kargs *r, int64_t n);

/* Nearest mode as gradref__gs3d_f32_nearest_dx_avx512, for channels [c0, c0 + GS3D_STAGE_CHANNELS)
 * of image n, from the voxel index (r->v, built for image n by build_voxels in gs3d_fast.c),
 * through `stage` (gs3d_stage_floats(P)): dx voxel by voxel, each the in-order sum of its
 * points from +0, written once; dx's planes must be dense (strides H*W, W, 1). The first two
 * points of 16 voxels are read as stage rows and transposed into channel vectors; the later
 * points of the few fuller voxels are then added in point order. */
void gradref__gs3d_f32_nearest_dx_voxels_avx512(const gs3d_kargs *r, int64_t n, int64_t c0,
                                                float *stage);

/* The AVX2 nearest_dx_voxels, as the AVX-512 one above without scatter or conflict
 * detection: 8 voxels a vector (each block of 16 in two halves), the same sums in the same
 * order. */
void gradref__gs3d_f32_nearest_dx_voxels_avx2(const gs3d_kargs *r, int64_t n, int64_t c0,
                                              float *stage);

/* The dx-plane kernels gradref__gs3d_dx_plane_f32 chooses between. */
void gradref__gs3d_f32_dx_plane_avx2(const gs3d_kargs *r, const gs3d_record_f *rec, int64_t count,
                                     float *plane, const float *gn);
void gradref__gs3d_f32_dx_plane_avx512(const gs3d_kargs *r, const gs3d_record_f *rec, int64_t count,
                                       float *plane, const float *gn);

#endif

#endif
