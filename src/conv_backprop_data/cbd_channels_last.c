/* SPDX-License-Identifier: Apache-2.0 */
/* Depthwise on channels-last diff and grad (NHWC, NWC), the channels in the vector lanes: no
 * transposes, no staged planes. A work item is a band of grad rows of an image's chunk of
 * channels. Each diff row its row taps reach is copied once into a ring, by blocks of the
 * level's lanes (a block's pixels side by side: the kernels then read a tap's pixels at fixed
 * offsets from one pointer, and channels-last pixels a power-of-two number of KiB apart no
 * longer share a few L1 sets); the level's dw_cl_row computes a grad row from the ring in the
 * reference's order, a few pixels at a time across the chunk (by column phases at a stride),
 * so that diff is read and grad written in address order, streams the hardware prefetchers
 * follow. */
#include "cbd_channels_last.h"

#include "common/nan.h"

/* An item's ring of diff rows stays in L2. */
enum { CL_RING_BYTES = 128 << 10 };

/* The diff rows a grad row's row taps span. */
static int64_t ring_rows(const gradref__cbd_plan *p) {
    return (p->K[1] - 1) * p->dil[1] / p->stride[1] + 1;
}

int gradref__cbd_cl_fits(const gradref__cbd_plan *p) {
    const gradref__cbd_kernels *k = gradref__cbd_kernels_for(p->max_isa);
    return k->dw_cl_row && p->ICpg == 1 && p->OCpg == 1 && p->G % k->dw_cl_lanes == 0 &&
           p->in_dtype == GRADREF_F32 && p->out_dtype == GRADREF_F32 && p->stride[0] == 1 &&
           p->K[0] == 1 && p->I[0] == 1 && p->O[0] == 1 && p->pad_begin[0] == 0 &&
           p->K[1] <= GRADREF__CBD_CL_TAPS && p->K[2] <= GRADREF__CBD_CL_TAPS && p->ds[1] == 1 &&
           p->gs[1] == 1;
}

/* The channels of an item's chunk: the widest multiple of the level's lanes that divides G
 * and whose ring stays within CL_RING_BYTES (at least the lanes). */
static int64_t chunk_width(const gradref__cbd_plan *p) {
    const int64_t lanes = gradref__cbd_kernels_for(p->max_isa)->dw_cl_lanes;
    const int64_t per_channel = ring_rows(p) * (p->O[2] > 0 ? p->O[2] : 1) * 4;
    int64_t best = lanes;
    for (int64_t w = lanes; w <= p->G; w += lanes)
        if (p->G % w == 0 && w * per_channel <= CL_RING_BYTES) best = w;
    return best;
}

void gradref__cbd_cl_plan(const gradref__cbd_plan *p, int threads, cbd_run *R) {
    R->cl_chunk = chunk_width(p);
    /* bands of rows where images x chunks leave a thread fewer than two items (each band
     * stages the rows above it again) */
    const int64_t items = p->N * (p->G / R->cl_chunk), want = 2 * (int64_t)threads;
    R->cl_bands = items >= want ? 1 : (want + items - 1) / items;
    if (R->cl_bands > p->I[1]) R->cl_bands = p->I[1] > 0 ? p->I[1] : 1;
}

int64_t gradref__cbd_cl_items(const cbd_run *R) {
    const gradref__cbd_plan *p = R->p;
    return p->N * (p->G / R->cl_chunk) * R->cl_bands;
}

size_t gradref__cbd_cl_ring_bytes(const gradref__cbd_plan *p) {
    return (size_t)(ring_rows(p) * p->O[2] * chunk_width(p)) * sizeof(float);
}

int gradref__cbd_cl_weights(const gradref__cbd_plan *p, int64_t r0, int64_t r1, float *cl_w) {
    const gradref__cbd_dw_shape s = gradref__cbd_dw_shape_of(p);
    const int64_t lanes = gradref__cbd_kernels_for(p->max_isa)->dw_cl_lanes;
    const int64_t K1 = p->K[1], K2 = p->K[2], T = K1 * K2;
    int64_t row_at[GRADREF__CBD_CL_TAPS], col_at[GRADREF__CBD_CL_TAPS]; /* the chain's taps */
    for (int64_t u = 0; u < K1; u++) /* row tap u: kp1 = K1 - 1 - u */
        row_at[u] = gradref__cbd_stored(&s, 1, K1 - 1 - u) * p->fs[4];
    for (int64_t t = 0; t < K2; t++)
        col_at[t] = gradref__cbd_stored(&s, 2, K2 - 1 - t) * p->fs[5];
    const float *filter = (const float *)(const void *)p->filter;
    int finite = 1;
    for (int64_t r = r0; r < r1; r++) {
        float *block = cl_w + r / lanes * T * lanes + r % lanes;
        const float *taps = filter + r * p->fs[0];
        for (int64_t u = 0; u < K1; u++)
            for (int64_t t = 0; t < K2; t++) {
                const float w = taps[row_at[u] + col_at[t]];
                block[(u * K2 + t) * lanes] = w;
                finite &= w - w == 0.0f; /* not Inf or NaN */
            }
    }
    return finite;
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

/* Diff rows [.., hi] of an item (chunk channels from diff) into the ring, row o1 in slot o1
 * mod span by blocks, from the one after `staged` (the last already there): returns the new
 * last. */
static int64_t stage_rows(const cbd_run *R, const float *diff, int64_t staged, int64_t hi,
                          float *ring) {
    const gradref__cbd_plan *p = R->p;
    const int64_t span = ring_rows(p), O2 = p->O[2], slot = O2 * R->cl_chunk;
    int64_t o1 = staged + 1 > hi - span + 1 ? staged + 1 : hi - span + 1;
    for (o1 = o1 > 0 ? o1 : 0; o1 <= hi; o1++)
        R->k->dw_cl_stage(diff + o1 * p->ds[4], p->ds[5], O2, R->cl_chunk / R->k->dw_cl_lanes,
                          ring + o1 % span * slot);
    return hi > staged ? hi : staged;
}

/* Grad row i1 of an item from the ring (its row taps' slots), a column phase at a time; w:
 * the chunk's weights. */
static void item_row(const cbd_run *R, gradref__cbd_cl_row *a, const float *ring, const float *w,
                     int64_t i1, float *grad) {
    const gradref__cbd_plan *p = R->p;
    const int64_t K1 = p->K[1], K2 = p->K[2], O1 = p->O[1], O2 = p->O[2], s1 = p->stride[1];
    const int64_t span = ring_rows(p), top = i1 + p->pad_begin[1];
    a->nrows = 0;
    for (int64_t kp1 = K1 - 1; kp1 >= 0; kp1--) {
        const int64_t num = top - kp1 * p->dil[1], o1 = num / s1;
        if (num < 0 || num % s1 != 0 || o1 >= O1) continue;
        a->rows[a->nrows] = ring + o1 % span * O2 * R->cl_chunk;
        a->w[a->nrows++] = w + (K1 - 1 - kp1) * K2 * R->k->dw_cl_lanes;
    }
    for (int64_t r = 0; r < p->stride[2] && r < p->I[2]; r++) {
        if (p->stride[2] > 1) phase_columns(p, r, a); /* stride 1: set once an item */
        a->grad = grad + r * p->gs[5];
        if (R->k->dw_cl_row(a)) /* the NaN rule; the zeros are the reference's own */
            for (int64_t i2 = 0; i2 < a->I2; i2++)
                gradref__canon_nans_f32(a->grad + i2 * a->gp, R->cl_chunk, p->max_isa);
    }
}

void gradref__cbd_cl_item(const cbd_run *R, int64_t it, float *ring) {
    const gradref__cbd_plan *p = R->p;
    const int64_t bands = R->cl_bands, chunks = p->G / R->cl_chunk, lanes = R->k->dw_cl_lanes;
    const int64_t band = it % bands, c0 = it / bands % chunks * R->cl_chunk,
                  n = it / (bands * chunks);
    const int64_t rows = (p->I[1] + bands - 1) / bands, i1_0 = band * rows;
    const int64_t i1_1 = i1_0 + rows < p->I[1] ? i1_0 + rows : p->I[1];
    const float *diff = (const float *)(const void *)p->diff + n * p->ds[0] + c0;
    float *grad = (float *)(void *)p->grad + n * p->gs[0] + c0;
    gradref__cbd_cl_row a;
    a.blocks = R->cl_chunk / lanes, a.bstride = p->O[2] * lanes, a.wb = p->K[1] * p->K[2] * lanes;
    a.gp = p->stride[2] * p->gs[5];
    phase_columns(p, 0, &a);
    int64_t staged = -1;
    for (int64_t i1 = i1_0; i1 < i1_1; i1++) {
        const int64_t top = (i1 + p->pad_begin[1]) / p->stride[1]; /* the last it can reach */
        staged = stage_rows(R, diff, staged, top < p->O[1] ? top : p->O[1] - 1, ring);
        item_row(R, &a, ring, R->cl_w + c0 * p->K[1] * p->K[2], i1, grad + i1 * p->gs[4]);
    }
}
