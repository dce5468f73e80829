/* SPDX-License-Identifier: Apache-2.0 */
/* The entry points' shared tail (fast_path.h): workspace, threads, the run. */
#include "fast_path.h"

#include "copy.h"
#include "verbose.h"

/* Usable bytes of the caller's workspace once aligned (0 when there is none). */
static size_t workspace_usable(const gradref__ctx *ctx) {
    if (ctx->workspace == NULL || ctx->workspace_bytes <= GRADREF__WORKSPACE_ALIGN) return 0;
    return ctx->workspace_bytes - GRADREF__WORKSPACE_ALIGN;
}

/* The threads a call runs on: `wanted`, or as many as the caller's workspace holds when it
 * holds fewer (at least one; below one thread's share the acquire reports the workspace too
 * small). `one` and `two` are the call's workspace bytes at one and two threads (layouts that
 * take a fixed part plus a part per thread). */
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

static gradref_status run_path(const gradref__fast_path *fp, const gradref__ctx *ctx,
                               const void *plan, ran *r) {
    const gradref_tensor *zero = fp->zero_output ? fp->zero_output(plan) : NULL;
    r->threads = ctx->num_threads;
    if (zero != NULL) {
        r->strategy = "zero_output";
        gradref__fill_zero(zero, ctx->num_threads);
        return GRADREF_OK;
    }
    const size_t one = fp->workspace(plan, ctx->precision, 1);
    if (ctx->workspace != NULL && one > 0 && workspace_usable(ctx) < one) {
        r->strategy = "no_workspace";
        return fp->no_workspace(plan, ctx->num_threads); /* as MegEngine's workspace limit 0 */
    }
    const int wanted = fp->useful_threads
                           ? fp->useful_threads(plan, ctx->precision, ctx->num_threads)
                           : ctx->num_threads;
    int threads = workspace_threads(ctx, wanted, one, fp->workspace(plan, ctx->precision, 2));
    /* the estimate assumes bytes grow linearly with threads: step down should a layout not */
    while (ctx->workspace != NULL && threads > 1 &&
           fp->workspace(plan, ctx->precision, threads) > workspace_usable(ctx))
        threads--;
    void *ws, *owned;
    r->workspace = fp->workspace(plan, ctx->precision, threads);
    r->threads = threads;
    r->strategy = fp->strategy ? fp->strategy(plan, ctx->precision, threads) : "fast";
    GRADREF__FORWARD_IF_ERROR(gradref__workspace_acquire(fp->op, ctx, r->workspace, &ws, &owned));
    fp->run(plan, ws, threads);
    gradref__workspace_release(owned);
    return GRADREF_OK;
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

size_t gradref__fast_path_workspace(const gradref__fast_path *fp, const void *plan) {
    if (fp->zero_output && fp->zero_output(plan)) return 0;
    /* every precision: a workspace of this size never sends a device mode to the slow
     * no-workspace path (HF32 stages x as well, which the default does not need) */
    size_t most = 0;
    for (int32_t precision = 0; precision < GRADREF__PRECISIONS; precision++) {
        int threads = gradref__default_threads();
        if (fp->useful_threads) threads = fp->useful_threads(plan, precision, threads);
        const size_t bytes = fp->workspace(plan, precision, threads);
        if (bytes > most) most = bytes;
    }
    return gradref__workspace_bytes(most);
}
