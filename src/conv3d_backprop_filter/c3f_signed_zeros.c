/* SPDX-License-Identifier: Apache-2.0 */
/* The signs of zero results (gradref__c3f_mend_signed_zeros). The reference skips the
 * reduction terms whose input tap lies in the padding; the fast paths pack zeros there and add
 * them as x * dy terms, which turns a running -0 (an underflowed product) into +0 and changes
 * no other value, so a result can differ only where the fast path stored +0. A -0 needs a
 * product |x| * |dy| below 2^-102 (above it, every f32 product and every f32 sum with it is a
 * multiple of 2^-149: zero exactly, +0, or representable). F16 products are at least 2^-48. */
#include <math.h>

#include "c3f_internal.h"
#include "common/convert.h"
#include "common/exec.h"
#include "common/magnitude.h"
#include "common/tensor.h"

static int watched(const gradref__c3f_plan *p) {
    return p->precision != GRADREF_PRECISION_HIGH &&
           (p->in_dtype == GRADREF_F32 || p->in_dtype == GRADREF_BF16);
}

/* dw element e (the reference's order: co, ci, tap) */
static const char *dw_element(const gradref__c3f_plan *p, int64_t e) {
    const int64_t T = p->K[0] * p->K[1] * p->K[2];
    const int64_t co = e / (p->Cin_g * T), ci = e / T % p->Cin_g, t = e % T;
    const int64_t k0 = t / (p->K[1] * p->K[2]), k1 = t / p->K[2] % p->K[1], k2 = t % p->K[2];
    return p->dw +
           (size_t)(co * p->ws[0] + ci * p->ws[1] + k0 * p->ws[2] + k1 * p->ws[3] + k2 * p->ws[4]) *
               p->out_size;
}

static int zero_bits(const char *e, size_t bytes) {
    for (size_t b = 0; b < bytes; b++)
        if (e[b]) return 0;
    return 1;
}

/* The least nonzero |v| of a 5-D operand (sizes n, C, then three spatial: sp), by images over
 * the threads: its f32 bits in `least`. */
typedef struct least_scan {
    const gradref__c3f_plan *p;
    const char *base;
    const int64_t *s, *sp;
    int64_t C;
    uint32_t least;
} least_scan;

static void least_images(const void *arg, int64_t n0, int64_t n1) {
    least_scan *a = (least_scan *)(uintptr_t)arg; /* only `least`, by atomics */
    const int64_t elem = (int64_t)gradref__dtype_size(a->p->in_dtype);
    const int64_t size[4] = {a->C, a->sp[0], a->sp[1], a->sp[2]};
    uint32_t least = GRADREF__NO_MAGNITUDE;
    for (int64_t n = n0; n < n1; n++) {
        const uint32_t image = gradref__least_magnitude_view(
            a->p->in_dtype, a->base + n * a->s[0] * elem, 4, size, a->s + 1);
        least = image < least ? image : least;
    }
    uint32_t seen = __atomic_load_n(&a->least, __ATOMIC_RELAXED);
    while (least < seen && !__atomic_compare_exchange_n(&a->least, &seen, least, 0,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* The smallest nonzero |v| of a 5-D operand (sizes n, c, then three spatial), +Inf if none. */
static double smallest(const gradref__c3f_plan *p, const char *base, const int64_t *s, int64_t C,
                       const int64_t *sp, int threads) {
    least_scan a = {p, base, s, sp, C, GRADREF__NO_MAGNITUDE};
    gradref__parallel_ranges(p->N, threads, least_images, &a);
    return (double)gradref__f32_from_bits(a.least);
}

/* Whether dw holds a +0 (all bits zero): a linear scan when its elements fill their span. */
static int holds_zero(const gradref__c3f_plan *p, int64_t elements) {
    const int64_t size[5] = {p->G * p->Cout_g, p->Cin_g, p->K[0], p->K[1], p->K[2]};
    int64_t last = 0;
    for (int d = 0; d < 5; d++)
        last += (size[d] - 1) * p->ws[d];
    if (last + 1 == elements) { /* dense in some dim order (outputs never overlap) */
        int zero = 0;
        if (p->out_size == 4)
            for (int64_t e = 0; e < elements; e++)
                zero |= ((const uint32_t *)(const void *)p->dw)[e] == 0;
        else if (p->out_size == 2)
            for (int64_t e = 0; e < elements; e++)
                zero |= ((const uint16_t *)(const void *)p->dw)[e] == 0;
        else
            for (int64_t e = 0; e < elements; e++)
                zero |= ((const uint64_t *)(const void *)p->dw)[e] == 0;
        return zero;
    }
    for (int64_t e = 0; e < elements; e++)
        if (zero_bits(dw_element(p, e), p->out_size)) return 1;
    return 0;
}

static void reference_zeros(const void *plan, int64_t e0, int64_t e1) {
    const gradref__c3f_plan *p = plan;
    for (int64_t e = e0; e < e1; e++)
        if (zero_bits(dw_element(p, e), p->out_size)) gradref__c3f_ref_elements(p, e, e + 1);
}

void gradref__c3f_mend_signed_zeros(const gradref__c3f_plan *p, int threads) {
    if (!watched(p) || p->zero_only) return;
    const int64_t elements = p->G * p->Cout_g * p->Cin_g * p->K[0] * p->K[1] * p->K[2];
    if (!holds_zero(p, elements)) return; /* no +0: nothing can differ */
    const double x = smallest(p, p->x, p->xs, p->G * p->Cin_g, p->I, threads);
    if (!(x < INFINITY)) return;
    const double dy = smallest(p, p->dy, p->ys, p->G * p->Cout_g, p->O, threads);
    if (!(x * dy < 0x1p-102)) return; /* with no nonzero dy the product is +Inf */
    gradref__parallel_ranges(elements, threads, reference_zeros, p);
}
