/* SPDX-License-Identifier: Apache-2.0 */
/* The reference loop (docs/conv3d_backprop_filter.md): for each dw element, the reduction
 * indices r = (n, od, oh, ow) in ascending order are cut into blocks of GRADREF__C3F_BLOCK;
 * each block is one chain acc = fma(x, dy, acc) from +0 over its r whose input tap lies inside
 * x (the others are skipped); the block sums are combined as a binary counter: a new sum merges
 * with the stored sum of its level (older + newer) and moves up while that level is taken; at
 * the end the stored sums are added from the lowest level up, each higher (older) one on the
 * left. F32/F16/BF16 run in f32 (fmaf), F64 and GRADREF_PRECISION_HIGH in f64; the HF32
 * precisions round each x and dy value to HF32 first (gradref__hf32_round). */
#include <math.h>

#include "c3f_internal.h"
#include "common/convert.h"
#include "common/fma.h"
#include "common/nan.h"

enum { MAX_LEVELS = 64 };

/* The binary-counter combination of block sums (f32 or f64). */
typedef struct cascade {
    int wide;
    int used[MAX_LEVELS];
    float s32[MAX_LEVELS];
    double s64[MAX_LEVELS];
} cascade;

static void cascade_push(cascade *c, float v32, double v64) {
    int l = 0;
    while (c->used[l]) {
        v32 = c->s32[l] + v32;
        v64 = c->s64[l] + v64;
        c->used[l++] = 0;
    }
    c->used[l] = 1;
    c->s32[l] = v32;
    c->s64[l] = v64;
}

static double cascade_total(const cascade *c) {
    int started = 0;
    float t32 = 0.0f;
    double t64 = 0.0;
    for (int l = 0; l < MAX_LEVELS; l++) {
        if (!c->used[l]) continue;
        if (!started) {
            t32 = c->s32[l], t64 = c->s64[l], started = 1;
        } else {
            t32 = c->s32[l] + t32, t64 = c->s64[l] + t64;
        }
    }
    return c->wide ? t64 : (double)t32;
}

/* Input index of output index o through tap position kp in dim j, or -1 outside x. */
static int64_t input_index(const gradref__c3f_plan *p, int j, int64_t o, int64_t kp) {
    int64_t i = o * p->stride[j] - p->pad_begin[j] + kp * p->dil[j];
    return i >= 0 && i < p->I[j] ? i : -1;
}

void gradref__c3f_ref(const gradref__c3f_plan *p) {
    gradref__c3f_ref_elements(p, 0, p->G * p->Cout_g * p->Cin_g * p->K[0] * p->K[1] * p->K[2]);
}

void gradref__c3f_ref_elements(const gradref__c3f_plan *p, int64_t e0, int64_t e1) {
    const int wide =
        p->in_dtype == GRADREF_F64 || p->precision == GRADREF_PRECISION_HIGH || p->terms;
    const int hf32 = gradref__hf32_kept_bits(p->precision); /* F32 in: validated */
    const int64_t T = p->K[0] * p->K[1] * p->K[2], R = p->N * p->O[0] * p->O[1] * p->O[2];
    const int64_t Cout = p->G * p->Cout_g;
    (void)Cout;
    for (int64_t e = e0; e < e1; e++) {
        const int64_t co = e / (p->Cin_g * T), ci = e / T % p->Cin_g, t = e % T;
        const int64_t g = co / p->Cout_g;
        const int64_t k[3] = {t / (p->K[1] * p->K[2]), t / p->K[2] % p->K[1], t % p->K[2]};
        int64_t kp[3];
        for (int j = 0; j < 3; j++)
            kp[j] = p->mode == GRADREF_CONV_CROSS_CORRELATION ? k[j] : p->K[j] - 1 - k[j];
        const char *xc = p->x + (size_t)((g * p->Cin_g + ci) * p->xs[1]) * p->in_size;
        const char *yc = p->dy + (size_t)(co * p->ys[1]) * p->in_size;
        cascade c;
        for (int l = 0; l < MAX_LEVELS; l++)
            c.used[l] = 0;
        c.wide = wide;
        int64_t r = 0;
        float b32 = 0.0f;
        double b64 = 0.0;
        for (int64_t n = 0; n < p->N; n++)
            for (int64_t od = 0; od < p->O[0]; od++)
                for (int64_t oh = 0; oh < p->O[1]; oh++)
                    for (int64_t ow = 0; ow < p->O[2]; ow++, r++) {
                        const int64_t id = input_index(p, 0, od, kp[0]),
                                      ih = input_index(p, 1, oh, kp[1]),
                                      iw = input_index(p, 2, ow, kp[2]);
                        if (id >= 0 && ih >= 0 && iw >= 0) {
                            const double xv = gradref__load_float(
                                p->in_dtype, xc + (size_t)(n * p->xs[0] + id * p->xs[2] +
                                                           ih * p->xs[3] + iw * p->xs[4]) *
                                                      p->in_size);
                            const double dv = gradref__load_float(
                                p->in_dtype, yc + (size_t)(n * p->ys[0] + od * p->ys[2] +
                                                           oh * p->ys[3] + ow * p->ys[4]) *
                                                      p->in_size);
                            if (p->terms == GRADREF__TERMS_COUNTS)
                                b64 += 1.0;
                            else if (p->terms)
                                b64 = fma(fabs(xv), fabs(dv), b64);
                            else if (hf32)
                                b32 = gradref__fmaf(gradref__hf32_round((float)xv, hf32),
                                                    gradref__hf32_round((float)dv, hf32), b32);
                            else if (wide)
                                b64 = fma(xv, dv, b64);
                            else
                                b32 = gradref__fmaf((float)xv, (float)dv, b32);
                        }
                        if ((r + 1) % GRADREF__C3F_BLOCK == 0 || r + 1 == R) {
                            cascade_push(&c, b32, b64);
                            b32 = 0.0f;
                            b64 = 0.0;
                        }
                    }
        const double total = R > 0 ? cascade_total(&c) : 0.0;
        char *out = p->dw + (size_t)(co * p->ws[0] + ci * p->ws[1] + k[0] * p->ws[2] +
                                     k[1] * p->ws[3] + k[2] * p->ws[4]) *
                                p->out_size;
        gradref__store_float(p->out_dtype, out, total);
    }
}

/* Whether dy[n, co, o] through tap t reads the padding (an input index outside x). */
static int tap_in_padding(const gradref__c3f_plan *p, const int64_t *o, int64_t t) {
    const int64_t k[3] = {t / (p->K[1] * p->K[2]), t / p->K[2] % p->K[1], t % p->K[2]};
    for (int j = 0; j < 3; j++) {
        const int64_t kp = p->mode == GRADREF_CONV_CROSS_CORRELATION ? k[j] : p->K[j] - 1 - k[j];
        if (input_index(p, j, o[j], kp) < 0) return 1;
    }
    return 0;
}

/* dw[co, ci, t] = NaN for every ci. */
static void mark_nan(const gradref__c3f_plan *p, int64_t co, int64_t t) {
    const int64_t k[3] = {t / (p->K[1] * p->K[2]), t / p->K[2] % p->K[1], t % p->K[2]};
    for (int64_t ci = 0; ci < p->Cin_g; ci++)
        gradref__store_float(p->out_dtype,
                             p->dw + (size_t)(co * p->ws[0] + ci * p->ws[1] + k[0] * p->ws[2] +
                                              k[1] * p->ws[3] + k[2] * p->ws[4]) *
                                         p->out_size,
                             NAN);
}

/* Whether any tap reads the padding: a pad in front, or the last window past x's end. */
static int reads_padding(const gradref__c3f_plan *p) {
    for (int j = 0; j < 3; j++)
        if (p->pad_begin[j] > 0 ||
            (p->O[j] - 1) * p->stride[j] - p->pad_begin[j] + (p->K[j] - 1) * p->dil[j] >= p->I[j])
            return 1;
    return 0;
}

/* Element o of dy's row (n, co, o[0], o[1]) is finite; the row's F32 run checked by the
 * kernels first (the common case, no Inf or NaN, costs one vector pass over dy). */
static int row_finite(const gradref__c3f_plan *p, const char *row) {
    if (p->in_dtype == GRADREF_F32 && p->ys[4] == 1)
        return gradref__nan_kernels_for(p->max_isa)
            ->all_finite_f32((const float *)(const void *)row, p->O[2]);
    for (int64_t w = 0; w < p->O[2]; w++)
        if (!isfinite(gradref__load_float(p->in_dtype, row + (size_t)(w * p->ys[4]) * p->in_size)))
            return 0;
    return 1;
}

void gradref__c3f_padded_nans(const gradref__c3f_plan *p) {
    if (!reads_padding(p)) return;
    const int64_t T = p->K[0] * p->K[1] * p->K[2];
    int64_t o[3];
    for (int64_t co = 0; co < p->G * p->Cout_g; co++)
        for (int64_t n = 0; n < p->N; n++)
            for (o[0] = 0; o[0] < p->O[0]; o[0]++)
                for (o[1] = 0; o[1] < p->O[1]; o[1]++) {
                    const char *row = p->dy + (size_t)(n * p->ys[0] + co * p->ys[1] +
                                                       o[0] * p->ys[2] + o[1] * p->ys[3]) *
                                                  p->in_size;
                    if (row_finite(p, row)) continue;
                    for (o[2] = 0; o[2] < p->O[2]; o[2]++) {
                        if (isfinite(gradref__load_float(
                                p->in_dtype, row + (size_t)(o[2] * p->ys[4]) * p->in_size)))
                            continue;
                        for (int64_t t = 0; t < T; t++)
                            if (tap_in_padding(p, o, t)) mark_nan(p, co, t);
                    }
                }
}
