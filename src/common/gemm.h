/* SPDX-License-Identifier: Apache-2.0 */
/* Packed, register-blocked single-precision GEMM shared by the convolution operators.
 *
 *   C[i][j] = fma(A[i][K-1], B[K-1][j], ... fma(A[i][1], B[1][j], fma(A[i][0], B[0][j], c0)))
 *
 * with c0 = +0 (accumulate == 0) or the C element's value on entry: every element is one
 * chain of fused multiply-adds in ascending k, rounded once per step (C99 fmaf). The AVX-512
 * and AVX2+FMA micro-kernels and the portable C one all compute exactly this chain, so the
 * result does not depend on the CPU, the blocking, or how callers split C between threads.
 * A call is single-threaded; callers give each thread its own C block and work buffer. */
#ifndef GRADREF_COMMON_GEMM_H
#define GRADREF_COMMON_GEMM_H

#include <stddef.h>
#include <stdint.h>

/* Writes the panels of rows [i0, i0 + mc) (A) or columns [j0, j0 + nc) (B) for k in
 * [k0, k0 + kc): panel p (of `width` rows or columns) holds kc runs of `width` values, k-major,
 * zero past the matrix edge. Lets a caller pack an implicit matrix (im2col) directly. */
typedef void (*gradref__gemm_packer)(const void *ctx, int64_t k0, int64_t kc, int64_t first,
                                     int64_t count, int width, float *dst);

/* Element (i, k) of A is a[i * a_rs + k * a_cs]; likewise B (k, j) and C (i, j). A packer,
 * when given, replaces the strided reads of its operand. */
typedef struct gradref__sgemm_args {
    int64_t M, N, K;
    const float *a;
    int64_t a_rs, a_cs;
    const float *b;
    int64_t b_rs, b_cs;
    float *c;
    int64_t c_rs, c_cs;
    int accumulate; /* 0: C is overwritten (chains start at +0); 1: chains start at C */
    gradref__gemm_packer pack_a, pack_b;
    const void *pack_a_ctx, *pack_b_ctx;
    /* A already in panels of gradref__sgemm_mr(max_isa) rows, each K x MR floats k-major, zero
     * past row M: row i0 of this call must start a panel; a, the strides and pack_a are then
     * unused */
    const float *a_panels;
    /* B already in panels of gradref__sgemm_nr(max_isa) columns, each K x NR floats k-major,
     * zero past column N; b, its strides and pack_b are then unused */
    const float *b_panels;
} gradref__sgemm_args;

/* Bytes of the work buffer one call needs (packed panels), whatever the sizes. */
size_t gradref__sgemm_work_bytes(void);

/* The panel height and width of the kernels a call with max_isa (common/isa.h) runs: prepacked
 * A panels and row blocks that start a panel use them. */
int64_t gradref__sgemm_mr(int max_isa);
int64_t gradref__sgemm_nr(int max_isa);

/* Runs the GEMM with the kernels of the highest level at or below max_isa that the CPU runs;
 * `work` holds gradref__sgemm_work_bytes() bytes aligned to 64 (none, and may be NULL, when
 * a_panels and b_panels are both given). */
void gradref__sgemm(const gradref__sgemm_args *g, int max_isa, void *work);

/* The same chains with small blocks, for callers without a workspace: K in slices of kc taken
 * in ascending order, the outermost loop; in a slice, columns nc at a time (a multiple of the
 * level's nr, at least one panel), packed once, and for each, rows in blocks of two panels (a
 * block of B outlives many of A: nc is the larger, so fewer values are packed). `work` holds
 * GRADREF__SGEMM_SMALL_FLOATS(kc, nc) floats, aligned to 64, small enough for a thread's stack;
 * a_panels and b_panels are not read. */
#define GRADREF__SGEMM_SMALL_FLOATS(kc, nc) (2 * 14 * (kc) + (kc) * (nc))
void gradref__sgemm_small(const gradref__sgemm_args *g, int max_isa, float *work, int64_t kc,
                          int64_t nc);

#endif
