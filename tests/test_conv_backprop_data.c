/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data: a worked 1-D example, the adjoint identity against a forward
 * convolution written here (f64 and exact small integers), the MegEngine fallback test list,
 * PyTorch fixtures, fast path vs reference on random geometries (every dtype, layout, kernel
 * family and thread count), empty sizes, workspaces and every error path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/convert.h"
#include "common/nan.h"
#include "conv_backprop_data/cbd_int8.h"
#include "conv_backprop_data/cbd_run.h"
#include "conv_backprop_data/cbd_internal.h"
#include "conv_backprop_data/cbd_kernels.h"
#include "golden.h"
#include "test_util.h"

/* filter layouts: OIk (dense, channels second), grouped (G, OCpg, ICpg, k), and MegEngine's
 * NHWC filter (OC, k..., IC/G) */
enum { F_DENSE = 0, F_GROUPED = 1, F_CHANNELS_LAST = 2 };
/* data layouts */
enum { D_NCHW = 0, D_NHWC = 1, D_STRIDED = 2 };

typedef struct geometry {
    int rank;
    int64_t N, G, ICpg, OCpg;
    int64_t K[3], O[3], stride[3], dil[3], pb[3], pe[3], extra[3]; /* extra: i - i_min */
    int32_t mode;
} geometry;

typedef struct cbd_case {
    geometry geo;
    gradref_conv_params params;
    int32_t in_dtype, out_dtype;
    gradref_tensor filter, diff, grad;
    void *buf[3];
    size_t bytes[3];
} cbd_case;

static int64_t grad_size(const geometry *g, int j) {
    /* the smallest i whose forward size is O, plus extra (< stride) */
    int64_t ext = g->dil[j] * (g->K[j] - 1) + 1;
    int64_t i = (g->O[j] - 1) * g->stride[j] + ext - g->pb[j] - g->pe[j];
    return i + g->extra[j];
}

/* make_case's values: uniform in [-1, 1], small integers, or mostly tiny (+-1e-30, +-0, now and
 * then +-1) so that products underflow and sums end at zeros of either sign */
enum { VALUES_UNIFORM = 0, VALUES_SMALL_INTS = 1, VALUES_TINY = 2 };

static double tiny_value(tu_rng *r) {
    const int64_t u = tu_range(r, 0, 19);
    const double sign = tu_range(r, 0, 1) ? -1.0 : 1.0;
    return sign * (u < 14 ? 1e-30 : u < 18 ? 0.0 : 1.0);
}

static void fill(const gradref_tensor *t, int values, tu_rng *r) {
    int64_t idx[GRADREF_MAX_DIMS] = {0}, total = 1;
    for (int d = 0; d < t->ndim; d++)
        total *= t->shape[d];
    for (int64_t e = 0; e < total; e++) {
        int64_t rest = e;
        for (int d = t->ndim - 1; d >= 0; d--) {
            idx[d] = rest % t->shape[d];
            rest /= t->shape[d];
        }
        double v = values == VALUES_TINY         ? tiny_value(r)
                   : values == VALUES_SMALL_INTS ? (double)tu_range(r, -4, 4)
                                                 : tu_uniform(r) * 2 - 1;
        char *at = (char *)t->data + tu_offset(t, idx);
        if (t->dtype == GRADREF_I8)
            *(int8_t *)at = (int8_t)tu_range(r, -128, 127);
        else
            tu_set_value(t->dtype, at, v);
    }
}

static void make_case(cbd_case *c, const geometry *g, int32_t in_dtype, int32_t out_dtype,
                      int flayout, int dlayout, int values, tu_rng *r) {
    memset(c, 0, sizeof *c);
    c->geo = *g;
    c->in_dtype = in_dtype;
    c->out_dtype = out_dtype;
    const int R = g->rank, nd = R + 2;
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    p.mode = g->mode;
    p.groups = (int32_t)g->G;
    for (int j = 0; j < R; j++) {
        p.stride[j] = g->stride[j];
        p.dilation[j] = g->dil[j];
        p.pad[2 * j] = g->pb[j];
        p.pad[2 * j + 1] = g->pe[j];
    }
    c->params = p;
    int64_t dshape[5], gshape[5], fshape[6];
    dshape[0] = gshape[0] = g->N;
    dshape[1] = g->G * g->OCpg;
    gshape[1] = g->G * g->ICpg;
    for (int j = 0; j < R; j++) {
        dshape[2 + j] = g->O[j];
        gshape[2 + j] = grad_size(g, j);
    }
    int perm[6] = {0, 1, 2, 3, 4, 5}, *pp = NULL;
    int64_t pad[6] = {1, 2, 1, 2, 3, 1};
    if (dlayout == D_NHWC) { /* channels last: (0, 2, ..., 1) */
        perm[0] = 0;
        for (int j = 0; j < R; j++)
            perm[1 + j] = 2 + j;
        perm[nd - 1] = 1;
        pp = perm;
    }
    c->buf[1] = tu_make_tensor(&c->diff, in_dtype, nd, dshape, pp,
                               dlayout == D_STRIDED ? pad : NULL, &c->bytes[1], r);
    c->buf[2] = tu_make_tensor(&c->grad, out_dtype, nd, gshape, pp,
                               dlayout == D_STRIDED ? pad : NULL, &c->bytes[2], r);
    int fnd;
    int fperm[6] = {0, 1, 2, 3, 4, 5}, *fp = NULL;
    if (flayout == F_GROUPED) {
        fnd = R + 3;
        fshape[0] = g->G;
        fshape[1] = g->OCpg;
        fshape[2] = g->ICpg;
        for (int j = 0; j < R; j++)
            fshape[3 + j] = g->K[j];
    } else {
        fnd = R + 2;
        fshape[0] = g->G * g->OCpg;
        fshape[1] = g->ICpg;
        for (int j = 0; j < R; j++)
            fshape[2 + j] = g->K[j];
        if (flayout == F_CHANNELS_LAST) { /* memory (OC, k..., IC) */
            for (int j = 0; j < R; j++)
                fperm[1 + j] = 2 + j;
            fperm[fnd - 1] = 1;
            fp = fperm;
        }
    }
    c->buf[0] = tu_make_tensor(&c->filter, in_dtype, fnd, fshape, fp, NULL, &c->bytes[0], r);
    fill(&c->filter, values, r);
    fill(&c->diff, values, r);
}

static void free_case(cbd_case *c) {
    for (int i = 0; i < 3; i++)
        free(c->buf[i]);
}

static void run_ok(cbd_case *c, const gradref_exec *e) {
    gradref_status s = gradref_conv_backprop_data(&c->params, &c->filter, &c->diff, &c->grad, e);
    if (s != GRADREF_OK) fail_msg("%s: %s", gradref_status_string(s), gradref_last_error());
}

/* ------------------------------------------------------------ element access, forward */

static double filter_at(const cbd_case *c, int64_t g, int64_t oc, int64_t ic, const int64_t *k) {
    int64_t idx[6];
    int d = 0;
    if (c->filter.ndim == c->geo.rank + 3) {
        idx[d++] = g;
        idx[d++] = oc;
    } else {
        idx[d++] = g * c->geo.OCpg + oc;
    }
    idx[d++] = ic;
    for (int j = 0; j < c->geo.rank; j++)
        idx[d++] = k[j];
    const char *at = (const char *)c->filter.data + tu_offset(&c->filter, idx);
    return c->in_dtype == GRADREF_I8 ? *(const int8_t *)at : tu_value(c->in_dtype, at);
}

static double data_at(const gradref_tensor *t, int rank, int64_t n, int64_t ch, const int64_t *s) {
    int64_t idx[5] = {n, ch, 0, 0, 0};
    for (int j = 0; j < rank; j++)
        idx[2 + j] = s[j];
    const char *at = (const char *)t->data + tu_offset(t, idx);
    if (t->dtype == GRADREF_I8) return *(const int8_t *)at;
    if (t->dtype == GRADREF_I32) return *(const int32_t *)at;
    return tu_value(t->dtype, at);
}

/* Iterates the index vector i over the box `size` (rank dims); returns 0 after the last. The
 * loops using it are do-whiles, so an empty box must be skipped before (box_empty). */
static int box_empty(const int64_t *size, int rank) {
    for (int j = 0; j < rank; j++)
        if (size[j] == 0) return 1;
    return 0;
}

static int next_index(int64_t *i, const int64_t *size, int rank) {
    for (int j = rank - 1; j >= 0; j--) {
        if (++i[j] < size[j]) return 1;
        i[j] = 0;
    }
    return 0;
}

/* <conv(x, w), dy> with the test's own forward: y[o] = sum x[o*s - pb + kp*d] * w[k], kp the
 * position of stored tap k (flipped in CONVOLUTION mode). x is read from `x` (grad-shaped). */
static double forward_dot(const cbd_case *c, const gradref_tensor *x) {
    const geometry *g = &c->geo;
    const int R = g->rank;
    int64_t isz[3];
    for (int j = 0; j < R; j++)
        isz[j] = grad_size(g, j);
    double total = 0;
    if (box_empty(g->O, R)) return 0;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t gg = 0; gg < g->G; gg++)
            for (int64_t oc = 0; oc < g->OCpg; oc++) {
                int64_t o[3] = {0, 0, 0};
                do {
                    double y = 0;
                    for (int64_t ic = 0; ic < g->ICpg; ic++) {
                        int64_t k[3] = {0, 0, 0};
                        do {
                            int64_t i[3], ok = 1;
                            for (int j = 0; j < R; j++) {
                                int64_t kp =
                                    g->mode == GRADREF_CONV_CONVOLUTION ? g->K[j] - 1 - k[j] : k[j];
                                i[j] = o[j] * g->stride[j] - g->pb[j] + kp * g->dil[j];
                                ok &= i[j] >= 0 && i[j] < isz[j];
                            }
                            if (ok)
                                y += data_at(x, R, n, gg * g->ICpg + ic, i) *
                                     filter_at(c, gg, oc, ic, k);
                        } while (next_index(k, g->K, R));
                    }
                    total += y * data_at(&c->diff, R, n, gg * g->OCpg + oc, o);
                } while (next_index(o, g->O, R));
            }
    return total;
}

static double dot_grad(const cbd_case *c, const gradref_tensor *x) {
    const geometry *g = &c->geo;
    int64_t isz[3];
    for (int j = 0; j < g->rank; j++)
        isz[j] = grad_size(g, j);
    double s = 0;
    if (box_empty(isz, g->rank)) return 0;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t ch = 0; ch < g->G * g->ICpg; ch++) {
            int64_t i[3] = {0, 0, 0};
            do
                s += data_at(x, g->rank, n, ch, i) * data_at(&c->grad, g->rank, n, ch, i);
            while (next_index(i, isz, g->rank));
        }
    return s;
}

/* ------------------------------------------------------------ geometries */

static geometry geo2(int64_t N, int64_t ICpg, int64_t OH, int64_t OW, int64_t OCpg, int64_t FH,
                     int64_t FW, int64_t stride, int64_t pad, int64_t dil, int64_t G,
                     int32_t mode) {
    geometry g;
    memset(&g, 0, sizeof g);
    g.rank = 2;
    g.N = N, g.G = G, g.ICpg = ICpg, g.OCpg = OCpg;
    g.K[0] = FH, g.K[1] = FW, g.O[0] = OH, g.O[1] = OW;
    for (int j = 0; j < 2; j++) {
        g.stride[j] = stride;
        g.dil[j] = dil;
        g.pb[j] = g.pe[j] = pad;
    }
    g.mode = mode;
    return g;
}

static geometry random_geometry(tu_rng *r) {
    geometry g;
    memset(&g, 0, sizeof g);
    g.rank = (int)tu_range(r, 1, 3);
    g.G = tu_range(r, 1, 3);
    g.N = tu_range(r, 1, 2);
    g.ICpg = tu_range(r, 1, 5);
    g.OCpg = tu_range(r, 1, 5);
    if (tu_range(r, 0, 4) == 0) g.ICpg = g.OCpg = 1; /* depthwise */
    g.mode = (int32_t)tu_range(r, 0, 1);
    for (int j = 0; j < g.rank; j++) {
        g.K[j] = tu_range(r, 1, g.rank == 3 ? 3 : 4);
        g.stride[j] = tu_range(r, 1, 3); /* may exceed the kernel */
        g.dil[j] = tu_range(r, 1, 3);
        g.pb[j] = tu_range(r, 0, 4); /* may exceed the kernel */
        g.pe[j] = tu_range(r, 0, 3);
        g.O[j] = tu_range(r, 1, g.rank == 3 ? 4 : 7);
        g.extra[j] = tu_range(r, 0, g.stride[j] - 1);
        /* keep i >= 1: grow O until the padded size covers the dilated kernel */
        while (grad_size(&g, j) < 1 ||
               grad_size(&g, j) + g.pb[j] + g.pe[j] < g.dil[j] * (g.K[j] - 1) + 1)
            g.O[j]++;
    }
    return g;
}

/* ------------------------------------------------------------ known values */

/* 1-D: filter [1, 2, 3], diff [1, 10], stride 2: grad = [1, 2, 13, 20, 30] (i = 5) and one
 * more 0 for i = 6; CONVOLUTION mode flips the filter: [3, 2, 31, 20, 10]. */
static void test_worked_example(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(1);
    for (int mode = 0; mode < 2; mode++)
        for (int extra = 0; extra < 2; extra++) {
            geometry g;
            memset(&g, 0, sizeof g);
            g.rank = 1, g.N = 1, g.G = 1, g.ICpg = 1, g.OCpg = 1, g.K[0] = 3, g.O[0] = 2;
            g.stride[0] = 2, g.dil[0] = 1, g.extra[0] = extra, g.mode = mode;
            cbd_case c;
            make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
            float *w = c.filter.data, *d = c.diff.data, *out = c.grad.data;
            w[0] = 1, w[1] = 2, w[2] = 3, d[0] = 1, d[1] = 10;
            run_ok(&c, NULL);
            static const float want[2][6] = {{1, 2, 13, 20, 30, 0}, {3, 2, 31, 20, 10, 0}};
            for (int i = 0; i < 5 + extra; i++)
                if (out[i] != want[mode][i])
                    fail_msg("mode %d: grad[%d] = %g, want %g", mode, i, out[i], want[mode][i]);
            free_case(&c);
        }
}

static void describe(const cbd_case *c) {
    const geometry *g = &c->geo;
    fprintf(stderr, "rank %d N %lld G %lld ICpg %lld OCpg %lld mode %d in %d out %d fnd %d\n",
            g->rank, (long long)g->N, (long long)g->G, (long long)g->ICpg, (long long)g->OCpg,
            g->mode, c->in_dtype, c->out_dtype, c->filter.ndim);
    for (int j = 0; j < g->rank; j++)
        fprintf(stderr, "  K %lld O %lld s %lld d %lld pb %lld pe %lld extra %lld i %lld\n",
                (long long)g->K[j], (long long)g->O[j], (long long)g->stride[j],
                (long long)g->dil[j], (long long)g->pb[j], (long long)g->pe[j],
                (long long)g->extra[j], (long long)grad_size(g, j));
}

/* ------------------------------------------------------------ adjoint identity */

static void check_adjoint(cbd_case *c, double tol) {
    run_ok(c, NULL);
    gradref_tensor x = c->grad; /* a random x shaped like grad */
    size_t bytes;
    int64_t shape[5];
    for (int d = 0; d < x.ndim; d++)
        shape[d] = x.shape[d];
    tu_rng r = tu_rng_make(77);
    void *xb = tu_make_tensor(&x, GRADREF_F64, x.ndim, shape, NULL, NULL, &bytes, &r);
    fill(&x, tol == 0, &r); /* an exact check needs exact sums on both sides */
    double lhs = forward_dot(c, &x), rhs = dot_grad(c, &x);
    if (fabs(lhs - rhs) > tol * (1 + fabs(lhs))) describe(c);
    if (fabs(lhs - rhs) > tol * (1 + fabs(lhs)))
        fail_msg("<conv(x), dy> = %.17g but <x, grad> = %.17g", lhs, rhs);
    free(xb);
}

static void test_adjoint_identity(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(2);
    for (int iter = 0; iter < 60; iter++) {
        geometry g = random_geometry(&r);
        cbd_case c;
        make_case(&c, &g, GRADREF_F64, GRADREF_F64, iter % 3, iter % 3, 0, &r);
        check_adjoint(&c, 1e-12);
        free_case(&c);
    }
}

/* Small integers make every f32 sum exact (benchdnn's trick), so F32 and I8 -> I32 must equal
 * the forward's adjoint exactly, through every path. */
static void test_small_integers_exact(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(3);
    for (int iter = 0; iter < 40; iter++) {
        geometry g = random_geometry(&r);
        cbd_case c;
        int integer = iter % 2;
        make_case(&c, &g, integer ? GRADREF_I8 : GRADREF_F32, integer ? GRADREF_I32 : GRADREF_F32,
                  iter % 3, (iter / 2) % 3, 1, &r);
        check_adjoint(&c, 0);
        free_case(&c);
    }
}

/* ------------------------------------------------------------ fast path vs reference */

/* The plan of the plain call, or of the QuantizedS8 call when scales are given. */
static void plan_of(const cbd_case *c, const gradref_qs8_scales *qs8, const gradref_tensor *grad,
                    gradref__cbd_plan *plan) {
    assert_int_equal(
        qs8 ? gradref__cbd_validate_qs8(&c->params, qs8, &c->filter, &c->diff, grad, plan)
            : gradref__cbd_validate(&c->params, &c->filter, &c->diff, grad, plan),
        GRADREF_OK);
}

/* Whether level `kernel` has a conv_backprop_data table of its own on this CPU (the tests run
 * each such level once), checked in this run (tu_level_here). */
static int own_level(int kernel) {
    return tu_level_here(kernel) && (kernel == 0 || gradref__cbd_kernels_for(kernel) !=
                                                        gradref__cbd_kernels_for(kernel - 1));
}

static void check_fast_against_reference_qs8(cbd_case *c, int32_t precision,
                                             const gradref_qs8_scales *qs8) {
    gradref_tensor want = c->grad;
    void *wb = malloc(c->bytes[2] ? c->bytes[2] : 1);
    want.data = wb;
    gradref__cbd_plan plan;
    plan_of(c, qs8, &want, &plan);
    plan.precision = precision;
    gradref__cbd_ref(&plan);
    tu_expect_canonical_nans(&want, "grad");
    static const int threads[] = TU_THREAD_COUNTS;
    for (int kernel = 0; kernel <= GRADREF__ISA_TOP; kernel++)
        for (int t = 0; t < 3 && own_level(kernel); t++) {
            plan_of(c, qs8, &c->grad, &plan);
            plan.precision = precision;
            plan.max_isa = kernel;
            size_t need = gradref__cbd_fast_workspace(&plan, precision, threads[t]);
            char *block = malloc(need + 64);
            assert_non_null(block);
            /* an element the run leaves unwritten keeps this (NaN), not the previous run's */
            memset(c->grad.data, 0xff, c->bytes[2]);
            gradref__cbd_fast(&plan, block + (64 - (uintptr_t)block % 64) % 64, threads[t]);
            free(block);
            tu_expect_same_bits(&c->grad, &want, "grad");
            /* the other strategies that apply, by name (the fast path's rows ran above) */
            static const char *const ran[] = {"depthwise", "phases", "reference", NULL};
            if (!plan.zero_only)
                tu_expect_strategies(&gradref__cbd_fast_path, &plan, precision, threads[t], ran,
                                     &c->grad, &want, c->bytes[2], 0xff);
        }
    free(wb);
}

static void check_fast_against_reference(cbd_case *c, int32_t precision) {
    check_fast_against_reference_qs8(c, precision, NULL);
}

static void test_fast_matches_reference(void **state) {
    (void)state;
    static const int32_t in[5] = {GRADREF_F32, GRADREF_F64, GRADREF_F16, GRADREF_BF16, GRADREF_I8};
    static const int32_t out[5] = {GRADREF_F32, GRADREF_F64, GRADREF_F32, GRADREF_BF16,
                                   GRADREF_I32};
    tu_rng r = tu_rng_make(4);
    for (int iter = 0; iter < 120; iter++) {
        geometry g = random_geometry(&r);
        int d = iter % 5;
        int32_t o = out[d];
        if (iter % 10 == 2) o = GRADREF_F16; /* F16 in, F16 out */
        cbd_case c;
        make_case(&c, &g, in[d], o, iter % 3, (iter / 3) % 3, 0, &r);
        check_fast_against_reference(&c, (iter / 5) % 2 ? GRADREF_PRECISION_HIGH
                                                        : GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Problems past the no-workspace path's blocks: more input channels than two GEMM panels,
 * chains longer than one K slice, more sub-grid pixels than a chunk, strided and not; F32, F16
 * and BF16, NCHW, NHWC and padded strides. Fast path and no-workspace path against the
 * reference (check_fast_against_reference). */
static void test_no_workspace_blocks(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(41);
    static const int32_t dts[3] = {GRADREF_F32, GRADREF_F16, GRADREF_BF16};
    for (int iter = 0; iter < 6; iter++) {
        const int64_t S = 1 + iter % 2;
        geometry g = geo2(1, 31 + iter, 13 + S, 12, 23 + 2 * iter, 3, 2, S, 1, 1, 1 + iter / 4,
                          iter % 2 ? GRADREF_CONV_CONVOLUTION : GRADREF_CONV_CROSS_CORRELATION);
        cbd_case c;
        make_case(&c, &g, dts[iter % 3], iter % 3 == 2 ? GRADREF_BF16 : GRADREF_F32, iter % 3,
                  (iter / 2) % 3, 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* The no-workspace path's direct tiles (phases whose sub-grid has diff's last two sizes):
 * items of two panels split evenly (16 channels), a short last item (30), one panel at a time
 * where two panels' filter passes the stack's share (100 output channels x 9 taps), 64 taps
 * (8 x 8, asymmetric pads) and 3-D with another depth, rows wider than a tile, images large
 * enough to prefetch, stride 2 with every phase by tiles and with one phase by GEMMs, 1x1 stride
 * 2, stride 3 with phases no tap reaches; past one panel's room (100 and 200 channels x 9
 * taps) the taps in slices into an F32 grad in place, else the stack's GEMMs; past the tiles'
 * 64 taps (72) the GEMMs; a window past the stack's room beside the panels one diff row of
 * taps at a time (64 channels at 3x3, 20 at 5x5 on wide rows). F32 NCHW reads diff in place; NHWC,
 * padded strides, F16, BF16, I8 -> I32 and QuantizedS8 through a window of diff per tile (F16
 * and BF16 with dense pixels a run across rows, F16 with padded strides a row at a time, BF16
 * NHWC a pixel's channels at a time). Diff with NaNs and Infs now and then. Fast path and
 * no-workspace path against the reference. */
static void test_no_workspace_tiles(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(43);
    static const struct {
        int rank;
        int64_t N, G, ICpg, OCpg, O[3], K[3], pb[3], pe[3], S, extra;
    } runs[14] = {
        {2, 2, 1, 16, 16, {28, 28, 1}, {3, 3, 1}, {1, 1, 0}, {1, 1, 0}, 1, 0},
        {2, 1, 2, 30, 7, {3, 40, 1}, {5, 5, 1}, {2, 2, 0}, {2, 2, 0}, 1, 0},
        {2, 1, 1, 5, 100, {6, 9, 1}, {3, 3, 1}, {1, 1, 0}, {1, 1, 0}, 1, 0},
        {2, 1, 1, 3, 200, {4, 5, 1}, {3, 3, 1}, {1, 1, 0}, {1, 1, 0}, 1, 0},
        {3, 1, 1, 6, 5, {3, 6, 7}, {3, 3, 3}, {0, 1, 1}, {0, 1, 1}, 1, 0},
        {2, 1, 1, 9, 4, {11, 13, 1}, {8, 8, 1}, {3, 3, 0}, {4, 4, 0}, 1, 0},
        {2, 1, 1, 4, 3, {9, 10, 1}, {8, 9, 1}, {3, 4, 0}, {4, 4, 0}, 1, 0},
        {2, 1, 1, 20, 30, {40, 70, 1}, {3, 3, 1}, {1, 1, 0}, {1, 1, 0}, 1, 0},
        /* stride 2 with every phase's sub-grid diff's size, and without (phase 1 by GEMMs) */
        {2, 2, 1, 12, 9, {7, 9, 1}, {3, 3, 1}, {1, 1, 0}, {1, 1, 0}, 2, 1},
        {2, 1, 1, 12, 9, {7, 9, 1}, {3, 3, 1}, {1, 1, 0}, {1, 1, 0}, 2, 0},
        /* 1x1 stride 2: one phase with a tap; stride 3 over 2 taps: phases without */
        {2, 2, 1, 20, 33, {5, 6, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 2, 1},
        {2, 1, 1, 5, 4, {4, 5, 1}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0}, 3, 2},
        /* the whole window past the stack's room beside the panels: a diff row of taps at a
         * time (3 x 3 and 5 x 5 rows; at AVX2, F16, BF16, I8 and NHWC) */
        {2, 1, 1, 12, 64, {28, 28, 1}, {3, 3, 1}, {1, 1, 0}, {1, 1, 0}, 1, 0},
        {2, 1, 1, 10, 20, {12, 60, 1}, {5, 5, 1}, {2, 2, 0}, {2, 2, 0}, 1, 0},
    };
    for (int i = 0; i < 14; i++) {
        geometry g;
        memset(&g, 0, sizeof g);
        g.rank = runs[i].rank;
        g.N = runs[i].N, g.G = runs[i].G, g.ICpg = runs[i].ICpg, g.OCpg = runs[i].OCpg;
        g.mode = i % 2 ? GRADREF_CONV_CONVOLUTION : GRADREF_CONV_CROSS_CORRELATION;
        for (int j = 0; j < g.rank; j++) {
            g.O[j] = runs[i].O[j], g.K[j] = runs[i].K[j];
            g.stride[j] = runs[i].S, g.dil[j] = 1, g.extra[j] = runs[i].extra;
            g.pb[j] = runs[i].pb[j], g.pe[j] = runs[i].pe[j];
        }
        static const struct {
            int32_t in, out;
            int layout, qs8;
        } kinds[9] = {
            {GRADREF_F32, GRADREF_F32, D_NCHW, 0},    {GRADREF_F32, GRADREF_F32, D_NHWC, 0},
            {GRADREF_F32, GRADREF_F32, D_STRIDED, 0}, {GRADREF_F16, GRADREF_F16, D_NCHW, 0},
            {GRADREF_BF16, GRADREF_F32, D_NCHW, 0},   {GRADREF_I8, GRADREF_I32, D_NCHW, 0},
            {GRADREF_I8, GRADREF_I8, D_NHWC, 1},      {GRADREF_F16, GRADREF_F32, D_STRIDED, 0},
            {GRADREF_BF16, GRADREF_BF16, D_NHWC, 0}};
        const gradref_qs8_scales sc = {0.01f, 0.02f, 0.3f};
        for (int kind = 0; kind < 9; kind++) {
            /* the large image: F32 NCHW and NHWC, F16 and I8 only */
            if (i == 7 && kind != 0 && kind != 1 && kind != 3 && kind != 5) continue;
            cbd_case c;
            make_case(&c, &g, kinds[kind].in, kinds[kind].out, i % 3 == 1 ? F_GROUPED : F_DENSE,
                      kinds[kind].layout, 0, &r);
            if (kinds[kind].in != GRADREF_I8 && (i + kind) % 2 == 0)
                tu_sprinkle_specials(&c.diff, &r, 50);
            check_fast_against_reference_qs8(&c, GRADREF_PRECISION_DEFAULT,
                                             kinds[kind].qs8 ? &sc : NULL);
            free_case(&c);
        }
    }
}

/* The NaN rule: diff (and now and then the filter) holding signalling and quiet NaNs of
 * either sign with payloads and Infs (whose sums make NaNs of their own): the reference gives
 * the canonical NaN, and every kernel level and thread count its bits. */
static void test_nan_bits(void **state) {
    (void)state;
    static const int32_t in[4] = {GRADREF_F32, GRADREF_F64, GRADREF_F16, GRADREF_BF16};
    static const int32_t out[4] = {GRADREF_F32, GRADREF_F64, GRADREF_F32, GRADREF_BF16};
    tu_rng r = tu_rng_make(40);
    for (int iter = 0; iter < 48; iter++) {
        geometry g = random_geometry(&r);
        const int d = iter % 4;
        cbd_case c;
        make_case(&c, &g, in[d], iter % 8 == 6 ? in[d] : out[d], iter % 3, (iter / 3) % 3, 0, &r);
        tu_sprinkle_specials(&c.diff, &r, 6);
        if (iter % 5 == 4) tu_sprinkle_specials(&c.filter, &r, 6);
        check_fast_against_reference(&c, iter % 7 == 3 ? GRADREF_PRECISION_HIGH
                                                       : GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Signs of zero: taps outside diff add nothing, not even the +0 of w * 0 that turns a -0 sum
 * (an underflowed product) into +0. The 1-D case: filter {1, 1e-30}, diff {-1e-30}, pad 1:
 * grad[0] = fma(1e-30, -1e-30, +0) = -0, through the public call with and without a
 * workspace. Then random geometries (depthwise, strided and GEMM problems among them) of tiny
 * values, F32, BF16 and F16, against the reference on every path, level and thread count. */
static void test_signed_zeros(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(44);
    geometry g;
    memset(&g, 0, sizeof g);
    g.rank = 1, g.N = g.G = g.ICpg = g.OCpg = 1;
    g.K[0] = 2, g.O[0] = 1, g.stride[0] = g.dil[0] = 1, g.pb[0] = 1;
    cbd_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, VALUES_UNIFORM, &r);
    const float filter[2] = {1.0f, 1e-30f}, diff = -1e-30f;
    memcpy(c.filter.data, filter, sizeof filter);
    memcpy(c.diff.data, &diff, sizeof diff);
    for (int t = 1; t <= 2; t++)
        for (int tiny = 0; tiny < 2; tiny++) { /* NULL (the fast path), then one byte */
            char byte;
            const gradref_exec e = {tiny ? &byte : NULL, (size_t)tiny, t,
                                    GRADREF_PRECISION_DEFAULT};
            memset(c.grad.data, 0x55, c.bytes[2]);
            run_ok(&c, &e);
            const float grad0 = *(const float *)c.grad.data;
            assert_true(grad0 == 0 && signbit(grad0));
        }
    free_case(&c);
    static const int32_t in[3] = {GRADREF_F32, GRADREF_BF16, GRADREF_F16};
    for (int iter = 0; iter < 36; iter++) {
        g = random_geometry(&r);
        cbd_case t;
        make_case(&t, &g, in[iter % 3], iter % 6 == 1 ? GRADREF_BF16 : GRADREF_F32, iter % 3,
                  (iter / 3) % 3, VALUES_TINY, &r);
        check_fast_against_reference(&t, GRADREF_PRECISION_DEFAULT);
        free_case(&t);
    }
}

/* MegEngine's dnn/test/fallback/convolution.cpp CONVOLUTION_BACKWARD_DATA list (reference
 * §3.1), both modes, batch cut to 1: the adjoint identity and the fast path. */
static void test_megengine_list(void **state) {
    (void)state;
    static const int64_t runs[8][11] = {
        {4, 3, 10, 13, 5, 1, 1, 1, 0, 1, 1},  {5, 5, 24, 43, 11, 9, 3, 3, 12, 1, 2},
        {4, 3, 10, 45, 2, 1, 1, 1, 0, 4, 3},  {2, 3, 9, 12, 2, 4, 6, 1, 0, 1, 2},
        {3, 4, 17, 32, 2, 3, 2, 5, 4, 4, 3},  {5, 5, 24, 43, 11, 9, 3, 3, 12, 2, 2},
        {2, 3, 20, 33, 3, 5, 7, 4, 15, 2, 3}, {4, 4, 6, 7, 9, 3, 2, 2, 1, 3, 2}};
    tu_rng r = tu_rng_make(5);
    for (int i = 0; i < 8; i++)
        for (int mode = 0; mode < 2; mode++) {
            const int64_t *a = runs[i];
            geometry g = geo2(1, a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], mode);
            cbd_case c;
            make_case(&c, &g, GRADREF_F32, GRADREF_F32, i % 2 ? F_GROUPED : F_DENSE, D_NCHW, 0, &r);
            check_adjoint(&c, 1e-5);
            check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
            free_case(&c);
        }
}

/* Channel counts and widths that exercise the GEMM's panels, K slices, row segments. */
static void test_gemm_shapes(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(6);
    static const int64_t shapes[][8] = {/* ICpg OCpg K stride pad O(h) O(w) G */
                                        {33, 70, 3, 1, 1, 5, 37, 1},
                                        {16, 300, 1, 1, 0, 6, 9, 1},
                                        {40, 17, 1, 2, 0, 7, 5, 2},
                                        {1, 1, 3, 1, 1, 9, 70, 8},
                                        {29, 3, 5, 2, 2, 4, 33, 1},
                                        /* depthwise 3x3: blocks of four rows, the last
                                           one short (17) or reaching past diff (16) */
                                        {1, 1, 3, 1, 1, 17, 40, 6},
                                        {1, 1, 3, 1, 1, 16, 21, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t *a = shapes[s];
        geometry g =
            geo2(2, a[0], a[5], a[6], a[1], a[2], a[2], a[3], a[4], 1, a[7], (int32_t)s % 2);
        cbd_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, s % 2 ? D_NHWC : D_NCHW, 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
    /* a 1-D row too wide for the col buffer: pieces of one row */
    geometry g;
    memset(&g, 0, sizeof g);
    g.rank = 1, g.N = 1, g.G = 1, g.ICpg = 8, g.OCpg = 3, g.K[0] = 5, g.O[0] = 4000;
    g.stride[0] = 1, g.dil[0] = 2, g.pb[0] = 3, g.pe[0] = 1;
    cbd_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
    free_case(&c);
}

/* At least eight 14-channel panels: direct tiles are first packed (zeros where a tap falls
 * outside diff) and every panel reads the packed copy; 3x3 with pads and dilation, 1x1 with
 * stride 2 (one phase reached), the last panel short, tiles of under 16 pixels. The last two
 * have few k steps and over 64 tiles: runs of packed tiles (10 and 16) across mask groups. */
static void test_packed_tiles(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(11);
    static const int64_t shapes[][8] = {
        /* ICpg OCpg K stride pad dil O(h) O(w) */
        {113, 5, 3, 1, 1, 1, 9, 20}, {120, 3, 3, 1, 2, 2, 7, 11},   {126, 7, 1, 2, 0, 1, 6, 13},
        {112, 4, 3, 2, 1, 1, 5, 9},  {113, 11, 3, 1, 1, 1, 38, 62}, {120, 64, 1, 1, 0, 1, 30, 70}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t *a = shapes[s];
        geometry g =
            geo2(2, a[0], a[6], a[7], a[1], a[2], a[2], a[3], a[4], a[5], 1, (int32_t)(s % 2));
        cbd_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, s % 2 ? F_GROUPED : F_DENSE,
                  s % 2 ? D_NHWC : D_NCHW, 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Stride 2 along w, the phases' results scattered into every other column (the AVX-512 expand
 * kernel): taps reaching only even columns (1 x 1, or width 3 with dilation 2 and even pads,
 * the odd columns +0) or both (odd pads); odd and even grad widths, row strides 1 to 3, 2-D and
 * 3-D, both data layouts, F16 input. Then 3 x 3 stride 2 in every dim: every grad element
 * some phase's, an even width's phases interleaved in pairs (no zeros first); last 1 x 1 stride
 * 2 in h and w, even (the rows below each phase's row written +0 with it) and odd. */
static void test_stride2_columns(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(13);
    for (int iter = 0; iter < 20; iter++) {
        geometry g;
        memset(&g, 0, sizeof g);
        g.rank = iter % 4 == 3 ? 3 : 2;
        g.N = 2, g.G = 1 + iter % 2, g.ICpg = 20 + iter % 3, g.OCpg = 5;
        const int w = g.rank - 1; /* the last spatial dim */
        for (int j = 0; j < g.rank; j++) {
            g.K[j] = 1, g.O[j] = 5 + (iter + j) % 4, g.stride[j] = 1 + (iter + j) % 3, g.dil[j] = 1;
            g.extra[j] = tu_range(&r, 0, g.stride[j] - 1);
        }
        g.O[w] = 9 + iter % 5, g.stride[w] = 2, g.extra[w] = iter % 2;
        if (iter % 3 == 1) g.K[w] = 3, g.dil[w] = 2, g.pb[w] = g.pe[w] = 2 * (iter % 2);
        if (iter % 6 == 5) g.K[w] = 3, g.pb[w] = 1, g.pe[w] = 1; /* odd columns reached */
        for (int j = 0; j < g.rank && iter >= 12 && iter < 16; j++)
            g.K[j] = 3, g.stride[j] = 2, g.pb[j] = g.pe[j] = 1, g.dil[j] = 1, g.extra[j] = iter % 2;
        for (int j = g.rank - 2; j < g.rank && iter >= 16; j++) /* 1 x 1 stride 2 */
            g.K[j] = 1, g.stride[j] = 2, g.pb[j] = g.pe[j] = 0, g.extra[j] = 1 - iter / 18;
        g.mode = (int32_t)(iter % 2);
        cbd_case c;
        make_case(&c, &g, iter % 4 == 2 ? GRADREF_F16 : GRADREF_F32, GRADREF_F32, F_DENSE,
                  iter % 2 ? D_NHWC : D_NCHW, 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* A phase's last tile ending 1 to 4 pixels past a multiple of 8, which the kernel table's
 * tile_columns computes for every filter panel at once: 7 x 7 (49 pixels) and 14 x 14 (196)
 * at stride 1, 3 x 3 stride 2 onto 14 x 14 (7 x 7 phases), 1 x 1 stride 2 (18), 3 pixels
 * only, 28 (a tile of 24 and 4); one to twelve panels, the last short; both data layouts, F32
 * and F16. */
static void test_tile_columns(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(31);
    static const int64_t shapes[][8] = {/* ICpg OCpg K stride pad O(h) O(w) N */
                                        {64, 5, 3, 1, 1, 7, 7, 2}, {40, 3, 3, 1, 1, 14, 14, 1},
                                        {70, 4, 3, 2, 1, 7, 7, 2}, {13, 6, 1, 2, 0, 6, 3, 2},
                                        {9, 3, 3, 1, 1, 4, 7, 2},  {5, 2, 3, 1, 1, 3, 1, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t *a = shapes[s];
        geometry g =
            geo2(a[7], a[0], a[5], a[6], a[1], a[2], a[2], a[3], a[4], 1, 1, (int32_t)(s % 2));
        if (a[3] == 2 && a[2] == 3) g.extra[0] = g.extra[1] = 1; /* grad 14 x 14 */
        cbd_case c;
        make_case(&c, &g, s == 2 ? GRADREF_F16 : GRADREF_F32, GRADREF_F32, F_DENSE,
                  s % 2 ? D_NHWC : D_NCHW, 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* c's F32 NCHW diff (dense pixels) moved to planes channel_stride floats apart. */
static void restride_diff_channels(cbd_case *c, int64_t channel_stride) {
    const gradref_tensor *d = &c->diff;
    const int64_t N = d->shape[0], C = d->shape[1], plane = d->shape[2] * d->shape[3];
    float *to = malloc((size_t)(N * C * channel_stride) * sizeof(float));
    assert_non_null(to);
    for (int64_t i = 0; i < N * C * channel_stride; i++)
        to[i] = NAN; /* between the planes: never read */
    for (int64_t nc = 0; nc < N * C; nc++)
        memcpy(to + nc * channel_stride, (const float *)d->data + nc * d->strides[1],
               (size_t)plane * sizeof(float));
    free(c->buf[1]);
    c->buf[1] = c->diff.data = to;
    c->diff.strides[1] = channel_stride, c->diff.strides[0] = C * channel_stride;
    c->bytes[1] = (size_t)(N * C * channel_stride) * sizeof(float);
}

static size_t fast_workspace_of(const cbd_case *c, int threads) {
    gradref__cbd_plan plan;
    plan_of(c, NULL, &c->grad, &plan);
    return gradref__cbd_fast_workspace(&plan, GRADREF_PRECISION_DEFAULT, threads);
}

/* Diff planes starting a multiple of 4 KiB apart (32 x 32, and 28 x 28 planes 1024 floats
 * apart) read by the direct tiles with eight or more channels a tap: diff is staged with
 * planes two lines further apart, the workspace holding it exactly; seven channels, or planes
 * 1040 floats apart, read in place. F32 and F16, both layouts, stride 1 and 2. */
static void test_aliased_planes(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(37);
    static const int64_t shapes[][6] = {/* OCpg stride O(h) O(w) in_dtype layout */
                                        {8, 1, 32, 32, GRADREF_F32, D_NCHW},
                                        {7, 1, 32, 32, GRADREF_F32, D_NCHW},
                                        {9, 1, 32, 32, GRADREF_F16, D_NHWC},
                                        {12, 2, 16, 64, GRADREF_F32, D_NCHW}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t *a = shapes[s];
        geometry g = geo2(2, 10, a[2], a[3], a[0], 3, 3, a[1], 1, 1, 1, (int32_t)(s % 2));
        cbd_case c;
        make_case(&c, &g, (int32_t)a[4], GRADREF_F32, F_DENSE, (int)a[5], 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
    /* F32 NCHW 28 x 28, planes 1024 floats apart (staged dense: 784 apart) or 1040 (in place) */
    geometry g = geo2(2, 10, 28, 28, 8, 3, 3, 1, 1, 1, 1, 0);
    cbd_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    const size_t dense = fast_workspace_of(&c, 1);
    restride_diff_channels(&c, 1040);
    assert_int_equal(fast_workspace_of(&c, 1), dense);
    check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
    restride_diff_channels(&c, 1024);
    assert_int_equal(fast_workspace_of(&c, 1), dense + 2 * 8 * 784 * sizeof(float));
    check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
    free_case(&c);
    /* the 32 x 32 planes staged 1056 floats apart */
    g = geo2(1, 10, 32, 32, 8, 3, 3, 1, 1, 1, 1, 0);
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    const size_t staged = fast_workspace_of(&c, 1);
    restride_diff_channels(&c, 1040);
    assert_int_equal(staged, fast_workspace_of(&c, 1) + 8 * 1056 * sizeof(float));
    free_case(&c);
}

/* Strided items of more input channels than the chunk buffer holds at one pixel each (its
 * 131072 floats; 300000 channels in one item wrote past it): 1 x 1 and 3 x 3, stride 2. */
static void test_channels_past_chunk(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(29);
    for (int k = 1; k <= 3; k += 2) {
        geometry g;
        memset(&g, 0, sizeof g);
        g.rank = 2;
        g.N = 1, g.G = 1, g.ICpg = 300000, g.OCpg = 1;
        for (int j = 0; j < 2; j++) {
            g.K[j] = k, g.O[j] = 2, g.stride[j] = 2, g.dil[j] = 1;
            g.pb[j] = g.pe[j] = k / 2, g.extra[j] = 1;
        }
        cbd_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Depthwise 3x3 (and narrower) with stride 1: strips of 32 and 16 grad columns in blocks of
 * four rows, the rows left over, diff rows and columns missing at either end (every pad from
 * 0 to 2 on each side, so grad can be smaller or larger than diff), both modes. */
static void test_depthwise_strips(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(10);
    static const int64_t shapes[][7] = {/* O(h) O(w) pb(h) pe(h) pb(w) pe(w) K(w) */
                                        {8, 28, 1, 1, 1, 1, 3},  {9, 16, 0, 2, 2, 0, 3},
                                        {13, 33, 2, 1, 0, 1, 3}, {4, 48, 2, 2, 1, 2, 3},
                                        {7, 70, 0, 0, 0, 0, 3},  {11, 17, 1, 0, 2, 2, 3},
                                        {6, 40, 1, 1, 1, 0, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t *a = shapes[s];
        geometry g = geo2(2, 1, a[0], a[1], 1, 3, a[6], 1, 0, 1, 3, (int32_t)(s % 2));
        g.pb[0] = a[2], g.pe[0] = a[3], g.pb[1] = a[4], g.pe[1] = a[5];
        cbd_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, s % 2 ? D_NHWC : D_NCHW, 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Small depthwise 3 x 3 planes at stride 1 by lanes (the kernel table's dw_lanes): 19
 * channels (blocks of 8 or 4 and the channels left over, a plane each), every pad from 0 to 2
 * on each side, planes of 1 x 1 up to the largest padded plane the lanes take and one past
 * it, both modes and layouts (NHWC with F16 diff into F32 grad, which is staged to planes: one
 * dtype takes the channels-last rows), F16 and BF16 diff and grad (NCHW: converted a block of
 * channels at a time by each item) and specials in diff. */
static int strategy_applies(const cbd_case *c, const char *name);
static void test_depthwise_lanes(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(57);
    static const int64_t planes[][6] = {
        /* O(h) O(w) pb(h) pe(h) pb(w) pe(w) */
        {7, 7, 1, 1, 1, 1},  {1, 1, 1, 1, 1, 1}, {5, 6, 0, 2, 2, 0},   {9, 9, 1, 1, 1, 1},
        {3, 13, 2, 2, 0, 1}, {8, 4, 0, 0, 2, 2}, {11, 11, 1, 1, 1, 1}, {12, 12, 1, 1, 1, 1}};
    for (size_t s = 0; s < sizeof planes / sizeof planes[0]; s++) {
        const int64_t *a = planes[s];
        geometry g = geo2(2, 1, a[0], a[1], 1, 3, 3, 1, 0, 1, 19, (int32_t)(s % 2));
        g.pb[0] = a[2], g.pe[0] = a[3], g.pb[1] = a[4], g.pe[1] = a[5];
        cbd_case c;
        const int32_t in = s % 4 == 3 ? GRADREF_BF16 : s % 3 ? GRADREF_F16 : GRADREF_F32;
        make_case(&c, &g, in, s % 4 >= 2 && s % 3 != 1 ? in : GRADREF_F32, F_DENSE,
                  s % 3 == 1 ? D_NHWC : D_NCHW, 0, &r);
        if (s % 2 == 0) tu_sprinkle_specials(&c.diff, &r, 5);
        assert_true(strategy_applies(&c, "depthwise"));
        gradref__cbd_plan plan;
        plan_of(&c, NULL, &c.grad, &plan);
        const gradref__strategy *dw = &gradref__cbd_fast_path.rows[2];
        for (int kernel = 0; kernel <= GRADREF__ISA_MAX; kernel++) {
            plan.max_isa = kernel; /* the last plane's padded plane is past what lanes take */
            const int lanes = gradref__cbd_kernels_for(kernel)->dw_lanes && a[0] < 12;
            assert_string_equal(dw->variant(&plan, GRADREF_PRECISION_DEFAULT, 2),
                                lanes ? "depthwise_lanes" : "depthwise");
        }
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* That case c (depthwise, channels-last) runs "depthwise_channels_last" at every level when
 * `fits` (its taps within the rows' limits), and at none otherwise. */
static void expect_channels_last(const cbd_case *c, int fits) {
    gradref__cbd_plan plan;
    plan_of(c, NULL, &c->grad, &plan);
    const gradref__strategy *dw = &gradref__cbd_fast_path.rows[2];
    for (int kernel = 0; kernel <= GRADREF__ISA_MAX; kernel++) {
        plan.max_isa = kernel;
        const gradref__cbd_kernels *k = gradref__cbd_kernels_for(kernel);
        assert_non_null(k->dw_cl_row);
        const char *v = dw->variant(&plan, GRADREF_PRECISION_DEFAULT, 2);
        if (fits)
            assert_string_equal(v, "depthwise_channels_last");
        else
            assert_string_not_equal(v, "depthwise_channels_last");
    }
}

/* Channels-last depthwise (NHWC and NWC, F32, F16 and BF16: "depthwise_channels_last"),
 * against the reference at every level and thread count: planes
 * of 1 x 1 to rows wider than the ring's budget (several chunks an image), every column group
 * of the AVX2 and NEON rows with whole groups of blocks and blocks left over (their 12 columns
 * unrolled for three taps, and the rows where there are two or three; by the tap loop for
 * others), 1 x 3, 3 x 1, 3 x 3, 5 x 5 and 7 x 7 filters, pads of 0 to 3 (past the filter's reach:
 * rows and columns no tap reaches), asymmetric pads, dilation 2, both modes; strides 2 and 3 with
 * odd and even grad sizes (column phases with taps and, at 1 x 1 stride 2, without), dilation 2 at
 * stride 2; values uniform, with specials, or tiny (products that underflow to zeros of either
 * sign, which the skipped taps keep), filters holding specials (the fast path declines them).
 * Channels that end in a part of a block (12, 20 and 36 at 8 lanes; 3, 5 and 58 at 4 too; at
 * AVX-512's 16, every count not a multiple of 16, 8 and 12 a part alone), alone, after whole
 * blocks, and as the last of several chunks an image: F32's part as the whole block ending at the
 * last channel where the last chunk holds a block (116-like 20, 44 over two chunks at 8 lanes) and
 * by its own row where it does not (100 over four chunks, 44 at 16 lanes); 136 and 264 channels for
 * whole groups of 16-lane blocks. */
static void test_depthwise_channels_last(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(59);
    static const int64_t cases[][11] = {
        /* rank O(h) O(w) K(h) K(w) pad dil G N stride extra */
        {2, 7, 7, 3, 3, 1, 1, 16, 2, 1, 0},    {2, 28, 28, 3, 3, 1, 1, 8, 1, 1, 0},
        {2, 1, 1, 3, 3, 1, 1, 8, 3, 1, 0},     {2, 5, 6, 5, 5, 2, 1, 24, 1, 1, 0},
        {2, 9, 30, 1, 3, 1, 2, 8, 2, 1, 0},    {2, 13, 5, 3, 1, 1, 1, 12, 2, 1, 0},
        {2, 7, 40, 7, 7, 3, 1, 8, 1, 1, 0},    {2, 3, 100, 3, 3, 1, 1, 64, 1, 1, 0},
        {2, 10, 10, 3, 3, 3, 1, 8, 1, 1, 0},   {2, 6, 6, 3, 3, 0, 1, 16, 2, 1, 0},
        {1, 1, 50, 1, 5, 2, 1, 8, 2, 1, 0},    {2, 11, 17, 3, 3, 1, 1, 40, 1, 1, 0},
        {2, 7, 7, 3, 3, 1, 1, 16, 2, 2, 0},    {2, 14, 14, 3, 3, 1, 1, 8, 1, 2, 1},
        {2, 5, 6, 1, 1, 0, 1, 8, 2, 2, 1},     {2, 6, 9, 5, 5, 2, 1, 24, 1, 2, 1},
        {2, 5, 8, 3, 3, 1, 1, 8, 1, 3, 2},     {2, 6, 30, 3, 3, 2, 2, 16, 1, 2, 0},
        {1, 1, 40, 1, 3, 1, 1, 12, 2, 2, 1},   {2, 6, 7, 3, 3, 1, 1, 72, 1, 1, 0},
        {2, 3, 300, 3, 3, 1, 1, 48, 1, 1, 0},  {2, 3, 300, 3, 3, 1, 1, 48, 2, 1, 0},
        {2, 7, 7, 3, 3, 1, 1, 58, 1, 1, 0},    {2, 14, 14, 3, 3, 1, 1, 3, 2, 1, 0},
        {2, 9, 9, 3, 3, 1, 1, 20, 2, 2, 1},    {2, 3, 300, 3, 3, 1, 1, 100, 1, 1, 0},
        {1, 1, 30, 1, 3, 1, 1, 5, 2, 1, 0},    {2, 4, 200, 3, 3, 1, 1, 36, 2, 1, 0},
        {2, 7, 14, 3, 3, 1, 1, 136, 1, 1, 0},  {2, 5, 9, 3, 3, 1, 1, 264, 1, 1, 0},
        {2, 6, 7, 3, 3, 1, 1, 136, 1, 2, 1},   {2, 3, 300, 3, 3, 1, 1, 100, 2, 1, 0},
        {2, 3, 300, 3, 3, 1, 1, 100, 1, 1, 0}, {2, 3, 300, 3, 3, 1, 1, 44, 1, 1, 0},
        {2, 3, 300, 3, 3, 1, 1, 44, 1, 1, 0}};
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        const int64_t *a = cases[s];
        geometry g =
            geo2(a[8], 1, a[1], a[2], 1, a[3], a[4], a[9], a[5], a[6], a[7], (int32_t)(s % 2));
        g.extra[0] = g.extra[1] = a[10];
        if (a[0] == 1) { /* NWC: the width as the only dim */
            g.rank = 1, g.O[0] = a[2], g.K[0] = a[4];
            g.pb[1] = g.pe[1] = 0, g.extra[1] = 0;
        }
        if (s == 3) g.pb[0] = 0, g.pe[0] = 4, g.pb[1] = 3, g.pe[1] = 1;
        cbd_case c;
        const gradref_dtype dt = s % 4 == 1 ? GRADREF_F16 : s % 4 == 3 ? GRADREF_BF16 : GRADREF_F32;
        make_case(&c, &g, dt, dt, F_DENSE, D_NHWC, s % 3 == 2 ? VALUES_TINY : 0, &r);
        if (s % 3 == 1) tu_sprinkle_specials(&c.diff, &r, 7);
        if (s % 5 == 4) tu_sprinkle_specials(&c.filter, &r, 3);
        expect_channels_last(&c, 1);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* 3-D depthwise against the reference at every level and thread count, NDHWC (the
 * channels-last rows: a grad row's chain runs over the diff rows of its plane taps, then its row
 * taps, 12 columns of it unrolled by taps at AVX2 and NEON) and NCDHW (3 x 3 planes from the diff
 * planes of their depth taps, or rows). 3 x 3 x 3
 * at strides 1 and 2 with odd and even sizes, a 1-tap depth at stride 2 (planes no tap reaches:
 * +0), strides that differ by dim, dilation 2, pads past the filter's reach and asymmetric,
 * a 1 x 1 x 1 diff, rows wide enough for several chunks an image, one image of one chunk (bands
 * of rows across planes), both modes, F32, F16 and BF16, values with specials or tiny; more than
 * 64 plane x row taps (9 x 9 x 3) take the GEMM phases; 12 and 10 channels (a part of a
 * block). */
static void test_depthwise_3d(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(61);
    static const int64_t cases[][15] = {
        /* O(d) O(h) O(w) K(d) K(h) K(w) stride(d) (h) (w) pad dil G N extra rows-fit */
        {4, 7, 7, 3, 3, 3, 1, 1, 1, 1, 1, 16, 2, 0, 1},
        {3, 5, 6, 3, 3, 3, 2, 2, 2, 1, 1, 8, 1, 1, 1},
        {2, 4, 9, 1, 3, 3, 2, 1, 1, 0, 1, 8, 2, 1, 1},
        {5, 3, 4, 3, 2, 3, 1, 1, 1, 2, 2, 24, 1, 0, 1},
        {1, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 8, 3, 0, 1},
        {3, 6, 40, 5, 3, 3, 1, 1, 1, 2, 1, 64, 1, 0, 1},
        {4, 4, 4, 2, 2, 2, 3, 2, 1, 1, 1, 12, 2, 2, 1},
        {4, 5, 6, 4, 4, 4, 1, 1, 1, 3, 1, 8, 1, 0, 1},
        {2, 2, 12, 9, 9, 3, 1, 1, 1, 4, 1, 8, 1, 0, 0},
        {3, 4, 5, 3, 3, 3, 1, 2, 1, 1, 1, 32, 1, 1, 1},
        {3, 4, 5, 3, 3, 3, 1, 1, 1, 1, 1, 10, 2, 0, 1}};
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        const int64_t *a = cases[s];
        geometry g =
            geo2(a[12], 1, a[1], a[2], 1, a[4], a[5], 1, a[9], a[10], a[11], (int32_t)(s % 2));
        g.rank = 3;
        for (int j = 0; j < 3; j++) {
            g.O[j] = a[j], g.K[j] = a[3 + j], g.stride[j] = a[6 + j];
            g.dil[j] = a[10], g.pb[j] = g.pe[j] = a[9];
            g.extra[j] = a[13] < g.stride[j] ? a[13] : g.stride[j] - 1;
        }
        if (s == 3) g.pb[0] = 0, g.pe[0] = 5, g.pb[2] = 3, g.pe[2] = 1;
        const gradref_dtype dt = s % 3 == 1 ? GRADREF_F16 : s % 3 == 2 ? GRADREF_BF16 : GRADREF_F32;
        for (int layout = D_NCHW; layout <= D_NHWC; layout++) {
            cbd_case c;
            make_case(&c, &g, dt, dt, F_DENSE, layout, s % 4 == 3 ? VALUES_TINY : 0, &r);
            if (s % 4 == 1) tu_sprinkle_specials(&c.diff, &r, 7);
            if (layout == D_NHWC) expect_channels_last(&c, a[14]);
            check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
            free_case(&c);
        }
    }
}

/* Whether the named strategy takes case c at the default precision. */
static int strategy_applies(const cbd_case *c, const char *name) {
    gradref__cbd_plan plan;
    plan_of(c, NULL, &c->grad, &plan);
    for (int s = 0; s < GRADREF__CBD_STRATEGIES; s++)
        if (strcmp(gradref__cbd_strategies[s].name, name) == 0)
            return (gradref__cbd_strategies[s].skip)(&plan, GRADREF_PRECISION_DEFAULT) == NULL;
    fail_msg("no strategy %s", name);
    return 0;
}

/* 3-D depthwise at stride 2 along h and w (dw_plane_s2 over the diff planes of a grad plane's
 * depth taps): depth strides 1 (X3D's (1, 2, 2)) and 2, depth dilation 2, a 1-deep filter at
 * depth stride 2 (every other grad plane reached by no tap), odd widths past one block, both
 * modes, NCDHW and NDHWC, F32 and F16. */
static void depthwise_strided_3d(tu_rng *r) {
    static const int64_t cases[][8] = {/* stride(d) K(d) dil(d) pad(d) O(d) O(h) O(w) K(h, w) */
                                       {1, 3, 1, 1, 4, 5, 14, 3}, {2, 3, 1, 1, 3, 4, 23, 3},
                                       {1, 3, 2, 2, 5, 3, 9, 2},  {2, 1, 1, 1, 4, 6, 17, 3},
                                       {1, 1, 1, 0, 3, 4, 30, 1}, {2, 3, 2, 2, 3, 3, 12, 3}};
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        const int64_t *a = cases[s];
        geometry g;
        memset(&g, 0, sizeof g);
        g.rank = 3, g.N = 2, g.G = 3, g.ICpg = g.OCpg = 1, g.mode = (int32_t)(s % 2);
        for (int j = 0; j < 3; j++) {
            g.K[j] = j ? a[7] : a[1], g.stride[j] = j ? 2 : a[0], g.dil[j] = j ? 1 : a[2];
            g.pb[j] = g.pe[j] = j ? a[7] / 2 : a[3], g.O[j] = a[4 + j],
            g.extra[j] = (s % 3 == 1) % g.stride[j];
        }
        for (int layout = 0; layout < 2; layout++) {
            cbd_case c;
            make_case(&c, &g, s % 3 == 2 ? GRADREF_F16 : GRADREF_F32, GRADREF_F32, F_DENSE,
                      layout ? D_NHWC : D_NCHW, 0, r);
            if (s % 2 == 0) tu_sprinkle_specials(&c.diff, r, 4);
            assert_true(strategy_applies(&c, "depthwise"));
            check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
            free_case(&c);
        }
    }
}

/* 3-D depthwise whose depth is one grad and one diff plane joined by a 1-deep filter, at depth
 * stride 2 with a front pad of 1: the tap reaches no grad plane, and grad is +0 (the one-plane
 * shortcuts of the lanes and of the stride-2 planes once took it for a 2-D plane). Small 3 x 3
 * planes (the lanes), stride 2 with 3 x 3 and 1 x 1 (the stride-2 planes), NCDHW and NDHWC, F32
 * and F16, both modes. */
static void test_depthwise_depth_past_pad(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(71);
    static const int64_t cases[][4] = {/* stride(h, w) K(h, w) O(h) O(w) */
                                       {1, 3, 8, 8},
                                       {2, 3, 4, 14},
                                       {2, 1, 5, 9},
                                       {1, 3, 30, 30}};
    for (size_t s = 0; s < 2 * sizeof cases / sizeof cases[0]; s++) {
        const int64_t *a = cases[s / 2];
        geometry g;
        memset(&g, 0, sizeof g);
        g.rank = 3, g.N = 2, g.G = 9, g.ICpg = g.OCpg = 1, g.mode = (int32_t)((s + s / 2) % 2);
        g.K[0] = 1, g.stride[0] = 2, g.dil[0] = 1, g.pb[0] = 1, g.O[0] = 1, g.extra[0] = 1;
        for (int j = 1; j < 3; j++)
            g.K[j] = a[1], g.stride[j] = a[0], g.dil[j] = 1, g.pb[j] = g.pe[j] = a[1] / 2,
            g.O[j] = a[1 + j];
        cbd_case c;
        make_case(&c, &g, s % 3 == 2 ? GRADREF_F16 : GRADREF_F32, GRADREF_F32, F_DENSE,
                  s % 2 ? D_NHWC : D_NCHW, 0, &r);
        assert_true(strategy_applies(&c, "depthwise"));
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Strided depthwise channels, against the reference at every level and thread count. Stride 2
 * along h and w with K <= 3 (the kernel table's dw_plane_s2, both column phases interleaved as
 * they are stored): even and odd grad widths, rows of under one block to several, every pad
 * of a 3 x 3, 2 x 2 and 1 x 3, specials in diff. Then other strides, dilations and 3-D by
 * stride phases (each a stride-1 channel); a dilation past the stride that puts a phase's
 * first tap beyond the padding runs the GEMM phases instead. Then 3-D at stride 2 along h and
 * w (depthwise_strided_3d). */
static void test_depthwise_strided(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(41);
    static const int64_t planes[][9] = {
        /* O(h) O(w) K(h) K(w) pb(h) pe(h) pb(w) pe(w) extra */
        {28, 28, 3, 3, 1, 1, 1, 1, 1}, {14, 14, 3, 3, 1, 1, 1, 1, 0}, {8, 40, 3, 3, 0, 0, 0, 0, 1},
        {9, 3, 3, 3, 2, 2, 2, 2, 0},   {12, 25, 2, 2, 0, 1, 1, 0, 1}, {5, 17, 1, 3, 0, 0, 1, 1, 1},
        {7, 33, 3, 2, 1, 0, 2, 1, 0},  {3, 4, 3, 3, 1, 1, 1, 1, 1}};
    for (size_t s = 0; s < sizeof planes / sizeof planes[0]; s++) {
        const int64_t *a = planes[s];
        geometry g = geo2(2, 1, a[0], a[1], 1, a[2], a[3], 2, 0, 1, 3, (int32_t)(s % 2));
        g.pb[0] = a[4], g.pe[0] = a[5], g.pb[1] = a[6], g.pe[1] = a[7];
        g.extra[0] = g.extra[1] = a[8];
        cbd_case c;
        make_case(&c, &g, s == 3 ? GRADREF_F16 : GRADREF_F32, GRADREF_F32, F_DENSE,
                  s % 3 == 1 ? D_NHWC : D_NCHW, 0, &r);
        if (s % 2 == 0) tu_sprinkle_specials(&c.diff, &r, 4);
        assert_true(strategy_applies(&c, "depthwise"));
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
    static const int64_t others[][7] = {/* rank K stride dil pad O extra */
                                        {2, 5, 2, 1, 2, 9, 1},  {2, 3, 3, 1, 1, 7, 2},
                                        {2, 3, 2, 2, 2, 8, 0},  {3, 3, 2, 1, 1, 4, 1},
                                        {1, 4, 3, 1, 2, 11, 2}, {2, 3, 2, 3, 0, 6, 1}};
    for (size_t s = 0; s < sizeof others / sizeof others[0]; s++) {
        const int64_t *a = others[s];
        geometry g;
        memset(&g, 0, sizeof g);
        g.rank = (int)a[0], g.N = 2, g.G = 3, g.ICpg = g.OCpg = 1, g.mode = (int32_t)(s % 2);
        for (int j = 0; j < g.rank; j++) {
            g.K[j] = a[1], g.stride[j] = j == 0 && s == 1 ? 1 : a[2], g.dil[j] = a[3];
            g.pb[j] = g.pe[j] = a[4], g.O[j] = a[5] - j, g.extra[j] = a[6] % g.stride[j];
        }
        cbd_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, s % 2 ? D_NHWC : D_NCHW, 0, &r);
        tu_sprinkle_specials(&c.diff, &r, 3);
        /* dilation 3 at stride 2, no pad: the odd phases' first tap is past the padding */
        assert_int_equal(strategy_applies(&c, "depthwise"), s != 5);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
    depthwise_strided_3d(&r);
}

/* Depthwise kernels the 3 x 3 planes do not take (wider, taller, dilated): the row kernels,
 * rows of 1 to 3 vectors and past 32 columns (several blocks of four vectors), partial last
 * vectors, windows past both ends of a diff row, both modes, both layouts. */
static void test_depthwise_rows(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(12);
    static const int64_t shapes[][9] = {/* O(h) O(w) K(h) K(w) dil pb(h) pe(h) pb(w) pe(w) */
                                        {6, 28, 5, 5, 1, 2, 2, 2, 2}, {5, 33, 3, 7, 1, 1, 1, 3, 3},
                                        {4, 70, 1, 9, 1, 0, 0, 4, 4}, {7, 17, 5, 5, 2, 4, 3, 4, 2},
                                        {3, 41, 4, 4, 1, 1, 2, 0, 3}, {5, 9, 5, 3, 1, 2, 2, 0, 0},
                                        {9, 64, 3, 5, 2, 2, 2, 4, 4}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t *a = shapes[s];
        geometry g = geo2(2, 1, a[0], a[1], 1, a[2], a[3], 1, 0, a[4], 3, (int32_t)(s % 2));
        g.pb[0] = a[5], g.pe[0] = a[6], g.pb[1] = a[7], g.pe[1] = a[8];
        cbd_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, s % 2 ? D_NHWC : D_NCHW, 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Stride 1 with grad as large as diff (pad_begin + pad_end = dilation * (K - 1)): the AVX-512
 * path computes 32-pixel tiles straight from diff; tiles crossing rows and planes, the first
 * and last tiles of the tensor, 1-D/2-D/3-D, asymmetric pads, dilation, both modes, panels of
 * 14 channels and their remainders, every data layout. */
static void test_direct_tiles(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(9);
    static const int64_t shapes[][6] = {/* rank ICpg OCpg K dil G */
                                        {2, 14, 9, 3, 1, 1},  {2, 15, 1, 3, 2, 2},
                                        {1, 28, 5, 5, 1, 1},  {3, 5, 3, 3, 1, 1},
                                        {2, 31, 17, 1, 1, 1}, {2, 3, 4, 4, 1, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t *a = shapes[s];
        geometry g;
        memset(&g, 0, sizeof g);
        g.rank = (int)a[0], g.N = 2, g.G = a[5], g.ICpg = a[1], g.OCpg = a[2];
        g.mode = (int32_t)(s % 2);
        for (int j = 0; j < g.rank; j++) {
            g.K[j] = a[3], g.dil[j] = a[4], g.stride[j] = 1;
            const int64_t span = a[4] * (a[3] - 1);
            g.pb[j] = j == g.rank - 1 ? span / 2 + span % 2 : span / 2; /* asymmetric if odd */
            g.pe[j] = span - g.pb[j];
            g.O[j] = g.rank == 3 ? 3 + j : g.rank == 1 ? 75 : 5 + 6 * j;
        }
        cbd_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, (int)(s % 3), (int)(s % 3), 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
    /* more tiles than one group's masks (64 tiles of 32 pixels) per image, two images: a
     * thread's next image must not reuse the masks of another group */
    geometry g = geo2(2, 3, 1, 4200, 2, 1, 3, 1, 0, 1, 1, GRADREF_CONV_CROSS_CORRELATION);
    g.pb[1] = g.pe[1] = 1;
    cbd_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
    free_case(&c);
}

/* A filter holding Inf or NaN: Inf times a zero a tap reads past diff's edge is NaN in the
 * reference, where the tiles skip the tap; such a call runs the reference, on the direct tiles'
 * path, the strided (GEMM) path and the depthwise path, at every kernel level. The value sits
 * first, in the middle or last in memory, in a dense filter (whose panels' blocks are scanned
 * whole) and a channels-last one (tested value by value as packed). */
static void test_nonfinite_filter(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(12);
    const geometry shapes[3] = {
        geo2(2, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, GRADREF_CONV_CROSS_CORRELATION),
        geo2(2, 5, 6, 6, 3, 3, 3, 2, 1, 1, 1, GRADREF_CONV_CONVOLUTION),
        geo2(1, 1, 9, 9, 1, 3, 3, 1, 1, 1, 4, GRADREF_CONV_CROSS_CORRELATION)};
    const float values[2] = {INFINITY, NAN};
    for (int s = 0; s < 3; s++)
        for (int layout = 0; layout < (s < 2 ? 2 : 1); layout++)
            for (int at = 0; at < 3; at++) {
                cbd_case c;
                make_case(&c, &shapes[s], GRADREF_F32, GRADREF_F32,
                          layout ? F_CHANNELS_LAST : F_DENSE, D_NCHW, 0, &r);
                const size_t n = c.bytes[0] / sizeof(float);
                ((float *)c.filter.data)[at == 0 ? 0 : at == 1 ? n / 2 : n - 1] = values[at % 2];
                check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
                free_case(&c);
            }
}

/* The filter panels at two and three threads: a small filter's packed whole by every thread
 * into panels of its own (private_panels), a larger one's (over 256 KiB of panels) a share by
 * each thread and then read by all; each also with a NaN, which every thread of the private
 * kind must find on its own. Against the reference at 1 to 3 threads. */
static void test_panels_per_thread(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(14);
    const geometry shapes[2] = {
        geo2(3, 24, 9, 10, 20, 3, 3, 1, 1, 1, 1, GRADREF_CONV_CROSS_CORRELATION),
        geo2(2, 160, 5, 6, 64, 3, 3, 1, 1, 1, 1, GRADREF_CONV_CONVOLUTION)};
    for (int s = 0; s < 2; s++)
        for (int nan = 0; nan < 2; nan++) {
            cbd_case c;
            make_case(&c, &shapes[s], GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
            if (nan) ((float *)c.filter.data)[c.bytes[0] / sizeof(float) / 3] = NAN;
            check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
            free_case(&c);
        }
}

/* ------------------------------------------------------------ empty, workspace */

static void test_empty_sizes(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(7);
    geometry g = geo2(0, 2, 3, 3, 2, 3, 3, 1, 1, 1, 1, 0); /* N = 0: nothing to do */
    cbd_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    run_ok(&c, NULL);
    free_case(&c);
    g = geo2(2, 3, 3, 4, 0, 3, 3, 1, 1, 1, 1, 0); /* OC = 0: grad is all +0 */
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    run_ok(&c, NULL);
    for (size_t i = 0; i < c.bytes[2] / 4; i++)
        assert_true(((uint32_t *)c.grad.data)[i] == 0);
    free_case(&c);
    g = geo2(2, 0, 3, 4, 2, 3, 3, 1, 1, 1, 1, 0); /* IC = 0: empty grad */
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    run_ok(&c, NULL);
    free_case(&c);
}

/* A huge stride: filter {2, 3} along the last dim, grad of 2 elements, and diff of 2 along every
 * dim (an end pad of one stride makes the second output; it reaches only padding), so grad =
 * {2, 3} x diff[0, ...] at once (the phases no tap reaches cost nothing): 1-D to 3-D, strides
 * whose product overflows int64, both modes, on every path; the twin's size stays small. It
 * took 18 s and 1 GiB, ran out of memory, or returned zeros. */
static void test_huge_stride(void **state) {
    (void)state;
    static const int64_t strides[3][3] = {{INT64_C(1) << 27, 1, 1},
                                          {INT64_C(1) << 32, INT64_C(1) << 32, 1},
                                          {INT64_C(1) << 21, INT64_C(1) << 21, INT64_C(1) << 40}};
    for (int r = 1; r <= 3; r++) {
        float filter[2] = {2.0f, 3.0f},
              diff[8] = {1.0f, -5.0f, 7.0f, 9.0f, 4.0f, 6.0f, 8.0f, 10.0f};
        float grad[2];
        int64_t fs[5] = {1, 1, 1, 1, 1}, ds[5] = {1, 1, 2, 2, 2}, gs[5] = {1, 1, 1, 1, 1};
        fs[r + 1] = 2, gs[r + 1] = 2;
        gradref_tensor f, d, g;
        gradref_tensor_init(&f, filter, GRADREF_F32, r + 2, fs);
        gradref_tensor_init(&d, diff, GRADREF_F32, r + 2, ds);
        gradref_tensor_init(&g, grad, GRADREF_F32, r + 2, gs);
        for (int mode = 0; mode < 2; mode++) {
            gradref_conv_params p;
            memset(&p, 0, sizeof p);
            p.mode = mode;
            for (int j = 0; j < 3; j++) {
                p.stride[j] = strides[r - 1][j];
                p.dilation[j] = 1;
                p.pad[2 * j + 1] = j < r ? p.stride[j] : 0; /* a second output, all padding */
            }
            size_t bytes = 0;
            assert_int_equal(gradref_conv_backprop_data_workspace_size(&p, &f, &d, &g, &bytes),
                             GRADREF_OK);
            assert_true(bytes < ((size_t)64 << 20));
            unsigned char tiny[1];
            for (int w = 0; w < 2; w++) {
                gradref_exec e = {w ? tiny : NULL, w ? 1 : 0, 2, 0};
                grad[0] = grad[1] = -1.0f;
                assert_int_equal(gradref_conv_backprop_data(&p, &f, &d, &g, &e), GRADREF_OK);
                if (grad[0] != (mode ? 3.0f : 2.0f) || grad[1] != (mode ? 2.0f : 3.0f))
                    fail_msg("%d-D, mode %d, workspace %d: grad {%g, %g}", r, mode, w,
                             (double)grad[0], (double)grad[1]);
            }
        }
    }
}

/* Threads are counted by the work: a small problem asked for GRADREF_MAX_THREADS sizes its
 * workspace for its few items (1.25 GB before), and runs with the bits of one thread. */
static void test_threads_bounded_by_work(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(9);
    geometry g = geo2(1, 16, 12, 12, 8, 3, 3, 1, 1, 1, 1, 0);
    cbd_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    gradref__cbd_plan plan;
    assert_int_equal(gradref__cbd_validate(&c.params, &c.filter, &c.diff, &c.grad, &plan),
                     GRADREF_OK);
    const int team =
        gradref__cbd_fast_threads(&plan, GRADREF_PRECISION_DEFAULT, GRADREF_MAX_THREADS);
    assert_true(team >= 1 && team <= 16);
    void *want = malloc(c.bytes[2]);
    gradref_exec one = {NULL, 0, 1, 0}, many = {NULL, 0, GRADREF_MAX_THREADS, 0};
    run_ok(&c, &one);
    memcpy(want, c.grad.data, c.bytes[2]);
    memset(c.grad.data, 0xee, c.bytes[2]);
    run_ok(&c, &many);
    assert_memory_equal(c.grad.data, want, c.bytes[2]);
    free(want);
    free_case(&c);
}

static void test_workspace(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(8);
    geometry g = geo2(3, 8, 9, 10, 6, 3, 3, 1, 1, 1, 1, 0);
    cbd_case c;
    make_case(&c, &g, GRADREF_BF16, GRADREF_BF16, F_DENSE, D_NHWC, 0, &r);
    gradref_tensor want = c.grad;
    void *wb = malloc(c.bytes[2]);
    want.data = wb;
    assert_int_equal(gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &want, NULL),
                     GRADREF_OK);
    size_t bytes = 0;
    assert_int_equal(
        gradref_conv_backprop_data_workspace_size(&c.params, &c.filter, &c.diff, &c.grad, &bytes),
        GRADREF_OK);
    assert_true(bytes > 0);
    char *ws = malloc(bytes);
    /* the reported size, and half of it (fewer threads), give the same bits */
    for (int half = 0; half < 2; half++) {
        gradref_exec e = {ws, half ? bytes / 2 : bytes, 3, 0};
        memset(c.grad.data, 0, c.bytes[2]);
        gradref_status s = gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &e);
        if (s == GRADREF_OK)
            assert_memory_equal(c.grad.data, wb, c.bytes[2]);
        else
            assert_int_equal(s, GRADREF_ERR_WORKSPACE);
    }
    /* exactly one thread's share, asked for three threads: it runs on one, same bits */
    gradref__cbd_plan plan;
    assert_int_equal(gradref__cbd_validate(&c.params, &c.filter, &c.diff, &c.grad, &plan),
                     GRADREF_OK);
    const size_t one = gradref__cbd_fast_workspace(&plan, GRADREF_PRECISION_DEFAULT, 1) + 64;
    assert_true(gradref__cbd_fast_workspace(&plan, GRADREF_PRECISION_DEFAULT, 3) + 64 > one);
    assert_true(one <= bytes);
    gradref_exec e1 = {ws, one, 3, 0};
    memset(c.grad.data, 0, c.bytes[2]);
    assert_int_equal(gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &e1),
                     GRADREF_OK);
    assert_memory_equal(c.grad.data, wb, c.bytes[2]);
    free(ws);
    free(wb);
    free_case(&c);
}

/* ------------------------------------------------------------ PyTorch fixtures */

/* tests/golden/generate.py: torch.nn.grad.conv{1,2,3}d_input in f64 (cross-correlation) with
 * groups, strides, dilations, pads and grad sizes above the minimum. */
static void test_golden_pytorch(void **state) {
    (void)state;
    int count;
    golden_case *cases = golden_load(GRADREF_GOLDEN_DIR "/conv_backprop_data.txt", &count);
    assert_true(count >= 3);
    for (int k = 0; k < count; k++) {
        const golden_case *gc = &cases[k];
        int64_t v[32];
        int n =
            golden_ints(gc, "geometry", v, 32); /* rank N G ICpg OCpg, then per dim K O s d p e */
        geometry g;
        memset(&g, 0, sizeof g);
        g.rank = (int)v[0], g.N = v[1], g.G = v[2], g.ICpg = v[3], g.OCpg = v[4];
        for (int j = 0; j < g.rank; j++) {
            const int64_t *d = v + 5 + 6 * j;
            g.K[j] = d[0], g.O[j] = d[1], g.stride[j] = d[2], g.dil[j] = d[3],
            g.pb[j] = g.pe[j] = d[4];
            g.extra[j] = d[5];
        }
        assert_int_equal(n, 5 + 6 * g.rank);
        tu_rng r = tu_rng_make(9);
        cbd_case c;
        make_case(&c, &g, GRADREF_F64, GRADREF_F64, F_DENSE, D_NCHW, 0, &r);
        assert_int_equal(golden_bits(gc, "filter", c.filter.data, 8, c.bytes[0] / 8),
                         c.bytes[0] / 8);
        assert_int_equal(golden_bits(gc, "diff", c.diff.data, 8, c.bytes[1] / 8), c.bytes[1] / 8);
        double *want = malloc(c.bytes[2]);
        assert_int_equal(golden_bits(gc, "grad", want, 8, c.bytes[2] / 8), c.bytes[2] / 8);
        run_ok(&c, NULL);
        const double *got = c.grad.data;
        for (size_t i = 0; i < c.bytes[2] / 8; i++)
            if (fabs(got[i] - want[i]) > 1e-12 * (1 + fabs(want[i])))
                fail_msg("%s: grad[%zu] = %.17g, PyTorch %.17g", gc->name, i, got[i], want[i]);
        free(want);
        free_case(&c);
    }
    golden_free(cases, count);
}

/* ------------------------------------------------------------ errors */

static void expect_error(cbd_case *c, gradref_status got, gradref_status want, const char *frag) {
    tu_expect_status(got, want, "conv_backprop_data", frag);
    tu_expect_untouched(c->buf[2], c->bytes[2], 0xee, "grad");
}

static gradref_status call_case(void *ctx, const gradref_exec *e) {
    cbd_case *c = ctx;
    return gradref_conv_backprop_data(&c->params, &c->filter, &c->diff, &c->grad, e);
}

static void test_errors(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(10);
    geometry g = geo2(2, 3, 4, 5, 4, 3, 3, 2, 1, 1, 2, 0);
    cbd_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    memset(c.buf[2], 0xee, c.bytes[2]);
    const gradref_conv_params good = c.params;
    gradref_conv_params p;
    const gradref_tensor *F = &c.filter, *D = &c.diff, *Gr = &c.grad;
#define CALL(pp, f, d, gg, e) gradref_conv_backprop_data(pp, f, d, gg, e)
    expect_error(&c, CALL(NULL, F, D, Gr, NULL), GRADREF_ERR_NULL, "p is NULL");
    expect_error(&c, CALL(&good, NULL, D, Gr, NULL), GRADREF_ERR_NULL, "filter is NULL");
    expect_error(&c, CALL(&good, F, NULL, Gr, NULL), GRADREF_ERR_NULL, "diff is NULL");
    expect_error(&c, CALL(&good, F, D, NULL, NULL), GRADREF_ERR_NULL, "grad is NULL");
    p = good, p.mode = 2;
    expect_error(&c, CALL(&p, F, D, Gr, NULL), GRADREF_ERR_PARAM, "p.mode is 2");
    p = good, p.groups = -1;
    expect_error(&c, CALL(&p, F, D, Gr, NULL), GRADREF_ERR_PARAM, "p.groups is -1");
    p = good, p.groups = 3;
    expect_error(&c, CALL(&p, F, D, Gr, NULL), GRADREF_ERR_SHAPE, "not a multiple of p.groups 3");
    p = good, p.stride[1] = 0;
    expect_error(&c, CALL(&p, F, D, Gr, NULL), GRADREF_ERR_PARAM, "p.stride[1] is 0");
    p = good, p.dilation[0] = 0;
    expect_error(&c, CALL(&p, F, D, Gr, NULL), GRADREF_ERR_PARAM, "p.dilation[0] is 0");
    p = good, p.pad[3] = -1;
    expect_error(&c, CALL(&p, F, D, Gr, NULL), GRADREF_ERR_PARAM, "pads must be >= 0");
    p = good, p.stride[0] = 3;
    expect_error(&c, CALL(&p, F, D, Gr, NULL), GRADREF_ERR_SHAPE,
                 "diff.shape[2] is 4 but the geometry gives 3");
    p = good, p.dilation[1] = 9;
    expect_error(&c, CALL(&p, F, D, Gr, NULL), GRADREF_ERR_SHAPE,
                 "smaller than the dilated kernel");
    p = good, p.dilation[1] = INT64_MAX / 2 + 1;
    expect_error(&c, CALL(&p, F, D, Gr, NULL), GRADREF_ERR_OVERFLOW, "exceeds int64");
    gradref_tensor t;
    t = c.diff, t.ndim = 6;
    expect_error(&c, CALL(&good, F, &t, Gr, NULL), GRADREF_ERR_RANK, "diff.ndim is 6");
    t = c.grad, t.ndim = 3;
    expect_error(&c, CALL(&good, F, D, &t, NULL), GRADREF_ERR_RANK, "grad.ndim is 3");
    t = c.filter, t.ndim = 3;
    expect_error(&c, CALL(&good, &t, D, Gr, NULL), GRADREF_ERR_RANK, "filter.ndim is 3");
    t = c.diff, t.dtype = GRADREF_F64;
    expect_error(&c, CALL(&good, F, &t, Gr, NULL), GRADREF_ERR_DTYPE,
                 "diff.dtype is F64 but filter.dtype is F32");
    t = c.grad, t.dtype = GRADREF_F16;
    expect_error(&c, CALL(&good, F, D, &t, NULL), GRADREF_ERR_DTYPE, "grad.dtype is F16");
    t = c.grad, t.shape[1] = 5;
    expect_error(&c, CALL(&good, F, D, &t, NULL), GRADREF_ERR_SHAPE,
                 "grad.shape[1] is 5 but groups x IC/G is 6");
    t = c.diff, t.shape[1] = 7;
    expect_error(&c, CALL(&good, F, &t, Gr, NULL), GRADREF_ERR_SHAPE, "diff.shape[1] is 7");
    t = c.grad, t.shape[0] = 1;
    expect_error(&c, CALL(&good, F, D, &t, NULL), GRADREF_ERR_SHAPE, "grad.shape[0] is 1");
    t = c.grad, t.shape[3] = 7;
    expect_error(&c, CALL(&good, F, D, &t, NULL), GRADREF_ERR_SHAPE,
                 "diff.shape[3] is 5 but the geometry gives 4");
    t = c.filter, t.shape[3] = 0;
    expect_error(&c, CALL(&good, &t, D, Gr, NULL), GRADREF_ERR_SHAPE, "kernel sizes must be >= 1");
    t = c.grad, t.strides[1] = 0;
    expect_error(&c, CALL(&good, F, D, &t, NULL), GRADREF_ERR_STRIDE, "grad");
    t = c.grad, t.data = c.diff.data;
    expect_error(&c, CALL(&good, F, D, &t, NULL), GRADREF_ERR_ALIAS, "grad");
    /* a workspace smaller than one thread's share: the no-workspace path, same bits */
    tu_expect_tiny_workspace_same_bits(call_case, &c, c.buf + 2, c.bytes + 2, 1);
    gradref_exec bad = {NULL, 0, 0, 5};
    expect_error(&c, CALL(&good, F, D, Gr, &bad), GRADREF_ERR_PARAM, "exec.precision");
    size_t bytes;
    expect_error(&c, gradref_conv_backprop_data_workspace_size(&good, F, D, Gr, NULL),
                 GRADREF_ERR_NULL, "bytes is NULL");
    free_case(&c);
    /* grouped filter: groups must be 0 or the filter's G */
    geometry g2 = geo2(1, 2, 3, 3, 2, 1, 1, 1, 0, 1, 2, 0);
    make_case(&c, &g2, GRADREF_F32, GRADREF_F32, F_GROUPED, D_NCHW, 0, &r);
    memset(c.buf[2], 0xee, c.bytes[2]);
    p = c.params, p.groups = 3;
    expect_error(&c, gradref_conv_backprop_data(&p, &c.filter, &c.diff, &c.grad, NULL),
                 GRADREF_ERR_PARAM, "has 2 groups");
    (void)bytes;
#undef CALL
    free_case(&c);
}

/* GRADREF_STRICT_UPSTREAM: MegEngine refuses 1-D and 3-D convolutions, F64 and unequal pads; a
 * 2-D F32 or I8 problem passes with the bits of a plain call. */
static void test_strict_megengine(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(720);
    const gradref_exec strict = {NULL, 0, 2, GRADREF_PRECISION_DEFAULT | GRADREF_STRICT_UPSTREAM};
    geometry g = geo2(2, 3, 5, 6, 4, 3, 3, 2, 1, 1, 1, GRADREF_CONV_CROSS_CORRELATION);
    cbd_case c;
    for (int k = 0; k < 2; k++) {
        make_case(&c, &g, k ? GRADREF_I8 : GRADREF_F32, k ? GRADREF_I32 : GRADREF_F32, F_DENSE,
                  D_NCHW, k, &r);
        assert_int_equal(gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, NULL),
                         GRADREF_OK);
        void *want = malloc(c.bytes[2]);
        memcpy(want, c.buf[2], c.bytes[2]);
        memset(c.buf[2], 0xee, c.bytes[2]);
        assert_int_equal(
            gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &strict),
            GRADREF_OK);
        assert_memory_equal(c.buf[2], want, c.bytes[2]);
        free(want);
        free_case(&c);
    }
    make_case(&c, &g, GRADREF_F64, GRADREF_F64, F_DENSE, D_NCHW, 0, &r);
    memset(c.buf[2], 0xee, c.bytes[2]);
    expect_error(&c, gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &strict),
                 GRADREF_ERR_DTYPE, "strict MegEngine: F64; MegEngine has no float64");
    free_case(&c);
    geometry a = g;
    a.pe[1] = 0; /* pads 1 left, 0 right */
    make_case(&c, &a, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    memset(c.buf[2], 0xee, c.bytes[2]);
    expect_error(&c, gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &strict),
                 GRADREF_ERR_PARAM,
                 "strict MegEngine: p.pad[2] is 1 and p.pad[3] 0; MegEngine pads both sides alike");
    free_case(&c);
    /* F16/BF16 filter and diff with an F32 grad: MegEngine's grad has diff's dtype */
    for (int k = 0; k < 2; k++) {
        make_case(&c, &g, k ? GRADREF_BF16 : GRADREF_F16, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
        memset(c.buf[2], 0xee, c.bytes[2]);
        expect_error(&c,
                     gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &strict),
                     GRADREF_ERR_DTYPE,
                     k ? "grad.dtype is F32 but diff.dtype is BF16"
                       : "grad.dtype is F32 but diff.dtype is F16");
        free_case(&c);
    }
    /* a stride or a dilation of 2^32 along W: valid for gradref, past MegEngine's uint32 */
    for (int k = 0; k < 2; k++) {
        geometry h = geo2(1, 2, 2, 1, 2, 1, 1, 1, 0, 1, 1, GRADREF_CONV_CROSS_CORRELATION);
        if (k)
            h.dil[1] = INT64_C(1) << 32;
        else
            h.stride[1] = INT64_C(1) << 32;
        make_case(&c, &h, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
        assert_int_equal(gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, NULL),
                         GRADREF_OK);
        memset(c.buf[2], 0xee, c.bytes[2]);
        expect_error(&c,
                     gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &strict),
                     GRADREF_ERR_PARAM, "MegEngine's are uint32");
        free_case(&c);
    }
    for (int rank = 1; rank <= 3; rank += 2) {
        geometry h = g;
        h.rank = rank;
        h.K[2] = 2, h.O[2] = 3, h.stride[2] = h.dil[2] = 1, h.pb[2] = h.pe[2] = 1;
        make_case(&c, &h, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
        memset(c.buf[2], 0xee, c.bytes[2]);
        expect_error(&c,
                     gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &strict),
                     GRADREF_ERR_RANK, "ConvolutionBackwardData is 2-D");
        free_case(&c);
    }
}

/* ------------------------------------------------------------ MegEngine compute_mode DEFAULT */

/* F16 from a finite float as MegEngine's half.hpp rounds: to nearest, ties away from zero
 * (written here from the definition, in double arithmetic). */
static uint16_t model_f16_away(float f) {
    const uint16_t sign = signbit(f) ? 0x8000u : 0u;
    const double a = fabs((double)f);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7c00u);
    if (a < 0x1p-14) /* subnormal steps of 2^-24; 1024 steps is the smallest normal */
        return (uint16_t)(sign | (uint16_t)floor(a * 0x1p24 + 0.5));
    int ex;
    frexp(a, &ex); /* a = m * 2^ex, m in [0.5, 1) */
    int E = ex - 1;
    double q = floor(ldexp(a, 10 - E) + 0.5); /* 1024 .. 2048 */
    if (q == 2048.0) q = 1024.0, E++;
    if (E > 15) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)((E + 15) << 10) | (uint16_t)(q - 1024.0));
}

/* MegEngine's naive backward_data for a 2-D problem as helper.h writes it: grad zeroed, then
 * for n, oc, oh, ow, fh, fw, ic: ih = sh*oh + fh*dh_eff + h_off (conv mode: h_off = -ph +
 * (dFH-1)*dh, dh_eff = -dh), grad += (half)F * (half)diff, the sum in float and rounded back. */
static void megengine_model(const cbd_case *c, uint16_t *want /* dense (N, IC, IH, IW) */) {
    const geometry *g = &c->geo;
    const int32_t dt = c->in_dtype;
    const int64_t IH = c->grad.shape[2], IW = c->grad.shape[3], OH = g->O[0], OW = g->O[1];
    const int64_t IC = g->G * g->ICpg, OC = g->G * g->OCpg, FH = g->K[0], FW = g->K[1];
    const int flip = g->mode == GRADREF_CONV_CONVOLUTION;
    const int64_t dh = flip ? -g->dil[0] : g->dil[0], dw = flip ? -g->dil[1] : g->dil[1];
    const int64_t h_off = -g->pb[0] + (flip ? (FH - 1) * g->dil[0] : 0);
    const int64_t w_off = -g->pb[1] + (flip ? (FW - 1) * g->dil[1] : 0);
    memset(want, 0, (size_t)(g->N * IC * IH * IW) * sizeof *want);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t oc = 0; oc < OC; oc++) {
            const int64_t grp = oc / g->OCpg;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++)
                    for (int64_t fh = 0; fh < FH; fh++)
                        for (int64_t fw = 0; fw < FW; fw++) {
                            const int64_t ih = g->stride[0] * oh + fh * dh + h_off;
                            const int64_t iw = g->stride[1] * ow + fw * dw + w_off;
                            if (ih < 0 || ih >= IH || iw < 0 || iw >= IW) continue;
                            for (int64_t ic = grp * g->ICpg; ic < (grp + 1) * g->ICpg; ic++) {
                                const int64_t fi[4] = {oc, ic - grp * g->ICpg, fh, fw};
                                const int64_t di[4] = {n, oc, oh, ow};
                                const float prod =
                                    (float)tu_get(&c->filter, fi) * (float)tu_get(&c->diff, di);
                                uint16_t *e = want + ((n * IC + ic) * IH + ih) * IW + iw;
                                const double old =
                                    dt == GRADREF_F16 ? tu_f16_value(*e) : tu_bf16_value(*e);
                                const float sum = (float)old + prod;
                                *e = dt == GRADREF_F16 ? model_f16_away(sum)
                                                       : tu_round_bf16((double)sum);
                            }
                        }
        }
}

/* GRADREF_PRECISION_MEGENGINE_DEFAULT equals the transcription bit for bit: F16 and BF16,
 * both modes, groups, strides, dilation, padding, NCHW and NHWC, 1 to 3 threads. Values are
 * multiples of 1/8 so that sums land on ties, where F16 rounds away from zero. */
static void test_megengine_default(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(731);
    static const int threads[] = TU_THREAD_COUNTS;
    int ties_seen = 0;
    for (int iter = 0; iter < 24; iter++) {
        const int64_t G = iter % 3 == 2 ? 2 : 1, S = 1 + iter % 2, D = 1 + iter / 8 % 2;
        geometry g = geo2(2, 3, 4 + iter % 3, 5, 3, 3, 2, S, iter % 3 == 0 ? 1 : 0, D, G,
                          iter % 4 < 2 ? GRADREF_CONV_CROSS_CORRELATION : GRADREF_CONV_CONVOLUTION);
        g.extra[0] = S - 1;
        const int32_t dt = iter % 2 ? GRADREF_BF16 : GRADREF_F16;
        cbd_case c;
        make_case(&c, &g, dt, dt, F_DENSE, iter % 6 < 3 ? D_NCHW : D_NHWC, 0, &r);
        for (int t = 0; t < 2; t++) { /* multiples of 1/8 up to 64: sums reach ties */
            const gradref_tensor *x = t ? &c.diff : &c.filter;
            int64_t total = 1, idx[4];
            for (int d = 0; d < 4; d++)
                total *= x->shape[d];
            for (int64_t e = 0; e < total; e++) {
                int64_t rest = e;
                for (int d = 3; d >= 0; d--)
                    idx[d] = rest % x->shape[d], rest /= x->shape[d];
                tu_put(x, idx, (double)tu_range(&r, -512, 512) / 8);
            }
        }
        const int64_t IC = g.G * g.ICpg, IH = c.grad.shape[2], IW = c.grad.shape[3];
        const size_t count = (size_t)(g.N * IC * IH * IW);
        uint16_t *want = malloc(count * sizeof *want);
        megengine_model(&c, want);
        for (int t = 0; t < 3; t++) {
            gradref_exec e = {NULL, 0, threads[t], GRADREF_PRECISION_MEGENGINE_DEFAULT};
            memset(c.buf[2], 0xee, c.bytes[2]);
            run_ok(&c, &e);
            for (int64_t n = 0; n < g.N; n++)
                for (int64_t ic = 0; ic < IC; ic++)
                    for (int64_t ih = 0; ih < IH; ih++)
                        for (int64_t iw = 0; iw < IW; iw++) {
                            const int64_t gi[4] = {n, ic, ih, iw};
                            const uint16_t got = *(const uint16_t *)((const char *)c.grad.data +
                                                                     tu_offset(&c.grad, gi));
                            const uint16_t w = want[((n * IC + ic) * IH + ih) * IW + iw];
                            if (got != w)
                                fail_msg("iter %d (%s): grad[%lld,%lld,%lld,%lld] is %04x, "
                                         "MegEngine gives %04x",
                                         iter, dt == GRADREF_F16 ? "F16" : "BF16", (long long)n,
                                         (long long)ic, (long long)ih, (long long)iw, got, w);
                        }
        }
        /* the default precision (one rounding at the end) differs somewhere: the mode matters */
        run_ok(&c, NULL);
        for (size_t k = 0; k < count && !ties_seen; k++) {
            const int64_t gi[4] = {(int64_t)(k / (size_t)(IC * IH * IW)),
                                   (int64_t)(k / (size_t)(IH * IW) % (size_t)IC),
                                   (int64_t)(k / (size_t)IW % (size_t)IH),
                                   (int64_t)(k % (size_t)IW)};
            ties_seen |=
                *(const uint16_t *)((const char *)c.grad.data + tu_offset(&c.grad, gi)) != want[k];
        }
        free(want);
        free_case(&c);
    }
    assert_true(ties_seen);
    /* F32 (and every other dtype) has no MegEngine DEFAULT mode here: PARAM */
    geometry g = geo2(1, 2, 3, 3, 2, 2, 2, 1, 0, 1, 1, GRADREF_CONV_CROSS_CORRELATION);
    cbd_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    memset(c.buf[2], 0xee, c.bytes[2]);
    gradref_exec e = {NULL, 0, 1, GRADREF_PRECISION_MEGENGINE_DEFAULT};
    expect_error(&c, gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &e),
                 GRADREF_ERR_PARAM,
                 "exec.precision is MEGENGINE_DEFAULT, which takes F16 or BF16 filter, diff and "
                 "grad; they are F32 and F32");
    free_case(&c);
}

/* Values for the MegEngine lanes test: multiples of 1/8 (ties), magnitudes down to 2^-14
 * (sums in F16's subnormal range), up to 2^15 (sums past 65504), and now and then any bits
 * (NaN, Inf, subnormal inputs). */
static void fill_megengine_mix(const gradref_tensor *t, tu_rng *r) {
    int64_t total = 1, idx[GRADREF_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++)
        total *= t->shape[d];
    for (int64_t e = 0; e < total; e++) {
        int64_t rest = e;
        for (int d = t->ndim - 1; d >= 0; d--)
            idx[d] = rest % t->shape[d], rest /= t->shape[d];
        const int64_t kind = tu_range(r, 0, 15);
        if (kind == 0) {
            const uint16_t bits = (uint16_t)tu_next(r);
            memcpy((char *)t->data + tu_offset(t, idx), &bits, 2);
        } else if (kind < 4) {
            tu_put(t, idx, ldexp(tu_uniform(r) * 2 - 1, (int)tu_range(r, -14, -6)));
        } else if (kind < 6) {
            tu_put(t, idx, ldexp(tu_uniform(r) * 2 - 1, (int)tu_range(r, 6, 15)));
        } else {
            tu_put(t, idx, (double)tu_range(r, -64, 64) / 8);
        }
    }
}

/* The lanes kernels of every level against the scatter they replace, on one case, bit for bit
 * after the NaN rule; returns how many levels ran. */
static int check_lanes_against_scatter(cbd_case *c) {
    gradref__cbd_plan plan;
    gradref_tensor want = c->grad;
    void *wb = malloc(c->bytes[2]);
    want.data = wb;
    memset(wb, 0x77, c->bytes[2]);
    assert_int_equal(gradref__cbd_validate(&c->params, &c->filter, &c->diff, &want, &plan),
                     GRADREF_OK);
    plan.precision = GRADREF_PRECISION_MEGENGINE_DEFAULT;
    gradref__cbd_megengine_items(&plan, 0, plan.N * plan.G);
    gradref__canon_nans(&want, 1, GRADREF__ISA_MAX);
    int runs = 0;
    for (int level = 1; level <= gradref__isa_level(); level++) {
        const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
        if (k == gradref__cbd_kernels_for(level - 1)) continue;
        assert_int_equal(gradref__cbd_validate(&c->params, &c->filter, &c->diff, &c->grad, &plan),
                         GRADREF_OK);
        plan.precision = GRADREF_PRECISION_MEGENGINE_DEFAULT;
        plan.max_isa = level;
        if (!gradref__cbd_megengine_by_lanes(&plan, k)) continue;
        memcpy(c->grad.data, wb, c->bytes[2]); /* elements outside grad's view as in want */
        gradref__cbd_megengine_lanes(
            &plan, k, 0,
            plan.N * plan.G *
                ((plan.ICpg + GRADREF__CBD_ME_CHANNELS - 1) / GRADREF__CBD_ME_CHANNELS));
        gradref__canon_nans(&c->grad, 1, GRADREF__ISA_MAX);
        tu_expect_same_bits(&c->grad, &want, "grad");
        runs++;
    }
    free(wb);
    return runs;
}

/* MegEngine DEFAULT by lanes (each element's chain whole, a kernel level's vectors) against the
 * scatter it replaces, bit for bit after the NaN rule: F16 and BF16, rows wider than the
 * lanes, every stride, dilation and padding along the row, groups, layouts, both modes, and
 * values whose sums are subnormal, overflow, Inf or NaN. */
static void test_megengine_lanes(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(732);
    int runs = 0;
    for (int iter = 0; iter < 80; iter++) {
        geometry g = random_geometry(&r);
        g.O[g.rank - 1] = tu_range(&r, 1, 40); /* rows past two vectors */
        for (int j = 0; j < g.rank; j++)
            while (grad_size(&g, j) < 1 ||
                   grad_size(&g, j) + g.pb[j] + g.pe[j] < g.dil[j] * (g.K[j] - 1) + 1)
                g.O[j]++;
        const int32_t dt = iter % 2 ? GRADREF_BF16 : GRADREF_F16;
        cbd_case c;
        make_case(&c, &g, dt, dt, iter % 3, (iter / 3) % 3, 0, &r);
        fill_megengine_mix(&c.filter, &r);
        fill_megengine_mix(&c.diff, &r);
        runs += check_lanes_against_scatter(&c);
        free_case(&c);
    }
    if (gradref__cbd_kernels_for(gradref__isa_level())->megengine_row) assert_true(runs > 0);
}

/* F16 chains at the edges of the lanes kernels' fast rounding: three terms (a 1x1 kernel, three
 * output channels), every element alike, so each block takes the fast rounding wherever its
 * test allows. The second sum lands just below 2^-14 (2^-14 - 1.5 * 2^-26: the subnormal rule
 * gives 2^-14, a normal rounding 2^-14 - 2^-25) or at 65504 + 16 (Inf, where a normal rounding
 * gives 65536); the third term (-2^-25, -32768) carries the difference into the result. */
static void test_megengine_lanes_edges(void **state) {
    (void)state;
    static const double terms[2][3][2] = {
        /* {w, d} per output channel */
        {{0x1p-14, 1.0}, {-0x1.8p-13, 0x1p-13}, {-0x1p-13, 0x1p-12}},
        {{65504.0, 1.0}, {16.0, 1.0}, {-32768.0, 1.0}},
    };
    tu_rng r = tu_rng_make(733);
    int runs = 0;
    for (int edge = 0; edge < 2; edge++)
        for (int sign = 0; sign < 2; sign++) {
            geometry g = geo2(1, 16, 3, 20, 3, 1, 1, 1, 0, 1, 1, GRADREF_CONV_CROSS_CORRELATION);
            cbd_case c;
            make_case(&c, &g, GRADREF_F16, GRADREF_F16, F_DENSE, D_NCHW, 0, &r);
            int64_t i[4];
            for (i[0] = 0; i[0] < 3; i[0]++)
                for (i[1] = 0; i[1] < 16; i[1]++) {
                    const int64_t fi[4] = {i[0], i[1], 0, 0};
                    tu_put(&c.filter, fi, (sign ? -1 : 1) * terms[edge][i[0]][0]);
                }
            i[0] = 0;
            for (i[1] = 0; i[1] < 3; i[1]++)
                for (i[2] = 0; i[2] < 3; i[2]++)
                    for (i[3] = 0; i[3] < 20; i[3]++)
                        tu_put(&c.diff, i, terms[edge][i[1]][1]);
            runs += check_lanes_against_scatter(&c);
            free_case(&c);
        }
    if (gradref__cbd_kernels_for(gradref__isa_level())->megengine_row) assert_true(runs > 0);
}

/* MegEngine's F16 conversion on its own: ties away from zero, overflow, NaN payloads. */
static void test_megengine_f16_rounding(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(732);
    for (int k = 0; k < 200000; k++) {
        uint32_t bits = (uint32_t)tu_next(&r);
        if (k % 4 == 0) bits = (bits & 0xffffe000u) | 0x1000u; /* a tie for normal F16 */
        float f;
        memcpy(&f, &bits, 4);
        if (!isfinite(f)) continue;
        const uint16_t got = gradref__f32_to_f16_megengine(f), want = model_f16_away(f);
        if (got != want) fail_msg("%08x: %04x, want %04x", (unsigned)bits, got, want);
    }
    assert_int_equal(gradref__f32_to_f16_megengine(1.0f + 0x1p-11f), 0x3c01); /* tie: away */
    assert_int_equal(gradref__f32_to_f16_megengine(-0x1p-25f), 0x8001);       /* 2^-25: away */
    assert_int_equal(gradref__f32_to_f16_megengine(65519.0f), 0x7bff);
    assert_int_equal(gradref__f32_to_f16_megengine(65520.0f), 0x7c00);
    const float nan_low = gradref__f32_from_bits(0x7f800001u); /* payload below the kept bits */
    assert_int_equal(gradref__f32_to_f16_megengine(nan_low), 0x7c00);
    assert_int_equal(gradref__f32_to_bf16_megengine(gradref__f32_from_bits(0x7fc00001u)), 0x7fc1);
    assert_int_equal(gradref__f32_to_bf16_megengine(gradref__f32_from_bits(0x3f808000u)), 0x3f80);
    assert_int_equal(gradref__f32_to_bf16_megengine(gradref__f32_from_bits(0x3f818000u)), 0x3f82);
}

/* ------------------------------------------------------------ QuantizedS8 */

/* MegEngine's requantisation, transcribed: QuantizedS32(sf * sf)'s dequantize, then
 * QuantizedS8(sg)'s quantize (roundf, fmin(fmax(-128, v), 127)). */
static int8_t model_qs8(int64_t acc, float sf, float sd, float sg) {
    const float t = (float)(int32_t)acc * (sf * sd);
    return (int8_t)fminf(fmaxf(-128.0f, roundf(t / sg)), 127.0f);
}

/* The exact int sums by the scatter of megengine_model, in int64. */
static void int_sums_model(const cbd_case *c, int64_t *acc /* dense (N, IC, IH, IW) */) {
    const geometry *g = &c->geo;
    const int64_t IH = c->grad.shape[2], IW = c->grad.shape[3], OH = g->O[0], OW = g->O[1];
    const int64_t IC = g->G * g->ICpg, OC = g->G * g->OCpg;
    memset(acc, 0, (size_t)(g->N * IC * IH * IW) * sizeof *acc);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t oc = 0; oc < OC; oc++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++)
                    for (int64_t fh = 0; fh < g->K[0]; fh++)
                        for (int64_t fw = 0; fw < g->K[1]; fw++) {
                            const int64_t ih = g->stride[0] * oh + fh * g->dil[0] - g->pb[0];
                            const int64_t iw = g->stride[1] * ow + fw * g->dil[1] - g->pb[1];
                            if (ih < 0 || ih >= IH || iw < 0 || iw >= IW) continue;
                            const int64_t grp = oc / g->OCpg;
                            for (int64_t ic = grp * g->ICpg; ic < (grp + 1) * g->ICpg; ic++) {
                                const int64_t fi[4] = {oc, ic - grp * g->ICpg, fh, fw};
                                const int64_t di[4] = {n, oc, oh, ow};
                                /* modulo 2^64: I32 products reach 2^62 */
                                int64_t *a = &acc[((n * IC + ic) * IH + ih) * IW + iw];
                                *a = (int64_t)((uint64_t)*a +
                                               (uint64_t)((int64_t)tu_get(&c->filter, fi) *
                                                          (int64_t)tu_get(&c->diff, di)));
                            }
                        }
}

/* gradref_conv_backprop_data_qs8 against the transcription: random scales and problems
 * (groups, strides, padding, dilation, NCHW and NHWC, sums past 2^24 where float rounds the
 * int32), 1 to 3 threads; then ties, saturation and every error, grad untouched. */
/* I32 filter and diff (TensorFlow's CPU Conv2DBackpropInput takes int32): the exact sum modulo
 * 2^32, which is int32 arithmetic that wraps in any order. Values over the whole int32 range, so
 * products and sums wrap; NULL and 1-byte workspaces, 1 to 3 threads, against the model written
 * here; the fast path and the no-workspace path against the reference; strict MegEngine refuses
 * it. */
static void test_int32_inputs(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(742);
    static const int threads[] = TU_THREAD_COUNTS;
    for (int iter = 0; iter < 4; iter++) {
        geometry g = geo2(2, 3, 4, 5, 4, 3, 2, 1 + iter % 2, iter % 2, 1, 1 + iter / 2,
                          GRADREF_CONV_CROSS_CORRELATION);
        cbd_case c;
        make_case(&c, &g, GRADREF_I32, GRADREF_I32, iter % 2 ? F_CHANNELS_LAST : F_DENSE,
                  iter % 3 == 1 ? D_NHWC : D_NCHW, 0, &r); /* random int32 bits: any value */
        const int64_t IC = g.G * g.ICpg, IH = c.grad.shape[2], IW = c.grad.shape[3];
        int64_t *acc = malloc((size_t)(g.N * IC * IH * IW) * sizeof *acc);
        int_sums_model(&c, acc);
        static char one_byte[1];
        for (int t = 0; t < 6; t++) {
            const gradref_exec e = {t < 3 ? NULL : one_byte, t < 3 ? 0 : 1, threads[t % 3],
                                    GRADREF_PRECISION_DEFAULT};
            memset(c.buf[2], 0x5a, c.bytes[2]);
            run_ok(&c, &e);
            for (int64_t k = 0; k < g.N * IC * IH * IW; k++) {
                const int64_t gi[4] = {k / (IC * IH * IW), k / (IH * IW) % IC, k / IW % IH, k % IW};
                const int32_t got =
                    *(const int32_t *)((const char *)c.grad.data + tu_offset(&c.grad, gi));
                assert_int_equal(got, (int32_t)(uint32_t)(uint64_t)acc[k]);
            }
        }
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        memset(c.buf[2], 0xee, c.bytes[2]); /* what the refused call must leave */
        const gradref_exec strict = {NULL, 0, 1,
                                     GRADREF_PRECISION_DEFAULT | GRADREF_STRICT_UPSTREAM};
        expect_error(&c,
                     gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &c.grad, &strict),
                     GRADREF_ERR_DTYPE, "not Int32");
        free(acc);
        free_case(&c);
    }
}

/* GRADREF_TERM_MAGNITUDES and _COUNTS (Python's test_precision.py holds their values to the
 * F64 call on |inputs| and on ones): an F64 grad for F16 inputs is taken only with a flag, a
 * flag takes only an F64 grad, the two flags together or with another precision, and the
 * QuantizedS8 call, are refused, grad untouched; the twin, which has no exec, validates as
 * without a flag (such a call needs no workspace). */
static void test_term_outputs(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(743);
    geometry g = geo2(2, 3, 4, 5, 4, 3, 2, 1, 1, 1, 1, GRADREF_CONV_CROSS_CORRELATION);
    cbd_case c, wide;
    make_case(&c, &g, GRADREF_F16, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    make_case(&wide, &g, GRADREF_F16, GRADREF_F64, F_DENSE, D_NCHW, 0, &r);
    const int32_t mag = GRADREF_PRECISION_DEFAULT | GRADREF_TERM_MAGNITUDES;
    const gradref_exec plain = {NULL, 0, 1, GRADREF_PRECISION_DEFAULT}, terms = {NULL, 0, 2, mag},
                       both = {NULL, 0, 1, mag | GRADREF_TERM_COUNTS},
                       high = {NULL, 0, 1, GRADREF_PRECISION_HIGH | GRADREF_TERM_COUNTS};
    memset(c.buf[2], 0xee, c.bytes[2]);
    expect_error(&c, call_case(&c, &terms), GRADREF_ERR_DTYPE, "writes F64");
    memset(wide.buf[2], 0xee, wide.bytes[2]);
    expect_error(&wide, call_case(&wide, &plain), GRADREF_ERR_DTYPE, "grad.dtype is F64");
    expect_error(&wide, call_case(&wide, &both), GRADREF_ERR_PARAM, "goes alone");
    expect_error(&wide, call_case(&wide, &high), GRADREF_ERR_PARAM, "goes alone");
    const gradref_qs8_scales sc = {1.0f, 1.0f, 1.0f};
    expect_error(&wide,
                 gradref_conv_backprop_data_qs8(&wide.params, &sc, &wide.filter, &wide.diff,
                                                &wide.grad, &terms),
                 GRADREF_ERR_PARAM, "does not compute");
    size_t bytes = 1;
    assert_int_equal(gradref_conv_backprop_data_workspace_size(&wide.params, &wide.filter,
                                                               &wide.diff, &wide.grad, &bytes),
                     GRADREF_ERR_DTYPE);
    assert_int_equal(call_case(&wide, &terms), GRADREF_OK);
    free_case(&c);
    free_case(&wide);
}

/* The GRADREF_TERM_* outputs (the reference loop's) at 1, 2 and 3 threads: the same bits. */
static void test_term_threads(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(744);
    geometry g = geo2(2, 8, 16, 15, 8, 3, 3, 2, 1, 1, 1, GRADREF_CONV_CONVOLUTION);
    cbd_case c;
    make_case(&c, &g, GRADREF_F16, GRADREF_F64, F_DENSE, D_NHWC, 0, &r);
    tu_expect_threads_same_bits(call_case, &c, GRADREF_TERM_MAGNITUDES, c.buf + 2, c.bytes + 2, 1);
    tu_expect_threads_same_bits(call_case, &c, GRADREF_TERM_COUNTS, c.buf + 2, c.bytes + 2, 1);
    free_case(&c);
}

static void test_qs8(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(741);
    static const int threads[] = TU_THREAD_COUNTS;
    for (int iter = 0; iter < 12; iter++) {
        const int64_t OCpg = iter == 11 ? 400 : 3, G = iter % 3 == 1 ? 2 : 1;
        geometry g = geo2(2, 2, 4, 5, OCpg, 3, 3, 1 + iter % 2, iter % 2, 1 + iter / 6, G,
                          GRADREF_CONV_CROSS_CORRELATION);
        g.extra[0] = g.stride[0] - 1;
        cbd_case c;
        make_case(&c, &g, GRADREF_I8, GRADREF_I8, F_DENSE, iter % 4 < 2 ? D_NCHW : D_NHWC, 0, &r);
        if (iter == 11) { /* sums near 2^24 and past it */
            memset(c.buf[0], 0x80, c.bytes[0]);
            memset(c.buf[1], 0x81, c.bytes[1]);
        }
        const gradref_qs8_scales sc = {(float)(0.001 + tu_uniform(&r) * 0.05),
                                       (float)(0.001 + tu_uniform(&r) * 0.05),
                                       (float)(0.0005 + tu_uniform(&r) * 0.01)};
        const int64_t IC = g.G * g.ICpg, IH = c.grad.shape[2], IW = c.grad.shape[3];
        int64_t *acc = malloc((size_t)(g.N * IC * IH * IW) * sizeof *acc);
        int_sums_model(&c, acc);
        int saturated = 0;
        static char one_byte[1]; /* the no-workspace path */
        for (int t = 0; t < 6; t++) {
            gradref_exec e = {t < 3 ? NULL : one_byte, t < 3 ? 0 : 1, threads[t % 3],
                              GRADREF_PRECISION_DEFAULT};
            memset(c.buf[2], 0x5a, c.bytes[2]);
            assert_int_equal(
                gradref_conv_backprop_data_qs8(&c.params, &sc, &c.filter, &c.diff, &c.grad, &e),
                GRADREF_OK);
            for (int64_t k = 0; k < g.N * IC * IH * IW; k++) {
                const int64_t gi[4] = {k / (IC * IH * IW), k / (IH * IW) % IC, k / IW % IH, k % IW};
                const int8_t got =
                    *(const int8_t *)((const char *)c.grad.data + tu_offset(&c.grad, gi));
                const int8_t want = model_qs8(acc[k], sc.filter, sc.diff, sc.grad);
                saturated |= want == 127 || want == -128;
                if (got != want)
                    fail_msg("iter %d: grad element %lld is %d, MegEngine gives %d (sum %lld)",
                             iter, (long long)k, got, want, (long long)acc[k]);
            }
        }
        if (iter == 11) { /* the case reached saturation and sums that float rounds */
            int64_t most = 0;
            for (int64_t k = 0; k < g.N * IC * IH * IW; k++)
                most = acc[k] > most ? acc[k] : most;
            assert_true(saturated && most > (INT64_C(1) << 24));
        }
        free(acc);
        free_case(&c);
    }
    /* 1x1, one channel: grad = roundf(w * d * sf * sd / sg) */
    static const struct {
        int8_t w, d;
        float sf, sd, sg;
        int8_t want;
    } edge[] = {
        {5, 1, 1, 1, 2, 3},           {-5, 1, 1, 1, 2, -3},       /* ties away from zero */
        {3, 1, 1, 1, 2, 2},           {1, 1, 1, 1, 4, 0},         /* 0.25 to 0 */
        {127, 127, 1, 1, 1, 127},     {-128, 127, 1, 1, 1, -128}, /* saturation */
        {-128, -128, 1, 1, 128, 127}, {-128, 1, 0.5f, 0.5f, 0.25f, -128},
        {1, 1, 1e-19f, 1e-19f, 1, 0}, /* a subnormal product scale */
    };
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        int8_t w = edge[i].w, d = edge[i].d, out = 99;
        const int64_t one[4] = {1, 1, 1, 1};
        gradref_tensor tw, td, tg;
        gradref_tensor_init(&tw, &w, GRADREF_I8, 4, one);
        gradref_tensor_init(&td, &d, GRADREF_I8, 4, one);
        gradref_tensor_init(&tg, &out, GRADREF_I8, 4, one);
        gradref_conv_params p;
        memset(&p, 0, sizeof p);
        p.stride[0] = p.stride[1] = p.dilation[0] = p.dilation[1] = 1;
        const gradref_qs8_scales sc = {edge[i].sf, edge[i].sd, edge[i].sg};
        assert_int_equal(gradref_conv_backprop_data_qs8(&p, &sc, &tw, &td, &tg, NULL), GRADREF_OK);
        if (out != edge[i].want || out != model_qs8(w * d, sc.filter, sc.diff, sc.grad))
            fail_msg("edge %d: %d * %d gives %d, want %d", (int)i, w, d, out, edge[i].want);
    }
    /* errors: grad untouched */
    geometry g = geo2(1, 2, 3, 3, 2, 2, 2, 1, 0, 1, 1, GRADREF_CONV_CROSS_CORRELATION);
    cbd_case c;
    make_case(&c, &g, GRADREF_I8, GRADREF_I8, F_DENSE, D_NCHW, 0, &r);
    memset(c.buf[2], 0xee, c.bytes[2]);
    const gradref_qs8_scales good = {0.1f, 0.2f, 0.3f};
    expect_error(&c,
                 gradref_conv_backprop_data_qs8(&c.params, NULL, &c.filter, &c.diff, &c.grad, NULL),
                 GRADREF_ERR_NULL, "scales is NULL");
    const float bad_values[4] = {0.0f, -1.0f, INFINITY, NAN};
    for (int k = 0; k < 4; k++) {
        gradref_qs8_scales bad = good;
        bad.grad = bad_values[k];
        expect_error(
            &c, gradref_conv_backprop_data_qs8(&c.params, &bad, &c.filter, &c.diff, &c.grad, NULL),
            GRADREF_ERR_PARAM, "a QuantizedS8 scale is finite and > 0");
    }
    /* finite scales whose float product overflows or underflows: the sums' scale is not */
    static const float products[2][2] = {{1e30f, 1e30f}, {1e-30f, 1e-30f}};
    for (int k = 0; k < 2; k++) {
        const gradref_qs8_scales bad = {products[k][0], products[k][1], 0.5f};
        expect_error(
            &c, gradref_conv_backprop_data_qs8(&c.params, &bad, &c.filter, &c.diff, &c.grad, NULL),
            GRADREF_ERR_PARAM, "the QuantizedS32 scale of the sums must be finite and > 0");
        size_t twin = 0;
        assert_int_equal(gradref_conv_backprop_data_qs8_workspace_size(&c.params, &bad, &c.filter,
                                                                       &c.diff, &c.grad, &twin),
                         GRADREF_ERR_PARAM);
    }
    gradref_tensor wide = c.grad;
    wide.dtype = GRADREF_I32;
    expect_error(&c,
                 gradref_conv_backprop_data_qs8(&c.params, &good, &c.filter, &c.diff, &wide, NULL),
                 GRADREF_ERR_DTYPE, "the QuantizedS8 call takes I8 filter, diff and grad");
    /* the QuantizedS8 call's workspace is the I8 -> I32 call's (the same f32 path) */
    size_t bytes = 1, i32_bytes = 2;
    assert_int_equal(gradref_conv_backprop_data_qs8_workspace_size(&c.params, &good, &c.filter,
                                                                   &c.diff, &c.grad, &bytes),
                     GRADREF_OK);
    int64_t numel = 1;
    for (int d = 0; d < c.grad.ndim; d++)
        numel *= c.grad.shape[d];
    int32_t *sums = malloc(sizeof(int32_t) * (size_t)numel);
    gradref_tensor i32;
    gradref_tensor_init(&i32, sums, GRADREF_I32, c.grad.ndim, c.grad.shape);
    assert_int_equal(
        gradref_conv_backprop_data_workspace_size(&c.params, &c.filter, &c.diff, &i32, &i32_bytes),
        GRADREF_OK);
    assert_true(bytes > 0);
    assert_int_equal(bytes, i32_bytes);
    free(sums);
    free_case(&c);
}

/* I8 sums run in f32 in parts of the output channels, each part's partial sums integers of at
 * most 2^24 (cbd_int8.c), or by words in int32 where the level has them. One grad element
 * sums OC products of -128 x -128 (a last one of 1 x 1 where marked): 1024 products land on 2^24 in
 * one part; 1025 need two; 16384 make 16 parts of exactly 2^24; one more makes 17; 131072 reach
 * 2^31, 131073 pass it, kept mod 2^32. Each at 1, 2 and 3 threads, with the fast path's workspace
 * and with a 1-byte one, I32 and QuantizedS8, and the fast path at every kernel level. Then 1025
 * taps of one channel, past any part: the reference loop. */
static void test_int8_sum_bound(void **state) {
    (void)state;
    static const struct {
        int64_t oc;
        int last_one; /* the last product is 1 x 1 */
        int64_t part;
        int64_t want;
    } runs[6] = {{1024, 0, 1024, INT64_C(16777216)},
                 {1025, 1, 513, INT64_C(16777217)},
                 {16384, 0, 1024, INT64_C(1) << 28},
                 {16385, 1, 964, (INT64_C(1) << 28) + 1},
                 {131072, 0, 1024, INT64_C(131072) * 16384 - (INT64_C(1) << 32)},
                 {131073, 0, 1017, INT64_C(131073) * 16384 - (INT64_C(1) << 32)}};
    static char one_byte[1];
    for (int i = 0; i < 7; i++) {
        /* the last: one output channel, 1025 taps, diff 1025 wide (grad's middle sums all) */
        const int64_t oc = i < 6 ? runs[i].oc : 1, taps = i < 6 ? 1 : 1025, len = oc * taps;
        const int64_t want = i < 6 ? runs[i].want : 1025 * 16384;
        int8_t *w = malloc((size_t)len), *d = malloc((size_t)len);
        memset(w, 0x80, (size_t)len);
        memset(d, 0x80, (size_t)len);
        if (i < 6 && runs[i].last_one) w[oc - 1] = d[oc - 1] = 1;
        const int64_t fshape[3] = {oc, 1, taps}, dshape[3] = {1, oc, taps},
                      gshape[3] = {1, 1, 2 * taps - 1};
        gradref_tensor tw, td, tg, tq;
        int32_t *sum = malloc((size_t)gshape[2] * sizeof *sum);
        int8_t *q = malloc((size_t)gshape[2]);
        gradref_tensor_init(&tw, w, GRADREF_I8, 3, fshape);
        gradref_tensor_init(&td, d, GRADREF_I8, 3, dshape);
        gradref_tensor_init(&tg, sum, GRADREF_I32, 3, gshape);
        gradref_tensor_init(&tq, q, GRADREF_I8, 3, gshape);
        gradref_conv_params p;
        memset(&p, 0, sizeof p);
        p.stride[0] = p.dilation[0] = 1;
        gradref__cbd_plan plan;
        assert_int_equal(gradref__cbd_validate(&p, &tw, &td, &tg, &plan), GRADREF_OK);
        assert_int_equal(gradref__cbd_int8_part(&plan, 1), i < 6 ? runs[i].part : 0);
        const gradref_qs8_scales sc = {0.5f, 0.25f, 4096.0f};
        for (int run = 0; run < 6; run++) {
            const gradref_exec e = {run < 3 ? NULL : one_byte, run < 3 ? 0 : 1, 1 + run % 3,
                                    GRADREF_PRECISION_DEFAULT};
            sum[taps - 1] = 7, q[taps - 1] = 7;
            assert_int_equal(gradref_conv_backprop_data(&p, &tw, &td, &tg, &e), GRADREF_OK);
            if (sum[taps - 1] != (int32_t)want)
                fail_msg("%lld channels, %lld taps, run %d: the sum is %d, want %lld",
                         (long long)oc, (long long)taps, run, (int)sum[taps - 1], (long long)want);
            assert_int_equal(gradref_conv_backprop_data_qs8(&p, &sc, &tw, &td, &tq, &e),
                             GRADREF_OK);
            assert_int_equal(q[taps - 1], model_qs8(want, sc.filter, sc.diff, sc.grad));
        }
        for (int kernel = 0; kernel <= GRADREF__ISA_TOP; kernel++) { /* parts or words */
            if (!own_level(kernel)) continue;
            plan.max_isa = kernel;
            plan.precision = GRADREF_PRECISION_DEFAULT;
            char *block = malloc(gradref__cbd_fast_workspace(&plan, plan.precision, 2) + 64);
            assert_non_null(block);
            sum[taps - 1] = 7;
            gradref__cbd_fast(&plan, block + (64 - (uintptr_t)block % 64) % 64, 2);
            free(block);
            if (sum[taps - 1] != (int32_t)want)
                fail_msg("%lld channels, %lld taps, level %d: the sum is %d, want %lld",
                         (long long)oc, (long long)taps, kernel, (int)sum[taps - 1],
                         (long long)want);
        }
        free(w);
        free(d);
        free(sum);
        free(q);
    }
}

/* Which levels sum I8 by words (GRADREF_VERBOSE's variant of the phases row: int16 pairs or
 * int8 quads): those whose kernel table has word tiles, when every phase runs direct tiles
 * ("same" padding, at stride 1 and 2); a "valid" one keeps the f32 kernels. Each against the
 * reference. */
static void test_int8_words_variant(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(78);
    const gradref__strategy *phases = &gradref__cbd_fast_path.rows[3];
    assert_string_equal(phases->name, "phases");
    for (int iter = 0; iter < 3; iter++) {
        /* 120 channels: tiles packed first (pack_tiles) */
        geometry g = geo2(2, iter ? 5 : 120, 6, 7, 9, 3, 3, 1 + iter % 2, iter < 2, 1, 1,
                          GRADREF_CONV_CROSS_CORRELATION);
        g.extra[0] = g.extra[1] = iter == 1; /* stride 2: each phase's sub-grid is diff's size */
        cbd_case c;
        make_case(&c, &g, GRADREF_I8, GRADREF_I32, F_DENSE, D_NCHW, 0, &r);
        gradref__cbd_plan plan;
        plan_of(&c, NULL, &c.grad, &plan);
        for (int kernel = 0; kernel <= GRADREF__ISA_MAX; kernel++) {
            plan.max_isa = kernel;
            const int wc = iter < 2 ? gradref__cbd_kernels_for(kernel)->word_channels : 0;
            const char *variant = phases->variant(&plan, GRADREF_PRECISION_DEFAULT, 2);
            if (wc)
                assert_string_equal(variant, wc == 2 ? "int8_pairs" : "int8_quads");
            else
                assert_true(strncmp(variant, "int8_", 5) != 0);
        }
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Parts on whole problems: filters of extremes (-128 and 127) with OC/G x taps past one part,
 * diff random; strided, padded, grouped, NCHW, NHWC and padded strides. The fast path and the
 * no-workspace path against the reference at every kernel level and thread count, I32 and
 * QuantizedS8. */
static void test_int8_parts(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(77);
    for (int iter = 0; iter < 6; iter++) {
        const int64_t OCpg = iter < 3 ? 1300 : 2600, S = 1 + iter % 2, G = 1 + iter / 4;
        geometry g = geo2(1, 3, 5, 4 + iter % 3, OCpg, 3, 3, S, iter % 2, 1, G,
                          iter % 2 ? GRADREF_CONV_CONVOLUTION : GRADREF_CONV_CROSS_CORRELATION);
        cbd_case c;
        const int qs8 = iter % 3 == 2;
        make_case(&c, &g, GRADREF_I8, qs8 ? GRADREF_I8 : GRADREF_I32,
                  iter % 2 ? F_GROUPED : F_DENSE, iter % 3, 0, &r);
        int8_t *w = c.buf[0];
        for (size_t k = 0; k < c.bytes[0]; k++)
            w[k] = tu_range(&r, 0, 1) ? 127 : -128;
        gradref__cbd_plan plan;
        const gradref_qs8_scales sc = {0.01f, 0.02f, 150.0f};
        plan_of(&c, qs8 ? &sc : NULL, &c.grad, &plan);
        const int64_t part = gradref__cbd_int8_part(&plan, 1);
        assert_true(part > 0 && part < OCpg);
        check_fast_against_reference_qs8(&c, GRADREF_PRECISION_DEFAULT, qs8 ? &sc : NULL);
        free_case(&c);
    }
}

/* ------------------------------------------------------------ MegEngine's blocked formats */

/* MegEngine's element addressing (dnn/src/naive/convolution/helper.h, compute2d and
 * compute2d_hwcd4), transcribed: logical data (n, c, h, w) of shape (N, C, H, W) in NCHW4
 * (N, C/4, H, W, 4) or NHWCD4 (N, H, C/4, W, 4). */
static int64_t me_data_offset(int32_t format, const int64_t *shape, int64_t n, int64_t c, int64_t h,
                              int64_t w) {
    const int64_t CB = shape[1] / 4, H = shape[2], W = shape[3];
    if (format == GRADREF_FORMAT_NCHW4) return (((n * CB + c / 4) * H + h) * W + w) * 4 + c % 4;
    return (((n * H + h) * CB + c / 4) * W + w) * 4 + c % 4;
}

/* ... and filter (g, oc, ic, fh, fw), oc and ic within the group: get_filter_addr of NCHW4
 * ((G,) OCpg, ICpg/4, FH, FW, 4) and of NHWCD4 ((G,) OCpg/4, FH, FW, ICpg, 4), its dot layout
 * ((G,) OCpg/4, FH, FW, ICpg/4, 4, 4) and the channel-wise (G/4, 1, FH, FW, 4). */
static int64_t me_filter_offset(int32_t format, const geometry *g, int64_t gi, int64_t oc,
                                int64_t ic, int64_t fh, int64_t fw) {
    const int64_t FH = g->K[0], FW = g->K[1], OCpg = g->OCpg, ICpg = g->ICpg;
    if (format == GRADREF_FORMAT_NCHW4) {
        const int64_t FS_IC = FH * FW, FS_OC = FS_IC * ICpg, FS_G = FS_OC * OCpg;
        return gi * FS_G + oc * FS_OC + ic / 4 * FS_IC * 4 + (fh * FW + fw) * 4 + ic % 4;
    }
    if (g->G > 1 && OCpg == 1 && ICpg == 1)
        return gi / 4 * (FH * FW * 4) + (fh * FW + fw) * 4 + gi % 4;
    const int64_t FS_SPATIAL = ICpg * 4, FS_OCB = FH * FW * FS_SPATIAL, FS_G = OCpg / 4 * FS_OCB;
    const int64_t base = gi * FS_G + oc / 4 * FS_OCB + (fh * FW + fw) * FS_SPATIAL;
    if (format == GRADREF_FORMAT_NHWCD4) return base + ic * 4 + oc % 4;
    return base + ic / 4 * 16 + oc % 4 * 4 + ic % 4;
}

/* The blocked copy of a plain case's tensor t (logical dense or grouped) at MegEngine's
 * offsets; is_filter picks the filter addressing. */
static void *me_blocked(const cbd_case *c, const gradref_tensor *t, int is_filter, int32_t format,
                        size_t *bytes) {
    const size_t esz = tu_dtype_size(t->dtype);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++)
        numel *= t->shape[d];
    *bytes = (size_t)numel * esz;
    char *out = malloc(*bytes + 1);
    memset(out, 0x77, *bytes);
    const geometry *g = &c->geo;
    for (int64_t e = 0; e < numel; e++) {
        int64_t idx[5], rest = e, at;
        for (int d = t->ndim - 1; d >= 0; d--) {
            idx[d] = rest % t->shape[d];
            rest /= t->shape[d];
        }
        if (!is_filter)
            at = me_data_offset(format, t->shape, idx[0], idx[1], idx[2], idx[3]);
        else if (t->ndim == 5)
            at = me_filter_offset(format, g, idx[0], idx[1], idx[2], idx[3], idx[4]);
        else
            at = me_filter_offset(format, g, 0, idx[0], idx[1], idx[2], idx[3]);
        memcpy(out + (size_t)at * esz, (const char *)t->data + tu_offset(t, idx), esz);
    }
    return out;
}

typedef struct blocked_call {
    cbd_case *c;
    gradref_tensor filter, diff, grad;
    const gradref_qs8_scales *qs8;
} blocked_call;

static gradref_status call_blocked(void *ctx, const gradref_exec *e) {
    blocked_call *b = ctx;
    if (b->qs8)
        return gradref_conv_backprop_data_qs8(&b->c->params, b->qs8, &b->filter, &b->diff, &b->grad,
                                              e);
    return gradref_conv_backprop_data(&b->c->params, &b->filter, &b->diff, &b->grad, e);
}

/* NCHW4, NHWCD4 and its dot layout, dense, grouped and channel-wise filters, F32, F16, I8 ->
 * I32 and QuantizedS8, both modes: the tensors laid out by MegEngine's addressing (written
 * above, not by the library) and described by the init helpers give the plain call's bits at
 * 1 to 3 threads, with no, the reported and a too-small workspace. */
static void test_blocked_formats(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(4242);
    static const int32_t formats[3] = {GRADREF_FORMAT_NCHW4, GRADREF_FORMAT_NHWCD4,
                                       GRADREF_FORMAT_NHWCD4_DOT};
    static const int32_t dtypes[4][2] = {{GRADREF_F32, GRADREF_F32},
                                         {GRADREF_F16, GRADREF_F16},
                                         {GRADREF_I8, GRADREF_I32},
                                         {GRADREF_I8, GRADREF_I8}};
    const gradref_qs8_scales scales = {0.02f, 0.03f, 0.05f};
    int runs = 0;
    for (int f = 0; f < 3; f++)
        for (int kind = 0; kind < 3; kind++) /* dense, grouped, channel-wise */
            for (int dt = 0; dt < 4; dt++) {
                if (kind == 2 && f == 0) continue; /* NCHW4 has no channel-wise cbd_layout */
                const int64_t G = kind == 0 ? 1 : kind == 1 ? 2 : 8;
                const int64_t ICpg = kind == 2 ? 1 : 8, OCpg = kind == 2 ? 1 : 4;
                const int32_t mode =
                    (f + dt) % 2 ? GRADREF_CONV_CONVOLUTION : GRADREF_CONV_CROSS_CORRELATION;
                geometry g = geo2(2, ICpg, 5, 4, OCpg, 3, 2, 1 + dt % 2, 1, 1, G, mode);
                g.extra[0] = g.stride[0] - 1;
                cbd_case c;
                make_case(&c, &g, dtypes[dt][0], dtypes[dt][1], kind ? F_GROUPED : F_DENSE, D_NCHW,
                          0, &r);
                blocked_call b = {&c, c.filter, c.diff, c.grad, dt == 3 ? &scales : NULL};
                b.filter = c.filter, b.diff = c.diff, b.grad = c.grad;
                assert_int_equal(call_blocked(&b, NULL), GRADREF_OK); /* the plain call */
                size_t fb, db, gb;
                void *fbuf = me_blocked(&c, &c.filter, 1, formats[f], &fb);
                void *dbuf = me_blocked(&c, &c.diff, 0, formats[f], &db);
                void *want = me_blocked(&c, &c.grad, 0, formats[f], &gb);
                void *gbuf = malloc(gb);
                assert_int_equal(gradref_conv_filter_init_format(&b.filter, fbuf, dtypes[dt][0],
                                                                 formats[f], c.filter.ndim,
                                                                 c.filter.shape),
                                 GRADREF_OK);
                assert_int_equal(gradref_tensor_init_format(&b.diff, dbuf, dtypes[dt][0],
                                                            formats[f], c.diff.shape),
                                 GRADREF_OK);
                assert_int_equal(gradref_tensor_init_format(&b.grad, gbuf, dtypes[dt][1],
                                                            formats[f], c.grad.shape),
                                 GRADREF_OK);
                size_t ws_bytes = 0;
                assert_int_equal(b.qs8
                                     ? gradref_conv_backprop_data_qs8_workspace_size(
                                           &c.params, b.qs8, &b.filter, &b.diff, &b.grad, &ws_bytes)
                                     : gradref_conv_backprop_data_workspace_size(
                                           &c.params, &b.filter, &b.diff, &b.grad, &ws_bytes),
                                 GRADREF_OK);
                char *ws = malloc(ws_bytes);
                static const int threads[] = TU_THREAD_COUNTS;
                for (int t = 0; t < 3; t++)
                    for (int w = 0; w < 2; w++) {
                        gradref_exec e = {w ? ws : NULL, w ? ws_bytes : 0, threads[t], 0};
                        memset(gbuf, 0x5a, gb);
                        gradref_status s = call_blocked(&b, &e);
                        if (s != GRADREF_OK)
                            fail_msg("format %d kind %d dtype %d: %s", (int)formats[f], kind, dt,
                                     gradref_last_error());
                        if (memcmp(gbuf, want, gb) != 0)
                            fail_msg("format %d kind %d dtype %d threads %d workspace %d: the "
                                     "blocked grad differs from the plain call's",
                                     (int)formats[f], kind, dt, threads[t], w);
                        runs++;
                    }
                void *outs[1] = {gbuf};
                tu_expect_tiny_workspace_same_bits(call_blocked, &b, outs, &gb, 1);
                free(ws);
                free(fbuf);
                free(dbuf);
                free(want);
                free(gbuf);
                free_case(&c);
            }
    assert_true(runs == 32 * 6);
}

/* The descriptors the helpers give, written out; blocked tensors through gradref_copy; the
 * other operators and bad block slots refused, outputs untouched. */
static void test_blocked_descriptors(void **state) {
    (void)state;
    const int64_t shape[4] = {2, 8, 3, 5};
    gradref_tensor t;
    assert_int_equal(gradref_tensor_init_format(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NCHW4, shape),
                     GRADREF_OK);
    const int64_t want_nchw4[6] = {120, -60, 20, 4, 4, 1}; /* strides, then the slot (4, 1) */
    assert_int_equal(t.ndim, 4);
    for (int d = 0; d < 4; d++)
        assert_int_equal(t.strides[d], want_nchw4[d]);
    assert_int_equal(t.shape[4], 4);
    assert_int_equal(t.strides[4], 1);
    assert_int_equal(
        gradref_tensor_init_format(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NHWCD4, shape),
        GRADREF_OK);
    const int64_t want_nhwcd4[4] = {120, -20, 40, 4}; /* (N, H, C/4, W, 4) */
    for (int d = 0; d < 4; d++)
        assert_int_equal(t.strides[d], want_nhwcd4[d]);
    const int64_t fshape[4] = {8, 12, 3, 2}; /* NHWCD4_DOT (OC/4, FH, FW, IC/4, 4, 4) */
    assert_int_equal(
        gradref_conv_filter_init_format(&t, NULL, GRADREF_I8, GRADREF_FORMAT_NHWCD4_DOT, 4, fshape),
        GRADREF_OK);
    const int64_t want_dot[8] = {-288, -16, 96, 48, 4, 4, 4, 1};
    for (int d = 0; d < 4; d++)
        assert_int_equal(t.strides[d], want_dot[d]);
    assert_int_equal(t.shape[4], 4);
    assert_int_equal(t.strides[4], want_dot[6]);
    assert_int_equal(t.strides[5], want_dot[7]);
    const int64_t odd[4] = {2, 6, 3, 5};
    gradref_tensor untouched;
    memset(&untouched, 0x33, sizeof untouched);
    t = untouched;
    tu_expect_status(gradref_tensor_init_format(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NCHW4, odd),
                     GRADREF_ERR_SHAPE, "tensor_init_format", "divisible");
    assert_memory_equal(&t, &untouched, sizeof t);
    tu_expect_status(
        gradref_conv_filter_init_format(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NCDHW, 4, fshape),
        GRADREF_ERR_PARAM, "conv_filter_init_format", "NCHW4");

    /* gradref_copy: plain -> NCHW4 -> NHWCD4 -> plain keeps every value */
    float plain[240], back[240], b4[240], d4[240];
    for (int i = 0; i < 240; i++)
        plain[i] = (float)i - 100.5f;
    gradref_tensor tp, tb, td, tq;
    assert_int_equal(gradref_tensor_init(&tp, plain, GRADREF_F32, 4, shape), GRADREF_OK);
    assert_int_equal(gradref_tensor_init_format(&tb, b4, GRADREF_F32, GRADREF_FORMAT_NCHW4, shape),
                     GRADREF_OK);
    assert_int_equal(gradref_tensor_init_format(&td, d4, GRADREF_F32, GRADREF_FORMAT_NHWCD4, shape),
                     GRADREF_OK);
    assert_int_equal(gradref_tensor_init(&tq, back, GRADREF_F32, 4, shape), GRADREF_OK);
    assert_int_equal(gradref_copy(&tp, &tb, NULL), GRADREF_OK);
    assert_int_equal(gradref_copy(&tb, &td, NULL), GRADREF_OK);
    assert_int_equal(gradref_copy(&td, &tq, NULL), GRADREF_OK);
    assert_memory_equal(plain, back, sizeof plain);
    for (int64_t n = 0; n < 2; n++) /* NCHW4's memory is MegEngine's */
        for (int64_t c = 0; c < 8; c++)
            for (int64_t h = 0; h < 3; h++)
                for (int64_t w = 0; w < 5; w++)
                    assert_true(b4[me_data_offset(GRADREF_FORMAT_NCHW4, shape, n, c, h, w)] ==
                                plain[((n * 8 + c) * 3 + h) * 5 + w]);
    /* blocks of 4 against blocks of 8 on one dim */
    gradref_tensor t8 = tb;
    t8.shape[4] = 8;
    t8.strides[1] = -120;
    memset(back, 0x11, sizeof back);
    tu_expect_status(gradref_copy(&tb, &t8, NULL), GRADREF_ERR_PARAM, "copy", "block");
    /* a block that does not divide its dim, a negative stride inside blocks */
    gradref_tensor bad = tb;
    bad.shape[4] = 3;
    tu_expect_status(gradref_copy(&bad, &tq, NULL), GRADREF_ERR_SHAPE, "copy", "divide");
    bad = tb;
    bad.strides[4] = -1;
    tu_expect_status(gradref_copy(&bad, &tq, NULL), GRADREF_ERR_STRIDE, "copy", "inside");
    tu_expect_untouched(back, sizeof back, 0x11, "copy's dst");
    /* an operator that reads no blocked tensor refuses one */
    gradref_tensor in5, out5;
    const int64_t s5[5] = {1, 8, 2, 2, 2};
    float x5[64], o5[64];
    memset(o5, 0x22, sizeof o5);
    assert_int_equal(gradref_tensor_init(&in5, x5, GRADREF_F32, 5, s5), GRADREF_OK);
    out5 = in5;
    out5.data = o5;
    out5.strides[1] = -32;
    out5.shape[5] = 4;
    out5.strides[5] = 1;
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    for (int j = 0; j < 3; j++)
        p.stride[j] = p.dilation[j] = 1;
    const int64_t ws[5] = {8, 8, 1, 1, 1};
    gradref_tensor dw;
    float wbuf[64];
    assert_int_equal(gradref_tensor_init(&dw, wbuf, GRADREF_F32, 5, ws), GRADREF_OK);
    tu_expect_status(gradref_conv3d_backprop_filter(&p, &out5, &in5, &dw, NULL), GRADREF_ERR_STRIDE,
                     "conv3d_backprop_filter", "blocked");
    /* conv_backprop_data: a blocked grad overlapping itself */
    cbd_case c;
    tu_rng r = tu_rng_make(99);
    geometry g = geo2(1, 4, 3, 3, 4, 1, 1, 1, 0, 1, 1, 0);
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, F_DENSE, D_NCHW, 0, &r);
    gradref_tensor grad;
    assert_int_equal(gradref_tensor_init_format(&grad, c.grad.data, GRADREF_F32,
                                                GRADREF_FORMAT_NCHW4, c.grad.shape),
                     GRADREF_OK);
    grad.strides[4] = 0; /* every channel of a block on one element */
    memset(c.grad.data, 0x44, c.bytes[2]);
    tu_expect_status(gradref_conv_backprop_data(&c.params, &c.filter, &c.diff, &grad, NULL),
                     GRADREF_ERR_STRIDE, "conv_backprop_data", "overlapping");
    tu_expect_untouched(c.grad.data, c.bytes[2], 0x44, "grad");
    free_case(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example),
        cmocka_unit_test(test_adjoint_identity),
        cmocka_unit_test(test_small_integers_exact),
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_no_workspace_blocks),
        cmocka_unit_test(test_term_outputs),
        cmocka_unit_test(test_no_workspace_tiles),
        cmocka_unit_test(test_nan_bits),
        cmocka_unit_test(test_signed_zeros),
        cmocka_unit_test(test_huge_stride),
        cmocka_unit_test(test_threads_bounded_by_work),
        cmocka_unit_test(test_megengine_list),
        cmocka_unit_test(test_gemm_shapes),
        cmocka_unit_test(test_direct_tiles),
        cmocka_unit_test(test_nonfinite_filter),
        cmocka_unit_test(test_depthwise_strips),
        cmocka_unit_test(test_depthwise_rows),
        cmocka_unit_test(test_depthwise_lanes),
        cmocka_unit_test(test_depthwise_channels_last),
        cmocka_unit_test(test_depthwise_3d),
        cmocka_unit_test(test_depthwise_strided),
        cmocka_unit_test(test_depthwise_depth_past_pad),
        cmocka_unit_test(test_stride2_columns),
        cmocka_unit_test(test_channels_past_chunk),
        cmocka_unit_test(test_tile_columns),
        cmocka_unit_test(test_aliased_planes),
        cmocka_unit_test(test_packed_tiles),
        cmocka_unit_test(test_panels_per_thread),
        cmocka_unit_test(test_empty_sizes),
        cmocka_unit_test(test_workspace),
        cmocka_unit_test(test_golden_pytorch),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_strict_megengine),
        cmocka_unit_test(test_megengine_default),
        cmocka_unit_test(test_megengine_lanes),
        cmocka_unit_test(test_megengine_lanes_edges),
        cmocka_unit_test(test_megengine_f16_rounding),
        cmocka_unit_test(test_qs8),
        cmocka_unit_test(test_int32_inputs),
        cmocka_unit_test(test_int8_sum_bound),
        cmocka_unit_test(test_int8_parts),
        cmocka_unit_test(test_int8_words_variant),
        cmocka_unit_test(test_term_threads),
        cmocka_unit_test(test_blocked_formats),
        cmocka_unit_test(test_blocked_descriptors),
    };
    tu_seed();
    return TU_RUN_GROUP("conv_backprop_data", tests);
}
