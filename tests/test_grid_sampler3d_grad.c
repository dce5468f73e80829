/* SPDX-License-Identifier: Apache-2.0 */
/* grid_sampler3d_grad: known values (reference §1.7 table, CANN example, nearest ties), the
 * adjoint identity and finite differences against a forward written here, PyTorch fixtures,
 * fast path vs reference on every mode/dtype/layout/thread count, non-finite data, errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "problem.h"
#include "common/isa.h"
#include "golden.h"
#include "grid_sampler3d_grad/gs3d_internal.h"
#include "test_util.h"

enum { NCDHW = 0, NDHWC = 1, STRIDED = 2 };

typedef struct gs_case {
    gradref_grid_sampler3d_params params;
    int32_t dtype;
    gradref_tensor grad, x, grid, dx, dgrid;
    void *buf[5];
    size_t bytes[5];
} gs_case;

/* A 5-D tensor (n, c, d, h, w) in the layout; for grid the last dim is the 3 coordinates and
 * "NDHWC" does not apply (it is channels-last already), STRIDED pads every dim. */
static void *make5(gradref_tensor *t, int32_t dtype, const int64_t *shape, int layout, int is_grid,
                   size_t *bytes, tu_rng *r) {
    static const int channels_last[5] = {0, 2, 3, 4, 1};
    static const int point_major[5] = {4, 0, 1, 2, 3}; /* grid with the coordinate outermost */
    const int64_t pad[5] = {1, 2, 1, 3, 2};
    const int *perm = NULL;
    if (layout == NDHWC) perm = is_grid ? point_major : channels_last;
    return tu_make_tensor(t, dtype, 5, shape, perm, layout == STRIDED ? pad : NULL, bytes, r);
}

static void fill(const gradref_tensor *t, double lo, double hi, tu_rng *r) {
    int64_t i[5];
    for (i[0] = 0; i[0] < t->shape[0]; i[0]++)
        for (i[1] = 0; i[1] < t->shape[1]; i[1]++)
            for (i[2] = 0; i[2] < t->shape[2]; i[2]++)
                for (i[3] = 0; i[3] < t->shape[3]; i[3]++)
                    for (i[4] = 0; i[4] < t->shape[4]; i[4]++)
                        tu_put(t, i, lo + (hi - lo) * tu_uniform(r));
}

/* N, C, input D H W, output D H W. Values: x and grad in [-1, 1], grid in [-reach, reach]. */
static void make_case(gs_case *c, int32_t dtype, const int64_t *dims, int layout, double reach,
                      tu_rng *r) {
    memset(c, 0, sizeof *c);
    c->dtype = dtype;
    const int64_t N = dims[0], C = dims[1];
    int64_t xs[5] = {N, C, dims[2], dims[3], dims[4]};
    int64_t gs[5] = {N, C, dims[5], dims[6], dims[7]};
    int64_t grs[5] = {N, dims[5], dims[6], dims[7], 3};
    c->buf[0] = make5(&c->grad, dtype, gs, layout, 0, &c->bytes[0], r);
    c->buf[1] = make5(&c->x, dtype, xs, layout, 0, &c->bytes[1], r);
    c->buf[2] = make5(&c->grid, dtype, grs, layout, 1, &c->bytes[2], r);
    c->buf[3] = make5(&c->dx, dtype, xs, layout, 0, &c->bytes[3], r);
    c->buf[4] = make5(&c->dgrid, dtype, grs, layout, 1, &c->bytes[4], r);
    fill(&c->grad, -1, 1, r);
    fill(&c->x, -1, 1, r);
    fill(&c->grid, -reach, reach, r);
}

static void free_case(gs_case *c) {
    for (int i = 0; i < 5; i++)
        free(c->buf[i]);
}

static gradref_status run(gs_case *c, const gradref_exec *exec) {
    return gradref_grid_sampler3d_grad(&c->params, &c->grad, &c->x, &c->grid, &c->dx, &c->dgrid,
                                       exec);
}

static void run_ok(gs_case *c, const gradref_exec *exec) {
    gradref_status s = run(c, exec);
    if (s != GRADREF_OK) fail_msg("%s: %s", gradref_status_string(s), gradref_last_error());
}

static double at5(const gradref_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
    int64_t i[5] = {a, b, c, d, e};
    return tu_get(t, i);
}

static void put5(const gradref_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e,
                 double v) {
    int64_t i[5] = {a, b, c, d, e};
    tu_put(t, i, v);
}

/* Same value, same bits for zeros (the sign matters), any NaN for NaN. */
static int same(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* Every element of two tensors of one shape, by value and sign (see same()). */
static void expect_same_tensor(const gradref_tensor *got, const gradref_tensor *want,
                               const char *what) {
    int64_t i[5];
    for (i[0] = 0; i[0] < got->shape[0]; i[0]++)
        for (i[1] = 0; i[1] < got->shape[1]; i[1]++)
            for (i[2] = 0; i[2] < got->shape[2]; i[2]++)
                for (i[3] = 0; i[3] < got->shape[3]; i[3]++)
                    for (i[4] = 0; i[4] < got->shape[4]; i[4]++) {
                        double a = tu_get(got, i), b = tu_get(want, i);
                        if (!same(a, b))
                            fail_msg("%s[%lld,%lld,%lld,%lld,%lld]: got %.17g, want %.17g", what,
                                     (long long)i[0], (long long)i[1], (long long)i[2],
                                     (long long)i[3], (long long)i[4], a, b);
                    }
}

/* ------------------------------------------------------------ the forward, written here */

static double clampd(double v, double lo, double hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Forward source coordinate of PyTorch's grid_sampler_compute_source_index. */
static double source_coordinate(double g, int64_t size, int padding, int align) {
    double u = align ? (g + 1) / 2 * (double)(size - 1) : ((g + 1) * (double)size - 1) / 2;
    if (padding == GRADREF_PAD_BORDER) return clampd(u, 0, (double)(size - 1));
    if (padding == GRADREF_PAD_REFLECTION) {
        double lo = align ? 0 : -0.5, hi = align ? (double)(size - 1) : (double)size - 0.5;
        double span = hi - lo;
        if (span <= 0) return 0;
        double t = fabs(u - lo);
        double k = floor(t / span), rest = t - k * span;
        u = fmod(k, 2) == 0 ? lo + rest : hi - rest;
        return clampd(u, 0, (double)(size - 1));
    }
    return u;
}

/* <grid_sample(x, grid), g> in f64 over tensors of any dtype. */
static double forward_dot(const gradref_grid_sampler3d_params *p, const gradref_tensor *x,
                          const gradref_tensor *grid, const gradref_tensor *g) {
    const int64_t N = x->shape[0], C = x->shape[1], D = x->shape[2], H = x->shape[3],
                  W = x->shape[4];
    double total = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t od = 0; od < grid->shape[1]; od++)
            for (int64_t oh = 0; oh < grid->shape[2]; oh++)
                for (int64_t ow = 0; ow < grid->shape[3]; ow++) {
                    double u[3];
                    const int64_t size[3] = {W, H, D};
                    for (int k = 0; k < 3; k++)
                        u[k] = source_coordinate(at5(grid, n, od, oh, ow, k), size[k], p->padding,
                                                 p->align_corners);
                    for (int64_t c = 0; c < C; c++) {
                        double out = 0;
                        if (p->interpolation == GRADREF_INTERP_NEAREST) {
                            int64_t xi = (int64_t)nearbyint(u[0]), yi = (int64_t)nearbyint(u[1]),
                                    zi = (int64_t)nearbyint(u[2]);
                            if (xi >= 0 && xi < W && yi >= 0 && yi < H && zi >= 0 && zi < D)
                                out = at5(x, n, c, zi, yi, xi);
                        } else {
                            double f[3];
                            int64_t i0[3];
                            for (int k = 0; k < 3; k++) {
                                i0[k] = (int64_t)floor(u[k]);
                                f[k] = u[k] - (double)i0[k];
                            }
                            for (int corner = 0; corner < 8; corner++) {
                                int64_t xi = i0[0] + (corner & 1), yi = i0[1] + ((corner >> 1) & 1),
                                        zi = i0[2] + (corner >> 2);
                                if (xi < 0 || xi >= W || yi < 0 || yi >= H || zi < 0 || zi >= D)
                                    continue;
                                double w = ((corner & 1) ? f[0] : 1 - f[0]) *
                                           (((corner >> 1) & 1) ? f[1] : 1 - f[1]) *
                                           ((corner >> 2) ? f[2] : 1 - f[2]);
                                out += w * at5(x, n, c, zi, yi, xi);
                            }
                        }
                        total += out * at5(g, n, c, od, oh, ow);
                    }
                }
    return total;
}

static double dot5(const gradref_tensor *a, const gradref_tensor *b) {
    double s = 0;
    int64_t i[5];
    for (i[0] = 0; i[0] < a->shape[0]; i[0]++)
        for (i[1] = 0; i[1] < a->shape[1]; i[1]++)
            for (i[2] = 0; i[2] < a->shape[2]; i[2]++)
                for (i[3] = 0; i[3] < a->shape[3]; i[3]++)
                    for (i[4] = 0; i[4] < a->shape[4]; i[4]++)
                        s += tu_get(a, i) * tu_get(b, i);
    return s;
}

/* ------------------------------------------------------------ known values */

/* Reference §1.7 (measured on PyTorch in f64): V[z,y,x] = x on 5x5x5, grad 1, one point;
 * dgrid x. Checked in F64 and F32 (where PyTorch's f32 kernel differs in two entries). */
static void test_boundary_table(void **state) {
    (void)state;
    static const double points[7][3] = {{1, 1, 1},         {-1, -1, -1}, {0.8, 0.8, 0.8}, {0, 0, 0},
                                        {1.0000001, 0, 0}, {-1.2, 0, 0}, {3.1, 0, 0}};
    /* zeros ac=1, zeros ac=0, border 1, border 0, reflection 1, reflection 0 */
    static const double want[7][6] = {{-8, -2.5, -0.0, -0.0, 0, 0}, {2, 0, 0, 0, 0, 0},
                                      {2, -10, 2, -0.0, 2, -0.0},   {2, 2.5, 2, 2.5, 2, 2.5},
                                      {-8, -10, -0.0, -0.0, -2, 0}, {0, 0, 0, 0, -2, -0.0},
                                      {0, 0, -0.0, -0.0, 2, 0}};
    const int64_t dims[8] = {1, 1, 5, 5, 5, 1, 1, 1};
    tu_rng r = tu_rng_make(100);
    for (int dt = 0; dt < 2; dt++) {
        gs_case c;
        make_case(&c, dt ? GRADREF_F64 : GRADREF_F32, dims, NCDHW, 1, &r);
        for (int z = 0; z < 5; z++)
            for (int y = 0; y < 5; y++)
                for (int x = 0; x < 5; x++)
                    put5(&c.x, 0, 0, z, y, x, x);
        put5(&c.grad, 0, 0, 0, 0, 0, 1);
        for (int pt = 0; pt < 7; pt++)
            for (int m = 0; m < 6; m++) {
                gradref_grid_sampler3d_params p = {GRADREF_INTERP_BILINEAR, m / 2, (m + 1) % 2};
                c.params = p;
                for (int k = 0; k < 3; k++)
                    put5(&c.grid, 0, 0, 0, 0, k, points[pt][k]);
                run_ok(&c, NULL);
                /* zeros exactly (sign included); the rest to f32 rounding of 0.8 etc. */
                double got = at5(&c.dgrid, 0, 0, 0, 0, 0), w = want[pt][m];
                /* The table is f64. In f32, 1.0000001 is 1 + 2^-23 and lands past the fold, and
                 * -1.2 reflects to just inside the clamp band (PyTorch f32 gives the same). */
                if (dt == 0 && pt == 4 && m == 4) w = 0.0;
                if (dt == 0 && pt == 5 && m == 5) w = -2.5;
                if (w == 0 ? !same(got, w) : fabs(got - w) > 1e-5 * fabs(w))
                    fail_msg("%s point %d mode %d: dgrid_x %g, want %g", dt ? "F64" : "F32", pt, m,
                             got, want[pt][m]);
            }
        free_case(&c);
    }
}

/* The CANN documentation's example, measured on PyTorch (reference §1.7): zeros, border and
 * reflection with align_corners 0; signed zeros tell border from reflection. */
static void test_cann_example(void **state) {
    (void)state;
    static const double grid[12] = {-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0};
    static const double dx_zeros[9] = {.25, 0, 0, .5, 0, 0, .125, .5, 0};
    static const double dg_zeros[12] = {.75, .75,  -.125, 2.625, -2.625, .875,
                                        6,   2.25, -1,    .75,   -12,    -2};
    static const double dx_border[9] = {1, 0, 0, 1, 0, 0, 1, 1, 0};
    static const double dg_border[12] = {0, 0, -0.0, 0, -0.0, -0.0, 0, 4.5, -0.0, 1.5, -0.0, -0.0};
    const int64_t dims[8] = {1, 1, 1, 3, 3, 1, 2, 2};
    tu_rng r = tu_rng_make(101);
    for (int layout = 0; layout < 3; layout++) {
        gs_case c;
        make_case(&c, GRADREF_F64, dims, layout, 1, &r);
        for (int i = 0; i < 9; i++)
            put5(&c.x, 0, 0, 0, i / 3, i % 3, i + 1);
        for (int i = 0; i < 4; i++) {
            put5(&c.grad, 0, 0, 0, i / 2, i % 2, 1);
            for (int k = 0; k < 3; k++)
                put5(&c.grid, 0, 0, i / 2, i % 2, k, grid[i * 3 + k]);
        }
        for (int pad = 0; pad < 3; pad++) {
            gradref_grid_sampler3d_params p = {GRADREF_INTERP_BILINEAR, pad, 0};
            c.params = p;
            run_ok(&c, NULL);
            const double *wdx = pad ? dx_border : dx_zeros, *wdg = pad ? dg_border : dg_zeros;
            for (int i = 0; i < 9; i++)
                if (!same(at5(&c.dx, 0, 0, 0, i / 3, i % 3), wdx[i]))
                    fail_msg("padding %d dx[%d] = %g, want %g", pad, i,
                             at5(&c.dx, 0, 0, 0, i / 3, i % 3), wdx[i]);
            for (int i = 0; i < 12; i++) {
                double want = wdg[i];
                if (pad == GRADREF_PAD_REFLECTION && (i == 4 || i == 10)) want = 0.0; /* +0 */
                double got = at5(&c.dgrid, 0, 0, i / 6, (i / 3) % 2, i % 3);
                if (!same(got, want))
                    fail_msg("padding %d dgrid[%d] = %g, want %g", pad, i, got, want);
            }
        }
        free_case(&c);
    }
}

/* Nearest rounds half to even: index-space ties -0.5, 0.5, ..., 7.5 on W = 8 (align_corners
 * 0 makes every tie exact). Point k adds k + 1 to the voxel it rounds to. */
static void test_nearest_ties(void **state) {
    (void)state;
    const int64_t W = 8, P = 2 * W + 2;
    const int64_t dims[8] = {1, 1, 1, 1, W, 1, 1, P};
    tu_rng r = tu_rng_make(102);
    gs_case c;
    make_case(&c, GRADREF_F32, dims, NCDHW, 1, &r);
    gradref_grid_sampler3d_params p = {GRADREF_INTERP_NEAREST, GRADREF_PAD_ZEROS, 0};
    c.params = p;
    double want[8] = {0};
    for (int64_t k = 0; k < P; k++) {
        /* index u = (k - 1) / 2; grid x = (2u + 1) / W - 1 = k / W - 1 */
        put5(&c.grid, 0, 0, 0, k, 0, (double)k / (double)W - 1);
        put5(&c.grid, 0, 0, 0, k, 1, 0);
        put5(&c.grid, 0, 0, 0, k, 2, 0);
        put5(&c.grad, 0, 0, 0, 0, k, (double)(k + 1));
        int64_t twice = k - 1, v; /* twice the index */
        if (twice % 2 == 0 || twice == -1)
            v = twice == -1 ? 0 : twice / 2;
        else {
            int64_t lo = (twice - 1) / 2; /* tie between lo and lo + 1: the even one */
            v = lo % 2 == 0 ? lo : lo + 1;
        }
        if (v >= 0 && v < W) want[v] += (double)(k + 1);
    }
    run_ok(&c, NULL);
    for (int64_t v = 0; v < W; v++)
        if (at5(&c.dx, 0, 0, 0, 0, v) != want[v])
            fail_msg("dx[%lld] = %g, want %g", (long long)v, at5(&c.dx, 0, 0, 0, 0, v), want[v]);
    for (int64_t k = 0; k < P; k++)
        for (int j = 0; j < 3; j++)
            if (!same(at5(&c.dgrid, 0, 0, 0, k, j), 0.0)) fail_msg("nearest dgrid is not +0");
    free_case(&c);
}

/* ------------------------------------------------------------ properties */

static const int64_t SHAPES[][8] = {
    {2, 3, 4, 5, 6, 3, 4, 5}, {1, 2, 1, 4, 5, 2, 3, 3}, {2, 1, 3, 1, 1, 2, 2, 4},
    {1, 2, 1, 1, 1, 2, 2, 2}, {1, 4, 5, 4, 3, 1, 1, 7}, {2, 2, 3, 3, 3, 4, 4, 4},
};
#define NUM_SHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

/* <forward(x), g> = <x, dx(g)> for every mode, in F64. */
static void test_adjoint_identity(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(200);
    for (int s = 0; s < NUM_SHAPES; s++)
        for (int m = 0; m < 12; m++) {
            gs_case c;
            make_case(&c, GRADREF_F64, SHAPES[s], s % 3, 1.6, &r);
            gradref_grid_sampler3d_params p = {m / 6, m / 2 % 3, m % 2};
            c.params = p;
            run_ok(&c, NULL);
            double lhs = forward_dot(&p, &c.x, &c.grid, &c.grad), rhs = dot5(&c.x, &c.dx);
            double scale = 1 + fabs(lhs);
            if (fabs(lhs - rhs) > 1e-12 * scale)
                fail_msg("shape %d mode %d: <f(x), g> = %.17g, <x, dx> = %.17g", s, m, lhs, rhs);
            free_case(&c);
        }
}

/* dgrid against central differences of <forward(x, grid), g> in F64, at points where the
 * one-sided differences agree (away from cell and reflection boundaries). */
static void test_dgrid_finite_differences(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(201);
    const double h = 1e-6;
    int checked = 0;
    for (int s = 0; s < NUM_SHAPES; s++)
        for (int m = 0; m < 6; m++) {
            gs_case c;
            make_case(&c, GRADREF_F64, SHAPES[s], NCDHW, 1.6, &r);
            gradref_grid_sampler3d_params p = {GRADREF_INTERP_BILINEAR, m / 2, m % 2};
            c.params = p;
            run_ok(&c, NULL);
            const gradref_tensor *gr = &c.grid;
            int64_t i[5];
            for (i[0] = 0; i[0] < gr->shape[0]; i[0]++)
                for (i[1] = 0; i[1] < gr->shape[1]; i[1]++)
                    for (i[2] = 0; i[2] < gr->shape[2]; i[2]++)
                        for (i[3] = 0; i[3] < gr->shape[3]; i[3]++)
                            for (i[4] = 0; i[4] < 3; i[4]++) {
                                double g0 = tu_get(gr, i), f[3];
                                for (int k = 0; k < 3; k++) {
                                    tu_put(gr, i, g0 + (k - 1) * h);
                                    f[k] = forward_dot(&p, &c.x, gr, &c.grad);
                                }
                                tu_put(gr, i, g0);
                                double back = (f[1] - f[0]) / h, fwd = (f[2] - f[1]) / h;
                                /* piecewise linear in one coordinate: a kink shows */
                                if (fabs(back - fwd) > 1e-6 * (1 + fabs(fwd))) continue;
                                double central = (f[2] - f[0]) / (2 * h), got = tu_get(&c.dgrid, i);
                                if (fabs(central - got) > 1e-6 * (1 + fabs(got)))
                                    fail_msg("shape %d mode %d: dgrid %.12g, differences %.12g", s,
                                             m, got, central);
                                checked++;
                            }
            free_case(&c);
        }
    assert_true(checked > 300);
}

/* ------------------------------------------------------------ fast path vs reference */

/* The reference into fresh outputs shaped like c's, then the public call, compared bit for
 * bit (by value and zero sign; NaN as NaN) at the given thread counts and SIMD choice. */
static void check_fast_against_reference(gs_case *c, int32_t precision, int want_dx,
                                         int want_dgrid) {
    gradref_tensor rdx = c->dx, rdg = c->dgrid;
    void *bdx = malloc(c->bytes[3] ? c->bytes[3] : 1), *bdg = malloc(c->bytes[4] ? c->bytes[4] : 1);
    rdx.data = bdx;
    rdg.data = bdg;
    gradref__gs3d_plan plan;
    assert_int_equal(gradref__gs3d_validate(&c->params, &c->grad, &c->x, &c->grid,
                                            want_dx ? &rdx : NULL, want_dgrid ? &rdg : NULL, &plan),
                     GRADREF_OK);
    plan.precision = precision;
    assert_int_equal(gradref__gs3d_ref(&plan), GRADREF_OK);
    if (want_dx) tu_expect_canonical_nans(&rdx, "dx");
    if (want_dgrid) tu_expect_canonical_nans(&rdg, "dgrid");
    static const int threads[] = TU_THREAD_COUNTS;
    for (int simd = 0; simd < 3; simd++) /* portable, AVX2, AVX-512 (as far as the CPU has) */
        for (int t = 0; t < 3; t++) {
            assert_int_equal(gradref__gs3d_validate(&c->params, &c->grad, &c->x, &c->grid,
                                                    want_dx ? &c->dx : NULL,
                                                    want_dgrid ? &c->dgrid : NULL, &plan),
                             GRADREF_OK);
            plan.precision = precision;
            plan.max_isa = simd;
            size_t need = gradref__gs3d_fast_workspace(&plan, precision, threads[t]);
            char *block = malloc(need + 64);
            assert_non_null(block);
            void *ws = block + (64 - (uintptr_t)block % 64) % 64;
            gradref__gs3d_fast(&plan, ws, threads[t]);
            free(block);
            /* bit for bit: NaN signs and payloads too (the NaN rule) */
            if (want_dx) tu_expect_same_bits(&c->dx, &rdx, "dx");
            if (want_dgrid) tu_expect_same_bits(&c->dgrid, &rdg, "dgrid");
        }
    free(bdx);
    free(bdg);
}

/* Nearest mode with every coordinate on a tie (align_corners, sizes 2^k + 1: the grid values
 * are exact), through the fast path's vector geometry at every level and thread count: the
 * rounding to nearest even of every kernel, not just the scalar tail. */
static void test_nearest_ties_fast(void **state) {
    (void)state;
    /* sizes - 1: 2, 4, 8; 120 points, more than the vector geometry's steps */
    const int64_t dims[8] = {1, 2, 3, 5, 9, 2, 3, 20};
    tu_rng r = tu_rng_make(103);
    for (int padding = 0; padding < 2; padding++) {
        gs_case c;
        make_case(&c, GRADREF_F32, dims, NCDHW, 1, &r);
        gradref_grid_sampler3d_params p = {GRADREF_INTERP_NEAREST, padding, 1};
        c.params = p;
        const int64_t span[3] = {8, 4, 2}; /* W - 1, H - 1, D - 1 */
        for (int64_t od = 0; od < dims[5]; od++)
            for (int64_t oh = 0; oh < dims[6]; oh++)
                for (int64_t ow = 0; ow < dims[7]; ow++)
                    for (int k = 0; k < 3; k++) { /* coordinate j + 0.5, j from -1 to size - 1 */
                        const int64_t j = tu_range(&r, -1, span[k]);
                        put5(&c.grid, 0, od, oh, ow, k, (double)(2 * j + 1) / (double)span[k] - 1);
                    }
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT, 1, 1);
        free_case(&c);
    }
}

static void test_fast_matches_reference(void **state) {
    (void)state;
    static const int32_t dtypes[4] = {GRADREF_F32, GRADREF_F64, GRADREF_F16, GRADREF_BF16};
    tu_rng r = tu_rng_make(300);
    for (int s = 0; s < NUM_SHAPES; s++)
        for (int m = 0; m < 12; m++)
            for (int d = 0; d < 4; d++) {
                int layout = (s + m + d) % 3;
                gs_case c;
                make_case(&c, dtypes[d], SHAPES[s], layout, 2.5, &r);
                gradref_grid_sampler3d_params p = {m / 6, m / 2 % 3, m % 2};
                c.params = p;
                int32_t precision = (s + m) % 2 ? GRADREF_PRECISION_HIGH : 0;
                check_fast_against_reference(&c, precision, 1, 1);
                check_fast_against_reference(&c, 1 - precision, (m % 3) != 0, (m % 3) != 1);
                free_case(&c);
            }
}

/* The NaN rule: grad and x holding signalling and quiet NaNs of either sign with payloads and
 * Infs (the grid stays finite: a NaN coordinate samples nothing): the reference gives the
 * canonical NaN, every kernel level and thread count its bits (SIMD bodies and scalar tails
 * alike). */
static void test_nan_bits(void **state) {
    (void)state;
    static const int32_t dtypes[4] = {GRADREF_F32, GRADREF_F64, GRADREF_F16, GRADREF_BF16};
    tu_rng r = tu_rng_make(302);
    for (int s = 0; s < NUM_SHAPES; s++)
        for (int m = 0; m < 12; m++)
            for (int d = 0; d < 4; d++) {
                gs_case c;
                make_case(&c, dtypes[d], SHAPES[s], (s + m + d) % 3, m < 6 ? 2.5 : 1.1, &r);
                gradref_grid_sampler3d_params p = {m / 6, m / 2 % 3, m % 2};
                c.params = p;
                tu_sprinkle_specials(&c.grad, &r, 5);
                tu_sprinkle_specials(&c.x, &r, 7);
                check_fast_against_reference(&c, (s + d) % 3 == 2, 1, 1);
                free_case(&c);
            }
}

/* Large enough to run on several threads, in each layout and mode family. */
static void test_threads_and_layouts(void **state) {
    (void)state;
    const int64_t dims[8] = {2, 9, 6, 7, 9, 12, 16, 17};
    tu_rng r = tu_rng_make(301);
    for (int layout = 0; layout < 3; layout++)
        for (int m = 0; m < 4; m++) {
            gs_case c;
            make_case(&c, layout == 2 ? GRADREF_F16 : GRADREF_F32, dims, layout, 1.3, &r);
            gradref_grid_sampler3d_params p = {m == 3, m % 3, m == 2};
            c.params = p;
            check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT, 1, 1);
            free_case(&c);
        }
}

/* Channel counts past the kernels' vector blocks (32 channels at a time, then 8, then one):
 * 37 and 45 take each block and a remainder; grids inside x (every corner of every point, the
 * dgrid kernels' unblended chain) and reaching past it, in both layouts. */
static void test_wide_channels(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(304);
    for (int64_t C = 37; C <= 45; C += 8)
        for (int layout = 0; layout < 2; layout++)
            for (int m = 0; m < 3; m++) {
                const int64_t dims[8] = {2, C, 3, 5, 6, 3, 4, 5};
                gs_case c;
                make_case(&c, GRADREF_F32, dims, layout, m == 1 ? 1.3 : 0.6, &r);
                gradref_grid_sampler3d_params p = {m == 2, GRADREF_PAD_ZEROS, m == 0};
                c.params = p;
                check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT, 1, 1);
                free_case(&c);
            }
}

/* Many points on one voxel (16-point groups that collide): the order of dx's sum is the
 * reference's, channels-last and channel-major. */
static void test_collisions(void **state) {
    (void)state;
    const int64_t dims[8] = {1, 5, 2, 2, 2, 8, 8, 9};
    tu_rng r = tu_rng_make(302);
    for (int layout = 0; layout < 2; layout++) {
        gs_case c;
        make_case(&c, GRADREF_F32, dims, layout, 0.05, &r);
        for (int m = 0; m < 2; m++) {
            gradref_grid_sampler3d_params p = {m, GRADREF_PAD_BORDER, 1};
            c.params = p;
            check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT, 1, 1);
        }
        free_case(&c);
    }
}

/* Nearest into dense F32 planes goes voxel by voxel in blocks of 16, four channels at a time
 * (gs3d_fast.h): channel counts that leave 1-3 over, volumes under 16 voxels or not a multiple
 * of 16, voxels with three and more points (inside blocks and in the partial first and last
 * ones), dx at every alignment (blocks start on a cache line; the lines are streamed when every
 * plane is aligned alike), and grads of signed zeros (a voxel of -0 points sums to +0). */
static void test_nearest_voxel_blocks(void **state) {
    (void)state;
    const int64_t dims[5][8] = {
        {2, 5, 3, 4, 5, 4, 5, 6}, /* V 60, two points a voxel on average */
        {1, 7, 1, 2, 3, 3, 4, 5}, /* V 6 */
        {2, 4, 4, 8, 8, 5, 6, 7}, /* V 256: planes 64-byte multiples */
        {1, 9, 2, 3, 8, 6, 6, 6}, /* V 48, 4.5 points a voxel */
        {1, 2, 1, 4, 8, 4, 4, 4}, /* V 32 */
    };
    static const int64_t shifts[4] = {0, 1, 5, 15};
    tu_rng r = tu_rng_make(305);
    for (int s = 0; s < 5; s++)
        for (int k = 0; k < 4; k++) {
            gs_case c;
            make_case(&c, GRADREF_F32, dims[s], NCDHW, k % 2 ? 0.6 : 1.1, &r);
            if (s == 4 || k == 3) { /* mostly zeros of both signs */
                float *g = c.grad.data;
                for (size_t i = 0; i < c.bytes[0] / 4; i++) {
                    const double u = tu_uniform(&r);
                    g[i] = u < 0.6 ? -0.0f : u < 0.8 ? 0.0f : (float)u;
                }
            }
            char *block = malloc(c.bytes[3] + 128);
            assert_non_null(block);
            float *line = (float *)(block + (64 - (uintptr_t)block % 64) % 64);
            void *own = c.dx.data;
            c.dx.data = line + shifts[k];
            for (int m = 0; m < 4; m++) {
                gradref_grid_sampler3d_params p = {GRADREF_INTERP_NEAREST, m % 3, m / 2};
                c.params = p;
                check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT, 1, m == 1);
            }
            c.dx.data = own;
            free(block);
            free_case(&c);
        }
}

/* A caller's workspace that holds the per-thread parts of fewer threads than asked for: the
 * call runs on as many as it holds, with the same bits. */
static void test_workspace_for_fewer_threads(void **state) {
    (void)state;
    const int64_t dims[8] = {2, 6, 4, 6, 8, 5, 6, 7};
    tu_rng r = tu_rng_make(306);
    gs_case c;
    make_case(&c, GRADREF_F32, dims, NCDHW, 1.1, &r);
    gradref_grid_sampler3d_params p = {GRADREF_INTERP_NEAREST, GRADREF_PAD_ZEROS, 0};
    c.params = p;
    gradref__gs3d_plan plan;
    assert_int_equal(gradref__gs3d_validate(&p, &c.grad, &c.x, &c.grid, &c.dx, &c.dgrid, &plan),
                     GRADREF_OK);
    const size_t one = gradref__gs3d_fast_workspace(&plan, GRADREF_PRECISION_DEFAULT, 1) + 64;
    if (gradref__isa_level() > GRADREF__ISA_PORTABLE) { /* the voxel index, per-thread stages */
        assert_true(gradref__gs3d_fast_workspace(&plan, GRADREF_PRECISION_DEFAULT, 3) + 64 > one);
        /* and no per-point geometry (about 100 bytes a point) */
        assert_true(one < 60 * (size_t)(dims[0] * dims[5] * dims[6] * dims[7]));
    }
    float *want = malloc(c.bytes[3]);
    assert_non_null(want);
    gradref_exec serial = {NULL, 0, 1, GRADREF_PRECISION_DEFAULT};
    run_ok(&c, &serial);
    memcpy(want, c.dx.data, c.bytes[3]);
    memset(c.dx.data, 0x7f, c.bytes[3]);
    void *ws = malloc(one);
    assert_non_null(ws);
    gradref_exec e = {ws, one, 3, GRADREF_PRECISION_DEFAULT};
    run_ok(&c, &e);
    assert_memory_equal(c.dx.data, want, c.bytes[3]);
    free(ws);
    free(want);
    free_case(&c);
}

/* Zero-stride (broadcast) x and grad, as PyTorch's expand_as. */
static void test_broadcast_inputs(void **state) {
    (void)state;
    const int64_t dims[8] = {2, 3, 3, 4, 5, 2, 3, 4};
    tu_rng r = tu_rng_make(303);
    gs_case c;
    make_case(&c, GRADREF_F32, dims, NCDHW, 1.2, &r);
    c.x.strides[0] = 0;
    c.x.strides[1] = 0;
    c.grad.strides[1] = 0;
    for (int m = 0; m < 12; m++) {
        gradref_grid_sampler3d_params p = {m / 6, m / 2 % 3, m % 2};
        c.params = p;
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT, 1, 1);
    }
    free_case(&c);
}

/* ------------------------------------------------------------ non-finite values, empty sizes */

/* PyTorch issue 24823: identity grid over arange 27..1 with one point at +inf (zeros padding):
 * that point adds nothing to dx (dx = 1 elsewhere) and its dgrid is 0. NaN and 1e30 points in
 * every padding mode behave like the reference; NaN in x reaches dgrid, inf in grad reaches dx. */
static void test_non_finite(void **state) {
    (void)state;
    const int64_t dims[8] = {1, 1, 3, 3, 3, 3, 3, 3};
    tu_rng r = tu_rng_make(400);
    gs_case c;
    make_case(&c, GRADREF_F32, dims, NCDHW, 1, &r);
    for (int z = 0; z < 3; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 3; x++) {
                put5(&c.x, 0, 0, z, y, x, 27 - (z * 9 + y * 3 + x));
                put5(&c.grad, 0, 0, z, y, x, 1);
                const int at[3] = {x, y, z};
                for (int k = 0; k < 3; k++) /* voxel centres with align_corners 0 */
                    put5(&c.grid, 0, z, y, x, k, (2.0 * at[k] + 1) / 3 - 1);
            }
    put5(&c.grid, 0, 1, 1, 1, 0, INFINITY);
    gradref_grid_sampler3d_params p = {GRADREF_INTERP_BILINEAR, GRADREF_PAD_ZEROS, 0};
    c.params = p;
    run_ok(&c, NULL);
    for (int z = 0; z < 3; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 3; x++) {
                double want = (z == 1 && y == 1 && x == 1) ? 0 : 1;
                if (fabs(at5(&c.dx, 0, 0, z, y, x) - want) > 1e-6)
                    fail_msg("dx[%d,%d,%d] = %g, want %g", z, y, x, at5(&c.dx, 0, 0, z, y, x),
                             want);
            }
    for (int k = 0; k < 3; k++)
        assert_true(at5(&c.dgrid, 0, 1, 1, 1, k) == 0);
    put5(&c.grid, 0, 0, 0, 0, 1, NAN);
    put5(&c.grid, 0, 2, 2, 2, 2, 1e30);
    put5(&c.grid, 0, 0, 2, 1, 0, -INFINITY);
    for (int m = 0; m < 12; m++) {
        gradref_grid_sampler3d_params q = {m / 6, m / 2 % 3, m % 2};
        c.params = q;
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT, 1, 1);
    }
    put5(&c.x, 0, 0, 1, 1, 2, NAN);
    put5(&c.grad, 0, 0, 0, 1, 1, INFINITY);
    c.params = p;
    check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT, 1, 1);
    run_ok(&c, NULL);
    assert_true(isinf(at5(&c.dx, 0, 0, 0, 1, 1)));
    assert_true(isnan(at5(&c.dgrid, 0, 1, 1, 2, 0)));
    free_case(&c);
}

/* Zero N, C or output size: legal; dx and dgrid zero-filled (or empty). */
static void test_empty(void **state) {
    (void)state;
    static const int64_t shapes[4][8] = {{0, 2, 2, 2, 2, 2, 2, 2},
                                         {2, 0, 2, 2, 2, 2, 2, 2},
                                         {2, 3, 2, 2, 2, 0, 2, 2},
                                         {1, 1, 2, 3, 2, 2, 2, 0}};
    tu_rng r = tu_rng_make(401);
    for (int s = 0; s < 4; s++)
        for (int d = 0; d < 4; d++) {
            gs_case c;
            make_case(&c, d, shapes[s], s % 3, 1, &r);
            gradref_grid_sampler3d_params p = {s % 2, GRADREF_PAD_REFLECTION, 0};
            c.params = p;
            run_ok(&c, NULL);
            int64_t i[5];
            const gradref_tensor *outs[2] = {&c.dx, &c.dgrid};
            for (int o = 0; o < 2; o++) {
                const gradref_tensor *t = outs[o];
                for (i[0] = 0; i[0] < t->shape[0]; i[0]++)
                    for (i[1] = 0; i[1] < t->shape[1]; i[1]++)
                        for (i[2] = 0; i[2] < t->shape[2]; i[2]++)
                            for (i[3] = 0; i[3] < t->shape[3]; i[3]++)
                                for (i[4] = 0; i[4] < t->shape[4]; i[4]++)
                                    if (!same(tu_get(t, i), 0.0)) fail_msg("not +0 (shape %d)", s);
            }
            free_case(&c);
        }
}

/* An F32 tensor of 5-D shape s with no element, no data and zero strides (gradref_tensor_init
 * refuses sizes whose product, zeros aside, exceeds int64; the struct itself may hold them). */
static void empty_tensor(gradref_tensor *t, const int64_t *s) {
    memset(t, 0, sizeof *t);
    t->dtype = GRADREF_F32;
    t->ndim = 5;
    for (int i = 0; i < 5; i++)
        t->shape[i] = s[i];
}

/* An empty tensor's other sizes may be anything: products of sizes taken across its zero must
 * not overflow (a fuzzer found N * Do * Ho * Wo computed before Wo = 0 was seen). */
static void test_empty_with_huge_sizes(void **state) {
    (void)state;
    const int64_t huge = INT64_C(1) << 62;
    /* N huge, C = 0, Wo = 0; then Do huge, Wo = 0, and x small enough to be zero-filled */
    const int64_t cases[2][8] = {{huge, 0, 1, 1, 1, 3, 1, 0}, {2, 1, 2, 3, 2, huge, 3, 0}};
    for (int k = 0; k < 2; k++) {
        const int64_t *z = cases[k]; /* N C D H W Do Ho Wo */
        const int64_t xs[5] = {z[0], z[1], z[2], z[3], z[4]},
                      gs[5] = {z[0], z[1], z[5], z[6], z[7]}, grs[5] = {z[0], z[5], z[6], z[7], 3};
        float x_data[24], dx_data[24];
        for (int i = 0; i < 24; i++)
            x_data[i] = 1.0f, dx_data[i] = 7.0f;
        const int small_x = k == 1; /* 2 x 1 x 2 x 3 x 2 = 24 elements */
        gradref_tensor grad, x, grid, dx, dgrid;
        empty_tensor(&grad, gs);
        empty_tensor(&grid, grs);
        empty_tensor(&dgrid, grs);
        if (small_x) {
            assert_int_equal(gradref_tensor_init(&x, x_data, GRADREF_F32, 5, xs), GRADREF_OK);
            assert_int_equal(gradref_tensor_init(&dx, dx_data, GRADREF_F32, 5, xs), GRADREF_OK);
        } else {
            empty_tensor(&x, xs);
            empty_tensor(&dx, xs);
        }
        const gradref_grid_sampler3d_params p = {GRADREF_INTERP_BILINEAR, GRADREF_PAD_ZEROS, 0};
        size_t bytes = 1;
        assert_int_equal(
            gradref_grid_sampler3d_grad_workspace_size(&p, &grad, &x, &grid, &dx, &dgrid, &bytes),
            GRADREF_OK);
        assert_int_equal(gradref_grid_sampler3d_grad(&p, &grad, &x, &grid, &dx, &dgrid, NULL),
                         GRADREF_OK);
        for (int i = 0; small_x && i < 24; i++)
            assert_true(same(dx_data[i], 0.0));
    }
}

/* dx or dgrid NULL skips it; both NULL validates and does nothing. Exact workspaces work. */
static void test_optional_outputs_and_workspace(void **state) {
    (void)state;
    const int64_t dims[8] = {2, 3, 3, 4, 5, 4, 3, 2};
    tu_rng r = tu_rng_make(402);
    gs_case c;
    make_case(&c, GRADREF_BF16, dims, NDHWC, 1.5, &r);
    gradref_grid_sampler3d_params p = {0, 2, 1};
    c.params = p;
    assert_int_equal(gradref_grid_sampler3d_grad(&p, &c.grad, &c.x, &c.grid, NULL, NULL, NULL),
                     GRADREF_OK);
    check_fast_against_reference(&c, GRADREF_PRECISION_HIGH, 1, 0);
    check_fast_against_reference(&c, GRADREF_PRECISION_HIGH, 0, 1);
    size_t bytes = 0;
    assert_int_equal(gradref_grid_sampler3d_grad_workspace_size(&p, &c.grad, &c.x, &c.grid, &c.dx,
                                                                &c.dgrid, &bytes),
                     GRADREF_OK);
    assert_true(bytes > 0);
    void *ws = malloc(bytes);
    for (int prec = 0; prec < 2; prec++) {
        gradref_exec e = {ws, bytes, 2, prec};
        run_ok(&c, &e);
    }
    free(ws);
    free_case(&c);
}

/* Every line of problems/problems.txt for this operator, cut down, fast vs reference. */
static void test_bench_problems(void **state) {
    (void)state;
    problem *list;
    char err[256];
    int count = problem_load(GRADREF_PROBLEMS, &list, err, sizeof err);
    if (count < 0) fail_msg("%s", err);
    tu_rng r = tu_rng_make(403);
    int ran = 0;
    for (int i = 0; i < count; i++) {
        const problem *pb = &list[i];
        if (strcmp(pb->op, "grid_sampler3d_grad") != 0) continue;
        const int64_t dims[8] = {
            1, problem_get(pb, "C", 1) > 5 ? 5 : problem_get(pb, "C", 1), 4, 5, 6, 3, 5, 4};
        gs_case c;
        make_case(&c, pb->dtype, dims, strcmp(pb->mode, "ndhwc") == 0 ? NDHWC : NCDHW, 1.2, &r);
        gradref_grid_sampler3d_params p = {(int32_t)problem_get(pb, "interp", 0),
                                           (int32_t)problem_get(pb, "pad", 0),
                                           (int32_t)problem_get(pb, "ac", 0)};
        c.params = p;
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT, 1, 1);
        free_case(&c);
        ran++;
    }
    assert_true(ran > 0);
    free(list);
}

/* ------------------------------------------------------------ PyTorch fixtures */

static int32_t dtype_named(const char *s) {
    static const char *names[] = {"f32", "f64", "f16", "bf16"};
    for (int32_t d = 0; d < 4; d++)
        if (strcmp(s, names[d]) == 0) return d;
    fail_msg("unknown dtype '%s'", s);
    return -1;
}

static void *load5(const golden_case *g, const char *key, gradref_tensor *t, int32_t dtype,
                   const int64_t *shape) {
    size_t esz = tu_dtype_size(dtype),
           n = (size_t)(shape[0] * shape[1] * shape[2] * shape[3] * shape[4]);
    void *buf = calloc(n + 1, esz);
    gradref_tensor_init(t, buf, dtype, 5, shape);
    if (key) assert_int_equal(golden_bits(g, key, buf, esz, n), n);
    return buf;
}

/* Fixtures from tests/golden/generate.py: torch.ops.aten.grid_sampler_3d_backward on the same
 * inputs. F32 cases must match bit for bit (same operations, same order); F64 too. */
static void test_golden_pytorch(void **state) {
    (void)state;
    int count;
    golden_case *cases = golden_load(GRADREF_GOLDEN_DIR "/grid_sampler3d_grad.txt", &count);
    assert_true(count >= 4);
    for (int i = 0; i < count; i++) {
        const golden_case *g = &cases[i];
        int64_t v[8];
        const int32_t dtype = dtype_named(golden_get(g, "dtype"));
        golden_ints(g, "modes", v, 3);
        gradref_grid_sampler3d_params p = {(int32_t)v[0], (int32_t)v[1], (int32_t)v[2]};
        golden_ints(g, "dims", v, 8);
        const int64_t xs[5] = {v[0], v[1], v[2], v[3], v[4]},
                      gs[5] = {v[0], v[1], v[5], v[6], v[7]}, grs[5] = {v[0], v[5], v[6], v[7], 3};
        gradref_tensor grad, x, grid, dx, dgrid, wdx, wdgrid;
        void *bufs[7] = {load5(g, "grad", &grad, dtype, gs),    load5(g, "x", &x, dtype, xs),
                         load5(g, "grid", &grid, dtype, grs),   load5(g, NULL, &dx, dtype, xs),
                         load5(g, NULL, &dgrid, dtype, grs),    load5(g, "dx", &wdx, dtype, xs),
                         load5(g, "dgrid", &wdgrid, dtype, grs)};
        gradref_status s = gradref_grid_sampler3d_grad(&p, &grad, &x, &grid, &dx, &dgrid, NULL);
        if (s != GRADREF_OK) fail_msg("%s: %s", g->name, gradref_last_error());
        expect_same_tensor(&dx, &wdx, g->name);
        expect_same_tensor(&dgrid, &wdgrid, g->name);
        for (int b = 0; b < 7; b++)
            free(bufs[b]);
    }
    golden_free(cases, count);
}

/* ------------------------------------------------------------ errors */

static void expect_error(gs_case *c, gradref_status got, gradref_status want,
                         const char *fragment) {
    tu_expect_status(got, want, "grid_sampler3d_grad", fragment);
    tu_expect_untouched(c->buf[3], c->bytes[3], 0xee, "dx");
    tu_expect_untouched(c->buf[4], c->bytes[4], 0xee, "dgrid");
}

static gradref_status call_case(void *ctx, const gradref_exec *e) {
    return run(ctx, e);
}

/* GRADREF_TERM_*: the F64 outputs' rules, and their values. With every x and grad positive, dx's
 * magnitudes are dx itself (each term positive, the same sums in f64); every dgrid magnitude
 * bounds |dgrid|; one point with its eight corners inside counts each once, plus the five
 * roundings inside a term, and dgrid 8 C terms plus five. */
static void test_term_outputs(void **state) {
    (void)state;
    const int64_t dims[8] = {1, 2, 3, 4, 5, 2, 2, 3};
    tu_rng r = tu_rng_make(510);
    gs_case c, wide;
    make_case(&c, GRADREF_F16, dims, NCDHW, 1.2, &r);
    make_case(&wide, GRADREF_F64, dims, NCDHW, 1.2, &r);
    const int32_t mag = GRADREF_PRECISION_DEFAULT | GRADREF_TERM_MAGNITUDES;
    const gradref_exec terms = {NULL, 0, 2, mag}, counts = {NULL, 0, 1, GRADREF_TERM_COUNTS},
                       both = {NULL, 0, 1, mag | GRADREF_TERM_COUNTS};
    memset(c.buf[3], 0xee, c.bytes[3]);
    memset(c.buf[4], 0xee, c.bytes[4]);
    expect_error(&c, run(&c, &terms), GRADREF_ERR_DTYPE, "writes F64");
    memset(wide.buf[3], 0xee, wide.bytes[3]);
    memset(wide.buf[4], 0xee, wide.bytes[4]);
    expect_error(&wide, run(&wide, &both), GRADREF_ERR_PARAM, "goes alone");
    fill(&wide.x, 0.1, 1, &r);
    fill(&wide.grad, 0.1, 1, &r);
    run_ok(&wide, NULL);
    gs_case plain = wide; /* its dx and dgrid, kept */
    plain.buf[3] = make5(&plain.dx, GRADREF_F64, wide.dx.shape, NCDHW, 0, &plain.bytes[3], &r);
    plain.buf[4] =
        make5(&plain.dgrid, GRADREF_F64, wide.dgrid.shape, NCDHW, 1, &plain.bytes[4], &r);
    memcpy(plain.buf[3], wide.buf[3], wide.bytes[3]);
    memcpy(plain.buf[4], wide.buf[4], wide.bytes[4]);
    run_ok(&wide, &terms);
    tu_expect_same_bits(&wide.dx, &plain.dx, "dx magnitudes");
    int64_t i[5];
    for (i[0] = 0; i[0] < 1; i[0]++)
        for (i[1] = 0; i[1] < 2; i[1]++)
            for (i[2] = 0; i[2] < 2; i[2]++)
                for (i[3] = 0; i[3] < 3; i[3]++)
                    for (i[4] = 0; i[4] < 3; i[4]++)
                        assert_true(tu_get(&wide.dgrid, i) >= fabs(tu_get(&plain.dgrid, i)));
    for (int k = 0; k < 3; k++) /* one point, eight corners inside: the others out of range */
        for (int64_t z = 0; z < 2; z++)
            for (int64_t y = 0; y < 2; y++)
                for (int64_t x = 0; x < 3; x++)
                    put5(&wide.grid, 0, z, y, x, k, z + y + x == 0 ? 0.1 : 5.0);
    run_ok(&wide, &counts);
    int counted = 0;
    for (i[0] = 0; i[0] < 1; i[0]++)
        for (i[1] = 0; i[1] < 2; i[1]++)
            for (i[2] = 0; i[2] < 3; i[2]++)
                for (i[3] = 0; i[3] < 4; i[3]++)
                    for (i[4] = 0; i[4] < 5; i[4]++) {
                        const double n = tu_get(&wide.dx, i);
                        assert_true(n == 0 || n == 6);
                        counted += n == 6;
                    }
    assert_int_equal(counted, 2 * 8);
    for (int k = 0; k < 3; k++) {
        assert_true(at5(&wide.dgrid, 0, 0, 0, 0, k) == 8 * 2 + 5);
        assert_true(at5(&wide.dgrid, 0, 1, 1, 1, k) == 0);
    }
    size_t bytes = 1;
    assert_int_equal(gradref_grid_sampler3d_grad_workspace_size(&wide.params, &wide.grad, &wide.x,
                                                                &wide.grid, &wide.dx, &wide.dgrid,
                                                                &bytes),
                     GRADREF_OK);
    free(plain.buf[3]);
    free(plain.buf[4]);
    free_case(&c);
    free_case(&wide);
}

/* The GRADREF_TERM_* outputs (the reference loop's) at 1, 2 and 3 threads: the same bits. */
static void test_term_threads(void **state) {
    (void)state;
    const int64_t dims[8] = {2, 6, 8, 12, 16, 6, 10, 12};
    tu_rng r = tu_rng_make(511);
    gs_case c;
    make_case(&c, GRADREF_F64, dims, NDHWC, 1.2, &r);
    tu_expect_threads_same_bits(call_case, &c, GRADREF_TERM_MAGNITUDES, c.buf + 3, c.bytes + 3, 2);
    tu_expect_threads_same_bits(call_case, &c, GRADREF_TERM_COUNTS, c.buf + 3, c.bytes + 3, 2);
    free_case(&c);
}

static void test_errors(void **state) {
    (void)state;
    const int64_t dims[8] = {2, 3, 4, 5, 6, 2, 3, 4};
    tu_rng r = tu_rng_make(500);
    gs_case c;
    make_case(&c, GRADREF_F32, dims, NCDHW, 1, &r);
    memset(c.buf[3], 0xee, c.bytes[3]);
    memset(c.buf[4], 0xee, c.bytes[4]);
    gradref_grid_sampler3d_params good = {0, 0, 0}, p;
    const gradref_tensor *G = &c.grad, *X = &c.x, *GR = &c.grid, *DX = &c.dx, *DG = &c.dgrid;
#define CALL(pp, a, b, cc, d, e, ex) gradref_grid_sampler3d_grad(pp, a, b, cc, d, e, ex)

    expect_error(&c, CALL(NULL, G, X, GR, DX, DG, NULL), GRADREF_ERR_NULL, "p is NULL");
    p = good, p.interpolation = 2;
    expect_error(&c, CALL(&p, G, X, GR, DX, DG, NULL), GRADREF_ERR_PARAM, "p.interpolation is 2");
    p = good, p.padding = 3;
    expect_error(&c, CALL(&p, G, X, GR, DX, DG, NULL), GRADREF_ERR_PARAM, "p.padding is 3");
    p = good, p.padding = -1;
    expect_error(&c, CALL(&p, G, X, GR, DX, DG, NULL), GRADREF_ERR_PARAM, "p.padding is -1");
    p = good, p.align_corners = 2;
    expect_error(&c, CALL(&p, G, X, GR, DX, DG, NULL), GRADREF_ERR_PARAM, "p.align_corners is 2");
    expect_error(&c, CALL(&good, NULL, X, GR, DX, DG, NULL), GRADREF_ERR_NULL, "grad is NULL");
    expect_error(&c, CALL(&good, G, NULL, GR, DX, DG, NULL), GRADREF_ERR_NULL, "x is NULL");
    expect_error(&c, CALL(&good, G, X, NULL, DX, DG, NULL), GRADREF_ERR_NULL, "grid is NULL");
    gradref_exec bad_exec = {NULL, 0, -1, 0};
    expect_error(&c, CALL(&good, G, X, GR, DX, DG, &bad_exec), GRADREF_ERR_PARAM, "num_threads");

    gradref_tensor t;
    t = c.x, t.ndim = 4;
    expect_error(&c, CALL(&good, G, &t, GR, DX, DG, NULL), GRADREF_ERR_RANK, "x.ndim is 4");
    t = c.dgrid, t.ndim = 6, t.shape[5] = 1, t.strides[5] = 1;
    expect_error(&c, CALL(&good, G, X, GR, DX, &t, NULL), GRADREF_ERR_RANK, "dgrid.ndim is 6");
    t = c.grad, t.dtype = GRADREF_I32;
    expect_error(&c, CALL(&good, &t, X, GR, DX, DG, NULL), GRADREF_ERR_DTYPE, "grad.dtype is I32");
    t = c.grid, t.dtype = GRADREF_F64;
    expect_error(&c, CALL(&good, G, X, &t, DX, DG, NULL), GRADREF_ERR_DTYPE,
                 "grid.dtype is F64 but grad.dtype is F32");
    t = c.dx, t.dtype = GRADREF_F16;
    expect_error(&c, CALL(&good, G, X, GR, &t, DG, NULL), GRADREF_ERR_DTYPE, "dx.dtype is F16");
    t = c.grad, t.shape[0] = 1;
    expect_error(&c, CALL(&good, &t, X, GR, DX, DG, NULL), GRADREF_ERR_SHAPE,
                 "grad.shape[0] is 1 but x.shape[0] is 2");
    t = c.grid, t.shape[0] = 1;
    expect_error(&c, CALL(&good, G, X, &t, DX, DG, NULL), GRADREF_ERR_SHAPE, "grid.shape[0] is 1");
    t = c.grad, t.shape[1] = 2;
    expect_error(&c, CALL(&good, &t, X, GR, DX, DG, NULL), GRADREF_ERR_SHAPE,
                 "grad.shape[1] is 2 but x.shape[1] is 3");
    t = c.grid, t.shape[4] = 2;
    expect_error(&c, CALL(&good, G, X, &t, DX, DG, NULL), GRADREF_ERR_SHAPE, "grid.shape[4] is 2");
    t = c.grid, t.shape[2] = 2;
    expect_error(&c, CALL(&good, G, X, &t, DX, DG, NULL), GRADREF_ERR_SHAPE,
                 "grid.shape[2] is 2 but the grad size is 3");
    t = c.x, t.shape[3] = 0;
    expect_error(&c, CALL(&good, G, &t, GR, DX, DG, NULL), GRADREF_ERR_SHAPE, "non-empty spatial");
    t = c.dx, t.shape[4] = 5;
    expect_error(&c, CALL(&good, G, X, GR, &t, DG, NULL), GRADREF_ERR_SHAPE, "dx.shape[4] is 5");
    t = c.dgrid, t.shape[3] = 3;
    expect_error(&c, CALL(&good, G, X, GR, DX, &t, NULL), GRADREF_ERR_SHAPE, "dgrid.shape[3] is 3");
    t = c.x, t.strides[2] = -1;
    expect_error(&c, CALL(&good, G, &t, GR, DX, DG, NULL), GRADREF_ERR_STRIDE, "x.strides[2]");
    t = c.dx, t.strides[1] = 0;
    expect_error(&c, CALL(&good, G, X, GR, &t, DG, NULL), GRADREF_ERR_STRIDE, "dx");
    t = c.x, t.shape[0] = INT64_MAX / 2;
    expect_error(&c, CALL(&good, G, &t, GR, DX, DG, NULL), GRADREF_ERR_OVERFLOW, "x");
    t = c.grad, t.data = NULL;
    expect_error(&c, CALL(&good, &t, X, GR, DX, DG, NULL), GRADREF_ERR_NULL, "grad.data is NULL");
    /* aliasing: dx over x, dgrid over grid, dgrid inside dx */
    t = c.dx, t.data = c.x.data;
    expect_error(&c, CALL(&good, G, X, GR, &t, DG, NULL), GRADREF_ERR_ALIAS, "dx");
    t = c.dgrid, t.data = c.grid.data;
    expect_error(&c, CALL(&good, G, X, GR, DX, &t, NULL), GRADREF_ERR_ALIAS, "dgrid");
    t = c.dgrid, t.data = c.dx.data;
    expect_error(&c, CALL(&good, G, X, GR, DX, &t, NULL), GRADREF_ERR_ALIAS, "dgrid");
    /* a workspace smaller than one thread's share: the no-workspace path, same bits */
    tu_expect_tiny_workspace_same_bits(call_case, &c, c.buf + 3, c.bytes + 3, 2);
    size_t bytes;
    expect_error(&c, gradref_grid_sampler3d_grad_workspace_size(&good, G, X, GR, DX, DG, NULL),
                 GRADREF_ERR_NULL, "bytes is NULL");
    p = good, p.padding = 7;
    expect_error(&c, gradref_grid_sampler3d_grad_workspace_size(&p, G, X, GR, DX, DG, &bytes),
                 GRADREF_ERR_PARAM, "p.padding is 7");
#undef CALL
    free_case(&c);
}

/* GRADREF_STRICT_UPSTREAM: CANN refuses F64 in NDHWC; F64 in NCDHW and F32 in NDHWC pass with
 * the bits of a plain call. */
static void test_strict_cann(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(880);
    const int64_t dims[8] = {2, 3, 3, 4, 5, 2, 3, 4};
    const gradref_exec strict = {NULL, 0, 2, GRADREF_PRECISION_DEFAULT | GRADREF_STRICT_UPSTREAM};
    static const struct {
        int32_t dtype;
        int layout;
    } ok[] = {
        {GRADREF_F64, NCDHW}, {GRADREF_F32, NDHWC}, {GRADREF_F16, NDHWC}, {GRADREF_F64, NCDHW}};
    /* the last: every spatial size 1, where dense NCDHW has a channel stride of 1 too */
    const int64_t ones[8] = {2, 3, 1, 1, 1, 1, 1, 1};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        gs_case c;
        make_case(&c, ok[i].dtype, i == 3 ? ones : dims, ok[i].layout, 1.2, &r);
        run_ok(&c, NULL);
        void *want = malloc(c.bytes[3]);
        memcpy(want, c.buf[3], c.bytes[3]);
        memset(c.buf[3], 0xee, c.bytes[3]);
        run_ok(&c, &strict);
        assert_memory_equal(c.buf[3], want, c.bytes[3]);
        free(want);
        free_case(&c);
    }
    gs_case c;
    make_case(&c, GRADREF_F64, dims, NDHWC, 1.2, &r);
    run_ok(&c, NULL);
    memset(c.buf[3], 0xee, c.bytes[3]);
    memset(c.buf[4], 0xee, c.bytes[4]);
    expect_error(&c, run(&c, &strict), GRADREF_ERR_DTYPE,
                 "strict CANN: F64 takes NCDHW only (a tensor is channels-last)");
    free_case(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundary_table),
        cmocka_unit_test(test_cann_example),
        cmocka_unit_test(test_nearest_ties),
        cmocka_unit_test(test_nearest_ties_fast),
        cmocka_unit_test(test_adjoint_identity),
        cmocka_unit_test(test_dgrid_finite_differences),
        cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_nan_bits),
        cmocka_unit_test(test_threads_and_layouts),
        cmocka_unit_test(test_wide_channels),
        cmocka_unit_test(test_collisions),
        cmocka_unit_test(test_nearest_voxel_blocks),
        cmocka_unit_test(test_workspace_for_fewer_threads),
        cmocka_unit_test(test_broadcast_inputs),
        cmocka_unit_test(test_non_finite),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_empty_with_huge_sizes),
        cmocka_unit_test(test_optional_outputs_and_workspace),
        cmocka_unit_test(test_bench_problems),
        cmocka_unit_test(test_golden_pytorch),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_term_outputs),
        cmocka_unit_test(test_term_threads),
        cmocka_unit_test(test_strict_cann),
    };
    tu_seed();
    return TU_RUN_GROUP("grid_sampler3d_grad", tests);
}
