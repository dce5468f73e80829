/* SPDX-License-Identifier: Apache-2.0 */
/* gradref-bench: rope. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_ops.h"

typedef struct rope_ctx {
    gradref_rope_params params;
    gradref_tensor q, k, cos, sin, dq, dk;
} rope_ctx;

static gradref_status rope_once(void *arg, int threads) {
    rope_ctx *c = arg;
    gradref_exec exec = {NULL, 0, threads, GRADREF_PRECISION_DEFAULT};
    return gradref_rope_grad(&c->params, &c->q, &c->k, &c->cos, &c->sin, &c->dq, &c->dk, &exec);
}

/* rope T<tokens> Hq<q width> Hk<k width> D<head_dim> [N<sequences, default 16>] dtype mode:
 * N equal sequences, cos/sin with as many rows as one sequence. */
int bench_rope(const problem *p, int threads, int repeats, timing *t) {
    int64_t T = problem_get(p, "T", 1), Hq = problem_get(p, "Hq", 128),
            Hk = problem_get(p, "Hk", 128);
    int64_t D = problem_get(p, "D", 128), N = problem_get(p, "N", 16);
    if (N < 1 || T % N != 0) {
        fprintf(stderr, "%s: T must be a multiple of N\n", p->text);
        return 1;
    }
    int32_t mode = strcmp(p->mode, "half") == 0          ? GRADREF_ROPE_HALF
                   : strcmp(p->mode, "interleaved") == 0 ? GRADREF_ROPE_INTERLEAVED
                                                         : GRADREF_ROPE_ATB;
    size_t esz = bench_dtype_size(p->dtype);
    int64_t S = T / N;
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)N);
    char *q = tensor_alloc((size_t)(T * Hq) * esz), *k = tensor_alloc((size_t)(T * Hk) * esz);
    char *dq = tensor_alloc((size_t)(T * Hq) * esz), *dk = tensor_alloc((size_t)(T * Hk) * esz);
    char *cs = tensor_alloc((size_t)(S * D) * esz), *sn = tensor_alloc((size_t)(S * D) * esz);
    int rc = 1;
    if (lens && q && k && dq && dk && cs && sn) {
        for (int64_t i = 0; i < N; i++)
            lens[i] = (int32_t)S;
        fill_values(p->dtype, q, T * Hq, 1);
        fill_values(p->dtype, k, T * Hk, 2);
        fill_values(p->dtype, cs, S * D, 3);
        fill_values(p->dtype, sn, S * D, 4);
        memset(dq, 0, (size_t)(T * Hq) * esz);
        memset(dk, 0, (size_t)(T * Hk) * esz);
        rope_ctx c;
        gradref_rope_params params = {mode, (int32_t)D, 0, (int32_t)N, lens, NULL};
        c.params = params;
        int64_t qs[2] = {T, Hq}, ks[2] = {T, Hk}, ts[2] = {S, D};
        gradref_tensor_init(&c.q, q, p->dtype, 2, qs);
        gradref_tensor_init(&c.k, k, p->dtype, 2, ks);
        gradref_tensor_init(&c.dq, dq, p->dtype, 2, qs);
        gradref_tensor_init(&c.dk, dk, p->dtype, 2, ks);
        gradref_tensor_init(&c.cos, cs, p->dtype, 2, ts);
        gradref_tensor_init(&c.sin, sn, p->dtype, 2, ts);
        copy_pair pairs[2] = {{dq, q, (size_t)(T * Hq) * esz}, {dk, k, (size_t)(T * Hk) * esz}};
        rc = measure(p, rope_once, &c, pairs, 2, threads, repeats, t);
    }
    free(lens);
    free(q);
    free(k);
    free(dq);
    free(dk);
    free(cs);
    free(sn);
    return rc;
}
