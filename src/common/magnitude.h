/* SPDX-License-Identifier: Apache-2.0 */
/* The least nonzero magnitude of an array: the convolutions' signed-zero mends ask whether some
 * product of their operands could fall below 2^-102 (where a sum can round to -0). */
#ifndef GRADREF_COMMON_MAGNITUDE_H
#define GRADREF_COMMON_MAGNITUDE_H

#include <stdint.h>

/* The f32 bits of the least nonzero |v| among the n elements of an array (F32, F16 or BF16,
 * read as gradref__load_f32 reads them) `stride` elements apart from base, or
 * GRADREF__NO_MAGNITUDE (+Inf's bits) when there is none: zeros, infinities and NaNs do not
 * count. Dense F32 and BF16 rows run a branch-free loop the compiler vectorises. */
#define GRADREF__NO_MAGNITUDE 0x7f800000u
uint32_t gradref__least_magnitude_bits(int32_t dtype, const void *base, int64_t n, int64_t stride);

/* The same over the elements of a view of `rank` (at most 8) dims, sizes and strides in
 * elements from base: by rows as long as its dense dims make them, in any order (NHWC's
 * channels and pixels one row). */
uint32_t gradref__least_magnitude_view(int32_t dtype, const void *base, int rank,
                                       const int64_t *size, const int64_t *stride);

#endif
