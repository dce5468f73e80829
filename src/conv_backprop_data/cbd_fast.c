/* SPDX-License-Identifier: Apache-2.0 */
/* The fast path for F32 compute (F32, F16, BF16 at the default precision).
 *
 * Stride phases: the grad indices i with i mod stride = ph (per dim) are reached by a fixed set
 * of taps, and through tap k by the diff index o = q + shift(k) where i = q * stride + ph. So
 * each phase is one GEMM over its sub-grid of grad pixels (no zero insertion):
 *
 *   grad[ic, q] = sum over (tap k of the phase, oc) of W[oc, ic, k] * diff[oc, q + shift(k)]
 *
 * with K = taps x OC/G in the reference's order (taps in ascending diff position, oc inside).
 * The implicit im2col matrix is packed straight from diff by the GEMM's B packer, zero where
 * q + shift(k) falls outside diff. A zero term is exact for a finite filter value
 * (fma(w, 0, acc) = acc, and acc is never -0), so the path requires a finite filter; a filter
 * holding Inf or NaN runs the reference loop, which skips those taps.
 *
 * Depthwise convolutions with stride 1 use direct row kernels (cbd_kernels.c, cbd_avx2.c,
 * cbd_avx512.c). Work items are (image, group, input-channel block); each writes only its own grad
 * channels, so the bits do not depend on the thread count. F64, I8 and GRADREF_PRECISION_HIGH run
 * the reference loop over the same items. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cbd_internal.h"
#include "cbd_simd.h"
#include "common/copy.h"
#include "common/convert.h"
#include "common/gemm.h"
#include "common/exec.h"
#include "common/internal.h"
#include "common/nan.h"

/* direct tiles prefetch the next tile's diff for images whose diff is larger than this */
#define PREFETCH_MIN_BYTES (INT64_C(256) << 10)
/* tiles of 32 pixels whose masks are computed together (direct tiles) */
#define TILE_GROUP 64
/* C chunk per thread for phases that cannot write grad directly, in floats (512 KiB) */
#define CHUNK_FLOATS (INT64_C(128) * 1024)

enum { PATH_REFERENCE, PATH_GEMM, PATH_DEPTHWISE };

typedef struct layout {
    int path, stage_diff, acc_buffer;
    size_t apack, diff32, acc;   /* shared parts */
    size_t panels, phase_off;    /* the filter in GEMM panels per (group, phase), offsets */
    size_t residues;             /* the live phases' offsets along each dim */
    int64_t group_floats;        /* panel floats per group */
    size_t thread0, per_thread;  /* per thread: GEMM work, C chunk, tap list */
    size_t chunk_at, taps_at;    /* offsets inside a thread's part */
    size_t offsets_at, masks_at; /* direct tiles: per tap offsets, per tile and tap masks */
    size_t masks_key_at;         /* direct tiles: the (phase, tiles) the masks are for */
    size_t tile_at;              /* direct tiles: one tile's diff, packed (0: not packed) */
    size_t total;
} layout;

static int64_t taps_of(const gradref__cbd_plan *p) {
    return p->K[0] * p->K[1] * p->K[2];
}

static int64_t pixels(const int64_t *s) {
    return s[0] * s[1] * s[2];
}

/* Spatial dims (strides st[3..5]) dense in their own order: pixel j at offset j. */
static int dense_pixels(const int64_t *st, const int64_t *size) {
    return (size[2] == 1 || st[5] == 1) && (size[1] == 1 || st[4] == size[2]) &&
           (size[0] == 1 || st[3] == size[1] * size[2]);
}

static int unit_strides(const gradref__cbd_plan *p) {
    return p->stride[0] == 1 && p->stride[1] == 1 && p->stride[2] == 1;
}

/* Direct tiles copy a tile's diff into a contiguous block when enough filter panels reuse it
 * (diff read in place is a strided, misaligned stream the prefetchers miss) and the block
 * stays in L2. */
static int pack_tiles(const gradref__cbd_plan *p) {
    return p->ICpg >= 8 * 14 /* eight AVX-512 panels */ &&
           taps_of(p) * p->OCpg * 128 <= (INT64_C(1) << 20);
}

static layout layout_of(const gradref__cbd_plan *p, int32_t precision, int threads) {
    layout L;
    memset(&L, 0, sizeof L);
    const int f32 =
        p->in_dtype == GRADREF_F32 || p->in_dtype == GRADREF_F16 || p->in_dtype == GRADREF_BF16;
    if (!f32 || precision != GRADREF_PRECISION_DEFAULT) {
        L.path = PATH_REFERENCE;
        return L;
    }
    /* depthwise rows keep up to 64 row taps (K0 * K1) on the stack */
    L.path = p->ICpg == 1 && p->OCpg == 1 && unit_strides(p) && p->K[0] * p->K[1] <= 64
                 ? PATH_DEPTHWISE
                 : PATH_GEMM;
    size_t at = 0;
    const size_t in_slabs = (size_t)(p->N * p->G * p->OCpg),
                 out_slabs = (size_t)(p->N * p->G * p->ICpg);
    if (L.path == PATH_DEPTHWISE)
        L.apack = gradref__ws_take(&at, (size_t)(p->G * p->ICpg * taps_of(p) * p->OCpg) * 4);
    if (L.path == PATH_GEMM) { /* every tap is in one phase; panels round IC/G up by < 16 */
        L.group_floats = (p->ICpg + 15) * taps_of(p) * p->OCpg;
        L.panels = gradref__ws_take(&at, (size_t)(p->G * L.group_floats) * 4);
        /* live phases: at most one per tap */
        L.phase_off = gradref__ws_take(&at, (size_t)taps_of(p) * 8);
        L.residues = gradref__ws_take(&at, (size_t)(p->K[0] + p->K[1] + p->K[2]) * 8);
    }
    L.stage_diff = p->in_dtype != GRADREF_F32 || !dense_pixels(p->ds, p->O);
    if (L.stage_diff) L.diff32 = gradref__ws_take(&at, in_slabs * (size_t)pixels(p->O) * 4);
    L.acc_buffer = p->out_dtype != GRADREF_F32 || !dense_pixels(p->gs, p->I);
    if (L.acc_buffer) L.acc = gradref__ws_take(&at, out_slabs * (size_t)pixels(p->I) * 4);
    if (L.path == PATH_GEMM) {
        size_t per = 0;
        gradref__ws_take(&per, gradref__sgemm_work_bytes());
        L.chunk_at = gradref__ws_take(&per, (size_t)CHUNK_FLOATS * 4);
        L.taps_at = gradref__ws_take(&per, (size_t)taps_of(p) * 4 * sizeof(int64_t));
        L.offsets_at = gradref__ws_take(&per, (size_t)taps_of(p) * 2 * sizeof(int64_t));
        L.masks_at =
            gradref__ws_take(&per, (size_t)((TILE_GROUP + 1) * 2 * taps_of(p)) * sizeof(uint16_t));
        L.masks_key_at = gradref__ws_take(&per, 3 * sizeof(int64_t));
        if (pack_tiles(p)) L.tile_at = gradref__ws_take(&per, (size_t)(taps_of(p) * p->OCpg) * 128);
        L.per_thread = per;
        L.thread0 = at;
        at += per * (size_t)threads;
    }
    L.total = at;
    return L;
}

size_t gradref__cbd_fast_workspace(const gradref__cbd_plan *p, int32_t precision, int threads) {
    return layout_of(p, precision, threads).total;
}

/* The input channels of a GEMM work item: all of them unless images x groups are few, then
 * blocks that start on a panel of `rows` rows, about two items per thread. */
static int64_t channel_block(const gradref__cbd_plan *p, int threads, int64_t rows) {
    int64_t per_group = 1;
    if (p->N * p->G < 2 * (int64_t)threads) {
        per_group = (2 * (int64_t)threads + p->N * p->G - 1) / (p->N * p->G);
        if (per_group > p->ICpg) per_group = p->ICpg;
    }
    const int64_t icb = (p->ICpg + per_group - 1) / per_group;
    return (icb + rows - 1) / rows * rows;
}

int gradref__cbd_fast_threads(const gradref__cbd_plan *p, int32_t precision, int threads) {
    const layout L = layout_of(p, precision, 1);
    if (L.path != PATH_GEMM || p->ICpg == 0) return threads; /* no per-thread parts */
    /* the fewest rows a panel can have: the channels spread evenly over mr-row panels */
    const int64_t mr = gradref__sgemm_mr(p->max_isa), np = (p->ICpg + mr - 1) / mr;
    const int64_t icb = channel_block(p, threads, (p->ICpg + np - 1) / np);
    const int64_t items = p->N * p->G * ((p->ICpg + icb - 1) / icb);
    return gradref__team(items, threads);
}

/* The filter's element offset of group g, input channel ic, stored tap t, output channel 0. */
static int64_t filter_offset(const gradref__cbd_plan *p, int64_t g, int64_t ic, int64_t t) {
    const int64_t k0 = t / (p->K[1] * p->K[2]), k1 = t / p->K[2] % p->K[1], k2 = t % p->K[2];
    return g * p->fs[0] + ic * p->fs[2] + k0 * p->fs[3] + k1 * p->fs[4] + k2 * p->fs[5];
}

/* The filter's element at offset e as f32 (exact: F32, F16 or BF16 here). */
static float filter_value(const gradref__cbd_plan *p, int64_t e) {
    return (float)gradref__load_float(p->in_dtype, p->filter + (size_t)e * p->in_size);
}

/* a[((g * ICpg + ic) * T + t) * OCpg + oc] = W[g, oc, ic, tap t] as f32 (taps in stored
 * order); returns 0 when a value is not finite. */
static int pack_filter(const gradref__cbd_plan *p, float *a, int threads) {
    const int64_t T = taps_of(p), rows = p->G * p->ICpg;
    const int team = rows * T * p->OCpg >= (INT64_C(1) << 15) ? threads : 1; /* small: serial */
    int finite = 1;
    GRADREF__PARALLEL_FOR(team, reduction(& : finite) schedule(static))
    for (int64_t r = 0; r < rows; r++) {
        const int64_t g = r / p->ICpg, ic = r % p->ICpg;
        for (int64_t t = 0; t < T; t++) {
            const int64_t off = filter_offset(p, g, ic, t);
            float *row = a + ((g * p->ICpg + ic) * T + t) * p->OCpg;
            for (int64_t oc = 0; oc < p->OCpg; oc++) {
                row[oc] = filter_value(p, off + oc * p->fs[1]);
                finite &= isfinite(row[oc]) != 0;
            }
        }
    }
    return finite;
}

static void dense5(int64_t c, const int64_t *sp, int64_t *st) {
    st[4] = 1;
    st[3] = sp[2];
    st[2] = sp[1] * sp[2];
    st[1] = pixels(sp);
    st[0] = c * st[1];
}

typedef struct run {
    const gradref__cbd_plan *p;
    const float *apack;
    const float *diff; /* f32 diff: channel c of image n at n * dn + c * dc, pixels dense */
    int64_t dn, dc;
    int64_t span_lo, span_hi; /* diff's elements lie in [diff + span_lo, diff + span_hi) */
    float *acc;               /* f32 grad, likewise */
    int64_t an, ac;
    int max_isa;                   /* the plan's: the GEMM's level and its own */
    const gradref__cbd_kernels *k; /* the same family's own kernels */
    gradref__cbd_dw_shape dw;      /* depthwise: every channel's geometry */
    const float *panels;           /* group g, phase f: panels + g * group_floats + phase_off[f] */
    const int64_t *phase_off;
    /* the live stride phases (those a tap reaches and that hold pixels): every combination of
     * the offsets res[j][0 .. nres[j]) along the dims, the last dim fastest */
    const int64_t *res[3];
    int64_t nres[3], phases;
    int64_t group_floats, mr;
    int64_t pr; /* rows per panel (<= mr): the channels spread evenly over the panels when every
                   phase runs direct tiles, whose short panels run at a fraction of the rate */
    int prefetch_tiles; /* an image's diff is larger than L2 holds beside the tiles' work */
} run;

/* ---- one stride phase of one work item ---- */

typedef struct phase {
    const run *R;
    int64_t n, g, ic0;
    int64_t Q[3]; /* sub-grid sizes */
    int64_t ntaps;
    const int64_t *tap; /* per phase tap: stored tap index, then the 3 shifts */
    int64_t j_base;     /* first sub-grid pixel of the current GEMM call */
    int64_t index;      /* the phase's index (its taps) */
} phase;

/* B (k = (phase tap, oc); columns: sub-grid pixels q) from diff shifted by the tap, zero
 * outside diff: the implicit im2col. */
static void pack_b_phase(const void *ctx, int64_t k0, int64_t kc, int64_t first, int64_t count,
                         int width, float *dst) {
    enum { MAX_RUNS = 64 };
    const phase *f = ctx;
    const gradref__cbd_plan *p = f->R->p;
    const int64_t O = p->OCpg, W = f->Q[2];
    const float *dimg = f->R->diff + f->n * f->R->dn + f->g * O * f->R->dc;
    for (int64_t jp = 0; jp < count; jp += width) {
        const int64_t cols = count - jp < width ? count - jp : width;
        /* the panel's columns as runs along the last sub-grid dim (the same for every k) */
        int64_t run_at[MAX_RUNS], run_len[MAX_RUNS], run_q[MAX_RUNS][3], runs = 0;
        {
            const int64_t j_start = f->j_base + first + jp;
            int64_t q2 = j_start % W, q1 = j_start / W % f->Q[1], q0 = j_start / (W * f->Q[1]);
            for (int64_t j = 0; j < cols;) {
                const int64_t len = W - q2 < cols - j ? W - q2 : cols - j;
                run_at[runs] = j, run_len[runs] = len;
                run_q[runs][0] = q0, run_q[runs][1] = q1, run_q[runs][2] = q2;
                runs++;
                j += len;
                q2 += len;
                if (q2 == W) {
                    q2 = 0;
                    if (++q1 == f->Q[1]) q1 = 0, q0++;
                }
            }
        }
        for (int64_t q = 0; q < kc; q++) {
            const int64_t k = k0 + q, oc = k % O;
            const int64_t *tp = f->tap + 4 * (k / O);
            const float *plane = dimg + oc * f->R->dc;
            for (int64_t r = 0; r < runs; r++) {
                float *out = dst + run_at[r];
                const int64_t len = run_len[r];
                const int64_t o0 = run_q[r][0] + tp[1], o1 = run_q[r][1] + tp[2],
                              o2 = run_q[r][2] + tp[3];
                int64_t lo = 0, hi = 0; /* [lo, hi): the part inside diff */
                const float *row = NULL;
                if (o0 >= 0 && o0 < p->O[0] && o1 >= 0 && o1 < p->O[1]) {
                    row = plane + (o0 * p->O[1] + o1) * p->O[2] + o2;
                    lo = o2 < 0 ? -o2 : 0;
                    hi = p->O[2] - o2 < len ? p->O[2] - o2 : len;
                    if (lo > len) lo = len;
                    if (hi < lo) hi = lo;
                }
                for (int64_t x = 0; x < lo; x++)
                    out[x] = 0.0f;
                for (int64_t x = lo; x < hi; x++)
                    out[x] = row[x];
                for (int64_t x = hi; x < len; x++)
                    out[x] = 0.0f;
            }
            for (int64_t j = cols; j < width; j++)
                dst[j] = 0.0f;
            dst += width;
        }
    }
}

/* Taps reaching phase ph, in the reference's order (diff position ascending); returns count. */
static int64_t phase_taps(const gradref__cbd_plan *p, const int64_t *ph, int64_t *tap) {
    int64_t n = 0, kp[3];
    for (kp[0] = p->K[0] - 1; kp[0] >= 0; kp[0]--)
        for (kp[1] = p->K[1] - 1; kp[1] >= 0; kp[1]--)
            for (kp[2] = p->K[2] - 1; kp[2] >= 0; kp[2]--) {
                int64_t shift[3], ok = 1;
                for (int j = 0; j < 3 && ok; j++) {
                    const int64_t num = ph[j] + p->pad_begin[j] - kp[j] * p->dil[j];
                    const int64_t s = p->stride[j];
                    ok = num % s == 0;
                    /* exact division, rounding toward -inf for negative num */
                    shift[j] = num >= 0 ? num / s : -((-num) / s);
                }
                if (!ok) continue;
                int64_t k[3];
                for (int j = 0; j < 3; j++)
                    k[j] = p->mode == GRADREF_CONV_CROSS_CORRELATION ? kp[j] : p->K[j] - 1 - kp[j];
                tap[4 * n] = (k[0] * p->K[1] + k[1]) * p->K[2] + k[2];
                tap[4 * n + 1] = shift[0];
                tap[4 * n + 2] = shift[1];
                tap[4 * n + 3] = shift[2];
                n++;
            }
    return n;
}

/* Prefetches the diff lines a 32-pixel tile at pixel j of `image` reads: for each diff row its
 * taps reach (consecutive taps of one row are one run), from the leftmost tap's first pixel to
 * the rightmost's last, in every channel. A tile reads OCpg channels at a few rows each, more
 * strided streams than the hardware prefetchers follow. */
static void prefetch_tile(const run *R, const phase *f, const float *image, const int64_t *offset,
                          int64_t j) {
    const int64_t channels = R->p->OCpg, dc = R->dc;
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

/* Zeros still to write into an item's grad slab (strided convolutions): a slice after each
 * tile of the first phase that has taps, so that the stores drain while the tiles compute (a
 * memset of the whole slab ahead of them leaves the core waiting on its stores), and the rest
 * before anything is scattered into the slab. */
typedef struct zeros {
    char *at;
    size_t left, slice;
} zeros;

static void zeros_some(zeros *z) {
    if (z == NULL || z->left == 0) return;
    const size_t n = z->left < z->slice ? z->left : z->slice;
    memset(z->at, 0, n);
    z->at += n, z->left -= n;
}

static void zeros_rest(zeros *z) {
    if (z == NULL || z->left == 0) return;
    memset(z->at, 0, z->left);
    z->left = 0;
}

/* Sub-grid pixels [jb, je) of a phase whose sub-grid has diff's last two sizes, into c (pixel
 * jb of row ic0 at c, rows ldc apart): tiles of 32 pixels computed straight from diff (no B
 * packing), a group of tiles at a time for every filter panel. */
static void direct_tiles(const run *R, const phase *f, const float *panels, int64_t M, int64_t jb,
                         int64_t je, float *c, int64_t ldc, char *mine, const layout *L, zeros *z) {
    const gradref__cbd_plan *p = R->p;
    if (z != NULL && z->left > 0) { /* one slice per tile call, whole lines */
        const int64_t calls = (je - jb + 31) / 32 * ((M + R->pr - 1) / R->pr);
        z->slice = ((z->left + (size_t)calls - 1) / (size_t)calls + 63) & ~(size_t)63;
    }
    const int64_t K = f->ntaps * p->OCpg, per_tile = 2 * f->ntaps;
    const int64_t image_at = f->n * R->dn + f->g * p->OCpg * R->dc;
    const float *image = R->diff + image_at;
    int64_t *offset = (int64_t *)(mine + L->offsets_at);
    uint16_t *masks = (uint16_t *)(mine + L->masks_at);
    int64_t lo = 0, hi = 0; /* what a tile reads, from pixel j0, over all taps and channels */
    for (int64_t t = 0; t < f->ntaps; t++) {
        const int64_t *tp = f->tap + 4 * t;
        offset[t] = (tp[1] * p->O[1] + tp[2]) * p->O[2] + tp[3];
        if (t == 0 || offset[t] < lo) lo = offset[t];
        if (t == 0 || offset[t] > hi) hi = offset[t];
    }
    const int64_t channels = (p->OCpg - 1) * R->dc;
    lo += image_at + (channels < 0 ? channels : 0);
    hi += image_at + (channels > 0 ? channels : 0) + 32;
    int64_t *key = (int64_t *)(mine + L->masks_key_at);
    for (int64_t g0 = jb; g0 < je; g0 += TILE_GROUP * 32) {
        const int64_t g1 = je - g0 < TILE_GROUP * 32 ? je : g0 + TILE_GROUP * 32;
        /* the masks depend on the phase and the tiles only: the thread's next item of the
         * same geometry (another image, group or channel block) reuses them */
        if (key[0] != f->index || key[1] != g0 || key[2] != g1) {
            for (int64_t j0 = g0; j0 < g1; j0 += 32)
                R->k->tile32_masks(f->tap, f->ntaps, f->Q, p->O, j0, g1 - j0 < 32 ? g1 - j0 : 32,
                                   masks + (j0 - g0) / 32 * per_tile);
            key[0] = f->index, key[1] = g0, key[2] = g1;
        }
        if (L->tile_at) { /* each tile packed once, then every panel */
            float *block = (float *)(mine + L->tile_at);
            int64_t *block_offset = offset + f->ntaps;
            uint16_t *block_masks = masks + TILE_GROUP * per_tile;
            for (int64_t t = 0; t < f->ntaps; t++)
                block_offset[t] = t * p->OCpg * 32;
            for (int64_t j0 = g0; j0 < g1; j0 += 32) {
                const uint16_t *m = masks + (j0 - g0) / 32 * per_tile;
                const int64_t cols = g1 - j0 < 32 ? g1 - j0 : 32;
                R->k->pack_tile32(image + j0, R->dc, p->OCpg, offset, m, f->ntaps, block);
                for (int64_t t = 0; t < f->ntaps; t++) /* same taps skipped, zeros packed */
                    block_masks[2 * t] = block_masks[2 * t + 1] =
                        (uint16_t)((m[2 * t] | m[2 * t + 1]) ? 0xffffu : 0u);
                for (int64_t i0 = 0; i0 < M; i0 += R->pr) {
                    R->k->tile32(block, 32, p->OCpg, block_offset, block_masks, f->ntaps, cols, 2,
                                 panels + i0 / R->pr * K * R->mr,
                                 (int)(M - i0 < R->pr ? M - i0 : R->pr), c + i0 * ldc + (j0 - jb),
                                 ldc);
                    zeros_some(z);
                }
            }
            continue;
        }
        /* a tile's diff (K rows of 128 bytes) reused by every panel while it fits in L1,
         * else each panel (in L1) reused by the tiles */
        const int tile_outer = K * 128 <= 40 * 1024;
        const int64_t tiles = (g1 - g0 + 31) / 32, panels_n = (M + R->pr - 1) / R->pr;
        for (int64_t outer = 0; outer < (tile_outer ? tiles : panels_n); outer++)
            for (int64_t inner = 0; inner < (tile_outer ? panels_n : tiles); inner++) {
                const int64_t tile = tile_outer ? outer : inner, pn = tile_outer ? inner : outer;
                const int64_t i0 = pn * R->pr, j0 = g0 + tile * 32;
                if (pn == 0 && j0 + 32 < g1 && R->prefetch_tiles)
                    prefetch_tile(R, f, image, offset, j0 + 32);
                R->k->tile32(image + j0, R->dc, p->OCpg, offset, masks + tile * per_tile, f->ntaps,
                             g1 - j0 < 32 ? g1 - j0 : 32,
                             j0 + lo >= R->span_lo && j0 + hi <= R->span_hi,
                             panels + pn * K * R->mr, (int)(M - i0 < R->pr ? M - i0 : R->pr),
                             c + i0 * ldc + (j0 - jb), ldc);
                zeros_some(z);
            }
    }
}

/* `rows` runs of len values (from, contiguous) to grad rows row_stride apart, stride[2] apart
 * within a row. The first phase along the row (ph2 0) may write +0 between its values: those
 * elements are +0 (the slab is zeroed first) or a later phase's, written after it. */
static void scatter_rows(const run *R, const float *from, int64_t len, int64_t rows, float *row,
                         int64_t row_stride, int64_t ph2) {
    const int64_t step = R->p->stride[2];
    if (step == 2 && R->k->scatter2) {
        R->k->scatter2(from, len, rows, row, row_stride, ph2 == 0);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t x = 0; x < len; x++)
            row[r * row_stride + x * step] = from[r * len + x];
}

/* grad positions j0..j1 of phase ph's sub-grid, for M channels (chunk: M rows of j1 - j0), to
 * the slabs at slab0: runs of a sub-grid row, or whole rows of one sub-grid plane per call. */
static void scatter_chunk(const run *R, const phase *f, const int64_t *ph, float *slab0,
                          const float *chunk, int64_t M, int64_t j0, int64_t j1) {
    const gradref__cbd_plan *p = R->p;
    /* whole rows only when a phase has several rows (then stride[1] < I[1]: no overflow) */
    const int64_t W = f->Q[2], row_stride = f->Q[1] > 1 ? p->stride[1] * p->I[2] : 0;
    for (int64_t m = 0; m < M; m++) { /* each grad element is in one phase */
        float *slab = slab0 + m * R->ac;
        const float *src = chunk + m * (j1 - j0);
        int64_t q2 = j0 % W, q1 = j0 / W % f->Q[1], q0 = j0 / (W * f->Q[1]);
        for (int64_t j = j0; j < j1;) {
            const int64_t len = W - q2 < j1 - j ? W - q2 : j1 - j;
            int64_t rows = 1;
            if (q2 == 0 && len == W) {
                rows = (j1 - j) / W;
                if (rows > f->Q[1] - q1) rows = f->Q[1] - q1;
            }
            float *row =
                slab +
                ((q0 * p->stride[0] + ph[0]) * p->I[1] + q1 * p->stride[1] + ph[1]) * p->I[2] +
                q2 * p->stride[2] + ph[2];
            const float *from = src + (j - j0);
            scatter_rows(R, from, len, rows, row, row_stride, ph[2]);
            j += rows * len;
            q2 += len;
            q1 += rows - 1;
            if (q2 == W) {
                q2 = 0;
                if (++q1 == f->Q[1]) q1 = 0, q0++;
            }
        }
    }
}

/* Whether direct tiles may run on a phase of sub-grid sizes Q (the table has them, offsets fit
 * int32). */
static int flat_ok(const run *R, const int64_t *Q) {
    return R->k->tile32 && R->mr == R->k->tile_rows && pixels(R->p->O) < INT64_C(1) << 30 &&
           pixels(Q) < INT64_C(1) << 30;
}

/* Whether a phase of sub-grid sizes Q runs direct tiles: they may, and its sub-grid has diff's
 * last two sizes. */
static int phase_direct(const run *R, const int64_t *Q) {
    return flat_ok(R, Q) && Q[1] == R->p->O[1] && Q[2] == R->p->O[2];
}

/* Live phase number f's offsets ph along the three dims (the last varies fastest). */
static void phase_at(const run *R, int64_t f, int64_t *ph) {
    ph[0] = R->res[0][f / (R->nres[1] * R->nres[2])];
    ph[1] = R->res[1][f / R->nres[2] % R->nres[1]];
    ph[2] = R->res[2][f % R->nres[2]];
}

static int compare_int64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The live phases along each dim into `at` (K[0] + K[1] + K[2] slots): the offsets
 * (k * dilation - pad_begin) mod stride of the taps, distinct, ascending, below the grad size.
 * A huge stride thus costs nothing: the other phases hold no tap and stay +0. */
static void live_phases(run *R, int64_t *at) {
    const gradref__cbd_plan *p = R->p;
    R->phases = 1;
    for (int j = 0; j < 3; j++) {
        int64_t n = 0;
        for (int64_t k = 0; k < p->K[j]; k++) {
            int64_t r = (k * p->dil[j] - p->pad_begin[j]) % p->stride[j];
            if (r < 0) r += p->stride[j];
            if (r < p->I[j]) at[n++] = r;
        }
        qsort(at, (size_t)n, sizeof *at, compare_int64);
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (m == 0 || at[i] != at[m - 1]) at[m++] = at[i];
        R->res[j] = at;
        R->nres[j] = m;
        R->phases *= m;
        at += p->K[j];
    }
}

/* The sub-grid sizes of stride phase ph; returns their product. */
static int64_t phase_grid(const gradref__cbd_plan *p, const int64_t *ph, int64_t *Q) {
    int64_t N = 1;
    for (int j = 0; j < 3; j++) {
        Q[j] = ph[j] < p->I[j] ? (p->I[j] - ph[j] - 1) / p->stride[j] + 1 : 0;
        N *= Q[j];
    }
    return N;
}

/* Whether every stride phase that has pixels and taps runs direct tiles (item_phase). */
static int all_direct(const run *R, int64_t *tap) {
    const gradref__cbd_plan *p = R->p;
    for (int64_t f = 0; f < R->phases; f++) {
        int64_t ph[3];
        phase_at(R, f, ph);
        int64_t Q[3];
        if (phase_grid(p, ph, Q) == 0 || phase_taps(p, ph, tap) == 0) continue;
        if (!phase_direct(R, Q)) return 0;
    }
    return 1;
}

/* Channels [ic0, ic1) of image n, group g, stride phase ph: a GEMM (or 32-pixel tiles) straight
 * into grad when the stride is 1, else through the chunk buffer, whole sub-grid rows at a
 * time when they fit, then scattered. */
static void item_phase(const run *R, int64_t n, int64_t g, int64_t ic0, int64_t M, int64_t f_index,
                       float *slab0, char *mine, const layout *L, zeros *z) {
    const gradref__cbd_plan *p = R->p;
    int64_t *tap = (int64_t *)(mine + L->taps_at);
    phase f;
    memset(&f, 0, sizeof f);
    f.R = R, f.n = n, f.g = g, f.ic0 = ic0, f.tap = tap;
    int64_t ph[3];
    phase_at(R, f_index, ph);
    const int64_t N = phase_grid(p, ph, f.Q);
    if (N == 0) return;
    f.ntaps = phase_taps(p, ph, tap);
    gradref__sgemm_args a;
    memset(&a, 0, sizeof a);
    a.M = M;
    a.K = f.ntaps * p->OCpg;
    a.pack_b = pack_b_phase;
    a.pack_b_ctx = &f;
    f.index = f_index;
    a.a_panels =
        R->panels + g * R->group_floats + R->phase_off[f_index] + ic0 / R->pr * a.K * R->mr;
    const int direct = phase_direct(R, f.Q);
    if (unit_strides(p) && direct) {
        direct_tiles(R, &f, a.a_panels, M, 0, N, slab0, R->ac, mine, L, NULL);
        return;
    }
    if (unit_strides(p)) { /* the only phase: straight into grad */
        a.N = N;
        a.c = slab0;
        a.c_rs = R->ac;
        a.c_cs = 1;
        gradref__sgemm(&a, R->max_isa, mine);
        return;
    }
    if (a.K == 0) return; /* no tap reaches this phase: +0 from the start */
    float *chunk = (float *)(mine + L->chunk_at);
    const int64_t W = f.Q[2], per_row = W * M;
    const int64_t step = per_row <= CHUNK_FLOATS ? CHUNK_FLOATS / per_row * W
                                                 : (CHUNK_FLOATS / M > 0 ? CHUNK_FLOATS / M : 1);
    for (int64_t j0 = 0; j0 < N; j0 += step) {
        const int64_t j1 = j0 + step < N ? j0 + step : N;
        f.j_base = j0;
        a.N = j1 - j0;
        a.c = chunk;
        a.c_rs = j1 - j0;
        a.c_cs = 1;
        if (direct)
            direct_tiles(R, &f, a.a_panels, M, j0, j1, chunk, j1 - j0, mine, L, z);
        else
            gradref__sgemm(&a, R->max_isa, mine);
        zeros_rest(z);
        gradref__canon_nans_f32(chunk, M * (j1 - j0)); /* the NaN rule, on the phase's values */
        scatter_chunk(R, &f, ph, slab0, chunk, M, j0, j1);
    }
}

/* One work item: channels [ic0, ic1) of image n, group g, every stride phase in turn. */
static void item_gemm(const run *R, int64_t n, int64_t g, int64_t ic0, int64_t ic1, char *mine,
                      const layout *L) {
    const gradref__cbd_plan *p = R->p;
    const int64_t M = ic1 - ic0;
    float *slab0 = R->acc + n * R->an + (g * p->ICpg + ic0) * R->ac;
    zeros z = {(char *)slab0, 0, 0};
    if (!unit_strides(p)) { /* phases fill in their elements; the ones no tap reaches stay +0 */
        if (R->ac == pixels(p->I)) /* one block, zeroed between the first phase's tiles */
            z.left = (size_t)(M * R->ac) * sizeof(float);
        else
            for (int64_t m = 0; m < M; m++)
                memset(slab0 + m * R->ac, 0, (size_t)pixels(p->I) * sizeof(float));
    }
    for (int64_t f_index = 0; f_index < R->phases; f_index++)
        item_phase(R, n, g, ic0, M, f_index, slab0, mine, L, &z);
    zeros_rest(&z);      /* no phase had a tap */
    if (unit_strides(p)) /* the NaN rule, while the slab is in the cache (strided: per chunk) */
        for (int64_t m = 0; m < M; m++)
            gradref__canon_nans_f32(slab0 + m * R->ac, pixels(p->I));
}

/* Filter rows [ic0, ic0 + rows) of group g for a phase's taps, straight from the filter, as
 * gradref__sgemm_prepack_a lays out one panel: k = (tap, oc) ascending, mr floats each, the rows
 * past `rows` zero. Returns 0 when a value is not finite. */
static int pack_panel(const gradref__cbd_plan *p, int64_t g, int64_t ic0, int64_t rows,
                      const int64_t *tap, int64_t ntaps, int64_t mr, float *dst) {
    int finite = 1;
    for (int64_t i = 0; i < ntaps; i++) {
        const int64_t off = filter_offset(p, g, ic0, tap[4 * i]);
        for (int64_t oc = 0; oc < p->OCpg; oc++, dst += mr) {
            const int64_t at = off + oc * p->fs[1];
            int64_t r = 0;
            if (p->in_dtype == GRADREF_F32)
                for (const float *w = (const float *)(const void *)p->filter + at; r < rows; r++)
                    dst[r] = w[r * p->fs[2]];
            else
                for (; r < rows; r++)
                    dst[r] = filter_value(p, at + r * p->fs[2]);
            for (r = 0; r < rows; r++)
                finite &= isfinite(dst[r]) != 0;
            for (; r < mr; r++)
                dst[r] = 0.0f;
        }
    }
    return finite;
}

/* Where each (group, phase) starts in the panels, before the region. */
static void panel_offsets(run *R, const layout *L, char *base) {
    const gradref__cbd_plan *p = R->p;
    int64_t *off = (int64_t *)(base + L->phase_off);
    int64_t *tap = (int64_t *)(base + L->thread0 + L->taps_at);
    R->group_floats = L->group_floats;
    R->panels = (const float *)(base + L->panels);
    R->phase_off = off;
    int64_t at = 0;
    for (int64_t f = 0; f < R->phases; f++) {
        int64_t ph[3];
        phase_at(R, f, ph);
        off[f] = at;
        at += (p->ICpg + R->pr - 1) / R->pr * R->mr * phase_taps(p, ph, tap) * p->OCpg;
    }
}

/* This thread's share of the panels of every (group, live phase), inside the region: the
 * filter is read once per call, into the panels the tiles and the GEMM take. Only live phases
 * have panels (1x1 stride 2: one of four; a share of all four left one thread every panel and
 * the other waiting at the barrier). Returns 0 when a value is not finite. */
static int pack_panels(const run *R, char *mine, const layout *L) {
    const gradref__cbd_plan *p = R->p;
    const int64_t np = (p->ICpg + R->pr - 1) / R->pr;
    int64_t *tap = (int64_t *)(mine + L->taps_at);
    int finite = 1;
    int64_t b, e, it = 0;
    gradref__my_range(p->G * R->phases * np, &b, &e);
    for (int64_t g = 0; g < p->G && it < e; g++)
        for (int64_t f = 0; f < R->phases && it < e; f++) {
            int64_t ph[3];
            phase_at(R, f, ph);
            const int64_t ntaps = phase_taps(p, ph, tap);
            for (int64_t ic0 = 0; ntaps > 0 && ic0 < p->ICpg; ic0 += R->pr, it++) {
                if (it < b || it >= e) continue;
                float *dst = (float *)R->panels + g * R->group_floats + R->phase_off[f] +
                             ic0 / R->pr * ntaps * p->OCpg * R->mr;
                finite &= pack_panel(p, g, ic0, p->ICpg - ic0 < R->pr ? p->ICpg - ic0 : R->pr, tap,
                                     ntaps, R->mr, dst);
            }
        }
    return finite;
}

/* One channel of one image. The next channel's diff and grad planes are prefetched first (up
 * to PREFETCH_PLANE_BYTES of each): a plane is a few KiB, and the channels follow one another
 * too quickly for the hardware prefetchers to ramp up (0.80 -> 1.8x oneDNN on the bench's
 * 28x28 planes on Zen 5). */
#define PREFETCH_PLANE_BYTES (INT64_C(32) << 10)
static void item_depthwise(const run *R, int64_t n, int64_t g) {
    const gradref__cbd_plan *p = R->p;
    const int64_t next_g = g + 1 < p->G ? g + 1 : 0, next_n = g + 1 < p->G ? n : n + 1;
    if (next_n < p->N) {
        const char *diff = (const char *)(R->diff + next_n * R->dn + next_g * R->dc);
        const char *grad = (const char *)(R->acc + next_n * R->an + next_g * R->ac);
        int64_t diff_bytes = R->dw.O[0] * R->dw.O[1] * R->dw.O[2] * 4,
                grad_bytes = R->dw.I[0] * R->dw.I[1] * R->dw.I[2] * 4;
        if (diff_bytes > PREFETCH_PLANE_BYTES) diff_bytes = PREFETCH_PLANE_BYTES;
        if (grad_bytes > PREFETCH_PLANE_BYTES) grad_bytes = PREFETCH_PLANE_BYTES;
        for (int64_t o = 0; o < diff_bytes; o += 64)
            __builtin_prefetch(diff + o, 0, 3);
        for (int64_t o = 0; o < grad_bytes; o += 64)
            __builtin_prefetch(grad + o, 1, 3);
    }
    float *plane = R->acc + n * R->an + g * R->ac;
    gradref__cbd_depthwise_plane(R->k, &R->dw, R->apack + g * taps_of(p),
                                 R->diff + n * R->dn + g * R->dc, plane);
    gradref__canon_nans_f32(plane, pixels(p->I));
}

static void ref_part(const void *plan, int64_t begin, int64_t end) {
    gradref__cbd_ref_slabs(plan, begin, end);
}

static void megengine_part(const void *plan, int64_t begin, int64_t end) {
    gradref__cbd_megengine_items(plan, begin, end);
}

gradref_status gradref__cbd_no_workspace(const gradref__cbd_plan *p, int threads) {
    if (p->precision == GRADREF_PRECISION_MEGENGINE_DEFAULT) {
        gradref__parallel_ranges(p->N * p->G, threads, megengine_part, p);
        gradref__canon_nans(&p->out_desc, threads); /* it accumulates in grad's own dtype */
    } else
        gradref__parallel_ranges(p->N * p->G * p->ICpg, threads, ref_part, p);
    return GRADREF_OK;
}

/* diff as the kernels read it (staged to dense f32 when its dtype or layout asks for it) and
 * the f32 grad they write (grad itself, or the accumulator copied out at the end). */
static void bind_data(run *R, const layout *L, char *base, int threads) {
    const gradref__cbd_plan *p = R->p;
    const int64_t C_in = p->G * p->OCpg, C_out = p->G * p->ICpg;
    int64_t dst5[5], ast5[5];
    dense5(C_in, p->O, dst5);
    dense5(C_out, p->I, ast5);
    if (L->stage_diff) {
        const int64_t s5[5] = {p->ds[0], p->ds[2], p->ds[3], p->ds[4], p->ds[5]};
        const int64_t shape[5] = {p->N, C_in, p->O[0], p->O[1], p->O[2]};
        gradref__copy5(shape, p->diff, p->in_dtype, s5, base + L->diff32, GRADREF_F32, dst5,
                       threads);
        R->diff = (const float *)(base + L->diff32);
        R->dn = dst5[0];
        R->dc = dst5[1];
    } else {
        R->diff = (const float *)p->diff;
        R->dn = p->ds[0];
        R->dc = p->ds[2];
    }
    const int64_t images = (p->N - 1) * R->dn, channels = (C_in - 1) * R->dc;
    R->span_lo = (images < 0 ? images : 0) + (channels < 0 ? channels : 0);
    R->span_hi = (images > 0 ? images : 0) + (channels > 0 ? channels : 0) + pixels(p->O);
    if (L->acc_buffer) {
        R->acc = (float *)(base + L->acc);
        R->an = ast5[0];
        R->ac = ast5[1];
    } else {
        R->acc = (float *)p->grad;
        R->an = p->gs[0];
        R->ac = p->gs[2];
    }
    /* a small image's diff stays in L2 after its first tiles: prefetching it is pure cost */
    R->prefetch_tiles = p->G * p->OCpg * pixels(p->O) * (int64_t)sizeof(float) > PREFETCH_MIN_BYTES;
}

/* The GEMM path's live phases and its panels' rows and offsets. */
static void plan_panels(run *R, const layout *L, char *base) {
    const gradref__cbd_plan *p = R->p;
    R->mr = R->pr = gradref__sgemm_mr(R->max_isa);
    live_phases(R, (int64_t *)(base + L->residues));
    /* every phase that has taps runs direct tiles: the channels evenly over the panels (16
     * channels: 8 + 8 rows instead of 14 + 2; a 2-row tile has 4 FMA chains and waits on their
     * latency) */
    if (all_direct(R, (int64_t *)(base + L->thread0 + L->taps_at))) {
        const int64_t np = (p->ICpg + R->mr - 1) / R->mr;
        R->pr = (p->ICpg + np - 1) / np;
    }
    panel_offsets(R, L, base);
}

/* Every work item (n, g, ic block) over the threads, the GEMM path's panels packed first inside
 * the region. Returns 0 when the filter held a value that is not finite (nothing then ran). */
static int run_items(const run *R, const layout *L, char *base, int threads) {
    const gradref__cbd_plan *p = R->p;
    /* Blocks of equal size go outermost: a thread's items then share its blocks' panels, which
     * it packed itself when there is one group and one phase, so that no panel line moves
     * between the cores call after call (N2 16 channels on Zen 5: 0.64 -> 0.76 of oneDNN);
     * unequal ones would leave the threads unequal work. */
    const int64_t icb = L->path == PATH_GEMM ? channel_block(p, threads, R->pr) : p->ICpg;
    const int64_t blocks = (p->ICpg + icb - 1) / icb;
    const int64_t items = p->N * p->G * blocks;
    const int blocks_outer = blocks > 1 && p->ICpg % icb == 0;
    const int team = gradref__team(items, threads);
    /* many GEMM items: each thread claims the next one, so that a slower core takes fewer (on
     * Zen 5 under KVM one vCPU ran 10-15 % slower in a profile); few: the static split, which
     * keeps blocks_outer's panels on the thread that packed them. Depthwise items, a plane
     * each, keep theirs: each prefetches the next (claimed, 1.46 -> 0.41 of oneDNN). */
    const int claimed = L->path == PATH_GEMM && items >= 4 * (int64_t)team;
    int64_t next_item = 0;
    int finite = 1;
    GRADREF__PARALLEL(team) {
        char *mine = base + L->thread0 + L->per_thread * (size_t)gradref__thread_num();
        if (L->path == PATH_GEMM) {
            ((int64_t *)(mine + L->masks_key_at))[0] = -1; /* no masks yet */
            if (!pack_panels(R, mine, L)) {
                GRADREF__OMP(omp atomic write)
                finite = 0;
            }
            GRADREF__OMP(omp barrier)
        }
        int64_t b = 0, e = finite ? items : 0;
        if (!claimed) gradref__my_range(e, &b, &e);
        for (int64_t it = claimed ? gradref__claim(&next_item) : b; it < e;
             it = claimed ? gradref__claim(&next_item) : it + 1) {
            const int64_t n = blocks_outer ? it / p->G % p->N : it / (p->G * blocks);
            const int64_t g = blocks_outer ? it % p->G : it / blocks % p->G;
            const int64_t ic0 = (blocks_outer ? it / (p->N * p->G) : it % blocks) * icb;
            const int64_t ic1 = ic0 + icb < p->ICpg ? ic0 + icb : p->ICpg;
            if (L->path == PATH_DEPTHWISE)
                item_depthwise(R, n, g);
            else
                item_gemm(R, n, g, ic0, ic1, mine, L);
        }
    }
    return finite;
}

void gradref__cbd_fast(const gradref__cbd_plan *p, void *ws, int threads) {
    const int64_t slabs = p->N * p->G * p->ICpg;
    if (slabs == 0 || pixels(p->I) == 0) return;
    if (p->precision == GRADREF_PRECISION_MEGENGINE_DEFAULT) { /* no workspace */
        gradref__cbd_no_workspace(p, threads);
        return;
    }
    const layout L = layout_of(p, p->precision, threads);
    char *base = (char *)ws;
    /* the GEMM path reads the filter into its panels inside the region */
    if (L.path == PATH_REFERENCE ||
        (L.path == PATH_DEPTHWISE && !pack_filter(p, (float *)(base + L.apack), threads))) {
        gradref__parallel_ranges(slabs, threads, ref_part, p); /* slabs split over the threads */
        return;
    }
    run R;
    memset(&R, 0, sizeof R);
    R.p = p;
    R.max_isa = p->max_isa;
    R.k = gradref__cbd_kernels_for(p->max_isa);
    if (L.path == PATH_DEPTHWISE) {
        R.dw = gradref__cbd_dw_shape_of(p);
        R.apack = (const float *)(base + L.apack);
    }
    bind_data(&R, &L, base, threads);
    if (L.path == PATH_GEMM) plan_panels(&R, &L, base);
    if (!run_items(&R, &L, base, threads)) { /* a filter value not finite: the reference */
        gradref__parallel_ranges(slabs, threads, ref_part, p);
        return;
    }
    if (L.acc_buffer) {
        int64_t ast5[5];
        dense5(p->G * p->ICpg, p->I, ast5);
        const int64_t g5[5] = {p->gs[0], p->gs[2], p->gs[3], p->gs[4], p->gs[5]};
        const int64_t shape[5] = {p->N, p->G * p->ICpg, p->I[0], p->I[1], p->I[2]};
        gradref__copy5(shape, R.acc, GRADREF_F32, ast5, p->grad, p->out_dtype, g5, threads);
    }
}
