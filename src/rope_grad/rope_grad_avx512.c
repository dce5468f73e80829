/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad's AVX-512 row kernels: 16 lanes for F32 and F16 rows (half the instructions per
 * byte); BF16 rows and the tails go to the AVX2 kernels. */
#include "rope_grad_avx2.h"

#ifdef GRADREF_X86

GRADREF_TARGET_AVX512 static inline __m512 load16(int32_t dt, const void *p) {
    if (dt == GRADREF_F32) return _mm512_loadu_ps((const float *)p);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

GRADREF_TARGET_AVX512 static inline void store16(int32_t dt, void *p, __m512 v, int stream) {
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

GRADREF_TARGET_AVX512 static void gradref__rope_atb_row_avx512(int32_t dt, const void *g, void *out,
                                                               const float *w, int64_t n,
                                                               int stream) {
    const size_t es = gradref__rope_esize(dt);
    stream = stream && gradref__rope_aligned16(out);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        prefetch((const char *)g + i * es);
        __m512 prod = _mm512_mul_ps(load16(dt, (const char *)g + i * es), _mm512_loadu_ps(w + i));
        store16(dt, (char *)out + i * es, prod, stream);
    }
    if (i < n)
        gradref__rope_atb_row_avx2(dt, (const char *)g + i * es, (char *)out + i * es, w + i, n - i,
                                   stream);
}

/* F32 rows write the front half's outputs and then the back half's (the output row in order,
 * the inputs in L1 for the second pass); F16 rows, half as wide, both in one pass: measured
 * the faster order for each (docs/performance.md). */
GRADREF_TARGET_AVX512 static void
gradref__rope_half_row_avx512(int32_t dt, const void *gf, const void *gb, void *out_f, void *out_b,
                              const float *cf, const float *sb, const float *cb, const float *sf,
                              int64_t n, int stream) {
    const size_t es = gradref__rope_esize(dt);
    stream = stream && gradref__rope_aligned16(out_f) && gradref__rope_aligned16(out_b);
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
        gradref__rope_half_row_avx2(dt, (const char *)gf + i * es, (const char *)gb + i * es,
                                    (char *)out_f + i * es, (char *)out_b + i * es, cf + i, sb + i,
                                    cb + i, sf + i, n - i, stream);
}

/* All `heads` heads of one token row (head h at in/out + h * head_dim elements), half width
 * H = 16 * V, with the token's four weight half-rows held in registers across the heads. */
GRADREF_TARGET_AVX512 static inline __attribute__((always_inline)) void
half_heads(int V, int32_t dt, const char *in, char *out, int64_t heads, int64_t head_dim,
           const float *cf, const float *sb, const float *cb, const float *sf, int stream) {
    const size_t es = gradref__rope_esize(dt), row = (size_t)head_dim * es,
                 half = (size_t)(16 * V) * es;
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

GRADREF_TARGET_AVX512 static void
gradref__rope_half_heads_avx512(int32_t dt, const void *in, void *out, int64_t heads,
                                int64_t head_dim, const float *cf, const float *sb, const float *cb,
                                const float *sf, int64_t n, int stream) {
    stream = stream && gradref__rope_aligned16(out) &&
             (head_dim * (int64_t)gradref__rope_esize(dt)) % 16 == 0;
    const char *i = (const char *)in;
    char *o = (char *)out;
    switch (n / 16) {
    case 1: half_heads(1, dt, i, o, heads, head_dim, cf, sb, cb, sf, stream); break;
    case 2: half_heads(2, dt, i, o, heads, head_dim, cf, sb, cb, sf, stream); break;
    case 3: half_heads(3, dt, i, o, heads, head_dim, cf, sb, cb, sf, stream); break;
    default: half_heads(4, dt, i, o, heads, head_dim, cf, sb, cb, sf, stream); break;
    }
}

GRADREF_TARGET_AVX512 static void atb_row(int32_t dt, const void *g, void *out, const float *w,
                                          int64_t n, int stream) {
    if (dt == GRADREF_BF16)
        gradref__rope_atb_row_avx2(dt, g, out, w, n, stream);
    else
        gradref__rope_atb_row_avx512(dt, g, out, w, n, stream);
}

GRADREF_TARGET_AVX512 static void half_row(int32_t dt, const void *gf, const void *gb, void *out_f,
                                           void *out_b, const float *cf, const float *sb,
                                           const float *cb, const float *sf, int64_t n,
                                           int stream) {
    if (dt == GRADREF_BF16)
        gradref__rope_half_row_avx2(dt, gf, gb, out_f, out_b, cf, sb, cb, sf, n, stream);
    else
        gradref__rope_half_row_avx512(dt, gf, gb, out_f, out_b, cf, sb, cb, sf, n, stream);
}

const gradref__rope_kernels gradref__rope_kernels_avx512 = {"avx512", atb_row, half_row,
                                                            gradref__rope_half_heads_avx512,
                                                            gradref__rope_interleaved_row_avx2};

#else
typedef int gradref__rope_avx512_unused;
#endif
