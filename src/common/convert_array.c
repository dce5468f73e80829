/* SPDX-License-Identifier: Apache-2.0 */
#include "convert_array.h"

#include <string.h>

#include "convert.h"
#include "isa.h"

static void f16_to_f32_portable(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = gradref__f16_to_f32(src[i]);
}

static void f32_to_f16_portable(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = gradref__f32_to_f16(src[i]);
}

static void f16_rows_to_f32_portable(const uint16_t *src, int64_t sstride, float *dst,
                                     int64_t dstride, size_t n, size_t rows) {
    for (size_t r = 0; r < rows; r++)
        f16_to_f32_portable(src + (ptrdiff_t)r * sstride, dst + (ptrdiff_t)r * dstride, n);
}

static void bf16_rows_to_f32_portable(const uint16_t *src, int64_t sstride, float *dst,
                                      int64_t dstride, size_t n, size_t rows) {
    for (size_t r = 0; r < rows; r++)
        gradref__bf16_to_f32_array(src + (ptrdiff_t)r * sstride, dst + (ptrdiff_t)r * dstride, n);
}

static const gradref__array_kernels portable = {
    .isa = "portable",
    .f16_to_f32 = f16_to_f32_portable,
    .f32_to_f16 = f32_to_f16_portable,
    .bf16_to_f32 = gradref__bf16_to_f32_array,
    .f32_to_bf16 = gradref__f32_to_bf16_array,
    .f16_rows_to_f32 = f16_rows_to_f32_portable,
    .bf16_rows_to_f32 = bf16_rows_to_f32_portable,
};

const gradref__array_kernels *gradref__array_kernels_for(int max_isa) {
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &gradref__array_kernels_avx2,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &gradref__array_kernels_neon,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}

void gradref__half_to_f32_array(const gradref__array_kernels *k, int32_t dtype, const uint16_t *src,
                                float *dst, size_t n) {
    if (dtype == GRADREF_F16)
        k->f16_to_f32(src, dst, n);
    else
        k->bf16_to_f32(src, dst, n);
}

void gradref__half_rows_to_f32(const gradref__array_kernels *k, int32_t dtype, const uint16_t *src,
                               int64_t sstride, float *dst, int64_t dstride, size_t n,
                               size_t rows) {
    if (dtype == GRADREF_F16)
        k->f16_rows_to_f32(src, sstride, dst, dstride, n, rows);
    else
        k->bf16_rows_to_f32(src, sstride, dst, dstride, n, rows);
}

void gradref__f32_to_half_array(const gradref__array_kernels *k, int32_t dtype, const float *src,
                                uint16_t *dst, size_t n) {
    if (dtype == GRADREF_F16)
        k->f32_to_f16(src, dst, n);
    else
        k->f32_to_bf16(src, dst, n);
}

/* Both bf16 directions are integer operations; written branch-free so they vectorize. */
void gradref__bf16_to_f32_array(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x = (uint32_t)src[i] << 16;
        memcpy(dst + i, &x, sizeof x);
    }
}

void gradref__f32_to_bf16_array(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, src + i, sizeof x);
        uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
        uint32_t nan = (x >> 16) | (((x >> 16) & 0x7fu) == 0u ? 0x40u : 0u);
        dst[i] = (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
}
