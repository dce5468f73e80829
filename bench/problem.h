/* One benchmark problem per line, shared by gradref-bench and the tests:
 *
 *   recat B16384 dims128,256,64,512,0,128,256,64 f32
 *   recat B4096 D16 dims8,0,24 bf16          (fixed D: dims are features per rank)
 *
 * Tokens after the operator name: B<batch>, D<width> (optional), dims<list>, a dtype
 * (f32 f64 f16 bf16 i8 i32 i64). '#' starts a comment. */
#ifndef GRADREF_BENCH_PROBLEM_H
#define GRADREF_BENCH_PROBLEM_H

#include <stdint.h>

#include "gradref.h"

#define PROBLEM_MAX_DIMS 64

typedef struct problem {
    char op[32];
    char text[256]; /* the line as written, without comment and newline */
    int64_t batch;
    int64_t width; /* 0 when the line has no D token */
    int32_t num_dims;
    int64_t dims[PROBLEM_MAX_DIMS];
    gradref_dtype dtype;
} problem;

/* Parses one line. Returns 1 for a problem, 0 for a blank or comment line, -1 on an error
 * (with a message in err). */
int problem_parse(const char *line, problem *p, char *err, int err_size);

/* Reads every problem of a file into *out (malloc'd). Returns the count, or -1 (message in err). */
int problem_load(const char *path, problem **out, char *err, int err_size);

#endif
