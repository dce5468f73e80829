/* SPDX-License-Identifier: Apache-2.0 */
/* Regressions for what fuzzing and hostile callers found (each failed before its fix):
 * thread counts, caller arrays inside outputs, empty convolutions, overflowing channel
 * products, huge strides on dims that address nothing, messages, misaligned data. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#include "common/exec.h"

#define BIG (INT64_C(1) << 40)

static gradref_tensor dense(void *data, int32_t dtype, int32_t ndim, const int64_t *shape) {
    gradref_tensor t;
    assert_int_equal(gradref_tensor_init(&t, data, (gradref_dtype)dtype, ndim, shape), GRADREF_OK);
    return t;
}

/* A descriptor whose strides are all 1 (dense ones would overflow for these empty shapes). */
static gradref_tensor unit_strides(int32_t ndim, const int64_t *shape) {
    gradref_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = GRADREF_F32;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i], t.strides[i] = 1;
    return t;
}

static void fill_floats(float *p, size_t n, uint64_t salt) {
    tu_rng r = tu_rng_make(salt);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(tu_uniform(&r) * 2 - 1);
}

/* ---- 1. thread counts: explicit counts above GRADREF_MAX_THREADS are PARAM, everywhere ---- */

static void test_thread_limit(void **state) {
    (void)state;
    enum { S = 512 };
    float *src = malloc(sizeof(float) * S * S), *dst = malloc(sizeof(float) * S * S);
    assert_non_null(src);
    assert_non_null(dst);
    fill_floats(src, S * S, 1);
    memset(dst, 0xee, sizeof(float) * S * S);
    int64_t shape[2] = {S, S};
    gradref_tensor s = dense(src, GRADREF_F32, 2, shape), d = dense(dst, GRADREF_F32, 2, shape);
    d.strides[0] = 1, d.strides[1] = S; /* a transposing copy, the one that crashed */
    const int32_t bad[4] = {GRADREF_MAX_THREADS + 1, 100000, INT32_MAX, -1};
    for (int i = 0; i < 4; i++) {
        gradref_exec e = {NULL, 0, bad[i], GRADREF_PRECISION_DEFAULT};
        tu_expect_status(gradref_copy(&s, &d, &e), GRADREF_ERR_PARAM, "copy",
                         "exec.num_threads is");
        tu_expect_untouched(dst, sizeof(float) * S * S, 0xee, "dst");
    }
    /* the same rule in every operator: recat, rope_grad and the workspace users */
    int64_t n = (int64_t)S * S, ranks[1] = {S};
    gradref_tensor flat = dense(dst, GRADREF_F32, 1, &n);
    gradref_exec e = {NULL, 0, INT32_MAX, GRADREF_PRECISION_DEFAULT};
    tu_expect_status(gradref_recat_embedding_grad_output_mixed_d(&s, ranks, 1, &flat, &e),
                     GRADREF_ERR_PARAM, "recat_embedding_grad_output_mixed_d",
                     "exec.num_threads is 2147483647, outside 0..1024");
    /* the largest count is accepted */
    e.num_threads = 4;
    assert_int_equal(gradref_copy(&s, &d, &e), GRADREF_OK);
    for (int64_t i = 0; i < S; i++)
        assert_memory_equal(&dst[i * S + 7], &src[7 * S + i], sizeof(float));
    free(src);
    free(dst);
}

#ifdef _OPENMP
#  include <omp.h>
/* An OpenMP default above the limit (OMP_NUM_THREADS=100000) is lowered, not obeyed. */
static void test_default_threads_clamped(void **state) {
    (void)state;
    const int before = omp_get_max_threads();
    omp_set_num_threads(100000);
    assert_int_equal(gradref__default_threads(), GRADREF_MAX_THREADS);
    float src[64], dst[64];
    fill_floats(src, 64, 2);
    int64_t n = 64;
    gradref_tensor s = dense(src, GRADREF_F32, 1, &n), d = dense(dst, GRADREF_F32, 1, &n);
    assert_int_equal(gradref_copy(&s, &d, NULL), GRADREF_OK);
    assert_memory_equal(src, dst, sizeof src);
    omp_set_num_threads(before);
}
#endif

/* ---- 2. caller arrays that an output holds: ALIAS, outputs untouched ---- */

static void test_arrays_inside_outputs(void **state) {
    (void)state;
    /* recat: the rank list inside out */
    float go[2][6];
    fill_floats(&go[0][0], 12, 3);
    int64_t out_buf[6]; /* 12 floats of room, 8-byte aligned for the list */
    memset(out_buf, 0xee, sizeof out_buf);
    int64_t gshape[2] = {2, 6}, n = 12;
    gradref_tensor g = dense(go, GRADREF_F32, 2, gshape), o = dense(out_buf, GRADREF_F32, 1, &n);
    int64_t *list = &out_buf[4];
    list[0] = 2, list[1] = 4;
    tu_expect_status(gradref_recat_embedding_grad_output_mixed_d(&g, list, 2, &o, NULL),
                     GRADREF_ERR_ALIAS, "recat_embedding_grad_output_mixed_d",
                     "out overlaps dim_sum_per_rank");
    assert_int_equal(list[0], 2);
    assert_int_equal(list[1], 4);
    int64_t g3shape[3] = {2, 3, 2};
    gradref_tensor g3 = dense(go, GRADREF_F32, 3, g3shape);
    list[0] = 1, list[1] = 2;
    tu_expect_status(gradref_recat_embedding_grad_output(&g3, list, 2, &o, NULL), GRADREF_ERR_ALIAS,
                     "recat_embedding_grad_output", "num_features_per_rank");

    /* rope_grad: start_positions inside q_grad, seq_lens inside k_grad (HALF mode, F32) */
    enum { T = 4, D = 8 };
    float q[T][D], k[T][D], cs[T + 4][D], sn[T + 4][D];
    int64_t qg[T * D / 2], kg[T * D / 2]; /* F32 storage, 8-byte aligned */
    fill_floats(&q[0][0], T * D, 4);
    fill_floats(&k[0][0], T * D, 5);
    fill_floats(&cs[0][0], (T + 4) * D, 6);
    fill_floats(&sn[0][0], (T + 4) * D, 7);
    int64_t qs[2] = {T, D}, css[2] = {T + 4, D};
    gradref_tensor tq = dense(q, GRADREF_F32, 2, qs), tk = dense(k, GRADREF_F32, 2, qs);
    gradref_tensor tc = dense(cs, GRADREF_F32, 2, css), ts = dense(sn, GRADREF_F32, 2, css);
    gradref_tensor tqg = dense(qg, GRADREF_F32, 2, qs), tkg = dense(kg, GRADREF_F32, 2, qs);
    int32_t lens[2] = {1, 3};
    gradref_rope_params p = {GRADREF_ROPE_HALF, D, 0, 2, lens, &qg[3]};
    qg[3] = 4, qg[4] = 0;
    memset(kg, 0xee, sizeof kg);
    tu_expect_status(gradref_rope_grad(&p, &tq, &tk, &tc, &ts, &tqg, &tkg, NULL), GRADREF_ERR_ALIAS,
                     "rope_grad", "q_grad overlaps p.start_positions");
    assert_int_equal(qg[3], 4);
    tu_expect_untouched(kg, sizeof kg, 0xee, "k_grad");
    int32_t *lens_in_k = (int32_t *)&kg[2];
    lens_in_k[0] = 1, lens_in_k[1] = 3;
    p.seq_lens = lens_in_k;
    p.start_positions = NULL;
    tu_expect_status(gradref_rope_grad(&p, &tq, &tk, &tc, &ts, &tqg, &tkg, NULL), GRADREF_ERR_ALIAS,
                     "rope_grad", "k_grad overlaps p.seq_lens");
    assert_int_equal(lens_in_k[1], 3);
    /* outside the outputs the same arrays are fine */
    p.seq_lens = lens;
    assert_int_equal(gradref_rope_grad(&p, &tq, &tk, &tc, &ts, &tqg, &tkg, NULL), GRADREF_OK);
}

/* ---- 3. empty convolutions need no workspace and allocate nothing ---- */

static void test_empty_convolutions(void **state) {
    (void)state;
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    for (int j = 0; j < 3; j++)
        p.stride[j] = p.dilation[j] = 1;
    int64_t fs[3] = {BIG, 0, 1}, ds[3] = {0, BIG, 1}, gs[3] = {0, 0, 1};
    gradref_tensor f = dense(NULL, GRADREF_F32, 3, fs), d = dense(NULL, GRADREF_F32, 3, ds),
                   g = dense(NULL, GRADREF_F32, 3, gs);
    size_t bytes = 1;
    assert_int_equal(gradref_conv_backprop_data_workspace_size(&p, &f, &d, &g, &bytes), GRADREF_OK);
    assert_int_equal(bytes, 0);
    assert_int_equal(gradref_conv_backprop_data(&p, &f, &d, &g, NULL), GRADREF_OK);
    char none;
    gradref_exec tiny = {&none, 0, 0, GRADREF_PRECISION_HIGH}; /* a 0-byte workspace suffices */
    assert_int_equal(gradref_conv_backprop_data(&p, &f, &d, &g, &tiny), GRADREF_OK);

    /* grad with elements but nothing reaching it (OC = 0): zero-filled, no workspace */
    float grad[2 * 3 * 5];
    memset(grad, 0xee, sizeof grad);
    int64_t f0[3] = {0, 3, 2}, d0[3] = {2, 0, 4}, g0[3] = {2, 3, 5};
    f = dense(NULL, GRADREF_F32, 3, f0), d = dense(NULL, GRADREF_F32, 3, d0);
    g = dense(grad, GRADREF_F32, 3, g0);
    assert_int_equal(gradref_conv_backprop_data_workspace_size(&p, &f, &d, &g, &bytes), GRADREF_OK);
    assert_int_equal(bytes, 0);
    assert_int_equal(gradref_conv_backprop_data(&p, &f, &d, &g, &tiny), GRADREF_OK);
    for (int i = 0; i < 30; i++)
        assert_true(grad[i] == 0.0f && !signbit(grad[i]));

    /* conv3d_backprop_filter: x with no rows (every tap is padding): dw = +0, x.data NULL */
    p.pad[0] = p.pad[1] = 1;
    float dy[1 * 2 * 2] = {1.5f, -2.0f, 0.5f, 4.0f}, dw[2 * 3];
    memset(dw, 0xee, sizeof dw);
    int64_t xs[5] = {1, 3, 0, 1, 1}, ys[5] = {1, 2, 2, 1, 1}, ws[5] = {2, 3, 1, 1, 1};
    gradref_tensor x = dense(NULL, GRADREF_F32, 5, xs), y = dense(dy, GRADREF_F32, 5, ys),
                   w = dense(dw, GRADREF_F32, 5, ws);
    assert_int_equal(gradref_conv3d_backprop_filter_workspace_size(&p, &x, &y, &w, &bytes),
                     GRADREF_OK);
    assert_int_equal(bytes, 0);
    assert_int_equal(gradref_conv3d_backprop_filter(&p, &x, &y, &w, &tiny), GRADREF_OK);
    for (int i = 0; i < 6; i++)
        assert_true(dw[i] == 0.0f && !signbit(dw[i]));
}

/* ---- 4. products of caller sizes are overflow-checked ---- */

static void test_channel_products(void **state) {
    (void)state;
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    for (int j = 0; j < 3; j++)
        p.stride[j] = p.dilation[j] = 1;
    /* grouped filter (G, OC/G, IC/G, k) = (2^33, 2^33, 0, 1): G x OC/G wrapped to 0 */
    int64_t fs[4] = {INT64_C(1) << 33, INT64_C(1) << 33, 0, 1}, ds[3] = {1, 0, 1},
            gs[3] = {1, 0, 1};
    gradref_tensor f = unit_strides(4, fs), d = dense(NULL, GRADREF_F32, 3, ds),
                   g = dense(NULL, GRADREF_F32, 3, gs);
    tu_expect_status(gradref_conv_backprop_data(&p, &f, &d, &g, NULL), GRADREF_ERR_SHAPE,
                     "conv_backprop_data", "beyond int64");
    size_t bytes;
    tu_expect_status(gradref_conv_backprop_data_workspace_size(&p, &f, &d, &g, &bytes),
                     GRADREF_ERR_SHAPE, "conv_backprop_data", "groups x OC/G");
    /* conv3d_backprop_filter: groups x Cin/G */
    p.groups = 1 << 30;
    int64_t xs[5] = {1, 0, 1, 1, 1}, ys[5] = {1, 0, 1, 1, 1},
            ws[5] = {0, INT64_C(1) << 34, 1, 1, 1};
    gradref_tensor x = dense(NULL, GRADREF_F32, 5, xs), y = dense(NULL, GRADREF_F32, 5, ys),
                   w = unit_strides(5, ws);
    tu_expect_status(gradref_conv3d_backprop_filter(&p, &x, &y, &w, NULL), GRADREF_ERR_SHAPE,
                     "conv3d_backprop_filter", "beyond int64");
}

/* ---- 5. strides of dims that address nothing may be anything ---- */

/* Runs `call` on tensors whose size-1 dims carry huge strides, and on an empty batch with
 * huge strides everywhere, and compares with the plain layout. */
static void huge_unit_strides(gradref_tensor *t, int ndim) {
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] == 1) t->strides[i] = i % 2 ? INT64_MAX : INT64_MAX / 3;
}

static void test_huge_unit_strides(void **state) {
    (void)state;
    const int64_t huge = INT64_MAX / 3;
    /* grid_sampler3d_grad: N = 1, D = 1, Do = 1 */
    enum { C = 3, H = 4, W = 5, HO = 3, WO = 4 };
    float x[C * H * W], grad[C * HO * WO], grid[HO * WO * 3];
    float dx_a[C * H * W], dx_b[C * H * W], dg_a[HO * WO * 3], dg_b[HO * WO * 3];
    fill_floats(x, C * H * W, 8);
    fill_floats(grad, C * HO * WO, 9);
    fill_floats(grid, HO * WO * 3, 10);
    int64_t xs[5] = {1, C, 1, H, W}, gs[5] = {1, C, 1, HO, WO}, grs[5] = {1, 1, HO, WO, 3};
    gradref_tensor tx = dense(x, GRADREF_F32, 5, xs), tg = dense(grad, GRADREF_F32, 5, gs),
                   tgr = dense(grid, GRADREF_F32, 5, grs), tdx = dense(dx_a, GRADREF_F32, 5, xs),
                   tdg = dense(dg_a, GRADREF_F32, 5, grs);
    gradref_grid_sampler3d_params gp = {GRADREF_INTERP_BILINEAR, GRADREF_PAD_REFLECTION, 0};
    for (int interp = 0; interp < 2; interp++) {
        gp.interpolation = interp;
        assert_int_equal(gradref_grid_sampler3d_grad(&gp, &tg, &tx, &tgr, &tdx, &tdg, NULL),
                         GRADREF_OK);
        gradref_tensor hx = tx, hg = tg, hgr = tgr, hdx = tdx, hdg = tdg;
        hdx.data = dx_b, hdg.data = dg_b;
        huge_unit_strides(&hx, 5), huge_unit_strides(&hg, 5), huge_unit_strides(&hgr, 5);
        huge_unit_strides(&hdx, 5), huge_unit_strides(&hdg, 5);
        assert_int_equal(gradref_grid_sampler3d_grad(&gp, &hg, &hx, &hgr, &hdx, &hdg, NULL),
                         GRADREF_OK);
        assert_memory_equal(dx_a, dx_b, sizeof dx_a);
        assert_memory_equal(dg_a, dg_b, sizeof dg_a);
    }

    /* both convolutions: N = 1, one spatial dim of size 1 */
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    for (int j = 0; j < 3; j++)
        p.stride[j] = p.dilation[j] = 1;
    p.pad[4] = p.pad[5] = 1;
    enum { CI = 4, CO = 3, K = 3, L = 6 };
    float in[CI * L], dout[CO * L], filt[CO * CI * K], gx_a[CI * L], gx_b[CI * L];
    float dw_a[CO * CI * K], dw_b[CO * CI * K];
    fill_floats(in, CI * L, 11);
    fill_floats(dout, CO * L, 12);
    fill_floats(filt, CO * CI * K, 13);
    int64_t is[5] = {1, CI, 1, 1, L}, os[5] = {1, CO, 1, 1, L}, fs[5] = {CO, CI, 1, 1, K};
    gradref_tensor ti = dense(in, GRADREF_F32, 5, is), to = dense(dout, GRADREF_F32, 5, os),
                   tf = dense(filt, GRADREF_F32, 5, fs), tgx = dense(gx_a, GRADREF_F32, 5, is),
                   tdw = dense(dw_a, GRADREF_F32, 5, fs);
    assert_int_equal(gradref_conv_backprop_data(&p, &tf, &to, &tgx, NULL), GRADREF_OK);
    assert_int_equal(gradref_conv3d_backprop_filter(&p, &ti, &to, &tdw, NULL), GRADREF_OK);
    gradref_tensor hi = ti, ho = to, hf = tf, hgx = tgx, hdw = tdw;
    hgx.data = gx_b, hdw.data = dw_b;
    huge_unit_strides(&hi, 5), huge_unit_strides(&ho, 5), huge_unit_strides(&hf, 5);
    huge_unit_strides(&hgx, 5), huge_unit_strides(&hdw, 5);
    assert_int_equal(gradref_conv_backprop_data(&p, &hf, &ho, &hgx, NULL), GRADREF_OK);
    assert_int_equal(gradref_conv3d_backprop_filter(&p, &hi, &ho, &hdw, NULL), GRADREF_OK);
    assert_memory_equal(gx_a, gx_b, sizeof gx_a);
    assert_memory_equal(dw_a, dw_b, sizeof dw_a);

    /* recat: B = 1 */
    float row[6], out_a[6], out_b[6];
    fill_floats(row, 6, 14);
    int64_t rs[2] = {1, 6}, n = 6, split[2] = {2, 4};
    gradref_tensor tr = dense(row, GRADREF_F32, 2, rs), toa = dense(out_a, GRADREF_F32, 1, &n);
    assert_int_equal(gradref_recat_embedding_grad_output_mixed_d(&tr, split, 2, &toa, NULL),
                     GRADREF_OK);
    gradref_tensor hr = tr, hob = dense(out_b, GRADREF_F32, 1, &n);
    hr.strides[0] = huge;
    assert_int_equal(gradref_recat_embedding_grad_output_mixed_d(&hr, split, 2, &hob, NULL),
                     GRADREF_OK);
    assert_memory_equal(out_a, out_b, sizeof out_a);

    /* empty tensors with huge strides everywhere: valid, nothing to do */
    int64_t es[5] = {0, CI, 1, 1, L};
    gradref_tensor ei = dense(NULL, GRADREF_F32, 5, es), edw = dense(dw_b, GRADREF_F32, 5, fs);
    for (int i = 0; i < 5; i++)
        ei.strides[i] = INT64_MAX;
    int64_t eos[5] = {0, CO, 1, 1, L};
    gradref_tensor eo = dense(NULL, GRADREF_F32, 5, eos);
    for (int i = 0; i < 5; i++)
        eo.strides[i] = huge;
    assert_int_equal(gradref_conv3d_backprop_filter(&p, &ei, &eo, &edw, NULL), GRADREF_OK);
    for (int i = 0; i < CO * CI * K; i++)
        assert_true(dw_b[i] == 0.0f);
}

/* ---- 6. messages, NULL data of empty tensors, alignment ---- */

static void test_rope_huge_start(void **state) {
    (void)state;
    float q[2][2] = {{1, 2}, {3, 4}}, cs[2][2] = {{1, 0}, {1, 0}}, out[2][2], kout[2][2];
    int64_t s2[2] = {2, 2};
    gradref_tensor tq = dense(q, GRADREF_F32, 2, s2), tc = dense(cs, GRADREF_F32, 2, s2),
                   to = dense(out, GRADREF_F32, 2, s2), tk = dense(kout, GRADREF_F32, 2, s2);
    int32_t lens[1] = {2};
    int64_t start[1] = {INT64_MAX};
    gradref_rope_params p = {GRADREF_ROPE_HALF, 2, 0, 1, lens, start};
    tu_expect_status(gradref_rope_grad(&p, &tq, &tq, &tc, &tc, &to, &tk, NULL), GRADREF_ERR_PARAM,
                     "rope_grad",
                     "sequence 0 starts at position 9223372036854775807 and has 2 tokens but cos "
                     "and sin have 2 rows");
}

static void test_misaligned_data(void **state) {
    (void)state;
    /* I8 x I8 -> I32 with grad at a 2-byte aligned address */
    int8_t filt[2 * 2 * 1] = {1, 2, 3, 4}, diff[1 * 2 * 3] = {1, -1, 2, 0, 3, 1};
    int32_t room[8];
    memset(room, 0xee, sizeof room);
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    for (int j = 0; j < 3; j++)
        p.stride[j] = p.dilation[j] = 1;
    int64_t fs[3] = {2, 2, 1}, ds[3] = {1, 2, 3};
    gradref_tensor f = dense(filt, GRADREF_I8, 3, fs), d = dense(diff, GRADREF_I8, 3, ds),
                   g = dense((char *)room + 2, GRADREF_I32, 3, ds);
    tu_expect_status(gradref_conv_backprop_data(&p, &f, &d, &g, NULL), GRADREF_ERR_PARAM,
                     "conv_backprop_data", "grad.data");
    tu_expect_untouched(room, sizeof room, 0xee, "grad");
    g.data = room;
    assert_int_equal(gradref_conv_backprop_data(&p, &f, &d, &g, NULL), GRADREF_OK);
    /* an input too, and gradref_copy */
    float src[4] = {1, 2, 3, 4};
    int64_t n = 3;
    gradref_tensor s = dense((char *)src + 1, GRADREF_F32, 1, &n),
                   t = dense(room, GRADREF_F32, 1, &n);
    tu_expect_status(gradref_copy(&s, &t, NULL), GRADREF_ERR_PARAM, "copy",
                     "is not aligned to its 4-byte elements");
    /* an empty tensor's address is never used */
    n = 0;
    s = dense((char *)src + 1, GRADREF_F32, 1, &n), t = dense((char *)room + 1, GRADREF_F32, 1, &n);
    assert_int_equal(gradref_copy(&s, &t, NULL), GRADREF_OK);
}

/* The HF32 precisions are conv3d_backprop_filter's: elsewhere they are PARAM, outputs untouched;
 * an operator without arithmetic ignores them as it ignores the others. */
static void test_device_precision_elsewhere(void **state) {
    (void)state;
    float filt[4] = {1, 2, 3, 4}, diff[6] = {1, -1, 2, 0, 3, 1}, grad[8];
    memset(grad, 0xee, sizeof grad);
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    for (int j = 0; j < 3; j++)
        p.stride[j] = p.dilation[j] = 1;
    int64_t fs[3] = {2, 2, 1}, ds[3] = {1, 2, 3};
    gradref_tensor f = dense(filt, GRADREF_F32, 3, fs), d = dense(diff, GRADREF_F32, 3, ds),
                   g = dense(grad, GRADREF_F32, 3, ds);
    gradref_exec e = {NULL, 0, 1, GRADREF_PRECISION_HF32_910B};
    tu_expect_status(gradref_conv_backprop_data(&p, &f, &d, &g, &e), GRADREF_ERR_PARAM,
                     "conv_backprop_data",
                     "exec.precision is HF32_910B, which conv_backprop_data does not take");
    tu_expect_untouched(grad, sizeof grad, 0xee, "grad");
    e.precision = GRADREF_PRECISION_HF32;
    tu_expect_status(gradref_conv_backprop_data(&p, &f, &d, &g, &e), GRADREF_ERR_PARAM,
                     "conv_backprop_data", "exec.precision is HF32, which conv_backprop_data");
    tu_expect_untouched(grad, sizeof grad, 0xee, "grad");
    /* MegEngine's mode is conv_backprop_data's, not conv3d_backprop_filter's */
    float x5[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dy5[8] = {1, 1, 1, 1, 1, 1, 1, 1}, dw5[1];
    memset(dw5, 0xee, sizeof dw5);
    int64_t xs5[5] = {1, 1, 2, 2, 2}, ws5[5] = {1, 1, 1, 1, 1};
    gradref_tensor tx = dense(x5, GRADREF_F32, 5, xs5), ty = dense(dy5, GRADREF_F32, 5, xs5),
                   tw = dense(dw5, GRADREF_F32, 5, ws5);
    e.precision = GRADREF_PRECISION_MEGENGINE_DEFAULT;
    tu_expect_status(gradref_conv3d_backprop_filter(&p, &tx, &ty, &tw, &e), GRADREF_ERR_PARAM,
                     "conv3d_backprop_filter",
                     "exec.precision is MEGENGINE_DEFAULT, which conv3d_backprop_filter does not "
                     "take");
    tu_expect_untouched(dw5, sizeof dw5, 0xee, "dw");
    e.precision = GRADREF_PRECISION_HF32_910B;
    int64_t n = 6;
    gradref_tensor s = dense(diff, GRADREF_F32, 1, &n), t = dense(grad, GRADREF_F32, 1, &n);
    assert_int_equal(gradref_copy(&s, &t, &e), GRADREF_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_limit),
#ifdef _OPENMP
        cmocka_unit_test(test_default_threads_clamped),
#endif
        cmocka_unit_test(test_arrays_inside_outputs),
        cmocka_unit_test(test_empty_convolutions),
        cmocka_unit_test(test_channel_products),
        cmocka_unit_test(test_huge_unit_strides),
        cmocka_unit_test(test_rope_huge_start),
        cmocka_unit_test(test_misaligned_data),
        cmocka_unit_test(test_device_precision_elsewhere),
    };
    return TU_RUN_GROUP("robustness", tests);
}
