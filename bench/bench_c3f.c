/* SPDX-License-Identifier: Apache-2.0 */
/* gradref-bench: conv3d_backprop_filter. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_ops.h"

typedef struct c3f_ctx {
    gradref_conv_params params;
    gradref_tensor x, dy, dw;
    void *workspace;
    size_t workspace_bytes;
    int32_t precision;
} c3f_ctx;

static gradref_status c3f_once(void *arg, int threads) {
    c3f_ctx *c = arg;
    gradref_exec exec = {c->workspace, c->workspace_bytes, threads, c->precision};
    return gradref_conv3d_backprop_filter(&c->params, &c->x, &c->dy, &c->dw, &exec);
}

/* conv3d_backprop_filter N IC OC [G] D H W K [KD] S P [PD] [prec] [tinyws1] dtype ncdhw|ndhwc:
 * the weight gradient of a 3-D convolution with a K^3 kernel (depth KD when given), stride S,
 * pads P on both sides (depth PD), at gradref_precision prec (default 0); tinyws1: a 1-byte
 * workspace. Work: 2 N OC (IC/G) taps O flops; oneDNN side by side (at its own f32
 * precision). */
int bench_c3f(const problem *p, int threads, int repeats, timing *t) {
    peer_conv pc;
    memset(&pc, 0, sizeof pc);
    pc.rank = 3;
    pc.N = problem_get(p, "N", 1);
    pc.G = problem_get(p, "G", 1);
    pc.ICpg = problem_get(p, "IC", 1) / pc.G;
    pc.OCpg = problem_get(p, "OC", 1) / pc.G;
    const int64_t sizes[3] = {problem_get(p, "D", 1), problem_get(p, "H", 1),
                              problem_get(p, "W", 1)};
    int64_t taps = 1, opix = 1, ipix = 1;
    for (int j = 0; j < 3; j++) {
        pc.I[j] = sizes[j];
        pc.K[j] = j == 0 ? problem_get(p, "KD", problem_get(p, "K", 1)) : problem_get(p, "K", 1);
        pc.stride[j] = problem_get(p, "S", 1);
        pc.dil[j] = 1;
        pc.pad_begin[j] = pc.pad_end[j] =
            j == 0 ? problem_get(p, "PD", problem_get(p, "P", 0)) : problem_get(p, "P", 0);
        pc.O[j] = (pc.I[j] + 2 * pc.pad_begin[j] - (pc.K[j] - 1) - 1) / pc.stride[j] + 1;
        taps *= pc.K[j];
        opix *= pc.O[j];
        ipix *= pc.I[j];
    }
    const gradref_dtype dt = p->dtype;
    const size_t esz = bench_dtype_size(dt);
    const gradref_format fmt =
        strcmp(p->mode, "ndhwc") == 0 ? GRADREF_FORMAT_NDHWC : GRADREF_FORMAT_NCDHW;
    const int64_t C_in = pc.G * pc.ICpg, C_out = pc.G * pc.OCpg;
    const int64_t xn = pc.N * C_in * ipix, yn = pc.N * C_out * opix, wn = C_out * pc.ICpg * taps;
    char *x = tensor_alloc((size_t)xn * esz), *y = tensor_alloc((size_t)yn * esz),
         *w = tensor_alloc((size_t)wn * 8);
    int rc = 1;
    if (x && y && w) {
        fill_values(dt, x, xn, 1);
        fill_values(dt, y, yn, 2);
        c3f_ctx c;
        memset(&c, 0, sizeof c);
        c.precision = (int32_t)problem_get(p, "prec", GRADREF_PRECISION_DEFAULT);
        c.params.groups = (int32_t)pc.G;
        for (int j = 0; j < 3; j++) {
            c.params.stride[j] = pc.stride[j];
            c.params.dilation[j] = 1;
            c.params.pad[2 * j] = pc.pad_begin[j];
            c.params.pad[2 * j + 1] = pc.pad_end[j];
        }
        const int64_t xs[5] = {pc.N, C_in, pc.I[0], pc.I[1], pc.I[2]};
        const int64_t ys[5] = {pc.N, C_out, pc.O[0], pc.O[1], pc.O[2]};
        const int64_t ws[5] = {C_out, pc.ICpg, pc.K[0], pc.K[1], pc.K[2]};
        gradref_tensor_init_format(&c.x, x, dt, fmt, xs);
        gradref_tensor_init_format(&c.dy, y, dt, fmt, ys);
        gradref_tensor_init(&c.dw, w, dt, 5, ws);
        if (gradref_conv3d_backprop_filter_workspace_size(&c.params, &c.x, &c.dy, &c.dw,
                                                          &c.workspace_bytes) == GRADREF_OK &&
            c.workspace_bytes > 0)
            c.workspace = malloc(c.workspace_bytes);
        if (problem_get(p, "tinyws", 0)) /* a workspace too small: the no-workspace path */
            c.workspace_bytes = 1;
        pc.channels_last = fmt == GRADREF_FORMAT_NDHWC;
        peer_onednn *peer = dt == GRADREF_F32
                                ? peer_onednn_conv_bwd_weights(&pc, threads, bench_onednn_plain)
                                : NULL;
        rc = time_with_peer(p, c3f_once, &c, peer, threads, repeats, t);
        TIME_NULL_WORKSPACE(c, c3f_once, threads, repeats, t);
        t->work = 2.0 * (double)(pc.N * C_out * pc.ICpg * taps * opix);
        t->unit = "GFLOP/s";
        t->unit_scale = 1e-9;
    }
    free(x);
    free(y);
    free(w);
    return rc;
}
