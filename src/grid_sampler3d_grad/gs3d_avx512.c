/* SPDX-License-Identifier: Apache-2.0 */
/* grid_sampler3d_grad's AVX-512 kernels: dgrid and geometry 16 points per step, the nearest
 * dx paths (scatter and voxel index) and dx planes 16 channels per step; the reference's
 * operations in its order, so its bits. */
#include "gs3d_kernels.h"
#include "common/nan.h"

#ifdef GRADREF__X86

#  include <immintrin.h>
#  include <string.h>

#  include "common/convert.h"
#  include "common/transpose_avx512.h"

/* The low 32 bits of 16 int64 values. */
static inline __m512i narrow16(const int64_t *v) {
    __m256i lo = _mm512_cvtepi64_epi32(_mm512_loadu_si512((const void *)v));
    __m256i hi = _mm512_cvtepi64_epi32(_mm512_loadu_si512((const void *)(v + 8)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* A group of 16 points from point i: lane[k], the points whose corner k is inside x; returns
 * the corners inside x for any of them (bit k). */
static inline int group_lanes(const gs3d_kargs *r, int64_t i, __mmask16 lane[8]) {
    const __m512i m16 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r->g.mask + i)));
    int live = 0;
    for (int k = 0; k < 8; k++) {
        lane[k] = _mm512_test_epi32_mask(m16, _mm512_set1_epi32(1 << k));
        if (lane[k]) live |= 1 << k;
    }
    return live;
}

/* The group's distances to its corners: w (x), h (y), d (z), lower corner first. */
static inline void group_dist(const gs3d_kargs *r, int64_t i, __m512 w[2], __m512 h[2],
                              __m512 d[2]) {
    const float *dist = (const float *)r->g.dist;
    const int64_t NP = r->shape.N * r->P;
    for (int k = 0; k < 2; k++) {
        w[k] = _mm512_loadu_ps(dist + k * NP + i);
        h[k] = _mm512_loadu_ps(dist + (2 + k) * NP + i);
        d[k] = _mm512_loadu_ps(dist + (4 + k) * NP + i);
    }
}

/* Corner k's terms, v its value at the lanes `on`, g the gradient of the channel: the
 * reference's operations, added (or subtracted) to gix, giy, giz on those lanes. */
static inline void add_corner(int k, __mmask16 on, __m512 v, __m512 g, const __m512 w[2],
                              const __m512 h[2], const __m512 d[2], __m512 *gix, __m512 *giy,
                              __m512 *giz) {
    const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
    const __m512 vw = _mm512_mul_ps(v, w[dx]);
    const __m512 tx = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(v, h[dy]), d[dz]), g);
    const __m512 ty = _mm512_mul_ps(_mm512_mul_ps(vw, d[dz]), g);
    const __m512 tz = _mm512_mul_ps(_mm512_mul_ps(vw, h[dy]), g);
    *gix = dx ? _mm512_mask_add_ps(*gix, on, *gix, tx) : _mm512_mask_sub_ps(*gix, on, *gix, tx);
    *giy = dy ? _mm512_mask_add_ps(*giy, on, *giy, ty) : _mm512_mask_sub_ps(*giy, on, *giy, ty);
    *giz = dz ? _mm512_mask_add_ps(*giz, on, *giz, tz) : _mm512_mask_sub_ps(*giz, on, *giz, tz);
}

/* The group's sums times the multipliers, to dgrid. */
static inline void group_store(const gs3d_kargs *r, int64_t n, int64_t q, int64_t i, __m512 gix,
                               __m512 giy, __m512 giz) {
    const float *mult = (const float *)r->g.mult;
    const int64_t NP = r->shape.N * r->P;
    float out[3][16];
    _mm512_storeu_ps(out[0], _mm512_mul_ps(_mm512_loadu_ps(mult + i), gix));
    _mm512_storeu_ps(out[1], _mm512_mul_ps(_mm512_loadu_ps(mult + NP + i), giy));
    _mm512_storeu_ps(out[2], _mm512_mul_ps(_mm512_loadu_ps(mult + 2 * NP + i), giz));
    gradref__gs3d_store_dgrid(r, n, q, 16, out);
}

/* 16 points' rows of channels [c0, c0 + 16) (cm: the channels that exist) at base + o[l] + at,
 * lanes off in `on` read as zeros (never touched), transposed into one vector per channel:
 * out[c][l] = value of channel c0 + c at point l. */
static inline void rows_to_lanes(const float *base, const int32_t *o, int64_t at, __mmask16 on,
                                 __mmask16 cm, __m512 out[16]) {
    for (int l = 0; l < 16; l++)
        out[l] = _mm512_maskz_loadu_ps((on >> l) & 1 ? cm : 0, base + o[l] + at);
    gradref__transpose16x16_ps(out);
}

#  define ROWS_AHEAD 64
#  define ROWS_SPAN  8192
#  define GRAD_AHEAD 32

/* Whether the 16 points from point i with a corner inside x have their rows near one another:
 * their base voxels on at most two consecutive z planes, and within ROWS_SPAN floats of each
 * other on the plane (a smooth grid's; a random grid's are everywhere). Then [z0, z1] are the
 * planes and [lo, hi] the span on them. */
static inline int rows_near(const gs3d_kargs *r, int64_t i, int64_t *z0, int64_t *z1, int64_t *lo,
                            int64_t *hi) {
    const __m512i m = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r->g.mask + i)));
    const __mmask16 in = _mm512_test_epi32_mask(m, m);
    if (!in) return 0;
    const __m512i z = narrow16(r->g.zplane + i);
    const __m512i rest = _mm512_sub_epi32(
        narrow16(r->g.offx + i), _mm512_mullo_epi32(z, _mm512_set1_epi32((int32_t)r->xs[2])));
    *z0 = _mm512_mask_reduce_min_epi32(in, z), *z1 = _mm512_mask_reduce_max_epi32(in, z);
    *lo = _mm512_mask_reduce_min_epi32(in, rest), *hi = _mm512_mask_reduce_max_epi32(in, rest);
    return *z1 - *z0 <= 1 && *hi - *lo <= ROWS_SPAN;
}

/* dgrid16 for groups of 16 points whose rows are near (rows_near), with channels-last x and 8
 * channels or more: a gather of one channel's corner over 16 points costs more than loading
 * rows, so each corner's 16 rows of 16 channels are loaded whole and transposed in registers
 * instead, then taken in the reference's order (channel, then corner) from L1: the same
 * values, so the same operations and bits. The rows of the group ROWS_AHEAD points on are
 * prefetched when they are near too, and their grad, whose misses showed in this kernel's
 * profile. The groups of a random grid keep the gathers: their rows miss the cache, which the
 * whole rows would pay more for. */
static int64_t dgrid16_rows(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1, int64_t q_end) {
    const int64_t C = r->shape.C;
    const float *xn = (const float *)r->x + n * r->xs[0];
    const float *gn = (const float *)r->grad + n * r->gs[0];
    const int grad_rows = !r->grad_points_dense && r->gs[1] == 1;
    __m512 corner[8][16], grad[16];
    int64_t q = q0;
    for (; q + 16 <= q1; q += 16) {
        const int64_t i = n * r->P + q;
        __m512 gix = _mm512_setzero_ps(), giy = gix, giz = gix;
        __mmask16 lane[8];
        const int live = group_lanes(r, i, lane);
        int64_t z0, z1, lo, hi; /* the rows a later group reads, when they are near */
        if (q + 16 + ROWS_AHEAD <= q_end && rows_near(r, i + ROWS_AHEAD, &z0, &z1, &lo, &hi))
            for (int64_t z = z0; z <= z1; z++) /* corners x0 and x1 adjacent: a run per (y, z) */
                for (int k = 0; k < 8; k += 2)
                    for (int64_t e = lo; e < hi + 2 * C; e += 16)
                        _mm_prefetch((const char *)(xn + z * r->xs[2] + r->dx_corner[k] + e),
                                     _MM_HINT_T0);
        if (q + 16 + ROWS_AHEAD <= q_end) { /* and its grad: a line per channel, or its rows */
            if (r->grad_points_dense)
                for (int64_t c = 0; c < C; c++)
                    _mm_prefetch((const char *)(gn + c * r->gs[1] + q + ROWS_AHEAD), _MM_HINT_T0);
            else if (grad_rows)
                for (int l = 0; l < 16; l++)
                    for (int64_t c = 0; c < C; c += 16)
                        _mm_prefetch((const char *)(gn + r->g.offg[i + ROWS_AHEAD + l] + c),
                                     _MM_HINT_T0);
        }
        if (live) {
            int32_t ox[16], og[16];
            _mm512_storeu_si512((void *)ox, narrow16(r->g.offx + i));
            const __m512i offg = narrow16(r->g.offg + i);
            _mm512_storeu_si512((void *)og, offg);
            __m512 w[2], h[2], d[2];
            group_dist(r, i, w, h, d);
            for (int64_t c0 = 0; c0 < C; c0 += 16) {
                const int64_t cn = C - c0 < 16 ? C - c0 : 16;
                const __mmask16 cm = (__mmask16)((1u << cn) - 1u);
                for (int k = 0; k < 8; k++)
                    if ((live >> k) & 1)
                        rows_to_lanes(xn, ox, r->dx_corner[k] + c0, lane[k], cm, corner[k]);
                if (grad_rows) rows_to_lanes(gn, og, c0, 0xffff, cm, grad);
                for (int64_t c = 0; c < cn; c++) {
                    const float *gc = gn + (c0 + c) * r->gs[1];
                    const __m512 g = r->grad_points_dense ? _mm512_loadu_ps(gc + q)
                                     : grad_rows          ? grad[c]
                                                          : _mm512_i32gather_ps(offg, gc, 4);
                    for (int k = 0; k < 8; k++)
                        if ((live >> k) & 1)
                            add_corner(k, lane[k], corner[k][c], g, w, h, d, &gix, &giy, &giz);
                }
            }
        }
        group_store(r, n, q, i, gix, giy, giz);
    }
    return q - q0;
}

int64_t gradref__gs3d_f32_dgrid16_avx512(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1) {
    const gs3d_shape *p = &r->shape;
    const int rows_ok = r->xs[1] == 1 && p->C >= 8;
    const float *xn = (const float *)r->x + n * r->xs[0];
    const float *gn = (const float *)r->grad + n * r->gs[0];
    int64_t q = q0;
    for (; q + 16 <= q1; q += 16) {
        const int64_t i = n * r->P + q;
        int64_t z0, z1, lo, hi;
        if (rows_ok && rows_near(r, i, &z0, &z1, &lo, &hi)) {
            dgrid16_rows(r, n, q, q + 16, q1);
            continue;
        }
        __m512 gix = _mm512_setzero_ps(), giy = gix, giz = gix;
        __mmask16 lane[8];
        const int live = group_lanes(r, i, lane);
        if (live) {
            const __m512i offx = narrow16(r->g.offx + i), offg = narrow16(r->g.offg + i);
            __m512 w[2], h[2], d[2];
            group_dist(r, i, w, h, d);
            __m512i idx[8];
            for (int k = 0; k < 8; k++)
                idx[k] = _mm512_add_epi32(offx, _mm512_set1_epi32((int32_t)r->dx_corner[k]));
            /* grad's channels are a plane apart: a line of each, GRAD_AHEAD points on, is
             * fetched early (the streams outnumber what the hardware prefetcher follows) */
            const int ahead = r->grad_points_dense && q + GRAD_AHEAD < q1;
            for (int64_t c = 0; c < p->C; c++) {
                const float *xc = xn + c * r->xs[1];
                const float *gc = gn + c * r->gs[1];
                if (ahead) _mm_prefetch((const char *)(gc + q + GRAD_AHEAD), _MM_HINT_T0);
                const __m512 g = r->grad_points_dense ? _mm512_loadu_ps(gc + q)
                                                      : _mm512_i32gather_ps(offg, gc, 4);
                for (int k = 0; k < 8; k++)
                    if ((live >> k) & 1)
                        add_corner(
                            k, lane[k],
                            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lane[k], idx[k], xc, 4),
                            g, w, h, d, &gix, &giy, &giz);
            }
        }
        group_store(r, n, q, i, gix, giy, giz);
    }
    return q - q0;
}

/* source_index for zeros and border padding on 16 lanes (the scalar code's operations). */
static inline __m512 source16(__m512 g, int64_t size, int align, int border, __m512 *mult) {
    const __m512 one = _mm512_set1_ps(1), two = _mm512_set1_ps(2);
    const __m512 fsize = _mm512_set1_ps((float)size), fsize1 = _mm512_set1_ps((float)(size - 1));
    __m512 coord;
    if (align) {
        *mult = _mm512_div_ps(fsize1, two);
        coord = _mm512_mul_ps(_mm512_div_ps(_mm512_add_ps(g, one), two), fsize1);
    } else {
        *mult = _mm512_div_ps(fsize, two);
        coord = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(_mm512_add_ps(g, one), fsize), one), two);
    }
    if (border) { /* <= 0: 0, gradient 0; >= size-1: size-1, gradient 0; NaN passes */
        const __mmask16 low = _mm512_cmp_ps_mask(coord, _mm512_setzero_ps(), _CMP_LE_OQ);
        const __mmask16 high = _mm512_cmp_ps_mask(coord, fsize1, _CMP_GE_OQ) & (__mmask16)~low;
        coord = _mm512_mask_mov_ps(coord, low, _mm512_setzero_ps());
        coord = _mm512_mask_mov_ps(coord, high, fsize1);
        *mult = _mm512_mul_ps(*mult, _mm512_mask_mov_ps(one, low | high, _mm512_setzero_ps()));
    }
    /* NaN, infinite or beyond the int32 range: -100 */
    const __mmask16 ok = _mm512_cmp_ps_mask(coord, _mm512_set1_ps(2147483646.0f), _CMP_LE_OQ) &
                         _mm512_cmp_ps_mask(coord, _mm512_set1_ps(-2147483648.0f), _CMP_GE_OQ);
    return _mm512_mask_mov_ps(_mm512_set1_ps(-100), ok, coord);
}

/* Sign-extends the 16 int32 lanes of v, multiplies by s, adds to acc (two 8-lane halves). */
static inline void madd64(__m512i acc[2], __m512i v, int64_t s) {
    const __m512i sv = _mm512_set1_epi64(s);
    acc[0] = _mm512_add_epi64(
        acc[0], _mm512_mullo_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(v)), sv));
    acc[1] = _mm512_add_epi64(
        acc[1], _mm512_mullo_epi64(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v, 1)), sv));
}

static inline void store64(int64_t *dst, const __m512i v[2], __mmask16 keep) {
    _mm512_storeu_si512((void *)dst, _mm512_maskz_mov_epi64((__mmask8)keep, v[0]));
    _mm512_storeu_si512((void *)(dst + 8), _mm512_maskz_mov_epi64((__mmask8)(keep >> 8), v[1]));
}

/* Permutations that split a dense grid's 48 floats (16 points' x, y, z) into three vectors:
 * coordinate k of point j is float 3 j + k; from_ab takes those below 32 from the first two
 * loads, from_c the rest from the third. */
typedef struct grid_perm {
    __m512i from_ab[3], from_c[3];
} grid_perm;

static void grid_perm_init(grid_perm *g) {
    for (int k = 0; k < 3; k++) {
        int32_t ab[16], cc[16];
        for (int j = 0; j < 16; j++) {
            const int32_t f = 3 * j + k;
            ab[j] = f < 32 ? f : 0;
            cc[j] = f < 32 ? j : 16 + (f - 32);
        }
        g->from_ab[k] = _mm512_loadu_si512((const void *)ab);
        g->from_c[k] = _mm512_loadu_si512((const void *)cc);
    }
}

/* The grid coordinates of points q..q+15: three loads and permutations when the grid is
 * dense, three gathers otherwise. */
static inline void load_grid16(const gradref__gs3d_view *gv, const float *grid0,
                               const grid_perm *perm, int packed, int64_t q, __m512i pts,
                               __m512 raw[3]) {
    if (packed) {
        const float *at = grid0 + 3 * q;
        const __m512 a = _mm512_loadu_ps(at), b = _mm512_loadu_ps(at + 16),
                     c = _mm512_loadu_ps(at + 32);
        for (int k = 0; k < 3; k++)
            raw[k] = _mm512_permutex2var_ps(_mm512_permutex2var_ps(a, perm->from_ab[k], b),
                                            perm->from_c[k], c);
        return;
    }
    for (int k = 0; k < 3; k++) {
        const __m512i idx =
            _mm512_add_epi32(_mm512_mullo_epi32(pts, _mm512_set1_epi32((int32_t)gv->s[3])),
                             _mm512_set1_epi32((int32_t)(k * gv->s[4])));
        raw[k] = _mm512_i32gather_ps(idx, grid0, 4);
    }
}

/* The per-point offsets a geometry pass stores (two 8-lane halves each) and its corner mask. */
typedef struct geometry16 {
    __m512i offx[2], offa[2], zp[2], maskv;
    __mmask16 any;
} geometry16;

/* Nearest: the rounded voxel of points at pt (16 lanes); with a voxel index only the voxel is
 * stored (returns 1), else the offsets go to *out (returns 0). */
static inline int nearest16(const gs3d_kargs *r, int64_t i, const __m512 coord[3],
                            const int64_t size[3], geometry16 *out) {
    const gs3d_shape *p = &r->shape;
    __m512i v[3];
    __mmask16 in = 0xffff;
    for (int k = 0; k < 3; k++) {
        const __m512 f =
            _mm512_roundscale_ps(coord[k], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        in &= _mm512_cmp_ps_mask(f, _mm512_setzero_ps(), _CMP_GE_OQ) &
              _mm512_cmp_ps_mask(f, _mm512_set1_ps((float)size[k]), _CMP_LT_OQ);
        v[k] = _mm512_cvttps_epi32(f);
    }
    if (r->v.vox) { /* the voxel index needs only each point's voxel */
        const __m512i zy =
            _mm512_add_epi32(_mm512_mullo_epi32(v[2], _mm512_set1_epi32((int32_t)p->H)), v[1]);
        const __m512i vox =
            _mm512_add_epi32(_mm512_mullo_epi32(zy, _mm512_set1_epi32((int32_t)p->W)), v[0]);
        _mm512_storeu_si512((void *)(r->v.vox + i),
                            _mm512_mask_blend_epi32(in, _mm512_set1_epi32(-1), vox));
        return 1;
    }
    memset(out, 0, sizeof *out);
    out->maskv = _mm512_maskz_mov_epi32(in, _mm512_set1_epi32(1));
    madd64(out->offa, v[1], r->as[3]);
    madd64(out->offa, v[0], r->as[4]);
    madd64(out->zp, v[2], 1);
    out->any = in;
    return 0;
}

/* Trilinear: distances, corner weights and multipliers stored for points i..i+15, offsets and
 * the corner mask to *out. */
static inline void trilinear16(const gs3d_kargs *r, int64_t i, const __m512 coord[3],
                               const __m512 m[3], const int64_t size[3], geometry16 *out) {
    const int64_t NP = r->shape.N * r->P;
    float *w = (float *)r->g.w, *dist = (float *)r->g.dist, *mult = (float *)r->g.mult;
    memset(out, 0, sizeof *out);
    __m512 d[6];
    __mmask16 in0[3], in1[3];
    __m512i v[3];
    for (int k = 0; k < 3; k++) {
        const __m512 f0 = _mm512_roundscale_ps(coord[k], _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        const __m512 f1 = _mm512_add_ps(f0, _mm512_set1_ps(1));
        const __m512 lim = _mm512_set1_ps((float)size[k]);
        in0[k] = _mm512_cmp_ps_mask(f0, _mm512_setzero_ps(), _CMP_GE_OQ) &
                 _mm512_cmp_ps_mask(f0, lim, _CMP_LT_OQ);
        in1[k] = _mm512_cmp_ps_mask(f1, _mm512_setzero_ps(), _CMP_GE_OQ) &
                 _mm512_cmp_ps_mask(f1, lim, _CMP_LT_OQ);
        d[2 * k] = _mm512_sub_ps(f1, coord[k]);
        d[2 * k + 1] = _mm512_sub_ps(coord[k], f0);
        v[k] = _mm512_cvttps_epi32(f0);
        _mm512_storeu_ps(dist + (2 * k) * NP + i, d[2 * k]);
        _mm512_storeu_ps(dist + (2 * k + 1) * NP + i, d[2 * k + 1]);
        _mm512_storeu_ps(mult + k * NP + i, m[k]);
    }
    out->any = 0;
    for (int k = 0; k < 8; k++) {
        const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
        const __mmask16 on =
            (dx ? in1[0] : in0[0]) & (dy ? in1[1] : in0[1]) & (dz ? in1[2] : in0[2]);
        out->maskv = _mm512_mask_or_epi32(out->maskv, on, out->maskv, _mm512_set1_epi32(1 << k));
        out->any |= on;
        _mm512_storeu_ps(w + k * NP + i, _mm512_mul_ps(_mm512_mul_ps(d[dx], d[2 + dy]), d[4 + dz]));
    }
    madd64(out->offx, v[2], r->xs[2]);
    madd64(out->offx, v[1], r->xs[3]);
    madd64(out->offx, v[0], r->xs[4]);
    madd64(out->offa, v[1], r->as[3]);
    madd64(out->offa, v[0], r->as[4]);
    madd64(out->zp, v[2], 1);
}

int64_t gradref__gs3d_f32_geometry16_avx512(const gs3d_kargs *r, int64_t n, int64_t q0,
                                            int64_t q1) {
    const gs3d_shape *p = &r->shape;
    const gradref__gs3d_view *gv = &p->grid;
    const int border = p->padding == GRADREF_PAD_BORDER, nearest = p->interp != 0;
    const int64_t size[3] = {p->W, p->H, p->D};
    const float *grid0 = (const float *)gv->data + n * gv->s[0];
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const int packed = gv->s[3] == 3 && gv->s[4] == 1;
    grid_perm perm;
    grid_perm_init(&perm);
    int64_t q = q0;
    for (; q + 16 <= q1; q += 16) {
        const int64_t i = n * r->P + q;
        const __m512i pts = _mm512_add_epi32(lane, _mm512_set1_epi32((int32_t)q));
        __m512 coord[3], m[3], raw[3];
        load_grid16(gv, grid0, &perm, packed, q, pts, raw);
        for (int k = 0; k < 3; k++)
            coord[k] = source16(raw[k], size[k], p->align_corners, border, &m[k]);
        if (!(nearest && r->v.vox)) { /* the voxel index reads grad by point number */
            __m512i goff[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
            madd64(goff, pts, r->gs[4]);
            _mm512_storeu_si512((void *)(r->g.offg + i), goff[0]);
            _mm512_storeu_si512((void *)(r->g.offg + i + 8), goff[1]);
        }
        geometry16 g; /* set by nearest16 (unless it stores voxels) and trilinear16 */
        if (nearest) {
            if (nearest16(r, i, coord, size, &g)) continue;
        } else {
            trilinear16(r, i, coord, m, size, &g);
        }
        _mm_storeu_si128((__m128i *)(r->g.mask + i), _mm512_cvtepi32_epi8(g.maskv));
        if (!nearest) store64(r->g.offx + i, g.offx, g.any); /* x is read by dgrid only */
        store64(r->g.offa + i, g.offa, g.any);
        store64(r->g.zplane + i, g.zp, g.any);
    }
    return q - q0;
}

void gradref__gs3d_f32_nearest_dx_avx512(const gs3d_kargs *r, int64_t n, int64_t c) {
    float *acc = gradref__gs3d_zeroed_channel(r, n, c);
    const float *g = (const float *)r->grad + n * r->gs[0] + c * r->gs[1];
    const __m512i plane = _mm512_set1_epi64(r->as[2]);
    int64_t q = 0;
    for (; q + 16 <= r->P; q += 16) {
        const int64_t i = n * r->P + q;
        const __mmask16 on = _mm512_test_epi32_mask(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r->g.mask + i))),
            _mm512_set1_epi32(1));
        if (!on) continue;
        const __m512i lo = _mm512_add_epi64(
            _mm512_mullo_epi64(_mm512_loadu_si512((const void *)(r->g.zplane + i)), plane),
            _mm512_loadu_si512((const void *)(r->g.offa + i)));
        const __m512i hi = _mm512_add_epi64(
            _mm512_mullo_epi64(_mm512_loadu_si512((const void *)(r->g.zplane + i + 8)), plane),
            _mm512_loadu_si512((const void *)(r->g.offa + i + 8)));
        __m512i idx = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(lo)),
                                         _mm512_cvtepi64_epi32(hi), 1);
        idx = _mm512_maskz_mov_epi32(on, idx);
        /* lanes whose voxel an earlier active lane also updates */
        const __m512i earlier = _mm512_maskz_conflict_epi32(on, idx);
        if (_mm512_mask_test_epi32_mask(on, earlier, _mm512_set1_epi32((int)on))) {
            int32_t at[16];
            _mm512_storeu_si512((void *)at, idx);
            for (int j = 0; j < 16; j++)
                if ((on >> j) & 1) acc[at[j]] += g[q + j];
            continue;
        }
        const __m512 sum = _mm512_add_ps(
            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), on, idx, acc, 4), _mm512_loadu_ps(g + q));
        _mm512_mask_i32scatter_ps(acc, on, idx, sum, 4);
    }
    for (; q < r->P; q++) {
        const int64_t i = n * r->P + q;
        if (r->g.mask[i]) acc[r->g.zplane[i] * r->as[2] + r->g.offa[i]] += g[q];
    }
}

/* The 4x4 transpose of 32-bit elements within each 128-bit lane across four vectors: out[i]
 * lane (4j + k) = in[k] lane (4j + i). */
static inline void transpose4_lanes(const __m512 in[4], __m512 out[4]) {
    const __m512 t0 = _mm512_unpacklo_ps(in[0], in[1]), t1 = _mm512_unpackhi_ps(in[0], in[1]);
    const __m512 t2 = _mm512_unpacklo_ps(in[2], in[3]), t3 = _mm512_unpackhi_ps(in[2], in[3]);
    out[0] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)));
    out[1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t0), _mm512_castps_pd(t2)));
    out[2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)));
    out[3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t1), _mm512_castps_pd(t3)));
}

int64_t gradref__gs3d_voxel_slots_avx512(const gs3d_kargs *r, int64_t n) {
    const gs3d_shape *p = &r->shape;
    const int64_t V = p->D * p->H * p->W, P = r->P;
    int32_t *slots = r->v.slots + n * 2 * V, *later = r->v.later + n * 2 * P;
    const int32_t *vox = r->v.vox + n * P;
    const int32_t none = gs3d_no_point(P);
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    /* GS3D_STAGE_CHANNELS * (gs3d_stage_row(q + lane) - q) for q a multiple of 16 */
    const __m512i order =
        _mm512_setr_epi32(0, 16, 32, 48, 4, 20, 36, 52, 8, 24, 40, 56, 12, 28, 44, 60);
    const __m512i pairs_lo =
        _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i pairs_hi = _mm512_add_epi32(pairs_lo, _mm512_set1_epi32(8));
    const __m512i nones = _mm512_set1_epi32(none), zero = _mm512_setzero_si512();
    int64_t count = 0, q = 0;
    for (; q + 16 <= P; q += 16) {
        const __m512i v = _mm512_loadu_si512((const void *)(vox + q));
        const __m512i rows =
            _mm512_add_epi32(_mm512_set1_epi32((int32_t)(GS3D_STAGE_CHANNELS * q)), order);
        const __mmask16 in = _mm512_cmpge_epi32_mask(v, zero);
        /* two points of the group on one voxel: one at a time (points outside get distinct
         * negative stand-ins) */
        const __m512i keys =
            _mm512_mask_blend_epi32(in, _mm512_sub_epi32(_mm512_set1_epi32(-1), lanes), v);
        const __m512i clash = _mm512_conflict_epi32(keys);
        if (_mm512_test_epi32_mask(clash, clash)) {
            for (int j = 0; j < 16; j++)
                if (vox[q + j] >= 0)
                    count = gradref__gs3d_slot_point(
                        slots, later, count, none, vox[q + j],
                        (int32_t)(GS3D_STAGE_CHANNELS * gs3d_stage_row(q + j)));
            continue;
        }
        const __m512i f = _mm512_mask_i32gather_epi32(nones, in, v, slots, 8);
        const __m512i s = _mm512_mask_i32gather_epi32(nones, in, v, slots + 1, 8);
        const __mmask16 first = _mm512_mask_cmpeq_epi32_mask(in, f, nones);
        const __mmask16 second = _mm512_mask_cmpeq_epi32_mask(in & ~first, s, nones);
        const __mmask16 rest = in & ~first & ~second;
        _mm512_mask_i32scatter_epi32(slots, first, v, rows, 8);
        _mm512_mask_i32scatter_epi32(slots + 1, second, v, rows, 8);
        if (rest) { /* in point order; count <= q, so the 32 ints fit in 2P */
            const __m512i cv = _mm512_maskz_compress_epi32(rest, v);
            const __m512i cr = _mm512_maskz_compress_epi32(rest, rows);
            _mm512_storeu_si512((void *)(later + 2 * count),
                                _mm512_permutex2var_epi32(cv, pairs_lo, cr));
            _mm512_storeu_si512((void *)(later + 2 * count + 16),
                                _mm512_permutex2var_epi32(cv, pairs_hi, cr));
            count += __builtin_popcount(rest);
        }
    }
    for (; q < P; q++)
        if (vox[q] >= 0)
            count = gradref__gs3d_slot_point(slots, later, count, none, vox[q],
                                             (int32_t)(GS3D_STAGE_CHANNELS * gs3d_stage_row(q)));
    return count;
}

/* Voxel u's (first, second) slots: stage offsets in the low and high halves. */
static inline uint64_t slot_pair(const int32_t *slots, int64_t u) {
    uint64_t pair;
    memcpy(&pair, slots + 2 * u, sizeof pair);
    return pair;
}

/* Lane j of the result: the 16 bytes of `stage` at the offset in half `half` (0 low, 32 high)
 * of voxel (u + 4j)'s slot pair. */
static inline __m512 rows4(const float *stage, const int32_t *slots, int64_t u, int half) {
#  define ROW(j) _mm_loadu_ps(stage + (uint32_t)(slot_pair(slots, u + 4 * (j)) >> half))
    __m512 v = _mm512_castps128_ps512(ROW(0));
    v = _mm512_insertf32x4(v, ROW(1), 1); /* the lane must be a constant */
    v = _mm512_insertf32x4(v, ROW(2), 2);
    return _mm512_insertf32x4(v, ROW(3), 3);
#  undef ROW
}

/* Whole blocks of 16 voxels from v (block b) while they fit in V; returns where they stop.
 * Inlined with constant cb and stream, so that the four sums stay in registers. */
static inline __attribute__((always_inline)) int64_t
voxel_blocks(float *acc, int64_t as1, const int cb, const int stream, const float *stage,
             const int32_t *slots, const int32_t *over, const int32_t *start, int64_t v, int64_t b,
             int64_t V) {
    for (; v + 16 <= V; v += 16, b++) {
        __m512 sum[4], out[4];
        for (int k = 0; k < 4; k++) /* lane j: voxel v + 4j + k */
            sum[k] = _mm512_add_ps(rows4(stage, slots, v + k, 0), rows4(stage, slots, v + k, 32));
        transpose4_lanes(sum, out); /* out[i]: channel i of voxels v..v+15 */
        for (int32_t e = start[b]; e < start[b + 1]; e++) {
            const __mmask16 lane = (__mmask16)(1u << (over[2 * e] - v));
            const float *row = stage + over[2 * e + 1];
            for (int i = 0; i < 4; i++)
                out[i] = _mm512_mask_add_ps(out[i], lane, out[i], _mm512_set1_ps(row[i]));
        }
        /* dx is written once and not read here: past the caches (a line's read for ownership
         * and its eviction would also push stage rows out of L2); NaN as the canonical one */
        for (int i = 0; i < cb; i++) {
            out[i] = _mm512_mask_mov_ps(out[i], _mm512_cmp_ps_mask(out[i], out[i], _CMP_UNORD_Q),
                                        _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
            if (stream)
                _mm512_stream_ps(acc + i * as1 + v, out[i]);
            else
                _mm512_storeu_ps(acc + i * as1 + v, out[i]);
        }
    }
    return v;
}

/* stage: +0 + grad (dx starts at +0), point q at row gs3d_stage_row(q): 16 points of the four
 * channels transposed within 128-bit lanes. */
static void stage_rows16(const float *const g[GS3D_STAGE_CHANNELS], int64_t P, float *stage) {
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t q = 0; q < P; q += 16) {
        const __mmask16 m = P - q >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (P - q)) - 1u);
        __m512 in[4], out[4];
        for (int i = 0; i < 4; i++)
            in[i] = _mm512_add_ps(zero, _mm512_maskz_loadu_ps(m, g[i] + q));
        transpose4_lanes(in, out);
        for (int k = 0; k < 4; k++)
            _mm512_storeu_ps(stage + 4 * q + 16 * k, out[k]);
    }
}

/* The blocks at 16 lanes, the four-channel cases with constant cb and stream. */
static int64_t block_pass16(const gs3d_voxel_frame *f, int64_t v, int64_t b, int64_t V) {
    if (f->cb == 4 && f->stream)
        v = voxel_blocks(f->acc, f->as1, 4, 1, f->stage, f->slots, f->over, f->start, v, b, V);
    else if (f->cb == 4)
        v = voxel_blocks(f->acc, f->as1, 4, 0, f->stage, f->slots, f->over, f->start, v, b, V);
    else
        v = voxel_blocks(f->acc, f->as1, f->cb, f->stream, f->stage, f->slots, f->over, f->start, v,
                         b, V);
    if (f->stream) _mm_sfence(); /* the streamed stores are seen before the region ends */
    return v;
}

void gradref__gs3d_f32_nearest_dx_voxels_avx512(const gs3d_kargs *r, int64_t n, int64_t c0,
                                                float *stage) {
    gradref__gs3d_nearest_dx_voxels(r, n, c0, stage, stage_rows16, block_pass16);
}

/* a[c] += w * g[c] (or a[c] += g[c]) for c < C, 16 lanes, the tail masked. */
static inline void axpy512(float *a, const float *g, float w, int64_t C, int scale) {
    const __m512 wv = _mm512_set1_ps(w);
    int64_t c = 0;
    for (; c + 16 <= C; c += 16) {
        __m512 add = scale ? _mm512_mul_ps(wv, _mm512_loadu_ps(g + c)) : _mm512_loadu_ps(g + c);
        _mm512_storeu_ps(a + c, _mm512_add_ps(_mm512_loadu_ps(a + c), add));
    }
    if (c < C) {
        const __mmask16 m = (__mmask16)((1u << (C - c)) - 1u);
        __m512 gv = _mm512_maskz_loadu_ps(m, g + c);
        __m512 add = scale ? _mm512_mul_ps(wv, gv) : gv;
        _mm512_mask_storeu_ps(a + c, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + c), add));
    }
}

void gradref__gs3d_f32_dx_plane_avx512(const gs3d_kargs *r, const gs3d_record_f *rec, int64_t count,
                                       float *plane, const float *gn) {
    const int64_t C = r->shape.C;
    const int scale = r->shape.interp != GRADREF_INTERP_NEAREST;
    for (int64_t e = 0; e < count; e++) {
        if (e + 8 < count) { /* grad rows are random: fetch ahead */
            const char *next = (const char *)(gn + rec[e + 8].g);
            _mm_prefetch(next, _MM_HINT_T0);
            if (C > 16) _mm_prefetch(next + 64, _MM_HINT_T0);
        }
        const float *g = gn + rec[e].g;
        float *a = plane + rec[e].a;
        for (int j = 0; j < 4; j++)
            if ((rec[e].on >> j) & 1u) axpy512(a + r->da_plane[j], g, rec[e].w[j], C, scale);
    }
}

const gradref__gs3d_kernels gradref__gs3d_kernels_avx512 = {
    .isa = "avx512",
    .dgrid16 = gradref__gs3d_f32_dgrid16_avx512,
    .dgrid8 = gradref__gs3d_f32_dgrid8_avx2,
    .geometry16 = gradref__gs3d_f32_geometry16_avx512,
    .voxel_slots = gradref__gs3d_voxel_slots_avx512,
    .nearest_dx = gradref__gs3d_f32_nearest_dx_avx512,
    .nearest_dx_voxels = gradref__gs3d_f32_nearest_dx_voxels_avx512,
    .dx_plane = gradref__gs3d_f32_dx_plane_avx512,
};

#else
typedef int gradref__gs3d_avx512_unused;
#endif
