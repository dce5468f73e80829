/* SPDX-License-Identifier: Apache-2.0 */
/* grid_sampler3d_grad's NEON kernels: dgrid 8 points per step in two 4-lane halves, and dx
 * planes 8 channels a step, the portable passes' operations in the same order (no FMA), so the
 * reference's bits. NEON has no gather: dgrid's corner values are read lane by lane, and only
 * its arithmetic is in vectors. */
#include "gs3d_simd.h"

#ifdef GRADREF__ARM64

#  include <arm_neon.h>

/* gix +/- t on the lanes `on`, as the reference adds or subtracts per corner */
static inline float32x4_t step(float32x4_t gi, float32x4_t t, uint32x4_t on, int plus) {
    return vbslq_f32(on, plus ? vaddq_f32(gi, t) : vsubq_f32(gi, t), gi);
}

/* The 8 points' terms of channel c: gi[k][h] is component k of points 4h .. 4h + 3. */
static void channel_terms(const gs3d_kargs *r, const float *xc, const float32x4_t g[2],
                          const int64_t *offx, const uint8_t *mask, int live,
                          const float32x4_t w[2][2], const float32x4_t hy[2][2],
                          const float32x4_t d[2][2], const uint32x4_t lane[8][2],
                          float32x4_t gi[3][2]) {
    for (int k = 0; k < 8; k++) {
        if (!((live >> k) & 1)) continue;
        const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
        for (int h = 0; h < 2; h++) {
            float lanes[4];
            for (int l = 0; l < 4; l++)
                lanes[l] =
                    (mask[4 * h + l] >> k) & 1u ? xc[offx[4 * h + l] + r->dx_corner[k]] : 0.0f;
            const float32x4_t v = vld1q_f32(lanes), vw = vmulq_f32(v, w[dx][h]);
            const float32x4_t tx = vmulq_f32(vmulq_f32(vmulq_f32(v, hy[dy][h]), d[dz][h]), g[h]);
            const float32x4_t ty = vmulq_f32(vmulq_f32(vw, d[dz][h]), g[h]);
            const float32x4_t tz = vmulq_f32(vmulq_f32(vw, hy[dy][h]), g[h]);
            gi[0][h] = step(gi[0][h], tx, lane[k][h], dx);
            gi[1][h] = step(gi[1][h], ty, lane[k][h], dy);
            gi[2][h] = step(gi[2][h], tz, lane[k][h], dz);
        }
    }
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
        int live = 0;
        for (int l = 0; l < 8; l++)
            live |= mask[l];
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
            for (int64_t c = 0; c < p->C; c++) {
                const float *gc = gn + c * r->gs[1];
                float32x4_t g[2];
                for (int h = 0; h < 2; h++) {
                    if (r->grad_points_dense) {
                        g[h] = vld1q_f32(gc + q + 4 * h);
                    } else {
                        const int64_t *o = r->g.offg + i + 4 * h;
                        const float v[4] = {gc[o[0]], gc[o[1]], gc[o[2]], gc[o[3]]};
                        g[h] = vld1q_f32(v);
                    }
                }
                channel_terms(r, xn + c * r->xs[1], g, r->g.offx + i, mask, live, w, hy, d, lane,
                              gi);
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

const gradref__gs3d_kernels gradref__gs3d_kernels_neon = {
    .isa = "neon",
    .dgrid8 = dgrid8_neon,
    .dx_plane = dx_plane_neon,
};

#else
typedef int gradref__gs3d_neon_unused;
#endif
