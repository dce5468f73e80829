/* SPDX-License-Identifier: Apache-2.0 */
/* The canonical-NaN scan's NEON body (nan.h): 16 floats a step, one compare of each vector with
 * itself and an OR, a store only where a NaN is; on request a compare with 0 notes +0. */
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

#else
typedef int gradref__nan_neon_unused;
#endif
