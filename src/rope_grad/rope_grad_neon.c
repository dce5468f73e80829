/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad's NEON row kernels: 8 elements a step in two 4-lane halves, the reference loop's
 * operations in its order (products, then the sum or difference; no FMA), F16 through
 * FCVTL/FCVTN (round to nearest even under the default FPCR), BF16 widened by a shift and
 * rounded to nearest even in integers, each NaN made canonical before it is stored. AArch64 has
 * no streaming store intrinsic, so `stream` is not used. */
#include "common/isa.h"
#include "rope_grad_kernels.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>

static inline float32x4_t load4(int32_t dt, const void *p) {
    if (dt == GRADREF_F32) return vld1q_f32((const float *)p);
    const uint16x4_t h = vld1_u16((const uint16_t *)p);
    if (dt == GRADREF_F16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* v with every NaN lane the canonical quiet NaN (common/nan.h), then stored in dt: for BF16,
 * x + 0x7fff + lsb is gradref__f32_to_bf16 for every value but a NaN with low bits set, which
 * the canonical NaN is not. */
static inline void store4(int32_t dt, void *p, float32x4_t v) {
    const float32x4_t canon = vreinterpretq_f32_u32(vdupq_n_u32(GRADREF__CANON_NAN_F32));
    v = vbslq_f32(vceqq_f32(v, v), v, canon);
    if (dt == GRADREF_F32) {
        vst1q_f32((float *)p, v);
    } else if (dt == GRADREF_F16) {
        vst1_u16((uint16_t *)p, vreinterpret_u16_f16(vcvt_f16_f32(v)));
    } else {
        const uint32x4_t x = vreinterpretq_u32_f32(v);
        const uint32x4_t lsb = vandq_u32(vshrq_n_u32(x, 16), vdupq_n_u32(1));
        vst1_u16((uint16_t *)p, vshrn_n_u32(vaddq_u32(x, vaddq_u32(vdupq_n_u32(0x7fff), lsb)), 16));
    }
}

static inline const char *at(int32_t dt, const void *p, int64_t i) {
    return (const char *)p + (size_t)i * gradref__rope_esize(dt);
}

static void atb_row_neon(int32_t dt, const void *g, void *out, const float *w, int64_t n,
                         int stream) {
    (void)stream;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        store4(dt, (char *)at(dt, out, i), vmulq_f32(load4(dt, at(dt, g, i)), vld1q_f32(w + i)));
    for (; i < n; i++)
        gradref__rope_store1(dt, out, i, gradref__rope_load1(dt, g, i) * w[i]);
}

static void half_row_neon(int32_t dt, const void *gf, const void *gb, void *out_f, void *out_b,
                          const float *cf, const float *sb, const float *cb, const float *sf,
                          int64_t n, int stream) {
    (void)stream;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t f = load4(dt, at(dt, gf, i)), b = load4(dt, at(dt, gb, i));
        const float32x4_t front = vmulq_f32(vld1q_f32(cf + i), f);
        const float32x4_t front_partner = vmulq_f32(vld1q_f32(sb + i), b);
        const float32x4_t back = vmulq_f32(vld1q_f32(cb + i), b);
        const float32x4_t back_partner = vmulq_f32(vld1q_f32(sf + i), f);
        store4(dt, (char *)at(dt, out_f, i), vaddq_f32(front, front_partner));
        store4(dt, (char *)at(dt, out_b, i), vsubq_f32(back, back_partner));
    }
    for (; i < n; i++) {
        const float f = gradref__rope_load1(dt, gf, i), b = gradref__rope_load1(dt, gb, i);
        const float front = cf[i] * f, front_partner = sb[i] * b;
        const float back = cb[i] * b, back_partner = sf[i] * f;
        gradref__rope_store1(dt, out_f, i, front + front_partner);
        gradref__rope_store1(dt, out_b, i, back - back_partner);
    }
}

/* Pairs (i, i + 1) from an even i: the partner products come from the pair-swapped vectors
 * (REV64), and the odd lanes subtract theirs: a - b is a + (-b) exactly, so the partner's sign
 * is flipped there and one add serves both lanes. */
static void interleaved_row_neon(int32_t dt, const void *g, void *out, const float *c,
                                 const float *s, int64_t n, int stream) {
    (void)stream;
    static const uint32_t odd_sign[4] = {0, 0x80000000u, 0, 0x80000000u};
    const uint32x4_t flip = vld1q_u32(odd_sign);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t gv = load4(dt, at(dt, g, i));
        const float32x4_t own = vmulq_f32(vld1q_f32(c + i), gv);
        const float32x4_t partner = vmulq_f32(vrev64q_f32(vld1q_f32(s + i)), vrev64q_f32(gv));
        const float32x4_t signed_partner =
            vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(partner), flip));
        store4(dt, (char *)at(dt, out, i), vaddq_f32(own, signed_partner));
    }
    for (; i < n; i += 2) {
        const float g0 = gradref__rope_load1(dt, g, i), g1 = gradref__rope_load1(dt, g, i + 1);
        const float even = c[i] * g0, even_partner = s[i + 1] * g1;
        const float odd = c[i + 1] * g1, odd_partner = s[i] * g0;
        gradref__rope_store1(dt, out, i, even + even_partner);
        gradref__rope_store1(dt, out, i + 1, odd - odd_partner);
    }
}

/* ---- every head of a token row at once ----
 * The heads kernels take the dtype as a constant in each instance (its tests leave the loops),
 * 8 elements a step as their even and odd elements: BF16 as the pairs of a 32-bit lane (the even
 * element in its low half: its f32 value is the lane shifted left 16, the odd one's the lane with
 * its low half cleared, and SRI puts two rounded results back in one lane), F16 and F32 through
 * LD2/ST2. The weights are split into their even and odd elements once per token. */

#  define BY_DTYPE(CALL)                                                                           \
    do {                                                                                           \
      if (dt == GRADREF_BF16)                                                                      \
        CALL(GRADREF_BF16);                                                                        \
      else if (dt == GRADREF_F16)                                                                  \
        CALL(GRADREF_F16);                                                                         \
      else                                                                                         \
        CALL(GRADREF_F32);                                                                         \
    } while (0)

/* even[j] = w[2j], odd[j] = w[2j + 1] for 2j < n (n a multiple of 8). */
static inline void split_weights(const float *w, int64_t n, float *even, float *odd) {
    for (int64_t i = 0; i < n; i += 8) {
        const float32x4x2_t v = vld2q_f32(w + i);
        vst1q_f32(even + i / 2, v.val[0]);
        vst1q_f32(odd + i / 2, v.val[1]);
    }
}

static inline float32x4_t canon4(float32x4_t v) {
    const float32x4_t canon = vreinterpretq_f32_u32(vdupq_n_u32(GRADREF__CANON_NAN_F32));
    return vbslq_f32(vceqq_f32(v, v), v, canon);
}

/* v rounded to BF16 in the high half of each lane (store4 says why the sum is exact). */
static inline uint32x4_t round_bf16_high(float32x4_t v) {
    const uint32x4_t x = vreinterpretq_u32_f32(canon4(v));
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(x, 16), vdupq_n_u32(1));
    return vaddq_u32(x, vaddq_u32(vdupq_n_u32(0x7fff), lsb));
}

/* The 8 elements at p as their even and odd elements. */
static inline __attribute__((always_inline)) void load_split8(int32_t dt, const void *p,
                                                              float32x4_t *even, float32x4_t *odd) {
    if (dt == GRADREF_F32) {
        const float32x4x2_t v = vld2q_f32((const float *)p);
        *even = v.val[0], *odd = v.val[1];
    } else if (dt == GRADREF_F16) {
        const uint16x4x2_t v = vld2_u16((const uint16_t *)p);
        *even = vcvt_f32_f16(vreinterpret_f16_u16(v.val[0]));
        *odd = vcvt_f32_f16(vreinterpret_f16_u16(v.val[1]));
    } else {
        const uint32x4_t pairs = vld1q_u32((const uint32_t *)p);
        *even = vreinterpretq_f32_u32(vshlq_n_u32(pairs, 16));
        *odd = vreinterpretq_f32_u32(vandq_u32(pairs, vdupq_n_u32(0xffff0000u)));
    }
}

/* load_split8's inverse: the results rounded to dt, each NaN canonical. */
static inline __attribute__((always_inline)) void store_split8(int32_t dt, void *p,
                                                               float32x4_t even, float32x4_t odd) {
    if (dt == GRADREF_F32) {
        const float32x4x2_t v = {{canon4(even), canon4(odd)}};
        vst2q_f32((float *)p, v);
    } else if (dt == GRADREF_F16) {
        const uint16x4x2_t v = {{vreinterpret_u16_f16(vcvt_f16_f32(canon4(even))),
                                 vreinterpret_u16_f16(vcvt_f16_f32(canon4(odd)))}};
        vst2_u16((uint16_t *)p, v);
    } else {
        vst1q_u32((uint32_t *)p, vsriq_n_u32(round_bf16_high(odd), round_bf16_high(even), 16));
    }
}

/* atb_row over every head of a token row (heads head_dim elements apart), n a multiple of 16 up
 * to 128; dt a constant in each instance. */
static inline __attribute__((always_inline)) void atb_heads4(int32_t dt, const char *in, char *out,
                                                             int64_t heads, int64_t head_dim,
                                                             const float *w, int64_t n) {
    const size_t es = gradref__rope_esize(dt), row = (size_t)head_dim * es;
    float w_even[64], w_odd[64];
    if (dt == GRADREF_BF16) split_weights(w, n, w_even, w_odd);
    for (int64_t h = 0; h < heads; h++, in += row, out += row)
        for (int64_t i = 0; i < n; i += 8) {
            const size_t at = (size_t)i * es;
            if (dt == GRADREF_BF16) { /* products g w, in the reference's order */
                float32x4_t even, odd;
                load_split8(dt, in + at, &even, &odd);
                store_split8(dt, out + at, vmulq_f32(even, vld1q_f32(w_even + i / 2)),
                             vmulq_f32(odd, vld1q_f32(w_odd + i / 2)));
            } else {
                store4(dt, out + at, vmulq_f32(load4(dt, in + at), vld1q_f32(w + i)));
                store4(dt, out + at + 4 * es,
                       vmulq_f32(load4(dt, in + at + 4 * es), vld1q_f32(w + i + 4)));
            }
        }
}

static void atb_heads_neon(int32_t dt, const void *in, void *out, int64_t heads, int64_t head_dim,
                           const float *w, int64_t n, int stream) {
    (void)stream;
#  define ATB_CALL(DT) atb_heads4(DT, in, out, heads, head_dim, w, n)
    BY_DTYPE(ATB_CALL);
#  undef ATB_CALL
}

/* interleaved_row over every head of a token row: even result c[2j] g0 + s[2j+1] g1, odd result
 * c[2j+1] g1 - s[2j] g0, from the split elements (no pair swaps or sign flips). */
static inline __attribute__((always_inline)) void
interleaved_heads4(int32_t dt, const char *in, char *out, int64_t heads, int64_t head_dim,
                   const float *c, const float *s, int64_t n) {
    const size_t es = gradref__rope_esize(dt), row = (size_t)head_dim * es;
    float c_even[64], c_odd[64], s_even[64], s_odd[64];
    split_weights(c, n, c_even, c_odd);
    split_weights(s, n, s_even, s_odd);
    for (int64_t h = 0; h < heads; h++, in += row, out += row)
        for (int64_t i = 0; i < n; i += 8) {
            const int64_t j = i / 2;
            float32x4_t g0, g1;
            load_split8(dt, in + (size_t)i * es, &g0, &g1);
            const float32x4_t even = vaddq_f32(vmulq_f32(vld1q_f32(c_even + j), g0),
                                               vmulq_f32(vld1q_f32(s_odd + j), g1));
            const float32x4_t odd = vsubq_f32(vmulq_f32(vld1q_f32(c_odd + j), g1),
                                              vmulq_f32(vld1q_f32(s_even + j), g0));
            store_split8(dt, out + (size_t)i * es, even, odd);
        }
}

static void interleaved_heads_neon(int32_t dt, const void *in, void *out, int64_t heads,
                                   int64_t head_dim, const float *c, const float *s, int64_t n,
                                   int stream) {
    (void)stream;
#  define INTERLEAVED_CALL(DT) interleaved_heads4(DT, in, out, heads, head_dim, c, s, n)
    BY_DTYPE(INTERLEAVED_CALL);
#  undef INTERLEAVED_CALL
}

/* Elements [i, i + 4) of one head's rotate_half adjoint (front and back), F32 or F16. */
static inline __attribute__((always_inline)) void
half4(int32_t dt, const char *in, char *out, size_t half, const float *const w[4], int64_t i) {
    const size_t at = (size_t)i * gradref__rope_esize(dt);
    const float32x4_t f = load4(dt, in + at), b = load4(dt, in + half + at);
    store4(dt, out + at,
           vaddq_f32(vmulq_f32(vld1q_f32(w[0] + i), f), vmulq_f32(vld1q_f32(w[1] + i), b)));
    store4(dt, out + half + at,
           vsubq_f32(vmulq_f32(vld1q_f32(w[2] + i), b), vmulq_f32(vld1q_f32(w[3] + i), f)));
}

/* half_row over every head of a token row (half width n, a multiple of 16 up to 64); BF16 in
 * pairs, the front half's and the back half's at the same place meeting elementwise. */
static inline __attribute__((always_inline)) void half_heads4(int32_t dt, const char *in, char *out,
                                                              int64_t heads, int64_t head_dim,
                                                              const float *const w[4], int64_t n) {
    const size_t es = gradref__rope_esize(dt), row = (size_t)head_dim * es, half = (size_t)n * es;
    float split[4][2][32]; /* cf, sb, cb, sf: even, odd */
    if (dt == GRADREF_BF16)
        for (int a = 0; a < 4; a++)
            split_weights(w[a], n, split[a][0], split[a][1]);
    for (int64_t h = 0; h < heads; h++, in += row, out += row)
        for (int64_t i = 0; i < n; i += 8) {
            if (dt != GRADREF_BF16) {
                half4(dt, in, out, half, w, i);
                half4(dt, in, out, half, w, i + 4);
                continue;
            }
            const size_t at = (size_t)i * es;
            float32x4_t f[2], b[2], front[2], back[2]; /* even, odd */
            load_split8(dt, in + at, &f[0], &f[1]);
            load_split8(dt, in + half + at, &b[0], &b[1]);
            for (int e = 0; e < 2; e++) {
                const int64_t j = i / 2;
                front[e] = vaddq_f32(vmulq_f32(vld1q_f32(split[0][e] + j), f[e]),
                                     vmulq_f32(vld1q_f32(split[1][e] + j), b[e]));
                back[e] = vsubq_f32(vmulq_f32(vld1q_f32(split[2][e] + j), b[e]),
                                    vmulq_f32(vld1q_f32(split[3][e] + j), f[e]));
            }
            store_split8(dt, out + at, front[0], front[1]);
            store_split8(dt, out + half + at, back[0], back[1]);
        }
}

static void half_heads_neon(int32_t dt, const void *in, void *out, int64_t heads, int64_t head_dim,
                            const float *cf, const float *sb, const float *cb, const float *sf,
                            int64_t n, int stream) {
    (void)stream;
    const float *const w[4] = {cf, sb, cb, sf};
#  define HALF_CALL(DT) half_heads4(DT, in, out, heads, head_dim, w, n)
    BY_DTYPE(HALF_CALL);
#  undef HALF_CALL
}

const gradref__rope_kernels gradref__rope_kernels_neon = {
    .isa = "neon",
    .atb_row = atb_row_neon,
    .half_row = half_row_neon,
    .half_heads = half_heads_neon,
    .interleaved_row = interleaved_row_neon,
    .atb_heads = atb_heads_neon,
    .interleaved_heads = interleaved_heads_neon,
};

#else
typedef int gradref__rope_neon_unused;
#endif
