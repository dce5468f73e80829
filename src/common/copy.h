/* SPDX-License-Identifier: Apache-2.0 */
/* The strided copy behind gradref_copy, for callers whose descriptors are already valid. */
#ifndef GRADREF_COMMON_COPY_H
#define GRADREF_COMMON_COPY_H

#include <stdint.h>

#include "internal.h"

/* gradref_copy's work without its checks: src and dst have the same shape, dst does not overlap
 * itself or src, the conversion is one gradref_copy allows, and threads >= 1. Its kernels
 * (conversions, transposes) are picked at or below max_isa (common/isa.h), the caller's plan's. */
void gradref__copy_run(const gradref_tensor *src, const gradref_tensor *dst, int threads,
                       int max_isa);

/* The strides of a dense channels-last (N, D, H, W, C) layout of the 5-D logical shape
 * (N, C, D, H, W), in logical order. */
void gradref__channels_last_strides(const int64_t *shape, int64_t *st);

/* gradref__copy_run on arrays given by pointer, dtype and 5-D shape and strides: the staging
 * copies of the fast paths (both sides addressable, dst not overlapping itself or src). */
void gradref__copy5(const int64_t *shape, const void *src, int32_t sdt, const int64_t *ss,
                    void *dst, int32_t ddt, const int64_t *ds, int threads, int max_isa);

/* gradref__copy5 into a part of an output of `whole_bytes` in all: a layout change streams its
 * stores when the whole is too large for the cache (GRADREF__STREAM_MIN_BYTES), as
 * gradref__copy_run does for its own dst. Fenced before it returns. */
void gradref__copy5_part(const int64_t *shape, const void *src, int32_t sdt, const int64_t *ss,
                         void *dst, int32_t ddt, const int64_t *ds, size_t whole_bytes, int threads,
                         int max_isa);

/* Writes +0 to every element of a valid output descriptor. */
void gradref__fill_zero(const gradref_tensor *t, int threads);

#endif
