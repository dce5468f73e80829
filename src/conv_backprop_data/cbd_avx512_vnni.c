/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's kernels of the avx512_vnni level: the I8 direct tiles by int16 pairs at
 * 16 lanes, VPDPWSSD (the contract of gradref__cbd_i8_pair_tile32_avx2). */
#include "cbd_kernels.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

/* The f32 AVX-512 tile's shape (cbd_avx512.c, tile_body) on words: V vectors of 16 pixels, R
 * rows; each word's two products added to its int32 sum by one VPDPWSSD (at most 2 x 2^14 a
 * word: no saturation), the sums wrapping mod 2^32 as the reference's low 32 bits do. A lane
 * outside its tap reads 0 and adds nothing. */
__attribute__((always_inline)) static inline void
pair_tile_body(int inside, int V, int R, const int32_t *image, int64_t channel_stride,
               int64_t pairs, const int64_t *offset, const uint16_t *masks, int64_t ntaps,
               const int32_t *a, int32_t *c, int64_t ldc, __mmask16 live0, __mmask16 live1,
               int load) {
    enum { MR = GRADREF__CBD_TILE_ROWS };
    __m512i acc[MR][2];
    for (int i = 0; i < R; i++)
        for (int v = 0; v < V; v++)
            acc[i][v] = load ? _mm512_maskz_loadu_epi32(v ? live1 : live0, c + i * ldc + 16 * v)
                             : _mm512_setzero_si512();
    for (int64_t t = 0; t < ntaps; t++) {
        const __mmask16 m0 = masks[2 * t], m1 = masks[2 * t + 1];
        if ((m0 | m1) == 0) continue;
        const int32_t *src = image + offset[t];
        const int32_t *w = a + t * pairs * MR;
        for (int64_t j = 0; j < pairs; j++, src += channel_stride, w += MR) {
            __m512i b[2];
            for (int v = 0; v < V; v++) {
                const __mmask16 m = v ? m1 : m0;
                b[v] = inside == 2 ? _mm512_loadu_si512(src + 16 * v)
                       : inside    ? _mm512_maskz_mov_epi32(m, _mm512_loadu_si512(src + 16 * v))
                                   : _mm512_maskz_loadu_epi32(m, src + 16 * v);
            }
            for (int i = 0; i < R; i++) {
                const __m512i wi = _mm512_set1_epi32(w[i]);
                for (int v = 0; v < V; v++)
                    acc[i][v] = _mm512_dpwssd_epi32(acc[i][v], b[v], wi);
            }
        }
    }
    for (int i = 0; i < R; i++)
        for (int v = 0; v < V; v++)
            _mm512_mask_storeu_epi32(c + i * ldc + 16 * v, v ? live1 : live0, acc[i][v]);
}

typedef void (*pair_tile_fn)(const int32_t *image, int64_t channel_stride, int64_t pairs,
                             const int64_t *offset, const uint16_t *masks, int64_t ntaps,
                             const int32_t *a, int32_t *c, int64_t ldc, __mmask16 live0,
                             __mmask16 live1, int load);

/* One function per (inside, vectors, rows), as the f32 tiles. */
#  define PAIR_TILE(INSIDE, V, R)                                                                  \
    static void pair_tile_##INSIDE##_##V##_##R(                                                    \
        const int32_t *image, int64_t channel_stride, int64_t pairs, const int64_t *offset,        \
        const uint16_t *masks, int64_t ntaps, const int32_t *a, int32_t *c, int64_t ldc,           \
        __mmask16 live0, __mmask16 live1, int load) {                                              \
      pair_tile_body(INSIDE, V, R, image, channel_stride, pairs, offset, masks, ntaps, a, c, ldc,  \
                     live0, live1, load);                                                          \
    }
#  define PAIR_TILE_ROWS(INSIDE, V)                                                                \
    PAIR_TILE(INSIDE, V, 1)                                                                        \
    PAIR_TILE(INSIDE, V, 2)                                                                        \
    PAIR_TILE(INSIDE, V, 3)                                                                        \
    PAIR_TILE(INSIDE, V, 4)                                                                        \
    PAIR_TILE(INSIDE, V, 5)                                                                        \
    PAIR_TILE(INSIDE, V, 6)                                                                        \
    PAIR_TILE(INSIDE, V, 7)                                                                        \
    PAIR_TILE(INSIDE, V, 8)                                                                        \
    PAIR_TILE(INSIDE, V, 9)                                                                        \
    PAIR_TILE(INSIDE, V, 10)                                                                       \
    PAIR_TILE(INSIDE, V, 11)                                                                       \
    PAIR_TILE(INSIDE, V, 12)                                                                       \
    PAIR_TILE(INSIDE, V, 13)                                                                       \
    PAIR_TILE(INSIDE, V, 14)
PAIR_TILE_ROWS(0, 1)
PAIR_TILE_ROWS(0, 2)
PAIR_TILE_ROWS(1, 1)
PAIR_TILE_ROWS(1, 2)
PAIR_TILE_ROWS(2, 1)
PAIR_TILE_ROWS(2, 2)
#  define PAIR_TILE_LIST(INSIDE, V)                                                                \
    {                                                                                              \
      pair_tile_##INSIDE##_##V##_1, pair_tile_##INSIDE##_##V##_2, pair_tile_##INSIDE##_##V##_3,    \
          pair_tile_##INSIDE##_##V##_4, pair_tile_##INSIDE##_##V##_5,                              \
          pair_tile_##INSIDE##_##V##_6, pair_tile_##INSIDE##_##V##_7,                              \
          pair_tile_##INSIDE##_##V##_8, pair_tile_##INSIDE##_##V##_9,                              \
          pair_tile_##INSIDE##_##V##_10, pair_tile_##INSIDE##_##V##_11,                            \
          pair_tile_##INSIDE##_##V##_12, pair_tile_##INSIDE##_##V##_13,                            \
          pair_tile_##INSIDE##_##V##_14                                                            \
    }
static const pair_tile_fn pair_tiles[3][2][GRADREF__CBD_TILE_ROWS] = {
    {PAIR_TILE_LIST(0, 1), PAIR_TILE_LIST(0, 2)},
    {PAIR_TILE_LIST(1, 1), PAIR_TILE_LIST(1, 2)},
    {PAIR_TILE_LIST(2, 1), PAIR_TILE_LIST(2, 2)}};

void gradref__cbd_i8_pair_tile32_avx512_vnni(const int32_t *image, int64_t channel_stride,
                                             int64_t pairs, const int64_t *offset,
                                             const uint16_t *masks, int64_t ntaps, int64_t cols,
                                             int inside, const int32_t *a, int rows, int32_t *c,
                                             int64_t ldc, int load) {
    const __mmask16 live0 = (__mmask16)(cols >= 16 ? 0xffffu : (1u << cols) - 1u),
                    live1 = (__mmask16)(cols <= 16   ? 0u
                                        : cols >= 32 ? 0xffffu
                                                     : (1u << (cols - 16)) - 1u);
    pair_tiles[inside][cols > 16][rows - 1](image, channel_stride, pairs, offset, masks, ntaps, a,
                                            c, ldc, live0, live1, load);
}

#else
typedef int gradref__cbd_avx512_vnni_unused;
#endif
