/* SPDX-License-Identifier: Apache-2.0 */
/* The types and inlines of a conv_backprop_data fast-path run, shared by the files of its
 * strategies: cbd_fast.c (the layout of the workspace, the work items and the driver),
 * cbd_phases.c (the stride phases: their taps, the GEMM over each and the scatter into grad),
 * cbd_tiles.c (the direct tiles of a phase), cbd_direct.c (the same with stack buffers) and
 * cbd_int8.c (I8 in parts). Each of those files has its own header of prototypes. */
#ifndef GRADREF_CBD_RUN_H
#define GRADREF_CBD_RUN_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cbd_internal.h"
#include "cbd_kernels.h"
#include "common/convert.h"
#include "common/convert_array.h"

/* tiles of 32 pixels whose masks are computed together (direct tiles) */
#define GRADREF__CBD_TILE_GROUP 64
/* The k steps a panel (taps x channels) at most for which a direct tile's grad stores come
 * often: the tiles then prefetch the next tile call's grad lines, and packed tiles run in runs. */
#define GRADREF__CBD_SHORT_K 128

/* The packed tiles a panel takes in turn for a phase of K k steps. With few k steps (K <=
 * GRADREF__CBD_SHORT_K) a run of tiles is packed and each panel then stores its rows a run
 * long, few streams the hardware prefetchers follow; one tile at a time, every panel stored a
 * line or two of all the item's rows per tile. The run's packed diff stays within 128 KiB. */
static inline int64_t gradref__cbd_packed_run(int64_t K) {
    if (K < 1 || K > GRADREF__CBD_SHORT_K) return 1;
    const int64_t fit = (INT64_C(128) << 10) / (K * 128);
    return fit < 32 ? fit : 32;
}

/* C chunk per thread for phases that cannot write grad directly, in floats (512 KiB) */
#define GRADREF__CBD_CHUNK_FLOATS (INT64_C(128) * 1024)

enum { CBD_PATH_REFERENCE, CBD_PATH_GEMM, CBD_PATH_DEPTHWISE };

typedef struct cbd_layout {
    int path, stage_diff, acc_buffer;
    int channels_last;  /* depthwise channels-last: apack holds the filter in dw_cl_row's order */
    int64_t diff_plane; /* the staged f32 diff's channel stride, in floats */
    size_t apack, diff32, acc;   /* shared parts */
    size_t sums, parts;          /* I8: the int32 sums of its parts, first; the parts' own */
    size_t panels, phase_off;    /* the filter in GEMM panels per (group, phase), offsets */
    int private_panels;          /* each thread packs every panel into its part's panels_at */
    size_t phase_taps, tap_at;   /* every live phase's taps (4 entries each), where each starts */
    size_t residues;             /* the live phases' offsets along each dim */
    int64_t group_floats;        /* panel floats per group */
    size_t thread0, per_thread;  /* per thread: GEMM work, C chunk, tiles', private panels */
    size_t chunk_at, panels_at;  /* offsets inside a thread's part */
    size_t offsets_at, masks_at; /* direct tiles: per tap offsets, per tile and tap masks */
    size_t masks_key_at;         /* direct tiles: the (phase, tiles) the masks are for */
    int64_t tile_group;          /* direct tiles: tiles whose masks are computed together */
    size_t tile_at;              /* direct tiles: packed tiles' diff (0: not packed) */
    int64_t packed_tiles;        /* the tiles tile_at holds (gradref__cbd_packed_run), or 0 */
    size_t lanes_w; /* depthwise by lanes: their weights, past apack (0: a plane at a time) */
    /* planar depthwise of F16 or BF16 (or strided rows): each item converts its channels' diff
     * into, and its grad out of, f32 planes of its thread (offsets in a thread's part), instead
     * of whole staged tensors */
    int dw_item_diff, dw_item_grad;
    size_t dw_diff_at, dw_grad_at;
    size_t total;
} cbd_layout;

static inline int64_t taps_of(const gradref__cbd_plan *p) {
    return p->K[0] * p->K[1] * p->K[2];
}

static inline int64_t pixels(const int64_t *s) {
    return s[0] * s[1] * s[2];
}

/* Spatial dims (strides st[3..5]) dense in their own order: pixel j at offset j. */
static inline int dense_pixels(const int64_t *st, const int64_t *size) {
    return (size[2] == 1 || st[5] == 1) && (size[1] == 1 || st[4] == size[2]) &&
           (size[0] == 1 || st[3] == size[1] * size[2]);
}

/* Whether an image's diff (every group's) is larger than what stays in L2 after a tile's first
 * read: direct tiles then prefetch the next tile's diff, and a narrow level packs its tiles. */
static inline int gradref__cbd_diff_past_l2(const gradref__cbd_plan *p) {
    return p->G * p->OCpg * pixels(p->O) * (int64_t)sizeof(float) > (INT64_C(256) << 10);
}

static inline int unit_strides(const gradref__cbd_plan *p) {
    return p->stride[0] == 1 && p->stride[1] == 1 && p->stride[2] == 1;
}

/* The filter's element offset of group g, input channel ic, stored tap t, output channel 0. */
static inline int64_t filter_offset(const gradref__cbd_plan *p, int64_t g, int64_t ic, int64_t t) {
    const int64_t k0 = t / (p->K[1] * p->K[2]), k1 = t / p->K[2] % p->K[1], k2 = t % p->K[2];
    return g * p->fs[0] + ic * p->fs[2] + k0 * p->fs[3] + k1 * p->fs[4] + k2 * p->fs[5];
}

/* The filter's element at offset e as f32 (exact: F32, F16, BF16 or I8 here). */
static inline float filter_value(const gradref__cbd_plan *p, int64_t e) {
    return gradref__load_f32(p->in_dtype, p->filter, e);
}

/* One thread's part of the workspace (cbd_layout's *_at offsets), typed once per thread by
 * cbd_scratch_of: the GEMM's work area, the C chunk, and the direct tiles' pixel offsets,
 * masks, the key of those masks and the packed tiles. */
typedef struct cbd_scratch {
    void *gemm;           /* gradref__sgemm's work area */
    float *chunk;         /* GRADREF__CBD_CHUNK_FLOATS: a strided phase's C before its scatter */
    int64_t *offsets;     /* direct tiles: per tap (and per packed tap) diff offsets */
    uint16_t *masks;      /* direct tiles: per tile and tap, then the packed tiles' */
    int64_t *masks_key;   /* the (phase, first pixel, end) masks holds; key[0] -1: none */
    float *tile;          /* packed tiles' diff, or NULL: tiles read diff in place */
    int64_t packed_tiles; /* the tiles `tile` holds */
    int64_t tile_group;   /* tiles whose masks are computed together */
    float *dw_phases;     /* strided depthwise: a row of stride phases' planes */
    float *dw_ring;       /* channels-last depthwise: the ring and rows (the same space) */
    float *dw_diff, *dw_grad; /* planar depthwise: an item's f32 planes (NULL: in place) */
} cbd_scratch;

static inline cbd_scratch cbd_scratch_of(const cbd_layout *L, char *mine) {
    cbd_scratch S;
    S.gemm = mine;
    S.chunk = (float *)(void *)(mine + L->chunk_at);
    S.offsets = (int64_t *)(void *)(mine + L->offsets_at);
    S.masks = (uint16_t *)(void *)(mine + L->masks_at);
    S.masks_key = (int64_t *)(void *)(mine + L->masks_key_at);
    S.tile = L->tile_at ? (float *)(void *)(mine + L->tile_at) : NULL;
    S.packed_tiles = L->packed_tiles;
    S.tile_group = L->tile_group;
    S.dw_phases = L->path == CBD_PATH_DEPTHWISE ? (float *)(void *)mine : NULL;
    S.dw_ring = S.dw_phases;
    S.dw_diff = L->dw_item_diff ? (float *)(void *)(mine + L->dw_diff_at) : NULL;
    S.dw_grad = L->dw_item_grad ? (float *)(void *)(mine + L->dw_grad_at) : NULL;
    return S;
}

typedef struct cbd_run {
    const gradref__cbd_plan *p;
    const float *apack;
    const float *diff; /* f32 diff: channel c of image n at n * dn + c * dc, pixels dense */
    int64_t dn, dc;
    int64_t span_lo, span_hi; /* diff's elements lie in [diff + span_lo, diff + span_hi) */
    float *acc;               /* f32 grad, likewise */
    int64_t an, ac;
    int max_isa;                          /* the plan's: the GEMM's level and its own */
    const gradref__cbd_kernels *k;        /* the same family's own kernels */
    const gradref__array_kernels *arrays; /* the level's F16 and BF16 conversions */
    gradref__cbd_dw_shape dw;             /* depthwise: every channel's geometry */
    /* depthwise by lanes (k->dw_lanes): the geometry, and the weights of block b (its
     * k->dw_lanes_planes channels) at lanes_w + b * 9 * planes; NULL: a plane at a time */
    const gradref__cbd_dw_lanes *dw_lanes;
    const float *lanes_w;
    /* channels-last depthwise (cbd_channels_last.c): the weights in dw_cl_row's order (NULL:
     * not channels-last), the channels of an item, and the bands of grad rows an image's chunk
     * is split into */
    const float *cl_w;
    int64_t cl_chunk, cl_bands;
    const float *panels; /* group g, cbd_phase f: panels + g * group_floats + phase_off[f] */
    const int64_t *phase_off;
    /* phase f's taps (gradref__cbd_phase_taps, once per call): tap_at[f + 1] - tap_at[f] of
     * them from phase_taps + 4 * tap_at[f] */
    const int64_t *phase_taps, *tap_at;
    /* the live stride phases (those a tap reaches and that hold pixels): every combination of
     * the offsets res[j][0 .. nres[j]) along the dims, the last dim fastest */
    const int64_t *res[3];
    int64_t nres[3], phases;
    int64_t group_floats, mr;
    int64_t pr; /* rows per panel (<= mr): the channels spread evenly over the panels when every
                   phase runs direct tiles, whose short panels run at a fraction of the rate */
    int prefetch_tiles; /* an image's diff is larger than L2 holds beside the tiles' work */
    /* I8 by words (k->word_tile32, every phase by direct tiles): diff and the panels hold
     * 32-bit words of word_channels output channels (cbd_int8.c), acc int32 sums; 0: f32 */
    int word_channels;
    int64_t ocpg; /* a tap's channels in the panels, a group's in diff: OCpg, or its words */
} cbd_run;

/* Live phase f's taps (cbd_run's phase_taps) into *tap; returns their count. */
static inline int64_t cbd_phase_taps_of(const cbd_run *R, int64_t f, const int64_t **tap) {
    *tap = R->phase_taps + 4 * R->tap_at[f];
    return R->tap_at[f + 1] - R->tap_at[f];
}

/* The NaN rule on n f32 values of a run (int32 sums have no NaN to mend). */
static inline void cbd_run_canon(const cbd_run *R, float *v, int64_t n) {
    if (!R->word_channels) gradref__cbd_canon(R->p, v, n);
}

typedef struct cbd_phase {
    const cbd_run *R;
    int64_t n, g, ic0;
    int64_t Q[3]; /* sub-grid sizes */
    int64_t ntaps;
    const int64_t *tap; /* per phase tap: stored tap index, then the 3 shifts */
    int64_t j_base;     /* first sub-grid pixel of the current GEMM call */
    int64_t index;      /* the phase's index (its taps) */
} cbd_phase;

/* Zeros still to write into an item's grad slab (strided convolutions): a slice after each
 * tile of the first phase that has taps, so that the stores drain while the tiles compute (a
 * memset of the whole slab ahead of them leaves the core waiting on its stores), and the rest
 * before anything is scattered into the slab. */
typedef struct cbd_zeros {
    char *at;
    size_t left, slice;
} cbd_zeros;

static inline void zeros_some(cbd_zeros *z) {
    if (z == NULL || z->left == 0) return;
    const size_t n = z->left < z->slice ? z->left : z->slice;
    memset(z->at, 0, n);
    z->at += n, z->left -= n;
}

static inline void zeros_rest(cbd_zeros *z) {
    if (z == NULL || z->left == 0) return;
    memset(z->at, 0, z->left);
    z->left = 0;
}

/* A B panel's columns (sub-grid pixels j_start .. j_start + cols of a sub-grid of sizes Q) as
 * runs along the sub-grid's last dim, the same for every k: run r starts at column at[r], is
 * len[r] long and begins at sub-grid position q[r]. Returns the number of runs (at most
 * GRADREF__CBD_MAX_RUNS for cols <= 32). */
#define GRADREF__CBD_MAX_RUNS 64
typedef struct gradref__cbd_runs {
    int64_t at[GRADREF__CBD_MAX_RUNS], len[GRADREF__CBD_MAX_RUNS], q[GRADREF__CBD_MAX_RUNS][3];
    int64_t count;
} gradref__cbd_runs;

static inline void gradref__cbd_column_runs(const int64_t *Q, int64_t j_start, int64_t cols,
                                            gradref__cbd_runs *u) {
    const int64_t W = Q[2];
    int64_t q2 = j_start % W, q1 = j_start / W % Q[1], q0 = j_start / (W * Q[1]);
    u->count = 0;
    for (int64_t j = 0; j < cols;) {
        const int64_t len = W - q2 < cols - j ? W - q2 : cols - j, r = u->count++;
        u->at[r] = j, u->len[r] = len;
        u->q[r][0] = q0, u->q[r][1] = q1, u->q[r][2] = q2;
        j += len;
        q2 += len;
        if (q2 == W) {
            q2 = 0;
            if (++q1 == Q[1]) q1 = 0, q0++;
        }
    }
}

/* A run of len sub-grid pixels at diff position (o0, o1, o2 ..): whether its diff row exists,
 * and [lo, hi), the part of the run inside that row (the rest reads as zeros). */
static inline int gradref__cbd_run_inside(const gradref__cbd_plan *p, int64_t o0, int64_t o1,
                                          int64_t o2, int64_t len, int64_t *lo, int64_t *hi) {
    *lo = *hi = 0;
    if (o0 < 0 || o0 >= p->O[0] || o1 < 0 || o1 >= p->O[1]) return 0;
    *lo = o2 < 0 ? -o2 : 0;
    *hi = p->O[2] - o2 < len ? p->O[2] - o2 : len;
    if (*lo > len) *lo = len;
    if (*hi < *lo) *hi = *lo;
    return 1;
}

/* Writes the n diff values of output channel oc from diff position o (o[0], o[1], o[2]) on, as
 * f32, to out: a row source of cbd_pack_b. */
typedef void (*cbd_diff_row)(const void *src, int64_t oc, const int64_t *o, int64_t n, float *out);

/* The implicit im2col of a stride phase as the GEMM's B packer lays it out: for each k in
 * [k0, k0 + kc) (k = (tap, oc), ocs channels a tap, from oc0), panels of `width` columns of the
 * sub-grid pixels j_start .. j_start + count (sub-grid sizes Q), each k's row the diff values
 * the tap shifts them to, zero outside diff. One body for both row sources: the workspace
 * path's f32 planes and the stack path's caller diff (its dtype and strides), each passed as
 * a constant function the compiler inlines. */
static inline __attribute__((always_inline)) void
cbd_pack_b(const gradref__cbd_plan *p, const int64_t *Q, const int64_t *tap, int64_t ocs,
           int64_t oc0, int64_t j_start, int64_t k0, int64_t kc, int64_t count, int width,
           float *dst, cbd_diff_row row_of, const void *src) {
    for (int64_t jp = 0; jp < count; jp += width) {
        const int64_t cols = count - jp < width ? count - jp : width;
        gradref__cbd_runs u; /* the panel's columns as runs along the last sub-grid dim */
        gradref__cbd_column_runs(Q, j_start + jp, cols, &u);
        for (int64_t k = k0; k < k0 + kc; k++, dst += width) {
            const int64_t *tp = tap + 4 * (k / ocs), oc = oc0 + k % ocs;
            for (int64_t r = 0; r < u.count; r++) {
                float *out = dst + u.at[r];
                const int64_t len = u.len[r];
                const int64_t o[3] = {u.q[r][0] + tp[1], u.q[r][1] + tp[2], u.q[r][2] + tp[3]};
                int64_t lo, hi; /* [lo, hi): the part inside diff */
                gradref__cbd_run_inside(p, o[0], o[1], o[2], len, &lo, &hi);
                for (int64_t x = 0; x < lo; x++)
                    out[x] = 0.0f;
                if (hi > lo) {
                    const int64_t from[3] = {o[0], o[1], o[2] + lo};
                    row_of(src, oc, from, hi - lo, out + lo);
                }
                for (int64_t x = hi; x < len; x++)
                    out[x] = 0.0f;
            }
            for (int64_t j = cols; j < width; j++)
                dst[j] = 0.0f;
        }
    }
}

#endif
