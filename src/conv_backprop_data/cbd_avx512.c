/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's AVX-512 kernels: the depthwise rows (four at a time, and whole small
 * planes for 3 x 3), the 32-pixel direct tiles, their packing and the stride-2 scatter. */
#include "cbd_kernels.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

/* Lanes l of o2 = start + l inside [0, O2), as a 16-lane mask. */
static uint32_t valid16(int64_t start, int64_t O2) {
    const int64_t lo = start < 0 ? -start : 0, hi = O2 - start < 16 ? O2 - start : 16;
    if (hi <= lo) return 0;
    return (uint32_t)(((1u << hi) - 1u) & ~((1u << lo) - 1u)) & 0xffffu;
}

/* Four grad rows (i1 .. i1 + 3 of plane row i0) at a time, V blocks of 16 columns (from b0)
 * per step: 4 V independent chains in registers (four alone wait on the FMA latency). Each
 * element's chain runs over its row taps, then its column taps, as in the reference; a row
 * with fewer row taps gets masked (all-zero) loads for the rest, which leave its chain exact
 * (the filter is finite). K2 <= 64. */
#  define ROWS4_FMA(acc, r, v)                                                                     \
    acc = _mm512_fmadd_ps(w##r, _mm512_maskz_loadu_ps(mv[v] & on[r], src[r] + sh + 16 * (v)), acc)
__attribute__((always_inline)) static inline void
rows4_block(int V, const gradref__cbd_dw_shape *p, const float *w, const float *diff,
            const float *const rows[4][64], const int64_t base[4][64], const int64_t *nr,
            int64_t nrow, const int64_t *shift, const int64_t *k2s, int64_t most, int64_t b0,
            float *out) {
    const int64_t I2 = p->I[2], O2 = p->O[2], K2 = p->K[2];
    __mmask16 mk[2][64];
    for (int v = 0; v < V; v++)
        for (int64_t c = 0; c < K2; c++)
            mk[v][c] = (__mmask16)valid16(b0 + 16 * v + shift[c], O2);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0;
    for (int64_t t = 0; t < most; t++) {
        if (t < nr[0] && t < nr[1] && t < nr[2] && t < nr[3]) { /* every row live: no row masks */
            const float *s0 = rows[0][t] + b0, *s1 = rows[1][t] + b0, *s2 = rows[2][t] + b0,
                        *s3 = rows[3][t] + b0;
            const float *w0 = w + base[0][t], *w1 = w + base[1][t], *w2 = w + base[2][t],
                        *w3 = w + base[3][t];
            for (int64_t c = 0; c < K2; c++) {
                const __mmask16 m0 = mk[0][c], m1 = V == 2 ? mk[1][c] : (__mmask16)0;
                if (!(m0 | m1)) continue;
                const int64_t sh = shift[c], k2 = k2s[c];
                const __m512 x0 = _mm512_set1_ps(w0[k2]), x1 = _mm512_set1_ps(w1[k2]),
                             x2 = _mm512_set1_ps(w2[k2]), x3 = _mm512_set1_ps(w3[k2]);
                a0 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(m0, s0 + sh), a0);
                a1 = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(m0, s1 + sh), a1);
                a2 = _mm512_fmadd_ps(x2, _mm512_maskz_loadu_ps(m0, s2 + sh), a2);
                a3 = _mm512_fmadd_ps(x3, _mm512_maskz_loadu_ps(m0, s3 + sh), a3);
                if (V == 2) {
                    c0 = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(m1, s0 + sh + 16), c0);
                    c1 = _mm512_fmadd_ps(x1, _mm512_maskz_loadu_ps(m1, s1 + sh + 16), c1);
                    c2 = _mm512_fmadd_ps(x2, _mm512_maskz_loadu_ps(m1, s2 + sh + 16), c2);
                    c3 = _mm512_fmadd_ps(x3, _mm512_maskz_loadu_ps(m1, s3 + sh + 16), c3);
                }
            }
            continue;
        }
        const float *src[4], *wt[4];
        __mmask16 on[4];
        for (int r = 0; r < 4; r++) {
            const int live = t < nr[r];
            src[r] = (live ? rows[r][t] : diff) + b0;
            wt[r] = w + (live ? base[r][t] : 0);
            on[r] = live ? (__mmask16)0xffff : (__mmask16)0;
        }
        for (int64_t c = 0; c < K2; c++) {
            const __mmask16 mv[2] = {mk[0][c], V == 2 ? mk[1][c] : (__mmask16)0};
            if (!(mv[0] | mv[1])) continue;
            const int64_t sh = shift[c], k2 = k2s[c];
            const __m512 w0 = _mm512_set1_ps(wt[0][k2]), w1 = _mm512_set1_ps(wt[1][k2]),
                         w2 = _mm512_set1_ps(wt[2][k2]), w3 = _mm512_set1_ps(wt[3][k2]);
            ROWS4_FMA(a0, 0, 0);
            ROWS4_FMA(a1, 1, 0);
            ROWS4_FMA(a2, 2, 0);
            ROWS4_FMA(a3, 3, 0);
            if (V == 2) {
                ROWS4_FMA(c0, 0, 1);
                ROWS4_FMA(c1, 1, 1);
                ROWS4_FMA(c2, 2, 1);
                ROWS4_FMA(c3, 3, 1);
            }
        }
    }
    for (int v = 0; v < V; v++) {
        const int64_t at = b0 + 16 * v, left = I2 - at;
        const __mmask16 st = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
        _mm512_mask_storeu_ps(out + at, st, v ? c0 : a0);
        if (nrow > 1) _mm512_mask_storeu_ps(out + I2 + at, st, v ? c1 : a1);
        if (nrow > 2) _mm512_mask_storeu_ps(out + 2 * I2 + at, st, v ? c2 : a2);
        if (nrow > 3) _mm512_mask_storeu_ps(out + 3 * I2 + at, st, v ? c3 : a3);
    }
}
#  undef ROWS4_FMA

void gradref__cbd_f32_dw_rows4_avx512(const gradref__cbd_dw_shape *p, const float *w,
                                      const float *diff, const float *const rows[4][64],
                                      const int64_t base[4][64], const int64_t *nr, int64_t nrow,
                                      float *out) {
    const int64_t I2 = p->I[2];
    int64_t shift[64], k2s[64];
    const int64_t most = gradref__cbd_rows4_taps(p, nr, shift, k2s);
    int64_t b0 = 0;
    for (; b0 + 16 < I2; b0 += 32) /* two blocks of 16 columns, the second possibly partial */
        rows4_block(2, p, w, diff, rows, base, nr, nrow, shift, k2s, most, b0, out);
    if (b0 < I2) rows4_block(1, p, w, diff, rows, base, nr, nrow, shift, k2s, most, b0, out);
}

/* The common small case (2-D, kernel up to 3 x 3, dilation 1, stride 1): four grad rows by 16
 * columns, walking the diff rows they need in ascending order; each diff row's three shifted
 * loads feed every grad row it reaches. Each accumulator still sees its terms in the chain's
 * order (diff row ascending, then column taps). Missing taps (kernel narrower than 3, columns
 * outside diff) are zero weights or zero loads: exact no-ops for a finite filter. */
#  define DW_ROW(acc, r)                                                                           \
    do {                                                                                           \
      const int64_t kp1 = i1 + (r) + pb1 - o1;                                                     \
      if ((r) < nrow && kp1 >= 0 && kp1 < K1) {                                                    \
        acc = _mm512_fmadd_ps(wr[pl][kp1][0], v0, acc);                                            \
        acc = _mm512_fmadd_ps(wr[pl][kp1][1], v1, acc);                                            \
        acc = _mm512_fmadd_ps(wr[pl][kp1][2], v2, acc);                                            \
      }                                                                                            \
    } while (0)

/* A strip of grad columns [b0, b0 + 16 V) (V = 1 or 2) of a 3 x 3 kernel, in blocks of four
 * grad rows from row 0 (the rows past the last whole block are left to the caller). A block
 * reads six diff rows (d = 0..5, diff row o1 = i1 + pb1 - 2 + d) and grad row r takes row tap
 * kp1 = r + 2 - d. Unrolled, so only a diff row outside diff needs a test (and is skipped);
 * the nine weights and the strip's six column masks stay in registers (weights read through
 * a pointer cost a load per FMA). Same chains as DW_ROW: diff rows ascending, then the column
 * taps. */
#  define DW3_TAP(acc, kp1, x)                                                                     \
    do {                                                                                           \
      acc = _mm512_fmadd_ps(w##kp1##0, x##0, acc);                                                 \
      acc = _mm512_fmadd_ps(w##kp1##1, x##1, acc);                                                 \
      acc = _mm512_fmadd_ps(w##kp1##2, x##2, acc);                                                 \
    } while (0)
#  define DW3_D0(A, x) DW3_TAP(A##0, 2, x)
#  define DW3_D1(A, x)                                                                             \
    DW3_TAP(A##0, 1, x);                                                                           \
    DW3_TAP(A##1, 2, x)
#  define DW3_D2(A, x)                                                                             \
    DW3_TAP(A##0, 0, x);                                                                           \
    DW3_TAP(A##1, 1, x);                                                                           \
    DW3_TAP(A##2, 2, x)
#  define DW3_D3(A, x)                                                                             \
    DW3_TAP(A##1, 0, x);                                                                           \
    DW3_TAP(A##2, 1, x);                                                                           \
    DW3_TAP(A##3, 2, x)
#  define DW3_D4(A, x)                                                                             \
    DW3_TAP(A##2, 0, x);                                                                           \
    DW3_TAP(A##3, 1, x)
#  define DW3_D5(A, x) DW3_TAP(A##3, 0, x)
#  define DW3_ROW(d)                                                                               \
    if (o1 + (d) >= 0 && o1 + (d) < O1) {                                                          \
      const float *row = plane + (o1 + (d)) * O2 + b0;                                             \
      const __m512 x0 = _mm512_maskz_loadu_ps(m00, row + shift[0]);                                \
      const __m512 x1 = _mm512_maskz_loadu_ps(m01, row + shift[1]);                                \
      const __m512 x2 = _mm512_maskz_loadu_ps(m02, row + shift[2]);                                \
      DW3_D##d(a, x);                                                                              \
      if (V > 1) {                                                                                 \
        const __m512 y0 = _mm512_maskz_loadu_ps(m10, row + 16 + shift[0]);                         \
        const __m512 y1 = _mm512_maskz_loadu_ps(m11, row + 16 + shift[1]);                         \
        const __m512 y2 = _mm512_maskz_loadu_ps(m12, row + 16 + shift[2]);                         \
        DW3_D##d(c, y);                                                                            \
      }                                                                                            \
    }

#  define DW3_ROWS                                                                                 \
    DW3_ROW(0)                                                                                     \
    DW3_ROW(1)                                                                                     \
    DW3_ROW(2)                                                                                     \
    DW3_ROW(3)                                                                                     \
    DW3_ROW(4)                                                                                     \
    DW3_ROW(5)

/* The lanes of a stored under `live` that hold a zero or a NaN (cbd_avx2.c's zero_or_nan8). */
static inline unsigned zero_or_nan16(__m512 a, __mmask16 live) {
    return _mm512_mask_cmp_ps_mask(live, a, _mm512_setzero_ps(), _CMP_EQ_UQ);
}

/* the nine weights of diff plane pl */
#  define DW3_WEIGHTS(pl)                                                                          \
    (w00 = wr[pl][0][0], w01 = wr[pl][0][1], w02 = wr[pl][0][2], w10 = wr[pl][1][0],               \
     w11 = wr[pl][1][1], w12 = wr[pl][1][2], w20 = wr[pl][2][0], w21 = wr[pl][2][1],               \
     w22 = wr[pl][2][2])
/* `multi`: several diff planes, whose weights a block loads as it reaches each (one plane: held
 * for the strip) */
__attribute__((always_inline)) static inline unsigned
strip_3x3(int V, int multi, const __m512 wr[][3][3], const int64_t shift[3],
          const float *const *diff, int64_t planes, int64_t pb1, int64_t O1, int64_t O2, int64_t I1,
          int64_t I2, int64_t b0, float *grad) {
    __m512 w00, w01, w02, w10, w11, w12, w20, w21, w22;
    DW3_WEIGHTS(0);
    const float *plane0 = diff[0]; /* one plane: held for the strip */
    const __mmask16 m00 = (__mmask16)valid16(b0 + shift[0], O2),
                    m01 = (__mmask16)valid16(b0 + shift[1], O2),
                    m02 = (__mmask16)valid16(b0 + shift[2], O2),
                    m10 = (__mmask16)valid16(b0 + 16 + shift[0], O2),
                    m11 = (__mmask16)valid16(b0 + 16 + shift[1], O2),
                    m12 = (__mmask16)valid16(b0 + 16 + shift[2], O2);
    const int64_t left = I2 - b0;
    const __mmask16 st0 = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u),
                    st1 = left >= 32   ? (__mmask16)0xffff
                          : left <= 16 ? (__mmask16)0
                                       : (__mmask16)((1u << (left - 16)) - 1u);
    unsigned hit = 0;
    for (int64_t i1 = 0; i1 + 4 <= I1; i1 += 4) {
        const int64_t o1 = i1 + pb1 - 2;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        __m512 c0 = a0, c1 = a0, c2 = a0, c3 = a0;
        if (!multi) {
            const float *plane = plane0;
            DW3_ROWS
        } else {
            for (int64_t pl = 0; pl < planes; pl++) {
                const float *plane = diff[pl];
                DW3_WEIGHTS(pl);
                DW3_ROWS
            }
        }
        float *out = grad + i1 * I2 + b0;
        _mm512_mask_storeu_ps(out, st0, a0);
        _mm512_mask_storeu_ps(out + I2, st0, a1);
        _mm512_mask_storeu_ps(out + 2 * I2, st0, a2);
        _mm512_mask_storeu_ps(out + 3 * I2, st0, a3);
        hit |= zero_or_nan16(a0, st0) | zero_or_nan16(a1, st0) | zero_or_nan16(a2, st0) |
               zero_or_nan16(a3, st0);
        if (V > 1) {
            _mm512_mask_storeu_ps(out + 16, st1, c0);
            _mm512_mask_storeu_ps(out + I2 + 16, st1, c1);
            _mm512_mask_storeu_ps(out + 2 * I2 + 16, st1, c2);
            _mm512_mask_storeu_ps(out + 3 * I2 + 16, st1, c3);
            hit |= zero_or_nan16(c0, st1) | zero_or_nan16(c1, st1) | zero_or_nan16(c2, st1) |
                   zero_or_nan16(c3, st1);
        }
    }
    return hit;
}
#  undef DW3_ROW
#  undef DW3_ROWS
#  undef DW3_D0
#  undef DW3_D1
#  undef DW3_D2
#  undef DW3_D3
#  undef DW3_D4
#  undef DW3_D5
#  undef DW3_TAP
#  undef DW3_WEIGHTS

/* strip_3x3 for (V, multi) */
typedef unsigned (*strip_fn)(const __m512 wr[][3][3], const int64_t shift[3],
                             const float *const *diff, int64_t planes, int64_t pb1, int64_t O1,
                             int64_t O2, int64_t I1, int64_t I2, int64_t b0, float *grad);
#  define STRIP_3X3(NAME, V, MULTI)                                                                \
    static unsigned NAME(const __m512 wr[][3][3], const int64_t shift[3],                          \
                         const float *const *diff, int64_t planes, int64_t pb1, int64_t O1,        \
                         int64_t O2, int64_t I1, int64_t I2, int64_t b0, float *grad) {            \
      return strip_3x3(V, MULTI, wr, shift, diff, planes, pb1, O1, O2, I1, I2, b0, grad);          \
    }
STRIP_3X3(strip_3x3_1, 1, 0)
STRIP_3X3(strip_3x3_2, 2, 0)
STRIP_3X3(strip_3x3_planes_1, 1, 1)
STRIP_3X3(strip_3x3_planes_2, 2, 1)
#  undef STRIP_3X3

int gradref__cbd_f32_dw_plane3x3_avx512(const gradref__cbd_dw_shape *p, const float *const *w,
                                        const float *const *diff, int64_t planes, float *grad) {
    if (p->I[2] <= 8) return gradref__cbd_f32_dw_plane3x3_avx2(p, w, diff, planes, grad);
    const int64_t I1 = p->I[1], I2 = p->I[2], O1 = p->O[1], O2 = p->O[2];
    const int64_t K1 = p->K[1], K2 = p->K[2], pb1 = p->pad[1];
    __m512 wr[GRADREF__CBD_DW_PLANES][3][3]; /* [plane][kp1][c], c: column taps in chain order */
    int64_t shift[3] = {0, 0, 0};            /* set by the first plane's taps */
    for (int64_t pl = 0; pl < planes; pl++) {
        float weight[3][3];
        gradref__cbd_plane3x3_taps(p, w[pl], shift, weight);
        for (int64_t kp1 = 0; kp1 < 3; kp1++)
            for (int64_t c = 0; c < 3; c++)
                wr[pl][kp1][c] = _mm512_set1_ps(weight[kp1][c]);
    }
    int64_t first = 0; /* rows before it are done */
    unsigned hit = 0;
    if (K1 == 3 && K2 == 3) {
        const strip_fn strips[2][2] = {{strip_3x3_1, strip_3x3_2},
                                       {strip_3x3_planes_1, strip_3x3_planes_2}};
        for (int64_t b0 = 0; b0 < I2; b0 += 32)
            hit |= strips[planes > 1][I2 - b0 > 16]((const __m512(*)[3][3])wr, shift, diff, planes,
                                                    pb1, O1, O2, I1, I2, b0, grad);
        first = I1 / 4 * 4;
    }
    for (int64_t i1 = first; i1 < I1; i1 += 4) {
        const int64_t nrow = I1 - i1 < 4 ? I1 - i1 : 4;
        int64_t lo = i1 + pb1 - (K1 - 1), hi = i1 + nrow - 1 + pb1;
        if (lo < 0) lo = 0;
        if (hi > O1 - 1) hi = O1 - 1;
        for (int64_t b0 = 0; b0 < I2; b0 += 16) {
            const __mmask16 m0 = (__mmask16)(K2 > 0 ? valid16(b0 + shift[0], O2) : 0),
                            m1 = (__mmask16)(K2 > 1 ? valid16(b0 + shift[1], O2) : 0),
                            m2 = (__mmask16)(K2 > 2 ? valid16(b0 + shift[2], O2) : 0);
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t pl = 0; pl < planes; pl++)
                for (int64_t o1 = lo; o1 <= hi; o1++) {
                    const float *row = diff[pl] + o1 * O2 + b0;
                    const __m512 v0 = _mm512_maskz_loadu_ps(m0, row + shift[0]);
                    const __m512 v1 = _mm512_maskz_loadu_ps(m1, row + shift[1]);
                    const __m512 v2 = _mm512_maskz_loadu_ps(m2, row + shift[2]);
                    DW_ROW(a0, 0);
                    DW_ROW(a1, 1);
                    DW_ROW(a2, 2);
                    DW_ROW(a3, 3);
                }
            const int64_t left = I2 - b0;
            const __mmask16 st = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
            float *out = grad + i1 * I2 + b0;
            _mm512_mask_storeu_ps(out, st, a0);
            if (nrow > 1) _mm512_mask_storeu_ps(out + I2, st, a1);
            if (nrow > 2) _mm512_mask_storeu_ps(out + 2 * I2, st, a2);
            if (nrow > 3) _mm512_mask_storeu_ps(out + 3 * I2, st, a3);
            hit |= zero_or_nan16(a0, st) | (nrow > 1 ? zero_or_nan16(a1, st) : 0) |
                   (nrow > 2 ? zero_or_nan16(a2, st) : 0) | (nrow > 3 ? zero_or_nan16(a3, st) : 0);
        }
    }
    return hit != 0;
}
#  undef DW_ROW

/* The lanes of q + shift in [0, limit), of 32: unsigned, one compare tests both ends. */
static inline uint32_t range32_avx512(const int32_t *q, int32_t shift, int32_t limit) {
    const __m512i s = _mm512_set1_epi32(shift), bound = _mm512_set1_epi32(limit);
    const __mmask16 lo =
        _mm512_cmplt_epu32_mask(_mm512_add_epi32(_mm512_loadu_si512((const void *)q), s), bound);
    const __mmask16 hi = _mm512_cmplt_epu32_mask(
        _mm512_add_epi32(_mm512_loadu_si512((const void *)(q + 16)), s), bound);
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* The two 16-lane masks per tap of a tile (gradref__cbd_kernels' tile32_masks), by dims. */
static void tile32_masks_avx512(const int64_t *tap, int64_t ntaps, const int64_t *Q,
                                const int64_t *O, int64_t j0, int64_t cols, uint16_t *masks) {
    int32_t q[3][32];
    gradref__cbd_lane_coords(j0, Q, q);
    gradref__cbd_tile32_masks_by_dims(range32_avx512, q, tap, ntaps, O, cols, masks);
}

/* The tile's accumulation on V vectors of 16 pixels (V = 0 to 2) and, with H, 8 more lanes in
 * a 256-bit vector: 8, 16, 24 or 32 lanes, the fewest that hold the tile's pixels (a phase of
 * 49 pixels computes 56 lanes, not 64). With `inside` every lane of every load lies inside
 * diff's memory (the tile is away from its ends), so whole vectors are loaded and the lanes
 * outside the tap zeroed afterwards: GCC then keeps all the accumulators in registers, which it
 * does not around masked loads. Near diff's ends the loads themselves are masked. `inside` 2
 * is a packed tile (zeros already in place): plain loads. */
__attribute__((always_inline)) static inline unsigned
tile_body(int inside, int V, int H, int R, const float *image, int64_t channel_stride, int64_t ocpg,
          const int64_t *offset, const uint16_t *masks, int64_t ntaps, const float *a, float *c,
          int64_t ldc, __mmask16 live0, __mmask16 live1, int load) {
    enum { MR = GRADREF__CBD_TILE_ROWS };
    __m512 acc[MR][2];
    __m256 part[MR]; /* lanes 16 V .. 16 V + 8 */
    const __mmask8 live_part = (__mmask8)(V ? live1 : live0);
    for (int i = 0; i < R; i++) {
        for (int v = 0; v < V; v++)
            acc[i][v] = load ? _mm512_maskz_loadu_ps(v ? live1 : live0, c + i * ldc + 16 * v)
                             : _mm512_setzero_ps();
        if (H)
            part[i] =
                load ? _mm256_maskz_loadu_ps(live_part, c + i * ldc + 16 * V) : _mm256_setzero_ps();
    }
    for (int64_t t = 0; t < ntaps; t++) {
        const __mmask16 m0 = masks[2 * t], m1 = masks[2 * t + 1];
        if ((m0 | m1) == 0) continue; /* all zero: fma(w, 0, acc) = acc for a finite w */
        const __mmask8 mp = (__mmask8)(V ? m1 : m0);
        const float *src = image + offset[t];
        const float *w = a + t * ocpg * MR;
        for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, w += MR) {
            __m512 b[2];
            __m256 bp = _mm256_setzero_ps();
            for (int v = 0; v < V; v++)
                b[v] = inside == 2 ? _mm512_loadu_ps(src + 16 * v)
                       : inside    ? _mm512_maskz_mov_ps(v ? m1 : m0, _mm512_loadu_ps(src + 16 * v))
                                   : _mm512_maskz_loadu_ps(v ? m1 : m0, src + 16 * v);
            if (H)
                bp = inside == 2 ? _mm256_loadu_ps(src + 16 * V)
                     : inside    ? _mm256_maskz_mov_ps(mp, _mm256_loadu_ps(src + 16 * V))
                                 : _mm256_maskz_loadu_ps(mp, src + 16 * V);
            for (int i = 0; i < R; i++) {
                const __m512 wi = _mm512_set1_ps(w[i]);
                for (int v = 0; v < V; v++)
                    acc[i][v] = _mm512_fmadd_ps(wi, b[v], acc[i][v]);
                if (H) part[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(wi), bp, part[i]);
            }
        }
    }
    unsigned hit = 0; /* lanes holding a zero or a NaN */
    for (int i = 0; i < R; i++) {
        for (int v = 0; v < V; v++) {
            _mm512_mask_storeu_ps(c + i * ldc + 16 * v, v ? live1 : live0, acc[i][v]);
            hit |= zero_or_nan16(acc[i][v], v ? live1 : live0);
        }
        if (H) {
            _mm256_mask_storeu_ps(c + i * ldc + 16 * V, live_part, part[i]);
            hit |= _mm256_mask_cmp_ps_mask(live_part, part[i], _mm256_setzero_ps(), _CMP_EQ_UQ);
        }
    }
    return hit;
}

typedef unsigned (*tile_fn)(const float *image, int64_t channel_stride, int64_t ocpg,
                            const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                            const float *a, float *c, int64_t ldc, __mmask16 live0, __mmask16 live1,
                            int load);

/* One function per (inside, lanes, rows): the row count is a constant in each, so a panel's
 * last rows cost only what they compute. W: 8 lanes (0), 16 (1), 24 (2) or 32 (3). */
#  define TILE(INSIDE, W, R)                                                                       \
    static unsigned tile_##INSIDE##_##W##_##R(                                                     \
        const float *image, int64_t channel_stride, int64_t ocpg, const int64_t *offset,           \
        const uint16_t *masks, int64_t ntaps, const float *a, float *c, int64_t ldc,               \
        __mmask16 live0, __mmask16 live1, int load) {                                              \
      return tile_body(INSIDE, ((W) + 1) / 2, (W) % 2 == 0, R, image, channel_stride, ocpg,        \
                       offset, masks, ntaps, a, c, ldc, live0, live1, load);                       \
    }
#  define TILE_ROWS(INSIDE, W)                                                                     \
    TILE(INSIDE, W, 1)                                                                             \
    TILE(INSIDE, W, 2)                                                                             \
    TILE(INSIDE, W, 3)                                                                             \
    TILE(INSIDE, W, 4)                                                                             \
    TILE(INSIDE, W, 5)                                                                             \
    TILE(INSIDE, W, 6)                                                                             \
    TILE(INSIDE, W, 7)                                                                             \
    TILE(INSIDE, W, 8)                                                                             \
    TILE(INSIDE, W, 9)                                                                             \
    TILE(INSIDE, W, 10)                                                                            \
    TILE(INSIDE, W, 11)                                                                            \
    TILE(INSIDE, W, 12)                                                                            \
    TILE(INSIDE, W, 13)                                                                            \
    TILE(INSIDE, W, 14)
#  define TILE_WIDTHS(INSIDE)                                                                      \
    TILE_ROWS(INSIDE, 0) TILE_ROWS(INSIDE, 1) TILE_ROWS(INSIDE, 2) TILE_ROWS(INSIDE, 3)
TILE_WIDTHS(0)
TILE_WIDTHS(1)
TILE_WIDTHS(2)
#  define TILE_LIST(INSIDE, W)                                                                     \
    {                                                                                              \
      tile_##INSIDE##_##W##_1, tile_##INSIDE##_##W##_2, tile_##INSIDE##_##W##_3,                   \
          tile_##INSIDE##_##W##_4, tile_##INSIDE##_##W##_5, tile_##INSIDE##_##W##_6,               \
          tile_##INSIDE##_##W##_7, tile_##INSIDE##_##W##_8, tile_##INSIDE##_##W##_9,               \
          tile_##INSIDE##_##W##_10, tile_##INSIDE##_##W##_11, tile_##INSIDE##_##W##_12,            \
          tile_##INSIDE##_##W##_13, tile_##INSIDE##_##W##_14                                       \
    }
#  define TILE_LISTS(INSIDE)                                                                       \
    { TILE_LIST(INSIDE, 0), TILE_LIST(INSIDE, 1), TILE_LIST(INSIDE, 2), TILE_LIST(INSIDE, 3) }
static const tile_fn tiles[3][4][GRADREF__CBD_TILE_ROWS] = {TILE_LISTS(0), TILE_LISTS(1),
                                                            TILE_LISTS(2)};

unsigned gradref__cbd_f32_tile32_avx512(const float *image, int64_t channel_stride, int64_t ocpg,
                                        const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                                        int64_t cols, int inside, const float *a, int rows,
                                        float *c, int64_t ldc, int load) {
    const __mmask16 live0 = (__mmask16)(cols >= 16 ? 0xffffu : (1u << cols) - 1u),
                    live1 = (__mmask16)(cols <= 16   ? 0u
                                        : cols >= 32 ? 0xffffu
                                                     : (1u << (cols - 16)) - 1u);
    return tiles[inside][(cols + 7) / 8 - 1][rows - 1](image, channel_stride, ocpg, offset, masks,
                                                       ntaps, a, c, ldc, live0, live1, load);
}

void gradref__cbd_f32_pack_tile32_avx512(const float *image, int64_t channel_stride, int64_t ocpg,
                                         const int64_t *offset, const uint16_t *masks,
                                         int64_t ntaps, float *dst) {
    for (int64_t t = 0; t < ntaps; t++) {
        const __mmask16 m0 = masks[2 * t], m1 = masks[2 * t + 1];
        if ((m0 | m1) == 0) continue;
        const float *src = image + offset[t];
        float *out = dst + t * ocpg * 32;
        for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, out += 32) {
            /* the next tile's part of this row (too many rows for the hardware prefetchers) */
            _mm_prefetch((const char *)(src + 32), _MM_HINT_T1);
            _mm_prefetch((const char *)(src + 48), _MM_HINT_T1);
            _mm_prefetch((const char *)(src + 63), _MM_HINT_T1);
            _mm512_storeu_ps(out, _mm512_maskz_loadu_ps(m0, src));
            _mm512_storeu_ps(out + 16, _mm512_maskz_loadu_ps(m1, src + 16));
        }
    }
}

/* 8 values at a time, spread over the even lanes; the masks of the last few computed once. */
void gradref__cbd_f32_scatter2_avx512(const float *from, int64_t len, int64_t rows, float *row,
                                      int64_t row_stride, int odd_free) {
    (void)odd_free;
    const int64_t full = len & ~INT64_C(7), tail = len - full;
    const __mmask16 tail_load = (__mmask16)((1u << tail) - 1u);
    const __mmask16 tail_store = (__mmask16)(0x5555u & ((1u << (2 * tail)) - 1u));
    for (int64_t r = 0; r < rows; r++, from += len, row += row_stride) {
        for (int64_t x = 0; x < full; x += 8) {
            const __m512 v = _mm512_castps256_ps512(_mm256_loadu_ps(from + x));
            _mm512_mask_storeu_ps(row + 2 * x, 0x5555, _mm512_maskz_expand_ps(0x5555, v));
        }
        if (tail)
            _mm512_mask_storeu_ps(
                row + 2 * full, tail_store,
                _mm512_maskz_expand_ps(0x5555, _mm512_maskz_loadu_ps(tail_load, from + full)));
    }
}

/* ---- a tile's last few pixels, a panel's rows in the lanes (tile_columns) ----
 * cbd_avx2.c's columns at 16 lanes: the 1 to 4 pixels past a tile's last 8 (which the tiles
 * would give a vector of 8 lanes of 14 rows) for every 14-row panel at once, a panel's k step
 * one vector (lanes 14 and 15 masked off) and each pixel's diff broadcast; each element's chain
 * is the tile's, the same terms in the same order. */
enum { COLUMNS_MAX = 4, COLUMN_PANELS_MAX = 16, COLUMN_CHAINS = 16 };

/* A 14-row panel's k step at w (only its own floats read: nothing may follow the last). */
static inline __m512 panel14(const float *w) {
    return _mm512_maskz_loadu_ps((__mmask16)((1u << GRADREF__CBD_TILE_ROWS) - 1u), w);
}

/* One k step of G panels and P pixels, each pixel's diff at b[p], which then steps by
 * step[p]: the G panel vectors held when there are more pixels, else the P broadcasts. */
__attribute__((always_inline)) static inline void column_step(int P, int G, const float *w,
                                                              int64_t panel_floats, const float **b,
                                                              const int64_t *step, __m512 *acc) {
    if (P > G) {
        __m512 wq[COLUMN_PANELS_MAX];
#  pragma GCC unroll 16
        for (int q = 0; q < G; q++)
            wq[q] = panel14(w + q * panel_floats);
#  pragma GCC unroll 16
        for (int p = 0; p < P; p++) {
            const __m512 bp = _mm512_set1_ps(*b[p]);
            b[p] += step[p];
#  pragma GCC unroll 16
            for (int q = 0; q < G; q++)
                acc[q * P + p] = _mm512_fmadd_ps(wq[q], bp, acc[q * P + p]);
        }
        return;
    }
    __m512 bp[COLUMNS_MAX];
#  pragma GCC unroll 16
    for (int p = 0; p < P; p++)
        bp[p] = _mm512_set1_ps(*b[p]), b[p] += step[p];
#  pragma GCC unroll 16
    for (int q = 0; q < G; q++) {
        const __m512 wq = panel14(w + q * panel_floats);
#  pragma GCC unroll 16
        for (int p = 0; p < P; p++)
            acc[q * P + p] = _mm512_fmadd_ps(wq, bp[p], acc[q * P + p]);
    }
}

__attribute__((always_inline)) static inline unsigned
columns_body(int P, int G, const float *image, int64_t channel_stride, int64_t ocpg,
             const int64_t *offset, const uint16_t *masks, int64_t ntaps, int64_t first,
             const float *a, int64_t panel_floats, int64_t pr, int64_t M, float *c, int64_t ldc) {
    enum { MR = GRADREF__CBD_TILE_ROWS };
    __m512 acc[COLUMN_CHAINS];
#  pragma GCC unroll 16
    for (int e = 0; e < P * G; e++)
        acc[e] = _mm512_setzero_ps();
    for (int64_t t = 0; t < ntaps; t++) {
        const float *b[COLUMNS_MAX];
        int64_t step[COLUMNS_MAX];
        if (!gradref__cbd_column_sources(image + offset[t], channel_stride, first, masks + 2 * t, P,
                                         b, step))
            continue;
        const float *w = a + t * ocpg * MR;
        for (int64_t oc = 0; oc < ocpg; oc++, w += MR)
            column_step(P, G, w, panel_floats, b, step, acc);
    }
    unsigned hit = 0;
#  pragma GCC unroll 16
    for (int q = 0; q < G; q++) {
        const int64_t rows = M - q * pr < pr ? M - q * pr : pr;
#  pragma GCC unroll 16
        for (int p = 0; p < P; p++) {
            float lanes[16];
            _mm512_storeu_ps(lanes, acc[q * P + p]);
            hit |= zero_or_nan16(acc[q * P + p], (__mmask16)((1u << rows) - 1u));
            gradref__cbd_column_store(lanes, rows, c + q * pr * ldc + first + p, ldc);
        }
    }
    return hit;
}

/* column_panels, the panels a column group takes at most for P pixels: P G <= COLUMN_CHAINS
 * accumulators, which with the broadcasts or the panel vectors fit in 32 registers. */
GRADREF__CBD_COLUMN_KERNELS(tile_columns_avx512, 16, 8, 5, 4)

/* ---- channels-last depthwise, 16 channels a block (cbd_avx2.c's dw_cl_row at 8) ---- */

static inline __m512 cl_fma16(__m512 acc, __m512 w, __m512 x) {
    return _mm512_fmadd_ps(w, x, acc);
}
/* The NaN lanes of v added to nan. */
static inline __mmask16 cl_nan16(__mmask16 nan, __m512 v) {
    return nan | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}
GRADREF__CBD_CL_COLUMNS(cl_columns16, __m512, __mmask16, 16, _mm512_setzero_ps(), _mm512_loadu_ps,
                        cl_fma16, _mm512_storeu_ps, cl_nan16)

static inline int cl_found16(__mmask16 nan) {
    return nan != 0;
}
GRADREF__CBD_CL_ROW(static, dw_cl_row_avx512, __mmask16, 0, cl_columns16, 0, cl_found16)

static void dw_cl_stage_avx512(const float *src, int64_t sp, int64_t n, int64_t blocks,
                               float *dst) {
    for (int64_t j = 0; j < n; j++, src += sp)
        for (int64_t b = 0; b < blocks; b++)
            _mm512_storeu_ps(dst + 16 * (b * n + j), _mm512_loadu_ps(src + 16 * b));
}

/* MegEngine DEFAULT, 16 lanes (cbd_megengine_lanes.h) */
#  define LANES 16
#  define ME_LOAD_F16(p)                                                                           \
    ((me_vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p))))
#  define ME_ANY(v)        (_mm512_test_epi32_mask((__m512i)(v), (__m512i)(v)) != 0)
#  define ME_F16_SCALAR(h) _cvtsh_ss(h)
/* lanes [lo, end) of the 16 from row + o2, zero-extended (the masked lanes are not read) */
#  define ME_LOAD_U16_PART(row, o2, O2, lo, end)                                                   \
    ((me_vu)_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(                                        \
        (__mmask16)(((1u << (end)) - 1u) & ~((1u << (lo)) - 1u)), (const void *)((row) + (o2)))))
#  define ME_MIN_U(a, b) ((me_vu)_mm512_min_epu32((__m512i)(a), (__m512i)(b)))
#  define ME_MAX_U(a, b) ((me_vu)_mm512_max_epu32((__m512i)(a), (__m512i)(b)))
#  define ME_ROW         megengine_row_avx512
#  include "cbd_megengine_lanes.h"

/* The AVX-512 table's f32 kernels, which the avx512_vnni table takes too. */
#  define AVX512_KERNELS                                                                           \
    .dw_row = gradref__cbd_f32_dw_row_avx2, .dw_rows4 = gradref__cbd_f32_dw_rows4_avx512,          \
    .dw_plane3x3 = gradref__cbd_f32_dw_plane3x3_avx512,                                            \
    .dw_plane_s2 = gradref__cbd_f32_dw_plane_s2_avx2, .tile_rows = GRADREF__CBD_TILE_ROWS,         \
    .dw_lanes = gradref__cbd_f32_dw_lanes_avx2, .dw_lanes_planes = 8,                              \
    .dw_cl_row = dw_cl_row_avx512, .dw_cl_stage = dw_cl_stage_avx512, .dw_cl_lanes = 16,           \
    .tile32 = gradref__cbd_f32_tile32_avx512, .pack_tile32 = gradref__cbd_f32_pack_tile32_avx512,  \
    .tile32_masks = tile32_masks_avx512, .tile_columns = tile_columns_avx512,                      \
    .scatter2 = gradref__cbd_f32_scatter2_avx512,                                                  \
    .interleave2 = gradref__cbd_f32_interleave2_avx2, .qs8_row = gradref__cbd_qs8_row_avx2,        \
    .megengine_row = megengine_row_avx512, .megengine_lanes = 16,                                  \
    .narrow = &gradref__cbd_kernels_avx2

const gradref__cbd_kernels gradref__cbd_kernels_avx512 = {
    .isa = "avx512",
    AVX512_KERNELS,
    .word_channels = 2,
    .word_rows = GRADREF__CBD_TILE_ROWS_AVX2,
    .word_tile32 = gradref__cbd_i8_pair_tile32_avx2,
};

const gradref__cbd_kernels gradref__cbd_kernels_avx512_vnni = {
    .isa = "avx512_vnni",
    AVX512_KERNELS,
    .word_channels = 2,
    .word_rows = GRADREF__CBD_TILE_ROWS,
    .word_tile32 = gradref__cbd_i8_pair_tile32_avx512_vnni,
};

#else
typedef int gradref__cbd_avx512_unused;
#endif
