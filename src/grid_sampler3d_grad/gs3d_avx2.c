/* SPDX-License-Identifier: Apache-2.0 */
/* grid_sampler3d_grad's AVX2 kernels: dgrid 8 points per step and dx planes 8 channels per
 * step, the portable passes' operations in the same order (no FMA), so the reference's bits. */
#include "gs3d_simd.h"

#ifdef GRADREF__X86

#  include <immintrin.h>

/* The low 32 bits of 8 int64 values (they fit: the caller checked). */
static inline __m256i narrow8(const int64_t *v) {
    __m256 lo = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)v));
    __m256 hi = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(v + 4)));
    __m256i mixed = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
    return _mm256_permute4x64_epi64(mixed, _MM_SHUFFLE(3, 1, 2, 0));
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
        __m256 gix = _mm256_setzero_ps(), giy = gix, giz = gix;
        if (!_mm256_testz_si256(m8, m8)) {
            const __m256i offx = narrow8(r->g.offx + i), offg = narrow8(r->g.offg + i);
            const __m256 w[2] = {_mm256_loadu_ps(dist + i), _mm256_loadu_ps(dist + NP + i)};
            const __m256 h[2] = {_mm256_loadu_ps(dist + 2 * NP + i),
                                 _mm256_loadu_ps(dist + 3 * NP + i)};
            const __m256 d[2] = {_mm256_loadu_ps(dist + 4 * NP + i),
                                 _mm256_loadu_ps(dist + 5 * NP + i)};
            __m256i lane[8], idx[8];
            int live = 0;
            for (int k = 0; k < 8; k++) {
                __m256i bit = _mm256_set1_epi32(1 << k);
                lane[k] = _mm256_cmpeq_epi32(_mm256_and_si256(m8, bit), bit);
                idx[k] = _mm256_add_epi32(offx, corner[k]);
                if (!_mm256_testz_si256(lane[k], lane[k])) live |= 1 << k;
            }
            for (int64_t c = 0; c < p->C; c++) {
                const float *xc = xn + c * r->xs[1];
                const float *gc = gn + c * r->gs[1];
                const __m256 g = r->grad_points_dense ? _mm256_loadu_ps(gc + q)
                                                      : _mm256_i32gather_ps(gc, offg, 4);
                for (int k = 0; k < 8; k++) {
                    if (!((live >> k) & 1)) continue;
                    const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
                    const __m256 on = _mm256_castsi256_ps(lane[k]);
                    const __m256 v =
                        _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xc, idx[k], on, 4);
                    const __m256 vw = _mm256_mul_ps(v, w[dx]);
                    const __m256 tx =
                        _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(v, h[dy]), d[dz]), g);
                    const __m256 ty = _mm256_mul_ps(_mm256_mul_ps(vw, d[dz]), g);
                    const __m256 tz = _mm256_mul_ps(_mm256_mul_ps(vw, h[dy]), g);
                    gix = _mm256_blendv_ps(
                        gix, dx ? _mm256_add_ps(gix, tx) : _mm256_sub_ps(gix, tx), on);
                    giy = _mm256_blendv_ps(
                        giy, dy ? _mm256_add_ps(giy, ty) : _mm256_sub_ps(giy, ty), on);
                    giz = _mm256_blendv_ps(
                        giz, dz ? _mm256_add_ps(giz, tz) : _mm256_sub_ps(giz, tz), on);
                }
            }
        }
        float out[3][16];
        _mm256_storeu_ps(out[0], _mm256_mul_ps(_mm256_loadu_ps(mult + i), gix));
        _mm256_storeu_ps(out[1], _mm256_mul_ps(_mm256_loadu_ps(mult + NP + i), giy));
        _mm256_storeu_ps(out[2], _mm256_mul_ps(_mm256_loadu_ps(mult + 2 * NP + i), giz));
        gradref__gs3d_store_dgrid(r, n, q, 8, out);
    }
    return q - q0;
}

void gradref__gs3d_f32_dx_plane_avx2(const gs3d_kargs *r, const gs3d_record_f *rec, int64_t count,
                                     float *plane, const float *gn) {
    const int64_t C = r->shape.C;
    const int scale = r->shape.interp != GRADREF_INTERP_NEAREST;
    for (int64_t e = 0; e < count; e++) {
        if (e + 8 < count) _mm_prefetch((const char *)(gn + rec[e + 8].g), _MM_HINT_T0);
        const float *g = gn + rec[e].g;
        float *a = plane + rec[e].a;
        for (int j = 0; j < 4; j++) {
            if (!((rec[e].on >> j) & 1u)) continue;
            float *aj = a + r->da_plane[j];
            const float w = rec[e].w[j];
            const __m256 wv = _mm256_set1_ps(w);
            int64_t c = 0;
            for (; c + 8 <= C; c += 8) {
                __m256 gv = _mm256_loadu_ps(g + c);
                __m256 add = scale ? _mm256_mul_ps(wv, gv) : gv;
                _mm256_storeu_ps(aj + c, _mm256_add_ps(_mm256_loadu_ps(aj + c), add));
            }
            for (; c < C; c++)
                aj[c] += scale ? w * g[c] : g[c];
        }
    }
}

const gradref__gs3d_kernels gradref__gs3d_kernels_avx2 = {
    .isa = "avx2",
    .dgrid8 = gradref__gs3d_f32_dgrid8_avx2,
    .dx_plane = gradref__gs3d_f32_dx_plane_avx2,
};

#else
typedef int gradref__gs3d_avx2_unused;
#endif
