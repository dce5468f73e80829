/* SPDX-License-Identifier: Apache-2.0 */
/* gradref_copy: element-wise copy between any two layouts, with dtype conversion. */
#include <string.h>

#include "convert.h"
#include "copy.h"
#include "convert_array.h"
#include "isa.h"
#include "exec.h"
#include "stream.h"
#include "tensor.h"

static const char OP[] = "copy";

static int integer_rank(int32_t dtype) {
    return dtype == GRADREF_I8 ? 1 : dtype == GRADREF_I32 ? 2 : dtype == GRADREF_I64 ? 3 : 0;
}

static int conversion_allowed(int32_t from, int32_t to) {
    if (from == to) return 1;
    if (gradref__dtype_is_float(to)) return 1; /* float->float, int->float */
    return integer_rank(from) && integer_rank(to) > integer_rank(from);
}

static void convert_one(const char *s, int32_t sdt, char *d, int32_t ddt) {
    if (gradref__dtype_is_float(sdt)) {
        double wide = 0;
        float narrow = 0;
        int is_wide = 0;
        switch (sdt) {
        case GRADREF_F32: memcpy(&narrow, s, 4); break;
        case GRADREF_F16: {
            uint16_t h;
            memcpy(&h, s, 2);
            narrow = gradref__f16_to_f32(h);
        } break;
        case GRADREF_BF16: {
            uint16_t h;
            memcpy(&h, s, 2);
            narrow = gradref__bf16_to_f32(h);
        } break;
        default:
            memcpy(&wide, s, 8);
            is_wide = 1;
            break;
        }
        switch (ddt) {
        case GRADREF_F64: {
            double v = is_wide ? wide : gradref__f32_to_f64(narrow);
            memcpy(d, &v, 8);
        } break;
        case GRADREF_F32: {
            float v = is_wide ? gradref__f64_to_f32(wide) : narrow;
            memcpy(d, &v, 4);
        } break;
        case GRADREF_F16: {
            uint16_t h = is_wide ? gradref__f64_to_f16(wide) : gradref__f32_to_f16(narrow);
            memcpy(d, &h, 2);
        } break;
        default: {
            uint16_t h = is_wide ? gradref__f64_to_bf16(wide) : gradref__f32_to_bf16(narrow);
            memcpy(d, &h, 2);
        } break;
        }
        return;
    }
    int64_t v;
    switch (sdt) {
    case GRADREF_I8: {
        int8_t x;
        memcpy(&x, s, 1);
        v = x;
    } break;
    case GRADREF_I32: {
        int32_t x;
        memcpy(&x, s, 4);
        v = x;
    } break;
    default: memcpy(&v, s, 8); break;
    }
    switch (ddt) {
    case GRADREF_F64: {
        double x = (double)v;
        memcpy(d, &x, 8);
    } break;
    case GRADREF_F32: {
        float x = (float)v;
        memcpy(d, &x, 4);
    } break;
    case GRADREF_F16: {
        uint16_t h = gradref__i64_to_f16(v);
        memcpy(d, &h, 2);
    } break;
    case GRADREF_BF16: {
        uint16_t h = gradref__i64_to_bf16(v);
        memcpy(d, &h, 2);
    } break;
    case GRADREF_I32: {
        int32_t x = (int32_t)v;
        memcpy(d, &x, 4);
    } break; /* widening only */
    default: memcpy(d, &v, 8); break;
    }
}

/* Contiguous runs between f32 and f16/bf16 with the array kernels, and i8 to f32; 0 for other
 * pairs. */
static int convert_run(const gradref__array_kernels *k, const char *s, int32_t sdt, char *d,
                       int32_t ddt, int64_t n) {
    const size_t len = (size_t)n;
    const int half_s = sdt == GRADREF_F16 || sdt == GRADREF_BF16;
    const int half_d = ddt == GRADREF_F16 || ddt == GRADREF_BF16;
    if (ddt == GRADREF_F32 && half_s)
        gradref__half_to_f32_array(k, sdt, (const uint16_t *)(const void *)s, (float *)(void *)d,
                                   len);
    else if (sdt == GRADREF_F32 && half_d)
        gradref__f32_to_half_array(k, ddt, (const float *)(const void *)s, (uint16_t *)(void *)d,
                                   len);
    else if (sdt == GRADREF_I8 && ddt == GRADREF_F32) /* exact; the compiler vectorises it */
        for (size_t i = 0; i < len; i++)
            ((float *)(void *)d)[i] = (float)((const int8_t *)(const void *)s)[i];
    else
        return 0;
    return 1;
}

static void copy_row(const gradref__array_kernels *k, const char *s, int64_t ss, int32_t sdt,
                     char *d, int64_t ds, int32_t ddt, int64_t n) {
    size_t sz = gradref__dtype_size(sdt), dz = gradref__dtype_size(ddt);
    if (sdt == ddt) {
        if (ss == 1 && ds == 1) {
            memcpy(d, s, (size_t)n * sz);
            return;
        }
        if (ss == 0 && ds == 1 && sz == 4) { /* a broadcast fill (zero-filled outputs) */
            const uint32_t v = *(const uint32_t *)s;
            for (int64_t i = 0; i < n; i++)
                ((uint32_t *)d)[i] = v;
            return;
        }
        /* typed moves keep the bits (no float register involved) */
        switch (sz) {
        case 8:
            for (int64_t i = 0; i < n; i++)
                ((uint64_t *)d)[i * ds] = ((const uint64_t *)s)[i * ss];
            return;
        case 4:
            for (int64_t i = 0; i < n; i++)
                ((uint32_t *)d)[i * ds] = ((const uint32_t *)s)[i * ss];
            return;
        case 2:
            for (int64_t i = 0; i < n; i++)
                ((uint16_t *)d)[i * ds] = ((const uint16_t *)s)[i * ss];
            return;
        default:
            for (int64_t i = 0; i < n; i++)
                d[i * ds] = s[i * ss];
            return;
        }
    }
    if (ss == 1 && ds == 1 && convert_run(k, s, sdt, d, ddt, n)) return;
    for (int64_t i = 0; i < n; i++)
        convert_one(s + (size_t)(i * ss) * sz, sdt, d + (size_t)(i * ds) * dz, ddt);
}

/* Blocked src or dst: both split alike into plain views of the same shape (*sv, *dv). */
static gradref_status split_both(const gradref_tensor *src, const gradref_tensor *dst,
                                 gradref_tensor *sv, gradref_tensor *dv) {
    if (src == NULL || dst == NULL)
        return gradref__fail(GRADREF_ERR_NULL, OP, "%s is NULL", src == NULL ? "src" : "dst");
    const gradref_tensor *t[2] = {src, dst};
    static const char *const names[2] = {"src", "dst"};
    for (int i = 0; i < 2; i++)
        if (t[i]->ndim < 0 || t[i]->ndim > GRADREF_MAX_DIMS)
            return gradref__fail(GRADREF_ERR_RANK, OP, "%s.ndim is %d, outside 0..%d", names[i],
                                 (int)t[i]->ndim, GRADREF_MAX_DIMS);
    if (src->ndim != dst->ndim)
        return gradref__fail(GRADREF_ERR_RANK, OP, "src.ndim is %d but dst.ndim is %d",
                             (int)src->ndim, (int)dst->ndim);
    int64_t sb[GRADREF_MAX_DIMS], db[GRADREF_MAX_DIMS], block[GRADREF_MAX_DIMS];
    GRADREF__FORWARD_IF_ERROR(gradref__blocks_of(OP, "src", src, sb));
    GRADREF__FORWARD_IF_ERROR(gradref__blocks_of(OP, "dst", dst, db));
    for (int d = 0; d < src->ndim; d++) {
        if (src->shape[d] != dst->shape[d])
            return gradref__fail(GRADREF_ERR_SHAPE, OP,
                                 "src.shape[%d] is %lld but dst.shape[%d] is %lld", d,
                                 (long long)src->shape[d], d, (long long)dst->shape[d]);
        if (sb[d] > 1 && db[d] > 1 && sb[d] != db[d])
            return gradref__fail(GRADREF_ERR_PARAM, OP,
                                 "src and dst block dim %d by %lld and %lld; copy through a plain "
                                 "tensor",
                                 d, (long long)sb[d], (long long)db[d]);
        block[d] = sb[d] > db[d] ? sb[d] : db[d];
    }
    GRADREF__FORWARD_IF_ERROR(gradref__split_view(OP, "src", src, block, sv));
    return gradref__split_view(OP, "dst", dst, block, dv);
}

gradref_status gradref_copy(const gradref_tensor *src, const gradref_tensor *dst,
                            const gradref_exec *exec) {
    gradref__ctx ctx;
    gradref__extent se, de;
    gradref_tensor sl, dl, sv, dv;
    GRADREF__FORWARD_IF_ERROR(gradref__exec_resolve(OP, exec, &ctx));
    GRADREF__FORWARD_IF_ERROR(gradref__check_precision(OP, &ctx, GRADREF__ANY_PRECISION));
    if (gradref__blocked_dims(src) > 0 || gradref__blocked_dims(dst) > 0) {
        GRADREF__FORWARD_IF_ERROR(split_both(src, dst, &sv, &dv));
        src = &sv;
        dst = &dv;
    }
    GRADREF__FORWARD_IF_ERROR(gradref__take_input(OP, "src", src, &sl, &se));
    GRADREF__FORWARD_IF_ERROR(gradref__take_output(OP, "dst", dst, &dl, &de));
    if (!conversion_allowed(sl.dtype, dl.dtype))
        return gradref__fail(GRADREF_ERR_DTYPE, OP,
                             "cannot convert src.dtype %s to dst.dtype %s (float to integer and "
                             "integer narrowing are not supported)",
                             gradref__dtype_name(sl.dtype), gradref__dtype_name(dl.dtype));
    if (sl.ndim != dl.ndim)
        return gradref__fail(GRADREF_ERR_RANK, OP, "src.ndim is %d but dst.ndim is %d",
                             (int)sl.ndim, (int)dl.ndim);
    for (int i = 0; i < sl.ndim; i++)
        if (sl.shape[i] != dl.shape[i])
            return gradref__fail(GRADREF_ERR_SHAPE, OP,
                                 "src.shape[%d] is %lld but dst.shape[%d] is %lld", i,
                                 (long long)sl.shape[i], i, (long long)dl.shape[i]);
    GRADREF__FORWARD_IF_ERROR(gradref__check_disjoint(OP, "dst", &de, "src", &se));
    gradref__copy_run(&sl, &dl, ctx.num_threads, GRADREF__ISA_MAX); /* no plan caps it */
    return GRADREF_OK;
}

void gradref__channels_last_strides(const int64_t *shape, int64_t *st) {
    st[1] = 1;
    st[4] = shape[1];
    st[3] = shape[4] * st[4];
    st[2] = shape[3] * st[3];
    st[0] = shape[2] * st[2];
}

static void copy_run(const gradref_tensor *src, const gradref_tensor *dst, size_t whole_bytes,
                     int threads, int max_isa);

void gradref__copy5(const int64_t *shape, const void *src, int32_t sdt, const int64_t *ss,
                    void *dst, int32_t ddt, const int64_t *ds, int threads, int max_isa) {
    gradref__copy5_part(shape, src, sdt, ss, dst, ddt, ds, 0, threads, max_isa);
}

void gradref__copy5_part(const int64_t *shape, const void *src, int32_t sdt, const int64_t *ss,
                         void *dst, int32_t ddt, const int64_t *ds, size_t whole_bytes, int threads,
                         int max_isa) {
    gradref_tensor s, d;
    memset(&s, 0, sizeof s);
    memset(&d, 0, sizeof d);
    s.data = (void *)src, s.dtype = sdt, s.ndim = 5;
    d.data = dst, d.dtype = ddt, d.ndim = 5;
    for (int i = 0; i < 5; i++) {
        s.shape[i] = d.shape[i] = shape[i];
        s.strides[i] = ss[i];
        d.strides[i] = ds[i];
    }
    copy_run(&s, &d, whole_bytes, threads, max_isa);
}

void gradref__fill_zero(const gradref_tensor *t, int threads) {
    static const uint64_t zero = 0; /* +0 in every dtype */
    gradref_tensor z = *t;
    z.data = (void *)&zero;
    for (int i = 0; i < z.ndim; i++)
        z.strides[i] = 0;
    gradref__copy_run(&z, t, threads, GRADREF__ISA_PORTABLE); /* a fill converts nothing */
}

/* The copy's iteration space: dims in dst memory order (outermost = largest dst stride), size-1
 * dims dropped, neighbours merged where both tensors are dense across them, so the inner loop
 * is as long and as linear as it can be. */
typedef struct copy_dims {
    int m; /* dims; the last is the inner loop */
    int64_t shape[GRADREF_MAX_DIMS], ss[GRADREF_MAX_DIMS], ds[GRADREF_MAX_DIMS];
    const char *src;
    char *dst;
    int32_t sdt, ddt;
    size_t sz, dz;
    const gradref__array_kernels *k; /* at the caller's max_isa */
} copy_dims;

static void merge_dims(const gradref_tensor *src, const gradref_tensor *dst, copy_dims *c) {
    int64_t *shape = c->shape, *ss = c->ss, *ds = c->ds;
    int n = 0;
    for (int i = 0; i < dst->ndim; i++) {
        if (dst->shape[i] == 1) continue;
        int j = n++;
        while (j > 0 && ds[j - 1] < dst->strides[i]) {
            shape[j] = shape[j - 1];
            ss[j] = ss[j - 1];
            ds[j] = ds[j - 1];
            j--;
        }
        shape[j] = dst->shape[i];
        ss[j] = src->strides[i];
        ds[j] = dst->strides[i];
    }
    int m = 0;
    for (int k = 0; k < n; k++) {
        int64_t douter, souter; /* checked: a broadcast src can reach past its own span here */
        if (m > 0 && !gradref__mul_ovf(ds[k], shape[k], &douter) && ds[m - 1] == douter &&
            !gradref__mul_ovf(ss[k], shape[k], &souter) && ss[m - 1] == souter) {
            shape[m - 1] *= shape[k];
            ss[m - 1] = ss[k];
            ds[m - 1] = ds[k];
        } else {
            shape[m] = shape[k];
            ss[m] = ss[k];
            ds[m] = ds[k];
            m++;
        }
    }
    if (m == 0) { /* a single element */
        shape[0] = 1;
        ss[0] = ds[0] = 1;
        m = 1;
    }
    c->m = m;
    c->src = (const char *)src->data;
    c->dst = (char *)dst->data;
    c->sdt = src->dtype;
    c->ddt = dst->dtype;
    c->sz = gradref__dtype_size(src->dtype);
    c->dz = gradref__dtype_size(dst->dtype);
}

/* Element offsets of outer position `rest` over dims [0, m - 1) other than `skip`. */
static void outer_offsets(const copy_dims *c, int64_t rest, int skip, int64_t *so, int64_t *dof) {
    *so = 0, *dof = 0;
    for (int k = c->m - 2; k >= 0; k--) {
        if (k == skip) continue;
        const int64_t idx = rest % c->shape[k];
        rest /= c->shape[k];
        *so += idx * c->ss[k];
        *dof += idx * c->ds[k];
    }
}

enum { TILE = 32 };

typedef struct tiles_call {
    const copy_dims *c;
    int t, blocks, streamed, convert;
    int64_t ti, tj; /* tiles along dim t and the inner dim */
} tiles_call;

/* A tile with a change of dtype (rows [i0, i1) along dim t, src's unit-stride one, and len
 * elements of the inner dim from j0, at src + so and dst + dof): src's runs along dim t
 * converted by the array kernels into a buffer, then moved into dst's rows as bits of its
 * dtype. Returns 0, having written nothing, for a pair convert_run does not take. */
static int convert_tile(const copy_dims *c, int t, int64_t so, int64_t dof, int64_t i0, int64_t i1,
                        int64_t j0, int64_t len) {
    const int m = c->m;
    const int64_t s_in = c->ss[m - 1], d_in = c->ds[m - 1], dt = c->ds[t], ni = i1 - i0;
    uint32_t buf[TILE * TILE]; /* dst elements of at most 4 bytes, TILE a run */
    for (int64_t j = 0; j < len; j++)
        if (!convert_run(c->k, c->src + (size_t)(so + (j0 + j) * s_in + i0) * c->sz, c->sdt,
                         (char *)buf + (size_t)(j * TILE) * c->dz, c->ddt, ni))
            return 0; /* the first run, or none: it depends on the dtypes alone */
    char *d = c->dst + (size_t)(dof + i0 * dt + j0 * d_in) * c->dz;
    if (c->dz == 4) {
        for (int64_t i = 0; i < ni; i++)
            for (int64_t j = 0; j < len; j++)
                ((uint32_t *)(void *)d)[i * dt + j * d_in] = buf[j * TILE + i];
    } else {
        const uint16_t *b16 = (const uint16_t *)buf;
        for (int64_t i = 0; i < ni; i++)
            for (int64_t j = 0; j < len; j++)
                ((uint16_t *)(void *)d)[i * dt + j * d_in] = b16[j * TILE + i];
    }
    return 1;
}

/* Tiles [b, e) of copy_tiles, in order (dim t's tiles inside the outer dims', the inner dim's
 * inside those). */
static void copy_tile_range(const void *arg, int64_t b, int64_t e) {
    const tiles_call *T = arg;
    const copy_dims *c = T->c;
    const int t = T->t, m = c->m;
    const int64_t inner = c->shape[m - 1], s_in = c->ss[m - 1], d_in = c->ds[m - 1];
    const gradref__array_kernels *k = c->k;
    for (int64_t it = b; it < e; it++) {
        int64_t so, dof;
        outer_offsets(c, it / (T->ti * T->tj), t, &so, &dof);
        const int64_t i0 = it / T->tj % T->ti * TILE, j0 = it % T->tj * TILE;
        const int64_t i1 = i0 + TILE < c->shape[t] ? i0 + TILE : c->shape[t];
        const int64_t len = j0 + TILE < inner ? TILE : inner - j0;
        if (T->blocks && i1 - i0 == TILE && len == TILE) { /* bits moved, in registers */
            const uint32_t *sp = (const uint32_t *)c->src + so + j0 * s_in + i0;
            uint32_t *dp = (uint32_t *)c->dst + dof + j0 + i0 * c->ds[t];
            if (T->streamed && (uintptr_t)dp % 32 == 0)
                k->transpose32x32_32_stream(sp, s_in, dp, c->ds[t]);
            else
                k->transpose32x32_32(sp, s_in, dp, c->ds[t]);
            continue;
        }
        if (T->convert && convert_tile(c, t, so, dof, i0, i1, j0, len)) continue;
        for (int64_t i = i0; i < i1; i++)
            copy_row(c->k, c->src + (size_t)(so + i * c->ss[t] + j0 * s_in) * c->sz, s_in, c->sdt,
                     c->dst + (size_t)(dof + i * c->ds[t] + j0 * d_in) * c->dz, d_in, c->ddt, len);
    }
    if (T->streamed) gradref__stream_fence();
}

/* A layout change (src's unit-stride dim t is not dst's innermost): tiles of TILE x TILE over
 * dims t and the inner one, so that both sides stay within a few cache lines. With `stream`
 * (dst too large for the cache), tiles whose dst rows lie farther apart than src's are written
 * with streaming stores where the rows are 32-byte aligned. */
static void copy_tiles(const copy_dims *c, int t, int64_t numel, int stream, int threads) {
    const int m = c->m;
    const int64_t inner = c->shape[m - 1], s_in = c->ss[m - 1], d_in = c->ds[m - 1];
    tiles_call T = {c, t, 0, 0, 0, (c->shape[t] + TILE - 1) / TILE, (inner + TILE - 1) / TILE};
    const int64_t items = numel / (inner * c->shape[t]) * T.ti * T.tj;
    const gradref__array_kernels *k = c->k;
    T.blocks = k->transpose32x32_32 && c->sdt == c->ddt && c->sz == 4 && d_in == 1;
    T.streamed =
        T.blocks && stream && k->transpose32x32_32_stream && c->ds[t] > s_in && c->ds[t] % 8 == 0;
    /* a change of dtype: by runs along dim t, where rows along the inner dim would convert one
     * strided element at a time */
    T.convert = c->sdt != c->ddt && (c->dz == 2 || c->dz == 4);
    gradref__parallel_ranges(items, threads, copy_tile_range, &T);
}

typedef struct rows_call {
    const copy_dims *c;
    int t; /* copy_rows_across: the rows' dim, src's unit-stride one */
} rows_call;

/* Rows [b, e) along src's unit-stride dim t, every position of dst's short inner dim in turn. */
static void copy_rows_across(const void *arg, int64_t b, int64_t e) {
    const rows_call *R = arg;
    const copy_dims *c = R->c;
    const int m = c->m, t = R->t;
    const int64_t inner = c->shape[m - 1];
    for (int64_t r = b; r < e; r++) {
        int64_t so, dof;
        outer_offsets(c, r / inner, t, &so, &dof);
        so += r % inner * c->ss[m - 1], dof += r % inner * c->ds[m - 1];
        copy_row(c->k, c->src + (size_t)so * c->sz, 1, c->sdt, c->dst + (size_t)dof * c->dz,
                 c->ds[t], c->ddt, c->shape[t]);
    }
}

/* Rows [b, e) along the inner dim. */
static void copy_rows_along(const void *arg, int64_t b, int64_t e) {
    const copy_dims *c = ((const rows_call *)arg)->c;
    const int m = c->m;
    for (int64_t r = b; r < e; r++) {
        int64_t so, dof;
        outer_offsets(c, r, -1, &so, &dof);
        copy_row(c->k, c->src + (size_t)so * c->sz, c->ss[m - 1], c->sdt,
                 c->dst + (size_t)dof * c->dz, c->ds[m - 1], c->ddt, c->shape[m - 1]);
    }
}

void gradref__copy_run(const gradref_tensor *src, const gradref_tensor *dst, int threads,
                       int max_isa) {
    copy_run(src, dst, 0, threads, max_isa);
}

/* whole_bytes: the output dst is part of (0: dst alone). */
static void copy_run(const gradref_tensor *src, const gradref_tensor *dst, size_t whole_bytes,
                     int threads, int max_isa) {
    for (int i = 0; i < dst->ndim; i++)
        if (dst->shape[i] == 0) return; /* the other sizes of an empty tensor may be anything */
    int64_t numel = 1;
    for (int i = 0; i < dst->ndim; i++)
        numel *= dst->shape[i]; /* within int64: validated */
    const size_t whole =
        whole_bytes > 0 ? whole_bytes : (size_t)numel * gradref__dtype_size(dst->dtype);
    copy_dims c;
    merge_dims(src, dst, &c);
    c.k = gradref__array_kernels_for(max_isa);
    const int m = c.m, team = numel >= (INT64_C(1) << 16) ? threads : 1;
    const int64_t inner = c.shape[m - 1];
    int t = -1;
    for (int k = 0; k < m - 1 && c.ss[m - 1] != 1; k++)
        if (c.ss[k] == 1 && c.shape[k] >= 8 && inner >= 8) t = k;
    if (t >= 0) {
        copy_tiles(&c, t, numel, whole >= GRADREF__STREAM_MIN_BYTES, team);
        return;
    }
    /* dst's innermost dim too short for a row of its own (a channels-last copy of few channels):
     * rows along src's unit-stride dim instead, every position of that short dim in turn, so
     * consecutive rows fill the same dst lines */
    for (int k = 0; k < m - 1 && inner < 8 && c.ss[m - 1] != 1; k++)
        if (c.ss[k] == 1 && c.shape[k] >= 8) t = k;
    if (t >= 0) {
        const rows_call R = {&c, t};
        gradref__parallel_ranges(numel / c.shape[t], team, copy_rows_across, &R);
        return;
    }
    const rows_call R = {&c, -1};
    gradref__parallel_ranges(numel / inner, team, copy_rows_along, &R);
}
