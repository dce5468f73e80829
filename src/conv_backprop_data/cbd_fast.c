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
 * channels, so the bits do not depend on the thread count. F64 and GRADREF_PRECISION_HIGH run
 * the reference loop over the same items.
 *
 * I8 (I32 sums, and QuantizedS8) runs the direct tiles on words of several output channels in
 * int32 where the kernel table has them and every phase takes direct tiles, else the same
 * kernels in f32 where that is exact: the whole call, or its output channels in parts whose
 * sums are added in int32 (cbd_int8.c). */
#include <stdlib.h>
#include <string.h>

#include "cbd_channels_last.h"
#include "cbd_direct.h"
#include "cbd_int8.h"
#include "cbd_phases.h"
#include "cbd_run.h"
#include "common/copy.h"
#include "common/exec.h"
#include "common/gemm.h"
#include "common/internal.h"
#include "common/nan.h"

/* Direct tiles copy a tile's diff into a contiguous block when enough filter panels reuse it
 * (diff read in place is a strided, misaligned stream the prefetchers miss) and the block
 * stays in L2: eight AVX-512 panels, or eight of a narrower level's when an image's diff is
 * past what stays in L2 (a 512 KiB L2 rereads it from L3 for every panel). */
static int pack_tiles(const gradref__cbd_plan *p) {
    const int reused =
        p->ICpg >= 8 * GRADREF__CBD_TILE_ROWS ||
        (p->ICpg >= 8 * gradref__sgemm_mr(p->max_isa) && gradref__cbd_diff_past_l2(p));
    return !p->int8_part && /* its workspace is within the whole problem's */
           reused && taps_of(p) * p->OCpg * 128 <= (INT64_C(1) << 20);
}

/* Whether the direct tiles would read diff planes `stride` floats apart whose starts fall a
 * multiple of 4 KiB apart: a tap's eight or more channels then map to the same L1 sets and
 * evict one another before the next tap rereads them. Diff is then staged with its planes two
 * cache lines further apart (STAGED_PLANE_GAP floats). */
enum { STAGED_PLANE_GAP = 32 };
static int planes_alias(const gradref__cbd_plan *p, int path, int64_t stride) {
    return path == CBD_PATH_GEMM && p->OCpg >= 8 && stride % 1024 == 0;
}

/* Whether each thread of a team packs the whole filter into panels of its own: for a filter
 * of at most PRIVATE_PANELS_BYTES of panels, packing it all again costs a thread less than
 * the shared panels do, packed a share each and read by every thread (each line packed by
 * one core and then fetched by the others, and a barrier between). Not in an I8 part, whose
 * workspace lies within the whole problem's. */
#define PRIVATE_PANELS_BYTES (INT64_C(256) << 10)
static int private_panels(const gradref__cbd_plan *p, int64_t group_floats, int threads) {
    return threads > 1 && !p->int8_part && p->G * group_floats * 4 <= PRIVATE_PANELS_BYTES;
}

/* The blocks of channels a depthwise plan p runs by lanes (gradref__cbd_dw_lanes): its level's
 * kernel table has dw_lanes and its planes fit; the channels past the last block go a plane at
 * a time. LANES_BYTES: a tap's weights of a block, at most 8 channels. */
enum { LANES_BYTES = 8 * sizeof(float) };
static int64_t lanes_blocks(const gradref__cbd_plan *p) {
    const gradref__cbd_kernels *k = gradref__cbd_kernels_for(p->max_isa);
    const gradref__cbd_dw_shape dw = gradref__cbd_dw_shape_of(p);
    if (!k->dw_lanes || !gradref__cbd_dw_lanes_of(&dw, NULL)) return 0;
    return p->G / k->dw_lanes_planes;
}

/* The depthwise paths' copy of the filter: G x taps floats, or the channels-last rows'. */
static size_t depthwise_filter_bytes(const gradref__cbd_plan *p, int channels_last) {
    const int64_t floats = channels_last ? gradref__cbd_cl_weight_floats(p) : p->G * taps_of(p);
    return (size_t)floats * sizeof(float);
}

static int64_t dw_lanes_planes(const gradref__cbd_plan *p) {
    return gradref__cbd_kernels_for(p->max_isa)->dw_lanes_planes;
}

/* How L's path reads diff and writes grad: in place, or through whole f32 tensors (a dtype
 * other than F32, pixels not dense, or diff planes sharing L1's sets), or, for planar depthwise
 * of F32, F16 and BF16 whose rows are dense, through each item's f32 planes. */
static void staging_of(const gradref__cbd_plan *p, cbd_layout *L) {
    const int stage_diff =
        !L->channels_last && (p->in_dtype != GRADREF_F32 || !dense_pixels(p->ds, p->O) ||
                              planes_alias(p, L->path, p->ds[2]));
    const int acc_buffer =
        !L->channels_last && (p->out_dtype != GRADREF_F32 || !dense_pixels(p->gs, p->I));
    const int halves =
        (p->in_dtype == GRADREF_F32 || p->in_dtype == GRADREF_F16 || p->in_dtype == GRADREF_BF16) &&
        (p->out_dtype == GRADREF_F32 || p->out_dtype == GRADREF_F16 ||
         p->out_dtype == GRADREF_BF16);
    const int items = L->path == CBD_PATH_DEPTHWISE && !L->channels_last && halves &&
                      (p->O[2] == 1 || p->ds[5] == 1) && (p->I[2] == 1 || p->gs[5] == 1);
    L->stage_diff = stage_diff && !items, L->dw_item_diff = stage_diff && items;
    L->acc_buffer = acc_buffer && !items, L->dw_item_grad = acc_buffer && items;
}

/* A depthwise plan's part of each thread: its stride phases or its ring of diff rows, then its
 * items' planes (L's offsets set). */
static size_t depthwise_per_thread(const gradref__cbd_plan *p, cbd_layout *L) {
    const gradref__cbd_dw_shape dw = gradref__cbd_dw_shape_of(p);
    size_t per = 0;
    if (L->channels_last || !unit_strides(p))
        gradref__ws_take(&per, L->channels_last
                                   ? gradref__cbd_cl_scratch_bytes(p)
                                   : (size_t)gradref__cbd_dw_strided_floats(&dw) * sizeof(float));
    const size_t item = (size_t)(lanes_blocks(p) > 0 ? dw_lanes_planes(p) : 1) * sizeof(float);
    if (L->dw_item_diff) L->dw_diff_at = gradref__ws_take(&per, item * (size_t)pixels(p->O));
    if (L->dw_item_grad) L->dw_grad_at = gradref__ws_take(&per, item * (size_t)pixels(p->I));
    return per;
}

static cbd_layout layout_of(const gradref__cbd_plan *p, int32_t precision, int threads) {
    cbd_layout L;
    memset(&L, 0, sizeof L);
    const int f32 =
        p->in_dtype == GRADREF_F32 || p->in_dtype == GRADREF_F16 || p->in_dtype == GRADREF_BF16;
    /* integer sums have one answer whatever the precision asks */
    if (p->in_dtype != GRADREF_I8 && (!f32 || precision != GRADREF_PRECISION_DEFAULT)) {
        L.path = CBD_PATH_REFERENCE;
        return L;
    }
    /* depthwise rows keep up to 64 row taps (K0 * K1) on the stack; other strides run by
     * stride phases (gradref__cbd_depthwise_strided) where those fit */
    const gradref__cbd_dw_shape dw = gradref__cbd_dw_shape_of(p);
    L.path = p->ICpg == 1 && p->OCpg == 1 && p->K[0] * p->K[1] <= 64 &&
                     (unit_strides(p) || gradref__cbd_dw_strided_fits(&dw))
                 ? CBD_PATH_DEPTHWISE
                 : CBD_PATH_GEMM;
    size_t at = 0;
    const size_t in_slabs = (size_t)(p->N * p->G * p->OCpg),
                 out_slabs = (size_t)(p->N * p->G * p->ICpg);
    /* I8 parts (run_int8_parts) lay out their own workspace past the sums, within the rest */
    if (p->in_dtype == GRADREF_I8 && !p->int8_part) {
        L.sums = gradref__ws_take(&at, out_slabs * (size_t)pixels(p->I) * 4);
        L.parts = at;
    }
    const int channels_last = L.channels_last =
        L.path == CBD_PATH_DEPTHWISE && gradref__cbd_cl_fits(p);
    if (L.path == CBD_PATH_DEPTHWISE) /* channels-last: by whole blocks, its own order */
        L.apack = gradref__ws_take(&at, depthwise_filter_bytes(p, channels_last));
    if (L.path == CBD_PATH_DEPTHWISE && !channels_last && lanes_blocks(p) > 0)
        L.lanes_w = gradref__ws_take(&at, (size_t)(lanes_blocks(p) * 9) * LANES_BYTES);
    if (L.path == CBD_PATH_GEMM) { /* every tap is in one phase; panels round IC/G up by < 16 */
        L.group_floats = (p->ICpg + 15) * taps_of(p) * p->OCpg;
        L.private_panels = private_panels(p, L.group_floats, threads);
        if (!L.private_panels)
            L.panels = gradref__ws_take(&at, (size_t)(p->G * L.group_floats) * 4);
        /* live phases: at most one per tap */
        L.phase_off = gradref__ws_take(&at, (size_t)taps_of(p) * 8);
        L.phase_taps = gradref__ws_take(&at, (size_t)taps_of(p) * 4 * 8);
        L.tap_at = gradref__ws_take(&at, (size_t)(taps_of(p) + 1) * 8);
        L.residues = gradref__ws_take(&at, (size_t)(p->K[0] + p->K[1] + p->K[2]) * 8);
    }
    staging_of(p, &L);
    L.diff_plane = pixels(p->O) + (planes_alias(p, L.path, pixels(p->O)) ? STAGED_PLANE_GAP : 0);
    if (L.stage_diff) L.diff32 = gradref__ws_take(&at, in_slabs * (size_t)L.diff_plane * 4);
    if (L.acc_buffer) L.acc = gradref__ws_take(&at, out_slabs * (size_t)pixels(p->I) * 4);
    if (L.path == CBD_PATH_GEMM) {
        size_t per = 0;
        gradref__ws_take(&per, gradref__sgemm_work_bytes());
        L.chunk_at = gradref__ws_take(&per, (size_t)GRADREF__CBD_CHUNK_FLOATS * 4);
        L.offsets_at = gradref__ws_take(&per, (size_t)taps_of(p) * 2 * sizeof(int64_t));
        L.packed_tiles = pack_tiles(p) ? gradref__cbd_packed_run(taps_of(p) * p->OCpg) : 0;
        L.masks_at = gradref__ws_take(
            &per, (size_t)((GRADREF__CBD_TILE_GROUP + L.packed_tiles) * 2 * taps_of(p)) *
                      sizeof(uint16_t));
        L.masks_key_at = gradref__ws_take(&per, 3 * sizeof(int64_t));
        if (L.private_panels)
            L.panels_at = gradref__ws_take(&per, (size_t)(p->G * L.group_floats) * 4);
        L.tile_group = GRADREF__CBD_TILE_GROUP;
        if (L.packed_tiles)
            L.tile_at =
                gradref__ws_take(&per, (size_t)(L.packed_tiles * taps_of(p) * p->OCpg) * 128);
        L.per_thread = per;
        L.thread0 = at;
        at += per * (size_t)threads;
    }
    if (L.path == CBD_PATH_DEPTHWISE) {
        L.per_thread = depthwise_per_thread(p, &L);
        L.thread0 = at;
        at += L.per_thread * (size_t)threads;
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
    const cbd_layout L = layout_of(p, precision, 1);
    if (L.path != CBD_PATH_GEMM || p->ICpg == 0) return threads; /* a plane an item */
    /* the fewest rows a panel can have: the channels spread evenly over mr-row panels */
    const int64_t mr = gradref__sgemm_mr(p->max_isa), np = (p->ICpg + mr - 1) / mr;
    const int64_t icb = channel_block(p, threads, (p->ICpg + np - 1) / np);
    const int64_t items = p->N * p->G * ((p->ICpg + icb - 1) / icb);
    return gradref__team(items, threads);
}

/* a[((g * ICpg + ic) * T + t) * OCpg + oc] = W[g, oc, ic, tap t] as f32 (taps in stored
 * order); returns 0 when a value is not finite. */
typedef struct filter_pack {
    const gradref__cbd_plan *p;
    float *a;
    int finite; /* cleared by a part that met a value that is not finite */
    /* depthwise by lanes: the rows of its blocks copied again into lanes_w by tap (the
     * geometry's order), then channel */
    const gradref__cbd_dw_lanes *lanes;
    float *lanes_w;
    int64_t lanes_rows, planes;
    float *cl_w; /* channels-last depthwise: the filter in dw_cl_row's order instead (or NULL) */
} filter_pack;

/* pack_filter's rows [b, e) (g, ic). */
static void pack_filter_rows(const void *arg, int64_t b, int64_t e) {
    filter_pack *f = (filter_pack *)(uintptr_t)arg; /* each part writes its own rows */
    const gradref__cbd_plan *p = f->p;
    int finite = 1;
    if (f->cl_w) { /* its own order only */
        if (!gradref__cbd_cl_weights(p, b, e, f->cl_w))
            __atomic_store_n(&f->finite, 0, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t r = b; r < e; r++) {
        const int64_t base = r / p->ICpg * p->fs[0] + r % p->ICpg * p->fs[2];
        float *row = f->a + r * taps_of(p) * p->OCpg;
        /* the taps in stored order, their offsets by steps (not filter_offset's divisions) */
        for (int64_t k0 = 0; k0 < p->K[0]; k0++)
            for (int64_t k1 = 0; k1 < p->K[1]; k1++)
                for (int64_t k2 = 0; k2 < p->K[2]; k2++, row += p->OCpg) {
                    const int64_t off = base + k0 * p->fs[3] + k1 * p->fs[4] + k2 * p->fs[5];
                    for (int64_t oc = 0; oc < p->OCpg; oc++) {
                        row[oc] = filter_value(p, off + oc * p->fs[1]);
                        finite &= isfinite(row[oc]) != 0;
                    }
                }
    }
    for (int64_t r = b; r < e && r < f->lanes_rows; r++)
        for (int64_t t = 0; t < 9; t++)
            f->lanes_w[(r / f->planes * 9 + t) * f->planes + r % f->planes] =
                f->a[r * 9 + f->lanes->weight[t]];
    if (!finite) __atomic_store_n(&f->finite, 0, __ATOMIC_RELAXED);
}

static int pack_filter(const gradref__cbd_plan *p, float *a, const cbd_run *R, int threads) {
    const int64_t rows = p->G * p->ICpg;
    filter_pack f = {
        p, a, 1, R->dw_lanes, (float *)(uintptr_t)R->lanes_w, 0, 1, (float *)(uintptr_t)R->cl_w};
    if (R->dw_lanes) f.planes = R->k->dw_lanes_planes, f.lanes_rows = p->G / f.planes * f.planes;
    gradref__parallel_ranges(rows, rows * taps_of(p) * p->OCpg >= (INT64_C(1) << 15) ? threads : 1,
                             pack_filter_rows, &f); /* small: serial */
    return f.finite;
}

static void dense5(int64_t c, const int64_t *sp, int64_t *st) {
    st[4] = 1;
    st[3] = sp[2];
    st[2] = sp[1] * sp[2];
    st[1] = pixels(sp);
    st[0] = c * st[1];
}

/* Channels [g, g + c) of image n's diff as dense f32 planes at `to` (an item's own). */
static void planes_in(const cbd_run *R, int64_t n, int64_t g, int64_t c, float *to) {
    const gradref__cbd_plan *p = R->p;
    const int dense = dense_pixels(p->ds, p->O);
    const int64_t len = dense ? pixels(p->O) : p->O[2], rows = dense ? 1 : p->O[0] * p->O[1];
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t r = 0; r < rows; r++, to += len) {
            const int64_t at = n * p->ds[0] + (g + ch) * p->ds[1] + r / p->O[1] * p->ds[3] +
                               r % p->O[1] * p->ds[4];
            const void *row = p->diff + (size_t)at * p->in_size;
            if (p->in_dtype == GRADREF_F32)
                memcpy(to, row, (size_t)len * sizeof(float));
            else
                gradref__half_to_f32_array(R->arrays, p->in_dtype, row, to, (size_t)len);
        }
}

/* Dense f32 planes at `from` out to channels [g, g + c) of image n's grad. */
static void planes_out(const cbd_run *R, int64_t n, int64_t g, int64_t c, const float *from) {
    const gradref__cbd_plan *p = R->p;
    const int dense = dense_pixels(p->gs, p->I);
    const int64_t len = dense ? pixels(p->I) : p->I[2], rows = dense ? 1 : p->I[0] * p->I[1];
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t r = 0; r < rows; r++, from += len) {
            const int64_t at = n * p->gs[0] + (g + ch) * p->gs[1] + r / p->I[1] * p->gs[3] +
                               r % p->I[1] * p->gs[4];
            void *row = p->grad + (size_t)at * p->out_size;
            if (p->out_dtype == GRADREF_F32)
                memcpy(row, from, (size_t)len * sizeof(float));
            else
                gradref__f32_to_half_array(R->arrays, p->out_dtype, from, row, (size_t)len);
        }
}

/* The next channel's diff and grad planes prefetched when together they are at most
 * PREFETCH_PLANES_BYTES, unless the kernel table says otherwise: such planes follow one another
 * too quickly for the hardware prefetchers to ramp up, while larger ones are streams they
 * follow, and a burst of prefetches for them waits on the fill buffers. */
#define PREFETCH_PLANES_BYTES (INT64_C(16) << 10)
static void prefetch_next_planes(const cbd_run *R, int64_t n, int64_t g) {
    const gradref__cbd_plan *p = R->p;
    const int64_t next_g = g + 1 < p->G ? g + 1 : 0, next_n = g + 1 < p->G ? n : n + 1;
    const int64_t diff_bytes = R->dw.O[0] * R->dw.O[1] * R->dw.O[2] * 4,
                  grad_bytes = R->dw.I[0] * R->dw.I[1] * R->dw.I[2] * 4;
    if (next_n < p->N && !R->k->dw_no_prefetch &&
        diff_bytes + grad_bytes <= PREFETCH_PLANES_BYTES) {
        const char *diff = (const char *)(R->diff + next_n * R->dn + next_g * R->dc);
        const char *grad = (const char *)(R->acc + next_n * R->an + next_g * R->ac);
        for (int64_t o = 0; o < diff_bytes; o += 64)
            __builtin_prefetch(diff + o, 0, 3);
        for (int64_t o = 0; o < grad_bytes; o += 64)
            __builtin_prefetch(grad + o, 1, 3);
    }
}

/* One channel of one image, its diff and grad in place or through the item's planes (S). */
static void item_depthwise(const cbd_run *R, int64_t n, int64_t g, const cbd_scratch *S) {
    const gradref__cbd_plan *p = R->p;
    if (!S->dw_diff && !S->dw_grad) prefetch_next_planes(R, n, g);
    if (S->dw_diff) planes_in(R, n, g, 1, S->dw_diff);
    float *plane = S->dw_grad ? S->dw_grad : R->acc + n * R->an + g * R->ac;
    const float *w = R->apack + g * taps_of(p);
    const float *diff = S->dw_diff ? S->dw_diff : R->diff + n * R->dn + g * R->dc;
    if (unit_strides(p)
            ? gradref__cbd_depthwise_plane(R->k, &R->dw, w, diff, plane)
            : gradref__cbd_depthwise_strided(R->k, &R->dw, w, diff, plane, S->dw_phases))
        gradref__cbd_canon(p, plane, pixels(p->I));
    if (S->dw_grad) planes_out(R, n, g, 1, plane);
}

/* Depthwise item `it` by lanes (run_items): a block of channels of an image, or one channel
 * past its blocks; diff and grad as item_depthwise's. */
static void item_depthwise_lanes(const cbd_run *R, int64_t it, const cbd_scratch *S) {
    const gradref__cbd_plan *p = R->p;
    const int64_t planes = R->k->dw_lanes_planes, blocks = p->G / planes;
    const int64_t per_image = blocks + p->G % planes, n = it / per_image, b = it % per_image;
    if (b >= blocks) {
        item_depthwise(R, n, blocks * planes + b - blocks, S);
        return;
    }
    const int64_t g = b * planes; /* R->diff and R->acc are NULL where the item has planes */
    const float *diff = S->dw_diff ? S->dw_diff : R->diff + n * R->dn + g * R->dc;
    float *grad = S->dw_grad ? S->dw_grad : R->acc + n * R->an + g * R->ac;
    const int64_t dc = S->dw_diff ? pixels(p->O) : R->dc, gc = S->dw_grad ? pixels(p->I) : R->ac;
    if (S->dw_diff) planes_in(R, n, g, planes, S->dw_diff);
    const unsigned hit =
        R->k->dw_lanes(R->dw_lanes, R->lanes_w + b * 9 * planes, diff, dc, grad, gc);
    for (int64_t c = 0; c < planes; c++)
        if (hit >> c & 1u) gradref__cbd_canon(p, grad + c * gc, pixels(p->I));
    if (S->dw_grad) planes_out(R, n, g, planes, grad);
}

static void ref_part(const void *plan, int64_t begin, int64_t end) {
    gradref__cbd_ref_slabs(plan, begin, end);
}

/* diff as the kernels read it (staged to dense f32 when its dtype or layout asks for it) and
 * the f32 grad they write (grad itself, or the accumulator copied out at the end). */
static void bind_data(cbd_run *R, const cbd_layout *L, char *base, int threads) {
    const gradref__cbd_plan *p = R->p;
    const int64_t C_in = p->G * p->OCpg, C_out = p->G * p->ICpg;
    int64_t dst5[5], ast5[5];
    dense5(C_in, p->O, dst5);
    dense5(C_out, p->I, ast5);
    if (R->word_channels) { /* I8 always stages diff */
        gradref__cbd_stage_words(p, R->word_channels, (int32_t *)(void *)(base + L->diff32),
                                 threads);
        R->diff = (const float *)(base + L->diff32);
        R->dc = pixels(p->O);
        R->dn = p->G * R->ocpg * R->dc;
    } else if (L->stage_diff) {
        dst5[1] = L->diff_plane, dst5[0] = C_in * L->diff_plane;
        const int64_t s5[5] = {p->ds[0], p->ds[2], p->ds[3], p->ds[4], p->ds[5]};
        const int64_t shape[5] = {p->N, C_in, p->O[0], p->O[1], p->O[2]};
        gradref__copy5(shape, p->diff, p->in_dtype, s5, base + L->diff32, GRADREF_F32, dst5,
                       threads, p->max_isa);
        R->diff = (const float *)(base + L->diff32);
        R->dn = dst5[0];
        R->dc = dst5[1];
    } else if (L->dw_item_diff) { /* each item's own planes */
        R->diff = NULL;
        R->dn = R->dc = 0;
    } else {
        R->diff = (const float *)p->diff;
        R->dn = p->ds[0];
        R->dc = p->ds[2];
    }
    const int64_t images = (p->N - 1) * R->dn, channels = (p->G * R->ocpg - 1) * R->dc;
    R->span_lo = (images < 0 ? images : 0) + (channels < 0 ? channels : 0);
    R->span_hi = (images > 0 ? images : 0) + (channels > 0 ? channels : 0) + pixels(p->O);
    if (L->acc_buffer) {
        R->acc = (float *)(base + L->acc);
        R->an = ast5[0];
        R->ac = ast5[1];
    } else if (L->dw_item_grad) {
        R->acc = NULL;
        R->an = R->ac = 0;
    } else {
        R->acc = (float *)p->grad;
        R->an = p->gs[0];
        R->ac = p->gs[2];
    }
    /* a small image's diff stays in L2 after its first tiles: prefetching it is pure cost */
    R->prefetch_tiles = gradref__cbd_diff_past_l2(p);
}

/* The GEMM path's live phases and its panels' rows and offsets. */
static void plan_panels(cbd_run *R, const cbd_layout *L, char *base) {
    const gradref__cbd_plan *p = R->p;
    R->mr = R->pr = R->word_channels ? R->k->word_rows : gradref__sgemm_mr(R->max_isa);
    gradref__cbd_live_phases(R, (int64_t *)(base + L->residues));
    /* every phase that has taps runs direct tiles: the channels evenly over the panels (16
     * channels: 8 + 8 rows instead of 14 + 2; a 2-row tile has 4 FMA chains and waits on their
     * latency) */
    /* the phases' tap lists are built below: their space serves as scratch until then */
    if (gradref__cbd_all_direct(R, (int64_t *)(base + L->phase_taps))) {
        const int64_t np = (p->ICpg + R->mr - 1) / R->mr;
        R->pr = (p->ICpg + np - 1) / np;
    }
    gradref__cbd_panel_offsets(R, L, base);
}

/* run_items' split of the work items, which each member of the team reads. */
typedef struct items_team {
    const cbd_run *R;
    const cbd_layout *L;
    char *base;
    int64_t icb, blocks, items, next_item;
    int blocks_outer, team, claimed, finite;
} items_team;

static void run_items_member(void *arg) {
    items_team *c = arg;
    const cbd_run *R = c->R;
    const gradref__cbd_plan *p = R->p;
    const cbd_layout *L = c->L;
    char *mine = c->base + L->thread0 + L->per_thread * (size_t)gradref__thread_num();
    const cbd_scratch S = cbd_scratch_of(L, mine);
    cbd_run own; /* R with this thread's panels, when they are private */
    int finite = 1;
    if (L->path == CBD_PATH_GEMM) {
        S.masks_key[0] = -1; /* no masks yet */
        if (L->private_panels) {
            own = *R;
            own.panels = (const float *)(void *)(mine + L->panels_at);
            R = &own;
        }
        finite = gradref__cbd_pack_panels(R, L->private_panels);
        if (!finite) {
            GRADREF__OMP(omp atomic write)
            c->finite = 0;
        }
        if (c->team > 1 && !L->private_panels) {
            GRADREF__OMP(omp barrier)
            finite = c->finite;
        }
    }
    int64_t b = 0, e = finite ? c->items : 0;
    if (!c->claimed) gradref__my_range(e, &b, &e);
    for (int64_t it = c->claimed ? gradref__claim(&c->next_item) : b; it < e;
         it = c->claimed ? gradref__claim(&c->next_item) : it + 1) {
        const int64_t n = c->blocks_outer ? it / p->G % p->N : it / (p->G * c->blocks);
        const int64_t g = c->blocks_outer ? it % p->G : it / c->blocks % p->G;
        const int64_t ic0 = (c->blocks_outer ? it / (p->N * p->G) : it % c->blocks) * c->icb;
        const int64_t ic1 = ic0 + c->icb < p->ICpg ? ic0 + c->icb : p->ICpg;
        if (R->cl_w)
            gradref__cbd_cl_item(R, it, S.dw_ring);
        else if (R->dw_lanes)
            item_depthwise_lanes(R, it, &S);
        else if (L->path == CBD_PATH_DEPTHWISE)
            item_depthwise(R, n, g, &S);
        else
            gradref__cbd_item_gemm(R, n, g, ic0, ic1, &S);
    }
}

/* Every work item (n, g, ic block) over the threads, the GEMM path's panels packed first by
 * the team. Returns 0 when the filter held a value that is not finite (nothing then ran). */
static int run_items(const cbd_run *R, const cbd_layout *L, char *base, int threads) {
    const gradref__cbd_plan *p = R->p;
    items_team c;
    memset(&c, 0, sizeof c);
    c.R = R, c.L = L, c.base = base, c.finite = 1;
    /* Blocks of equal size go outermost: a thread's items then share its blocks' panels, which
     * it packed itself when there is one group and one phase, so that no panel line moves
     * between the cores call after call; unequal ones would leave the threads unequal work. */
    c.icb = L->path == CBD_PATH_GEMM ? channel_block(p, threads, R->pr) : p->ICpg;
    c.blocks = (p->ICpg + c.icb - 1) / c.icb;
    c.items = p->N * p->G * c.blocks;
    if (R->dw_lanes) /* an image's blocks of channels by lanes, then its channels left over */
        c.items = p->N * (p->G / R->k->dw_lanes_planes + p->G % R->k->dw_lanes_planes);
    if (R->cl_w) c.items = gradref__cbd_cl_items(R);
    c.blocks_outer = c.blocks > 1 && p->ICpg % c.icb == 0;
    c.team = gradref__team(c.items, threads);
    /* many GEMM items: each thread claims the next one, so that a slower core (a busy virtual
     * CPU) takes fewer; few: the static split, which keeps blocks_outer's panels on the thread
     * that packed them. Depthwise items, a plane each, keep theirs: each prefetches the next,
     * which a claimed order would not reach. */
    c.claimed = L->path == CBD_PATH_GEMM && c.items >= 4 * (int64_t)c.team;
    gradref__run_team(c.team, run_items_member, &c);
    return c.finite;
}

/* The f32 accumulator (dense) out to grad in its dtype and layout. */
static void store_grad(const gradref__cbd_plan *p, const float *acc, int threads) {
    if (p->in_dtype == GRADREF_I8) {
        gradref__cbd_store_int(p, acc, NULL, threads);
        return;
    }
    int64_t ast5[5];
    dense5(p->G * p->ICpg, p->I, ast5);
    const int64_t g5[5] = {p->gs[0], p->gs[2], p->gs[3], p->gs[4], p->gs[5]};
    const int64_t shape[5] = {p->N, p->G * p->ICpg, p->I[0], p->I[1], p->I[2]};
    gradref__copy5(shape, acc, GRADREF_F32, ast5, p->grad, p->out_dtype, g5, threads, p->max_isa);
}

static void run_init(cbd_run *R, const gradref__cbd_plan *p) {
    memset(R, 0, sizeof *R);
    R->p = p;
    R->max_isa = p->max_isa;
    R->k = gradref__cbd_kernels_for(p->max_isa);
    R->arrays = gradref__array_kernels_for(p->max_isa);
    R->ocpg = p->OCpg;
}

/* R for I8 by words (cbd_int8.c) on a path of plan p; returns whether they run: the kernel
 * table has word tiles and every phase runs direct tiles. residues: K0 + K1 + K2 slots, tap:
 * 4 per tap. */
static int words_plan(cbd_run *R, const gradref__cbd_plan *p, int path, int64_t *residues,
                      int64_t *tap) {
    run_init(R, p);
    if (p->in_dtype != GRADREF_I8 || path != CBD_PATH_GEMM || !R->k->word_tile32) return 0;
    R->word_channels = R->k->word_channels;
    R->ocpg = (p->OCpg + R->word_channels - 1) / R->word_channels;
    R->mr = R->k->word_rows;
    gradref__cbd_live_phases(R, residues);
    return gradref__cbd_all_direct(R, tap);
}

/* I8 by words where they run (words_plan): int32 sums, exact in one part, stored into grad.
 * Returns 0, having done nothing, otherwise. */
static int run_words(const gradref__cbd_plan *p, const cbd_layout *L, char *base, int threads) {
    cbd_run R;
    if (!words_plan(&R, p, L->path, (int64_t *)(base + L->residues),
                    (int64_t *)(base + L->phase_taps)))
        return 0;
    bind_data(&R, L, base, threads);
    plan_panels(&R, L, base);
    run_items(&R, L, base, threads); /* the words are never tested for finiteness */
    gradref__cbd_store_int(p, NULL, (const int32_t *)(const void *)R.acc, threads);
    return 1;
}

/* Plan p's items with its workspace at base (cbd_layout L), into grad or the accumulator (*acc).
 * Returns 0 when the filter held a value that is not finite (nothing then ran). */
static int run_plan(const gradref__cbd_plan *p, const cbd_layout *L, char *base, int threads,
                    float **acc) {
    cbd_run R;
    gradref__cbd_dw_lanes lanes;
    run_init(&R, p);
    if (L->path == CBD_PATH_DEPTHWISE) {
        R.dw = gradref__cbd_dw_shape_of(p);
        R.apack = (const float *)(base + L->apack);
        if (L->lanes_w && gradref__cbd_dw_lanes_of(&R.dw, &lanes))
            R.dw_lanes = &lanes, R.lanes_w = (const float *)(base + L->lanes_w);
        if (L->channels_last)
            R.cl_w = (const float *)(base + L->apack), gradref__cbd_cl_plan(p, threads, &R);
        if (!pack_filter(p, (float *)(base + L->apack), &R, threads)) return 0;
    }
    bind_data(&R, L, base, threads);
    if (L->path == CBD_PATH_GEMM) plan_panels(&R, L, base);
    *acc = R.acc;
    return run_items(&R, L, base, threads);
}

typedef struct fold_ctx {
    const gradref__cbd_plan *p;
    const float *acc; /* a part's sums: (image, channel of group g, pixel) */
    int32_t *sums;    /* (image, channel, pixel) */
    int64_t g;
    int first;
} fold_ctx;

static void fold_slabs(const void *arg, int64_t s0, int64_t s1) {
    const fold_ctx *c = arg;
    const gradref__cbd_plan *p = c->p;
    const int64_t px = pixels(p->I);
    for (int64_t s = s0; s < s1; s++) {
        const int64_t n = s / p->ICpg, ic = s % p->ICpg;
        gradref__cbd_fold_sums(c->acc + s * px, px, c->first,
                               c->sums + ((n * p->G + c->g) * p->ICpg + ic) * px);
    }
}

/* I8 past one part (cbd_int8.c): each group's output channels `part` at a time, a plan of one
 * group with its workspace past the sums, its exact f32 sums added into the int32 ones. */
static void run_int8_parts(const gradref__cbd_plan *p, const cbd_layout *L, char *base,
                           int64_t part, int threads) {
    int32_t *sums = (int32_t *)(void *)(base + L->sums);
    for (int64_t g = 0; g < p->G; g++)
        for (int64_t oc0 = 0; oc0 < p->OCpg; oc0 += part) {
            gradref__cbd_plan q = *p;
            q.G = 1;
            q.OCpg = p->OCpg - oc0 < part ? p->OCpg - oc0 : part;
            q.int8_part = 1;
            q.filter += (size_t)(g * p->fs[0] + oc0 * p->fs[1]) * p->in_size;
            q.diff += (size_t)(g * p->ds[1] + oc0 * p->ds[2]) * p->in_size;
            q.grad += (size_t)(g * p->gs[1]) * p->out_size;
            const cbd_layout Lq = layout_of(&q, q.precision, threads);
            float *acc;
            run_plan(&q, &Lq, base + L->parts, threads, &acc); /* an I8 filter is finite */
            const fold_ctx c = {p, acc, sums, g, oc0 == 0};
            gradref__parallel_ranges(p->N * p->ICpg, threads, fold_slabs, &c);
        }
    gradref__cbd_store_int(p, NULL, sums, threads);
}

static void fast_run(const gradref__cbd_plan *p, void *ws, int threads) {
    const int64_t slabs = p->N * p->G * p->ICpg;
    if (slabs == 0 || pixels(p->I) == 0) return;
    const cbd_layout L = layout_of(p, p->precision, threads);
    char *base = (char *)ws;
    if (run_words(p, &L, base, threads)) return;
    const int64_t part = p->in_dtype == GRADREF_I8 && L.path != CBD_PATH_REFERENCE
                             ? gradref__cbd_int8_part(p, threads)
                             : p->OCpg;
    if (L.path != CBD_PATH_REFERENCE && part > 0 && part < p->OCpg) {
        run_int8_parts(p, &L, base, part, threads);
        return;
    }
    float *acc;
    /* the GEMM path reads the filter into its panels inside the region */
    if (L.path == CBD_PATH_REFERENCE || part == 0 || !run_plan(p, &L, base, threads, &acc)) {
        gradref__parallel_ranges(slabs, threads, ref_part, p); /* slabs split over the threads */
        return;
    }
    if (L.acc_buffer) store_grad(p, acc, threads);
}

void gradref__cbd_fast(const gradref__cbd_plan *p, void *ws, int threads) {
    gradref__cbd_run_signed_zeros(p, threads, fast_run, ws);
}

/* ---------------------------------------------------------------- the strategy table */

static void megengine_part(const void *plan, int64_t begin, int64_t end) {
    gradref__cbd_megengine_items(plan, begin, end);
}

static void megengine_lanes_part(const void *plan, int64_t begin, int64_t end) {
    const gradref__cbd_plan *p = plan;
    gradref__cbd_megengine_lanes(p, gradref__cbd_kernels_for(p->max_isa), begin, end);
}

static const char *megengine_skip(const void *plan, int32_t precision) {
    (void)plan;
    return precision == GRADREF_PRECISION_MEGENGINE_DEFAULT
               ? NULL
               : "the precision is not MEGENGINE_DEFAULT";
}

static const char *megengine_lanes_skip(const void *plan, int32_t precision) {
    const gradref__cbd_plan *p = plan;
    if (precision != GRADREF_PRECISION_MEGENGINE_DEFAULT) return megengine_skip(plan, precision);
    return gradref__cbd_megengine_by_lanes(p, gradref__cbd_kernels_for(p->max_isa))
               ? NULL
               : "no lanes kernel at this level, or more taps or a wider row than it takes";
}

/* MegEngine's DEFAULT by lanes, each element's chain whole: items (n, g, channel block). */
static void megengine_lanes_run(const void *plan, void *ws, int threads) {
    const gradref__cbd_plan *p = plan;
    (void)ws;
    const int64_t blocks = (p->ICpg + GRADREF__CBD_ME_CHANNELS - 1) / GRADREF__CBD_ME_CHANNELS;
    gradref__parallel_ranges(p->N * p->G * blocks, threads, megengine_lanes_part, p);
    gradref__canon_nans(&p->out_desc, threads, p->max_isa); /* it accumulates in grad's dtype */
}

/* MegEngine's DEFAULT by its scatter: items (n, g). */
static void megengine_scatter_run(const void *plan, void *ws, int threads) {
    const gradref__cbd_plan *p = plan;
    (void)ws;
    gradref__parallel_ranges(p->N * p->G, threads, megengine_part, p);
    gradref__canon_nans(&p->out_desc, threads, p->max_isa);
}

/* Why the f32 kernels cannot give the plan's bits at this precision, or NULL. */
static const char *f32_skip(const gradref__cbd_plan *p, int32_t precision) {
    if (p->terms) return "the GRADREF_TERM_* outputs come from the reference loop";
    if (precision == GRADREF_PRECISION_MEGENGINE_DEFAULT)
        return "MEGENGINE_DEFAULT accumulates in grad's own dtype";
    if (layout_of(p, precision, 1).path == CBD_PATH_REFERENCE)
        return "F64, or a precision that asks for the reference loop's order";
    return NULL;
}

static const char *depthwise_skip(const void *plan, int32_t precision) {
    const char *why = f32_skip(plan, precision);
    if (why) return why;
    return layout_of(plan, precision, 1).path == CBD_PATH_DEPTHWISE
               ? NULL
               : "not depthwise with at most 64 row taps (strided: 256 taps, each stride "
                 "phase's first tap within the padding)";
}

static const char *depthwise_variant(const void *plan, int32_t precision, int threads) {
    const cbd_layout L = layout_of(plan, precision, threads);
    return L.channels_last ? "depthwise_channels_last"
           : L.lanes_w     ? "depthwise_lanes"
                           : "depthwise";
}

static const char *phases_skip(const void *plan, int32_t precision) {
    const char *why = f32_skip(plan, precision);
    if (why) return why;
    return layout_of(plan, precision, 1).path == CBD_PATH_GEMM ? NULL : "depthwise rows apply";
}

/* The channels of a word the I8 plan p runs by (words_plan, its arrays on the heap), or 0. */
static int word_channels_of(const gradref__cbd_plan *p, int32_t precision) {
    const int64_t slots = p->K[0] + p->K[1] + p->K[2];
    int64_t *scratch = malloc((size_t)(slots + 4 * taps_of(p)) * sizeof *scratch);
    cbd_run R;
    const int words =
        scratch && words_plan(&R, p, layout_of(p, precision, 1).path, scratch, scratch + slots);
    free(scratch);
    return words ? R.word_channels : 0;
}

static const char *phases_variant(const void *plan, int32_t precision, int threads) {
    const gradref__cbd_plan *p = plan;
    const int word_channels = p->in_dtype == GRADREF_I8 ? word_channels_of(p, precision) : 0;
    if (word_channels) return word_channels == 2 ? "int8_pairs" : "int8_quads";
    if (p->in_dtype == GRADREF_I8 && gradref__cbd_int8_part(p, threads) < p->OCpg)
        return "int8_parts";
    return layout_of(p, precision, threads).tile_at ? "phases_packed_tiles" : "phases";
}

static size_t fast_workspace(const void *plan, int32_t precision, int threads) {
    return gradref__cbd_fast_workspace(plan, precision, threads);
}

static int fast_threads(const void *plan, int32_t precision, int threads) {
    return gradref__cbd_fast_threads(plan, precision, threads);
}

static void fast_row(const void *plan, void *ws, int threads) {
    gradref__cbd_fast(plan, ws, threads);
}

static const char *direct_skip(const void *plan, int32_t precision) {
    const char *why = f32_skip(plan, precision);
    if (why) return why;
    return gradref__cbd_direct_fits(plan) ? NULL
                                          : "more taps than the stack holds, or a filter value "
                                            "that is not finite";
}

static void direct_body(const gradref__cbd_plan *p, void *unused, int threads) {
    (void)unused;
    const int64_t part = p->in_dtype == GRADREF_I8 ? gradref__cbd_int8_part(p, threads) : p->OCpg;
    if (part > 0)
        gradref__cbd_direct(p, part, threads);
    else /* no part of I8 sums is exact in f32 */
        gradref__parallel_ranges(p->N * p->G * p->ICpg, threads, ref_part, p);
}

/* The fast path's GEMMs with stack buffers (cbd_direct.c): no workspace. */
static void direct_run(const void *plan, void *ws, int threads) {
    (void)ws;
    gradref__cbd_run_signed_zeros(plan, threads, direct_body, NULL);
}

/* The reference loop, grad slabs split over the threads. */
static void reference_run(const void *plan, void *ws, int threads) {
    const gradref__cbd_plan *p = plan;
    (void)ws;
    gradref__parallel_ranges(p->N * p->G * p->ICpg, threads, ref_part, p);
}

const gradref__strategy gradref__cbd_strategies[GRADREF__CBD_STRATEGIES] = {
    {"megengine_lanes", megengine_lanes_skip, NULL, NULL, megengine_lanes_run, NULL},
    {"megengine_scatter", megengine_skip, NULL, NULL, megengine_scatter_run, NULL},
    {"depthwise", depthwise_skip, fast_workspace, fast_threads, fast_row, depthwise_variant},
    {"phases", phases_skip, fast_workspace, fast_threads, fast_row, phases_variant},
    {"direct", direct_skip, NULL, NULL, direct_run, NULL},
    {"reference", NULL, NULL, NULL, reference_run, NULL},
};
