/* SPDX-License-Identifier: Apache-2.0 */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#  define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS and madvise under -std=c99 */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#  include <sys/mman.h>
#endif

#include "exec.h"
#include "tensor.h"

gradref_status gradref__exec_resolve(const char *op, const gradref_exec *exec, gradref__ctx *ctx) {
    gradref_exec defaults = {NULL, 0, 0, GRADREF_PRECISION_DEFAULT};
    if (exec == NULL) exec = &defaults;
    if (exec->num_threads < 0 || exec->num_threads > GRADREF_MAX_THREADS)
        return gradref__fail(GRADREF_ERR_PARAM, op, "exec.num_threads is %d, outside 0..%d",
                             (int)exec->num_threads, GRADREF_MAX_THREADS);
    const int32_t terms = exec->precision & (GRADREF_TERM_MAGNITUDES | GRADREF_TERM_COUNTS);
    const int32_t precision = exec->precision & ~(GRADREF_STRICT_UPSTREAM | GRADREF_PADDED_ZEROS |
                                                  GRADREF_TERM_MAGNITUDES | GRADREF_TERM_COUNTS);
    if (precision < GRADREF_PRECISION_DEFAULT || precision >= GRADREF__PRECISIONS)
        return gradref__fail(GRADREF_ERR_PARAM, op,
                             "exec.precision is %d, not a gradref_precision (with or without "
                             "GRADREF_STRICT_UPSTREAM, GRADREF_PADDED_ZEROS and a "
                             "GRADREF_TERM_* flag)",
                             (int)exec->precision);
    if (terms == (GRADREF_TERM_MAGNITUDES | GRADREF_TERM_COUNTS) ||
        (terms && precision != GRADREF_PRECISION_DEFAULT))
        return gradref__fail(GRADREF_ERR_PARAM, op,
                             "exec.precision is %d: a GRADREF_TERM_* flag goes alone with "
                             "GRADREF_PRECISION_DEFAULT",
                             (int)exec->precision);
    int threads = exec->num_threads;
#ifdef _OPENMP
    if (threads == 0) threads = omp_get_max_threads(); /* OMP_NUM_THREADS may ask for anything */
    if (threads > GRADREF_MAX_THREADS) threads = GRADREF_MAX_THREADS;
#else
    threads = 1;
#endif
    ctx->num_threads = threads > 0 ? threads : 1;
    ctx->precision = precision;
    ctx->strict = (exec->precision & GRADREF_STRICT_UPSTREAM) != 0;
    ctx->padded_zeros = (exec->precision & GRADREF_PADDED_ZEROS) != 0;
    ctx->terms = terms == GRADREF_TERM_MAGNITUDES ? GRADREF__TERMS_MAGNITUDES
                 : terms == GRADREF_TERM_COUNTS   ? GRADREF__TERMS_COUNTS
                                                  : GRADREF__TERMS_NONE;
    ctx->workspace = exec->workspace;
    ctx->workspace_bytes = exec->workspace ? exec->workspace_bytes : 0;
    ctx->op = op;
    ctx->operands = 0;
    return GRADREF_OK;
}

size_t gradref__workspace_bytes(size_t need) {
    if (need == 0) return 0;
    if (need > SIZE_MAX - GRADREF__WORKSPACE_ALIGN) return SIZE_MAX;
    return need + GRADREF__WORKSPACE_ALIGN;
}

static void *align_up(void *p) {
    uintptr_t a =
        ((uintptr_t)p + GRADREF__WORKSPACE_ALIGN - 1) & ~(uintptr_t)(GRADREF__WORKSPACE_ALIGN - 1);
    return (void *)a;
}

/* Precedes the aligned bytes of an internal workspace: how to give the block back. */
typedef struct block_header {
    void *base;
    size_t length;
    int mapped;
} block_header;

#define HUGE_PAGE ((size_t)2 << 20)

/* An internal workspace of `total` bytes (need plus the alignment slack). Up to 32 MiB it comes
 * from malloc, whose heap gives the same pages back call after call (glibc serves blocks up to
 * 32 MiB from the heap once one was freed). Larger ones glibc maps afresh each call, and every
 * fresh 4 KiB page costs a fault (under virtualisation 165 ms for 87 MiB), so they are mapped
 * here 2 MiB-aligned and marked for transparent huge pages (6 ms for the same 87 MiB). */
static gradref_status internal_workspace(const char *op, size_t total, void **ptr, void **owned) {
    const size_t header = (sizeof(block_header) + GRADREF__WORKSPACE_ALIGN - 1) &
                          ~(size_t)(GRADREF__WORKSPACE_ALIGN - 1);
    block_header h = {NULL, 0, 0};
    char *at = NULL;
#if defined(__linux__) && defined(MAP_ANONYMOUS) && defined(MADV_HUGEPAGE)
    if (total > 16 * HUGE_PAGE && total <= SIZE_MAX - 2 * HUGE_PAGE) {
        h.length = total + 2 * HUGE_PAGE; /* the header, then a 2 MiB boundary */
        void *map =
            mmap(NULL, h.length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map != MAP_FAILED) {
            h.base = map;
            h.mapped = 1;
            at = (char *)(((uintptr_t)map + header + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
            madvise(at, total, MADV_HUGEPAGE); /* advice: without it, small pages */
        }
    }
#endif
    if (!h.mapped) {
        h.base = total <= SIZE_MAX - 2 * header ? malloc(total + 2 * header) : NULL;
        if (h.base == NULL)
            return gradref__fail(GRADREF_ERR_NO_MEMORY, op, "cannot allocate a %zu-byte workspace",
                                 total);
        at = (char *)align_up((char *)h.base + header);
    }
    memcpy(at - header, &h, sizeof h);
    *owned = at - header;
    *ptr = at;
    return GRADREF_OK;
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
    return internal_workspace(op, total, ptr, owned);
}

void gradref__workspace_release(void *owned) {
    if (owned == NULL) return;
    block_header h;
    memcpy(&h, owned, sizeof h);
#if defined(__linux__) && defined(MAP_ANONYMOUS)
    if (h.mapped) {
        munmap(h.base, h.length);
        return;
    }
#endif
    free(h.base);
}

const char *gradref__precision_name(int32_t precision) {
    static const char *const names[GRADREF__PRECISIONS] = {"DEFAULT", "HIGH", "HF32", "HF32_910B",
                                                           "MEGENGINE_DEFAULT"};
    return precision >= 0 && precision < GRADREF__PRECISIONS ? names[precision] : "?";
}

static gradref_status refuse_terms(const char *op, const gradref__ctx *ctx) {
    if (ctx->terms == GRADREF__TERMS_NONE) return GRADREF_OK;
    return gradref__fail(GRADREF_ERR_PARAM, op,
                         "exec.precision asks for GRADREF_TERM_%s, which %s does not compute",
                         ctx->terms == GRADREF__TERMS_COUNTS ? "COUNTS" : "MAGNITUDES", op);
}

gradref_status gradref__check_precision(const char *op, const gradref__ctx *ctx, unsigned allowed) {
    if (!(allowed & GRADREF__TERMS_ALLOWED)) GRADREF__FORWARD_IF_ERROR(refuse_terms(op, ctx));
    if (allowed & GRADREF__PRECISION_BIT(ctx->precision)) return GRADREF_OK;
    return gradref__fail(GRADREF_ERR_PARAM, op, "exec.precision is %s, which %s does not take",
                         gradref__precision_name(ctx->precision), op);
}

gradref_status gradref__check_terms_output(const char *op, const char *name, int32_t dtype) {
    if (dtype == GRADREF_F64) return GRADREF_OK;
    return gradref__fail(GRADREF_ERR_DTYPE, op, "%s.dtype is %s; a GRADREF_TERM_* call writes F64",
                         name, gradref__dtype_name(dtype));
}

int gradref__default_threads(void) {
    gradref__ctx ctx;
    gradref_exec none = {NULL, 0, 0, GRADREF_PRECISION_DEFAULT};
    return gradref__exec_resolve("gradref", &none, &ctx) == GRADREF_OK ? ctx.num_threads : 1;
}

void gradref__run_team(int team, void (*body)(void *arg), void *arg) {
    if (team <= 1 && gradref__team_size() == 1) {
        body(arg);
        return;
    }
    GRADREF__PARALLEL(team) body(arg);
}

typedef struct ranges_call {
    int64_t n;
    void (*part)(const void *arg, int64_t begin, int64_t end);
    const void *arg;
} ranges_call;

static void ranges_body(void *arg) {
    const ranges_call *c = arg;
    int64_t b, e;
    gradref__my_range(c->n, &b, &e);
    c->part(c->arg, b, e);
}

void gradref__parallel_ranges(int64_t n, int threads,
                              void (*part)(const void *arg, int64_t begin, int64_t end),
                              const void *arg) {
    ranges_call c = {n, part, arg};
    gradref__run_team(gradref__team(n, threads), ranges_body, &c);
}
