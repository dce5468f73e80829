/* SPDX-License-Identifier: Apache-2.0 */
/* The fast path. Work items are (row block, rank) pairs, row-block-major: a block of rows of
 * grad_output stays in L1 while every rank takes its columns from it, and each item writes one
 * contiguous run of out (rows b0..b1 of rank r are adjacent there). Threads take contiguous
 * ranges of items; a copy has no reduction, so the result never depends on the split.
 * Segments (one rank, one row) are a memcpy when grad_output's row is dense, overlapping moves
 * up to 64 bytes, and streaming stores of whole lines when out is too large for the cache (the
 * short ones staged by blocks of rows first). */
#include <string.h>

#include "common/exec.h"
#include "common/internal.h"
#include "common/stream.h"
#include "recat_internal.h"
#include "recat_kernels.h"

/* Rows per block: about this many bytes of grad_output. */
#define BLOCK_BYTES 32768
/* Small segments write out's lines this far ahead: its 16 ranks' write streams are too many
 * for the hardware prefetchers, and a store that misses waits for the line's read. */
#define PREFETCH_BYTES 1024
/* Problems below this many bytes run on one thread: starting a team costs more. */
#define PARALLEL_MIN_BYTES (INT64_C(1) << 18)
/* Small segments of a streamed out are staged this many rows at a time; row blocks are a
 * multiple of it, so that each item's run of out is whole 64-byte lines where out's rank
 * regions start on one (64 rows of any width are). */
#define STAGE_ROWS 64

/* Rows of segments shorter than GRADREF__RECAT_STREAM_BYTES into a streamed out: gathered
 * STAGE_ROWS at a time into a buffer in L1 by the level's small_rows, then streamed, so that
 * out's lines are written whole and never read for ownership, as the small moves' ordinary
 * stores read each (most of the time of many narrow ranks, out being cold). */
static void stream_small_rows(const gradref__recat_kernels *k, char *dst, const char *src,
                              size_t pitch, size_t bytes, int64_t rows) {
    char stage[STAGE_ROWS * GRADREF__RECAT_STREAM_BYTES];
    for (int64_t b = 0; b < rows; b += STAGE_ROWS) {
        const int64_t n = rows - b < STAGE_ROWS ? rows - b : STAGE_ROWS;
        k->small_rows(stage, src + (size_t)b * pitch, pitch, bytes, n, 0);
        gradref__copy_stream(dst + (size_t)b * bytes, stage, (size_t)n * bytes);
    }
}

/* Rows [b0, b1) of the rank owning features [first, first + n). stream: out is written with
 * streaming stores; then prev_rows (next_rows): this thread writes (wrote) the rows before
 * (after) these, in order. */
static void copy_item(const gradref__recat_plan *p, const gradref__recat_kernels *k, int64_t first,
                      int64_t n, int64_t b0, int64_t b1, int stream, int prev_rows, int next_rows) {
    const int64_t D = p->width, len = n * D;
    const size_t esz = p->elem_size;
    const int64_t *st = p->src_stride;
    const int dense = p->dst_stride == 1 && (D == 1 || st[2] == 1) && (n <= 1 || st[1] == D);
    const size_t bytes = (size_t)len * esz;
    const char *src = p->src + (size_t)(b0 * st[0] + first * st[1]) * esz;
    char *dst = p->dst + (size_t)((p->batch * first * D + b0 * len) * p->dst_stride) * esz;
    const size_t src_pitch = (size_t)st[0] * esz;
    if (dense) { /* out's rows of this item are adjacent: dst advances by one segment */
        if (stream && bytes >= GRADREF__RECAT_STREAM_BYTES) {
            k->stream_rows(dst, src, src_pitch, bytes, b1 - b0, prev_rows, next_rows);
        } else if (stream && GRADREF__COPY_STREAMS && bytes <= GRADREF__RECAT_SMALL_BYTES) {
            stream_small_rows(k, dst, src, src_pitch, bytes, b1 - b0);
        } else if (bytes <= GRADREF__RECAT_SMALL_BYTES) {
            k->small_rows(dst, src, src_pitch, bytes, b1 - b0, PREFETCH_BYTES);
        } else {
            for (int64_t b = b0; b < b1; b++, src += src_pitch, dst += bytes)
                memcpy(dst, src, bytes);
        }
        return;
    }
    for (int64_t b = b0; b < b1; b++, src += src_pitch)
        for (int64_t t = 0; t < n; t++)
            for (int64_t d = 0; d < D; d++, dst += (size_t)p->dst_stride * esz)
                memcpy(dst, src + (size_t)(t * st[1] + d * st[2]) * esz, esz);
}

/* gradref__recat_fast's items, for each member of the team. */
typedef struct recat_call {
    const gradref__recat_plan *p;
    const gradref__recat_kernels *kernels;
    int64_t items, blocks, block, next_bytes, row_bytes;
    int stream;
} recat_call;

static void recat_member(void *arg) {
    const recat_call *c = arg;
    const gradref__recat_plan *p = c->p;
    const int64_t B = p->batch, W = p->num_ranks, block = c->block, blocks = c->blocks;
    const int64_t next_bytes = c->next_bytes, row_bytes = c->row_bytes;
    const int stream = c->stream;
    int64_t begin, end;
    gradref__my_range(c->items, &begin, &end);
    int64_t k = begin / W, r = begin % W;
    int64_t first = 0; /* F_r: the features of the ranks before r */
    for (int64_t q = 0; q < r; q++)
        first += p->rank_features[q * p->rank_features_stride];
    for (int64_t i = begin; i < end && k < blocks; i++) {
        int64_t n = p->rank_features[r * p->rank_features_stride];
        int64_t b0 = k * block, b1 = b0 + block < B ? b0 + block : B;
        if (next_bytes > 0 && b1 < B) { /* this rank's share of the next block */
            const char *next = p->src + (size_t)(b1 * p->src_stride[0]) * p->elem_size;
            int64_t span = b1 + block < B ? next_bytes : (B - b1) * row_bytes;
            for (int64_t o = span * r / W; o < span * (r + 1) / W; o += 64)
                __builtin_prefetch(next + o, 0, 3);
        }
        if (n > 0)
            copy_item(p, c->kernels, first, n, b0, b1, stream, i - W >= begin,
                      i + W < end && k + 1 < blocks);
        first += n;
        if (++r == W) {
            r = 0;
            first = 0;
            k++;
        }
    }
    if (stream) gradref__stream_fence();
}

void gradref__recat_fast(const gradref__recat_plan *p, int threads) {
    const int64_t B = p->batch, W = p->num_ranks, G = p->features * p->width;
    if (B == 0 || G == 0) return;
    const int64_t row_bytes = G * (int64_t)p->elem_size, total_bytes = B * row_bytes;
    const int stream = p->dst_stride == 1 && (size_t)total_bytes >= GRADREF__STREAM_MIN_BYTES;
    int64_t block = BLOCK_BYTES / row_bytes;
    if (block >= STAGE_ROWS) block -= block % STAGE_ROWS;
    if (block < 1) block = 1;
    if (block > B) block = B;
    const int64_t blocks = (B + block - 1) / block;
    int64_t items;
    int team = total_bytes >= PARALLEL_MIN_BYTES ? threads : 1;
    if (gradref__mul_ovf(blocks, W, &items)) { /* absurdly many empty ranks: one thread walks all */
        items = INT64_MAX;
        team = 1;
    }
    if ((int64_t)team > items) team = (int)items;
    /* A block's first rank takes a few bytes of each of its rows, a stride the hardware
     * prefetchers follow late; so when grad_output comes from memory (a streamed problem) and is
     * one dense run, each item fetches a share of the next block. */
    const int contiguous = p->src_stride[0] == G && (p->width == 1 || p->src_stride[2] == 1) &&
                           (p->features <= 1 || p->src_stride[1] == p->width);
    const int64_t next_bytes = contiguous && block > 1 && stream ? block * row_bytes : 0;
    const gradref__recat_kernels *kernels = gradref__recat_kernels_for(p->max_isa);
    recat_call c = {p, kernels, items, blocks, block, next_bytes, row_bytes, stream};
    gradref__run_team(team, recat_member, &c);
}
