/* SPDX-License-Identifier: Apache-2.0 */
/* Depthwise on channels-last diff and grad (NDHWC, NHWC, NWC), the channels in the vector
 * lanes: no transposes, no staged planes. A work item is a band of grad rows (of every plane,
 * in order) of an image's chunk of channels. Each diff row its plane and row taps reach is
 * copied into a ring, by blocks of the level's lanes (a block's pixels side by side: the kernels
 * then read a tap's pixels at fixed offsets from one pointer, and channels-last pixels a
 * power-of-two number of KiB apart no longer share a few L1 sets); the level's dw_cl_row
 * computes a grad row from the ring in the reference's order, a few pixels at a time across
 * the chunk (by column phases at a stride), so that diff is read and grad written in address
 * order, streams the hardware prefetchers follow. F16 and BF16 diff rows are widened to f32 on
 * their way into the ring, and grad rows computed in f32 and rounded once, as the staged planes do.
 * Channels past the last whole block go as the whole block that ends at the chunk's last channel
 * (F32: staged, computed and stored as any block; the channels it shares with the block before
 * get the same values again, from the same chains), or, in a chunk narrower than a block, as a
 * block of their own, its other lanes zeros (F32: staged from diff by a loop, computed into a row
 * of its own and copied into grad); F16 and BF16 in their f32 rows, zero-padded. */
#include "cbd_channels_last.h"

#include <string.h>

#include "common/convert.h"
#include "common/convert_array.h"
#include "common/nan.h"

/* An item's ring of diff rows stays in L2. */
enum { CL_RING_BYTES = 128 << 10 };

/* The diff indices a grad index's taps span along dim d (0: planes, 1: rows). */
static int64_t span(const gradref__cbd_plan *p, int d) {
    return (p->K[d] - 1) * p->dil[d] / p->stride[d] + 1;
}

/* The ring's slots: diff row (o0, o1) goes to slot (o0 mod span 0, o1 mod span 1), so that
 * the rows of one grad row never share a slot. */
static int64_t ring_slots(const gradref__cbd_plan *p) {
    return span(p, 0) * span(p, 1);
}

int gradref__cbd_cl_fits(const gradref__cbd_plan *p) {
    const gradref__cbd_kernels *k = gradref__cbd_kernels_for(p->max_isa);
    return k->dw_cl_row && p->ICpg == 1 && p->OCpg == 1 &&
           (p->in_dtype == GRADREF_F32 || p->in_dtype == GRADREF_F16 ||
            p->in_dtype == GRADREF_BF16) &&
           p->out_dtype == p->in_dtype && p->K[0] * p->K[1] <= GRADREF__CBD_CL_TAPS &&
           p->K[2] <= GRADREF__CBD_CL_TAPS && p->ds[1] == 1 && p->gs[1] == 1;
}

static int64_t lanes_of(const gradref__cbd_plan *p) {
    return gradref__cbd_kernels_for(p->max_isa)->dw_cl_lanes;
}

/* Whether diff and grad rows go through f32 rows of whole blocks: F16 and BF16 (widened and
 * rounded). */
static int buffered(const gradref__cbd_plan *p) {
    return p->in_dtype != GRADREF_F32;
}

/* The f32 pixels of a thread's scratch per channel of its chunk: the ring's rows, then for
 * buffered rows a diff row and a grad row. */
static int64_t scratch_pixels(const gradref__cbd_plan *p) {
    const int64_t rows = buffered(p) ? p->O[2] + p->I[2] : 0;
    return ring_slots(p) * p->O[2] + rows;
}

/* The channels of an item's chunk (the last chunk may hold fewer): the widest multiple of the
 * level's lanes that divides G (or, for channels ending in a part of a block, that is at most
 * G rounded up) and whose scratch stays within CL_RING_BYTES (at least the lanes). */
static int64_t chunk_width(const gradref__cbd_plan *p) {
    const int64_t lanes = lanes_of(p), ragged = p->G % lanes != 0;
    const int64_t pixels = scratch_pixels(p), per_channel = (pixels > 0 ? pixels : 1) * 4;
    int64_t best = lanes;
    for (int64_t w = lanes; w < p->G + lanes; w += lanes)
        if ((ragged || p->G % w == 0) && w * per_channel <= CL_RING_BYTES) best = w;
    return best;
}

/* Whether F32 channels that end in a part of a block take the whole block ending at the last
 * channel: they do when the last chunk holds a block's lanes (chunks start on blocks). */
static int overlap_block(const gradref__cbd_plan *p) {
    const int64_t lanes = lanes_of(p), w = chunk_width(p);
    return !buffered(p) && p->G % lanes != 0 && p->G - (p->G - 1) / w * w >= lanes;
}

/* The floats of a thread's part row: a grad row of one block, for the other F32 channels that
 * end in a part of a block. */
static int64_t part_floats(const gradref__cbd_plan *p) {
    return !buffered(p) && p->G % lanes_of(p) != 0 && !overlap_block(p) ? p->I[2] * lanes_of(p) : 0;
}

static int64_t chunks_of(const cbd_run *R) {
    return (R->p->G + R->cl_chunk - 1) / R->cl_chunk;
}

void gradref__cbd_cl_plan(const gradref__cbd_plan *p, int threads, cbd_run *R) {
    R->cl_chunk = chunk_width(p);
    /* bands of rows where images x chunks leave a thread fewer than two items (each band
     * stages the rows above it again) */
    const int64_t items = p->N * chunks_of(R), want = 2 * (int64_t)threads;
    const int64_t rows = p->I[0] * p->I[1];
    R->cl_bands = items >= want ? 1 : (want + items - 1) / items;
    if (R->cl_bands > rows) R->cl_bands = rows > 0 ? rows : 1;
}

int64_t gradref__cbd_cl_items(const cbd_run *R) {
    const gradref__cbd_plan *p = R->p;
    return p->N * chunks_of(R) * R->cl_bands;
}

size_t gradref__cbd_cl_scratch_bytes(const gradref__cbd_plan *p) {
    return (size_t)(scratch_pixels(p) * chunk_width(p) + part_floats(p)) * sizeof(float) +
           (size_t)ring_slots(p) * sizeof(int64_t); /* the slots' tags */
}

/* The filter's offsets of a channel's taps in the chain's order: row taps u (kp0 = K0 - 1 - u /
 * K1, kp1 likewise), column taps t (kp2 = K2 - 1 - t). */
typedef struct cl_taps {
    int64_t row_at[GRADREF__CBD_CL_TAPS], col_at[GRADREF__CBD_CL_TAPS];
} cl_taps;

/* Channel c's weights in the chain's tap order into `at`, `lanes` floats apart; returns whether
 * they are all finite. */
static int put_channel(const gradref__cbd_plan *p, const cl_taps *tp, int64_t c, float *at,
                       int64_t lanes) {
    const int64_t K2 = p->K[2];
    const float *filter = (const float *)(const void *)p->filter; /* when F32 */
    int finite = 1;
    for (int64_t u = 0; u < p->K[0] * p->K[1]; u++)
        for (int64_t t = 0; t < K2; t++) {
            const int64_t e = c * p->fs[0] + tp->row_at[u] + tp->col_at[t];
            const float w = p->in_dtype == GRADREF_F32
                                ? filter[e]
                                : gradref__load_f32(p->in_dtype, p->filter, e);
            at[(u * K2 + t) * lanes] = w;
            finite &= w - w == 0.0f; /* not Inf or NaN */
        }
    return finite;
}

int gradref__cbd_cl_weights(const gradref__cbd_plan *p, int64_t r0, int64_t r1, float *cl_w) {
    const gradref__cbd_dw_shape s = gradref__cbd_dw_shape_of(p);
    const int64_t lanes = lanes_of(p);
    const int64_t K0 = p->K[0], K1 = p->K[1], K2 = p->K[2], T = K0 * K1 * K2;
    cl_taps tp;
    for (int64_t u = 0; u < K0 * K1; u++)
        tp.row_at[u] = gradref__cbd_stored(&s, 0, K0 - 1 - u / K1) * p->fs[3] +
                       gradref__cbd_stored(&s, 1, K1 - 1 - u % K1) * p->fs[4];
    for (int64_t t = 0; t < K2; t++)
        tp.col_at[t] = gradref__cbd_stored(&s, 2, K2 - 1 - t) * p->fs[5];
    /* with the overlapping block, the part's channels are in it alone: the range holding the
     * last channel writes it */
    const int overlap = overlap_block(p);
    const int64_t last = p->G / lanes * lanes; /* the last block, whole or a part */
    int finite = 1;
    for (int64_t r = r0; r < r1 && !(overlap && r >= last); r++)
        finite &= put_channel(p, &tp, r, cl_w + r / lanes * T * lanes + r % lanes, lanes);
    for (int64_t l = 0; overlap && r1 == p->G && l < lanes; l++)
        finite &= put_channel(p, &tp, p->G - lanes + l, cl_w + last * T + l, lanes);
    for (int64_t r = p->G; !overlap && r1 == p->G && r % lanes != 0; r++) /* its other lanes */
        for (int64_t tap = 0; tap < T; tap++)
            cl_w[r / lanes * T * lanes + tap * lanes + r % lanes] = 0.0f;
    return finite;
}

int64_t gradref__cbd_cl_weight_floats(const gradref__cbd_plan *p) {
    const int64_t lanes = lanes_of(p);
    return (p->G + lanes - 1) / lanes * lanes * p->K[0] * p->K[1] * p->K[2];
}

/* Column phase r of plan p's grad rows (columns r, r + s2, ...) into a: the column taps that
 * reach it, their diff columns' shifts and weight columns, its columns and its interior. */
static void phase_columns(const gradref__cbd_plan *p, int64_t r, gradref__cbd_cl_row *a) {
    const int64_t K2 = p->K[2], s2 = p->stride[2], O2 = p->O[2];
    a->K2 = 0;
    for (int64_t t = 0; t < K2; t++) { /* grad column r + s2 q, diff column q + shift */
        const int64_t num = r + p->pad_begin[2] - (K2 - 1 - t) * p->dil[2];
        if (num % s2 != 0) continue;
        a->shift[a->K2] = num / s2, a->wcol[a->K2++] = t;
    }
    a->I2 = (p->I[2] - r + s2 - 1) / s2, a->O2 = O2;
    a->first = a->last = 0; /* no tap: every column an edge, its chain empty (+0) */
    if (a->K2 == 0) return;
    const int64_t first = -a->shift[0], last = O2 - a->shift[a->K2 - 1];
    a->first = first < 0 ? 0 : first > a->I2 ? a->I2 : first;
    a->last = last < a->first ? a->first : last > a->I2 ? a->I2 : last;
}

/* An item's scratch (its ring; diff_row and grad_row when buffered, else NULL; part_row; the
 * diff row each slot holds, o0 O1 + o1, or -1), its channels (`width` of them from c0, `padded`
 * to whole blocks; the rows' whole blocks and, F32, the `part` channels past them) and its
 * image's chunk of diff and grad, in the call's dtype. */
typedef struct cl_item_data {
    float *ring, *diff_row, *grad_row, *part_row;
    int64_t *tags;
    int64_t width, padded, blocks, part;
    int overlap; /* the part goes as the whole block ending at the chunk's last channel */
    const char *diff;
    char *grad;
} cl_item_data;

/* n F16 or BF16 values to f32, or back (rounded to nearest even, as the staged planes). */
static void widen(const gradref__cbd_plan *p, const void *src, float *dst, int64_t n) {
    gradref__half_to_f32_array(gradref__array_kernels_for(p->max_isa), p->in_dtype, src, dst,
                               (size_t)n);
}
static void narrow(const gradref__cbd_plan *p, const float *src, void *dst, int64_t n) {
    gradref__f32_to_half_array(gradref__array_kernels_for(p->max_isa), p->out_dtype, src, dst,
                               (size_t)n);
}

/* The diff row `at` elements into an item's chunk as f32 pixels `*sp` floats apart: the
 * caller's (F32) or widened into diff_row by whole blocks (a last block's other lanes stay
 * zeros). */
static const float *diff_row_f32(const cbd_run *R, const cl_item_data *D, int64_t at, int64_t *sp) {
    const gradref__cbd_plan *p = R->p;
    const int64_t O2 = p->O[2], w = D->width;
    if (!D->diff_row) {
        *sp = p->ds[5];
        return (const float *)(const void *)D->diff + at;
    }
    const uint16_t *row = (const uint16_t *)(const void *)D->diff + at;
    if (p->ds[5] == w && w == D->padded) /* the chunk is every channel, the pixels dense */
        widen(p, row, D->diff_row, O2 * w);
    else
        for (int64_t j = 0; j < O2; j++)
            widen(p, row + j * p->ds[5], D->diff_row + j * D->padded, w);
    *sp = D->padded;
    return D->diff_row;
}

/* A diff row (pixels sp floats apart) into a ring slot by blocks: the whole ones by the
 * level's dw_cl_stage, the part channels past them by a loop, the block's other lanes zeros. */
static void stage_row(const cbd_run *R, const cl_item_data *D, const float *row, int64_t sp,
                      float *ring_row) {
    const int64_t O2 = R->p->O[2], lanes = R->k->dw_cl_lanes;
    R->k->dw_cl_stage(row, sp, O2, D->blocks, ring_row);
    float *part = ring_row + D->blocks * O2 * lanes;
    if (D->overlap) {
        R->k->dw_cl_stage(row + D->width - lanes, sp, O2, 1, part);
        return;
    }
    for (int64_t j = 0; D->part && j < O2; j++)
        for (int64_t l = 0; l < lanes; l++)
            part[j * lanes + l] = l < D->part ? row[j * sp + D->blocks * lanes + l] : 0.0f;
}

/* The diff index along dim d that grad index i reaches through tap kp, or -1 (before or past
 * diff, or between its strides). */
static int64_t diff_index(const gradref__cbd_plan *p, int d, int64_t i, int64_t kp) {
    const int64_t num = i + p->pad_begin[d] - kp * p->dil[d];
    if (num < 0 || num % p->stride[d] != 0 || num / p->stride[d] >= p->O[d]) return -1;
    return num / p->stride[d];
}

/* The diff rows grad row (i0, i1) of an item reaches, in the chain's order (plane taps, then
 * row taps, each kp descending: diff ascending), into a with their weights (w: the chunk's),
 * each staged into its ring slot by blocks unless the slot holds it already. */
static void row_taps(const cbd_run *R, const cl_item_data *D, gradref__cbd_cl_row *a,
                     const float *w, int64_t i0, int64_t i1) {
    const gradref__cbd_plan *p = R->p;
    const int64_t K0 = p->K[0], K1 = p->K[1], span0 = span(p, 0), span1 = span(p, 1);
    const int64_t O2 = p->O[2], slot_floats = O2 * R->cl_chunk, lanes = R->k->dw_cl_lanes;
    a->nrows = 0;
    for (int64_t kp0 = K0 - 1; kp0 >= 0; kp0--) {
        const int64_t o0 = diff_index(p, 0, i0, kp0);
        for (int64_t kp1 = K1 - 1; o0 >= 0 && kp1 >= 0; kp1--) {
            const int64_t o1 = diff_index(p, 1, i1, kp1);
            if (o1 < 0) continue;
            const int64_t slot = o0 % span0 * span1 + o1 % span1, tag = o0 * p->O[1] + o1;
            float *ring_row = D->ring + slot * slot_floats;
            if (D->tags[slot] != tag) {
                int64_t sp;
                const float *row = diff_row_f32(R, D, o0 * p->ds[3] + o1 * p->ds[4], &sp);
                stage_row(R, D, row, sp, ring_row);
                D->tags[slot] = tag;
            }
            a->rows[a->nrows] = ring_row;
            a->w[a->nrows++] = w + ((K0 - 1 - kp0) * K1 + K1 - 1 - kp1) * p->K[2] * lanes;
        }
    }
}

/* dw_cl_row on a, then the NaN rule on the first n floats of each column it stored. */
static void run_row(const cbd_run *R, gradref__cbd_cl_row *a, int64_t n) {
    if (R->k->dw_cl_row(a)) /* the zeros are the reference's own */
        for (int64_t i2 = 0; i2 < a->I2; i2++)
            gradref__canon_nans_f32(a->grad + i2 * a->gp, n, R->p->max_isa);
}

/* The part block of row a (whose rows and weights start at the item's first block): overlapping,
 * into grad at dst less the lanes it shares; else into part_row, then its part channels into
 * grad at dst. Its columns are `step` floats apart. */
static void part_block(const cbd_run *R, gradref__cbd_cl_row *a, const cl_item_data *D, float *dst,
                       int64_t step) {
    const int64_t lanes = R->k->dw_cl_lanes, rows = D->blocks * a->bstride, w = D->blocks * a->wb;
    for (int64_t r = 0; r < a->nrows; r++)
        a->rows[r] += rows, a->w[r] += w;
    a->blocks = 1;
    a->grad = D->overlap ? dst - (lanes - D->part) : D->part_row;
    a->gp = D->overlap ? step : lanes;
    run_row(R, a, lanes);
    for (int64_t r = 0; r < a->nrows; r++)
        a->rows[r] -= rows, a->w[r] -= w;
    for (int64_t i2 = 0; !D->overlap && i2 < a->I2; i2++)
        memcpy(dst + i2 * step, D->part_row + i2 * lanes, (size_t)D->part * sizeof(float));
}

/* The grad row of a whose row taps are set, a column phase at a time, into grad (its pixels
 * `pixel` floats apart): its whole blocks in place, then its part block. */
static void item_row(const cbd_run *R, gradref__cbd_cl_row *a, const cl_item_data *D, float *grad,
                     int64_t pixel) {
    const gradref__cbd_plan *p = R->p;
    const int64_t lanes = R->k->dw_cl_lanes, step = p->stride[2] * pixel;
    for (int64_t r = 0; r < p->stride[2] && r < p->I[2]; r++) {
        if (p->stride[2] > 1) phase_columns(p, r, a); /* stride 1: set once an item */
        a->blocks = D->blocks, a->grad = grad + r * pixel, a->gp = step;
        if (D->blocks) run_row(R, a, D->blocks * lanes);
        if (D->part) part_block(R, a, D, grad + r * pixel + D->blocks * lanes, step);
    }
}

/* Grad row (i0, i1) of an item: computed in place (F32; a part block by part_row) or in
 * grad_row by whole blocks, then its channels rounded into grad. */
static void grad_row(const cbd_run *R, gradref__cbd_cl_row *a, const cl_item_data *D,
                     const float *w, int64_t i0, int64_t i1) {
    const gradref__cbd_plan *p = R->p;
    const int64_t I2 = p->I[2], at = i0 * p->gs[3] + i1 * p->gs[4], width = D->width;
    row_taps(R, D, a, w, i0, i1);
    if (!D->grad_row) {
        item_row(R, a, D, (float *)(void *)D->grad + at, p->gs[5]);
        return;
    }
    item_row(R, a, D, D->grad_row, D->padded);
    uint16_t *row = (uint16_t *)(void *)D->grad + at;
    if (p->gs[5] == width && width == D->padded)
        narrow(p, D->grad_row, row, I2 * width);
    else
        for (int64_t j = 0; j < I2; j++)
            narrow(p, D->grad_row + j * D->padded, row + j * p->gs[5], width);
}

void gradref__cbd_cl_item(const cbd_run *R, int64_t it, float *scratch) {
    const gradref__cbd_plan *p = R->p;
    const int64_t bands = R->cl_bands, chunks = chunks_of(R), lanes = R->k->dw_cl_lanes;
    const int64_t band = it % bands, c0 = it / bands % chunks * R->cl_chunk,
                  n = it / (bands * chunks);
    const int64_t all = p->I[0] * p->I[1], rows = (all + bands - 1) / bands, q0 = band * rows;
    const int64_t q1 = q0 + rows < all ? q0 + rows : all, taps = p->K[0] * p->K[1] * p->K[2];
    const int64_t width = p->G - c0 < R->cl_chunk ? p->G - c0 : R->cl_chunk;
    const size_t esize = p->in_dtype == GRADREF_F32 ? 4 : 2;
    const int64_t slots = ring_slots(p) * p->O[2] * R->cl_chunk;
    const int64_t rows_f32 = buffered(p) ? (p->O[2] + p->I[2]) * R->cl_chunk : 0;
    const int64_t padded = (width + lanes - 1) / lanes * lanes;
    float *part_row = scratch + slots + rows_f32;
    const cl_item_data D = {scratch,
                            buffered(p) ? scratch + slots : NULL,
                            buffered(p) ? scratch + slots + p->O[2] * R->cl_chunk : NULL,
                            part_row,
                            (int64_t *)(void *)(part_row + part_floats(p)),
                            width,
                            padded,
                            buffered(p) ? padded / lanes : width / lanes,
                            buffered(p) ? 0 : width % lanes,
                            !buffered(p) && width % lanes != 0 && overlap_block(p),
                            p->diff + (size_t)(n * p->ds[0] + c0) * esize,
                            p->grad + (size_t)(n * p->gs[0] + c0) * esize};
    for (int64_t slot = 0; slot < ring_slots(p); slot++)
        D.tags[slot] = -1;
    if (D.diff_row && D.padded > width) /* the last block's other lanes: zeros */
        memset(D.diff_row, 0, (size_t)(p->O[2] * D.padded) * sizeof(float));
    gradref__cbd_cl_row a;
    a.bstride = p->O[2] * lanes, a.wb = taps * lanes;
    phase_columns(p, 0, &a);
    for (int64_t q = q0; q < q1; q++) /* grad rows in address order, planes then rows */
        grad_row(R, &a, &D, R->cl_w + c0 * taps, q / p->I[1], q % p->I[1]);
}
