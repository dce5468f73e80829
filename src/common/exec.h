/* SPDX-License-Identifier: Apache-2.0 */
/* The exec plumbing: defaults for a NULL exec, thread count, precision, workspace. */
#ifndef GRADREF_COMMON_EXEC_H
#define GRADREF_COMMON_EXEC_H

#include <stddef.h>

#include "internal.h"

typedef struct gradref__ctx {
    int num_threads; /* >= 1: resolved from exec->num_threads and the OpenMP default */
    int precision;   /* gradref_precision (without the strict flag) */
    int strict;      /* GRADREF_STRICT_UPSTREAM was set */
    void *workspace; /* caller's, or NULL */
    size_t workspace_bytes;
} gradref__ctx;

/* Bytes added to every workspace size so the usable part can be aligned to this. */
#define GRADREF_WORKSPACE_ALIGN 64

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

/* PARAM unless ctx's precision is in `allowed` (the operator's: the general ones plus its
 * device modes). */
gradref_status gradref__check_precision(const char *op, const gradref__ctx *ctx, unsigned allowed);

/* What an operator's _workspace_size reports for `need` usable bytes (0 stays 0). */
size_t gradref__workspace_bytes(size_t need);

/* Provides `need` bytes aligned to GRADREF_WORKSPACE_ALIGN: from the caller's workspace (WORKSPACE
 * if it is smaller than gradref__workspace_bytes(need)) or from one malloc, which the caller
 * frees with gradref__workspace_release(*owned). *ptr is NULL when need is 0. */
gradref_status gradref__workspace_acquire(const char *op, const gradref__ctx *ctx, size_t need,
                                          void **ptr, void **owned);
void gradref__workspace_release(void *owned);

/* An operator's fast path, as the shared entry-point tail sees it: the workspace bytes of a
 * validated plan at a precision and thread count, and the run itself. */
typedef struct gradref__fast_path {
    const char *op;
    size_t (*workspace)(const void *plan, int32_t precision, int threads);
    void (*run)(const void *plan, void *ws, int threads);
    /* The path without a workspace (the reference loop, same bits), for a caller's workspace
     * too small for one thread's share */
    gradref_status (*no_workspace)(const void *plan, int threads);
    /* NULL, or the output to fill with +0 instead of running (an empty operand): no
     * workspace then */
    const gradref_tensor *(*zero_output)(const void *plan);
    /* NULL, or the most threads the run can keep busy (its work items) out of `threads`: the
     * per-thread parts of the workspace are counted for no more */
    int (*useful_threads)(const void *plan, int32_t precision, int threads);
} gradref__fast_path;

/* Defines `name`, the gradref__fast_path of an operator whose plan type is what workspace_fn,
 * run_fn and no_workspace_fn take (the adapters turn the plan back from const void *). */
#define GRADREF_FAST_PATH_ADAPTERS(name, workspace_fn, run_fn, no_workspace_fn)                    \
  static size_t name##_workspace(const void *plan, int32_t precision, int threads) {               \
    return workspace_fn(plan, precision, threads);                                                 \
  }                                                                                                \
  static void name##_run(const void *plan, void *ws, int threads) {                                \
    run_fn(plan, ws, threads);                                                                     \
  }                                                                                                \
  static gradref_status name##_no_workspace(const void *plan, int threads) {                       \
    return no_workspace_fn(plan, threads);                                                         \
  }
#define GRADREF_DEFINE_FAST_PATH(name, op, workspace_fn, run_fn, no_workspace_fn)                  \
  GRADREF_FAST_PATH_ADAPTERS(name, workspace_fn, run_fn, no_workspace_fn)                          \
  static const gradref__fast_path name = {                                                         \
      op, name##_workspace, name##_run, name##_no_workspace, NULL, NULL}

/* The same for a convolution plan (GRADREF_CONV_PLAN_FIELDS): a zero_only plan fills
 * out_desc with +0 and needs no workspace; threads_fn bounds the threads by the work. */
#define GRADREF_DEFINE_CONV_FAST_PATH(name, op, plan_type, workspace_fn, run_fn, no_workspace_fn,  \
                                      threads_fn)                                                  \
  GRADREF_FAST_PATH_ADAPTERS(name, workspace_fn, run_fn, no_workspace_fn)                          \
  static const gradref_tensor *name##_zero_output(const void *plan) {                              \
    const plan_type *p = plan;                                                                     \
    return p->zero_only ? &p->out_desc : NULL;                                                     \
  }                                                                                                \
  static int name##_threads(const void *plan, int32_t precision, int threads) {                    \
    return threads_fn(plan, precision, threads);                                                   \
  }                                                                                                \
  static const gradref__fast_path name = {                                                         \
      op, name##_workspace, name##_run, name##_no_workspace, name##_zero_output, name##_threads}

/* The tail of an entry point once its plan is validated (and its precision set): the threads
 * the caller's workspace holds, the workspace (the caller's or one allocation), the run; a
 * caller's workspace too small for one thread's share runs the no-workspace path instead. */
gradref_status gradref__run_fast_path(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                      const void *plan);

/* What a _workspace_size twin reports for a validated plan: the most any precision needs at
 * the default thread count, with the alignment slack. */
size_t gradref__fast_path_workspace(const gradref__fast_path *fp, const void *plan);

/* Splits [0, n) into one contiguous range per thread of a team of at most `threads` and runs
 * part(arg, begin, end) on each: the reference loops' parallel fallback. */
void gradref__parallel_ranges(int64_t n, int threads,
                              void (*part)(const void *arg, int64_t begin, int64_t end),
                              const void *arg);

/* The thread count a NULL exec gives (the OpenMP default, 1 without OpenMP). */
int gradref__default_threads(void);

/* Usable bytes of the caller's workspace once aligned (0 when there is none). */
size_t gradref__workspace_usable(const gradref__ctx *ctx);

/* The threads a call runs on: `wanted`, or as many as the caller's workspace holds when it
 * holds fewer (at least one; below one thread's share the acquire reports the workspace too
 * small). `one` and `two` are the call's workspace bytes at one and two threads (layouts that
 * take a fixed part plus a part per thread). */
int gradref__workspace_threads(const gradref__ctx *ctx, int wanted, size_t one, size_t two);

#endif
