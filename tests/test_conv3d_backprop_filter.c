/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter: the all-ones example, the adjoint identity against a forward conv3d
 * written here (TF's filter-gradient table, random geometries, every layout), the 2-D
 * degenerate case, the blocked sum's accuracy, SAME padding, CANN's transpose rule, threads,
 * dtypes, empty sizes and errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv3d_backprop_filter/c3f_counter.h"
#include "common/convert.h"
#include "common/gemm_kernels.h"
#include "conv3d_backprop_filter/c3f_internal.h"
#include "conv3d_backprop_filter/c3f_kernels.h"
#include "test_util.h"

typedef struct geometry {
    int64_t N, G, Cin_g, Cout_g;
    int64_t K[3], I[3], stride[3], dil[3], pb[3], pe[3];
    int32_t mode;
} geometry;

typedef struct c3f_case {
    geometry geo;
    gradref_conv_params params;
    int64_t O[3];
    gradref_tensor x, dy, dw;
    void *buf[3];
    size_t bytes[3];
} c3f_case;

static int64_t out_size(const geometry *g, int j) {
    return (g->I[j] + g->pb[j] + g->pe[j] - g->dil[j] * (g->K[j] - 1) - 1) / g->stride[j] + 1;
}

/* fill's values: uniform in [-1, 1], small integers, or mostly tiny (+-1e-30, +-0, now and then
 * +-1) so that products underflow and sums end at zeros of either sign */
enum { VALUES_UNIFORM = 0, VALUES_SMALL_INTS = 1, VALUES_TINY = 2 };

static double value(int kind, tu_rng *r) {
    if (kind == VALUES_SMALL_INTS) return (double)tu_range(r, -3, 3);
    if (kind == VALUES_UNIFORM) return tu_uniform(r) * 2 - 1;
    const int64_t u = tu_range(r, 0, 19);
    return (tu_range(r, 0, 1) ? -1.0 : 1.0) * (u < 14 ? 1e-30 : u < 18 ? 0.0 : 1.0);
}

static void fill(const gradref_tensor *t, int kind, tu_rng *r) {
    int64_t i[5];
    for (i[0] = 0; i[0] < t->shape[0]; i[0]++)
        for (i[1] = 0; i[1] < t->shape[1]; i[1]++)
            for (i[2] = 0; i[2] < t->shape[2]; i[2]++)
                for (i[3] = 0; i[3] < t->shape[3]; i[3]++)
                    for (i[4] = 0; i[4] < t->shape[4]; i[4]++)
                        tu_put(t, i, value(kind, r));
}

/* data layouts 0 NCDHW, 1 NDHWC; dw layouts 0 NCDHW, 1 NDHWC, 2 DHWCN (through the formats) */
static void make_case(c3f_case *c, const geometry *g, int32_t in, int32_t out, int dlayout,
                      int wlayout, tu_rng *r) {
    memset(c, 0, sizeof *c);
    c->geo = *g;
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    p.mode = g->mode;
    p.groups = (int32_t)g->G;
    for (int j = 0; j < 3; j++) {
        p.stride[j] = g->stride[j];
        p.dilation[j] = g->dil[j];
        p.pad[2 * j] = g->pb[j];
        p.pad[2 * j + 1] = g->pe[j];
        c->O[j] = out_size(g, j);
    }
    c->params = p;
    const int64_t xs[5] = {g->N, g->G * g->Cin_g, g->I[0], g->I[1], g->I[2]};
    const int64_t ys[5] = {g->N, g->G * g->Cout_g, c->O[0], c->O[1], c->O[2]};
    const int64_t ws[5] = {g->G * g->Cout_g, g->Cin_g, g->K[0], g->K[1], g->K[2]};
    static const int last[5] = {0, 2, 3, 4, 1};
    static const int dhwcn[5] = {2, 3, 4, 1, 0};
    const int *dp = dlayout ? last : NULL, *wp = wlayout == 1 ? last : wlayout == 2 ? dhwcn : NULL;
    c->buf[0] = tu_make_tensor(&c->x, in, 5, xs, dp, NULL, &c->bytes[0], r);
    c->buf[1] = tu_make_tensor(&c->dy, in, 5, ys, dp, NULL, &c->bytes[1], r);
    c->buf[2] = tu_make_tensor(&c->dw, out, 5, ws, wp, NULL, &c->bytes[2], r);
    fill(&c->x, VALUES_UNIFORM, r);
    fill(&c->dy, VALUES_UNIFORM, r);
}

static void free_case(c3f_case *c) {
    for (int i = 0; i < 3; i++)
        free(c->buf[i]);
}

static void run_ok(c3f_case *c, const gradref_exec *e) {
    gradref_status s = gradref_conv3d_backprop_filter(&c->params, &c->x, &c->dy, &c->dw, e);
    if (s != GRADREF_OK) fail_msg("%s: %s", gradref_status_string(s), gradref_last_error());
}

static double at5(const gradref_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
    int64_t i[5] = {a, b, c, d, e};
    return tu_get(t, i);
}

/* <conv3d(x, w), dy> with the test's own forward, for a weight tensor w shaped like dw. */
static double forward_dot(const c3f_case *c, const gradref_tensor *w) {
    const geometry *g = &c->geo;
    double total = 0;
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t co = 0; co < g->G * g->Cout_g; co++) {
            const int64_t gg = co / g->Cout_g;
            for (int64_t od = 0; od < c->O[0]; od++)
                for (int64_t oh = 0; oh < c->O[1]; oh++)
                    for (int64_t ow = 0; ow < c->O[2]; ow++) {
                        double y = 0;
                        const int64_t o[3] = {od, oh, ow};
                        for (int64_t ci = 0; ci < g->Cin_g; ci++)
                            for (int64_t kd = 0; kd < g->K[0]; kd++)
                                for (int64_t kh = 0; kh < g->K[1]; kh++)
                                    for (int64_t kw = 0; kw < g->K[2]; kw++) {
                                        const int64_t k[3] = {kd, kh, kw};
                                        int64_t i[3], ok = 1;
                                        for (int j = 0; j < 3; j++) {
                                            int64_t kp = g->mode ? g->K[j] - 1 - k[j] : k[j];
                                            i[j] = o[j] * g->stride[j] - g->pb[j] + kp * g->dil[j];
                                            ok &= i[j] >= 0 && i[j] < g->I[j];
                                        }
                                        if (ok)
                                            y += at5(&c->x, n, gg * g->Cin_g + ci, i[0], i[1],
                                                     i[2]) *
                                                 at5(w, co, ci, kd, kh, kw);
                                    }
                        total += y * at5(&c->dy, n, co, od, oh, ow);
                    }
        }
    return total;
}

static double dot_dw(const c3f_case *c, const gradref_tensor *w) {
    double s = 0;
    int64_t i[5];
    for (i[0] = 0; i[0] < c->dw.shape[0]; i[0]++)
        for (i[1] = 0; i[1] < c->dw.shape[1]; i[1]++)
            for (i[2] = 0; i[2] < c->dw.shape[2]; i[2]++)
                for (i[3] = 0; i[3] < c->dw.shape[3]; i[3]++)
                    for (i[4] = 0; i[4] < c->dw.shape[4]; i[4]++)
                        s += tu_get(&c->dw, i) * tu_get(w, i);
    return s;
}

static void check_adjoint(c3f_case *c, double tol) {
    run_ok(c, NULL);
    gradref_tensor w = c->dw;
    int64_t shape[5];
    for (int d = 0; d < 5; d++)
        shape[d] = w.shape[d];
    tu_rng r = tu_rng_make(55);
    void *wb = tu_make_tensor(&w, GRADREF_F64, 5, shape, NULL, NULL, NULL, &r);
    fill(&w, VALUES_UNIFORM, &r);
    double lhs = forward_dot(c, &w), rhs = dot_dw(c, &w);
    if (fabs(lhs - rhs) > tol * (1 + fabs(lhs)))
        fail_msg("<conv3d(x, w), dy> = %.17g but <w, dw> = %.17g", lhs, rhs);
    free(wb);
}

static geometry geo(int64_t N, int64_t Cin, int64_t Cout, int64_t G, const int64_t *I,
                    const int64_t *K, const int64_t *stride, const int64_t *pad) {
    geometry g;
    memset(&g, 0, sizeof g);
    g.N = N, g.G = G, g.Cin_g = Cin / G, g.Cout_g = Cout / G;
    for (int j = 0; j < 3; j++) {
        g.I[j] = I[j], g.K[j] = K[j], g.stride[j] = stride[j], g.dil[j] = 1;
        g.pb[j] = pad ? pad[2 * j] : 0, g.pe[j] = pad ? pad[2 * j + 1] : 0;
    }
    return g;
}

/* ------------------------------------------------------------ known values */

/* CANN's example: x = dy = ones (2, 2, 7, 7, 7), w (2, 2, 1, 1, 1): every dW = 2 * 343 = 686. */
static void test_all_ones(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(1);
    const int64_t I[3] = {7, 7, 7}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1};
    geometry g = geo(2, 2, 2, 1, I, K, S, NULL);
    for (int dt = 0; dt < 4; dt++) {
        c3f_case c;
        make_case(&c, &g, dt, dt == GRADREF_F64 ? GRADREF_F64 : GRADREF_F32, dt % 2, dt % 3, &r);
        int64_t i[5];
        for (int t = 0; t < 2; t++) {
            const gradref_tensor *v = t ? &c.dy : &c.x;
            for (i[0] = 0; i[0] < 2; i[0]++)
                for (i[1] = 0; i[1] < 2; i[1]++)
                    for (i[2] = 0; i[2] < 7; i[2]++)
                        for (i[3] = 0; i[3] < 7; i[3]++)
                            for (i[4] = 0; i[4] < 7; i[4]++)
                                tu_put(v, i, 1);
        }
        run_ok(&c, NULL);
        for (int co = 0; co < 2; co++)
            for (int ci = 0; ci < 2; ci++)
                assert_true(at5(&c.dw, co, ci, 0, 0, 0) == 686);
        free_case(&c);
    }
}

/* TF's conv_ops_3d_test.py filter-gradient cases (reference §3.1): VALID and SAME (pads from
 * gradref_conv_pads_same), strides 1 to 3, kernel == input, NDHWC data and DHWIO filters. */
static void test_tf_table(void **state) {
    (void)state;
    static const int64_t cases[][10] = {
        /* batch, D, H, W, kD, kH, kW, Cin, Cout, stride; padding SAME when the row is >= 8 */
        {4, 4, 6, 5, 2, 2, 2, 2, 3, 1}, {2, 7, 6, 5, 2, 2, 2, 2, 3, 2},
        {2, 4, 4, 7, 4, 4, 4, 2, 3, 3}, {2, 3, 6, 5, 2, 2, 2, 2, 3, 1},
        {4, 7, 3, 5, 2, 2, 2, 2, 3, 2}, {2, 9, 4, 7, 4, 4, 4, 2, 3, 3},
        {2, 5, 4, 3, 5, 4, 3, 2, 3, 1}, {2, 4, 6, 5, 2, 2, 2, 8, 2, 1}};
    static const int same[8] = {0, 0, 0, 1, 1, 1, 0, 0};
    tu_rng r = tu_rng_make(2);
    for (int i = 0; i < 8; i++) {
        const int64_t *a = cases[i];
        const int64_t I[3] = {a[1], a[2], a[3]}, K[3] = {a[4], a[5], a[6]},
                      S[3] = {a[9], a[9], a[9]};
        geometry g = geo(a[0], a[7], a[8], 1, I, K, S, NULL);
        if (same[i]) {
            gradref_conv_params p;
            memset(&p, 0, sizeof p);
            for (int j = 0; j < 3; j++)
                p.stride[j] = S[j], p.dilation[j] = 1;
            assert_int_equal(gradref_conv_pads_same(&p, 3, I, K), GRADREF_OK);
            for (int j = 0; j < 3; j++)
                g.pb[j] = p.pad[2 * j], g.pe[j] = p.pad[2 * j + 1];
        }
        c3f_case c;
        make_case(&c, &g, GRADREF_F64, GRADREF_F64, 1, 2, &r);
        if (same[i])
            for (int j = 0; j < 3; j++) /* SAME: out = ceil(in / stride) */
                assert_int_equal(c.O[j], (I[j] + S[j] - 1) / S[j]);
        check_adjoint(&c, 1e-12);
        free_case(&c);
    }
}

/* Din = 1 with a kernel depth of 1 is a 2-D weight gradient, computed here directly. */
static void test_2d_degenerate(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(3);
    const int64_t I[3] = {1, 9, 11}, K[3] = {1, 3, 4}, S[3] = {1, 2, 1}, P[6] = {0, 0, 1, 1, 2, 1};
    geometry g = geo(3, 4, 6, 2, I, K, S, P);
    c3f_case c;
    make_case(&c, &g, GRADREF_F64, GRADREF_F64, 0, 0, &r);
    run_ok(&c, NULL);
    for (int64_t co = 0; co < 6; co++)
        for (int64_t ci = 0; ci < 2; ci++)
            for (int64_t kh = 0; kh < 3; kh++)
                for (int64_t kw = 0; kw < 4; kw++) {
                    double want = 0;
                    for (int64_t n = 0; n < 3; n++)
                        for (int64_t oh = 0; oh < c.O[1]; oh++)
                            for (int64_t ow = 0; ow < c.O[2]; ow++) {
                                int64_t ih = oh * 2 - 1 + kh, iw = ow - 2 + kw;
                                if (ih < 0 || ih >= 9 || iw < 0 || iw >= 11) continue;
                                want += at5(&c.x, n, co / 3 * 2 + ci, 0, ih, iw) *
                                        at5(&c.dy, n, co, 0, oh, ow);
                            }
                    double got = at5(&c.dw, co, ci, 0, kh, kw);
                    if (fabs(got - want) > 1e-12 * (1 + fabs(want)))
                        fail_msg("dw[%lld,%lld,0,%lld,%lld] = %.17g, want %.17g", (long long)co,
                                 (long long)ci, (long long)kh, (long long)kw, got, want);
                }
    free_case(&c);
}

/* ------------------------------------------------------------ properties */

static geometry random_geometry(tu_rng *r) {
    geometry g;
    memset(&g, 0, sizeof g);
    g.G = tu_range(r, 1, 3);
    g.N = tu_range(r, 1, 2);
    g.Cin_g = tu_range(r, 1, 3);
    g.Cout_g = tu_range(r, 1, 3);
    g.mode = (int32_t)tu_range(r, 0, 1);
    for (int j = 0; j < 3; j++) {
        g.K[j] = tu_range(r, 1, 3);
        g.stride[j] = tu_range(r, 1, 3);
        g.dil[j] = tu_range(r, 1, 2);
        g.pb[j] = tu_range(r, 0, 2);
        g.pe[j] = tu_range(r, 0, 2);
        g.I[j] = tu_range(r, 1, 6);
        while (g.I[j] + g.pb[j] + g.pe[j] < g.dil[j] * (g.K[j] - 1) + 1)
            g.I[j]++;
    }
    return g;
}

/* The adjoint identity on random geometries, in every data and dw layout. */
static void test_adjoint_identity(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(4);
    for (int iter = 0; iter < 36; iter++) {
        geometry g = random_geometry(&r);
        c3f_case c;
        make_case(&c, &g, GRADREF_F64, GRADREF_F64, iter % 2, iter % 3, &r);
        check_adjoint(&c, 1e-12);
        free_case(&c);
    }
}

/* The fast path at every GEMM kernel level and with 1, 2, 3 threads gives the reference's bits,
 * and so does every other strategy that applies. */
static void check_fast_against_reference(c3f_case *c, int32_t precision) {
    static const int threads[] = TU_THREAD_COUNTS;
    gradref_tensor want = c->dw;
    void *wb = malloc(c->bytes[2]);
    want.data = wb;
    gradref__c3f_plan plan;
    assert_int_equal(gradref__c3f_validate(&c->params, &c->x, &c->dy, &want, &plan), GRADREF_OK);
    plan.precision = precision;
    gradref__c3f_ref(&plan);
    tu_expect_canonical_nans(&want, "dw");
    for (int kernel = 0; kernel < 3; kernel++)
        for (int t = 0; t < 3; t++) {
            gradref__c3f_plan q;
            assert_int_equal(gradref__c3f_validate(&c->params, &c->x, &c->dy, &c->dw, &q),
                             GRADREF_OK);
            q.precision = precision;
            q.max_isa = kernel;
            const size_t need = gradref__c3f_fast_workspace(&q, q.precision, threads[t]);
            char *block = malloc(need + 64);
            /* a part of the workspace the run fails to write keeps this, not an earlier run's
             * (equal) sums */
            memset(block, 0x5a, need + 64);
            memset(c->dw.data, 0xa5, c->bytes[2]);
            gradref__c3f_fast(&q, block + (64 - (uintptr_t)block % 64) % 64, threads[t]);
            free(block);
            tu_expect_same_bits(&c->dw, &want, "dw");
            static const char *const ran[] = {"gemm", "reference", NULL};
            if (!q.zero_only)
                tu_expect_strategies(&gradref__c3f_fast_path, &q, precision, threads[t], ran,
                                     &c->dw, &want, c->bytes[2], 0xa5);
        }
    free(wb);
}

/* Every layout, thread count and precision gives the reference's bits; F16/BF16 inputs with an
 * F32 or a 16-bit dw. */
static void test_threads_layouts_dtypes(void **state) {
    (void)state;
    static const int32_t in[5] = {GRADREF_F32, GRADREF_F64, GRADREF_F16, GRADREF_BF16, GRADREF_F16};
    static const int32_t out[5] = {GRADREF_F32, GRADREF_F64, GRADREF_F32, GRADREF_BF16,
                                   GRADREF_F16};
    tu_rng r = tu_rng_make(5);
    for (int iter = 0; iter < 30; iter++) {
        geometry g = random_geometry(&r);
        const int d = iter % 5;
        c3f_case c;
        make_case(&c, &g, in[d], out[d], iter % 2, iter % 3, &r);
        check_fast_against_reference(&c, iter % 4 == 3 ? GRADREF_PRECISION_HIGH : 0);
        free_case(&c);
    }
}

/* Signs of zero: taps in the padding add nothing, not even the +0 of 0 * dy that turns a -0 sum
 * (an underflowed product) into +0. 1-D: x {0, 1e-30}, dy {-1e-30, 1}, kernel 2, end pad 1:
 * dw[1] = fma(1e-30, -1e-30, +0) = -0 through the public call with and without a workspace;
 * then random geometries of tiny values (F32, BF16, F16; DEFAULT and HF32) against the reference
 * on every path, level and thread count. */
static void test_signed_zeros(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(45);
    const int64_t size[3] = {1, 1, 2}, kernel[3] = {1, 1, 2}, unit[3] = {1, 1, 1};
    const int64_t pads[6] = {0, 0, 0, 0, 0, 1};
    geometry g = geo(1, 1, 1, 1, size, kernel, unit, pads);
    c3f_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
    const float x[2] = {0.0f, 1e-30f}, dy[2] = {-1e-30f, 1.0f};
    memcpy(c.x.data, x, sizeof x);
    memcpy(c.dy.data, dy, sizeof dy);
    for (int t = 1; t <= 2; t++)
        for (int tiny = 0; tiny < 2; tiny++) { /* NULL (the fast path), then one byte */
            char byte;
            const gradref_exec e = {tiny ? &byte : NULL, (size_t)tiny, t,
                                    GRADREF_PRECISION_DEFAULT};
            memset(c.dw.data, 0x55, c.bytes[2]);
            run_ok(&c, &e);
            const float dw1 = ((const float *)c.dw.data)[1];
            assert_true(dw1 == 0 && signbit(dw1));
        }
    free_case(&c);
    static const int32_t in[3] = {GRADREF_F32, GRADREF_BF16, GRADREF_F16};
    for (int iter = 0; iter < 36; iter++) {
        g = random_geometry(&r);
        c3f_case t;
        make_case(&t, &g, in[iter % 3], iter % 6 == 1 ? GRADREF_BF16 : GRADREF_F32, iter % 2,
                  iter % 3, &r);
        fill(&t.x, VALUES_TINY, &r);
        fill(&t.dy, VALUES_TINY, &r);
        check_fast_against_reference(&t, iter % 4 == 0 && in[iter % 3] == GRADREF_F32
                                             ? GRADREF_PRECISION_HF32
                                             : GRADREF_PRECISION_DEFAULT);
        free_case(&t);
    }
}

/* The NaN rule: x and dy holding signalling and quiet NaNs of either sign with payloads and
 * Infs: the reference gives the canonical NaN, every kernel level and thread count its bits. */
static void test_nan_bits(void **state) {
    (void)state;
    static const int32_t in[5] = {GRADREF_F32, GRADREF_F64, GRADREF_F16, GRADREF_BF16, GRADREF_F16};
    static const int32_t out[5] = {GRADREF_F32, GRADREF_F64, GRADREF_F32, GRADREF_BF16,
                                   GRADREF_F16};
    tu_rng r = tu_rng_make(41);
    for (int iter = 0; iter < 30; iter++) {
        geometry g = random_geometry(&r);
        const int d = iter % 5;
        c3f_case c;
        make_case(&c, &g, in[d], out[d], iter % 2, iter % 3, &r);
        tu_sprinkle_specials(iter % 3 ? &c.dy : &c.x, &r, 5);
        if (iter % 4 == 1) tu_sprinkle_specials(&c.x, &r, 9);
        const int32_t precision = iter % 6 == 5             ? GRADREF_PRECISION_HIGH
                                  : d == 0 && iter % 3 == 1 ? GRADREF_PRECISION_HF32
                                                            : GRADREF_PRECISION_DEFAULT;
        check_fast_against_reference(&c, precision);
        free_case(&c);
    }
}

/* One Inf or NaN in dy, at a corner whose taps fall partly in the padding: the reference skips
 * those taps' terms, so their dw stays finite. A path that multiplied the padding's zeros by it
 * would give NaN there: every path must see the value and take the reference's terms (F32 in
 * each layout, where the no-workspace path checks dy by vector rows). */
static void test_lone_nonfinite_dy(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(44);
    const int64_t I[3] = {3, 4, 5}, K[3] = {3, 3, 3}, S[3] = {1, 1, 1}, P[6] = {1, 1, 1, 1, 1, 1};
    geometry g = geo(1, 2, 3, 1, I, K, S, P);
    for (int iter = 0; iter < 6; iter++) {
        c3f_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, iter % 3, iter % 2, &r);
        const int64_t corner[5] = {0, iter % 3, iter % 2 ? 2 : 0, 0, iter % 2 ? 4 : 0};
        tu_put(&c.dy, corner, iter < 3 ? NAN : (iter % 2 ? -INFINITY : INFINITY));
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Strides so large that a tap's far positions lie deep in the end pads (a fuzzer's case): the
 * no-workspace path formed x offsets of those positions before knowing they lie outside x and
 * overflowed int64 (UBSan in the sanitizer build). Both layouts, default and HF32. */
static void test_huge_strides_into_pads(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(59);
    const int64_t I[3] = {3, 1, 3}, K[3] = {1, 1, 1};
    const int64_t S[3] = {(int64_t)1 << 59, (int64_t)1 << 57, (int64_t)1 << 23};
    const int64_t P[6] = {0, ((int64_t)1 << 60) - 2, 0, (int64_t)1 << 57,
                          0, ((int64_t)1 << 24) - 2};
    geometry g = geo(1, 4, 2, 2, I, K, S, P);
    g.mode = GRADREF_CONV_CONVOLUTION;
    for (int layout = 0; layout < 2; layout++) {
        c3f_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, layout, layout, &r);
        assert_true(c.O[0] == 3 && c.O[1] == 2 && c.O[2] == 3);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        check_fast_against_reference(&c, GRADREF_PRECISION_HF32);
        free_case(&c);
    }
}

/* GRADREF_PADDED_ZEROS is the call on x zero-filled by hand with no pads: the same NaNs (a
 * non-finite dy that meets the padding makes NaN) and the same values (but the sign of a zero
 * sum), on random geometries with Infs and NaNs in dy, at every precision that takes F32; and
 * the audit's case: dy NaN at a corner, pads (0, 1, 1), aten's dW all NaN. */
static void test_padded_zeros(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(70);
    for (int iter = 0; iter < 40; iter++) {
        geometry g = random_geometry(&r), flat = g;
        c3f_case c, z;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, iter % 2, 0, &r);
        tu_sprinkle_specials(&c.dy, &r, 6);
        for (int j = 0; j < 3; j++) {
            flat.I[j] = g.I[j] + g.pb[j] + g.pe[j];
            flat.pb[j] = flat.pe[j] = 0;
        }
        make_case(&z, &flat, GRADREF_F32, GRADREF_F32, 0, 0, &r);
        int64_t i[5];
        for (i[0] = 0; i[0] < flat.N; i[0]++)
            for (i[1] = 0; i[1] < flat.G * flat.Cin_g; i[1]++)
                for (i[2] = 0; i[2] < flat.I[0]; i[2]++)
                    for (i[3] = 0; i[3] < flat.I[1]; i[3]++)
                        for (i[4] = 0; i[4] < flat.I[2]; i[4]++) {
                            int64_t from[5] = {i[0], i[1], i[2] - g.pb[0], i[3] - g.pb[1],
                                               i[4] - g.pb[2]};
                            int inside = 1;
                            for (int j = 0; j < 3; j++)
                                inside &= from[2 + j] >= 0 && from[2 + j] < g.I[j];
                            tu_put(&z.x, i, inside ? tu_get(&c.x, from) : 0.0);
                        }
        for (i[0] = 0; i[0] < g.N; i[0]++) /* the same dy */
            for (i[1] = 0; i[1] < g.G * g.Cout_g; i[1]++)
                for (i[2] = 0; i[2] < c.O[0]; i[2]++)
                    for (i[3] = 0; i[3] < c.O[1]; i[3]++)
                        for (i[4] = 0; i[4] < c.O[2]; i[4]++) {
                            float v;
                            memcpy(&v, (char *)c.dy.data + tu_offset(&c.dy, i), 4);
                            memcpy((char *)z.dy.data + tu_offset(&z.dy, i), &v, 4);
                        }
        const int32_t precision = iter % 3 == 2 ? GRADREF_PRECISION_HF32 : 0;
        gradref_exec flagged = {NULL, 0, 1 + iter % 2, precision | GRADREF_PADDED_ZEROS},
                     plain = {NULL, 0, 1, precision};
        run_ok(&c, &flagged);
        run_ok(&z, &plain);
        const float *a = c.dw.data, *b = z.dw.data;
        for (size_t e = 0; e < c.bytes[2] / 4; e++)
            if (isnan(a[e]) != isnan(b[e]) || (!isnan(a[e]) && a[e] != b[e]))
                fail_msg("case %d: dw[%zu] is %g, the zero-filled x gives %g", iter, e, a[e], b[e]);
        free_case(&c);
        free_case(&z);
    }
    float x[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, dy[9] = {NAN}, dw[9];
    const int64_t s9[5] = {1, 1, 1, 3, 3}, k[5] = {1, 1, 1, 3, 3};
    gradref_tensor tx, tdy, tdw;
    gradref_tensor_init(&tx, x, GRADREF_F32, 5, s9);
    gradref_tensor_init(&tdy, dy, GRADREF_F32, 5, s9);
    gradref_tensor_init(&tdw, dw, GRADREF_F32, 5, k);
    gradref_conv_params p = {0, 1, {1, 1, 1}, {1, 1, 1}, {0, 0, 1, 1, 1, 1}};
    gradref_exec e = {NULL, 0, 1, GRADREF_PADDED_ZEROS};
    assert_int_equal(gradref_conv3d_backprop_filter(&p, &tx, &tdy, &tdw, NULL), GRADREF_OK);
    int finite = 0;
    for (int t = 0; t < 9; t++)
        finite += !isnan(dw[t]);
    assert_int_equal(finite, 5); /* the taps that meet dy's NaN only through padding */
    assert_int_equal(gradref_conv3d_backprop_filter(&p, &tx, &tdy, &tdw, &e), GRADREF_OK);
    for (int t = 0; t < 9; t++)
        assert_true(isnan(dw[t]) && gradref__f32_bits(dw[t]) == 0x7fc00000u);
    /* padding only at the end: x (3 wide), a 3-tap filter, pads (0, 1), dy {0, NaN} */
    const int64_t xw[5] = {1, 1, 1, 1, 3}, yw[5] = {1, 1, 1, 1, 2}, kw[5] = {1, 1, 1, 1, 3};
    float dy2[2] = {0.0f, NAN};
    gradref_tensor_init(&tx, x, GRADREF_F32, 5, xw);
    gradref_tensor_init(&tdy, dy2, GRADREF_F32, 5, yw);
    gradref_tensor_init(&tdw, dw, GRADREF_F32, 5, kw);
    gradref_conv_params end = {0, 1, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 1}};
    assert_int_equal(gradref_conv3d_backprop_filter(&end, &tx, &tdy, &tdw, NULL), GRADREF_OK);
    assert_true(isnan(dw[0]) && isnan(dw[1]) && dw[2] == 0.0f);
    assert_int_equal(gradref_conv3d_backprop_filter(&end, &tx, &tdy, &tdw, &e), GRADREF_OK);
    assert_true(isnan(dw[0]) && isnan(dw[1]) && isnan(dw[2]));
}

/* The call asked for GRADREF_MAX_THREADS gives one thread's bits. */
static void expect_one_thread_bits_at_most_threads(c3f_case *c) {
    void *want = malloc(c->bytes[2]);
    gradref_exec one = {NULL, 0, 1, 0}, many = {NULL, 0, GRADREF_MAX_THREADS, 0};
    run_ok(c, &one);
    memcpy(want, c->dw.data, c->bytes[2]);
    memset(c->dw.data, 0xee, c->bytes[2]);
    run_ok(c, &many);
    assert_memory_equal(c->dw.data, want, c->bytes[2]);
    free(want);
}

/* Threads are counted by the work: a small problem asked for GRADREF_MAX_THREADS sizes its
 * workspace for its items (chunks or row blocks), not for 1024 threads, with one thread's bits. */
static void test_threads_bounded_by_work(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(12);
    const int64_t I[3] = {3, 4, 5}, K[3] = {2, 2, 2}, S[3] = {1, 1, 1};
    geometry g = geo(2, 3, 4, 1, I, K, S, NULL);
    c3f_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
    gradref__c3f_plan plan;
    assert_int_equal(gradref__c3f_validate(&c.params, &c.x, &c.dy, &c.dw, &plan), GRADREF_OK);
    const int team =
        gradref__c3f_fast_threads(&plan, GRADREF_PRECISION_DEFAULT, GRADREF_MAX_THREADS);
    assert_true(team >= 1 && team <= 3 * 8);
    expect_one_thread_bits_at_most_threads(&c);
    free_case(&c);
}

/* The workspace follows the work, not the threads asked for: x (1, 64, 3, 3, 3), dy (1, 4, 1,
 * 1, 1), a 3x3x3 filter (7 k multiply-adds) asked for GRADREF_MAX_THREADS took about 750 MB
 * (a GEMM buffer and a block's panels per thread); now one thread and a few KiB, at every
 * precision, with the bits of one thread. */
static void test_workspace_follows_work(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(13);
    const int64_t I[3] = {3, 3, 3}, K[3] = {3, 3, 3}, S[3] = {1, 1, 1};
    geometry g = geo(1, 64, 4, 1, I, K, S, NULL);
    c3f_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
    gradref__c3f_plan plan;
    assert_int_equal(gradref__c3f_validate(&c.params, &c.x, &c.dy, &c.dw, &plan), GRADREF_OK);
    for (int32_t precision = 0; precision < 4; precision++) {
        const int team = gradref__c3f_fast_threads(&plan, precision, GRADREF_MAX_THREADS);
        const size_t bytes = gradref__c3f_fast_workspace(&plan, precision, team);
        if ((bytes > 0 && team != 1) || bytes > ((size_t)256 << 10)) /* 0: no parts (HIGH) */
            fail_msg("precision %d: %d threads, %zu bytes of workspace", (int)precision, team,
                     bytes);
    }
    expect_one_thread_bits_at_most_threads(&c);
    free_case(&c);
}

/* The model of the counter's order (docs/conv3d_backprop_filter.md): n sums split into runs of
 * 2^a, 2^b, ... (a > b > ..., the binary digits of n from the top), each run summed as a
 * balanced binary tree (left half + right half), and the runs added from the newest up, each
 * older one on the left: R1 + (R2 + (... + Rk)). In f32, element by element. */
static float tree_sum(const float *s, int64_t n, int64_t size, int64_t e) {
    if (n == 1) return s[e];
    return tree_sum(s, n / 2, size, e) + tree_sum(s + n / 2 * size, n / 2, size, e);
}

static float counter_model(const float *s, int64_t n, int64_t size, int64_t e) {
    int64_t run = 1;
    while (run * 2 <= n)
        run *= 2;
    const float first = tree_sum(s, run, size, e);
    return run == n ? first : first + counter_model(s + run * size, n - run, size, e);
}

/* The summation counter on its own: sums pushed one by one, the last one through push_last, and
 * aligned nodes of 2^m sums pushed at level m (as the split reduction's chunks are) all give the
 * model's bits, for every count up to 70, in a plain loop and at every kernel level's add. */
static void test_counter(void **state) {
    (void)state;
    enum { SIZE = 37, MOST = 70, LEVELS = 8 };
    tu_rng r = tu_rng_make(77);
    float *sums = malloc(sizeof(float) * SIZE * MOST),
          *level = malloc(sizeof(float) * SIZE * (LEVELS + 1));
    float *into = malloc(sizeof(float) * SIZE), *node = malloc(sizeof(float) * SIZE * MOST);
    for (int i = 0; i < SIZE * MOST; i++) /* widely spread magnitudes: the order shows */
        sums[i] = (float)((tu_uniform(&r) - 0.5) * ldexp(1.0, (int)tu_range(&r, -20, 20)));
    for (int isa = 0; isa < 3; isa++) {
        const gradref__c3f_kernels *k = gradref__c3f_kernels_for(isa);
        for (int64_t n = 1; n <= MOST; n++)
            for (int way = 0; way < 3; way++) {
                gradref__c3f_counter c = gradref__c3f_counter_make(k, level, SIZE, LEVELS);
                const float *got = NULL;
                if (way < 2) { /* one by one; way 1 ends with push_last into `into` */
                    for (int64_t b = 0; b < n; b++) {
                        memcpy(gradref__c3f_counter_slot(&c), sums + b * SIZE,
                               sizeof(float) * SIZE);
                        if (way == 1 && b + 1 == n && gradref__c3f_counter_push_last(&c, into)) {
                            got = into;
                            break;
                        }
                        gradref__c3f_counter_push(&c);
                    }
                } else { /* greedy aligned nodes: 2^m sums at a multiple of 2^m, pushed at m */
                    for (int64_t b = 0; b < n;) {
                        int m = 0;
                        while (b % (INT64_C(2) << m) == 0 && b + (INT64_C(2) << m) <= n)
                            m++;
                        for (int64_t e = 0; e < SIZE; e++)
                            node[e] = tree_sum(sums + b * SIZE, INT64_C(1) << m, SIZE, e);
                        gradref__c3f_counter_carry(&c, m, node, NULL);
                        b += INT64_C(1) << m;
                    }
                }
                if (got == NULL) got = gradref__c3f_counter_fold(&c, NULL);
                for (int64_t e = 0; e < SIZE; e++) {
                    const float want = counter_model(sums, n, SIZE, e);
                    if (memcmp(&want, got + e, 4) != 0)
                        fail_msg("level %d, %lld sums, way %d, element %lld: %.9g, want %.9g", isa,
                                 (long long)n, way, (long long)e, (double)got[e], (double)want);
                }
            }
    }
    free(sums);
    free(level);
    free(into);
    free(node);
}

/* A caller's workspace that holds exactly one thread's share, asked for three threads: the
 * call runs on one, with the bits of a call that allocates its own. */
static void test_workspace_for_fewer_threads(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(11);
    geometry g = random_geometry(&r);
    c3f_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
    void *want = malloc(c.bytes[2]);
    assert_non_null(want);
    gradref_exec own = {NULL, 0, 3, 0};
    assert_int_equal(gradref_conv3d_backprop_filter(&c.params, &c.x, &c.dy, &c.dw, &own),
                     GRADREF_OK);
    memcpy(want, c.dw.data, c.bytes[2]);
    gradref__c3f_plan plan;
    assert_int_equal(gradref__c3f_validate(&c.params, &c.x, &c.dy, &c.dw, &plan), GRADREF_OK);
    const size_t one = gradref__c3f_fast_workspace(&plan, GRADREF_PRECISION_DEFAULT, 1) + 64;
    assert_true(gradref__c3f_fast_workspace(&plan, GRADREF_PRECISION_DEFAULT, 3) + 64 > one);
    void *ws = malloc(one);
    assert_non_null(ws);
    gradref_exec e = {ws, one, 3, 0};
    memset(c.dw.data, 0xa5, c.bytes[2]);
    assert_int_equal(gradref_conv3d_backprop_filter(&c.params, &c.x, &c.dy, &c.dw, &e), GRADREF_OK);
    assert_memory_equal(c.dw.data, want, c.bytes[2]);
    free(ws);
    free(want);
    free_case(&c);
}

/* Wide channel counts (the AVX-512 indirect kernel's tiles of up to 14 channels inside one
 * tap, items cutting taps; the packed panels straddling taps; Cout/G below, at and above one
 * 32-column panel) over several reduction blocks: still the reference's bits in every
 * layout; then F16 and BF16 rows of 45. */
static void test_wide_channels(void **state) {
    (void)state;
    static const int64_t cin[] = {8, 13, 29, 40, 16}, cout[] = {5, 32, 17, 40, 33};
    static const int32_t in[] = {GRADREF_F32, GRADREF_F32, GRADREF_BF16, GRADREF_F32, GRADREF_F16};
    tu_rng r = tu_rng_make(7);
    for (int iter = 0; iter < 10; iter++) {
        geometry g = random_geometry(&r);
        g.G = iter % 3 == 2 ? 2 : 1;
        g.Cin_g = cin[iter % 5], g.Cout_g = cout[(iter + iter / 5) % 5];
        g.N = 2;
        if (iter % 2 == 0) g.stride[1] = g.stride[2] = 1;
        g.I[1] += 8, g.I[2] += 13; /* several blocks of 256, a partial last one */
        c3f_case c;
        make_case(&c, &g, in[iter % 5], GRADREF_F32, iter % 2, iter % 3, &r);
        check_fast_against_reference(&c, 0);
        free_case(&c);
    }
    /* F16 and BF16 runs along ow past the no-workspace path's pieces (24 rows of x, 12 of dy) */
    const int64_t I[3] = {2, 3, 45}, K[3] = {1, 3, 3}, S[3] = {1, 1, 1}, P[6] = {0, 0, 1, 1, 1, 1};
    for (int layout = 0; layout < 2; layout++) {
        geometry g = geo(2, 16, 40, 1, I, K, S, P);
        c3f_case c;
        make_case(&c, &g, layout ? GRADREF_BF16 : GRADREF_F16, GRADREF_F32, layout, 0, &r);
        check_fast_against_reference(&c, 0);
        free_case(&c);
    }
}

/* A first layer's shape: 3 input channels and a 3x3x3 kernel give 81 rows of x against 32
 * output channels, so the no-workspace path's tiles at 2 and 3 threads are narrower than the
 * widest its GEMM allows (AVX2: 16 of 32 columns, NEON: 24) and pack dy fewer times: the
 * reference's bits in both layouts, at 600 reduction indices (3 blocks, a partial one). */
static void test_first_layer_tiles(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(72);
    const int64_t I[3] = {4, 10, 15}, K[3] = {3, 3, 3}, S[3] = {1, 1, 1};
    const int64_t P[6] = {1, 1, 1, 1, 1, 1};
    for (int layout = 0; layout < 2; layout++) {
        geometry g = geo(1, 3, 32, 1, I, K, S, P);
        c3f_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, layout, layout, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
    }
}

/* Channel-major F32 dy read by one row block per group (512+ rows) is gathered into the B
 * panels straight from dy (no staged copy), at HF32 too (the panels rounded as gathered): the
 * reference's bits at every kernel level and thread count, with a partial last panel of
 * columns, at both precisions (HF32 on values that round, both kept-bit counts). */
static void test_dy_gathered(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(71);
    for (int G = 1; G <= 2; G++) {
        const int64_t I[3] = {4, 6, 7}, K[3] = {3, 3, 3}, S[3] = {1, 1, 1};
        const int64_t P[6] = {1, 1, 1, 1, 1, 1};
        geometry g = geo(2, 24 * G, 40 * G, G, I, K, S, P);
        c3f_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
        gradref__c3f_plan plan;
        assert_int_equal(gradref__c3f_validate(&c.params, &c.x, &c.dy, &c.dw, &plan), GRADREF_OK);
        /* neither stages dy; HF32 stages x (rounded), the default x only below AVX-512 */
        assert_true(gradref__c3f_fast_workspace(&plan, GRADREF_PRECISION_HF32, 1) <=
                    gradref__c3f_fast_workspace(&plan, GRADREF_PRECISION_DEFAULT, 1) + c.bytes[0]);
        check_fast_against_reference(&c, 0);
        check_fast_against_reference(&c, GRADREF_PRECISION_HF32);
        check_fast_against_reference(&c, GRADREF_PRECISION_HF32_910B);
        free_case(&c);
    }
    /* channels-last dy whose rows are whole B panels (Cout at AVX2's and AVX-512's nr), read in
     * place at the default precision: HF32 copies and rounds them instead */
    for (int64_t cout = 16; cout <= 32; cout += 16) {
        const int64_t I[3] = {2, 5, 6}, K[3] = {1, 3, 3}, S[3] = {1, 1, 1};
        const int64_t P[6] = {0, 0, 1, 1, 1, 1};
        geometry g = geo(2, 8, cout, 1, I, K, S, P);
        c3f_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, 1, 0, &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_HF32);
        free_case(&c);
    }
}

/* Few input channels in one group (a first layer): a tile holds a tap row's every (kw, ci)
 * from an x staged with zeros past its w edges, and the threads share the reduction in chunks
 * of blocks (a partial last chunk here) whose sums the blocks' counter combines. Strides, odd
 * pads, both data layouts, F16 input, HF32, 5 to 64 output channels (the B panels gathered
 * from channel-major dy with partial lanes), CONVOLUTION mode (split, no row tiles) and a dy
 * holding Inf and NaN (found in the B panels: the reference's bits, NaN where it has NaN). */
static void test_row_tiles_and_split(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(83);
    static const int64_t cin[] = {3, 1, 4, 3, 2}, cout[] = {64, 5, 40, 16, 33};
    static const int32_t in[] = {GRADREF_F32, GRADREF_F32, GRADREF_F16, GRADREF_F32, GRADREF_BF16};
    for (int iter = 0; iter < 10; iter++) {
        const int64_t I[3] = {3 + iter % 3, 9 + iter % 4, 23 + iter}, K[3] = {3, 3, 3 - iter / 8};
        const int64_t S[3] = {1, 1 + iter % 2, 1 + iter % 2};
        const int64_t P[6] = {1, 1, iter % 3, 1, 1 + iter % 2, iter % 3};
        geometry g = geo(2, cin[iter % 5], cout[(iter + iter / 5) % 5], 1, I, K, S, P);
        g.mode = iter == 7 ? GRADREF_CONV_CONVOLUTION : GRADREF_CONV_CROSS_CORRELATION;
        c3f_case c;
        make_case(&c, &g, in[iter % 5], GRADREF_F32, iter % 2 ? 0 : iter % 4 == 2, iter % 3, &r);
        check_fast_against_reference(&c, iter == 3 ? GRADREF_PRECISION_HF32 : 0);
        if (iter == 9) {
            /* the last at ow = 0, whose first tap reads x's zero padding in the staged x: the
             * reference skips that tap, a tile would add 0 * Inf */
            int64_t i[5] = {1, 2, 0, 1, 2}, j[5] = {0, 3, 2, 4, 10}, k[5] = {0, 1, 1, 1, 0};
            tu_put(&c.dy, i, INFINITY);
            tu_put(&c.dy, j, NAN);
            tu_put(&c.dy, k, INFINITY);
            check_fast_against_reference(&c, 0);
        }
        free_case(&c);
    }
}

/* The GEMM's variant (GRADREF_VERBOSE's strategy) at every level: a two-channel layer of one
 * block runs by row tiles where the level has an indirect kernel, by the packed panels at the
 * portable level; with 16 channels NCDHW x takes the indirect kernel where it reads strided
 * rows (x86), the packed panels where it does not (NEON), and NDHWC x the indirect kernel. */
static void test_gemm_variants(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(84);
    const int64_t I[3] = {1, 8, 8}, K[3] = {1, 3, 3}, S[3] = {1, 1, 1}, P[6] = {0, 0, 1, 1, 1, 1};
    for (int wide = 0; wide < 2; wide++)
        for (int last = 0; last < 2; last++) {
            geometry g = geo(1, wide ? 16 : 2, 16, 1, I, K, S, P);
            c3f_case c;
            make_case(&c, &g, GRADREF_F32, GRADREF_F32, last, 0, &r);
            gradref__c3f_plan plan;
            assert_int_equal(gradref__c3f_validate(&c.params, &c.x, &c.dy, &c.dw, &plan),
                             GRADREF_OK);
            for (int level = 0; level <= gradref__isa_level(); level++) {
                const gradref__sgemm_kernels *k = gradref__sgemm_kernels_for(level);
                plan.max_isa = level;
                const char *v = gradref__c3f_strategies[0].variant(&plan, 0, 2);
                const char *want = !k->indirect                     ? "gemm"
                                   : !wide                          ? "gemm_row_tiles"
                                   : last || !k->indirect_unit_rows ? "gemm_indirect"
                                                                    : "gemm";
                if (strcmp(v, want) != 0)
                    fail_msg("%s, %s x: %s, want %s", k->isa, last ? "NDHWC" : "NCDHW", v, want);
            }
            free_case(&c);
        }
}

/* The split reduction over 63 blocks of 256: chunks of 2 blocks and a last chunk of one at one
 * thread, 32 chunks over two threads, 63 over three (whose ranges do not start on a power of
 * two): the reference's bits every time. */
static void test_split_chunks(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(31);
    const int64_t I[3] = {1, 63, 64}, K[3] = {1, 3, 3}, S[3] = {1, 1, 1}, P[6] = {0, 0, 1, 1, 1, 1};
    geometry g = geo(4, 2, 3, 1, I, K, S, P);
    c3f_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
    check_fast_against_reference(&c, 0);
    free_case(&c);
}

/* A reduction of 29 blocks of 256 (N * Do * Ho * Wo = 7424): the blocked f32 sum stays within
 * its bound of the f64 sum, (256 + levels + 1) * 2^-24 * sum |x * dy|. */
static void test_blocked_sum_accuracy(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(6);
    const int64_t I[3] = {2, 29, 64}, K[3] = {1, 1, 1}, S[3] = {1, 1, 1};
    geometry g = geo(2, 2, 2, 1, I, K, S, NULL);
    c3f_case c, w;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
    make_case(&w, &g, GRADREF_F64, GRADREF_F64, 0, 0, &r);
    int64_t i[5];
    double abs_sum[2][2] = {{0}};
    for (i[0] = 0; i[0] < 2; i[0]++)
        for (i[1] = 0; i[1] < 2; i[1]++)
            for (i[2] = 0; i[2] < 2; i[2]++)
                for (i[3] = 0; i[3] < 29; i[3]++)
                    for (i[4] = 0; i[4] < 64; i[4]++) {
                        tu_put(&w.x, i, tu_get(&c.x, i));
                        tu_put(&w.dy, i, tu_get(&c.dy, i));
                    }
    run_ok(&c, NULL);
    run_ok(&w, NULL);
    for (int co = 0; co < 2; co++)
        for (int ci = 0; ci < 2; ci++) {
            for (i[0] = 0; i[0] < 2; i[0]++)
                for (i[2] = 0; i[2] < 2; i[2]++)
                    for (i[3] = 0; i[3] < 29; i[3]++)
                        for (i[4] = 0; i[4] < 64; i[4]++)
                            abs_sum[co][ci] += fabs(at5(&c.x, i[0], ci, i[2], i[3], i[4]) *
                                                    at5(&c.dy, i[0], co, i[2], i[3], i[4]));
            const double bound = (256 + 5 + 1) * ldexp(1.0, -24) * abs_sum[co][ci];
            const double err = fabs(at5(&c.dw, co, ci, 0, 0, 0) - at5(&w.dw, co, ci, 0, 0, 0));
            if (err > bound) fail_msg("error %.3g over the bound %.3g", err, bound);
        }
    free_case(&c);
    free_case(&w);
}

/* Long reductions (several blocks, a partial last one) and a dy holding Inf and NaN (then
 * the reference's skipped taps matter): the fast path still equals the reference. */
static void test_long_and_nonfinite(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(9);
    const int64_t I[3] = {5, 17, 23}, K[3] = {2, 3, 3}, S[3] = {1, 2, 1}, P[6] = {1, 0, 1, 1, 1, 2};
    geometry g = geo(3, 6, 4, 2, I, K, S, P);
    for (int pass = 0; pass < 2; pass++) {
        c3f_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, pass, pass * 2, &r);
        if (pass) {
            int64_t i[5] = {1, 2, 0, 0, 0}, j[5] = {2, 3, 1, 2, 3};
            tu_put(&c.dy, i, INFINITY);
            tu_put(&c.dy, j, NAN);
        }
        gradref_tensor want = c.dw;
        void *wb = malloc(c.bytes[2]);
        want.data = wb;
        gradref__c3f_plan plan;
        assert_int_equal(gradref__c3f_validate(&c.params, &c.x, &c.dy, &want, &plan), GRADREF_OK);
        gradref__c3f_ref(&plan);
        gradref_exec e = {NULL, 0, 2, 0};
        run_ok(&c, &e);
        int64_t i[5];
        for (i[0] = 0; i[0] < 4; i[0]++)
            for (i[1] = 0; i[1] < 3; i[1]++)
                for (i[2] = 0; i[2] < 2; i[2]++)
                    for (i[3] = 0; i[3] < 3; i[3]++)
                        for (i[4] = 0; i[4] < 3; i[4]++) {
                            double a = tu_get(&c.dw, i), b = tu_get(&want, i);
                            if (!(a == b || (isnan(a) && isnan(b))))
                                fail_msg("pass %d: dw %.9g, reference %.9g", pass, a, b);
                        }
        free(wb);
        free_case(&c);
    }
}

/* ------------------------------------------------------------ helpers */

static void test_pads_same(void **state) {
    (void)state;
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    const int64_t in[3] = {5, 7, 4}, k[3] = {3, 2, 1};
    p.stride[0] = 2, p.stride[1] = 2, p.stride[2] = 1;
    p.dilation[0] = p.dilation[1] = p.dilation[2] = 1;
    assert_int_equal(gradref_conv_pads_same(&p, 3, in, k), GRADREF_OK);
    /* out 3: need (3-1)*2+3-5 = 2 -> 1,1; out 4: need 3*2+2-7 = 1 -> 0,1 (odd at the end); 0 */
    const int64_t want[6] = {1, 1, 0, 1, 0, 0};
    for (int j = 0; j < 6; j++)
        assert_int_equal(p.pad[j], want[j]);
    p.dilation[0] = 2; /* dilated kernel 5 on 5 with stride 2: out 3, need 4+5-5 = 4 */
    assert_int_equal(gradref_conv_pads_same(&p, 1, in, k), GRADREF_OK);
    assert_int_equal(p.pad[0], 2);
    assert_int_equal(p.pad[1], 2);
    p.stride[0] = 0;
    assert_int_equal(gradref_conv_pads_same(&p, 1, in, k), GRADREF_ERR_PARAM);
    assert_int_equal(p.pad[0], 2); /* untouched */
    assert_int_equal(gradref_conv_pads_same(NULL, 1, in, k), GRADREF_ERR_NULL);
    assert_int_equal(gradref_conv_pads_same(&p, 4, in, k), GRADREF_ERR_PARAM);
}

/* The outcomes of upstream's fusion-pass unit tests (seed §6, 32 AI cores: limits 131072 for
 * Din > 1 and 16384 for Din == 1) and the consistent shapes of reference §3.4. */
static void test_transpose_rule(void **state) {
    (void)state;
    const int32_t NDHWC = GRADREF_FORMAT_NDHWC, DHWCN = GRADREF_FORMAT_DHWCN,
                  NCDHW = GRADREF_FORMAT_NCDHW;
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NCDHW, 16, 32, 2, 32, 1), 0); /* NCDHW y */
    assert_int_equal(gradref_conv3d_dw_transpose_needed(DHWCN, 16, 32, 2, 32, 1), 1);
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 16, 32, 2, 32, 1), 1);
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 16, 256, 128, 32, 1),
                     0); /* 524288 */
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 32, 32, 128, 32, 1),
                     1); /* = limit */
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 32, 32, 129, 32, 1), 0);
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 1, 32, 2, 32, 1), 1);    /* 64 */
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 1, 256, 256, 32, 1), 0); /* 65536 */
    assert_int_equal(gradref_conv3d_dw_transpose_needed(DHWCN, 1, 128, 128, 32, 1),
                     1); /* = limit */
    assert_int_equal(gradref_conv3d_dw_transpose_needed(DHWCN, 1, 128, 129, 32, 1), 0);
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 16, 32, 2, 0, 1), 0);  /* no cores */
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 16, 32, 2, 32, 0), 0); /* dynamic */
    assert_int_equal(gradref_conv3d_dw_transpose_needed(GRADREF_FORMAT_NHWC, 1, 2, 2, 32, 1), 0);
    /* odd core counts: the 2-D limit halves with integer division */
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 1, 1, 1024, 3, 1), 1);
    assert_int_equal(gradref_conv3d_dw_transpose_needed(NDHWC, 1, 1, 1025, 3, 1), 0);
}

/* ------------------------------------------------------------ empty, errors */

static void test_empty(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(7);
    const int64_t I[3] = {3, 3, 3}, K[3] = {2, 2, 2}, S[3] = {1, 1, 1};
    geometry g = geo(0, 2, 4, 1, I, K, S, NULL);
    c3f_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
    run_ok(&c, NULL);
    for (size_t i = 0; i < c.bytes[2] / 4; i++)
        assert_true(((uint32_t *)c.dw.data)[i] == 0);
    free_case(&c);
}

static void expect_error(c3f_case *c, gradref_status got, gradref_status want, const char *frag) {
    tu_expect_status(got, want, "conv3d_backprop_filter", frag);
    tu_expect_untouched(c->buf[2], c->bytes[2], 0xee, "dw");
}

static gradref_status call_case(void *ctx, const gradref_exec *e) {
    c3f_case *c = ctx;
    return gradref_conv3d_backprop_filter(&c->params, &c->x, &c->dy, &c->dw, e);
}

/* The GRADREF_TERM_* outputs (the reference loop's) at 1, 2 and 3 threads: the same bits. */
static void test_term_threads(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(9);
    const int64_t I[3] = {3, 9, 10}, K[3] = {2, 3, 3}, S[3] = {1, 2, 1}, P[6] = {0, 1, 1, 0, 1, 1};
    geometry g = geo(2, 6, 8, 2, I, K, S, P);
    c3f_case c;
    make_case(&c, &g, GRADREF_BF16, GRADREF_F64, 1, 0, &r);
    tu_expect_threads_same_bits(call_case, &c, GRADREF_TERM_MAGNITUDES, c.buf + 2, c.bytes + 2, 1);
    tu_expect_threads_same_bits(call_case, &c, GRADREF_TERM_COUNTS, c.buf + 2, c.bytes + 2, 1);
    free_case(&c);
}

static void test_errors(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(8);
    const int64_t I[3] = {4, 5, 6}, K[3] = {2, 2, 3}, S[3] = {1, 2, 1}, P[6] = {0, 1, 1, 0, 1, 1};
    geometry g = geo(2, 4, 6, 2, I, K, S, P);
    c3f_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
    memset(c.buf[2], 0xee, c.bytes[2]);
    const gradref_conv_params good = c.params;
    gradref_conv_params p;
    const gradref_tensor *X = &c.x, *Y = &c.dy, *W = &c.dw;
#define CALL(pp, a, b, w, e) gradref_conv3d_backprop_filter(pp, a, b, w, e)
    expect_error(&c, CALL(NULL, X, Y, W, NULL), GRADREF_ERR_NULL, "p is NULL");
    expect_error(&c, CALL(&good, NULL, Y, W, NULL), GRADREF_ERR_NULL, "x is NULL");
    expect_error(&c, CALL(&good, X, NULL, W, NULL), GRADREF_ERR_NULL, "dy is NULL");
    expect_error(&c, CALL(&good, X, Y, NULL, NULL), GRADREF_ERR_NULL, "dw is NULL");
    p = good, p.mode = 3;
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_PARAM, "p.mode is 3");
    p = good, p.groups = -2;
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_PARAM, "p.groups is -2");
    p = good, p.groups = 1; /* CANN would infer 2 groups from the channels; gradref rejects */
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_SHAPE, "x.shape[1] is 4 but groups");
    p = good, p.groups = 4;
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_SHAPE, "x.shape[1] is 4");
    p = good, p.stride[2] = 0;
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_PARAM, "p.stride[2] is 0");
    p = good, p.dilation[0] = 0;
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_PARAM, "p.dilation[0] is 0");
    p = good, p.pad[5] = -1;
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_PARAM, "pads must be >= 0");
    p = good, p.stride[1] = 1;
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_SHAPE,
                 "dy.shape[3] is 3 but the geometry gives 5");
    p = good, p.dilation[2] = 9;
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_SHAPE, "smaller than the dilated kernel");
    p = good, p.dilation[2] = INT64_MAX / 2 + 1;
    expect_error(&c, CALL(&p, X, Y, W, NULL), GRADREF_ERR_OVERFLOW, "exceeds int64");
    gradref_tensor t;
    t = c.x, t.ndim = 4;
    expect_error(&c, CALL(&good, &t, Y, W, NULL), GRADREF_ERR_RANK, "x.ndim is 4");
    t = c.dy, t.dtype = GRADREF_F64;
    expect_error(&c, CALL(&good, X, &t, W, NULL), GRADREF_ERR_DTYPE, "dy.dtype is F64");
    t = c.x, t.dtype = GRADREF_I8;
    expect_error(&c, CALL(&good, &t, Y, W, NULL), GRADREF_ERR_DTYPE, "x.dtype is I8");
    t = c.dw, t.dtype = GRADREF_F16;
    expect_error(&c, CALL(&good, X, Y, &t, NULL), GRADREF_ERR_DTYPE, "dw.dtype is F16");
    t = c.dy, t.shape[0] = 1; /* CANN takes the batch from dy; gradref rejects */
    expect_error(&c, CALL(&good, X, &t, W, NULL), GRADREF_ERR_SHAPE, "dy.shape[0] is 1");
    t = c.dy, t.shape[1] = 4; /* CANN takes Cout from dy */
    expect_error(&c, CALL(&good, X, &t, W, NULL), GRADREF_ERR_SHAPE, "dy.shape[1] is 4");
    t = c.dw, t.shape[0] = 5;
    expect_error(&c, CALL(&good, X, Y, &t, NULL), GRADREF_ERR_SHAPE, "dy.shape[1] is 6");
    t = c.dw, t.shape[4] = 0;
    expect_error(&c, CALL(&good, X, Y, &t, NULL), GRADREF_ERR_SHAPE, "kernel sizes must be >= 1");
    t = c.dw, t.strides[1] = 0;
    expect_error(&c, CALL(&good, X, Y, &t, NULL), GRADREF_ERR_STRIDE, "dw");
    t = c.dw, t.data = c.x.data;
    expect_error(&c, CALL(&good, X, Y, &t, NULL), GRADREF_ERR_ALIAS, "dw");
    gradref_exec bad = {NULL, 0, -1, 0};
    expect_error(&c, CALL(&good, X, Y, W, &bad), GRADREF_ERR_PARAM, "num_threads");
    expect_error(&c, gradref_conv3d_backprop_filter_workspace_size(&good, X, Y, W, NULL),
                 GRADREF_ERR_NULL, "bytes is NULL");
    size_t bytes = 1;
    assert_int_equal(gradref_conv3d_backprop_filter_workspace_size(&good, X, Y, W, &bytes),
                     GRADREF_OK);
    assert_true(bytes > 0);
    /* a workspace smaller than one thread's share: the no-workspace path, same bits */
    tu_expect_tiny_workspace_same_bits(call_case, &c, c.buf + 2, c.bytes + 2, 1);
#undef CALL
    free_case(&c);
}

/* ------------------------------------------------------------ HF32 precisions */

/* CANN's golden on the int32 view, as written there: ((v >> (22 - kept)) + 1) >> 1 <<
 * (23 - kept), with floor shifts and int32 wrap-around (computed in int64 here). */
static uint32_t hf32_model(uint32_t bits, int kept) {
    if ((bits & 0x7fffffffu) > 0x7f800000u) bits |= 0x400000u; /* the golden's f64 quiets NaN */
    const int64_t v = (int64_t)bits - (bits >= 0x80000000u ? INT64_C(0x100000000) : 0);
    const int64_t shift = 22 - kept;
    int64_t t = v >= 0 ? v / (INT64_C(1) << shift) : -((-v + (INT64_C(1) << shift) - 1) >> shift);
    t = t + 1;
    t = t >= 0 ? t / 2 : -((-t + 1) / 2);
    return (uint32_t)((uint64_t)t << (shift + 1));
}

static float float_of(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* A 1 x K tap filter over one row of x against dy = 1: dw[k] = hf32(x[k]) * 1 from +0, so every
 * bit pattern class comes out as the model rounds it: ties, just off ties, subnormals, carries
 * into the exponent and to Inf, Inf, NaN payloads inside and below the kept bits, -0. */
static void test_hf32_bit_patterns(void **state) {
    (void)state;
    enum { FIXED = 28, K = FIXED + 2000 };
    static const uint32_t fixed[FIXED] = {
        0x3f800000u, 0x3f801000u, 0x3f800fffu, 0x3f801001u, 0x3f803000u, 0x3f800800u, 0x3f801800u,
        0xbf801000u, 0xbf800fffu, 0x3fffffffu, 0x00000001u, 0x00001000u, 0x00000fffu, 0x007ff000u,
        0x807ff000u, 0x7f7fffffu, 0x7f7fefffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u,
        0x7f800001u, 0x7fc01000u, 0xffffffffu, 0x7fffffffu, 0x80000000u, 0x00000000u, 0x3eaaaaabu};
    tu_rng r = tu_rng_make(31);
    for (int kept = 10; kept <= 11; kept++) {
        const int64_t I[3] = {1, 1, K}, KK[3] = {1, 1, K}, S[3] = {1, 1, 1};
        geometry g = geo(1, 1, 1, 1, I, KK, S, NULL);
        c3f_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
        uint32_t *x = c.buf[0];
        for (int k = 0; k < K; k++)
            x[k] = k < FIXED ? fixed[k] : (uint32_t)tu_next(&r);
        *(float *)c.buf[1] = 1.0f;
        static const int threads[] = TU_THREAD_COUNTS;
        for (int t = 0; t < 3; t++) {
            gradref_exec e = {NULL, 0, threads[t],
                              kept == 10 ? GRADREF_PRECISION_HF32 : GRADREF_PRECISION_HF32_910B};
            run_ok(&c, &e);
            const uint32_t *dw = c.buf[2];
            for (int k = 0; k < K; k++) {
                const float v = fmaf(float_of(hf32_model(x[k], kept)), 1.0f, 0.0f);
                const uint32_t want = isnan(v) ? 0x7fc00000u : bits_of(v); /* canonical NaN */
                if (dw[k] != want)
                    fail_msg("kept %d: x %08x gives %08x, want %08x", kept, (unsigned)x[k],
                             (unsigned)dw[k], (unsigned)want);
            }
        }
        free_case(&c);
    }
    /* the model itself on the classes named above */
    assert_int_equal(hf32_model(0x3f801000u, 10), 0x3f802000u); /* tie: away from zero */
    assert_int_equal(hf32_model(0xbf801000u, 10), 0xbf802000u);
    assert_int_equal(hf32_model(0x3f800fffu, 10), 0x3f800000u);
    assert_int_equal(hf32_model(0x3f800800u, 11), 0x3f801000u);
    assert_int_equal(hf32_model(0x007ff000u, 10), 0x00800000u); /* subnormal to normal */
    assert_int_equal(hf32_model(0x7f7fffffu, 10), 0x7f800000u); /* to Inf */
    assert_int_equal(hf32_model(0x7f800001u, 10), 0x7fc00000u); /* quieted: stays NaN */
    assert_int_equal(hf32_model(0xff800001u, 11), 0xffc00000u);
    assert_int_equal(hf32_model(0x7fffffffu, 10), 0x80000000u); /* wraps to -0 */
    assert_int_equal(hf32_model(0xffffffffu, 10), 0x00000000u); /* wraps to +0 */
    /* one element per call, the pattern in x or in dy, on the fast path (NULL and ample
     * workspace) and the no-workspace path (1 byte): the same bits everywhere */
    for (int kept = 10; kept <= 11; kept++)
        for (int k = 0; k < FIXED; k++)
            for (int swap = 0; swap < 2; swap++) {
                const int64_t one[3] = {1, 1, 1};
                geometry g = geo(1, 1, 1, 1, one, one, one, NULL);
                c3f_case c;
                make_case(&c, &g, GRADREF_F32, GRADREF_F32, 0, 0, &r);
                const float v = fmaf(float_of(hf32_model(fixed[k], kept)), 1.0f, 0.0f);
                const uint32_t want = isnan(v) ? 0x7fc00000u : bits_of(v);
                static unsigned char ws[1 << 16];
                const size_t ws_bytes[3] = {0, 1, sizeof ws};
                for (int w = 0; w < 3; w++) {
                    *(uint32_t *)c.buf[swap] = fixed[k];
                    *(float *)c.buf[1 - swap] = 1.0f;
                    gradref_exec e = {w ? ws : NULL, ws_bytes[w], 1 + w,
                                      kept == 10 ? GRADREF_PRECISION_HF32
                                                 : GRADREF_PRECISION_HF32_910B};
                    run_ok(&c, &e);
                    const uint32_t got = *(const uint32_t *)c.buf[2];
                    if (got != want)
                        fail_msg("kept %d, %s %08x, workspace %zu: dw %08x, want %08x", kept,
                                 swap ? "dy" : "x", (unsigned)fixed[k], ws_bytes[w], (unsigned)got,
                                 (unsigned)want);
                }
                free_case(&c);
            }
}

/* The HF32 precisions equal the default precision on inputs the test rounds itself (every
 * product of two HF32 values is exact in f32), in both layouts and dw layouts, at every kernel
 * level the fast path has and 1, 2, 3 threads (check_fast_against_reference). */
static void test_hf32_equals_default_on_rounded_inputs(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(32);
    for (int iter = 0; iter < 16; iter++) {
        const int kept = iter % 2 ? 11 : 10;
        const int32_t mode = kept == 10 ? GRADREF_PRECISION_HF32 : GRADREF_PRECISION_HF32_910B;
        geometry g = random_geometry(&r);
        c3f_case c;
        make_case(&c, &g, GRADREF_F32, GRADREF_F32, iter % 2, iter % 3, &r);
        check_fast_against_reference(&c, mode);
        gradref_exec e = {NULL, 0, 2, mode};
        run_ok(&c, &e);
        void *hf = malloc(c.bytes[2]);
        memcpy(hf, c.buf[2], c.bytes[2]);
        for (int t = 0; t < 2; t++) { /* round x and dy in place, every element */
            uint32_t *v = c.buf[t];
            for (size_t i = 0; i < c.bytes[t] / 4; i++)
                v[i] = hf32_model(v[i], kept);
        }
        gradref_exec d = {NULL, 0, 2, GRADREF_PRECISION_DEFAULT};
        run_ok(&c, &d);
        gradref_tensor got = c.dw;
        got.data = hf;
        tu_expect_same_bits(&got, &c.dw, "dw");
        free(hf);
        free_case(&c);
    }
}

/* HF32 takes F32 data only, and only this operator has it. */
static void test_hf32_errors(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(33);
    const int64_t I[3] = {3, 4, 5}, K[3] = {2, 2, 2}, S[3] = {1, 1, 1};
    geometry g = geo(1, 2, 2, 1, I, K, S, NULL);
    c3f_case c;
    make_case(&c, &g, GRADREF_F16, GRADREF_F32, 0, 0, &r);
    memset(c.buf[2], 0xee, c.bytes[2]);
    gradref_exec e = {NULL, 0, 1, GRADREF_PRECISION_HF32};
    expect_error(&c, gradref_conv3d_backprop_filter(&c.params, &c.x, &c.dy, &c.dw, &e),
                 GRADREF_ERR_PARAM,
                 "exec.precision is HF32, which takes F32 x and dy; x.dtype is F16");
    free_case(&c);
}

/* GRADREF_STRICT_UPSTREAM: CANN's Conv3DBackpropFilterV2 refuses F64; F32 passes, same bits. */
static void test_strict_cann(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(34);
    const int64_t I[3] = {3, 4, 5}, K[3] = {2, 2, 2}, S[3] = {1, 1, 1};
    geometry g = geo(1, 2, 2, 1, I, K, S, NULL);
    const gradref_exec strict = {NULL, 0, 2, GRADREF_PRECISION_DEFAULT | GRADREF_STRICT_UPSTREAM};
    c3f_case c;
    make_case(&c, &g, GRADREF_F32, GRADREF_F32, 1, 2, &r);
    run_ok(&c, NULL);
    void *want = malloc(c.bytes[2]);
    memcpy(want, c.buf[2], c.bytes[2]);
    memset(c.buf[2], 0xee, c.bytes[2]);
    run_ok(&c, &strict);
    assert_memory_equal(c.buf[2], want, c.bytes[2]);
    free(want);
    free_case(&c);
    make_case(&c, &g, GRADREF_F64, GRADREF_F64, 0, 0, &r);
    memset(c.buf[2], 0xee, c.bytes[2]);
    expect_error(&c, gradref_conv3d_backprop_filter(&c.params, &c.x, &c.dy, &c.dw, &strict),
                 GRADREF_ERR_DTYPE,
                 "strict CANN: F64; Conv3DBackpropFilterV2 takes F16, BF16 and F32");
    free_case(&c);
    /* accepted without the flag, refused with it: 16-bit dw, groups past 65535, a stride or
     * pad past 2^31 - 2, N = 0, Cout = 0, a dilation past 2^31 - 2 */
    const int64_t one[3] = {1, 1, 1}, wide[3] = {1, 1, 2};
    const int64_t big = INT64_C(2147483647);
    static const struct {
        int32_t out;
        gradref_status status;
        const char *message;
    } bad[] = {
        {GRADREF_F16, GRADREF_ERR_DTYPE, "dw.dtype is F16; Conv3DBackpropFilterV2 outputs F32"},
        {GRADREF_BF16, GRADREF_ERR_DTYPE, "dw.dtype is BF16"},
        {GRADREF_F32, GRADREF_ERR_PARAM, "65536 groups; CANN takes groups in [1, 65535]"},
        {GRADREF_F32, GRADREF_ERR_PARAM, "p.stride[2] is 2147483647 and p.dilation[2] 1"},
        {GRADREF_F32, GRADREF_ERR_PARAM, "p.pad[4] is 2147483647; CANN takes [0, 2147483646]"},
        {GRADREF_F32, GRADREF_ERR_SHAPE, "x.shape[0] is 0"},
        {GRADREF_F32, GRADREF_ERR_SHAPE, "dy.shape[1] is 0"},
        {GRADREF_F32, GRADREF_ERR_PARAM, "p.stride[1] is 1 and p.dilation[1] 2147483647"},
    };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        geometry h = i < 2 ? g : geo(1, 2, 2, 1, i == 3 ? wide : one, one, one, NULL);
        if (i == 2) h = geo(1, 65536, 65536, 65536, one, one, one, NULL);
        if (i == 3) h.stride[2] = big;
        if (i == 4) h.pb[2] = big, h.stride[2] = big - 1;
        if (i == 5) h.N = 0;
        if (i == 6) h.Cout_g = 0;
        if (i == 7) h.dil[1] = big; /* one tap along H: any dilation gives the same geometry */
        make_case(&c, &h,
                  i == 0   ? GRADREF_F16
                  : i == 1 ? GRADREF_BF16
                           : GRADREF_F32,
                  bad[i].out, 0, 0, &r);
        run_ok(&c, NULL);
        memset(c.buf[2], 0xee, c.bytes[2]);
        expect_error(&c, gradref_conv3d_backprop_filter(&c.params, &c.x, &c.dy, &c.dw, &strict),
                     bad[i].status, bad[i].message);
        free_case(&c);
    }
}

/* CANN's y from filter_size: the format's order, 4 entries with D = 1 inserted, and
 * from_depthwise (N <- N*C, C <- 1): a depthwise DHWCN filter (kD, kH, kW, in, multiplier) gets
 * output channel i*multiplier + m, the values of the plain grouped call. */
static void test_cann_filter_size(void **state) {
    (void)state;
    gradref_tensor t;
    const int64_t ndhwc4[4] = {6, 2, 3, 5}; /* NDHWC without D: (N, H, W, C) */
    assert_int_equal(
        gradref_conv3d_filter_init_cann(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NDHWC, 4, ndhwc4, 0),
        GRADREF_OK);
    const int64_t want_shape[5] = {6, 5, 1, 2, 3}, want_strides[5] = {30, 1, 30, 15, 5};
    for (int d = 0; d < 5; d++) {
        assert_int_equal(t.shape[d], want_shape[d]);
        if (t.shape[d] > 1) assert_int_equal(t.strides[d], want_strides[d]);
    }
    tu_expect_status(
        gradref_conv3d_filter_init_cann(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NCHW, 4, ndhwc4, 0),
        GRADREF_ERR_PARAM, "conv3d_filter_init_cann", "DHWCN");
    tu_expect_status(
        gradref_conv3d_filter_init_cann(&t, NULL, GRADREF_F32, GRADREF_FORMAT_DHWCN, 3, ndhwc4, 0),
        GRADREF_ERR_RANK, "conv3d_filter_init_cann", "entries");

    /* from_depthwise only where CANN reads it: ignored with 5 entries and for an NDHWC y */
    const int64_t five[5] = {6, 1, 2, 3, 5}, ndhwc_want[5] = {6, 5, 1, 2, 3};
    assert_int_equal(
        gradref_conv3d_filter_init_cann(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NCDHW, 5, five, 1),
        GRADREF_OK);
    for (int d = 0; d < 5; d++)
        assert_int_equal(t.shape[d], five[d]);
    assert_int_equal(
        gradref_conv3d_filter_init_cann(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NDHWC, 4, ndhwc4, 1),
        GRADREF_OK);
    for (int d = 0; d < 5; d++)
        assert_int_equal(t.shape[d], ndhwc_want[d]);
    const int64_t ncdhw4[4] = {7, 5, 3, 3}; /* (N, C, H, W): 35 output channels of one input */
    assert_int_equal(
        gradref_conv3d_filter_init_cann(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NCDHW, 4, ncdhw4, 1),
        GRADREF_OK);
    assert_true(t.shape[0] == 35 && t.shape[1] == 1 && t.shape[2] == 1 && t.strides[0] == 9);

    enum { IN = 3, MULT = 2, K = 2 };
    const int64_t xs[5] = {2, IN, 3, 4, 3}, dys[5] = {2, IN * MULT, 3, 3, 2};
    float x[2 * IN * 36], dy[2 * IN * MULT * 18], plain[IN * MULT * K * K], cann[IN * MULT * K * K];
    tu_rng r = tu_rng_make(5150);
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)tu_range(&r, -5, 5);
    for (size_t i = 0; i < sizeof dy / sizeof dy[0]; i++)
        dy[i] = (float)tu_range(&r, -5, 5);
    gradref_tensor tx, tdy, tw, tc;
    assert_int_equal(gradref_tensor_init(&tx, x, GRADREF_F32, 5, xs), GRADREF_OK);
    assert_int_equal(gradref_tensor_init(&tdy, dy, GRADREF_F32, 5, dys), GRADREF_OK);
    const int64_t ws[5] = {IN * MULT, 1, 1, K, K};
    assert_int_equal(gradref_tensor_init(&tw, plain, GRADREF_F32, 5, ws), GRADREF_OK);
    const int64_t filter_size[4] = {K, K, IN, MULT}; /* DHWCN without D: (kH, kW, in, mult) */
    assert_int_equal(gradref_conv3d_filter_init_cann(&tc, cann, GRADREF_F32, GRADREF_FORMAT_DHWCN,
                                                     4, filter_size, 1),
                     GRADREF_OK);
    assert_int_equal(tc.shape[0], IN * MULT);
    assert_int_equal(tc.shape[1], 1);
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    p.groups = IN;
    for (int j = 0; j < 3; j++)
        p.stride[j] = p.dilation[j] = 1;
    assert_int_equal(gradref_conv3d_backprop_filter(&p, &tx, &tdy, &tw, NULL), GRADREF_OK);
    assert_int_equal(gradref_conv3d_backprop_filter(&p, &tx, &tdy, &tc, NULL), GRADREF_OK);
    for (int i = 0; i < IN; i++)
        for (int m = 0; m < MULT; m++)
            for (int k = 0; k < K * K; k++) /* TF's depthwise memory [kh][kw][i][m] */
                assert_true(cann[(k * IN + i) * MULT + m] == plain[(i * MULT + m) * K * K + k]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_ones),
        cmocka_unit_test(test_tf_table),
        cmocka_unit_test(test_2d_degenerate),
        cmocka_unit_test(test_adjoint_identity),
        cmocka_unit_test(test_threads_layouts_dtypes),
        cmocka_unit_test(test_counter),
        cmocka_unit_test(test_nan_bits),
        cmocka_unit_test(test_signed_zeros),
        cmocka_unit_test(test_lone_nonfinite_dy),
        cmocka_unit_test(test_huge_strides_into_pads),
        cmocka_unit_test(test_padded_zeros),
        cmocka_unit_test(test_threads_bounded_by_work),
        cmocka_unit_test(test_workspace_follows_work),
        cmocka_unit_test(test_wide_channels),
        cmocka_unit_test(test_first_layer_tiles),
        cmocka_unit_test(test_dy_gathered),
        cmocka_unit_test(test_row_tiles_and_split),
        cmocka_unit_test(test_gemm_variants),
        cmocka_unit_test(test_workspace_for_fewer_threads),
        cmocka_unit_test(test_split_chunks),
        cmocka_unit_test(test_blocked_sum_accuracy),
        cmocka_unit_test(test_long_and_nonfinite),
        cmocka_unit_test(test_pads_same),
        cmocka_unit_test(test_transpose_rule),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_term_threads),
        cmocka_unit_test(test_hf32_bit_patterns),
        cmocka_unit_test(test_hf32_equals_default_on_rounded_inputs),
        cmocka_unit_test(test_hf32_errors),
        cmocka_unit_test(test_strict_cann),
        cmocka_unit_test(test_cann_filter_size),
    };
    tu_seed();
    return TU_RUN_GROUP("conv3d_backprop_filter", tests);
}
