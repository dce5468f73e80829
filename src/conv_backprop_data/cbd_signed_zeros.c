/* SPDX-License-Identifier: Apache-2.0 */
/* The signs of zero results (cbd_internal.h's gradref__cbd_run_signed_zeros). The reference
 * skips taps outside diff; the fast paths add them as w * 0 terms. A term w * (+0) turns a
 * running -0 into +0 and changes no other value, so the two agree except where the reference
 * ends at -0 and the fast path at +0. The reference's chain starts at +0 and reaches -0 only
 * when an exact nonzero sum rounds to zero, which needs a product |w| * |d| below 2^-102: an
 * f32 product of two f32 values at least that large is a multiple of 2^-149, and so is every
 * sum of it with an f32 value, which then either is 0 exactly (+0 when rounding to nearest)
 * or is representable. F16 products are at least 2^-48 and never need this. */
#include <math.h>

#include "cbd_internal.h"
#include "common/convert.h"
#include "common/exec.h"
#include "common/magnitude.h"
#include "common/tensor.h"

static int watched(const gradref__cbd_plan *p) {
    return p->precision == GRADREF_PRECISION_DEFAULT &&
           (p->in_dtype == GRADREF_F32 || p->in_dtype == GRADREF_BF16);
}

/* The smallest nonzero |w| of the filter, or +Inf when every element is zero (or NaN). */
static float smallest_weight(const gradref__cbd_plan *p) {
    const int64_t size[6] = {p->G, p->OCpg, p->ICpg, p->K[0], p->K[1], p->K[2]};
    return gradref__f32_from_bits(
        gradref__least_magnitude_view(p->in_dtype, p->filter, 6, size, p->fs));
}

typedef struct diff_scan {
    const gradref__cbd_plan *p;
    double limit; /* a nonzero |d| below this makes a product below 2^-102 */
    int found;
} diff_scan;

/* Images [n0, n1) of diff: any nonzero |d| below the limit. */
static void scan_images(const void *arg, int64_t n0, int64_t n1) {
    diff_scan *s = (diff_scan *)(uintptr_t)arg;
    const gradref__cbd_plan *p = s->p;
    const int64_t elem = (int64_t)gradref__dtype_size(p->in_dtype);
    const int64_t size[5] = {p->G, p->OCpg, p->O[0], p->O[1], p->O[2]};
    int found = 0;
    for (int64_t n = n0; n < n1 && !found; n++) {
        const char *image = (const char *)p->diff + n * p->ds[0] * elem;
        const uint32_t least =
            gradref__least_magnitude_view(p->in_dtype, image, 5, size, p->ds + 1);
        found = (double)gradref__f32_from_bits(least) < s->limit;
    }
    if (found) __atomic_store_n(&s->found, 1, __ATOMIC_RELAXED);
}

/* Whether some product of a filter and a diff element could fall below 2^-102. */
static int products_may_underflow(const gradref__cbd_plan *p, int threads) {
    const float w = smallest_weight(p);
    if (!(w < INFINITY)) return 0; /* every product is a zero (or NaN) */
    diff_scan s = {p, 0x1p-102 / (double)w, 0};
    gradref__parallel_ranges(p->N, threads, scan_images, &s);
    return s.found;
}

static void reference_zeros(const void *plan, int64_t s0, int64_t s1) {
    gradref__cbd_ref_zero_slabs(plan, s0, s1);
}

void gradref__cbd_run_signed_zeros(const gradref__cbd_plan *p, int threads,
                                   void (*run)(const gradref__cbd_plan *p, void *ctx, int threads),
                                   void *ctx) {
    if (!watched(p)) {
        run(p, ctx, threads);
        return;
    }
    gradref__cbd_plan watching = *p;
    int seen = 0;
    watching.pos_zero_seen = &seen;
    run(&watching, ctx, threads);
    if (__atomic_load_n(&seen, __ATOMIC_RELAXED) && products_may_underflow(p, threads))
        gradref__parallel_ranges(p->N * p->G * p->ICpg, threads, reference_zeros, p);
}
