/* SPDX-License-Identifier: Apache-2.0 */
/* gradref_conv_filter_init_format: MegEngine's filter layouts per format (its
 * make_canonized_filter_meta and naive kernels' filter addressing). */
#include "common/tensor.h"

#define W(d)                                                                                       \
  { d, GRADREF__WHOLE }
#define B(d)                                                                                       \
  { d, GRADREF__BLOCKS }
#define I(d)                                                                                       \
  { d, GRADREF__INSIDE }

/* Physical dims outermost first; dense filters (OC, IC, FH, FW), grouped (G, OC/G, IC/G, FH,
 * FW). Index: [format][0 dense, 1 grouped, 2 channel-wise]. */
typedef struct filter_layout {
    int nphys;
    gradref__phys order[7];
} filter_layout;

static const filter_layout LAYOUTS[5][3] = {
    /* NCHW */
    {{4, {W(0), W(1), W(2), W(3)}}, {5, {W(0), W(1), W(2), W(3), W(4)}}, {0, {W(0)}}},
    /* NHWC */
    {{4, {W(0), W(2), W(3), W(1)}}, {5, {W(0), W(1), W(3), W(4), W(2)}}, {0, {W(0)}}},
    /* NCHW4: input channels blocked */
    {{5, {W(0), B(1), W(2), W(3), I(1)}}, {6, {W(0), W(1), B(2), W(3), W(4), I(2)}}, {0, {W(0)}}},
    /* NHWCD4: output channels blocked, innermost */
    {{5, {B(0), W(2), W(3), W(1), I(0)}},
     {6, {W(0), B(1), W(3), W(4), W(2), I(1)}},
     {6, {B(0), W(1), W(2), W(3), W(4), I(0)}}},
    /* NHWCD4_DOT: both blocked, 4 output by 4 input channels innermost */
    {{6, {B(0), W(2), W(3), B(1), I(0), I(1)}},
     {7, {W(0), B(1), W(3), W(4), B(2), I(1), I(2)}},
     {6, {B(0), W(1), W(2), W(3), W(4), I(0)}}},
};

gradref_status gradref_conv_filter_init_format(gradref_tensor *t, void *data, gradref_dtype dtype,
                                               gradref_format format, int32_t ndim,
                                               const int64_t *shape) {
    static const char OP[] = "conv_filter_init_format";
    int f;
    switch (format) {
    case GRADREF_FORMAT_NCHW: f = 0; break;
    case GRADREF_FORMAT_NHWC: f = 1; break;
    case GRADREF_FORMAT_NCHW4: f = 2; break;
    case GRADREF_FORMAT_NHWCD4: f = 3; break;
    case GRADREF_FORMAT_NHWCD4_DOT: f = 4; break;
    default:
        return gradref__fail(GRADREF_ERR_PARAM, OP,
                             "format is %d; filters come in NCHW, NHWC, NCHW4, NHWCD4 and "
                             "NHWCD4_DOT",
                             (int)format);
    }
    if (ndim != 4 && ndim != 5)
        return gradref__fail(GRADREF_ERR_RANK, OP,
                             "ndim is %d; a 2-D filter has 4 (OC, IC, FH, FW) or 5 (G, OC/G, "
                             "IC/G, FH, FW) dims",
                             (int)ndim);
    if (shape == NULL) return gradref__fail(GRADREF_ERR_NULL, OP, "shape is NULL");
    int kind = ndim == 5;
    if (kind == 1 && f >= 3 && shape[1] == 1 && shape[2] == 1) kind = 2; /* channel-wise */
    const filter_layout *l = &LAYOUTS[f][kind];
    return gradref__init_blocked(OP, t, data, dtype, ndim, shape, l->order, l->nphys, 4);
}
