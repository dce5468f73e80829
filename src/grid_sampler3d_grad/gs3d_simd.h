/* AVX2 kernels of the grid_sampler3d_grad fast path (x86-64, GCC or Clang), for f32 geometry
 * and f32 sums. They perform the portable passes' operations in the same order, 8 lanes at a
 * time, with no FMA, so the bits are the reference's. */
#ifndef GRADREF_GS3D_SIMD_H
#define GRADREF_GS3D_SIMD_H

#include <stdint.h>

#include "gs3d_fast.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#  define GRADREF_GS3D_SIMD 1

/* 1 when the CPU has AVX2. */
int gradref__gs3d_simd_available(void);

/* dgrid of points [q0, q1) of image n, 8 points per step; returns how many it did (the rest,
 * fewer than 8, is left to the caller). Needs trilinear mode and x and grad offsets that fit
 * in int32. */
int64_t gradref__gs3d_simd_dgrid(const gs3d_run *r, int64_t n, int64_t q0, int64_t q1);

/* dx scatter for channels [c0, c1) of image n when channels are adjacent in both the
 * accumulator and grad (stride 1): every point in order, 8 channels per step. */
void gradref__gs3d_simd_dx(const gs3d_run *r, int64_t n, int64_t c0, int64_t c1);
#endif

#endif
