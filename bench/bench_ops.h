/* SPDX-License-Identifier: Apache-2.0 */
/* The operators' benchmarks (bench_<op>.c), as the program (bench_main.c) calls them. */
#ifndef GRADREF_BENCH_OPS_H
#define GRADREF_BENCH_OPS_H

#include "bench.h"

/* One operator's problem: its tensors made, its calls timed into *t; 0 on success. */
int bench_recat(const problem *p, int threads, int repeats, timing *t);
int bench_rope(const problem *p, int threads, int repeats, timing *t);
int bench_gs3d(const problem *p, int threads, int repeats, timing *t);
int bench_cbd(const problem *p, int threads, int repeats, timing *t);
int bench_c3f(const problem *p, int threads, int repeats, timing *t);

#endif
