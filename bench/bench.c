/* SPDX-License-Identifier: Apache-2.0 */
/* gradref-bench's harness (bench.h): timing with the same-run copy baseline and the oneDNN
 * peer, buffers and values. The program itself, its options and the table it prints are
 * bench_main.c's. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#  include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#  include <emmintrin.h>
#endif

#include "bench.h"

int bench_onednn_plain;

size_t bench_dtype_size(int32_t dtype) {
    static const size_t size[7] = {4, 8, 2, 2, 1, 4, 8};
    return dtype >= 0 && dtype < 7 ? size[dtype] : 0;
}

/* A copy with streaming stores on x86 (16-byte stores past dst's alignment), memcpy elsewhere:
 * the baseline's streaming half. */
static void copy_stream(char *dst, const char *src, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
    size_t head = (16u - ((uintptr_t)dst & 15u)) & 15u;
    if (head > bytes) head = bytes;
    memcpy(dst, src, head);
    size_t i = head;
    for (; i + 16 <= bytes; i += 16)
        _mm_stream_si128((__m128i *)(void *)(dst + i),
                         _mm_loadu_si128((const __m128i *)(const void *)(src + i)));
    memcpy(dst + i, src + i, bytes - i);
    _mm_sfence();
#else
    memcpy(dst, src, bytes);
#endif
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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
            copy_stream(dst + begin, src + begin, end - begin);
        } else {
            memcpy(dst + begin, src + begin, end - begin);
        }
    }
#else
    (void)threads;
    if (streaming)
        copy_stream(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
#endif
}

/* Tensors are 64-byte aligned, as PyTorch's CPU allocator aligns them; free() releases them. */
void *tensor_alloc(size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 1) == 0 ? p : NULL;
}

void fill_bytes(char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        p[i] = (char)(i * 131u + 7u);
}

static void copy_pairs(const copy_pair *pairs, int n, int threads, int streaming) {
    for (int i = 0; i < n; i++)
        parallel_copy(pairs[i].dst, pairs[i].src, pairs[i].bytes, threads, streaming);
}

/* Times fn (after one warm-up call) and, after each call, copies of the operator's inputs onto
 * its outputs (pairs) on the same threads, with streaming stores and by memcpy. The operator and
 * the memcpy both follow a streaming copy (the operator the previous repeat's untimed one), so
 * both meet an output the cache does not hold; the streaming copy follows the operator. */
int measure(const problem *p, op_fn fn, void *ctx, const copy_pair *pairs, int num_pairs,
            int threads, int repeats, timing *t) {
    double *op = malloc(sizeof(double) * (size_t)repeats),
           *cp = malloc(sizeof(double) * (size_t)repeats);
    double moved = 0;
    for (int i = 0; i < num_pairs; i++)
        moved += 2.0 * (double)pairs[i].bytes;
    int rc = 0;
    if (!op || !cp) {
        fprintf(stderr, "out of memory for %s\n", p->text);
        rc = 1;
    }
    for (int r = -1; r < repeats && rc == 0; r++) { /* r = -1 warms up */
        double t0 = now_seconds();
        gradref_status s = fn(ctx, threads);
        double t1 = now_seconds();
        double t2 = t1, t3 = t1;
        if (num_pairs > 0) { /* memcpy, like the operator, follows a streaming copy */
            copy_pairs(pairs, num_pairs, threads, 1);
            t2 = now_seconds();
            copy_pairs(pairs, num_pairs, threads, 0);
            t3 = now_seconds();
            copy_pairs(pairs, num_pairs, threads, 1);
        }
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
        t->copy_seconds = num_pairs > 0 ? median(cp, repeats) : 0;
        t->bytes_moved = moved;
    }
    free(op);
    free(cp);
    return rc;
}

/* The operator alone, medians of `repeats` after a warm-up: its time with a NULL workspace. */
double time_alone(op_fn fn, void *ctx, int threads, int repeats) {
    double *v = malloc(sizeof(double) * (size_t)repeats), result = 0;
    if (!v) return 0;
    for (int r = -1; r < repeats; r++) {
        const double t0 = now_seconds();
        const gradref_status s = fn(ctx, threads);
        const double t1 = now_seconds();
        if (s != GRADREF_OK) {
            free(v);
            return 0;
        }
        if (r >= 0) v[r] = t1 - t0;
    }
    result = median(v, repeats);
    free(v);
    return result;
}

void bench_from_f32(gradref_dtype dtype, void *dst, const float *src, int64_t n) {
    if (dtype == GRADREF_I8) {
        for (int64_t i = 0; i < n; i++)
            ((int8_t *)dst)[i] = (int8_t)(src[i] * 127.0f);
        return;
    }
    gradref_tensor from, to; /* F32 to F64, F16 or BF16, rounded to nearest even */
    gradref_tensor_init(&from, (void *)src, GRADREF_F32, 1, &n);
    gradref_tensor_init(&to, dst, dtype, 1, &n);
    if (gradref_copy(&from, &to, NULL) != GRADREF_OK) {
        fprintf(stderr, "gradref-bench: %s\n", gradref_last_error());
        exit(1);
    }
}

/* Uniform values in [-1, 1) from splitmix64 (consecutive xorshift32 outputs are correlated
 * enough to put grid points on planes, which changes grid_sampler's memory pattern). */
void fill_values(gradref_dtype dtype, void *dst, int64_t n, unsigned seed) {
    float *v = dtype == GRADREF_F32 ? dst : malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (v == NULL) {
        fprintf(stderr, "gradref-bench: out of memory\n");
        exit(1);
    }
    uint64_t state = 0x9e3779b97f4a7c15u * (seed + 1);
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = (state += 0x9e3779b97f4a7c15u);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        z ^= z >> 31;
        v[i] = (float)(z >> 40) * 0x1p-23f - 1.0f;
    }
    if (v != dst) {
        bench_from_f32(dtype, dst, v, n);
        free(v);
    }
}

/* Times `once` and the oneDNN peer alternately (so drifts of the machine hit both alike), a
 * warm-up pair first; medians into t. Frees the peer. */
int time_with_peer(const problem *p, op_fn once, void *ctx, peer_onednn *peer, int threads,
                   int repeats, timing *t) {
    double *ours = malloc(sizeof(double) * (size_t)repeats),
           *theirs = malloc(sizeof(double) * (size_t)repeats);
    int rc = ours && theirs ? 0 : 1;
    for (int r = -1; r < repeats && rc == 0; r++) {
        double t0 = now_seconds();
        gradref_status s = once(ctx, threads);
        double t1 = now_seconds();
        if (peer && peer_onednn_run(peer) != 0) {
            peer_onednn_free(peer);
            peer = NULL;
        }
        double t2 = now_seconds();
        if (s != GRADREF_OK) {
            fprintf(stderr, "%s: %s\n", p->text, gradref_last_error());
            rc = 1;
        } else if (r >= 0) {
            ours[r] = t1 - t0;
            theirs[r] = t2 - t1;
        }
    }
    if (rc == 0) {
        t->op_seconds = median(ours, repeats);
        t->peer_seconds = peer ? median(theirs, repeats) : 0;
    }
    peer_onednn_free(peer);
    free(ours);
    free(theirs);
    return rc;
}
