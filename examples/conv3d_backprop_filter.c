/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter: dL/dw of a 3-D convolution. CANN's all-ones example, a SAME-padded
 * case with the weight gradient in TF's DHWIO (DHWCN) layout, CANN's transpose rule, its
 * filter_size with from_depthwise, and its HF32 mode.
 * Checks its own output and exits non-zero on a mismatch. */
#include <stdio.h>
#include <string.h>

#include "gradref.h"

int main(void) {
    int bad = 0;
    /* x = dy = ones (2, 2, 7, 7, 7), a 1x1x1 kernel: every dW = 2 images * 343 = 686 */
    static float x[2 * 2 * 343], dy[2 * 2 * 343];
    for (int i = 0; i < 2 * 2 * 343; i++)
        x[i] = dy[i] = 1.0f;
    float dw[4];
    const int64_t xs[5] = {2, 2, 7, 7, 7}, ws[5] = {2, 2, 1, 1, 1};
    gradref_tensor tx, tdy, tdw;
    gradref_tensor_init(&tx, x, GRADREF_F32, 5, xs);
    gradref_tensor_init(&tdy, dy, GRADREF_F32, 5, xs);
    gradref_tensor_init(&tdw, dw, GRADREF_F32, 5, ws);
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    for (int j = 0; j < 3; j++)
        p.stride[j] = p.dilation[j] = 1;
    if (gradref_conv3d_backprop_filter(&p, &tx, &tdy, &tdw, NULL) != GRADREF_OK) return 1;
    printf("all ones: dw = %g %g %g %g\n", dw[0], dw[1], dw[2], dw[3]);
    for (int i = 0; i < 4; i++)
        bad |= dw[i] != 686.0f;

    /* SAME padding, stride 2: x (1, 1, 3, 3, 3) = 1..27, a 3x3x3 kernel, dy (1, 1, 2, 2, 2) =
     * ones, dw in DHWCN (TF DHWIO) */
    float x2[27], dy2[8], dw2[27];
    for (int i = 0; i < 27; i++)
        x2[i] = (float)(i + 1);
    for (int i = 0; i < 8; i++)
        dy2[i] = 1.0f;
    const int64_t xs2[5] = {1, 1, 3, 3, 3}, ys2[5] = {1, 1, 2, 2, 2}, ws2[5] = {1, 1, 3, 3, 3};
    const int64_t in[3] = {3, 3, 3}, k[3] = {3, 3, 3};
    for (int j = 0; j < 3; j++)
        p.stride[j] = 2;
    if (gradref_conv_pads_same(&p, 3, in, k) != GRADREF_OK) return 1;
    printf("SAME pads: %lld %lld %lld %lld %lld %lld\n", (long long)p.pad[0], (long long)p.pad[1],
           (long long)p.pad[2], (long long)p.pad[3], (long long)p.pad[4], (long long)p.pad[5]);
    gradref_tensor_init(&tx, x2, GRADREF_F32, 5, xs2);
    gradref_tensor_init(&tdy, dy2, GRADREF_F32, 5, ys2);
    gradref_tensor_init_format(&tdw, dw2, GRADREF_F32, GRADREF_FORMAT_DHWCN, ws2);
    if (gradref_conv3d_backprop_filter(&p, &tx, &tdy, &tdw, NULL) != GRADREF_OK) return 1;
    /* pads 1 before, 1 after: output o reads x at 2*o - 1 + k; tap k = 1 reads x[2*o], so
     * only o = 0 (x[0] in each dim) and o = 1 (x[2]) are inside: the 8 corners of x */
    const float corners = 1 + 3 + 7 + 9 + 19 + 21 + 25 + 27;
    printf("SAME, stride 2: dw[centre tap] = %g (corners of x: %g)\n", dw2[13], corners);
    bad |= dw2[13] != corners;

    /* CANN's rule with 32 AI cores: a DHWCN dw of din 1, cin 128, cout 128 sits on the 2-D
     * limit (16 * 32 * 32 = 16384): a Transpose follows; one more output channel, none */
    printf("transpose: %d %d %d\n",
           gradref_conv3d_dw_transpose_needed(GRADREF_FORMAT_DHWCN, 1, 128, 128, 32, 1),
           gradref_conv3d_dw_transpose_needed(GRADREF_FORMAT_DHWCN, 1, 128, 129, 32, 1),
           gradref_conv3d_dw_transpose_needed(GRADREF_FORMAT_NCDHW, 1, 128, 128, 32, 1));
    bad |= gradref_conv3d_dw_transpose_needed(GRADREF_FORMAT_DHWCN, 1, 128, 128, 32, 1) != 1;
    bad |= gradref_conv3d_dw_transpose_needed(GRADREF_FORMAT_DHWCN, 1, 128, 129, 32, 1) != 0;

    /* dy's batch must be x's (CANN would take it from dy): an error, dw untouched */
    const int64_t ys_bad[5] = {2, 1, 2, 2, 2};
    gradref_tensor_init(&tdy, dy, GRADREF_F32, 5, ys_bad);
    if (gradref_conv3d_backprop_filter(&p, &tx, &tdy, &tdw, NULL) == GRADREF_ERR_SHAPE)
        printf("expected error: %s\n", gradref_last_error());
    else
        bad = 1;
    /* CANN's y from a 4-entry filter_size (D = 1) with from_depthwise: a depthwise filter
     * (kH, kW, in 2, multiplier 2) in DHWCN reads as 4 output channels of one input channel
     * each; groups = x's channels. x all ones (2 channels), dy's channel o all o + 1, 1x1x1:
     * output channel o = i * 2 + m sits at (0, 0, 0, i, m) and is 686 * (o + 1). */
    float dwd[4];
    const int64_t fsize[4] = {1, 1, 2, 2}, xshape[5] = {2, 2, 7, 7, 7}, yshape[5] = {2, 4, 7, 7, 7};
    static float dy4[2 * 4 * 343];
    for (int i = 0; i < 2 * 4 * 343; i++)
        dy4[i] = (float)(i / 343 % 4 + 1);
    gradref_tensor_init(&tx, x, GRADREF_F32, 5, xshape);
    gradref_tensor_init(&tdy, dy4, GRADREF_F32, 5, yshape);
    if (gradref_conv3d_filter_init_cann(&tdw, dwd, GRADREF_F32, GRADREF_FORMAT_DHWCN, 4, fsize,
                                        1) != GRADREF_OK)
        return 1;
    gradref_conv_params depthwise = p;
    memset(depthwise.pad, 0, sizeof depthwise.pad);
    for (int j = 0; j < 3; j++)
        depthwise.stride[j] = 1;
    depthwise.groups = 2;
    if (gradref_conv3d_backprop_filter(&depthwise, &tx, &tdy, &tdw, NULL) != GRADREF_OK) return 1;
    printf("depthwise (1,1,2,2): dw = %g %g %g %g\n", dwd[0], dwd[1], dwd[2], dwd[3]);
    for (int o = 0; o < 4; o++)
        bad |= dwd[o] != 686.0f * (float)(o + 1);

    /* CANN's HF32 mode: x = 1 + 2^-11 is a tie at 10 kept bits and rounds away from zero to
     * 1 + 2^-10; dy = 1; one tap: dw = the rounded x */
    float xh = 1.0f + 1.0f / 2048.0f, dyh = 1.0f, dwh = 0.0f;
    const int64_t one[5] = {1, 1, 1, 1, 1};
    gradref_tensor_init(&tx, &xh, GRADREF_F32, 5, one);
    gradref_tensor_init(&tdy, &dyh, GRADREF_F32, 5, one);
    gradref_tensor_init(&tdw, &dwh, GRADREF_F32, 5, one);
    gradref_conv_params unit;
    memset(&unit, 0, sizeof unit);
    for (int j = 0; j < 3; j++)
        unit.stride[j] = unit.dilation[j] = 1;
    gradref_exec hf32 = {NULL, 0, 0, GRADREF_PRECISION_HF32};
    if (gradref_conv3d_backprop_filter(&unit, &tx, &tdy, &tdw, &hf32) != GRADREF_OK) return 1;
    printf("HF32: x = 1 + 2^-11 gives dw = 1 + %g * 2^-10\n", (dwh - 1.0f) * 1024.0f);
    bad |= dwh != 1.0f + 1.0f / 1024.0f;
    puts(bad ? "MISMATCH" : "ok");
    return bad;
}
