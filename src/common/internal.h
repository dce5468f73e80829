/* SPDX-License-Identifier: Apache-2.0 */
/* Private declarations shared by every module: errors, checked arithmetic, OpenMP glue.
 * Internal symbols use the gradref__ prefix and are hidden from the shared library. */
#ifndef GRADREF_COMMON_INTERNAL_H
#define GRADREF_COMMON_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "gradref.h"

#if defined(__GNUC__)
#  define GRADREF__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#  define GRADREF__PRINTF(f, a)
#endif

/* Records "<op>: <formatted text>" as this thread's last error and returns s. */
gradref_status gradref__fail(gradref_status s, const char *op, const char *fmt, ...)
    GRADREF__PRINTF(3, 4);

/* Checked arithmetic on int64_t; each returns nonzero on overflow (and leaves *r unspecified). */
static inline int gradref__add_ovf(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__)
    return __builtin_add_overflow(a, b, r);
#else
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
    *r = a + b;
    return 0;
#endif
}

static inline int gradref__mul_ovf(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__)
    return __builtin_mul_overflow(a, b, r);
#else
    if (a != 0 && b != 0) {
        if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
                  : (b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b))
            return 1;
    }
    *r = a * b;
    return 0;
#endif
}

/* The part [*begin, *end) of [0, n) that member `me` of a team of `team` takes: contiguous,
 * in order, sizes differing by at most one, no intermediate overflow. */
static inline void gradref__split_range(int64_t n, int64_t team, int64_t me, int64_t *begin,
                                        int64_t *end) {
    int64_t base = n / team, extra = n % team;
    *begin = me * base + (me < extra ? me : extra);
    *end = *begin + base + (me < extra ? 1 : 0);
}

/* OpenMP glue: GRADREF__OMP(omp parallel for ...) is a pragma with OpenMP and nothing without,
 * so serial builds stay free of unknown-pragma warnings. */
#ifdef _OPENMP
#  include <omp.h>
#  define GRADREF__PRAGMA(x) _Pragma(#  x)
#  define GRADREF__OMP(x)    GRADREF__PRAGMA(x)
#else
#  define GRADREF__OMP(x)
#endif

/* A parallel region of `team` threads: GRADREF__PARALLEL(team) { ... }. Without OpenMP the
 * braced body runs once on the calling thread (and still reads team). Regions are opened by
 * gradref__run_team (common/exec.h) alone, which spares a team of one its cost. */
#ifdef _OPENMP
#  define GRADREF__PARALLEL(team) GRADREF__PRAGMA(omp parallel num_threads(team))
#else
#  define GRADREF__PARALLEL(team) if (gradref__one_team(team))
#endif
static inline int gradref__one_team(int64_t team) {
    (void)team;
    return 1;
}

/* The team for `items` independent pieces of work: at most `threads`, at least 1. */
static inline int gradref__team(int64_t items, int threads) {
    return items < threads ? (items > 1 ? (int)items : 1) : threads;
}

/* Forwards a failure: `GRADREF__FORWARD_IF_ERROR(check(...));` returns its status unless OK. */
#define GRADREF__FORWARD_IF_ERROR(expr)                                                            \
  do {                                                                                             \
    const gradref_status gradref_forward_ = (expr);                                                \
    if (gradref_forward_ != GRADREF_OK) return gradref_forward_;                                   \
  } while (0)

/* Inside a parallel region (or outside one, as a team of one): this thread's number. */
static inline int gradref__thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Inside a parallel region (or outside one, as a team of one): the team's size. */
static inline int gradref__team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* Inside a parallel region (or outside one, as a team of one): this thread's part of [0, n). */
static inline void gradref__my_range(int64_t n, int64_t *begin, int64_t *end) {
    int64_t team = 1;
#ifdef _OPENMP
    team = omp_get_num_threads();
#endif
    gradref__split_range(n, team, gradref__thread_num(), begin, end);
}

/* Inside a parallel region: claims the next item of a loop the team shares through *next (a
 * dynamic schedule, for items that write disjoint outputs, whose bits then do not depend on
 * which thread runs them): a core that runs slower, an efficiency core or a busy virtual CPU,
 * takes fewer items instead of holding up the others at the region's end. */
static inline int64_t gradref__claim(int64_t *next) {
    int64_t item;
    GRADREF__OMP(omp atomic capture)
    item = (*next)++;
    return item;
}

#endif
