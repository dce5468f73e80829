/* SPDX-License-Identifier: Apache-2.0 */
/* BLIS-style loops around the micro-kernels (gemm_kernels.h; the portable one is here): C is cut
 * into NC-column and MC-row blocks, K into KC slices taken in ascending order (so each element's
 * chain of fused multiply-adds runs k = 0, 1, ... whatever the blocking), A and B are packed into
 * MR-row and NR-column panels padded with zeros, and each MR x NR tile is one micro-kernel call per
 * slice. Padded rows and columns only ever reach tile elements that are not stored. */
#include <math.h>
#include <string.h>

#include "fma.h"
#include "gemm.h"
#include "gemm_kernels.h"
#include "isa.h"

#define KC 256
#define MC 168 /* a multiple of every MR (14, 6, 8, 12) */
#define NC 512 /* a multiple of every NR (32, 16, 8) */

size_t gradref__sgemm_work_bytes(void) {
    return (size_t)(MC * KC + KC * NC) * sizeof(float) + 64;
}

/* The portable micro-kernel: the same chains with fmaf. */
static void kernel_portable(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                            int load) {
    enum { MR = GRADREF__PORTABLE_MR, NR = GRADREF__PORTABLE_NR };
    float acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            acc[i][j] = load ? c[i * ldc + j] : 0.0f;
    for (int64_t p = 0; p < k; p++)
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++)
                acc[i][j] = gradref__fmaf(a[p * MR + i], b[p * NR + j], acc[i][j]);
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            c[i * ldc + j] = acc[i][j];
}

/* A[i0.., k0..] into panels of mr rows: panel p holds k-major runs of mr values. */
static void pack_a(const gradref__sgemm_args *g, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                   int mr, float *dst) {
    for (int64_t ip = 0; ip < mc; ip += mr) {
        const int64_t rows = mc - ip < mr ? mc - ip : mr;
        for (int64_t p = 0; p < kc; p++) {
            const float *src = g->a + (i0 + ip) * g->a_rs + (k0 + p) * g->a_cs;
            int64_t i = 0;
            for (; i < rows; i++)
                dst[i] = src[i * g->a_rs];
            for (; i < mr; i++)
                dst[i] = 0.0f;
            dst += mr;
        }
    }
}

/* B[k0.., j0..] into panels of nr columns: panel q holds k-major runs of nr values. */
static void pack_b(const gradref__sgemm_args *g, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                   int nr, float *dst) {
    for (int64_t jp = 0; jp < nc; jp += nr) {
        const int64_t cols = nc - jp < nr ? nc - jp : nr;
        for (int64_t p = 0; p < kc; p++) {
            const float *src = g->b + (k0 + p) * g->b_rs + (j0 + jp) * g->b_cs;
            int64_t j = 0;
            if (g->b_cs == 1) {
                memcpy(dst, src, (size_t)cols * sizeof *dst);
                j = cols;
            } else {
                for (; j < cols; j++)
                    dst[j] = src[j * g->b_cs];
            }
            for (; j < nr; j++)
                dst[j] = 0.0f;
            dst += nr;
        }
    }
}

const gradref__sgemm_kernels gradref__sgemm_kernels_portable = {
    .isa = "portable",
    .mr = GRADREF__PORTABLE_MR,
    .nr = GRADREF__PORTABLE_NR,
    .micro = kernel_portable,
};

const gradref__sgemm_kernels *gradref__sgemm_kernels_for(int max_isa) {
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &gradref__sgemm_kernels_portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &gradref__sgemm_kernels_avx2,
        [GRADREF__ISA_AVX512] = &gradref__sgemm_kernels_avx512,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &gradref__sgemm_kernels_neon,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}

int64_t gradref__sgemm_mr(int max_isa) {
    return gradref__sgemm_kernels_for(max_isa)->mr;
}

int64_t gradref__sgemm_nr(int max_isa) {
    return gradref__sgemm_kernels_for(max_isa)->nr;
}

/* The loops with the blocking sizes given (MC a multiple of the level's mr, NC of its nr). */
static void sgemm_blocked(const gradref__sgemm_args *g, int max_isa, void *work, int64_t MC_,
                          int64_t KC_, int64_t NC_);

void gradref__sgemm(const gradref__sgemm_args *g, int max_isa, void *work) {
    sgemm_blocked(g, max_isa, work, MC, KC, NC);
}

/* One micro-kernel call on the tile at c (rows x cols of C, strides g's), through a local
 * copy when it is an edge or strided tile. */
static void run_tile(const gradref__sgemm_args *g, gradref__sgemm_micro micro, int mr, int nr,
                     int64_t kc, const float *ap, const float *bp, float *c, int64_t rows,
                     int64_t cols, int load) {
    if (rows == mr && cols == nr && g->c_cs == 1) {
        micro(kc, ap, bp, c, g->c_rs, load);
        return;
    }
    float tile[GRADREF__GEMM_MAX_TILE];
    for (int64_t i = 0; i < mr; i++)
        for (int64_t j = 0; j < nr; j++)
            tile[i * nr + j] = load && i < rows && j < cols ? c[i * g->c_rs + j * g->c_cs] : 0.0f;
    micro(kc, ap, bp, tile, nr, load);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            c[i * g->c_rs + j * g->c_cs] = tile[i * nr + j];
}

void gradref__sgemm_small(const gradref__sgemm_args *g, int max_isa, float *work, int64_t KC_,
                          int64_t nc) {
    const gradref__sgemm_kernels *kt = gradref__sgemm_kernels_for(max_isa);
    const int mr = kt->mr, nr = kt->nr;
    const int64_t MC_ = 2 * (int64_t)mr, NC_ = nc > nr ? nc / nr * nr : nr;
    if (g->M <= 0 || g->N <= 0) return;
    if (g->K <= 0) {
        sgemm_blocked(g, max_isa, work, MC_, KC_, NC_); /* +0, or C as it is */
        return;
    }
    float *apack = work, *bpack = work + MC_ * KC_;
    for (int64_t k0 = 0; k0 < g->K; k0 += KC_) {
        const int64_t kc = g->K - k0 < KC_ ? g->K - k0 : KC_;
        const int load = g->accumulate || k0 > 0;
        for (int64_t j0 = 0; j0 < g->N; j0 += NC_) {
            const int64_t ncols = g->N - j0 < NC_ ? g->N - j0 : NC_;
            if (g->pack_b)
                g->pack_b(g->pack_b_ctx, k0, kc, j0, ncols, nr, bpack);
            else
                pack_b(g, k0, kc, j0, ncols, nr, bpack);
            for (int64_t i0 = 0; i0 < g->M; i0 += MC_) {
                const int64_t mc = g->M - i0 < MC_ ? g->M - i0 : MC_;
                if (g->pack_a)
                    g->pack_a(g->pack_a_ctx, k0, kc, i0, mc, mr, apack);
                else
                    pack_a(g, i0, mc, k0, kc, mr, apack);
                for (int64_t jr = 0; jr < ncols; jr += nr)
                    for (int64_t ir = 0; ir < mc; ir += mr)
                        run_tile(g, kt->micro, mr, nr, kc, apack + (ir / mr) * kc * mr,
                                 bpack + (jr / nr) * kc * nr,
                                 g->c + (i0 + ir) * g->c_rs + (j0 + jr) * g->c_cs,
                                 mc - ir < mr ? mc - ir : mr, ncols - jr < nr ? ncols - jr : nr,
                                 load);
            }
        }
    }
}

static void sgemm_blocked(const gradref__sgemm_args *g, int max_isa, void *work, int64_t MC_,
                          int64_t KC_, int64_t NC_) {
    if (g->M <= 0 || g->N <= 0) return;
    const gradref__sgemm_kernels *kt = gradref__sgemm_kernels_for(max_isa);
    const gradref__sgemm_micro micro = kt->micro;
    const int mr = kt->mr, nr = kt->nr;
    if (g->K <= 0) { /* empty chains: +0, or C as it is */
        if (!g->accumulate)
            for (int64_t i = 0; i < g->M; i++)
                for (int64_t j = 0; j < g->N; j++)
                    g->c[i * g->c_rs + j * g->c_cs] = 0.0f;
        return;
    }
    /* A's part unused with a_panels; neither part with both (work may then be NULL) */
    float *apack = (float *)work;
    float *bpack = g->b_panels ? NULL : g->a_panels ? apack : apack + MC_ * KC_;
    for (int64_t j0 = 0; j0 < g->N; j0 += NC_) {
        const int64_t nc = g->N - j0 < NC_ ? g->N - j0 : NC_;
        for (int64_t k0 = 0; k0 < g->K; k0 += KC_) {
            const int64_t kc = g->K - k0 < KC_ ? g->K - k0 : KC_;
            const int load = g->accumulate || k0 > 0;
            const float *bpanels = bpack;
            int64_t bstep = kc * nr; /* floats from one B panel to the next */
            if (g->b_panels) {
                bpanels = g->b_panels + (j0 / nr) * g->K * nr + k0 * nr;
                bstep = g->K * nr;
            } else if (g->pack_b) {
                g->pack_b(g->pack_b_ctx, k0, kc, j0, nc, nr, bpack);
            } else {
                pack_b(g, k0, kc, j0, nc, nr, bpack);
            }
            for (int64_t i0 = 0; i0 < g->M; i0 += MC_) {
                const int64_t mc = g->M - i0 < MC_ ? g->M - i0 : MC_;
                if (g->a_panels == NULL) {
                    if (g->pack_a)
                        g->pack_a(g->pack_a_ctx, k0, kc, i0, mc, mr, apack);
                    else
                        pack_a(g, i0, mc, k0, kc, mr, apack);
                }
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    const int64_t cols = nc - jr < nr ? nc - jr : nr;
                    const float *bp = bpanels + (jr / nr) * bstep;
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        const float *ap = g->a_panels
                                              ? g->a_panels + ((i0 + ir) / mr) * g->K * mr + k0 * mr
                                              : apack + (ir / mr) * kc * mr;
                        run_tile(g, micro, mr, nr, kc, ap, bp,
                                 g->c + (i0 + ir) * g->c_rs + (j0 + jr) * g->c_cs,
                                 mc - ir < mr ? mc - ir : mr, cols, load);
                    }
                }
            }
        }
    }
}
