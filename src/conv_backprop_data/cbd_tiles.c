/* SPDX-License-Identifier: Apache-2.0 */
/* The direct tiles of a stride phase whose sub-grid has diff's last two sizes: 32 pixels at a
 * time computed straight from diff by the kernel table's tile32 (no B packing), the tile's diff
 * packed first when enough filter panels reuse it. */
#include "cbd_tiles.h"

/* Prefetches the diff lines a 32-pixel tile at pixel j of `image` reads: for each diff row its
 * taps reach (consecutive taps of one row are one run), from the leftmost tap's first pixel to
 * the rightmost's last, in every channel. A tile reads OCpg channels at a few rows each, more
 * strided streams than the hardware prefetchers follow. */
static void prefetch_tile(const cbd_run *R, const cbd_phase *f, const float *image,
                          const int64_t *offset, int64_t j) {
    const int64_t channels = R->ocpg, dc = R->dc;
    for (int64_t t = 0; t < f->ntaps;) {
        int64_t lo = offset[t], hi = offset[t], u = t + 1;
        for (; u < f->ntaps && f->tap[4 * u + 1] == f->tap[4 * t + 1] &&
               f->tap[4 * u + 2] == f->tap[4 * t + 2];
             u++) {
            if (offset[u] < lo) lo = offset[u];
            if (offset[u] > hi) hi = offset[u];
        }
        for (int64_t c = 0; c < channels; c++)
            for (int64_t x = lo; x < hi + 32 + 16; x += 16)
                __builtin_prefetch(image + c * dc + j + x, 0, 3);
        t = u;
    }
}

/* The grad lines of a tile's `rows` rows (c at its pixel 0, rows ldc apart, `cols` pixels),
 * prefetched for writing while the tile before it computes, when its k steps are few (K <=
 * GRADREF__CBD_SHORT_K): a tile stores a line or two of every row it has, and with few k steps
 * a panel each store then waited on its line; with more, the prefetches only cost. Inlined: as
 * a function of its own gcc deems it pure (it has no effect but prefetches) and drops its
 * calls. */
__attribute__((always_inline)) static inline void prefetch_stores(int64_t K, float *c, int64_t ldc,
                                                                  int64_t rows, int64_t cols) {
    if (K > GRADREF__CBD_SHORT_K) return;
    for (int64_t i = 0; i < rows; i++) {
        __builtin_prefetch(c + i * ldc, 1, 3);
        if (cols > 16) __builtin_prefetch(c + i * ldc + 16, 1, 3);
    }
}

/* The pixels at the end of a tile of cols that the table's tile_columns takes for every panel
 * at once: those past its last 8, when they are few enough to leave most of a vector of pixel
 * lanes empty (AVX2's last vector, NEON's last block). */
static int64_t column_pixels(const cbd_run *R, int64_t cols) {
    const int64_t rest = cols % 8;
    return R->k->tile_columns && !R->word_channels && rest <= 4 ? rest : 0;
}

/* Packs the tiles of pixels [r0, r1) (a run; their masks in S->masks from pixel g0) one after
 * another into S->tile, each with its masks for the packed block: a tap the tile skips is
 * skipped, else every lane is read (the zeros are packed). */
static void pack_run(const cbd_run *R, const cbd_phase *f, const float *image, int64_t g0,
                     int64_t r0, int64_t r1, const cbd_scratch *S) {
    const int64_t K = f->ntaps * R->ocpg, per_tile = 2 * f->ntaps;
    uint16_t *block_masks = S->masks + S->tile_group * per_tile;
    for (int64_t j0 = r0, b = 0; j0 < r1; j0 += 32, b++) {
        const uint16_t *m = S->masks + (j0 - g0) / 32 * per_tile;
        R->k->pack_tile32(image + j0, R->dc, R->ocpg, S->offsets, m, f->ntaps,
                          S->tile + b * K * 32);
        for (int64_t t = 0; t < f->ntaps; t++)
            block_masks[b * per_tile + 2 * t] = block_masks[b * per_tile + 2 * t + 1] =
                (uint16_t)((m[2 * t] | m[2 * t + 1]) ? 0xffffu : 0u);
    }
}

/* The tiles of pixels [g0, g1) (one group's, their masks in S->masks), packed a run at a time
 * (gradref__cbd_packed_run) and each run read by every panel in turn, a panel over the whole
 * run; c is grad at pixel g0. */
static unsigned packed_tiles(const cbd_run *R, const cbd_phase *f, const float *panels, int64_t M,
                             int64_t g0, int64_t g1, const float *image, float *c, int64_t ldc,
                             const cbd_scratch *S, cbd_zeros *z) {
    const int64_t K = f->ntaps * R->ocpg, per_tile = 2 * f->ntaps;
    int64_t run = gradref__cbd_packed_run(K);
    if (run > S->packed_tiles) run = S->packed_tiles;
    int64_t *block_offset = S->offsets + f->ntaps;
    const uint16_t *block_masks = S->masks + S->tile_group * per_tile;
    unsigned hit = 0;
    for (int64_t t = 0; t < f->ntaps; t++)
        block_offset[t] = t * R->ocpg * 32;
    for (int64_t r0 = g0; r0 < g1; r0 += 32 * run) {
        const int64_t r1 = g1 - r0 < 32 * run ? g1 : r0 + 32 * run;
        pack_run(R, f, image, g0, r0, r1, S);
        for (int64_t i0 = 0; i0 < M; i0 += R->pr) {
            const int64_t rows = M - i0 < R->pr ? M - i0 : R->pr;
            for (int64_t j0 = r0, b = 0; j0 < r1; j0 += 32, b++) {
                const int64_t cols = g1 - j0 < 32 ? g1 - j0 : 32, tail = column_pixels(R, cols);
                /* the next call's lines: the next tile of these rows in the run, then the
                 * next panel's at the run's start (a run of one: the next tile's) */
                if (j0 + 32 < r1 || (run == 1 && j0 + 32 < g1))
                    prefetch_stores(K, c + i0 * ldc + (j0 + 32 - g0), ldc, rows, g1 - j0 - 32);
                else if (i0 + R->pr < M)
                    prefetch_stores(K, c + (i0 + R->pr) * ldc + (r0 - g0), ldc,
                                    M - i0 - R->pr < R->pr ? M - i0 - R->pr : R->pr, r1 - r0);
                if (cols > tail)
                    hit |= gradref__cbd_run_tile(R->k, R->word_channels, S->tile + b * K * 32, 32,
                                                 R->ocpg, block_offset, block_masks + b * per_tile,
                                                 f->ntaps, cols - tail, 2,
                                                 panels + i0 / R->pr * K * R->mr, (int)rows,
                                                 c + i0 * ldc + (j0 - g0), ldc, 0);
                zeros_some(z);
            }
        }
        for (int64_t j0 = r0, b = 0; j0 < r1; j0 += 32, b++) {
            const int64_t cols = g1 - j0 < 32 ? g1 - j0 : 32, tail = column_pixels(R, cols);
            if (tail)
                hit |= R->k->tile_columns(S->tile + b * K * 32, 32, R->ocpg, block_offset,
                                          block_masks + b * per_tile, f->ntaps, cols - tail, tail,
                                          panels, K * R->mr, R->pr, M, c + (j0 - g0), ldc);
        }
    }
    return hit;
}

/* Sub-grid pixels [jb, je) of a phase whose sub-grid has diff's last two sizes, into c (pixel
 * jb of row ic0 at c, rows ldc apart): tiles of 32 pixels computed straight from diff (no B
 * packing), a group of tiles at a time for every filter panel (cbd_tiles.h). */
unsigned gradref__cbd_direct_tiles(const cbd_run *R, const cbd_phase *f, const float *panels,
                                   int64_t M, int64_t jb, int64_t je, float *c, int64_t ldc,
                                   const cbd_scratch *S, cbd_zeros *z) {
    const gradref__cbd_plan *p = R->p;
    unsigned hit = 0;
    if (z != NULL && z->left > 0) { /* one slice per tile call, whole lines */
        const int64_t calls = (je - jb + 31) / 32 * ((M + R->pr - 1) / R->pr);
        z->slice = ((z->left + (size_t)calls - 1) / (size_t)calls + 63) & ~(size_t)63;
    }
    const int64_t K = f->ntaps * R->ocpg, per_tile = 2 * f->ntaps;
    const int64_t image_at = f->n * R->dn + f->g * R->ocpg * R->dc;
    const float *image = R->diff + image_at;
    int64_t *offset = S->offsets;
    uint16_t *masks = S->masks;
    int64_t lo = 0, hi = 0; /* what a tile reads, from pixel j0, over all taps and channels */
    for (int64_t t = 0; t < f->ntaps; t++) {
        const int64_t *tp = f->tap + 4 * t;
        offset[t] = (tp[1] * p->O[1] + tp[2]) * p->O[2] + tp[3];
        if (t == 0 || offset[t] < lo) lo = offset[t];
        if (t == 0 || offset[t] > hi) hi = offset[t];
    }
    const int64_t channels = (R->ocpg - 1) * R->dc;
    lo += image_at + (channels < 0 ? channels : 0);
    hi += image_at + (channels > 0 ? channels : 0) + 32;
    int64_t *key = S->masks_key;
    const int64_t group = S->tile_group * 32; /* pixels */
    for (int64_t g0 = jb; g0 < je; g0 += group) {
        const int64_t g1 = je - g0 < group ? je : g0 + group;
        /* the masks depend on the phase and the tiles only: the thread's next item of the
         * same geometry (another image, group or channel block) reuses them */
        if (key[0] != f->index || key[1] != g0 || key[2] != g1) {
            for (int64_t j0 = g0; j0 < g1; j0 += 32)
                R->k->tile32_masks(f->tap, f->ntaps, f->Q, p->O, j0, g1 - j0 < 32 ? g1 - j0 : 32,
                                   masks + (j0 - g0) / 32 * per_tile);
            key[0] = f->index, key[1] = g0, key[2] = g1;
        }
        if (S->tile) {
            hit |= packed_tiles(R, f, panels, M, g0, g1, image, c + (g0 - jb), ldc, S, z);
            continue;
        }
        /* a tile's diff (K rows of 128 bytes) reused by every panel while it fits in L1,
         * else each panel (in L1) reused by the tiles */
        const int tile_outer = K * 128 <= 40 * 1024;
        const int64_t tiles = (g1 - g0 + 31) / 32, panels_n = (M + R->pr - 1) / R->pr;
        for (int64_t outer = 0; outer < (tile_outer ? tiles : panels_n); outer++)
            for (int64_t inner = 0; inner < (tile_outer ? panels_n : tiles); inner++) {
                const int64_t tile_index = tile_outer ? outer : inner;
                const int64_t pn = tile_outer ? inner : outer;
                const int64_t i0 = pn * R->pr, j0 = g0 + tile_index * 32;
                const int64_t cols = g1 - j0 < 32 ? g1 - j0 : 32, tail = column_pixels(R, cols);
                const uint16_t *m = masks + tile_index * per_tile;
                const int64_t rows = M - i0 < R->pr ? M - i0 : R->pr;
                if (pn == 0 && j0 + 32 < g1 && R->prefetch_tiles)
                    prefetch_tile(R, f, image, offset, j0 + 32);
                if (j0 + 32 < g1)
                    prefetch_stores(K, c + i0 * ldc + (j0 + 32 - jb), ldc, rows, g1 - j0 - 32);
                if (cols > tail)
                    hit |= gradref__cbd_run_tile(
                        R->k, R->word_channels, image + j0, R->dc, R->ocpg, offset, m, f->ntaps,
                        cols - tail, j0 + lo >= R->span_lo && j0 + hi <= R->span_hi,
                        panels + pn * K * R->mr, (int)rows, c + i0 * ldc + (j0 - jb), ldc, 0);
                if (tail && pn == panels_n - 1) /* the tile's every panel at once */
                    hit |= R->k->tile_columns(image + j0, R->dc, R->ocpg, offset, m, f->ntaps,
                                              cols - tail, tail, panels, K * R->mr, R->pr, M,
                                              c + (j0 - jb), ldc);
                zeros_some(z);
            }
    }
    return hit;
}
