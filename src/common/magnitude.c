/* SPDX-License-Identifier: Apache-2.0 */
/* gradref__least_magnitude_bits (magnitude.h). The scans compare the bits of |v|, which order
 * as the magnitudes do, from +Inf's: a zero's key is +Inf's bits, and infinities and NaNs (at
 * or above them) never lower the least. */
#include "magnitude.h"

#include <math.h>
#include <string.h>

#include "convert.h"
#include "gradref.h"
#include "tensor.h"

static inline int32_t key_of(uint32_t magnitude) {
    return magnitude ? (int32_t)magnitude : (int32_t)GRADREF__NO_MAGNITUDE;
}

static uint32_t least_f32(const float *p, int64_t n) {
    int32_t least = (int32_t)GRADREF__NO_MAGNITUDE;
    for (int64_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, p + i, sizeof x);
        const int32_t k = key_of(x & 0x7fffffffu);
        least = k < least ? k : least;
    }
    return (uint32_t)least;
}

static uint32_t least_bf16(const uint16_t *p, int64_t n) {
    int32_t least = (int32_t)GRADREF__NO_MAGNITUDE;
    for (int64_t i = 0; i < n; i++) {
        const int32_t k = key_of((uint32_t)(p[i] & 0x7fffu) << 16);
        least = k < least ? k : least;
    }
    return (uint32_t)least;
}

uint32_t gradref__least_magnitude_bits(int32_t dtype, const void *base, int64_t n, int64_t stride) {
    if (stride == 1 && dtype == GRADREF_F32) return least_f32(base, n);
    if (stride == 1 && dtype == GRADREF_BF16) return least_bf16(base, n);
    uint32_t least = GRADREF__NO_MAGNITUDE;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t k =
            (uint32_t)key_of(gradref__f32_bits(fabsf(gradref__load_f32(dtype, base, i * stride))));
        least = k < least ? k : least;
    }
    return least;
}

/* The dims of a view longer than 1 ordered by stride, largest first (insertion sort: at most 8);
 * returns how many. */
static int by_stride(int rank, const int64_t *size, const int64_t *stride, int64_t *sz,
                     int64_t *st) {
    int kept = 0;
    for (int j = 0; j < rank; j++) {
        if (size[j] == 1) continue; /* any stride, often 0 */
        int at = kept++;
        for (; at > 0 && st[at - 1] < stride[j]; at--)
            sz[at] = sz[at - 1], st[at] = st[at - 1];
        sz[at] = size[j], st[at] = stride[j];
    }
    return kept;
}

uint32_t gradref__least_magnitude_view(int32_t dtype, const void *base, int rank,
                                       const int64_t *size, const int64_t *stride) {
    int64_t sz[8], st[8], len = 1, step = 1, rows = 1, at[8] = {0};
    for (int j = 0; j < rank; j++)
        if (size[j] == 0) return GRADREF__NO_MAGNITUDE;
    int d = by_stride(rank, size, stride, sz, st) - 1;
    if (d >= 0) len = sz[d], step = st[d], d--;
    while (d >= 0 && st[d] == step * len) /* merge a dense dim */
        len *= sz[d--];
    for (int j = 0; j <= d; j++)
        rows *= sz[j];
    const char *bytes = base;
    const int64_t elem = (int64_t)gradref__dtype_size(dtype);
    uint32_t least = GRADREF__NO_MAGNITUDE;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0;
        for (int j = 0; j <= d; j++)
            off += at[j] * st[j];
        const uint32_t row = gradref__least_magnitude_bits(dtype, bytes + off * elem, len, step);
        least = row < least ? row : least;
        for (int j = d; j >= 0 && ++at[j] == sz[j]; j--) /* the next row, odometer order */
            at[j] = 0;
    }
    return least;
}
