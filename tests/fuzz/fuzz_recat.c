/* SPDX-License-Identifier: Apache-2.0 */
/* The three recat entry points; FUZZ_RECAT_VARIANT picks one per binary (0 fixed D, 1 mixed D,
 * 2 mixed D batch). */
#include <string.h>

#include "fuzz.h"

#ifndef FUZZ_RECAT_VARIANT
#  define FUZZ_RECAT_VARIANT 0
#endif

typedef struct recat_args {
    gradref_tensor go, out, dims, cumsum;
    const int64_t *list;
    int32_t num_ranks;
} recat_args;

static gradref_status run(void *ctx, const gradref_exec *exec) {
    recat_args *a = ctx;
#if FUZZ_RECAT_VARIANT == 0
    return gradref_recat_embedding_grad_output(&a->go, a->list, a->num_ranks, &a->out, exec);
#elif FUZZ_RECAT_VARIANT == 1
    return gradref_recat_embedding_grad_output_mixed_d(&a->go, a->list, a->num_ranks, &a->out,
                                                       exec);
#else
    return gradref_recat_embedding_grad_output_mixed_d_batch(&a->go, &a->dims, &a->cumsum, &a->out,
                                                             exec);
#endif
}

static gradref_status twin(void *ctx, size_t *bytes) {
    recat_args *a = ctx;
#if FUZZ_RECAT_VARIANT == 0
    return gradref_recat_embedding_grad_output_workspace_size(&a->go, a->list, a->num_ranks,
                                                              &a->out, bytes);
#elif FUZZ_RECAT_VARIANT == 1
    return gradref_recat_embedding_grad_output_mixed_d_workspace_size(&a->go, a->list, a->num_ranks,
                                                                      &a->out, bytes);
#else
    return gradref_recat_embedding_grad_output_mixed_d_batch_workspace_size(
        &a->go, &a->dims, &a->cumsum, &a->out, bytes);
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = {data, size};
    fz_begin(&f);
    recat_args a;
    memset(&a, 0, sizeof a);
    const int32_t W = (int32_t)fz_range(&f, 1, 9);
    int64_t split[9], total = 0;
    for (int r = 0; r < W; r++) {
        split[r] = fz_one_in(&f, 5) ? 0 : fz_range(&f, 0, fz_one_in(&f, 4) ? 40 : 6);
        total += split[r];
    }
    if (fz_one_in(&f, 8)) split[fz_range(&f, 0, W - 1)] += fz_one_in(&f, 2) ? 1 : -1;
    const int64_t B = fz_one_in(&f, 8) ? 0 : fz_range(&f, 1, 12);
    const int64_t D = FUZZ_RECAT_VARIANT == 0 ? fz_range(&f, fz_one_in(&f, 8) ? 0 : 1, 9) : 1;
    const int32_t dtype = (int32_t)fz_range(&f, 0, 6);
    int64_t go_shape[3] = {B, total, D};
    const int32_t go_ndim = FUZZ_RECAT_VARIANT == 0 ? 3 : 2;
    if (!fz_tensor(&f, &a.go, dtype, go_ndim, go_shape, 0, 1)) return 0;
    int64_t n = B * total * D;
    if (!fz_tensor(&f, &a.out, fz_one_in(&f, 16) ? (int32_t)fz_range(&f, 0, 6) : dtype, 1, &n, 1,
                   1))
        return 0;
#if FUZZ_RECAT_VARIANT < 2
    int64_t *list = fz_array(&f, (size_t)W, sizeof *list);
    if (list == NULL) return 0;
    memcpy(list, split, (size_t)W * sizeof *list);
    a.list = fz_one_in(&f, 32) ? NULL : list;
    a.num_ranks = fz_one_in(&f, 16) ? (int32_t)fz_range(&f, -1, W) : W;
#else
    int64_t w = W;
    if (!fz_tensor(&f, &a.dims, GRADREF_I64, 1, &w, 0, 1)) return 0;
    if (!fz_tensor(&f, &a.cumsum, fz_one_in(&f, 16) ? GRADREF_I32 : GRADREF_I64, 1, &w, 0, 1))
        return 0;
    const int inclusive = fz_one_in(&f, 8);
    int64_t acc = 0;
    for (int r = 0; r < W; r++) { /* values written where the descriptors point, if they can be */
        const int64_t c = inclusive ? acc + split[r] : acc;
        acc += split[r];
        if (a.dims.dtype == GRADREF_I64 && a.dims.ndim == 1 && a.dims.shape[0] == W &&
            a.dims.data && a.dims.strides[0] >= 0 && a.dims.shape[0] > 0 &&
            (uintptr_t)a.dims.data % 8 == 0)
            memcpy((int64_t *)a.dims.data + r * a.dims.strides[0], &split[r], 8);
        if (a.cumsum.dtype == GRADREF_I64 && a.cumsum.ndim == 1 && a.cumsum.shape[0] == W &&
            a.cumsum.data && a.cumsum.strides[0] >= 0 && (uintptr_t)a.cumsum.data % 8 == 0)
            memcpy((int64_t *)a.cumsum.data + r * a.cumsum.strides[0], &c, 8);
    }
#endif
    fz_call c = {"recat", run, twin, &a, {&a.out, NULL}, 0};
#if FUZZ_RECAT_VARIANT == 0
    c.op = "recat_embedding_grad_output";
#elif FUZZ_RECAT_VARIANT == 1
    c.op = "recat_embedding_grad_output_mixed_d";
#else
    c.op = "recat_embedding_grad_output_mixed_d_batch";
#endif
    fz_check(&f, &c);
    return 0;
}
