/* SPDX-License-Identifier: Apache-2.0 */
/* grid_sampler3d_grad entry points: validation (everything before any write), workspace,
 * dispatch to the fast path. */
#include <string.h>

#include "common/exec.h"
#include "common/fast_path.h"
#include "common/isa.h"
#include "common/tensor.h"
#include "gs3d_internal.h"
#include "gs3d_kernels.h"

static const char OP[] = "grid_sampler3d_grad";

/* GRADREF_VERBOSE's isa field: the level of the kernel table the plan runs. */
static const char *kernel_level(const void *plan) {
    return gradref__gs3d_kernels_for(((const gradref__gs3d_plan *)plan)->max_isa)->isa;
}

static size_t fast_workspace(const void *plan, int32_t precision, int threads) {
    return gradref__gs3d_fast_workspace(plan, precision, threads);
}

static void fast_run(const void *plan, void *ws, int threads) {
    gradref__gs3d_fast(plan, ws, threads);
}

/* Why the fast path does not take a plan. */
static const char *fast_skip(const void *plan, int32_t precision) {
    (void)precision;
    const gradref__gs3d_plan *p = plan;
    return p->terms ? "the GRADREF_TERM_* outputs come from the reference loop" : NULL;
}

/* The reference loop, on one thread. */
static void reference_run(const void *plan, void *ws, int threads) {
    (void)ws, (void)threads;
    (void)gradref__gs3d_ref(plan);
}

/* fast: every mode, dtype and layout; reference: a caller's workspace too small for fast. */
static const gradref__strategy strategies[] = {
    {"fast", fast_skip, fast_workspace, NULL, fast_run, NULL},
    {"reference", NULL, NULL, NULL, reference_run, NULL},
};
static const gradref__fast_path FAST = {OP, strategies, 2, NULL, kernel_level};

static gradref_status check_params(const gradref_grid_sampler3d_params *p) {
    if (p == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "p is NULL");
    if (p->interpolation != GRADREF_INTERP_BILINEAR && p->interpolation != GRADREF_INTERP_NEAREST)
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "p.interpolation is %d, not a gradref_interp (0 bilinear, 1 nearest)",
                             (int)p->interpolation);
    if (p->padding < GRADREF_PAD_ZEROS || p->padding > GRADREF_PAD_REFLECTION)
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "p.padding is %d, not a gradref_padding (0 zeros, 1 border, "
                             "2 reflection)",
                             (int)p->padding);
    if (p->align_corners != 0 && p->align_corners != 1)
        return gradref__fail(GRADREF_ERR_PARAM, OP, "p.align_corners is %d; it must be 0 or 1",
                             (int)p->align_corners);
    return GRADREF_OK;
}

static void view_of(gradref__gs3d_view *v, const gradref_tensor *t) {
    v->data = t ? (char *)t->data : NULL;
    for (int i = 0; i < 5; i++)
        v->s[i] = t ? t->strides[i] : 0;
}

static const char *const NAMES[5] = {"grad", "x", "grid", "dx", "dgrid"};

/* The tensors taken (normalised copies in t[]: grad, x, grid, dx, dgrid; a NULL output stays
 * NULL in out[]), each 5-D, all of one float dtype (with terms, the outputs F64). */
static gradref_status check_tensors(const gradref_tensor *const *in, gradref_tensor *t,
                                    const gradref_tensor **out, gradref__extent *e, int terms) {
    for (int i = 0; i < 5; i++) {
        out[i] = NULL;
        if (i >= 3 && in[i] == NULL) continue;
        GRADREF__FORWARD_IF_ERROR(i < 3 ? gradref__take_input(OP, NAMES[i], in[i], &t[i], &e[i])
                                        : gradref__take_output(OP, NAMES[i], in[i], &t[i], &e[i]));
        GRADREF__FORWARD_IF_ERROR(gradref__check_rank(OP, NAMES[i], in[i], 5));
        out[i] = &t[i];
    }
    const int32_t dtype = t[0].dtype;
    if (!gradref__dtype_is_float(dtype))
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "grad.dtype is %s; grid_sampler3d_grad takes F32, F64, F16 or BF16",
                             gradref__dtype_name(dtype));
    for (int i = 1; i < 5; i++) {
        if (out[i] == NULL) continue;
        if (i >= 3 && terms) {
            GRADREF__FORWARD_IF_ERROR(gradref__check_terms_output(OP, NAMES[i], out[i]->dtype));
            continue;
        }
        if (out[i]->dtype != dtype)
            return gradref__fail(GRADREF_ERR_DTYPE, OP, "%s.dtype is %s but grad.dtype is %s",
                                 NAMES[i], gradref__dtype_name(out[i]->dtype),
                                 gradref__dtype_name(dtype));
    }
    return GRADREF_OK;
}

/* grad and grid against x's batch and channels, grid's points against grad's, x's spatial
 * sizes non-empty, and the outputs shaped like their inputs. */
static gradref_status check_shapes(const gradref_tensor *const *t) {
    const gradref_tensor *grad = t[0], *x = t[1], *grid = t[2], *dx = t[3], *dgrid = t[4];
    const int64_t N = x->shape[0], C = x->shape[1];
    GRADREF__FORWARD_IF_ERROR(gradref__check_dim(OP, "grad", grad, 0, N, "x.shape[0]"));
    GRADREF__FORWARD_IF_ERROR(gradref__check_dim(OP, "grid", grid, 0, N, "x.shape[0]"));
    GRADREF__FORWARD_IF_ERROR(gradref__check_dim(OP, "grad", grad, 1, C, "x.shape[1]"));
    GRADREF__FORWARD_IF_ERROR(
        gradref__check_dim(OP, "grid", grid, 4, 3, "the number of spatial dims"));
    for (int d = 0; d < 3; d++)
        GRADREF__FORWARD_IF_ERROR(
            gradref__check_dim(OP, "grid", grid, 1 + d, grad->shape[2 + d], "the grad size"));
    for (int d = 2; d < 5; d++)
        if (x->shape[d] == 0)
            return gradref__fail(GRADREF_ERR_SHAPE, OP,
                                 "x.shape[%d] is 0; x must have non-empty spatial dims", d);
    for (int d = 0; d < 5; d++) {
        if (dx != NULL)
            GRADREF__FORWARD_IF_ERROR(gradref__check_dim(OP, "dx", dx, d, x->shape[d], "x's"));
        if (dgrid != NULL)
            GRADREF__FORWARD_IF_ERROR(
                gradref__check_dim(OP, "dgrid", dgrid, d, grid->shape[d], "grid's"));
    }
    return GRADREF_OK;
}

/* No output overlaps an input or the other output. */
static gradref_status check_aliasing(const gradref_tensor *const *t, const gradref__extent *e) {
    for (int o = 3; o < 5; o++) {
        if (t[o] == NULL) continue;
        for (int i = 0; i < 3; i++)
            GRADREF__FORWARD_IF_ERROR(
                gradref__check_disjoint(OP, NAMES[o], &e[o], NAMES[i], &e[i]));
    }
    if (t[3] != NULL && t[4] != NULL)
        return gradref__check_disjoint(OP, "dgrid", &e[4], "dx", &e[3]);
    return GRADREF_OK;
}

static void plan_of(const gradref_grid_sampler3d_params *p, const gradref_tensor *const *t,
                    gradref__gs3d_plan *plan) {
    memset(plan, 0, sizeof *plan);
    plan->interp = p->interpolation;
    plan->padding = p->padding;
    plan->align_corners = p->align_corners;
    plan->dtype = t[0]->dtype;
    plan->out_dtype = t[0]->dtype;
    plan->precision = GRADREF_PRECISION_DEFAULT;
    plan->max_isa = GRADREF__ISA_MAX;
    plan->elem_size = gradref__dtype_size(t[0]->dtype);
    plan->N = t[1]->shape[0];
    plan->C = t[1]->shape[1];
    plan->D = t[1]->shape[2];
    plan->H = t[1]->shape[3];
    plan->W = t[1]->shape[4];
    plan->Do = t[0]->shape[2];
    plan->Ho = t[0]->shape[3];
    plan->Wo = t[0]->shape[4];
    view_of(&plan->grad, t[0]);
    view_of(&plan->x, t[1]);
    view_of(&plan->grid, t[2]);
    view_of(&plan->dx, t[3]);
    view_of(&plan->dgrid, t[4]);
}

gradref_status gradref__gs3d_validate_terms(const gradref_grid_sampler3d_params *p,
                                            const gradref_tensor *const *tensors, int32_t terms,
                                            gradref__gs3d_plan *plan) {
    GRADREF__FORWARD_IF_ERROR(check_params(p));
    const gradref_tensor *t[5];
    gradref_tensor local[5];
    gradref__extent e[5] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    GRADREF__FORWARD_IF_ERROR(check_tensors(tensors, local, t, e, terms != GRADREF__TERMS_NONE));
    GRADREF__FORWARD_IF_ERROR(check_shapes(t));
    GRADREF__FORWARD_IF_ERROR(check_aliasing(t, e));
    plan_of(p, t, plan);
    plan->terms = terms;
    if (terms) plan->out_dtype = GRADREF_F64;
    return GRADREF_OK;
}

gradref_status gradref__gs3d_validate(const gradref_grid_sampler3d_params *p,
                                      const gradref_tensor *grad, const gradref_tensor *x,
                                      const gradref_tensor *grid, const gradref_tensor *dx,
                                      const gradref_tensor *dgrid, gradref__gs3d_plan *plan) {
    const gradref_tensor *const in[5] = {grad, x, grid, dx, dgrid};
    return gradref__gs3d_validate_terms(p, in, GRADREF__TERMS_NONE, plan);
}

/* Whether a 5-D view holds its channels innermost: their stride below that of a spatial dim
 * of more than one element. With every spatial size 1 (or one channel) NCDHW and NDHWC are
 * the same layout. */
static int channels_last(const gradref__gs3d_view *v, int64_t C, int64_t d, int64_t h, int64_t w) {
    const int64_t size[3] = {d, h, w};
    if (v->data == NULL || C < 2) return 0;
    for (int k = 0; k < 3; k++)
        if (size[k] > 1 && v->s[1] < v->s[2 + k]) return 1;
    return 0;
}

/* GRADREF_STRICT_UPSTREAM: what CANN's aclnnGridSampler3DBackward rejects and gradref accepts:
 * F64 in NDHWC (its documentation: DOUBLE takes NCDHW only) in x, grad or dx. */
static gradref_status check_cann(const gradref__gs3d_plan *p) {
    const int ndhwc = channels_last(&p->x, p->C, p->D, p->H, p->W) ||
                      channels_last(&p->grad, p->C, p->Do, p->Ho, p->Wo) ||
                      channels_last(&p->dx, p->C, p->D, p->H, p->W);
    if (p->dtype == GRADREF_F64 && ndhwc)
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "strict CANN: F64 takes NCDHW only (a tensor is channels-last)");
    return GRADREF_OK;
}

gradref_status gradref_grid_sampler3d_grad(const gradref_grid_sampler3d_params *p,
                                           const gradref_tensor *grad, const gradref_tensor *x,
                                           const gradref_tensor *grid, const gradref_tensor *dx,
                                           const gradref_tensor *dgrid, const gradref_exec *exec) {
    gradref__ctx ctx;
    gradref__gs3d_plan plan;
    GRADREF__FORWARD_IF_ERROR(gradref__exec_resolve(OP, exec, &ctx));
    GRADREF__FORWARD_IF_ERROR(
        gradref__check_precision(OP, &ctx, GRADREF__GENERAL_PRECISIONS | GRADREF__TERMS_ALLOWED));
    const gradref_tensor *const in[5] = {grad, x, grid, dx, dgrid};
    GRADREF__FORWARD_IF_ERROR(gradref__gs3d_validate_terms(p, in, ctx.terms, &plan));
    if (ctx.strict) GRADREF__FORWARD_IF_ERROR(check_cann(&plan));
    plan.precision = ctx.precision;
    gradref__ctx_tensor(&ctx, "grad", grad);
    gradref__ctx_tensor(&ctx, "x", x);
    gradref__ctx_tensor(&ctx, "grid", grid);
    gradref__ctx_tensor(&ctx, "dx", dx);
    gradref__ctx_tensor(&ctx, "dgrid", dgrid);
    if (ctx.workspace == NULL) /* the library allocates: in groups of images (gs3d_fast.c) */
        plan.images_per_pass =
            gradref__gs3d_images_per_group(&plan, ctx.precision, ctx.num_threads);
    return gradref__run_fast_path(&FAST, &ctx, &plan);
}

gradref_status
gradref_grid_sampler3d_grad_workspace_size(const gradref_grid_sampler3d_params *p,
                                           const gradref_tensor *grad, const gradref_tensor *x,
                                           const gradref_tensor *grid, const gradref_tensor *dx,
                                           const gradref_tensor *dgrid, size_t *bytes) {
    gradref__gs3d_plan plan;
    if (bytes == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "bytes is NULL");
    GRADREF__FORWARD_IF_ERROR(gradref__gs3d_validate(p, grad, x, grid, dx, dgrid, &plan));
    *bytes = gradref__fast_path_workspace(&FAST, &plan);
    return GRADREF_OK;
}
