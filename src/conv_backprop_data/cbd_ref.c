/* SPDX-License-Identifier: Apache-2.0 */
/* The reference loop (docs/conv_backprop_data.md), one grad element at a time: one chain of
 * fused multiply-adds, starting at +0,
 *
 *   acc = fma(W[g, oc, ic, k], diff[n, g, oc, o], acc)
 *
 * over the taps k that reach i, in ascending diff position o (lexicographic), and within a tap
 * over oc = 0..OCpg-1. F32/F16/BF16 use fmaf in f32 (F16/BF16 rounded once at the end); F64,
 * and GRADREF_PRECISION_HIGH, use fma in f64; I8 and I32 sum exactly modulo 2^64 and keep the
 * low 32 bits (two's complement int32 arithmetic in any order; requantised to QuantizedS8 for
 * the _qs8 call). Taps whose position falls outside diff are skipped. */
#include <math.h>

#include "cbd_internal.h"
#include "common/convert.h"
#include "common/fma.h"

/* The filter tap (stored index) acting at position index kp of dim j. */
static int64_t stored_tap(const gradref__cbd_plan *p, int j, int64_t kp) {
    return p->mode == GRADREF_CONV_CROSS_CORRELATION ? kp : p->K[j] - 1 - kp;
}

/* diff position of grad index i through tap position kp in dim j, or -1 when none. */
static int64_t diff_pos(const gradref__cbd_plan *p, int j, int64_t i, int64_t kp) {
    int64_t num = i + p->pad_begin[j] - kp * p->dil[j];
    if (num < 0 || num % p->stride[j] != 0) return -1;
    num /= p->stride[j];
    return num < p->O[j] ? num : -1;
}

static double in_value(const gradref__cbd_plan *p, const char *base, int64_t off) {
    const char *e = base + (size_t)off * p->in_size;
    if (p->in_dtype == GRADREF_I8) return (double)*(const int8_t *)e;
    if (p->in_dtype == GRADREF_I32) return (double)*(const int32_t *)e;
    return gradref__load_float(p->in_dtype, e);
}

int8_t gradref__cbd_qs8_requantize(int32_t acc, float acc_scale, float grad_scale) {
    const float t = (float)acc * acc_scale; /* QuantizedS32's dequantize */
    const float v = roundf(t / grad_scale);
    return (int8_t)fminf(fmaxf(-128.0f, v), 127.0f);
}

void gradref__cbd_ref(const gradref__cbd_plan *p) {
    gradref__cbd_ref_slabs(p, 0, p->N * p->G * p->ICpg);
}

static int all_zero_bits(const char *e, size_t bytes) {
    for (size_t b = 0; b < bytes; b++)
        if (e[b]) return 0;
    return 1;
}

/* One grad element's sum in the call's arithmetic. */
typedef struct sum {
    int integer, wide, terms; /* terms: GRADREF__TERMS_* (then wide) */
    float f32;
    double f64;
    uint64_t u64; /* integers: the sum modulo 2^64 (I32 products reach 2^62) */
} sum;

/* The terms of one tap: filter at foff, diff at doff, over oc = 0..OCpg-1. */
static void add_tap(const gradref__cbd_plan *p, const char *fg, const char *dn, int64_t foff,
                    int64_t doff, sum *acc) {
    float f32 = acc->f32; /* in registers: the char loads below may alias *acc */
    double f64 = acc->f64;
    uint64_t u64 = acc->u64;
    for (int64_t oc = 0; oc < p->OCpg; oc++) {
        const double w = in_value(p, fg, foff + oc * p->fs[1]);
        const double d = in_value(p, dn, doff + oc * p->ds[2]);
        if (acc->terms)
            f64 = acc->terms == GRADREF__TERMS_COUNTS ? f64 + 1.0 : fma(fabs(w), fabs(d), f64);
        else if (acc->integer)
            u64 += (uint64_t)((int64_t)w * (int64_t)d);
        else if (acc->wide)
            f64 = fma(w, d, f64);
        else
            f32 = gradref__fmaf((float)w, (float)d, f32);
    }
    acc->f32 = f32, acc->f64 = f64, acc->u64 = u64;
}

/* Grad element i of slab (fg, dn) into e: the chain over the taps reaching it, in ascending
 * diff position (the tap positions descending), then stored in grad's dtype. */
static void grad_element(const gradref__cbd_plan *p, const char *fg, const char *dn,
                         const int64_t *i, char *e) {
    sum acc = {(p->in_dtype == GRADREF_I8 || p->in_dtype == GRADREF_I32) && !p->terms,
               p->in_dtype == GRADREF_F64 || p->precision == GRADREF_PRECISION_HIGH || p->terms,
               p->terms,
               0.0f,
               0.0,
               0};
    int64_t kp[3], o[3];
    for (kp[0] = p->K[0] - 1; kp[0] >= 0; kp[0]--) {
        if ((o[0] = diff_pos(p, 0, i[0], kp[0])) < 0) continue;
        for (kp[1] = p->K[1] - 1; kp[1] >= 0; kp[1]--) {
            if ((o[1] = diff_pos(p, 1, i[1], kp[1])) < 0) continue;
            for (kp[2] = p->K[2] - 1; kp[2] >= 0; kp[2]--) {
                if ((o[2] = diff_pos(p, 2, i[2], kp[2])) < 0) continue;
                add_tap(p, fg, dn,
                        stored_tap(p, 0, kp[0]) * p->fs[3] + stored_tap(p, 1, kp[1]) * p->fs[4] +
                            stored_tap(p, 2, kp[2]) * p->fs[5],
                        o[0] * p->ds[3] + o[1] * p->ds[4] + o[2] * p->ds[5], &acc);
            }
        }
    }
    const int32_t low32 = (int32_t)(uint32_t)acc.u64;
    if (acc.integer && p->qs8)
        *(int8_t *)e = gradref__cbd_qs8_requantize(low32, p->qs8_acc_scale, p->qs8_grad_scale);
    else if (acc.integer)
        *(int32_t *)e = low32;
    else
        gradref__store_float(p->out_dtype, e, acc.wide ? acc.f64 : (double)acc.f32);
}

/* Element pointers of slab s: filter and diff at the slab's group and channel, grad's slab. */
static void slab_bases(const gradref__cbd_plan *p, int64_t s, const char **fg, const char **dn,
                       char **out) {
    const int64_t n = s / (p->G * p->ICpg), g = s / p->ICpg % p->G, ic = s % p->ICpg;
    *fg = p->filter + (size_t)(g * p->fs[0] + ic * p->fs[2]) * p->in_size;
    *dn = p->diff + (size_t)(n * p->ds[0] + g * p->ds[1]) * p->in_size;
    *out = p->grad + (size_t)(n * p->gs[0] + g * p->gs[1] + ic * p->gs[2]) * p->out_size;
}

/* Every element of slabs [s0, s1), or only those whose bits are all 0. */
static void slabs(const gradref__cbd_plan *p, int64_t s0, int64_t s1, int only_zeros) {
    for (int64_t s = s0; s < s1; s++) {
        const char *fg, *dn;
        char *out;
        slab_bases(p, s, &fg, &dn, &out);
        int64_t i[3];
        for (i[0] = 0; i[0] < p->I[0]; i[0]++)
            for (i[1] = 0; i[1] < p->I[1]; i[1]++)
                for (i[2] = 0; i[2] < p->I[2]; i[2]++) {
                    char *e = out + (size_t)(i[0] * p->gs[3] + i[1] * p->gs[4] + i[2] * p->gs[5]) *
                                        p->out_size;
                    if (only_zeros && !all_zero_bits(e, p->out_size)) continue;
                    grad_element(p, fg, dn, i, e);
                }
    }
}

void gradref__cbd_ref_slabs(const gradref__cbd_plan *p, int64_t s0, int64_t s1) {
    slabs(p, s0, s1, 0);
}

void gradref__cbd_ref_zero_slabs(const gradref__cbd_plan *p, int64_t s0, int64_t s1) {
    slabs(p, s0, s1, 1);
}
