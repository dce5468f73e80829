/* SPDX-License-Identifier: Apache-2.0 */
/* How every operator's entry point ends, once its plan is validated: the workspace (the
 * caller's or one allocation), the threads it holds, and the run, through the operator's
 * gradref__fast_path. */
#ifndef GRADREF_COMMON_FAST_PATH_H
#define GRADREF_COMMON_FAST_PATH_H

#include "exec.h"

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
    /* NULL, or the name of what run does for this plan (GRADREF_VERBOSE's strategy field;
     * NULL: "fast") */
    const char *(*strategy)(const void *plan, int32_t precision, int threads);
    /* The level of the kernel table the plan runs (its max_isa and the CPU's level):
     * GRADREF_VERBOSE's isa field */
    const char *(*isa)(const void *plan);
} gradref__fast_path;

/* Defines `name`, the gradref__fast_path of an operator whose plan type is what workspace_fn,
 * run_fn and no_workspace_fn take (the adapters turn the plan back from const void *). */
#define GRADREF__FAST_PATH_ADAPTERS(name, workspace_fn, run_fn, no_workspace_fn)                   \
  static size_t name##_workspace(const void *plan, int32_t precision, int threads) {               \
    return workspace_fn(plan, precision, threads);                                                 \
  }                                                                                                \
  static void name##_run(const void *plan, void *ws, int threads) {                                \
    run_fn(plan, ws, threads);                                                                     \
  }                                                                                                \
  static gradref_status name##_no_workspace(const void *plan, int threads) {                       \
    return no_workspace_fn(plan, threads);                                                         \
  }
#define GRADREF__DEFINE_FAST_PATH(name, op, workspace_fn, run_fn, no_workspace_fn, isa_fn)         \
  GRADREF__FAST_PATH_ADAPTERS(name, workspace_fn, run_fn, no_workspace_fn)                         \
  static const gradref__fast_path name = {                                                         \
      op, name##_workspace, name##_run, name##_no_workspace, NULL, NULL, NULL, isa_fn}

/* The same for a convolution plan (GRADREF__CONV_PLAN_FIELDS): a zero_only plan fills
 * out_desc with +0 and needs no workspace; threads_fn bounds the threads by the work;
 * strategy_fn names what the run does. */
#define GRADREF__DEFINE_CONV_FAST_PATH(name, op, plan_type, workspace_fn, run_fn, no_workspace_fn, \
                                       threads_fn, strategy_fn, isa_fn)                            \
  GRADREF__FAST_PATH_ADAPTERS(name, workspace_fn, run_fn, no_workspace_fn)                         \
  static const gradref_tensor *name##_zero_output(const void *plan) {                              \
    const plan_type *p = plan;                                                                     \
    return p->zero_only ? &p->out_desc : NULL;                                                     \
  }                                                                                                \
  static int name##_threads(const void *plan, int32_t precision, int threads) {                    \
    return threads_fn(plan, precision, threads);                                                   \
  }                                                                                                \
  static const char *name##_strategy(const void *plan, int32_t precision, int threads) {           \
    return strategy_fn(plan, precision, threads);                                                  \
  }                                                                                                \
  static const gradref__fast_path name = {op,                                                      \
                                          name##_workspace,                                        \
                                          name##_run,                                              \
                                          name##_no_workspace,                                     \
                                          name##_zero_output,                                      \
                                          name##_threads,                                          \
                                          name##_strategy,                                         \
                                          isa_fn}

/* The same for an operator that needs no workspace (its twin reports 0): run_fn(plan, threads)
 * is the whole run. */
#define GRADREF__DEFINE_NO_WORKSPACE_FAST_PATH(name, op, plan_type, run_fn, isa_fn)                \
  static size_t name##_workspace(const void *plan, int32_t precision, int threads) {               \
    (void)plan, (void)precision, (void)threads;                                                    \
    return 0;                                                                                      \
  }                                                                                                \
  static void name##_run(const void *plan, void *ws, int threads) {                                \
    (void)ws;                                                                                      \
    run_fn((const plan_type *)plan, threads);                                                      \
  }                                                                                                \
  static gradref_status name##_no_workspace(const void *plan, int threads) {                       \
    run_fn((const plan_type *)plan, threads);                                                      \
    return GRADREF_OK;                                                                             \
  }                                                                                                \
  static const gradref__fast_path name = {                                                         \
      op, name##_workspace, name##_run, name##_no_workspace, NULL, NULL, NULL, isa_fn}

/* The tail of an entry point once its plan is validated (and its precision set): the threads
 * the caller's workspace holds, the workspace (the caller's or one allocation), the run; a
 * caller's workspace too small for one thread's share runs the no-workspace path instead. */
gradref_status gradref__run_fast_path(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                      const void *plan);

/* What a _workspace_size twin reports for a validated plan: the most any precision needs at
 * the default thread count, with the alignment slack. */
size_t gradref__fast_path_workspace(const gradref__fast_path *fp, const void *plan);

#endif
