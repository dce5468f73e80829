/* SPDX-License-Identifier: Apache-2.0 */
/* grid_sampler3d_grad's validated problem, shared by the entry point, the reference loop and
 * the fast path. */
#ifndef GRADREF_GS3D_INTERNAL_H
#define GRADREF_GS3D_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gradref.h"

/* One tensor: data and element strides in its logical order. */
typedef struct gradref__gs3d_view {
    char *data;
    int64_t s[5];
} gradref__gs3d_view;

typedef struct gradref__gs3d_plan {
    int32_t interp, padding, align_corners;
    int32_t dtype;     /* of all five tensors (the inputs' with terms) */
    int32_t terms;     /* GRADREF__TERMS_*: the reference writes each output's Σ|term| or its
                          rounding count, in F64 (out_dtype) */
    int32_t out_dtype; /* dx's and dgrid's: dtype, or F64 with terms */
    int32_t precision; /* gradref_precision */
    int32_t max_isa;   /* the highest kernel level to use (common/isa.h; tests lower it, and
                          the CPU may lower it further) */
    size_t elem_size;
    int64_t N, C;
    int64_t D, H, W;    /* x's spatial sizes, each >= 1 */
    int64_t Do, Ho, Wo; /* grad's (and grid's) spatial sizes */
    gradref__gs3d_view grad, x, grid;
    gradref__gs3d_view dx, dgrid; /* data NULL: not wanted */
    int64_t images_per_pass;      /* the fast path's images per pass; 0: all N */
} gradref__gs3d_plan;

/* Validates every argument (before anything is written) and fills *plan. */
gradref_status gradref__gs3d_validate(const gradref_grid_sampler3d_params *p,
                                      const gradref_tensor *grad, const gradref_tensor *x,
                                      const gradref_tensor *grid, const gradref_tensor *dx,
                                      const gradref_tensor *dgrid, gradref__gs3d_plan *plan);

/* The same for a GRADREF_TERM_* call (terms: GRADREF__TERMS_*): dx and dgrid F64. */
gradref_status gradref__gs3d_validate_terms(const gradref_grid_sampler3d_params *p,
                                            const gradref_tensor *const *tensors, int32_t terms,
                                            gradref__gs3d_plan *plan);

/* The formulas of docs/grid_sampler3d_grad.md, point by point in PyTorch's order (the oracle).
 * Allocates its own accumulator; returns NO_MEMORY if it cannot. */
gradref_status gradref__gs3d_ref(const gradref__gs3d_plan *plan);

/* Workspace bytes the fast path needs for this plan at `precision` on `threads` threads (some
 * parts are per thread). */
size_t gradref__gs3d_fast_workspace(const gradref__gs3d_plan *plan, int32_t precision, int threads);

/* Images per pass that keep a NULL-workspace call's allocation small (gs3d_fast.c). */
int64_t gradref__gs3d_images_per_group(const gradref__gs3d_plan *plan, int32_t precision,
                                       int threads);

/* The fast path; `ws` holds gradref__gs3d_fast_workspace(plan, plan->precision, threads)
 * bytes, 64-byte aligned. */
void gradref__gs3d_fast(const gradref__gs3d_plan *plan, void *ws, int threads);

#endif
