/* SPDX-License-Identifier: Apache-2.0 */
/* The fast path's driver: workspace layout, staging of 16-bit inputs, the three passes over
 * OpenMP (gs3d_fast.h), and the final rounding of the dx accumulator. */
#include <math.h>
#include <string.h>

#include "common/copy.h"
#include "common/convert.h"
#include "common/exec.h"
#include "common/nan.h"
#include "common/tensor.h"
#include "gs3d_fast.h"
#include "gs3d_kernels.h"

#define GS_T            float
#define GS_A            float
#define GS_FN(f)        f##_ff
#define GS_REC          gs3d_record_f
#define GS_PLANE_KERNEL gradref__gs3d_dx_plane_f32
#include "gs3d_fast_impl.h"
#undef GS_T
#undef GS_A
#undef GS_FN
#undef GS_PLANE_KERNEL

#define GS_T     float
#define GS_A     double
#define GS_FN(f) f##_fd
#include "gs3d_fast_impl.h"
#undef GS_T
#undef GS_A
#undef GS_FN

#undef GS_REC
#define GS_T     double
#define GS_A     double
#define GS_FN(f) f##_dd
#define GS_REC   gs3d_record_d
#include "gs3d_fast_impl.h"
#undef GS_T
#undef GS_A
#undef GS_FN
#undef GS_REC

/* Below this many point-channels one thread does it all. */
#define PARALLEL_MIN_WORK (INT64_C(1) << 15)

enum { PAIR_FF, PAIR_FD, PAIR_DD };

/* Byte offsets of each workspace part (all 64-byte aligned). */
typedef struct ws_layout {
    size_t w, dist, mult, offx, offa, zplane, offg, mask; /* geometry */
    size_t records, start, counts;                        /* dx buckets */
    size_t x32, grad32;                                   /* f32 copies of inputs */
    size_t planes, plane_bytes; /* dx accumulator planes, when not dx: per thread, last */
    size_t vox, slots, later, over, block_start; /* nearest: the voxel index */
    size_t stage, stage_bytes;                   /* nearest: per thread, last */
    size_t total;
    int pair, acc_buffer, stage_x, stage_grad, scatter, voxels, buckets;
} ws_layout;

static int64_t numel5(const int64_t *shape) {
    return shape[0] * shape[1] * shape[2] * shape[3] * shape[4];
}

static void x_shape(const gradref__gs3d_plan *p, int64_t *s) {
    s[0] = p->N, s[1] = p->C, s[2] = p->D, s[3] = p->H, s[4] = p->W;
}

static void grad_shape(const gradref__gs3d_plan *p, int64_t *s) {
    s[0] = p->N, s[1] = p->C, s[2] = p->Do, s[3] = p->Ho, s[4] = p->Wo;
}

static gs3d_shape shape_of(const gradref__gs3d_plan *p) {
    gs3d_shape s;
    s.N = p->N, s.C = p->C, s.D = p->D, s.H = p->H, s.W = p->W, s.Ho = p->Ho, s.Wo = p->Wo;
    s.interp = p->interp, s.padding = p->padding, s.align_corners = p->align_corners;
    s.dtype = p->dtype, s.elem_size = p->elem_size;
    s.grid = p->grid, s.dgrid = p->dgrid;
    return s;
}

void gradref__gs3d_plane_out(const gs3d_run *r, const void *plane, int wide, int64_t n, int64_t z) {
    const gradref__gs3d_plan *p = r->p;
    const int64_t shape[5] = {1, p->C, 1, p->H, p->W}, ps[5] = {0, 1, 0, r->a.as[3], r->a.as[4]};
    char *dst = p->dx.data + (size_t)(n * p->dx.s[0] + z * p->dx.s[2]) * p->elem_size;
    const size_t dx_bytes = (size_t)(p->N * p->C * p->D * p->H * p->W) * p->elem_size;
    gradref__copy5_part(shape, plane, wide ? GRADREF_F64 : GRADREF_F32, ps, dst, p->dtype, p->dx.s,
                        dx_bytes, 1, p->max_isa);
}

int gradref__gs3d_dx_plane_f32(const gs3d_run *r, const gs3d_record_f *rec, int64_t count,
                               float *plane, const float *gn) {
    if (r->k->dx_plane == NULL || r->a.as[1] != 1 || r->a.gs[1] != 1) return 0;
    r->k->dx_plane(&r->a, rec, count, plane, gn);
    return 1;
}

/* Nearest mode's AVX-512 path for channel-major data: dx itself (F32) takes 16 points of a
 * channel per gather-add-scatter, with no copies and no buckets (gs3d_kernels.h). */
static int nearest_scatter_fits(const gradref__gs3d_plan *p, int32_t precision) {
    const int64_t *g = p->grad.s, *d = p->dx.s;
    const int64_t reach = (p->D - 1) * d[2] + (p->H - 1) * d[3] + (p->W - 1) * d[4];
    return p->interp == GRADREF_INTERP_NEAREST && p->dx.data != NULL && p->dtype == GRADREF_F32 &&
           precision == GRADREF_PRECISION_DEFAULT && p->C > 1 && d[1] != 1 && g[4] == 1 &&
           g[3] == p->Wo && g[2] == p->Ho * p->Wo && reach < INT64_C(0x7fffffff) &&
           gradref__gs3d_kernels_for(p->max_isa)->nearest_dx != NULL;
}

/* Nearest: image n's voxel index (gs3d_voxels): one pass over the points in order, then the
 * later points sorted (stably) by voxel block. */
static void build_voxels(const gs3d_run *r, int64_t n) {
    const gradref__gs3d_plan *p = r->p;
    const int64_t V = p->D * p->H * p->W, P = r->a.P, lead = r->a.v.lead;
    const int64_t blocks = gs3d_voxel_blocks(V, lead);
    int32_t *slots = r->a.v.slots + n * 2 * V;
    const int32_t *later = r->a.v.later + n * 2 * P;
    const int32_t none = gs3d_no_point(P);
    for (int64_t i = 0; i < 2 * V; i++)
        slots[i] = none;
    const int64_t count = r->k->voxel_slots(&r->a, n);
    int32_t *start = r->a.v.block_start + n * (blocks + 1), *over = r->a.v.over + n * 2 * P;
    memset(start, 0, (size_t)(blocks + 1) * sizeof *start);
    for (int64_t e = 0; e < count; e++)
        start[gs3d_voxel_block(later[2 * e], lead) + 1]++;
    for (int64_t b = 0; b < blocks; b++)
        start[b + 1] += start[b];
    for (int64_t e = 0; e < count; e++) { /* start[b] runs to block b's end */
        const int32_t at = start[gs3d_voxel_block(later[2 * e], lead)]++;
        over[2 * at] = later[2 * e];
        over[2 * at + 1] = later[2 * e + 1];
    }
    memmove(start + 1, start, (size_t)blocks * sizeof *start);
    start[0] = 0;
}

/* Whether the grid has no point. Test this before multiplying sizes: an empty tensor's other
 * sizes are unchecked (x's spatial sizes are positive, checked), so a product taken across a
 * zero may overflow before it reaches the zero. With N, C and the grid's sizes positive, every
 * product of sizes below is within x's, grad's or the grid's element count. */
static int no_points(const gradref__gs3d_plan *p) {
    return p->N == 0 || p->Do == 0 || p->Ho == 0 || p->Wo == 0;
}

/* Whether grad with strides s is dense over the points of each (n, c). */
static int points_dense(const gradref__gs3d_plan *p, const int64_t *s) {
    return s[4] == 1 && s[3] == p->Wo && s[2] == p->Ho * p->Wo;
}

/* The per-point geometry arrays and dx's buckets. A voxel index (nearest into dense planes)
 * reads only each point's voxel, and the scatter paths no bucket. */
static void take_geometry(ws_layout *L, size_t *at, const gradref__gs3d_plan *p, int threads) {
    const size_t np = (size_t)(p->N * p->Do * p->Ho * p->Wo), t = L->pair == PAIR_DD ? 8 : 4;
    if (L->voxels) return;
    L->w = gradref__ws_take(at, np * 8 * t);
    L->dist = gradref__ws_take(at, np * 6 * t);
    L->mult = gradref__ws_take(at, np * 3 * t);
    L->offx = gradref__ws_take(at, np * 8);
    L->offa = gradref__ws_take(at, np * 8);
    L->zplane = gradref__ws_take(at, np * 8);
    L->offg = gradref__ws_take(at, np * 8);
    L->mask = gradref__ws_take(at, np + 8); /* the AVX2 kernel reads 8 masks at a time */
    L->buckets = p->dx.data != NULL && !L->scatter;
    if (L->buckets) {
        size_t rec = L->pair == PAIR_DD ? sizeof(gs3d_record_d) : sizeof(gs3d_record_f);
        L->records = gradref__ws_take(at, 2 * np * rec);
        L->start = gradref__ws_take(at, (size_t)(p->N * (p->D + 1)) * 8);
        L->counts =
            gradref__ws_take(at, (size_t)(threads > 1 ? threads : 1) * 3 * (size_t)p->D * 8);
    }
}

/* threads: how many per-thread parts to count in total (at least one). */
static ws_layout layout_of(const gradref__gs3d_plan *p, int32_t precision, int threads) {
    ws_layout L;
    memset(&L, 0, sizeof L);
    const int wide = p->dtype == GRADREF_F64 || precision == GRADREF_PRECISION_HIGH;
    L.pair = p->dtype == GRADREF_F64 ? PAIR_DD : wide ? PAIR_FD : PAIR_FF;
    if ((p->dx.data == NULL && p->dgrid.data == NULL) || no_points(p) || p->C == 0) return L;
    const size_t a = wide ? 8 : 4;
    L.scatter = nearest_scatter_fits(p, precision);
    /* nearest into dense dx planes: points grouped by voxel once per image, shared by the
     * channels (gs3d_voxels) */
    const int64_t V = p->D * p->H * p->W, P = p->Do * p->Ho * p->Wo;
    L.voxels = L.scatter && p->dx.s[4] == 1 && p->dx.s[3] == p->W && p->dx.s[2] == p->H * p->W &&
               V < INT64_C(0x7fffffff) &&
               GS3D_STAGE_CHANNELS * gs3d_zero_row(P) < INT64_C(0x7fffffff);
    size_t at = 0;
    take_geometry(&L, &at, p, threads);
    int64_t xs[5], gs[5];
    x_shape(p, xs);
    grad_shape(p, gs);
    const int narrow = p->dtype == GRADREF_F16 || p->dtype == GRADREF_BF16;
    /* The passes read and write whole channel rows: dgrid the 8 corners of a point in every
     * channel, dx a point's gradient into its corners. Channels-last keeps each in one or two
     * cache lines, so f32 copies are made that way (F16/BF16 are converted anyway). */
    if (p->dgrid.data != NULL && p->interp == GRADREF_INTERP_BILINEAR) {
        L.stage_x = narrow || (p->dtype == GRADREF_F32 && p->C > 1 && p->x.s[1] != 1);
        if (L.stage_x) L.x32 = gradref__ws_take(&at, (size_t)numel5(xs) * 4);
    }
    if (L.voxels) {
        const size_t n = (size_t)p->N;
        L.vox = gradref__ws_take(&at, n * (size_t)P * 4);
        L.slots = gradref__ws_take(&at, n * (size_t)V * 8);
        L.later = gradref__ws_take(&at, n * (size_t)P * 8);
        L.over = gradref__ws_take(&at, n * (size_t)P * 8);
        L.block_start = gradref__ws_take(&at, n * (size_t)(gs3d_voxel_blocks(V, 0) + 1) * 4);
    }
    /* F32 grad dense over the points needs no copy for dgrid (16 points of a channel are one
     * load there), only for dx, whose records take all channels of a point at a time */
    L.stage_grad =
        !L.scatter && (narrow || (p->dtype == GRADREF_F32 && p->C > 1 && p->grad.s[1] != 1 &&
                                  (p->dx.data != NULL || !points_dense(p, p->grad.s))));
    if (L.stage_grad) L.grad32 = gradref__ws_take(&at, (size_t)numel5(gs) * 4);
    /* dx accumulates in place when its type is the sum type and it is channels-last;
     * otherwise in a dense channels-last buffer copied out at the end */
    const int dx_channels_last = p->C == 1 || p->dx.s[1] == 1;
    L.acc_buffer = p->dx.data != NULL && !L.scatter &&
                   (narrow || (p->dtype == GRADREF_F32 && wide) || !dx_channels_last);
    /* one dense channels-last plane per thread, copied out to dx when its item is done */
    if (L.acc_buffer) L.plane_bytes = ((size_t)(p->H * p->W * p->C) * a + 63) & ~(size_t)63;
    if (L.voxels) L.stage_bytes = (size_t)gs3d_stage_floats(P) * 4; /* whole cache lines */
    L.stage = at;
    at += L.stage_bytes * (size_t)(threads > 1 ? threads : 1);
    L.planes = at;
    at += L.plane_bytes * (size_t)(threads > 1 ? threads : 1);
    L.total = at;
    return L;
}

/* With a NULL workspace a batch whose whole-batch workspace is large runs in groups of images,
 * each group a plan of its own (images are independent, so the bits do not change): the
 * allocation is then one group's, small enough for glibc to hand the same heap pages back call
 * after call (glibc serves blocks up to 32 MiB from its heap once one was freed; 31 MiB leaves
 * room for the block's alignment). A caller's workspace keeps the whole batch in one pass. */
#define GROUP_BYTES ((size_t)31 << 20)

int64_t gradref__gs3d_images_per_group(const gradref__gs3d_plan *p, int32_t precision,
                                       int threads) {
    if (p->N <= 1) return 1;
    gradref__gs3d_plan one = *p;
    one.N = 1;
    const size_t per_image = layout_of(&one, precision, threads).total;
    if (per_image == 0 || layout_of(p, precision, threads).total <= GROUP_BYTES) return p->N;
    const int64_t g = (int64_t)(GROUP_BYTES / per_image);
    return g < 1 ? 1 : g > p->N ? p->N : g;
}

/* Images [n0, n0 + count) of p as a plan of their own. */
static gradref__gs3d_plan images_of(const gradref__gs3d_plan *p, int64_t n0, int64_t count) {
    gradref__gs3d_plan q = *p;
    gradref__gs3d_view *v[5] = {&q.grad, &q.x, &q.grid, &q.dx, &q.dgrid};
    for (int i = 0; i < 5; i++)
        if (v[i]->data != NULL) v[i]->data += (size_t)(n0 * v[i]->s[0]) * p->elem_size;
    q.N = count;
    return q;
}

static int64_t group_of(const gradref__gs3d_plan *p) {
    return p->images_per_pass > 0 && p->images_per_pass < p->N ? p->images_per_pass : p->N;
}

size_t gradref__gs3d_fast_workspace(const gradref__gs3d_plan *p, int32_t precision, int threads) {
    const gradref__gs3d_plan group = images_of(p, 0, group_of(p));
    return layout_of(&group, precision, threads).total;
}

/* The NaN rule (common/nan.h) on the part of an output a work item wrote, at data with strides
 * s, on the calling thread: the scatter and the corner sums leave NaN signs and payloads to the
 * order of their operations. */
static void canon_part(void *data, int32_t dtype, const int64_t *shape, const int64_t *s,
                       int max_isa) {
    gradref_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = 5;
    memcpy(t.shape, shape, sizeof t.shape[0] * 5);
    memcpy(t.strides, s, sizeof t.strides[0] * 5);
    gradref__canon_nans(&t, 1, max_isa);
}

void gradref__gs3d_canon_plane(const gs3d_run *r, void *plane, int wide) {
    const gradref__gs3d_plan *p = r->p;
    const int64_t shape[5] = {1, p->C, 1, p->H, p->W};
    const int32_t dtype = wide ? GRADREF_F64 : GRADREF_F32;
    if (r->acc_planes)
        gradref__canon_nans_elems(dtype, plane, p->C * p->H * p->W, p->max_isa);
    else
        canon_part(plane, dtype, shape, r->a.as, p->max_isa);
}

static void zero_fill(const gradref__gs3d_view *v, int32_t dtype, const int64_t *shape,
                      int threads) {
    const double zero64 = 0.0;
    char zero[8];
    gradref__store_float(dtype, zero, zero64);
    const int64_t none[5] = {0, 0, 0, 0, 0};
    gradref__copy5(shape, zero, dtype, none, v->data, dtype, v->s, threads,
                   GRADREF__ISA_PORTABLE); /* a fill converts nothing */
}

/* The vector geometry kernels' conditions (gs3d_kernels.h): point q = (od * Ho + oh) * Wo + ow of
 * an image at q * s[3] in the grid and q * gs[4] in grad. A dim of size 1 (whose stride reads as
 * 0 after validation) constrains nothing; the points' own dim must be wider than 1 (or the image
 * one point). */
static int vector_geometry_fits(const gs3d_run *r) {
    const gradref__gs3d_plan *p = r->p;
    const int64_t *s = p->grid.s, *gs = r->a.gs, limit = INT64_C(1) << 24, plane = p->Ho * p->Wo;
    const int dense_grid =
        (p->Ho == 1 || s[2] == p->Wo * s[3]) && (p->Do == 1 || s[1] == plane * s[3]);
    const int dense_grad =
        (p->Ho == 1 || gs[3] == p->Wo * gs[4]) && (p->Do == 1 || gs[2] == plane * gs[4]);
    return p->dtype == GRADREF_F32 && p->padding != GRADREF_PAD_REFLECTION && dense_grid &&
           dense_grad && (p->Wo > 1 || r->a.P == 1) &&
           (r->a.P - 1) * s[3] + 2 * s[4] < INT64_C(0x7fffffff) && p->D < limit && p->H < limit &&
           p->W < limit;
}

/* Every offset an AVX2 gather forms fits in int32. */
static int gather_offsets_fit(const gs3d_run *r) {
    const gradref__gs3d_plan *p = r->p;
    const int64_t limit = INT64_C(0x7fffffff);
    int64_t xreach = (p->D - 1) * r->a.xs[2] + (p->H - 1) * r->a.xs[3] + (p->W - 1) * r->a.xs[4];
    int64_t corner = r->a.xs[2] + r->a.xs[3] + r->a.xs[4];
    int64_t greach = (p->Do - 1) * r->a.gs[2] + (p->Ho - 1) * r->a.gs[3] + (p->Wo - 1) * r->a.gs[4];
    return xreach + corner < limit && greach < limit;
}

static void run_geometry(const gs3d_run *r, int pair, int simd, int64_t b, int64_t e) {
    while (b < e) { /* image by image */
        const int64_t n = b / r->a.P, end = (n + 1) * r->a.P < e ? (n + 1) * r->a.P : e;
        int64_t i = b;
        if (simd) i += r->k->geometry16(&r->a, n, b - n * r->a.P, end - n * r->a.P);
        if (pair == PAIR_FF)
            geometry_ff(r, i, end);
        else if (pair == PAIR_FD)
            geometry_fd(r, i, end);
        else
            geometry_dd(r, i, end);
        b = end;
    }
}

static void run_dgrid(const gs3d_run *r, int pair, int simd, int64_t n, int64_t q0, int64_t q1) {
    int64_t q = q0;
    if (simd && r->k->dgrid16) q += r->k->dgrid16(&r->a, n, q, q1);
    if (simd && r->k->dgrid8) q += r->k->dgrid8(&r->a, n, q, q1);
    for (; q < q1; q++) {
        if (pair == PAIR_FF)
            dgrid_point_ff(r, n, q);
        else if (pair == PAIR_FD)
            dgrid_point_fd(r, n, q);
        else
            dgrid_point_dd(r, n, q);
    }
}

/* Image n's buckets, filled by the whole team (inside the region): each thread counts its
 * range of the points per plane, and after a barrier files them from where the ranges before
 * its own end, so every bucket holds its records in point order whatever the team. Counts
 * alternate between two arrays by image, so one barrier per image suffices. */
static void run_buckets(const gs3d_run *r, int pair, int64_t n) {
    const int64_t D = r->p->D, P = r->a.P;
    const int nearest = r->p->interp == GRADREF_INTERP_NEAREST;
    const int team = gradref__team_size(), me = gradref__thread_num();
    int64_t b, e;
    gradref__my_range(P, &b, &e);
    b += n * P, e += n * P;
    int64_t *mine = r->b.counts + (size_t)me * 3 * (size_t)D, *count = mine + n % 2 * D;
    memset(count, 0, (size_t)D * sizeof *count);
    for (int64_t i = b; i < e; i++) {
        const unsigned m = r->a.g.mask[i];
        if (m & 0x0fu) count[r->a.g.zplane[i]]++;
        if (!nearest && (m & 0xf0u)) count[r->a.g.zplane[i] + 1]++;
    }
    GRADREF__OMP(omp barrier)
    int64_t *cursor = mine + 2 * D, *start = r->b.start + n * (D + 1), at = 0;
    for (int64_t z = 0; z < D; z++) {
        if (me == 0) start[z] = at;
        for (int t = 0; t < team; t++) {
            if (t == me) cursor[z] = at;
            at += r->b.counts[(size_t)t * 3 * (size_t)D + (size_t)(n % 2 * D + z)];
        }
    }
    if (me == 0) start[D] = at;
    if (pair == PAIR_DD)
        bucket_fill_dd(r, n, b, e, cursor);
    else if (pair == PAIR_FD)
        bucket_fill_fd(r, n, b, e, cursor);
    else
        bucket_fill_ff(r, n, b, e, cursor);
}

static void run_dx(const gs3d_run *r, int pair, int64_t n, int64_t z) {
    if (pair == PAIR_FF)
        dx_item_ff(r, n, z);
    else if (pair == PAIR_FD)
        dx_item_fd(r, n, z);
    else
        dx_item_dd(r, n, z);
}

/* The geometry, bucket and voxel arrays of the run, carved from the workspace. */
static void bind_workspace(gs3d_run *r, const ws_layout *L, char *base) {
    const gradref__gs3d_plan *p = r->p;
    if (L->buckets) {
        r->b.records = base + L->records;
        r->b.start = (int64_t *)(base + L->start);
        r->b.counts = (int64_t *)(base + L->counts);
    }
    /* the parts a layout has not are left NULL (r was zeroed): their offsets would alias others */
    if (!L->voxels) {
        r->a.g.w = base + L->w;
        r->a.g.dist = base + L->dist;
        r->a.g.mult = base + L->mult;
        r->a.g.offx = (int64_t *)(base + L->offx);
        r->a.g.offa = (int64_t *)(base + L->offa);
        r->a.g.zplane = (int64_t *)(base + L->zplane);
        r->a.g.offg = (int64_t *)(base + L->offg);
        r->a.g.mask = (uint8_t *)(base + L->mask);
        memset(r->a.g.mask + p->N * r->a.P, 0, 8);
        return;
    }
    r->a.v.vox = (int32_t *)(base + L->vox);
    r->a.v.slots = (int32_t *)(base + L->slots);
    r->a.v.later = (int32_t *)(base + L->later);
    r->a.v.over = (int32_t *)(base + L->over);
    r->a.v.block_start = (int32_t *)(base + L->block_start);
    /* blocks of 16 voxels start where dx's cache lines do when every plane is aligned alike,
     * so that they can be streamed */
    const uintptr_t at = (uintptr_t)p->dx.data;
    r->a.v.stream = at % 4 == 0 && p->dx.s[1] % 16 == 0 && (p->N == 1 || p->dx.s[0] % 16 == 0);
    r->a.v.lead = r->a.v.stream ? (int64_t)((64 - at % 64) % 64 / 4) : 0;
}

/* x and grad as the kernels read them (staged channels-last f32 when the layout asks for
 * it), dx's accumulator, and the corner offsets. */
static void bind_tensors(gs3d_run *r, const ws_layout *L, char *base, const int64_t *xsh,
                         const int64_t *gsh, int threads) {
    const gradref__gs3d_plan *p = r->p;
    r->a.x = p->x.data;
    r->a.grad = p->grad.data;
    memcpy(r->a.xs, p->x.s, sizeof r->a.xs);
    memcpy(r->a.gs, p->grad.s, sizeof r->a.gs);
    if (L->stage_x) {
        gradref__channels_last_strides(xsh, r->a.xs);
        gradref__copy5(xsh, p->x.data, p->dtype, p->x.s, base + L->x32, GRADREF_F32, r->a.xs,
                       threads, p->max_isa);
        r->a.x = base + L->x32;
    }
    if (L->stage_grad) {
        gradref__channels_last_strides(gsh, r->a.gs);
        gradref__copy5(gsh, p->grad.data, p->dtype, p->grad.s, base + L->grad32, GRADREF_F32,
                       r->a.gs, threads, p->max_isa);
        r->a.grad = base + L->grad32;
    }
    r->a.grad_points_dense = points_dense(p, r->a.gs);
    if (p->dx.data != NULL) {
        if (L->acc_buffer) { /* plane-local strides: each item has its own plane */
            r->a.as[1] = 1, r->a.as[4] = p->C, r->a.as[3] = p->W * p->C,
            r->a.as[2] = r->a.as[0] = 0;
            r->a.acc = NULL;
            r->acc_planes = base + L->planes;
            r->acc_plane_bytes = L->plane_bytes;
        } else {
            memcpy(r->a.as, p->dx.s, sizeof r->a.as);
            r->a.acc = p->dx.data;
        }
    }
    for (int k = 0; k < 8; k++) {
        int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
        r->a.dx_corner[k] = dz * r->a.xs[2] + dy * r->a.xs[3] + dx * r->a.xs[4];
    }
    for (int j = 0; j < 4; j++)
        r->a.da_plane[j] = (j >> 1) * r->a.as[3] + (j & 1) * r->a.as[4];
}

/* The run dgrid reads: grad as the caller passed it when that is F32 and dense over the points
 * (a staged channels-last copy, made for dx, would be read through transposes). */
static gs3d_run dgrid_run_of(const gs3d_run *r) {
    const gradref__gs3d_plan *p = r->p;
    gs3d_run d = *r;
    if (p->dtype == GRADREF_F32 && !r->a.grad_points_dense && points_dense(p, p->grad.s)) {
        d.a.grad = p->grad.data;
        memcpy(d.a.gs, p->grad.s, sizeof d.a.gs);
        d.a.grad_points_dense = 1;
    }
    return d;
}

/* What the threads share out: the work items of each stage and the kernels picked. */
typedef struct gs3d_schedule {
    int pair, simd_dgrid, simd_geometry, dense_zero_dgrid;
    int64_t dx_per_image, dx_items, dgrid_per_image, dgrid_items;
} gs3d_schedule;

static gs3d_schedule schedule_of(const gs3d_run *r, const gs3d_run *rd, const ws_layout *L) {
    const gradref__gs3d_plan *p = r->p;
    gs3d_schedule s;
    memset(&s, 0, sizeof s);
    s.pair = L->pair;
    const int bilinear = p->interp == GRADREF_INTERP_BILINEAR;
    if (s.pair == PAIR_FF) {
        s.simd_dgrid = bilinear && (r->k->dgrid16 || r->k->dgrid8) && gather_offsets_fit(rd);
        s.simd_geometry = r->k->geometry16 && vector_geometry_fits(r);
    }
    /* nearest's dgrid, when dense, is cleared by the threads inside the region */
    const int64_t *gds = p->dgrid.s;
    s.dense_zero_dgrid = p->dgrid.data != NULL && !bilinear && gds[4] == 1 && gds[3] == 3 &&
                         gds[2] == 3 * p->Wo && gds[1] == 3 * p->Wo * p->Ho &&
                         (p->N == 1 || gds[0] == 3 * r->a.P);
    /* dx work: (image, plane) pairs, (image, channel) pairs for the scatter path, or (image,
     * channel block) pairs for the voxel path */
    s.dx_per_image = L->voxels    ? (p->C + GS3D_STAGE_CHANNELS - 1) / GS3D_STAGE_CHANNELS
                     : L->scatter ? p->C
                                  : p->D;
    s.dx_items = p->dx.data != NULL ? p->N * s.dx_per_image : 0;
    s.dgrid_per_image = (r->a.P + GS3D_POINT_BLOCK - 1) / GS3D_POINT_BLOCK;
    s.dgrid_items = p->dgrid.data != NULL && bilinear ? p->N * s.dgrid_per_image : 0;
    return s;
}

/* dx item `it`: a plane of an image, or with AVX-512 nearest a channel or a block of staged
 * channels. */
static void dx_item(const gs3d_run *r, const ws_layout *L, const gs3d_schedule *s, char *base,
                    int64_t it) {
    const int64_t n = it / s->dx_per_image, c = it % s->dx_per_image;
    if (L->voxels) { /* both need the table's nearest kernels (nearest_scatter_fits) */
        float *stage = (float *)(base + L->stage + L->stage_bytes * (size_t)gradref__thread_num());
        r->k->nearest_dx_voxels(&r->a, n, c * GS3D_STAGE_CHANNELS, stage);
        return;
    }
    if (L->scatter) {
        const gradref__gs3d_plan *p = r->p;
        const int64_t shape[5] = {1, 1, p->D, p->H, p->W};
        r->k->nearest_dx(&r->a, n, c);
        canon_part(p->dx.data + (size_t)(n * p->dx.s[0] + c * p->dx.s[1]) * p->elem_size, p->dtype,
                   shape, p->dx.s, p->max_isa);
        return;
    }
    run_dx(r, s->pair, n, c);
}

static void dgrid_item(const gs3d_run *r, const gs3d_schedule *s, int64_t it) {
    const int64_t n = it / s->dgrid_per_image, q0 = it % s->dgrid_per_image * GS3D_POINT_BLOCK;
    const int64_t q1 = q0 + GS3D_POINT_BLOCK < r->a.P ? q0 + GS3D_POINT_BLOCK : r->a.P;
    run_dgrid(r, s->pair, s->simd_dgrid, n, q0, q1);
    /* points q0..q1 of image n, as (point, 3) in the grid's point order (Wo fastest) */
    const gradref__gs3d_plan *p = r->p;
    const int64_t *d = p->dgrid.s;
    for (int64_t q = q0; q < q1;) { /* runs of points along Wo */
        const int64_t w = q % p->Wo, h = q / p->Wo % p->Ho, z = q / (p->Wo * p->Ho);
        const int64_t len = p->Wo - w < q1 - q ? p->Wo - w : q1 - q;
        const int64_t shape[5] = {1, 1, 1, len, 3}, st[5] = {0, 0, 0, d[3], d[4]};
        canon_part(p->dgrid.data +
                       (size_t)(n * d[0] + z * d[1] + h * d[2] + w * d[3]) * p->elem_size,
                   p->dtype, shape, st, p->max_isa);
        q += len;
    }
}

/* Inside the parallel region: geometry, then buckets/voxels, dgrid and the dgrid clear, then
 * dx, each stage split over the team. */
static void run_stages(const gs3d_run *r, const gs3d_run *rd, const ws_layout *L,
                       const gs3d_schedule *s, char *base) {
    const gradref__gs3d_plan *p = r->p;
    const int64_t NP = p->N * r->a.P;
    int64_t b, e;
    gradref__my_range(NP, &b, &e);
    run_geometry(r, s->pair, s->simd_geometry, b, e);
    GRADREF__OMP(omp barrier)
    for (int64_t n = 0; s->dx_items > 0 && !L->scatter && n < p->N; n++)
        run_buckets(r, s->pair, n);
    gradref__my_range(s->dx_items > 0 && L->voxels ? p->N : 0, &b, &e);
    for (int64_t n = b; n < e; n++)
        build_voxels(r, n);
    gradref__my_range(s->dense_zero_dgrid ? NP * 3 : 0, &b, &e); /* +0 is all zero bytes */
    if (b < e) memset(p->dgrid.data + (size_t)b * p->elem_size, 0, (size_t)(e - b) * p->elem_size);
    GRADREF__OMP(omp for schedule(dynamic, 2) nowait)
    for (int64_t it = 0; it < s->dgrid_items; it++)
        dgrid_item(rd, s, it);
    GRADREF__OMP(omp barrier)
    gradref__my_range(s->dx_items, &b, &e);
    for (int64_t it = b; it < e; it++)
        dx_item(r, L, s, base, it);
}

/* run_stages' arguments, for each member of the team. */
typedef struct stages_call {
    const gs3d_run *r, *rd;
    const ws_layout *L;
    const gs3d_schedule *s;
    char *base;
} stages_call;

static void stages_member(void *arg) {
    const stages_call *c = arg;
    run_stages(c->r, c->rd, c->L, c->s, c->base);
}

static void run_images(const gradref__gs3d_plan *p, void *ws, int threads) {
    if (p->dx.data == NULL && p->dgrid.data == NULL) return;
    int64_t xsh[5], gsh[5], gridsh[5];
    x_shape(p, xsh);
    grad_shape(p, gsh);
    gridsh[0] = p->N, gridsh[1] = p->Do, gridsh[2] = p->Ho, gridsh[3] = p->Wo, gridsh[4] = 3;
    gs3d_run r;
    memset(&r, 0, sizeof r);
    r.p = p;
    r.a.shape = shape_of(p);
    r.k = gradref__gs3d_kernels_for(p->max_isa);
    if (no_points(p) || p->C == 0) { /* nothing reaches dx; PyTorch zero-fills dgrid here */
        /* N and C lead x's product, so an empty x's is 0 before any overflow */
        if (p->dx.data != NULL && numel5(xsh) > 0) zero_fill(&p->dx, p->dtype, xsh, threads);
        if (p->dgrid.data != NULL && !no_points(p)) zero_fill(&p->dgrid, p->dtype, gridsh, threads);
        return;
    }
    r.a.P = p->Do * p->Ho * p->Wo;
    const int64_t NP = p->N * r.a.P;
    const ws_layout L = layout_of(p, p->precision, threads);
    char *base = (char *)ws;
    bind_workspace(&r, &L, base);
    bind_tensors(&r, &L, base, xsh, gsh, threads);
    const gs3d_run rd = dgrid_run_of(&r);
    const gs3d_schedule s = schedule_of(&r, &rd, &L);
    const int team = NP * p->C >= PARALLEL_MIN_WORK ? threads : 1;
    stages_call call = {&r, &rd, &L, &s, base};
    gradref__run_team(team, stages_member, &call);
    if (p->dgrid.data != NULL && p->interp != GRADREF_INTERP_BILINEAR && !s.dense_zero_dgrid)
        zero_fill(&p->dgrid, p->dtype, gridsh, team);
}

void gradref__gs3d_fast(const gradref__gs3d_plan *p, void *ws, int threads) {
    const int64_t g = group_of(p);
    if (g >= p->N) {
        run_images(p, ws, threads);
        return;
    }
    for (int64_t n0 = 0; n0 < p->N; n0 += g) {
        const gradref__gs3d_plan group = images_of(p, n0, p->N - n0 < g ? p->N - n0 : g);
        run_images(&group, ws, threads);
    }
}
