/* SPDX-License-Identifier: Apache-2.0 */
/* grid_sampler3d_grad's NEON kernels: dgrid 8 points per step in two 4-lane halves, the
 * geometry 16 points a step (four quads) and dx planes 8 channels a step, the portable passes'
 * operations in the same order (no FMA), so the reference's bits. NEON has no gather: dgrid's
 * corner values are read lane by lane, or four channels of a point at once when they are
 * adjacent, and transposed. */
#include "gs3d_kernels.h"

#include "common/nan.h"

#ifdef GRADREF__ARM64

#  include <arm_neon.h>

/* gix +/- t on the lanes `on`, as the reference adds or subtracts per corner */
static inline float32x4_t step(float32x4_t gi, float32x4_t t, uint32x4_t on, int plus) {
    return vbslq_f32(on, plus ? vaddq_f32(gi, t) : vsubq_f32(gi, t), gi);
}

/* The 4x4 transpose: out[i] lane k = in[k] lane i. */
static inline void transpose4x4(const float32x4_t in[4], float32x4_t out[4]) {
    const float32x4_t t0 = vtrn1q_f32(in[0], in[1]), t1 = vtrn2q_f32(in[0], in[1]);
    const float32x4_t t2 = vtrn1q_f32(in[2], in[3]), t3 = vtrn2q_f32(in[2], in[3]);
    const float64x2_t u0 = vreinterpretq_f64_f32(t0), u1 = vreinterpretq_f64_f32(t1);
    const float64x2_t u2 = vreinterpretq_f64_f32(t2), u3 = vreinterpretq_f64_f32(t3);
    out[0] = vreinterpretq_f32_f64(vtrn1q_f64(u0, u2));
    out[1] = vreinterpretq_f32_f64(vtrn1q_f64(u1, u3));
    out[2] = vreinterpretq_f32_f64(vtrn2q_f64(u0, u2));
    out[3] = vreinterpretq_f32_f64(vtrn2q_f64(u1, u3));
}

/* Corner k's terms of value v on 4 points (weights w, hy, d by the corner's sides) into gx,
 * gy, gz: the reference's products in its order; with `blend`, only the lanes `on`. */
static inline __attribute__((always_inline)) void
corner_terms4(int k, float32x4_t v, float32x4_t w, float32x4_t hy, float32x4_t d, float32x4_t g,
              uint32x4_t on, int blend, float32x4_t *gx, float32x4_t *gy, float32x4_t *gz) {
    const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
    const float32x4_t vw = vmulq_f32(v, w);
    const float32x4_t tx = vmulq_f32(vmulq_f32(vmulq_f32(v, hy), d), g);
    const float32x4_t ty = vmulq_f32(vmulq_f32(vw, d), g);
    const float32x4_t tz = vmulq_f32(vmulq_f32(vw, hy), g);
    if (blend) {
        *gx = step(*gx, tx, on, dx), *gy = step(*gy, ty, on, dy), *gz = step(*gz, tz, on, dz);
    } else {
        *gx = dx ? vaddq_f32(*gx, tx) : vsubq_f32(*gx, tx);
        *gy = dy ? vaddq_f32(*gy, ty) : vsubq_f32(*gy, ty);
        *gz = dz ? vaddq_f32(*gz, tz) : vsubq_f32(*gz, tz);
    }
}

/* Channels c .. c + 3 at 4 points whose channels are adjacent (at base + off[l]): each point's
 * four by one load, transposed into a vector per channel. */
static inline void channel_quads4(const float *base, const int64_t *off, float32x4_t v[4]) {
    const float32x4_t rows[4] = {vld1q_f32(base + off[0]), vld1q_f32(base + off[1]),
                                 vld1q_f32(base + off[2]), vld1q_f32(base + off[3])};
    transpose4x4(rows, v);
}

/* grad's channel at 4 points (gc: the channel's base): dense, or through the point offsets. */
static inline float32x4_t grad4(const gs3d_kargs *r, const float *gc, int64_t q, const int64_t *o) {
    if (r->grad_points_dense) return vld1q_f32(gc + q);
    const float v[4] = {gc[o[0]], gc[o[1]], gc[o[2]], gc[o[3]]};
    return vld1q_f32(v);
}

/* The 8 points' terms of channel c, of the halves in `halves` (bit h: points 4h .. 4h + 3):
 * gi[k][h] is component k of half h. `blend` 0: every corner of every lane is inside (a
 * smooth grid's interior), so the corners are read and the terms added without the lane
 * tests; the sums are the same. */
static inline __attribute__((always_inline)) void
channel_terms(const gs3d_kargs *r, const float *xc, const float32x4_t g[2], const int64_t *offx,
              const uint8_t *mask, int live, const float32x4_t w[2][2], const float32x4_t hy[2][2],
              const float32x4_t d[2][2], const uint32x4_t lane[8][2], int blend, int halves,
              float32x4_t gi[3][2]) {
    for (int k = 0; k < 8; k++) {
        if (!((live >> k) & 1)) continue;
        const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
        for (int h = 0; h < 2; h++) {
            if (!((halves >> h) & 1)) continue;
            float lanes[4];
            for (int l = 0; l < 4; l++)
                lanes[l] = !blend || (mask[4 * h + l] >> k) & 1u
                               ? xc[offx[4 * h + l] + r->dx_corner[k]]
                               : 0.0f;
            corner_terms4(k, vld1q_f32(lanes), w[dx][h], hy[dy][h], d[dz][h], g[h], lane[k][h],
                          blend, &gi[0][h], &gi[1][h], &gi[2][h]);
        }
    }
}

/* channel_terms with `blend` a constant in each call. */
static void channel_terms_any(const gs3d_kargs *r, const float *xc, const float32x4_t g[2],
                              const int64_t *offx, const uint8_t *mask, int live,
                              const float32x4_t w[2][2], const float32x4_t hy[2][2],
                              const float32x4_t d[2][2], const uint32x4_t lane[8][2], int full,
                              float32x4_t gi[3][2]) {
    if (full)
        channel_terms(r, xc, g, offx, mask, live, w, hy, d, lane, 0, 3, gi);
    else
        channel_terms(r, xc, g, offx, mask, live, w, hy, d, lane, 1, 3, gi);
}

/* Channels [0, c_end) of one half of dgrid8_neon's step by the corner values' lanes, where the
 * other half took them by quads. */
static void half_lanes(const gs3d_kargs *r, const float *xn, const float *gn, int64_t c_end,
                       int64_t q, int64_t i, const uint8_t *mask, int live,
                       const float32x4_t w[2][2], const float32x4_t hy[2][2],
                       const float32x4_t d[2][2], const uint32x4_t lane[8][2], int half,
                       float32x4_t gi[3][2]) {
    for (int64_t c = 0; c < c_end; c++) {
        const float *gc = gn + c * r->gs[1];
        const float32x4_t g[2] = {grad4(r, gc, q, r->g.offg + i),
                                  grad4(r, gc, q + 4, r->g.offg + i + 4)};
        channel_terms(r, xn + c * r->xs[1], g, r->g.offx + i, mask, live, w, hy, d, lane, 1,
                      1 << half, gi);
    }
}

/* dgrid8_neon's channels below the last multiple of 4 for the halves in `halves` (bit h:
 * points 4h .. 4h + 3), whose points have every corner inside, x's channels adjacent
 * (channels-last): a corner's four channels at a point by one load, transposed into a vector
 * per channel, where a lane load each took four times the loads; grad's likewise when its
 * channels are adjacent. Each half's points take their terms in the reference's order
 * (channel, then corner). Returns the channels done. */
static int64_t dgrid8_quads(const gs3d_kargs *r, const float *xn, const float *gn, int64_t q,
                            int64_t i, int halves, const float32x4_t w[2][2],
                            const float32x4_t hy[2][2], const float32x4_t d[2][2],
                            float32x4_t gi[3][2]) {
    const int64_t C4 = r->shape.C & ~(int64_t)3;
    const int grad_quads = !r->grad_points_dense && r->gs[1] == 1;
    const uint32x4_t all = vdupq_n_u32(~0u);
    for (int h = 0; h < 2; h++) {
        if (!((halves >> h) & 1)) continue;
        const int64_t *ox = r->g.offx + i + 4 * h, *og = r->g.offg + i + 4 * h;
        for (int64_t c = 0; c < C4; c += 4) {
            float32x4_t v[8][4], g[4];
            for (int k = 0; k < 8; k++)
                channel_quads4(xn + r->dx_corner[k] + c, ox, v[k]);
            if (grad_quads)
                channel_quads4(gn + c, og, g);
            else
                for (int j = 0; j < 4; j++)
                    g[j] = grad4(r, gn + (c + j) * r->gs[1], q + 4 * h, og);
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 8; k++)
                    corner_terms4(k, v[k][j], w[k & 1][h], hy[(k >> 1) & 1][h], d[k >> 2][h], g[j],
                                  all, 0, &gi[0][h], &gi[1][h], &gi[2][h]);
        }
    }
    return C4;
}

static int64_t dgrid8_neon(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1) {
    const gs3d_shape *p = &r->shape;
    const int64_t NP = p->N * r->P;
    const float *dist = (const float *)r->g.dist, *mult = (const float *)r->g.mult;
    const float *xn = (const float *)r->x + n * r->xs[0];
    const float *gn = (const float *)r->grad + n * r->gs[0];
    int64_t q = q0;
    for (; q + 8 <= q1; q += 8) {
        const int64_t i = n * r->P + q;
        const uint8_t *mask = r->g.mask + i;
        float32x4_t gi[3][2];
        for (int k = 0; k < 3; k++)
            gi[k][0] = gi[k][1] = vdupq_n_f32(0.0f);
        int live = 0, full = 0xff, full_halves = 0; /* bit h: half h's every corner inside */
        for (int l = 0; l < 8; l++)
            live |= mask[l], full &= mask[l];
        for (int h = 0; h < 2; h++)
            full_halves |=
                ((mask[4 * h] & mask[4 * h + 1] & mask[4 * h + 2] & mask[4 * h + 3]) == 0xff) << h;
        if (live) {
            float32x4_t w[2][2], hy[2][2], d[2][2];
            uint32x4_t lane[8][2];
            for (int h = 0; h < 2; h++) {
                for (int s = 0; s < 2; s++) {
                    w[s][h] = vld1q_f32(dist + s * NP + i + 4 * h);
                    hy[s][h] = vld1q_f32(dist + (2 + s) * NP + i + 4 * h);
                    d[s][h] = vld1q_f32(dist + (4 + s) * NP + i + 4 * h);
                }
                const uint32x4_t m = {mask[4 * h], mask[4 * h + 1], mask[4 * h + 2],
                                      mask[4 * h + 3]};
                for (int k = 0; k < 8; k++)
                    lane[k][h] = vtstq_u32(m, vdupq_n_u32(1u << k));
            }
            /* the halves whose corners are all inside take the quads (on a random grid more
             * often than whole steps); the other half its channels up to there first */
            const int quads = r->xs[1] == 1 ? full_halves : 0;
            int64_t c = quads ? dgrid8_quads(r, xn, gn, q, i, quads, w, hy, d, gi) : 0;
            if (quads == 1 || quads == 2)
                half_lanes(r, xn, gn, c, q, i, mask, live, w, hy, d, lane, quads == 1, gi);
            for (; c < p->C; c++) {
                const float *gc = gn + c * r->gs[1];
                const float32x4_t g[2] = {grad4(r, gc, q, r->g.offg + i),
                                          grad4(r, gc, q + 4, r->g.offg + i + 4)};
                channel_terms_any(r, xn + c * r->xs[1], g, r->g.offx + i, mask, live, w, hy, d,
                                  lane, full == 0xff, gi);
            }
        }
        float out[3][16];
        for (int k = 0; k < 3; k++)
            for (int h = 0; h < 2; h++)
                vst1q_f32(out[k] + 4 * h,
                          vmulq_f32(vld1q_f32(mult + k * NP + i + 4 * h), gi[k][h]));
        gradref__gs3d_store_dgrid(r, n, q, 8, out);
    }
    return q - q0;
}

/* One dx accumulator plane: each record's in-bounds corners in order, a[c] += w * g[c] (a
 * product, then a sum: no FMA, as the portable pass) over the adjacent channels, 8 a step. */
static void dx_plane_neon(const gs3d_kargs *r, const gs3d_record_f *rec, int64_t count,
                          float *plane, const float *gn) {
    const int64_t C = r->shape.C;
    const int scale = r->shape.interp != GRADREF_INTERP_NEAREST;
    for (int64_t e = 0; e < count; e++) {
        if (e + 8 < count) __builtin_prefetch(gn + rec[e + 8].g, 0, 3); /* random grad rows */
        const float *g = gn + rec[e].g;
        for (int j = 0; j < 4; j++) {
            if (!((rec[e].on >> j) & 1u)) continue;
            float *a = plane + rec[e].a + r->da_plane[j];
            const float w = rec[e].w[j];
            const float32x4_t wv = vdupq_n_f32(w);
            int64_t c = 0;
            for (; c + 8 <= C; c += 8) {
                float32x4_t g0 = vld1q_f32(g + c), g1 = vld1q_f32(g + c + 4);
                if (scale) g0 = vmulq_f32(wv, g0), g1 = vmulq_f32(wv, g1);
                vst1q_f32(a + c, vaddq_f32(vld1q_f32(a + c), g0));
                vst1q_f32(a + c + 4, vaddq_f32(vld1q_f32(a + c + 4), g1));
            }
            for (; c < C; c++)
                a[c] += scale ? w * g[c] : g[c];
        }
    }
}

/* source_index for zeros and border padding on 4 lanes, the portable pass's operations (its
 * mult and its -100 for a NaN, infinite or out-of-int32 coordinate). */
static inline float32x4_t source4(float32x4_t g, int64_t size, int align, int border,
                                  float32x4_t *mult) {
    const float32x4_t one = vdupq_n_f32(1.0f), two = vdupq_n_f32(2.0f);
    const float fsize = (float)size, fsize1 = (float)(size - 1);
    float32x4_t coord;
    if (align) {
        *mult = vdupq_n_f32(fsize1 / 2);
        coord = vmulq_f32(vdivq_f32(vaddq_f32(g, one), two), vdupq_n_f32(fsize1));
    } else {
        *mult = vdupq_n_f32(fsize / 2);
        coord = vdivq_f32(vsubq_f32(vmulq_f32(vaddq_f32(g, one), vdupq_n_f32(fsize)), one), two);
    }
    if (border) { /* <= 0: 0, gradient 0; >= size-1: size-1, gradient 0; NaN passes */
        const uint32x4_t low = vcleq_f32(coord, vdupq_n_f32(0.0f));
        const uint32x4_t high = vbicq_u32(vcgeq_f32(coord, vdupq_n_f32(fsize1)), low);
        coord = vbslq_f32(low, vdupq_n_f32(0.0f), vbslq_f32(high, vdupq_n_f32(fsize1), coord));
        *mult = vmulq_f32(*mult, vbslq_f32(vorrq_u32(low, high), vdupq_n_f32(0.0f), one));
    }
    const uint32x4_t ok = vandq_u32(vcleq_f32(coord, vdupq_n_f32(2147483646.0f)),
                                    vcgeq_f32(coord, vdupq_n_f32(-2147483648.0f)));
    return vbslq_f32(ok, coord, vdupq_n_f32(-100.0f));
}

/* 4 points from point index i (image n's q): their grid coordinates. */
static inline void grid4(const gs3d_kargs *r, const float *grid0, int64_t q, float32x4_t raw[3]) {
    const gradref__gs3d_view *gv = &r->shape.grid;
    if (gv->s[3] == 3 && gv->s[4] == 1) { /* packed points: one de-interleaving load */
        const float32x4x3_t v = vld3q_f32(grid0 + 3 * q);
        raw[0] = v.val[0], raw[1] = v.val[1], raw[2] = v.val[2];
        return;
    }
    for (int k = 0; k < 3; k++) {
        float t[4];
        for (int l = 0; l < 4; l++)
            t[l] = grid0[(q + l) * gv->s[3] + k * gv->s[4]];
        raw[k] = vld1q_f32(t);
    }
}

/* Trilinear geometry of points i..i+3 (the portable pass's values): distances, weights and
 * multipliers stored, then per lane the corner mask and the offsets (0 without a corner). */
static void trilinear4(const gs3d_kargs *r, int64_t i, const float32x4_t coord[3],
                       const float32x4_t m[3], const int64_t size[3]) {
    const int64_t NP = r->shape.N * r->P;
    float *w = (float *)r->g.w, *dist = (float *)r->g.dist, *mult = (float *)r->g.mult;
    float32x4_t d[6];
    uint32x4_t in0[3], in1[3];
    int32_t v[3][4];
    for (int k = 0; k < 3; k++) {
        const float32x4_t f0 = vrndmq_f32(coord[k]), f1 = vaddq_f32(f0, vdupq_n_f32(1.0f));
        const float32x4_t lim = vdupq_n_f32((float)size[k]), zero = vdupq_n_f32(0.0f);
        in0[k] = vandq_u32(vcgeq_f32(f0, zero), vcltq_f32(f0, lim));
        in1[k] = vandq_u32(vcgeq_f32(f1, zero), vcltq_f32(f1, lim));
        d[2 * k] = vsubq_f32(f1, coord[k]);
        d[2 * k + 1] = vsubq_f32(coord[k], f0);
        vst1q_s32(v[k], vcvtq_s32_f32(f0));
        vst1q_f32(dist + (2 * k) * NP + i, d[2 * k]);
        vst1q_f32(dist + (2 * k + 1) * NP + i, d[2 * k + 1]);
        vst1q_f32(mult + k * NP + i, m[k]);
    }
    uint32x4_t mask = vdupq_n_u32(0);
    for (int k = 0; k < 8; k++) {
        const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
        const uint32x4_t on =
            vandq_u32(vandq_u32(dx ? in1[0] : in0[0], dy ? in1[1] : in0[1]), dz ? in1[2] : in0[2]);
        mask = vorrq_u32(mask, vandq_u32(on, vdupq_n_u32(1u << k)));
        vst1q_f32(w + k * NP + i, vmulq_f32(vmulq_f32(d[dx], d[2 + dy]), d[4 + dz]));
    }
    uint32_t bits[4];
    vst1q_u32(bits, mask);
    gradref__gs3d_store_corners(r, i, 4, v[0], v[1], v[2], bits);
}

/* Nearest geometry of points i..i+3: the rounded voxel (to nearest even, as nearbyint). With a
 * voxel index only each point's voxel is stored (as AVX-512's nearest16), else the mask and
 * offsets (all the portable pass writes). */
static void nearest4(const gs3d_kargs *r, int64_t i, const float32x4_t coord[3],
                     const int64_t size[3]) {
    uint32x4_t in = vdupq_n_u32(~0u);
    int32x4_t v[3];
    for (int k = 0; k < 3; k++) {
        const float32x4_t f = vrndnq_f32(coord[k]);
        in = vandq_u32(in, vandq_u32(vcgeq_f32(f, vdupq_n_f32(0.0f)),
                                     vcltq_f32(f, vdupq_n_f32((float)size[k]))));
        v[k] = vcvtq_s32_f32(f);
    }
    if (r->v.vox) { /* (z H + y) W + x: below 2^31 (layout_of) */
        const int32x4_t zy = vmlaq_n_s32(v[1], v[2], (int32_t)r->shape.H);
        const int32x4_t vox = vmlaq_n_s32(v[0], zy, (int32_t)r->shape.W);
        vst1q_s32(r->v.vox + i, vbslq_s32(in, vox, vdupq_n_s32(-1)));
        return;
    }
    int32_t xyz[3][4];
    for (int k = 0; k < 3; k++)
        vst1q_s32(xyz[k], v[k]);
    uint32_t on[4];
    vst1q_u32(on, in);
    gradref__gs3d_store_voxels(r, i, 4, xyz[0], xyz[1], xyz[2], on);
}

/* Geometry of points [q0, q1) of image n, 16 a step (four quads); the conditions of
 * gradref__gs3d_f32_geometry16_avx512. */
static int64_t geometry16_neon(const gs3d_kargs *r, int64_t n, int64_t q0, int64_t q1) {
    const gs3d_shape *p = &r->shape;
    const int border = p->padding == GRADREF_PAD_BORDER, nearest = p->interp != 0;
    const int grad_offsets = !(nearest && r->v.vox); /* the voxel index reads grad by point */
    const int64_t size[3] = {p->W, p->H, p->D};
    const float *grid0 = (const float *)(const void *)p->grid.data + n * p->grid.s[0];
    int64_t q = q0;
    for (; q + 16 <= q1; q += 16)
        for (int64_t u = q; u < q + 16; u += 4) {
            const int64_t i = n * r->P + u;
            float32x4_t raw[3], coord[3], m[3];
            grid4(r, grid0, u, raw);
            for (int k = 0; k < 3; k++)
                coord[k] = source4(raw[k], size[k], p->align_corners, border, &m[k]);
            for (int l = 0; grad_offsets && l < 4; l++)
                r->g.offg[i + l] = (u + l) * r->gs[4];
            if (nearest)
                nearest4(r, i, coord, size);
            else
                trilinear4(r, i, coord, m, size);
        }
    return q - q0;
}

/* ---- nearest by the voxel index (gs3d_voxels), 4 lanes ---- */

/* Whole blocks of 16 voxels from v (block b) while they fit in V, as four quarters of 4
 * lanes; returns where they stop. */
static int64_t voxel_blocks4(float *acc, int64_t as1, int cb, const float *stage,
                             const int32_t *slots, const int32_t *over, const int32_t *start,
                             int64_t v, int64_t b, int64_t V) {
    static const uint32_t lane_of[4] = {0, 1, 2, 3};
    const uint32x4_t lanes = vld1q_u32(lane_of);
    const float32x4_t canon = vreinterpretq_f32_u32(vdupq_n_u32(GRADREF__CANON_NAN_F32));
    for (; v + 16 <= V; v += 16, b++) {
        float32x4_t out[4][4]; /* out[h][i]: channel i of voxels v + 4h .. v + 4h + 3 */
        for (int h = 0; h < 4; h++) {
            float32x4_t sum[4];
            for (int k = 0; k < 4; k++) {
                const int64_t u = v + 4 * h + k;
                sum[k] =
                    vaddq_f32(vld1q_f32(stage + slots[2 * u]), vld1q_f32(stage + slots[2 * u + 1]));
            }
            transpose4x4(sum, out[h]);
        }
        for (int32_t e = start[b]; e < start[b + 1]; e++) { /* in point order */
            const int32_t lane = over[2 * e] - (int32_t)v;
            const uint32x4_t on = vceqq_u32(lanes, vdupq_n_u32((uint32_t)(lane & 3)));
            const float *row = stage + over[2 * e + 1];
            float32x4_t *o = out[lane >> 2];
            for (int i = 0; i < 4; i++)
                o[i] = vbslq_f32(on, vaddq_f32(o[i], vdupq_n_f32(row[i])), o[i]);
        }
        for (int h = 0; h < 4; h++)
            for (int i = 0; i < cb; i++) /* NaN as the canonical one */
                vst1q_f32(acc + i * as1 + v + 4 * h,
                          vbslq_f32(vceqq_f32(out[h][i], out[h][i]), out[h][i], canon));
    }
    return v;
}

/* stage: +0 + grad (dx starts at +0), point q at row gs3d_stage_row(q): 4 points of the four
 * channels transposed, a row a store. */
static void stage_points(const float *const g[GS3D_STAGE_CHANNELS], int64_t P, float *stage) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
    int64_t q = 0;
    for (; q + 4 <= P; q += 4) {
        float32x4_t in[4], out[4];
        for (int i = 0; i < 4; i++)
            in[i] = vaddq_f32(zero, vld1q_f32(g[i] + q));
        transpose4x4(in, out); /* out[k]: point q + k */
        const int64_t base = (q & ~(int64_t)15) + (q & 15) / 4;
        for (int k = 0; k < 4; k++)
            vst1q_f32(stage + 4 * (base + 4 * k), out[k]);
    }
    for (; q < P; q++)
        for (int i = 0; i < 4; i++)
            stage[4 * gs3d_stage_row(q) + i] = 0.0f + g[i][q];
}

static int64_t block_pass4(const gs3d_voxel_frame *f, int64_t v, int64_t b, int64_t V) {
    return voxel_blocks4(f->acc, f->as1, f->cb, f->stage, f->slots, f->over, f->start, v, b, V);
}

/* nearest_dx_voxels (gs3d_kernels.h's AVX-512 and AVX2 ones): the same sums in the same order. */
static void nearest_dx_voxels_neon(const gs3d_kargs *r, int64_t n, int64_t c0, float *stage) {
    gradref__gs3d_nearest_dx_voxels(r, n, c0, stage, stage_points, block_pass4);
}

const gradref__gs3d_kernels gradref__gs3d_kernels_neon = {
    .isa = "neon",
    .dgrid8 = dgrid8_neon,
    .geometry16 = geometry16_neon,
    .voxel_slots = gradref__gs3d_voxel_slots_points,
    .nearest_dx = gradref__gs3d_f32_nearest_dx_points,
    .nearest_dx_voxels = nearest_dx_voxels_neon,
    .dx_plane = dx_plane_neon,
};

#else
typedef int gradref__gs3d_neon_unused;
#endif
