/* SPDX-License-Identifier: Apache-2.0 */
/* The reference loop: the formula of docs/recat.md, element by element, moving bits. */
#include <math.h>
#include <string.h>

#include "common/convert.h"
#include "common/exec.h"
#include "recat_internal.h"

/* One element moved, or (terms) its |value| or 0 written as F64. */
static void move(const gradref__recat_plan *p, int64_t src, int64_t dst) {
    if (!p->terms) {
        memcpy(p->dst + (size_t)dst * p->elem_size, p->src + (size_t)src * p->elem_size,
               p->elem_size);
        return;
    }
    const double v = gradref__load_float(p->in_dtype, p->src + (size_t)src * p->elem_size);
    gradref__store_float(GRADREF_F64, p->dst + (size_t)dst * sizeof(double),
                         p->terms == GRADREF__TERMS_COUNTS ? 0.0 : fabs(v));
}

void gradref__recat_ref(const gradref__recat_plan *p) {
    const int64_t B = p->batch, D = p->width;
    if (B == 0 || p->features * D == 0) return; /* empty: a huge batch of nothing */
    int64_t first = 0;                          /* F_r, in features */
    for (int64_t r = 0; r < p->num_ranks; r++) {
        int64_t n = p->rank_features[r * p->rank_features_stride];
        int64_t C = first * D, ds = n * D; /* C_r and ds_r in columns */
        for (int64_t b = 0; b < B; b++) {
            for (int64_t d = 0; d < ds; d++) {
                int64_t col = C + d;
                int64_t src = b * p->src_stride[0] + (col / D) * p->src_stride[1] +
                              (col % D) * p->src_stride[2];
                move(p, src, (B * C + b * ds + d) * p->dst_stride);
            }
        }
        first += n;
    }
}
