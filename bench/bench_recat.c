/* SPDX-License-Identifier: Apache-2.0 */
/* gradref-bench: recat. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_ops.h"

typedef struct recat_ctx {
    const problem *p;
    gradref_tensor go, out;
} recat_ctx;

static gradref_status recat_once(void *arg, int threads) {
    recat_ctx *c = arg;
    gradref_exec exec = {NULL, 0, threads, GRADREF_PRECISION_DEFAULT};
    if (problem_get(c->p, "D", 0) > 0)
        return gradref_recat_embedding_grad_output(&c->go, c->p->dims, c->p->num_dims, &c->out,
                                                   &exec);
    return gradref_recat_embedding_grad_output_mixed_d(&c->go, c->p->dims, c->p->num_dims, &c->out,
                                                       &exec);
}

int bench_recat(const problem *p, int threads, int repeats, timing *t) {
    int64_t B = problem_get(p, "B", 1), D = problem_get(p, "D", 0), cols = 0;
    int64_t width = D > 0 ? D : 1;
    for (int i = 0; i < p->num_dims; i++)
        cols += p->dims[i] * width;
    size_t esz = bench_dtype_size(p->dtype), bytes = (size_t)(B * cols) * esz;
    char *src = tensor_alloc(bytes), *dst = tensor_alloc(bytes);
    int rc = 1;
    if (src && dst) {
        fill_bytes(src, bytes);
        memset(dst, 0, bytes);
        recat_ctx c;
        c.p = p;
        int64_t shape3[3] = {B, D > 0 ? cols / width : cols, width}, flat = B * cols;
        gradref_tensor_init(&c.go, src, p->dtype, D > 0 ? 3 : 2, shape3);
        gradref_tensor_init(&c.out, dst, p->dtype, 1, &flat);
        copy_pair pair = {dst, src, bytes};
        rc = measure(p, recat_once, &c, &pair, 1, threads, repeats, t);
    }
    free(src);
    free(dst);
    return rc;
}
