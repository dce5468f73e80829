/* SPDX-License-Identifier: Apache-2.0 */
/* The grid_sampler3d_grad kernel choice and what the ISA files share: the level a plan runs
 * at, dgrid stores, the voxel index's scalar voxels, and the dx-plane dispatch. The kernels:
 * gs3d_avx2.c, gs3d_avx512.c, gs3d_neon.c. */
#include "gs3d_kernels.h"

#include <string.h>

#include "common/convert.h"
#include "common/isa.h"
#include "common/nan.h"

/* dgrid of `count` consecutive points from q: out[k][j] is component k of point q + j. */
void gradref__gs3d_store_dgrid(const gs3d_kargs *r, int64_t n, int64_t q, int count,
                               float out[3][16]) {
    const gs3d_shape *p = &r->shape;
    const gradref__gs3d_view *dv = &p->dgrid;
    int64_t od = q / (p->Ho * p->Wo), oh = q / p->Wo % p->Ho, ow = q % p->Wo;
    for (int j = 0; j < count; j++) {
        char *o =
            dv->data +
            (size_t)(n * dv->s[0] + od * dv->s[1] + oh * dv->s[2] + ow * dv->s[3]) * p->elem_size;
        for (int k = 0; k < 3; k++) {
            char *e = o + (size_t)(k * dv->s[4]) * p->elem_size;
            if (p->dtype == GRADREF_F32)
                *(float *)e = out[k][j];
            else
                gradref__store_float(p->dtype, e, out[k][j]);
        }
        if (++ow == p->Wo) {
            ow = 0;
            if (++oh == p->Ho) {
                oh = 0;
                od++;
            }
        }
    }
}

void gradref__gs3d_store_corners(const gs3d_kargs *r, int64_t i, int lanes, const int32_t *x,
                                 const int32_t *y, const int32_t *z, const uint32_t *bits) {
    for (int l = 0; l < lanes; l++) {
        const int64_t x0 = x[l], y0 = y[l], z0 = z[l];
        r->g.mask[i + l] = (uint8_t)bits[l];
        r->g.offx[i + l] = bits[l] ? z0 * r->xs[2] + y0 * r->xs[3] + x0 * r->xs[4] : 0;
        r->g.offa[i + l] = bits[l] ? y0 * r->as[3] + x0 * r->as[4] : 0;
        r->g.zplane[i + l] = bits[l] ? z0 : 0;
    }
}

void gradref__gs3d_store_voxels(const gs3d_kargs *r, int64_t i, int lanes, const int32_t *x,
                                const int32_t *y, const int32_t *z, const uint32_t *hit) {
    for (int l = 0; l < lanes; l++) {
        const int64_t xl = x[l], yl = y[l], zl = z[l];
        r->g.mask[i + l] = hit[l] ? 1 : 0;
        r->g.offx[i + l] = 0;
        r->g.offa[i + l] = hit[l] ? yl * r->as[3] + xl * r->as[4] : 0;
        r->g.zplane[i + l] = hit[l] ? zl : 0;
    }
}

void gradref__gs3d_voxels_one_by_one(float *acc, int64_t as1, int cb, const float *stage,
                                     const int32_t *slots, int64_t u0, int64_t u1,
                                     const int32_t *over, int64_t e0, int64_t e1) {
    for (int64_t u = u0; u < u1; u++)
        for (int i = 0; i < cb; i++)
            acc[i * as1 + u] = stage[slots[2 * u] + i] + stage[slots[2 * u + 1] + i];
    for (int64_t e = e0; e < e1; e++)
        for (int i = 0; i < cb; i++)
            acc[i * as1 + over[2 * e]] += stage[over[2 * e + 1] + i];
    for (int64_t u = u0; u < u1; u++) /* the NaN rule (common/nan.h) */
        for (int i = 0; i < cb; i++)
            acc[i * as1 + u] = gradref__canon_f32(acc[i * as1 + u]);
}

float *gradref__gs3d_zeroed_channel(const gs3d_kargs *r, int64_t n, int64_t c) {
    const gs3d_shape *p = &r->shape;
    float *acc = (float *)r->acc + n * r->as[0] + c * r->as[1];
    for (int64_t z = 0; z < p->D; z++)
        for (int64_t y = 0; y < p->H; y++) {
            float *row = acc + z * r->as[2] + y * r->as[3];
            if (r->as[4] == 1)
                memset(row, 0, (size_t)p->W * sizeof *row);
            else
                for (int64_t x = 0; x < p->W; x++)
                    row[x * r->as[4]] = 0;
        }
    return acc;
}

void gradref__gs3d_f32_nearest_dx_points(const gs3d_kargs *r, int64_t n, int64_t c) {
    float *acc = gradref__gs3d_zeroed_channel(r, n, c);
    const float *g = (const float *)r->grad + n * r->gs[0] + c * r->gs[1];
    for (int64_t q = 0; q < r->P; q++) {
        const int64_t i = n * r->P + q;
        if (r->g.mask[i]) acc[r->g.zplane[i] * r->as[2] + r->g.offa[i]] += g[q];
    }
}

int64_t gradref__gs3d_voxel_slots_points(const gs3d_kargs *r, int64_t n) {
    const gs3d_shape *p = &r->shape;
    const int64_t V = p->D * p->H * p->W, P = r->P;
    int32_t *slots = r->v.slots + n * 2 * V, *later = r->v.later + n * 2 * P;
    const int32_t *vox = r->v.vox + n * P;
    const int32_t none = gs3d_no_point(P);
    int64_t count = 0;
    for (int64_t q = 0; q < P; q++)
        if (vox[q] >= 0)
            count = gradref__gs3d_slot_point(slots, later, count, none, vox[q],
                                             (int32_t)(GS3D_STAGE_CHANNELS * gs3d_stage_row(q)));
    return count;
}

void gradref__gs3d_nearest_dx_voxels(const gs3d_kargs *r, int64_t n, int64_t c0, float *stage,
                                     gs3d_stage_rows stage_rows, gs3d_block_pass blocks) {
    const gs3d_shape *p = &r->shape;
    const int64_t V = p->D * p->H * p->W, P = r->P;
    const int cb = p->C - c0 < GS3D_STAGE_CHANNELS ? (int)(p->C - c0) : GS3D_STAGE_CHANNELS;
    const float *g[GS3D_STAGE_CHANNELS];
    for (int i = 0; i < GS3D_STAGE_CHANNELS; i++) /* a missing channel repeats the last: unused */
        g[i] = (const float *)r->grad + n * r->gs[0] + (c0 + (i < cb ? i : cb - 1)) * r->gs[1];
    stage_rows(g, P, stage);
    memset(stage + gs3d_no_point(P), 0, GS3D_STAGE_CHANNELS * sizeof *stage);
    /* each voxel: its first staged row + its second (the zero row when it has none), then its
     * later points in point order (a staged +0 + g adds as g does: a sum of two or more points
     * is never -0). Blocks of 16 voxels start at r->v.lead, where dx's lines do. */
    const int64_t lead = r->v.lead, nblocks = gs3d_voxel_blocks(V, lead);
    const gs3d_voxel_frame f = {(float *)r->acc + n * r->as[0] + c0 * r->as[1],
                                r->as[1],
                                cb,
                                r->v.stream,
                                stage,
                                r->v.slots + n * 2 * V,
                                r->v.over + n * 2 * P,
                                r->v.block_start + n * (nblocks + 1)};
    const int64_t head = lead < V ? lead : V;
    gradref__gs3d_voxels_one_by_one(f.acc, f.as1, cb, stage, f.slots, 0, head, f.over, f.start[0],
                                    f.start[1]);
    const int64_t v = blocks(&f, head, 1, V), b = gs3d_voxel_block(v, lead);
    if (v < V)
        gradref__gs3d_voxels_one_by_one(f.acc, f.as1, cb, stage, f.slots, v, V, f.over, f.start[b],
                                        f.start[b + 1]);
}

/* The fast path's own loops are the portable kernels. */
static const gradref__gs3d_kernels portable = {.isa = "portable"};

const gradref__gs3d_kernels *gradref__gs3d_kernels_for(int max_isa) {
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &gradref__gs3d_kernels_avx2,
        [GRADREF__ISA_AVX512] = &gradref__gs3d_kernels_avx512,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &gradref__gs3d_kernels_neon,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}
