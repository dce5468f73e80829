/* SPDX-License-Identifier: Apache-2.0 */
/* The canonical-NaN scan's NEON body (nan.h): 16 floats a step, one compare of each vector with
 * itself and an OR, a store only where a NaN is; on request a compare with 0 notes +0. And
 * the finiteness scan: an exponent compare per 4. */
#include "nan.h"

#include "isa.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>

int64_t gradref__canon_nans_f32_neon(float *p, int64_t n, int *pos_zero) {
    const float32x4_t canon = vreinterpretq_f32_u32(vdupq_n_u32(GRADREF__CANON_NAN_F32));
    uint32x4_t zeros = vdupq_n_u32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t v[4];
        uint32x4_t nan[4];
        for (int j = 0; j < 4; j++) {
            v[j] = vld1q_f32(p + i + 4 * j);
            nan[j] = vmvnq_u32(vceqq_f32(v[j], v[j])); /* x != x only for a NaN */
            if (pos_zero) zeros = vorrq_u32(zeros, vceqzq_u32(vreinterpretq_u32_f32(v[j])));
        }
        if (vmaxvq_u32(vorrq_u32(vorrq_u32(nan[0], nan[1]), vorrq_u32(nan[2], nan[3]))) == 0)
            continue;
        for (int j = 0; j < 4; j++)
            vst1q_f32(p + i + 4 * j, vbslq_f32(nan[j], canon, v[j]));
    }
    if (pos_zero && vmaxvq_u32(zeros) != 0) *pos_zero = 1;
    return i;
}

int gradref__all_finite_f32_neon(const float *d, int64_t n) {
    const uint32x4_t exp = vdupq_n_u32(0x7f800000u);
    uint32x4_t hit = vdupq_n_u32(0);
    int64_t e = 0;
    for (; e + 4 <= n; e += 4) /* an all-ones exponent: Inf or NaN */
        hit = vorrq_u32(hit, vceqq_u32(vandq_u32(vld1q_u32((const uint32_t *)(d + e)), exp), exp));
    int finite = vmaxvq_u32(hit) == 0;
    for (; e < n; e++)
        finite &= (d[e] - d[e]) == 0.0f; /* Inf - Inf and NaN are NaN */
    return finite;
}

#else
typedef int gradref__nan_neon_unused;
#endif
