/* SPDX-License-Identifier: Apache-2.0 */
/* The reference loop: PyTorch's grid_sampler_3d_backward, point by point, in its order
 * (docs/grid_sampler3d_grad.md). Every value is held in a double and rounded after each
 * operation to the precision the formula runs in: f32 for F32/F16/BF16 (f32 operations
 * computed in f64 and rounded once are exact f32 operations), f64 for F64. Sums (dx and the
 * dgrid components) round to f32, or stay f64 for F64 and GRADREF_PRECISION_HIGH.
 *
 * With GRADREF_TERM_*, in f64: each term's |value| (or 1) is summed instead of the term, and
 * a count gets TERM_ROUNDINGS more for the roundings inside each term (docs/precision.md). */
#include <math.h>
#include <stdlib.h>

#include "common/convert.h"
#include "common/exec.h"
#include "common/tensor.h"
#include "gs3d_internal.h"

/* The roundings a term carries besides the sum's: dx's w g is ((wx wy) wz) g and dgrid's
 * ((v wy) wz) g times the multiplier, with each distance (wx = x1 - ix, ...) a rounded
 * difference: 5 either way. */
#define TERM_ROUNDINGS 5

typedef struct ref_ctx {
    int narrow;     /* the formula runs in f32 */
    int narrow_acc; /* sums round to f32 */
    int terms;      /* GRADREF__TERMS_* */
    int roundings;  /* a term's own roundings: TERM_ROUNDINGS, none in nearest mode (dx: g) */
} ref_ctx;

/* What a term adds to its sum: itself, its magnitude or 1. */
static double term(const ref_ctx *c, double t) {
    return c->terms == GRADREF__TERMS_COUNTS ? 1.0 : c->terms ? fabs(t) : t;
}

static double rnd(int narrow, double v) {
    return narrow ? (double)(float)v : v;
}

static double load(const gradref__gs3d_plan *p, const gradref__gs3d_view *v, int64_t i0, int64_t i1,
                   int64_t i2, int64_t i3, int64_t i4) {
    int64_t off = i0 * v->s[0] + i1 * v->s[1] + i2 * v->s[2] + i3 * v->s[3] + i4 * v->s[4];
    return gradref__load_float(p->dtype, v->data + (size_t)off * p->elem_size);
}

/* clip_coordinates_set_grad: the gradient is 0 on the borders too. */
static double clip_set_grad(const ref_ctx *c, double in, int64_t size, double *g) {
    if (in <= 0) {
        *g = 0;
        return 0;
    }
    double max = rnd(c->narrow, (double)(size - 1));
    if (in >= max) {
        *g = 0;
        return max;
    }
    *g = 1;
    return in;
}

/* reflect_coordinates_set_grad; the flip count converts to int as x86 does (a value beyond
 * the int range, or NaN, becomes INT_MIN, which is even). */
static double reflect_set_grad(const ref_ctx *c, double in, int64_t twice_low, int64_t twice_high,
                               double *g) {
    if (twice_low == twice_high) {
        *g = 0;
        return 0;
    }
    double min = rnd(c->narrow, rnd(c->narrow, (double)twice_low) / 2);
    double span = rnd(c->narrow, rnd(c->narrow, (double)(twice_high - twice_low)) / 2);
    in = rnd(c->narrow, in - min);
    double sign = 1;
    if (in < 0) {
        sign = -1;
        in = -in;
    }
    double extra = fmod(in, span);
    double flips = floor(rnd(c->narrow, in / span));
    int odd = flips < 2147483648.0 ? (int)((int64_t)flips & 1) : 0;
    if (!odd) {
        *g = sign;
        return rnd(c->narrow, extra + min);
    }
    *g = -sign;
    return rnd(c->narrow, rnd(c->narrow, span - extra) + min);
}

/* grid_sampler_compute_source_index_set_grad, then CUDA's safe_downgrade_to_int_range. */
static double source_index(const ref_ctx *c, int padding, int align, double coord, int64_t size,
                           double *mult) {
    const int n = c->narrow;
    double fsize = rnd(n, (double)size), fsize1 = rnd(n, (double)(size - 1));
    if (align) {
        *mult = rnd(n, fsize1 / 2);
        coord = rnd(n, rnd(n, rnd(n, coord + 1) / 2) * fsize1);
    } else {
        *mult = rnd(n, fsize / 2);
        coord = rnd(n, rnd(n, rnd(n, rnd(n, coord + 1) * fsize) - 1) / 2);
    }
    double g_clip, g_refl;
    if (padding == GRADREF_PAD_BORDER) {
        coord = clip_set_grad(c, coord, size, &g_clip);
        *mult = rnd(n, *mult * g_clip);
    } else if (padding == GRADREF_PAD_REFLECTION) {
        if (align)
            coord = reflect_set_grad(c, coord, 0, 2 * (size - 1), &g_refl);
        else
            coord = reflect_set_grad(c, coord, -1, 2 * size - 1, &g_refl);
        coord = clip_set_grad(c, coord, size, &g_clip);
        *mult = rnd(n, rnd(n, *mult * g_refl) * g_clip);
    }
    if (!isfinite(coord) || coord > rnd(n, 2147483646.0) || coord < -2147483648.0) coord = -100;
    return coord;
}

static int in_bounds(const gradref__gs3d_plan *p, int64_t z, int64_t y, int64_t x) {
    return z >= 0 && z < p->D && y >= 0 && y < p->H && x >= 0 && x < p->W;
}

/* Accumulator element (n, c, z, y, x), NCDHW. */
static double *acc_at(const gradref__gs3d_plan *p, double *acc, int64_t n, int64_t c, int64_t z,
                      int64_t y, int64_t x) {
    return acc + (((n * p->C + c) * p->D + z) * p->H + y) * p->W + x;
}

static void store(const gradref__gs3d_plan *p, const gradref__gs3d_view *v, int64_t i0, int64_t i1,
                  int64_t i2, int64_t i3, int64_t i4, double value) {
    int64_t off = i0 * v->s[0] + i1 * v->s[1] + i2 * v->s[2] + i3 * v->s[3] + i4 * v->s[4];
    gradref__store_float(p->out_dtype, v->data + (size_t)off * gradref__dtype_size(p->out_dtype),
                         value);
}

/* A sum as written: a count gains its terms' own roundings (none when it has no term). */
static double finish(const ref_ctx *c, double sum) {
    return c->terms == GRADREF__TERMS_COUNTS && sum > 0 ? sum + c->roundings : sum;
}

/* Output point (n, od, oh, ow), nearest mode: grad added to its voxel's dx; dgrid is 0. */
static void nearest_point(const gradref__gs3d_plan *p, const ref_ctx *c, double *acc, int64_t n,
                          int64_t od, int64_t oh, int64_t ow, double ix, double iy, double iz) {
    const int64_t xn = (int64_t)nearbyint(ix), yn = (int64_t)nearbyint(iy),
                  zn = (int64_t)nearbyint(iz);
    if (acc != NULL && in_bounds(p, zn, yn, xn))
        for (int64_t ch = 0; ch < p->C; ch++) {
            double *a = acc_at(p, acc, n, ch, zn, yn, xn);
            *a = rnd(c->narrow_acc, *a + term(c, load(p, &p->grad, n, ch, od, oh, ow)));
        }
    if (p->dgrid.data != NULL)
        for (int k = 0; k < 3; k++)
            store(p, &p->dgrid, n, od, oh, ow, k, 0.0);
}

/* Output point (n, od, oh, ow), trilinear mode: for each channel and each in-bounds corner
 * (tnw, tne, tsw, tse, bnw, bne, bsw, bse: bits dz, dy, dx), the dx term and the three terms
 * of the gradient with respect to the source index, which g[3] collects. */
static void trilinear_point(const gradref__gs3d_plan *p, const ref_ctx *c, double *acc, int64_t n,
                            int64_t od, int64_t oh, int64_t ow, double ix, double iy, double iz,
                            double *gi) {
    const int nr = c->narrow, na = c->narrow_acc;
    const int64_t x0 = (int64_t)floor(ix), y0 = (int64_t)floor(iy), z0 = (int64_t)floor(iz);
    /* distances to the far corner ("west weight" = x1 - ix, ...) */
    const double xw = rnd(nr, rnd(nr, (double)(x0 + 1)) - ix),
                 xe = rnd(nr, ix - rnd(nr, (double)x0));
    const double yn = rnd(nr, rnd(nr, (double)(y0 + 1)) - iy),
                 ys = rnd(nr, iy - rnd(nr, (double)y0));
    const double zt = rnd(nr, rnd(nr, (double)(z0 + 1)) - iz),
                 zb = rnd(nr, iz - rnd(nr, (double)z0));
    for (int64_t ch = 0; ch < p->C; ch++) {
        const double g = load(p, &p->grad, n, ch, od, oh, ow);
        for (int k = 0; k < 8; k++) {
            const int dz = k >> 2, dy = (k >> 1) & 1, dxk = k & 1;
            const int64_t z = z0 + dz, y = y0 + dy, xx = x0 + dxk;
            if (!in_bounds(p, z, y, xx)) continue;
            const double wx = dxk ? xe : xw, wy = dy ? ys : yn, wz = dz ? zb : zt;
            if (acc != NULL) {
                const double w = rnd(nr, rnd(nr, wx * wy) * wz);
                double *a = acc_at(p, acc, n, ch, z, y, xx);
                *a = rnd(na, *a + rnd(na, w * g));
            }
            const double v = load(p, &p->x, n, ch, z, y, xx);
            const double tx = rnd(na, rnd(na, rnd(na, v * wy) * wz) * g);
            const double ty = rnd(na, rnd(na, rnd(na, v * wx) * wz) * g);
            const double tz = rnd(na, rnd(na, rnd(na, v * wx) * wy) * g);
            gi[0] = rnd(na, dxk ? gi[0] + tx : gi[0] - tx);
            gi[1] = rnd(na, dy ? gi[1] + ty : gi[1] - ty);
            gi[2] = rnd(na, dz ? gi[2] + tz : gi[2] - tz);
        }
    }
}

/* trilinear_point's terms (GRADREF_TERM_*), in f64: each dx and dgrid term's |value| or 1. Kept
 * apart from trilinear_point, whose sums gcc 12's SLP vectorizer otherwise rounded differently
 * at -O3. */
static void trilinear_terms(const gradref__gs3d_plan *p, const ref_ctx *c, double *acc, int64_t n,
                            int64_t od, int64_t oh, int64_t ow, const double *at, double *gi) {
    int64_t lo[3];
    double dist[3][2]; /* per axis: the distance to the far corner, then to the near one */
    for (int k = 0; k < 3; k++) {
        lo[k] = (int64_t)floor(at[k]);
        dist[k][0] = (double)(lo[k] + 1) - at[k];
        dist[k][1] = at[k] - (double)lo[k];
    }
    for (int64_t ch = 0; ch < p->C; ch++) {
        const double g = load(p, &p->grad, n, ch, od, oh, ow);
        for (int k = 0; k < 8; k++) {
            const int dz = k >> 2, dy = (k >> 1) & 1, dxk = k & 1;
            const int64_t z = lo[2] + dz, y = lo[1] + dy, xx = lo[0] + dxk;
            if (!in_bounds(p, z, y, xx)) continue;
            const double wx = dist[0][dxk], wy = dist[1][dy], wz = dist[2][dz];
            if (acc != NULL) *acc_at(p, acc, n, ch, z, y, xx) += term(c, wx * wy * wz * g);
            const double v = load(p, &p->x, n, ch, z, y, xx);
            gi[0] += term(c, v * wy * wz * g);
            gi[1] += term(c, v * wx * wz * g);
            gi[2] += term(c, v * wx * wy * g);
        }
    }
}

/* Output point (n, od, oh, ow): its source index, then its mode's terms and its dgrid. */
static void ref_point(const gradref__gs3d_plan *p, const ref_ctx *c, double *acc, int64_t n,
                      int64_t od, int64_t oh, int64_t ow) {
    const int pad = p->padding, al = p->align_corners;
    double m[3];
    const double ix = source_index(c, pad, al, load(p, &p->grid, n, od, oh, ow, 0), p->W, &m[0]);
    const double iy = source_index(c, pad, al, load(p, &p->grid, n, od, oh, ow, 1), p->H, &m[1]);
    const double iz = source_index(c, pad, al, load(p, &p->grid, n, od, oh, ow, 2), p->D, &m[2]);
    if (p->interp == GRADREF_INTERP_NEAREST) {
        nearest_point(p, c, acc, n, od, oh, ow, ix, iy, iz);
        return;
    }
    double gi[3] = {0, 0, 0};
    if (c->terms) {
        const double at[3] = {ix, iy, iz};
        trilinear_terms(p, c, acc, n, od, oh, ow, at, gi);
    } else {
        trilinear_point(p, c, acc, n, od, oh, ow, ix, iy, iz, gi);
    }
    if (p->dgrid.data != NULL)
        for (int k = 0; k < 3; k++) /* PyTorch zero-fills dgrid for an empty x */
            store(p, &p->dgrid, n, od, oh, ow, k,
                  p->C == 0                           ? 0.0
                  : c->terms == GRADREF__TERMS_COUNTS ? finish(c, gi[k])
                                                      : rnd(c->narrow_acc, term(c, m[k]) * gi[k]));
}

gradref_status gradref__gs3d_ref(const gradref__gs3d_plan *p) {
    ref_ctx c;
    c.terms = p->terms;
    c.roundings = p->interp == GRADREF_INTERP_BILINEAR ? TERM_ROUNDINGS : 0;
    c.narrow = p->dtype != GRADREF_F64 && !p->terms;
    c.narrow_acc = c.narrow && p->precision != GRADREF_PRECISION_HIGH;
    const int64_t xnumel = p->N * p->C * p->D * p->H * p->W;
    double *acc = NULL;
    if (p->dx.data != NULL && xnumel > 0) {
        acc = calloc((size_t)xnumel, sizeof *acc);
        if (acc == NULL) return GRADREF_ERR_NO_MEMORY;
    }
    /* the points matter to dgrid, or to dx through a channel: else (empty tensors of huge
     * sizes) their loop would only take time */
    const int points = p->dgrid.data != NULL || (p->dx.data != NULL && p->C > 0);
    for (int64_t n = 0; n < p->N && points; n++)
        for (int64_t od = 0; od < p->Do; od++)
            for (int64_t oh = 0; oh < p->Ho; oh++)
                for (int64_t ow = 0; ow < p->Wo; ow++)
                    ref_point(p, &c, acc, n, od, oh, ow);
    if (p->dx.data != NULL)
        for (int64_t n = 0; n < p->N; n++)
            for (int64_t ch = 0; ch < p->C; ch++)
                for (int64_t z = 0; z < p->D; z++)
                    for (int64_t y = 0; y < p->H; y++)
                        for (int64_t xx = 0; xx < p->W; xx++)
                            store(p, &p->dx, n, ch, z, y, xx,
                                  finish(&c, *acc_at(p, acc, n, ch, z, y, xx)));
    free(acc);
    return GRADREF_OK;
}
