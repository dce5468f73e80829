/* SPDX-License-Identifier: Apache-2.0 */
/* grid_sampler3d_grad: the CANN documentation's example (a 3x3 image, four sampling points),
 * backward of trilinear grid_sample with zeros and with border padding, then the same call
 * with a reused workspace. Checks its own output against PyTorch's values and exits non-zero
 * on a mismatch. */
#include <stdio.h>
#include <stdlib.h>

#include "gradref.h"

int main(void) {
    /* x (N,C,D,H,W) = (1,1,1,3,3) holding 1..9; grid (N,Do,Ho,Wo,3) = (1,1,2,2,3); grad = 1 */
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float grid[12] = {-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0};
    float grad[4] = {1, 1, 1, 1};
    float dx[9], dgrid[12];
    const int64_t xs[5] = {1, 1, 1, 3, 3}, gs[5] = {1, 1, 1, 2, 2}, grs[5] = {1, 1, 2, 2, 3};
    gradref_tensor tx, tgrad, tgrid, tdx, tdgrid;
    gradref_tensor_init(&tx, x, GRADREF_F32, 5, xs);
    gradref_tensor_init(&tdx, dx, GRADREF_F32, 5, xs);
    gradref_tensor_init(&tgrad, grad, GRADREF_F32, 5, gs);
    gradref_tensor_init(&tgrid, grid, GRADREF_F32, 5, grs);
    gradref_tensor_init(&tdgrid, dgrid, GRADREF_F32, 5, grs);

    /* PyTorch grid_sampler_3d_backward, align_corners=False */
    static const float want_dx[2][9] = {{.25f, 0, 0, .5f, 0, 0, .125f, .5f, 0},
                                        {1, 0, 0, 1, 0, 0, 1, 1, 0}};
    static const float want_dgrid[2][12] = {
        {.75f, .75f, -.125f, 2.625f, -2.625f, .875f, 6, 2.25f, -1, .75f, -12, -2},
        {0, 0, 0, 0, 0, 0, 0, 4.5f, 0, 1.5f, 0, 0}};
    static const char *names[2] = {"zeros", "border"};
    int bad = 0;
    for (int pad = 0; pad < 2; pad++) {
        gradref_grid_sampler3d_params p = {GRADREF_INTERP_BILINEAR, pad, 0};
        gradref_status st =
            gradref_grid_sampler3d_grad(&p, &tgrad, &tx, &tgrid, &tdx, &tdgrid, NULL);
        if (st != GRADREF_OK) {
            fprintf(stderr, "grid_sampler3d_grad: %s\n", gradref_last_error());
            return 1;
        }
        printf("%-7s dx    = %g %g %g %g %g %g %g %g %g\n", names[pad], dx[0], dx[1], dx[2], dx[3],
               dx[4], dx[5], dx[6], dx[7], dx[8]);
        printf("%-7s dgrid = %g %g %g | %g %g %g | %g %g %g | %g %g %g\n", names[pad], dgrid[0],
               dgrid[1], dgrid[2], dgrid[3], dgrid[4], dgrid[5], dgrid[6], dgrid[7], dgrid[8],
               dgrid[9], dgrid[10], dgrid[11]);
        for (int i = 0; i < 9; i++)
            bad |= dx[i] != want_dx[pad][i];
        for (int i = 0; i < 12; i++)
            bad |= dgrid[i] != want_dgrid[pad][i];
    }

    /* In a training loop: ask once for the workspace, reuse it on every call (no allocation
     * inside the library), and skip dx when only the grid needs a gradient. */
    gradref_grid_sampler3d_params p = {GRADREF_INTERP_BILINEAR, GRADREF_PAD_ZEROS, 0};
    size_t bytes = 0;
    if (gradref_grid_sampler3d_grad_workspace_size(&p, &tgrad, &tx, &tgrid, NULL, &tdgrid,
                                                   &bytes) != GRADREF_OK)
        return 1;
    gradref_exec exec = {malloc(bytes), bytes, 0, GRADREF_PRECISION_DEFAULT};
    for (int step = 0; step < 3; step++)
        if (gradref_grid_sampler3d_grad(&p, &tgrad, &tx, &tgrid, NULL, &tdgrid, &exec) !=
            GRADREF_OK)
            bad = 1;
    for (int i = 0; i < 12; i++)
        bad |= dgrid[i] != want_dgrid[0][i];
    free(exec.workspace);

    /* The grid's last dimension must be 3 (x, y, z): a clear error, nothing written. */
    gradref_tensor bad_grid = tgrid;
    bad_grid.shape[4] = 2;
    if (gradref_grid_sampler3d_grad(&p, &tgrad, &tx, &bad_grid, &tdx, &tdgrid, NULL) ==
        GRADREF_ERR_SHAPE)
        printf("expected error: %s\n", gradref_last_error());
    else
        bad = 1;
    puts(bad ? "MISMATCH" : "ok");
    return bad;
}
