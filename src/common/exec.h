/* SPDX-License-Identifier: Apache-2.0 */
/* The exec plumbing: defaults for a NULL exec, thread count, precision, workspace. */
#ifndef GRADREF_COMMON_EXEC_H
#define GRADREF_COMMON_EXEC_H

#include <stddef.h>

#include "internal.h"

typedef struct gradref__ctx {
    const char *op;   /* the entry point's name, for messages and GRADREF_VERBOSE */
    int num_threads;  /* >= 1: resolved from exec->num_threads and the OpenMP default */
    int precision;    /* gradref_precision (without the strict flag) */
    int strict;       /* GRADREF_STRICT_UPSTREAM was set */
    int padded_zeros; /* GRADREF_PADDED_ZEROS was set */
    int terms;        /* GRADREF__TERMS_*: a GRADREF_TERM_* flag was set */
    void *workspace;  /* caller's, or NULL */
    size_t workspace_bytes;
    /* the call's tensors as GRADREF_VERBOSE names them (gradref__ctx_tensor) */
    int operands;
    const char *operand_name[6];
    const gradref_tensor *operand[6];
} gradref__ctx;

/* Names tensor t of a validated call for GRADREF_VERBOSE's line (six at most). */
static inline void gradref__ctx_tensor(gradref__ctx *ctx, const char *name,
                                       const gradref_tensor *t) {
    if (ctx->operands >= 6 || t == NULL) return;
    ctx->operand_name[ctx->operands] = name;
    ctx->operand[ctx->operands++] = t;
}

/* Bytes added to every workspace size so the usable part can be aligned to this. */
#define GRADREF__WORKSPACE_ALIGN 64

/* Lays out a workspace: reserves `bytes` at *at, each part starting on a 64-byte boundary,
 * and returns the part's offset. */
static inline size_t gradref__ws_take(size_t *at, size_t bytes) {
    const size_t here = *at;
    *at += (bytes + 63) & ~(size_t)63;
    return here;
}

/* The number of gradref_precision values. */
#define GRADREF__PRECISIONS 5

/* Validates exec (num_threads >= 0, a known precision) and resolves the defaults. */
gradref_status gradref__exec_resolve(const char *op, const gradref_exec *exec, gradref__ctx *ctx);

/* The enum's name of a precision ("DEFAULT", "HF32", ...). */
const char *gradref__precision_name(int32_t precision);

/* A set of precisions for gradref__check_precision. */
#define GRADREF__PRECISION_BIT(precision) (1u << (precision))
#define GRADREF__GENERAL_PRECISIONS                                                                \
  (GRADREF__PRECISION_BIT(GRADREF_PRECISION_DEFAULT) |                                             \
   GRADREF__PRECISION_BIT(GRADREF_PRECISION_HIGH))

/* What a GRADREF_TERM_* flag asks for (gradref__ctx.terms, and the plans' terms). */
enum { GRADREF__TERMS_NONE = 0, GRADREF__TERMS_MAGNITUDES = 1, GRADREF__TERMS_COUNTS = 2 };

/* In `allowed`: the operator computes the GRADREF_TERM_* outputs. */
#define GRADREF__TERMS_ALLOWED (1u << 31)

/* Every precision: the data movers, whose results no precision changes. */
#define GRADREF__ANY_PRECISION ((1u << GRADREF__PRECISIONS) - 1u)

/* PARAM unless ctx's precision is in `allowed` (the operator's: the general ones plus its
 * device modes), or when a GRADREF_TERM_* flag is set and `allowed` lacks
 * GRADREF__TERMS_ALLOWED. */
gradref_status gradref__check_precision(const char *op, const gradref__ctx *ctx, unsigned allowed);

/* DTYPE unless the output `name` of a GRADREF_TERM_* call is F64 (what every such call writes). */
gradref_status gradref__check_terms_output(const char *op, const char *name, int32_t dtype);

/* What an operator's _workspace_size reports for `need` usable bytes (0 stays 0). */
size_t gradref__workspace_bytes(size_t need);

/* Provides `need` bytes aligned to GRADREF__WORKSPACE_ALIGN: from the caller's workspace (WORKSPACE
 * if it is smaller than gradref__workspace_bytes(need)) or from one malloc, which the caller
 * frees with gradref__workspace_release(*owned). *ptr is NULL when need is 0. */
gradref_status gradref__workspace_acquire(const char *op, const gradref__ctx *ctx, size_t need,
                                          void **ptr, void **owned);
void gradref__workspace_release(void *owned);

/* Runs body(arg) on a team of `team` threads in a parallel region, or for a team of one on the
 * calling thread without a region when it is in no team of more (then gradref__thread_num,
 * gradref__my_range and barriers inside body see a team of one, as in a region of one): even
 * a region of one thread is set up and torn down, and its barriers wake through the kernel. */
void gradref__run_team(int team, void (*body)(void *arg), void *arg);

/* Splits [0, n) into one contiguous range per thread of a team of at most `threads` and runs
 * part(arg, begin, end) on each: the reference loops' parallel fallback. */
void gradref__parallel_ranges(int64_t n, int threads,
                              void (*part)(const void *arg, int64_t begin, int64_t end),
                              const void *arg);

/* The thread count a NULL exec gives (the OpenMP default, 1 without OpenMP). */
int gradref__default_threads(void);

#endif
