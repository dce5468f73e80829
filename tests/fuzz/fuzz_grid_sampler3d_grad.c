/* SPDX-License-Identifier: Apache-2.0 */
/* gradref_grid_sampler3d_grad: both interpolations, every padding, align_corners, optional
 * outputs, layouts, grids inside, on and beyond the border, NaN and Inf. */
#include <string.h>

#include "fuzz.h"

typedef struct gs3d_args {
    gradref_grid_sampler3d_params p;
    gradref_tensor grad, x, grid, dx, dgrid;
    int want_dx, want_dgrid;
} gs3d_args;

static gradref_status run(void *ctx, const gradref_exec *exec) {
    gs3d_args *a = ctx;
    return gradref_grid_sampler3d_grad(&a->p, &a->grad, &a->x, &a->grid, a->want_dx ? &a->dx : NULL,
                                       a->want_dgrid ? &a->dgrid : NULL, exec);
}

static gradref_status twin(void *ctx, size_t *bytes) {
    gs3d_args *a = ctx;
    return gradref_grid_sampler3d_grad_workspace_size(&a->p, &a->grad, &a->x, &a->grid,
                                                      a->want_dx ? &a->dx : NULL,
                                                      a->want_dgrid ? &a->dgrid : NULL, bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = {data, size};
    fz_begin(&f);
    gs3d_args a;
    memset(&a, 0, sizeof a);
    a.p.interpolation =
        fz_one_in(&f, 16) ? (int32_t)fz_range(&f, -1, 3) : (int32_t)fz_range(&f, 0, 1);
    a.p.padding = fz_one_in(&f, 16) ? (int32_t)fz_range(&f, -1, 4) : (int32_t)fz_range(&f, 0, 2);
    a.p.align_corners =
        fz_one_in(&f, 16) ? (int32_t)fz_range(&f, -1, 3) : (int32_t)fz_range(&f, 0, 1);
    const int64_t N = fz_one_in(&f, 10) ? 0 : fz_range(&f, 1, 2);
    static const int64_t channels[8] = {1, 2, 3, 4, 5, 16, 17, 0};
    const int64_t C = channels[fz_range(&f, 0, 7)];
    int64_t in[3], outsz[3];
    for (int d = 0; d < 3; d++) {
        in[d] = fz_range(&f, 1, d == 2 && fz_one_in(&f, 3) ? 20 : 5);
        outsz[d] = fz_range(&f, fz_one_in(&f, 12) ? 0 : 1, d == 2 && fz_one_in(&f, 3) ? 33 : 4);
    }
    const int32_t dtype =
        fz_one_in(&f, 16) ? (int32_t)fz_range(&f, 0, 6) : (int32_t)fz_range(&f, 0, 3);
    int64_t xs[5] = {N, C, in[0], in[1], in[2]}, gs[5] = {N, C, outsz[0], outsz[1], outsz[2]};
    int64_t grids[5] = {N, outsz[0], outsz[1], outsz[2], 3};
    a.want_dx = !fz_one_in(&f, 5);
    a.want_dgrid = !fz_one_in(&f, 5);
    if (!fz_tensor(&f, &a.grad, dtype, 5, gs, 0, 1) || !fz_tensor(&f, &a.x, dtype, 5, xs, 0, 1) ||
        !fz_tensor(&f, &a.grid, dtype, 5, grids, 0, 1) ||
        !fz_tensor(&f, &a.dx, dtype, 5, xs, 1, 1) ||
        !fz_tensor(&f, &a.dgrid, dtype, 5, grids, 1, 1))
        return 0;
    fz_fill_floats(&f, &a.grad, 2.0);
    fz_fill_floats(&f, &a.x, 2.0);
    fz_fill_floats(&f, &a.grid, 1.3);
    fz_call c = {"grid_sampler3d_grad",
                 run,
                 twin,
                 &a,
                 {a.want_dx ? &a.dx : NULL, a.want_dgrid ? &a.dgrid : NULL},
                 1};
    fz_check(&f, &c);
    return 0;
}
