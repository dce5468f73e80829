/* SPDX-License-Identifier: Apache-2.0 */
/* How every operator's entry point ends, once its plan is validated: its strategy table (the
 * ways it can run, tried in order, as oneDNN's implementation list), the workspace (the
 * caller's or one allocation), the threads it holds, and the run. */
#ifndef GRADREF_COMMON_FAST_PATH_H
#define GRADREF_COMMON_FAST_PATH_H

#include "exec.h"

/* One way to run a validated plan. A table's rows are tried in order: the first whose skip
 * says nothing and whose workspace the caller's holds (any, when the caller gave none) runs,
 * so each call makes one choice, in one place. The last row needs no workspace and applies to
 * every plan (the reference loop, or the only path). */
typedef struct gradref__strategy {
    const char *name;
    /* NULL: the row applies to the plan at this precision; else why it does not (a phrase
     * for GRADREF_VERBOSE=2). A NULL function applies to every plan */
    const char *(*skip)(const void *plan, int32_t precision);
    /* workspace bytes at `threads` threads (NULL: none) */
    size_t (*workspace)(const void *plan, int32_t precision, int threads);
    /* NULL, or the most threads the run keeps busy (its work items) out of `threads`: the
     * per-thread parts of the workspace are counted for no more */
    int (*useful_threads)(const void *plan, int32_t precision, int threads);
    /* the run: ws is 64-byte aligned and holds workspace(plan, precision, threads) bytes */
    void (*run)(const void *plan, void *ws, int threads);
    /* NULL, or a finer name of what run does for this plan (GRADREF_VERBOSE's strategy
     * field; NULL: name) */
    const char *(*variant)(const void *plan, int32_t precision, int threads);
} gradref__strategy;

typedef struct gradref__fast_path {
    const char *op;
    const gradref__strategy *rows;
    int count;
    /* NULL, or the output to fill with +0 instead of running (an empty operand): no
     * workspace then */
    const gradref_tensor *(*zero_output)(const void *plan);
    /* the level of the kernel table the plan runs (its max_isa and the CPU's level):
     * GRADREF_VERBOSE's isa field */
    const char *(*isa)(const void *plan);
} gradref__fast_path;

/* The tail of an entry point once its plan is validated (and its precision set): the row of
 * fp's table that runs, the threads the caller's workspace holds, the workspace (the caller's
 * or one allocation), the run. */
gradref_status gradref__run_fast_path(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                      const void *plan);

/* The row `name` of fp's table on a validated plan (tests: every strategy against the
 * reference), its workspace allocated, at ctx's precision and threads. GRADREF_ERR_PARAM when
 * fp has no such row or it does not apply to the plan (outputs untouched). */
gradref_status gradref__run_strategy(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                     const void *plan, const char *name);

/* The bytes a call with no workspace allocates for its run, at ctx's precision and threads
 * (with the alignment slack; 0 when it needs none). */
size_t gradref__fast_path_bytes(const gradref__fast_path *fp, const gradref__ctx *ctx,
                                const void *plan);

/* What a _workspace_size twin reports for a validated plan: the most any precision needs at
 * the default thread count, with the alignment slack. */
size_t gradref__fast_path_workspace(const gradref__fast_path *fp, const void *plan);

#endif
