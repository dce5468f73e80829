/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's validated problem, shared by the entry point, the reference loop
 * and the fast path. */
#ifndef GRADREF_C3F_INTERNAL_H
#define GRADREF_C3F_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/conv.h"
#include "common/fast_path.h"
#include "common/isa.h"
#include "gradref.h"

/* Reduction indices per block: each dw element sums blocks of this many consecutive
 * (n, od, oh, ow) with one fused multiply-add chain, then adds the blocks pairwise. */
#define GRADREF__C3F_BLOCK 256

typedef struct gradref__c3f_plan {
    GRADREF__CONV_PLAN_FIELDS; /* in: x and dy; out: dw */
    int64_t Cin_g, Cout_g;
    const char *x, *dy;
    char *dw;
    int64_t xs[5]; /* x strides: n, c, d, h, w */
    int64_t ys[5]; /* dy strides */
    int64_t ws[5]; /* dw strides: co, ci, kd, kh, kw */
    int32_t terms; /* GRADREF__TERMS_*: the reference writes Σ|x dy| or the term count */
} gradref__c3f_plan;

gradref_status gradref__c3f_validate(const gradref_conv_params *p, const gradref_tensor *x,
                                     const gradref_tensor *dy, const gradref_tensor *dw,
                                     gradref__c3f_plan *plan);

/* The formula of docs/conv3d_backprop_filter.md element by element (the oracle). */
void gradref__c3f_ref(const gradref__c3f_plan *plan);
/* The same for dw elements [e0, e1) of the Cout * Cin/G * kD * kH * kW, in logical order. */
void gradref__c3f_ref_elements(const gradref__c3f_plan *plan, int64_t e0, int64_t e1);

/* GRADREF_PADDED_ZEROS after a call: dw[co, :, t] = NaN for every tap t through which a
 * non-finite dy[n, co, o] meets the padding (a zero-filled input's 0 * Inf or 0 * NaN). */
void gradref__c3f_padded_nans(const gradref__c3f_plan *plan);
/* The reference's signed zeros after a fast path's run (c3f_signed_zeros.c; gradref__c3f_fast
 * and the direct strategy call it): a dw element left +0 may be -0 by the formula when some
 * product underflows (F32, BF16 and HF32); when one can, the reference recomputes those. */
void gradref__c3f_mend_signed_zeros(const gradref__c3f_plan *plan, int threads);

/* Workspace bytes of the fast path for this plan at `precision` with `threads` threads. */
size_t gradref__c3f_fast_workspace(const gradref__c3f_plan *plan, int32_t precision, int threads);
/* The most threads the fast path keeps busy (its work items), out of `threads`. */
int gradref__c3f_fast_threads(const gradref__c3f_plan *plan, int32_t precision, int threads);
/* The fast path; `ws` is 64-byte aligned and holds the bytes for `threads`. */
void gradref__c3f_fast(const gradref__c3f_plan *plan, void *ws, int threads);

/* conv3d_backprop_filter's strategies, in the order they are tried (c3f_fast.c):
 *   gemm       block GEMMs over staged or in-place x and dy (GRADREF_VERBOSE says
 *              gemm_row_tiles, gemm_indirect or gemm_split_reduction for those variants);
 *   direct     the block GEMMs with stack buffers (c3f_direct.c): no workspace;
 *   reference  the reference loop, dw elements split over the threads.
 * A dy holding Inf or NaN turns gemm into the reference loop when the run finds it. */
#define GRADREF__C3F_STRATEGIES 3
extern const gradref__strategy gradref__c3f_strategies[GRADREF__C3F_STRATEGIES];
/* The entry points' table (conv3d_backprop_filter.c): tests run its rows by name. */
extern const gradref__fast_path gradref__c3f_fast_path;
/* Whether c3f_direct.c takes plan p (not F64 or HIGH, a finite dy), and the path itself. */
int gradref__c3f_direct_fits(const gradref__c3f_plan *p);
void gradref__c3f_direct(const gradref__c3f_plan *p, int threads);

#endif
