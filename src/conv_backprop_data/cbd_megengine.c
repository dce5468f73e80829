/* SPDX-License-Identifier: Apache-2.0 */
/* GRADREF_PRECISION_MEGENGINE_DEFAULT: MegEngine's naive ConvolutionBackwardData with
 * compute_mode DEFAULT on F16/BF16 (dnn/src/naive/convolution/helper.h, StrategyBwdData). It
 * zeroes grad and runs the forward loop nest as a scatter,
 *
 *   for n, oc, o0, o1, o2, k0, k1, k2 (stored indices), ic of oc's group:
 *       grad[n, ic, i] += (half)W[oc, ic, k] * (half)diff[n, oc, o]
 *
 * where the product of two 16-bit values is a float and `half += float` converts the element
 * to float, adds in float and converts back (MegEngine's rounding: ties away from zero for F16,
 * to even for BF16). So every term rounds the element to 16 bits, in this order. */
#include "cbd_internal.h"
#include "common/convert.h"

static float load16(int32_t dtype, const char *e) {
    const uint16_t h = *(const uint16_t *)e;
    return dtype == GRADREF_F16 ? gradref__f16_to_f32(h) : gradref__bf16_to_f32(h);
}

/* i = o * stride + tap position * dil - pad, with the tap position k (cross-correlation) or
 * K-1-k (convolution, MegEngine's should_flip). */
static int64_t input_index(const gradref__cbd_plan *p, int j, int64_t o, int64_t k) {
    const int64_t kp = p->mode == GRADREF_CONV_CROSS_CORRELATION ? k : p->K[j] - 1 - k;
    return o * p->stride[j] + kp * p->dil[j] - p->pad_begin[j];
}

/* The terms of one diff element d at position o of output channel oc (filter taps at wbase):
 * every tap k reaching grad, then every ic of the group, each rounded into its grad element. */
static void scatter_diff(const gradref__cbd_plan *p, uint16_t (*round16)(float), float d,
                         const int64_t *o, const char *wbase, char *gbase) {
    const int32_t dt = p->in_dtype;
    int64_t k[3], i[3];
    for (k[0] = 0; k[0] < p->K[0]; k[0]++) {
        if ((i[0] = input_index(p, 0, o[0], k[0])) < 0 || i[0] >= p->I[0]) continue;
        for (k[1] = 0; k[1] < p->K[1]; k[1]++) {
            if ((i[1] = input_index(p, 1, o[1], k[1])) < 0 || i[1] >= p->I[1]) continue;
            for (k[2] = 0; k[2] < p->K[2]; k[2]++) {
                if ((i[2] = input_index(p, 2, o[2], k[2])) < 0 || i[2] >= p->I[2]) continue;
                const char *w =
                    wbase +
                    (size_t)(k[0] * p->fs[3] + k[1] * p->fs[4] + k[2] * p->fs[5]) * p->in_size;
                char *e = gbase + (size_t)(i[0] * p->gs[3] + i[1] * p->gs[4] + i[2] * p->gs[5]) *
                                      p->out_size;
                for (int64_t ic = 0; ic < p->ICpg; ic++) {
                    uint16_t *acc = (uint16_t *)(e + (size_t)(ic * p->gs[2]) * p->out_size);
                    const float prod = load16(dt, w + (size_t)(ic * p->fs[2]) * p->in_size) * d;
                    *acc = round16(load16(dt, (const char *)acc) + prod);
                }
            }
        }
    }
}

void gradref__cbd_megengine_items(const gradref__cbd_plan *p, int64_t item0, int64_t item1) {
    const int32_t dt = p->in_dtype;
    uint16_t (*round16)(float) =
        dt == GRADREF_F16 ? gradref__f32_to_f16_megengine : gradref__f32_to_bf16_megengine;
    for (int64_t item = item0; item < item1; item++) { /* one image, one group */
        const int64_t n = item / p->G, g = item % p->G;
        char *gbase = p->grad + (size_t)(n * p->gs[0] + g * p->gs[1]) * p->out_size;
        int64_t i[3], o[3];
        for (int64_t ic = 0; ic < p->ICpg; ic++)
            for (i[0] = 0; i[0] < p->I[0]; i[0]++)
                for (i[1] = 0; i[1] < p->I[1]; i[1]++)
                    for (i[2] = 0; i[2] < p->I[2]; i[2]++)
                        *(uint16_t *)(gbase + (size_t)(ic * p->gs[2] + i[0] * p->gs[3] +
                                                       i[1] * p->gs[4] + i[2] * p->gs[5]) *
                                                  p->out_size) = 0;
        for (int64_t oc = 0; oc < p->OCpg; oc++) {
            const char *wbase = p->filter + (size_t)(g * p->fs[0] + oc * p->fs[1]) * p->in_size;
            const char *dbase =
                p->diff + (size_t)(n * p->ds[0] + g * p->ds[1] + oc * p->ds[2]) * p->in_size;
            for (o[0] = 0; o[0] < p->O[0]; o[0]++)
                for (o[1] = 0; o[1] < p->O[1]; o[1]++)
                    for (o[2] = 0; o[2] < p->O[2]; o[2]++)
                        scatter_diff(p, round16,
                                     load16(dt, dbase + (size_t)(o[0] * p->ds[3] + o[1] * p->ds[4] +
                                                                 o[2] * p->ds[5]) *
                                                            p->in_size),
                                     o, wbase, gbase);
        }
    }
}
