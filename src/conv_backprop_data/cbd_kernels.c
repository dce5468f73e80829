/* SPDX-License-Identifier: Apache-2.0 */
/* The portable depthwise row kernel and the kernel tables of every ISA (cbd_avx2.c,
 * cbd_avx512.c, cbd_neon.c). */
#include "cbd_kernels.h"

#include <math.h>
#include <string.h>

#include "common/fma.h"
#include "common/gemm.h"
#include "common/isa.h"

/* Row (i0, i1) of grad: the diff rows its row taps reach, in the chain's order. Returns how
 * many, filling rows[] and the stored row-tap index base (k0 * K1 + k1) * K2. */
static int64_t row_taps(const gradref__cbd_dw_shape *p, const float *diff, int64_t i0, int64_t i1,
                        const float **rows, int64_t *base) {
    int64_t n = 0;
    for (int64_t kp0 = p->K[0] - 1; kp0 >= 0; kp0--) {
        const int64_t o0 = i0 + p->pad[0] - kp0 * p->dil[0];
        if (o0 < 0 || o0 >= p->O[0]) continue;
        for (int64_t kp1 = p->K[1] - 1; kp1 >= 0; kp1--) {
            const int64_t o1 = i1 + p->pad[1] - kp1 * p->dil[1];
            if (o1 < 0 || o1 >= p->O[1]) continue;
            rows[n] = diff + (o0 * p->O[1] + o1) * p->O[2];
            base[n] = (gradref__cbd_stored(p, 0, kp0) * p->K[1] + gradref__cbd_stored(p, 1, kp1)) *
                      p->K[2];
            n++;
        }
    }
    return n;
}

static void row_portable(const gradref__cbd_dw_shape *p, const float *w, const float *const *rows,
                         const int64_t *base, int64_t nrows, float *out) {
    for (int64_t i2 = 0; i2 < p->I[2]; i2++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t o2 = i2 + gradref__cbd_column_shift(p, kp2);
                if (o2 >= 0 && o2 < p->O[2])
                    acc = gradref__fmaf(w[base[r] + gradref__cbd_stored(p, 2, kp2)], rows[r][o2],
                                        acc);
            }
        out[i2] = acc;
    }
}

gradref__cbd_dw_shape gradref__cbd_dw_shape_of(const gradref__cbd_plan *p) {
    gradref__cbd_dw_shape s;
    for (int j = 0; j < 3; j++) {
        s.I[j] = p->I[j];
        s.O[j] = p->O[j];
        s.K[j] = p->K[j];
        s.pad[j] = p->pad_begin[j];
        s.dil[j] = p->dil[j];
        s.stride[j] = p->stride[j];
    }
    s.flip = p->mode != GRADREF_CONV_CROSS_CORRELATION;
    return s;
}

/* Stride phase r along dim j of a strided depthwise channel as a stride-1 one (I, K, pad,
 * dil of its sub-grid and taps): the taps reaching grad index r + stride t are kp = first +
 * step m (m < K), at diff position t + pad - m dil. Returns 0 when pad would be negative (a
 * dilation past the stride puts the phase's first tap beyond the padding). */
typedef struct dw_phase_dim {
    int64_t I, K, pad, dil, first, step;
} dw_phase_dim;
static int phase_dim(const gradref__cbd_dw_shape *s, int j, int64_t r, dw_phase_dim *d) {
    const int64_t st = s->stride[j];
    memset(d, 0, sizeof *d);
    d->I = r < s->I[j] ? (s->I[j] - r + st - 1) / st : 0;
    d->dil = 1;
    for (int64_t kp = 0; kp < s->K[j]; kp++) {
        if ((r + s->pad[j] - kp * s->dil[j]) % st != 0) continue;
        if (d->K == 0) d->first = kp;
        if (d->K == 1) d->step = kp - d->first;
        d->K++;
    }
    if (d->K == 0) return 1;
    d->pad = (r + s->pad[j] - d->first * s->dil[j]) / st; /* exact */
    if (d->K > 1) d->dil = d->step * s->dil[j] / st;      /* exact: a multiple of the stride */
    return d->pad >= 0;
}

int gradref__cbd_dw_strided_fits(const gradref__cbd_dw_shape *s) {
    if (s->K[0] * s->K[1] * s->K[2] > GRADREF__CBD_DW_STRIDED_TAPS ||
        s->stride[2] > GRADREF__CBD_DW_STRIDED_COLUMNS)
        return 0;
    dw_phase_dim d;
    for (int j = 0; j < 3; j++)
        for (int64_t r = 0; r < s->stride[j]; r++)
            if (!phase_dim(s, j, r, &d)) return 0;
    return 1;
}

int64_t gradref__cbd_dw_strided_floats(const gradref__cbd_dw_shape *s) {
    const int64_t rows =
        (s->I[0] + s->stride[0] - 1) / s->stride[0] * ((s->I[1] + s->stride[1] - 1) / s->stride[1]);
    return rows * (s->I[2] + s->stride[2]);
}

/* Stride phase (r0, r1, r2) as the stride-1 channel *v with its filter in v_w; returns
 * whether any tap reaches it. */
static int phase_channel(const gradref__cbd_dw_shape *s, const float *w, const int64_t r[3],
                         gradref__cbd_dw_shape *v, float *v_w) {
    dw_phase_dim d[3];
    int reached = 1;
    for (int j = 0; j < 3; j++) {
        phase_dim(s, j, r[j], &d[j]);
        v->I[j] = d[j].I, v->O[j] = s->O[j], v->K[j] = d[j].K;
        v->pad[j] = d[j].pad, v->dil[j] = d[j].dil, v->stride[j] = 1;
        reached &= d[j].K > 0;
    }
    v->flip = 0;
    for (int64_t m0 = 0; m0 < v->K[0]; m0++)
        for (int64_t m1 = 0; m1 < v->K[1]; m1++)
            for (int64_t m2 = 0; m2 < v->K[2]; m2++) {
                const int64_t k0 = gradref__cbd_stored(s, 0, d[0].first + d[0].step * m0);
                const int64_t k1 = gradref__cbd_stored(s, 1, d[1].first + d[1].step * m1);
                const int64_t k2 = gradref__cbd_stored(s, 2, d[2].first + d[2].step * m2);
                v_w[(m0 * v->K[1] + m1) * v->K[2] + m2] = w[(k0 * s->K[1] + k1) * s->K[2] + k2];
            }
    return reached;
}

/* The phases (r0, r1, every r2) of grad rows, each phase's plane in scratch (cols[r2] values
 * a row), to their places in grad: two column phases of an even row by interleave2. */
static void phase_rows_out(const gradref__cbd_kernels *k, const gradref__cbd_dw_shape *s,
                           const int64_t r[2], const float *const *phase, const int64_t *cols,
                           int64_t rows0, int64_t rows1, float *grad) {
    const int64_t s2 = s->stride[2], I2 = s->I[2];
    for (int64_t u0 = 0; u0 < rows0; u0++) {
        float *row = grad + ((r[0] + s->stride[0] * u0) * s->I[1] + r[1]) * I2;
        const int64_t at = u0 * rows1, row_stride = s->stride[1] * I2;
        if (s2 == 2 && I2 % 2 == 0 && k->interleave2) {
            k->interleave2(phase[0] + at * cols[0], phase[1] + at * cols[1], I2 / 2, rows1, row,
                           row_stride, 0);
            continue;
        }
        for (int64_t u1 = 0; u1 < rows1; u1++)
            for (int64_t r2 = 0; r2 < s2 && r2 < I2; r2++) {
                const float *from = phase[r2] + (at + u1) * cols[r2];
                for (int64_t u2 = 0; u2 < cols[r2]; u2++)
                    row[u1 * row_stride + r2 + s2 * u2] = from[u2];
            }
    }
}

/* A depthwise channel by whole planes: each grad plane from the diff planes its depth taps
 * reach (at any depth stride and dilation), in the chain's order (kp0 descending), each with
 * its slice of the filter, by `kernel` (dw_plane3x3 or dw_plane_s2) on one plane's shape. */
typedef int (*plane_kernel)(const gradref__cbd_dw_shape *s, const float *const *w,
                            const float *const *diff, int64_t planes, float *grad);
static int depthwise_planes(plane_kernel kernel, const gradref__cbd_dw_shape *p, const float *w,
                            const float *diff, float *grad) {
    const int64_t O_plane = p->O[1] * p->O[2], I_plane = p->I[1] * p->I[2];
    gradref__cbd_dw_shape flat = *p; /* one plane */
    flat.I[0] = flat.O[0] = flat.K[0] = flat.stride[0] = flat.dil[0] = 1, flat.pad[0] = 0;
    int hit = 0;
    for (int64_t i0 = 0; i0 < p->I[0]; i0++) {
        const float *slice[GRADREF__CBD_DW_PLANES], *plane[GRADREF__CBD_DW_PLANES];
        int64_t n = 0;
        for (int64_t kp0 = p->K[0] - 1; kp0 >= 0; kp0--) {
            const int64_t at = i0 + p->pad[0] - kp0 * p->dil[0], st = p->stride[0];
            if (at < 0 || (st > 1 && at % st != 0)) continue; /* no division at stride 1 */
            const int64_t o0 = st > 1 ? at / st : at;
            if (o0 >= p->O[0]) continue;
            slice[n] = w + gradref__cbd_stored(p, 0, kp0) * p->K[1] * p->K[2];
            plane[n++] = diff + o0 * O_plane;
        }
        float *out = grad + i0 * I_plane;
        if (n == 0) { /* no depth tap: the reference's empty chains */
            memset(out, 0, (size_t)I_plane * sizeof(float));
            hit = 1;
            continue;
        }
        hit |= kernel(&flat, slice, plane, n, out);
    }
    return hit;
}

int gradref__cbd_depthwise_strided(const gradref__cbd_kernels *k, const gradref__cbd_dw_shape *s,
                                   const float *w, const float *diff, float *grad, float *scratch) {
    if (k->dw_plane_s2 && gradref__cbd_s2_plane(s))
        return depthwise_planes(k->dw_plane_s2, s, w, diff, grad);
    float v_w[GRADREF__CBD_DW_STRIDED_TAPS];
    int hit = 0;
    int64_t r[3];
    for (r[0] = 0; r[0] < s->stride[0] && r[0] < s->I[0]; r[0]++)
        for (r[1] = 0; r[1] < s->stride[1] && r[1] < s->I[1]; r[1]++) {
            const float *phase[GRADREF__CBD_DW_STRIDED_COLUMNS];
            int64_t cols[GRADREF__CBD_DW_STRIDED_COLUMNS], rows0 = 0, rows1 = 0;
            float *at = scratch;
            for (r[2] = 0; r[2] < s->stride[2] && r[2] < s->I[2]; r[2]++) {
                gradref__cbd_dw_shape v;
                const int reached = phase_channel(s, w, r, &v, v_w);
                rows0 = v.I[0], rows1 = v.I[1], cols[r[2]] = v.I[2];
                phase[r[2]] = at;
                const int64_t n = v.I[0] * v.I[1] * v.I[2];
                if (!reached) { /* no tap: the reference's empty chain, +0 */
                    memset(at, 0, (size_t)n * sizeof *at);
                    hit = 1;
                } else
                    hit |= gradref__cbd_depthwise_plane(k, &v, v_w, diff, at);
                at += n;
            }
            phase_rows_out(k, s, r, phase, cols, rows0, rows1, grad);
        }
    return hit;
}

/* dw_cl_row by plain loops, four channels a block. */
enum { CL_LANES_PORTABLE = 4 };
static int cl_row_portable(const gradref__cbd_cl_row *a) {
    int nan = 0;
    for (int64_t B = 0; B < a->blocks; B++)
        for (int64_t i2 = 0; i2 < a->I2; i2++) {
            float acc[CL_LANES_PORTABLE] = {0.0f, 0.0f, 0.0f, 0.0f};
            int64_t t0, t1;
            gradref__cbd_cl_taps(a, i2, &t0, &t1);
            for (int64_t r = 0; r < a->nrows; r++)
                for (int64_t t = t0; t < t1; t++) {
                    const float *w = a->w[r] + B * a->wb + a->wcol[t] * CL_LANES_PORTABLE;
                    const float *d =
                        a->rows[r] + B * a->bstride + (i2 + a->shift[t]) * CL_LANES_PORTABLE;
                    for (int l = 0; l < CL_LANES_PORTABLE; l++)
                        acc[l] = gradref__fmaf(w[l], d[l], acc[l]);
                }
            float *g = a->grad + i2 * a->gp + B * CL_LANES_PORTABLE;
            for (int l = 0; l < CL_LANES_PORTABLE; l++) {
                g[l] = acc[l];
                nan |= acc[l] != acc[l];
            }
        }
    return nan;
}

static void cl_stage_portable(const float *src, int64_t sp, int64_t n, int64_t blocks, float *dst) {
    for (int64_t j = 0; j < n; j++)
        for (int64_t b = 0; b < blocks; b++)
            memcpy(dst + (b * n + j) * CL_LANES_PORTABLE, src + j * sp + b * CL_LANES_PORTABLE,
                   CL_LANES_PORTABLE * sizeof *dst);
}

static const gradref__cbd_kernels portable = {
    .isa = "portable",
    .dw_row = row_portable,
    .dw_cl_row = cl_row_portable,
    .dw_cl_stage = cl_stage_portable,
    .dw_cl_lanes = CL_LANES_PORTABLE,
};

const gradref__cbd_kernels *gradref__cbd_kernels_for(int max_isa) {
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &gradref__cbd_kernels_avx2,
        [GRADREF__ISA_AVX512] = &gradref__cbd_kernels_avx512,
        [GRADREF__ISA_AVX512_VNNI] = &gradref__cbd_kernels_avx512_vnni,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &gradref__cbd_kernels_neon,
        [GRADREF__ISA_NEON_DOT] = &gradref__cbd_kernels_neon_dot,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}

/* The padded plane of gradref__cbd_dw_lanes: cells from diff row r0 and column c0 (the first a
 * tap reaches, or 0) to the last either diff or a tap reaches. */
int gradref__cbd_dw_lanes_of(const gradref__cbd_dw_shape *s, gradref__cbd_dw_lanes *L) {
    if (!gradref__cbd_one_plane(s) || s->K[1] != 3 || s->K[2] != 3 || s->dil[1] != 1 ||
        s->dil[2] != 1 || s->stride[1] != 1 || s->stride[2] != 1)
        return 0;
    const int64_t pb1 = s->pad[1], pb2 = s->pad[2], O1 = s->O[1], O2 = s->O[2];
    const int64_t r0 = pb1 < 2 ? pb1 - 2 : 0, c0 = pb2 < 2 ? pb2 - 2 : 0;
    const int64_t r1 = O1 > s->I[1] + pb1 ? O1 : s->I[1] + pb1;
    const int64_t c1 = O2 > s->I[2] + pb2 ? O2 : s->I[2] + pb2;
    if ((r1 - r0) * (c1 - c0) > GRADREF__CBD_LANES_CELLS) return 0;
    if (L == NULL) return 1;
    L->I1 = s->I[1], L->I2 = s->I[2], L->width = c1 - c0;
    L->first_row = pb1 - 2 - r0, L->first_column = pb2 - 2 - c0;
    for (int64_t t = 0; t < 9; t++) /* kp1 = 2 - t / 3, kp2 = 2 - t % 3: the chain's order */
        L->weight[t] =
            gradref__cbd_stored(s, 1, 2 - t / 3) * 3 + gradref__cbd_stored(s, 2, 2 - t % 3);
    L->in_cells = O1 * O2, L->zero_cells = 0;
    for (int64_t j = 0; j < O1 * O2; j++)
        L->in_cell[j] = (int16_t)((j / O2 - r0) * L->width + j % O2 - c0);
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++)
            if (r < 0 || r >= O1 || c < 0 || c >= O2)
                L->zero_cell[L->zero_cells++] = (int16_t)((r - r0) * L->width + c - c0);
    return 1;
}

/* gradref__cbd_depthwise_plane by rows (the row kernels). */
static int depthwise_rows(const gradref__cbd_kernels *k, const gradref__cbd_dw_shape *p,
                          const float *w, const float *diff, float *grad) {
    const float *rows[4][64];
    int64_t base[4][64], nr[4];
    for (int64_t i0 = 0; i0 < p->I[0]; i0++)
        for (int64_t i1 = 0; i1 < p->I[1];) {
            float *out = grad + (i0 * p->I[1] + i1) * p->I[2];
            if (k->dw_rows4 && p->K[2] <= 64) {
                const int64_t nrow = p->I[1] - i1 < 4 ? p->I[1] - i1 : 4;
                for (int64_t r = 0; r < 4; r++)
                    nr[r] = r < nrow ? row_taps(p, diff, i0, i1 + r, rows[r], base[r]) : 0;
                k->dw_rows4(p, w, diff, (const float *const(*)[64])rows, (const int64_t(*)[64])base,
                            nr, nrow, out);
                i1 += nrow;
                continue;
            }
            nr[0] = row_taps(p, diff, i0, i1, rows[0], base[0]);
            k->dw_row(p, w, rows[0], base[0], nr[0], out);
            i1++;
        }
    return 1;
}

int gradref__cbd_depthwise_plane(const gradref__cbd_kernels *k, const gradref__cbd_dw_shape *p,
                                 const float *w, const float *diff, float *grad) {
    /* 3-D: the whole 3 x 3 strips only (narrower kernels test each tap's rows, and over several
     * planes those tests cost more than the row kernels) */
    const int many = (p->K[0] > 1 || p->I[0] > 1) && (p->K[1] != 3 || p->K[2] != 3);
    if (k->dw_plane3x3 && p->K[0] <= GRADREF__CBD_DW_PLANES && p->K[1] <= 3 && p->K[2] <= 3 &&
        p->dil[1] == 1 && p->dil[2] == 1 && !many)
        return depthwise_planes(k->dw_plane3x3, p, w, diff, grad);
    return depthwise_rows(k, p, w, diff, grad);
}

/* gradref__cbd_me_window's byte shuffles by shift (-7 .. 7): lane l takes the window's value
 * l + shift, or 0 (-128: pshufb's zero; 0x80 is past TBL's 16 bytes, its zero too). */
#define PAIR(from)                                                                                 \
  (from) >= 0 && (from) < 8 ? 2 * (from) : -128, (from) >= 0 && (from) < 8 ? 2 * (from) + 1 : -128
#define SHIFT(s)                                                                                   \
  {                                                                                                \
    PAIR(0 + (s)), PAIR(1 + (s)), PAIR(2 + (s)), PAIR(3 + (s)), PAIR(4 + (s)), PAIR(5 + (s)),      \
        PAIR(6 + (s)), PAIR(7 + (s))                                                               \
  }
const int8_t gradref__cbd_me_shifts[15][16] = {
    SHIFT(-7), SHIFT(-6), SHIFT(-5), SHIFT(-4), SHIFT(-3), SHIFT(-2), SHIFT(-1), SHIFT(0),
    SHIFT(1),  SHIFT(2),  SHIFT(3),  SHIFT(4),  SHIFT(5),  SHIFT(6),  SHIFT(7),
};
#undef SHIFT
#undef PAIR
