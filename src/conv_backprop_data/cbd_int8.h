/* SPDX-License-Identifier: Apache-2.0 */
/* cbd_int8.c: I8 problems in parts whose sums are exact in f32, and their int32 stores. */
#ifndef GRADREF_CBD_INT8_H
#define GRADREF_CBD_INT8_H

#include "cbd_run.h"

/* How many output channels of a group an I8 problem's parts take, each part's sums exact in
 * f32 (OCpg: one part, the whole call); 0 when no part is (the reference loop). */
int64_t gradref__cbd_int8_part(const gradref__cbd_plan *p, int threads);

/* sums[i] = (first ? 0 : sums[i]) + acc[i] mod 2^32 for i < n, acc holding one part's integer
 * sums. */
void gradref__cbd_fold_sums(const float *acc, int64_t n, int first, int32_t *sums);

/* n int32 sums into grad from `to` on, `step` elements apart: I32, or requantised to
 * QuantizedS8. */
void gradref__cbd_store_sums(const gradref__cbd_plan *p, const gradref__cbd_kernels *k,
                             const int32_t *from, char *to, int64_t step, int64_t n);

/* Dense (image, channel, pixel) sums into grad: f32 integers of a single part (acc) or int32
 * (sums, when not NULL). */
void gradref__cbd_store_int(const gradref__cbd_plan *p, const float *acc, const int32_t *sums,
                            int threads);
#endif
