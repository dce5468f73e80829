/* SPDX-License-Identifier: Apache-2.0 */
/* Descriptor validation and the public descriptor helpers. */
#include <string.h>

#include "tensor.h"

size_t gradref__dtype_size(int32_t dtype) {
    switch (dtype) {
    case GRADREF_F32: return 4;
    case GRADREF_F64: return 8;
    case GRADREF_F16: return 2;
    case GRADREF_BF16: return 2;
    case GRADREF_I8: return 1;
    case GRADREF_I32: return 4;
    case GRADREF_I64: return 8;
    default: return 0;
    }
}

const char *gradref__dtype_name(int32_t dtype) {
    switch (dtype) {
    case GRADREF_F32: return "F32";
    case GRADREF_F64: return "F64";
    case GRADREF_F16: return "F16";
    case GRADREF_BF16: return "BF16";
    case GRADREF_I8: return "I8";
    case GRADREF_I32: return "I32";
    case GRADREF_I64: return "I64";
    default: return "?";
    }
}

int gradref__dtype_is_float(int32_t dtype) {
    return dtype == GRADREF_F32 || dtype == GRADREF_F64 || dtype == GRADREF_F16 ||
           dtype == GRADREF_BF16;
}

/* Everything but the data pointer: also used by the init helpers, whose data may be NULL. */
static gradref_status check_layout(const char *op, const char *name, const gradref_tensor *t,
                                   int64_t *numel_out, int64_t *bytes_out) {
    size_t esz = gradref__dtype_size(t->dtype);
    if (esz == 0)
        return gradref__fail(GRADREF_ERR_DTYPE, op, "%s.dtype is %d, not a gradref_dtype", name,
                             (int)t->dtype);
    if (t->ndim < 0 || t->ndim > GRADREF_MAX_DIMS)
        return gradref__fail(GRADREF_ERR_RANK, op, "%s.ndim is %d, outside 0..%d", name,
                             (int)t->ndim, GRADREF_MAX_DIMS);
    int empty = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return gradref__fail(GRADREF_ERR_SHAPE, op, "%s.shape[%d] is %lld, below 0", name, i,
                                 (long long)t->shape[i]);
        if (t->strides[i] < 0)
            return gradref__fail(GRADREF_ERR_STRIDE, op,
                                 "%s.strides[%d] is %lld, below 0 (a blocked layout, which only "
                                 "gradref_copy and conv_backprop_data read)",
                                 name, i, (long long)t->strides[i]);
        if (t->shape[i] == 0) empty = 1;
    }
    int64_t numel = 1, span = 1, bytes;
    if (empty) {
        numel = 0;
        span = 0;
    } else {
        for (int i = 0; i < t->ndim; i++) {
            int64_t reach;
            if (gradref__mul_ovf(numel, t->shape[i], &numel) ||
                gradref__mul_ovf(t->strides[i], t->shape[i] - 1, &reach) ||
                gradref__add_ovf(span, reach, &span))
                return gradref__fail(GRADREF_ERR_OVERFLOW, op,
                                     "%s: element count or offset of dim %d exceeds int64", name,
                                     i);
        }
    }
    /* bytes covers both the strided span and a dense copy of the elements */
    int64_t larger = numel > span ? numel : span;
    if (gradref__mul_ovf(larger, (int64_t)esz, &bytes) || (uint64_t)bytes > (uint64_t)SIZE_MAX)
        return gradref__fail(GRADREF_ERR_OVERFLOW, op,
                             "%s: %lld elements of %zu bytes exceed the address space", name,
                             (long long)larger, esz);
    *numel_out = numel;
    *bytes_out = span * (int64_t)esz;
    return GRADREF_OK;
}

gradref_status gradref__check_tensor(const char *op, const char *name, const gradref_tensor *t,
                                     gradref__extent *ext) {
    if (t == NULL) return gradref__fail(GRADREF_ERR_NULL, op, "%s is NULL", name);
    int64_t numel = 0, bytes = 0;
    gradref_status s = check_layout(op, name, t, &numel, &bytes);
    if (s != GRADREF_OK) return s;
    if (numel > 0 && t->data == NULL)
        return gradref__fail(GRADREF_ERR_NULL, op, "%s.data is NULL but it has %lld elements", name,
                             (long long)numel);
    uintptr_t lo = (uintptr_t)t->data;
    const size_t esz = gradref__dtype_size(t->dtype);
    if (numel > 0 && lo % esz != 0)
        return gradref__fail(GRADREF_ERR_PARAM, op,
                             "%s.data (%p) is not aligned to its %zu-byte elements", name, t->data,
                             esz);
    if (numel > 0 && (uintptr_t)bytes > UINTPTR_MAX - lo)
        return gradref__fail(GRADREF_ERR_OVERFLOW, op,
                             "%s: its %lld bytes run past the end of the address space", name,
                             (long long)bytes);
    if (ext) {
        ext->numel = numel;
        ext->lo = lo;
        ext->hi = numel > 0 ? lo + (uintptr_t)bytes : lo;
    }
    return GRADREF_OK;
}

gradref_status gradref__check_output(const char *op, const char *name, const gradref_tensor *t,
                                     gradref__extent *ext) {
    gradref__extent e;
    gradref_status s = gradref__check_tensor(op, name, t, &e);
    if (s != GRADREF_OK) return s;
    if (ext) *ext = e;
    if (e.numel == 0) return GRADREF_OK;
    int dims[GRADREF_MAX_DIMS], n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 1) continue;
        int j = n++; /* insertion sort by stride */
        while (j > 0 && t->strides[dims[j - 1]] > t->strides[i]) {
            dims[j] = dims[j - 1];
            j--;
        }
        dims[j] = i;
    }
    int64_t reach = 0;
    for (int k = 0; k < n; k++) {
        int i = dims[k];
        if (t->strides[i] <= reach)
            return gradref__fail(GRADREF_ERR_STRIDE, op,
                                 "%s has overlapping elements: strides[%d] is %lld but the "
                                 "smaller dims reach offset %lld",
                                 name, i, (long long)t->strides[i], (long long)reach);
        reach += t->strides[i] * (t->shape[i] - 1); /* cannot overflow: checked above */
    }
    return GRADREF_OK;
}

void gradref__tensor_normalize(const gradref_tensor *t, gradref_tensor *local) {
    gradref_tensor r = *t;
    int empty = 0;
    for (int i = 0; i < r.ndim; i++)
        empty |= r.shape[i] == 0;
    for (int i = 0; i < r.ndim; i++)
        if (empty || r.shape[i] == 1) r.strides[i] = 0;
    for (int i = r.ndim; i < GRADREF_MAX_DIMS; i++)
        r.shape[i] = 1, r.strides[i] = 0;
    *local = r;
}

gradref_status gradref__take_input(const char *op, const char *name, const gradref_tensor *t,
                                   gradref_tensor *local, gradref__extent *ext) {
    gradref_status s = gradref__check_tensor(op, name, t, ext);
    if (s == GRADREF_OK) gradref__tensor_normalize(t, local);
    return s;
}

gradref_status gradref__take_output(const char *op, const char *name, const gradref_tensor *t,
                                    gradref_tensor *local, gradref__extent *ext) {
    gradref_status s = gradref__check_output(op, name, t, ext);
    if (s == GRADREF_OK) gradref__tensor_normalize(t, local);
    return s;
}

gradref_status gradref__check_disjoint(const char *op, const char *out_name,
                                       const gradref__extent *out, const char *other_name,
                                       const gradref__extent *other) {
    if (out->numel == 0 || other->numel == 0) return GRADREF_OK;
    if (out->lo < other->hi && other->lo < out->hi)
        return gradref__fail(GRADREF_ERR_ALIAS, op, "%s overlaps %s in memory", out_name,
                             other_name);
    return GRADREF_OK;
}

gradref_status gradref__check_array(const char *op, const char *out_name,
                                    const gradref__extent *out, const char *array_name,
                                    const void *array, int64_t count, int64_t stride,
                                    size_t elem_size) {
    if (array == NULL || count <= 0) return GRADREF_OK;
    /* count, stride and elem_size come from validated descriptors or int32 counts */
    gradref__extent e;
    e.numel = count;
    e.lo = (uintptr_t)array;
    e.hi = e.lo + (uintptr_t)((count - 1) * stride + 1) * elem_size;
    return gradref__check_disjoint(op, out_name, out, array_name, &e);
}

gradref_status gradref__check_dim(const char *op, const char *name, const gradref_tensor *t,
                                  int dim, int64_t want, const char *what) {
    if (t->shape[dim] != want)
        return gradref__fail(GRADREF_ERR_SHAPE, op, "%s.shape[%d] is %lld but %s is %lld", name,
                             dim, (long long)t->shape[dim], what, (long long)want);
    return GRADREF_OK;
}

gradref_status gradref__check_dim_product(const char *op, const char *name, const gradref_tensor *t,
                                          int dim, int64_t a, int64_t b, const char *what) {
    int64_t want;
    if (gradref__mul_ovf(a, b, &want))
        return gradref__fail(GRADREF_ERR_SHAPE, op,
                             "%s.shape[%d] is %lld but %s is %lld x %lld, beyond int64", name, dim,
                             (long long)t->shape[dim], what, (long long)a, (long long)b);
    return gradref__check_dim(op, name, t, dim, want, what);
}

gradref_status gradref__check_rank(const char *op, const char *name, const gradref_tensor *t,
                                   int32_t ndim) {
    if (t->ndim != ndim)
        return gradref__fail(GRADREF_ERR_RANK, op, "%s.ndim is %d but must be %d", name,
                             (int)t->ndim, (int)ndim);
    return GRADREF_OK;
}

/* Strides of a dense layout whose memory order, outermost first, is order[0..ndim). A size-0
 * dim counts as 1, as PyTorch does, so strides stay meaningful for empty tensors. */
static gradref_status init_dense(const char *op, gradref_tensor *t, void *data, gradref_dtype dtype,
                                 int32_t ndim, const int64_t *shape, const int *order) {
    if (t == NULL) return gradref__fail(GRADREF_ERR_NULL, op, "t is NULL");
    if (ndim < 0 || ndim > GRADREF_MAX_DIMS)
        return gradref__fail(GRADREF_ERR_RANK, op, "ndim is %d, outside 0..%d", (int)ndim,
                             GRADREF_MAX_DIMS);
    if (ndim > 0 && shape == NULL) return gradref__fail(GRADREF_ERR_NULL, op, "shape is NULL");
    gradref_tensor r;
    memset(&r, 0, sizeof r);
    r.data = data;
    r.dtype = (int32_t)dtype;
    r.ndim = ndim;
    int64_t running = 1;
    for (int k = ndim - 1; k >= 0; k--) {
        int i = order[k];
        r.shape[i] = shape[i];
        r.strides[i] = running;
        if (shape[i] < 0)
            return gradref__fail(GRADREF_ERR_SHAPE, op, "shape[%d] is %lld, below 0", i,
                                 (long long)shape[i]);
        if (gradref__mul_ovf(running, shape[i] > 1 ? shape[i] : 1, &running))
            return gradref__fail(GRADREF_ERR_OVERFLOW, op, "the size of shape exceeds int64");
    }
    int64_t numel, bytes;
    gradref_status s = check_layout(op, "t", &r, &numel, &bytes);
    if (s != GRADREF_OK) return s;
    *t = r;
    return GRADREF_OK;
}

static const int IDENTITY[GRADREF_MAX_DIMS] = {0, 1, 2, 3, 4, 5, 6, 7};

gradref_status gradref_tensor_init(gradref_tensor *t, void *data, gradref_dtype dtype, int32_t ndim,
                                   const int64_t *shape) {
    return init_dense("tensor_init", t, data, dtype, ndim, shape, IDENTITY);
}

gradref_status gradref_tensor_init_format(gradref_tensor *t, void *data, gradref_dtype dtype,
                                          gradref_format format, const int64_t *shape) {
    /* memory order, outermost first, as indices of the logical (N,C,[D,]H,W) shape */
    static const int orders[6][5] = {
        {0, 1, 2, 3, -1}, /* NCHW */
        {0, 2, 3, 1, -1}, /* NHWC */
        {0, 1, 2, 3, 4},  /* NCDHW */
        {0, 2, 3, 4, 1},  /* NDHWC */
        {2, 3, 4, 1, 0},  /* DHWCN */
        {2, 3, 1, 0, -1}, /* HWCN */
    };
    /* MegEngine's blocked formats, physical dims outermost first */
    static const gradref__phys nchw4[5] = {{0, GRADREF__WHOLE},
                                           {1, GRADREF__BLOCKS},
                                           {2, GRADREF__WHOLE},
                                           {3, GRADREF__WHOLE},
                                           {1, GRADREF__INSIDE}};
    static const gradref__phys nhwcd4[5] = {{0, GRADREF__WHOLE},
                                            {2, GRADREF__WHOLE},
                                            {1, GRADREF__BLOCKS},
                                            {3, GRADREF__WHOLE},
                                            {1, GRADREF__INSIDE}};
    if (format == GRADREF_FORMAT_NCHW4)
        return gradref__init_blocked("tensor_init_format", t, data, dtype, 4, shape, nchw4, 5, 4);
    if (format == GRADREF_FORMAT_NHWCD4 || format == GRADREF_FORMAT_NHWCD4_DOT)
        return gradref__init_blocked("tensor_init_format", t, data, dtype, 4, shape, nhwcd4, 5, 4);
    if ((int)format < 0 || (int)format > 5)
        return gradref__fail(GRADREF_ERR_PARAM, "tensor_init_format",
                             "format is %d, not a gradref_format", (int)format);
    int32_t ndim = orders[format][4] < 0 ? 4 : 5;
    return init_dense("tensor_init_format", t, data, dtype, ndim, shape, orders[format]);
}

/* ---- blocked descriptors (gradref.h) ---- */

int gradref__blocked_dims(const gradref_tensor *t) {
    if (t == NULL || t->ndim < 0 || t->ndim > GRADREF_MAX_DIMS) return 0;
    int k = 0;
    for (int d = 0; d < t->ndim; d++)
        k += t->strides[d] < 0;
    return k;
}

gradref_status gradref__blocks_of(const char *op, const char *name, const gradref_tensor *t,
                                  int64_t *block) {
    int j = 0;
    for (int d = 0; d < t->ndim; d++) {
        block[d] = 1;
        if (t->strides[d] >= 0) continue;
        const int k = t->ndim + j++;
        if (k >= GRADREF_MAX_DIMS)
            return gradref__fail(GRADREF_ERR_RANK, op,
                                 "%s.ndim is %d with blocked dims whose slots run past %d", name,
                                 (int)t->ndim, GRADREF_MAX_DIMS);
        if (t->strides[d] == INT64_MIN)
            return gradref__fail(GRADREF_ERR_OVERFLOW, op, "%s.strides[%d] is INT64_MIN", name, d);
        if (t->shape[d] < 0)
            return gradref__fail(GRADREF_ERR_SHAPE, op, "%s.shape[%d] is %lld, below 0", name, d,
                                 (long long)t->shape[d]);
        if (t->shape[k] < 1 || t->shape[d] % t->shape[k] != 0)
            return gradref__fail(GRADREF_ERR_SHAPE, op,
                                 "%s: dim %d is blocked by shape[%d] = %lld, which must be >= 1 "
                                 "and divide shape[%d] = %lld",
                                 name, d, k, (long long)t->shape[k], d, (long long)t->shape[d]);
        if (t->strides[k] < 0)
            return gradref__fail(GRADREF_ERR_STRIDE, op,
                                 "%s.strides[%d], the stride inside dim %d's blocks, is %lld, "
                                 "below 0",
                                 name, k, d, (long long)t->strides[k]);
        block[d] = t->shape[k];
    }
    return GRADREF_OK;
}

gradref_status gradref__split_view(const char *op, const char *name, const gradref_tensor *t,
                                   const int64_t *block, gradref_tensor *view) {
    gradref_tensor v;
    memset(&v, 0, sizeof v);
    v.data = t->data;
    v.dtype = t->dtype;
    int n = 0, j = 0;
    for (int d = 0; d < t->ndim; d++) {
        const int split = block[d] > 1;
        if (n + 1 + split > GRADREF_MAX_DIMS)
            return gradref__fail(GRADREF_ERR_RANK, op,
                                 "%s: its %d dims and the blocked ones split exceed %d dims", name,
                                 (int)t->ndim, GRADREF_MAX_DIMS);
        if (!split) {
            v.shape[n] = t->shape[d];
            v.strides[n++] = t->strides[d] >= 0 ? t->strides[d] : -t->strides[d];
            j += t->strides[d] < 0;
            continue;
        }
        int64_t outer, inner;
        /* t's own blocks (gradref__blocks_of): -strides[d] apart, each of t->shape[k] elements
         * strides[k] apart; a plain dim, or one t blocks by 1, has elements `step` apart */
        const int own = t->strides[d] < 0, k = t->ndim + j;
        const int64_t step = own ? -t->strides[d] : t->strides[d];
        j += own;
        if (own && t->shape[k] == block[d]) {
            outer = step;
            inner = t->strides[k];
        } else if (gradref__mul_ovf(step, block[d], &outer)) {
            return gradref__fail(GRADREF_ERR_OVERFLOW, op,
                                 "%s.strides[%d] x %lld (a block) exceeds int64", name, d,
                                 (long long)block[d]);
        } else {
            inner = step;
        }
        v.shape[n] = t->shape[d] / block[d];
        v.strides[n++] = outer;
        v.shape[n] = block[d];
        v.strides[n++] = inner;
    }
    v.ndim = n;
    *view = v;
    return GRADREF_OK;
}

gradref_status gradref__take_blockable(const char *op, const char *name, const gradref_tensor *t,
                                       int output, gradref_tensor *local, gradref__extent *ext,
                                       int *blocked) {
    *blocked = gradref__blocked_dims(t) > 0;
    if (!*blocked)
        return output ? gradref__take_output(op, name, t, local, ext)
                      : gradref__take_input(op, name, t, local, ext);
    int64_t block[GRADREF_MAX_DIMS];
    gradref_tensor view;
    GRADREF__FORWARD_IF_ERROR(gradref__blocks_of(op, name, t, block));
    GRADREF__FORWARD_IF_ERROR(gradref__split_view(op, name, t, block, &view));
    GRADREF__FORWARD_IF_ERROR(output ? gradref__check_output(op, name, &view, ext)
                                     : gradref__check_tensor(op, name, &view, ext));
    gradref_tensor dense; /* fits: the view's element count was checked */
    GRADREF__FORWARD_IF_ERROR(
        init_dense(op, &dense, t->data, (gradref_dtype)t->dtype, t->ndim, t->shape, IDENTITY));
    gradref__tensor_normalize(&dense, local);
    return GRADREF_OK;
}

gradref_status gradref__init_blocked(const char *op, gradref_tensor *t, void *data,
                                     gradref_dtype dtype, int32_t ndim, const int64_t *shape,
                                     const gradref__phys *order, int nphys, int64_t block) {
    if (t == NULL) return gradref__fail(GRADREF_ERR_NULL, op, "t is NULL");
    if (shape == NULL) return gradref__fail(GRADREF_ERR_NULL, op, "shape is NULL");
    if (ndim < 0 || ndim > GRADREF_MAX_DIMS)
        return gradref__fail(GRADREF_ERR_RANK, op, "ndim is %d, outside 0..%d", (int)ndim,
                             GRADREF_MAX_DIMS);
    gradref_tensor r;
    memset(&r, 0, sizeof r);
    r.data = data;
    r.dtype = (int32_t)dtype;
    r.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        r.shape[d] = shape[d];
        if (shape[d] < 0)
            return gradref__fail(GRADREF_ERR_SHAPE, op, "shape[%d] is %lld, below 0", d,
                                 (long long)shape[d]);
    }
    int64_t outer[GRADREF_MAX_DIMS] = {0}, inner[GRADREF_MAX_DIMS] = {0}, running = 1;
    int is_blocked[GRADREF_MAX_DIMS] = {0};
    for (int k = nphys - 1; k >= 0; k--) {
        const int d = order[k].dim;
        int64_t size = shape[d];
        if (order[k].part != GRADREF__WHOLE) {
            if (shape[d] % block != 0)
                return gradref__fail(GRADREF_ERR_SHAPE, op,
                                     "shape[%d] is %lld, not divisible by the format's blocks of "
                                     "%lld",
                                     d, (long long)shape[d], (long long)block);
            is_blocked[d] = 1;
            size = order[k].part == GRADREF__BLOCKS ? shape[d] / block : block;
        }
        if (order[k].part == GRADREF__BLOCKS)
            outer[d] = running;
        else if (order[k].part == GRADREF__INSIDE)
            inner[d] = running;
        else
            r.strides[d] = running;
        if (gradref__mul_ovf(running, size > 1 ? size : 1, &running))
            return gradref__fail(GRADREF_ERR_OVERFLOW, op, "the size of shape exceeds int64");
    }
    int j = 0, nblocked = 0;
    for (int d = 0; d < ndim; d++)
        nblocked += is_blocked[d];
    if (ndim + nblocked > GRADREF_MAX_DIMS)
        return gradref__fail(GRADREF_ERR_RANK, op, "%d dims and %d blocked ones exceed %d dims",
                             (int)ndim, nblocked, GRADREF_MAX_DIMS);
    for (int d = 0; d < ndim; d++) {
        if (!is_blocked[d]) continue;
        r.strides[d] = -outer[d];
        r.shape[ndim + j] = block;
        r.strides[ndim + j++] = inner[d];
    }
    int64_t blocks[GRADREF_MAX_DIMS], numel, bytes;
    gradref_tensor view;
    GRADREF__FORWARD_IF_ERROR(gradref__blocks_of(op, "t", &r, blocks));
    GRADREF__FORWARD_IF_ERROR(gradref__split_view(op, "t", &r, blocks, &view));
    GRADREF__FORWARD_IF_ERROR(check_layout(op, "t", &view, &numel, &bytes));
    *t = r;
    return GRADREF_OK;
}

int gradref__tensor_dense(const gradref_tensor *t) {
    int used[GRADREF_MAX_DIMS] = {0};
    int64_t want = 1; /* the stride the next dim outward must have */
    for (int k = 0; k < t->ndim; k++) {
        int pick = -1;
        for (int i = 0; i < t->ndim; i++)
            if (!used[i] && t->shape[i] > 1 && t->strides[i] == want) pick = i;
        if (pick < 0) break;
        used[pick] = 1;
        want *= t->shape[pick];
    }
    for (int i = 0; i < t->ndim; i++)
        if (!used[i] && t->shape[i] > 1) return 0;
    return 1;
}
