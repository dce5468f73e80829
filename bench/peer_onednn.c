/* oneDNN (the Debian package libdnnl-dev, oneDNN 2.x C API) as the same-run peer of the
 * convolution operators. Built only when CMake finds dnnl.h; oneDNN picks its own memory
 * formats (format_tag any), which is its fastest setting, and runs on the OpenMP threads the
 * bench sets. */
#define _POSIX_C_SOURCE 200809L
#include "peer_onednn.h"

#ifdef GRADREF_BENCH_ONEDNN

#  include <stdio.h>
#  include <stdlib.h>
#  include <string.h>
#  include <time.h>
#  ifdef _OPENMP
#    include <omp.h>
#  endif

#  include <oneapi/dnnl/dnnl.h>

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#  define CHECK(call)                                                                            \
    do {                                                                                         \
      if ((call) != dnnl_success) {                                                              \
        fprintf(stderr, "oneDNN: %s failed\n", #call);                                          \
        goto out;                                                                                \
      }                                                                                          \
    } while (0)

static void fill_memory(dnnl_memory_t m, const dnnl_memory_desc_t *md) {
    void *p = NULL;
    dnnl_memory_get_data_handle(m, &p);
    size_t bytes = dnnl_memory_desc_get_size(md);
    for (size_t i = 0; i < bytes / 4; i++)
        ((float *)p)[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
}

double peer_onednn_conv_bwd_data(const peer_conv *c, int threads, int repeats) {
    double result = -1, *times = NULL;
    dnnl_engine_t engine = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_primitive_desc_t fwd_pd = NULL, bwd_pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t mem[3] = {NULL, NULL, NULL};
    const int r = c->rank, nd = r + 2;
    dnnl_dims_t src = {c->N, c->G * c->ICpg}, dst = {c->N, c->G * c->OCpg}, wei, st, dl, pl, pr;
    int wnd = 0;
    if (c->G > 1) wei[wnd++] = c->G;
    wei[wnd++] = c->OCpg;
    wei[wnd++] = c->ICpg;
    for (int j = 0; j < r; j++) {
        src[2 + j] = c->I[j];
        dst[2 + j] = c->O[j];
        wei[wnd++] = c->K[j];
        st[j] = c->stride[j];
        dl[j] = c->dil[j] - 1; /* oneDNN counts dilation from 0 */
        pl[j] = c->pad_begin[j];
        pr[j] = c->pad_end[j];
    }
    dnnl_memory_desc_t src_md, dst_md, wei_md;
    dnnl_convolution_desc_t fwd, bwd;
#  ifdef _OPENMP
    omp_set_num_threads(threads);
#  else
    (void)threads;
#  endif
    CHECK(dnnl_memory_desc_init_by_tag(&src_md, nd, src, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, nd, dst, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&wei_md, wnd, wei, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    CHECK(dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training,
                                                     dnnl_convolution_direct, &src_md, &wei_md,
                                                     NULL, &dst_md, st, dl, pl, pr));
    CHECK(dnnl_primitive_desc_create(&fwd_pd, &fwd, NULL, engine, NULL));
    CHECK(dnnl_dilated_convolution_backward_data_desc_init(&bwd, dnnl_convolution_direct, &src_md,
                                                           &wei_md, &dst_md, st, dl, pl, pr));
    CHECK(dnnl_primitive_desc_create(&bwd_pd, &bwd, NULL, engine, fwd_pd));
    const dnnl_query_t which[3] = {dnnl_query_diff_src_md, dnnl_query_weights_md,
                                   dnnl_query_diff_dst_md};
    for (int i = 0; i < 3; i++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(bwd_pd, which[i], 0);
        CHECK(dnnl_memory_create(&mem[i], md, engine, DNNL_MEMORY_ALLOCATE));
        fill_memory(mem[i], md);
    }
    CHECK(dnnl_primitive_create(&prim, bwd_pd));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_SRC, mem[0]},
                               {DNNL_ARG_WEIGHTS, mem[1]},
                               {DNNL_ARG_DIFF_DST, mem[2]}};
    times = malloc(sizeof(double) * (size_t)repeats);
    if (!times) goto out;
    for (int k = -1; k < repeats; k++) {
        double t0 = seconds();
        CHECK(dnnl_primitive_execute(prim, stream, 3, args));
        CHECK(dnnl_stream_wait(stream));
        if (k >= 0) times[k] = seconds() - t0;
    }
    qsort(times, (size_t)repeats, sizeof *times, cmp);
    result = repeats % 2 ? times[repeats / 2] : 0.5 * (times[repeats / 2 - 1] + times[repeats / 2]);
out:
    free(times);
    if (prim) dnnl_primitive_destroy(prim);
    for (int i = 0; i < 3; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    if (bwd_pd) dnnl_primitive_desc_destroy(bwd_pd);
    if (fwd_pd) dnnl_primitive_desc_destroy(fwd_pd);
    if (stream) dnnl_stream_destroy(stream);
    if (engine) dnnl_engine_destroy(engine);
    return result;
}

#else

double peer_onednn_conv_bwd_data(const peer_conv *c, int threads, int repeats) {
    (void)c, (void)threads, (void)repeats;
    return -1;
}

#endif
