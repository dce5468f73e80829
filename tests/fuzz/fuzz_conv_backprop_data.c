/* SPDX-License-Identifier: Apache-2.0 */
/* gradref_conv_backprop_data: 1-D to 3-D, groups (dense and grouped filters), stride,
 * dilation, pads, both modes, every dtype pairing including I8 and I32 -> I32; and
 * gradref_conv_backprop_data_qs8 (I8 -> I8 with scales, some of them invalid). */
#include <string.h>

#include "fuzz.h"

typedef struct cbd_args {
    gradref_conv_params p;
    gradref_tensor filter, diff, grad;
    int qs8;
    gradref_qs8_scales scales;
} cbd_args;

static gradref_status run(void *ctx, const gradref_exec *exec) {
    cbd_args *a = ctx;
    if (a->qs8)
        return gradref_conv_backprop_data_qs8(&a->p, &a->scales, &a->filter, &a->diff, &a->grad,
                                              exec);
    return gradref_conv_backprop_data(&a->p, &a->filter, &a->diff, &a->grad, exec);
}

static gradref_status twin(void *ctx, size_t *bytes) {
    cbd_args *a = ctx;
    if (a->qs8)
        return gradref_conv_backprop_data_qs8_workspace_size(&a->p, &a->scales, &a->filter,
                                                             &a->diff, &a->grad, bytes);
    return gradref_conv_backprop_data_workspace_size(&a->p, &a->filter, &a->diff, &a->grad, bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = {data, size};
    fz_begin(&f);
    cbd_args a;
    memset(&a, 0, sizeof a);
    const int r = (int)fz_range(&f, 1, 3);
    a.p.mode = fz_one_in(&f, 16) ? (int32_t)fz_range(&f, -1, 3) : (int32_t)fz_range(&f, 0, 1);
    const int64_t G = fz_range(&f, 1, 3);
    const int grouped = fz_one_in(&f, 3);
    a.p.groups = grouped && fz_one_in(&f, 2) ? 0 : (int32_t)G;
    if (fz_one_in(&f, 16)) a.p.groups = (int32_t)fz_range(&f, -1, 4);
    const int64_t N = fz_one_in(&f, 10) ? 0 : fz_range(&f, 1, 2);
    const int64_t OCg = fz_one_in(&f, 10) ? 0 : fz_range(&f, 1, fz_one_in(&f, 4) ? 20 : 4);
    const int64_t ICg = fz_one_in(&f, 10) ? 0 : fz_range(&f, 1, fz_one_in(&f, 4) ? 20 : 4);
    int64_t k[3], o[3], i[3];
    for (int j = 0; j < r; j++) {
        /* now and then a huge stride: only the phases a tap reaches may cost anything */
        static const int64_t huge_strides[4] = {INT64_C(1) << 16, INT64_C(1) << 21,
                                                INT64_C(1) << 32, INT64_C(1) << 40};
        a.p.stride[j] = fz_one_in(&f, 16) ? huge_strides[fz_range(&f, 0, 3)] : fz_range(&f, 1, 3);
        a.p.dilation[j] = fz_range(&f, 1, 2);
        a.p.pad[2 * j] = fz_range(&f, 0, 2);
        a.p.pad[2 * j + 1] = fz_range(&f, 0, 2);
        k[j] = fz_range(&f, 1, 3);
        const int wide = j == r - 1 && fz_one_in(&f, 3);
        i[j] = fz_range(&f, 0, wide ? 40 : 7);
        const int64_t ext = a.p.dilation[j] * (k[j] - 1) + 1;
        int64_t span = i[j] + a.p.pad[2 * j] + a.p.pad[2 * j + 1];
        if (span < ext) { /* too small for the kernel: grow the input */
            i[j] += ext - span;
            span = ext;
        }
        o[j] = (span - ext) / a.p.stride[j] + 1;
        if (fz_one_in(&f, 24)) o[j] += 1;
        if (fz_one_in(&f, 32)) a.p.stride[j] = fz_one_in(&f, 2) ? 0 : INT64_MAX;
        if (fz_one_in(&f, 32)) a.p.pad[2 * j] = fz_one_in(&f, 2) ? -1 : INT64_MAX;
    }
    static const int32_t in_types[7] = {GRADREF_F32, GRADREF_F64, GRADREF_F16, GRADREF_BF16,
                                        GRADREF_I8,  GRADREF_F32, GRADREF_I32};
    const int32_t in_dt = in_types[fz_range(&f, 0, 6)];
    int32_t out_dt = in_dt == GRADREF_I8 ? GRADREF_I32 : in_dt;
    if ((in_dt == GRADREF_F16 || in_dt == GRADREF_BF16) && fz_one_in(&f, 2)) out_dt = GRADREF_F32;
    if (fz_one_in(&f, 20)) out_dt = (int32_t)fz_range(&f, 0, 6);
    if (in_dt == GRADREF_I8 && fz_one_in(&f, 2)) { /* the QuantizedS8 call */
        static const float scale_choices[8] = {0.02f, 0.5f, 1.0f, 1e-30f, 3e38f, 0.0f, -1.0f, 1.0f};
        a.qs8 = 1;
        out_dt = fz_one_in(&f, 16) ? GRADREF_I32 : GRADREF_I8;
        a.scales.filter = scale_choices[fz_range(&f, 0, 7) & (fz_one_in(&f, 8) ? 7 : 3)];
        a.scales.diff = scale_choices[fz_range(&f, 0, 3)];
        a.scales.grad = scale_choices[fz_range(&f, 0, 7) & (fz_one_in(&f, 8) ? 7 : 3)];
    }
    int64_t fshape[6], dshape[5], gshape[5];
    int fn = 0;
    if (grouped) fshape[fn++] = G;
    fshape[fn++] = grouped ? OCg : G * OCg;
    fshape[fn++] = ICg;
    dshape[0] = gshape[0] = N;
    dshape[1] = G * OCg;
    gshape[1] = G * ICg;
    for (int j = 0; j < r; j++) {
        fshape[fn++] = k[j];
        dshape[2 + j] = o[j];
        gshape[2 + j] = i[j];
    }
    if (!fz_tensor(&f, &a.filter, in_dt, fn, fshape, 0, 1) ||
        !fz_tensor(&f, &a.diff, fz_one_in(&f, 24) ? GRADREF_F64 : in_dt, r + 2, dshape, 0, 1) ||
        !fz_tensor(&f, &a.grad, out_dt, r + 2, gshape, 1, 1))
        return 0;
    fz_fill_floats(&f, &a.filter, 2.0);
    fz_fill_floats(&f, &a.diff, 2.0);
    fz_call c = {"conv_backprop_data", run, twin, &a, {&a.grad, NULL}, 1};
    fz_check(&f, &c);
    return 0;
}
