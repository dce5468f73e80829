/* SPDX-License-Identifier: Apache-2.0 */
/* Micro-kernels of the packed SGEMM (gemm.c). Each computes one MR x NR tile over a k-slice:
 * c[i][j] = fma(a[p][i], b[p][j], c[i][j]) for p = 0..k-1, starting from c (load) or +0, with
 * a packed k-major in runs of MR and b in runs of NR; c has row stride ldc, unit columns. */
#ifndef GRADREF_COMMON_GEMM_KERNELS_H
#define GRADREF_COMMON_GEMM_KERNELS_H

#include <stdint.h>
#include "isa.h"

#define GRADREF__PORTABLE_MR   8
#define GRADREF__PORTABLE_NR   8
#define GRADREF__AVX2_MR       6
#define GRADREF__AVX2_NR       16
#define GRADREF__AVX512_MR     14
#define GRADREF__AVX512_NR     32
#define GRADREF__NEON_MR       12
#define GRADREF__NEON_NR       8
#define GRADREF__GEMM_MAX_TILE (GRADREF__AVX512_MR * GRADREF__AVX512_NR)

/* M(1) M(2) ... M(n): the indirect kernels' instances, one per tile row count. */
#define GRADREF__FOR_ROWS_1_TO_6(M)  M(1) M(2) M(3) M(4) M(5) M(6)
#define GRADREF__FOR_ROWS_1_TO_12(M) GRADREF__FOR_ROWS_1_TO_6(M) M(7) M(8) M(9) M(10) M(11) M(12)

/* One MR x NR tile over a k-slice (see the top of this file). */
typedef void (*gradref__sgemm_micro)(int64_t k, const float *a, const float *b, float *c,
                                     int64_t ldc, int load);

/* A micro-kernel with its tile, one table per ISA: gemm.c (portable), gemm_avx2.c,
 * gemm_avx512.c,
 * gemm_neon.c. */
/* An indirect kernel: for i < rows (1 .. mr) and j < cols (1 .. nr), c[i * ldc + j] = the chain
 * over p < k from +0 of a_rows[p][a_off + i * a_cs] * b[p * nr + j]; a NULL row is skipped
 * (see gradref__sgemm_indirect_avx512). */
typedef void (*gradref__sgemm_indirect)(int rows, int cols, int64_t k, const float *const *a_rows,
                                        int64_t a_off, int64_t a_cs, const float *b, float *c,
                                        int64_t ldc);

typedef struct gradref__sgemm_kernels {
    const char *isa;
    int mr, nr;
    gradref__sgemm_micro micro;
    /* NULL where the level has none (the portable one) */
    gradref__sgemm_indirect indirect;
    /* 1: the indirect kernel pays only where a tile's rows are adjacent floats (a_cs 1), loaded
     * as vectors; strided rows take a load into every lane (NEON: about twice the packed
     * kernel's cycles, performance.md's aarch64 table), and the packed panels run instead */
    int indirect_unit_rows;
} gradref__sgemm_kernels;

/* The table of the highest level at or below max_isa (common/isa.h) that the CPU runs. */
const gradref__sgemm_kernels *gradref__sgemm_kernels_for(int max_isa);

extern const gradref__sgemm_kernels gradref__sgemm_kernels_portable;

#ifdef GRADREF__X86
extern const gradref__sgemm_kernels gradref__sgemm_kernels_avx2;
extern const gradref__sgemm_kernels gradref__sgemm_kernels_avx512;
/* The indirect AVX-512 micro-kernel (the CPU must have AVX-512F and FMA): for i < rows (1 .. 14)
 * and j < cols (1 .. 32), c[i * ldc + j] = the chain over p < k from +0 of
 * a_rows[p][a_off + i * a_cs] * b[p * 32 + j]. Row p of A is wherever a_rows[p] points (an
 * implicit im2col without copies); a NULL row is skipped, which equals a row of zeros when B is
 * finite (fma(0, b, acc) = acc: acc starts at +0 and never becomes -0). b is one packed B panel
 * of 32 columns. Columns past cols are not stored. */
void gradref__sgemm_indirect_avx512(int rows, int cols, int64_t k, const float *const *a_rows,
                                    int64_t a_off, int64_t a_cs, const float *b, float *c,
                                    int64_t ldc);
/* The indirect AVX2 micro-kernel (the CPU must have AVX2 and FMA): the same for rows 1 .. 6 and
 * cols 1 .. 16, b one packed B panel of 16 columns. */
void gradref__sgemm_indirect_avx2(int rows, int cols, int64_t k, const float *const *a_rows,
                                  int64_t a_off, int64_t a_cs, const float *b, float *c,
                                  int64_t ldc);
#endif

#ifdef GRADREF__ARM64
extern const gradref__sgemm_kernels gradref__sgemm_kernels_neon;
#endif

#endif
