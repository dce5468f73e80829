/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdlib.h>

#include "copy.h"
#include "exec.h"

gradref_status gradref__exec_resolve(const char *op, const gradref_exec *exec, gradref__ctx *ctx) {
    gradref_exec defaults = {NULL, 0, 0, GRADREF_PRECISION_DEFAULT};
    if (exec == NULL) exec = &defaults;
    if (exec->num_threads < 0 || exec->num_threads > GRADREF_MAX_THREADS)
        return gradref__fail(GRADREF_ERR_PARAM, op, "exec.num_threads is %d, outside 0..%d",
                             (int)exec->num_threads, GRADREF_MAX_THREADS);
    if (exec->precision != GRADREF_PRECISION_DEFAULT && exec->precision != GRADREF_PRECISION_HIGH)
        return gradref__fail(GRADREF_ERR_PARAM, op, "exec.precision is %d, not a gradref_precision",
                             (int)exec->precision);
    int threads = exec->num_threads;
#ifdef _OPENMP
    if (threads == 0) threads = omp_get_max_threads(); /* OMP_NUM_THREADS may ask for anything */
    if (threads > GRADREF_MAX_THREADS) threads = GRADREF_MAX_THREADS;
#else
    threads = 1;
#endif
    ctx->num_threads = threads > 0 ? threads : 1;
    ctx->precision = exec->precision;
    ctx->workspace = exec->workspace;
    ctx->workspace_bytes = exec->workspace ? exec->workspace_bytes : 0;
    return GRADREF_OK;
}

size_t gradref__workspace_bytes(size_t need) {
    if (need == 0) return 0;
    if (need > SIZE_MAX - GRADREF_WORKSPACE_ALIGN) return SIZE_MAX;
    return need + GRADREF_WORKSPACE_ALIGN;
}

static void *align_up(void *p) {
    uintptr_t a =
        ((uintptr_t)p + GRADREF_WORKSPACE_ALIGN - 1) & ~(uintptr_t)(GRADREF_WORKSPACE_ALIGN - 1);
    return (void *)a;
}

gradref_status gradref__workspace_acquire(const char *op, const gradref__ctx *ctx, size_t need,
                                          void **ptr, void **owned) {
    *ptr = NULL;
    *owned = NULL;
    if (need == 0) return GRADREF_OK;
    size_t total = gradref__workspace_bytes(need);
    if (total == SIZE_MAX)
        return gradref__fail(GRADREF_ERR_OVERFLOW, op, "a workspace of %zu bytes is too large",
                             need);
    if (ctx->workspace != NULL) {
        if (ctx->workspace_bytes < total)
            return gradref__fail(GRADREF_ERR_WORKSPACE, op,
                                 "exec.workspace_bytes is %zu but %zu are required",
                                 ctx->workspace_bytes, total);
        *ptr = align_up(ctx->workspace);
        return GRADREF_OK;
    }
    void *block = malloc(total);
    if (block == NULL)
        return gradref__fail(GRADREF_ERR_NO_MEMORY, op, "cannot allocate a %zu-byte workspace",
                             total);
    *owned = block;
    *ptr = align_up(block);
    return GRADREF_OK;
}

void gradref__workspace_release(void *owned) {
    free(owned);
}

int gradref__default_threads(void) {
    gradref__ctx ctx;
    gradref_exec none = {NULL, 0, 0, GRADREF_PRECISION_DEFAULT};
    return gradref__exec_resolve("gradref", &none, &ctx) == GRADREF_OK ? ctx.num_threads : 1;
}

size_t gradref__workspace_usable(const gradref__ctx *ctx) {
    if (ctx->workspace == NULL || ctx->workspace_bytes <= GRADREF_WORKSPACE_ALIGN) return 0;
    return ctx->workspace_bytes - GRADREF_WORKSPACE_ALIGN;
}

int gradref__workspace_threads(const gradref__ctx *ctx, size_t one, size_t two) {
    const size_t bytes = gradref__workspace_usable(ctx), per_thread = two - one;
    const int wanted = ctx->num_threads;
    if (ctx->workspace == NULL || bytes < one || per_thread == 0) return wanted;
    const size_t fit = 1 + (bytes - one) / per_thread;
    return fit < (size_t)wanted ? (int)fit : wanted;
}

gradref_status gradref__run_fast_path(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                      const void *plan) {
    const gradref_tensor *zero = fp->zero_output ? fp->zero_output(plan) : NULL;
    if (zero != NULL) {
        gradref__fill_zero(zero, ctx->num_threads);
        return GRADREF_OK;
    }
    const int threads = gradref__workspace_threads(ctx, fp->workspace(plan, ctx->precision, 1),
                                                   fp->workspace(plan, ctx->precision, 2));
    void *ws, *owned;
    GRADREF_FORWARD_IF_ERROR(gradref__workspace_acquire(
        fp->op, ctx, fp->workspace(plan, ctx->precision, threads), &ws, &owned));
    fp->run(plan, ws, threads);
    gradref__workspace_release(owned);
    return GRADREF_OK;
}

size_t gradref__fast_path_workspace(const gradref__fast_path *fp, const void *plan) {
    if (fp->zero_output && fp->zero_output(plan)) return 0;
    const int threads = gradref__default_threads();
    const size_t a = fp->workspace(plan, GRADREF_PRECISION_DEFAULT, threads),
                 b = fp->workspace(plan, GRADREF_PRECISION_HIGH, threads);
    return gradref__workspace_bytes(a > b ? a : b);
}

void gradref__parallel_ranges(int64_t n, int threads,
                              void (*part)(const void *arg, int64_t begin, int64_t end),
                              const void *arg) {
    const int team = gradref__team(n, threads);
    GRADREF_PARALLEL(team) {
        int64_t b, e;
        gradref__my_range(n, &b, &e);
        part(arg, b, e);
    }
}
