/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's validated problem, shared by the entry point, the reference loop and
 * the fast path. Every problem is held as 3-D: a 1-D or 2-D convolution gets leading spatial
 * dims of size 1 (stride, dilation 1, no padding). */
#ifndef GRADREF_CBD_INTERNAL_H
#define GRADREF_CBD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/conv.h"
#include "common/fast_path.h"
#include "common/nan.h"
#include "gradref.h"

typedef struct gradref__cbd_plan {
    GRADREF__CONV_PLAN_FIELDS; /* in: filter and diff; out: grad */
    int32_t rank;              /* spatial dims of the call: 1, 2 or 3 */
    int64_t ICpg, OCpg;
    const char *filter, *diff;
    char *grad;
    int64_t fs[6]; /* filter strides: g, oc, ic, k0, k1, k2 */
    int64_t ds[6]; /* diff strides: n, g, oc, o0, o1, o2 */
    int64_t gs[6]; /* grad strides: n, g, ic, i0, i1, i2 */
    int32_t qs8;   /* I8 grad of QuantizedS8 values: the I32 sums requantised */
    float qs8_acc_scale, qs8_grad_scale; /* filter * diff scale (float), grad's scale */
    int32_t int8_part;  /* one group's part of an I8 problem's output channels (cbd_int8.c) */
    int *pos_zero_seen; /* NULL, or set to 1 when the fast path stores a +0 f32 value */
    int32_t terms;      /* GRADREF__TERMS_*: the reference writes Σ|w d| or the term count */
} gradref__cbd_plan;

/* The NaN rule on n f32 values the fast path is about to store, noting a +0 among them when the
 * plan asks (cbd_signed_zeros.c): set by any thread, read after the run. */
static inline void gradref__cbd_canon(const gradref__cbd_plan *p, float *v, int64_t n) {
    if (!p->pos_zero_seen)
        gradref__canon_nans_f32(v, n, p->max_isa);
    else if (gradref__canon_nans_f32_zeros(v, n, p->max_isa))
        __atomic_store_n(p->pos_zero_seen, 1, __ATOMIC_RELAXED);
}

/* Runs `run` (a fast path of plan p) and mends the signs of its zeros: the fast paths add the
 * taps that fall outside diff as zero terms, which turns a -0 sum (an underflowed product)
 * into +0 where the reference loop, skipping those taps, keeps -0. Only +0 results can differ,
 * only for F32/BF16 at the default precision, and only if some |w| * |d| < 2^-102. */
void gradref__cbd_run_signed_zeros(const gradref__cbd_plan *p, int threads,
                                   void (*run)(const gradref__cbd_plan *p, void *ctx, int threads),
                                   void *ctx);

/* Validates every argument (before anything is written) and fills *plan. */
gradref_status gradref__cbd_validate(const gradref_conv_params *p, const gradref_tensor *filter,
                                     const gradref_tensor *diff, const gradref_tensor *grad,
                                     gradref__cbd_plan *plan);
/* The same for gradref_conv_backprop_data_qs8 (I8 in and out, the scales checked). */
gradref_status gradref__cbd_validate_qs8(const gradref_conv_params *p,
                                         const gradref_qs8_scales *scales,
                                         const gradref_tensor *filter, const gradref_tensor *diff,
                                         const gradref_tensor *grad, gradref__cbd_plan *plan);

/* MegEngine's QuantizedS8 requantisation of an int32 sum (DTypeParamImpl<dt_qint8>::quantize
 * of the QuantizedS32 value): t = acc * acc_scale in float, roundf(t / grad_scale), clamped to
 * -128..127 (a NaN gives -128, as fmax(-128, NaN) does). */
int8_t gradref__cbd_qs8_requantize(int32_t acc, float acc_scale, float grad_scale);

/* The same without libm calls or branches, for the fast path's epilogue (the compiler
 * vectorises it): the quotient clamped first (roundf is monotonic and keeps -128 and 127, so
 * clamping before or after rounding agrees; a NaN fails the first test and becomes -128), then
 * rounded half away from zero from its truncation (v - trunc(v) is exact below 2^23). */
static inline int8_t gradref__cbd_qs8_requantize_inline(int32_t acc, float acc_scale,
                                                        float grad_scale) {
    float v = (float)acc * acc_scale / grad_scale;
    v = v > -128.0f ? v : -128.0f;
    v = v < 127.0f ? v : 127.0f;
    const int32_t i = (int32_t)v;
    const float frac = v - (float)i;
    return (int8_t)(i + (frac >= 0.5f) - (frac <= -0.5f));
}

/* The formula of docs/conv_backprop_data.md element by element (the oracle). */
void gradref__cbd_ref(const gradref__cbd_plan *plan);
/* The same for the grad channel slabs [s0, s1) of the N*G*ICpg slabs (n, g, ic), in order. */
void gradref__cbd_ref_slabs(const gradref__cbd_plan *plan, int64_t s0, int64_t s1);

/* The same for the elements of those slabs that hold +0 (the bits 0): the signs of zeros the
 * fast path could not tell (cbd_signed_zeros.c). */
void gradref__cbd_ref_zero_slabs(const gradref__cbd_plan *plan, int64_t s0, int64_t s1);

/* GRADREF_PRECISION_MEGENGINE_DEFAULT on items [item0, item1) of the N*G items (n, g): MegEngine's
 * naive scatter, accumulating in the F16/BF16 grad elements (cbd_megengine.c). */
void gradref__cbd_megengine_items(const gradref__cbd_plan *plan, int64_t item0, int64_t item1);

/* Workspace bytes of the fast path for this plan at `precision` with `threads` threads. */
size_t gradref__cbd_fast_workspace(const gradref__cbd_plan *plan, int32_t precision, int threads);
/* The most threads the fast path keeps busy (its work items), out of `threads`. */
int gradref__cbd_fast_threads(const gradref__cbd_plan *plan, int32_t precision, int threads);
/* The fast path (the depthwise rows or the stride phases, as the plan's shape says); `ws` is
 * 64-byte aligned and holds the bytes for `threads`. */
void gradref__cbd_fast(const gradref__cbd_plan *plan, void *ws, int threads);

/* conv_backprop_data's strategies, in the order they are tried (cbd_fast.c):
 *   megengine_lanes, megengine_scatter  MEGENGINE_DEFAULT (no workspace);
 *   depthwise    depthwise rows (the filter packed, diff and grad staged as needed);
 *   phases       the stride phases by GEMMs or direct tiles (GRADREF_VERBOSE says
 *                phases_packed_tiles or int8_parts for those variants);
 *   direct       the phases' GEMMs with stack buffers (cbd_direct.c): no workspace;
 *   reference    the reference loop, grad slabs split over the threads.
 * A filter holding Inf or NaN turns depthwise and phases into the reference loop when the run
 * finds it. */
#define GRADREF__CBD_STRATEGIES 6
extern const gradref__strategy gradref__cbd_strategies[GRADREF__CBD_STRATEGIES];
/* The entry points' table (conv_backprop_data.c): tests run its rows by name. */
extern const gradref__fast_path gradref__cbd_fast_path;

#endif
