/* SPDX-License-Identifier: Apache-2.0 */
#include "rope_grad_simd.h"

#ifdef GRADREF_ROPE_SIMD

#  include <immintrin.h>
#  include <string.h>

#  include "common/convert.h"
#  include "common/cpu.h"
#  include "gradref.h"

#  define TARGET __attribute__((target("avx2,f16c")))

/* ---- 8-lane loads and stores of each dtype ---- */

TARGET static inline __m256 load8(int32_t dt, const void *p) {
    if (dt == GRADREF_F32) return _mm256_loadu_ps((const float *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (dt == GRADREF_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* f32 -> bf16 bits, round to nearest even, NaN kept NaN (as gradref__f32_to_bf16). */
TARGET static inline __m128i to_bf16(__m256 v) {
    __m256i x = _mm256_castps_si256(v);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i payload_lost =
        _mm256_cmpeq_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(0x7f)), _mm256_setzero_si256());
    __m256i nan = _mm256_or_si256(hi, _mm256_and_si256(payload_lost, _mm256_set1_epi32(0x40)));
    __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
    r = _mm256_packus_epi32(r, r); /* per 128-bit lane: [a0..a3 a0..a3 | a4..a7 a4..a7] */
    r = _mm256_permute4x64_epi64(r, 0x08);
    return _mm256_castsi256_si128(r);
}

/* Inputs are read this far ahead with software prefetches: the hardware prefetcher alone leaves
 * a read-compute-stream loop well short of copy bandwidth. */
#  define PREFETCH_BYTES 2048

static inline void prefetch(const void *p) {
    _mm_prefetch((const char *)p + PREFETCH_BYTES, _MM_HINT_T0);
}

TARGET static inline void store8(int32_t dt, void *p, __m256 v, int stream) {
    if (dt == GRADREF_F32) {
        if (stream && ((uintptr_t)p & 31u) == 0) {
            _mm256_stream_ps((float *)p, v);
        } else if (stream) {
            _mm_stream_ps((float *)p, _mm256_castps256_ps128(v));
            _mm_stream_ps((float *)p + 4, _mm256_extractf128_ps(v, 1));
        } else {
            _mm256_storeu_ps((float *)p, v);
        }
        return;
    }
    __m128i h = dt == GRADREF_F16 ? _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : to_bf16(v);
    if (stream)
        _mm_stream_si128((__m128i *)p, h);
    else
        _mm_storeu_si128((__m128i *)p, h);
}

static inline size_t esize(int32_t dt) {
    return dt == GRADREF_F32 ? 4 : 2;
}

static inline float load1(int32_t dt, const void *p, int64_t i) {
    if (dt == GRADREF_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == GRADREF_F16 ? gradref__f16_to_f32(h) : gradref__bf16_to_f32(h);
}

static inline void store1(int32_t dt, void *p, int64_t i, float v) {
    if (dt == GRADREF_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dt == GRADREF_F16 ? gradref__f32_to_f16(v) : gradref__f32_to_bf16(v);
}

static inline int aligned16(const void *p) {
    return ((uintptr_t)p & 15u) == 0;
}

/* ---- ATB ---- */

/* The f32 product of two F16 or BF16 values is exact except when it lies below 2^-134 (its at
 * most 16 significant bits then reach under f32's 2^-149 grid), and there both the exact and
 * the f32 value round to zero in BF16; so rounding the f32 product once is exact ATB. */
TARGET void gradref__rope_atb_row(int32_t dt, const void *g, void *out, const float *w, int64_t n,
                                  int stream) {
    const size_t es = esize(dt);
    stream = stream && aligned16(out);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        prefetch((const char *)g + i * es);
        __m256 prod = _mm256_mul_ps(load8(dt, (const char *)g + i * es), _mm256_loadu_ps(w + i));
        store8(dt, (char *)out + i * es, prod, stream);
    }
    for (; i < n; i++)
        store1(dt, out, i, load1(dt, g, i) * w[i]);
}

/* ---- rotate_half ---- */

TARGET void gradref__rope_half_row(int32_t dt, const void *gf, const void *gb, void *out_f,
                                   void *out_b, const float *cf, const float *sb, const float *cb,
                                   const float *sf, int64_t n, int stream) {
    const size_t es = esize(dt);
    stream = stream && aligned16(out_f) && aligned16(out_b);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        prefetch((const char *)gf + i * es);
        prefetch((const char *)gb + i * es);
        __m256 f = load8(dt, (const char *)gf + i * es), b = load8(dt, (const char *)gb + i * es);
        __m256 front = _mm256_mul_ps(_mm256_loadu_ps(cf + i), f);
        __m256 front_partner = _mm256_mul_ps(_mm256_loadu_ps(sb + i), b);
        __m256 back = _mm256_mul_ps(_mm256_loadu_ps(cb + i), b);
        __m256 back_partner = _mm256_mul_ps(_mm256_loadu_ps(sf + i), f);
        store8(dt, (char *)out_f + i * es, _mm256_add_ps(front, front_partner), stream);
        store8(dt, (char *)out_b + i * es, _mm256_sub_ps(back, back_partner), stream);
    }
    for (; i < n; i++) {
        float f = load1(dt, gf, i), b = load1(dt, gb, i);
        float front = cf[i] * f, front_partner = sb[i] * b;
        float back = cb[i] * b, back_partner = sf[i] * f;
        store1(dt, out_f, i, front + front_partner);
        store1(dt, out_b, i, back - back_partner);
    }
}

/* ---- AVX-512 (F32 and F16 rows): 16 lanes, half the instructions per byte ---- */

#  define TARGET512 __attribute__((target("avx512f,avx2,f16c")))

int gradref__rope_simd_level(void) {
    if (!gradref__cpu_has_avx2_f16c()) return 0;
    return gradref__cpu_has_avx512() ? 2 : 1;
}

TARGET512 static inline __m512 load16(int32_t dt, const void *p) {
    if (dt == GRADREF_F32) return _mm512_loadu_ps((const float *)p);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

TARGET512 static inline void store16(int32_t dt, void *p, __m512 v, int stream) {
    if (dt == GRADREF_F32) {
        if (stream && ((uintptr_t)p & 63u) == 0) {
            _mm512_stream_ps((float *)p, v);
        } else if (stream) {
            store8(dt, p, _mm512_castps512_ps256(v), 1);
            store8(dt, (float *)p + 8,
                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), 1);
        } else {
            _mm512_storeu_ps((float *)p, v);
        }
        return;
    }
    __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    if (stream && ((uintptr_t)p & 31u) == 0) {
        _mm256_stream_si256((__m256i *)p, h);
    } else if (stream) {
        _mm_stream_si128((__m128i *)p, _mm256_castsi256_si128(h));
        _mm_stream_si128((__m128i *)p + 1, _mm256_extracti128_si256(h, 1));
    } else {
        _mm256_storeu_si256((__m256i *)p, h);
    }
}

TARGET512 void gradref__rope_atb_row_avx512(int32_t dt, const void *g, void *out, const float *w,
                                            int64_t n, int stream) {
    const size_t es = esize(dt);
    stream = stream && aligned16(out);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        prefetch((const char *)g + i * es);
        __m512 prod = _mm512_mul_ps(load16(dt, (const char *)g + i * es), _mm512_loadu_ps(w + i));
        store16(dt, (char *)out + i * es, prod, stream);
    }
    if (i < n)
        gradref__rope_atb_row(dt, (const char *)g + i * es, (char *)out + i * es, w + i, n - i,
                              stream);
}

/* F32 rows write the front half's outputs and then the back half's (the output row in order,
 * the inputs in L1 for the second pass); F16 rows, half as wide, both in one pass: measured
 * the faster order for each (docs/performance.md). */
TARGET512 void gradref__rope_half_row_avx512(int32_t dt, const void *gf, const void *gb,
                                             void *out_f, void *out_b, const float *cf,
                                             const float *sb, const float *cb, const float *sf,
                                             int64_t n, int stream) {
    const size_t es = esize(dt);
    stream = stream && aligned16(out_f) && aligned16(out_b);
    const int two_pass = dt == GRADREF_F32;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        prefetch((const char *)gf + i * es);
        prefetch((const char *)gb + i * es);
        __m512 f = load16(dt, (const char *)gf + i * es), b = load16(dt, (const char *)gb + i * es);
        __m512 front = _mm512_mul_ps(_mm512_loadu_ps(cf + i), f);
        __m512 front_partner = _mm512_mul_ps(_mm512_loadu_ps(sb + i), b);
        store16(dt, (char *)out_f + i * es, _mm512_add_ps(front, front_partner), stream);
        if (two_pass) continue;
        __m512 back = _mm512_mul_ps(_mm512_loadu_ps(cb + i), b);
        __m512 back_partner = _mm512_mul_ps(_mm512_loadu_ps(sf + i), f);
        store16(dt, (char *)out_b + i * es, _mm512_sub_ps(back, back_partner), stream);
    }
    for (int64_t k = 0; two_pass && k < i; k += 16) {
        __m512 f = load16(dt, (const char *)gf + k * es), b = load16(dt, (const char *)gb + k * es);
        __m512 back = _mm512_mul_ps(_mm512_loadu_ps(cb + k), b);
        __m512 back_partner = _mm512_mul_ps(_mm512_loadu_ps(sf + k), f);
        store16(dt, (char *)out_b + k * es, _mm512_sub_ps(back, back_partner), stream);
    }
    if (i < n)
        gradref__rope_half_row(dt, (const char *)gf + i * es, (const char *)gb + i * es,
                               (char *)out_f + i * es, (char *)out_b + i * es, cf + i, sb + i,
                               cb + i, sf + i, n - i, stream);
}

/* All `heads` heads of one token row (head h at in/out + h * head_dim elements), half width
 * H = 16 * V, with the token's four weight half-rows held in registers across the heads. */
TARGET512 static inline __attribute__((always_inline)) void
half_heads(int V, int32_t dt, const char *in, char *out, int64_t heads, int64_t head_dim,
           const float *cf, const float *sb, const float *cb, const float *sf, int stream) {
    const size_t es = esize(dt), row = (size_t)head_dim * es, half = (size_t)(16 * V) * es;
    __m512 wcf[4], wsb[4], wcb[4], wsf[4];
    for (int v = 0; v < V; v++) {
        wcf[v] = _mm512_loadu_ps(cf + 16 * v), wsb[v] = _mm512_loadu_ps(sb + 16 * v);
        wcb[v] = _mm512_loadu_ps(cb + 16 * v), wsf[v] = _mm512_loadu_ps(sf + 16 * v);
    }
    for (int64_t h = 0; h < heads; h++, in += row, out += row) {
        for (size_t line = 0; line < 2 * half; line += 64)
            prefetch(in + line);
        __m512 f[4], b[4];
        for (int v = 0; v < V; v++) {
            f[v] = load16(dt, in + (size_t)(16 * v) * es);
            b[v] = load16(dt, in + half + (size_t)(16 * v) * es);
        }
        for (int v = 0; v < V; v++) /* the output row in order */
            store16(dt, out + (size_t)(16 * v) * es,
                    _mm512_add_ps(_mm512_mul_ps(wcf[v], f[v]), _mm512_mul_ps(wsb[v], b[v])),
                    stream);
        for (int v = 0; v < V; v++)
            store16(dt, out + half + (size_t)(16 * v) * es,
                    _mm512_sub_ps(_mm512_mul_ps(wcb[v], b[v]), _mm512_mul_ps(wsf[v], f[v])),
                    stream);
    }
}

TARGET512 void gradref__rope_half_heads_avx512(int32_t dt, const void *in, void *out, int64_t heads,
                                               int64_t head_dim, const float *cf, const float *sb,
                                               const float *cb, const float *sf, int64_t n,
                                               int stream) {
    stream = stream && aligned16(out) && (head_dim * (int64_t)esize(dt)) % 16 == 0;
    const char *i = (const char *)in;
    char *o = (char *)out;
    switch (n / 16) {
    case 1: half_heads(1, dt, i, o, heads, head_dim, cf, sb, cb, sf, stream); break;
    case 2: half_heads(2, dt, i, o, heads, head_dim, cf, sb, cb, sf, stream); break;
    case 3: half_heads(3, dt, i, o, heads, head_dim, cf, sb, cb, sf, stream); break;
    default: half_heads(4, dt, i, o, heads, head_dim, cf, sb, cb, sf, stream); break;
    }
}

/* ---- interleaved ---- */

TARGET void gradref__rope_interleaved_row(int32_t dt, const void *g, void *out, const float *c,
                                          const float *s, int64_t n, int stream) {
    const size_t es = esize(dt);
    stream = stream && aligned16(out);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        prefetch((const char *)g + i * es);
        __m256 gv = load8(dt, (const char *)g + i * es);
        __m256 partner_g = _mm256_permute_ps(gv, 0xb1); /* swap each pair */
        __m256 partner_s = _mm256_permute_ps(_mm256_loadu_ps(s + i), 0xb1);
        __m256 own = _mm256_mul_ps(_mm256_loadu_ps(c + i), gv);
        __m256 cross = _mm256_mul_ps(partner_s, partner_g);
        /* even lanes own + cross, odd lanes own - cross */
        __m256 r = _mm256_blend_ps(_mm256_add_ps(own, cross), _mm256_sub_ps(own, cross), 0xaa);
        store8(dt, (char *)out + i * es, r, stream);
    }
    for (; i < n; i += 2) {
        float g0 = load1(dt, g, i), g1 = load1(dt, g, i + 1);
        float even = c[i] * g0, even_partner = s[i + 1] * g1;
        float odd = c[i + 1] * g1, odd_partner = s[i] * g0;
        store1(dt, out, i, even + even_partner);
        store1(dt, out, i + 1, odd - odd_partner);
    }
}

#endif
