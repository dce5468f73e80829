/* SPDX-License-Identifier: Apache-2.0 */
/* oneDNN (the Debian package libdnnl-dev, oneDNN 2.x C API) as the same-run peer of the
 * convolution operators. Built only when CMake finds dnnl.h; oneDNN picks its own memory
 * formats (format_tag any), which is its fastest setting, and runs on the OpenMP threads the
 * bench sets. The bench alternates gradref and oneDNN calls so both meet the same machine. */
#include "peer_onednn.h"

#ifdef GRADREF_BENCH_ONEDNN

#  include <stdio.h>
#  include <stdlib.h>
#  include <string.h>
#  ifdef _OPENMP
#    include <omp.h>
#  endif

#  include <oneapi/dnnl/dnnl.h>

#  define CHECK(call)                                                                              \
    do {                                                                                           \
      if ((call) != dnnl_success) {                                                                \
        fprintf(stderr, "oneDNN: %s failed\n", #call);                                             \
        goto out;                                                                                  \
      }                                                                                            \
    } while (0)

static void fill_memory(dnnl_memory_t m, const dnnl_memory_desc_t *md) {
    void *p = NULL;
    dnnl_memory_get_data_handle(m, &p);
    size_t bytes = dnnl_memory_desc_get_size(md);
    for (size_t i = 0; i < bytes / 4; i++)
        ((float *)p)[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
}

struct peer_onednn {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t fwd_pd, bwd_pd;
    dnnl_primitive_t prim;
    dnnl_memory_t mem[3];
    dnnl_exec_arg_t args[3];
    /* plain: the caller's tensors where oneDNN's formats differ, and the reorders between */
    dnnl_memory_t user[3];
    dnnl_primitive_t reorder[3];
    dnnl_exec_arg_t reorder_args[3][2];
    int output; /* which of the three the primitive writes */
};

void peer_onednn_free(peer_onednn *h) {
    if (!h) return;
    if (h->prim) dnnl_primitive_destroy(h->prim);
    for (int i = 0; i < 3; i++) {
        if (h->mem[i]) dnnl_memory_destroy(h->mem[i]);
        if (h->user[i]) dnnl_memory_destroy(h->user[i]);
        if (h->reorder[i]) dnnl_primitive_destroy(h->reorder[i]);
    }
    if (h->bwd_pd) dnnl_primitive_desc_destroy(h->bwd_pd);
    if (h->fwd_pd) dnnl_primitive_desc_destroy(h->fwd_pd);
    if (h->stream) dnnl_stream_destroy(h->stream);
    if (h->engine) dnnl_engine_destroy(h->engine);
    free(h);
}

int peer_onednn_run(peer_onednn *h) {
    for (int i = 0; i < 3; i++) /* plain: the inputs into oneDNN's formats */
        if (h->reorder[i] && i != h->output &&
            dnnl_primitive_execute(h->reorder[i], h->stream, 2, h->reorder_args[i]) != dnnl_success)
            return 1;
    if (dnnl_primitive_execute(h->prim, h->stream, 3, h->args) != dnnl_success) return 1;
    if (h->reorder[h->output] && dnnl_primitive_execute(h->reorder[h->output], h->stream, 2,
                                                        h->reorder_args[h->output]) != dnnl_success)
        return 1;
    return dnnl_stream_wait(h->stream) != dnnl_success;
}

static peer_onednn *peer_onednn_conv(const peer_conv *c, int threads, int weights, int plain);

peer_onednn *peer_onednn_conv_bwd_data(const peer_conv *c, int threads, int plain) {
    return peer_onednn_conv(c, threads, 0, plain);
}

peer_onednn *peer_onednn_conv_bwd_weights(const peer_conv *c, int threads, int plain) {
    return peer_onednn_conv(c, threads, 1, plain);
}

/* The row-major tag of nd dims, or the channels-last one (dims N, C, spatial...). */
static dnnl_format_tag_t plain_tag(int nd, int channels_last) {
    static const dnnl_format_tag_t row_major[7] = {
        dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
    static const dnnl_format_tag_t last[6] = {
        dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_acb, dnnl_acdb, dnnl_acdeb};
    return channels_last && nd >= 3 && nd <= 5 ? last[nd] : row_major[nd];
}

/* Argument i of the primitive (memory descriptor md) taken from, or for the output returned
 * to, a tensor in the caller's layout, when the two differ. */
static int plain_arg(peer_onednn *h, int i, const dnnl_memory_desc_t *md, int nd,
                     const dnnl_dims_t dims, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t user_md;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_init_by_tag(&user_md, nd, dims, dnnl_f32, tag) != dnnl_success) return 1;
    if (dnnl_memory_desc_equal(&user_md, md)) return 0;
    if (dnnl_memory_create(&h->user[i], &user_md, h->engine, DNNL_MEMORY_ALLOCATE) != dnnl_success)
        return 1;
    fill_memory(h->user[i], &user_md);
    const int out = i == h->output;
    const dnnl_memory_desc_t *from = out ? md : &user_md, *to = out ? &user_md : md;
    if (dnnl_reorder_primitive_desc_create(&pd, from, h->engine, to, h->engine, NULL) !=
        dnnl_success)
        return 1;
    const int rc = dnnl_primitive_create(&h->reorder[i], pd) != dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    h->reorder_args[i][0].arg = DNNL_ARG_FROM;
    h->reorder_args[i][0].memory = out ? h->mem[i] : h->user[i];
    h->reorder_args[i][1].arg = DNNL_ARG_TO;
    h->reorder_args[i][1].memory = out ? h->user[i] : h->mem[i];
    return rc;
}

static peer_onednn *peer_onednn_conv(const peer_conv *c, int threads, int weights, int plain) {
    peer_onednn *h = calloc(1, sizeof *h);
    if (!h) return NULL;
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
    const dnnl_format_tag_t data_tag =
        plain == PEER_PLAIN_LAYOUTS ? plain_tag(nd, c->channels_last) : dnnl_format_tag_any;
    CHECK(dnnl_memory_desc_init_by_tag(&src_md, nd, src, dnnl_f32, data_tag));
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, nd, dst, dnnl_f32, data_tag));
    CHECK(dnnl_memory_desc_init_by_tag(&wei_md, wnd, wei, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_engine_create(&h->engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&h->stream, h->engine, dnnl_stream_default_flags));
    CHECK(dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training,
                                                     dnnl_convolution_direct, &src_md, &wei_md,
                                                     NULL, &dst_md, st, dl, pl, pr));
    CHECK(dnnl_primitive_desc_create(&h->fwd_pd, &fwd, NULL, h->engine, NULL));
    if (weights)
        CHECK(dnnl_dilated_convolution_backward_weights_desc_init(
            &bwd, dnnl_convolution_direct, &src_md, &wei_md, NULL, &dst_md, st, dl, pl, pr));
    else
        CHECK(dnnl_dilated_convolution_backward_data_desc_init(
            &bwd, dnnl_convolution_direct, &src_md, &wei_md, &dst_md, st, dl, pl, pr));
    CHECK(dnnl_primitive_desc_create(&h->bwd_pd, &bwd, NULL, h->engine, h->fwd_pd));
    const dnnl_query_t data_q[3] = {dnnl_query_diff_src_md, dnnl_query_weights_md,
                                    dnnl_query_diff_dst_md};
    const dnnl_query_t weights_q[3] = {dnnl_query_src_md, dnnl_query_diff_weights_md,
                                       dnnl_query_diff_dst_md};
    const dnnl_query_t *which = weights ? weights_q : data_q;
    const int data_arg[3] = {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST};
    const int weights_arg[3] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST};
    const int *arg = weights ? weights_arg : data_arg;
    h->output = weights ? 1 : 0; /* the three: src-side, weights-side, dst-side */
    for (int i = 0; i < 3; i++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(h->bwd_pd, which[i], 0);
        CHECK(dnnl_memory_create(&h->mem[i], md, h->engine, DNNL_MEMORY_ALLOCATE));
        fill_memory(h->mem[i], md);
        h->args[i].arg = arg[i];
        h->args[i].memory = h->mem[i];
        if (plain == PEER_PLAIN_REORDERS &&
            plain_arg(h, i, md, i == 1 ? wnd : nd,
                      i == 0   ? src
                      : i == 1 ? wei
                               : dst,
                      i == 1 ? plain_tag(wnd, 0) : plain_tag(nd, c->channels_last))) {
            fprintf(stderr, "oneDNN: the reorders of a plain peer failed\n");
            goto out;
        }
    }
    CHECK(dnnl_primitive_create(&h->prim, h->bwd_pd));
    return h;
out:
    peer_onednn_free(h);
    return NULL;
}

const char *peer_onednn_isa(void) {
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
    }
}

#else

#  include <stddef.h>

const char *peer_onednn_isa(void) {
    return "none";
}

peer_onednn *peer_onednn_conv_bwd_data(const peer_conv *c, int threads, int plain) {
    (void)c, (void)threads, (void)plain;
    return NULL;
}
peer_onednn *peer_onednn_conv_bwd_weights(const peer_conv *c, int threads, int plain) {
    (void)c, (void)threads, (void)plain;
    return NULL;
}
int peer_onednn_run(peer_onednn *h) {
    (void)h;
    return 1;
}
void peer_onednn_free(peer_onednn *h) {
    (void)h;
}

#endif
