/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad's AVX-512 row kernels: 16 lanes for F32, F16 and BF16 rows (half the instructions
 * per byte); the tails go to the AVX2 kernels. Two level files instance them:
 * rope_grad_avx512.c (GRADREF__ROPE_BF16_BY_HW 0) and rope_grad_avx512_bf16.c (1: BF16 stores
 * by AVX512_BF16's conversion instruction, that file compiled for the extension), each naming
 * its table GRADREF__ROPE_AVX512_TABLE with isa GRADREF__ROPE_AVX512_ISA. */
#ifndef GRADREF_ROPE_GRAD_AVX512_H
#define GRADREF_ROPE_GRAD_AVX512_H

#include "rope_grad_avx2.h"

#ifdef GRADREF__X86

/* The AVX-512 level includes DQ (its fpclass finds the lanes VCVTNEPS2BF16 would get wrong). */

static inline __m512 load16(int32_t dt, const void *p) {
    if (dt == GRADREF_F32) return _mm512_loadu_ps((const float *)p);
    const __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (dt == GRADREF_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* v with every NaN lane the canonical quiet NaN 0x7fc00000 (the NaN rule, common/nan.h). */
static inline __m512 canon16(__m512 v) {
    return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                              _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
}

/* f32 -> bf16 bits rounded to nearest even, in the low halves of the 32-bit lanes, a NaN made
 * canonical first (the short rounding is then exact for it too). */
static inline __m512i round_bf16_16(__m512 v) {
    const __m512i x = _mm512_castps_si512(canon16(v));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    return _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)),
                             16);
}

/* f32 -> bf16 bits as to_bf16 (rope_grad_avx2.h), 16 lanes: round to nearest even, a NaN stays
 * NaN (its quiet bit set when the kept payload would read as infinity). Integer operations, so
 * subnormals round exactly (the BF16 conversion instructions flush them). */
static inline __m256i to_bf16_16(__m512 v) {
    const __m512i x = _mm512_castps_si512(v), hi = _mm512_srli_epi32(x, 16);
    const __m512i rounded = round_bf16_16(v);
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __mmask16 payload_lost = _mm512_testn_epi32_mask(hi, _mm512_set1_epi32(0x7f));
    const __m512i nan = _mm512_mask_or_epi32(hi, payload_lost, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, nan));
}

/* A store dtype of this file only: BF16 rounded without the NaN handling (store16s). */
#  define BF16_NO_NAN 0x101

/* A store dtype of the AVX512_BF16 instance only: BF16 rounded by VCVTNEPS2BF16. The
 * instruction rounds to nearest even as to_bf16_16 does, but flushes subnormal inputs to zero,
 * so store16s checks each group of vectors and one holding a subnormal takes to_bf16_16 (or a
 * NaN: the two agree on the quiet NaNs arithmetic makes, and the same test covers both). The
 * AVX2 tails, which name only F32 and F16, take it as BF16. */
#  define BF16_BY_HW 0x100

#  if GRADREF__ROPE_BF16_BY_HW
static inline __m256i to_bf16_16_hw(__m512 v) {
    return (__m256i)_mm512_cvtneps_pbh(v);
}

/* dt, or BF16_BY_HW for BF16. */
static inline int32_t store_dtype(int32_t dt) {
    return dt == GRADREF_BF16 ? BF16_BY_HW : dt;
}

/* A kernel's dispatch arm for BF16_BY_HW (STMT its instances), ahead of the other dtypes'. */
#    define BF16_BY_HW_ARM(STMT)                                                                   \
      if (dt == BF16_BY_HW) {                                                                      \
        STMT                                                                                       \
      } else
#  else
/* never called: store_dtype never gives BF16_BY_HW in this instance */
static inline __m256i to_bf16_16_hw(__m512 v) {
    return to_bf16_16(v);
}

static inline int32_t store_dtype(int32_t dt) {
    return dt;
}

#    define BF16_BY_HW_ARM(STMT)
#  endif

static inline void store16(int32_t dt, void *p, __m512 v, int stream) {
    v = canon16(v); /* the NaN rule (common/nan.h) */
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
    __m256i h = dt == GRADREF_F16   ? _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)
                : dt == BF16_BY_HW  ? to_bf16_16_hw(v)
                : dt == BF16_NO_NAN ? _mm512_cvtepi32_epi16(round_bf16_16(v))
                                    : to_bf16_16(v);
    if (stream && ((uintptr_t)p & 31u) == 0) {
        _mm256_stream_si256((__m256i *)p, h);
    } else if (stream) {
        _mm_stream_si128((__m128i *)p, _mm256_castsi256_si128(h));
        _mm_stream_si128((__m128i *)p + 1, _mm256_extracti128_si256(h, 1));
    } else {
        _mm256_storeu_si256((__m256i *)p, h);
    }
}

/* V vectors to p, 16 elements apart. BF16 takes the short rounding, which is exact for every
 * result of rope (round_bf16_high_raw in rope_grad_avx2.h says why). BF16_BY_HW tests the group
 * once, not each vector (a test per vector costs more than the rare fallback saves): one holding
 * a subnormal or a NaN takes to_bf16_16. */
static inline __attribute__((always_inline)) void store16s(int V, int32_t dt, char *p,
                                                           const __m512 *v, int stream) {
    const size_t es = gradref__rope_esize(dt);
    if (dt == GRADREF_BF16) {
        dt = BF16_NO_NAN;
    } else if (dt == BF16_BY_HW) {
        __mmask16 special = 0; /* subnormals (0x20) and NaNs (0x81) */
        for (int k = 0; k < V; k++)
            special |= _mm512_fpclass_ps_mask(v[k], 0xa1);
        if (special) dt = GRADREF_BF16;
    }
    for (int k = 0; k < V; k++)
        store16(dt, p + (size_t)(16 * k) * es, v[k], stream);
}

static void gradref__rope_atb_row_avx512(int32_t dt, const void *g, void *out, const float *w,
                                         int64_t n, int stream) {
    const size_t es = gradref__rope_esize(dt);
    stream = stream && gradref__rope_aligned16(out);
    dt = store_dtype(dt);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        prefetch((const char *)g + i * es);
        __m512 prod = _mm512_mul_ps(load16(dt, (const char *)g + i * es), _mm512_loadu_ps(w + i));
        store16s(1, dt, (char *)out + i * es, &prod, stream);
    }
    if (i < n)
        gradref__rope_atb_row_avx2(dt, (const char *)g + i * es, (char *)out + i * es, w + i, n - i,
                                   stream);
}

/* F32 rows write the front half's outputs and then the back half's (the output row in order,
 * the inputs in L1 for the second pass); F16 rows, half as wide, both in one pass: measured
 * the faster order for each (docs/performance.md). */
static void gradref__rope_half_row_avx512(int32_t dt, const void *gf, const void *gb, void *out_f,
                                          void *out_b, const float *cf, const float *sb,
                                          const float *cb, const float *sf, int64_t n, int stream) {
    const size_t es = gradref__rope_esize(dt);
    stream = stream && gradref__rope_aligned16(out_f) && gradref__rope_aligned16(out_b);
    dt = store_dtype(dt);
    const int two_pass = dt == GRADREF_F32;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        prefetch((const char *)gf + i * es);
        prefetch((const char *)gb + i * es);
        __m512 f = load16(dt, (const char *)gf + i * es), b = load16(dt, (const char *)gb + i * es);
        __m512 front = _mm512_mul_ps(_mm512_loadu_ps(cf + i), f);
        __m512 front_partner = _mm512_mul_ps(_mm512_loadu_ps(sb + i), b);
        const __m512 out_front = _mm512_add_ps(front, front_partner);
        store16s(1, dt, (char *)out_f + i * es, &out_front, stream);
        if (two_pass) continue;
        __m512 back = _mm512_mul_ps(_mm512_loadu_ps(cb + i), b);
        __m512 back_partner = _mm512_mul_ps(_mm512_loadu_ps(sf + i), f);
        const __m512 out_back = _mm512_sub_ps(back, back_partner);
        store16s(1, dt, (char *)out_b + i * es, &out_back, stream);
    }
    for (int64_t k = 0; two_pass && k < i; k += 16) {
        __m512 f = load16(dt, (const char *)gf + k * es), b = load16(dt, (const char *)gb + k * es);
        __m512 back = _mm512_mul_ps(_mm512_loadu_ps(cb + k), b);
        __m512 back_partner = _mm512_mul_ps(_mm512_loadu_ps(sf + k), f);
        const __m512 out_back = _mm512_sub_ps(back, back_partner);
        store16s(1, dt, (char *)out_b + k * es, &out_back, stream);
    }
    if (i < n)
        gradref__rope_half_row_avx2(dt, (const char *)gf + i * es, (const char *)gb + i * es,
                                    (char *)out_f + i * es, (char *)out_b + i * es, cf + i, sb + i,
                                    cb + i, sf + i, n - i, stream);
}

/* All `heads` heads of one token row (head h at in/out + h * head_dim elements), half width
 * H = 16 * V, with the token's four weight half-rows held in registers across the heads; dt a
 * constant in each instance. */
static inline __attribute__((always_inline)) void
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
        __m512 r[4];
        for (int v = 0; v < V; v++) /* the output row in order */
            r[v] = _mm512_add_ps(_mm512_mul_ps(wcf[v], f[v]), _mm512_mul_ps(wsb[v], b[v]));
        store16s(V, dt, out, r, stream);
        for (int v = 0; v < V; v++)
            r[v] = _mm512_sub_ps(_mm512_mul_ps(wcb[v], b[v]), _mm512_mul_ps(wsf[v], f[v]));
        store16s(V, dt, out + half, r, stream);
    }
}

static void gradref__rope_half_heads_avx512(int32_t dt, const void *in, void *out, int64_t heads,
                                            int64_t head_dim, const float *cf, const float *sb,
                                            const float *cb, const float *sf, int64_t n,
                                            int stream) {
    stream = gradref__rope_heads_stream(stream, out, head_dim, dt);
    dt = store_dtype(dt);
    const char *i = (const char *)in;
    char *o = (char *)out;
#  define HALF_CALL(V, DT) half_heads(V, DT, i, o, heads, head_dim, cf, sb, cb, sf, stream)
#  define HALF_BY_WIDTH(DT)                                                                        \
    switch (n / 16) {                                                                              \
    case 1: HALF_CALL(1, DT); break;                                                               \
    case 2: HALF_CALL(2, DT); break;                                                               \
    case 3: HALF_CALL(3, DT); break;                                                               \
    default: HALF_CALL(4, DT); break;                                                              \
    }
    BF16_BY_HW_ARM(HALF_BY_WIDTH(BF16_BY_HW))
    if (dt == GRADREF_BF16) {
        HALF_BY_WIDTH(GRADREF_BF16)
    } else if (dt == GRADREF_F16) {
        HALF_BY_WIDTH(GRADREF_F16)
    } else {
        HALF_BY_WIDTH(GRADREF_F32)
    }
#  undef HALF_BY_WIDTH
#  undef HALF_CALL
}

/* The interleaved adjoint as the AVX2 kernel computes it, 16 lanes: each pair's partner by an
 * in-lane swap, even lanes own + cross, odd lanes own - cross. */
static void gradref__rope_interleaved_row_avx512(int32_t dt, const void *g, void *out,
                                                 const float *c, const float *s, int64_t n,
                                                 int stream) {
    const size_t es = gradref__rope_esize(dt);
    stream = stream && gradref__rope_aligned16(out);
    dt = store_dtype(dt);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        prefetch((const char *)g + i * es);
        const __m512 gv = load16(dt, (const char *)g + i * es);
        const __m512 partner_g = _mm512_permute_ps(gv, 0xb1);
        const __m512 partner_s = _mm512_permute_ps(_mm512_loadu_ps(s + i), 0xb1);
        const __m512 own = _mm512_mul_ps(_mm512_loadu_ps(c + i), gv);
        const __m512 cross = _mm512_mul_ps(partner_s, partner_g);
        const __m512 r =
            _mm512_mask_blend_ps(0xaaaa, _mm512_add_ps(own, cross), _mm512_sub_ps(own, cross));
        store16s(1, dt, (char *)out + i * es, &r, stream);
    }
    if (i < n)
        gradref__rope_interleaved_row_avx2(dt, (const char *)g + i * es, (char *)out + i * es,
                                           c + i, s + i, n - i, stream);
}

/* All `heads` heads of one token row, V vectors of 16 ATB weights in registers, dt a constant
 * in each instance; atb_row's operations. */
static inline __attribute__((always_inline)) void atb_heads(int V, int32_t dt, const char *in,
                                                            char *out, int64_t heads,
                                                            int64_t head_dim, const float *w,
                                                            int stream) {
    const size_t es = gradref__rope_esize(dt), row = (size_t)head_dim * es;
    __m512 wv[8];
    for (int v = 0; v < V; v++)
        wv[v] = _mm512_loadu_ps(w + 16 * v);
    for (int64_t h = 0; h < heads; h++, in += row, out += row) {
        for (size_t line = 0; line < (size_t)(16 * V) * es; line += 64)
            prefetch(in + line);
        __m512 r[8];
        for (int v = 0; v < V; v++)
            r[v] = _mm512_mul_ps(load16(dt, in + (size_t)(16 * v) * es), wv[v]);
        store16s(V, dt, out, r, stream);
    }
}

/* CALL(V, DT) for n / 16 vectors (1 to 8) and the dtype dt, each a compiled instance. */
#  define BY_WIDTH(CALL, DT)                                                                       \
    switch (n / 16) {                                                                              \
    case 1: CALL(1, DT); break;                                                                    \
    case 2: CALL(2, DT); break;                                                                    \
    case 3: CALL(3, DT); break;                                                                    \
    case 4: CALL(4, DT); break;                                                                    \
    case 5: CALL(5, DT); break;                                                                    \
    case 6: CALL(6, DT); break;                                                                    \
    case 7: CALL(7, DT); break;                                                                    \
    default: CALL(8, DT); break;                                                                   \
    }
#  define BY_WIDTH_AND_DTYPE(CALL)                                                                 \
    BF16_BY_HW_ARM(BY_WIDTH(CALL, BF16_BY_HW))                                                     \
    if (dt == GRADREF_BF16) {                                                                      \
      BY_WIDTH(CALL, GRADREF_BF16)                                                                 \
    } else if (dt == GRADREF_F16) {                                                                \
      BY_WIDTH(CALL, GRADREF_F16)                                                                  \
    } else {                                                                                       \
      BY_WIDTH(CALL, GRADREF_F32)                                                                  \
    }

static void gradref__rope_atb_heads_avx512(int32_t dt, const void *in, void *out, int64_t heads,
                                           int64_t head_dim, const float *w, int64_t n,
                                           int stream) {
    stream = gradref__rope_heads_stream(stream, out, head_dim, dt);
    dt = store_dtype(dt);
    const char *i = (const char *)in;
    char *o = (char *)out;
#  define ATB_CALL(V, DT) atb_heads(V, DT, i, o, heads, head_dim, w, stream)
    BY_WIDTH_AND_DTYPE(ATB_CALL)
#  undef ATB_CALL
}

/* All `heads` heads of one token row (head h at in/out + h * head_dim elements), V vectors of
 * 16, with c and the pair-swapped s held in registers across the heads; dt a constant in each
 * instance, so the loads, the rounding and the stores carry no dtype test. The operations are
 * interleaved_row's. */
static inline __attribute__((always_inline)) void
interleaved_heads(int V, int32_t dt, const char *in, char *out, int64_t heads, int64_t head_dim,
                  const float *c, const float *s, int stream) {
    const size_t es = gradref__rope_esize(dt), row = (size_t)head_dim * es;
    __m512 wc[8], ws[8];
    for (int v = 0; v < V; v++) {
        wc[v] = _mm512_loadu_ps(c + 16 * v);
        ws[v] = _mm512_permute_ps(_mm512_loadu_ps(s + 16 * v), 0xb1);
    }
    for (int64_t h = 0; h < heads; h++, in += row, out += row) {
        for (size_t line = 0; line < (size_t)(16 * V) * es; line += 64)
            prefetch(in + line);
        __m512 r[8];
        for (int v = 0; v < V; v++) {
            const __m512 gv = load16(dt, in + (size_t)(16 * v) * es);
            const __m512 own = _mm512_mul_ps(wc[v], gv);
            const __m512 cross = _mm512_mul_ps(ws[v], _mm512_permute_ps(gv, 0xb1));
            r[v] =
                _mm512_mask_blend_ps(0xaaaa, _mm512_add_ps(own, cross), _mm512_sub_ps(own, cross));
        }
        store16s(V, dt, out, r, stream);
    }
}

/* round_bf16_high (rope_grad_avx2.h), 16 lanes. */
static inline __m512i round_bf16_high16(__m512 v) {
    const __m512i x = _mm512_castps_si512(canon16(v));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
}

/* interleaved_heads for BF16 as the AVX2 kernel does it (pairs_heads there): each
 * 32-bit lane one pair, 16 pairs a vector, W vectors (n = 32 W) of each of the four per-pair
 * weights in registers across the heads. Its rounding is integer, so it needs neither
 * AVX512_BF16 nor the subnormal test that instruction's flushing asks for. */
static inline __attribute__((always_inline)) void
interleaved_bf16_heads(int W, const char *in, char *out, int64_t heads, int64_t head_dim,
                       const float *c, const float *s, int stream) {
    const size_t row = (size_t)head_dim * 2;
    const __m512i even_of =
                      _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0),
                  odd_of = _mm512_add_epi32(even_of, _mm512_set1_epi32(1));
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    __m512 c_even[4], c_odd[4], s_even[4], s_odd[4];
    for (int v = 0; v < W; v++) {
        const __m512 c0 = _mm512_loadu_ps(c + 32 * v), c1 = _mm512_loadu_ps(c + 32 * v + 16);
        const __m512 s0 = _mm512_loadu_ps(s + 32 * v), s1 = _mm512_loadu_ps(s + 32 * v + 16);
        c_even[v] = _mm512_permutex2var_ps(c0, even_of, c1);
        c_odd[v] = _mm512_permutex2var_ps(c0, odd_of, c1);
        s_even[v] = _mm512_permutex2var_ps(s0, even_of, s1);
        s_odd[v] = _mm512_permutex2var_ps(s0, odd_of, s1);
    }
    const int stream64 = stream && ((uintptr_t)out & 63u) == 0 && row % 64 == 0;
    for (int64_t h = 0; h < heads; h++, in += row, out += row) {
        for (size_t line = 0; line < (size_t)(64 * W); line += 64)
            prefetch(in + line);
        for (int v = 0; v < W; v++) {
            const __m512i pairs = _mm512_loadu_si512((const void *)(in + 64 * v));
            const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16));
            const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(pairs, high));
            const __m512 r_even =
                _mm512_add_ps(_mm512_mul_ps(c_even[v], even), _mm512_mul_ps(s_odd[v], odd));
            const __m512 r_odd =
                _mm512_sub_ps(_mm512_mul_ps(c_odd[v], odd), _mm512_mul_ps(s_even[v], even));
            /* high ? odd's rounded bits : even's shifted down */
            const __m512i r =
                _mm512_ternarylogic_epi32(high, round_bf16_high16(r_odd),
                                          _mm512_srli_epi32(round_bf16_high16(r_even), 16), 0xca);
            char *dst = out + 64 * v;
            if (stream64) {
                _mm512_stream_si512((void *)dst, r);
            } else if (stream) {
                _mm_stream_si128((__m128i *)dst, _mm512_extracti32x4_epi32(r, 0));
                _mm_stream_si128((__m128i *)dst + 1, _mm512_extracti32x4_epi32(r, 1));
                _mm_stream_si128((__m128i *)dst + 2, _mm512_extracti32x4_epi32(r, 2));
                _mm_stream_si128((__m128i *)dst + 3, _mm512_extracti32x4_epi32(r, 3));
            } else {
                _mm512_storeu_si512((void *)dst, r);
            }
        }
    }
}

static void gradref__rope_interleaved_heads_avx512(int32_t dt, const void *in, void *out,
                                                   int64_t heads, int64_t head_dim, const float *c,
                                                   const float *s, int64_t n, int stream) {
    stream = gradref__rope_heads_stream(stream, out, head_dim, dt);
    if (dt == GRADREF_BF16 && n % 32 == 0) {
        const char *i = (const char *)in;
        char *o = (char *)out;
#  define BF16_CALL(W) interleaved_bf16_heads(W, i, o, heads, head_dim, c, s, stream)
        switch (n / 32) {
        case 1: BF16_CALL(1); break;
        case 2: BF16_CALL(2); break;
        case 3: BF16_CALL(3); break;
        default: BF16_CALL(4); break;
        }
#  undef BF16_CALL
        return;
    }
    dt = store_dtype(dt);
    const char *i = (const char *)in;
    char *o = (char *)out;
#  define INTERLEAVED_CALL(V, DT) interleaved_heads(V, DT, i, o, heads, head_dim, c, s, stream)
    BY_WIDTH_AND_DTYPE(INTERLEAVED_CALL)
#  undef INTERLEAVED_CALL
}
#  undef BY_WIDTH_AND_DTYPE
#  undef BY_WIDTH

const gradref__rope_kernels GRADREF__ROPE_AVX512_TABLE = {
    .isa = GRADREF__ROPE_AVX512_ISA,
    .atb_row = gradref__rope_atb_row_avx512,
    .half_row = gradref__rope_half_row_avx512,
    .half_heads = gradref__rope_half_heads_avx512,
    .interleaved_row = gradref__rope_interleaved_row_avx512,
    .atb_heads = gradref__rope_atb_heads_avx512,
    .interleaved_heads = gradref__rope_interleaved_heads_avx512,
};

#endif

#endif
