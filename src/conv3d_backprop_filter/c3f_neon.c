/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's NEON kernels: x panels' lanes 4 at a time (few channels by 4 x 4
 * register transposes, TRN), dy panels gathered with the same transposes or copied from
 * channels-last rows, HF32 rounding and the ordered partial-sum adds; the finiteness scan is
 * common/nan_neon.c's. */
#include "c3f_kernels.h"
#include "common/convert.h"
#include "common/gemm_kernels.h"
#include "common/isa.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>

static void panel_lanes_neon(float *dst, int64_t mr, const float *base, int64_t step, int64_t lo,
                             int64_t hi, int64_t run, int64_t la, int64_t lb) {
    const int64_t width = lb - la;
    for (int64_t q = 0; q < run; q++, dst += mr) {
        float *out = dst + la;
        int64_t l = 0;
        if (q >= lo && q < hi) {
            const float *src = base + q * step;
            for (; l + 4 <= width; l += 4)
                vst1q_f32(out + l, vld1q_f32(src + l));
            for (; l < width; l++)
                out[l] = src[l];
        } else {
            for (; l + 4 <= width; l += 4)
                vst1q_f32(out + l, vdupq_n_f32(0.0f));
            for (; l < width; l++)
                out[l] = 0.0f;
        }
    }
}

/* Rows src[j * cs + q .. + 4) of channels j0..j0+3 into dst[(q + i) * nr + j0 ..] */
static inline void transpose4(const float *src, int64_t cs, float *dst, int64_t nr) {
    const float32x4_t r0 = vld1q_f32(src), r1 = vld1q_f32(src + cs);
    const float32x4_t r2 = vld1q_f32(src + 2 * cs), r3 = vld1q_f32(src + 3 * cs);
    const float32x4_t t0 = vtrn1q_f32(r0, r1), t1 = vtrn2q_f32(r0, r1);
    const float32x4_t t2 = vtrn1q_f32(r2, r3), t3 = vtrn2q_f32(r2, r3);
    const float64x2_t u0 = vreinterpretq_f64_f32(t0), u1 = vreinterpretq_f64_f32(t1);
    const float64x2_t u2 = vreinterpretq_f64_f32(t2), u3 = vreinterpretq_f64_f32(t3);
    vst1q_f32(dst, vreinterpretq_f32_f64(vtrn1q_f64(u0, u2)));
    vst1q_f32(dst + nr, vreinterpretq_f32_f64(vtrn1q_f64(u1, u3)));
    vst1q_f32(dst + 2 * nr, vreinterpretq_f32_f64(vtrn2q_f64(u0, u2)));
    vst1q_f32(dst + 3 * nr, vreinterpretq_f32_f64(vtrn2q_f64(u1, u3)));
}

static void gather_panel_neon(float *dst, int64_t nr, const float *src, int64_t cs, int64_t len,
                              int64_t cols) {
    for (int64_t j0 = 0; j0 < nr; j0 += 4)
        for (int64_t q0 = 0; q0 < len; q0 += 4) {
            if (j0 + 4 <= cols && q0 + 4 <= len) {
                transpose4(src + j0 * cs + q0, cs, dst + q0 * nr + j0, nr);
                continue;
            }
            for (int64_t q = q0; q < q0 + 4 && q < len; q++) /* an edge block */
                for (int64_t j = j0; j < j0 + 4; j++)
                    dst[q * nr + j] = j < cols ? src[j * cs + q] : 0.0f;
        }
}

static void copy_panel_neon(float *dst, int64_t nr, const float *src, int64_t step, int64_t len,
                            int64_t cols) {
    for (int64_t q = 0; q < len; q++, dst += nr, src += step) {
        int64_t j = 0;
        for (; j + 4 <= cols; j += 4)
            vst1q_f32(dst + j, vld1q_f32(src + j));
        for (; j < cols; j++)
            dst[j] = src[j];
        for (; j < nr; j++)
            dst[j] = 0.0f;
    }
}

/* v's lanes l < n (n <= 4) to p[l]. */
static inline void store_lanes(float *p, float32x4_t v, int64_t n) {
    if (n == 4) {
        vst1q_f32(p, v);
        return;
    }
    if (n >= 2) vst1_f32(p, vget_low_f32(v));
    if (n == 3) vst1q_lane_f32(p + 2, v, 2);
    if (n == 1) vst1q_lane_f32(p, v, 0);
}

/* The bits of v HF32-rounded as gradref__hf32_round: NaNs quieted, half the last kept bit
 * added, the rest cut. */
static inline float32x4_t hf32_round(float32x4_t v, uint32x4_t half, uint32x4_t keep) {
    const uint32x4_t b = vreinterpretq_u32_f32(v);
    const uint32x4_t nan =
        vcgtq_u32(vandq_u32(b, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
    const uint32x4_t quiet = vorrq_u32(b, vandq_u32(nan, vdupq_n_u32(0x400000u)));
    return vreinterpretq_f32_u32(vandq_u32(vaddq_u32(quiet, half), keep));
}

/* Channels [c0, c0 + 4) (those below n; the others zeros) at the m positions from `at` (src
 * holds position lo first), rounded when hf32, stored as the lanes of m panel rows. */
static inline void four_channels(float *dst, int64_t width, const float *src, int64_t cs,
                                 int64_t at, int64_t m, int64_t c0, int64_t n, int hf32,
                                 uint32x4_t half, uint32x4_t keep) {
    float32x4_t r[4];
    for (int64_t l = 0; l < 4; l++) {
        r[l] = vdupq_n_f32(0.0f);
        if (c0 + l >= n) continue;
        const float *from = src + (c0 + l) * cs + at;
        if (m == 4) {
            r[l] = vld1q_f32(from);
        } else {
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t e = 0; e < m; e++)
                part[e] = from[e];
            r[l] = vld1q_f32(part);
        }
        if (hf32) r[l] = hf32_round(r[l], half, keep);
    }
    const float32x4_t t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
    const float32x4_t t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
    const float64x2_t u0 = vreinterpretq_f64_f32(t0), u1 = vreinterpretq_f64_f32(t1);
    const float64x2_t u2 = vreinterpretq_f64_f32(t2), u3 = vreinterpretq_f64_f32(t3);
    const float32x4_t row[4] = {
        vreinterpretq_f32_f64(vtrn1q_f64(u0, u2)), vreinterpretq_f32_f64(vtrn1q_f64(u1, u3)),
        vreinterpretq_f32_f64(vtrn2q_f64(u0, u2)), vreinterpretq_f32_f64(vtrn2q_f64(u1, u3))};
    const int64_t lanes = n - c0 < 4 ? n - c0 : 4;
    for (int64_t q = 0; q < m; q++)
        store_lanes(dst + q * width + c0, row[q], lanes);
}

/* few_lanes by 4 x 4 register transposes (TRN), positions 4 at a time. */
static void few_lanes_neon(float *dst, int64_t width, const float *src, int64_t cs, int64_t lo,
                           int64_t hi, int64_t len, int64_t n, int hf32) {
    const uint32_t cut = hf32 ? 23u - (uint32_t)hf32 : 1u;
    const uint32x4_t half = vdupq_n_u32(1u << (cut - 1)), keep = vdupq_n_u32(~((1u << cut) - 1u));
    const float32x4_t zero = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i < lo; i++)
        for (int64_t c0 = 0; c0 < n; c0 += 4)
            store_lanes(dst + i * width + c0, zero, n - c0 < 4 ? n - c0 : 4);
    for (; i < hi; i += 4) {
        const int64_t m = hi - i < 4 ? hi - i : 4;
        for (int64_t c0 = 0; c0 < n; c0 += 4)
            four_channels(dst + i * width, width, src, cs, i - lo, m, c0, n, hf32, half, keep);
    }
    for (i = hi; i < len; i++)
        for (int64_t c0 = 0; c0 < n; c0 += 4)
            store_lanes(dst + i * width + c0, zero, n - c0 < 4 ? n - c0 : 4);
}

static void round_hf32_neon(float *dst, const float *src, int64_t n, int kept) {
    const uint32_t cut = 23u - (uint32_t)kept;
    const uint32x4_t half = vdupq_n_u32(1u << (cut - 1)), keep = vdupq_n_u32(~((1u << cut) - 1u));
    int64_t e = 0;
    for (; e + 4 <= n; e += 4)
        vst1q_f32(dst + e, hf32_round(vld1q_f32(src + e), half, keep));
    for (; e < n; e++)
        dst[e] = gradref__hf32_round(src[e], kept);
}

static void add_neon(float *dst, const float *older, const float *newer, int64_t n) {
    int64_t e = 0;
    for (; e + 8 <= n; e += 8) {
        const float32x4_t a = vaddq_f32(vld1q_f32(older + e), vld1q_f32(newer + e));
        const float32x4_t b = vaddq_f32(vld1q_f32(older + e + 4), vld1q_f32(newer + e + 4));
        vst1q_f32(dst + e, a);
        vst1q_f32(dst + e + 4, b);
    }
    for (; e < n; e++)
        dst[e] = older[e] + newer[e];
}

const gradref__c3f_kernels gradref__c3f_kernels_neon = {
    .isa = "neon",
    .gemm = &gradref__sgemm_kernels_neon,
    .panel_lanes = panel_lanes_neon,
    .gather_panel = gather_panel_neon,
    .copy_panel = copy_panel_neon,
    .few_lanes = few_lanes_neon,
    .round_hf32 = round_hf32_neon,
    .add = add_neon,
};

#else
typedef int gradref__c3f_neon_unused;
#endif
