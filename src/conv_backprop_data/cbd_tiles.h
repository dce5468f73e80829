/* SPDX-License-Identifier: Apache-2.0 */
/* cbd_tiles.c: the direct tiles of a stride phase. */
#ifndef GRADREF_CBD_TILES_H
#define GRADREF_CBD_TILES_H

#include "cbd_run.h"

/* Sub-grid pixels [jb, je) of a phase whose sub-grid has diff's last two sizes, into c (pixel
 * jb of row ic0 at c, rows ldc apart): tiles of 32 pixels computed straight from diff (no B
 * packing), a group of tiles at a time for every filter panel, a last tile's 1 to 4 pixels
 * past a 16-pixel half by the kernel table's tile_columns. Returns nonzero when a value
 * written is a zero or a NaN (the tiles' answer): without one the NaN and signed-zero scan of
 * those values has nothing to do. */
unsigned gradref__cbd_direct_tiles(const cbd_run *R, const cbd_phase *f, const float *panels,
                                   int64_t M, int64_t jb, int64_t je, float *c, int64_t ldc,
                                   const cbd_scratch *S, cbd_zeros *z);
#endif
