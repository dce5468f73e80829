/* SPDX-License-Identifier: Apache-2.0 */
/* The entry points' shared tail (fast_path.h): the strategy, workspace, threads, the run. */
#include "fast_path.h"

#include <stdio.h>
#include <string.h>

#include "copy.h"
#include "verbose.h"

/* Usable bytes of the caller's workspace once aligned (0 when there is none). */
static size_t workspace_usable(const gradref__ctx *ctx) {
    if (ctx->workspace == NULL || ctx->workspace_bytes <= GRADREF__WORKSPACE_ALIGN) return 0;
    return ctx->workspace_bytes - GRADREF__WORKSPACE_ALIGN;
}

static size_t row_bytes(const gradref__strategy *row, const void *plan, int32_t precision,
                        int threads) {
    return row->workspace ? row->workspace(plan, precision, threads) : 0;
}

static int row_threads(const gradref__strategy *row, const void *plan, int32_t precision,
                       int threads) {
    return row->useful_threads ? row->useful_threads(plan, precision, threads) : threads;
}

/* The first row of fp's table that applies to the plan and whose one-thread share fits the
 * caller's workspace (any, when there is none); with `say` and GRADREF_VERBOSE=2, why each row
 * before it did not run. */
static const gradref__strategy *choose(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                       const void *plan, int say) {
    for (int i = 0; i < fp->count; i++) {
        const gradref__strategy *row = &fp->rows[i];
        const char *why = row->skip ? row->skip(plan, ctx->precision) : NULL;
        const size_t one = why ? 0 : row_bytes(row, plan, ctx->precision, 1);
        if (!why && ctx->workspace != NULL && one > 0 && workspace_usable(ctx) < one)
            why = "the caller's workspace holds less than one thread's share";
        if (!why || i == fp->count - 1) return row;
        if (say && gradref__verbose() >= 2)
            fprintf(stderr, "gradref_verbose_skip,%s,%s,%s\n", ctx->op ? ctx->op : fp->op,
                    row->name, why);
    }
    return NULL; /* no table is empty */
}

/* The threads a call runs on: `wanted`, or as many as the caller's workspace holds when it
 * holds fewer (at least one). `one` and `two` are the row's workspace bytes at one and two
 * threads (layouts that take a fixed part plus a part per thread). */
static int workspace_threads(const gradref__ctx *ctx, int wanted, size_t one, size_t two) {
    const size_t bytes = workspace_usable(ctx), per_thread = two - one;
    if (ctx->workspace == NULL || bytes < one || per_thread == 0) return wanted;
    const size_t fit = 1 + (bytes - one) / per_thread;
    return fit < (size_t)wanted ? (int)fit : wanted;
}

/* What a call ran, for GRADREF_VERBOSE. */
typedef struct ran {
    const char *strategy;
    int threads;
    size_t workspace;
} ran;

static gradref_status run_row(const gradref__fast_path *fp, const gradref__strategy *row,
                              const gradref__ctx *ctx, const void *plan, ran *r) {
    const int32_t precision = ctx->precision;
    const int wanted = row_threads(row, plan, precision, ctx->num_threads);
    int threads = workspace_threads(ctx, wanted, row_bytes(row, plan, precision, 1),
                                    row_bytes(row, plan, precision, 2));
    /* the estimate assumes bytes grow linearly with threads: step down should a layout not */
    while (ctx->workspace != NULL && threads > 1 &&
           row_bytes(row, plan, precision, threads) > workspace_usable(ctx))
        threads--;
    void *ws, *owned;
    r->workspace = row_bytes(row, plan, precision, threads);
    r->threads = threads;
    r->strategy = row->variant ? row->variant(plan, precision, threads) : row->name;
    GRADREF__FORWARD_IF_ERROR(gradref__workspace_acquire(fp->op, ctx, r->workspace, &ws, &owned));
    row->run(plan, ws, threads);
    gradref__workspace_release(owned);
    return GRADREF_OK;
}

static gradref_status run_path(const gradref__fast_path *fp, const gradref__ctx *ctx,
                               const void *plan, ran *r) {
    const gradref_tensor *zero = fp->zero_output ? fp->zero_output(plan) : NULL;
    r->threads = ctx->num_threads;
    if (zero != NULL) {
        r->strategy = "zero_output";
        gradref__fill_zero(zero, ctx->num_threads);
        return GRADREF_OK;
    }
    return run_row(fp, choose(fp, ctx, plan, 1), ctx, plan, r);
}

gradref_status gradref__run_fast_path(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                      const void *plan) {
    ran r = {NULL, 0, 0};
    if (!gradref__verbose()) return run_path(fp, ctx, plan, &r);
    const double start = gradref__verbose_ms();
    const gradref_status s = run_path(fp, ctx, plan, &r);
    if (s == GRADREF_OK)
        gradref__verbose_line(ctx->op ? ctx->op : fp->op, r.strategy, fp->isa(plan), ctx, r.threads,
                              r.workspace, gradref__verbose_ms() - start);
    return s;
}

gradref_status gradref__run_strategy(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                     const void *plan, const char *name) {
    for (int i = 0; i < fp->count; i++) {
        const gradref__strategy *row = &fp->rows[i];
        if (strcmp(row->name, name) != 0) continue;
        const char *why = row->skip ? row->skip(plan, ctx->precision) : NULL;
        if (why != NULL) return gradref__fail(GRADREF_ERR_PARAM, fp->op, "%s: %s", name, why);
        gradref__ctx own = *ctx;
        own.workspace = NULL, own.workspace_bytes = 0;
        ran r;
        return run_row(fp, row, &own, plan, &r);
    }
    return gradref__fail(GRADREF_ERR_PARAM, fp->op, "no strategy named %s", name);
}

size_t gradref__fast_path_bytes(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                const void *plan) {
    if (fp->zero_output && fp->zero_output(plan)) return 0;
    gradref__ctx none = *ctx;
    none.workspace = NULL, none.workspace_bytes = 0;
    const gradref__strategy *row = choose(fp, &none, plan, 0);
    const int threads = row_threads(row, plan, ctx->precision, ctx->num_threads);
    const size_t bytes = row_bytes(row, plan, ctx->precision, threads);
    return bytes ? gradref__workspace_bytes(bytes) : 0;
}

size_t gradref__fast_path_workspace(const gradref__fast_path *fp, const void *plan) {
    /* every precision: a workspace of this size never sends a device mode to a row after the
     * one a NULL workspace runs (HF32 stages x as well, which the default does not need) */
    size_t most = 0;
    gradref__ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.op = fp->op;
    ctx.num_threads = gradref__default_threads();
    for (int32_t precision = 0; precision < GRADREF__PRECISIONS; precision++) {
        ctx.precision = precision;
        const size_t bytes = gradref__fast_path_bytes(fp, &ctx, plan);
        if (bytes > most) most = bytes;
    }
    return most;
}
