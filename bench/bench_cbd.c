/* SPDX-License-Identifier: Apache-2.0 */
/* gradref-bench: conv_backprop_data. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_ops.h"

typedef struct cbd_ctx {
    gradref_conv_params params;
    gradref_tensor filter, diff, grad;
    void *workspace;
    size_t workspace_bytes;
    int32_t precision;
    int qs8; /* the QuantizedS8 call (I8 in and out) */
} cbd_ctx;

static const gradref_qs8_scales QS8_SCALES = {0.02f, 0.02f, 0.05f};

static gradref_status cbd_once(void *arg, int threads) {
    cbd_ctx *c = arg;
    gradref_exec exec = {c->workspace, c->workspace_bytes, threads, c->precision};
    if (c->qs8) {
        return gradref_conv_backprop_data_qs8(&c->params, &QS8_SCALES, &c->filter, &c->diff,
                                              &c->grad, &exec);
    }
    return gradref_conv_backprop_data(&c->params, &c->filter, &c->diff, &c->grad, &exec);
}

/* conv_backprop_data N IC OC [G] [D] H W K S [SD] P [dil] [prec] [qs8] [tinyws1] dtype nchw|nhwc
 * (qs8: the QuantizedS8 call on i8; tinyws1: a 1-byte workspace): a 2-D convolution (3-D
 * with a D key) with a K^rank kernel, stride S (depth SD when given), pads P on both sides, of
 * an (N, IC, [D,] H, W) input; diff is its output's gradient. Work: 2 N IC (OC/G) K^rank O
 * flops. */
int bench_cbd(const problem *p, int threads, int repeats, timing *t) {
    peer_conv pc;
    memset(&pc, 0, sizeof pc);
    const int64_t depth = problem_get(p, "D", 0);
    pc.rank = depth > 0 ? 3 : 2;
    pc.N = problem_get(p, "N", 1);
    pc.G = problem_get(p, "G", 1);
    pc.ICpg = problem_get(p, "IC", 1) / pc.G;
    pc.OCpg = problem_get(p, "OC", 1) / pc.G;
    const int64_t sizes[3] = {depth, problem_get(p, "H", 1), problem_get(p, "W", 1)};
    int64_t taps = 1, opix = 1;
    for (int j = 0; j < pc.rank; j++) {
        pc.I[j] = sizes[3 - pc.rank + j];
        pc.K[j] = problem_get(p, "K", 1);
        pc.stride[j] = problem_get(p, "S", 1);
        if (pc.rank == 3 && j == 0) pc.stride[j] = problem_get(p, "SD", pc.stride[j]);
        pc.dil[j] = problem_get(p, "dil", 1);
        pc.pad_begin[j] = pc.pad_end[j] = problem_get(p, "P", 0);
        pc.O[j] =
            (pc.I[j] + 2 * pc.pad_begin[j] - pc.dil[j] * (pc.K[j] - 1) - 1) / pc.stride[j] + 1;
        taps *= pc.K[j];
        opix *= pc.O[j];
    }
    const gradref_dtype dt = p->dtype;
    const int qs8 = problem_get(p, "qs", 0) == 8;
    /* I8 gives I32 sums unless the QuantizedS8 call requantises them */
    const gradref_dtype gdt = dt == GRADREF_I8 && !qs8 ? GRADREF_I32 : dt;
    const size_t esz = bench_dtype_size(dt), gsz = bench_dtype_size(gdt);
    const int nhwc = strcmp(p->mode, "nhwc") == 0;
    const int64_t C_in = pc.G * pc.ICpg, C_out = pc.G * pc.OCpg;
    int64_t ipix = 1;
    for (int j = 0; j < pc.rank; j++)
        ipix *= pc.I[j];
    const int64_t fn = C_out * pc.ICpg * taps, dn = pc.N * C_out * opix, gn = pc.N * C_in * ipix;
    char *f = tensor_alloc((size_t)fn * esz), *d = tensor_alloc((size_t)dn * esz),
         *g = tensor_alloc((size_t)gn * gsz);
    int rc = 1;
    if (f && d && g) {
        fill_values(dt, f, fn, 1);
        fill_values(dt, d, dn, 2);
        cbd_ctx c;
        memset(&c, 0, sizeof c);
        c.precision = (int32_t)problem_get(p, "prec", GRADREF_PRECISION_DEFAULT);
        c.qs8 = qs8;
        c.params.groups = (int32_t)pc.G;
        for (int j = 0; j < pc.rank; j++) {
            c.params.stride[j] = pc.stride[j];
            c.params.dilation[j] = pc.dil[j];
            c.params.pad[2 * j] = pc.pad_begin[j];
            c.params.pad[2 * j + 1] = pc.pad_end[j];
        }
        int64_t fs[5] = {C_out, pc.ICpg, pc.K[0], pc.K[1], pc.K[2]};
        int64_t ds[5] = {pc.N, C_out, pc.O[0], pc.O[1], pc.O[2]};
        int64_t gs[5] = {pc.N, C_in, pc.I[0], pc.I[1], pc.I[2]};
        gradref_tensor_init(&c.filter, f, dt, pc.rank + 2, fs);
        if (pc.rank == 2 && nhwc) {
            gradref_tensor_init_format(&c.diff, d, dt, GRADREF_FORMAT_NHWC, ds);
            gradref_tensor_init_format(&c.grad, g, gdt, GRADREF_FORMAT_NHWC, gs);
        } else if (pc.rank == 3 && nhwc) {
            gradref_tensor_init_format(&c.diff, d, dt, GRADREF_FORMAT_NDHWC, ds);
            gradref_tensor_init_format(&c.grad, g, gdt, GRADREF_FORMAT_NDHWC, gs);
        } else {
            gradref_tensor_init(&c.diff, d, dt, pc.rank + 2, ds);
            gradref_tensor_init(&c.grad, g, gdt, pc.rank + 2, gs);
        }
        const gradref_status sized =
            qs8 ? gradref_conv_backprop_data_qs8_workspace_size(
                      &c.params, &QS8_SCALES, &c.filter, &c.diff, &c.grad, &c.workspace_bytes)
                : gradref_conv_backprop_data_workspace_size(&c.params, &c.filter, &c.diff, &c.grad,
                                                            &c.workspace_bytes);
        if (sized == GRADREF_OK && c.workspace_bytes > 0) c.workspace = malloc(c.workspace_bytes);
        if (problem_get(p, "tinyws", 0)) /* a workspace too small: the no-workspace path */
            c.workspace_bytes = 1;
        pc.channels_last = nhwc;
        peer_onednn *peer =
            dt == GRADREF_F32 ? peer_onednn_conv_bwd_data(&pc, threads, bench_onednn_plain) : NULL;
        rc = time_with_peer(p, cbd_once, &c, peer, threads, repeats, t);
        TIME_NULL_WORKSPACE(c, cbd_once, threads, repeats, t);
        t->work = 2.0 * (double)(pc.N * C_in * pc.OCpg * taps * opix);
        t->unit = "GFLOP/s";
        t->unit_scale = 1e-9;
    }
    free(f);
    free(d);
    free(g);
    return rc;
}
