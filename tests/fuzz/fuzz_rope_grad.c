/* SPDX-License-Identifier: Apache-2.0 */
/* gradref_rope_grad: every mode, head and rotary size, GQA, start positions, dtypes. */
#include <string.h>

#include "fuzz.h"

typedef struct rope_args {
    gradref_rope_params p;
    gradref_tensor q, k, cos, sin, dq, dk;
} rope_args;

static gradref_status run(void *ctx, const gradref_exec *exec) {
    rope_args *a = ctx;
    return gradref_rope_grad(&a->p, &a->q, &a->k, &a->cos, &a->sin, &a->dq, &a->dk, exec);
}

static gradref_status twin(void *ctx, size_t *bytes) {
    rope_args *a = ctx;
    return gradref_rope_grad_workspace_size(&a->p, &a->q, &a->k, &a->cos, &a->sin, &a->dq, &a->dk,
                                            bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = {data, size};
    fz_begin(&f);
    rope_args a;
    memset(&a, 0, sizeof a);
    static const int32_t head_dims[8] = {2, 4, 8, 16, 32, 64, 128, 6};
    const int32_t D = head_dims[fz_range(&f, 0, 7)];
    a.p.mode = fz_one_in(&f, 16) ? (int32_t)fz_range(&f, -1, 4) : (int32_t)fz_range(&f, 0, 2);
    a.p.head_dim = fz_one_in(&f, 16) ? (int32_t)fz_range(&f, -1, 9) : D;
    a.p.rotary_dim = fz_one_in(&f, 2) ? 0 : (int32_t)(2 * fz_range(&f, 0, D / 2));
    if (fz_one_in(&f, 16)) a.p.rotary_dim = (int32_t)fz_range(&f, -1, D + 2);
    const int32_t S = (int32_t)fz_range(&f, 1, 4);
    a.p.num_seqs = fz_one_in(&f, 16) ? (int32_t)fz_range(&f, -1, S) : S;
    int32_t lens[4];
    int64_t starts[4], T = 0, smax = 0;
    for (int b = 0; b < S; b++) {
        lens[b] = (int32_t)fz_range(&f, 1, D >= 64 ? 4 : 9);
        if (fz_one_in(&f, 24)) lens[b] = fz_one_in(&f, 2) ? 0 : -1;
        starts[b] = fz_range(&f, 0, 5);
        if (fz_one_in(&f, 24)) starts[b] = fz_one_in(&f, 2) ? INT64_MAX - 1 : -3;
        T += lens[b];
        if (starts[b] >= 0 && starts[b] < 100 && starts[b] + lens[b] > smax)
            smax = starts[b] + lens[b];
    }
    if (T < 0) T = 0;
    const int64_t rows = smax + fz_range(&f, 0, 2) - (fz_one_in(&f, 16) ? 1 : 0);
    const int64_t hq = fz_one_in(&f, 16) ? 0 : fz_range(&f, 1, 3);
    const int64_t hk = fz_one_in(&f, 3) ? hq : fz_range(&f, 0, 2);
    const int32_t dtype =
        fz_one_in(&f, 16) ? (int32_t)fz_range(&f, 0, 6) : (int32_t)fz_range(&f, 0, 3);
    int64_t qs[2] = {T, hq * D}, ks[2] = {T, hk * D}, cs[2] = {rows < 0 ? 0 : rows, D};
    if (!fz_tensor(&f, &a.q, dtype, 2, qs, 0, 1) || !fz_tensor(&f, &a.k, dtype, 2, ks, 0, 1) ||
        !fz_tensor(&f, &a.cos, dtype, 2, cs, 0, 1) || !fz_tensor(&f, &a.sin, dtype, 2, cs, 0, 1) ||
        !fz_tensor(&f, &a.dq, dtype, 2, qs, 1, 1) || !fz_tensor(&f, &a.dk, dtype, 2, ks, 1, 1))
        return 0;
    fz_fill_floats(&f, &a.q, 4.0);
    fz_fill_floats(&f, &a.k, 4.0);
    fz_fill_floats(&f, &a.cos, 1.0);
    fz_fill_floats(&f, &a.sin, 1.0);
    /* placed last, so that they may land inside an output */
    int32_t *seq_lens = fz_array(&f, 4, sizeof *seq_lens);
    int64_t *start_positions = fz_array(&f, 4, sizeof *start_positions);
    if (!seq_lens || !start_positions) return 0;
    memcpy(seq_lens, lens, sizeof lens);
    memcpy(start_positions, starts, sizeof starts);
    a.p.seq_lens = fz_one_in(&f, 32) ? NULL : seq_lens;
    a.p.start_positions = fz_one_in(&f, 2) ? NULL : start_positions;
    fz_call c = {"rope_grad", run, twin, &a, {&a.dq, &a.dk}, 1};
    fz_check(&f, &c);
    return 0;
}
