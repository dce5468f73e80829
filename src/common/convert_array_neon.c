/* SPDX-License-Identifier: Apache-2.0 */
/* The NEON array conversions (FCVTL / FCVTN: every aarch64 CPU converts F16 in hardware), bit
 * for bit convert.h's under the default FPCR (round to nearest even, no flush to zero). */
#include "convert.h"
#include "convert_array.h"
#include "isa.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>

/* The hardware quiets signaling NaNs; blocks holding a NaN are redone with the scalar routine
 * so the payloads come out as convert.h makes them (as the F16C kernels do). */
static void f16_to_f32_neon(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    const uint16x8_t abs = vdupq_n_u16(0x7fff), inf = vdupq_n_u16(0x7c00);
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16(src + i);
        const float16x8_t v = vreinterpretq_f16_u16(h);
        vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(v)));
        vst1q_f32(dst + i + 4, vcvt_high_f32_f16(v));
        if (vmaxvq_u16(vcgtq_u16(vandq_u16(h, abs), inf)))
            for (size_t j = i; j < i + 8; j++)
                dst[j] = gradref__f16_to_f32(src[j]);
    }
    for (; i < n; i++)
        dst[i] = gradref__f16_to_f32(src[i]);
}

static void f32_to_f16_neon(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t lo = vld1q_f32(src + i), hi = vld1q_f32(src + i + 4);
        const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(lo), hi);
        vst1q_u16(dst + i, vreinterpretq_u16_f16(h));
        /* x != x only for NaN */
        const uint32x4_t nan =
            vorrq_u32(vmvnq_u32(vceqq_f32(lo, lo)), vmvnq_u32(vceqq_f32(hi, hi)));
        if (vmaxvq_u32(nan))
            for (size_t j = i; j < i + 8; j++)
                dst[j] = gradref__f32_to_f16(src[j]);
    }
    for (; i < n; i++)
        dst[i] = gradref__f32_to_f16(src[i]);
}

const gradref__array_kernels gradref__array_kernels_neon = {
    .isa = "neon",
    .f16_to_f32 = f16_to_f32_neon,
    .f32_to_f16 = f32_to_f16_neon,
};

#else
typedef int gradref__convert_array_neon_unused;
#endif
