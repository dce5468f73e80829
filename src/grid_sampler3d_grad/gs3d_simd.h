/* SPDX-License-Identifier: Apache-2.0 */
/* The x86 kernels of the grid_sampler3d_grad fast path (GCC or Clang), for f32 geometry and f32
 * sums, one ISA per file (gs3d_avx2.c, gs3d_avx512.c; gs3d_kernels.c chooses). They perform the
 * portable passes' operations in the same order, with no FMA, so the bits are the reference's. */
#ifndef GRADREF_GS3D_SIMD_H
#define GRADREF_GS3D_SIMD_H

#include <stdint.h>

#include "gs3d_fast.h"
#include "common/isa.h"

/* The vector kernels of one ISA, each replacing a part of the fast path's own loops (which are
 * the portable kernels: a NULL entry leaves that part to them). The widest table the plan's
 * max_isa and the CPU allow is picked once per call (gs3d_kernels.c). */
typedef struct gradref__gs3d_kernels {
    const char *isa;
    /* F32 trilinear dgrid from point q0 on, 16 or 8 points per step (the conditions below);
     * each returns how many points it did. */
    int64_t (*dgrid16)(const gs3d_run *r, int64_t n, int64_t q0, int64_t q1);
    int64_t (*dgrid8)(const gs3d_run *r, int64_t n, int64_t q0, int64_t q1);
    /* F32 geometry, 16 points per step; returns how many. */
    int64_t (*geometry16)(const gs3d_run *r, int64_t n, int64_t q0, int64_t q1);
    /* nearest: the voxel index's pass, dx by channel, dx by voxel from the index */
    int64_t (*voxel_slots)(const gs3d_run *r, int64_t n);
    void (*nearest_dx)(const gs3d_run *r, int64_t n, int64_t c);
    void (*nearest_dx_voxels)(const gs3d_run *r, int64_t n, int64_t c0, float *stage);
    /* one dx accumulator plane with adjacent channels */
    void (*dx_plane)(const gs3d_run *r, const gs3d_record_f *rec, int64_t count, float *plane,
                     const float *gn);
} gradref__gs3d_kernels;

/* The table of the highest level at or below max_isa (common/isa.h) that the CPU runs. */
const gradref__gs3d_kernels *gradref__gs3d_kernels_for(int max_isa);

#ifdef GRADREF__X86
extern const gradref__gs3d_kernels gradref__gs3d_kernels_avx2;   /* gs3d_avx2.c */
extern const gradref__gs3d_kernels gradref__gs3d_kernels_avx512; /* gs3d_avx512.c */
#endif

/* dx for one accumulator plane with the table's dx_plane when channels are adjacent in the
 * accumulator and in grad; returns 0 (doing nothing) otherwise. */
int gradref__gs3d_dx_plane_f32(const gs3d_run *r, const gs3d_record_f *rec, int64_t count,
                               float *plane, const float *gn);

#ifdef GRADREF__X86

/* dgrid of points [q0, q1) of image n, 8 points per step; returns how many it did (the rest,
 * fewer than 8, is left to the caller). Needs trilinear mode and x and grad offsets that fit
 * in int32. */
int64_t gradref__gs3d_f32_dgrid8_avx2(const gs3d_run *r, int64_t n, int64_t q0, int64_t q1);
/* The same, 16 points per step (AVX-512). */
int64_t gradref__gs3d_f32_dgrid16_avx512(const gs3d_run *r, int64_t n, int64_t q0, int64_t q1);

/* Geometry of points [q0, q1) of image n, 16 per step; returns how many it did. Needs F32
 * data, zeros or border padding (or nearest with either), a grid whose points are evenly
 * spaced (offset q * s[3]) within int32, grad offsets q * gs[4], and spatial sizes < 2^24. */
int64_t gradref__gs3d_f32_geometry16_avx512(const gs3d_run *r, int64_t n, int64_t q0, int64_t q1);

/* Nearest mode, channel c of image n: zeroes dx[n, c] (the accumulator, F32, any strides
 * whose offsets fit int32) and adds grad[n, c, q] for every point q in order, 16 points per
 * gather-add-scatter; a group where two points share a voxel goes one point at a time. grad
 * must be contiguous over the points. */
void gradref__gs3d_f32_nearest_dx_avx512(const gs3d_run *r, int64_t n, int64_t c);

/* The voxel index's pass over the points of image n (build_voxels in gs3d_fast.c), 16 points
 * at a time (a group with two points on one voxel goes one point at a time): each voxel's slots
 * (all "none" before) take its first two points, and later points are appended to r->v.later in
 * point order. Returns how many were appended. */
int64_t gradref__gs3d_voxel_slots_avx512(const gs3d_run *r, int64_t n);

/* Nearest mode as gradref__gs3d_f32_nearest_dx_avx512, for channels [c0, c0 + GS3D_STAGE_CHANNELS)
 * of image n, from the voxel index (r->v, built for image n by build_voxels in gs3d_fast.c),
 * through `stage` (gs3d_stage_floats(P)): dx voxel by voxel, each the in-order sum of its
 * points from +0, written once; dx's planes must be dense (strides H*W, W, 1). The first two
 * points of 16 voxels are read as stage rows and transposed into channel vectors; the later
 * points of the few fuller voxels are then added in point order. */
void gradref__gs3d_f32_nearest_dx_voxels_avx512(const gs3d_run *r, int64_t n, int64_t c0,
                                                float *stage);

/* dgrid of `count` consecutive points from q: out[k][j] is component k of point q + j
 * (gs3d_kernels.c, for both ISA files). */
void gradref__gs3d_store_dgrid(const gs3d_run *r, int64_t n, int64_t q, int count,
                               float out[3][16]);

/* The dx-plane kernels gradref__gs3d_dx_plane_f32 chooses between. */
void gradref__gs3d_f32_dx_plane_avx2(const gs3d_run *r, const gs3d_record_f *rec, int64_t count,
                                     float *plane, const float *gn);
void gradref__gs3d_f32_dx_plane_avx512(const gs3d_run *r, const gs3d_record_f *rec, int64_t count,
                                       float *plane, const float *gn);

#endif

#endif
