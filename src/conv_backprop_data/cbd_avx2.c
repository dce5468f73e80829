/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's AVX2 + FMA kernels: depthwise rows (one, or four at once) and whole small
 * planes for 3 x 3, the direct tiles, the stride-2 scatter, QuantizedS8 and MegEngine rows. */
#include "cbd_kernels.h"
#include "common/gemm_kernels.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

#  include "common/store_avx2.h"

/* Lanes l of o2 = start + l inside [0, O2), as an AVX2 load/store mask: -start <= l <
 * O2 - start, two compares (an array of lanes stored and loaded back as one vector stalls on
 * store forwarding, which cost this file's plane kernels a fifth of their time). */
static __m256i valid8(int64_t start, int64_t O2) {
    int64_t lo = -start, hi = O2 - start; /* clamped to [-1, 8]: lanes are 0..7 */
    lo = lo < -1 ? -1 : lo > 8 ? 8 : lo;
    hi = hi < -1 ? -1 : hi > 8 ? 8 : hi;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)lo - 1)),
                            _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane));
}

/* One window of diff row `row` for grad columns [i2, i2 + 8): a masked load (zeros past the
 * row's ends: an exact no-op for a finite filter) where it reaches past them. */
static inline __m256 window8(const float *row, int64_t start, int64_t O2) {
    return start >= 0 && start + 8 <= O2 ? _mm256_loadu_ps(row + start)
                                         : _mm256_maskload_ps(row + start, valid8(start, O2));
}

/* Grad columns [i2, min(i2 + 8, I2)) to out. */
static inline void store_cols8(float *out, int64_t i2, int64_t I2, __m256 acc) {
    gradref__store_first8_ps(out + i2, acc, I2 - i2);
}

/* All ones in the lanes of a that hold a zero or a NaN: values holding one need the caller's
 * NaN and signed-zero scan (the depthwise planes', the tiles'), the others skip it. */
static inline __m256 zero_or_nan8(__m256 a) {
    return _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_EQ_UQ);
}

/* The lanes (bits) where any of four accumulators holds a zero or a NaN. */
static inline unsigned zero_or_nan4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    return (unsigned)_mm256_movemask_ps(
        _mm256_or_ps(_mm256_or_ps(zero_or_nan8(a0), zero_or_nan8(a1)),
                     _mm256_or_ps(zero_or_nan8(a2), zero_or_nan8(a3))));
}

/* Four vectors of 8 grad columns at a time, four independent chains (one chain alone waits on
 * the FMA latency at every tap), each in the reference's tap order. */
void gradref__cbd_f32_dw_row_avx2(const gradref__cbd_dw_shape *p, const float *w,
                                  const float *const *rows, const int64_t *base, int64_t nrows,
                                  float *out) {
    const int64_t I2 = p->I[2], O2 = p->O[2];
    for (int64_t i2 = 0; i2 < I2; i2 += 32) {
        const int live = (int)((I2 - i2 + 7) / 8 < 4 ? (I2 - i2 + 7) / 8 : 4);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t start = i2 + gradref__cbd_column_shift(p, kp2);
                const __m256 wv = _mm256_set1_ps(w[base[r] + gradref__cbd_stored(p, 2, kp2)]);
                a0 = _mm256_fmadd_ps(wv, window8(rows[r], start, O2), a0);
                if (live > 1) a1 = _mm256_fmadd_ps(wv, window8(rows[r], start + 8, O2), a1);
                if (live > 2) a2 = _mm256_fmadd_ps(wv, window8(rows[r], start + 16, O2), a2);
                if (live > 3) a3 = _mm256_fmadd_ps(wv, window8(rows[r], start + 24, O2), a3);
            }
        store_cols8(out, i2, I2, a0);
        if (live > 1) store_cols8(out, i2 + 8, I2, a1);
        if (live > 2) store_cols8(out, i2 + 16, I2, a2);
        if (live > 3) store_cols8(out, i2 + 24, I2, a3);
    }
}

/* Four grad rows whose row taps are rows[r][0 .. nr[r]) (base: their stored row-tap indices),
 * 16 columns a block: eight chains in registers, each element's over its row taps, then its
 * column taps, as the reference's; a row with fewer row taps skips the rest, and windows past
 * diff's ends read zeros (exact no-op terms for a finite filter). K2 <= 64. */
void gradref__cbd_f32_dw_rows4_avx2(const gradref__cbd_dw_shape *p, const float *w,
                                    const float *diff, const float *const rows[4][64],
                                    const int64_t base[4][64], const int64_t *nr, int64_t nrow,
                                    float *out) {
    (void)diff;
    const int64_t I2 = p->I[2], O2 = p->O[2], K2 = p->K[2];
    int64_t shift[64], k2s[64];
    const int64_t most = gradref__cbd_rows4_taps(p, nr, shift, k2s);
    for (int64_t b0 = 0; b0 < I2; b0 += 16) {
        __m256 a[4][2];
#  pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            a[r][0] = a[r][1] = _mm256_setzero_ps();
        for (int64_t t = 0; t < most; t++)
            for (int64_t c = 0; c < K2; c++) {
                const int64_t start = b0 + shift[c];
                if (start + 16 <= 0 || start >= O2) continue; /* no lane inside diff */
#  pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    if (t >= nr[r]) continue;
                    const __m256 wv = _mm256_broadcast_ss(w + base[r][t] + k2s[c]);
                    a[r][0] = _mm256_fmadd_ps(wv, window8(rows[r][t], start, O2), a[r][0]);
                    a[r][1] = _mm256_fmadd_ps(wv, window8(rows[r][t], start + 8, O2), a[r][1]);
                }
            }
#  pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            if (r >= nrow) break;
            store_cols8(out + r * I2, b0, I2, a[r][0]);
            if (b0 + 8 < I2) store_cols8(out + r * I2, b0 + 8, I2, a[r][1]);
        }
    }
}

/* dw_plane3x3 at 8 lanes: four grad rows by 8 columns, walking the diff rows they need in
 * ascending order; each diff row's three shifted (masked) loads feed every grad row it reaches,
 * so each accumulator sees its terms in the chain's order (diff row ascending, then the column
 * taps), as the AVX-512 kernel and the reference. Missing taps are zero weights or zero loads:
 * exact no-ops for a finite filter. */
/* A strip of 8 grad columns from b0 of a 3 x 3 kernel, in blocks of four grad rows from row 0
 * (the rows past the last whole block are left to the caller), unrolled as the AVX-512 strips:
 * a block reads six diff rows (d = 0..5, diff row i1 + pb1 - 2 + d) and grad row r takes row
 * tap kp1 = r + 2 - d, so only a diff row outside diff needs a test. Same chains: diff rows
 * ascending, then the column taps. */
#  define DW8_FMA(acc, kp1, c, x) acc = _mm256_fmadd_ps(w##kp1##c, x, acc)
#  define DW8_D0(x, c)            DW8_FMA(a0, 2, c, x)
#  define DW8_D1(x, c)                                                                             \
    DW8_FMA(a0, 1, c, x);                                                                          \
    DW8_FMA(a1, 2, c, x)
#  define DW8_D2(x, c)                                                                             \
    DW8_FMA(a0, 0, c, x);                                                                          \
    DW8_FMA(a1, 1, c, x);                                                                          \
    DW8_FMA(a2, 2, c, x)
#  define DW8_D3(x, c)                                                                             \
    DW8_FMA(a1, 0, c, x);                                                                          \
    DW8_FMA(a2, 1, c, x);                                                                          \
    DW8_FMA(a3, 2, c, x)
#  define DW8_D4(x, c)                                                                             \
    DW8_FMA(a2, 0, c, x);                                                                          \
    DW8_FMA(a3, 1, c, x)
#  define DW8_D5(x, c) DW8_FMA(a3, 0, c, x)
/* window c plain unless the variant masks it (edge 1: the ones not whole, 2: window 0, 3:
 * window 2) */
#  define DW8_LOAD(c)                                                                              \
    (edge == 0 || (edge == 1 && f##c) || (edge == 2 && (c) != 0) || (edge == 3 && (c) != 2)        \
         ? _mm256_loadu_ps(row + shift[c])                                                         \
         : _mm256_maskload_ps(row + shift[c], m##c))
/* one window at a time, into every grad row it reaches: one window register live */
#  define DW8_WINDOW(d, c)                                                                         \
    do {                                                                                           \
      const __m256 x = DW8_LOAD(c);                                                                \
      DW8_D##d(x, c);                                                                              \
    } while (0)
#  define DW8_ROW(d)                                                                               \
    if (o1 + (d) >= 0 && o1 + (d) < O1) {                                                          \
      const float *row = plane + (o1 + (d)) * O2 + b0;                                             \
      DW8_WINDOW(d, 0);                                                                            \
      DW8_WINDOW(d, 1);                                                                            \
      DW8_WINDOW(d, 2);                                                                            \
    }

#  define DW8_ROWS                                                                                 \
    DW8_ROW(0)                                                                                     \
    DW8_ROW(1)                                                                                     \
    DW8_ROW(2)                                                                                     \
    DW8_ROW(3)                                                                                     \
    DW8_ROW(4)                                                                                     \
    DW8_ROW(5)

/* The four-row block at i1, its first `nrow` rows stored (a plane under 8 columns wide: the
 * rows' first I2 values). */
#  define DW8_STORE(r, acc)                                                                        \
    if ((r) < nrow) {                                                                              \
      if (fs)                                                                                      \
        _mm256_storeu_ps(out + (r)*I2, acc);                                                       \
      else                                                                                         \
        gradref__store_first8_ps(out + (r)*I2, acc, I2 - b0);                                      \
    }
#  define DW8_BLOCK(rows)                                                                          \
    do {                                                                                           \
      const int64_t o1 = i1 + pb1 - 2, nrow = (rows);                                              \
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                  \
      if (!multi) {                                                                                \
        const float *plane = plane0;                                                               \
        DW8_ROWS                                                                                   \
      } else {                                                                                     \
        for (int64_t pl = 0; pl < planes; pl++) {                                                  \
          const float *plane = diff[pl];                                                           \
          DW8_WEIGHTS(pl);                                                                         \
          DW8_ROWS                                                                                 \
        }                                                                                          \
      }                                                                                            \
      hit |=                                                                                       \
          zero_or_nan4x8(a0, nrow > 1 ? a1 : a0, nrow > 2 ? a2 : a0, nrow > 3 ? a3 : a0) & live;   \
      float *out = grad + i1 * I2 + b0;                                                            \
      DW8_STORE(0, a0) DW8_STORE(1, a1) DW8_STORE(2, a2) DW8_STORE(3, a3)                          \
    } while (0)

/* the nine weights of diff plane pl */
#  define DW8_WEIGHTS(pl)                                                                          \
    (w00 = _mm256_set1_ps(weight[pl][0][0]), w01 = _mm256_set1_ps(weight[pl][0][1]),               \
     w02 = _mm256_set1_ps(weight[pl][0][2]), w10 = _mm256_set1_ps(weight[pl][1][0]),               \
     w11 = _mm256_set1_ps(weight[pl][1][1]), w12 = _mm256_set1_ps(weight[pl][1][2]),               \
     w20 = _mm256_set1_ps(weight[pl][2][0]), w21 = _mm256_set1_ps(weight[pl][2][1]),               \
     w22 = _mm256_set1_ps(weight[pl][2][2]))

/* `edge` 0: every window and the grad columns lie whole inside their rows (plain loads and
 * stores, no masks held); 1: masked where they do not; 2 and 3: the grad columns whole and only
 * window 0 (2) or window 2 (3) masked, so the nine weights, four accumulators, a window and
 * one mask fit the 16 registers. `multi`: several diff planes, whose weights a block loads as it
 * reaches each (one plane: held for the strip). */
__attribute__((always_inline)) static inline unsigned
strip_body(int edge, int last, int multi, const float weight[][3][3], const int64_t shift[3],
           const float *const *diff, int64_t planes, int64_t pb1, int64_t O1, int64_t O2,
           int64_t I1, int64_t I2, int64_t b0, float *grad) {
    __m256 w00, w01, w02, w10, w11, w12, w20, w21, w22;
    DW8_WEIGHTS(0);
    const float *plane0 = diff[0]; /* one plane: held for the strip */
    const __m256i none = _mm256_setzero_si256();
    const __m256i m0 = edge == 1 || edge == 2 ? valid8(b0 + shift[0], O2) : none,
                  m1 = edge == 1 ? valid8(b0 + shift[1], O2) : none,
                  m2 = edge == 1 || edge == 3 ? valid8(b0 + shift[2], O2) : none;
    const int f0 = b0 + shift[0] >= 0 && b0 + shift[0] + 8 <= O2,
              f1 = b0 + shift[1] >= 0 && b0 + shift[1] + 8 <= O2,
              f2 = b0 + shift[2] >= 0 && b0 + shift[2] + 8 <= O2, fs = edge != 1 || b0 + 8 <= I2;
    const unsigned live = fs ? 0xffu : (1u << (I2 - b0)) - 1u;
    unsigned hit = 0;
    if (last) { /* the last I1 % 4 rows by the block's chains, the rows past I1 not stored */
        const int64_t i1 = I1 / 4 * 4;
        DW8_BLOCK(I1 - i1);
        return hit;
    }
    for (int64_t i1 = 0; i1 + 4 <= I1; i1 += 4)
        DW8_BLOCK(4);
    return hit;
}

/* The 8-column strip at b0: its blocks of four rows (last 0) or its last I1 % 4 rows (1). */
#  define STRIP_BODY(edge)                                                                         \
    strip_body(edge, last, multi, weight, shift, diff, planes, pb1, O1, O2, I1, I2, b0, grad)
__attribute__((always_inline)) static inline unsigned
strip_rows(int last, int multi, const float weight[][3][3], const int64_t shift[3],
           const float *const *diff, int64_t planes, int64_t pb1, int64_t O1, int64_t O2,
           int64_t I1, int64_t I2, int64_t b0, float *grad) {
    unsigned cut = 0; /* the windows not whole */
    for (int c = 0; c < 3; c++)
        cut |= (unsigned)!(b0 + shift[c] >= 0 && b0 + shift[c] + 8 <= O2) << c;
    if (b0 + 8 > I2) return STRIP_BODY(1);
    if (cut == 0) return STRIP_BODY(0);
    /* a "same" 3 x 3's edge strips: one mask held, not three (which spill) */
    if (cut == 1) return STRIP_BODY(2);
    if (cut == 4) return STRIP_BODY(3);
    return STRIP_BODY(1);
}
#  undef STRIP_BODY

/* strip_rows for (last, multi) */
#  define STRIP_3X3_8(NAME, LAST, MULTI)                                                           \
    __attribute__((noinline)) static unsigned NAME(                                                \
        const float weight[][3][3], const int64_t shift[3], const float *const *diff,              \
        int64_t planes, int64_t pb1, int64_t O1, int64_t O2, int64_t I1, int64_t I2, int64_t b0,   \
        float *grad) {                                                                             \
      return strip_rows(LAST, MULTI, weight, shift, diff, planes, pb1, O1, O2, I1, I2, b0, grad);  \
    }
STRIP_3X3_8(strip_3x3_8, 0, 0)
STRIP_3X3_8(strip_3x3_8_last, 1, 0)
STRIP_3X3_8(strip_3x3_8_planes, 0, 1)
STRIP_3X3_8(strip_3x3_8_planes_last, 1, 1)
#  undef STRIP_3X3_8
#  undef DW8_WEIGHTS
#  undef DW8_ROW
#  undef DW8_ROWS
#  undef DW8_BLOCK
#  undef DW8_STORE
#  undef DW8_LOAD
#  undef DW8_D0
#  undef DW8_D1
#  undef DW8_D2
#  undef DW8_D3
#  undef DW8_D4
#  undef DW8_D5
#  undef DW8_FMA
#  undef DW8_WINDOW

/* grad row i1 + r's terms from the diff row o1 (named accumulators stay in registers) */
#  define DW_ROW8(acc, r)                                                                          \
    do {                                                                                           \
      const int64_t kp1 = i1 + (r) + pb1 - o1;                                                     \
      if ((r) < nrow && kp1 >= 0 && kp1 < K1) {                                                    \
        acc = _mm256_fmadd_ps(wr[pl][kp1][0], v0, acc);                                            \
        acc = _mm256_fmadd_ps(wr[pl][kp1][1], v1, acc);                                            \
        acc = _mm256_fmadd_ps(wr[pl][kp1][2], v2, acc);                                            \
      }                                                                                            \
    } while (0)

/* dw_plane3x3 for a kernel narrower than 3 x 3: blocks of four rows with the taps tested at run
 * time, the last strip moved as the strips'. */
static unsigned plane_narrow_8(const gradref__cbd_dw_shape *p, const float weight[][3][3],
                               const int64_t shift[3], const float *const *diff, int64_t planes,
                               float *grad) {
    const int64_t I1 = p->I[1], I2 = p->I[2], O1 = p->O[1], O2 = p->O[2];
    const int64_t K1 = p->K[1], K2 = p->K[2], pb1 = p->pad[1];
    __m256 wr[GRADREF__CBD_DW_PLANES][3][3]; /* [plane][kp1][c], c: column taps in chain order */
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t kp1 = 0; kp1 < 3; kp1++)
            for (int64_t c = 0; c < 3; c++)
                wr[pl][kp1][c] = _mm256_set1_ps(weight[pl][kp1][c]);
    const __m256i none = _mm256_setzero_si256();
    unsigned hit = 0;
    for (int64_t s0 = 0; s0 < I2; s0 += 8) {
        const int64_t b0 = s0 + 8 > I2 && I2 >= 8 ? I2 - 8 : s0;
        const __m256i m0 = K2 > 0 ? valid8(b0 + shift[0], O2) : none,
                      m1 = K2 > 1 ? valid8(b0 + shift[1], O2) : none,
                      m2 = K2 > 2 ? valid8(b0 + shift[2], O2) : none;
        const unsigned live = b0 + 8 <= I2 ? 0xffu : (1u << (I2 - b0)) - 1u;
        /* whole windows take plain loads and stores (AMD microcodes the masked ones) */
        const int f0 = K2 > 0 && b0 + shift[0] >= 0 && b0 + shift[0] + 8 <= O2,
                  f1 = K2 > 1 && b0 + shift[1] >= 0 && b0 + shift[1] + 8 <= O2,
                  f2 = K2 > 2 && b0 + shift[2] >= 0 && b0 + shift[2] + 8 <= O2, fs = b0 + 8 <= I2;
        for (int64_t i1 = 0; i1 < I1; i1 += 4) {
            const int64_t nrow = I1 - i1 < 4 ? I1 - i1 : 4;
            int64_t lo = i1 + pb1 - (K1 - 1), hi = i1 + nrow - 1 + pb1;
            if (lo < 0) lo = 0;
            if (hi > O1 - 1) hi = O1 - 1;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t pl = 0; pl < planes; pl++)
                for (int64_t o1 = lo; o1 <= hi; o1++) {
                    const float *row = diff[pl] + o1 * O2 + b0;
                    const __m256 v0 = f0 ? _mm256_loadu_ps(row + shift[0])
                                         : _mm256_maskload_ps(row + shift[0], m0);
                    const __m256 v1 = f1 ? _mm256_loadu_ps(row + shift[1])
                                         : _mm256_maskload_ps(row + shift[1], m1);
                    const __m256 v2 = f2 ? _mm256_loadu_ps(row + shift[2])
                                         : _mm256_maskload_ps(row + shift[2], m2);
                    DW_ROW8(a0, 0);
                    DW_ROW8(a1, 1);
                    DW_ROW8(a2, 2);
                    DW_ROW8(a3, 3);
                }
            /* rows past nrow hold +0: a zero there asks for a scan it does not need */
            hit |= zero_or_nan4x8(a0, nrow > 1 ? a1 : a0, nrow > 2 ? a2 : a0, nrow > 3 ? a3 : a0) &
                   live;
            float *out = grad + i1 * I2 + b0;
            if (fs) {
                _mm256_storeu_ps(out, a0);
                if (nrow > 1) _mm256_storeu_ps(out + I2, a1);
                if (nrow > 2) _mm256_storeu_ps(out + 2 * I2, a2);
                if (nrow > 3) _mm256_storeu_ps(out + 3 * I2, a3);
                continue;
            }
            gradref__store_first8_ps(out, a0, I2 - b0);
            if (nrow > 1) gradref__store_first8_ps(out + I2, a1, I2 - b0);
            if (nrow > 2) gradref__store_first8_ps(out + 2 * I2, a2, I2 - b0);
            if (nrow > 3) gradref__store_first8_ps(out + 3 * I2, a3, I2 - b0);
        }
    }
    return hit;
}

int gradref__cbd_f32_dw_plane3x3_avx2(const gradref__cbd_dw_shape *p, const float *const *w,
                                      const float *const *diff, int64_t planes, float *grad) {
    const int64_t I1 = p->I[1], I2 = p->I[2], O1 = p->O[1], O2 = p->O[2], pb1 = p->pad[1];
    int64_t shift[3] = {0, 0, 0}; /* set by the first plane's taps */
    float weight[GRADREF__CBD_DW_PLANES][3][3];
    for (int64_t pl = 0; pl < planes; pl++)
        gradref__cbd_plane3x3_taps(p, w[pl], shift, weight[pl]);
    const float(*wt)[3][3] = (const float(*)[3][3])weight;
    if (p->K[1] != 3 || p->K[2] != 3) return plane_narrow_8(p, wt, shift, diff, planes, grad) != 0;
    unsigned hit = 0;
    for (int64_t b0 = 0; b0 < I2; b0 += 8) {
        /* a last partial strip moved left onto its neighbour's columns (same values stored
         * twice): plain stores, where AMD microcodes the masked ones */
        const int64_t at = b0 + 8 > I2 && I2 >= 8 ? I2 - 8 : b0;
        if (I1 >= 4)
            hit |= (planes > 1 ? strip_3x3_8_planes : strip_3x3_8)(wt, shift, diff, planes, pb1, O1,
                                                                   O2, I1, I2, at, grad);
        if (I1 % 4)
            hit |= (planes > 1 ? strip_3x3_8_planes_last : strip_3x3_8_last)(
                wt, shift, diff, planes, pb1, O1, O2, I1, I2, at, grad);
    }
    return hit != 0;
}
#  undef DW_ROW8

/* ---------------------------------------------- small depthwise planes, channels in lanes */

/* The first n of 4 lanes, a 128-bit load/store mask. */
static inline __m128i first4(int64_t n) {
    return _mm_cmpgt_epi32(_mm_set1_epi32((int)n), _mm_setr_epi32(0, 1, 2, 3));
}

/* Pixels [j, j + 8) of eight channel rows (dc apart; the first n pixels read, the rest 0) as
 * eight pixel vectors of the channels: 128-bit halves into both lanes, then in-lane shuffles
 * (no lane-crossing permute, which one port runs). */
static inline void lanes_in8(const float *d, int64_t dc, int64_t n, __m256 *v) {
    __m256 r[8];
    for (int h = 0; h < 2; h++) {
        const int64_t k = n - 4 * h;
        for (int i = 0; i < 4; i++) {
            const float *a = d + i * dc + 4 * h, *b = d + (i + 4) * dc + 4 * h;
            const __m128 lo = k >= 4 ? _mm_loadu_ps(a) : _mm_maskload_ps(a, first4(k));
            const __m128 hi = k >= 4 ? _mm_loadu_ps(b) : _mm_maskload_ps(b, first4(k));
            r[4 * h + i] = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
        }
    }
    for (int h = 0; h < 2; h++) {
        const __m256 *q = r + 4 * h;
        const __m256 t0 = _mm256_unpacklo_ps(q[0], q[1]), t1 = _mm256_unpackhi_ps(q[0], q[1]);
        const __m256 t2 = _mm256_unpacklo_ps(q[2], q[3]), t3 = _mm256_unpackhi_ps(q[2], q[3]);
        v[4 * h] = _mm256_shuffle_ps(t0, t2, 0x44), v[4 * h + 1] = _mm256_shuffle_ps(t0, t2, 0xee);
        v[4 * h + 2] = _mm256_shuffle_ps(t1, t3, 0x44);
        v[4 * h + 3] = _mm256_shuffle_ps(t1, t3, 0xee);
    }
}

/* lanes_in8's inverse: pixel vectors p[0..8) to eight channel rows (gc apart), their first n
 * pixels stored. */
static inline void lanes_out8(const __m256 *p, float *g, int64_t gc, int64_t n) {
    for (int h = 0; h < 2 && n > 4 * h; h++) {
        const __m256 *q = p + 4 * h;
        const int64_t k = n - 4 * h;
        const __m256 t0 = _mm256_unpacklo_ps(q[0], q[1]), t1 = _mm256_unpackhi_ps(q[0], q[1]);
        const __m256 t2 = _mm256_unpacklo_ps(q[2], q[3]), t3 = _mm256_unpackhi_ps(q[2], q[3]);
        const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xee),
                             _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xee)};
        for (int c = 0; c < 4; c++) {
            const __m128 lo = _mm256_castps256_ps128(u[c]), hi = _mm256_extractf128_ps(u[c], 1);
            /* plain stores where partial (AMD microcodes the masked ones) */
            gradref__store_first4_ps(g + c * gc + 4 * h, lo, k);
            gradref__store_first4_ps(g + (c + 4) * gc + 4 * h, hi, k);
        }
    }
}

static inline __m256 lanes_fma8(__m256 acc, __m256 w, __m256 v) {
    return _mm256_fmadd_ps(w, v, acc);
}
GRADREF__CBD_LANES_ROWS(__m256, 8, _mm256_setzero_ps(), _mm256_loadu_ps, lanes_fma8)

unsigned gradref__cbd_f32_dw_lanes_avx2(const gradref__cbd_dw_lanes *L, const float *w,
                                        const float *diff, int64_t dc, float *grad, int64_t gc) {
    _Alignas(32) float s[8 * GRADREF__CBD_LANES_CELLS];
    __m256 out[GRADREF__CBD_LANES_CELLS + 8]; /* grad's pixels, 8 channels each */
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t i = 0; i < L->zero_cells; i++)
        _mm256_store_ps(s + 8 * L->zero_cell[i], zero);
    for (int64_t j0 = 0; j0 < L->in_cells; j0 += 8) {
        __m256 v[8];
        const int64_t n = L->in_cells - j0 < 8 ? L->in_cells - j0 : 8;
        lanes_in8(diff + j0, dc, n, v);
        for (int64_t k = 0; k < n; k++)
            _mm256_store_ps(s + 8 * L->in_cell[j0 + k], v[k]);
    }
    lanes_plane(L, w, s, out);
    const int64_t pixels = L->I1 * L->I2;
    __m256 hit = zero; /* the channels holding a zero or a NaN */
    for (int64_t j = 0; j < pixels; j++)
        hit = _mm256_or_ps(hit, zero_or_nan8(out[j]));
    for (int64_t j0 = 0; j0 < pixels; j0 += 8)
        lanes_out8(out + j0, grad + j0, gc, pixels - j0 < 8 ? pixels - j0 : 8);
    return (unsigned)_mm256_movemask_ps(hit);
}

/* ------------------------------------------------ channels-last depthwise, 8 channels a block */

/* The NaN lanes of v added to nan. */
static inline __m256 cl_nan8(__m256 nan, __m256 v) {
    return _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}
GRADREF__CBD_CL_COLUMNS(cl_columns8, __m256, __m256, 8, _mm256_setzero_ps(), _mm256_loadu_ps,
                        lanes_fma8, _mm256_storeu_ps, cl_nan8)

static inline int cl_found8(__m256 nan) {
    return _mm256_movemask_ps(nan) != 0;
}
GRADREF__CBD_CL_ROW(static, dw_cl_row_avx2, __m256, _mm256_setzero_ps(), cl_columns8, 1, cl_found8)

static void dw_cl_stage_avx2(const float *src, int64_t sp, int64_t n, int64_t blocks, float *dst) {
    for (int64_t j = 0; j < n; j++, src += sp)
        for (int64_t b = 0; b < blocks; b++)
            _mm256_storeu_ps(dst + 8 * (b * n + j), _mm256_loadu_ps(src + 8 * b));
}

/* ---------------------------------------------------------- depthwise planes at stride 2 */

/* A stride-2 row's diff rows and their weights w[a][2 r + b] (column phase r, column tap b), in
 * the chain's order: two a plane at most. */
typedef struct s2_row_taps {
    const float *const *row;
    const __m256 *const *w;
    int nrows;
} s2_row_taps;

/* A stride-2 plane's row layout, the same for every row: its blocks, the column shifts, and
 * the edge blocks' masks, computed once a plane, four a block in x order. */
typedef struct s2_layout {
    gradref__cbd_s2_blocks B;
    int64_t shift[2][2], O2;
    __m256i edge_masks[3][4];
} s2_layout;

/* NB blocks of grad columns 2 x .. 2 x + 16 NB - 1 of a stride-2 row: 8 of each column phase a
 * block, each the reference's chain over NR diff rows (0: T->nrows, not unrolled) and NC0 / NC1
 * column taps, the two phases interleaved into first[] and second[]. mask (an edge block's,
 * NULL inside; NB 1): diff columns outside the row read as +0 (masked loads), which leaves a
 * chain as it is (a finite filter, a chain that is never -0). */
__attribute__((always_inline)) static inline void
s2_blocks(int NB, int NR, int NC0, int NC1, const s2_row_taps *T, const s2_layout *L, int64_t x,
          const __m256i *mask, __m256 *first, __m256 *second) {
    __m256 even[2], odd[2];
    for (int v = 0; v < NB; v++)
        even[v] = odd[v] = _mm256_setzero_ps();
    const int nr = NR ? NR : T->nrows;
    for (int a = 0; a < nr; a++) {
        for (int b = 0; b < NC0; b++)
            for (int v = 0; v < NB; v++) {
                const float *at = T->row[a] + x + 8 * v + L->shift[0][b];
                even[v] = _mm256_fmadd_ps(
                    T->w[a][b], mask ? _mm256_maskload_ps(at, mask[b]) : _mm256_loadu_ps(at),
                    even[v]);
            }
        for (int b = 0; b < NC1; b++)
            for (int v = 0; v < NB; v++) {
                const float *at = T->row[a] + x + 8 * v + L->shift[1][b];
                odd[v] = _mm256_fmadd_ps(
                    T->w[a][2 + b],
                    mask ? _mm256_maskload_ps(at, mask[2 + b]) : _mm256_loadu_ps(at), odd[v]);
            }
    }
    for (int v = 0; v < NB; v++) {
        const __m256 lo = _mm256_unpacklo_ps(even[v], odd[v]);
        const __m256 hi = _mm256_unpackhi_ps(even[v], odd[v]);
        first[v] = _mm256_permute2f128_ps(lo, hi, 0x20);
        second[v] = _mm256_permute2f128_ps(lo, hi, 0x31);
    }
}

/* s2_blocks' 16 NB columns stored whole; returns their zero-or-NaN lanes (a vector). */
__attribute__((always_inline)) static inline __m256 s2_whole(int NB, int NR, int NC0, int NC1,
                                                             const s2_row_taps *T,
                                                             const s2_layout *L, int64_t x,
                                                             const __m256i *mask, float *out) {
    __m256 first[2], second[2], hit = _mm256_setzero_ps();
    s2_blocks(NB, NR, NC0, NC1, T, L, x, mask, first, second);
    for (int v = 0; v < NB; v++) {
        _mm256_storeu_ps(out + 2 * x + 16 * v, first[v]);
        _mm256_storeu_ps(out + 2 * x + 16 * v + 8, second[v]);
        hit = _mm256_or_ps(hit, _mm256_or_ps(zero_or_nan8(first[v]), zero_or_nan8(second[v])));
    }
    return hit;
}

/* A stride-2 row by L's blocks, two inside blocks at a time (four chains); returns whether a
 * grad value is a zero or a NaN. */
__attribute__((always_inline)) static inline unsigned
s2_row(int NR, int NC0, int NC1, const s2_row_taps *T, const s2_layout *L, float *out) {
    __m256 hit = _mm256_setzero_ps();
    int64_t x = 0, edge = 0;
    for (; x < L->B.inside_lo; x += 8)
        hit = _mm256_or_ps(hit, s2_whole(1, NR, NC0, NC1, T, L, x, L->edge_masks[edge++], out));
    for (; x + 16 <= L->B.inside_hi; x += 16)
        hit = _mm256_or_ps(hit, s2_whole(2, NR, NC0, NC1, T, L, x, NULL, out));
    if (x < L->B.inside_hi) {
        hit = _mm256_or_ps(hit, s2_whole(1, NR, NC0, NC1, T, L, x, NULL, out));
        x += 8;
    }
    for (; x < 8 * L->B.whole; x += 8)
        hit = _mm256_or_ps(hit, s2_whole(1, NR, NC0, NC1, T, L, x, L->edge_masks[edge++], out));
    unsigned part = 0;
    const int64_t n = L->B.part;
    if (n) {
        __m256 first, second;
        s2_blocks(1, NR, NC0, NC1, T, L, x, L->edge_masks[edge], &first, &second);
        gradref__store_first8_ps(out + 2 * x, first, n);
        if (n > 8) gradref__store_first8_ps(out + 2 * x + 8, second, n - 8);
        part = ((unsigned)_mm256_movemask_ps(zero_or_nan8(first)) |
                (unsigned)_mm256_movemask_ps(zero_or_nan8(second)) << 8) &
               ((1u << n) - 1u);
    }
    return (part != 0) | (_mm256_movemask_ps(hit) != 0);
}

/* The row layout of plane s with column taps t. */
static void s2_layout_of(const gradref__cbd_dw_shape *s, const gradref__cbd_s2_taps *t,
                         s2_layout *L) {
    L->B = gradref__cbd_s2_blocks_of(s, t);
    L->O2 = s->O[2];
    for (int r = 0; r < 2; r++)
        for (int b = 0; b < 2; b++)
            L->shift[r][b] = b < t->ncols[r] ? t->shift[r][b] : 0;
    int64_t edge = 0;
    for (int64_t x = 0; x < 8 * L->B.whole + (L->B.part ? 8 : 0); x += 8)
        if (x < L->B.inside_lo || x >= L->B.inside_hi) {
            for (int k = 0; k < 4; k++)
                L->edge_masks[edge][k] = valid8(x + L->shift[k / 2][k % 2], L->O2);
            edge++;
        }
}

/* s2_plane's rows from one diff plane, two row taps or one unrolled (set up once a row: its
 * taps in registers). */
__attribute__((always_inline)) static inline unsigned
s2_plane_one(int NC0, int NC1, const gradref__cbd_dw_shape *s, const s2_layout *L,
             const __m256 wv[3][4], const float *diff, float *grad) {
    unsigned hit = 0;
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
        const __m256 *const weights[2] = {wv[kp[0]], wv[kp[1]]};
        const s2_row_taps T = {rows, weights, nrows};
        hit |= nrows == 2 ? s2_row(2, NC0, NC1, &T, L, out) : s2_row(1, NC0, NC1, &T, L, out);
    }
    return hit;
}

/* A stride-2 plane with NC0 / NC1 column taps from `planes` diff planes: its rows by their diff
 * rows' count, L and the weights held for the whole plane (a row's setup was most of a
 * 56-column row's time). */
__attribute__((always_inline)) static inline unsigned
s2_plane(int NC0, int NC1, const gradref__cbd_dw_shape *s, const float *const *w,
         const float *const *diff, int64_t planes, float *grad) {
    gradref__cbd_s2_taps t;
    gradref__cbd_s2_columns(s, &t);
    s2_layout L;
    s2_layout_of(s, &t, &L);
    /* [plane][kp1][2 r + b]: row tap position kp1, column phase r, column tap b */
    __m256 wv[GRADREF__CBD_DW_PLANES][3][4];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t kp1 = 0; kp1 < s->K[1]; kp1++)
            for (int k = 0; k < 4; k++)
                wv[p][kp1][k] = _mm256_set1_ps(gradref__cbd_s2_weight(s, &t, w[p], kp1, k));
    if (planes == 1) return s2_plane_one(NC0, NC1, s, &L, wv[0], diff[0], grad);
    unsigned hit = 0;
    for (int64_t i1 = 0; i1 < s->I[1]; i1++) {
        float *out = grad + i1 * s->I[2];
        const float *rows[2 * GRADREF__CBD_DW_PLANES];
        const __m256 *weights[2 * GRADREF__CBD_DW_PLANES];
        s2_row_taps T = {rows, weights, 0};
        for (int64_t p = 0; p < planes; p++) {
            int64_t kp[2];
            const int n = gradref__cbd_s2_row_taps(s, diff[p], i1, rows + T.nrows, kp);
            for (int a = 0; a < n; a++)
                weights[T.nrows + a] = wv[p][kp[a]];
            T.nrows += n;
        }
        if (T.nrows) {
            hit |= s2_row(0, NC0, NC1, &T, &L, out);
            continue;
        }
        memset(out, 0, (size_t)s->I[2] * sizeof *out); /* no tap: the empty chain, +0 */
        hit = 1;
    }
    return hit;
}

GRADREF__CBD_S2_PLANE_KERNEL(, gradref__cbd_f32_dw_plane_s2_avx2, s2_plane)

/* ------------------------------------------------------------ direct tiles at 8 lanes */

#  if GRADREF__CBD_TILE_ROWS_AVX2 != GRADREF__AVX2_MR || GRADREF__AVX2_MR != 6
#    error "the AVX2 tiles take the AVX2 GEMM's 6-row panels"
#  endif

/* The 8 lanes of bits b as an AVX2 mask (all ones where the bit is set). */
static inline __m256i lanes8(unsigned b) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)b), bit), bit);
}

/* One 16-pixel half (h) of a tile: R rows (R <= 6) of V (2, or 1 when at most 8 pixels are
 * left: a phase of 49 pixels computes 56 lanes, not 64) 8-lane accumulators, the chain over
 * (tap, oc) as the AVX-512 tile and the GEMM. `inside` 1: whole vectors are readable, loaded
 * plainly, and the lanes outside the tap cleared with an AND (AMD microcodes masked loads)
 * unless the tap has every lane; 0: masked loads; 2: a packed tile, plain loads. Named
 * accumulators keep gcc from spilling. */
#  define HALF_FMA(i)                                                                              \
    if ((i) < R) {                                                                                 \
      const __m256 wi = _mm256_broadcast_ss(w + (i));                                              \
      c##i##a = _mm256_fmadd_ps(wi, b0, c##i##a);                                                  \
      if (V > 1) c##i##b = _mm256_fmadd_ps(wi, b1, c##i##b);                                       \
    }
#  define HALF_LOAD(i)                                                                             \
    if ((i) < R) {                                                                                 \
      c##i##a = _mm256_maskload_ps(c + (i)*ldc, live0);                                            \
      if (V > 1) c##i##b = _mm256_maskload_ps(c + (i)*ldc + 8, live1);                             \
    }
#  define HALF_STORE(i)                                                                            \
    if ((i) < R) {                                                                                 \
      hit |= (unsigned)_mm256_movemask_ps(zero_or_nan8(c##i##a));                                  \
      if (V > 1) hit |= (unsigned)_mm256_movemask_ps(zero_or_nan8(c##i##b)) << 8;                  \
      if (whole) {                                                                                 \
        _mm256_storeu_ps(c + (i)*ldc, c##i##a);                                                    \
        _mm256_storeu_ps(c + (i)*ldc + 8, c##i##b);                                                \
      } else {                                                                                     \
        gradref__store_first8_ps(c + (i)*ldc, c##i##a, left);                                      \
        if (V > 1) gradref__store_first8_ps(c + (i)*ldc + 8, c##i##b, left - 8);                   \
      }                                                                                            \
    }
__attribute__((always_inline)) static inline unsigned
half_body(int inside, int R, int V, int h, const float *image, int64_t channel_stride, int64_t ocpg,
          const int64_t *offset, const uint16_t *masks, int64_t ntaps, const float *a, float *c,
          int64_t ldc, int64_t cols, int load) {
    const int64_t left = cols - 16 * h;
    const int whole = left >= 16;
    const unsigned live = left >= 16 ? 0xffffu : (1u << left) - 1u;
    const __m256i live0 = lanes8(live & 0xffu), live1 = lanes8(live >> 8);
    const unsigned all = V > 1 ? 0xffffu : 0xffu; /* V 1: the mask's upper lanes are 0 */
    __m256 c0a = _mm256_setzero_ps(), c0b = c0a, c1a = c0a, c1b = c0a, c2a = c0a, c2b = c0a;
    __m256 c3a = c0a, c3b = c0a, c4a = c0a, c4b = c0a, c5a = c0a, c5b = c0a;
    if (load) {
        HALF_LOAD(0) HALF_LOAD(1) HALF_LOAD(2) HALF_LOAD(3) HALF_LOAD(4) HALF_LOAD(5)
    }
    for (int64_t t = 0; t < ntaps; t++) {
        const unsigned m = masks[2 * t + h];
        if (m == 0) continue; /* all zero: fma(w, 0, acc) = acc for a finite w */
        const __m256i k0 = lanes8(m & 0xffu), k1 = lanes8(m >> 8);
        const float *src = image + offset[t] + 16 * h;
        const float *w = a + t * ocpg * 6;
        if (inside == 2) { /* a packed tile (contiguous rows): four channels an iteration */
#  pragma GCC unroll 4
            for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, w += 6) {
                const __m256 b0 = _mm256_loadu_ps(src);
                const __m256 b1 = V > 1 ? _mm256_loadu_ps(src + 8) : b0;
                HALF_FMA(0) HALF_FMA(1) HALF_FMA(2) HALF_FMA(3) HALF_FMA(4) HALF_FMA(5)
            }
            continue;
        }
        if (inside && m == all) { /* every lane inside: plain loads */
            for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, w += 6) {
                const __m256 b0 = _mm256_loadu_ps(src);
                const __m256 b1 = V > 1 ? _mm256_loadu_ps(src + 8) : b0;
                HALF_FMA(0) HALF_FMA(1) HALF_FMA(2) HALF_FMA(3) HALF_FMA(4) HALF_FMA(5)
            }
            continue;
        }
        /* one vector whole (a row's end falls in the other): one mask held, not two (twelve
         * accumulators, two vectors, a broadcast and two masks would spill one) */
        if (inside == 1 && V > 1 && ((m & 0xffu) == 0xffu || m >> 8 == 0xffu)) {
            const int first_whole = (m & 0xffu) == 0xffu;
            const __m256 keep = _mm256_castsi256_ps(first_whole ? k1 : k0);
            const float *whole_src = first_whole ? src : src + 8;
            const float *part_src = first_whole ? src + 8 : src;
            for (int64_t oc = 0; oc < ocpg; oc++, w += 6) {
                const __m256 whole = _mm256_loadu_ps(whole_src + oc * channel_stride);
                const __m256 part =
                    _mm256_and_ps(_mm256_loadu_ps(part_src + oc * channel_stride), keep);
                const __m256 b0 = first_whole ? whole : part, b1 = first_whole ? part : whole;
                HALF_FMA(0) HALF_FMA(1) HALF_FMA(2) HALF_FMA(3) HALF_FMA(4) HALF_FMA(5)
            }
            continue;
        }
        for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, w += 6) {
            __m256 b0, b1;
            if (inside) {
                b0 = _mm256_and_ps(_mm256_loadu_ps(src), _mm256_castsi256_ps(k0));
                b1 = V > 1 ? _mm256_and_ps(_mm256_loadu_ps(src + 8), _mm256_castsi256_ps(k1)) : b0;
            } else {
                b0 = _mm256_maskload_ps(src, k0);
                b1 = V > 1 ? _mm256_maskload_ps(src + 8, k1) : b0;
            }
            HALF_FMA(0) HALF_FMA(1) HALF_FMA(2) HALF_FMA(3) HALF_FMA(4) HALF_FMA(5)
        }
    }
    unsigned hit = 0; /* lanes holding a zero or a NaN (zero_or_nan8) */
    HALF_STORE(0) HALF_STORE(1) HALF_STORE(2) HALF_STORE(3) HALF_STORE(4) HALF_STORE(5);
    return hit & live;
}
#  undef HALF_FMA
#  undef HALF_LOAD
#  undef HALF_STORE

typedef unsigned (*half_fn)(int h, const float *image, int64_t channel_stride, int64_t ocpg,
                            const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                            const float *a, float *c, int64_t ldc, int64_t cols, int load);
#  define HALF(INSIDE, R, V)                                                                       \
    static unsigned half_##INSIDE##_##R##_##V(                                                     \
        int h, const float *image, int64_t channel_stride, int64_t ocpg, const int64_t *offset,    \
        const uint16_t *masks, int64_t ntaps, const float *a, float *c, int64_t ldc, int64_t cols, \
        int load) {                                                                                \
      return half_body(INSIDE, R, V, h, image, channel_stride, ocpg, offset, masks, ntaps, a, c,   \
                       ldc, cols, load);                                                           \
    }
#  define HALF_ROWS(INSIDE, V)                                                                     \
    HALF(INSIDE, 1, V)                                                                             \
    HALF(INSIDE, 2, V) HALF(INSIDE, 3, V) HALF(INSIDE, 4, V) HALF(INSIDE, 5, V) HALF(INSIDE, 6, V)
HALF_ROWS(0, 1)
HALF_ROWS(1, 1)
HALF_ROWS(2, 1)
HALF_ROWS(0, 2)
HALF_ROWS(1, 2)
HALF_ROWS(2, 2)
#  define HALF_LIST(INSIDE, V)                                                                     \
    {                                                                                              \
      half_##INSIDE##_1_##V, half_##INSIDE##_2_##V, half_##INSIDE##_3_##V, half_##INSIDE##_4_##V,  \
          half_##INSIDE##_5_##V, half_##INSIDE##_6_##V                                             \
    }
static const half_fn halves[2][3][GRADREF__CBD_TILE_ROWS_AVX2] = {
    {HALF_LIST(0, 1), HALF_LIST(1, 1), HALF_LIST(2, 1)},
    {HALF_LIST(0, 2), HALF_LIST(1, 2), HALF_LIST(2, 2)}};

/* A whole tile (17 to 32 pixels) of R <= 2 rows: four 8-lane vectors a row, 4 R chains where
 * a half has 2 R (a 2-row half waits on the FMA latency); each element's chain is the
 * half's. `inside` as half_body's. */
#  define WHOLE_FMA(i)                                                                             \
    if ((i) < R) {                                                                                 \
      const __m256 wi = _mm256_broadcast_ss(w + (i));                                              \
      c##i##a = _mm256_fmadd_ps(wi, b0, c##i##a);                                                  \
      c##i##b = _mm256_fmadd_ps(wi, b1, c##i##b);                                                  \
      c##i##c = _mm256_fmadd_ps(wi, b2, c##i##c);                                                  \
      c##i##d = _mm256_fmadd_ps(wi, b3, c##i##d);                                                  \
    }
__attribute__((always_inline)) static inline unsigned
whole_body(int inside, int R, const float *image, int64_t channel_stride, int64_t ocpg,
           const int64_t *offset, const uint16_t *masks, int64_t ntaps, const float *a, float *c,
           int64_t ldc, int64_t cols, int load) {
    const uint32_t live = cols >= 32 ? 0xffffffffu : (1u << cols) - 1u;
    __m256 acc[2][4];
    for (int i = 0; i < R; i++)
        for (int v = 0; v < 4; v++)
            acc[i][v] = load
                            ? _mm256_maskload_ps(c + i * ldc + 8 * v, lanes8(live >> 8 * v & 0xffu))
                            : _mm256_setzero_ps();
    __m256 c0a = acc[0][0], c0b = acc[0][1], c0c = acc[0][2], c0d = acc[0][3];
    __m256 c1a = R > 1 ? acc[1][0] : c0a, c1b = R > 1 ? acc[1][1] : c0a;
    __m256 c1c = R > 1 ? acc[1][2] : c0a, c1d = R > 1 ? acc[1][3] : c0a;
    for (int64_t t = 0; t < ntaps; t++) {
        const uint32_t m = (uint32_t)masks[2 * t] | (uint32_t)masks[2 * t + 1] << 16;
        if (m == 0) continue; /* all zero: fma(w, 0, acc) = acc for a finite w */
        const float *src = image + offset[t];
        const float *w = a + t * ocpg * 6;
        if (inside == 2 || (inside && m == 0xffffffffu)) { /* plain loads */
            for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, w += 6) {
                const __m256 b0 = _mm256_loadu_ps(src), b1 = _mm256_loadu_ps(src + 8);
                const __m256 b2 = _mm256_loadu_ps(src + 16), b3 = _mm256_loadu_ps(src + 24);
                WHOLE_FMA(0) WHOLE_FMA(1)
            }
            continue;
        }
        const __m256i k0 = lanes8(m & 0xffu), k1 = lanes8(m >> 8 & 0xffu);
        const __m256i k2 = lanes8(m >> 16 & 0xffu), k3 = lanes8(m >> 24);
        for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, w += 6) {
            __m256 b0, b1, b2, b3;
            if (inside) {
                b0 = _mm256_and_ps(_mm256_loadu_ps(src), _mm256_castsi256_ps(k0));
                b1 = _mm256_and_ps(_mm256_loadu_ps(src + 8), _mm256_castsi256_ps(k1));
                b2 = _mm256_and_ps(_mm256_loadu_ps(src + 16), _mm256_castsi256_ps(k2));
                b3 = _mm256_and_ps(_mm256_loadu_ps(src + 24), _mm256_castsi256_ps(k3));
            } else {
                b0 = _mm256_maskload_ps(src, k0), b1 = _mm256_maskload_ps(src + 8, k1);
                b2 = _mm256_maskload_ps(src + 16, k2), b3 = _mm256_maskload_ps(src + 24, k3);
            }
            WHOLE_FMA(0) WHOLE_FMA(1)
        }
    }
    acc[0][0] = c0a, acc[0][1] = c0b, acc[0][2] = c0c, acc[0][3] = c0d;
    acc[1][0] = c1a, acc[1][1] = c1b, acc[1][2] = c1c, acc[1][3] = c1d;
    uint32_t hit = 0; /* lanes holding a zero or a NaN (zero_or_nan8) */
    for (int i = 0; i < R; i++)
        for (int v = 0; v < 4 && 8 * v < cols; v++) {
            hit |= (uint32_t)_mm256_movemask_ps(zero_or_nan8(acc[i][v])) << 8 * v;
            gradref__store_first8_ps(c + i * ldc + 8 * v, acc[i][v], cols - 8 * v);
        }
    return (hit & live) != 0;
}
#  undef WHOLE_FMA

typedef unsigned (*whole_fn)(const float *image, int64_t channel_stride, int64_t ocpg,
                             const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                             const float *a, float *c, int64_t ldc, int64_t cols, int load);
#  define WHOLE(INSIDE, R)                                                                         \
    static unsigned whole_##INSIDE##_##R(const float *image, int64_t channel_stride, int64_t ocpg, \
                                         const int64_t *offset, const uint16_t *masks,             \
                                         int64_t ntaps, const float *a, float *c, int64_t ldc,     \
                                         int64_t cols, int load) {                                 \
      return whole_body(INSIDE, R, image, channel_stride, ocpg, offset, masks, ntaps, a, c, ldc,   \
                        cols, load);                                                               \
    }
WHOLE(0, 1)
WHOLE(1, 1)
WHOLE(2, 1)
WHOLE(0, 2)
WHOLE(1, 2)
WHOLE(2, 2)
static const whole_fn wholes[3][2] = {
    {whole_0_1, whole_0_2}, {whole_1_1, whole_1_2}, {whole_2_1, whole_2_2}};

unsigned gradref__cbd_f32_tile32_avx2(const float *image, int64_t channel_stride, int64_t ocpg,
                                      const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                                      int64_t cols, int inside, const float *a, int rows, float *c,
                                      int64_t ldc, int load) {
    unsigned hit = 0;
    if (rows <= 2 && cols > 16)
        return wholes[inside][rows - 1](image, channel_stride, ocpg, offset, masks, ntaps, a, c,
                                        ldc, cols, load);
    for (int h = 0; h < 2 && 16 * h < cols; h++)
        hit |= halves[cols - 16 * h > 8][inside][rows - 1](
            h, image, channel_stride, ocpg, offset, masks, ntaps, a, c + 16 * h, ldc, cols, load);
    return hit;
}

/* ---- a tile's last few pixels, a panel's rows in the lanes (tile_columns) ----
 * Each k step loads a 6-row panel as one vector (lanes 6 and 7: the next step's, unused) and
 * broadcasts each pixel's diff, for G panels and P pixels at once: G x P chains over the FMA
 * latency, where tile32 would fill one vector of 8 pixel lanes with P. */
enum { COLUMNS_MAX = 4, COLUMN_PANELS_MAX = 12, COLUMN_CHAINS = 12 };

/* A 6-row panel's k step at w; `last`: only its own 6 floats read (nothing may follow them). */
static inline __m256 panel6(const float *w, int last) {
    if (!last) return _mm256_loadu_ps(w);
    const __m128 high = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(const void *)(w + 4)));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(w)), high, 1);
}

/* One k step of G panels (the group's last read by panel6's `last` when last is 1) and P pixels,
 * each pixel's diff at b[p], which then steps by step[p]. */
#  define COLUMN_STEP(last)                                                                        \
    do {                                                                                           \
      if (P > G) { /* G panel vectors held (4 pixels of 3 panels: 16 registers) */                 \
        __m256 wq[COLUMN_PANELS_MAX];                                                              \
        _Pragma("GCC unroll 12") for (int q = 0; q < G; q++) wq[q] =                               \
            panel6(w + q * panel_floats, (last) && q == G - 1);                                    \
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                      \
          const __m256 bp = _mm256_broadcast_ss(b[p]);                                             \
          b[p] += step[p];                                                                         \
          _Pragma("GCC unroll 12") for (int q = 0; q < G; q++) acc[q * P + p] =                    \
              _mm256_fmadd_ps(wq[q], bp, acc[q * P + p]);                                          \
        }                                                                                          \
      } else { /* P broadcasts held, the panels read by the FMAs */                                \
        __m256 bp[COLUMNS_MAX];                                                                    \
        _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) bp[p] = _mm256_broadcast_ss(b[p]),     \
                                                            b[p] += step[p];                       \
        _Pragma("GCC unroll 12") for (int q = 0; q < G; q++) {                                     \
          const __m256 wq = panel6(w + q * panel_floats, (last) && q == G - 1);                    \
          _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) acc[q * P + p] =                     \
              _mm256_fmadd_ps(wq, bp[p], acc[q * P + p]);                                          \
        }                                                                                          \
      }                                                                                            \
      w += 6;                                                                                      \
    } while (0)

__attribute__((always_inline)) static inline unsigned
columns_body(int P, int G, const float *image, int64_t channel_stride, int64_t ocpg,
             const int64_t *offset, const uint16_t *masks, int64_t ntaps, int64_t first,
             const float *a, int64_t panel_floats, int64_t pr, int64_t M, float *c, int64_t ldc) {
    __m256 acc[COLUMN_CHAINS];
#  pragma GCC unroll 12
    for (int e = 0; e < COLUMN_CHAINS; e++)
        acc[e] = _mm256_setzero_ps();
    for (int64_t t = 0; t < ntaps; t++) {
        const float *b[COLUMNS_MAX];
        int64_t step[COLUMNS_MAX];
        if (!gradref__cbd_column_sources(image + offset[t], channel_stride, first, masks + 2 * t, P,
                                         b, step))
            continue;
        const float *w = a + t * ocpg * 6;
        const int end = t == ntaps - 1; /* the panels' last step: its own floats only */
        for (int64_t oc = 0; oc < ocpg - end; oc++)
            COLUMN_STEP(0);
        if (end) COLUMN_STEP(1);
    }
    unsigned hit = 0;
#  pragma GCC unroll 12
    for (int q = 0; q < G; q++) {
        const int64_t rows = M - q * pr < pr ? M - q * pr : pr;
        const unsigned live = (1u << rows) - 1u;
#  pragma GCC unroll 4
        for (int p = 0; p < P; p++) {
            float lanes[8];
            _mm256_storeu_ps(lanes, acc[q * P + p]);
            hit |= (unsigned)_mm256_movemask_ps(zero_or_nan8(acc[q * P + p])) & live;
            gradref__cbd_column_store(lanes, rows, c + q * pr * ldc + first + p, ldc);
        }
    }
    return hit;
}
#  undef COLUMN_STEP

/* column_panels, the panels a column group takes at most for P pixels: P G <= COLUMN_CHAINS
 * accumulators, which with the broadcasts or the panel vectors fit in 16 registers. */
GRADREF__CBD_COLUMN_KERNELS(tile_columns_avx2, 12, 6, 4, 3)

/* The I8 twin of half_body: 32-bit words of two int16 values, each product pair summed by
 * vpmaddwd (at most 2 x 2^14: no saturation) and added in int32, which wraps as the reference's
 * low 32 bits do. Zero lanes add nothing, so every tap and lane takes the same path as the f32
 * tile. */
#  define PAIR_MADD(i)                                                                             \
    if ((i) < R) {                                                                                 \
      const __m256i wi = _mm256_set1_epi32(w[i]);                                                  \
      c##i##a = _mm256_add_epi32(c##i##a, _mm256_madd_epi16(wi, b0));                              \
      if (V > 1) c##i##b = _mm256_add_epi32(c##i##b, _mm256_madd_epi16(wi, b1));                   \
    }
#  define PAIR_LOAD(i)                                                                             \
    if ((i) < R) {                                                                                 \
      c##i##a = _mm256_maskload_epi32(c + (i)*ldc, live0);                                         \
      if (V > 1) c##i##b = _mm256_maskload_epi32(c + (i)*ldc + 8, live1);                          \
    }
#  define PAIR_STORE(i)                                                                            \
    if ((i) < R) {                                                                                 \
      if (whole) {                                                                                 \
        _mm256_storeu_si256((__m256i *)(void *)(c + (i)*ldc), c##i##a);                            \
        _mm256_storeu_si256((__m256i *)(void *)(c + (i)*ldc + 8), c##i##b);                        \
      } else {                                                                                     \
        _mm256_maskstore_epi32(c + (i)*ldc, live0, c##i##a);                                       \
        if (V > 1) _mm256_maskstore_epi32(c + (i)*ldc + 8, live1, c##i##b);                        \
      }                                                                                            \
    }
__attribute__((always_inline)) static inline void
pair_half_body(int inside, int R, int V, int h, const int32_t *image, int64_t channel_stride,
               int64_t pairs, const int64_t *offset, const uint16_t *masks, int64_t ntaps,
               const int32_t *a, int32_t *c, int64_t ldc, int64_t cols, int load) {
    const int64_t left = cols - 16 * h;
    const int whole = left >= 16;
    const unsigned live = left >= 16 ? 0xffffu : (1u << left) - 1u;
    const __m256i live0 = lanes8(live & 0xffu), live1 = lanes8(live >> 8);
    const unsigned all = V > 1 ? 0xffffu : 0xffu; /* V 1: the mask's upper lanes are 0 */
    __m256i c0a = _mm256_setzero_si256(), c0b = c0a, c1a = c0a, c1b = c0a, c2a = c0a, c2b = c0a;
    __m256i c3a = c0a, c3b = c0a, c4a = c0a, c4b = c0a, c5a = c0a, c5b = c0a;
    if (load) {
        PAIR_LOAD(0) PAIR_LOAD(1) PAIR_LOAD(2) PAIR_LOAD(3) PAIR_LOAD(4) PAIR_LOAD(5)
    }
    for (int64_t t = 0; t < ntaps; t++) {
        const unsigned m = masks[2 * t + h];
        if (m == 0) continue;
        const __m256i k0 = lanes8(m & 0xffu), k1 = lanes8(m >> 8);
        const int32_t *src = image + offset[t] + 16 * h;
        const int32_t *w = a + t * pairs * 6;
        if (inside == 2 || (inside && m == all)) { /* packed, or every lane inside */
#  pragma GCC unroll 2
            for (int64_t j = 0; j < pairs; j++, src += channel_stride, w += 6) {
                const __m256i b0 = _mm256_loadu_si256((const __m256i *)(const void *)src);
                const __m256i b1 =
                    V > 1 ? _mm256_loadu_si256((const __m256i *)(const void *)(src + 8)) : b0;
                PAIR_MADD(0) PAIR_MADD(1) PAIR_MADD(2) PAIR_MADD(3) PAIR_MADD(4) PAIR_MADD(5)
            }
            continue;
        }
        for (int64_t j = 0; j < pairs; j++, src += channel_stride, w += 6) {
            __m256i b0, b1;
            if (inside) {
                b0 = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)src), k0);
                b1 = V > 1 ? _mm256_and_si256(
                                 _mm256_loadu_si256((const __m256i *)(const void *)(src + 8)), k1)
                           : b0;
            } else {
                b0 = _mm256_maskload_epi32(src, k0);
                b1 = V > 1 ? _mm256_maskload_epi32(src + 8, k1) : b0;
            }
            PAIR_MADD(0) PAIR_MADD(1) PAIR_MADD(2) PAIR_MADD(3) PAIR_MADD(4) PAIR_MADD(5)
        }
    }
    PAIR_STORE(0) PAIR_STORE(1) PAIR_STORE(2) PAIR_STORE(3) PAIR_STORE(4) PAIR_STORE(5)
}
#  undef PAIR_MADD
#  undef PAIR_LOAD
#  undef PAIR_STORE

typedef void (*pair_half_fn)(int h, const int32_t *image, int64_t channel_stride, int64_t pairs,
                             const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                             const int32_t *a, int32_t *c, int64_t ldc, int64_t cols, int load);
#  define PAIR_HALF(INSIDE, R, V)                                                                  \
    static void pair_half_##INSIDE##_##R##_##V(                                                    \
        int h, const int32_t *image, int64_t channel_stride, int64_t pairs, const int64_t *offset, \
        const uint16_t *masks, int64_t ntaps, const int32_t *a, int32_t *c, int64_t ldc,           \
        int64_t cols, int load) {                                                                  \
      pair_half_body(INSIDE, R, V, h, image, channel_stride, pairs, offset, masks, ntaps, a, c,    \
                     ldc, cols, load);                                                             \
    }
#  define PAIR_HALF_ROWS(INSIDE, V)                                                                \
    PAIR_HALF(INSIDE, 1, V)                                                                        \
    PAIR_HALF(INSIDE, 2, V)                                                                        \
    PAIR_HALF(INSIDE, 3, V) PAIR_HALF(INSIDE, 4, V) PAIR_HALF(INSIDE, 5, V) PAIR_HALF(INSIDE, 6, V)
PAIR_HALF_ROWS(0, 1)
PAIR_HALF_ROWS(1, 1)
PAIR_HALF_ROWS(2, 1)
PAIR_HALF_ROWS(0, 2)
PAIR_HALF_ROWS(1, 2)
PAIR_HALF_ROWS(2, 2)
#  define PAIR_HALF_LIST(INSIDE, V)                                                                \
    {                                                                                              \
      pair_half_##INSIDE##_1_##V, pair_half_##INSIDE##_2_##V, pair_half_##INSIDE##_3_##V,          \
          pair_half_##INSIDE##_4_##V, pair_half_##INSIDE##_5_##V, pair_half_##INSIDE##_6_##V       \
    }
static const pair_half_fn pair_halves[2][3][GRADREF__CBD_TILE_ROWS_AVX2] = {
    {PAIR_HALF_LIST(0, 1), PAIR_HALF_LIST(1, 1), PAIR_HALF_LIST(2, 1)},
    {PAIR_HALF_LIST(0, 2), PAIR_HALF_LIST(1, 2), PAIR_HALF_LIST(2, 2)}};

void gradref__cbd_i8_pair_tile32_avx2(const int32_t *image, int64_t channel_stride, int64_t pairs,
                                      const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                                      int64_t cols, int inside, const int32_t *a, int rows,
                                      int32_t *c, int64_t ldc, int load) {
    for (int h = 0; h < 2 && 16 * h < cols; h++)
        pair_halves[cols - 16 * h > 8][inside][rows - 1](
            h, image, channel_stride, pairs, offset, masks, ntaps, a, c + 16 * h, ldc, cols, load);
}

/* The lanes of q + shift in [0, limit), 8 a compare: x + 2^31 orders as unsigned, so one
 * signed compare of q + (shift + 2^31) against limit + 2^31 (both wrapping) tests both ends. */
static inline uint32_t range32_avx2(const int32_t *q, int32_t shift, int32_t limit) {
    const __m256i shifted = _mm256_set1_epi32((int32_t)((uint32_t)shift ^ 0x80000000u));
    const __m256i bound = _mm256_set1_epi32((int32_t)((uint32_t)limit ^ 0x80000000u));
    uint32_t in = 0;
    for (int v = 0; v < 4; v++) {
        const __m256i o = _mm256_add_epi32(
            _mm256_loadu_si256((const __m256i *)(const void *)(q + 8 * v)), shifted);
        in |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(bound, o)))
              << (8 * v);
    }
    return in;
}

/* The two 16-lane masks per tap of a tile (gradref__cbd_kernels' tile32_masks), by dims. */
static void tile32_masks_avx2(const int64_t *tap, int64_t ntaps, const int64_t *Q, const int64_t *O,
                              int64_t j0, int64_t cols, uint16_t *masks) {
    int32_t q[3][32];
    gradref__cbd_lane_coords(j0, Q, q);
    gradref__cbd_tile32_masks_by_dims(range32_avx2, q, tap, ntaps, O, cols, masks);
}

void gradref__cbd_f32_pack_tile32_avx2(const float *image, int64_t channel_stride, int64_t ocpg,
                                       const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                                       float *dst) {
    for (int64_t t = 0; t < ntaps; t++) {
        const unsigned m = (unsigned)masks[2 * t] | (unsigned)masks[2 * t + 1] << 16;
        if (m == 0) continue;
        const float *src = image + offset[t];
        float *out = dst + t * ocpg * 32;
        if (m == 0xffffffffu) {
            for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, out += 32)
                for (int v = 0; v < 4; v++)
                    _mm256_storeu_ps(out + 8 * v, _mm256_loadu_ps(src + 8 * v));
            continue;
        }
        __m256i lanes[4]; /* lanes outside the tap are never read */
        for (int v = 0; v < 4; v++)
            lanes[v] = lanes8(m >> (8 * v) & 0xffu);
        for (int64_t oc = 0; oc < ocpg; oc++, src += channel_stride, out += 32)
            for (int v = 0; v < 4; v++)
                _mm256_storeu_ps(out + 8 * v, _mm256_maskload_ps(src + 8 * v, lanes[v]));
    }
}
/* Four values to the even (0x55) or odd (0xaa) lanes of 8 elements, the others from old. */
#  define SPREAD4(v, old, lanes)                                                                   \
    _mm256_blend_ps(old,                                                                           \
                    _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v),                            \
                                             _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)),           \
                    lanes)

/* Whole vectors over the row's span of 2 len - 1 elements, the odd ones between the values
 * loaded and stored back (or +0 when odd_free): 8 values, then 4, then the span's last 8
 * elements, read before the others are stored (a load overlapping an earlier store waits for
 * it). No masked stores: AVX2's are slow on AMD. Rows under 8 elements one value at a time. */
void gradref__cbd_f32_scatter2_avx2(const float *from, int64_t len, int64_t rows, float *row,
                                    int64_t row_stride, int odd_free) {
    const __m256 zero = _mm256_setzero_ps();
    const __m256i upper = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    for (int64_t r = 0; r < rows; r++, from += len, row += row_stride) {
        const int64_t span = 2 * len - 1, last = span - 8; /* last is odd */
        if (span < 8) {
            for (int64_t x = 0; x < len; x++)
                row[2 * x] = from[x];
            continue;
        }
        const __m256 last_old = odd_free ? zero : _mm256_loadu_ps(row + last);
        int64_t x = 0;
        for (; 2 * x + 16 <= span; x += 8) {
            const __m256 v = _mm256_loadu_ps(from + x);
            const __m256 old0 = odd_free ? zero : _mm256_loadu_ps(row + 2 * x);
            const __m256 old1 = odd_free ? zero : _mm256_loadu_ps(row + 2 * x + 8);
            _mm256_storeu_ps(row + 2 * x, SPREAD4(_mm256_castps256_ps128(v), old0, 0x55));
            _mm256_storeu_ps(row + 2 * x + 8,
                             _mm256_blend_ps(old1, _mm256_permutevar8x32_ps(v, upper), 0x55));
        }
        if (2 * x + 8 <= span) {
            const __m256 old = odd_free ? zero : _mm256_loadu_ps(row + 2 * x);
            _mm256_storeu_ps(row + 2 * x, SPREAD4(_mm_loadu_ps(from + x), old, 0x55));
            x += 4;
        }
        if (x < len) /* values len - 4 .. len - 1, at the odd lanes from the odd element last */
            _mm256_storeu_ps(row + last, SPREAD4(_mm_loadu_ps(from + len - 4), last_old, 0xaa));
    }
}
#  undef SPREAD4

/* n floats of +0 at p: whole vectors, then the partial last one. */
static inline void zero_run(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i += 8)
        gradref__store_first8_ps(p + i, _mm256_setzero_ps(), n - i);
}

/* 8 values of each phase to 16 elements by unpacks and a lane swap; the last 4 (or the last
 * 4 again, overlapping: the same values) by 128-bit unpacks; rows under 4 values one by one.
 * has_odd (else +0 between) and has_zero (the row below) constants in each instance. */
__attribute__((always_inline)) static inline void
interleave_rows(int has_odd, int has_zero, const float *even, const float *odd, int64_t len,
                int64_t rows, float *row, int64_t row_stride, int64_t zero_at) {
    const __m256 z = _mm256_setzero_ps();
    for (int64_t r = 0; r < rows; r++, even += len, odd += has_odd ? len : 0, row += row_stride) {
        int64_t x = 0;
        for (; x + 8 <= len; x += 8) {
            const __m256 a = _mm256_loadu_ps(even + x), b = has_odd ? _mm256_loadu_ps(odd + x) : z;
            const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
            _mm256_storeu_ps(row + 2 * x, _mm256_permute2f128_ps(lo, hi, 0x20));
            _mm256_storeu_ps(row + 2 * x + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
        }
        if (has_zero) zero_run(row + zero_at, 2 * len);
        if (len < 4) {
            for (; x < len; x++)
                row[2 * x] = even[x], row[2 * x + 1] = has_odd ? odd[x] : 0.0f;
            continue;
        }
        for (; x < len; x += 4) {
            if (x + 4 > len) x = len - 4;
            const __m128 a = _mm_loadu_ps(even + x);
            const __m128 b = has_odd ? _mm_loadu_ps(odd + x) : _mm256_castps256_ps128(z);
            _mm_storeu_ps(row + 2 * x, _mm_unpacklo_ps(a, b));
            _mm_storeu_ps(row + 2 * x + 4, _mm_unpackhi_ps(a, b));
        }
    }
}

void gradref__cbd_f32_interleave2_avx2(const float *even, const float *odd, int64_t len,
                                       int64_t rows, float *row, int64_t row_stride,
                                       int64_t zero_at) {
    if (odd && !zero_at)
        interleave_rows(1, 0, even, odd, len, rows, row, row_stride, 0);
    else if (odd)
        interleave_rows(1, 1, even, odd, len, rows, row, row_stride, zero_at);
    else if (!zero_at)
        interleave_rows(0, 0, even, even, len, rows, row, row_stride, 0);
    else
        interleave_rows(0, 1, even, even, len, rows, row, row_stride, zero_at);
}

/* 8 sums a step: max(v, -128) takes -128 for a NaN (MAXPS returns its second operand when one
 * is NaN), truncation and the two half tests as the scalar one, then two saturating packs
 * (exact: the values are in -128..127). */
void gradref__cbd_qs8_row_avx2(const float *from, int64_t n, float acc_scale, float grad_scale,
                               int8_t *out) {
    const __m256 as = _mm256_set1_ps(acc_scale), gs = _mm256_set1_ps(grad_scale);
    const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    const __m256 half = _mm256_set1_ps(0.5f), minus_half = _mm256_set1_ps(-0.5f);
    int64_t x = 0;
    for (; x + 8 <= n; x += 8) {
        __m256 v = _mm256_div_ps(_mm256_mul_ps(_mm256_loadu_ps(from + x), as), gs);
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        const __m256i t = _mm256_cvttps_epi32(v);
        const __m256 frac = _mm256_sub_ps(v, _mm256_cvtepi32_ps(t));
        const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(frac, half, _CMP_GE_OQ));
        const __m256i down = _mm256_castps_si256(_mm256_cmp_ps(frac, minus_half, _CMP_LE_OQ));
        const __m256i i = _mm256_add_epi32(_mm256_sub_epi32(t, up), down); /* masks are -1 */
        const __m128i words =
            _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
        _mm_storel_epi64((__m128i *)(void *)(out + x), _mm_packs_epi16(words, words));
    }
    for (; x < n; x++)
        out[x] = gradref__cbd_qs8_requantize_inline((int32_t)from[x], acc_scale, grad_scale);
}

/* Lanes [lo, end) of the 8 16-bit values from row + o2, zero-extended (see
 * gradref__cbd_me_window): one byte shuffle of a window inside the row. */
static inline __m256i me_u16_part_avx2(const uint16_t *row, int64_t o2, int64_t O2, int64_t lo,
                                       int64_t end) {
    uint16_t tmp[8];
    const int8_t *index = gradref__cbd_me_window(row, o2, O2, lo, end, tmp);
    const __m128i window = _mm_loadu_si128((const __m128i *)(const void *)tmp);
    const __m128i moved =
        _mm_shuffle_epi8(window, _mm_loadu_si128((const __m128i *)(const void *)index));
    return _mm256_cvtepu16_epi32(moved);
}

/* MegEngine DEFAULT, 8 lanes (cbd_megengine_lanes.h) */
#  define LANES 8
#  define ME_LOAD_F16(p)                                                                           \
    ((me_vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p))))
#  define ME_ANY(v)                              (!_mm256_testz_si256((__m256i)(v), (__m256i)(v)))
#  define ME_F16_SCALAR(h)                       _cvtsh_ss(h)
#  define ME_LOAD_U16_PART(row, o2, O2, lo, end) ((me_vu)me_u16_part_avx2(row, o2, O2, lo, end))
#  define ME_MIN_U(a, b)                         ((me_vu)_mm256_min_epu32((__m256i)(a), (__m256i)(b)))
#  define ME_MAX_U(a, b)                         ((me_vu)_mm256_max_epu32((__m256i)(a), (__m256i)(b)))
#  define ME_ROW                                 megengine_row_avx2
#  include "cbd_megengine_lanes.h"

const gradref__cbd_kernels gradref__cbd_kernels_avx2 = {
    .isa = "avx2",
    .dw_row = gradref__cbd_f32_dw_row_avx2,
    .dw_rows4 = gradref__cbd_f32_dw_rows4_avx2,
    .dw_plane3x3 = gradref__cbd_f32_dw_plane3x3_avx2,
    .dw_plane_s2 = gradref__cbd_f32_dw_plane_s2_avx2,
    /* on Zen 3 a burst of a plane's prefetches stalls the core more than it saves */
    .dw_no_prefetch = 1,
    .dw_lanes = gradref__cbd_f32_dw_lanes_avx2,
    .dw_lanes_planes = 8,
    .dw_cl_row = dw_cl_row_avx2,
    .dw_cl_stage = dw_cl_stage_avx2,
    .dw_cl_lanes = 8,
    .tile_rows = GRADREF__CBD_TILE_ROWS_AVX2,
    .tile32 = gradref__cbd_f32_tile32_avx2,
    .pack_tile32 = gradref__cbd_f32_pack_tile32_avx2,
    .tile32_masks = tile32_masks_avx2,
    .tile_columns = tile_columns_avx2,
    .scatter2 = gradref__cbd_f32_scatter2_avx2,
    .interleave2 = gradref__cbd_f32_interleave2_avx2,
    .qs8_row = gradref__cbd_qs8_row_avx2,
    .megengine_row = megengine_row_avx2,
    .megengine_lanes = 8,
    .word_channels = 2,
    .word_rows = GRADREF__CBD_TILE_ROWS_AVX2,
    .word_tile32 = gradref__cbd_i8_pair_tile32_avx2,
};

#else
typedef int gradref__cbd_avx2_unused;
#endif
