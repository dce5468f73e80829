/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad entry points: validation (everything before any write), then dispatch. */
#include "common/exec.h"
#include "common/fast_path.h"
#include "common/isa.h"
#include "common/tensor.h"
#include "rope_grad_internal.h"
#include "rope_grad_kernels.h"

static const char OP[] = "rope_grad";

/* GRADREF_VERBOSE's isa field: the level of the kernel table the plan runs. */
static const char *kernel_level(const void *plan) {
    return gradref__rope_kernels_for(((const gradref__rope_plan *)plan)->max_isa)->isa;
}

static void fast_run(const void *plan, void *ws, int threads) {
    (void)ws;
    gradref__rope_grad_fast(plan, threads);
}

/* One strategy, with no workspace: every mode and dtype. */
static const gradref__strategy strategies[] = {{"fast", NULL, NULL, NULL, fast_run, NULL}};
static const gradref__fast_path FAST = {OP, strategies, 1, NULL, kernel_level};

static gradref_status check_params(const gradref_rope_params *p) {
    if (p->mode < GRADREF_ROPE_ATB || p->mode > GRADREF_ROPE_INTERLEAVED)
        return gradref__fail(GRADREF_ERR_PARAM, OP, "p.mode is %d, not a gradref_rope_mode",
                             (int)p->mode);
    if (p->head_dim < 2 || p->head_dim % 2 != 0)
        return gradref__fail(GRADREF_ERR_PARAM, OP, "p.head_dim is %d; it must be even and >= 2",
                             (int)p->head_dim);
    if (p->rotary_dim != 0) {
        if (p->mode == GRADREF_ROPE_ATB && p->rotary_dim != p->head_dim)
            return gradref__fail(GRADREF_ERR_PARAM, OP,
                                 "p.rotary_dim is %d; ATB mode rotates the whole head (0 or "
                                 "head_dim %d)",
                                 (int)p->rotary_dim, (int)p->head_dim);
        if (p->rotary_dim < 2 || p->rotary_dim % 2 != 0 || p->rotary_dim > p->head_dim)
            return gradref__fail(GRADREF_ERR_PARAM, OP,
                                 "p.rotary_dim is %d; it must be 0 or even in 2..head_dim (%d)",
                                 (int)p->rotary_dim, (int)p->head_dim);
    }
    if (p->num_seqs < 1)
        return gradref__fail(GRADREF_ERR_PARAM, OP, "p.num_seqs is %d; at least 1 is required",
                             (int)p->num_seqs);
    if (p->seq_lens == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "p.seq_lens is NULL");
    for (int32_t b = 0; b < p->num_seqs; b++)
        if (p->seq_lens[b] <= 0)
            return gradref__fail(GRADREF_ERR_PARAM, OP, "p.seq_lens[%d] is %d; it must be > 0",
                                 (int)b, (int)p->seq_lens[b]);
    return GRADREF_OK;
}

static gradref_status check_shape(const char *name, const gradref_tensor *t, int64_t rows,
                                  int64_t cols) {
    if (t->shape[0] != rows || t->shape[1] != cols)
        return gradref__fail(GRADREF_ERR_SHAPE, OP, "%s is (%lld, %lld) but must be (%lld, %lld)",
                             name, (long long)t->shape[0], (long long)t->shape[1], (long long)rows,
                             (long long)cols);
    return GRADREF_OK;
}

static const char *const NAMES[6] = {"q_embed_grad", "k_embed_grad", "cos",
                                     "sin",          "q_grad",       "k_grad"};

/* The six tensors taken (normalised copies in t[]: q, k, cos, sin, q_grad, k_grad; extents in
 * e[]), each 2-D, all of one float dtype (with terms, the outputs F64). */
static gradref_status check_tensors(const gradref_tensor *const *in, gradref_tensor *t,
                                    gradref__extent *e, int terms) {
    for (int i = 0; i < 6; i++) {
        GRADREF__FORWARD_IF_ERROR(i < 4 ? gradref__take_input(OP, NAMES[i], in[i], &t[i], &e[i])
                                        : gradref__take_output(OP, NAMES[i], in[i], &t[i], &e[i]));
        GRADREF__FORWARD_IF_ERROR(gradref__check_rank(OP, NAMES[i], in[i], 2));
    }
    const int32_t dtype = t[0].dtype;
    if (!gradref__dtype_is_float(dtype))
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "q_embed_grad.dtype is %s; rope_grad takes F32, F64, F16 or BF16",
                             gradref__dtype_name(dtype));
    for (int i = 1; i < 6; i++) {
        if (i >= 4 && terms) {
            GRADREF__FORWARD_IF_ERROR(gradref__check_terms_output(OP, NAMES[i], t[i].dtype));
            continue;
        }
        if (t[i].dtype != dtype)
            return gradref__fail(GRADREF_ERR_DTYPE, OP,
                                 "%s.dtype is %s but q_embed_grad.dtype is %s", NAMES[i],
                                 gradref__dtype_name(t[i].dtype), gradref__dtype_name(dtype));
    }
    return GRADREF_OK;
}

/* The tokens against seq_lens, the widths against head_dim, the outputs like their inputs,
 * and each sequence's positions inside cos and sin. */
static gradref_status check_shapes(const gradref_rope_params *p, const gradref_tensor *t) {
    const gradref_tensor *q = &t[0], *k = &t[1];
    const int64_t D = p->head_dim, T = q->shape[0];
    int64_t sum = 0;
    for (int32_t b = 0; b < p->num_seqs; b++)
        sum += p->seq_lens[b]; /* < 2^31 * 2^31 */
    if (sum != T)
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "p.seq_lens sum to %lld but q_embed_grad has %lld rows",
                             (long long)sum, (long long)T);
    if (q->shape[1] % D != 0)
        return gradref__fail(GRADREF_ERR_SHAPE, OP,
                             "q_embed_grad.shape[1] is %lld, not a multiple of head_dim %lld",
                             (long long)q->shape[1], (long long)D);
    GRADREF__FORWARD_IF_ERROR(check_shape("k_embed_grad", k, T, k->shape[1]));
    if (k->shape[1] % D != 0)
        return gradref__fail(GRADREF_ERR_SHAPE, OP,
                             "k_embed_grad.shape[1] is %lld, not a multiple of head_dim %lld",
                             (long long)k->shape[1], (long long)D);
    const int64_t S = t[2].shape[0];
    GRADREF__FORWARD_IF_ERROR(check_shape("cos", &t[2], S, D));
    GRADREF__FORWARD_IF_ERROR(check_shape("sin", &t[3], S, D));
    GRADREF__FORWARD_IF_ERROR(check_shape("q_grad", &t[4], T, q->shape[1]));
    GRADREF__FORWARD_IF_ERROR(check_shape("k_grad", &t[5], T, k->shape[1]));
    for (int32_t b = 0; b < p->num_seqs; b++) {
        int64_t start = p->start_positions ? p->start_positions[b] : 0;
        if (start < 0 || start > S - p->seq_lens[b])
            return gradref__fail(GRADREF_ERR_PARAM, OP,
                                 "sequence %d starts at position %lld and has %d tokens but cos "
                                 "and sin have %lld rows",
                                 (int)b, (long long)start, (int)p->seq_lens[b], (long long)S);
    }
    return GRADREF_OK;
}

/* No output overlaps an input, the other output, or the lists read while it is written. */
static gradref_status check_aliasing(const gradref_rope_params *p, const gradref__extent *e) {
    for (int o = 4; o < 6; o++) {
        GRADREF__FORWARD_IF_ERROR(gradref__check_array(
            OP, NAMES[o], &e[o], "p.seq_lens", p->seq_lens, p->num_seqs, 1, sizeof *p->seq_lens));
        GRADREF__FORWARD_IF_ERROR(gradref__check_array(OP, NAMES[o], &e[o], "p.start_positions",
                                                       p->start_positions, p->num_seqs, 1,
                                                       sizeof *p->start_positions));
    }
    for (int o = 4; o < 6; o++)
        for (int i = 0; i < 4; i++)
            GRADREF__FORWARD_IF_ERROR(
                gradref__check_disjoint(OP, NAMES[o], &e[o], NAMES[i], &e[i]));
    return gradref__check_disjoint(OP, "k_grad", &e[5], "q_grad", &e[4]);
}

static void plan_of(const gradref_rope_params *p, const gradref_tensor *t,
                    gradref__rope_plan *plan) {
    const int64_t D = p->head_dim;
    plan->mode = p->mode;
    plan->dtype = t[0].dtype;
    plan->precision = GRADREF_PRECISION_DEFAULT;
    plan->max_isa = GRADREF__ISA_MAX;
    plan->elem_size = gradref__dtype_size(t[0].dtype);
    plan->out_dtype = t[4].dtype;
    plan->out_size = gradref__dtype_size(t[4].dtype);
    plan->head_dim = D;
    plan->rotary_dim = p->rotary_dim ? p->rotary_dim : D;
    plan->tokens = t[0].shape[0];
    plan->num_seqs = p->num_seqs;
    plan->seq_lens = p->seq_lens;
    plan->start_positions = p->start_positions;
    for (int i = 0; i < 2; i++) {
        const gradref_tensor *src = &t[i], *dst = &t[4 + i];
        gradref__rope_stream *st = &plan->stream[i];
        st->in = (const char *)src->data;
        st->out = (char *)dst->data;
        st->heads = src->shape[1] / D;
        st->in_stride[0] = src->strides[0];
        st->in_stride[1] = src->strides[1];
        st->out_stride[0] = dst->strides[0];
        st->out_stride[1] = dst->strides[1];
    }
    plan->cos = (const char *)t[2].data;
    plan->sin = (const char *)t[3].data;
    plan->cos_stride[0] = t[2].strides[0];
    plan->cos_stride[1] = t[2].strides[1];
    plan->sin_stride[0] = t[3].strides[0];
    plan->sin_stride[1] = t[3].strides[1];
}

gradref_status gradref__rope_grad_validate_terms(const gradref_rope_params *p,
                                                 const gradref_tensor *const *tensors,
                                                 int32_t terms, gradref__rope_plan *plan) {
    if (p == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "p is NULL");
    GRADREF__FORWARD_IF_ERROR(check_params(p));
    gradref_tensor t[6];
    gradref__extent e[6];
    GRADREF__FORWARD_IF_ERROR(check_tensors(tensors, t, e, terms != GRADREF__TERMS_NONE));
    GRADREF__FORWARD_IF_ERROR(check_shapes(p, t));
    GRADREF__FORWARD_IF_ERROR(check_aliasing(p, e));
    plan_of(p, t, plan);
    plan->terms = terms;
    return GRADREF_OK;
}

gradref_status gradref__rope_grad_validate(const gradref_rope_params *p, const gradref_tensor *q,
                                           const gradref_tensor *k, const gradref_tensor *cos,
                                           const gradref_tensor *sin, const gradref_tensor *dq,
                                           const gradref_tensor *dk, gradref__rope_plan *plan) {
    const gradref_tensor *const in[6] = {q, k, cos, sin, dq, dk};
    return gradref__rope_grad_validate_terms(p, in, GRADREF__TERMS_NONE, plan);
}

/* GRADREF_STRICT_UPSTREAM, ATB's tensor checks, run before gradref's own so that a call ATB
 * refuses for a tensor gets ATB's class even when it also breaks a parameter rule (q with 12
 * rows and k 11 is ATB's TENSOR_SIZE, not the seq_lens sum; cos 127 wide its TENSOR_DIM, not an
 * odd head_dim): every size > 0 (CheckInTensor), F16 (INI_MATCH), q and k of one shape
 * (TENSOR_SIZE), cos and sin of one shape, q's width a multiple of 128 and cos 128 wide
 * (TENSOR_DIM). Tensors gradref would refuse for other reasons (NULL, rank) are left to it. */
static gradref_status check_atb_tensors(const gradref_tensor *q, const gradref_tensor *k,
                                        const gradref_tensor *cos, const gradref_tensor *sin) {
    const gradref_tensor *in[4] = {q, k, cos, sin};
    static const char *const names[4] = {"q_embed_grad", "k_embed_grad", "cos", "sin"};
    for (int i = 0; i < 4; i++)
        if (in[i] == NULL || in[i]->ndim != 2) return GRADREF_OK;
    for (int i = 0; i < 4; i++)
        if (in[i]->shape[0] <= 0 || in[i]->shape[1] <= 0)
            return gradref__fail(GRADREF_ERR_SHAPE, OP,
                                 "strict ATB: %s is (%lld, %lld); ATB takes no empty tensor",
                                 names[i], (long long)in[i]->shape[0], (long long)in[i]->shape[1]);
    for (int i = 0; i < 4; i++)
        if (in[i]->dtype != GRADREF_F16)
            return gradref__fail(GRADREF_ERR_DTYPE, OP,
                                 "strict ATB: %s.dtype is %s; RopeGrad takes F16 only", names[i],
                                 gradref__dtype_name(in[i]->dtype));
    for (int i = 0; i < 4; i += 2)
        if (in[i]->shape[0] != in[i + 1]->shape[0] || in[i]->shape[1] != in[i + 1]->shape[1])
            return gradref__fail(GRADREF_ERR_SHAPE, OP,
                                 "strict ATB: %s is (%lld, %lld) and %s (%lld, %lld); RopeGrad "
                                 "needs equal shapes",
                                 names[i], (long long)in[i]->shape[0], (long long)in[i]->shape[1],
                                 names[i + 1], (long long)in[i + 1]->shape[0],
                                 (long long)in[i + 1]->shape[1]);
    if (q->shape[1] % 128 != 0)
        return gradref__fail(GRADREF_ERR_SHAPE, OP,
                             "strict ATB: q_embed_grad.shape[1] is %lld, not a multiple of 128",
                             (long long)q->shape[1]);
    if (cos->shape[1] != 128)
        return gradref__fail(GRADREF_ERR_SHAPE, OP,
                             "strict ATB: cos.shape[1] is %lld; RopeGrad's headSize is 128 only",
                             (long long)cos->shape[1]);
    return GRADREF_OK;
}

/* GRADREF_STRICT_UPSTREAM after gradref's own checks: ATB's parameter and tiling limits (PARAM);
 * its tensor checks ran first (check_atb_tensors), with ATB's error classes mapped: INI_MATCH
 * (dtype) to DTYPE, TENSOR_DIM and TENSOR_SIZE to SHAPE. */
static gradref_status check_atb(const gradref__rope_plan *plan) {
    if (plan->mode != GRADREF_ROPE_ATB)
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "strict ATB: p.mode must be GRADREF_ROPE_ATB (RopeGrad has no other)");
    if (plan->num_seqs >= 100000)
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "strict ATB: p.num_seqs is %lld; RopeGrad's batch must be < 100000",
                             (long long)plan->num_seqs);
    if (plan->start_positions != NULL)
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "strict ATB: p.start_positions must be NULL (every sequence starts at "
                             "cos/sin row 0 in RopeGrad)");
    return GRADREF_OK;
}

gradref_status gradref_rope_grad(const gradref_rope_params *p, const gradref_tensor *q_embed_grad,
                                 const gradref_tensor *k_embed_grad, const gradref_tensor *cos,
                                 const gradref_tensor *sin, const gradref_tensor *q_grad,
                                 const gradref_tensor *k_grad, const gradref_exec *exec) {
    gradref__ctx ctx;
    gradref__rope_plan plan;
    GRADREF__FORWARD_IF_ERROR(gradref__exec_resolve(OP, exec, &ctx));
    GRADREF__FORWARD_IF_ERROR(
        gradref__check_precision(OP, &ctx, GRADREF__GENERAL_PRECISIONS | GRADREF__TERMS_ALLOWED));
    if (ctx.strict)
        GRADREF__FORWARD_IF_ERROR(check_atb_tensors(q_embed_grad, k_embed_grad, cos, sin));
    const gradref_tensor *const in[6] = {q_embed_grad, k_embed_grad, cos, sin, q_grad, k_grad};
    GRADREF__FORWARD_IF_ERROR(gradref__rope_grad_validate_terms(p, in, ctx.terms, &plan));
    if (ctx.strict) GRADREF__FORWARD_IF_ERROR(check_atb(&plan));
    plan.precision = ctx.precision;
    gradref__ctx_tensor(&ctx, "q_embed_grad", q_embed_grad);
    gradref__ctx_tensor(&ctx, "k_embed_grad", k_embed_grad);
    gradref__ctx_tensor(&ctx, "cos", cos);
    gradref__ctx_tensor(&ctx, "sin", sin);
    gradref__ctx_tensor(&ctx, "q_grad", q_grad);
    gradref__ctx_tensor(&ctx, "k_grad", k_grad);
    return gradref__run_fast_path(&FAST, &ctx, &plan);
}

gradref_status
gradref_rope_grad_workspace_size(const gradref_rope_params *p, const gradref_tensor *q_embed_grad,
                                 const gradref_tensor *k_embed_grad, const gradref_tensor *cos,
                                 const gradref_tensor *sin, const gradref_tensor *q_grad,
                                 const gradref_tensor *k_grad, size_t *bytes) {
    gradref__rope_plan plan;
    if (bytes == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "bytes is NULL");
    gradref_status s =
        gradref__rope_grad_validate(p, q_embed_grad, k_embed_grad, cos, sin, q_grad, k_grad, &plan);
    if (s == GRADREF_OK) *bytes = gradref__fast_path_workspace(&FAST, &plan);
    return s;
}
