/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's no-workspace path (a caller workspace too small for one thread's
 * share): the fast path's block GEMMs with stack buffers only. A work item is one GEMM tile of
 * dw (group g, mr rows j = (tap, ci), nr columns co); each block of GRADREF__C3F_BLOCK reduction
 * indices r = (n, od, oh, ow) is one gradref__sgemm_small call from +0 (x and dy packed from
 * the caller's tensors, widened and, at the HF32 precisions, rounded to HF32 as they are read;
 * x is 0 where a tap falls outside it), pushed into the tile's summation counter, whose fold is
 * dw. Each dw element is thus the reference's block chains combined in its order; the zero terms
 * are exact for a finite dy (c3f_fast.c), which the path checks first. */
#include <math.h>
#include <string.h>

#include "c3f_counter.h"
#include "c3f_internal.h"
#include "common/convert.h"
#include "common/exec.h"
#include "common/gemm.h"
#include "common/gemm_kernels.h"

enum {
    MAX_LEVELS = 32, /* 2^32 blocks of reduction indices */
    MAX_TILE = GRADREF__AVX512_MR * GRADREF__AVX512_NR
};

typedef struct direct {
    const gradref__c3f_plan *p;
    int64_t g, j0, co0, r0;
    int hf32; /* kept bits at an HF32 precision, else 0 */
} direct;

static float value(const gradref__c3f_plan *p, const char *base, int64_t e, int hf32) {
    const float v = p->in_dtype == GRADREF_F32
                        ? ((const float *)(const void *)base)[e]
                        : (float)gradref__load_float(p->in_dtype, base + (size_t)e * p->in_size);
    return hf32 ? gradref__hf32_round(v, hf32) : v;
}

/* The reduction index r as (n, od, oh, ow). */
static void decode(const gradref__c3f_plan *p, int64_t r, int64_t *o) {
    o[3] = r % p->O[2];
    o[2] = r / p->O[2] % p->O[1];
    o[1] = r / (p->O[2] * p->O[1]) % p->O[0];
    o[0] = r / (p->O[2] * p->O[1] * p->O[0]);
}

/* A (rows j = (tap, ci) from j0 + first, k = the block's r from r0 + k0): x at the tap, 0
 * outside x. Row by row, the reduction index walked as counters (no division per element). */
static void pack_a_x(const void *ctx, int64_t k0, int64_t kc, int64_t first, int64_t count,
                     int width, float *dst) {
    const direct *d = ctx;
    const gradref__c3f_plan *p = d->p;
    const int64_t T = p->K[0] * p->K[1] * p->K[2];
    int64_t start[4];
    decode(p, d->r0 + k0, start);
    for (int64_t i0 = 0; i0 < count; i0 += width, dst += kc * width) {
        const int64_t rows = count - i0 < width ? count - i0 : width;
        for (int64_t i = 0; i < width; i++) {
            const int64_t j = d->j0 + first + i0 + i, t = j / p->Cin_g, ci = j % p->Cin_g;
            if (i >= rows || t >= T) { /* past the last row */
                for (int64_t k = 0; k < kc; k++)
                    dst[k * width + i] = 0.0f;
                continue;
            }
            const int64_t kk[3] = {t / (p->K[1] * p->K[2]), t / p->K[2] % p->K[1], t % p->K[2]};
            int64_t shift[3]; /* input index = o * stride + shift */
            for (int q = 0; q < 3; q++) {
                const int64_t kp =
                    p->mode == GRADREF_CONV_CROSS_CORRELATION ? kk[q] : p->K[q] - 1 - kk[q];
                shift[q] = kp * p->dil[q] - p->pad_begin[q];
            }
            const int64_t channel = (d->g * p->Cin_g + ci) * p->xs[1];
            int64_t o[4] = {start[0], start[1], start[2], start[3]};
            for (int64_t k = 0; k < kc; k++) {
                const int64_t id = o[1] * p->stride[0] + shift[0],
                              ih = o[2] * p->stride[1] + shift[1],
                              iw = o[3] * p->stride[2] + shift[2];
                float v = 0.0f;
                if (id >= 0 && id < p->I[0] && ih >= 0 && ih < p->I[1] && iw >= 0 && iw < p->I[2])
                    v = value(p, p->x,
                              o[0] * p->xs[0] + channel + id * p->xs[2] + ih * p->xs[3] +
                                  iw * p->xs[4],
                              d->hf32);
                dst[k * width + i] = v;
                if (++o[3] == p->O[2]) { /* the next r */
                    o[3] = 0;
                    if (++o[2] == p->O[1]) {
                        o[2] = 0;
                        if (++o[1] == p->O[0]) o[1] = 0, o[0]++;
                    }
                }
            }
        }
    }
}

/* B (k = the block's r from r0 + k0, columns co from co0 + first): dy. Column by column, the
 * reduction index walked as counters (a channel's dy is read along its rows). */
static void pack_b_dy(const void *ctx, int64_t k0, int64_t kc, int64_t first, int64_t count,
                      int width, float *dst) {
    const direct *d = ctx;
    const gradref__c3f_plan *p = d->p;
    int64_t start[4];
    decode(p, d->r0 + k0, start);
    for (int64_t c0 = 0; c0 < count; c0 += width, dst += kc * width) {
        const int64_t cols = count - c0 < width ? count - c0 : width;
        for (int64_t c = 0; c < width; c++) {
            if (c >= cols) {
                for (int64_t k = 0; k < kc; k++)
                    dst[k * width + c] = 0.0f;
                continue;
            }
            const int64_t channel = (d->g * p->Cout_g + d->co0 + first + c0 + c) * p->ys[1];
            int64_t o[4] = {start[0], start[1], start[2], start[3]};
            for (int64_t k = 0; k < kc; k++) {
                dst[k * width + c] = value(p, p->dy,
                                           o[0] * p->ys[0] + channel + o[1] * p->ys[2] +
                                               o[2] * p->ys[3] + o[3] * p->ys[4],
                                           d->hf32);
                if (++o[3] == p->O[2]) {
                    o[3] = 0;
                    if (++o[2] == p->O[1]) {
                        o[2] = 0;
                        if (++o[1] == p->O[0]) o[1] = 0, o[0]++;
                    }
                }
            }
        }
    }
}

static int64_t reductions(const gradref__c3f_plan *p) {
    return p->N * p->O[0] * p->O[1] * p->O[2];
}

static int levels_for(int64_t blocks) {
    int levels = 1;
    while (levels < 63 && (INT64_C(1) << levels) <= blocks)
        levels++;
    return levels;
}

/* One tile: rows [j0, j0 + M), columns [co0, co0 + N) of group g. */
static void tile(const gradref__c3f_plan *p, int64_t g, int64_t j0, int64_t M, int64_t co0,
                 int64_t N) {
    __attribute__((aligned(64))) float work[GRADREF__SGEMM_SMALL_WORK_FLOATS];
    __attribute__((aligned(64))) float level[(MAX_LEVELS + 1) * MAX_TILE];
    const int64_t R = reductions(p), blocks = (R + GRADREF__C3F_BLOCK - 1) / GRADREF__C3F_BLOCK;
    direct d = {p, g, j0, co0, 0, gradref__hf32_kept_bits(p->precision)};
    gradref__c3f_counter c = gradref__c3f_counter_make(gradref__c3f_kernels_for(p->max_isa), level,
                                                       M * N, levels_for(blocks));
    gradref__sgemm_args a;
    memset(&a, 0, sizeof a);
    a.M = M;
    a.N = N;
    a.pack_a = pack_a_x;
    a.pack_b = pack_b_dy;
    a.pack_a_ctx = a.pack_b_ctx = &d;
    a.c_rs = N;
    a.c_cs = 1;
    for (int64_t b = 0; b < blocks; b++) {
        d.r0 = b * GRADREF__C3F_BLOCK;
        a.K = R - d.r0 < GRADREF__C3F_BLOCK ? R - d.r0 : GRADREF__C3F_BLOCK;
        a.c = gradref__c3f_counter_slot(&c);
        gradref__sgemm_small(&a, p->max_isa, work);
        gradref__c3f_counter_push(&c);
    }
    const float *sum = blocks > 0 ? gradref__c3f_counter_fold(&c, NULL) : NULL;
    const int64_t T = p->K[0] * p->K[1] * p->K[2];
    for (int64_t i = 0; i < M; i++) {
        const int64_t j = j0 + i, t = j / p->Cin_g, ci = j % p->Cin_g;
        const int64_t k0 = t / (p->K[1] * p->K[2]), k1 = t / p->K[2] % p->K[1], k2 = t % p->K[2];
        if (t >= T) continue;
        for (int64_t n = 0; n < N; n++) {
            const int64_t co = g * p->Cout_g + co0 + n;
            char *e = p->dw + (size_t)(co * p->ws[0] + ci * p->ws[1] + k0 * p->ws[2] +
                                       k1 * p->ws[3] + k2 * p->ws[4]) *
                                  p->out_size;
            gradref__store_float(p->out_dtype, e, sum ? (double)sum[i * N + n] : 0.0);
        }
    }
}

/* Whether the path takes plan p: the fast path's dtypes and precisions (not F64 or HIGH), few
 * enough blocks for the stack's counter, and a finite dy (as the GEMM reads it). */
int gradref__c3f_direct_fits(const gradref__c3f_plan *p) {
    if (p->in_dtype == GRADREF_F64 || p->precision == GRADREF_PRECISION_HIGH) return 0;
    const int64_t blocks = (reductions(p) + GRADREF__C3F_BLOCK - 1) / GRADREF__C3F_BLOCK;
    if (levels_for(blocks) > MAX_LEVELS) return 0;
    const int hf32 = gradref__hf32_kept_bits(p->precision);
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t co = 0; co < p->G * p->Cout_g; co++)
            for (int64_t od = 0; od < p->O[0]; od++)
                for (int64_t oh = 0; oh < p->O[1]; oh++)
                    for (int64_t ow = 0; ow < p->O[2]; ow++)
                        if (!isfinite(value(p, p->dy,
                                            n * p->ys[0] + co * p->ys[1] + od * p->ys[2] +
                                                oh * p->ys[3] + ow * p->ys[4],
                                            hf32)))
                            return 0;
    return 1;
}

typedef struct tiling {
    const gradref__c3f_plan *p;
    int64_t mr, nr, row_tiles, col_tiles;
} tiling;

static void tiles(const void *arg, int64_t begin, int64_t end) {
    const tiling *t = arg;
    const gradref__c3f_plan *p = t->p;
    const int64_t J = p->K[0] * p->K[1] * p->K[2] * p->Cin_g;
    for (int64_t it = begin; it < end; it++) {
        const int64_t g = it / (t->row_tiles * t->col_tiles);
        const int64_t j0 = it / t->col_tiles % t->row_tiles * t->mr;
        const int64_t co0 = it % t->col_tiles * t->nr;
        tile(p, g, j0, J - j0 < t->mr ? J - j0 : t->mr, co0,
             p->Cout_g - co0 < t->nr ? p->Cout_g - co0 : t->nr);
    }
}

void gradref__c3f_direct(const gradref__c3f_plan *p, int threads) {
    tiling t;
    t.p = p;
    t.mr = gradref__sgemm_mr(p->max_isa);
    t.nr = gradref__sgemm_nr(p->max_isa);
    const int64_t J = p->K[0] * p->K[1] * p->K[2] * p->Cin_g;
    t.row_tiles = (J + t.mr - 1) / t.mr;
    t.col_tiles = (p->Cout_g + t.nr - 1) / t.nr;
    gradref__parallel_ranges(p->G * t.row_tiles * t.col_tiles, threads, tiles, &t);
}
