/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad's NEON row kernels: 8 elements a step in two 4-lane halves, the reference loop's
 * operations in its order (products, then the sum or difference; no FMA), F16 through
 * FCVTL/FCVTN (round to nearest even under the default FPCR), BF16 widened by a shift and
 * rounded to nearest even in integers, each NaN made canonical before it is stored. AArch64 has
 * no streaming store intrinsic, so `stream` is not used. The all-heads kernels are the rows'. */
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

const gradref__rope_kernels gradref__rope_kernels_neon = {
    .isa = "neon",
    .atb_row = atb_row_neon,
    .half_row = half_row_neon,
    .interleaved_row = interleaved_row_neon,
};

#else
typedef int gradref__rope_neon_unused;
#endif
