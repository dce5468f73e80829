/* SPDX-License-Identifier: Apache-2.0 */
/* The conv_backprop_data kernels, one ISA per file: depthwise rows (stride 1; each grad
 * element is the reference's chain of fused multiply-adds over its taps, with taps outside
 * diff read as 0, exact for a finite filter) in cbd_kernels.c (portable, and the choice),
 * cbd_avx2.c and cbd_avx512.c, all giving the same bits; and the AVX-512 direct tiles. */
#ifndef GRADREF_CBD_KERNELS_H
#define GRADREF_CBD_KERNELS_H

#include "cbd_internal.h"
#include "common/convert.h"
#include "common/isa.h"

#include <string.h>

/* One depthwise channel's geometry: the sizes of grad (I), diff (O) and the filter (K), the
 * leading padding, the dilation, the stride, and whether the taps are flipped (CONVOLUTION).
 * The kernels take stride 1; gradref__cbd_depthwise_strided runs other strides by them. */
typedef struct gradref__cbd_dw_shape {
    int64_t I[3], O[3], K[3], pad[3], dil[3], stride[3];
    int flip;
} gradref__cbd_dw_shape;

/* The shape of plan p's channels (p depthwise, stride 1). */
gradref__cbd_dw_shape gradref__cbd_dw_shape_of(const gradref__cbd_plan *p);

/* Rows of the AVX-512, AVX2 and NEON GEMM panels (gradref__sgemm_mr for those families). */
#define GRADREF__CBD_TILE_ROWS      14
#define GRADREF__CBD_TILE_ROWS_AVX2 6
#define GRADREF__CBD_TILE_ROWS_NEON 12

/* GRADREF_PRECISION_MEGENGINE_DEFAULT by lanes (cbd_megengine_lanes.h): one tap of a grad row's
 * chain, offsets in elements: the filter's tap at foff (from the filter at (g, ic, oc 0)), the
 * diff row at drow (from diff at (n, g, oc 0)), and the diff column of lane j: base + j. */
typedef struct gradref__cbd_me_tap {
    int64_t foff, drow, base;
    int64_t fk; /* the tap's kernel index (k0 * K1 + k1) * K2 + k2, into wf */
} gradref__cbd_me_tap;

/* Input channels a row kernel runs at once (independent chains sharing the diff values), and
 * the most taps a row takes (the tap list is on the stack). */
#define GRADREF__CBD_ME_CHANNELS 8
#define GRADREF__CBD_ME_MAX_TAPS 64

/* For the 8-lane row kernels (AVX2, NEON): lanes [lo, end) (lo < end <= 8) of the 16-bit values
 * at row + o2, o2 + l inside a row of O2. Copies the 8 values of a window inside the row to
 * window[] and returns the byte shuffle that moves them to their lanes (an index of 0x80 or
 * more: a zero lane; pshufb and TBL read the same table). A row shorter than 8: the lanes
 * themselves, and the identity. The lanes outside [lo, end) are unspecified. */
extern const int8_t gradref__cbd_me_shifts[15][16]; /* cbd_kernels.c */
static inline const int8_t *gradref__cbd_me_window(const uint16_t *row, int64_t o2, int64_t O2,
                                                   int64_t lo, int64_t end, uint16_t window[8]) {
    if (O2 < 8) {
        for (int64_t l = 0; l < 8; l++)
            window[l] = l >= lo && l < end ? row[o2 + l] : 0;
        return gradref__cbd_me_shifts[7];
    }
    const int64_t start = o2 < 0 ? 0 : o2 + 8 > O2 ? O2 - 8 : o2; /* |o2 - start| < 8 */
    memcpy(window, row + start, 8 * sizeof *window);
    return gradref__cbd_me_shifts[o2 - start + 7];
}

/* Lanes j0 .. j0 + count (count <= the kernel's lanes) of one grad row's residue class, for
 * `channels` (<= GRADREF__CBD_ME_CHANNELS) input channels fs_ic apart in the filter and out_ic
 * apart in grad: each lane's chain over oc < OCpg (filter and diff oc strides fs_oc, ds_oc),
 * then the taps in order, a tap adding a term where 0 <= base + j < O2 (diff's last size,
 * stride ds5); lane j's element of channel c is out[c * out_ic + (j - j0) * out_step]. All
 * offsets and sizes of the last dim fit int32. wf, when not NULL, holds the block's filter
 * values as f32 (exact), channel c of tap fk of oc at wf[oc * wf_oc + fk * CHANNELS + c]. */
typedef struct gradref__cbd_me_row {
    const uint16_t *filter, *diff;
    const float *wf;
    int64_t wf_oc;
    int64_t fs_oc, ds_oc, OCpg, channels, fs_ic, out_ic;
    const gradref__cbd_me_tap *tap;
    int64_t ntaps, O2, ds5, j0, count;
    int bf16;
    uint16_t *out;
    int64_t out_step;
} gradref__cbd_me_row;

/* The sub-grid coordinates (q0, q1, q2) of the 32 pixels from j0 of a sub-grid of sizes Q, for
 * the ISA bodies of tile32_masks (which take them as int32: the sizes fit, as do the shifts). */
static inline void gradref__cbd_lane_coords(int64_t j0, const int64_t *Q, int32_t q[3][32]) {
    int64_t q2 = j0 % Q[2], q1 = j0 / Q[2] % Q[1], q0 = j0 / (Q[2] * Q[1]);
    for (int l = 0; l < 32; l++) {
        q[0][l] = (int32_t)q0, q[1][l] = (int32_t)q1, q[2][l] = (int32_t)q2;
        if (++q2 == Q[2]) {
            q2 = 0;
            if (++q1 == Q[1]) q1 = 0, q0++;
        }
    }
}

/* The lanes (bit l for lane l) whose coordinate q[l] + shift lies in [0, limit), of 32: one
 * dim's compares, an ISA's, for gradref__cbd_tile32_masks_by_dims. */
typedef uint32_t (*gradref__cbd_range32_fn)(const int32_t *q, int32_t shift, int32_t limit);

/* The widest span of the taps' shifts along a dim whose lanes are compared once per shift. */
enum { GRADREF__CBD_SHIFT_SPAN = 16 };

/* tile32_masks by dims, the lanes' sub-grid coordinates in q: a tap's lanes are the AND of its
 * three dims' ranges, and the taps' shifts along a dim take few values (a 3 x 3's columns three),
 * so each value's 32 lanes are compared once a tile and looked up by every tap, rather than
 * compared once a tap; shifts spread wider than GRADREF__CBD_SHIFT_SPAN along a dim are compared
 * per tap. range32 is a constant in each instance. */
__attribute__((always_inline)) static inline void
gradref__cbd_tile32_masks_by_dims(gradref__cbd_range32_fn range32, const int32_t q[3][32],
                                  const int64_t *tap, int64_t ntaps, const int64_t *O, int64_t cols,
                                  uint16_t *masks) {
    if (ntaps <= 0) return;
    int64_t lo[3], hi[3];
    for (int d = 0; d < 3; d++) {
        lo[d] = hi[d] = tap[1 + d];
        for (int64_t t = 1; t < ntaps; t++) {
            const int64_t s = tap[4 * t + 1 + d];
            lo[d] = s < lo[d] ? s : lo[d], hi[d] = s > hi[d] ? s : hi[d];
        }
    }
    const int by_value = hi[0] - lo[0] < GRADREF__CBD_SHIFT_SPAN &&
                         hi[1] - lo[1] < GRADREF__CBD_SHIFT_SPAN &&
                         hi[2] - lo[2] < GRADREF__CBD_SHIFT_SPAN;
    const uint32_t live = cols >= 32 ? 0xffffffffu : (1u << cols) - 1u;
    uint32_t lanes[3][GRADREF__CBD_SHIFT_SPAN];
    for (int d = 0; d < 3 && by_value; d++)
        for (int64_t v = lo[d]; v <= hi[d]; v++)
            lanes[d][v - lo[d]] = range32(q[d], (int32_t)v, (int32_t)O[d]);
    for (int64_t t = 0; t < ntaps; t++) {
        const int64_t *s = tap + 4 * t + 1;
        uint32_t m = live;
        if (by_value)
            m &= lanes[0][s[0] - lo[0]] & lanes[1][s[1] - lo[1]] & lanes[2][s[2] - lo[2]];
        else
            for (int d = 0; d < 3; d++)
                m &= range32(q[d], (int32_t)s[d], (int32_t)O[d]);
        masks[2 * t] = (uint16_t)(m & 0xffffu);
        masks[2 * t + 1] = (uint16_t)(m >> 16);
    }
}

/* A small depthwise plane with its channels in the vector lanes (dw_lanes): a 2-D 3 x 3 at
 * stride 1, dilation 1, whose diff plane with the zeros its taps reach around it (the padded
 * plane) holds at most GRADREF__CBD_LANES_CELLS cells. A call transposes its channels' diff
 * (the table's dw_lanes_planes) into the padded plane, a cell a vector of their values, runs
 * each grad pixel's chain on those vectors (the reference's order: diff rows ascending, then
 * columns; a tap outside diff is a zero term, an exact no-op for a finite filter), and
 * transposes grad back: no per-plane setup and no partial vectors, which a 7 x 7 plane pays in
 * the plane kernels. */
#define GRADREF__CBD_LANES_CELLS 169
typedef struct gradref__cbd_dw_lanes {
    int64_t I1, I2;                              /* grad's rows and columns */
    int64_t width;                               /* the padded plane's row of cells */
    int64_t first_row, first_column;             /* grad (0, 0)'s first tap's cell: row, column */
    int64_t in_cells, zero_cells;                /* diff's cells (O1 O2), the padding's */
    int64_t weight[9];                           /* the stored weight index of the chain's tap t */
    int16_t in_cell[GRADREF__CBD_LANES_CELLS];   /* diff pixel j's cell */
    int16_t zero_cell[GRADREF__CBD_LANES_CELLS]; /* the padding's cells */
} gradref__cbd_dw_lanes;

/* Whether shape s takes dw_lanes, and then its geometry into *L (NULL: only the answer). */
int gradref__cbd_dw_lanes_of(const gradref__cbd_dw_shape *s, gradref__cbd_dw_lanes *L);

/* dw_lanes' grad row: P (<= 8) pixels of a row whose first tap is at cell (row, column) of the
 * padded plane s (LANES floats a cell), each diff row's cells loaded once and fed to the pixels
 * they reach, so each chain takes its terms as the reference (diff rows ascending, then columns
 * ascending); wt: the weights by tap (LANES floats each). Defines lanes_rows[P - 1] and
 * lanes_plane (all rows), from VEC, its ZERO, LOAD(float pointer) and FMA(acc, w, v) = acc +
 * w v fused. */
#define GRADREF__CBD_LANES_ROWS(VEC, LANES, ZERO, LOAD, FMA)                                       \
  __attribute__((always_inline)) static inline void lanes_row(                                     \
      int P, const float *wt, const float *s, int64_t width, int64_t row, int64_t column,          \
      VEC *out) {                                                                                  \
    VEC a[8];                                                                                      \
    _Pragma("GCC unroll 8") for (int p = 0; p < 8; p++) a[p] = ZERO;                               \
    _Pragma("GCC unroll 3") for (int d = 0; d < 3; d++) {                                          \
      const float *cells = s + LANES * ((row + d) * width + column);                               \
      const VEC w0 = LOAD(wt + 3 * LANES * d), w1 = LOAD(wt + 3 * LANES * d + LANES),              \
                w2 = LOAD(wt + 3 * LANES * d + 2 * LANES);                                         \
      _Pragma("GCC unroll 10") for (int x = 0; x < P + 2; x++) { /* pixel p: cell p + 2 - kp2 */   \
        const VEC v = LOAD(cells + LANES * x);                                                     \
        if (x < P) a[x] = FMA(a[x], w0, v);                                                        \
        if (x >= 1 && x - 1 < P) a[x - 1] = FMA(a[x - 1], w1, v);                                  \
        if (x >= 2 && x - 2 < P) a[x - 2] = FMA(a[x - 2], w2, v);                                  \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int p = 0; p < 8; p++) if (p < P) out[p] = a[p];                  \
  }                                                                                                \
  GRADREF__CBD_LANES_ROW(VEC, 1)                                                                   \
  GRADREF__CBD_LANES_ROW(VEC, 2)                                                                   \
  GRADREF__CBD_LANES_ROW(VEC, 3)                                                                   \
  GRADREF__CBD_LANES_ROW(VEC, 4)                                                                   \
  GRADREF__CBD_LANES_ROW(VEC, 5)                                                                   \
  GRADREF__CBD_LANES_ROW(VEC, 6)                                                                   \
  GRADREF__CBD_LANES_ROW(VEC, 7)                                                                   \
  GRADREF__CBD_LANES_ROW(VEC, 8)                                                                   \
  static void (*const lanes_rows[8])(const float *, const float *, int64_t, int64_t,               \
                                     int64_t, VEC *) = {lanes_row_1, lanes_row_2, lanes_row_3,     \
                                                        lanes_row_4, lanes_row_5, lanes_row_6,     \
                                                        lanes_row_7, lanes_row_8};                 \
  /* every grad row of the padded plane s into out (a pixel a vector) */                           \
  static void lanes_plane(const gradref__cbd_dw_lanes *L, const float *wt, const float *s,         \
                          VEC *out) {                                                              \
    for (int64_t i1 = 0; i1 < L->I1; i1++)                                                         \
      for (int64_t i2 = 0; i2 < L->I2; i2 += 8) {                                                  \
        const int64_t P = L->I2 - i2 < 8 ? L->I2 - i2 : 8;                                         \
        lanes_rows[P - 1](wt, s, L->width, i1 + L->first_row, i2 + L->first_column,                \
                          out + i1 * L->I2 + i2);                                                  \
      }                                                                                            \
  }
#define GRADREF__CBD_LANES_ROW(VEC, P)                                                             \
  static void lanes_row_##P(const float *wt, const float *s, int64_t width, int64_t row,           \
                            int64_t column, VEC *out) {                                            \
    lanes_row(P, wt, s, width, row, column, out);                                                  \
  }

/* A grad row of a channels-last depthwise plan (dw_cl_row), 3-D, 2-D or 1-D, or one column
 * phase of it at a stride: diff and grad hold the channels side by side, a chunk of `blocks`
 * blocks of the table's dw_cl_lanes channels. rows[r] is the r-th diff row the plane and row
 * taps reach (the chain's order) staged by blocks (dw_cl_stage): block B's pixel j at rows[r]
 * + B bstride + j lanes; w[r] its weights by column, block B's column c at w[r] + B wb + c
 * lanes. The row's K2 column taps (t, in the chain's order: kp2 descending) take weight column
 * wcol[t], and its grad column i2 (of I2) reads diff column i2 + shift[t] through tap t and
 * has its chunk at grad + i2 gp. Columns [first, last) have every column tap inside diff; the
 * others skip those outside, so each element is the reference's chain exactly (no zero terms,
 * no sign of zero to mend). */
#define GRADREF__CBD_CL_TAPS 64
typedef struct gradref__cbd_cl_row {
    const float *rows[GRADREF__CBD_CL_TAPS], *w[GRADREF__CBD_CL_TAPS];
    int64_t shift[GRADREF__CBD_CL_TAPS], wcol[GRADREF__CBD_CL_TAPS];
    int64_t nrows, K2, I2, O2, first, last;
    int64_t blocks, bstride, wb, gp;
    float *grad;
} gradref__cbd_cl_row;

/* The column taps [*t0, *t1) of row a that reach inside diff from grad column i2 (shift[t]
 * ascends with t, so they are a run). */
static inline void gradref__cbd_cl_taps(const gradref__cbd_cl_row *a, int64_t i2, int64_t *t0,
                                        int64_t *t1) {
    int64_t lo = 0, hi = a->K2;
    while (lo < hi && i2 + a->shift[lo] < 0)
        lo++;
    while (hi > lo && i2 + a->shift[hi - 1] >= a->O2)
        hi--;
    *t0 = lo, *t1 = hi;
}

/* Defines an ISA's always-inline COLUMNS NAME for GRADREF__CBD_CL_ROW from its vector type VEC
 * of LANES floats and operations: ZERO, LOAD(p), FMA(acc, w, x) (acc + w x, rounded once),
 * STORE(p, v) and NAN_STEP(state, v) (the state with v's NaN lanes noted). P grad columns from
 * i2 of Q blocks from B through column taps [t0, t1) of every row: P Q chains (at most 12, which
 * hide the FMA latency), a tap's weights loaded once a block for its P columns, its diff at
 * fixed offsets from one pointer. */
#define GRADREF__CBD_CL_COLUMNS(NAME, VEC, STATE, LANES, ZERO, LOAD, FMA, STORE, NAN_STEP)         \
  __attribute__((always_inline)) static inline STATE NAME(                                         \
      int P, int Q, const gradref__cbd_cl_row *a, int64_t B, int64_t i2, int64_t t0, int64_t t1,   \
      STATE state) {                                                                               \
    VEC acc[12];                                                                                   \
    const int64_t bs = a->bstride, wb = a->wb;                                                     \
    _Pragma("GCC unroll 12") for (int c = 0; c < P * Q; c++) acc[c] = ZERO;                        \
    for (int64_t r = 0; r < a->nrows; r++) {                                                       \
      const float *d = a->rows[r] + B * bs + (LANES)*i2, *w = a->w[r] + B * wb;                    \
      for (int64_t t = t0; t < t1; t++) {                                                          \
        const float *x = d + (LANES)*a->shift[t], *wq = w + (LANES)*a->wcol[t];                    \
        _Pragma("GCC unroll 12") for (int q = 0; q < Q; q++) {                                     \
          const VEC wt = LOAD(wq + q * wb);                                                        \
          _Pragma("GCC unroll 12") for (int p = 0; p < P; p++) acc[q * P + p] =                    \
              FMA(acc[q * P + p], wt, LOAD(x + q * bs + (LANES)*p));                               \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    const int64_t gp = a->gp; /* read once: the stores may alias *a for all the compiler knows */  \
    float *g = a->grad + i2 * gp + (LANES)*B;                                                      \
    _Pragma("GCC unroll 12") for (int p = 0; p < P; p++)                                           \
        _Pragma("GCC unroll 12") for (int q = 0; q < Q; q++) {                                     \
      STORE(g + p * gp + (LANES)*q, acc[q * P + p]);                                               \
      state = NAN_STEP(state, acc[q * P + p]);                                                     \
    }                                                                                              \
    return state;                                                                                  \
  }                                                                                                \
  /* One row's three taps into NAME##_unrolled's 12 chains, the diff and weights at fixed          \
   * offsets from d and w. */                                                                      \
  __attribute__((always_inline)) static inline void NAME##_taps(VEC *acc, const float *d,          \
                                                                const float *w) {                  \
    _Pragma("GCC unroll 3") for (int t = 0; t < 3; t++) {                                          \
      const VEC wt = LOAD(w + (LANES)*t);                                                          \
      _Pragma("GCC unroll 12") for (int p = 0; p < 12; p++) acc[p] =                               \
          FMA(acc[p], wt, LOAD(d + (LANES) * (p + t)));                                            \
    }                                                                                              \
  }                                                                                                \
  /* NAME(12, 1, ...) across every block for the rows gradref__cbd_cl_unrolled takes, the three    \
   * taps unrolled and each row's diff and weights reached by pointers stepped a block at a time   \
   * (each load at a fixed offset from one register: an indexed FMA operand takes two issue        \
   * slots on Intel cores). R 2 or 3: that many rows, unrolled; 0: a->nrows rows, their pointers   \
   * in arrays. The chains are NAME's. */                                                          \
  __attribute__((always_inline)) static inline STATE NAME##_unrolled(                              \
      int R, const gradref__cbd_cl_row *a, int64_t i2, STATE state) {                              \
    const int64_t bs = a->bstride, wb = a->wb, gp = a->gp, at = (LANES) * (i2 + a->shift[0]);      \
    const int64_t wat = (LANES)*a->wcol[0], nrows = R ? R : a->nrows;                              \
    const float *d0 = NULL, *d1 = NULL, *d2 = NULL, *w0 = NULL, *w1 = NULL, *w2 = NULL;            \
    const float *dp[GRADREF__CBD_CL_TAPS], *wp[GRADREF__CBD_CL_TAPS];                              \
    if (R)                                                                                         \
      d0 = a->rows[0] + at, d1 = a->rows[1] + at, d2 = a->rows[R - 1] + at, w0 = a->w[0] + wat,    \
      w1 = a->w[1] + wat, w2 = a->w[R - 1] + wat;                                                  \
    for (int64_t r = 0; !R && r < nrows; r++)                                                      \
      dp[r] = a->rows[r] + at, wp[r] = a->w[r] + wat;                                              \
    float *g = a->grad + i2 * gp;                                                                  \
    for (int64_t B = 0; B < a->blocks; B++) {                                                      \
      VEC acc[12];                                                                                 \
      _Pragma("GCC unroll 12") for (int p = 0; p < 12; p++) acc[p] = ZERO;                         \
      if (R) {                                                                                     \
        const float *d[3] = {d0, d1, d2}, *w[3] = {w0, w1, w2};                                    \
        _Pragma("GCC unroll 3") for (int r = 0; r < R; r++) NAME##_taps(acc, d[r], w[r]);          \
        d0 += bs, d1 += bs, d2 += bs, w0 += wb, w1 += wb, w2 += wb;                                \
      } else {                                                                                     \
        for (int64_t r = 0; r < nrows; r++) {                                                      \
          NAME##_taps(acc, dp[r], wp[r]);                                                          \
          dp[r] += bs, wp[r] += wb;                                                                \
        }                                                                                          \
      }                                                                                            \
      _Pragma("GCC unroll 12") for (int p = 0; p < 12; p++) {                                      \
        STORE(g + p * gp, acc[p]);                                                                 \
        state = NAN_STEP(state, acc[p]);                                                           \
      }                                                                                            \
      g += (LANES);                                                                                \
    }                                                                                              \
    return state;                                                                                  \
  }

/* Whether the interior of row a takes COLUMNS' unrolled body: three column taps on consecutive
 * diff and weight columns (stride and dilation 1 along the row). */
static inline int gradref__cbd_cl_unrolled(const gradref__cbd_cl_row *a) {
    return a->K2 == 3 && a->shift[1] == a->shift[0] + 1 && a->shift[2] == a->shift[0] + 2 &&
           a->wcol[1] == a->wcol[0] + 1 && a->wcol[2] == a->wcol[0] + 2;
}

/* Defines dw_cl_row NAME (with LINKAGE) from an ISA file's always-inline COLUMNS(P, Q, a, B,
 * i2, t0, t1, state): P grad columns from i2 of Q blocks from B through column taps [t0, t1),
 * P Q <= 12 chains, returning its NaN state (of type STATE, starting at INIT; FOUND(state):
 * whether a NaN was stored). The columns outside the interior take the column taps inside diff,
 * the interior 12, 4 and 1 at a time, each across every block of the chunk, so that grad is
 * written in address order. Fewer columns take more blocks at once: their chains then hide the
 * FMA latency, and a tap's offsets serve more than one FMA. UNROLLED 1: the interior's 12 at a
 * time by COLUMNS' unrolled body where it applies (not at AVX-512, whose two-thread lines it
 * made slower). */
#define GRADREF__CBD_CL_ROW(LINKAGE, NAME, STATE, INIT, COLUMNS, UNROLLED, FOUND)                  \
  __attribute__((always_inline)) static inline STATE cl_chunk(                                     \
      int P, int Q, const gradref__cbd_cl_row *a, int64_t i2, int64_t t0, int64_t t1, STATE s) {   \
    int64_t B = 0;                                                                                 \
    for (; B + Q <= a->blocks; B += Q)                                                             \
      s = COLUMNS(P, Q, a, B, i2, t0, t1, s);                                                      \
    for (; B < a->blocks; B++)                                                                     \
      s = COLUMNS(P, 1, a, B, i2, t0, t1, s);                                                      \
    return s;                                                                                      \
  }                                                                                                \
  static STATE cl_edge(const gradref__cbd_cl_row *a, int64_t i2, STATE s) {                        \
    int64_t t0, t1;                                                                                \
    gradref__cbd_cl_taps(a, i2, &t0, &t1);                                                         \
    return cl_chunk(1, 8, a, i2, t0, t1, s);                                                       \
  }                                                                                                \
  LINKAGE int NAME(const gradref__cbd_cl_row *a) {                                                 \
    STATE s = INIT;                                                                                \
    int64_t i2 = 0;                                                                                \
    for (; i2 < a->first; i2++)                                                                    \
      s = cl_edge(a, i2, s);                                                                       \
    const int unrolled = UNROLLED && gradref__cbd_cl_unrolled(a);                                  \
    for (; i2 + 12 <= a->last; i2 += 12)                                                           \
      s = !unrolled       ? cl_chunk(12, 1, a, i2, 0, a->K2, s)                                    \
          : a->nrows == 3 ? COLUMNS##_unrolled(3, a, i2, s)                                        \
          : a->nrows == 2 ? COLUMNS##_unrolled(2, a, i2, s)                                        \
                          : COLUMNS##_unrolled(0, a, i2, s);                                       \
    for (; i2 + 4 <= a->last; i2 += 4)                                                             \
      s = cl_chunk(4, 3, a, i2, 0, a->K2, s);                                                      \
    for (; i2 < a->last; i2++)                                                                     \
      s = cl_chunk(1, 8, a, i2, 0, a->K2, s);                                                      \
    for (; i2 < a->I2; i2++)                                                                       \
      s = cl_edge(a, i2, s);                                                                       \
    return FOUND(s);                                                                               \
  }

/* The most depth taps dw_plane3x3 takes. */
#define GRADREF__CBD_DW_PLANES 8

/* The kernels of one ISA, picked once per call. Depthwise (f32, stride 1): one grad row from
 * the nrows diff rows its row taps reach (rows, with the stored row-tap index base), never NULL;
 * four rows at once (NULL: row by row); whole planes for K1, K2 <= 3 (NULL: rows), returning
 * whether grad holds a zero or a NaN (gradref__cbd_depthwise_plane).
 * Direct tiles (NULL at the portable level, where the GEMM runs instead): see the declarations
 * below. */
typedef struct gradref__cbd_kernels {
    const char *isa;
    void (*dw_row)(const gradref__cbd_dw_shape *s, const float *w, const float *const *rows,
                   const int64_t *base, int64_t nrows, float *out);
    void (*dw_rows4)(const gradref__cbd_dw_shape *s, const float *w, const float *diff,
                     const float *const rows[4][64], const int64_t base[4][64], const int64_t *nr,
                     int64_t nrow, float *out);
    /* whole planes (K1, K2 <= 3, dilation 1): a grad plane from `planes` diff planes (1 to
     * GRADREF__CBD_DW_PLANES: a 3-D channel's depth taps in the chain's order), diff[j] through
     * the filter's 2-D slice w[j], each element's chain running on across them */
    int (*dw_plane3x3)(const gradref__cbd_dw_shape *s, const float *const *w,
                       const float *const *diff, int64_t planes, float *grad);
    /* a plane at stride 2 (gradref__cbd_s2_plane), grad written once, its columns' two phases
     * interleaved as they are stored; the same answer (NULL: by stride phases). s is one
     * plane's shape; its diff planes and their filter slices as dw_plane3x3's */
    int (*dw_plane_s2)(const gradref__cbd_dw_shape *s, const float *const *w,
                       const float *const *diff, int64_t planes, float *grad);
    /* 1: the depthwise items leave the next plane to the hardware prefetchers (0: they prefetch
     * it before each plane) */
    int dw_no_prefetch;
    /* dw_lanes_planes channels of a small plane at once (gradref__cbd_dw_lanes): w holds their
     * weights by tap (the chain's order), then channel; channel c's diff at diff + c dc, its
     * grad at grad + c gc, both dense. Returns the channels (bits) whose grad holds a zero or a
     * NaN. NULL: a plane at a time. */
    unsigned (*dw_lanes)(const gradref__cbd_dw_lanes *L, const float *w, const float *diff,
                         int64_t dc, float *grad, int64_t gc);
    int dw_lanes_planes;
    /* channels-last depthwise (gradref__cbd_cl_row): a grad row of a chunk of channels, returning
     * whether it stored a NaN; dw_cl_stage copies a diff row of n pixels (sp floats apart) and
     * `blocks` blocks of dw_cl_lanes channels to dst by blocks, block b's pixel j at dst + (b
     * n + j) lanes: a block's pixels side by side. NULL: staged to planes */
    int (*dw_cl_row)(const gradref__cbd_cl_row *a);
    void (*dw_cl_stage)(const float *src, int64_t sp, int64_t n, int64_t blocks, float *dst);
    int dw_cl_lanes;
    int tile_rows; /* the GEMM panel rows the tiles take (0: no tiles) */
    unsigned (*tile32)(const float *image, int64_t channel_stride, int64_t ocpg,
                       const int64_t *offset, const uint16_t *masks, int64_t ntaps, int64_t cols,
                       int inside, const float *a, int rows, float *c, int64_t ldc, int load);
    void (*pack_tile32)(const float *image, int64_t channel_stride, int64_t ocpg,
                        const int64_t *offset, const uint16_t *masks, int64_t ntaps, float *dst);
    void (*tile32_masks)(const int64_t *tap, int64_t ntaps, const int64_t *Q, const int64_t *O,
                         int64_t j0, int64_t cols, uint16_t *masks);
    /* Tile pixels [first, first + cols) (cols <= 4, in one 16-pixel half) of all M rows of
     * the panels at a, panel_floats apart, pr rows each: tile32's chain (inside 2's arguments
     * for a packed tile) with a panel's rows in the lanes, where tile32 would spend a vector
     * of pixel lanes on those few; a tap that leaves all of them out is skipped. c is grad at
     * (row 0, the tile's pixel 0); the answer is tile32's. NULL: the tiles take them */
    unsigned (*tile_columns)(const float *image, int64_t channel_stride, int64_t ocpg,
                             const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                             int64_t first, int64_t cols, const float *a, int64_t panel_floats,
                             int64_t pr, int64_t M, float *c, int64_t ldc);
    /* row[r * row_stride + 2 * x] = from[r * len + x]; the odd elements between two values are
     * left as they are, or, when odd_free, may be written +0. NULL: a plain loop */
    void (*scatter2)(const float *from, int64_t len, int64_t rows, float *row, int64_t row_stride,
                     int odd_free);
    /* row[r * row_stride + 2 * x] = even[r * len + x], row[r * row_stride + 2 * x + 1] =
     * odd[r * len + x], or +0 when odd is NULL: two stride phases along a row, or one and the
     * zeros between, each element stored once and none read; when zero_at is not 0, the 2 len
     * elements zero_at past each row's (a grad row no phase reaches) are +0 too. NULL: a plain
     * loop */
    void (*interleave2)(const float *even, const float *odd, int64_t len, int64_t rows, float *row,
                        int64_t row_stride, int64_t zero_at);
    /* out[x] = gradref__cbd_qs8_requantize_inline((int32_t)from[x], acc_scale, grad_scale) for
     * x < n, from holding integers: whole vectors take any (float)int32, the tail past the last
     * multiple of 8 those (int32_t) gives back. NULL: a plain loop */
    void (*qs8_row)(const float *from, int64_t n, float acc_scale, float grad_scale, int8_t *out);
    /* MegEngine DEFAULT on up to megengine_lanes elements (NULL: the scatter of
     * cbd_megengine.c) */
    void (*megengine_row)(const gradref__cbd_me_row *a);
    int megengine_lanes;
    /* I8 by 32-bit words of output channels (0 and NULL: the f32 tiles in exact parts,
     * cbd_int8.c): the direct tiles over words of word_channels channels' values, the lowest
     * channel in the lowest bits (2: int16 pairs, 4: int8 quads); see
     * gradref__cbd_i8_pair_tile32_avx2 */
    int word_channels;
    int word_rows; /* the rows of its filter panels */
    void (*word_tile32)(const int32_t *image, int64_t channel_stride, int64_t words,
                        const int64_t *offset, const uint16_t *masks, int64_t ntaps, int64_t cols,
                        int inside, const int32_t *a, int rows, int32_t *c, int64_t ldc, int load);
    /* a lower level's table whose tiles take fewer rows, for the no-workspace path where this
     * one's panels leave its stack buffer no room for diff (NULL: none) */
    const struct gradref__cbd_kernels *narrow;
} gradref__cbd_kernels;

/* The table's tile32 on `channels` output channels a tap, or for I8 by words (words != 0) its
 * word_tile32 on that many words, on the same buffers: the words' int32 sums land in c's
 * floats. Returns tile32's answer (0 for words: int32 sums need no NaN rule). */
static inline unsigned gradref__cbd_run_tile(const gradref__cbd_kernels *k, int words,
                                             const float *image, int64_t channel_stride,
                                             int64_t channels, const int64_t *offset,
                                             const uint16_t *masks, int64_t ntaps, int64_t cols,
                                             int inside, const float *a, int rows, float *c,
                                             int64_t ldc, int load) {
    if (!words)
        return k->tile32(image, channel_stride, channels, offset, masks, ntaps, cols, inside, a,
                         rows, c, ldc, load);
    k->word_tile32((const int32_t *)(const void *)image, channel_stride, channels, offset, masks,
                   ntaps, cols, inside, (const int32_t *)(const void *)a, rows,
                   (int32_t *)(void *)c, ldc, load);
    return 0;
}

/* tile_columns for G panels at once (the ISA files' instances). */
typedef unsigned (*gradref__cbd_columns_fn)(const float *image, int64_t channel_stride,
                                            int64_t ocpg, const int64_t *offset,
                                            const uint16_t *masks, int64_t ntaps, int64_t first,
                                            const float *a, int64_t panel_floats, int64_t pr,
                                            int64_t M, float *c, int64_t ldc);

/* Defines columns_P_G, the gradref__cbd_columns_fn of BODY(P, G, its arguments...): an ISA
 * file's always-inline body for P pixels and G panels. */
#define GRADREF__CBD_COLUMNS_FN(BODY, P, G)                                                        \
  static unsigned columns_##P##_##G(const float *image, int64_t channel_stride, int64_t ocpg,      \
                                    const int64_t *offset, const uint16_t *masks, int64_t ntaps,   \
                                    int64_t first, const float *a, int64_t panel_floats,           \
                                    int64_t pr, int64_t M, float *c, int64_t ldc) {                \
    return BODY(P, G, image, channel_stride, ocpg, offset, masks, ntaps, first, a, panel_floats,   \
                pr, M, c, ldc);                                                                    \
  }

/* M(P, 1) ... M(P, N), N up to 16. */
#define GRADREF__CBD_UPTO_1(M, P)          M(P, 1)
#define GRADREF__CBD_UPTO_2(M, P)          GRADREF__CBD_UPTO_1(M, P) M(P, 2)
#define GRADREF__CBD_UPTO_3(M, P)          GRADREF__CBD_UPTO_2(M, P) M(P, 3)
#define GRADREF__CBD_UPTO_4(M, P)          GRADREF__CBD_UPTO_3(M, P) M(P, 4)
#define GRADREF__CBD_UPTO_5(M, P)          GRADREF__CBD_UPTO_4(M, P) M(P, 5)
#define GRADREF__CBD_UPTO_6(M, P)          GRADREF__CBD_UPTO_5(M, P) M(P, 6)
#define GRADREF__CBD_UPTO_7(M, P)          GRADREF__CBD_UPTO_6(M, P) M(P, 7)
#define GRADREF__CBD_UPTO_8(M, P)          GRADREF__CBD_UPTO_7(M, P) M(P, 8)
#define GRADREF__CBD_UPTO_9(M, P)          GRADREF__CBD_UPTO_8(M, P) M(P, 9)
#define GRADREF__CBD_UPTO_10(M, P)         GRADREF__CBD_UPTO_9(M, P) M(P, 10)
#define GRADREF__CBD_UPTO_11(M, P)         GRADREF__CBD_UPTO_10(M, P) M(P, 11)
#define GRADREF__CBD_UPTO_12(M, P)         GRADREF__CBD_UPTO_11(M, P) M(P, 12)
#define GRADREF__CBD_UPTO_13(M, P)         GRADREF__CBD_UPTO_12(M, P) M(P, 13)
#define GRADREF__CBD_UPTO_14(M, P)         GRADREF__CBD_UPTO_13(M, P) M(P, 14)
#define GRADREF__CBD_UPTO_15(M, P)         GRADREF__CBD_UPTO_14(M, P) M(P, 15)
#define GRADREF__CBD_UPTO_16(M, P)         GRADREF__CBD_UPTO_15(M, P) M(P, 16)
#define GRADREF__CBD_COLUMNS_BODY_FN(P, G) GRADREF__CBD_COLUMNS_FN(columns_body, P, G)
#define GRADREF__CBD_COLUMNS_ENTRY(P, G)   columns_##P##_##G,

/* Defines NAME, a tile_columns by gradref__cbd_column_groups over BY_COLS[cols - 1] (the
 * columns_P_G of P = cols) in groups of at most MOST[cols - 1] panels. */
#define GRADREF__CBD_TILE_COLUMNS(NAME, BY_COLS, MOST)                                             \
  static unsigned NAME(const float *image, int64_t channel_stride, int64_t ocpg,                   \
                       const int64_t *offset, const uint16_t *masks, int64_t ntaps, int64_t first, \
                       int64_t cols, const float *a, int64_t panel_floats, int64_t pr, int64_t M,  \
                       float *c, int64_t ldc) {                                                    \
    return gradref__cbd_column_groups(BY_COLS[cols - 1], MOST[cols - 1], image, channel_stride,    \
                                      ocpg, offset, masks, ntaps, first, a, panel_floats, pr, M,   \
                                      c, ldc);                                                     \
  }

/* columns_P_G for P pixels (1 to 4) and G panels (1 to N<P>), by the file's columns_body. */
#define GRADREF__CBD_COLUMNS_INSTANCES(N1, N2, N3, N4)                                             \
  GRADREF__CBD_UPTO_##N1(GRADREF__CBD_COLUMNS_BODY_FN, 1)                                          \
      GRADREF__CBD_UPTO_##N2(GRADREF__CBD_COLUMNS_BODY_FN, 2)                                      \
          GRADREF__CBD_UPTO_##N3(GRADREF__CBD_COLUMNS_BODY_FN, 3)                                  \
              GRADREF__CBD_UPTO_##N4(GRADREF__CBD_COLUMNS_BODY_FN, 4)

/* Defines a level's tile_columns NAME over its columns_body(P, G, ...) (the file's, with its
 * COLUMNS_MAX = 4 and COLUMN_PANELS_MAX = N1): the instances, their table, and column_panels,
 * the most panels a group takes for P pixels. */
#define GRADREF__CBD_COLUMN_KERNELS(NAME, N1, N2, N3, N4)                                          \
  GRADREF__CBD_COLUMNS_INSTANCES(N1, N2, N3, N4)                                                   \
  static const gradref__cbd_columns_fn columns[COLUMNS_MAX][COLUMN_PANELS_MAX] = {                 \
      {GRADREF__CBD_UPTO_##N1(GRADREF__CBD_COLUMNS_ENTRY, 1)},                                     \
      {GRADREF__CBD_UPTO_##N2(GRADREF__CBD_COLUMNS_ENTRY, 2)},                                     \
      {GRADREF__CBD_UPTO_##N3(GRADREF__CBD_COLUMNS_ENTRY, 3)},                                     \
      {GRADREF__CBD_UPTO_##N4(GRADREF__CBD_COLUMNS_ENTRY, 4)}};                                    \
  static const int column_panels[COLUMNS_MAX] = {N1, N2, N3, N4};                                  \
  GRADREF__CBD_TILE_COLUMNS(NAME, columns, column_panels)

/* Where tile_columns reads pixel first + p (p < P) of a tap at `at` (image + its offset): b[p]
 * and a step of channel_stride a channel, or +0 and no step where the tap's lane masks (its
 * two, tile32's) leave the pixel out, as a tile's lane reads it. Returns 0 when they leave
 * out all P pixels: the tap is then skipped, as tile32 skips a tap without lanes (exact for a
 * finite filter). */
static inline unsigned gradref__cbd_column_sources(const float *at, int64_t channel_stride,
                                                   int64_t first, const uint16_t *tap_masks, int P,
                                                   const float **b, int64_t *step) {
    static const float zero = 0.0f;
    const unsigned m = (unsigned)(tap_masks[first / 16] >> (first % 16)) & ((1u << P) - 1u);
    for (int p = 0; p < P; p++) {
        const int in = (m >> p) & 1u;
        b[p] = in ? at + first + p : &zero;
        step[p] = in ? channel_stride : 0;
    }
    return m;
}

/* A column's values for `rows` panel rows (lanes[i] for row i) into c, rows ldc apart. */
static inline void gradref__cbd_column_store(const float *lanes, int64_t rows, float *c,
                                             int64_t ldc) {
    for (int64_t i = 0; i < rows; i++)
        c[i * ldc] = lanes[i];
}

/* tile_columns (same arguments but cols) by groups of at most `most` panels, as even as the
 * fewest groups allow: group of G panels by by_panels[G - 1]. */
static inline unsigned gradref__cbd_column_groups(const gradref__cbd_columns_fn *by_panels,
                                                  int64_t most, const float *image,
                                                  int64_t channel_stride, int64_t ocpg,
                                                  const int64_t *offset, const uint16_t *masks,
                                                  int64_t ntaps, int64_t first, const float *a,
                                                  int64_t panel_floats, int64_t pr, int64_t M,
                                                  float *c, int64_t ldc) {
    const int64_t panels = (M + pr - 1) / pr;
    unsigned hit = 0;
    for (int64_t q = 0, groups = (panels + most - 1) / most; q < panels; groups--) {
        const int64_t G = (panels - q + groups - 1) / groups;
        hit |= by_panels[G - 1](image, channel_stride, ocpg, offset, masks, ntaps, first,
                                a + q * panel_floats, panel_floats, pr, M - q * pr,
                                c + q * pr * ldc, ldc);
        q += G;
    }
    return hit;
}

/* The table of the highest level at or below max_isa (common/isa.h) that the CPU runs; its
 * tiles match the GEMM's panels at that level (gradref__sgemm_mr). */
const gradref__cbd_kernels *gradref__cbd_kernels_for(int max_isa);

#ifdef GRADREF__X86
extern const gradref__cbd_kernels gradref__cbd_kernels_avx2;        /* cbd_avx2.c */
extern const gradref__cbd_kernels gradref__cbd_kernels_avx512;      /* cbd_avx512.c */
extern const gradref__cbd_kernels gradref__cbd_kernels_avx512_vnni; /* cbd_avx512.c */
#endif
#ifdef GRADREF__ARM64
extern const gradref__cbd_kernels gradref__cbd_kernels_neon;     /* cbd_neon.c */
extern const gradref__cbd_kernels gradref__cbd_kernels_neon_dot; /* cbd_neon.c */
/* I8 tiles by int8 quads (cbd_neon_dot.c, SDOT; 12-row panels): the pair tiles' contract
 * (gradref__cbd_i8_pair_tile32_avx2) on words of four output channels' bytes, 4j (lowest
 * byte) to 4j + 3. */
void gradref__cbd_i8_quad_tile32_neon_dot(const int32_t *image, int64_t channel_stride,
                                          int64_t quads, const int64_t *offset,
                                          const uint16_t *masks, int64_t ntaps, int64_t cols,
                                          int inside, const int32_t *a, int rows, int32_t *c,
                                          int64_t ldc, int load);
#endif

/* Whether the MegEngine DEFAULT lanes kernels take plan p (k->megengine_row, few enough taps,
 * the last dim's offsets within int32), and items [s0, s1) of (n, g, block of
 * GRADREF__CBD_ME_CHANNELS input channels) by them (cbd_megengine.c). */
int gradref__cbd_megengine_by_lanes(const gradref__cbd_plan *p, const gradref__cbd_kernels *k);
void gradref__cbd_megengine_lanes(const gradref__cbd_plan *p, const gradref__cbd_kernels *k,
                                  int64_t s0, int64_t s1);

/* One depthwise channel: w holds the K0*K1*K2 taps (stored order), diff and grad are dense
 * planes of O and I pixels. Returns 0 when grad holds no zero and no NaN (the 3 x 3 plane
 * kernels test their stores; the row kernels always return 1): the caller's NaN and
 * signed-zero scan of the plane can then be skipped. */
int gradref__cbd_depthwise_plane(const gradref__cbd_kernels *k, const gradref__cbd_dw_shape *s,
                                 const float *w, const float *diff, float *grad);

/* The most taps, and the largest stride along the last dim, a strided depthwise channel takes
 * (a stride phase's filter and a row's column phases are on the stack). */
#define GRADREF__CBD_DW_STRIDED_TAPS    256
#define GRADREF__CBD_DW_STRIDED_COLUMNS 64

/* Whether gradref__cbd_depthwise_strided runs the channels of shape s (at most
 * GRADREF__CBD_DW_STRIDED_TAPS taps and GRADREF__CBD_DW_STRIDED_COLUMNS column phases, and
 * along each dim every stride phase's first tap within the padding), and the floats of its
 * scratch (one row of stride phases' planes). */
int gradref__cbd_dw_strided_fits(const gradref__cbd_dw_shape *s);
int64_t gradref__cbd_dw_strided_floats(const gradref__cbd_dw_shape *s);

/* gradref__cbd_depthwise_plane at any stride: each stride phase of grad (a sub-grid) is a
 * stride-1 depthwise channel over diff, whose filter is the taps reaching that phase, run by
 * gradref__cbd_depthwise_plane into scratch and then moved to its places in grad. Each
 * element's chain is the reference's (the same terms in the same diff order). */
int gradref__cbd_depthwise_strided(const gradref__cbd_kernels *k, const gradref__cbd_dw_shape *s,
                                   const float *w, const float *diff, float *grad, float *scratch);

/* The diff column of grad column i2 through tap position kp2 (stride 1). */
static inline int64_t gradref__cbd_column_shift(const gradref__cbd_dw_shape *s, int64_t kp2) {
    return s->pad[2] - kp2 * s->dil[2];
}

/* Whether depthwise shape s is one plane: one grad and one diff plane along its first dim,
 * which its one tap joins (a pad before that tap would leave grad +0 instead). */
static inline int gradref__cbd_one_plane(const gradref__cbd_dw_shape *s) {
    return s->I[0] == 1 && s->O[0] == 1 && s->K[0] == 1 && s->pad[0] == 0;
}

/* The stored index of tap position kp along dim j (flipped in CONVOLUTION mode). */
static inline int64_t gradref__cbd_stored(const gradref__cbd_dw_shape *s, int j, int64_t kp) {
    return s->flip ? s->K[j] - 1 - kp : kp;
}

/* A stride-2 depthwise plane (stride 2 along the last two dims, dilation 1, K1 and K2 <= 3),
 * grad column j = 2 x + r (r the column phase): each column phase's diff column shifts (x +
 * shift) and stored column taps in the chain's order, at most two. Blocks of 8 x from x in
 * [lo, hi - 8] read only inside a diff row. */
typedef struct gradref__cbd_s2_taps {
    int64_t shift[2][2], col_tap[2][2], ncols[2];
    int64_t lo, hi;
} gradref__cbd_s2_taps;

/* Whether the stride-2 plane kernel (k->dw_plane_s2) takes shape s: any depth (a grad plane
 * from the diff planes its depth taps reach, at any stride and dilation). */
static inline int gradref__cbd_s2_plane(const gradref__cbd_dw_shape *s) {
    return s->K[0] <= GRADREF__CBD_DW_PLANES && s->stride[1] == 2 && s->stride[2] == 2 &&
           s->dil[1] == 1 && s->dil[2] == 1 && s->K[1] <= 3 && s->K[2] <= 3;
}

/* The column phases' taps of a stride-2 plane (t's shift, col_tap, ncols, lo, hi). */
static inline void gradref__cbd_s2_columns(const gradref__cbd_dw_shape *s,
                                           gradref__cbd_s2_taps *t) {
    t->lo = 0, t->hi = s->O[2];
    for (int r = 0; r < 2; r++) {
        t->ncols[r] = 0;
        for (int64_t kp2 = s->K[2] - 1; kp2 >= 0; kp2--) {
            const int64_t num = r + s->pad[2] - kp2;
            if (num % 2 != 0) continue;
            if (-num / 2 > t->lo) t->lo = -num / 2;
            if (s->O[2] - num / 2 < t->hi) t->hi = s->O[2] - num / 2;
            t->shift[r][t->ncols[r]] = num / 2;
            t->col_tap[r][t->ncols[r]++] = gradref__cbd_stored(s, 2, kp2);
        }
    }
}

/* A stride-2 row's blocks of 16 grad columns from 2 x, x = 0, 8, ..: `whole` whole ones, those
 * with x in [inside_lo, inside_hi) reading only inside diff's rows (x >= lo, x + 8 <= hi), then
 * the last `part` columns. The blocks outside that range and the part are edge blocks: at most
 * three, since lo <= 1 and hi >= (I2 - 3) / 2 for K2 <= 3 (one block each side). */
typedef struct gradref__cbd_s2_blocks {
    int64_t whole, inside_lo, inside_hi, part;
} gradref__cbd_s2_blocks;

static inline gradref__cbd_s2_blocks gradref__cbd_s2_blocks_of(const gradref__cbd_dw_shape *s,
                                                               const gradref__cbd_s2_taps *t) {
    gradref__cbd_s2_blocks B;
    B.whole = s->I[2] / 16, B.part = s->I[2] % 16;
    const int64_t lo8 = (t->lo + 7) / 8 * 8;
    B.inside_lo = lo8 < 8 * B.whole ? lo8 : 8 * B.whole;
    B.inside_hi = t->hi - 8 < B.inside_lo ? B.inside_lo : (t->hi - 8) / 8 * 8 + 8;
    if (B.inside_hi > 8 * B.whole) B.inside_hi = 8 * B.whole;
    return B;
}

/* Defines NAME, a dw_plane_s2 kernel (gradref__cbd_kernels): the file's
 * FN(NC0, NC1, s, w, diff, planes, grad) instanced once per column tap counts NC0, NC1 (0 to 2),
 * so its tap loops unroll, and NAME calls the instance of the plane's counts. LINKAGE: static,
 * or empty for a kernel other tables take too. */
#define GRADREF__CBD_S2_INSTANCE(FN, NC0, NC1)                                                     \
  static int FN##_##NC0##NC1(const gradref__cbd_dw_shape *s, const float *const *w,                \
                             const float *const *diff, int64_t planes, float *grad) {              \
    return FN(NC0, NC1, s, w, diff, planes, grad) != 0;                                            \
  }
#define GRADREF__CBD_S2_PLANE_KERNEL(LINKAGE, NAME, FN)                                            \
  GRADREF__CBD_S2_INSTANCE(FN, 0, 0)                                                               \
  GRADREF__CBD_S2_INSTANCE(FN, 0, 1)                                                               \
  GRADREF__CBD_S2_INSTANCE(FN, 0, 2)                                                               \
  GRADREF__CBD_S2_INSTANCE(FN, 1, 0)                                                               \
  GRADREF__CBD_S2_INSTANCE(FN, 1, 1)                                                               \
  GRADREF__CBD_S2_INSTANCE(FN, 1, 2)                                                               \
  GRADREF__CBD_S2_INSTANCE(FN, 2, 0)                                                               \
  GRADREF__CBD_S2_INSTANCE(FN, 2, 1)                                                               \
  GRADREF__CBD_S2_INSTANCE(FN, 2, 2)                                                               \
  LINKAGE int NAME(const gradref__cbd_dw_shape *s, const float *const *w,                          \
                   const float *const *diff, int64_t planes, float *grad) {                        \
    typedef int (*instance)(const gradref__cbd_dw_shape *, const float *const *,                   \
                            const float *const *, int64_t, float *);                               \
    static const instance by_taps[3][3] = {                                                        \
        {FN##_00, FN##_01, FN##_02}, {FN##_10, FN##_11, FN##_12}, {FN##_20, FN##_21, FN##_22}};    \
    gradref__cbd_s2_taps t;                                                                        \
    gradref__cbd_s2_columns(s, &t);                                                                \
    return by_taps[t.ncols[0]][t.ncols[1]](s, w, diff, planes, grad);                              \
  }

/* Grad row i1's diff rows at stride 2 (K1 <= 3), at most two: the row taps of its parity in the
 * chain's order, rows[a] their diff rows (from diff, O2 long) and kp[a] their positions; both
 * slots set when there is one (the second a copy of the first). Returns how many. */
static inline int gradref__cbd_s2_row_taps(const gradref__cbd_dw_shape *s, const float *diff,
                                           int64_t i1, const float *rows[2], int64_t kp[2]) {
    const int64_t K1 = s->K[1], top = i1 + s->pad[1];
    const int64_t k = K1 - 1 - ((top - K1 + 1) % 2 != 0), num = top - k; /* even */
    const int first = k >= 0 && num >= 0 && num / 2 < s->O[1];
    const int second = k >= 2 && num + 2 >= 0 && num / 2 + 1 < s->O[1];
    if (!first && !second) return 0;
    rows[0] = diff + (num / 2 + !first) * s->O[2], kp[0] = first ? k : k - 2;
    rows[1] = second ? diff + (num / 2 + 1) * s->O[2] : rows[0], kp[1] = second ? k - 2 : kp[0];
    return first + second;
}

/* A stride-2 plane kernel's weight from a filter slice w: row tap position kp1, column phase
 * k / 2 and its column tap k % 2 (t's), or 0 past the phase's taps. */
static inline float gradref__cbd_s2_weight(const gradref__cbd_dw_shape *s,
                                           const gradref__cbd_s2_taps *t, const float *w,
                                           int64_t kp1, int k) {
    return k % 2 < t->ncols[k / 2]
               ? w[gradref__cbd_stored(s, 1, kp1) * s->K[2] + t->col_tap[k / 2][k % 2]]
               : 0.0f;
}

/* A plane kernel's taps for K1, K2 <= 3: the diff column shift of chain column c (kp2 =
 * K2 - 1 - c, the chain's order) and the weight of row tap kp1 at column c, zero where the
 * kernel is narrower than 3 (an exact no-op for a finite filter). */
static inline void gradref__cbd_plane3x3_taps(const gradref__cbd_dw_shape *s, const float *w,
                                              int64_t shift[3], float weight[3][3]) {
    const int64_t K1 = s->K[1], K2 = s->K[2];
    for (int64_t c = 0; c < 3; c++)
        shift[c] = c < K2 ? gradref__cbd_column_shift(s, K2 - 1 - c) : 0;
    for (int64_t kp1 = 0; kp1 < 3; kp1++)
        for (int64_t c = 0; c < 3; c++)
            weight[kp1][c] =
                kp1 < K1 && c < K2
                    ? w[gradref__cbd_stored(s, 1, kp1) * K2 + gradref__cbd_stored(s, 2, K2 - 1 - c)]
                    : 0.0f;
}

/* A four-row block's column taps (dw_rows4): chain column c's diff column shift and stored
 * weight column (kp2 = K2 - 1 - c, the chain's order); returns the most row taps of the four
 * rows (nr). */
static inline int64_t gradref__cbd_rows4_taps(const gradref__cbd_dw_shape *s, const int64_t *nr,
                                              int64_t shift[64], int64_t k2s[64]) {
    const int64_t K2 = s->K[2];
    int64_t most = 0;
    for (int64_t c = 0; c < K2; c++) {
        shift[c] = gradref__cbd_column_shift(s, K2 - 1 - c);
        k2s[c] = gradref__cbd_stored(s, 2, K2 - 1 - c);
    }
    for (int r = 0; r < 4; r++)
        most = nr[r] > most ? nr[r] : most;
    return most;
}

#ifdef GRADREF__X86
/* The depthwise kernels (cbd_avx2.c, cbd_avx512.c) as in the table. */
void gradref__cbd_f32_dw_row_avx2(const gradref__cbd_dw_shape *s, const float *w,
                                  const float *const *rows, const int64_t *base, int64_t nrows,
                                  float *out);
int gradref__cbd_f32_dw_plane3x3_avx2(const gradref__cbd_dw_shape *s, const float *const *w,
                                      const float *const *diff, int64_t planes, float *grad);
/* dw_lanes at AVX2, eight channels, the AVX-512 levels' too. */
unsigned gradref__cbd_f32_dw_lanes_avx2(const gradref__cbd_dw_lanes *L, const float *w,
                                        const float *diff, int64_t dc, float *grad, int64_t gc);
/* The stride-2 plane (dw_plane_s2) at AVX2, the AVX-512 levels' too (memory-bound). */
int gradref__cbd_f32_dw_plane_s2_avx2(const gradref__cbd_dw_shape *s, const float *const *w,
                                      const float *const *diff, int64_t planes, float *grad);
void gradref__cbd_f32_dw_rows4_avx512(const gradref__cbd_dw_shape *s, const float *w,
                                      const float *diff, const float *const rows[4][64],
                                      const int64_t base[4][64], const int64_t *nr, int64_t nrow,
                                      float *out);
void gradref__cbd_f32_dw_rows4_avx2(const gradref__cbd_dw_shape *s, const float *w,
                                    const float *diff, const float *const rows[4][64],
                                    const int64_t base[4][64], const int64_t *nr, int64_t nrow,
                                    float *out);
int gradref__cbd_f32_dw_plane3x3_avx512(const gradref__cbd_dw_shape *s, const float *const *w,
                                        const float *const *diff, int64_t planes, float *grad);
/* Stride 1 and grad's last two sizes equal to diff's: grad[ic0 + i][j0 .. j0 + cols) for
 * i < rows (cols <= 32) straight from diff, without packing: the GEMM chain over k = (phase
 * tap, oc) with A one prepacked 14-row filter panel (k-major, K = ntaps * ocpg). Tap t reads
 * image + offset[t] + oc * channel_stride (image already at pixel j0) in the lanes of its two
 * 16-lane masks (the tile32_masks: the lanes whose tap falls inside diff), zero elsewhere, and
 * a tap without lanes is skipped (exact for a finite filter). `inside` 1 promises that the 32
 * floats at every such address are readable (then whole vectors are loaded); 2 says the image
 * is a packed tile (pack_tile32) whose lanes outside the taps already hold zeros, so only the
 * skipping of taps without lanes uses the masks. c is grad at (ic0, j0), ldc its channel
 * stride. The chains start at +0, or (load 1) go on from c's values: a caller may split the
 * taps into consecutive runs, one call each, with the same bits. Returns nonzero when a value
 * it stored is a zero or a NaN: the caller's NaN and signed-zero scan of the tile's values can
 * be skipped otherwise. */
unsigned gradref__cbd_f32_tile32_avx512(const float *image, int64_t channel_stride, int64_t ocpg,
                                        const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                                        int64_t cols, int inside, const float *a, int rows,
                                        float *c, int64_t ldc, int load);
/* The diff a tile reads (same arguments), packed: dst[(t * ocpg + oc) * 32 + l] = lane l of
 * tap t, channel oc, zero where the tap's mask has no lane. Taps without lanes are not
 * written. */
void gradref__cbd_f32_pack_tile32_avx512(const float *image, int64_t channel_stride, int64_t ocpg,
                                         const int64_t *offset, const uint16_t *masks,
                                         int64_t ntaps, float *dst);
/* The same tiles at 8 lanes (cbd_avx2.c; 6-row AVX2 panels, each tile as two 16-pixel halves). */
unsigned gradref__cbd_f32_tile32_avx2(const float *image, int64_t channel_stride, int64_t ocpg,
                                      const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                                      int64_t cols, int inside, const float *a, int rows, float *c,
                                      int64_t ldc, int load);
void gradref__cbd_f32_pack_tile32_avx2(const float *image, int64_t channel_stride, int64_t ocpg,
                                       const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                                       float *dst);
/* I8 tiles by int16 pairs (cbd_avx2.c; 6-row panels): tile32's contract over 32-bit words.
 * Word (pair j, pixel) of the image holds the int16 diff values of output channels 2j (low
 * half) and 2j + 1, and word (tap t, pair j, row r) of the panel a the filter's for input
 * channel r; each element's int32 sum of their products (exact, mod 2^32: every order gives
 * it) goes to c (load 1: added to c's). pairs replaces ocpg; `inside` and the masks are
 * tile32's. */
void gradref__cbd_i8_pair_tile32_avx2(const int32_t *image, int64_t channel_stride, int64_t pairs,
                                      const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                                      int64_t cols, int inside, const int32_t *a, int rows,
                                      int32_t *c, int64_t ldc, int load);
/* The same at 16 lanes (cbd_avx512_vnni.c; the AVX-512 tiles' 14-row panels): VPDPWSSD adds
 * each word's two products to the int32 sum in one instruction. */
void gradref__cbd_i8_pair_tile32_avx512_vnni(const int32_t *image, int64_t channel_stride,
                                             int64_t pairs, const int64_t *offset,
                                             const uint16_t *masks, int64_t ntaps, int64_t cols,
                                             int inside, const int32_t *a, int rows, int32_t *c,
                                             int64_t ldc, int load);
/* The scatter2 kernels (gradref__cbd_kernels). AVX-512 leaves the odd elements untouched. */
void gradref__cbd_f32_scatter2_avx512(const float *from, int64_t len, int64_t rows, float *row,
                                      int64_t row_stride, int odd_free);
void gradref__cbd_f32_scatter2_avx2(const float *from, int64_t len, int64_t rows, float *row,
                                    int64_t row_stride, int odd_free);
/* The interleave2 kernel (gradref__cbd_kernels), the AVX-512 table's too. */
void gradref__cbd_f32_interleave2_avx2(const float *even, const float *odd, int64_t len,
                                       int64_t rows, float *row, int64_t row_stride,
                                       int64_t zero_at);
/* The qs8_row kernel (AVX2; the AVX-512 table takes it too). */
void gradref__cbd_qs8_row_avx2(const float *from, int64_t n, float acc_scale, float grad_scale,
                               int8_t *out);
#endif

#endif
