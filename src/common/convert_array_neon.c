/* SPDX-License-Identifier: Apache-2.0 */
/* The NEON array kernels: F16 conversions (FCVTL / FCVTN: every aarch64 CPU converts F16 in
 * hardware), bit for bit convert.h's under the default FPCR (round to nearest even, no flush to
 * zero), and gradref_copy's 32 x 32 transpose. */
#include "convert.h"
#include "convert_array.h"
#include "isa.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>

/* The hardware quiets signaling NaNs; blocks holding a NaN are redone with the scalar routine
 * so the payloads come out as convert.h makes them (as the F16C kernels do). */
static inline void f16_to_f32_block8(const void *from, void *to, size_t i) {
    const uint16_t *src = from;
    float *dst = to;
    const uint16x8_t abs = vdupq_n_u16(0x7fff), inf = vdupq_n_u16(0x7c00);
    const uint16x8_t h = vld1q_u16(src + i);
    const float16x8_t v = vreinterpretq_f16_u16(h);
    vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(v)));
    vst1q_f32(dst + i + 4, vcvt_high_f32_f16(v));
    if (vmaxvq_u16(vcgtq_u16(vandq_u16(h, abs), inf)))
        for (size_t j = i; j < i + 8; j++)
            dst[j] = gradref__f16_to_f32(src[j]);
}

/* One element: a lane of the instruction, NaNs by convert.h. */
static inline void f16_to_f32_one(const void *from, void *to, size_t i) {
    const uint16_t h = ((const uint16_t *)from)[i];
    ((float *)to)[i] =
        (h & 0x7fffu) > 0x7c00u
            ? gradref__f16_to_f32(h)
            : vget_lane_f32(vget_low_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h)))), 0);
}

static void f16_to_f32_neon(const uint16_t *src, float *dst, size_t n) {
    gradref__convert_by_8(src, dst, n, f16_to_f32_block8, f16_to_f32_one);
}

static inline void f32_to_f16_block8(const void *from, void *to, size_t i) {
    const float *src = from;
    uint16_t *dst = to;
    const float32x4_t lo = vld1q_f32(src + i), hi = vld1q_f32(src + i + 4);
    const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(lo), hi);
    vst1q_u16(dst + i, vreinterpretq_u16_f16(h));
    /* x != x only for NaN */
    const uint32x4_t nan = vorrq_u32(vmvnq_u32(vceqq_f32(lo, lo)), vmvnq_u32(vceqq_f32(hi, hi)));
    if (vmaxvq_u32(nan))
        for (size_t j = i; j < i + 8; j++)
            dst[j] = gradref__f32_to_f16(src[j]);
}

static inline void f32_to_f16_one(const void *from, void *to, size_t i) {
    ((uint16_t *)to)[i] = gradref__f32_to_f16(((const float *)from)[i]);
}

static void f32_to_f16_neon(const float *src, uint16_t *dst, size_t n) {
    gradref__convert_by_8(src, dst, n, f32_to_f16_block8, f32_to_f16_one);
}

/* d[i * dstride + j] = s[j * sstride + i]: 4 x 4 blocks, each two rounds of TRN (pairs of
 * lanes, then pairs of 64-bit halves). */
static void transpose32x32_32_neon(const uint32_t *s, int64_t sstride, uint32_t *d,
                                   int64_t dstride) {
    for (int j = 0; j < 32; j += 4)
        for (int i = 0; i < 32; i += 4) {
            const uint32_t *src = s + j * sstride + i;
            const uint32x4_t r0 = vld1q_u32(src), r1 = vld1q_u32(src + sstride),
                             r2 = vld1q_u32(src + 2 * sstride), r3 = vld1q_u32(src + 3 * sstride);
            const uint32x4_t t0 = vtrn1q_u32(r0, r1), t1 = vtrn2q_u32(r0, r1),
                             t2 = vtrn1q_u32(r2, r3), t3 = vtrn2q_u32(r2, r3);
            uint32_t *dst = d + i * dstride + j;
            vst1q_u32(dst, vreinterpretq_u32_u64(
                               vtrn1q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2))));
            vst1q_u32(dst + dstride, vreinterpretq_u32_u64(vtrn1q_u64(vreinterpretq_u64_u32(t1),
                                                                      vreinterpretq_u64_u32(t3))));
            vst1q_u32(dst + 2 * dstride,
                      vreinterpretq_u32_u64(
                          vtrn2q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2))));
            vst1q_u32(dst + 3 * dstride,
                      vreinterpretq_u32_u64(
                          vtrn2q_u64(vreinterpretq_u64_u32(t1), vreinterpretq_u64_u32(t3))));
        }
}

/* BF16 by integer lanes, as convert_array_avx2.c's: widening is a shift (SHLL), narrowing
 * rounds to nearest even by the carry, NaNs as gradref__f32_to_bf16. */
static inline void bf16_to_f32_block8(const void *from, void *to, size_t i) {
    const uint16x8_t h = vld1q_u16((const uint16_t *)from + i);
    float *dst = (float *)to + i;
    vst1q_f32(dst, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
    vst1q_f32(dst + 4, vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16)));
}

static inline void bf16_to_f32_one(const void *from, void *to, size_t i) {
    ((float *)to)[i] = gradref__bf16_to_f32(((const uint16_t *)from)[i]);
}

static void bf16_to_f32_neon(const uint16_t *src, float *dst, size_t n) {
    gradref__convert_by_8(src, dst, n, bf16_to_f32_block8, bf16_to_f32_one);
}

GRADREF__WIDEN_ROWS_KERNELS(neon, f16_to_f32_block8, f16_to_f32_one, bf16_to_f32_block8,
                            bf16_to_f32_one)

static inline uint16x4_t f32_to_bf16_4(uint32x4_t x) {
    const uint32x4_t top = vshrq_n_u32(x, 16);
    const uint32x4_t rounded = vshrq_n_u32(
        vaddq_u32(vaddq_u32(x, vdupq_n_u32(0x7fff)), vandq_u32(top, vdupq_n_u32(1))), 16);
    const uint32x4_t quiet =
        vandq_u32(vceqq_u32(vandq_u32(top, vdupq_n_u32(0x7f)), vdupq_n_u32(0)), vdupq_n_u32(0x40));
    const uint32x4_t nan =
        vcgtq_u32(vandq_u32(x, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
    return vmovn_u32(vbslq_u32(nan, vorrq_u32(top, quiet), rounded));
}

static inline void f32_to_bf16_block8(const void *from, void *to, size_t i) {
    const uint32_t *src = (const uint32_t *)from + i;
    vst1q_u16((uint16_t *)to + i,
              vcombine_u16(f32_to_bf16_4(vld1q_u32(src)), f32_to_bf16_4(vld1q_u32(src + 4))));
}

static inline void f32_to_bf16_one(const void *from, void *to, size_t i) {
    ((uint16_t *)to)[i] = gradref__f32_to_bf16(((const float *)from)[i]);
}

static void f32_to_bf16_neon(const float *src, uint16_t *dst, size_t n) {
    gradref__convert_by_8(src, dst, n, f32_to_bf16_block8, f32_to_bf16_one);
}

const gradref__array_kernels gradref__array_kernels_neon = {
    .isa = "neon",
    .f16_to_f32 = f16_to_f32_neon,
    .f32_to_f16 = f32_to_f16_neon,
    .bf16_to_f32 = bf16_to_f32_neon,
    .f32_to_bf16 = f32_to_bf16_neon,
    .f16_rows_to_f32 = f16_rows_to_f32_neon,
    .bf16_rows_to_f32 = bf16_rows_to_f32_neon,
    .transpose32x32_32 = transpose32x32_32_neon,
};

#else
typedef int gradref__convert_array_neon_unused;
#endif
