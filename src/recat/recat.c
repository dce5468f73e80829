/* SPDX-License-Identifier: Apache-2.0 */
/* recat entry points: validation (everything before any write), then dispatch. */
#include "common/exec.h"
#include "common/fast_path.h"
#include "common/isa.h"
#include "common/tensor.h"
#include "recat_internal.h"
#include "recat_kernels.h"

/* Checks shared by the three variants once the split is known to be a valid list of widths. */
typedef struct recat_args {
    const char *op;
    const gradref_tensor *grad_output; /* the caller's, then go_local once checked */
    const gradref_tensor *out;         /* likewise out_local */
    gradref__extent go_ext, out_ext;
    gradref_tensor go_local, out_local;
} recat_args;

static gradref_status check_tensors(recat_args *a, int32_t go_ndim) {
    gradref_status s;
    if ((s = gradref__take_input(a->op, "grad_output", a->grad_output, &a->go_local, &a->go_ext)) !=
        GRADREF_OK)
        return s;
    a->grad_output = &a->go_local;
    GRADREF__FORWARD_IF_ERROR(gradref__check_rank(a->op, "grad_output", a->grad_output, go_ndim));
    GRADREF__FORWARD_IF_ERROR(
        gradref__take_output(a->op, "out", a->out, &a->out_local, &a->out_ext));
    a->out = &a->out_local;
    GRADREF__FORWARD_IF_ERROR(gradref__check_rank(a->op, "out", a->out, 1));
    /* an F64 out of another dtype is a GRADREF_TERM_* call's (decided with the exec) */
    if (a->out->dtype != a->grad_output->dtype && a->out->dtype != GRADREF_F64)
        return gradref__fail(
            GRADREF_ERR_DTYPE, a->op, "out.dtype is %s but grad_output.dtype is %s",
            gradref__dtype_name(a->out->dtype), gradref__dtype_name(a->grad_output->dtype));
    if (a->out->shape[0] != a->go_ext.numel)
        return gradref__fail(GRADREF_ERR_SHAPE, a->op,
                             "out.shape[0] is %lld but grad_output has %lld elements",
                             (long long)a->out->shape[0], (long long)a->go_ext.numel);
    return gradref__check_disjoint(a->op, "out", &a->out_ext, "grad_output", &a->go_ext);
}

/* n_r >= 0 for every rank and sum n_r == total. */
static gradref_status check_split(const char *op, const char *name, const int64_t *n,
                                  int64_t stride, int64_t num_ranks, int64_t total,
                                  const char *total_name) {
    int64_t sum = 0;
    for (int64_t r = 0; r < num_ranks; r++) {
        int64_t v = n[r * stride];
        if (v < 0)
            return gradref__fail(GRADREF_ERR_PARAM, op, "%s[%lld] is %lld, below 0", name,
                                 (long long)r, (long long)v);
        if (gradref__add_ovf(sum, v, &sum))
            return gradref__fail(GRADREF_ERR_OVERFLOW, op, "the entries of %s overflow int64",
                                 name);
    }
    if (sum != total)
        return gradref__fail(GRADREF_ERR_PARAM, op, "the entries of %s sum to %lld but %s is %lld",
                             name, (long long)sum, total_name, (long long)total);
    return GRADREF_OK;
}

static void fill_plan(gradref__recat_plan *p, const recat_args *a, int64_t features, int64_t width,
                      const int64_t *strides, const int64_t *n, int64_t n_stride,
                      int64_t num_ranks) {
    p->src = (const char *)a->grad_output->data;
    p->dst = (char *)a->out->data;
    p->elem_size = gradref__dtype_size(a->grad_output->dtype);
    p->in_dtype = a->grad_output->dtype;
    p->out_dtype = a->out->dtype;
    p->terms = GRADREF__TERMS_NONE;
    p->max_isa = GRADREF__ISA_MAX;
    const int empty = a->go_ext.numel == 0; /* the other sizes may then be anything */
    p->batch = empty ? 0 : a->grad_output->shape[0];
    p->features = empty ? 0 : features;
    p->width = empty ? 0 : width;
    p->src_stride[0] = strides[0];
    p->src_stride[1] = strides[1];
    p->src_stride[2] = strides[2];
    p->dst_stride = a->out->strides[0];
    p->num_ranks = num_ranks;
    p->rank_features = n;
    p->rank_features_stride = n_stride;
}

static gradref_status validate_list(recat_args *a, int32_t go_ndim, const int64_t *n,
                                    int32_t num_ranks, const char *list_name,
                                    gradref__recat_plan *p) {
    gradref_status s;
    GRADREF__FORWARD_IF_ERROR(check_tensors(a, go_ndim));
    if (num_ranks < 1)
        return gradref__fail(GRADREF_ERR_PARAM, a->op, "num_ranks is %d; at least 1 is required",
                             (int)num_ranks);
    if (n == NULL) return gradref__fail(GRADREF_ERR_NULL, a->op, "%s is NULL", list_name);
    const gradref_tensor *go = a->grad_output;
    int64_t total = go->shape[1];
    if ((s = check_split(a->op, list_name, n, 1, num_ranks, total,
                         go_ndim == 3 ? "grad_output.shape[1] (T)" : "grad_output.shape[1]")) !=
        GRADREF_OK)
        return s;
    /* the list is read again while out is written */
    GRADREF__FORWARD_IF_ERROR(
        gradref__check_array(a->op, "out", &a->out_ext, list_name, n, num_ranks, 1, sizeof *n));
    int64_t strides[3] = {go->strides[0], go->strides[1], go_ndim == 3 ? go->strides[2] : 1};
    fill_plan(p, a, total, go_ndim == 3 ? go->shape[2] : 1, strides, n, 1, num_ranks);
    return GRADREF_OK;
}

static gradref_status check_index_tensor(const recat_args *a, const char *name,
                                         const gradref_tensor *t, gradref_tensor *local,
                                         gradref__extent *ext) {
    GRADREF__FORWARD_IF_ERROR(gradref__take_input(a->op, name, t, local, ext));
    t = local;
    if (t->dtype != GRADREF_I64)
        return gradref__fail(GRADREF_ERR_DTYPE, a->op,
                             "%s.dtype is %s; recat needs I64 (torchrec's cumsum buffers are I32 "
                             "inclusive prefixes: pass the exclusive I64 prefix instead)",
                             name, gradref__dtype_name(t->dtype));
    GRADREF__FORWARD_IF_ERROR(gradref__check_rank(a->op, name, t, 1));
    if (t->shape[0] < 1)
        return gradref__fail(GRADREF_ERR_SHAPE, a->op,
                             "%s.shape[0] is 0; at least 1 rank is required", name);
    return gradref__check_disjoint(a->op, "out", &a->out_ext, name, ext);
}

/* cumsum (W entries, stride cs) is the exclusive prefix sum of n (stride ns); the inclusive
 * one, torchrec's own buffer, gets its own message. */
static gradref_status check_exclusive_prefix(const char *op, const int64_t *n, int64_t ns,
                                             const int64_t *c, int64_t cs, int64_t W) {
    int64_t exclusive = 0; /* cannot overflow: the entries sum to shape[1] */
    for (int64_t r = 0; r < W; r++) {
        if (c[r * cs] != exclusive) {
            int inclusive = 1;
            for (int64_t q = 0, acc = 0; q < W && inclusive; q++) {
                acc += n[q * ns];
                inclusive = c[q * cs] == acc;
            }
            if (inclusive)
                return gradref__fail(GRADREF_ERR_PARAM, op,
                                     "cumsum_dim_sum_per_rank is the inclusive prefix sum of "
                                     "dim_sum_per_rank; recat needs the exclusive one (C_0 = 0, "
                                     "C_r = dim_sum_per_rank[0] + ... + dim_sum_per_rank[r-1])");
            return gradref__fail(GRADREF_ERR_PARAM, op,
                                 "cumsum_dim_sum_per_rank[%lld] is %lld but the exclusive prefix "
                                 "sum of dim_sum_per_rank gives %lld",
                                 (long long)r, (long long)c[r * cs], (long long)exclusive);
        }
        exclusive += n[r * ns];
    }
    return GRADREF_OK;
}

static gradref_status validate_batch(recat_args *a, const gradref_tensor *dims,
                                     const gradref_tensor *cumsum, gradref__recat_plan *p) {
    gradref_status s;
    gradref__extent de, ce;
    gradref_tensor dims_local, cumsum_local;
    GRADREF__FORWARD_IF_ERROR(check_tensors(a, 2));
    GRADREF__FORWARD_IF_ERROR(check_index_tensor(a, "dim_sum_per_rank", dims, &dims_local, &de));
    if ((s = check_index_tensor(a, "cumsum_dim_sum_per_rank", cumsum, &cumsum_local, &ce)) !=
        GRADREF_OK)
        return s;
    dims = &dims_local;
    cumsum = &cumsum_local;
    int64_t W = dims->shape[0];
    if (cumsum->shape[0] != W)
        return gradref__fail(
            GRADREF_ERR_SHAPE, a->op,
            "cumsum_dim_sum_per_rank.shape[0] is %lld but dim_sum_per_rank.shape[0] is %lld",
            (long long)cumsum->shape[0], (long long)W);
    const int64_t *n = (const int64_t *)dims->data, *c = (const int64_t *)cumsum->data;
    int64_t ns = dims->strides[0], cs = cumsum->strides[0];
    GRADREF__FORWARD_IF_ERROR(check_split(a->op, "dim_sum_per_rank", n, ns, W,
                                          a->grad_output->shape[1], "grad_output.shape[1]"));
    GRADREF__FORWARD_IF_ERROR(check_exclusive_prefix(a->op, n, ns, c, cs, W));
    const gradref_tensor *go = a->grad_output;
    int64_t strides[3] = {go->strides[0], go->strides[1], 1};
    fill_plan(p, a, go->shape[1], 1, strides, n, ns, W);
    return GRADREF_OK;
}

#define OP_FIXED "recat_embedding_grad_output"
#define OP_MIXED "recat_embedding_grad_output_mixed_d"
#define OP_BATCH "recat_embedding_grad_output_mixed_d_batch"

/* GRADREF_STRICT_UPSTREAM: what FBGEMM's CPU recat rejects and gradref accepts: dtypes other
 * than F32 and F16 (FBGEMM_DISPATCH_FLOAT_AND_HALF) and a grad_output that is not contiguous
 * (TORCH_CHECK(grad_output.is_contiguous())). */
static gradref_status check_fbgemm(const char *op, const gradref_tensor *go) {
    if (go->dtype != GRADREF_F32 && go->dtype != GRADREF_F16)
        return gradref__fail(GRADREF_ERR_DTYPE, op,
                             "strict FBGEMM: grad_output.dtype is %s; FBGEMM takes F32 and F16",
                             gradref__dtype_name(go->dtype));
    /* as torch's is_contiguous: an empty tensor is contiguous whatever its strides (and its
     * other sizes, whose product may not fit int64); else the sizes' product is its numel,
     * which the validation found to fit */
    for (int i = 0; i < go->ndim; i++)
        if (go->shape[i] == 0) return GRADREF_OK;
    int64_t expect = 1;
    for (int i = go->ndim - 1; i >= 0; i--) {
        if (go->shape[i] != 1 && go->strides[i] != expect)
            return gradref__fail(GRADREF_ERR_STRIDE, op,
                                 "strict FBGEMM: grad_output is not contiguous (strides[%d] is "
                                 "%lld, not %lld)",
                                 i, (long long)go->strides[i], (long long)expect);
        expect *= go->shape[i];
    }
    return GRADREF_OK;
}

/* GRADREF_VERBOSE's isa field: the level of the kernel table the plan runs. */
static const char *kernel_level(const void *plan) {
    return gradref__recat_kernels_for(((const gradref__recat_plan *)plan)->max_isa)->isa;
}

static void fast_run(const void *plan, void *ws, int threads) {
    (void)ws;
    const gradref__recat_plan *p = plan;
    if (p->terms) /* |value| or 0 per element: the reference loop */
        gradref__recat_ref(p);
    else
        gradref__recat_fast(p, threads);
}

/* out's dtype: grad_output's, or F64 for (and only for) a GRADREF_TERM_* call, which takes a
 * float grad_output. */
static gradref_status check_out_dtype(const char *op, const gradref__recat_plan *p, int terms) {
    if (terms && !gradref__dtype_is_float(p->in_dtype))
        return gradref__fail(GRADREF_ERR_DTYPE, op,
                             "grad_output.dtype is %s; a GRADREF_TERM_* call takes a float dtype",
                             gradref__dtype_name(p->in_dtype));
    if (terms) return gradref__check_terms_output(op, "out", p->out_dtype);
    if (p->out_dtype != p->in_dtype)
        return gradref__fail(GRADREF_ERR_DTYPE, op, "out.dtype is %s but grad_output.dtype is %s",
                             gradref__dtype_name(p->out_dtype), gradref__dtype_name(p->in_dtype));
    return GRADREF_OK;
}

/* One strategy, with no workspace: every dtype and split. */
static const gradref__strategy strategies[] = {{"fast", NULL, NULL, NULL, fast_run, NULL}};
static const gradref__fast_path FAST = {"recat", strategies, 1, NULL, kernel_level};

static gradref_status execute(const char *op, gradref_status validated,
                              const gradref__recat_plan *p, const gradref_tensor *go,
                              const gradref_tensor *out, const gradref_exec *exec) {
    gradref__ctx ctx;
    gradref_status s = gradref__exec_resolve(op, exec, &ctx);
    if (s != GRADREF_OK) return s;
    GRADREF__FORWARD_IF_ERROR(
        gradref__check_precision(op, &ctx, GRADREF__ANY_PRECISION | GRADREF__TERMS_ALLOWED));
    if (validated != GRADREF_OK) return validated;
    GRADREF__FORWARD_IF_ERROR(check_out_dtype(op, p, ctx.terms != GRADREF__TERMS_NONE));
    gradref__recat_plan q = *p;
    q.terms = ctx.terms;
    p = &q;
    if (ctx.strict) GRADREF__FORWARD_IF_ERROR(check_fbgemm(op, go));
    gradref__ctx_tensor(&ctx, "grad_output", go);
    gradref__ctx_tensor(&ctx, "out", out);
    return gradref__run_fast_path(&FAST, &ctx, p);
}

static gradref_status report_workspace(const char *op, gradref_status validated,
                                       const gradref__recat_plan *p, size_t *bytes) {
    if (bytes == NULL) return gradref__fail(GRADREF_ERR_NULL, op, "bytes is NULL");
    if (validated != GRADREF_OK) return validated;
    GRADREF__FORWARD_IF_ERROR(check_out_dtype(op, p, 0));
    *bytes = gradref__fast_path_workspace(&FAST, p);
    return GRADREF_OK;
}

static gradref_status validate_fixed(const gradref_tensor *go, const int64_t *n, int32_t num_ranks,
                                     const gradref_tensor *out, gradref__recat_plan *p) {
    recat_args a = {OP_FIXED, go, out, {0, 0, 0}, {0, 0, 0}, {0}, {0}};
    return validate_list(&a, 3, n, num_ranks, "num_features_per_rank", p);
}

static gradref_status validate_mixed(const gradref_tensor *go, const int64_t *n, int32_t num_ranks,
                                     const gradref_tensor *out, gradref__recat_plan *p) {
    recat_args a = {OP_MIXED, go, out, {0, 0, 0}, {0, 0, 0}, {0}, {0}};
    return validate_list(&a, 2, n, num_ranks, "dim_sum_per_rank", p);
}

static gradref_status validate_mixed_batch(const gradref_tensor *go, const gradref_tensor *dims,
                                           const gradref_tensor *cumsum, const gradref_tensor *out,
                                           gradref__recat_plan *p) {
    recat_args a = {OP_BATCH, go, out, {0, 0, 0}, {0, 0, 0}, {0}, {0}};
    return validate_batch(&a, dims, cumsum, p);
}

gradref_status gradref_recat_embedding_grad_output(const gradref_tensor *grad_output,
                                                   const int64_t *num_features_per_rank,
                                                   int32_t num_ranks, const gradref_tensor *out,
                                                   const gradref_exec *exec) {
    gradref__recat_plan p;
    return execute(OP_FIXED, validate_fixed(grad_output, num_features_per_rank, num_ranks, out, &p),
                   &p, grad_output, out, exec);
}

gradref_status gradref_recat_embedding_grad_output_workspace_size(
    const gradref_tensor *grad_output, const int64_t *num_features_per_rank, int32_t num_ranks,
    const gradref_tensor *out, size_t *bytes) {
    gradref__recat_plan p;
    return report_workspace(OP_FIXED,
                            validate_fixed(grad_output, num_features_per_rank, num_ranks, out, &p),
                            &p, bytes);
}

gradref_status gradref_recat_embedding_grad_output_mixed_d(const gradref_tensor *grad_output,
                                                           const int64_t *dim_sum_per_rank,
                                                           int32_t num_ranks,
                                                           const gradref_tensor *out,
                                                           const gradref_exec *exec) {
    gradref__recat_plan p;
    return execute(OP_MIXED, validate_mixed(grad_output, dim_sum_per_rank, num_ranks, out, &p), &p,
                   grad_output, out, exec);
}

gradref_status gradref_recat_embedding_grad_output_mixed_d_workspace_size(
    const gradref_tensor *grad_output, const int64_t *dim_sum_per_rank, int32_t num_ranks,
    const gradref_tensor *out, size_t *bytes) {
    gradref__recat_plan p;
    return report_workspace(
        OP_MIXED, validate_mixed(grad_output, dim_sum_per_rank, num_ranks, out, &p), &p, bytes);
}

gradref_status gradref_recat_embedding_grad_output_mixed_d_batch(
    const gradref_tensor *grad_output, const gradref_tensor *dim_sum_per_rank,
    const gradref_tensor *cumsum_dim_sum_per_rank, const gradref_tensor *out,
    const gradref_exec *exec) {
    gradref__recat_plan p;
    return execute(
        OP_BATCH,
        validate_mixed_batch(grad_output, dim_sum_per_rank, cumsum_dim_sum_per_rank, out, &p), &p,
        grad_output, out, exec);
}

gradref_status gradref_recat_embedding_grad_output_mixed_d_batch_workspace_size(
    const gradref_tensor *grad_output, const gradref_tensor *dim_sum_per_rank,
    const gradref_tensor *cumsum_dim_sum_per_rank, const gradref_tensor *out, size_t *bytes) {
    gradref__recat_plan p;
    return report_workspace(
        OP_BATCH,
        validate_mixed_batch(grad_output, dim_sum_per_rank, cumsum_dim_sum_per_rank, out, &p), &p,
        bytes);
}
