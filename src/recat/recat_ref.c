/* SPDX-License-Identifier: Apache-2.0 */
/* The reference loop: the formula of docs/recat.md, element by element, moving bits. */
#include <string.h>

#include "recat_internal.h"

void gradref__recat_ref(const gradref__recat_plan *p) {
    const int64_t B = p->batch, D = p->width;
    int64_t first = 0; /* F_r, in features */
    for (int64_t r = 0; r < p->num_ranks; r++) {
        int64_t n = p->rank_features[r * p->rank_features_stride];
        int64_t C = first * D, ds = n * D; /* C_r and ds_r in columns */
        for (int64_t b = 0; b < B; b++) {
            for (int64_t d = 0; d < ds; d++) {
                int64_t col = C + d;
                int64_t src = b * p->src_stride[0] + (col / D) * p->src_stride[1] +
                              (col % D) * p->src_stride[2];
                int64_t dst = (B * C + b * ds + d) * p->dst_stride;
                memcpy(p->dst + (size_t)dst * p->elem_size, p->src + (size_t)src * p->elem_size,
                       p->elem_size);
            }
        }
        first += n;
    }
}
