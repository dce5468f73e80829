#include "gs3d_simd.h"

#ifdef GRADREF_GS3D_SIMD

#  include <immintrin.h>

#  include "common/convert.h"
#  include "common/cpu.h"

#  define TARGET     __attribute__((target("avx2")))
#  define TARGET_512 __attribute__((target("avx2,avx512f,avx512dq,avx512bw,avx512vl")))

int gradref__gs3d_simd_available(void) {
    return gradref__cpu_has_avx512() ? 2 : gradref__cpu_has_avx2_f16c();
}

/* dgrid of `count` consecutive points from q: out[k][j] is component k of point q + j. */
static void store_dgrid(const gs3d_run *r, int64_t n, int64_t q, int count, float out[3][16]) {
    const gradref__gs3d_plan *p = r->p;
    const gradref__gs3d_view *dv = &p->dgrid;
    int64_t od = q / (p->Ho * p->Wo), oh = q / p->Wo % p->Ho, ow = q % p->Wo;
    for (int j = 0; j < count; j++) {
        char *o =
            dv->data +
            (size_t)(n * dv->s[0] + od * dv->s[1] + oh * dv->s[2] + ow * dv->s[3]) * p->elem_size;
        for (int k = 0; k < 3; k++) {
            char *e = o + (size_t)(k * dv->s[4]) * p->elem_size;
            if (p->dtype == GRADREF_F32)
                *(float *)e = out[k][j];
            else
                gradref__store_float(p->dtype, e, out[k][j]);
        }
        if (++ow == p->Wo) {
            ow = 0;
            if (++oh == p->Ho) {
                oh = 0;
                od++;
            }
        }
    }
}

/* The low 32 bits of 8 int64 values (they fit: the caller checked). */
TARGET static inline __m256i narrow8(const int64_t *v) {
    __m256 lo = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)v));
    __m256 hi = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(v + 4)));
    __m256i mixed = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
    return _mm256_permute4x64_epi64(mixed, _MM_SHUFFLE(3, 1, 2, 0));
}

TARGET int64_t gradref__gs3d_simd_dgrid(const gs3d_run *r, int64_t n, int64_t q0, int64_t q1) {
    const gradref__gs3d_plan *p = r->p;
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
        store_dgrid(r, n, q, 8, out);
    }
    return q - q0;
}

/* The low 32 bits of 16 int64 values. */
TARGET_512 static inline __m512i narrow16(const int64_t *v) {
    __m256i lo = _mm512_cvtepi64_epi32(_mm512_loadu_si512((const void *)v));
    __m256i hi = _mm512_cvtepi64_epi32(_mm512_loadu_si512((const void *)(v + 8)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

TARGET_512 int64_t gradref__gs3d_avx512_dgrid(const gs3d_run *r, int64_t n, int64_t q0,
                                              int64_t q1) {
    const gradref__gs3d_plan *p = r->p;
    const int64_t NP = p->N * r->P;
    const float *dist = (const float *)r->g.dist, *mult = (const float *)r->g.mult;
    const float *xn = (const float *)r->x + n * r->xs[0];
    const float *gn = (const float *)r->grad + n * r->gs[0];
    int64_t q = q0;
    for (; q + 16 <= q1; q += 16) {
        const int64_t i = n * r->P + q;
        const __m512i m16 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(r->g.mask + i)));
        __m512 gix = _mm512_setzero_ps(), giy = gix, giz = gix;
        __mmask16 lane[8];
        int live = 0;
        for (int k = 0; k < 8; k++) {
            lane[k] = _mm512_test_epi32_mask(m16, _mm512_set1_epi32(1 << k));
            if (lane[k]) live |= 1 << k;
        }
        if (live) {
            const __m512i offx = narrow16(r->g.offx + i), offg = narrow16(r->g.offg + i);
            const __m512 w[2] = {_mm512_loadu_ps(dist + i), _mm512_loadu_ps(dist + NP + i)};
            const __m512 h[2] = {_mm512_loadu_ps(dist + 2 * NP + i),
                                 _mm512_loadu_ps(dist + 3 * NP + i)};
            const __m512 d[2] = {_mm512_loadu_ps(dist + 4 * NP + i),
                                 _mm512_loadu_ps(dist + 5 * NP + i)};
            __m512i idx[8];
            for (int k = 0; k < 8; k++)
                idx[k] = _mm512_add_epi32(offx, _mm512_set1_epi32((int32_t)r->dx_corner[k]));
            for (int64_t c = 0; c < p->C; c++) {
                const float *xc = xn + c * r->xs[1];
                const float *gc = gn + c * r->gs[1];
                const __m512 g = r->grad_points_dense ? _mm512_loadu_ps(gc + q)
                                                      : _mm512_i32gather_ps(offg, gc, 4);
                for (int k = 0; k < 8; k++) {
                    if (!((live >> k) & 1)) continue;
                    const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
                    const __mmask16 on = lane[k];
                    const __m512 v =
                        _mm512_mask_i32gather_ps(_mm512_setzero_ps(), on, idx[k], xc, 4);
                    const __m512 vw = _mm512_mul_ps(v, w[dx]);
                    const __m512 tx =
                        _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(v, h[dy]), d[dz]), g);
                    const __m512 ty = _mm512_mul_ps(_mm512_mul_ps(vw, d[dz]), g);
                    const __m512 tz = _mm512_mul_ps(_mm512_mul_ps(vw, h[dy]), g);
                    gix = dx ? _mm512_mask_add_ps(gix, on, gix, tx)
                             : _mm512_mask_sub_ps(gix, on, gix, tx);
                    giy = dy ? _mm512_mask_add_ps(giy, on, giy, ty)
                             : _mm512_mask_sub_ps(giy, on, giy, ty);
                    giz = dz ? _mm512_mask_add_ps(giz, on, giz, tz)
                             : _mm512_mask_sub_ps(giz, on, giz, tz);
                }
            }
        }
        float out[3][16];
        _mm512_storeu_ps(out[0], _mm512_mul_ps(_mm512_loadu_ps(mult + i), gix));
        _mm512_storeu_ps(out[1], _mm512_mul_ps(_mm512_loadu_ps(mult + NP + i), giy));
        _mm512_storeu_ps(out[2], _mm512_mul_ps(_mm512_loadu_ps(mult + 2 * NP + i), giz));
        store_dgrid(r, n, q, 16, out);
    }
    return q - q0;
}

/* a[c] += w * g[c] (or a[c] += g[c]) for c < C, 16 lanes, the tail masked. */
TARGET_512 static inline void axpy512(float *a, const float *g, float w, int64_t C, int scale) {
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

TARGET_512 static void dx_plane_512(const gs3d_run *r, const gs3d_record_f *rec, int64_t count,
                                    float *plane, const float *gn) {
    const int64_t C = r->p->C;
    const int scale = r->p->interp != GRADREF_INTERP_NEAREST;
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

TARGET static void dx_plane_avx2(const gs3d_run *r, const gs3d_record_f *rec, int64_t count,
                                 float *plane, const float *gn) {
    const int64_t C = r->p->C;
    const int scale = r->p->interp != GRADREF_INTERP_NEAREST;
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

int gradref__gs3d_dx_plane_f32(const gs3d_run *r, const gs3d_record_f *rec, int64_t count,
                               float *plane, const float *gn) {
    if (r->as[1] != 1 || r->gs[1] != 1) return 0;
    int level = gradref__gs3d_simd_available();
    if (level == 2)
        dx_plane_512(r, rec, count, plane, gn);
    else if (level == 1)
        dx_plane_avx2(r, rec, count, plane, gn);
    return level > 0;
}

#else
typedef int gradref__gs3d_simd_unused;
#endif
