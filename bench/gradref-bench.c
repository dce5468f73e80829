/* SPDX-License-Identifier: Apache-2.0 */
/* gradref-bench: times each problem of problems/problems.txt (or the file given) and, in the same
 * run, a plain memory copy of the same number of bytes, so figures from different machines can
 * be read as a fraction of what the memory system gives.
 *
 *   gradref-bench [-t threads] [-r repeats] [-f problems.txt] [--isa portable|avx2|avx512]
 *                 [--onednn-plain] [--csv] [substring]
 *
 * Operators with a workspace are timed twice: with a caller workspace (allocated once, as a
 * training loop would) and with a NULL one (the call allocates it each time: what a caller
 * gets by default). --isa caps gradref's kernels (GRADREF_MAX_ISA) and oneDNN's
 * (ONEDNN_MAX_CPU_ISA) alike: the program runs itself again with both set. oneDNN, the
 * convolutions' peer, works in the memory formats it picks (its fastest setting); with
 * --onednn-plain it takes the operator's layouts instead and its time includes its reorders
 * to and from its own formats (what a caller holding NCHW tensors pays).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "common/convert.h"
#include "common/stream.h"
#include "common/tensor.h"
#include "gradref.h"
#include "peer_onednn.h"

static int onednn_plain; /* --onednn-plain */
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
    double op_seconds, copy_seconds; /* copy_seconds is 0 when no copy baseline was run */
    double bytes_moved;              /* read + written by the operator */
    double work;                     /* compute operators: units of work per call, else 0 */
    const char *unit;                /* "Mpc/s" (million point-channels), "GFLOP/s" */
    double unit_scale;               /* work/second times this gives the unit */
    double peer_seconds;             /* a same-run peer's time (oneDNN), 0 when none */
    double null_ws_seconds;          /* the operator with a NULL workspace */
    size_t workspace_bytes;          /* what its _workspace_size twin reports */
} timing;

/* Runs the operator once; returns its status. */
typedef gradref_status (*op_fn)(void *ctx, int threads);

/* Tensors are 64-byte aligned, as PyTorch's CPU allocator aligns them; free() releases them. */
static void *tensor_alloc(size_t bytes) {
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 1) == 0 ? p : NULL;
}

static void fill_bytes(char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        p[i] = (char)(i * 131u + 7u);
}

/* A block the baseline copies: the operator's own input to its own output, so the copy meets
 * the same cache state as the operator. */
typedef struct copy_pair {
    char *dst;
    const char *src;
    size_t bytes;
} copy_pair;

static void copy_pairs(const copy_pair *pairs, int n, int threads, int streaming) {
    for (int i = 0; i < n; i++)
        parallel_copy(pairs[i].dst, pairs[i].src, pairs[i].bytes, threads, streaming);
}

/* Times fn (after one warm-up call) and, after each call, copies of the operator's inputs onto
 * its outputs (pairs) on the same threads, with streaming stores and by memcpy. The operator and
 * the memcpy both follow a streaming copy (the operator the previous repeat's untimed one), so
 * both meet an output the cache does not hold; the streaming copy follows the operator. */
static int measure(const problem *p, op_fn fn, void *ctx, const copy_pair *pairs, int num_pairs,
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
static double time_alone(op_fn fn, void *ctx, int threads, int repeats) {
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

/* After the timing with the caller's workspace: the same calls with none. */
#define TIME_NULL_WORKSPACE(c, once, threads, repeats, t)                                          \
  do {                                                                                             \
    (t)->workspace_bytes = (c).workspace_bytes;                                                    \
    free((c).workspace);                                                                           \
    (c).workspace = NULL;                                                                          \
    (c).workspace_bytes = 0;                                                                       \
    (t)->null_ws_seconds = time_alone(once, &(c), threads, repeats);                               \
  } while (0)

/* ---- recat ---- */

typedef struct recat_ctx {
    const problem *p;
    gradref_tensor go, out;
} recat_ctx;

static gradref_status recat_once(void *arg, int threads) {
    recat_ctx *c = arg;
    gradref_exec exec = {NULL, 0, threads, GRADREF_PRECISION_DEFAULT};
    if (problem_get(c->p, "D", 0) > 0)
        return gradref_recat_embedding_grad_output(&c->go, c->p->dims, c->p->num_dims, &c->out,
                                                   &exec);
    return gradref_recat_embedding_grad_output_mixed_d(&c->go, c->p->dims, c->p->num_dims, &c->out,
                                                       &exec);
}

static int run_recat(const problem *p, int threads, int repeats, timing *t) {
    int64_t B = problem_get(p, "B", 1), D = problem_get(p, "D", 0), cols = 0;
    int64_t width = D > 0 ? D : 1;
    for (int i = 0; i < p->num_dims; i++)
        cols += p->dims[i] * width;
    size_t esz = gradref__dtype_size(p->dtype), bytes = (size_t)(B * cols) * esz;
    char *src = tensor_alloc(bytes), *dst = tensor_alloc(bytes);
    int rc = 1;
    if (src && dst) {
        fill_bytes(src, bytes);
        memset(dst, 0, bytes);
        recat_ctx c;
        c.p = p;
        int64_t shape3[3] = {B, D > 0 ? cols / width : cols, width}, flat = B * cols;
        gradref_tensor_init(&c.go, src, p->dtype, D > 0 ? 3 : 2, shape3);
        gradref_tensor_init(&c.out, dst, p->dtype, 1, &flat);
        copy_pair pair = {dst, src, bytes};
        rc = measure(p, recat_once, &c, &pair, 1, threads, repeats, t);
    }
    free(src);
    free(dst);
    return rc;
}

/* ---- rope ---- */

/* dst[i] = v in the dtype (rounded to nearest even for the 16-bit ones). */
static void store_value(gradref_dtype dtype, void *dst, int64_t i, float v) {
    if (dtype == GRADREF_F64)
        ((double *)dst)[i] = v;
    else if (dtype == GRADREF_F16)
        ((uint16_t *)dst)[i] = gradref__f32_to_f16(v);
    else if (dtype == GRADREF_BF16)
        ((uint16_t *)dst)[i] = gradref__f32_to_bf16(v);
    else if (dtype == GRADREF_I8)
        ((int8_t *)dst)[i] = (int8_t)(v * 127.0f);
    else
        ((float *)dst)[i] = v;
}

/* Values in [-1, 1) of the dtype: no subnormal, so no slow microcode paths. */
/* Uniform values in [-1, 1) from splitmix64 (consecutive xorshift32 outputs are correlated
 * enough to put grid points on planes, which changes grid_sampler's memory pattern). */
static void fill_values(gradref_dtype dtype, void *dst, int64_t n, unsigned seed) {
    uint64_t state = 0x9e3779b97f4a7c15u * (seed + 1);
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = (state += 0x9e3779b97f4a7c15u);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        z ^= z >> 31;
        float v = (float)(z >> 40) * 0x1p-23f - 1.0f;
        store_value(dtype, dst, i, v);
    }
}

typedef struct rope_ctx {
    gradref_rope_params params;
    gradref_tensor q, k, cos, sin, dq, dk;
} rope_ctx;

static gradref_status rope_once(void *arg, int threads) {
    rope_ctx *c = arg;
    gradref_exec exec = {NULL, 0, threads, GRADREF_PRECISION_DEFAULT};
    return gradref_rope_grad(&c->params, &c->q, &c->k, &c->cos, &c->sin, &c->dq, &c->dk, &exec);
}

/* rope T<tokens> Hq<q width> Hk<k width> D<head_dim> [N<sequences, default 16>] dtype mode:
 * N equal sequences, cos/sin with as many rows as one sequence. */
static int run_rope(const problem *p, int threads, int repeats, timing *t) {
    int64_t T = problem_get(p, "T", 1), Hq = problem_get(p, "Hq", 128),
            Hk = problem_get(p, "Hk", 128);
    int64_t D = problem_get(p, "D", 128), N = problem_get(p, "N", 16);
    if (N < 1 || T % N != 0) {
        fprintf(stderr, "%s: T must be a multiple of N\n", p->text);
        return 1;
    }
    int32_t mode = strcmp(p->mode, "half") == 0          ? GRADREF_ROPE_HALF
                   : strcmp(p->mode, "interleaved") == 0 ? GRADREF_ROPE_INTERLEAVED
                                                         : GRADREF_ROPE_ATB;
    size_t esz = gradref__dtype_size(p->dtype);
    int64_t S = T / N;
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)N);
    char *q = tensor_alloc((size_t)(T * Hq) * esz), *k = tensor_alloc((size_t)(T * Hk) * esz);
    char *dq = tensor_alloc((size_t)(T * Hq) * esz), *dk = tensor_alloc((size_t)(T * Hk) * esz);
    char *cs = tensor_alloc((size_t)(S * D) * esz), *sn = tensor_alloc((size_t)(S * D) * esz);
    int rc = 1;
    if (lens && q && k && dq && dk && cs && sn) {
        for (int64_t i = 0; i < N; i++)
            lens[i] = (int32_t)S;
        fill_values(p->dtype, q, T * Hq, 1);
        fill_values(p->dtype, k, T * Hk, 2);
        fill_values(p->dtype, cs, S * D, 3);
        fill_values(p->dtype, sn, S * D, 4);
        memset(dq, 0, (size_t)(T * Hq) * esz);
        memset(dk, 0, (size_t)(T * Hk) * esz);
        rope_ctx c;
        gradref_rope_params params = {mode, (int32_t)D, 0, (int32_t)N, lens, NULL};
        c.params = params;
        int64_t qs[2] = {T, Hq}, ks[2] = {T, Hk}, ts[2] = {S, D};
        gradref_tensor_init(&c.q, q, p->dtype, 2, qs);
        gradref_tensor_init(&c.k, k, p->dtype, 2, ks);
        gradref_tensor_init(&c.dq, dq, p->dtype, 2, qs);
        gradref_tensor_init(&c.dk, dk, p->dtype, 2, ks);
        gradref_tensor_init(&c.cos, cs, p->dtype, 2, ts);
        gradref_tensor_init(&c.sin, sn, p->dtype, 2, ts);
        copy_pair pairs[2] = {{dq, q, (size_t)(T * Hq) * esz}, {dk, k, (size_t)(T * Hk) * esz}};
        rc = measure(p, rope_once, &c, pairs, 2, threads, repeats, t);
    }
    free(lens);
    free(q);
    free(k);
    free(dq);
    free(dk);
    free(cs);
    free(sn);
    return rc;
}

/* ---- grid_sampler3d_grad ---- */

typedef struct gs3d_ctx {
    gradref_grid_sampler3d_params params;
    gradref_tensor grad, x, grid, dx, dgrid;
    void *workspace;
    size_t workspace_bytes;
} gs3d_ctx;

static gradref_status gs3d_once(void *arg, int threads) {
    gs3d_ctx *c = arg;
    gradref_exec exec = {c->workspace, c->workspace_bytes, threads, GRADREF_PRECISION_DEFAULT};
    return gradref_grid_sampler3d_grad(&c->params, &c->grad, &c->x, &c->grid, &c->dx, &c->dgrid,
                                       &exec);
}

/* A smooth grid, as spatial transformers and image registration sample: the identity plus a
 * displacement of a few voxels that varies slowly over the volume. */
static void fill_smooth_grid(gradref_dtype dtype, void *dst, int64_t N, int64_t D, int64_t H,
                             int64_t W) {
    int64_t i = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t z = 0; z < D; z++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t x = 0; x < W; x++) {
                    const double at[3] = {(double)x / (double)(W > 1 ? W - 1 : 1),
                                          (double)y / (double)(H > 1 ? H - 1 : 1),
                                          (double)z / (double)(D > 1 ? D - 1 : 1)};
                    for (int k = 0; k < 3; k++, i++) {
                        const double shift = 0.04 * sin(6.0 * at[(k + 1) % 3] + (double)n + k);
                        const float v = (float)(2.0 * at[k] - 1.0 + shift);
                        store_value(dtype, dst, i, v);
                    }
                }
}

/* grid_sampler3d_grad N C D H W [Do Ho Wo, default D H W] interp pad ac [smooth1] dtype
 * ncdhw|ndhwc: grid uniform in [-1, 1], or smooth (fill_smooth_grid); both outputs. Work:
 * N*C*Do*Ho*Wo point-channels. The workspace is allocated once, as a training loop would
 * (docs/api.md). */
static int run_gs3d(const problem *p, int threads, int repeats, timing *t) {
    const int64_t N = problem_get(p, "N", 1), C = problem_get(p, "C", 1);
    const int64_t D = problem_get(p, "D", 1), H = problem_get(p, "H", 1),
                  W = problem_get(p, "W", 1);
    const int64_t Do = problem_get(p, "Do", D), Ho = problem_get(p, "Ho", H),
                  Wo = problem_get(p, "Wo", W);
    const gradref_format fmt =
        strcmp(p->mode, "ndhwc") == 0 ? GRADREF_FORMAT_NDHWC : GRADREF_FORMAT_NCDHW;
    const size_t esz = gradref__dtype_size(p->dtype);
    const int64_t xn = N * C * D * H * W, gn = N * C * Do * Ho * Wo, grn = N * Do * Ho * Wo * 3;
    char *x = tensor_alloc((size_t)xn * esz), *dx = tensor_alloc((size_t)xn * esz);
    char *g = tensor_alloc((size_t)gn * esz), *grid = tensor_alloc((size_t)grn * esz),
         *dgrid = tensor_alloc((size_t)grn * esz);
    int rc = 1;
    if (x && dx && g && grid && dgrid) {
        fill_values(p->dtype, x, xn, 1);
        fill_values(p->dtype, g, gn, 2);
        if (problem_get(p, "smooth", 0))
            fill_smooth_grid(p->dtype, grid, N, Do, Ho, Wo);
        else
            fill_values(p->dtype, grid, grn, 3);
        gs3d_ctx c;
        gradref_grid_sampler3d_params params = {(int32_t)problem_get(p, "interp", 0),
                                                (int32_t)problem_get(p, "pad", 0),
                                                (int32_t)problem_get(p, "ac", 0)};
        c.params = params;
        const int64_t xs[5] = {N, C, D, H, W}, gs[5] = {N, C, Do, Ho, Wo},
                      grs[5] = {N, Do, Ho, Wo, 3};
        gradref_tensor_init_format(&c.x, x, p->dtype, fmt, xs);
        gradref_tensor_init_format(&c.dx, dx, p->dtype, fmt, xs);
        gradref_tensor_init_format(&c.grad, g, p->dtype, fmt, gs);
        gradref_tensor_init(&c.grid, grid, p->dtype, 5, grs);
        gradref_tensor_init(&c.dgrid, dgrid, p->dtype, 5, grs);
        c.workspace = NULL;
        c.workspace_bytes = 0;
        if (gradref_grid_sampler3d_grad_workspace_size(&c.params, &c.grad, &c.x, &c.grid, &c.dx,
                                                       &c.dgrid,
                                                       &c.workspace_bytes) == GRADREF_OK &&
            c.workspace_bytes > 0)
            c.workspace = malloc(c.workspace_bytes);
        rc = measure(p, gs3d_once, &c, NULL, 0, threads, repeats, t);
        TIME_NULL_WORKSPACE(c, gs3d_once, threads, repeats, t);
        t->work = (double)gn;
        t->unit = "Mpc/s";
        t->unit_scale = 1e-6;
    }
    free(x);
    free(dx);
    free(g);
    free(grid);
    free(dgrid);
    return rc;
}

/* Times `once` and the oneDNN peer alternately (so drifts of the machine hit both alike), a
 * warm-up pair first; medians into t. Frees the peer. */
static int time_with_peer(const problem *p, op_fn once, void *ctx, peer_onednn *peer, int threads,
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

/* ---- conv_backprop_data ---- */

typedef struct cbd_ctx {
    gradref_conv_params params;
    gradref_tensor filter, diff, grad;
    void *workspace;
    size_t workspace_bytes;
    int32_t precision;
    int qs8; /* the QuantizedS8 call (I8 in and out) */
} cbd_ctx;

static gradref_status cbd_once(void *arg, int threads) {
    cbd_ctx *c = arg;
    gradref_exec exec = {c->workspace, c->workspace_bytes, threads, c->precision};
    if (c->qs8) {
        const gradref_qs8_scales scales = {0.02f, 0.02f, 0.05f};
        return gradref_conv_backprop_data_qs8(&c->params, &scales, &c->filter, &c->diff, &c->grad,
                                              &exec);
    }
    return gradref_conv_backprop_data(&c->params, &c->filter, &c->diff, &c->grad, &exec);
}

/* conv_backprop_data N IC OC [G] [D] H W K S P [dil] [prec] [qs8] [tinyws1] dtype nchw|nhwc (qs8:
 * the QuantizedS8 call on i8; tinyws1: a 1-byte workspace): a 2-D convolution (3-D
 * with a D key) with a K^rank kernel, stride S, pads P on both sides, of an (N, IC, [D,] H, W)
 * input; diff is its output's gradient. Work: 2 N IC (OC/G) K^rank O flops. */
static int run_cbd(const problem *p, int threads, int repeats, timing *t) {
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
        pc.dil[j] = problem_get(p, "dil", 1);
        pc.pad_begin[j] = pc.pad_end[j] = problem_get(p, "P", 0);
        pc.O[j] =
            (pc.I[j] + 2 * pc.pad_begin[j] - pc.dil[j] * (pc.K[j] - 1) - 1) / pc.stride[j] + 1;
        taps *= pc.K[j];
        opix *= pc.O[j];
    }
    const gradref_dtype dt = p->dtype;
    const size_t esz = gradref__dtype_size(dt);
    const int nhwc = strcmp(p->mode, "nhwc") == 0;
    const int64_t C_in = pc.G * pc.ICpg, C_out = pc.G * pc.OCpg;
    int64_t ipix = 1;
    for (int j = 0; j < pc.rank; j++)
        ipix *= pc.I[j];
    const int64_t fn = C_out * pc.ICpg * taps, dn = pc.N * C_out * opix, gn = pc.N * C_in * ipix;
    char *f = tensor_alloc((size_t)fn * esz), *d = tensor_alloc((size_t)dn * esz),
         *g = tensor_alloc((size_t)gn * esz);
    int rc = 1;
    if (f && d && g) {
        fill_values(dt, f, fn, 1);
        fill_values(dt, d, dn, 2);
        cbd_ctx c;
        memset(&c, 0, sizeof c);
        c.precision = (int32_t)problem_get(p, "prec", GRADREF_PRECISION_DEFAULT);
        c.qs8 = problem_get(p, "qs", 0) == 8;
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
            gradref_tensor_init_format(&c.grad, g, dt, GRADREF_FORMAT_NHWC, gs);
        } else if (pc.rank == 3 && nhwc) {
            gradref_tensor_init_format(&c.diff, d, dt, GRADREF_FORMAT_NDHWC, ds);
            gradref_tensor_init_format(&c.grad, g, dt, GRADREF_FORMAT_NDHWC, gs);
        } else {
            gradref_tensor_init(&c.diff, d, dt, pc.rank + 2, ds);
            gradref_tensor_init(&c.grad, g, dt, pc.rank + 2, gs);
        }
        if (gradref_conv_backprop_data_workspace_size(&c.params, &c.filter, &c.diff, &c.grad,
                                                      &c.workspace_bytes) == GRADREF_OK &&
            c.workspace_bytes > 0)
            c.workspace = malloc(c.workspace_bytes);
        if (problem_get(p, "tinyws", 0)) /* a workspace too small: the no-workspace path */
            c.workspace_bytes = 1;
        pc.channels_last = nhwc;
        peer_onednn *peer =
            dt == GRADREF_F32 ? peer_onednn_conv_bwd_data(&pc, threads, onednn_plain) : NULL;
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

/* ---- conv3d_backprop_filter ---- */

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

/* conv3d_backprop_filter N IC OC [G] D H W K [KD] S P [PD] [prec] dtype ncdhw|ndhwc: the weight
 * gradient of a 3-D convolution with a K^3 kernel (depth KD when given), stride S, pads P on
 * both sides (depth PD), at gradref_precision prec (default 0). Work: 2 N OC (IC/G) taps O
 * flops; oneDNN side by side (at its own f32 precision). */
static int run_c3f(const problem *p, int threads, int repeats, timing *t) {
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
    const size_t esz = gradref__dtype_size(dt);
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
        pc.channels_last = fmt == GRADREF_FORMAT_NDHWC;
        peer_onednn *peer =
            dt == GRADREF_F32 ? peer_onednn_conv_bwd_weights(&pc, threads, onednn_plain) : NULL;
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

static void usage(void) {
    fprintf(stderr, "usage: gradref-bench [-t threads] [-r repeats] [-f problems.txt] "
                    "[--isa portable|avx2|avx512] [--onednn-plain] [--csv] [substring]\n");
}

/* --isa: runs this program again with GRADREF_MAX_ISA and oneDNN's ONEDNN_MAX_CPU_ISA set
 * (both are read when the libraries load). Returns only on an error. */
static int rerun_with_isa(const char *isa, char **argv) {
    const char *onednn = strcmp(isa, "portable") == 0 ? "SSE41"
                         : strcmp(isa, "avx2") == 0   ? "AVX2"
                         : strcmp(isa, "avx512") == 0 ? "AVX512_CORE"
                                                      : NULL;
    if (onednn == NULL) {
        fprintf(stderr, "gradref-bench: --isa %s: use portable, avx2 or avx512\n", isa);
        return 2;
    }
    const char *set = getenv("GRADREF_MAX_ISA");
    if (set && strcmp(set, isa) == 0) return 0; /* already the child */
    setenv("GRADREF_MAX_ISA", isa, 1);
    setenv("ONEDNN_MAX_CPU_ISA", onednn, 1);
    execv("/proc/self/exe", argv);
    perror("gradref-bench: execv");
    return 2;
}

/* The CPU's model name (for the CSV's machine column). */
static void cpu_name(char *out, size_t size) {
    snprintf(out, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        v++;
        while (*v == ' ')
            v++;
        snprintf(out, size, "%s", v);
        out[strcspn(out, "\n,")] = 0;
        break;
    }
    fclose(f);
}

static int run_problem(const problem *p, int threads, int repeats, timing *t) {
    if (strcmp(p->op, "recat") == 0) return run_recat(p, threads, repeats, t);
    if (strcmp(p->op, "rope") == 0) return run_rope(p, threads, repeats, t);
    if (strcmp(p->op, "grid_sampler3d_grad") == 0) return run_gs3d(p, threads, repeats, t);
    if (strcmp(p->op, "conv_backprop_data") == 0) return run_cbd(p, threads, repeats, t);
    if (strcmp(p->op, "conv3d_backprop_filter") == 0) return run_c3f(p, threads, repeats, t);
    fprintf(stderr, "gradref-bench: unknown operator '%s'\n", p->op);
    return 1;
}

int main(int argc, char **argv) {
    int threads = 0, repeats = 11, csv = 0;
    const char *path = GRADREF_PROBLEMS, *filter = NULL, *isa = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            repeats = atoi(argv[++i]);
        else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc)
            isa = argv[++i];
        else if (strcmp(argv[i], "--csv") == 0)
            csv = 1;
        else if (strcmp(argv[i], "--onednn-plain") == 0)
            onednn_plain = 1;
        else if (argv[i][0] == '-') {
            usage();
            return 2;
        } else
            filter = argv[i];
    }
    if (isa) {
        const int rc = rerun_with_isa(isa, argv);
        if (rc) return rc;
    }
    if (repeats < 1) repeats = 1;
#ifdef _OPENMP
    if (threads <= 0) threads = omp_get_max_threads();
    /* the workspace twins size per-thread parts for the default thread count: make it -t */
    omp_set_num_threads(threads);
#else
    threads = 1;
#endif
    char err[256], machine[128];
    cpu_name(machine, sizeof machine);
    problem *list;
    int n = problem_load(path, &list, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "gradref-bench: %s\n", err);
        return 2;
    }
    const char *level = isa ? isa : "widest";
    if (csv) {
        printf("machine,isa,threads,operator,problem,ms,ms_null_workspace,workspace_bytes,rate,"
               "unit,baseline,ratio\n");
    } else {
        printf("gradref %s on %s, %d thread(s), ISA %s, median of %d runs\n", gradref_version(),
               machine, threads, level, repeats);
        printf("%-58s %9s %9s %8s %9s %-7s %9s %6s\n", "problem", "ms", "ms NULL", "ws MiB", "rate",
               "unit", "baseline", "ratio");
        printf("(ms NULL: a NULL workspace; baseline: same-run copy GB/s for data movers, "
               "oneDNN for convolutions%s)\n",
               onednn_plain ? " on the operators' layouts, its reorders included" : "");
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        const problem *p = &list[i];
        if (filter && !strstr(p->text, filter)) continue;
        timing t;
        memset(&t, 0, sizeof t);
        if (run_problem(p, threads, repeats, &t)) {
            failed = 1;
            continue;
        }
        if (t.null_ws_seconds == 0) t.null_ws_seconds = t.op_seconds; /* no workspace */
        double rate, base = 0;
        const char *unit;
        if (t.work > 0) { /* compute-bound: a rate, and the same-run peer's when there is one */
            rate = t.work / t.op_seconds * t.unit_scale;
            unit = t.unit;
            if (t.peer_seconds > 0) base = t.work / t.peer_seconds * t.unit_scale;
        } else {
            rate = t.bytes_moved / t.op_seconds * 1e-9;
            unit = "GB/s";
            base = t.bytes_moved / t.copy_seconds * 1e-9;
        }
        if (csv) {
            printf("\"%s\",%s,%d,%s,\"%s\",%.4f,%.4f,%zu,%.4f,%s,%.4f,%.4f\n", machine, level,
                   threads, p->op, p->text, t.op_seconds * 1e3, t.null_ws_seconds * 1e3,
                   t.workspace_bytes, rate, unit, base, base > 0 ? rate / base : 0.0);
        } else if (base > 0) {
            printf("%-58s %9.3f %9.3f %8.1f %9.2f %-7s %9.2f %6.2f\n", p->text, t.op_seconds * 1e3,
                   t.null_ws_seconds * 1e3, (double)t.workspace_bytes / 1048576.0, rate, unit, base,
                   rate / base);
        } else {
            printf("%-58s %9.3f %9.3f %8.1f %9.2f %-7s\n", p->text, t.op_seconds * 1e3,
                   t.null_ws_seconds * 1e3, (double)t.workspace_bytes / 1048576.0, rate, unit);
        }
        fflush(stdout);
    }
    free(list);
    return failed;
}
