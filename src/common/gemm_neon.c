/* SPDX-License-Identifier: Apache-2.0 */
/* The packed SGEMM's NEON micro-kernel (12 x 8): 24 accumulators of 4 lanes, three A vectors and
 * two B vectors, 29 of the 32 vector registers. Every element is a chain of vfmaq_laneq_f32 (FMLA,
 * one rounding) in ascending p, so it equals the portable kernel (fmaf) bit for bit. */
#include "gemm_kernels.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>

#  if GRADREF__NEON_MR != 12 || GRADREF__NEON_NR != 8
#    error "kernel_neon spells out 12 x 8"
#  endif
/* Row i takes lane l of A vector v (i = 4 v + l). Named accumulators, as in gemm_avx2.c. */
#  define ACC_INIT(i)                                                                              \
    float32x4_t c##i##a = load ? vld1q_f32(c + i * ldc) : vdupq_n_f32(0.0f),                       \
                c##i##b = load ? vld1q_f32(c + i * ldc + 4) : vdupq_n_f32(0.0f)
#  define ACC_STEP(i, v, l)                                                                        \
    c##i##a = vfmaq_laneq_f32(c##i##a, b0, a##v, l);                                               \
    c##i##b = vfmaq_laneq_f32(c##i##b, b1, a##v, l)
#  define ACC_STORE(i)                                                                             \
    vst1q_f32(c + i * ldc, c##i##a);                                                               \
    vst1q_f32(c + i * ldc + 4, c##i##b)

static void kernel_neon(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                        int load) {
    ACC_INIT(0);
    ACC_INIT(1);
    ACC_INIT(2);
    ACC_INIT(3);
    ACC_INIT(4);
    ACC_INIT(5);
    ACC_INIT(6);
    ACC_INIT(7);
    ACC_INIT(8);
    ACC_INIT(9);
    ACC_INIT(10);
    ACC_INIT(11);
    /* four steps an iteration: the loop's own instructions are then a tenth of it */
#  pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        const float32x4_t a0 = vld1q_f32(a + p * 12), a1 = vld1q_f32(a + p * 12 + 4),
                          a2 = vld1q_f32(a + p * 12 + 8);
        const float32x4_t b0 = vld1q_f32(b + p * 8), b1 = vld1q_f32(b + p * 8 + 4);
        ACC_STEP(0, 0, 0);
        ACC_STEP(1, 0, 1);
        ACC_STEP(2, 0, 2);
        ACC_STEP(3, 0, 3);
        ACC_STEP(4, 1, 0);
        ACC_STEP(5, 1, 1);
        ACC_STEP(6, 1, 2);
        ACC_STEP(7, 1, 3);
        ACC_STEP(8, 2, 0);
        ACC_STEP(9, 2, 1);
        ACC_STEP(10, 2, 2);
        ACC_STEP(11, 2, 3);
    }
    ACC_STORE(0);
    ACC_STORE(1);
    ACC_STORE(2);
    ACC_STORE(3);
    ACC_STORE(4);
    ACC_STORE(5);
    ACC_STORE(6);
    ACC_STORE(7);
    ACC_STORE(8);
    ACC_STORE(9);
    ACC_STORE(10);
    ACC_STORE(11);
}

const gradref__sgemm_kernels gradref__sgemm_kernels_neon = {
    .isa = "neon",
    .mr = GRADREF__NEON_MR,
    .nr = GRADREF__NEON_NR,
    .micro = kernel_neon,
};

#else
typedef int gradref__gemm_neon_unused;
#endif
