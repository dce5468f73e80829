/* SPDX-License-Identifier: Apache-2.0 */
/* recat's validated problem, shared by the entry points, the reference loop and the fast path. */
#ifndef GRADREF_RECAT_INTERNAL_H
#define GRADREF_RECAT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* grad_output is read as (B, T, D): rank r owns features [F_r, F_r + n_r) of T, i.e. the
 * columns [F_r*D, (F_r + n_r)*D) of the (B, T*D) row. Mixed-D problems have D = 1. */
typedef struct gradref__recat_plan {
    const char *src;
    char *dst;
    size_t elem_size;
    int64_t batch;                /* B */
    int64_t features;             /* T */
    int64_t width;                /* D */
    int64_t src_stride[3];        /* element strides of b, t, d */
    int64_t dst_stride;           /* element stride of out */
    int64_t num_ranks;            /* W >= 1 */
    const int64_t *rank_features; /* n_r = rank_features[r * rank_features_stride] */
    int64_t rank_features_stride;
    int32_t max_isa; /* the highest kernel level to use (common/isa.h; tests lower it) */
    int32_t in_dtype, out_dtype; /* grad_output's and out's: equal, or out F64 (terms) */
    int32_t terms;               /* GRADREF__TERMS_*: the reference writes |value| or 0, in F64 */
} gradref__recat_plan;

/* The plain loop of docs/recat.md: out[B*C_r + b*ds_r + d] = go[b, C_r + d] (with terms, its
 * |value| or 0 as F64). */
void gradref__recat_ref(const gradref__recat_plan *plan);

/* The fast path: one copy per (rank, row) segment, OpenMP over that space. */
void gradref__recat_fast(const gradref__recat_plan *plan, int threads);

#endif
