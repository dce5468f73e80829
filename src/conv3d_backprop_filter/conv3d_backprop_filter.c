/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter entry points: validation (everything before any write), CANN's
 * transpose rule, dispatch. */
#include <string.h>

#include "c3f_internal.h"
#include "c3f_kernels.h"
#include "common/conv.h"
#include "common/convert.h"
#include "common/copy.h"
#include "common/exec.h"
#include "common/fast_path.h"
#include "common/isa.h"
#include "common/tensor.h"

static const char OP[] = "conv3d_backprop_filter";

/* GRADREF_VERBOSE's isa field: the level of the kernel table the plan runs. */
static const char *kernel_level(const void *plan) {
    return gradref__c3f_kernels_for(((const gradref__c3f_plan *)plan)->max_isa)->isa;
}

/* An empty operand: dw is filled with +0 instead of running. */
static const gradref_tensor *zero_output(const void *plan) {
    const gradref__c3f_plan *p = plan;
    return p->zero_only ? &p->out_desc : NULL;
}

const gradref__fast_path gradref__c3f_fast_path = {
    OP, gradref__c3f_strategies, GRADREF__C3F_STRATEGIES, zero_output, kernel_level};
#define FAST gradref__c3f_fast_path

/* x, dy and dw taken (normalised copies in t[], extents in e[]), their ranks and dtypes (with
 * terms_grad, an F64 dw for any input dtype: the GRADREF_TERM_* outputs). */
static gradref_status check_tensors(const gradref_tensor *x, const gradref_tensor *dy,
                                    const gradref_tensor *dw, int terms_grad, gradref_tensor *t,
                                    gradref__extent *e) {
    GRADREF__FORWARD_IF_ERROR(gradref__take_input(OP, "x", x, &t[0], &e[0]));
    GRADREF__FORWARD_IF_ERROR(gradref__take_input(OP, "dy", dy, &t[1], &e[1]));
    GRADREF__FORWARD_IF_ERROR(gradref__take_output(OP, "dw", dw, &t[2], &e[2]));
    GRADREF__FORWARD_IF_ERROR(gradref__check_rank(OP, "x", &t[0], 5));
    GRADREF__FORWARD_IF_ERROR(gradref__check_rank(OP, "dy", &t[1], 5));
    GRADREF__FORWARD_IF_ERROR(gradref__check_rank(OP, "dw", &t[2], 5));
    const int32_t in = t[0].dtype, out = t[2].dtype;
    if (!gradref__dtype_is_float(in))
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "x.dtype is %s; conv3d_backprop_filter takes F32, F64, F16 or BF16",
                             gradref__dtype_name(in));
    if (t[1].dtype != in)
        return gradref__fail(GRADREF_ERR_DTYPE, OP, "dy.dtype is %s but x.dtype is %s",
                             gradref__dtype_name(t[1].dtype), gradref__dtype_name(in));
    if (out != in && !(out == GRADREF_F32 && (in == GRADREF_F16 || in == GRADREF_BF16)) &&
        !(terms_grad && out == GRADREF_F64))
        return gradref__fail(GRADREF_ERR_DTYPE, OP, "dw.dtype is %s but x.dtype %s gives %s%s",
                             gradref__dtype_name(out), gradref__dtype_name(in),
                             gradref__dtype_name(in),
                             in == GRADREF_F16 || in == GRADREF_BF16 ? " or F32" : "");
    return GRADREF_OK;
}

/* The batch and channel sizes of x and dy against dw's and the groups G. */
static gradref_status check_channels(const gradref_tensor *x, const gradref_tensor *dy,
                                     const gradref_tensor *dw, int64_t G) {
    const int64_t Cout = dw->shape[0], Cin_g = dw->shape[1];
    GRADREF__FORWARD_IF_ERROR(gradref__check_dim(OP, "dy", dy, 0, x->shape[0], "x.shape[0]"));
    GRADREF__FORWARD_IF_ERROR(gradref__check_dim(OP, "dy", dy, 1, Cout, "dw.shape[0] (Cout)"));
    GRADREF__FORWARD_IF_ERROR(
        gradref__check_dim_product(OP, "x", x, 1, G, Cin_g, "groups x dw.shape[1] (Cin/G)"));
    if (Cout % G != 0)
        return gradref__fail(GRADREF_ERR_SHAPE, OP,
                             "dw.shape[0] (Cout) is %lld, not a multiple of p.groups %lld",
                             (long long)Cout, (long long)G);
    return GRADREF_OK;
}

/* Every spatial dim checked against the convolution's rule, and the plan's geometry filled. */
static gradref_status check_spatial(const gradref_conv_params *p, const gradref_tensor *x,
                                    const gradref_tensor *dy, const gradref_tensor *dw,
                                    gradref__c3f_plan *plan) {
    for (int j = 0; j < 3; j++) {
        const int64_t k = dw->shape[2 + j], i = x->shape[2 + j], o = dy->shape[2 + j];
        GRADREF__FORWARD_IF_ERROR(
            gradref__conv_check_dim(OP, p, j, "dw", 2 + j, k, "x", i, "dy", o));
        plan->K[j] = k;
        plan->I[j] = i;
        plan->O[j] = o;
        gradref__conv_plan_steps(p, j, k, o, &plan->stride[j], &plan->dil[j]);
        plan->pad_begin[j] = p->pad[2 * j];
    }
    return GRADREF_OK;
}

/* The rest of the plan from the checked tensors (its geometry is filled already). */
static void plan_of(const gradref_conv_params *p, const gradref_tensor *t, const gradref__extent *e,
                    int64_t G, gradref__c3f_plan *plan) {
    const gradref_tensor *x = &t[0], *dy = &t[1], *dw = &t[2];
    plan->mode = p->mode;
    plan->in_dtype = x->dtype;
    plan->out_dtype = dw->dtype;
    plan->precision = GRADREF_PRECISION_DEFAULT;
    plan->max_isa = GRADREF__ISA_MAX;
    plan->N = x->shape[0];
    plan->G = G;
    plan->Cin_g = dw->shape[1];
    plan->Cout_g = dw->shape[0] / G;
    plan->x = (const char *)x->data;
    plan->dy = (const char *)dy->data;
    plan->dw = (char *)dw->data;
    for (int d = 0; d < 5; d++) {
        plan->xs[d] = x->strides[d];
        plan->ys[d] = dy->strides[d];
        plan->ws[d] = dw->strides[d];
    }
    plan->in_size = gradref__dtype_size(x->dtype);
    plan->out_size = gradref__dtype_size(dw->dtype);
    /* N, Cin or every x row 0 */
    plan->zero_only = e[2].numel == 0 || e[0].numel == 0 || e[1].numel == 0;
    plan->out_desc = *dw;
}

static gradref_status validate(const gradref_conv_params *p, const gradref_tensor *x,
                               const gradref_tensor *dy, const gradref_tensor *dw, int terms_grad,
                               gradref__c3f_plan *plan) {
    GRADREF__FORWARD_IF_ERROR(gradref__conv_check_params(OP, p));
    gradref_tensor t[3];
    gradref__extent e[3];
    GRADREF__FORWARD_IF_ERROR(check_tensors(x, dy, dw, terms_grad, t, e));
    const int64_t G = p->groups == 0 ? 1 : p->groups;
    GRADREF__FORWARD_IF_ERROR(check_channels(&t[0], &t[1], &t[2], G));
    memset(plan, 0, sizeof *plan);
    GRADREF__FORWARD_IF_ERROR(check_spatial(p, &t[0], &t[1], &t[2], plan));
    GRADREF__FORWARD_IF_ERROR(gradref__check_disjoint(OP, "dw", &e[2], "x", &e[0]));
    GRADREF__FORWARD_IF_ERROR(gradref__check_disjoint(OP, "dw", &e[2], "dy", &e[1]));
    plan_of(p, t, e, G, plan);
    return GRADREF_OK;
}

gradref_status gradref__c3f_validate(const gradref_conv_params *p, const gradref_tensor *x,
                                     const gradref_tensor *dy, const gradref_tensor *dw,
                                     gradref__c3f_plan *plan) {
    return validate(p, x, dy, dw, 0, plan);
}

/* GRADREF_STRICT_UPSTREAM: what CANN's Conv3DBackpropFilterV2 rejects and gradref accepts (its
 * def, infershape and ops-nn conv_backprop_filter_context_utils.cpp ranges): F64 (x and
 * out_backprop are F16, BF16 or F32; DTYPE), a dw other than F32 (V2 outputs F32 only; DTYPE),
 * groups outside [1, 65535], strides and dilations outside [1, 2^31 - 2] and pads outside
 * [0, 2^31 - 2] (PARAM; Ascend A2/A3 narrow H and W further), and a dim of x, dy or dw outside
 * [1, 2^31 - 2] (SHAPE: N = 0 and Cout = 0 included). */
static gradref_status check_cann(const gradref_conv_params *p, const gradref__c3f_plan *plan) {
    if (plan->in_dtype == GRADREF_F64)
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "strict CANN: F64; Conv3DBackpropFilterV2 takes F16, BF16 and F32");
    if (plan->out_dtype != GRADREF_F32)
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "strict CANN: dw.dtype is %s; Conv3DBackpropFilterV2 outputs F32 only",
                             gradref__dtype_name(plan->out_dtype));
    if (plan->G > 65535)
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "strict CANN: %lld groups; CANN takes groups in [1, 65535]",
                             (long long)plan->G);
    const int64_t most = INT64_C(2147483646);
    for (int j = 0; j < 3; j++) {
        if (p->stride[j] > most || p->dilation[j] > most)
            return gradref__fail(GRADREF_ERR_PARAM, OP,
                                 "strict CANN: p.stride[%d] is %lld and p.dilation[%d] %lld; CANN "
                                 "takes [1, 2147483646]",
                                 j, (long long)p->stride[j], j, (long long)p->dilation[j]);
        for (int e = 0; e < 2; e++)
            if (p->pad[2 * j + e] > most)
                return gradref__fail(GRADREF_ERR_PARAM, OP,
                                     "strict CANN: p.pad[%d] is %lld; CANN takes [0, 2147483646]",
                                     2 * j + e, (long long)p->pad[2 * j + e]);
    }
    const int64_t dims[3][5] = {
        {plan->N, plan->G * plan->Cin_g, plan->I[0], plan->I[1], plan->I[2]},
        {plan->N, plan->G * plan->Cout_g, plan->O[0], plan->O[1], plan->O[2]},
        {plan->G * plan->Cout_g, plan->Cin_g, plan->K[0], plan->K[1], plan->K[2]}};
    static const char *const names[3] = {"x", "dy", "dw"};
    for (int t = 0; t < 3; t++)
        for (int d = 0; d < 5; d++)
            if (dims[t][d] < 1 || dims[t][d] > most)
                return gradref__fail(GRADREF_ERR_SHAPE, OP,
                                     "strict CANN: %s.shape[%d] is %lld; CANN takes dims in [1, "
                                     "2147483646]",
                                     names[t], d, (long long)dims[t][d]);
    return GRADREF_OK;
}

gradref_status gradref_conv3d_backprop_filter(const gradref_conv_params *p, const gradref_tensor *x,
                                              const gradref_tensor *dy, const gradref_tensor *dw,
                                              const gradref_exec *exec) {
    gradref__ctx ctx;
    gradref__c3f_plan plan;
    GRADREF__FORWARD_IF_ERROR(gradref__exec_resolve(OP, exec, &ctx));
    GRADREF__FORWARD_IF_ERROR(gradref__check_precision(
        OP, &ctx,
        GRADREF__GENERAL_PRECISIONS | GRADREF__PRECISION_BIT(GRADREF_PRECISION_HF32) |
            GRADREF__PRECISION_BIT(GRADREF_PRECISION_HF32_910B) | GRADREF__TERMS_ALLOWED));
    GRADREF__FORWARD_IF_ERROR(validate(p, x, dy, dw, ctx.terms != GRADREF__TERMS_NONE, &plan));
    if (ctx.terms) GRADREF__FORWARD_IF_ERROR(gradref__check_terms_output(OP, "dw", plan.out_dtype));
    plan.terms = ctx.terms;
    if (ctx.strict) GRADREF__FORWARD_IF_ERROR(check_cann(p, &plan));
    if (gradref__hf32_kept_bits(ctx.precision) && plan.in_dtype != GRADREF_F32)
        return gradref__fail(
            GRADREF_ERR_PARAM, OP, "exec.precision is %s, which takes F32 x and dy; x.dtype is %s",
            gradref__precision_name(ctx.precision), gradref__dtype_name(plan.in_dtype));
    plan.precision = ctx.precision;
    gradref__ctx_tensor(&ctx, "x", x);
    gradref__ctx_tensor(&ctx, "dy", dy);
    gradref__ctx_tensor(&ctx, "dw", dw);
    GRADREF__FORWARD_IF_ERROR(gradref__run_fast_path(&FAST, &ctx, &plan));
    if (ctx.padded_zeros && !plan.terms) gradref__c3f_padded_nans(&plan);
    return GRADREF_OK;
}

gradref_status gradref_conv3d_backprop_filter_workspace_size(const gradref_conv_params *p,
                                                             const gradref_tensor *x,
                                                             const gradref_tensor *dy,
                                                             const gradref_tensor *dw,
                                                             size_t *bytes) {
    gradref__c3f_plan plan;
    if (bytes == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "bytes is NULL");
    GRADREF__FORWARD_IF_ERROR(validate(p, x, dy, dw, 0, &plan));
    *bytes = gradref__fast_path_workspace(&FAST, &plan);
    return GRADREF_OK;
}

int32_t gradref_conv3d_dw_transpose_needed(int32_t dw_format, int64_t din, int64_t cin,
                                           int64_t cout, int64_t core_count, int32_t shape_known) {
    if (dw_format != GRADREF_FORMAT_NDHWC && dw_format != GRADREF_FORMAT_DHWCN) return 0;
    if (!shape_known || core_count <= 0 || din < 1 || cin < 1 || cout < 1) return 0;
    int64_t total, limit;
    if (gradref__mul_ovf(din, cin, &total) || gradref__mul_ovf(total, cout, &total)) return 0;
    const int64_t per_round = 32 * 32, rounds = 4;
    if (din > 1) {
        if (gradref__mul_ovf(core_count, per_round * rounds, &limit)) return 1;
    } else {
        if (gradref__mul_ovf(core_count / 2, per_round, &limit)) return 1;
    }
    return total <= limit;
}

gradref_status gradref_conv3d_filter_init_cann(gradref_tensor *t, void *data, gradref_dtype dtype,
                                               gradref_format format, int32_t filter_size_len,
                                               const int64_t *filter_size, int32_t from_depthwise) {
    static const char NAME[] = "conv3d_filter_init_cann";
    /* where N, C, D, H, W sit in y's format order (CANN's GetNCDHWShape) */
    static const int where[3][5] = {{0, 1, 2, 3, 4}, {0, 4, 1, 2, 3}, {4, 3, 0, 1, 2}};
    int f;
    switch (format) {
    case GRADREF_FORMAT_NCDHW: f = 0; break;
    case GRADREF_FORMAT_NDHWC: f = 1; break;
    case GRADREF_FORMAT_DHWCN: f = 2; break;
    default:
        return gradref__fail(GRADREF_ERR_PARAM, NAME,
                             "format is %d; CANN's y is NCDHW, NDHWC or DHWCN", (int)format);
    }
    if (filter_size == NULL) return gradref__fail(GRADREF_ERR_NULL, NAME, "filter_size is NULL");
    if (filter_size_len != 4 && filter_size_len != 5)
        return gradref__fail(GRADREF_ERR_RANK, NAME, "filter_size has %d entries; give 5 or 4",
                             (int)filter_size_len);
    int64_t y[5];
    for (int k = 0, j = 0; k < 5; k++) /* 4 entries: D = 1 at the format's D position */
        y[k] = filter_size_len == 4 && k == where[f][2] ? 1 : filter_size[j++];
    for (int k = 0; k < 5; k++)
        if (y[k] < 0)
            return gradref__fail(GRADREF_ERR_SHAPE, NAME, "filter_size has %lld, below 0",
                                 (long long)y[k]);
    int64_t logical[5];
    for (int d = 0; d < 5; d++)
        logical[d] = y[where[f][d]];
    /* CANN reads from_depthwise only in InferShapeForConvBackpropExtend3D, the 4-entry
     * filter_size's shape inference, and not for an NDHWC y (conv_backprop_infershape.cpp) */
    if (from_depthwise && filter_size_len == 4 && f != 1) {
        if (gradref__mul_ovf(logical[0], logical[1], &logical[0]))
            return gradref__fail(GRADREF_ERR_OVERFLOW, NAME, "N x C of filter_size exceeds int64");
        logical[1] = 1;
    }
    return gradref_tensor_init_format(t, data, dtype, format, logical);
}
