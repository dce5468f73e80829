/* SPDX-License-Identifier: Apache-2.0 */
/* GRADREF_VERBOSE's lines (verbose.h). */
#define _POSIX_C_SOURCE 200809L
#include "verbose.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tensor.h"

static int verbose_level;

__attribute__((constructor)) static void read_verbose(void) {
    const char *v = getenv("GRADREF_VERBOSE");
    verbose_level = v != NULL ? atoi(v) : 0;
}

int gradref__verbose(void) {
    return verbose_level;
}

double gradref__verbose_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* "a" + "x" + "b" ... of n numbers into out, from `at`; returns the new end. */
static size_t put_dims(char *out, size_t size, size_t at, const int64_t *v, int n) {
    if (n == 0 && at < size) at += (size_t)snprintf(out + at, size - at, "-");
    for (int d = 0; d < n && at < size; d++)
        at += (size_t)snprintf(out + at, size - at, d ? "x%lld" : "%lld", (long long)v[d]);
    return at;
}

/* name:dtype:shape:strides of each tensor the entry point named, space-separated. */
static void put_tensors(const gradref__ctx *ctx, char *out, size_t size) {
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < ctx->operands && at < size; i++) {
        const gradref_tensor *t = ctx->operand[i];
        at += (size_t)snprintf(out + at, size - at, "%s%s:%s:", i ? " " : "", ctx->operand_name[i],
                               gradref__dtype_name(t->dtype));
        at = put_dims(out, size, at, t->shape, t->ndim);
        if (at < size) at += (size_t)snprintf(out + at, size - at, ":");
        at = put_dims(out, size, at, t->strides, t->ndim);
    }
}

void gradref__verbose_line(const char *op, const char *strategy, const char *isa,
                           const gradref__ctx *ctx, int threads, size_t workspace_used, double ms) {
    char tensors[1024];
    put_tensors(ctx, tensors, sizeof tensors);
    const char *terms = ctx->terms == GRADREF__TERMS_MAGNITUDES ? "+TERM_MAGNITUDES"
                        : ctx->terms == GRADREF__TERMS_COUNTS   ? "+TERM_COUNTS"
                                                                : "";
    fprintf(stderr, "gradref_verbose,%s,%s,%s,%d,%s%s,%s,%zu,%zu,%.3f\n", op, strategy, isa,
            threads, gradref__precision_name(ctx->precision), terms, tensors,
            ctx->workspace != NULL ? ctx->workspace_bytes : (size_t)0, workspace_used, ms);
}
