/* gradref-bench: times each problem of bench/problems.txt (or the file given) and, in the same
 * run, a plain memory copy of the same number of bytes, so figures from different machines can
 * be read as a fraction of what the memory system gives.
 *
 *   gradref-bench [-t threads] [-r repeats] [-f problems.txt] [substring]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "common/stream.h"
#include "gradref.h"
#include "problem.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static size_t dtype_size(gradref_dtype d) {
    switch (d) {
    case GRADREF_F64:
    case GRADREF_I64: return 8;
    case GRADREF_F16:
    case GRADREF_BF16: return 2;
    case GRADREF_I8: return 1;
    default: return 4;
    }
}

/* The copy every streaming operator is measured against: the same bytes, the same threads,
 * one contiguous block per thread, by memcpy or with streaming stores (the faster one counts). */
static void parallel_copy(char *dst, const char *src, size_t bytes, int threads, int streaming) {
#ifdef _OPENMP
#  pragma omp parallel num_threads(threads)
    {
        size_t team = (size_t)omp_get_num_threads(), me = (size_t)omp_get_thread_num();
        size_t begin = bytes * me / team, end = bytes * (me + 1) / team;
        if (streaming) {
            gradref__copy_stream(dst + begin, src + begin, end - begin);
            gradref__stream_fence();
        } else {
            memcpy(dst + begin, src + begin, end - begin);
        }
    }
#else
    (void)threads;
    if (streaming)
        gradref__copy_stream(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
#endif
}

typedef struct timing {
    double op_seconds, copy_seconds;
    double bytes_moved; /* read + written by the operator */
} timing;

static int run_recat(const problem *p, int threads, int repeats, timing *t) {
    int64_t B = p->batch, cols = 0;
    int64_t width = p->width > 0 ? p->width : 1;
    for (int i = 0; i < p->num_dims; i++)
        cols += p->dims[i] * width;
    size_t esz = dtype_size(p->dtype), bytes = (size_t)(B * cols) * esz;
    char *src = malloc(bytes ? bytes : 1), *dst = malloc(bytes ? bytes : 1);
    if (!src || !dst) {
        fprintf(stderr, "out of memory for %s\n", p->text);
        free(src);
        free(dst);
        return 1;
    }
    for (size_t i = 0; i < bytes; i++)
        src[i] = (char)(i * 131u + 7u);
    memset(dst, 0, bytes); /* fault every page in before timing */

    gradref_tensor go, out;
    int64_t shape3[3] = {B, p->width > 0 ? cols / width : cols, width};
    int64_t flat = B * cols;
    gradref_tensor_init(&go, src, p->dtype, p->width > 0 ? 3 : 2, shape3);
    gradref_tensor_init(&out, dst, p->dtype, 1, &flat);
    gradref_exec exec = {NULL, 0, threads, GRADREF_PRECISION_DEFAULT};

    double *op = malloc(sizeof(double) * (size_t)repeats),
           *cp = malloc(sizeof(double) * (size_t)repeats);
    int rc = 0;
    for (int r = -1; r < repeats && rc == 0; r++) { /* r = -1 warms up */
        double t0 = now_seconds();
        gradref_status s =
            p->width > 0
                ? gradref_recat_embedding_grad_output(&go, p->dims, p->num_dims, &out, &exec)
                : gradref_recat_embedding_grad_output_mixed_d(&go, p->dims, p->num_dims, &out,
                                                              &exec);
        double t1 = now_seconds();
        parallel_copy(dst, src, bytes, threads, 0);
        double t2 = now_seconds();
        parallel_copy(dst, src, bytes, threads, 1);
        double t3 = now_seconds();
        if (s != GRADREF_OK) {
            fprintf(stderr, "%s: %s\n", p->text, gradref_last_error());
            rc = 1;
        } else if (r >= 0) {
            op[r] = t1 - t0;
            cp[r] = t2 - t1 < t3 - t2 ? t2 - t1 : t3 - t2;
        }
    }
    if (rc == 0) {
        t->op_seconds = median(op, repeats);
        t->copy_seconds = median(cp, repeats);
        t->bytes_moved = 2.0 * (double)bytes;
    }
    free(op);
    free(cp);
    free(src);
    free(dst);
    return rc;
}

static void usage(void) {
    fprintf(stderr,
            "usage: gradref-bench [-t threads] [-r repeats] [-f problems.txt] [substring]\n");
}

int main(int argc, char **argv) {
    int threads = 0, repeats = 11;
    const char *path = GRADREF_BENCH_PROBLEMS, *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (argv[i][0] == '-') {
            usage();
            return 2;
        } else
            filter = argv[i];
    }
    if (repeats < 1) repeats = 1;
#ifdef _OPENMP
    if (threads <= 0) threads = omp_get_max_threads();
#else
    threads = 1;
#endif
    char err[256];
    problem *list;
    int n = problem_load(path, &list, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "gradref-bench: %s\n", err);
        return 2;
    }
    printf("gradref %s, %d thread(s), median of %d runs\n", gradref_version(), threads, repeats);
    printf("%-56s %10s %10s %10s %7s\n", "problem", "ms", "GB/s", "copy GB/s", "ratio");
    int failed = 0;
    for (int i = 0; i < n; i++) {
        const problem *p = &list[i];
        if (filter && !strstr(p->text, filter)) continue;
        timing t;
        int rc;
        if (strcmp(p->op, "recat") == 0) {
            rc = run_recat(p, threads, repeats, &t);
        } else {
            fprintf(stderr, "gradref-bench: unknown operator '%s'\n", p->op);
            rc = 1;
        }
        if (rc) {
            failed = 1;
            continue;
        }
        double gbs = t.bytes_moved / t.op_seconds * 1e-9,
               copy = t.bytes_moved / t.copy_seconds * 1e-9;
        printf("%-56s %10.3f %10.2f %10.2f %7.2f\n", p->text, t.op_seconds * 1e3, gbs, copy,
               gbs / copy);
    }
    free(list);
    return failed;
}
