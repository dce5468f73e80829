/* SPDX-License-Identifier: Apache-2.0 */
/* The portable passes of the fast path, for one pair of types. gs3d_fast.c includes this once
 * per pair with
 *   GS_T      the type the geometry is computed in (float, or double for F64),
 *   GS_A      the type sums run in (GS_T, or double under GRADREF_PRECISION_HIGH),
 *   GS_FN(f)  f with a suffix naming the pair,
 *   GS_REC    gs3d_record_f or gs3d_record_d (weights of type GS_T).
 * The operations and their order are those of the reference loop (gs3d_ref.c). */

/* clip_coordinates_set_grad */
static GS_T GS_FN(clip)(GS_T in, int64_t size, GS_T *g) {
    if (in <= 0) {
        *g = 0;
        return 0;
    }
    GS_T max = (GS_T)(size - 1);
    if (in >= max) {
        *g = 0;
        return max;
    }
    *g = 1;
    return in;
}

/* reflect_coordinates_set_grad with x86's int conversion of the flip count */
static GS_T GS_FN(reflect)(GS_T in, int64_t twice_low, int64_t twice_high, GS_T *g) {
    if (twice_low == twice_high) {
        *g = 0;
        return 0;
    }
    GS_T min = (GS_T)twice_low / 2;
    GS_T span = (GS_T)(twice_high - twice_low) / 2;
    in = in - min;
    GS_T sign = 1;
    if (in < 0) {
        sign = -1;
        in = -in;
    }
    GS_T extra = (GS_T)fmod(in, span);
    GS_T quotient = in / span;
    double flips = floor((double)quotient);
    int odd = flips < 2147483648.0 ? (int)((int64_t)flips & 1) : 0;
    if (!odd) {
        *g = sign;
        return extra + min;
    }
    *g = -sign;
    return span - extra + min;
}

static GS_T GS_FN(source_index)(int padding, int align, GS_T coord, int64_t size, GS_T *mult) {
    if (align) {
        *mult = (GS_T)(size - 1) / 2;
        coord = ((coord + 1) / 2) * (GS_T)(size - 1);
    } else {
        *mult = (GS_T)size / 2;
        coord = ((coord + 1) * (GS_T)size - 1) / 2;
    }
    GS_T g_clip, g_refl;
    if (padding == GRADREF_PAD_BORDER) {
        coord = GS_FN(clip)(coord, size, &g_clip);
        *mult = *mult * g_clip;
    } else if (padding == GRADREF_PAD_REFLECTION) {
        if (align)
            coord = GS_FN(reflect)(coord, 0, 2 * (size - 1), &g_refl);
        else
            coord = GS_FN(reflect)(coord, -1, 2 * size - 1, &g_refl);
        coord = GS_FN(clip)(coord, size, &g_clip);
        *mult = *mult * g_refl * g_clip;
    }
    if (!isfinite(coord) || coord > (GS_T)2147483646.0 || coord < (GS_T)-2147483648.0) coord = -100;
    return coord;
}

/* A grid coordinate as T. */
static GS_T GS_FN(grid_value)(int32_t dtype, const char *e) {
    if (dtype == GRADREF_F32) return (GS_T) * (const float *)e;
    if (dtype == GRADREF_F64) return (GS_T) * (const double *)e;
    return (GS_T)gradref__load_float(dtype, e);
}

/* Pass 1: the geometry of points [begin, end) of all N*P. */
static void GS_FN(geometry)(const gs3d_run *r, int64_t begin, int64_t end) {
    const gradref__gs3d_plan *p = r->p;
    const gradref__gs3d_view *gv = &p->grid;
    const int64_t NP = p->N * r->a.P;
    GS_T *w = (GS_T *)r->a.g.w, *dist = (GS_T *)r->a.g.dist, *mult = (GS_T *)r->a.g.mult;
    const int64_t size[3] = {p->W, p->H, p->D};
    if (begin >= end) return;
    /* (n, od, oh, ow) of `begin`, then stepped without divisions */
    int64_t n = begin / r->a.P, q = begin % r->a.P;
    int64_t od = q / (p->Ho * p->Wo), oh = q / p->Wo % p->Ho, ow = q % p->Wo;
    /* a voxel index (gs3d_voxels) needs only each point's voxel: the layout has no other array */
    const int voxels_only = r->a.v.vox != NULL;
    for (int64_t i = begin; i < end; i++) {
        if (!voxels_only) r->a.g.offg[i] = od * r->a.gs[2] + oh * r->a.gs[3] + ow * r->a.gs[4];
        const char *pt =
            gv->data +
            (size_t)(n * gv->s[0] + od * gv->s[1] + oh * gv->s[2] + ow * gv->s[3]) * p->elem_size;
        GS_T coord[3], m[3];
        for (int k = 0; k < 3; k++)
            coord[k] = GS_FN(source_index)(
                p->padding, p->align_corners,
                GS_FN(grid_value)(p->dtype, pt + (size_t)(k * gv->s[4]) * p->elem_size), size[k],
                &m[k]);
        uint8_t mask = 0;
        int64_t offx = 0, offa = 0, zplane = 0;
        if (p->interp == GRADREF_INTERP_NEAREST) {
            int64_t x = (int64_t)nearbyint(coord[0]), y = (int64_t)nearbyint(coord[1]),
                    z = (int64_t)nearbyint(coord[2]);
            const int in = x >= 0 && x < p->W && y >= 0 && y < p->H && z >= 0 && z < p->D;
            if (in) {
                mask = 1;
                offa = y * r->a.as[3] + x * r->a.as[4];
                zplane = z;
            }
            if (r->a.v.vox) r->a.v.vox[i] = in ? (int32_t)((z * p->H + y) * p->W + x) : -1;
        } else {
            GS_T ix = coord[0], iy = coord[1], iz = coord[2];
            int64_t x0 = (int64_t)floor(ix), y0 = (int64_t)floor(iy), z0 = (int64_t)floor(iz);
            GS_T d[6] = {(GS_T)(x0 + 1) - ix, ix - (GS_T)x0,       (GS_T)(y0 + 1) - iy,
                         iy - (GS_T)y0,       (GS_T)(z0 + 1) - iz, iz - (GS_T)z0};
            const int xin[2] = {x0 >= 0 && x0 < p->W, x0 + 1 >= 0 && x0 + 1 < p->W};
            const int yin[2] = {y0 >= 0 && y0 < p->H, y0 + 1 >= 0 && y0 + 1 < p->H};
            const int zin[2] = {z0 >= 0 && z0 < p->D, z0 + 1 >= 0 && z0 + 1 < p->D};
            for (int k = 0; k < 8; k++) {
                int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
                if (xin[dx] && yin[dy] && zin[dz]) mask |= (uint8_t)(1u << k);
                w[k * NP + i] = d[dx] * d[2 + dy] * d[4 + dz];
            }
            for (int k = 0; k < 6; k++)
                dist[k * NP + i] = d[k];
            for (int k = 0; k < 3; k++)
                mult[k * NP + i] = m[k];
            if (mask) {
                offx = z0 * r->a.xs[2] + y0 * r->a.xs[3] + x0 * r->a.xs[4];
                offa = y0 * r->a.as[3] + x0 * r->a.as[4];
                zplane = z0;
            }
        }
        if (!voxels_only) {
            r->a.g.mask[i] = mask;
            r->a.g.offx[i] = offx;
            r->a.g.offa[i] = offa;
            r->a.g.zplane[i] = zplane;
        }
        if (++ow == p->Wo) {
            ow = 0;
            if (++oh == p->Ho) {
                oh = 0;
                if (++od == p->Do) {
                    od = 0;
                    n++;
                }
            }
        }
    }
}

/* Pass 2 for one point: dgrid[n, q, :] from every channel, corners in order. */
static void GS_FN(dgrid_point)(const gs3d_run *r, int64_t n, int64_t q) {
    const gradref__gs3d_plan *p = r->p;
    const int64_t NP = p->N * r->a.P, i = n * r->a.P + q;
    const GS_T *dist = (const GS_T *)r->a.g.dist, *mult = (const GS_T *)r->a.g.mult;
    const unsigned mask = r->a.g.mask[i];
    const int nearest = p->interp == GRADREF_INTERP_NEAREST;
    GS_A gix = 0, giy = 0, giz = 0;
    if (mask && !nearest) {
        const GS_A w[2] = {dist[i], dist[NP + i]}, h[2] = {dist[2 * NP + i], dist[3 * NP + i]},
                   d[2] = {dist[4 * NP + i], dist[5 * NP + i]};
        const GS_T *xn = (const GS_T *)r->a.x + n * r->a.xs[0] + r->a.g.offx[i];
        /* dense points: q itself (offg holds the staged grad's offsets when dgrid reads the
         * caller's) */
        const GS_T *gn = (const GS_T *)r->a.grad + n * r->a.gs[0] +
                         (r->a.grad_points_dense ? q : r->a.g.offg[i]);
        for (int64_t c = 0; c < p->C; c++) {
            const GS_A g = gn[c * r->a.gs[1]];
            const GS_T *xc = xn + c * r->a.xs[1];
            for (int k = 0; k < 8; k++) {
                if (!((mask >> k) & 1u)) continue;
                const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
                const GS_A v = xc[r->a.dx_corner[k]];
                const GS_A tx = v * h[dy] * d[dz] * g;
                const GS_A ty = v * w[dx] * d[dz] * g;
                const GS_A tz = v * w[dx] * h[dy] * g;
                gix = dx ? gix + tx : gix - tx;
                giy = dy ? giy + ty : giy - ty;
                giz = dz ? giz + tz : giz - tz;
            }
        }
    }
    const gradref__gs3d_view *dv = &p->dgrid;
    int64_t od = q / (p->Ho * p->Wo), oh = q / p->Wo % p->Ho, ow = q % p->Wo;
    char *out = dv->data + (size_t)(n * dv->s[0] + od * dv->s[1] + oh * dv->s[2] + ow * dv->s[3]) *
                               p->elem_size;
    const GS_A gi[3] = {gix, giy, giz};
    for (int k = 0; k < 3; k++) {
        GS_A v = nearest ? 0 : (GS_A)mult[k * NP + i] * gi[k];
        gradref__store_float(p->dtype, out + (size_t)(k * dv->s[4]) * p->elem_size, (double)v);
    }
}

/* Plane z of image n of the accumulator = 0, every channel. */
static void GS_FN(zero_plane)(const gs3d_run *r, int64_t n, int64_t z) {
    const gradref__gs3d_plan *p = r->p;
    GS_A *plane = gs3d_acc_plane(r, n, z, sizeof(GS_A));
    if (r->a.as[1] == 1 && r->a.as[4] == p->C && r->a.as[3] == p->W * p->C) {
        memset(plane, 0, (size_t)(p->H * p->W * p->C) * sizeof *plane);
        return;
    }
    for (int64_t y = 0; y < p->H; y++)
        for (int64_t x = 0; x < p->W; x++)
            for (int64_t c = 0; c < p->C; c++)
                plane[y * r->a.as[3] + x * r->a.as[4] + c * r->a.as[1]] = 0;
}

/* Files points [i0, i1) of image n (global point indices) into its buckets, in point order,
 * from the cursors (cursor[z]: where the next record of plane z goes). */
static void GS_FN(bucket_fill)(const gs3d_run *r, int64_t n, int64_t i0, int64_t i1,
                               int64_t *cursor) {
    const int nearest = r->p->interp == GRADREF_INTERP_NEAREST;
    GS_REC *rec = (GS_REC *)r->b.records + n * 2 * r->a.P;
    const GS_T *w = (const GS_T *)r->a.g.w;
    const int64_t NP = r->p->N * r->a.P;
    for (int64_t i = i0; i < i1; i++) {
        const unsigned m = r->a.g.mask[i];
        for (int half = 0; half < 2; half++) {
            const unsigned on = (m >> (4 * half)) & 15u;
            if (!on) continue;
            GS_REC *e = &rec[cursor[r->a.g.zplane[i] + half]++];
            e->a = r->a.g.offa[i];
            e->g = r->a.g.offg[i];
            e->on = on;
            for (int j = 0; j < 4; j++)
                e->w[j] = nearest ? 1 : w[(4 * half + j) * NP + i];
        }
    }
}

/* The records of one plane's bucket into the plane, in point order: weight * grad to each
 * in-bounds corner, all channels at a time. */
static void GS_FN(accumulate)(const gs3d_run *r, const GS_REC *rec, int64_t count, GS_A *plane,
                              const GS_T *gn) {
    const int nearest = r->p->interp == GRADREF_INTERP_NEAREST;
    const int64_t C = r->p->C, as1 = r->a.as[1], gs1 = r->a.gs[1];
#ifdef GS_PLANE_KERNEL
    if (GS_PLANE_KERNEL(r, rec, count, plane, gn)) return;
#endif
    for (int64_t e = 0; e < count; e++) {
        const GS_T *g = gn + rec[e].g;
        GS_A *a = plane + rec[e].a;
        for (int j = 0; j < 4; j++) {
            if (!((rec[e].on >> j) & 1u)) continue;
            GS_A *aj = a + r->a.da_plane[j];
            if (nearest) {
                for (int64_t c = 0; c < C; c++)
                    aj[c * as1] += (GS_A)g[c * gs1];
            } else {
                const GS_A w = rec[e].w[j];
                for (int64_t c = 0; c < C; c++)
                    aj[c * as1] += w * (GS_A)g[c * gs1];
            }
        }
    }
}

/* Pass 3 for plane z of image n: the plane zeroed, its bucket accumulated, and (a thread's plane
 * buffer) rounded out to dx. */
static void GS_FN(dx_item)(const gs3d_run *r, int64_t n, int64_t z) {
    const gradref__gs3d_plan *p = r->p;
    GS_FN(zero_plane)(r, n, z);
    const int64_t *start = r->b.start + n * (p->D + 1);
    const GS_REC *rec = (const GS_REC *)r->b.records + n * 2 * r->a.P + start[z];
    GS_A *plane = gs3d_acc_plane(r, n, z, sizeof(GS_A));
    GS_FN(accumulate)
    (r, rec, start[z + 1] - start[z], plane, (const GS_T *)r->a.grad + n * r->a.gs[0]);
    gradref__gs3d_canon_plane(r, plane, sizeof(GS_A) == 8);
    if (r->acc_planes) gradref__gs3d_plane_out(r, plane, sizeof(GS_A) == 8, n, z);
}
