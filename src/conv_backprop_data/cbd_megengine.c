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
#include "cbd_kernels.h"
#include "common/convert.h"

#include <string.h>

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

/* ---- the same by lanes: each grad element's chain whole, LANES elements at a time ---- */

enum {
    ME_MAX_TAPS = GRADREF__CBD_ME_MAX_TAPS,
    ME_WF_FLOATS = 6144 /* a block's filter as f32 on the stack (24 KiB), when it fits */
};

/* Whether the lanes kernels take plan p: a kernel, at most ME_MAX_TAPS taps (the tap list is on
 * the stack), and every column index and offset of the last dim within int32. */
int gradref__cbd_megengine_by_lanes(const gradref__cbd_plan *p, const gradref__cbd_kernels *k) {
    const int64_t lim = INT64_C(1) << 30;
    return k->megengine_row != NULL && p->K[0] * p->K[1] * p->K[2] <= ME_MAX_TAPS &&
           p->O[2] < lim && p->I[2] < lim && p->pad_begin[2] < lim &&
           (p->K[2] - 1) * p->dil[2] < lim;
}

/* The taps reaching grad row (i0, i1) at columns i2 = r (mod stride[2]), in MegEngine's order
 * for an element (diff positions ascending: the tap positions descending); returns how many. */
static int64_t row_taps(const gradref__cbd_plan *p, int64_t i0, int64_t i1, int64_t r,
                        gradref__cbd_me_tap *tap) {
    const int64_t i[3] = {i0, i1, r};
    int64_t n = 0, kp[3], o[3];
    for (kp[0] = p->K[0] - 1; kp[0] >= 0; kp[0]--)
        for (kp[1] = p->K[1] - 1; kp[1] >= 0; kp[1]--)
            for (kp[2] = p->K[2] - 1; kp[2] >= 0; kp[2]--) {
                int ok = 1;
                for (int j = 0; j < 3 && ok; j++) {
                    const int64_t num = i[j] + p->pad_begin[j] - kp[j] * p->dil[j];
                    ok = num % p->stride[j] == 0;
                    o[j] = num >= 0 ? num / p->stride[j] : -((-num) / p->stride[j]);
                    if (j < 2) ok = ok && o[j] >= 0 && o[j] < p->O[j];
                }
                if (!ok) continue;
                int64_t k[3];
                for (int j = 0; j < 3; j++)
                    k[j] = p->mode == GRADREF_CONV_CROSS_CORRELATION ? kp[j] : p->K[j] - 1 - kp[j];
                tap[n].foff = k[0] * p->fs[3] + k[1] * p->fs[4] + k[2] * p->fs[5];
                tap[n].fk = (k[0] * p->K[1] + k[1]) * p->K[2] + k[2];
                tap[n].drow = o[0] * p->ds[3] + o[1] * p->ds[4];
                tap[n].base = o[2]; /* lane j: column base + j */
                n++;
            }
    return n;
}

/* The block's filter (group g, channels ic .. ic + channels) as f32, once per item: the row
 * kernels then read each weight as a float (the conversion is exact: the same terms). */
static const float *filter_f32(const gradref__cbd_plan *p, int64_t g, int64_t ic, int64_t channels,
                               float *wf) {
    const int64_t CB = GRADREF__CBD_ME_CHANNELS, KT = p->K[0] * p->K[1] * p->K[2];
    if (p->OCpg * KT * CB > ME_WF_FLOATS) return NULL;
    const uint16_t *f = (const uint16_t *)(const void *)p->filter + g * p->fs[0] + ic * p->fs[2];
    const int bf16 = p->in_dtype == GRADREF_BF16;
    int64_t k[3];
    for (int64_t oc = 0; oc < p->OCpg; oc++)
        for (k[0] = 0; k[0] < p->K[0]; k[0]++)
            for (k[1] = 0; k[1] < p->K[1]; k[1]++)
                for (k[2] = 0; k[2] < p->K[2]; k[2]++) {
                    const uint16_t *w =
                        f + oc * p->fs[1] + k[0] * p->fs[3] + k[1] * p->fs[4] + k[2] * p->fs[5];
                    float *out = wf + (oc * KT + (k[0] * p->K[1] + k[1]) * p->K[2] + k[2]) * CB;
                    for (int64_t c = 0; c < CB; c++)
                        out[c] = c >= channels ? 0.0f
                                 : bf16        ? gradref__bf16_to_f32(w[c * p->fs[2]])
                                               : gradref__f16_to_f32(w[c * p->fs[2]]);
                }
    return wf;
}

/* Items [s0, s1) of (n, g, block of GRADREF__CBD_ME_CHANNELS input channels) by the kernel's
 * lanes: per grad row, per residue class of the columns mod stride[2], LANES columns of every
 * channel of the block at a time. */
void gradref__cbd_megengine_lanes(const gradref__cbd_plan *p, const gradref__cbd_kernels *k,
                                  int64_t s0, int64_t s1) {
    gradref__cbd_me_tap tap[ME_MAX_TAPS];
    __attribute__((aligned(64))) float wf[ME_WF_FLOATS];
    gradref__cbd_me_row a;
    memset(&a, 0, sizeof a);
    a.fs_oc = p->fs[1];
    a.ds_oc = p->ds[2];
    a.OCpg = p->OCpg;
    a.O2 = p->O[2];
    a.ds5 = p->ds[5];
    a.bf16 = p->in_dtype == GRADREF_BF16;
    a.tap = tap;
    a.fs_ic = p->fs[2];
    a.out_ic = p->gs[2];
    const int64_t S2 = p->stride[2], L = k->megengine_lanes, CB = GRADREF__CBD_ME_CHANNELS;
    const int64_t blocks = (p->ICpg + CB - 1) / CB;
    for (int64_t s = s0; s < s1; s++) {
        const int64_t n = s / (p->G * blocks), g = s / blocks % p->G, ic = s % blocks * CB;
        a.channels = p->ICpg - ic < CB ? p->ICpg - ic : CB;
        a.filter = (const uint16_t *)(const void *)p->filter + g * p->fs[0] + ic * p->fs[2];
        a.wf = filter_f32(p, g, ic, a.channels, wf);
        a.wf_oc = p->K[0] * p->K[1] * p->K[2] * CB;
        a.diff = (const uint16_t *)(const void *)p->diff + n * p->ds[0] + g * p->ds[1];
        uint16_t *slab = (uint16_t *)(void *)p->grad + n * p->gs[0] + g * p->gs[1] + ic * p->gs[2];
        for (int64_t i0 = 0; i0 < p->I[0]; i0++)
            for (int64_t i1 = 0; i1 < p->I[1]; i1++)
                for (int64_t r = 0; r < S2 && r < p->I[2]; r++) {
                    a.ntaps = row_taps(p, i0, i1, r, tap);
                    const int64_t columns = (p->I[2] - r + S2 - 1) / S2;
                    a.out_step = S2 * p->gs[5];
                    for (a.j0 = 0; a.j0 < columns; a.j0 += L) {
                        a.count = columns - a.j0 < L ? columns - a.j0 : L;
                        a.out = slab + i0 * p->gs[3] + i1 * p->gs[4] + (r + S2 * a.j0) * p->gs[5];
                        k->megengine_row(&a);
                    }
                }
    }
}
