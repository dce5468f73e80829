/* SPDX-License-Identifier: Apache-2.0 */
/* gradref-bench's harness (bench.c) as each operator's file (bench_<op>.c) and the program
 * (bench_main.c) see it: timing, the same-run copy baseline, buffers and values. Only the public
 * header: the bench measures what a caller of the library gets. */
#ifndef GRADREF_BENCH_H
#define GRADREF_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "gradref.h"
#include "peer_onednn.h"
#include "problem.h"

/* oneDNN's formats (0), or PEER_PLAIN_REORDERS (--onednn-plain) or PEER_PLAIN_LAYOUTS
 * (--onednn-layouts) */
extern int bench_onednn_plain;

/* Bytes per element of a dtype. */
size_t bench_dtype_size(int32_t dtype);

typedef struct timing {
    double op_seconds, copy_seconds; /* copy_seconds is 0 when no copy baseline was run */
    double bytes_moved;              /* read + written by the operator */
    double work;                     /* compute operators: units of work per call, else 0 */
    const char *unit;                /* "Mpc/s" (million point-channels), "GFLOP/s" */
    double unit_scale;               /* work/second times this gives the unit */
    double peer_seconds;             /* a same-run peer's time (oneDNN), 0 when none */
    double null_ws_seconds;          /* the operator with a NULL workspace */
    size_t workspace_bytes;          /* what its _workspace_size twin reports */
} timing;

/* Runs the operator once; returns its status. */
typedef gradref_status (*op_fn)(void *ctx, int threads);

/* A block the baseline copies: the operator's own input to its own output, so the copy meets
 * the same cache state as the operator. */
typedef struct copy_pair {
    char *dst;
    const char *src;
    size_t bytes;
} copy_pair;

double now_seconds(void);

double median(double *v, int n);

/* Tensors are 64-byte aligned, as PyTorch's CPU allocator aligns them; free() releases them. */
void *tensor_alloc(size_t bytes);

void fill_bytes(char *p, size_t n);

/* Times fn (after one warm-up call) and, after each call, copies of the operator's inputs onto
 * its outputs (pairs) on the same threads, with streaming stores and by memcpy. The operator and
 * the memcpy both follow a streaming copy (the operator the previous repeat's untimed one), so
 * both meet an output the cache does not hold; the streaming copy follows the operator. */
int measure(const problem *p, op_fn fn, void *ctx, const copy_pair *pairs, int num_pairs,
            int threads, int repeats, timing *t);

/* The operator alone, medians of `repeats` after a warm-up: its time with a NULL workspace. */
double time_alone(op_fn fn, void *ctx, int threads, int repeats);

/* n f32 values into dst in the dtype (gradref_copy: rounded to nearest even; I8 scaled by
 * 127); exits on an error. */
void bench_from_f32(gradref_dtype dtype, void *dst, const float *src, int64_t n);

/* Uniform values in [-1, 1) from splitmix64 (consecutive xorshift32 outputs are correlated
 * enough to put grid points on planes, which changes grid_sampler's memory pattern). */
void fill_values(gradref_dtype dtype, void *dst, int64_t n, unsigned seed);

/* Times `once` and the oneDNN peer alternately (so drifts of the machine hit both alike), a
 * warm-up pair first; medians into t. Frees the peer. */
int time_with_peer(const problem *p, op_fn once, void *ctx, peer_onednn *peer, int threads,
                   int repeats, timing *t);

/* After the timing with the caller's workspace: the same calls with none. */
#define TIME_NULL_WORKSPACE(c, once, threads, repeats, t)                                          \
  do {                                                                                             \
    (t)->workspace_bytes = (c).workspace_bytes;                                                    \
    free((c).workspace);                                                                           \
    (c).workspace = NULL;                                                                          \
    (c).workspace_bytes = 0;                                                                       \
    (t)->null_ws_seconds = time_alone(once, &(c), threads, repeats);                               \
  } while (0)

#endif
