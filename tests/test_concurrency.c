/* SPDX-License-Identifier: Apache-2.0 */
/* Several pthreads call every operator at once, with valid and invalid arguments and
 * different thread counts: each valid result equals the serial one bit for bit, and each
 * thread's gradref_last_error() is its own. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifdef _OPENMP
#  include <omp.h>
#endif

enum { WORKERS = 6, ROUNDS = 40, OPS = 6 };

/* Inputs shared read-only by every thread. */
static float x5[2 * 4 * 3 * 5 * 6], grad5[2 * 4 * 2 * 4 * 5], grid5[2 * 2 * 4 * 5 * 3];
static float filt[6 * 4 * 3 * 3], diff[2 * 6 * 5 * 6], dy5[2 * 6 * 3 * 5 * 6];
static float q[7 * 16], k[7 * 8], cs[9 * 8], sn[9 * 8], go[5 * 12];
static gradref_tensor t_x5, t_grad5, t_grid5, t_filt, t_diff, t_dy5, t_q, t_k, t_cs, t_sn, t_go;
static const int32_t seq_lens[2] = {3, 4};
static const int64_t starts[2] = {2, 0}, split[3] = {5, 0, 7};

/* Output sizes in floats, per operator; serial results. */
static const size_t out_floats[OPS][2] = {{2 * 4 * 3 * 5 * 6, 2 * 2 * 4 * 5 * 3},
                                          {2 * 4 * 5 * 6, 0},
                                          {6 * 4 * 3 * 3 * 3, 0},
                                          {7 * 16, 7 * 8},
                                          {5 * 12, 0},
                                          {5 * 12, 0}};
static float *serial[OPS][2];

static gradref_tensor dense(void *data, int32_t ndim, const int64_t *shape) {
    gradref_tensor t;
    assert_int_equal(gradref_tensor_init(&t, data, GRADREF_F32, ndim, shape), GRADREF_OK);
    return t;
}

static void setup_inputs(void) {
    tu_rng r = tu_rng_make(77);
    float *all[] = {x5, grad5, grid5, filt, diff, dy5, q, k, cs, sn, go};
    size_t sizes[] = {sizeof x5, sizeof grad5, sizeof grid5, sizeof filt, sizeof diff, sizeof dy5,
                      sizeof q,  sizeof k,     sizeof cs,    sizeof sn,   sizeof go};
    for (int i = 0; i < 11; i++)
        for (size_t j = 0; j < sizes[i] / sizeof(float); j++)
            all[i][j] = (float)(tu_uniform(&r) * 2.2 - 1.1);
    int64_t xs[5] = {2, 4, 3, 5, 6}, gs[5] = {2, 4, 2, 4, 5}, grs[5] = {2, 2, 4, 5, 3};
    t_x5 = dense(x5, 5, xs), t_grad5 = dense(grad5, 5, gs), t_grid5 = dense(grid5, 5, grs);
    int64_t fs[4] = {6, 4, 3, 3}, ds[4] = {2, 6, 5, 6}, dys[5] = {2, 6, 3, 5, 6};
    t_filt = dense(filt, 4, fs), t_diff = dense(diff, 4, ds), t_dy5 = dense(dy5, 5, dys);
    int64_t qs[2] = {7, 16}, ks[2] = {7, 8}, css[2] = {9, 8}, gos[2] = {5, 12};
    t_q = dense(q, 2, qs), t_k = dense(k, 2, ks), t_cs = dense(cs, 2, css),
    t_sn = dense(sn, 2, css);
    t_go = dense(go, 2, gos);
}

/* Runs operator `op` into out[0..1] (float buffers of out_floats sizes). */
static gradref_status run_op(int op, float **out, const gradref_exec *exec) {
    gradref_conv_params cp;
    memset(&cp, 0, sizeof cp);
    for (int j = 0; j < 3; j++)
        cp.stride[j] = cp.dilation[j] = 1;
    switch (op) {
    case 0: {
        int64_t xs[5] = {2, 4, 3, 5, 6}, grs[5] = {2, 2, 4, 5, 3};
        gradref_tensor dx = dense(out[0], 5, xs), dg = dense(out[1], 5, grs);
        gradref_grid_sampler3d_params p = {GRADREF_INTERP_BILINEAR, GRADREF_PAD_BORDER, 1};
        return gradref_grid_sampler3d_grad(&p, &t_grad5, &t_x5, &t_grid5, &dx, &dg, exec);
    }
    case 1: { /* 2-D, pads 1: grad (2, 4, 5, 6) */
        int64_t gs[4] = {2, 4, 5, 6};
        gradref_tensor g = dense(out[0], 4, gs);
        cp.pad[0] = cp.pad[1] = cp.pad[2] = cp.pad[3] = 1;
        return gradref_conv_backprop_data(&cp, &t_filt, &t_diff, &g, exec);
    }
    case 2: { /* dw (6, 4, 3, 3, 3) of x (2, 4, 3, 5, 6), pads 1 */
        int64_t ws[5] = {6, 4, 3, 3, 3};
        gradref_tensor w = dense(out[0], 5, ws);
        for (int j = 0; j < 6; j++)
            cp.pad[j] = 1;
        return gradref_conv3d_backprop_filter(&cp, &t_x5, &t_dy5, &w, exec);
    }
    case 3: {
        int64_t qs[2] = {7, 16}, ks[2] = {7, 8};
        gradref_tensor dq = dense(out[0], 2, qs), dk = dense(out[1], 2, ks);
        gradref_rope_params p = {GRADREF_ROPE_HALF, 8, 0, 2, seq_lens, starts};
        return gradref_rope_grad(&p, &t_q, &t_k, &t_cs, &t_sn, &dq, &dk, exec);
    }
    case 4: {
        int64_t n = 60;
        gradref_tensor o = dense(out[0], 1, &n);
        return gradref_recat_embedding_grad_output_mixed_d(&t_go, split, 3, &o, exec);
    }
    default: { /* a transposing copy */
        int64_t s[2] = {12, 5};
        gradref_tensor src = t_go, dst = dense(out[0], 2, s);
        src.shape[0] = 12, src.shape[1] = 5, src.strides[0] = 1, src.strides[1] = 12;
        return gradref_copy(&src, &dst, exec);
    }
    }
}

/* A failing call whose message carries `tag`: a broadcast copy of shape (tag) into (0). */
static void fail_with_tag(int tag) {
    float a[1] = {0};
    int64_t sa = tag, sb = 0;
    gradref_tensor ta = dense(a, 1, &sa), tb = dense(NULL, 1, &sb);
    ta.strides[0] = 0;
    (void)gradref_copy(&ta, &tb, NULL);
}

typedef struct worker {
    int id;
    int failures;
    char first_failure[160];
} worker;

static void note(worker *w, const char *what) {
    if (w->failures++ == 0) snprintf(w->first_failure, sizeof w->first_failure, "%s", what);
}

static void *work(void *arg) {
    worker *w = arg;
    float *out[2];
    char want[128];
    for (int round = 0; round < ROUNDS; round++) {
        const int tag = 1000 * (w->id + 1) + round;
        fail_with_tag(tag);
        snprintf(want, sizeof want, "copy: src.shape[0] is %d but dst.shape[0] is 0", tag);
        for (int op = 0; op < OPS; op++) {
            const int i = (op + w->id + round) % OPS;
            out[0] = malloc(out_floats[i][0] * sizeof(float));
            out[1] = malloc((out_floats[i][1] + 1) * sizeof(float));
            gradref_exec e = {NULL, 0, 1 + (w->id + round) % 3, GRADREF_PRECISION_DEFAULT};
            if (run_op(i, out, &e) != GRADREF_OK) note(w, "a valid call failed");
            for (int o = 0; o < 2; o++)
                if (out_floats[i][o] &&
                    memcmp(out[o], serial[i][o], out_floats[i][o] * sizeof(float)) != 0)
                    note(w, "a result differs from the serial run");
            /* an invalid call of the same operator sets this thread's message only */
            gradref_exec bad = {NULL, 0, -(tag), GRADREF_PRECISION_DEFAULT};
            if (run_op(i, out, &bad) != GRADREF_ERR_PARAM) note(w, "an invalid call passed");
            char exec_msg[64];
            snprintf(exec_msg, sizeof exec_msg, "exec.num_threads is %d,", -tag);
            if (!strstr(gradref_last_error(), exec_msg)) note(w, "another thread's message");
            free(out[0]);
            free(out[1]);
        }
        fail_with_tag(tag);
        if (strcmp(gradref_last_error(), want) != 0) note(w, "another thread's message");
    }
    return NULL;
}

/* The serial results of every operator (one thread each). */
static void run_serial(void) {
    setup_inputs();
    for (int i = 0; i < OPS; i++) {
        for (int o = 0; o < 2; o++)
            serial[i][o] = calloc(out_floats[i][o] + 1, sizeof(float));
        gradref_exec one = {NULL, 0, 1, GRADREF_PRECISION_DEFAULT};
        assert_int_equal(run_op(i, serial[i], &one), GRADREF_OK);
    }
}

static void check_workers(const worker *workers) {
    for (int t = 0; t < WORKERS; t++)
        if (workers[t].failures)
            fail_msg("worker %d: %d failures, first: %s", t, workers[t].failures,
                     workers[t].first_failure);
    for (int i = 0; i < OPS; i++)
        for (int o = 0; o < 2; o++)
            free(serial[i][o]);
}

static void test_threads_at_once(void **state) {
    (void)state;
    run_serial();
    pthread_t threads[WORKERS];
    worker workers[WORKERS];
    for (int t = 0; t < WORKERS; t++) {
        memset(&workers[t], 0, sizeof workers[t]);
        workers[t].id = t;
        assert_int_equal(pthread_create(&threads[t], NULL, work, &workers[t]), 0);
    }
    for (int t = 0; t < WORKERS; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    check_workers(workers);
}

/* The same calls from the members of the caller's own OpenMP team: gradref's regions nest in
 * it (one thread each, nesting being off by default), and a team of one runs on the member
 * without a region only where the member is in no larger team. Without OpenMP the workers run
 * one after another. */
static void test_inside_an_openmp_team(void **state) {
    (void)state;
    run_serial();
    worker workers[WORKERS];
    memset(workers, 0, sizeof workers);
    for (int t = 0; t < WORKERS; t++)
        workers[t].id = t;
#ifdef _OPENMP
#  pragma omp parallel num_threads(WORKERS)
    work(&workers[omp_get_thread_num()]);
#else
    for (int t = 0; t < WORKERS; t++)
        work(&workers[t]);
#endif
    check_workers(workers);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_at_once),
        cmocka_unit_test(test_inside_an_openmp_team),
    };
    return TU_RUN_GROUP("concurrency", tests);
}
