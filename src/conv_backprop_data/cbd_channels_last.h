/* SPDX-License-Identifier: Apache-2.0 */
/* Depthwise on channels-last data by the level's dw_cl_row (cbd_channels_last.c). */
#ifndef GRADREF_CBD_CHANNELS_LAST_H
#define GRADREF_CBD_CHANNELS_LAST_H

#include "cbd_run.h"

/* Whether plan p (depthwise) runs channels-last: 3-D, 2-D or 1-D at any stride, F32, F16 or
 * BF16 diff and grad with the channels side by side, at most 64 plane x row taps and 64 column
 * taps. */
int gradref__cbd_cl_fits(const gradref__cbd_plan *p);
/* R's cl_chunk and cl_bands for plan p on `threads` threads, and the work items. */
void gradref__cbd_cl_plan(const gradref__cbd_plan *p, int threads, cbd_run *R);
int64_t gradref__cbd_cl_items(const cbd_run *R);
/* A thread's scratch, in bytes, for any thread count: its ring of staged diff rows, for F16
 * and BF16 a diff row and a grad row in f32, and the ring's tags. */
size_t gradref__cbd_cl_scratch_bytes(const gradref__cbd_plan *p);
/* Plan p's filter of channels [r0, r1) into cl_w, dw_cl_row's order: block, row tap,
 * column tap (the chain's), lane; with r1 = G, zeros in the last block's lanes past G.
 * Returns 0 if a weight is not finite. */
int gradref__cbd_cl_weights(const gradref__cbd_plan *p, int64_t r0, int64_t r1, float *cl_w);
/* The floats cl_w takes: G rounded up to whole blocks, times the taps. */
int64_t gradref__cbd_cl_weight_floats(const gradref__cbd_plan *p);
/* Work item `it` (image, chunk, band of grad rows; the band fastest) with this thread's
 * scratch. */
void gradref__cbd_cl_item(const cbd_run *R, int64_t it, float *scratch);

#endif
