/* SPDX-License-Identifier: Apache-2.0 */
/* gradref_conv3d_backprop_filter: groups, stride, dilation, asymmetric pads, both modes,
 * NCDHW/NDHWC/DHWCN and any other strides, every dtype pairing. */
#include <string.h>

#include "fuzz.h"

typedef struct c3f_args {
    gradref_conv_params p;
    gradref_tensor x, dy, dw;
} c3f_args;

static gradref_status run(void *ctx, const gradref_exec *exec) {
    c3f_args *a = ctx;
    return gradref_conv3d_backprop_filter(&a->p, &a->x, &a->dy, &a->dw, exec);
}

static gradref_status twin(void *ctx, size_t *bytes) {
    c3f_args *a = ctx;
    return gradref_conv3d_backprop_filter_workspace_size(&a->p, &a->x, &a->dy, &a->dw, bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = {data, size};
    fz_begin(&f);
    c3f_args a;
    memset(&a, 0, sizeof a);
    a.p.mode = fz_one_in(&f, 16) ? (int32_t)fz_range(&f, -1, 3) : (int32_t)fz_range(&f, 0, 1);
    const int64_t G = fz_range(&f, 1, 3);
    a.p.groups = G == 1 && fz_one_in(&f, 2) ? 0 : (int32_t)G;
    if (fz_one_in(&f, 16)) a.p.groups = (int32_t)fz_range(&f, -1, 4);
    const int64_t N = fz_one_in(&f, 10) ? 0 : fz_range(&f, 1, 2);
    const int64_t Cin_g = fz_one_in(&f, 10) ? 0 : fz_range(&f, 1, fz_one_in(&f, 4) ? 40 : 4);
    const int64_t Cout = G * (fz_one_in(&f, 10) ? 0 : fz_range(&f, 1, fz_one_in(&f, 4) ? 40 : 4));
    int64_t k[3], o[3], i[3];
    for (int j = 0; j < 3; j++) {
        a.p.stride[j] = fz_range(&f, 1, 3);
        a.p.dilation[j] = fz_range(&f, 1, 2);
        a.p.pad[2 * j] = fz_range(&f, 0, 2);
        a.p.pad[2 * j + 1] = fz_range(&f, 0, 2);
        k[j] = fz_range(&f, 1, 3);
        i[j] = fz_range(&f, 0, j == 2 && fz_one_in(&f, 3) ? 30 : 6);
        const int64_t ext = a.p.dilation[j] * (k[j] - 1) + 1;
        int64_t span = i[j] + a.p.pad[2 * j] + a.p.pad[2 * j + 1];
        if (span < ext) {
            i[j] += ext - span;
            span = ext;
        }
        o[j] = (span - ext) / a.p.stride[j] + 1;
        if (fz_one_in(&f, 24)) o[j] -= 1;
        if (fz_one_in(&f, 32)) a.p.dilation[j] = fz_one_in(&f, 2) ? 0 : INT64_MAX;
        if (fz_one_in(&f, 32)) a.p.pad[2 * j + 1] = fz_one_in(&f, 2) ? -1 : INT64_MAX;
    }
    const int32_t in_dt =
        fz_one_in(&f, 16) ? (int32_t)fz_range(&f, 0, 6) : (int32_t)fz_range(&f, 0, 3);
    int32_t out_dt = in_dt;
    if ((in_dt == GRADREF_F16 || in_dt == GRADREF_BF16) && fz_one_in(&f, 2)) out_dt = GRADREF_F32;
    if (fz_one_in(&f, 20)) out_dt = (int32_t)fz_range(&f, 0, 6);
    int64_t xs[5] = {N, G * Cin_g, i[0], i[1], i[2]}, ys[5] = {N, Cout, o[0], o[1], o[2]};
    int64_t ws[5] = {Cout, Cin_g, k[0], k[1], k[2]};
    if (!fz_tensor(&f, &a.x, in_dt, 5, xs, 0, 1) || !fz_tensor(&f, &a.dy, in_dt, 5, ys, 0, 1) ||
        !fz_tensor(&f, &a.dw, out_dt, 5, ws, 1, 1))
        return 0;
    fz_fill_floats(&f, &a.x, 2.0);
    fz_fill_floats(&f, &a.dy, 2.0);
    fz_call c = {"conv3d_backprop_filter", run, twin, &a, {&a.dw, NULL}, 1};
    fz_check(&f, &c);
    return 0;
}
