/* SPDX-License-Identifier: Apache-2.0 */
/* Stack use: every operator's no-workspace paths (a 1-byte workspace) run from a caller thread
 * whose stack is only STACK_BYTES (or the system's least, 128 KiB on aarch64), with an
 * inaccessible guard page below it, at 1 and 2 threads, and each call's deepest use of that
 * stack (found by painting it) stays within BUDGET_BYTES. A frame larger than the guard page could
 * otherwise jump it and write the caller's memory; the library is also built with
 * -fstack-clash-protection where the compiler has it. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, pthread_attr_setstack */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#  define GRADREF_TEST_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define GRADREF_TEST_ASAN 1
#  endif
#endif
#ifndef GRADREF_TEST_ASAN
#  define GRADREF_TEST_ASAN 0
#endif

enum {
    KIB = 1024,
    /* AddressSanitizer's red zones and unmerged frames take about twice the stack */
    STACK_BYTES = (GRADREF_TEST_ASAN ? 3 : 1) * 64 * KIB,
    BUDGET_BYTES = (GRADREF_TEST_ASAN ? 3 : 1) * 52 * KIB,
    PAINT = 0xa5
};

typedef struct op_case {
    const char *name;
    int32_t precision;
    gradref_status (*run)(const struct op_case *c, const gradref_exec *e);
    gradref_tensor t[6];
    void *buf[6];
    gradref_conv_params conv;
} op_case;

/* A dense tensor of random values in [-1, 1] (I8: any byte). */
static gradref_tensor make(op_case *c, int slot, int32_t dtype, int32_t ndim, const int64_t *shape,
                           const int *perm, tu_rng *r) {
    size_t bytes;
    c->buf[slot] = tu_make_tensor(&c->t[slot], dtype, ndim, shape, perm, NULL, &bytes, r);
    const size_t size = tu_dtype_size(dtype);
    if (dtype != GRADREF_I8 && dtype != GRADREF_I32)
        for (size_t i = 0; i < bytes / size; i++)
            tu_set_value(dtype, (char *)c->buf[slot] + i * size, tu_uniform(r) * 2 - 1);
    return c->t[slot];
}

static gradref_status run_cbd(const op_case *c, const gradref_exec *e) {
    return gradref_conv_backprop_data(&c->conv, &c->t[0], &c->t[1], &c->t[2], e);
}

static gradref_status run_cbd_qs8(const op_case *c, const gradref_exec *e) {
    const gradref_qs8_scales sc = {0.01f, 0.02f, 0.3f};
    return gradref_conv_backprop_data_qs8(&c->conv, &sc, &c->t[0], &c->t[1], &c->t[2], e);
}

static gradref_status run_c3f(const op_case *c, const gradref_exec *e) {
    return gradref_conv3d_backprop_filter(&c->conv, &c->t[0], &c->t[1], &c->t[2], e);
}

static gradref_status run_gs3d(const op_case *c, const gradref_exec *e) {
    const gradref_grid_sampler3d_params p = {c->conv.mode, GRADREF_PAD_BORDER, 0};
    return gradref_grid_sampler3d_grad(&p, &c->t[0], &c->t[1], &c->t[2], &c->t[3], &c->t[4], e);
}

static gradref_status run_rope(const op_case *c, const gradref_exec *e) {
    static const int32_t lens[2] = {5, 11};
    const gradref_rope_params p = {c->conv.mode, 64, 0, 2, lens, NULL};
    return gradref_rope_grad(&p, &c->t[0], &c->t[1], &c->t[2], &c->t[3], &c->t[4], &c->t[5], e);
}

static gradref_status run_recat(const op_case *c, const gradref_exec *e) {
    static const int64_t split[3] = {40, 8, 80};
    return gradref_recat_embedding_grad_output_mixed_d(&c->t[0], split, 3, &c->t[1], e);
}

static gradref_status run_copy(const op_case *c, const gradref_exec *e) {
    return gradref_copy(&c->t[0], &c->t[1], e);
}

/* conv_backprop_data: filter (OC, IC/G, k, k) of g groups, diff (N, OC, o, o), grad (N, IC, i,
 * i). */
static void cbd_case(op_case *c, const char *name, int32_t in, int32_t out, int64_t oc, int64_t icg,
                     int32_t g, int64_t k, int64_t stride, int64_t pad, int nhwc, tu_rng *r) {
    static const int last[4] = {0, 2, 3, 1};
    const int64_t i = 14, o = (i + 2 * pad - k) / stride + 1;
    const int64_t fs[4] = {oc, icg, k, k}, ds[4] = {2, oc, o, o}, gs[4] = {2, icg * g, i, i};
    c->name = name;
    c->run = run_cbd;
    c->conv.groups = g;
    make(c, 0, in, 4, fs, nhwc ? last : NULL, r);
    make(c, 1, in, 4, ds, nhwc ? last : NULL, r);
    make(c, 2, out, 4, gs, nhwc ? last : NULL, r);
    for (int j = 0; j < 2; j++) {
        c->conv.stride[j] = stride;
        c->conv.dilation[j] = 1;
        c->conv.pad[2 * j] = c->conv.pad[2 * j + 1] = pad;
    }
}

/* conv3d_backprop_filter: x (N, IC, 6, 7, 8), dy of a k^3 filter, dw (OC, IC, k, k, k). */
static void c3f_case(op_case *c, const char *name, int32_t in, int64_t ic, int64_t oc, int ndhwc,
                     int32_t precision, tu_rng *r) {
    static const int last[5] = {0, 2, 3, 4, 1};
    const int64_t xs[5] = {2, ic, 6, 7, 8}, ys[5] = {2, oc, 6, 7, 8}, ws[5] = {oc, ic, 3, 3, 3};
    c->name = name;
    c->run = run_c3f;
    c->precision = precision;
    make(c, 0, in, 5, xs, ndhwc ? last : NULL, r);
    make(c, 1, in, 5, ys, ndhwc ? last : NULL, r);
    make(c, 2, GRADREF_F32, 5, ws, NULL, r);
    for (int j = 0; j < 3; j++) {
        c->conv.stride[j] = c->conv.dilation[j] = 1;
        c->conv.pad[2 * j] = c->conv.pad[2 * j + 1] = 1;
    }
}

/* Slots 0.. of c from `count` shapes, all of one dtype and rank. */
static void make_all(op_case *c, int32_t dtype, int32_t ndim, const int64_t *const *shapes,
                     int count, tu_rng *r) {
    for (int i = 0; i < count; i++)
        make(c, i, dtype, ndim, shapes[i], NULL, r);
}

static void gs3d_case(op_case *c, const char *name, int32_t interp, tu_rng *r) {
    const int64_t gs[5] = {2, 16, 4, 5, 6}, xs[5] = {2, 16, 5, 6, 7}, grs[5] = {2, 4, 5, 6, 3};
    const int64_t *const shapes[5] = {gs, xs, grs, xs, grs}; /* grad, x, grid, dx, dgrid */
    c->name = name;
    c->run = run_gs3d;
    c->conv.mode = interp;
    make_all(c, GRADREF_F32, 5, shapes, 5, r);
}

static void rope_case(op_case *c, const char *name, int32_t mode, int32_t dtype, tu_rng *r) {
    const int64_t qs[2] = {16, 256}, ks[2] = {16, 128}, cs[2] = {16, 64};
    const int64_t *const shapes[6] = {qs, ks, cs, cs, qs, ks}; /* q, k, cos, sin, dq, dk */
    c->name = name;
    c->run = run_rope;
    c->conv.mode = mode;
    make_all(c, dtype, 2, shapes, 6, r);
}

static void movers(op_case *c, tu_rng *r) {
    const int64_t go[2] = {64, 128}, n = 64 * 128, cl[3] = {96, 48, 40}, cf[3] = {96, 48, 40};
    static const int last[3] = {1, 2, 0};
    c[0].name = "recat";
    c[0].run = run_recat;
    make(&c[0], 0, GRADREF_F32, 2, go, NULL, r);
    make(&c[0], 1, GRADREF_F32, 1, &n, NULL, r);
    c[1].name = "copy F16 -> F32 transposed";
    c[1].run = run_copy;
    make(&c[1], 0, GRADREF_F16, 3, cl, last, r);
    make(&c[1], 1, GRADREF_F32, 3, cf, NULL, r);
}

enum { CASES = 21 };

static int build_cases(op_case *c, tu_rng *r) {
    int n = 0;
    memset(c, 0, CASES * sizeof *c);
    cbd_case(&c[n++], "cbd F32 3x3", GRADREF_F32, GRADREF_F32, 32, 32, 1, 3, 1, 1, 0, r);
    cbd_case(&c[n++], "cbd F32 3x3 stride 2", GRADREF_F32, GRADREF_F32, 32, 32, 1, 3, 2, 1, 0, r);
    cbd_case(&c[n++], "cbd F32 5x5 valid", GRADREF_F32, GRADREF_F32, 64, 64, 1, 5, 1, 0, 0, r);
    cbd_case(&c[n++], "cbd F16 3x3", GRADREF_F16, GRADREF_F16, 32, 32, 1, 3, 1, 1, 0, r);
    cbd_case(&c[n++], "cbd NHWC 3x3", GRADREF_F32, GRADREF_F32, 32, 32, 1, 3, 1, 1, 1, r);
    cbd_case(&c[n++], "cbd I8 parts", GRADREF_I8, GRADREF_I32, 256, 16, 1, 3, 1, 1, 0, r);
    cbd_case(&c[n++], "cbd QS8 parts", GRADREF_I8, GRADREF_I8, 256, 16, 1, 3, 1, 1, 0, r);
    c[n - 1].run = run_cbd_qs8;
    cbd_case(&c[n++], "cbd MegEngine DEFAULT F16", GRADREF_F16, GRADREF_F16, 32, 32, 1, 3, 1, 1, 0,
             r);
    c[n - 1].precision = GRADREF_PRECISION_MEGENGINE_DEFAULT;
    cbd_case(&c[n++], "cbd depthwise", GRADREF_F32, GRADREF_F32, 32, 1, 32, 3, 1, 1, 0, r);
    c3f_case(&c[n++], "c3f F32", GRADREF_F32, 16, 32, 0, GRADREF_PRECISION_DEFAULT, r);
    c3f_case(&c[n++], "c3f HF32", GRADREF_F32, 16, 32, 0, GRADREF_PRECISION_HF32, r);
    c3f_case(&c[n++], "c3f NDHWC", GRADREF_F32, 16, 32, 1, GRADREF_PRECISION_DEFAULT, r);
    c3f_case(&c[n++], "c3f first layer", GRADREF_F32, 3, 32, 0, GRADREF_PRECISION_DEFAULT, r);
    c3f_case(&c[n++], "c3f F16", GRADREF_F16, 16, 32, 0, GRADREF_PRECISION_DEFAULT, r);
    c3f_case(&c[n++], "c3f BF16 NDHWC", GRADREF_BF16, 16, 32, 1, GRADREF_PRECISION_DEFAULT, r);
    gs3d_case(&c[n++], "gs3d bilinear", GRADREF_INTERP_BILINEAR, r);
    gs3d_case(&c[n++], "gs3d nearest", GRADREF_INTERP_NEAREST, r);
    rope_case(&c[n++], "rope half F32", GRADREF_ROPE_HALF, GRADREF_F32, r);
    rope_case(&c[n++], "rope ATB F16", GRADREF_ROPE_ATB, GRADREF_F16, r);
    movers(&c[n], r);
    n += 2;
    assert_true(n <= CASES);
    return n;
}

typedef struct job {
    const op_case *c;
    int threads;
    gradref_status status;
} job;

static void *call_on_small_stack(void *arg) {
    job *j = arg;
    char tiny[1];
    const gradref_exec e = {tiny, 1, j->threads, j->c->precision};
    j->status = j->c->run(j->c, &e);
    return NULL;
}

/* The bytes of the painted stack [lo, lo + size) that the call wrote (from the top down). */
static size_t used(const unsigned char *lo, size_t size) {
    size_t i = 0;
    while (i < size && lo[i] == PAINT)
        i++;
    return size - i;
}

/* Runs c at `threads` on a fresh small stack over a guard page; returns the bytes used. */
static size_t stack_use(const op_case *c, int threads) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const long least = sysconf(_SC_THREAD_STACK_MIN);
    const size_t size = least > STACK_BYTES ? (size_t)least : STACK_BYTES;
    unsigned char *map =
        mmap(NULL, page + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map, page, PROT_NONE), 0); /* the guard page */
    memset(map + page, PAINT, size);
    pthread_attr_t attr;
    pthread_t thread;
    job j = {c, threads, GRADREF_ERR_PARAM};
    assert_int_equal(pthread_attr_init(&attr), 0);
    assert_int_equal(pthread_attr_setstack(&attr, map + page, size), 0);
    assert_int_equal(pthread_create(&thread, &attr, call_on_small_stack, &j), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    pthread_attr_destroy(&attr);
    if (j.status != GRADREF_OK)
        fail_msg("%s: %s: %s", c->name, gradref_status_string(j.status), gradref_last_error());
    const size_t bytes = used(map + page, size);
    munmap(map, page + size);
    return bytes;
}

static void test_no_workspace_stack(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(64);
    op_case *cases = malloc(CASES * sizeof *cases);
    assert_non_null(cases);
    const int n = build_cases(cases, &r);
    size_t worst = 0;
    for (int i = 0; i < n; i++)
        for (int threads = 1; threads <= 2; threads++) {
            const size_t bytes = stack_use(&cases[i], threads);
            printf("  %-28s %d thread%s: %5.1f KiB of stack\n", cases[i].name, threads,
                   threads > 1 ? "s" : " ", bytes / 1024.0);
            worst = bytes > worst ? bytes : worst;
            if (bytes > BUDGET_BYTES)
                fail_msg("%s at %d threads used %zu bytes of stack; the budget is %d",
                         cases[i].name, threads, bytes, BUDGET_BYTES);
        }
    printf("  deepest: %.1f KiB (budget %d KiB)\n", worst / 1024.0, BUDGET_BYTES / KIB);
    for (int i = 0; i < n; i++)
        for (int s = 0; s < 6; s++)
            free(cases[i].buf[s]);
    free(cases);
}

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_workspace_stack),
    };
    return TU_RUN_GROUP("stack", tests);
}
