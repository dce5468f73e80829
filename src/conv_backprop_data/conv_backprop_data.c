/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data entry points: validation (everything before any write), workspace,
 * dispatch to the fast path. */
#include <math.h>
#include <string.h>

#include "cbd_internal.h"
#include "common/conv.h"
#include "common/copy.h"
#include "common/exec.h"
#include "common/fast_path.h"
#include "common/isa.h"
#include "common/tensor.h"
#include "cbd_kernels.h"

static const char OP[] = "conv_backprop_data";

/* GRADREF_VERBOSE's isa field: the level of the kernel table the plan runs. */
static const char *kernel_level(const void *plan) {
    return gradref__cbd_kernels_for(((const gradref__cbd_plan *)plan)->max_isa)->isa;
}

/* An empty operand: grad is filled with +0 instead of running. */
static const gradref_tensor *zero_output(const void *plan) {
    const gradref__cbd_plan *p = plan;
    return p->zero_only ? &p->out_desc : NULL;
}

const gradref__fast_path gradref__cbd_fast_path = {
    OP, gradref__cbd_strategies, GRADREF__CBD_STRATEGIES, zero_output, kernel_level};
#define FAST gradref__cbd_fast_path

/* check_dtypes' qs8 argument beside 0 and 1: an F64 grad is taken for any input dtype (the
 * GRADREF_TERM_* outputs). */
#define CBD_TERMS_GRAD 2

static gradref_status check_dtypes(const gradref_tensor *filter, const gradref_tensor *diff,
                                   const gradref_tensor *grad, int qs8) {
    const int32_t in = filter->dtype, out = grad->dtype;
    if (diff->dtype != in)
        return gradref__fail(GRADREF_ERR_DTYPE, OP, "diff.dtype is %s but filter.dtype is %s",
                             gradref__dtype_name(diff->dtype), gradref__dtype_name(in));
    if (qs8 == CBD_TERMS_GRAD && out == GRADREF_F64 &&
        (in == GRADREF_F32 || in == GRADREF_F64 || in == GRADREF_F16 || in == GRADREF_BF16 ||
         in == GRADREF_I8 || in == GRADREF_I32))
        return GRADREF_OK; /* the GRADREF_TERM_* outputs: F64 for any input dtype */
    if (qs8 == 1) {
        if (in != GRADREF_I8 || out != GRADREF_I8)
            return gradref__fail(GRADREF_ERR_DTYPE, OP,
                                 "the QuantizedS8 call takes I8 filter, diff and grad, not %s and "
                                 "%s",
                                 gradref__dtype_name(in), gradref__dtype_name(out));
        return GRADREF_OK;
    }
    int ok;
    switch (in) {
    case GRADREF_F32:
    case GRADREF_F64: ok = out == in; break;
    case GRADREF_F16:
    case GRADREF_BF16: ok = out == in || out == GRADREF_F32; break;
    case GRADREF_I8:
    case GRADREF_I32: ok = out == GRADREF_I32; break;
    default:
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "filter.dtype is %s; conv_backprop_data takes F32, F64, F16, BF16, "
                             "I8 or I32",
                             gradref__dtype_name(in));
    }
    if (!ok)
        return gradref__fail(GRADREF_ERR_DTYPE, OP, "grad.dtype is %s but %s inputs give %s%s",
                             gradref__dtype_name(out), gradref__dtype_name(in),
                             in == GRADREF_I8 ? "I32" : gradref__dtype_name(in),
                             in == GRADREF_F16 || in == GRADREF_BF16 ? " or F32" : "");
    return GRADREF_OK;
}

/* Blocked tensors (MegEngine's NCHW4, NHWCD4) run through dense copies: the caller's
 * descriptors, which are blocked, and the dense stand-ins the plan describes. */
typedef struct cbd_staging {
    const gradref_tensor *user[3]; /* filter, diff, grad as given */
    gradref_tensor dense[3];       /* the plan's view of each (a stand-in when blocked) */
    int blocked[3];
} cbd_staging;

/* The three tensors taken (normalised copies in t[], extents in e[]: filter, diff, grad),
 * their ranks and dtypes; *r is the spatial rank. */
static gradref_status check_tensors(const gradref_tensor *filter, const gradref_tensor *diff,
                                    const gradref_tensor *grad, int qs8, gradref_tensor *t,
                                    gradref__extent *e, int *r, cbd_staging *st) {
    st->user[0] = filter, st->user[1] = diff, st->user[2] = grad;
    static const char *const names[3] = {"filter", "diff", "grad"};
    for (int i = 0; i < 3; i++)
        GRADREF__FORWARD_IF_ERROR(gradref__take_blockable(OP, names[i], st->user[i], i == 2, &t[i],
                                                          &e[i], &st->blocked[i]));
    if (t[1].ndim < 3 || t[1].ndim > 5)
        return gradref__fail(GRADREF_ERR_RANK, OP,
                             "diff.ndim is %d; it must be 3, 4 or 5 (N, C and 1 to 3 spatial dims)",
                             (int)t[1].ndim);
    *r = t[1].ndim - 2;
    GRADREF__FORWARD_IF_ERROR(gradref__check_rank(OP, "grad", &t[2], t[1].ndim));
    if (t[0].ndim != *r + 2 && t[0].ndim != *r + 3)
        return gradref__fail(GRADREF_ERR_RANK, OP,
                             "filter.ndim is %d; with %d spatial dims it must be %d (OC, IC/G, "
                             "k...) or %d (G, OC/G, IC/G, k...)",
                             (int)t[0].ndim, *r, *r + 2, *r + 3);
    return check_dtypes(&t[0], &t[1], &t[2], qs8);
}

/* The groups and the channels per group (g[0] G, g[1] OC/G, g[2] IC/G) from the filter and
 * p->groups, and the batch and channel sizes of diff and grad against them. */
static gradref_status check_channels(const gradref_conv_params *p, const gradref_tensor *filter,
                                     const gradref_tensor *diff, const gradref_tensor *grad, int r,
                                     int64_t *g) {
    if (filter->ndim == r + 3) { /* grouped */
        g[0] = filter->shape[0];
        if (p->groups != 0 && p->groups != g[0])
            return gradref__fail(GRADREF_ERR_PARAM, OP,
                                 "p.groups is %d but the grouped filter has %lld groups",
                                 (int)p->groups, (long long)g[0]);
        g[1] = filter->shape[1];
        g[2] = filter->shape[2];
    } else {
        g[0] = p->groups == 0 ? 1 : p->groups;
        if (filter->shape[0] % g[0] != 0)
            return gradref__fail(GRADREF_ERR_SHAPE, OP,
                                 "filter.shape[0] is %lld, not a multiple of p.groups %lld",
                                 (long long)filter->shape[0], (long long)g[0]);
        g[1] = filter->shape[0] / g[0];
        g[2] = filter->shape[1];
    }
    if (g[0] < 1)
        return gradref__fail(GRADREF_ERR_SHAPE, OP, "the grouped filter has %lld groups",
                             (long long)g[0]);
    GRADREF__FORWARD_IF_ERROR(
        gradref__check_dim(OP, "grad", grad, 0, diff->shape[0], "diff.shape[0]"));
    GRADREF__FORWARD_IF_ERROR(
        gradref__check_dim_product(OP, "diff", diff, 1, g[0], g[1], "groups x OC/G"));
    return gradref__check_dim_product(OP, "grad", grad, 1, g[0], g[2], "groups x IC/G");
}

/* Every spatial dim checked against the convolution's rule, and the plan's geometry (held as
 * 3-D: the call's dim j is the plan's 3 - r + j) filled from it. */
static gradref_status check_spatial(const gradref_conv_params *p, const gradref_tensor *filter,
                                    const gradref_tensor *diff, const gradref_tensor *grad, int r,
                                    gradref__cbd_plan *plan) {
    for (int j = 0; j < 3; j++) {
        plan->K[j] = plan->I[j] = plan->O[j] = 1;
        plan->stride[j] = plan->dil[j] = 1;
        plan->pad_begin[j] = 0;
    }
    const int off = 3 - r;
    const int64_t *fk = filter->shape + filter->ndim - r;
    for (int j = 0; j < r; j++) {
        const int64_t i = grad->shape[2 + j], o = diff->shape[2 + j];
        GRADREF__FORWARD_IF_ERROR(gradref__conv_check_dim(OP, p, j, "filter", filter->ndim - r + j,
                                                          fk[j], "grad", i, "diff", o));
        plan->K[off + j] = fk[j];
        plan->I[off + j] = i;
        plan->O[off + j] = o;
        gradref__conv_plan_steps(p, j, fk[j], o, &plan->stride[off + j], &plan->dil[off + j]);
        plan->pad_begin[off + j] = p->pad[2 * j];
    }
    return GRADREF_OK;
}

/* The rest of the plan from the checked tensors (its geometry is filled already). */
static void plan_of(const gradref_conv_params *p, const gradref_tensor *t, const gradref__extent *e,
                    int r, const int64_t *g, gradref__cbd_plan *plan) {
    const gradref_tensor *filter = &t[0], *diff = &t[1], *grad = &t[2];
    const int64_t G = g[0], OCpg = g[1], ICpg = g[2];
    const int grouped = filter->ndim == r + 3, off = 3 - r;
    plan->mode = p->mode;
    plan->in_dtype = filter->dtype;
    plan->out_dtype = grad->dtype;
    plan->precision = GRADREF_PRECISION_DEFAULT;
    plan->max_isa = GRADREF__ISA_MAX;
    plan->rank = r;
    plan->N = diff->shape[0];
    plan->G = G;
    plan->ICpg = ICpg;
    plan->OCpg = OCpg;
    plan->filter = (const char *)filter->data;
    plan->diff = (const char *)diff->data;
    plan->grad = (char *)grad->data;
    plan->in_size = gradref__dtype_size(filter->dtype);
    plan->out_size = gradref__dtype_size(grad->dtype);
    plan->zero_only = e[2].numel == 0 || e[0].numel == 0 || e[1].numel == 0;
    plan->out_desc = *grad;
    /* filter strides (g, oc, ic, k...): a dense filter's group steps over OCpg rows */
    if (grouped) {
        plan->fs[0] = filter->strides[0];
        plan->fs[1] = filter->strides[1];
        plan->fs[2] = filter->strides[2];
    } else {
        plan->fs[0] = G == 1 ? 0 : filter->strides[0] * OCpg; /* within the span when G > 1 */
        plan->fs[1] = filter->strides[0];
        plan->fs[2] = filter->strides[1];
    }
    plan->ds[0] = diff->strides[0];
    plan->ds[1] = G == 1 ? 0 : diff->strides[1] * OCpg;
    plan->ds[2] = diff->strides[1];
    plan->gs[0] = grad->strides[0];
    plan->gs[1] = G == 1 ? 0 : grad->strides[1] * ICpg;
    plan->gs[2] = grad->strides[1];
    for (int j = 0; j < r; j++) {
        plan->fs[3 + off + j] = filter->strides[filter->ndim - r + j];
        plan->ds[3 + off + j] = diff->strides[2 + j];
        plan->gs[3 + off + j] = grad->strides[2 + j];
    }
}

static gradref_status validate(const gradref_conv_params *p, const gradref_tensor *filter,
                               const gradref_tensor *diff, const gradref_tensor *grad, int qs8,
                               gradref__cbd_plan *plan, cbd_staging *st) {
    GRADREF__FORWARD_IF_ERROR(gradref__conv_check_params(OP, p));
    gradref_tensor *t = st->dense;
    gradref__extent e[3];
    int r = 0;
    int64_t g[3] = {0, 0, 0};
    GRADREF__FORWARD_IF_ERROR(check_tensors(filter, diff, grad, qs8, t, e, &r, st));
    GRADREF__FORWARD_IF_ERROR(check_channels(p, &t[0], &t[1], &t[2], r, g));
    memset(plan, 0, sizeof *plan);
    GRADREF__FORWARD_IF_ERROR(check_spatial(p, &t[0], &t[1], &t[2], r, plan));
    GRADREF__FORWARD_IF_ERROR(gradref__check_disjoint(OP, "grad", &e[2], "filter", &e[0]));
    GRADREF__FORWARD_IF_ERROR(gradref__check_disjoint(OP, "grad", &e[2], "diff", &e[1]));
    plan_of(p, t, e, r, g, plan);
    return GRADREF_OK;
}

gradref_status gradref__cbd_validate(const gradref_conv_params *p, const gradref_tensor *filter,
                                     const gradref_tensor *diff, const gradref_tensor *grad,
                                     gradref__cbd_plan *plan) {
    cbd_staging st;
    return validate(p, filter, diff, grad, 0, plan, &st);
}

static gradref_status validate_qs8(const gradref_conv_params *p, const gradref_qs8_scales *scales,
                                   const gradref_tensor *filter, const gradref_tensor *diff,
                                   const gradref_tensor *grad, gradref__cbd_plan *plan,
                                   cbd_staging *st) {
    if (scales == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "scales is NULL");
    const float sc[3] = {scales->filter, scales->diff, scales->grad};
    static const char *const names[3] = {"filter", "diff", "grad"};
    for (int i = 0; i < 3; i++)
        if (!(sc[i] > 0.0f) || !isfinite(sc[i]))
            return gradref__fail(GRADREF_ERR_PARAM, OP,
                                 "scales->%s is %g; a QuantizedS8 scale is finite and > 0",
                                 names[i], (double)sc[i]);
    /* MegEngine's QuantizedS32 scale, a float product: Inf would turn a zero sum into NaN
     * (-128) and every other into +-Inf, 0 every sum into 0 */
    const float acc_scale = scales->filter * scales->diff;
    if (!(acc_scale > 0.0f) || !isfinite(acc_scale))
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "scales->filter x scales->diff is %g in float (%g x %g); the "
                             "QuantizedS32 scale of the sums must be finite and > 0",
                             (double)acc_scale, (double)sc[0], (double)sc[1]);
    GRADREF__FORWARD_IF_ERROR(validate(p, filter, diff, grad, 1, plan, st));
    plan->qs8 = 1;
    plan->qs8_acc_scale = acc_scale;
    plan->qs8_grad_scale = scales->grad;
    return GRADREF_OK;
}

gradref_status gradref__cbd_validate_qs8(const gradref_conv_params *p,
                                         const gradref_qs8_scales *scales,
                                         const gradref_tensor *filter, const gradref_tensor *diff,
                                         const gradref_tensor *grad, gradref__cbd_plan *plan) {
    cbd_staging st;
    return validate_qs8(p, scales, filter, diff, grad, plan, &st);
}

/* The dense copies' bytes, each part 64-byte aligned (0 when nothing is blocked). */
static size_t staging_bytes(const cbd_staging *st, size_t *offset) {
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        const gradref_tensor *t = &st->dense[i];
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= t->shape[d]; /* fits: validated */
        offset[i] = st->blocked[i]
                        ? gradref__ws_take(&at, (size_t)numel * gradref__dtype_size(t->dtype))
                        : 0;
    }
    return at;
}

/* Copies between a caller's blocked tensor and its dense copy, both split alike. */
static void restage(const gradref_tensor *user, const gradref_tensor *dense, int to_dense,
                    int threads, int max_isa) {
    int64_t block[GRADREF_MAX_DIMS];
    gradref_tensor uv, dv;
    (void)gradref__blocks_of(OP, "", user, block); /* validated already */
    (void)gradref__split_view(OP, "", user, block, &uv);
    (void)gradref__split_view(OP, "", dense, block, &dv);
    if (to_dense)
        gradref__copy_run(&uv, &dv, threads, max_isa);
    else
        gradref__copy_run(&dv, &uv, threads, max_isa);
}

/* The fast path's workspace at the threads a call on ctx would run. */
/* The run of a validated call: blocked tensors are copied to dense ones in the workspace (the
 * caller's when it holds them, else in the one allocation with the fast path's), the call runs
 * on those, and grad is copied back. */
static gradref_status run(const gradref__ctx *ctx, gradref__cbd_plan *plan, cbd_staging *st) {
    size_t offset[3];
    const size_t stage = staging_bytes(st, offset);
    if (stage == 0) return gradref__run_fast_path(&FAST, ctx, plan);
    if (plan->zero_only) {
        if (!st->blocked[2]) return gradref__run_fast_path(&FAST, ctx, plan);
        int64_t block[GRADREF_MAX_DIMS];
        gradref_tensor view;
        (void)gradref__blocks_of(OP, "grad", st->user[2], block);
        (void)gradref__split_view(OP, "grad", st->user[2], block, &view);
        gradref__fill_zero(&view, ctx->num_threads);
        return GRADREF_OK;
    }
    gradref__ctx inner = *ctx;
    size_t usable = 0;
    if (ctx->workspace != NULL && ctx->workspace_bytes > GRADREF__WORKSPACE_ALIGN)
        usable = ctx->workspace_bytes - GRADREF__WORKSPACE_ALIGN;
    void *base, *owned = NULL;
    if (usable >= stage) {
        GRADREF__FORWARD_IF_ERROR(gradref__workspace_acquire(OP, ctx, stage, &base, &owned));
        inner.workspace = (char *)base + stage;
        inner.workspace_bytes =
            ctx->workspace_bytes - (size_t)((char *)base - (char *)ctx->workspace) - stage;
    } else {
        /* with no caller workspace the fast path's share comes in the same allocation */
        const size_t extra =
            ctx->workspace == NULL ? gradref__fast_path_bytes(&FAST, ctx, plan) : 0;
        gradref__ctx alloc = *ctx;
        alloc.workspace = NULL;
        GRADREF__FORWARD_IF_ERROR(
            gradref__workspace_acquire(OP, &alloc, stage + extra, &base, &owned));
        if (extra > 0) inner.workspace = (char *)base + stage, inner.workspace_bytes = extra;
    }
    for (int i = 0; i < 3; i++) {
        if (!st->blocked[i]) continue;
        st->dense[i].data = (char *)base + offset[i];
        if (i < 2) restage(st->user[i], &st->dense[i], 1, ctx->num_threads, plan->max_isa);
    }
    plan->filter = (const char *)st->dense[0].data;
    plan->diff = (const char *)st->dense[1].data;
    plan->grad = (char *)st->dense[2].data;
    plan->out_desc.data = st->dense[2].data;
    const gradref_status s = gradref__run_fast_path(&FAST, &inner, plan);
    if (s == GRADREF_OK && st->blocked[2])
        restage(st->user[2], &st->dense[2], 0, ctx->num_threads, plan->max_isa);
    gradref__workspace_release(owned);
    return s;
}

/* What a _workspace_size twin reports: the dense copies on top of the fast path's bytes. */
static size_t workspace_of(const gradref__cbd_plan *plan, const cbd_staging *st) {
    size_t offset[3];
    const size_t stage = staging_bytes(st, offset),
                 fast = gradref__fast_path_workspace(&FAST, plan);
    if (stage == 0 || plan->zero_only) return fast;
    return gradref__workspace_bytes(stage + fast);
}

/* GRADREF_STRICT_UPSTREAM: what MegEngine's ConvolutionBackwardData rejects and gradref
 * accepts: a spatial rank other than 2 (its CanonizedFilterMeta has spatial_ndim 2), F64 (it has
 * no float64 dtype), a grad dtype other than diff's (check_exec; its compute_mode FLOAT32 keeps
 * an F16/BF16 grad and accumulates in an f32 workspace), strides, dilations or pads of 2^32 or
 * more (its params are uint32), and unequal pads on the two sides of a dim (its pads are
 * symmetric). */
static gradref_status check_megengine(const gradref_conv_params *p, const gradref__cbd_plan *plan) {
    if (plan->rank != 2)
        return gradref__fail(GRADREF_ERR_RANK, OP,
                             "strict MegEngine: a %d-D convolution; ConvolutionBackwardData is 2-D",
                             (int)plan->rank);
    if (plan->in_dtype == GRADREF_F64)
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "strict MegEngine: F64; MegEngine has no float64");
    if (plan->in_dtype == GRADREF_I32)
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "strict MegEngine: I32 filter and diff; its ConvolutionBackwardData "
                             "takes Int8 (and QuantizedS8) but not Int32 inputs");
    if (!plan->qs8 && plan->in_dtype != GRADREF_I8 && plan->out_dtype != plan->in_dtype)
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "strict MegEngine: grad.dtype is %s but diff.dtype is %s; MegEngine's "
                             "grad has diff's dtype (compute_mode FLOAT32 keeps it)",
                             gradref__dtype_name(plan->out_dtype),
                             gradref__dtype_name(plan->in_dtype));
    const int64_t most = INT64_C(0xffffffff);
    for (int j = 0; j < 2; j++) {
        if (p->stride[j] > most || p->dilation[j] > most)
            return gradref__fail(GRADREF_ERR_PARAM, OP,
                                 "strict MegEngine: p.stride[%d] is %lld and p.dilation[%d] %lld; "
                                 "MegEngine's are uint32",
                                 j, (long long)p->stride[j], j, (long long)p->dilation[j]);
        if (p->pad[2 * j] != p->pad[2 * j + 1])
            return gradref__fail(
                GRADREF_ERR_PARAM, OP,
                "strict MegEngine: p.pad[%d] is %lld and p.pad[%d] %lld; MegEngine "
                "pads both sides alike",
                2 * j, (long long)p->pad[2 * j], 2 * j + 1, (long long)p->pad[2 * j + 1]);
        if (p->pad[2 * j] > most)
            return gradref__fail(GRADREF_ERR_PARAM, OP,
                                 "strict MegEngine: p.pad[%d] is %lld; MegEngine's pads are uint32",
                                 2 * j, (long long)p->pad[2 * j]);
    }
    return GRADREF_OK;
}

gradref_status gradref_conv_backprop_data(const gradref_conv_params *p,
                                          const gradref_tensor *filter, const gradref_tensor *diff,
                                          const gradref_tensor *grad, const gradref_exec *exec) {
    gradref__ctx ctx;
    gradref__cbd_plan plan;
    cbd_staging st;
    GRADREF__FORWARD_IF_ERROR(gradref__exec_resolve(OP, exec, &ctx));
    GRADREF__FORWARD_IF_ERROR(gradref__check_precision(
        OP, &ctx,
        GRADREF__GENERAL_PRECISIONS | GRADREF__PRECISION_BIT(GRADREF_PRECISION_MEGENGINE_DEFAULT) |
            GRADREF__TERMS_ALLOWED));
    GRADREF__FORWARD_IF_ERROR(
        validate(p, filter, diff, grad, ctx.terms ? CBD_TERMS_GRAD : 0, &plan, &st));
    if (ctx.terms)
        GRADREF__FORWARD_IF_ERROR(gradref__check_terms_output(OP, "grad", plan.out_dtype));
    plan.terms = ctx.terms;
    if (ctx.precision == GRADREF_PRECISION_MEGENGINE_DEFAULT &&
        ((plan.in_dtype != GRADREF_F16 && plan.in_dtype != GRADREF_BF16) ||
         plan.out_dtype != plan.in_dtype))
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "exec.precision is MEGENGINE_DEFAULT, which takes F16 or BF16 filter, "
                             "diff and grad; they are %s and %s",
                             gradref__dtype_name(plan.in_dtype),
                             gradref__dtype_name(plan.out_dtype));
    if (ctx.strict) GRADREF__FORWARD_IF_ERROR(check_megengine(p, &plan));
    plan.precision = ctx.precision;
    gradref__ctx_tensor(&ctx, "filter", filter);
    gradref__ctx_tensor(&ctx, "diff", diff);
    gradref__ctx_tensor(&ctx, "grad", grad);
    return run(&ctx, &plan, &st);
}

gradref_status
gradref_conv_backprop_data_qs8(const gradref_conv_params *p, const gradref_qs8_scales *scales,
                               const gradref_tensor *filter, const gradref_tensor *diff,
                               const gradref_tensor *grad, const gradref_exec *exec) {
    gradref__ctx ctx;
    gradref__cbd_plan plan;
    cbd_staging st;
    GRADREF__FORWARD_IF_ERROR(gradref__exec_resolve(OP, exec, &ctx));
    GRADREF__FORWARD_IF_ERROR(gradref__check_precision(OP, &ctx, GRADREF__GENERAL_PRECISIONS));
    GRADREF__FORWARD_IF_ERROR(validate_qs8(p, scales, filter, diff, grad, &plan, &st));
    if (ctx.strict) GRADREF__FORWARD_IF_ERROR(check_megengine(p, &plan));
    plan.precision = ctx.precision;
    gradref__ctx_tensor(&ctx, "filter", filter);
    gradref__ctx_tensor(&ctx, "diff", diff);
    gradref__ctx_tensor(&ctx, "grad", grad);
    return run(&ctx, &plan, &st);
}

gradref_status gradref_conv_backprop_data_qs8_workspace_size(
    const gradref_conv_params *p, const gradref_qs8_scales *scales, const gradref_tensor *filter,
    const gradref_tensor *diff, const gradref_tensor *grad, size_t *bytes) {
    gradref__cbd_plan plan;
    cbd_staging st;
    if (bytes == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "bytes is NULL");
    GRADREF__FORWARD_IF_ERROR(validate_qs8(p, scales, filter, diff, grad, &plan, &st));
    *bytes = workspace_of(&plan, &st);
    return GRADREF_OK;
}

gradref_status gradref_conv_backprop_data_workspace_size(const gradref_conv_params *p,
                                                         const gradref_tensor *filter,
                                                         const gradref_tensor *diff,
                                                         const gradref_tensor *grad,
                                                         size_t *bytes) {
    gradref__cbd_plan plan;
    cbd_staging st;
    if (bytes == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "bytes is NULL");
    GRADREF__FORWARD_IF_ERROR(validate(p, filter, diff, grad, 0, &plan, &st));
    *bytes = workspace_of(&plan, &st);
    return GRADREF_OK;
}
