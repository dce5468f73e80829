/* SPDX-License-Identifier: Apache-2.0 */
/* The fast path's working state (gs3d_fast.c, gs3d_fast_impl.h); the kernels' arguments are in
 * gs3d_kernels.h.
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
#include "gs3d_kernels.h"

/* dx work is bucketed by destination z plane so that each (channel, plane) of the accumulator
 * stays in L1 while it is updated. Plane z's bucket holds, in point order, one record per point
 * with corners on that plane (the point's top or bottom four). */
typedef struct gs3d_buckets {
    void *records;  /* per image 2*P records of the pass's record type */
    int64_t *start; /* per image D+1 entries: bucket z is [start[z], start[z+1]) */
    /* per thread 3*D entries: its counts of two images (by parity), then its fill cursors */
    int64_t *counts;
} gs3d_buckets;

/* The fast path's working state: the kernels' arguments and what only the passes use. */
typedef struct gs3d_run {
    const gradref__gs3d_plan *p;           /* the portable passes' (gs3d_fast.c) */
    const struct gradref__gs3d_kernels *k; /* the vector kernels (gs3d_kernels.h) */
    gs3d_kargs a;                          /* what the kernels read and write */
    char *acc_planes; /* per thread, one dense channels-last A plane (dx_item copies it out) */
    size_t acc_plane_bytes;
    gs3d_buckets b;
} gs3d_run;

/* Image n's accumulator plane z: in dx, or this thread's plane buffer. */
static inline void *gs3d_acc_plane(const gs3d_run *r, int64_t n, int64_t z, size_t elem) {
    if (r->acc_planes) return r->acc_planes + r->acc_plane_bytes * (size_t)gradref__thread_num();
    return (char *)r->a.acc + (size_t)(n * r->a.as[0] + z * r->a.as[2]) * elem;
}

/* The NaN rule (common/nan.h) on a finished plane (gs3d_acc_plane's: the thread's buffer, or
 * dx's own plane), while it is in the cache. */
void gradref__gs3d_canon_plane(const gs3d_run *r, void *plane, int wide);

/* A finished plane buffer (f32, or f64 when wide) to dx[n, :, z], rounded to dx's dtype. */
void gradref__gs3d_plane_out(const gs3d_run *r, const void *plane, int wide, int64_t n, int64_t z);

/* dx for one accumulator plane with the table's dx_plane when channels are adjacent in the
 * accumulator and in grad; returns 0 (doing nothing) otherwise. */
int gradref__gs3d_dx_plane_f32(const gs3d_run *r, const gs3d_record_f *rec, int64_t count,
                               float *plane, const float *gn);

/* Points per dgrid work item. */
#define GS3D_POINT_BLOCK 256

#endif
