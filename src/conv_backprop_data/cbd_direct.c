/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data's "direct" strategy, the first that needs no workspace (for a caller
 * workspace too small for one thread's share of the fast path, as MegEngine's workspace limit
 * 0): the fast path's kernels with stack
 * buffers only. Work items are (image, group, block of up to two GEMM panels of input
 * channels), each stride phase in turn. A phase whose sub-grid has diff's last two sizes runs
 * the direct tiles (phase_tiles): the item's filter panels packed on the stack, diff read in
 * place (F32, dense pixels) or through a window converted per tile, grad written in place or
 * the tile's values stored. Other phases run the GEMMs (phase_gemm): per chunk of CHUNK
 * sub-grid pixels, gradref__sgemm_small computes the chunk from the filter and diff as they are
 * (any dtype of the F32 path, any strides: its packers read and widen them), and the chunk is
 * stored into grad. Each grad element is the reference's chain over (tap in ascending diff
 * position, oc), with the zero terms of taps outside diff exact for a finite filter
 * (cbd_fast.c): the same bits. I8 runs a chunk's chains in parts of the output channels
 * (cbd_int8.c), each exact in f32, added into int32 sums on the stack. The buffers fit a
 * small thread stack (tests/test_stack.c): at most about 44 KiB a thread. */
#include <stddef.h>

#include "cbd_direct.h"
#include "cbd_int8.h"
#include "cbd_phases.h"
#include "cbd_tiles.h"
#include "common/convert_array.h"
#include "common/exec.h"
#include "common/gemm.h"
#include "common/nan.h"

enum {
    CHUNK = 128,        /* sub-grid pixels a GEMM call computes (I8: half, beside its sums) */
    MAX_TAPS = 256,     /* taps of a phase the stack holds */
    MAX_BLOCK = 2 * 14, /* channels of an item: two panels at the widest level */
    GEMM_KC = 32,       /* the GEMMs' K slices */
    GEMM_NC = 64,       /* the GEMMs' B panels packed at a time (8 KiB) */
    TILE_TAPS = 64,     /* the direct tiles' taps on the stack */
    /* the tiles' filter panels, window of diff and a tile's values (32 KiB): an AVX-512 panel
     * of 64 output channels x 3x3 taps read in place */
    TILE_FLOATS = 8192
};

/* A GEMM chunk's f32 values, and for I8 (half the pixels) its int32 sums beside them. */
typedef union chunk_buffer {
    float values[MAX_BLOCK * CHUNK];
    int32_t sums[MAX_BLOCK * CHUNK];
} chunk_buffer;

typedef struct direct {
    const gradref__cbd_plan *p;
    const gradref__cbd_kernels *k;
    const gradref__array_kernels *ak; /* F16 conversions */
    int64_t n, g, ic0;
    int64_t oc0, ocs;   /* the output channels of the GEMM's k = (phase tap, oc - oc0) */
    const int64_t *tap; /* the phase's taps (gradref__cbd_phase_taps) */
    int64_t Q[3];       /* the phase's sub-grid sizes */
    int64_t j0;         /* the chunk's (or tile's) first sub-grid pixel */
    int wc;      /* I8 tiles by words of wc output channels (k->word_tile32), or 0: f32 tiles */
    int by_rows; /* the window filled one diff row of taps at a time (phase_tiles) */
} direct;

/* The tiles' channels per tap (output channels, or words of them) and panel rows. */
static int64_t tile_channels(const direct *d) {
    return d->wc ? (d->p->OCpg + d->wc - 1) / d->wc : d->p->OCpg;
}

static int64_t tile_mr(const direct *d) {
    return d->wc ? d->k->word_rows : d->k->tile_rows;
}

/* A (rows: input channels ic0 + first.., k = (phase tap, oc)) in panels of `width` rows. */
static void pack_a_filter(const void *ctx, int64_t k0, int64_t kc, int64_t first, int64_t count,
                          int width, float *dst) {
    const direct *d = ctx;
    const gradref__cbd_plan *p = d->p;
    for (int64_t i0 = 0; i0 < count; i0 += width) {
        const int64_t rows = count - i0 < width ? count - i0 : width;
        for (int64_t k = k0; k < k0 + kc; k++, dst += width) {
            const int64_t t = d->tap[4 * (k / d->ocs)], oc = d->oc0 + k % d->ocs;
            const int64_t k0i = t / (p->K[1] * p->K[2]), k1i = t / p->K[2] % p->K[1],
                          k2i = t % p->K[2];
            const int64_t at = d->g * p->fs[0] + oc * p->fs[1] + (d->ic0 + first + i0) * p->fs[2] +
                               k0i * p->fs[3] + k1i * p->fs[4] + k2i * p->fs[5];
            int64_t r = 0;
            for (; r < rows; r++)
                dst[r] = filter_value(p, at + r * p->fs[2]);
            for (; r < width; r++)
                dst[r] = 0.0f;
        }
    }
}

/* n elements of diff from e on, stride ds5, widened to f32 */
static void diff_run(const direct *d, int64_t e, int64_t n, float *out) {
    const gradref__cbd_plan *p = d->p;
    const int64_t s = p->ds[5];
    if (p->in_dtype == GRADREF_I8) {
        const int8_t *src = (const int8_t *)(const void *)p->diff + e;
        for (int64_t x = 0; x < n; x++)
            out[x] = (float)src[x * s];
        return;
    }
    if (p->in_dtype == GRADREF_F32) {
        const float *src = (const float *)(const void *)p->diff + e;
        if (s == 1)
            memcpy(out, src, (size_t)n * sizeof *out);
        else
            for (int64_t x = 0; x < n; x++)
                out[x] = src[x * s];
        return;
    }
    if (s == 1) { /* F16 (F16C, NEON) or BF16 along the row */
        gradref__half_to_f32_array(d->ak, p->in_dtype, (const uint16_t *)(const void *)p->diff + e,
                                   out, (size_t)n);
        return;
    }
    for (int64_t x = 0; x < n; x++)
        out[x] = gradref__load_f32(p->in_dtype, p->diff, e + x * s);
}

/* cbd_pack_b's row source on the caller's diff, in its dtype and strides (diff_run). */
static inline void caller_row(const void *src, int64_t oc, const int64_t *o, int64_t n,
                              float *out) {
    const direct *d = src;
    const gradref__cbd_plan *p = d->p;
    diff_run(d,
             d->n * p->ds[0] + d->g * p->ds[1] + oc * p->ds[2] + o[0] * p->ds[3] + o[1] * p->ds[4] +
                 o[2] * p->ds[5],
             n, out);
}

/* B (k = (phase tap, oc); columns: the chunk's sub-grid pixels) from diff shifted by the tap,
 * zero outside diff: the implicit im2col. */
static void pack_b_diff(const void *ctx, int64_t k0, int64_t kc, int64_t first, int64_t count,
                        int width, float *dst) {
    const direct *d = ctx;
    cbd_pack_b(d->p, d->Q, d->tap, d->ocs, d->oc0, d->j0 + first, k0, kc, count, width, dst,
               caller_row, d);
}

/* n values to F16 or BF16 (grad's dtype), `step` elements apart, rounded as convert.h does. */
static void store_16(const direct *d, const float *v, uint16_t *out, int64_t step, int64_t n) {
    const int f16 = d->p->out_dtype == GRADREF_F16;
    if (step == 1)
        gradref__f32_to_half_array(d->ak, d->p->out_dtype, v, out, (size_t)n);
    else
        for (int64_t y = 0; y < n; y++)
            out[y * step] = f16 ? gradref__f32_to_f16(v[y]) : gradref__f32_to_bf16(v[y]);
}

/* The chunk's values (M rows of `len` pixels) into grad at phase ph, in grad's dtype: f32
 * values, or I8's int32 sums (sums not NULL). */
static void store_chunk(const direct *d, const int64_t *ph, const float *chunk, const int32_t *sums,
                        int64_t M, int64_t len) {
    const gradref__cbd_plan *p = d->p;
    for (int64_t m = 0; m < M; m++) {
        char *slab =
            p->grad +
            (size_t)(d->n * p->gs[0] + d->g * p->gs[1] + (d->ic0 + m) * p->gs[2]) * p->out_size;
        int64_t j = d->j0;
        int64_t q2 = j % d->Q[2], q1 = j / d->Q[2] % d->Q[1], q0 = j / (d->Q[2] * d->Q[1]);
        for (int64_t x = 0; x < len;) { /* a run along the sub-grid's last dim at a time */
            const int64_t run = d->Q[2] - q2 < len - x ? d->Q[2] - q2 : len - x;
            const int64_t i0 = q0 * p->stride[0] + ph[0], i1 = q1 * p->stride[1] + ph[1];
            const int64_t step = p->stride[2] * p->gs[5];
            char *e = slab + (size_t)(i0 * p->gs[3] + i1 * p->gs[4] +
                                      (q2 * p->stride[2] + ph[2]) * p->gs[5]) *
                                 p->out_size;
            const float *v = chunk + m * len + x;
            if (sums)
                gradref__cbd_store_sums(p, d->k, sums + m * len + x, e, step, run);
            else if (p->out_dtype == GRADREF_F32 && step == 1)
                memcpy(e, v, (size_t)run * sizeof *v);
            else if (p->out_dtype == GRADREF_F32)
                for (int64_t y = 0; y < run; y++)
                    ((float *)(void *)e)[y * step] = v[y];
            else
                store_16(d, v, (uint16_t *)(void *)e, step, run);
            x += run;
            q2 += run;
            if (q2 == d->Q[2]) {
                q2 = 0;
                if (++q1 == d->Q[1]) q1 = 0, q0++;
            }
        }
    }
}

/* +0 into channels [ic0, ic0 + M) of image n, group g (the elements no tap reaches keep it). */
static void zero_slabs(const gradref__cbd_plan *p, int64_t n, int64_t g, int64_t ic0, int64_t M) {
    const size_t size = p->out_size;
    for (int64_t m = 0; m < M; m++) {
        char *slab = p->grad + (size_t)(n * p->gs[0] + g * p->gs[1] + (ic0 + m) * p->gs[2]) * size;
        if (dense_pixels(p->gs, p->I)) {
            memset(slab, 0, (size_t)pixels(p->I) * size);
            continue;
        }
        for (int64_t i0 = 0; i0 < p->I[0]; i0++)
            for (int64_t i1 = 0; i1 < p->I[1]; i1++) {
                char *row = slab + (size_t)(i0 * p->gs[3] + i1 * p->gs[4]) * size;
                if (p->gs[5] == 1)
                    memset(row, 0, (size_t)p->I[2] * size);
                else
                    for (int64_t i2 = 0; i2 < p->I[2]; i2++)
                        memset(row + (size_t)(i2 * p->gs[5]) * size, 0, size);
            }
    }
}

typedef struct direct_call {
    const gradref__cbd_plan *p;
    const gradref__cbd_kernels *k;
    int64_t part;  /* I8: output channels per part (gradref__cbd_int8_part) */
    int64_t block; /* an item's channels */
    int tiles;     /* the direct tiles may run (tiles_may_run) */
    int wc;        /* I8 tiles by words (direct's wc) */
} direct_call;

/* One chunk of a phase's sub-grid (a->N pixels from d->j0) into grad; I8 a part of the output
 * channels at a time, the parts' exact f32 sums added into int32 sums. */
static void chunk_to_grad(direct *d, const direct_call *call, const int64_t *ph,
                          gradref__sgemm_args *a, float *work, chunk_buffer *buffer) {
    const gradref__cbd_plan *p = d->p;
    float *chunk = buffer->values;
    a->c = chunk;
    a->c_rs = a->N;
    if (p->in_dtype != GRADREF_I8) {
        gradref__sgemm_small(a, p->max_isa, work, GEMM_KC, GEMM_NC);
        gradref__cbd_canon(p, chunk, a->M * a->N);
        store_chunk(d, ph, chunk, NULL, a->M, a->N);
        return;
    }
    int32_t *sums = buffer->sums + MAX_BLOCK * CHUNK / 2;
    const int64_t taps = a->K / p->OCpg;
    for (d->oc0 = 0; d->oc0 < p->OCpg; d->oc0 += call->part) {
        d->ocs = p->OCpg - d->oc0 < call->part ? p->OCpg - d->oc0 : call->part;
        a->K = taps * d->ocs;
        gradref__sgemm_small(a, p->max_isa, work, GEMM_KC, GEMM_NC);
        gradref__cbd_fold_sums(chunk, a->M * a->N, d->oc0 == 0, sums);
    }
    d->oc0 = 0, d->ocs = p->OCpg, a->K = taps * p->OCpg;
    store_chunk(d, ph, chunk, sums, a->M, a->N);
}

/* Phase ph of an item (d: its image, group and channels; d->Q the phase's sub-grid, ntaps
 * taps in d->tap) by the stack's GEMMs, a chunk of sub-grid pixels at a time. */
__attribute__((noinline)) static void phase_gemm(const direct_call *call, direct *d,
                                                 const int64_t *ph, int64_t M, int64_t ntaps) {
    const gradref__cbd_plan *p = call->p;
    __attribute__((aligned(64))) float work[GRADREF__SGEMM_SMALL_FLOATS(GEMM_KC, GEMM_NC)];
    __attribute__((aligned(64))) chunk_buffer chunk;
    const int64_t N = pixels(d->Q), step = p->in_dtype == GRADREF_I8 ? CHUNK / 2 : CHUNK;
    /* stride 1 into an F32 grad whose pixels are dense: the GEMM writes grad itself, all the
     * sub-grid's pixels in one call (each K slice's filter rows packed once) */
    const int in_place =
        unit_strides(p) && p->out_dtype == GRADREF_F32 && dense_pixels(p->gs, p->I);
    gradref__sgemm_args a;
    memset(&a, 0, sizeof a);
    a.M = M;
    a.K = ntaps * p->OCpg;
    a.pack_a = pack_a_filter;
    a.pack_b = pack_b_diff;
    a.pack_a_ctx = a.pack_b_ctx = d;
    a.c_cs = 1;
    if (in_place) {
        d->j0 = 0;
        a.N = N;
        a.c = (float *)(void *)p->grad + d->n * p->gs[0] + d->g * p->gs[1] + d->ic0 * p->gs[2];
        a.c_rs = p->gs[2];
        gradref__sgemm_small(&a, p->max_isa, work, GEMM_KC, GEMM_NC);
        for (int64_t m = 0; m < M; m++)
            gradref__cbd_canon(p, a.c + m * a.c_rs, a.N);
        return;
    }
    for (d->j0 = 0; d->j0 < N; d->j0 += step) {
        a.N = N - d->j0 < step ? N - d->j0 : step;
        chunk_to_grad(d, call, ph, &a, work, &chunk);
    }
}

/* Whether the path takes plan p: the F32 path's dtypes at the default precision or I8 (one
 * answer at any precision), few enough taps for the stack, and a finite filter (its zero terms
 * are exact only then). */
int gradref__cbd_direct_fits(const gradref__cbd_plan *p) {
    const int32_t dt = p->in_dtype;
    if (taps_of(p) > MAX_TAPS) return 0;
    if (dt == GRADREF_I8) return 1;
    if ((dt != GRADREF_F32 && dt != GRADREF_F16 && dt != GRADREF_BF16) ||
        p->precision != GRADREF_PRECISION_DEFAULT)
        return 0;
    for (int64_t g = 0; g < p->G; g++)
        for (int64_t ic = 0; ic < p->ICpg; ic++)
            for (int64_t t = 0; t < taps_of(p); t++)
                for (int64_t oc = 0; oc < p->OCpg; oc++)
                    if (!isfinite(filter_value(p, filter_offset(p, g, ic, t) + oc * p->fs[1])))
                        return 0;
    return 1;
}

/* Tap t's flat offset in diff from the tile's pixel (grad's last two sizes are diff's); *lo
 * and *hi: the lowest and highest with 0. */
static void tap_offsets(const gradref__cbd_plan *p, const int64_t *tap, int64_t ntaps,
                        int64_t *offset, int64_t *lo, int64_t *hi) {
    *lo = *hi = 0;
    for (int64_t t = 0; t < ntaps; t++) {
        const int64_t *tp = tap + 4 * t;
        offset[t] = (tp[1] * p->O[1] + tp[2]) * p->O[2] + tp[3];
        if (offset[t] < *lo) *lo = offset[t];
        if (offset[t] > *hi) *hi = offset[t];
    }
}

/* Whether the tiles read the caller's diff as it is (F32 with dense pixels), or a window of
 * diff converted per tile; and whether they also write grad in place (stride 1, F32 grad with
 * dense pixels), through the fast path's tile loop. */
static int reads_in_place(const gradref__cbd_plan *p) {
    return p->in_dtype == GRADREF_F32 && dense_pixels(p->ds, p->O);
}

static int tiles_in_place(const gradref__cbd_plan *p) {
    return reads_in_place(p) && unit_strides(p) && p->out_dtype == GRADREF_F32 &&
           dense_pixels(p->gs, p->I);
}

/* [*lo, *hi): the elements of the caller's diff, from its start (F32). */
static void diff_extent(const gradref__cbd_plan *p, int64_t *lo, int64_t *hi) {
    const int64_t images = (p->N - 1) * p->ds[0], channels = (p->G * p->OCpg - 1) * p->ds[2];
    *lo = (images < 0 ? images : 0) + (channels < 0 ? channels : 0);
    *hi = (images > 0 ? images : 0) + (channels > 0 ? channels : 0) + pixels(p->O);
}

/* Whether the direct tiles may run on the problem: the kernel table has them, offsets fit
 * int32, and I8 runs by words (wc) or in one part (a phase then runs them when its sub-grid
 * has diff's last two sizes and the stack holds its panels, phase_tiles). */
static int tiles_may_run(const gradref__cbd_plan *p, const gradref__cbd_kernels *k, int64_t part,
                         int wc) {
    const int fit = pixels(p->O) < (INT64_C(1) << 30) && pixels(p->I) < (INT64_C(1) << 30);
    if (wc) return fit;
    return k->tile32 && k->tile_rows == gradref__sgemm_mr(p->max_isa) && fit &&
           (p->in_dtype != GRADREF_I8 || part == p->OCpg);
}

/* What the tiles keep per thread, on the stack: the masks of STACK_TILE_GROUP tiles at a time
 * (the fast path's GRADREF__CBD_TILE_GROUP would take 16 KiB). */
enum { STACK_TILE_GROUP = 4 };
typedef struct tiles_stack {
    int64_t offset[2 * TILE_TAPS];
    int64_t key[3];
    uint16_t masks[(STACK_TILE_GROUP + 1) * 2 * TILE_TAPS];
} tiles_stack;

/* Whether fill_window widens F16 or BF16 diff by the array kernels (not by words). */
static int half_window(const direct *d) {
    const int32_t dt = d->p->in_dtype;
    return !d->wc && (dt == GRADREF_F16 || dt == GRADREF_BF16);
}

/* A run of n pixels from e of F16 or BF16 diff whose channels are contiguous (NHWC) into the
 * window (channel oc's pixels at window + oc * span): each pixel's channels widened by one call
 * a block of 64, then stored a channel row apart (their conversions one at a time took most of
 * the call). */
static void half_pixels(const direct *d, int64_t e, int64_t n, int64_t span, float *window) {
    const gradref__cbd_plan *p = d->p;
    const uint16_t *diff = (const uint16_t *)(const void *)p->diff;
    float pixel[64];
    for (int64_t j = 0; j < n; j++)
        for (int64_t oc = 0; oc < p->OCpg; oc += 64) {
            const int64_t c1 = p->OCpg - oc < 64 ? p->OCpg - oc : 64;
            gradref__half_to_f32_array(d->ak, p->in_dtype, diff + e + j * p->ds[5] + oc, pixel,
                                       (size_t)c1);
            for (int64_t c = 0; c < c1; c++)
                window[(oc + c) * span + j] = pixel[c];
        }
}

/* Diff's flat positions [start, start + span) of every channel of the item's image and group,
 * as f32 (+0 outside diff), channel oc at window + oc * span; or, by words, word j's at
 * window + j * span. A run along diff's last dim at a time, for every channel. */
static void fill_window(const direct *d, int64_t start, int64_t span, float *window) {
    const gradref__cbd_plan *p = d->p;
    const int64_t P = pixels(p->O), img = d->n * p->ds[0] + d->g * p->ds[1];
    const int step = d->wc ? d->wc : 1;
    /* dense pixels of unit stride: a run goes on past a row's end, as long as diff */
    const int flat = dense_pixels(p->ds, p->O) && p->ds[5] == 1;
    for (int64_t x = 0; x < span;) {
        const int64_t pos = start + x;
        int64_t run = pos < 0 ? -pos : span - x;
        if (run > span - x) run = span - x;
        if (pos < 0 || pos >= P) {
            for (int64_t oc = 0; oc < p->OCpg; oc += step)
                memset(window + oc / step * span + x, 0, (size_t)run * sizeof *window);
            x += run;
            continue;
        }
        const int64_t o2 = pos % p->O[2], o1 = pos / p->O[2] % p->O[1],
                      o0 = pos / (p->O[2] * p->O[1]);
        const int64_t room = flat ? P - pos : p->O[2] - o2;
        run = room < run ? room : run;
        const int64_t e = img + o0 * p->ds[3] + o1 * p->ds[4] + o2 * p->ds[5];
        if (half_window(d) && p->ds[5] == 1) { /* every channel's run in one call */
            gradref__half_rows_to_f32(d->ak, p->in_dtype,
                                      (const uint16_t *)(const void *)p->diff + e, p->ds[2],
                                      window + x, span, (size_t)run, (size_t)p->OCpg);
            x += run;
            continue;
        }
        if (half_window(d) && p->ds[2] == 1) { /* channels-last: a pixel at a time */
            half_pixels(d, e, run, span, window + x);
            x += run;
            continue;
        }
        for (int64_t oc = 0; oc < p->OCpg; oc += step) {
            float *out = window + oc / step * span + x;
            if (d->wc)
                gradref__cbd_words_run(p, d->wc, e + oc * p->ds[2], p->OCpg - oc, run, p->ds[5],
                                       (int32_t *)(void *)out);
            else
                diff_run(d, e + oc * p->ds[2], run, out);
        }
        x += run;
    }
}

/* The taps [first, first + count) of a phase's list that a tiles pass takes: all of them, or
 * (into grad in place, where the chains go on between passes) a slice. */
typedef struct tap_run {
    int64_t first, count;
} tap_run;

/* phase_tiles' buffer: the panels, the window, then a tile's values (f32) and I8 sums. */
typedef union tile_buffer {
    float values[TILE_FLOATS];
    int32_t sums[TILE_FLOATS];
} tile_buffer;

/* One call of the tiles on every panel: its taps (list, offsets, masks) and their chains. */
typedef struct tile_call {
    const int64_t *tap; /* 4 entries a tap (gradref__cbd_phase_taps) */
    const int64_t *offset;
    const uint16_t *masks;
    int64_t ntaps, cols;
    int inside, load;
    const float *a;       /* the first panel's first k of these taps */
    int64_t panel_stride; /* floats from one panel to the next */
    float *c;
    int64_t ldc;
} tile_call;

/* The panels of rows [d->ic0, + M) (pr rows each) on the image's taps, by the f32 tiles or (I8
 * by words) the word tiles, whose int32 sums land in c's floats. */
static unsigned tile_panels(const direct *d, const tile_call *t, const float *image,
                            int64_t channel_stride, int64_t M, int64_t pr) {
    unsigned hit = 0;
    for (int64_t i0 = 0; i0 < M; i0 += pr)
        hit |= gradref__cbd_run_tile(
            d->k, d->wc, image, channel_stride, tile_channels(d), t->offset, t->masks, t->ntaps,
            t->cols, t->inside, t->a + i0 / pr * t->panel_stride, (int)(M - i0 < pr ? M - i0 : pr),
            t->c + i0 * t->ldc, t->ldc, t->load);
    return hit;
}

/* The run of taps from u on (of t's) that share their diff row (one kernel row: consecutive in
 * a phase's list), its offsets' range in *lo, *hi; returns its length. */
static int64_t row_of_taps(const tile_call *t, int64_t u, int64_t *lo, int64_t *hi) {
    int64_t n = 1;
    *lo = *hi = t->offset[u];
    for (; u + n < t->ntaps && t->tap[4 * (u + n) + 1] == t->tap[4 * u + 1] &&
           t->tap[4 * (u + n) + 2] == t->tap[4 * u + 2];
         n++) {
        if (t->offset[u + n] < *lo) *lo = t->offset[u + n];
        if (t->offset[u + n] > *hi) *hi = t->offset[u + n];
    }
    return n;
}

/* The widest window a row of taps needs (32 pixels past its offsets' range), per channel. */
static int64_t row_span(const tile_call *t) {
    int64_t most = 0;
    for (int64_t u = 0; u < t->ntaps;) {
        int64_t lo, hi;
        u += row_of_taps(t, u, &lo, &hi);
        most = hi - lo + 32 > most ? hi - lo + 32 : most;
    }
    return most;
}

/* t's taps a diff row at a time: each row's window filled, then the panels on its taps, the
 * chains going on in c from one row to the next (the same order: taps ascending, oc inside). */
static unsigned tile_rows_of_taps(const direct *d, const tile_call *t, int64_t j0, float *window,
                                  int64_t M, int64_t pr) {
    tile_call r = *t;
    unsigned hit = 0;
    for (int64_t u = 0; u < t->ntaps;) {
        int64_t lo, hi;
        const int64_t n = row_of_taps(t, u, &lo, &hi);
        fill_window(d, j0 + lo, hi - lo + 32, window);
        r.tap = t->tap + 4 * u, r.offset = t->offset + u, r.masks = t->masks + 2 * u, r.ntaps = n;
        r.a = t->a + u * tile_channels(d) * tile_mr(d), r.load = t->load || u > 0;
        hit |= tile_panels(d, &r, window - lo, hi - lo + 32, M, pr);
        u += n;
    }
    return hit;
}

/* Rows [d->ic0, d->ic0 + M) of phase ph by the tiles over the caller's diff (reads_in_place)
 * or a window of it (the tap offsets' range [lo, hi] and 32 floats a channel) converted per
 * tile, into grad in place (stride 1, F32 grad with dense pixels) or through a tile's values
 * stored in grad's dtype and layout (I8: the exact sums as int32), M x 32 of each. */
__attribute__((noinline)) static void tiles_windowed(direct *d, const int64_t *ph,
                                                     const float *panels, int64_t M, int64_t pr,
                                                     const tap_run *taps, tiles_stack *st,
                                                     int64_t lo, int64_t hi, float *window,
                                                     float *values, int32_t *sums) {
    const gradref__cbd_plan *p = d->p;
    const gradref__cbd_kernels *k = d->k;
    const int64_t ntaps = taps->count, K = ntaps * tile_channels(d), mr = tile_mr(d),
                  N = pixels(d->Q);
    const int in_place =
        unit_strides(p) && p->out_dtype == GRADREF_F32 && dense_pixels(p->gs, p->I);
    float *slab = (float *)(void *)p->grad + d->n * p->gs[0] + d->g * p->gs[1] + d->ic0 * p->gs[2];
    const int64_t span = hi - lo + 32, image_at = d->n * p->ds[0] + d->g * p->ds[1],
                  channels = (p->OCpg - 1) * p->ds[2];
    int64_t first, last; /* the caller's diff */
    diff_extent(p, &first, &last);
    for (int64_t j0 = 0; j0 < N; j0 += 32) {
        const int64_t cols = N - j0 < 32 ? N - j0 : 32;
        k->tile32_masks(d->tap + 4 * taps->first, ntaps, d->Q, p->O, j0, cols, st->masks);
        float *c = in_place ? slab + j0 : values;
        const int64_t ldc = in_place ? p->gs[2] : cols;
        tile_call t = {d->tap + 4 * taps->first,
                       st->offset + taps->first,
                       st->masks,
                       ntaps,
                       cols,
                       1,
                       taps->first > 0,
                       panels,
                       K * mr,
                       c,
                       ldc};
        unsigned hit; /* a value stored is a zero or a NaN: the NaN rule has work */
        if (reads_in_place(p)) {
            t.inside = image_at + j0 + lo + (channels < 0 ? channels : 0) >= first &&
                       image_at + j0 + hi + 32 + (channels > 0 ? channels : 0) <= last;
            hit = tile_panels(d, &t, (const float *)(const void *)p->diff + image_at + j0, p->ds[2],
                              M, pr);
        } else if (d->by_rows) {
            hit = tile_rows_of_taps(d, &t, j0, window, M, pr);
        } else { /* the window holds every read: inside */
            fill_window(d, j0 + lo, span, window);
            hit = tile_panels(d, &t, window - lo, span, M, pr);
        }
        if (in_place) {
            for (int64_t m = 0; m < M && hit; m++)
                gradref__cbd_canon(p, c + m * ldc, cols);
            continue;
        }
        d->j0 = j0;
        if (d->wc) {
            store_chunk(d, ph, values, (const int32_t *)(const void *)values, M, cols);
        } else if (p->in_dtype == GRADREF_I8) {
            gradref__cbd_fold_sums(values, M * cols, 1, sums);
            store_chunk(d, ph, values, sums, M, cols);
        } else {
            if (hit) gradref__cbd_canon(p, values, M * cols);
            store_chunk(d, ph, values, NULL, M, cols);
        }
    }
}

/* Rows [d->ic0, d->ic0 + M) of stride 1 by the fast path's direct tiles from the caller's
 * diff straight into grad (tiles_in_place). */
__attribute__((noinline)) static void tiles_in_grad(const direct *d, const float *panels, int64_t M,
                                                    int64_t pr, int64_t ntaps, tiles_stack *st) {
    const gradref__cbd_plan *p = d->p;
    cbd_scratch S;
    memset(&S, 0, sizeof S);
    S.offsets = st->offset, S.masks = st->masks, S.masks_key = st->key;
    S.tile_group = STACK_TILE_GROUP; /* no packed tile (S.tile NULL) */
    st->key[0] = -1;                 /* no masks yet */
    cbd_run R;
    memset(&R, 0, sizeof R);
    R.p = p, R.k = d->k, R.max_isa = p->max_isa, R.mr = gradref__sgemm_mr(p->max_isa), R.pr = pr;
    R.ocpg = p->OCpg;
    R.diff = (const float *)(const void *)p->diff, R.dn = p->ds[0], R.dc = p->ds[2];
    diff_extent(p, &R.span_lo, &R.span_hi);
    R.prefetch_tiles = gradref__cbd_diff_past_l2(p);
    cbd_phase f;
    memset(&f, 0, sizeof f);
    f.R = &R, f.n = d->n, f.g = d->g, f.ic0 = d->ic0, f.tap = d->tap, f.ntaps = ntaps;
    memcpy(f.Q, d->Q, sizeof f.Q);
    float *c = (float *)(void *)p->grad + d->n * p->gs[0] + d->g * p->gs[1] + d->ic0 * p->gs[2];
    if (gradref__cbd_direct_tiles(&R, &f, panels, M, 0, pixels(d->Q), c, p->gs[2], &S, NULL))
        for (int64_t m = 0; m < M; m++)
            gradref__cbd_canon(p, c + m * p->gs[2], pixels(d->Q));
}

/* The panel of rows [d->ic0 + r0, + rows) of the taps `taps` of the phase, as the tiles take
 * it (f32, or words). */
static void pack_panel(const direct *d, int64_t r0, int64_t rows, const tap_run *taps, float *dst) {
    const int64_t *tap = d->tap + 4 * taps->first;
    if (d->wc)
        gradref__cbd_pack_word_panel(d->p, d->wc, d->g, d->ic0 + r0, rows, tap, taps->count,
                                     tile_mr(d), (int32_t *)(void *)dst);
    else
        gradref__cbd_pack_panel(d->p, d->g, d->ic0 + r0, rows, tap, taps->count, tile_mr(d), 0,
                                dst); /* the filter's finiteness is known here */
}

/* Phase ph of an item (d: its image, group and channels; d->Q the phase's sub-grid, ntaps taps
 * in d->tap) by the direct tiles, its panels packed on the stack, both at once or one at a time
 * as the stack holds them with the window; into grad in place, the taps in slices when not
 * even one panel of them all fits. Returns 0, having done nothing, when nothing fits. */
__attribute__((noinline)) static int phase_tiles(direct *d, const int64_t *ph, int64_t M,
                                                 int64_t ntaps) {
    const gradref__cbd_plan *p = d->p;
    __attribute__((aligned(64))) tile_buffer buffer;
    float *floats = buffer.values; /* panels, then the window */
    tiles_stack st;
    int64_t lo, hi;
    tap_offsets(p, d->tap, ntaps, st.offset, &lo, &hi);
    const int in_place = tiles_in_place(p);
    const int64_t channels = tile_channels(d);
    int64_t window = reads_in_place(p) ? 0 : channels * (hi - lo + 32);
    const int64_t mr = tile_mr(d), np = (M + mr - 1) / mr;
    const int64_t pr = (M + np - 1) / np; /* 16 channels: 8 + 8 rows, as the fast path's panels */
    /* a tile's values (and I8 sums) per row of a pass */
    const int64_t per_row = in_place ? 0 : p->in_dtype == GRADREF_I8 && !d->wc ? 64 : 32;
    int64_t at_once = np, slice = ntaps;
    while (at_once > 0 && at_once * (mr * ntaps * channels + pr * per_row) + window > TILE_FLOATS)
        at_once--;
    d->by_rows = 0;
    if (at_once == 0 && window > 0) { /* the window one diff row of taps at a time */
        const tile_call all = {d->tap, st.offset, NULL, ntaps, 0, 0, 0, NULL, 0, NULL, 0};
        window = channels * row_span(&all);
        d->by_rows = mr * ntaps * channels + pr * per_row + window <= TILE_FLOATS;
        at_once = d->by_rows;
    }
    if (at_once == 0 && in_place) {
        at_once = 1;
        slice = TILE_FLOATS / (mr * p->OCpg);
    }
    if (at_once == 0 || slice == 0) return 0;
    const int64_t ic0 = d->ic0;
    for (int64_t pn0 = 0; pn0 < np; pn0 += at_once) {
        const int64_t r0 = pn0 * pr, rows = M - r0 < at_once * pr ? M - r0 : at_once * pr;
        d->ic0 = ic0 + r0;
        for (tap_run taps = {0, slice}; taps.first < ntaps; taps.first += slice) {
            taps.count = ntaps - taps.first < slice ? ntaps - taps.first : slice;
            const int64_t K = taps.count * channels;
            for (int64_t pn = 0; pn * pr < rows; pn++)
                pack_panel(d, pn * pr, rows - pn * pr < pr ? rows - pn * pr : pr, &taps,
                           floats + pn * K * mr);
            if (in_place && slice == ntaps)
                tiles_in_grad(d, floats, rows, pr, ntaps, &st);
            else
                tiles_windowed(d, ph, floats, rows, pr, &taps, &st, lo, hi,
                               floats + at_once * K * mr, floats + at_once * K * mr + window,
                               buffer.sums + at_once * K * mr + window + at_once * pr * 32);
        }
    }
    d->ic0 = ic0;
    return 1;
}

/* One item: every live phase of channels [ic0, ic0 + M) of image n, group g, by the direct
 * tiles where they run, else by the GEMMs. */
static void item(const direct_call *call, int64_t n, int64_t g, int64_t ic0, int64_t M) {
    const gradref__cbd_plan *p = call->p;
    int64_t tap[4 * taps_of(p)]; /* at most MAX_TAPS (gradref__cbd_direct_fits) */
    direct d = {p,         call->k, gradref__array_kernels_for(p->max_isa),
                n,         g,       ic0,
                0,         p->OCpg, tap,
                {0, 0, 0}, 0,       call->wc,
                0};
    if (!unit_strides(p)) zero_slabs(p, n, g, ic0, M);
    int64_t ph[3];
    for (ph[0] = 0; ph[0] < p->stride[0] && ph[0] < p->I[0]; ph[0]++)
        for (ph[1] = 0; ph[1] < p->stride[1] && ph[1] < p->I[1]; ph[1]++)
            for (ph[2] = 0; ph[2] < p->stride[2] && ph[2] < p->I[2]; ph[2]++) {
                const int64_t ntaps = gradref__cbd_phase_taps(p, ph, tap);
                if (ntaps == 0) continue; /* +0 from zero_slabs */
                for (int j = 0; j < 3; j++)
                    d.Q[j] = (p->I[j] - ph[j] - 1) / p->stride[j] + 1;
                const int tiles =
                    call->tiles && ntaps <= TILE_TAPS && d.Q[1] == p->O[1] && d.Q[2] == p->O[2];
                if (!tiles || !phase_tiles(&d, ph, M, ntaps)) phase_gemm(call, &d, ph, M, ntaps);
            }
}

static void items(const void *arg, int64_t begin, int64_t end) {
    const direct_call *call = arg;
    const gradref__cbd_plan *p = call->p;
    const int64_t block = call->block, blocks = (p->ICpg + block - 1) / block;
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / (p->G * blocks), g = it / blocks % p->G, b = it % blocks;
        const int64_t ic0 = b * block, M = p->ICpg - ic0 < block ? p->ICpg - ic0 : block;
        item(call, n, g, ic0, M);
    }
}

/* The most taps a stride phase has: along each dim, the taps k whose k * dilation fall in one
 * residue class of the stride repeat every stride / gcd(stride, dilation). */
static int64_t most_phase_taps(const gradref__cbd_plan *p) {
    int64_t most = 1;
    for (int j = 0; j < 3; j++) {
        int64_t a = p->stride[j], b = p->dil[j];
        while (b != 0) {
            const int64_t t = a % b;
            a = b, b = t;
        }
        const int64_t period = p->stride[j] / a;
        most *= (p->K[j] + period - 1) / period;
    }
    return most;
}

/* The table whose tiles an item runs: k, or its narrower one (AVX-512's: AVX2's 6-row tiles)
 * where k's panels of a phase's taps would leave the stack buffer no room for a row of taps'
 * window and a tile's values, and the narrower ones would. Not into grad in place (its driver
 * takes the GEMM's panel height), which slices the taps instead. */
static const gradref__cbd_kernels *tiles_table(const gradref__cbd_plan *p,
                                               const gradref__cbd_kernels *k, int wc) {
    if (k->narrow == NULL || tiles_in_place(p)) return k;
    const int64_t channels = wc ? (p->OCpg + wc - 1) / wc : p->OCpg;
    const int64_t per_row = channels * most_phase_taps(p);
    const int64_t rows = wc ? k->word_rows : k->tile_rows,
                  narrow = wc ? k->narrow->word_rows : k->narrow->tile_rows;
    const int64_t window =
        reads_in_place(p) ? 0 : channels * ((p->K[2] - 1) * p->dil[2] / p->stride[2] + 32);
    return rows * (per_row + 64) + window > TILE_FLOATS &&
                   narrow * (per_row + 64) + window <= TILE_FLOATS
               ? k->narrow
               : k;
}

void gradref__cbd_direct(const gradref__cbd_plan *p, int64_t part, int threads) {
    direct_call call = {p, gradref__cbd_kernels_for(p->max_isa), part, 0, 0, 0};
    call.wc = p->in_dtype == GRADREF_I8 && call.k->word_tile32 ? call.k->word_channels : 0;
    call.tiles = tiles_may_run(p, call.k, part, call.wc);
    if (call.tiles) call.k = tiles_table(p, call.k, call.wc);
    /* two panels (at most MAX_BLOCK: the chunk) */
    call.block = 2 * (call.wc      ? call.k->word_rows
                      : call.tiles ? call.k->tile_rows
                                   : gradref__sgemm_mr(p->max_isa));
    if (call.block > MAX_BLOCK) call.block = MAX_BLOCK;
    gradref__parallel_ranges(p->N * p->G * ((p->ICpg + call.block - 1) / call.block), threads,
                             items, &call);
}
