/* SPDX-License-Identifier: Apache-2.0 */
/* grid_sampler3d_grad's AVX2 kernels: dgrid 8 points per step, the geometry 16 points a step
 * (two octets) and dx planes 32 channels per step (then 8), the portable passes' operations in
 * the same order (no FMA), so the reference's bits. */
#include "gs3d_kernels.h"

#ifdef GRADREF__X86

#  include <immintrin.h>

/* The low 32 bits of 8 int64 values (they fit: the caller checked). */
static inline __m256i narrow8(const int64_t *v) {
    __m256 lo = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)v));
    __m256 hi = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(v + 4)));
    __m256i mixed = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
    return _mm256_permute4x64_epi64(mixed, _MM_SHUFFLE(3, 1, 2, 0));
}

#  define GRAD_AHEAD 32

/* One step's operands: 8 points' weights (w, h, d by the corner's side), and each corner's
 * lanes inside x and offsets into it. */
typedef struct {
    __m256 w[2], h[2], d[2];
    __m256i lane[8], idx[8];
    int32_t off[8][8]; /* with `quads`: idx[k] by lane */
} dgrid8_step;

/* Corner k's terms of value v into gi (the reference's products in its order). */
static inline __attribute__((always_inline)) void
corner_terms8(const dgrid8_step *t, int k, int blend, __m256 v, __m256 g, __m256 gi[3]) {
    const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
    const __m256 on = _mm256_castsi256_ps(t->lane[k]);
    const __m256 vw = _mm256_mul_ps(v, t->w[dx]);
    __m256 tx = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(v, t->h[dy]), t->d[dz]), g);
    __m256 ty = _mm256_mul_ps(_mm256_mul_ps(vw, t->d[dz]), g);
    __m256 tz = _mm256_mul_ps(_mm256_mul_ps(vw, t->h[dy]), g);
    if (blend) /* grad may be Inf or NaN on a lane whose corner is outside */
        tx = _mm256_and_ps(tx, on), ty = _mm256_and_ps(ty, on), tz = _mm256_and_ps(tz, on);
    gi[0] = dx ? _mm256_add_ps(gi[0], tx) : _mm256_sub_ps(gi[0], tx);
    gi[1] = dy ? _mm256_add_ps(gi[1], ty) : _mm256_sub_ps(gi[1], ty);
    gi[2] = dz ? _mm256_add_ps(gi[2], tz) : _mm256_sub_ps(gi[2], tz);
}

/* grad's channel c at the 8 points, a line GRAD_AHEAD points on fetched early when `ahead`. */
static inline __m256 grad8(const gs3d_kargs *r, const float *gn, int64_t c, int64_t q, __m256i offg,
                           int ahead) {
    const float *gc = gn + c * r->gs[1];
    if (ahead) _mm_prefetch((const char *)(gc + q + GRAD_AHEAD), _MM_HINT_T0);
    return r->grad_points_dense ? _mm256_loadu_ps(gc + q) : _mm256_i32gather_ps(gc, offg, 4);
}

/* Channels c .. c + 3 of one corner at 8 points whose channels are contiguous in x (channel
 * stride 1): each point's four values by one 16-byte load, then transposed into a vector per
 * channel. Zen 3 runs an 8-lane gather at about a third of this pace. */
static inline void channel_quads8(const float *x, const int32_t *off, __m256 v[4]) {
    __m256 p[4]; /* points i and 4 + i */
    for (int i = 0; i < 4; i++)
        p[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(x + off[i])),
                                    _mm_loadu_ps(x + off[4 + i]), 1);
    const __m256 t0 = _mm256_unpacklo_ps(p[0], p[1]), t1 = _mm256_unpackhi_ps(p[0], p[1]);
    const __m256 t2 = _mm256_unpacklo_ps(p[2], p[3]), t3 = _mm256_unpackhi_ps(p[2], p[3]);
    v[0] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    v[1] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    v[2] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    v[3] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
}

/* The chain over (channel, corner) for 8 points into gi[3]. `blend` 1: the terms of the lanes
 * whose corner is outside are cleared to +0 (an AND, where a blend of the sums costs three
 * uops on Intel cores) and added anyway: a sum that starts at +0 never becomes -0 (x - x is
 * +0), so adding or subtracting +0 leaves it as skipping the term does. `blend` 0: every
 * corner of every lane is inside (a smooth grid's interior): no AND and unmasked gathers, or
 * with `quads` (channel stride 1) four channels' corners loaded at once. */
static inline __attribute__((always_inline)) void
dgrid8_chain(const gs3d_kargs *r, const dgrid8_step *t, int blend, int quads, int live,
             const float *xn, const float *gn, int64_t q, __m256i offg, int ahead, __m256 gi[3]) {
    int64_t c = 0;
    for (; quads && c + 4 <= r->shape.C; c += 4) {
        __m256 v[8][4];
        for (int k = 0; k < 8; k++)
            channel_quads8(xn + c, t->off[k], v[k]);
        for (int j = 0; j < 4; j++) {
            const __m256 g = grad8(r, gn, c + j, q, offg, ahead);
            for (int k = 0; k < 8; k++)
                corner_terms8(t, k, 0, v[k][j], g, gi);
        }
    }
    for (; c < r->shape.C; c++) {
        const float *xc = xn + c * r->xs[1];
        const __m256 g = grad8(r, gn, c, q, offg, ahead);
        for (int k = 0; k < 8; k++) {
            if (blend && !((live >> k) & 1)) continue;
            const __m256 v = blend ? _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xc, t->idx[k],
                                                              _mm256_castsi256_ps(t->lane[k]), 4)
                                   : _mm256_i32gather_ps(xc, t->idx[k], 4);
            corner_terms8(t, k, blend, v, g, gi);
        }
    }
}

int64_t gradref__gs3d_f32_dgrid8_avx2(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1) {
    const gs3d_shape *p = &r->shape;
    const int64_t NP = p->N * r->P;
    const float *dist = (const float *)r->g.dist, *mult = (const float *)r->g.mult;
    const float *xn = (const float *)r->x + n * r->xs[0];
    const float *gn = (const float *)r->grad + n * r->gs[0];
    __m256i corner[8];
    for (int k = 0; k < 8; k++)
        corner[k] = _mm256_set1_epi32((int32_t)r->dx_corner[k]);
    int64_t q = q0;
    for (; q + 8 <= q1; q += 8) {
        const int64_t i = n * r->P + q;
        const __m256i m8 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(r->g.mask + i)));
        __m256 gi[3] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        if (!_mm256_testz_si256(m8, m8)) {
            const __m256i offx = narrow8(r->g.offx + i), offg = narrow8(r->g.offg + i);
            dgrid8_step t;
            for (int j = 0; j < 2; j++) {
                t.w[j] = _mm256_loadu_ps(dist + j * NP + i);
                t.h[j] = _mm256_loadu_ps(dist + (2 + j) * NP + i);
                t.d[j] = _mm256_loadu_ps(dist + (4 + j) * NP + i);
            }
            int live = 0, full = 0;
            for (int k = 0; k < 8; k++) {
                __m256i bit = _mm256_set1_epi32(1 << k);
                t.lane[k] = _mm256_cmpeq_epi32(_mm256_and_si256(m8, bit), bit);
                t.idx[k] = _mm256_add_epi32(offx, corner[k]);
                const int lanes = _mm256_movemask_ps(_mm256_castsi256_ps(t.lane[k]));
                live |= (lanes != 0) << k;
                full |= (lanes == 0xff) << k;
            }
            /* grad's channels are a plane apart: a line of each, GRAD_AHEAD points on, is
             * fetched early (the streams outnumber what the hardware prefetcher follows) */
            const int ahead = r->grad_points_dense && (q & 15) == 0 && q + GRAD_AHEAD < q1;
            if (full == 0xff && r->xs[1] == 1) {
                for (int k = 0; k < 8; k++)
                    _mm256_storeu_si256((__m256i *)(void *)t.off[k], t.idx[k]);
                dgrid8_chain(r, &t, 0, 1, live, xn, gn, q, offg, ahead, gi);
            } else if (full == 0xff) {
                dgrid8_chain(r, &t, 0, 0, live, xn, gn, q, offg, ahead, gi);
            } else {
                dgrid8_chain(r, &t, 1, 0, live, xn, gn, q, offg, ahead, gi);
            }
        }
        float out[3][16];
        for (int j = 0; j < 3; j++)
            _mm256_storeu_ps(out[j], _mm256_mul_ps(_mm256_loadu_ps(mult + j * NP + i), gi[j]));
        gradref__gs3d_store_dgrid(r, n, q, 8, out);
    }
    return q - q0;
}

/* A record's corners over channels [c0, c0 + 8V): grad's V vectors loaded once for the four
 * corners (each element still takes its terms in point order). */
static inline __attribute__((always_inline)) void dx_corners8(const gs3d_kargs *r,
                                                              const gs3d_record_f *e, float *a,
                                                              const float *g, int64_t c0, int V,
                                                              int scale) {
    __m256 gv[4];
    for (int v = 0; v < V; v++)
        gv[v] = _mm256_loadu_ps(g + c0 + 8 * v);
    for (int j = 0; j < 4; j++) {
        if (!((e->on >> j) & 1u)) continue;
        float *aj = a + r->da_plane[j] + c0;
        const __m256 wv = _mm256_set1_ps(e->w[j]);
        for (int v = 0; v < V; v++) {
            const __m256 add = scale ? _mm256_mul_ps(wv, gv[v]) : gv[v];
            _mm256_storeu_ps(aj + 8 * v, _mm256_add_ps(_mm256_loadu_ps(aj + 8 * v), add));
        }
    }
}

void gradref__gs3d_f32_dx_plane_avx2(const gs3d_kargs *r, const gs3d_record_f *rec, int64_t count,
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
        int64_t c = 0;
        for (; c + 32 <= C; c += 32)
            scale ? dx_corners8(r, rec + e, a, g, c, 4, 1) : dx_corners8(r, rec + e, a, g, c, 4, 0);
        for (; c + 8 <= C; c += 8)
            scale ? dx_corners8(r, rec + e, a, g, c, 1, 1) : dx_corners8(r, rec + e, a, g, c, 1, 0);
        for (int j = 0; c < C && j < 4; j++) {
            if (!((rec[e].on >> j) & 1u)) continue;
            float *aj = a + r->da_plane[j];
            for (int64_t k = c; k < C; k++)
                aj[k] += scale ? rec[e].w[j] * g[k] : g[k];
        }
    }
}

/* ---- geometry, 8 lanes ---- */

/* source_index for zeros and border padding on 8 lanes, the portable pass's operations (its
 * mult and its -100 for a NaN, infinite or out-of-int32 coordinate). */
static inline __m256 source8(__m256 g, int64_t size, int align, int border, __m256 *mult) {
    const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
    const float fsize = (float)size, fsize1 = (float)(size - 1);
    __m256 coord;
    if (align) {
        *mult = _mm256_set1_ps(fsize1 / 2);
        coord = _mm256_mul_ps(_mm256_div_ps(_mm256_add_ps(g, one), two), _mm256_set1_ps(fsize1));
    } else {
        *mult = _mm256_set1_ps(fsize / 2);
        coord = _mm256_div_ps(
            _mm256_sub_ps(_mm256_mul_ps(_mm256_add_ps(g, one), _mm256_set1_ps(fsize)), one), two);
    }
    if (border) { /* <= 0: 0, gradient 0; >= size-1: size-1, gradient 0; NaN passes */
        const __m256 zero = _mm256_setzero_ps(), last = _mm256_set1_ps(fsize1);
        const __m256 low = _mm256_cmp_ps(coord, zero, _CMP_LE_OQ);
        const __m256 high = _mm256_andnot_ps(low, _mm256_cmp_ps(coord, last, _CMP_GE_OQ));
        coord = _mm256_blendv_ps(_mm256_blendv_ps(coord, last, high), zero, low);
        *mult = _mm256_mul_ps(*mult, _mm256_blendv_ps(one, zero, _mm256_or_ps(low, high)));
    }
    const __m256 ok =
        _mm256_and_ps(_mm256_cmp_ps(coord, _mm256_set1_ps(2147483646.0f), _CMP_LE_OQ),
                      _mm256_cmp_ps(coord, _mm256_set1_ps(-2147483648.0f), _CMP_GE_OQ));
    return _mm256_blendv_ps(_mm256_set1_ps(-100.0f), coord, ok);
}

/* The grid coordinates of 8 points from image n's point q. */
static inline void grid8(const gs3d_kargs *r, const float *grid0, int64_t q, __m256 raw[3]) {
    const gradref__gs3d_view *gv = &r->shape.grid;
    float t[3][8];
    for (int l = 0; l < 8; l++)
        for (int k = 0; k < 3; k++)
            t[k][l] = grid0[(q + l) * gv->s[3] + k * gv->s[4]];
    for (int k = 0; k < 3; k++)
        raw[k] = _mm256_loadu_ps(t[k]);
}

/* f in [0, size) on 8 lanes. */
static inline __m256 inside8(__m256 f, int64_t size) {
    return _mm256_and_ps(_mm256_cmp_ps(f, _mm256_setzero_ps(), _CMP_GE_OQ),
                         _mm256_cmp_ps(f, _mm256_set1_ps((float)size), _CMP_LT_OQ));
}

/* Trilinear geometry of points i..i+7 (the portable pass's values): distances, weights and
 * multipliers stored, then per lane the corner mask and the offsets (0 without a corner). */
static void trilinear8(const gs3d_kargs *r, int64_t i, const __m256 coord[3], const __m256 m[3],
                       const int64_t size[3]) {
    const int64_t NP = r->shape.N * r->P;
    float *w = (float *)r->g.w, *dist = (float *)r->g.dist, *mult = (float *)r->g.mult;
    __m256 d[6], in0[3], in1[3];
    int32_t v[3][8];
    for (int k = 0; k < 3; k++) {
        const __m256 f0 = _mm256_floor_ps(coord[k]), f1 = _mm256_add_ps(f0, _mm256_set1_ps(1.0f));
        in0[k] = inside8(f0, size[k]);
        in1[k] = inside8(f1, size[k]);
        d[2 * k] = _mm256_sub_ps(f1, coord[k]);
        d[2 * k + 1] = _mm256_sub_ps(coord[k], f0);
        _mm256_storeu_si256((__m256i *)v[k], _mm256_cvttps_epi32(f0));
        _mm256_storeu_ps(dist + (2 * k) * NP + i, d[2 * k]);
        _mm256_storeu_ps(dist + (2 * k + 1) * NP + i, d[2 * k + 1]);
        _mm256_storeu_ps(mult + k * NP + i, m[k]);
    }
    uint32_t bits[8] = {0};
    for (int k = 0; k < 8; k++) {
        const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
        const __m256 on = _mm256_and_ps(_mm256_and_ps(dx ? in1[0] : in0[0], dy ? in1[1] : in0[1]),
                                        dz ? in1[2] : in0[2]);
        const int lanes = _mm256_movemask_ps(on);
        for (int l = 0; l < 8; l++)
            bits[l] |= (uint32_t)((lanes >> l) & 1) << k;
        _mm256_storeu_ps(w + k * NP + i, _mm256_mul_ps(_mm256_mul_ps(d[dx], d[2 + dy]), d[4 + dz]));
    }
    gradref__gs3d_store_corners(r, i, 8, v[0], v[1], v[2], bits);
}

/* Nearest geometry of points i..i+7: the rounded voxel (to nearest even, as nearbyint). With a
 * voxel index only each point's voxel is stored (as AVX-512's nearest16), else the mask and
 * offsets (all the portable pass writes). */
static void nearest8(const gs3d_kargs *r, int64_t i, const __m256 coord[3], const int64_t size[3]) {
    __m256 in = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    __m256i v[3];
    for (int k = 0; k < 3; k++) {
        const __m256 f = _mm256_round_ps(coord[k], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        in = _mm256_and_ps(in, inside8(f, size[k]));
        v[k] = _mm256_cvttps_epi32(f);
    }
    if (r->v.vox) { /* (z H + y) W + x: below 2^31 (layout_of) */
        const __m256i zy = _mm256_add_epi32(
            _mm256_mullo_epi32(v[2], _mm256_set1_epi32((int32_t)r->shape.H)), v[1]);
        const __m256i vox =
            _mm256_add_epi32(_mm256_mullo_epi32(zy, _mm256_set1_epi32((int32_t)r->shape.W)), v[0]);
        _mm256_storeu_si256(
            (__m256i *)(void *)(r->v.vox + i),
            _mm256_blendv_epi8(_mm256_set1_epi32(-1), vox, _mm256_castps_si256(in)));
        return;
    }
    int32_t xyz[3][8];
    for (int k = 0; k < 3; k++)
        _mm256_storeu_si256((__m256i *)(void *)xyz[k], v[k]);
    uint32_t hit[8];
    _mm256_storeu_si256((__m256i *)(void *)hit, _mm256_castps_si256(in));
    gradref__gs3d_store_voxels(r, i, 8, xyz[0], xyz[1], xyz[2], hit);
}

/* Geometry of points [q0, q1) of image n, 16 a step (two octets); the conditions of
 * gradref__gs3d_f32_geometry16_avx512. */
static int64_t geometry16_avx2(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1) {
    const gs3d_shape *p = &r->shape;
    const int border = p->padding == GRADREF_PAD_BORDER, nearest = p->interp != 0;
    const int grad_offsets = !(nearest && r->v.vox); /* the voxel index reads grad by point */
    const int64_t size[3] = {p->W, p->H, p->D};
    const float *grid0 = (const float *)(const void *)p->grid.data + n * p->grid.s[0];
    int64_t q = q0;
    for (; q + 16 <= q1; q += 16)
        for (int64_t u = q; u < q + 16; u += 8) {
            const int64_t i = n * r->P + u;
            __m256 raw[3], coord[3], m[3];
            grid8(r, grid0, u, raw);
            for (int k = 0; k < 3; k++)
                coord[k] = source8(raw[k], size[k], p->align_corners, border, &m[k]);
            for (int l = 0; grad_offsets && l < 8; l++)
                r->g.offg[i + l] = (u + l) * r->gs[4];
            if (nearest)
                nearest8(r, i, coord, size);
            else
                trilinear8(r, i, coord, m, size);
        }
    return q - q0;
}

/* ---- nearest ---- */

/* The 4x4 transpose of 32-bit elements within each 128-bit lane across four vectors: out[i]
 * lane (4j + k) = in[k] lane (4j + i). */
static inline void transpose4_lanes8(const __m256 in[4], __m256 out[4]) {
    const __m256 t0 = _mm256_unpacklo_ps(in[0], in[1]), t1 = _mm256_unpackhi_ps(in[0], in[1]);
    const __m256 t2 = _mm256_unpacklo_ps(in[2], in[3]), t3 = _mm256_unpackhi_ps(in[2], in[3]);
    out[0] = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)));
    out[1] = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)));
    out[2] = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)));
    out[3] = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)));
}

/* Stage rows of voxels u and u + 4 side by side: their slot `slot` (0 first, 1 second). */
static inline __m256 rows2(const float *stage, const int32_t *slots, int64_t u, int slot) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(stage + slots[2 * u + slot])),
                                _mm_loadu_ps(stage + slots[2 * (u + 4) + slot]), 1);
}

/* Whole blocks of 16 voxels from v (block b) while they fit in V, as two halves of 8 lanes;
 * returns where they stop. Inlined with constant cb and stream. */
static inline __attribute__((always_inline)) int64_t
voxel_blocks8(float *acc, int64_t as1, const int cb, const int stream, const float *stage,
              const int32_t *slots, const int32_t *over, const int32_t *start, int64_t v, int64_t b,
              int64_t V) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 canon = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
    for (; v + 16 <= V; v += 16, b++) {
        __m256 out[2][4];
        for (int h = 0; h < 2; h++) { /* out[h][i]: channel i of voxels v + 8h .. v + 8h + 7 */
            __m256 sum[4];
            for (int k = 0; k < 4; k++) /* lanes 0-3: voxel v + 8h + k, 4-7: v + 8h + 4 + k */
                sum[k] = _mm256_add_ps(rows2(stage, slots, v + 8 * h + k, 0),
                                       rows2(stage, slots, v + 8 * h + k, 1));
            transpose4_lanes8(sum, out[h]);
        }
        for (int32_t e = start[b]; e < start[b + 1]; e++) { /* in point order */
            const int32_t lane = over[2 * e] - (int32_t)v;
            const __m256 on =
                _mm256_castsi256_ps(_mm256_cmpeq_epi32(lanes, _mm256_set1_epi32(lane & 7)));
            const float *row = stage + over[2 * e + 1];
            __m256 *o = out[lane >> 3];
            for (int i = 0; i < 4; i++) /* +0 elsewhere: a sum of staged values is never -0 */
                o[i] = _mm256_add_ps(o[i], _mm256_and_ps(_mm256_set1_ps(row[i]), on));
        }
        /* NaN as the canonical one, tested once a block (a blend is three uops on Intel
         * cores); dx past the caches, each line's halves back to back */
        __m256 sum = _mm256_setzero_ps();
        for (int i = 0; i < cb; i++)
            sum = _mm256_add_ps(sum, _mm256_add_ps(out[0][i], out[1][i]));
        const int nan = _mm256_movemask_ps(_mm256_cmp_ps(sum, sum, _CMP_UNORD_Q));
        for (int i = 0; i < cb; i++)
            for (int h = 0; h < 2; h++) {
                const __m256 x = out[h][i];
                const __m256 y =
                    nan ? _mm256_blendv_ps(x, canon, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)) : x;
                if (stream)
                    _mm256_stream_ps(acc + i * as1 + v + 8 * h, y);
                else
                    _mm256_storeu_ps(acc + i * as1 + v + 8 * h, y);
            }
    }
    return v;
}

/* stage: +0 + grad (dx starts at +0), point q at row gs3d_stage_row(q): 8 points of the four
 * channels transposed, two adjacent rows a store. */
static void stage_points(const float *const g[GS3D_STAGE_CHANNELS], int64_t P, float *stage) {
    const __m256 zero = _mm256_setzero_ps();
    int64_t q = 0;
    for (; q + 8 <= P; q += 8) {
        __m256 in[4], out[4];
        for (int i = 0; i < 4; i++)
            in[i] = _mm256_add_ps(zero, _mm256_loadu_ps(g[i] + q));
        transpose4_lanes8(in, out); /* out[k]: points q + k and q + 4 + k */
        const int64_t base = (q & ~(int64_t)15) + (q & 8) / 4;
        for (int k = 0; k < 4; k++)
            _mm256_storeu_ps(stage + 4 * (base + 4 * k), out[k]);
    }
    for (; q < P; q++)
        for (int i = 0; i < 4; i++)
            stage[4 * gs3d_stage_row(q) + i] = 0.0f + g[i][q];
}

/* The blocks at 8 lanes, the four-channel cases with constant cb and stream. */
static int64_t block_pass8(const gs3d_voxel_frame *f, int64_t v, int64_t b, int64_t V) {
    if (f->cb == 4 && f->stream)
        v = voxel_blocks8(f->acc, f->as1, 4, 1, f->stage, f->slots, f->over, f->start, v, b, V);
    else if (f->cb == 4)
        v = voxel_blocks8(f->acc, f->as1, 4, 0, f->stage, f->slots, f->over, f->start, v, b, V);
    else
        v = voxel_blocks8(f->acc, f->as1, f->cb, f->stream, f->stage, f->slots, f->over, f->start,
                          v, b, V);
    if (f->stream) _mm_sfence(); /* the streamed stores are seen before the region ends */
    return v;
}

void gradref__gs3d_f32_nearest_dx_voxels_avx2(const gs3d_kargs *r, int64_t n, int64_t c0,
                                              float *stage) {
    gradref__gs3d_nearest_dx_voxels(r, n, c0, stage, stage_points, block_pass8);
}

const gradref__gs3d_kernels gradref__gs3d_kernels_avx2 = {
    .isa = "avx2",
    .dgrid8 = gradref__gs3d_f32_dgrid8_avx2,
    .geometry16 = geometry16_avx2,
    .voxel_slots = gradref__gs3d_voxel_slots_points,
    .nearest_dx = gradref__gs3d_f32_nearest_dx_points,
    .nearest_dx_voxels = gradref__gs3d_f32_nearest_dx_voxels_avx2,
    .dx_plane = gradref__gs3d_f32_dx_plane_avx2,
};

#else
typedef int gradref__gs3d_avx2_unused;
#endif
