/* SPDX-License-Identifier: Apache-2.0 */
/* conv_backprop_data: dL/dx of a convolution. A 1-D worked example in both modes, a strided
 * 2-D case whose input size is above the minimum (PyTorch's output_padding), a workspace too
 * small for the fast path, MegEngine's NCHW4 layout, I8 x I8 -> I32 and MegEngine's QuantizedS8
 * grad, and MegEngine's F16 compute_mode DEFAULT. Checks its own output and exits non-zero on a
 * mismatch. */
#include <stdio.h>
#include <string.h>

#include "gradref.h"

static int check(const char *what, const float *got, const float *want, int n) {
    int bad = 0;
    printf("%-26s", what);
    for (int i = 0; i < n; i++) {
        printf(" %g", got[i]);
        bad |= got[i] != want[i];
    }
    puts(bad ? "   MISMATCH" : "");
    return bad;
}

int main(void) {
    int bad = 0;
    /* 1-D: filter [1, 2, 3], diff [1, 10], stride 2 -> grad of 5 (or 6) samples */
    float w[3] = {1, 2, 3}, dy[2] = {1, 10}, dx[6];
    const int64_t fs[3] = {1, 1, 3}, ds[3] = {1, 1, 2}, gs5[3] = {1, 1, 5}, gs6[3] = {1, 1, 6};
    gradref_tensor filter, diff, grad;
    gradref_tensor_init(&filter, w, GRADREF_F32, 3, fs);
    gradref_tensor_init(&diff, dy, GRADREF_F32, 3, ds);
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    p.stride[0] = 2;
    p.dilation[0] = 1;
    static const float xcorr[6] = {1, 2, 13, 20, 30, 0}, conv[5] = {3, 2, 31, 20, 10};
    gradref_tensor_init(&grad, dx, GRADREF_F32, 3, gs5);
    if (gradref_conv_backprop_data(&p, &filter, &diff, &grad, NULL) != GRADREF_OK) return 1;
    bad |= check("1-D cross-correlation", dx, xcorr, 5);
    p.mode = GRADREF_CONV_CONVOLUTION; /* the filter flipped */
    if (gradref_conv_backprop_data(&p, &filter, &diff, &grad, NULL) != GRADREF_OK) return 1;
    bad |= check("1-D convolution", dx, conv, 5);
    p.mode = GRADREF_CONV_CROSS_CORRELATION; /* one sample more: the last gets no tap, 0 */
    gradref_tensor_init(&grad, dx, GRADREF_F32, 3, gs6);
    if (gradref_conv_backprop_data(&p, &filter, &diff, &grad, NULL) != GRADREF_OK) return 1;
    bad |= check("1-D, 6 samples", dx, xcorr, 6);

    /* 2-D: a 2x2 filter of ones, stride 2, pad 0, diff 2x2 of 1..4: each diff value spreads
     * over its own 2x2 block of a 5x5 grad (i_min = 4, plus one row and column of zeros) */
    float w2[4] = {1, 1, 1, 1}, dy2[4] = {1, 2, 3, 4}, dx2[25];
    const int64_t f2[4] = {1, 1, 2, 2}, d2[4] = {1, 1, 2, 2}, g2[4] = {1, 1, 5, 5};
    gradref_tensor_init(&filter, w2, GRADREF_F32, 4, f2);
    gradref_tensor_init(&diff, dy2, GRADREF_F32, 4, d2);
    gradref_tensor_init(&grad, dx2, GRADREF_F32, 4, g2);
    memset(&p, 0, sizeof p);
    p.stride[0] = p.stride[1] = 2;
    p.dilation[0] = p.dilation[1] = 1;
    if (gradref_conv_backprop_data(&p, &filter, &diff, &grad, NULL) != GRADREF_OK) return 1;
    static const float want2[25] = {1, 1, 2, 2, 0, 1, 1, 2, 2, 0, 3, 3, 4,
                                    4, 0, 3, 3, 4, 4, 0, 0, 0, 0, 0, 0};
    bad |= check("2-D stride 2, 5x5", dx2, want2, 25);
    /* a workspace too small for the fast path (here no usable byte): the no-workspace path
     * (its GEMMs on the stack) runs instead, with the same bits */
    float again[25];
    char tiny[1];
    gradref_tensor_init(&grad, again, GRADREF_F32, 4, g2);
    gradref_exec small = {tiny, sizeof tiny, 0, GRADREF_PRECISION_DEFAULT};
    if (gradref_conv_backprop_data(&p, &filter, &diff, &grad, &small) != GRADREF_OK) return 1;
    bad |= check("tiny workspace, same bits", again, dx2, 25);

    /* the same in MegEngine's NCHW4 with 4 channels: diff (1, 4/4, 2, 2, 4) holds channel c's
     * values times c + 1, the filter (OC, IC/4, 2, 2, 4) maps channel c to itself; grad comes
     * back blocked too, channel c the 5x5 above times c + 1 */
    float wb[4 * 4 * 4], db[16], gb[100];
    memset(wb, 0, sizeof wb);
    for (int c = 0; c < 4; c++)
        for (int t = 0; t < 4; t++) {
            wb[(c * 4 + t) * 4 + c] = 1;             /* filter (oc = c, 0, fh, fw, ic = c) */
            db[t * 4 + c] = dy2[t] * (float)(c + 1); /* diff (0, 0, h, w, c) */
        }
    const int64_t fb[4] = {4, 4, 2, 2}, dbs[4] = {1, 4, 2, 2}, gbs[4] = {1, 4, 5, 5};
    gradref_conv_filter_init_format(&filter, wb, GRADREF_F32, GRADREF_FORMAT_NCHW4, 4, fb);
    gradref_tensor_init_format(&diff, db, GRADREF_F32, GRADREF_FORMAT_NCHW4, dbs);
    gradref_tensor_init_format(&grad, gb, GRADREF_F32, GRADREF_FORMAT_NCHW4, gbs);
    if (gradref_conv_backprop_data(&p, &filter, &diff, &grad, NULL) != GRADREF_OK) return 1;
    float channel3[25];
    for (int i = 0; i < 25; i++)
        channel3[i] = gb[i * 4 + 3] / 4; /* (0, 0, h, w, 3): channel 3, divided by 4 */
    bad |= check("NCHW4, channel 3 / 4", channel3, dx2, 25);

    /* I8 x I8 -> I32: exact */
    int8_t wi[3] = {-128, 127, 3}, di[2] = {-128, 100};
    int32_t gi[5];
    gradref_tensor_init(&filter, wi, GRADREF_I8, 3, fs);
    gradref_tensor_init(&diff, di, GRADREF_I8, 3, ds);
    gradref_tensor_init(&grad, gi, GRADREF_I32, 3, gs5);
    memset(&p, 0, sizeof p);
    p.stride[0] = 2;
    p.dilation[0] = 1;
    if (gradref_conv_backprop_data(&p, &filter, &diff, &grad, NULL) != GRADREF_OK) return 1;
    const int32_t want_i[5] = {16384, -16256, -384 - 12800, 12700, 300};
    printf("%-26s", "I8 -> I32");
    for (int i = 0; i < 5; i++) {
        printf(" %d", (int)gi[i]);
        bad |= gi[i] != want_i[i];
    }
    puts("");

    /* the same as MegEngine's QuantizedS8 grad: scales 0.5 and 0.25 in, 32 out, so each sum
     * becomes roundf(acc / 256), saturated (-63.5 is a tie: away from zero) */
    int8_t gq[5];
    gradref_tensor_init(&grad, gq, GRADREF_I8, 3, gs5);
    const gradref_qs8_scales scales = {0.5f, 0.25f, 32.0f};
    if (gradref_conv_backprop_data_qs8(&p, &scales, &filter, &diff, &grad, NULL) != GRADREF_OK)
        return 1;
    const int8_t want_q[5] = {64, -64, -52, 50, 1};
    printf("%-26s", "QuantizedS8");
    for (int i = 0; i < 5; i++) {
        printf(" %d", (int)gq[i]);
        bad |= gq[i] != want_q[i];
    }
    puts("");

    /* diff's size must match the geometry: an error with the numbers, grad untouched */
    gradref_tensor_init(&grad, gi, GRADREF_I32, 3, gs6);
    p.stride[0] = 1;
    if (gradref_conv_backprop_data(&p, &filter, &diff, &grad, NULL) == GRADREF_ERR_SHAPE)
        printf("expected error: %s\n", gradref_last_error());
    else
        bad = 1;
    /* MegEngine's compute_mode DEFAULT on F16: the sum 2048 + 1 is kept in F16 after each term,
     * a tie that its rounding takes away from zero (2050); the default rounds once (2048) */
    const uint16_t w16[2] = {0x6800 /* 2048 */, 0x3c00 /* 1 */}, d16[2] = {0x3c00, 0x3c00};
    uint16_t g16[1];
    const int64_t fs16[4] = {2, 1, 1, 1}, ds16[4] = {1, 2, 1, 1}, gs16[4] = {1, 1, 1, 1};
    gradref_tensor_init(&filter, (void *)w16, GRADREF_F16, 4, fs16);
    gradref_tensor_init(&diff, (void *)d16, GRADREF_F16, 4, ds16);
    gradref_tensor_init(&grad, g16, GRADREF_F16, 4, gs16);
    gradref_conv_params unit;
    memset(&unit, 0, sizeof unit);
    unit.stride[0] = unit.stride[1] = unit.dilation[0] = unit.dilation[1] = 1;
    if (gradref_conv_backprop_data(&unit, &filter, &diff, &grad, NULL) != GRADREF_OK) return 1;
    const uint16_t once = g16[0];
    gradref_exec megengine = {NULL, 0, 0, GRADREF_PRECISION_MEGENGINE_DEFAULT};
    if (gradref_conv_backprop_data(&unit, &filter, &diff, &grad, &megengine) != GRADREF_OK)
        return 1;
    printf("%-26s default %04x (2048), MegEngine DEFAULT %04x (2050)\n", "F16 2048 + 1", once,
           g16[0]);
    bad |= once != 0x6800 || g16[0] != 0x6801;

    puts(bad ? "MISMATCH" : "ok");
    return bad;
}
