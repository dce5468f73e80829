/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad's validated problem, shared by the entry point, the reference loop and the fast
 * path. */
#ifndef GRADREF_ROPE_GRAD_INTERNAL_H
#define GRADREF_ROPE_GRAD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gradref.h"

/* One of q and k: `heads` heads of head_dim elements per token row. */
typedef struct gradref__rope_stream {
    const char *in;
    char *out;
    int64_t heads;
    int64_t in_stride[2], out_stride[2]; /* elements: token, column */
} gradref__rope_stream;

typedef struct gradref__rope_plan {
    int32_t mode;      /* gradref_rope_mode */
    int32_t dtype;     /* of all six tensors (the inputs' with terms) */
    int32_t terms;     /* GRADREF__TERMS_*: the reference writes Σ|term| or the count, in F64 */
    int32_t out_dtype; /* q_grad's and k_grad's: dtype, or F64 with terms */
    size_t out_size;   /* its element size */
    int32_t precision; /* gradref_precision */
    int32_t max_isa;   /* the highest kernel level to use (common/isa.h; tests lower it) */
    size_t elem_size;
    int64_t head_dim;   /* D */
    int64_t rotary_dim; /* resolved: D when the parameter is 0 */
    int64_t tokens;     /* T = sum of seq_lens */
    int64_t num_seqs;
    const int32_t *seq_lens;
    const int64_t *start_positions; /* may be NULL */
    gradref__rope_stream stream[2]; /* q, k */
    const char *cos, *sin;
    int64_t cos_stride[2], sin_stride[2];
} gradref__rope_plan;

/* Validates every argument (before anything is written) and fills *plan. */
gradref_status gradref__rope_grad_validate(const gradref_rope_params *p, const gradref_tensor *q,
                                           const gradref_tensor *k, const gradref_tensor *cos,
                                           const gradref_tensor *sin, const gradref_tensor *dq,
                                           const gradref_tensor *dk, gradref__rope_plan *plan);

/* The same for a GRADREF_TERM_* call (terms: GRADREF__TERMS_*): q_grad and k_grad F64. */
gradref_status gradref__rope_grad_validate_terms(const gradref_rope_params *p,
                                                 const gradref_tensor *const *tensors,
                                                 int32_t terms, gradref__rope_plan *plan);

/* The formulas of docs/rope_grad.md, element by element (the oracle). */
void gradref__rope_grad_ref(const gradref__rope_plan *plan);
/* The same for token rows [row_begin, row_end) only. */
void gradref__rope_grad_ref_rows(const gradref__rope_plan *plan, int64_t row_begin,
                                 int64_t row_end);

/* Token ranges over OpenMP; each token's weights built once, every head streamed through. */
void gradref__rope_grad_fast(const gradref__rope_plan *plan, int threads);

#endif
