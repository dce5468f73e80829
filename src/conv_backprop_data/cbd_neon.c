/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's NEON kernels: the depthwise row, 16 grad columns at a time in four
 * 4-lane chains, each in the reference's tap order (FMLA, one rounding, as fmaf); the
 * stride-2 scatter; and the QuantizedS8 requantisation of a row. */
#include "cbd_kernels.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>
#  include <math.h>
#  include <string.h>

enum { COLS = 16 };

/* Diff row `row` at columns [start, start + 16) with zeros past the row's ends (an exact no-op
 * term for a finite filter: the chains start at +0 and never become -0), for the windows that
 * reach past them; out of line, so the inner loop keeps its accumulators in registers. */
__attribute__((noinline)) static void edge_window(const float *row, int64_t start, int64_t O2,
                                                  float *tmp, int n) {
    for (int l = 0; l < n; l++)
        tmp[l] = start + l >= 0 && start + l < O2 ? row[start + l] : 0.0f;
}

static void dw_row_neon(const gradref__cbd_dw_shape *p, const float *w, const float *const *rows,
                        const int64_t *base, int64_t nrows, float *out) {
    const int64_t I2 = p->I[2], O2 = p->O[2];
    for (int64_t i2 = 0; i2 < I2; i2 += COLS) {
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t start = i2 + gradref__cbd_column_shift(p, kp2);
                const float32x4_t wv = vdupq_n_f32(w[base[r] + gradref__cbd_stored(p, 2, kp2)]);
                float tmp[COLS];
                const float *x = rows[r] + start;
                if (start < 0 || start + COLS > O2) {
                    edge_window(rows[r], start, O2, tmp, COLS);
                    x = tmp;
                }
                a0 = vfmaq_f32(a0, wv, vld1q_f32(x));
                a1 = vfmaq_f32(a1, wv, vld1q_f32(x + 4));
                a2 = vfmaq_f32(a2, wv, vld1q_f32(x + 8));
                a3 = vfmaq_f32(a3, wv, vld1q_f32(x + 12));
            }
        if (i2 + COLS <= I2) {
            vst1q_f32(out + i2, a0);
            vst1q_f32(out + i2 + 4, a1);
            vst1q_f32(out + i2 + 8, a2);
            vst1q_f32(out + i2 + 12, a3);
        } else {
            float tmp[COLS];
            vst1q_f32(tmp, a0);
            vst1q_f32(tmp + 4, a1);
            vst1q_f32(tmp + 8, a2);
            vst1q_f32(tmp + 12, a3);
            memcpy(out + i2, tmp, (size_t)(I2 - i2) * sizeof *tmp);
        }
    }
}

/* Four grad rows at a time (rows[r] and base[r]: row r's diff rows and weight bases, nr[r] of
 * them), 8 columns a block: eight chains in registers, each element's over its row taps, then
 * its column taps, as the reference's; a row with fewer row taps skips the rest, and windows
 * past diff's ends read zeros (exact no-op terms for a finite filter). K2 <= 64. */
static void dw_rows4_neon(const gradref__cbd_dw_shape *p, const float *w, const float *diff,
                          const float *const rows[4][64], const int64_t base[4][64],
                          const int64_t *nr, int64_t nrow, float *out) {
    (void)diff;
    const int64_t I2 = p->I[2], O2 = p->O[2], K2 = p->K[2];
    int64_t shift[64], k2s[64];
    const int64_t most = gradref__cbd_rows4_taps(p, nr, shift, k2s);
    for (int64_t b0 = 0; b0 < I2; b0 += 8) {
        float32x4_t a[4][2];
#  pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            a[r][0] = a[r][1] = vdupq_n_f32(0.0f);
        for (int64_t t = 0; t < most; t++)
            for (int64_t c = 0; c < K2; c++) {
                const int64_t start = b0 + shift[c];
                const int whole = start >= 0 && start + 8 <= O2;
                if (start + 8 <= 0 || start >= O2) continue; /* no lane inside diff */
#  pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    if (t >= nr[r]) continue;
                    float tmp[8];
                    const float *x = rows[r][t] + start;
                    if (!whole) {
                        edge_window(rows[r][t], start, O2, tmp, 8);
                        x = tmp;
                    }
                    const float32x4_t wv = vdupq_n_f32(w[base[r][t] + k2s[c]]);
                    a[r][0] = vfmaq_f32(a[r][0], wv, vld1q_f32(x));
                    a[r][1] = vfmaq_f32(a[r][1], wv, vld1q_f32(x + 4));
                }
            }
        const int64_t cols = I2 - b0 < 8 ? I2 - b0 : 8;
#  pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            if (r >= nrow) break;
            float *o = out + r * I2 + b0;
            if (cols == 8) {
                vst1q_f32(o, a[r][0]);
                vst1q_f32(o + 4, a[r][1]);
                continue;
            }
            float tmp[8];
            vst1q_f32(tmp, a[r][0]);
            vst1q_f32(tmp + 4, a[r][1]);
            memcpy(o, tmp, (size_t)cols * sizeof *tmp);
        }
    }
}

/* All ones in the lanes of a that hold neither a zero nor a NaN: |a| > 0 is false for both. */
static inline uint32x4_t nonzero_number4(float32x4_t a) {
    return vcagtq_f32(a, vdupq_n_f32(0.0f));
}

/* ---- small depthwise planes, four channels in the lanes (cbd_avx2.c's dw_lanes) ---- */

/* Rows r[0..4) (channels) of four values into four vectors of the channels (pixels): a 4 x 4
 * transpose, its own inverse. */
static inline void transpose4(float32x4_t *r) {
    const float32x4_t t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
    const float32x4_t t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
    r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
    r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

/* The first n (< 4) values at p, the rest 0, and their store back: a partial block. */
static inline float32x4_t load_first4(const float *p, int64_t n) {
    float v[4] = {0, 0, 0, 0};
    memcpy(v, p, (size_t)n * sizeof(float));
    return vld1q_f32(v);
}
static inline void store_first4(float *p, float32x4_t a, int64_t n) {
    float v[4];
    vst1q_f32(v, a);
    memcpy(p, v, (size_t)n * sizeof(float));
}

GRADREF__CBD_LANES_ROWS(float32x4_t, 4, vdupq_n_f32(0.0f), vld1q_f32, vfmaq_f32)

static unsigned dw_lanes_neon(const gradref__cbd_dw_lanes *L, const float *w, const float *diff,
                              int64_t dc, float *grad, int64_t gc) {
    float s[4 * GRADREF__CBD_LANES_CELLS];
    float32x4_t out[GRADREF__CBD_LANES_CELLS + 4]; /* grad's pixels, 4 channels each */
    for (int64_t i = 0; i < L->zero_cells; i++)
        vst1q_f32(s + 4 * L->zero_cell[i], vdupq_n_f32(0.0f));
    for (int64_t j0 = 0; j0 < L->in_cells; j0 += 4) {
        const int64_t n = L->in_cells - j0 < 4 ? L->in_cells - j0 : 4;
        float32x4_t v[4];
        for (int c = 0; c < 4; c++)
            v[c] = n == 4 ? vld1q_f32(diff + c * dc + j0) : load_first4(diff + c * dc + j0, n);
        transpose4(v);
        for (int64_t k = 0; k < n; k++)
            vst1q_f32(s + 4 * L->in_cell[j0 + k], v[k]);
    }
    lanes_plane(L, w, s, out);
    const int64_t pixels = L->I1 * L->I2;
    uint32x4_t clean = vdupq_n_u32(~0u); /* the channels holding neither a zero nor a NaN */
    for (int64_t j = 0; j < pixels; j++)
        clean = vandq_u32(clean, nonzero_number4(out[j]));
    for (int64_t j0 = 0; j0 < pixels; j0 += 4) {
        const int64_t n = pixels - j0 < 4 ? pixels - j0 : 4;
        float32x4_t v[4];
        for (int k = 0; k < 4; k++)
            v[k] = k < n ? out[j0 + k] : vdupq_n_f32(0.0f);
        transpose4(v);
        for (int c = 0; c < 4; c++) {
            if (n == 4)
                vst1q_f32(grad + c * gc + j0, v[c]);
            else
                store_first4(grad + c * gc + j0, v[c], n);
        }
    }
    const uint32_t bit[4] = {1, 2, 4, 8};
    return vaddvq_u32(vbicq_u32(vld1q_u32(bit), clean));
}

/* All ones in the lanes at or past n of 8 (two vectors): the lanes a partial store leaves. */
static inline void lanes_past(int64_t n, uint32x4_t *dead0, uint32x4_t *dead1) {
    const uint32_t lane_index[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    *dead0 = vcgeq_u32(vld1q_u32(lane_index), vdupq_n_u32((uint32_t)n));
    *dead1 = vcgeq_u32(vld1q_u32(lane_index + 4), vdupq_n_u32((uint32_t)n));
}

/* Lanes l of 8 with diff column start + l inside [0, O2): all ones (-start <= l < O2 - start,
 * both clamped to [0, 8]). */
static void inside_lanes8(int64_t start, int64_t O2, uint32x4_t mask[2]) {
    const int32_t lane_index[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int64_t lo = -start, hi = O2 - start;
    const int32x4_t first = vdupq_n_s32((int32_t)(lo < 0 ? 0 : lo > 8 ? 8 : lo));
    const int32x4_t end = vdupq_n_s32((int32_t)(hi < 0 ? 0 : hi > 8 ? 8 : hi));
    for (int v = 0; v < 2; v++) {
        const int32x4_t lane = vld1q_s32(lane_index + 4 * v);
        mask[v] = vandq_u32(vcgeq_s32(lane, first), vcltq_s32(lane, end));
    }
}

/* The 8 values from column `col` of the diff row at diff + row (O2 long, in a plane of `plane`
 * values from diff), those outside the row (lanes not in `inside`) +0: loaded and masked where
 * the 8 lie in the plane, else copied one by one (NEON has no masked load). */
__attribute__((always_inline)) static inline void
window_or_edge(const float *diff, int64_t plane, int64_t row, int64_t O2, int64_t col,
               const uint32x4_t inside[2], float32x4_t v[2]) {
    const int64_t at = row + col;
    if (at >= 0 && at + 8 <= plane) {
        for (int h = 0; h < 2; h++)
            v[h] = vreinterpretq_f32_u32(
                vandq_u32(vreinterpretq_u32_f32(vld1q_f32(diff + at + 4 * h)), inside[h]));
        return;
    }
    float tmp[8];
    edge_window(diff + row, col, O2, tmp, 8);
    v[0] = vld1q_f32(tmp), v[1] = vld1q_f32(tmp + 4);
}

/* K1, K2 <= 3, dilation 1: strips of 8 grad columns in blocks of 4 rows, 8 accumulators;
 * each diff row's three column windows (the chain's column taps, zeros past diff's ends and for
 * the columns a narrower kernel lacks, exact no-op terms) are loaded once for the four grad rows
 * they reach. Each grad element's chain: diff planes in the order given, then diff rows
 * ascending, then the column taps in chain order, as the reference's. */
static int dw_plane3x3_neon(const gradref__cbd_dw_shape *p, const float *const *w,
                            const float *const *diff, int64_t planes, float *grad) {
    const int64_t I1 = p->I[1], I2 = p->I[2], O1 = p->O[1], O2 = p->O[2];
    const int64_t K1 = p->K[1], K2 = p->K[2], pb1 = p->pad[1];
    int64_t shift[3] = {0, 0, 0};              /* set by the first plane's taps */
    float32x4_t wr[GRADREF__CBD_DW_PLANES][3]; /* plane, row tap kp1: column taps in lanes 0..2 */
    for (int64_t pl = 0; pl < planes; pl++) {
        float weight[3][3];
        gradref__cbd_plane3x3_taps(p, w[pl], shift, weight);
        for (int kp1 = 0; kp1 < 3; kp1++) {
            const float lanes[4] = {weight[kp1][0], weight[kp1][1], weight[kp1][2], 0.0f};
            wr[pl][kp1] = vld1q_f32(lanes);
        }
    }
    /* all ones while no stored lane holds a zero or a NaN (cbd_avx2.c's zero_or_nan8) */
    uint32x4_t clean = vdupq_n_u32(~0u);
    for (int64_t b0 = 0; b0 < I2; b0 += 8) {
        int whole[3];
        uint32x4_t inside[3][2]; /* a window not whole: its lanes inside the row */
        for (int c = 0; c < 3; c++) {
            whole[c] = c < K2 && b0 + shift[c] >= 0 && b0 + shift[c] + 8 <= O2;
            inside_lanes8(b0 + shift[c], O2, inside[c]);
        }
        const int64_t cols = I2 - b0 < 8 ? I2 - b0 : 8;
        uint32x4_t dead0, dead1;
        lanes_past(cols, &dead0, &dead1);
        for (int64_t i1 = 0; i1 < I1; i1 += 4) {
            const int64_t nrow = I1 - i1 < 4 ? I1 - i1 : 4;
            int64_t lo = i1 + pb1 - (K1 - 1), hi = i1 + nrow - 1 + pb1;
            if (lo < 0) lo = 0;
            if (hi > O1 - 1) hi = O1 - 1;
            float32x4_t a[4][2];
            for (int r = 0; r < 4; r++)
                a[r][0] = a[r][1] = vdupq_n_f32(0.0f);
            for (int64_t pl = 0; pl < planes; pl++)
                for (int64_t o1 = lo; o1 <= hi; o1++) {
                    const float *row = diff[pl] + o1 * O2;
                    float32x4_t v[3][2];
                    for (int c = 0; c < 3; c++) {
                        if (whole[c]) {
                            v[c][0] = vld1q_f32(row + b0 + shift[c]);
                            v[c][1] = vld1q_f32(row + b0 + shift[c] + 4);
                        } else if (c < K2) {
                            window_or_edge(diff[pl], O1 * O2, o1 * O2, O2, b0 + shift[c], inside[c],
                                           v[c]);
                        } else {
                            v[c][0] = v[c][1] = vdupq_n_f32(0.0f);
                        }
                    }
#  pragma GCC unroll 4
                    for (int r = 0; r < 4; r++) {
                        const int64_t kp1 = i1 + r + pb1 - o1;
                        if (r >= nrow || kp1 < 0 || kp1 >= K1) continue;
                        for (int h = 0; h < 2; h++) {
                            a[r][h] = vfmaq_laneq_f32(a[r][h], v[0][h], wr[pl][kp1], 0);
                            a[r][h] = vfmaq_laneq_f32(a[r][h], v[1][h], wr[pl][kp1], 1);
                            a[r][h] = vfmaq_laneq_f32(a[r][h], v[2][h], wr[pl][kp1], 2);
                        }
                    }
                }
            for (int r = 0; r < nrow; r++) {
                float *out = grad + (i1 + r) * I2 + b0;
                if (cols == 8) {
                    clean = vandq_u32(
                        clean, vandq_u32(nonzero_number4(a[r][0]), nonzero_number4(a[r][1])));
                    vst1q_f32(out, a[r][0]);
                    vst1q_f32(out + 4, a[r][1]);
                    continue;
                }
                clean = vandq_u32(clean, vandq_u32(vorrq_u32(nonzero_number4(a[r][0]), dead0),
                                                   vorrq_u32(nonzero_number4(a[r][1]), dead1)));
                float tmp[8];
                vst1q_f32(tmp, a[r][0]);
                vst1q_f32(tmp + 4, a[r][1]);
                memcpy(out, tmp, (size_t)cols * sizeof *tmp);
            }
        }
    }
    return vminvq_u32(clean) == 0;
}

/* A stride-2 row's diff rows, the diff planes they lie in, and their weights w[a][2 r + b]
 * (column phase r, column tap b), in the chain's order: two a plane at most. */
typedef struct s2_row_taps {
    const float *const *row, *const *plane;
    const float *const *w;
    int nrows;
} s2_row_taps;

/* A stride-2 plane's row layout, the same for every row (cbd_avx2.c's): its blocks, the column
 * shifts, diff's row length and plane size, and the edge blocks' lane masks (all ones inside
 * the row), four taps a block in x order. */
typedef struct s2_layout {
    gradref__cbd_s2_blocks B;
    int64_t shift[2][2], O2, plane;
    uint32x4_t edge_masks[3][4][2];
} s2_layout;

/* cbd_avx2.c's s2_blocks at NEON for edge block `edge` (at x): grad columns 2 x .. 2 x + 15 of
 * a stride-2 row (the first n stored), 8 of each column phase in two vectors, ST2 interleaving
 * the phases as it stores; diff columns outside the row read as +0 (window_or_edge, by the
 * block's masks). NR as s2_blocks'. Returns 1 when a stored value is a zero or a NaN. */
__attribute__((always_inline)) static inline int s2_edge_neon(int NR, int NC0, int NC1,
                                                              const s2_row_taps *T,
                                                              const s2_layout *L, int64_t x,
                                                              int64_t edge, int64_t n, float *out) {
    float32x4_t acc[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)},
                             {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
    const int nr = NR ? NR : T->nrows;
    for (int a = 0; a < nr; a++)
        for (int r = 0; r < 2; r++)
            for (int b = 0; b < (r ? NC1 : NC0); b++) {
                /* window_or_edge's test and loads written out: gcc then unrolls these loops */
                const int64_t at = x + L->shift[r][b], from = T->row[a] - T->plane[a] + at;
                float32x4_t v0, v1;
                if (from >= 0 && from + 8 <= L->plane) {
                    const uint32x4_t *mask = L->edge_masks[edge][2 * r + b];
                    v0 = vreinterpretq_f32_u32(
                        vandq_u32(vreinterpretq_u32_f32(vld1q_f32(T->plane[a] + from)), mask[0]));
                    v1 = vreinterpretq_f32_u32(vandq_u32(
                        vreinterpretq_u32_f32(vld1q_f32(T->plane[a] + from + 4)), mask[1]));
                } else {
                    float tmp[8];
                    edge_window(T->row[a], at, L->O2, tmp, 8);
                    v0 = vld1q_f32(tmp), v1 = vld1q_f32(tmp + 4);
                }
                acc[r][0] = vfmaq_n_f32(acc[r][0], v0, T->w[a][2 * r + b]);
                acc[r][1] = vfmaq_n_f32(acc[r][1], v1, T->w[a][2 * r + b]);
            }
    const float32x4x2_t first = {{acc[0][0], acc[1][0]}}, second = {{acc[0][1], acc[1][1]}};
    if (n >= 16) {
        vst2q_f32(out, first);
        vst2q_f32(out + 8, second);
        const uint32x4_t clean =
            vandq_u32(vandq_u32(nonzero_number4(acc[0][0]), nonzero_number4(acc[1][0])),
                      vandq_u32(nonzero_number4(acc[0][1]), nonzero_number4(acc[1][1])));
        return vminvq_u32(clean) == 0;
    }
    float tmp[16];
    vst2q_f32(tmp, first);
    vst2q_f32(tmp + 8, second);
    int hit = 0;
    for (int64_t c = 0; c < n; c++) {
        out[c] = tmp[c];
        hit |= tmp[c] == 0.0f || tmp[c] != tmp[c];
    }
    return hit;
}

/* NB blocks of 16 grad columns from 2 x, every tap's diff columns inside the row: s2_edge_neon's
 * chains for NR diff rows (0: T->nrows) and NC0 / NC1 column taps, the tap loops unrolled (4 NB
 * chains), stored whole. *least becomes the lanes' least |value| (NaN when a value is: FMIN
 * propagates it), two operations a vector where a compare and a mask take three. */
__attribute__((always_inline)) static inline void s2_blocks_neon(int NB, int NR, int NC0, int NC1,
                                                                 const s2_row_taps *T,
                                                                 const s2_layout *L, int64_t x,
                                                                 float *out, float32x4_t *least) {
    float32x4x2_t acc[4]; /* val[r]: column phase r, the pair ST2 stores */
    for (int v = 0; v < 2 * NB; v++)
        acc[v].val[0] = acc[v].val[1] = vdupq_n_f32(0.0f);
    const int nr = NR ? NR : T->nrows;
    for (int a = 0; a < nr; a++) {
        for (int b = 0; b < NC0; b++) {
            const float *from = T->row[a] + x + L->shift[0][b];
            for (int v = 0; v < 2 * NB; v++)
                acc[v].val[0] = vfmaq_n_f32(acc[v].val[0], vld1q_f32(from + 4 * v), T->w[a][b]);
        }
        for (int b = 0; b < NC1; b++) {
            const float *from = T->row[a] + x + L->shift[1][b];
            for (int v = 0; v < 2 * NB; v++)
                acc[v].val[1] = vfmaq_n_f32(acc[v].val[1], vld1q_f32(from + 4 * v), T->w[a][2 + b]);
        }
    }
    for (int v = 0; v < 2 * NB; v++) {
        vst2q_f32(out + 8 * v, acc[v]);
        *least = vminq_f32(*least, vminq_f32(vabsq_f32(acc[v].val[0]), vabsq_f32(acc[v].val[1])));
    }
}

/* A stride-2 row as cbd_avx2.c's s2_row: the edge blocks and the part by s2_edge_neon, the
 * others two at a time (eight chains) by s2_blocks_neon. */
__attribute__((always_inline)) static inline int
s2_row_neon(int NR, int NC0, int NC1, const s2_row_taps *T, const s2_layout *L, float *out) {
    float32x4_t least = vdupq_n_f32(INFINITY);
    int hit = 0;
    int64_t x = 0, edge = 0;
    for (; x < L->B.inside_lo; x += 8)
        hit |= s2_edge_neon(NR, NC0, NC1, T, L, x, edge++, 16, out + 2 * x);
    for (; x + 16 <= L->B.inside_hi; x += 16)
        s2_blocks_neon(2, NR, NC0, NC1, T, L, x, out + 2 * x, &least);
    if (x < L->B.inside_hi) {
        s2_blocks_neon(1, NR, NC0, NC1, T, L, x, out + 2 * x, &least);
        x += 8;
    }
    for (; x < 8 * L->B.whole; x += 8)
        hit |= s2_edge_neon(NR, NC0, NC1, T, L, x, edge++, 16, out + 2 * x);
    if (L->B.part) hit |= s2_edge_neon(NR, NC0, NC1, T, L, x, edge, L->B.part, out + 2 * x);
    return hit | (vminvq_u32(nonzero_number4(least)) == 0);
}

/* The row layout of plane s with column taps t. */
static void s2_layout_neon(const gradref__cbd_dw_shape *s, const gradref__cbd_s2_taps *t,
                           s2_layout *L) {
    L->B = gradref__cbd_s2_blocks_of(s, t);
    L->O2 = s->O[2];
    L->plane = s->O[1] * s->O[2];
    for (int r = 0; r < 2; r++)
        for (int b = 0; b < 2; b++)
            L->shift[r][b] = b < t->ncols[r] ? t->shift[r][b] : 0;
    int64_t edge = 0;
    for (int64_t x = 0; x < 8 * L->B.whole + (L->B.part ? 8 : 0); x += 8)
        if (x < L->B.inside_lo || x >= L->B.inside_hi) {
            for (int k = 0; k < 4; k++)
                inside_lanes8(x + L->shift[k / 2][k % 2], L->O2, L->edge_masks[edge][k]);
            edge++;
        }
}

/* ---- channels-last depthwise, four channels a block (cbd_avx2.c's dw_cl_row) ---- */

/* ok with the NaN lanes of v cleared (at most 12 chains: 16 spill beside their 16 loads). */
static inline uint32x4_t cl_ok4(uint32x4_t ok, float32x4_t v) {
    return vandq_u32(ok, vceqq_f32(v, v));
}
GRADREF__CBD_CL_COLUMNS(cl_columns4, float32x4_t, uint32x4_t, 4, vdupq_n_f32(0.0f), vld1q_f32,
                        vfmaq_f32, vst1q_f32, cl_ok4)

static inline int cl_found4(uint32x4_t ok) {
    return vminvq_u32(ok) == 0;
}
GRADREF__CBD_CL_ROW(static, dw_cl_row_neon, uint32x4_t, vdupq_n_u32(~0u), cl_columns4, 1, cl_found4)

static void dw_cl_stage_neon(const float *src, int64_t sp, int64_t n, int64_t blocks, float *dst) {
    for (int64_t j = 0; j < n; j++, src += sp)
        for (int64_t b = 0; b < blocks; b++)
            vst1q_f32(dst + 4 * (b * n + j), vld1q_f32(src + 4 * b));
}

/* s2_plane_neon's rows from one diff plane, two row taps or one unrolled. */
__attribute__((always_inline)) static inline int
s2_plane_one_neon(int NC0, int NC1, const gradref__cbd_dw_shape *s, const s2_layout *L,
                  const float wf[3][4], const float *diff, float *grad) {
    int hit = 0;
    const float *const planes[2] = {diff, diff};
    for (int64_t i1 = 0; i1 < s->I[1]; i1++) {
        float *out = grad + i1 * s->I[2];
        const float *rows[2];
        int64_t kp[2];
        const int nrows = gradref__cbd_s2_row_taps(s, diff, i1, rows, kp);
        if (!nrows) { /* no tap: the reference's empty chain, +0 */
            memset(out, 0, (size_t)s->I[2] * sizeof *out);
            hit = 1;
            continue;
        }
        const float *const weights[2] = {wf[kp[0]], wf[kp[1]]};
        const s2_row_taps T = {rows, planes, weights, nrows};
        hit |= nrows == 2 ? s2_row_neon(2, NC0, NC1, &T, L, out)
                          : s2_row_neon(1, NC0, NC1, &T, L, out);
    }
    return hit;
}

/* A stride-2 plane with NC0 / NC1 column taps from `planes` diff planes (k->dw_plane_s2), as
 * cbd_avx2.c's s2_plane: its rows by their diff rows' count, the layout and the weights set once
 * a plane. */
__attribute__((always_inline)) static inline int
s2_plane_neon(int NC0, int NC1, const gradref__cbd_dw_shape *s, const float *const *w,
              const float *const *diff, int64_t planes, float *grad) {
    gradref__cbd_s2_taps t;
    gradref__cbd_s2_columns(s, &t);
    s2_layout L;
    s2_layout_neon(s, &t, &L);
    /* [plane][kp1][2 r + b]: row tap position kp1, column phase r, column tap b */
    float wf[GRADREF__CBD_DW_PLANES][3][4];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t kp1 = 0; kp1 < s->K[1]; kp1++)
            for (int k = 0; k < 4; k++)
                wf[p][kp1][k] = gradref__cbd_s2_weight(s, &t, w[p], kp1, k);
    if (planes == 1) return s2_plane_one_neon(NC0, NC1, s, &L, wf[0], diff[0], grad);
    int hit = 0;
    for (int64_t i1 = 0; i1 < s->I[1]; i1++) {
        float *out = grad + i1 * s->I[2];
        const float *rows[2 * GRADREF__CBD_DW_PLANES], *in[2 * GRADREF__CBD_DW_PLANES];
        const float *weights[2 * GRADREF__CBD_DW_PLANES];
        s2_row_taps T = {rows, in, weights, 0};
        for (int64_t p = 0; p < planes; p++) {
            int64_t kp[2];
            const int n = gradref__cbd_s2_row_taps(s, diff[p], i1, rows + T.nrows, kp);
            for (int a = 0; a < n; a++)
                weights[T.nrows + a] = wf[p][kp[a]], in[T.nrows + a] = diff[p];
            T.nrows += n;
        }
        if (T.nrows) {
            hit |= s2_row_neon(0, NC0, NC1, &T, &L, out);
            continue;
        }
        memset(out, 0, (size_t)s->I[2] * sizeof *out); /* no tap: the empty chain, +0 */
        hit = 1;
    }
    return hit;
}

GRADREF__CBD_S2_PLANE_KERNEL(static, dw_plane_s2_neon, s2_plane_neon)

/* Whole vectors over the row's span of 2 len - 1 elements, as AVX2's: LD2 splits 8 elements
 * into the values' lanes and the odd ones between (kept, or +0 when odd_free), ST2 stores them
 * back; 4 values a step, then the span's last 8 elements (read before the others are stored).
 * Rows under 8 elements one value at a time. */
static void scatter2_neon(const float *from, int64_t len, int64_t rows, float *row,
                          int64_t row_stride, int odd_free) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
    for (int64_t r = 0; r < rows; r++, from += len, row += row_stride) {
        const int64_t span = 2 * len - 1, last = span - 8; /* last is odd */
        if (span < 8) {
            for (int64_t x = 0; x < len; x++)
                row[2 * x] = from[x];
            continue;
        }
        float32x4x2_t tail = odd_free ? (float32x4x2_t){{zero, zero}} : vld2q_f32(row + last);
        int64_t x = 0;
        for (; 2 * x + 8 <= span; x += 4) {
            float32x4x2_t v = odd_free ? (float32x4x2_t){{zero, zero}} : vld2q_f32(row + 2 * x);
            v.val[0] = vld1q_f32(from + x);
            vst2q_f32(row + 2 * x, v);
        }
        if (x < len) { /* values len - 4 .. len - 1, the odd lanes from the odd element last */
            tail.val[1] = vld1q_f32(from + len - 4);
            vst2q_f32(row + last, tail);
        }
    }
}

/* 4 values of each phase to 8 elements by ST2; the last 4 (or the last 4 again, overlapping:
 * the same values) likewise; rows under 4 values one by one. */
static void interleave2_neon(const float *even, const float *odd, int64_t len, int64_t rows,
                             float *row, int64_t row_stride, int64_t zero_at) {
    const float32x4_t z = vdupq_n_f32(0.0f);
    for (int64_t r = 0; r < rows; r++, row += row_stride) {
        const float *e = even + r * len, *o = odd ? odd + r * len : NULL;
        for (int64_t x = 0; x < len && len < 4; x++)
            row[2 * x] = e[x], row[2 * x + 1] = o ? o[x] : 0.0f;
        for (int64_t x = 0; x < len && len >= 4; x += 4) {
            if (x + 4 > len) x = len - 4;
            const float32x4x2_t v = {{vld1q_f32(e + x), o ? vld1q_f32(o + x) : z}};
            vst2q_f32(row + 2 * x, v);
        }
        /* the zero row's 2 len elements: 4 at a time, then the 2 an odd len leaves */
        for (int64_t i = 0; zero_at && i < 2 * len; i += 4)
            if (i + 4 <= 2 * len)
                vst1q_f32(row + zero_at + i, z);
            else
                vst1_f32(row + zero_at + i, vget_low_f32(z));
    }
}

/* 8 sums a step in two halves: FMAXNM takes -128 for a NaN (the quotient's NaNs are quiet),
 * FCVTZS truncates, the half tests as the scalar one, then two narrowing moves (exact: the values
 * are in -128..127). */
static int16x4_t qs8_half(const float *from, float32x4_t as, float32x4_t gs) {
    float32x4_t v = vdivq_f32(vmulq_f32(vld1q_f32(from), as), gs);
    v = vminq_f32(vmaxnmq_f32(v, vdupq_n_f32(-128.0f)), vdupq_n_f32(127.0f));
    const int32x4_t t = vcvtq_s32_f32(v);
    const float32x4_t frac = vsubq_f32(v, vcvtq_f32_s32(t));
    const int32x4_t up = vreinterpretq_s32_u32(vcgeq_f32(frac, vdupq_n_f32(0.5f)));
    const int32x4_t down = vreinterpretq_s32_u32(vcleq_f32(frac, vdupq_n_f32(-0.5f)));
    return vmovn_s32(vaddq_s32(vsubq_s32(t, up), down)); /* masks are -1 */
}

static void qs8_row_neon(const float *from, int64_t n, float acc_scale, float grad_scale,
                         int8_t *out) {
    const float32x4_t as = vdupq_n_f32(acc_scale), gs = vdupq_n_f32(grad_scale);
    int64_t x = 0;
    for (; x + 8 <= n; x += 8)
        vst1_s8(out + x, vmovn_s16(vcombine_s16(qs8_half(from + x, as, gs),
                                                qs8_half(from + x + 4, as, gs))));
    for (; x < n; x++)
        out[x] = gradref__cbd_qs8_requantize_inline((int32_t)from[x], acc_scale, grad_scale);
}

/* ------------------------------------------------------------ direct tiles at 4 lanes */

#  include "common/gemm_kernels.h"
#  if GRADREF__CBD_TILE_ROWS_NEON != GRADREF__NEON_MR
#    error "the NEON tiles take the NEON GEMM's 12-row panels"
#  endif

/* 8 lanes a block of a 32-pixel tile: the lanes of bits b (0..255) of a tap as two 4-lane
 * masks (all ones where the bit is set). */
static inline uint32x4_t lanes4(unsigned b) {
    static const uint32_t bit[4] = {1, 2, 4, 8};
    const uint32x4_t v = vld1q_u32(bit);
    return vceqq_u32(vandq_u32(vdupq_n_u32(b), v), v);
}

/* One tap's 8 diff values of a block: whole vectors (inside 1 or 2; inside 1 clears the lanes
 * outside the tap), else whole vectors when every lane is the tap's and lane by lane where not
 * (the lanes outside are never read). */
__attribute__((always_inline)) static inline void
tap_values(int inside, const float *src, unsigned m, float32x4_t *b0, float32x4_t *b1) {
    if (inside || m == 0xffu) {
        *b0 = vld1q_f32(src), *b1 = vld1q_f32(src + 4);
        if (inside == 1 && m != 0xffu) {
            *b0 = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(*b0), lanes4(m & 15u)));
            *b1 = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(*b1), lanes4(m >> 4)));
        }
        return;
    }
    float tmp[8];
    for (int l = 0; l < 8; l++)
        tmp[l] = (m >> l) & 1u ? src[l] : 0.0f;
    *b0 = vld1q_f32(tmp), *b1 = vld1q_f32(tmp + 4);
}

/* Columns [8h, 8h + 8) of a tile: 12 rows x 2 accumulators, the chain over (tap, oc) as the
 * GEMM's (FMLA by lane of the panel's 12 weights), a tap without lanes in the block skipped
 * (fma(w, 0, acc) = acc for a finite w); then rows < `rows`, columns < cols stored. */
static unsigned tile_block(int inside, int h, const float *image, int64_t channel_stride,
                           int64_t ocpg, const int64_t *offset, const uint16_t *masks,
                           int64_t ntaps, const float *a, int rows, float *c, int64_t ldc,
                           int64_t cols, int load) {
    const int64_t left = cols - 8 * h < 8 ? cols - 8 * h : 8;
    float *out = c + 8 * h;
    float32x4_t acc[12][2];
#  pragma GCC unroll 12
    for (int i = 0; i < 12; i++) {
        acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
        if (load && i < rows) { /* the chains go on from c */
            float tmp[8] = {0};
            memcpy(tmp, out + i * ldc, (size_t)left * sizeof *tmp);
            acc[i][0] = vld1q_f32(tmp);
            acc[i][1] = vld1q_f32(tmp + 4);
        }
    }
    for (int64_t t = 0; t < ntaps; t++) {
        const unsigned m = (unsigned)(masks[2 * t + (h >> 1)] >> (8 * (h & 1))) & 0xffu;
        if (m == 0) continue;
        const float *src = image + offset[t] + 8 * h;
        const float *w = a + t * ocpg * 12;
        for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, w += 12) {
            float32x4_t b0, b1;
            tap_values(inside, src, m, &b0, &b1);
            const float32x4_t wv[3] = {vld1q_f32(w), vld1q_f32(w + 4), vld1q_f32(w + 8)};
#  pragma GCC unroll 12
            for (int i = 0; i < 12; i++) {
                acc[i][0] = vfmaq_laneq_f32(acc[i][0], b0, wv[i / 4], i % 4);
                acc[i][1] = vfmaq_laneq_f32(acc[i][1], b1, wv[i / 4], i % 4);
            }
        }
    }
    /* unrolled, so that every accumulator index is a constant and they stay in registers;
     * clean: all ones while no stored lane holds a zero or a NaN */
    uint32x4_t dead0, dead1;
    lanes_past(left, &dead0, &dead1);
    uint32x4_t clean = vdupq_n_u32(~0u);
#  pragma GCC unroll 12
    for (int i = 0; i < 12; i++) {
        if (i >= rows) break;
        clean = vandq_u32(clean, vandq_u32(vorrq_u32(nonzero_number4(acc[i][0]), dead0),
                                           vorrq_u32(nonzero_number4(acc[i][1]), dead1)));
        if (left == 8) {
            vst1q_f32(out + i * ldc, acc[i][0]);
            vst1q_f32(out + i * ldc + 4, acc[i][1]);
            continue;
        }
        float tmp[8];
        vst1q_f32(tmp, acc[i][0]);
        vst1q_f32(tmp + 4, acc[i][1]);
        memcpy(out + i * ldc, tmp, (size_t)left * sizeof *tmp);
    }
    return vminvq_u32(clean) == 0;
}

static unsigned tile32_neon(const float *image, int64_t channel_stride, int64_t ocpg,
                            const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                            int64_t cols, int inside, const float *a, int rows, float *c,
                            int64_t ldc, int load) {
    unsigned hit = 0;
    for (int h = 0; h < 4 && 8 * h < cols; h++)
        hit |= tile_block(inside, h, image, channel_stride, ocpg, offset, masks, ntaps, a, rows, c,
                          ldc, cols, load);
    return hit;
}

/* ---- a tile's last few pixels, a panel's rows in the lanes (tile_columns) ----
 * A 12-row panel's k step is three vectors and each pixel's diff is loaded to every lane (LD1R),
 * for G panels and P pixels at once: 3 G P chains, where a tile block would fill 8 pixel lanes
 * with P. */
enum { COLUMNS_MAX = 4, COLUMN_PANELS_MAX = 5, COLUMN_CHAINS = 18 };

__attribute__((always_inline)) static inline unsigned
columns_body(int P, int G, const float *image, int64_t channel_stride, int64_t ocpg,
             const int64_t *offset, const uint16_t *masks, int64_t ntaps, int64_t first,
             const float *a, int64_t panel_floats, int64_t pr, int64_t M, float *c, int64_t ldc) {
    static const uint32_t lane_index[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    float32x4_t acc[COLUMN_CHAINS]; /* (panel, vector, pixel) */
#  pragma GCC unroll 18
    for (int e = 0; e < COLUMN_CHAINS; e++)
        acc[e] = vdupq_n_f32(0.0f);
    for (int64_t t = 0; t < ntaps; t++) {
        const float *b[COLUMNS_MAX];
        int64_t step[COLUMNS_MAX];
        if (!gradref__cbd_column_sources(image + offset[t], channel_stride, first, masks + 2 * t, P,
                                         b, step))
            continue;
        const float *w = a + t * ocpg * 12;
        for (int64_t oc = 0; oc < ocpg; oc++, w += 12) {
            float32x4_t bp[COLUMNS_MAX];
#  pragma GCC unroll 4
            for (int p = 0; p < P; p++)
                bp[p] = vld1q_dup_f32(b[p]), b[p] += step[p];
#  pragma GCC unroll 5
            for (int q = 0; q < G; q++) {
                const float *wq = w + q * panel_floats;
#  pragma GCC unroll 3
                for (int v = 0; v < 3; v++) {
                    const float32x4_t wv = vld1q_f32(wq + 4 * v);
#  pragma GCC unroll 4
                    for (int p = 0; p < P; p++)
                        acc[(q * 3 + v) * P + p] = vfmaq_f32(acc[(q * 3 + v) * P + p], wv, bp[p]);
                }
            }
        }
    }
    uint32x4_t bad = vdupq_n_u32(0); /* a stored lane holding a zero or a NaN */
#  pragma GCC unroll 5
    for (int q = 0; q < G; q++) {
        const int64_t rows = M - q * pr < pr ? M - q * pr : pr;
#  pragma GCC unroll 4
        for (int p = 0; p < P; p++) {
            float lanes[12];
#  pragma GCC unroll 3
            for (int v = 0; v < 3; v++) {
                const float32x4_t x = acc[(q * 3 + v) * P + p];
                const uint32x4_t live =
                    vcltq_u32(vld1q_u32(lane_index + 4 * v), vdupq_n_u32((uint32_t)rows));
                bad = vorrq_u32(bad, vbicq_u32(live, nonzero_number4(x)));
                vst1q_f32(lanes + 4 * v, x);
            }
            gradref__cbd_column_store(lanes, rows, c + q * pr * ldc + first + p, ldc);
        }
    }
    return vmaxvq_u32(bad) != 0;
}

/* column_panels, the panels a column group takes at most for P pixels: 3 P G <= COLUMN_CHAINS
 * accumulators, 15 for one pixel (with more, gcc loads the panels ahead of the FMLAs, spilling). */
GRADREF__CBD_COLUMN_KERNELS(tile_columns_neon, 5, 3, 2, 1)

/* The lanes of q + shift in [0, limit), 4 a compare (unsigned: a negative sum is past any
 * limit), narrowed to a byte a lane and summed in pairs into the 32 bits: no per-quad ADDV. */
static inline uint32_t range32_neon(const int32_t *q, int32_t shift, int32_t limit) {
    static const uint8_t bit_of[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const int32x4_t s = vdupq_n_s32(shift);
    const uint32x4_t bound = vdupq_n_u32((uint32_t)limit);
    uint16x8_t eight[4];
    for (int v = 0; v < 4; v++) {
        const uint32x4_t a =
            vcltq_u32(vreinterpretq_u32_s32(vaddq_s32(vld1q_s32(q + 8 * v), s)), bound);
        const uint32x4_t b =
            vcltq_u32(vreinterpretq_u32_s32(vaddq_s32(vld1q_s32(q + 8 * v + 4), s)), bound);
        eight[v] = vuzp1q_u16(vreinterpretq_u16_u32(a), vreinterpretq_u16_u32(b));
    }
    const uint8x16_t bits = vld1q_u8(bit_of);
    const uint8x16_t lo = vuzp1q_u8(vreinterpretq_u8_u16(eight[0]), vreinterpretq_u8_u16(eight[1]));
    const uint8x16_t hi = vuzp1q_u8(vreinterpretq_u8_u16(eight[2]), vreinterpretq_u8_u16(eight[3]));
    uint8x16_t sum = vpaddq_u8(vandq_u8(lo, bits), vandq_u8(hi, bits)); /* lanes in pairs */
    sum = vpaddq_u8(sum, sum);                                          /* in fours */
    sum = vpaddq_u8(sum, sum);                                          /* in eights */
    return vgetq_lane_u32(vreinterpretq_u32_u8(sum), 0);
}

/* The two 16-lane masks per tap of a tile (tile32_masks), by dims. */
static void tile32_masks_neon(const int64_t *tap, int64_t ntaps, const int64_t *Q, const int64_t *O,
                              int64_t j0, int64_t cols, uint16_t *masks) {
    int32_t q[3][32];
    gradref__cbd_lane_coords(j0, Q, q);
    gradref__cbd_tile32_masks_by_dims(range32_neon, q, tap, ntaps, O, cols, masks);
}

static void pack_tile32_neon(const float *image, int64_t channel_stride, int64_t ocpg,
                             const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                             float *dst) {
    for (int64_t t = 0; t < ntaps; t++) {
        const uint32_t m = (uint32_t)masks[2 * t] | (uint32_t)masks[2 * t + 1] << 16;
        if (m == 0) continue;
        const float *src = image + offset[t];
        float *out = dst + t * ocpg * 32;
        for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, out += 32)
            for (int h = 0; h < 4; h++) { /* lanes outside the tap are never read */
                float32x4_t b0, b1;
                tap_values(0, src + 8 * h, (m >> (8 * h)) & 0xffu, &b0, &b1);
                vst1q_f32(out + 8 * h, b0);
                vst1q_f32(out + 8 * h + 4, b1);
            }
    }
}

/* Lanes [lo, end) of the 8 16-bit values from row + o2, zero-extended (see
 * gradref__cbd_me_window): one TBL of a window inside the row. */
typedef uint32_t me_neon_vu __attribute__((vector_size(32))); /* the header's me_vu */
static inline me_neon_vu me_u16_part_neon(const uint16_t *row, int64_t o2, int64_t O2, int64_t lo,
                                          int64_t end) {
    uint16_t tmp[8];
    const int8_t *index = gradref__cbd_me_window(row, o2, O2, lo, end, tmp);
    const uint16x8_t moved = vreinterpretq_u16_u8(
        vqtbl1q_u8(vld1q_u8((const uint8_t *)tmp), vld1q_u8((const uint8_t *)index)));
    uint32_t out[8];
    vst1q_u32(out, vmovl_u16(vget_low_u16(moved)));
    vst1q_u32(out + 4, vmovl_u16(vget_high_u16(moved)));
    me_neon_vu v;
    memcpy(&v, out, sizeof v);
    return v;
}

/* Unsigned lane minimum and maximum of the 8 lanes, UMIN/UMAX on each half. */
static inline me_neon_vu me_neon_minmax(me_neon_vu a, me_neon_vu b, int max) {
    uint32x4_t ha[2], hb[2];
    memcpy(ha, &a, sizeof a);
    memcpy(hb, &b, sizeof b);
    for (int h = 0; h < 2; h++)
        ha[h] = max ? vmaxq_u32(ha[h], hb[h]) : vminq_u32(ha[h], hb[h]);
    memcpy(&a, ha, sizeof a);
    return a;
}

/* MegEngine DEFAULT, 8 lanes (cbd_megengine_lanes.h) */
#  define LANES                                  8
#  define ME_LOAD_U16_PART(row, o2, O2, lo, end) me_u16_part_neon(row, o2, O2, lo, end)
#  define ME_MIN_U(a, b)                         me_neon_minmax(a, b, 0)
#  define ME_MAX_U(a, b)                         me_neon_minmax(a, b, 1)
#  define ME_ANY(v)                                                                                \
    (vmaxvq_u32(vorrq_u32(vld1q_u32((const uint32_t *)&(v)),                                       \
                          vld1q_u32((const uint32_t *)&(v) + 4))) != 0)
/* FCVT of one F16 value */
static inline float me_f16_scalar(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}
#  define ME_F16_SCALAR(h) me_f16_scalar(h)
#  define ME_ROW           megengine_row_neon
#  include "cbd_megengine_lanes.h"

/* The NEON table's kernels, which the neon_dot table takes too. */
#  define NEON_KERNELS                                                                             \
    .dw_row = dw_row_neon, .dw_rows4 = dw_rows4_neon, .dw_plane3x3 = dw_plane3x3_neon,             \
    .dw_plane_s2 = dw_plane_s2_neon, .tile_rows = GRADREF__CBD_TILE_ROWS_NEON,                     \
    .dw_lanes = dw_lanes_neon, .dw_lanes_planes = 4, .dw_cl_row = dw_cl_row_neon,                  \
    .dw_cl_stage = dw_cl_stage_neon, .dw_cl_lanes = 4, .tile32 = tile32_neon,                      \
    .pack_tile32 = pack_tile32_neon, .tile32_masks = tile32_masks_neon,                            \
    .tile_columns = tile_columns_neon, .scatter2 = scatter2_neon, .interleave2 = interleave2_neon, \
    .qs8_row = qs8_row_neon, .megengine_row = megengine_row_neon, .megengine_lanes = 8

const gradref__cbd_kernels gradref__cbd_kernels_neon = {.isa = "neon", NEON_KERNELS};

const gradref__cbd_kernels gradref__cbd_kernels_neon_dot = {
    .isa = "neon_dot",
    NEON_KERNELS,
    .word_channels = 4,
    .word_rows = GRADREF__CBD_TILE_ROWS_NEON,
    .word_tile32 = gradref__cbd_i8_quad_tile32_neon_dot,
};

#else
typedef int gradref__cbd_neon_unused;
#endif
