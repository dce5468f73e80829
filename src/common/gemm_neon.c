/* SPDX-License-Identifier: Apache-2.0 */
/* The packed SGEMM's NEON micro-kernel (12 x 8) and the indirect NEON kernel whose A rows are
 * pointers: 24 accumulators of 4 lanes, three A vectors and two B vectors, 29 of the 32 vector
 * registers. Every element is a chain of vfmaq_laneq_f32 (FMLA, one rounding) in ascending p, so
 * it equals the portable kernel (fmaf) bit for bit. */
#include "gemm_kernels.h"

#include <stddef.h>

#ifdef GRADREF__ARM64
#  include <arm_neon.h>

#  if GRADREF__NEON_MR != 12 || GRADREF__NEON_NR != 8
#    error "kernel_neon spells out 12 x 8"
#  endif
/* Row i takes lane l of A vector v (i = 4 v + l). Named accumulators, as in gemm_avx2.c.
 * FOR_ROW_LANES(M) is M(i, v, l) for the 12 rows, FOR_ROWS(M) M(i). */
#  define FOR_ROW_LANES(M)                                                                         \
    M(0, 0, 0);                                                                                    \
    M(1, 0, 1);                                                                                    \
    M(2, 0, 2);                                                                                    \
    M(3, 0, 3);                                                                                    \
    M(4, 1, 0);                                                                                    \
    M(5, 1, 1);                                                                                    \
    M(6, 1, 2);                                                                                    \
    M(7, 1, 3);                                                                                    \
    M(8, 2, 0);                                                                                    \
    M(9, 2, 1);                                                                                    \
    M(10, 2, 2);                                                                                   \
    M(11, 2, 3)
#  define FOR_ROWS(M)                                                                              \
    M(0);                                                                                          \
    M(1);                                                                                          \
    M(2);                                                                                          \
    M(3);                                                                                          \
    M(4);                                                                                          \
    M(5);                                                                                          \
    M(6);                                                                                          \
    M(7);                                                                                          \
    M(8);                                                                                          \
    M(9);                                                                                          \
    M(10);                                                                                         \
    M(11)
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
    FOR_ROWS(ACC_INIT);
    /* four steps an iteration: the loop's own instructions are then a tenth of it */
#  pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        const float32x4_t a0 = vld1q_f32(a + p * 12), a1 = vld1q_f32(a + p * 12 + 4),
                          a2 = vld1q_f32(a + p * 12 + 8);
        const float32x4_t b0 = vld1q_f32(b + p * 8), b1 = vld1q_f32(b + p * 8 + 4);
        FOR_ROW_LANES(ACC_STEP);
    }
    FOR_ROWS(ACC_STORE);
}

/* ---- the indirect kernel (A's rows through pointers) ---- */

#  define IND_STEP(i, v, l)                                                                        \
    do {                                                                                           \
      if (R > i) {                                                                                 \
        c##i##a = vfmaq_laneq_f32(c##i##a, b0, a##v, l);                                           \
        if (V == 2) c##i##b = vfmaq_laneq_f32(c##i##b, b1, a##v, l);                               \
      }                                                                                            \
    } while (0)
#  define IND_STORE(i)                                                                             \
    do {                                                                                           \
      if (R > i) {                                                                                 \
        store_first4(c + i * ldc, c##i##a, cols);                                                  \
        if (V == 2) store_first4(c + i * ldc + 4, c##i##b, cols - 4);                              \
      }                                                                                            \
    } while (0)

/* Vector v of a tile's R rows at a (rows 4 v .. 4 v + 3, a_cs floats apart): one load where all
 * four are rows and they are adjacent (UNIT), else lane by lane (lanes past R +0). */
__attribute__((always_inline)) static inline float32x4_t a_vector(int R, int UNIT, int v,
                                                                  const float *a, int64_t a_cs) {
    if (UNIT && R >= 4 * v + 4) return vld1q_f32(a + 4 * v);
    float32x4_t x = vdupq_n_f32(0.0f);
    if (R > 4 * v) x = vld1q_lane_f32(a + (4 * v) * a_cs, x, 0);
    if (R > 4 * v + 1) x = vld1q_lane_f32(a + (4 * v + 1) * a_cs, x, 1);
    if (R > 4 * v + 2) x = vld1q_lane_f32(a + (4 * v + 2) * a_cs, x, 2);
    if (R > 4 * v + 3) x = vld1q_lane_f32(a + (4 * v + 3) * a_cs, x, 3);
    return x;
}

/* The first n (1 or more) of v's lanes to p. */
static inline void store_first4(float *p, float32x4_t v, int n) {
    if (n >= 4) {
        vst1q_f32(p, v);
        return;
    }
    vst1q_lane_f32(p, v, 0);
    if (n > 1) vst1q_lane_f32(p + 1, v, 1);
    if (n > 2) vst1q_lane_f32(p + 2, v, 2);
}

/* The indirect kernel's body for R rows, V vectors of 4 columns and UNIT (a_cs 1), inlined with
 * constants: each element the chain over the non-NULL rows p ascending, one FMLA a step (the
 * packed kernel's order and lanes). */
__attribute__((always_inline)) static inline void
indirect_body(int R, int V, int UNIT, int64_t k, const float *const *a_rows, int64_t a_off,
              int64_t a_cs, const float *b, float *c, int64_t ldc, int cols) {
    const float32x4_t z = vdupq_n_f32(0.0f);
    float32x4_t c0a = z, c0b = z, c1a = z, c1b = z, c2a = z, c2b = z, c3a = z, c3b = z;
    float32x4_t c4a = z, c4b = z, c5a = z, c5b = z, c6a = z, c6b = z, c7a = z, c7b = z;
    float32x4_t c8a = z, c8b = z, c9a = z, c9b = z, c10a = z, c10b = z, c11a = z, c11b = z;
    for (int64_t p = 0; p < k; p++) {
        if (a_rows[p] == NULL) continue;
        const float *a = a_rows[p] + a_off;
        const float32x4_t b0 = vld1q_f32(b + p * 8), b1 = V == 2 ? vld1q_f32(b + p * 8 + 4) : b0;
        const float32x4_t a0 = a_vector(R, UNIT, 0, a, a_cs), a1 = a_vector(R, UNIT, 1, a, a_cs),
                          a2 = a_vector(R, UNIT, 2, a, a_cs);
        FOR_ROW_LANES(IND_STEP);
    }
    FOR_ROWS(IND_STORE);
}

typedef void (*indirect_kernel)(int64_t k, const float *const *a_rows, int64_t a_off, int64_t a_cs,
                                const float *b, float *c, int64_t ldc, int cols);

#  define INDIRECT(R, V, UNIT)                                                                     \
    static void indirect_##R##_##V##_##UNIT(int64_t k, const float *const *a_rows, int64_t a_off,  \
                                            int64_t a_cs, const float *b, float *c, int64_t ldc,   \
                                            int cols) {                                            \
      indirect_body(R, V, UNIT, k, a_rows, a_off, a_cs, b, c, ldc, cols);                          \
    }
#  define INDIRECT_ROWS(R) INDIRECT(R, 1, 0) INDIRECT(R, 2, 0) INDIRECT(R, 1, 1) INDIRECT(R, 2, 1)
GRADREF__FOR_ROWS_1_TO_12(INDIRECT_ROWS)

/* [rows - 1][unit][cols > 4] */
#  define INDIRECT_TABLE_ROW(R)                                                                    \
    {{indirect_##R##_1_0, indirect_##R##_2_0}, {indirect_##R##_1_1, indirect_##R##_2_1}},
static const indirect_kernel indirect_kernels[GRADREF__NEON_MR][2][2] = {
    GRADREF__FOR_ROWS_1_TO_12(INDIRECT_TABLE_ROW)};

static void indirect_neon(int rows, int cols, int64_t k, const float *const *a_rows, int64_t a_off,
                          int64_t a_cs, const float *b, float *c, int64_t ldc) {
    indirect_kernels[rows - 1][a_cs == 1][cols > 4](k, a_rows, a_off, a_cs, b, c, ldc, cols);
}

const gradref__sgemm_kernels gradref__sgemm_kernels_neon = {
    .isa = "neon",
    .mr = GRADREF__NEON_MR,
    .nr = GRADREF__NEON_NR,
    .micro = kernel_neon,
    .indirect = indirect_neon,
    .indirect_unit_rows = 1,
};

#else
typedef int gradref__gemm_neon_unused;
#endif
