/* SPDX-License-Identifier: Apache-2.0 */
/* gradref-bench: grid_sampler3d_grad. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_ops.h"

typedef struct gs3d_ctx {
    gradref_grid_sampler3d_params params;
    gradref_tensor grad, x, grid, dx, dgrid;
    void *workspace;
    size_t workspace_bytes;
} gs3d_ctx;

static gradref_status gs3d_once(void *arg, int threads) {
    gs3d_ctx *c = arg;
    gradref_exec exec = {c->workspace, c->workspace_bytes, threads, GRADREF_PRECISION_DEFAULT};
    return gradref_grid_sampler3d_grad(&c->params, &c->grad, &c->x, &c->grid, &c->dx, &c->dgrid,
                                       &exec);
}

/* A smooth grid, as spatial transformers and image registration sample: the identity plus a
 * displacement of a few voxels that varies slowly over the volume. */
static void fill_smooth_grid(gradref_dtype dtype, void *dst, int64_t N, int64_t D, int64_t H,
                             int64_t W) {
    float *v = malloc(sizeof(float) * (size_t)(N * D * H * W * 3));
    if (v == NULL) {
        fprintf(stderr, "gradref-bench: out of memory\n");
        exit(1);
    }
    int64_t i = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t z = 0; z < D; z++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t x = 0; x < W; x++) {
                    const double at[3] = {(double)x / (double)(W > 1 ? W - 1 : 1),
                                          (double)y / (double)(H > 1 ? H - 1 : 1),
                                          (double)z / (double)(D > 1 ? D - 1 : 1)};
                    for (int k = 0; k < 3; k++, i++) {
                        const double shift = 0.04 * sin(6.0 * at[(k + 1) % 3] + (double)n + k);
                        v[i] = (float)(2.0 * at[k] - 1.0 + shift);
                    }
                }
    bench_from_f32(dtype, dst, v, i);
    free(v);
}

/* grid_sampler3d_grad N C D H W [Do Ho Wo, default D H W] interp pad ac [smooth1] dtype
 * ncdhw|ndhwc: grid uniform in [-1, 1], or smooth (fill_smooth_grid); both outputs. Work:
 * N*C*Do*Ho*Wo point-channels. The workspace is allocated once, as a training loop would
 * (docs/api.md). */
int bench_gs3d(const problem *p, int threads, int repeats, timing *t) {
    const int64_t N = problem_get(p, "N", 1), C = problem_get(p, "C", 1);
    const int64_t D = problem_get(p, "D", 1), H = problem_get(p, "H", 1),
                  W = problem_get(p, "W", 1);
    const int64_t Do = problem_get(p, "Do", D), Ho = problem_get(p, "Ho", H),
                  Wo = problem_get(p, "Wo", W);
    const gradref_format fmt =
        strcmp(p->mode, "ndhwc") == 0 ? GRADREF_FORMAT_NDHWC : GRADREF_FORMAT_NCDHW;
    const size_t esz = bench_dtype_size(p->dtype);
    const int64_t xn = N * C * D * H * W, gn = N * C * Do * Ho * Wo, grn = N * Do * Ho * Wo * 3;
    char *x = tensor_alloc((size_t)xn * esz), *dx = tensor_alloc((size_t)xn * esz);
    char *g = tensor_alloc((size_t)gn * esz), *grid = tensor_alloc((size_t)grn * esz),
         *dgrid = tensor_alloc((size_t)grn * esz);
    int rc = 1;
    if (x && dx && g && grid && dgrid) {
        fill_values(p->dtype, x, xn, 1);
        fill_values(p->dtype, g, gn, 2);
        if (problem_get(p, "smooth", 0))
            fill_smooth_grid(p->dtype, grid, N, Do, Ho, Wo);
        else
            fill_values(p->dtype, grid, grn, 3);
        gs3d_ctx c;
        gradref_grid_sampler3d_params params = {(int32_t)problem_get(p, "interp", 0),
                                                (int32_t)problem_get(p, "pad", 0),
                                                (int32_t)problem_get(p, "ac", 0)};
        c.params = params;
        const int64_t xs[5] = {N, C, D, H, W}, gs[5] = {N, C, Do, Ho, Wo},
                      grs[5] = {N, Do, Ho, Wo, 3};
        gradref_tensor_init_format(&c.x, x, p->dtype, fmt, xs);
        gradref_tensor_init_format(&c.dx, dx, p->dtype, fmt, xs);
        gradref_tensor_init_format(&c.grad, g, p->dtype, fmt, gs);
        gradref_tensor_init(&c.grid, grid, p->dtype, 5, grs);
        gradref_tensor_init(&c.dgrid, dgrid, p->dtype, 5, grs);
        c.workspace = NULL;
        c.workspace_bytes = 0;
        if (gradref_grid_sampler3d_grad_workspace_size(&c.params, &c.grad, &c.x, &c.grid, &c.dx,
                                                       &c.dgrid,
                                                       &c.workspace_bytes) == GRADREF_OK &&
            c.workspace_bytes > 0)
            c.workspace = malloc(c.workspace_bytes);
        rc = measure(p, gs3d_once, &c, NULL, 0, threads, repeats, t);
        TIME_NULL_WORKSPACE(c, gs3d_once, threads, repeats, t);
        t->work = (double)gn;
        t->unit = "Mpc/s";
        t->unit_scale = 1e-6;
    }
    free(x);
    free(dx);
    free(g);
    free(grid);
    free(dgrid);
    return rc;
}
