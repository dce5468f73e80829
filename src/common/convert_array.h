/* SPDX-License-Identifier: Apache-2.0 */
/* Array conversions for the fast paths: the same results as convert.h, bit for bit (NaN
 * payloads included), with F16C, NEON or vectorizable loops. */
#ifndef GRADREF_COMMON_CONVERT_ARRAY_H
#define GRADREF_COMMON_CONVERT_ARRAY_H

#include <stddef.h>
#include <stdint.h>

/* The portable BF16 conversions: branch-free integer loops (the array kernels' below at the
 * portable level). */
void gradref__bf16_to_f32_array(const uint16_t *src, float *dst, size_t n);
void gradref__f32_to_bf16_array(const float *src, uint16_t *dst, size_t n);

/* The array kernels of one ISA (the data movers' own: F16's and BF16's conversions and
 * gradref_copy's 32 x 32 transpose), picked from the CPU flags. The conversions are never NULL;
 * f16_rows_to_f32 and bf16_rows_to_f32 widen `rows` runs of n values, run r from src + r *
 * sstride to dst + r * dstride (strides in elements, of either sign): one call for a window of
 * many short channel rows, where a call a row cost more than its conversions.
 * transpose32x32_32, d[i * dstride + j] = s[j * sstride + i] for 32-bit elements, is NULL where
 * the ISA has none. transpose32x32_32_stream does the same with streaming stores when d and
 * dstride keep every row of d 32-byte aligned (the caller calls gradref__stream_fence() before
 * d is read); NULL where the ISA has none. */
typedef struct gradref__array_kernels {
    const char *isa;
    void (*f16_to_f32)(const uint16_t *src, float *dst, size_t n);
    void (*f32_to_f16)(const float *src, uint16_t *dst, size_t n);
    void (*bf16_to_f32)(const uint16_t *src, float *dst, size_t n);
    void (*f32_to_bf16)(const float *src, uint16_t *dst, size_t n);
    void (*f16_rows_to_f32)(const uint16_t *src, int64_t sstride, float *dst, int64_t dstride,
                            size_t n, size_t rows);
    void (*bf16_rows_to_f32)(const uint16_t *src, int64_t sstride, float *dst, int64_t dstride,
                             size_t n, size_t rows);
    void (*transpose32x32_32)(const uint32_t *s, int64_t sstride, uint32_t *d, int64_t dstride);
    void (*transpose32x32_32_stream)(const uint32_t *s, int64_t sstride, uint32_t *d,
                                     int64_t dstride);
} gradref__array_kernels;

/* The table of the highest level at or below max_isa (common/isa.h) that the CPU runs. */
const gradref__array_kernels *gradref__array_kernels_for(int max_isa);

/* n values of a 16-bit float dtype (GRADREF_F16, else BF16) to f32 by k's kernels, and f32 to
 * one: how every path converts F16 and BF16 arrays. */
void gradref__half_to_f32_array(const gradref__array_kernels *k, int32_t dtype, const uint16_t *src,
                                float *dst, size_t n);
void gradref__f32_to_half_array(const gradref__array_kernels *k, int32_t dtype, const float *src,
                                uint16_t *dst, size_t n);
/* The rows form of gradref__half_to_f32_array (the table's f16_rows_to_f32 or bf16_rows_to_f32). */
void gradref__half_rows_to_f32(const gradref__array_kernels *k, int32_t dtype, const uint16_t *src,
                               int64_t sstride, float *dst, int64_t dstride, size_t n, size_t rows);

/* An ISA's conversion of n elements: block(src, dst, i) converts the 8 from i, one(src, dst, i)
 * the one at i. Blocks of 8 while they fit, the last few by the block that ends at n (its first
 * elements written again with the same values: outputs never overlap inputs), a run under 8
 * one element at a time. Inlined into each ISA's file with its own functions. */
typedef void (*gradref__convert_step)(const void *src, void *dst, size_t i);
static inline __attribute__((always_inline)) void gradref__convert_by_8(const void *src, void *dst,
                                                                        size_t n,
                                                                        gradref__convert_step block,
                                                                        gradref__convert_step one) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        block(src, dst, i);
    if (i < n && n >= 8)
        block(src, dst, n - 8);
    else
        for (; i < n; i++)
            one(src, dst, i);
}

/* gradref__convert_by_8 on each of `rows` runs of 16-bit values widened to f32 (the tables'
 * *_rows_to_f32), run r at src + r * sstride and dst + r * dstride. */
static inline __attribute__((always_inline)) void
gradref__widen_rows_by_8(const uint16_t *src, int64_t sstride, float *dst, int64_t dstride,
                         size_t n, size_t rows, gradref__convert_step block,
                         gradref__convert_step one) {
    for (size_t r = 0; r < rows; r++)
        gradref__convert_by_8(src + (ptrdiff_t)r * sstride, dst + (ptrdiff_t)r * dstride, n, block,
                              one);
}

/* Defines an ISA file's f16_rows_to_f32_SUFFIX and bf16_rows_to_f32_SUFFIX (the tables'
 * rows fields) from its steps: F16's block and one, BF16's block and one. */
#define GRADREF__WIDEN_ROWS_KERNELS(SUFFIX, F16_BLOCK, F16_ONE, BF16_BLOCK, BF16_ONE)              \
  static void f16_rows_to_f32_##SUFFIX(const uint16_t *src, int64_t sstride, float *dst,           \
                                       int64_t dstride, size_t n, size_t rows) {                   \
    gradref__widen_rows_by_8(src, sstride, dst, dstride, n, rows, F16_BLOCK, F16_ONE);             \
  }                                                                                                \
  static void bf16_rows_to_f32_##SUFFIX(const uint16_t *src, int64_t sstride, float *dst,          \
                                        int64_t dstride, size_t n, size_t rows) {                  \
    gradref__widen_rows_by_8(src, sstride, dst, dstride, n, rows, BF16_BLOCK, BF16_ONE);           \
  }

/* The AVX2 and NEON tables (convert_array_avx2.c, convert_array_neon.c). */
extern const gradref__array_kernels gradref__array_kernels_avx2;
extern const gradref__array_kernels gradref__array_kernels_neon;

/* The x86 kernels (convert_array_avx2.c: AVX with F16C; copy_avx2.c: AVX2). */
void gradref__f16_to_f32_f16c(const uint16_t *src, float *dst, size_t n);
void gradref__f32_to_f16_f16c(const float *src, uint16_t *dst, size_t n);
void gradref__transpose8x8_u32_avx2(const uint32_t *s, int64_t sstride, uint32_t *d,
                                    int64_t dstride);
void gradref__transpose32x32_u32_avx2(const uint32_t *s, int64_t sstride, uint32_t *d,
                                      int64_t dstride);
void gradref__transpose32x32_u32_stream_avx2(const uint32_t *s, int64_t sstride, uint32_t *d,
                                             int64_t dstride);

#endif
