/* SPDX-License-Identifier: Apache-2.0 */
/* The reference loop: each output element straight from its formula (docs/rope_grad.md).
 * ATB mode rounds every operation to the tensors' dtype, as the Ascend kernel does: sums and
 * products are formed exactly in f64 and rounded once to F16/BF16 (for F32 and F64 the
 * operations run in that precision). The adjoint modes compute in f32 (f64 for F64 or
 * GRADREF_PRECISION_HIGH) and round once at the end. */
#include <math.h>
#include <string.h>

#include "common/convert.h"
#include "common/exec.h"
#include "gradref.h"
#include "rope_grad_internal.h"

/* The value v as the dtype would round it (identity for F64). */
static double round_to(int32_t dtype, double v) {
    char buf[8];
    gradref__store_float(dtype, buf, v);
    return gradref__load_float(dtype, buf);
}

/* ATB: g * (c + s'), each operation rounded to the dtype. */
static double atb_element(int32_t dtype, double g, double c, double s_partner, int front) {
    if (dtype == GRADREF_F32) {
        float w = front ? (float)c + (float)s_partner : (float)c - (float)s_partner;
        return (float)g * w;
    }
    double w = round_to(dtype, front ? c + s_partner : c - s_partner);
    return round_to(dtype, g * w);
}

/* GRADREF_TERM_*: the element's two terms' |value| summed (ATB: g c and g s', its weight a
 * rounded sum; the adjoints: c g and s' g'), or their count. */
static double terms_element(int32_t terms, int32_t mode, double g, double c, double s_partner,
                            double g_partner) {
    if (terms == GRADREF__TERMS_COUNTS) return 2;
    const double partner = mode == GRADREF_ROPE_ATB ? g : g_partner;
    return fabs(c * g) + fabs(s_partner * partner);
}

/* Adjoint modes: c*g + s_partner*g_partner (front) or c*g - s_partner*g_partner (back). */
static double adjoint_element(int wide, double g, double c, double s_partner, double g_partner,
                              int front) {
    if (wide) return front ? c * g + s_partner * g_partner : c * g - s_partner * g_partner;
    float a = (float)c * (float)g, b = (float)s_partner * (float)g_partner;
    return front ? a + b : a - b;
}

void gradref__rope_grad_ref(const gradref__rope_plan *p) {
    gradref__rope_grad_ref_rows(p, 0, p->tokens);
}

void gradref__rope_grad_ref_rows(const gradref__rope_plan *p, int64_t row_begin, int64_t row_end) {
    const int32_t dt = p->dtype;
    const size_t esz = p->elem_size;
    const int64_t D = p->head_dim, R = p->rotary_dim;
    const int wide = dt == GRADREF_F64 || p->precision == GRADREF_PRECISION_HIGH;
    if ((p->stream[0].heads + p->stream[1].heads) * D == 0) return; /* rows of nothing */
    int64_t row = 0;
    for (int64_t b = 0; b < p->num_seqs && row < row_end; b++) {
        if (row + p->seq_lens[b] <= row_begin) {
            row += p->seq_lens[b];
            continue;
        }
        int64_t start = p->start_positions ? p->start_positions[b] : 0;
        for (int64_t t = 0; t < p->seq_lens[b] && row < row_end; t++, row++) {
            if (row < row_begin) continue;
            int64_t pos = start + t;
            for (int s = 0; s < 2; s++) {
                const gradref__rope_stream *st = &p->stream[s];
                for (int64_t n = 0; n < st->heads; n++) {
                    for (int64_t j = 0; j < D; j++) {
                        const char *in = st->in + (size_t)(row * st->in_stride[0]) * esz;
                        char *out = st->out + (size_t)(row * st->out_stride[0] +
                                                       (n * D + j) * st->out_stride[1]) *
                                                  p->out_size;
                        if (j >= R) { /* pass-through: the gradient itself (exact; NaN canonical;
                                         as terms: |g|, no rounding) */
                            const double g = gradref__load_float(
                                dt, in + (size_t)((n * D + j) * st->in_stride[1]) * esz);
                            gradref__store_float(p->out_dtype, out,
                                                 p->terms == GRADREF__TERMS_COUNTS ? 0
                                                 : p->terms                        ? fabs(g)
                                                                                   : g);
                            continue;
                        }
                        /* partner: the other member of j's pair, and whether j is its front */
                        int64_t partner;
                        int front;
                        if (p->mode == GRADREF_ROPE_INTERLEAVED) {
                            front = j % 2 == 0;
                            partner = front ? j + 1 : j - 1;
                        } else {
                            front = j < R / 2;
                            partner = front ? j + R / 2 : j - R / 2;
                        }
                        double g = gradref__load_float(
                            dt, in + (size_t)((n * D + j) * st->in_stride[1]) * esz);
                        double gp = gradref__load_float(
                            dt, in + (size_t)((n * D + partner) * st->in_stride[1]) * esz);
                        double c = gradref__load_float(
                            dt,
                            p->cos + (size_t)(pos * p->cos_stride[0] + j * p->cos_stride[1]) * esz);
                        double sp =
                            gradref__load_float(dt, p->sin + (size_t)(pos * p->sin_stride[0] +
                                                                      partner * p->sin_stride[1]) *
                                                                 esz);
                        double v = p->terms ? terms_element(p->terms, p->mode, g, c, sp, gp)
                                   : p->mode == GRADREF_ROPE_ATB
                                       ? atb_element(dt, g, c, sp, front)
                                       : adjoint_element(wide, g, c, sp, gp, front);
                        gradref__store_float(p->out_dtype, out, v);
                    }
                }
            }
        }
    }
}
