/* SPDX-License-Identifier: Apache-2.0 */
/* One benchmark problem per line, shared by gradref-bench and the tests:
 *
 *   recat B16384 dims128,256,64,512,0,128,256,64 f32
 *   recat B8192 D64 dims6,7,6,7 f32          (fixed D: dims are features per rank)
 *   rope T16384 Hq4096 Hk1024 D128 f16 atb
 *
 * After the operator name: <key><number> settings (B, D, T, Hq, ...), dims<list>, a dtype
 * (f32 f64 f16 bf16 i8 i32 i64) and at most one bare word (a mode). '#' starts a comment. */
#ifndef GRADREF_BENCH_PROBLEM_H
#define GRADREF_BENCH_PROBLEM_H

#include <stdint.h>

#include "gradref.h"

#define PROBLEM_MAX_DIMS 64
#define PROBLEM_MAX_KEYS 16

typedef struct problem {
    char op[32];
    char text[256]; /* the line as written, without comment and newline */
    int num_keys;
    char keys[PROBLEM_MAX_KEYS][8];
    int64_t values[PROBLEM_MAX_KEYS];
    int32_t num_dims;
    int64_t dims[PROBLEM_MAX_DIMS];
    gradref_dtype dtype;
    char mode[16]; /* "" when the line has none */
} problem;

/* The value of key, or fallback when the line does not set it. */
int64_t problem_get(const problem *p, const char *key, int64_t fallback);

/* Parses one line. Returns 1 for a problem, 0 for a blank or comment line, -1 on an error
 * (with a message in err). */
int problem_parse(const char *line, problem *p, char *err, int err_size);

/* Reads every problem of a file into *out (malloc'd). Returns the count, or -1 (message in err). */
int problem_load(const char *path, problem **out, char *err, int err_size);

#endif
