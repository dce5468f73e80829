/* SPDX-License-Identifier: Apache-2.0 */
/* The fast path. Work items are (row block, rank) pairs, row-block-major: a block of rows of
 * grad_output stays in L1 while every rank takes its columns from it, and each item writes one
 * contiguous run of out (rows b0..b1 of rank r are adjacent there). Threads take contiguous
 * ranges of items; a copy has no reduction, so the result never depends on the split.
 * Segments (one rank, one row) are a memcpy when grad_output's row is dense, a plain loop under
 * 64 bytes, and streaming stores when out is too large for the cache. */
#include <string.h>

#include "common/internal.h"
#include "common/stream.h"
#include "recat_internal.h"

#define SMALL_SEGMENT_BYTES 64
/* Shorter segments are not worth a streaming store's partial lines at both ends. */
#define STREAM_SEGMENT_BYTES 256
/* Rows per block: about this many bytes of grad_output. */
#define BLOCK_BYTES 32768
/* Problems below this many bytes run on one thread: starting a team costs more. */
#define PARALLEL_MIN_BYTES (INT64_C(1) << 18)

/* Under 64 bytes: word copies, the last one overlapping, instead of a memcpy call. */
static void copy_small(char *dst, const char *src, size_t bytes) {
    if (bytes >= 8) {
        size_t i = 0;
        for (; i + 8 < bytes; i += 8) {
            uint64_t v;
            memcpy(&v, src + i, 8);
            memcpy(dst + i, &v, 8);
        }
        uint64_t last;
        memcpy(&last, src + bytes - 8, 8);
        memcpy(dst + bytes - 8, &last, 8);
    } else if (bytes >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + bytes - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + bytes - 4, &b, 4);
    } else {
        for (size_t i = 0; i < bytes; i++)
            dst[i] = src[i];
    }
}

/* Rows [b0, b1) of the rank owning features [first, first + n). */
static void copy_item(const gradref__recat_plan *p, int64_t first, int64_t n, int64_t b0,
                      int64_t b1, int stream) {
    const int64_t D = p->width, len = n * D;
    const size_t esz = p->elem_size;
    const int64_t *st = p->src_stride;
    const int dense = p->dst_stride == 1 && (D == 1 || st[2] == 1) && (n <= 1 || st[1] == D);
    const size_t bytes = (size_t)len * esz;
    const char *src = p->src + (size_t)(b0 * st[0] + first * st[1]) * esz;
    char *dst = p->dst + (size_t)((p->batch * first * D + b0 * len) * p->dst_stride) * esz;
    const size_t src_pitch = (size_t)st[0] * esz;
    if (dense) { /* out's rows of this item are adjacent: dst advances by one segment */
        if (bytes < SMALL_SEGMENT_BYTES) {
            for (int64_t b = b0; b < b1; b++, src += src_pitch, dst += bytes)
                copy_small(dst, src, bytes);
        } else if (stream && bytes >= STREAM_SEGMENT_BYTES) {
            for (int64_t b = b0; b < b1; b++, src += src_pitch, dst += bytes)
                gradref__copy_stream(dst, src, bytes);
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

void gradref__recat_fast(const gradref__recat_plan *p, int num_threads) {
    const int64_t B = p->batch, W = p->num_ranks, G = p->features * p->width;
    if (B == 0 || G == 0) return;
    const int64_t row_bytes = G * (int64_t)p->elem_size, total_bytes = B * row_bytes;
    int64_t block = BLOCK_BYTES / row_bytes;
    if (block < 1) block = 1;
    if (block > B) block = B;
    const int64_t blocks = (B + block - 1) / block;
    int64_t items;
    const int stream = p->dst_stride == 1 && (size_t)total_bytes >= GRADREF_STREAM_MIN_BYTES;
    int threads = total_bytes >= PARALLEL_MIN_BYTES ? num_threads : 1;
    if (gradref__mul_ovf(blocks, W, &items)) { /* absurdly many empty ranks: one thread walks all */
        items = INT64_MAX;
        threads = 1;
    }
    if ((int64_t)threads > items) threads = (int)items;
    GRADREF_PARALLEL(threads) {
        int64_t begin, end;
        gradref__my_range(items, &begin, &end);
        int64_t k = begin / W, r = begin % W;
        int64_t first = 0; /* F_r: the features of the ranks before r */
        for (int64_t q = 0; q < r; q++)
            first += p->rank_features[q * p->rank_features_stride];
        for (int64_t i = begin; i < end && k < blocks; i++) {
            int64_t n = p->rank_features[r * p->rank_features_stride];
            int64_t b0 = k * block, b1 = b0 + block < B ? b0 + block : B;
            if (n > 0) copy_item(p, first, n, b0, b1, stream);
            first += n;
            if (++r == W) {
                r = 0;
                first = 0;
                k++;
            }
        }
        if (stream) gradref__stream_fence();
    }
}
