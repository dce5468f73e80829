/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad's AVX2 + F16C row kernels: 8 lanes, F32, F16 and BF16 rows. */
#include "rope_grad_avx2.h"

#ifdef GRADREF__X86

/* ---- ATB ---- */

/* The f32 product of two F16 or BF16 values is exact except when it lies below 2^-134 (its at
 * most 16 significant bits then reach under f32's 2^-149 grid), and there both the exact and
 * the f32 value round to zero in BF16; so rounding the f32 product once is exact ATB. */
void gradref__rope_atb_row_avx2(int32_t dt, const void *g, void *out, const float *w, int64_t n,
                                int stream) {
    const size_t es = gradref__rope_esize(dt);
    stream = stream && gradref__rope_aligned16(out);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        prefetch((const char *)g + i * es);
        __m256 prod = _mm256_mul_ps(load8(dt, (const char *)g + i * es), _mm256_loadu_ps(w + i));
        store8(dt, (char *)out + i * es, prod, stream);
    }
    for (; i < n; i++)
        gradref__rope_store1(dt, out, i, gradref__rope_load1(dt, g, i) * w[i]);
}

/* ---- rotate_half ---- */

void gradref__rope_half_row_avx2(int32_t dt, const void *gf, const void *gb, void *out_f,
                                 void *out_b, const float *cf, const float *sb, const float *cb,
                                 const float *sf, int64_t n, int stream) {
    const size_t es = gradref__rope_esize(dt);
    stream = stream && gradref__rope_aligned16(out_f) && gradref__rope_aligned16(out_b);
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
        float f = gradref__rope_load1(dt, gf, i), b = gradref__rope_load1(dt, gb, i);
        float front = cf[i] * f, front_partner = sb[i] * b;
        float back = cb[i] * b, back_partner = sf[i] * f;
        gradref__rope_store1(dt, out_f, i, front + front_partner);
        gradref__rope_store1(dt, out_b, i, back - back_partner);
    }
}

/* ---- interleaved ---- */

void gradref__rope_interleaved_row_avx2(int32_t dt, const void *g, void *out, const float *c,
                                        const float *s, int64_t n, int stream) {
    const size_t es = gradref__rope_esize(dt);
    stream = stream && gradref__rope_aligned16(out);
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
        float g0 = gradref__rope_load1(dt, g, i), g1 = gradref__rope_load1(dt, g, i + 1);
        float even = c[i] * g0, even_partner = s[i + 1] * g1;
        float odd = c[i + 1] * g1, odd_partner = s[i] * g0;
        gradref__rope_store1(dt, out, i, even + even_partner);
        gradref__rope_store1(dt, out, i + 1, odd - odd_partner);
    }
}

/* ---- every head of a token row at once ---- */

/* The heads kernels with the dtype and `stream` as constants in each instance: the per-store
 * tests of both vanish from the loops. They store without the NaN rule and add every value
 * into a sum (store8_checked); when the sum meets a NaN (rare), the token's rows are stored
 * again under the rule, after a fence so that the second streamed stores land last. */
#  define BY_DTYPE_AND_STREAM(CALL)                                                                \
    do {                                                                                           \
      __m256 sum = _mm256_setzero_ps();                                                            \
      if (dt == GRADREF_BF16)                                                                      \
        stream ? CALL(GRADREF_BF16, 1, &sum) : CALL(GRADREF_BF16, 0, &sum);                        \
      else if (dt == GRADREF_F16)                                                                  \
        stream ? CALL(GRADREF_F16, 1, &sum) : CALL(GRADREF_F16, 0, &sum);                          \
      else                                                                                         \
        stream ? CALL(GRADREF_F32, 1, &sum) : CALL(GRADREF_F32, 0, &sum);                          \
      if (sum_has_nan(sum)) {                                                                      \
        if (stream) _mm_sfence();                                                                  \
        CALL(dt, stream, NULL);                                                                    \
      }                                                                                            \
    } while (0)

/* ---- BF16 pairs ----
 * The heads kernels' BF16 rows, 16 elements a vector: a 32-bit lane holds two neighbours, the
 * even element in its low half and the odd one in its high half. Their f32 values are the lane
 * shifted left 16 and the lane with its low half cleared, and two rounded results go back into
 * one lane the same way: no widening, packing or lane reordering. Every weight array is split
 * once per token into its even and odd elements. */

/* even[j] = w[2j], odd[j] = w[2j + 1] for 2j < n (n a multiple of 16). */
static inline void split_pairs(const float *w, int64_t n, float *even, float *odd) {
    for (int64_t i = 0; i < n; i += 16) {
        const __m256 v0 = _mm256_loadu_ps(w + i), v1 = _mm256_loadu_ps(w + i + 8);
        /* shuffle_ps takes the evens (odds) of each 128-bit lane; permute4x64 orders them */
        _mm256_storeu_ps(even + i / 2,
                         _mm256_castpd_ps(_mm256_permute4x64_pd(
                             _mm256_castps_pd(_mm256_shuffle_ps(v0, v1, 0x88)), 0xd8)));
        _mm256_storeu_ps(odd + i / 2,
                         _mm256_castpd_ps(_mm256_permute4x64_pd(
                             _mm256_castps_pd(_mm256_shuffle_ps(v0, v1, 0xdd)), 0xd8)));
    }
}

/* The 8 pairs at p: their even and odd elements as f32. */
static inline void load_pairs(const char *p, __m256 *even, __m256 *odd) {
    const __m256i pairs = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32((int)0xffff0000u)));
}

/* 8 pairs of results rounded to BF16 into p (stream: p 16-byte aligned); given `sum`, without
 * the NaN rule and the values added into *sum (store8_checked). */
static inline void store_pairs(char *p, __m256 even, __m256 odd, int stream, __m256 *sum) {
    __m256i r;
    if (sum) {
        *sum = _mm256_add_ps(*sum, _mm256_add_ps(even, odd));
        r = _mm256_blend_epi16(_mm256_srli_epi32(round_bf16_high_raw(even), 16),
                               round_bf16_high_raw(odd), 0xaa);
    } else {
        r = _mm256_blend_epi16(_mm256_srli_epi32(round_bf16_high(even), 16), round_bf16_high(odd),
                               0xaa);
    }
    if (stream) {
        _mm_stream_si128((__m128i *)p, _mm256_castsi256_si128(r));
        _mm_stream_si128((__m128i *)p + 1, _mm256_extracti128_si256(r, 1));
    } else {
        _mm256_storeu_si256((__m256i *)p, r);
    }
}

/* atb_heads8 (atb) or interleaved_heads8 for BF16 (n a multiple of 16) in pairs, which for
 * the interleaved mode are the rotation's own: even result c[2j] g0 + s[2j+1] g1, odd result
 * c[2j+1] g1 - s[2j] g0. ATB's weights are in c, s unused; atb is a constant in each instance. */
static inline __attribute__((always_inline)) void pairs_heads(int atb, const char *in, char *out,
                                                              int64_t heads, int64_t head_dim,
                                                              const float *c, const float *s,
                                                              int64_t n, int stream, __m256 *sum) {
    const size_t row = (size_t)head_dim * 2;
    float c_even[64], c_odd[64], s_even[64], s_odd[64];
    split_pairs(c, n, c_even, c_odd);
    if (!atb) split_pairs(s, n, s_even, s_odd);
    for (int64_t h = 0; h < heads; h++, in += row, out += row) {
        for (size_t line = 0; line < (size_t)n * 2; line += 64)
            prefetch(in + line);
        for (int64_t j = 0; j < n / 2; j += 8) {
            __m256 even, odd;
            load_pairs(in + 4 * j, &even, &odd);
            /* each product's operands in the reference's order: ATB's g w, the rotation's c g */
            const __m256 ce = _mm256_loadu_ps(c_even + j), co = _mm256_loadu_ps(c_odd + j);
            const __m256 own_even = atb ? _mm256_mul_ps(even, ce) : _mm256_mul_ps(ce, even);
            const __m256 own_odd = atb ? _mm256_mul_ps(odd, co) : _mm256_mul_ps(co, odd);
            if (atb)
                store_pairs(out + 4 * j, own_even, own_odd, stream, sum);
            else
                store_pairs(
                    out + 4 * j,
                    _mm256_add_ps(own_even, _mm256_mul_ps(_mm256_loadu_ps(s_odd + j), odd)),
                    _mm256_sub_ps(own_odd, _mm256_mul_ps(_mm256_loadu_ps(s_even + j), even)),
                    stream, sum);
        }
    }
}

/* atb_row over every head of a token row (heads head_dim elements apart), n a multiple of 8 up
 * to 128; dt a constant in each instance. */
static inline __attribute__((always_inline)) void atb_heads8(int32_t dt, const char *in, char *out,
                                                             int64_t heads, int64_t head_dim,
                                                             const float *w, int64_t n, int stream,
                                                             __m256 *sum) {
    if (dt == GRADREF_BF16 && n % 16 == 0) {
        pairs_heads(1, in, out, heads, head_dim, w, NULL, n, stream, sum);
        return;
    }
    const size_t es = gradref__rope_esize(dt), row = (size_t)head_dim * es;
    for (int64_t h = 0; h < heads; h++, in += row, out += row) {
        for (size_t line = 0; line < (size_t)n * es; line += 64)
            prefetch(in + line);
        int64_t i = 0;
        for (; i + 16 <= n; i += 16)
            store8x2_checked(
                dt, out + (size_t)i * es,
                _mm256_mul_ps(load8(dt, in + (size_t)i * es), _mm256_loadu_ps(w + i)),
                _mm256_mul_ps(load8(dt, in + (size_t)(i + 8) * es), _mm256_loadu_ps(w + i + 8)),
                stream, sum);
        for (; i < n; i += 8)
            store8_checked(dt, out + (size_t)i * es,
                           _mm256_mul_ps(load8(dt, in + (size_t)i * es), _mm256_loadu_ps(w + i)),
                           stream, sum);
    }
}

static void gradref__rope_atb_heads_avx2(int32_t dt, const void *in, void *out, int64_t heads,
                                         int64_t head_dim, const float *w, int64_t n, int stream) {
    stream = gradref__rope_heads_stream(stream, out, head_dim, dt);
#  define ATB_CALL(DT, S, SUM) atb_heads8(DT, in, out, heads, head_dim, w, n, S, SUM)
    BY_DTYPE_AND_STREAM(ATB_CALL);
#  undef ATB_CALL
}

/* Elements [i, i + 8) of one head's interleaved adjoint (s pair-swapped). */
static inline __m256 interleaved8(int32_t dt, const char *in, const float *c, const float *swapped,
                                  int64_t i) {
    const __m256 gv = load8(dt, in + (size_t)i * gradref__rope_esize(dt));
    const __m256 own = _mm256_mul_ps(_mm256_loadu_ps(c + i), gv);
    const __m256 cross = _mm256_mul_ps(_mm256_loadu_ps(swapped + i), _mm256_permute_ps(gv, 0xb1));
    return _mm256_blend_ps(_mm256_add_ps(own, cross), _mm256_sub_ps(own, cross), 0xaa);
}

/* interleaved_row over every head of a token row, s pair-swapped once for all heads. */
static inline __attribute__((always_inline)) void
interleaved_heads8(int32_t dt, const char *in, char *out, int64_t heads, int64_t head_dim,
                   const float *c, const float *s, int64_t n, int stream, __m256 *sum) {
    if (dt == GRADREF_BF16 && n % 16 == 0) {
        pairs_heads(0, in, out, heads, head_dim, c, s, n, stream, sum);
        return;
    }
    const size_t es = gradref__rope_esize(dt), row = (size_t)head_dim * es;
    float swapped[128];
    for (int64_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(swapped + i, _mm256_permute_ps(_mm256_loadu_ps(s + i), 0xb1));
    for (int64_t h = 0; h < heads; h++, in += row, out += row) {
        for (size_t line = 0; line < (size_t)n * es; line += 64)
            prefetch(in + line);
        int64_t i = 0;
        for (; i + 16 <= n; i += 16)
            store8x2_checked(dt, out + (size_t)i * es, interleaved8(dt, in, c, swapped, i),
                             interleaved8(dt, in, c, swapped, i + 8), stream, sum);
        for (; i < n; i += 8)
            store8_checked(dt, out + (size_t)i * es, interleaved8(dt, in, c, swapped, i), stream,
                           sum);
    }
}

static void gradref__rope_interleaved_heads_avx2(int32_t dt, const void *in, void *out,
                                                 int64_t heads, int64_t head_dim, const float *c,
                                                 const float *s, int64_t n, int stream) {
    stream = gradref__rope_heads_stream(stream, out, head_dim, dt);
#  define INTERLEAVED_CALL(DT, S, SUM)                                                             \
    interleaved_heads8(DT, in, out, heads, head_dim, c, s, n, S, SUM)
    BY_DTYPE_AND_STREAM(INTERLEAVED_CALL);
#  undef INTERLEAVED_CALL
}

/* half_heads8 for BF16 in pairs: the front half's pairs and the back half's at the same place
 * meet elementwise, as in half_row. */
static inline __attribute__((always_inline)) void
half_bf16_heads(const char *in, char *out, int64_t heads, int64_t head_dim, const float *cf,
                const float *sb, const float *cb, const float *sf, int64_t n, int stream,
                __m256 *sum) {
    const size_t row = (size_t)head_dim * 2, half = (size_t)n * 2;
    float w[4][2][32]; /* cf, sb, cb, sf: even, odd */
    split_pairs(cf, n, w[0][0], w[0][1]);
    split_pairs(sb, n, w[1][0], w[1][1]);
    split_pairs(cb, n, w[2][0], w[2][1]);
    split_pairs(sf, n, w[3][0], w[3][1]);
    for (int64_t h = 0; h < heads; h++, in += row, out += row) {
        for (size_t line = 0; line < 2 * half; line += 64)
            prefetch(in + line);
        for (int64_t j = 0; j < n / 2; j += 8) {
            __m256 f[2], b[2], front[2], back[2]; /* even, odd */
            load_pairs(in + 4 * j, &f[0], &f[1]);
            load_pairs(in + half + 4 * j, &b[0], &b[1]);
            for (int e = 0; e < 2; e++) {
                front[e] = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(w[0][e] + j), f[e]),
                                         _mm256_mul_ps(_mm256_loadu_ps(w[1][e] + j), b[e]));
                back[e] = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(w[2][e] + j), b[e]),
                                        _mm256_mul_ps(_mm256_loadu_ps(w[3][e] + j), f[e]));
            }
            store_pairs(out + 4 * j, front[0], front[1], stream, sum);
            store_pairs(out + half + 4 * j, back[0], back[1], stream, sum);
        }
    }
}

/* half_row over every head of a token row (half width n, a multiple of 16 up to 64): 16
 * elements of the front and the back half at a time, each input loaded and converted once
 * (the output in runs of 16 elements, front then back). */
static inline __attribute__((always_inline)) void
half_heads8(int32_t dt, const char *in, char *out, int64_t heads, int64_t head_dim, const float *cf,
            const float *sb, const float *cb, const float *sf, int64_t n, int stream, __m256 *sum) {
    if (dt == GRADREF_BF16) {
        half_bf16_heads(in, out, heads, head_dim, cf, sb, cb, sf, n, stream, sum);
        return;
    }
    const size_t es = gradref__rope_esize(dt), row = (size_t)head_dim * es, half = (size_t)n * es;
    for (int64_t h = 0; h < heads; h++, in += row, out += row) {
        for (size_t line = 0; line < 2 * half; line += 64)
            prefetch(in + line);
        for (int64_t i = 0; i < n; i += 16) {
            const size_t at = (size_t)i * es, at8 = (size_t)(i + 8) * es;
            const __m256 f0 = load8(dt, in + at), f1 = load8(dt, in + at8);
            const __m256 b0 = load8(dt, in + half + at), b1 = load8(dt, in + half + at8);
            store8x2_checked(dt, out + at,
                             _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(cf + i), f0),
                                           _mm256_mul_ps(_mm256_loadu_ps(sb + i), b0)),
                             _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(cf + i + 8), f1),
                                           _mm256_mul_ps(_mm256_loadu_ps(sb + i + 8), b1)),
                             stream, sum);
            store8x2_checked(dt, out + half + at,
                             _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(cb + i), b0),
                                           _mm256_mul_ps(_mm256_loadu_ps(sf + i), f0)),
                             _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(cb + i + 8), b1),
                                           _mm256_mul_ps(_mm256_loadu_ps(sf + i + 8), f1)),
                             stream, sum);
        }
    }
}

static void gradref__rope_half_heads_avx2(int32_t dt, const void *in, void *out, int64_t heads,
                                          int64_t head_dim, const float *cf, const float *sb,
                                          const float *cb, const float *sf, int64_t n, int stream) {
    stream = gradref__rope_heads_stream(stream, out, head_dim, dt);
#  define HALF_CALL(DT, S, SUM) half_heads8(DT, in, out, heads, head_dim, cf, sb, cb, sf, n, S, SUM)
    BY_DTYPE_AND_STREAM(HALF_CALL);
#  undef HALF_CALL
}

const gradref__rope_kernels gradref__rope_kernels_avx2 = {
    .isa = "avx2",
    .atb_row = gradref__rope_atb_row_avx2,
    .half_row = gradref__rope_half_row_avx2,
    .half_heads = gradref__rope_half_heads_avx2,
    .interleaved_row = gradref__rope_interleaved_row_avx2,
    .atb_heads = gradref__rope_atb_heads_avx2,
    .interleaved_heads = gradref__rope_interleaved_heads_avx2,
};

#else
typedef int gradref__rope_avx2_unused;
#endif
