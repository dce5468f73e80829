/* SPDX-License-Identifier: Apache-2.0 */
/* recat: FBGEMM's worked example, the seed's examples, edge cases, every error path, the
 * three variants against each other, the fast path against the reference loop on every dtype
 * and layout (and on every bench problem), and thread invariance. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "test_util.h"

#include "problem.h"
#include "golden.h"
#include "recat/recat_internal.h"

/* ------------------------------------------------------------ helpers */

typedef enum variant { FIXED, MIXED, BATCH } variant;

/* A recat problem with owned buffers: grad_output (B, T, D) — for MIXED/BATCH read as
 * (B, T*D) through a 2-D view — and out. */
typedef struct problem_buf {
    gradref_tensor go3, go2, out;
    void *go_buf, *out_buf;
    size_t out_bytes;
    int64_t ranks[64];
    int32_t num_ranks;
    int64_t width;
} problem_buf;

/* Column widths per rank in elements of the 2-D view. */
static void widths(const problem_buf *p, int64_t *ds, int64_t *cum) {
    int64_t c = 0;
    for (int r = 0; r < p->num_ranks; r++) {
        ds[r] = p->ranks[r] * p->width;
        cum[r] = c;
        c += ds[r];
    }
}

static gradref_status run_variant(problem_buf *p, variant v, const gradref_exec *exec) {
    int64_t ds[64], cum[64];
    widths(p, ds, cum);
    if (v == FIXED)
        return gradref_recat_embedding_grad_output(&p->go3, p->ranks, p->num_ranks, &p->out, exec);
    if (v == MIXED)
        return gradref_recat_embedding_grad_output_mixed_d(&p->go2, ds, p->num_ranks, &p->out,
                                                           exec);
    gradref_tensor dt, ct;
    int64_t w = p->num_ranks;
    gradref_tensor_init(&dt, ds, GRADREF_I64, 1, &w);
    gradref_tensor_init(&ct, cum, GRADREF_I64, 1, &w);
    return gradref_recat_embedding_grad_output_mixed_d_batch(&p->go2, &dt, &ct, &p->out, exec);
}

/* Builds a problem: grad_output laid out contiguously, or (strided) as a slice of a larger
 * buffer with its feature and width dims swapped in memory; out contiguous or with stride 2. */
static void make_problem(problem_buf *p, int32_t dtype, int64_t B, int64_t D, const int64_t *ranks,
                         int32_t num_ranks, int strided, tu_rng *r) {
    memset(p, 0, sizeof *p);
    int64_t T = 0;
    for (int i = 0; i < num_ranks; i++) {
        p->ranks[i] = ranks[i];
        T += ranks[i];
    }
    p->num_ranks = num_ranks;
    p->width = D;
    int64_t shape[3] = {B, T, D};
    int perm[3] = {0, 2, 1};
    int64_t pad[3] = {1, 2, 0};
    p->go_buf = tu_make_tensor(&p->go3, dtype, 3, shape, strided ? perm : NULL,
                               strided ? pad : NULL, NULL, r);
    int64_t n = B * T * D;
    p->out_buf = tu_make_tensor(&p->out, dtype, 1, &n, NULL, NULL, &p->out_bytes, r);
    if (strided) {
        free(p->out_buf);
        p->out_bytes = (size_t)(2 * n + 1) * tu_dtype_size(dtype);
        p->out_buf = malloc(p->out_bytes);
        tu_fill_random(p->out_buf, p->out_bytes, r);
        p->out.data = p->out_buf;
        p->out.strides[0] = 2;
    }
    /* the 2-D (B, T*D) view exists when (t, d) flatten: D == 1 or dense rows */
    p->go2 = p->go3;
    p->go2.ndim = 2;
    p->go2.shape[1] = T * D;
    p->go2.strides[1] = D == 1 ? p->go3.strides[1] : p->go3.strides[2];
    if (D > 1 && p->go3.strides[1] != D * p->go3.strides[2]) p->go2.ndim = 0; /* no such view */
}

static void free_problem(problem_buf *p) {
    free(p->go_buf);
    free(p->out_buf);
}

/* What the upstream test computes: cat over ranks of grad_output[:, C_r : C_r + ds_r] flattened. */
static void expected_bits(const problem_buf *p, unsigned char *want) {
    size_t esz = tu_dtype_size(p->go3.dtype);
    int64_t B = p->go3.shape[0], D = p->width, k = 0, first = 0;
    for (int rk = 0; rk < p->num_ranks; rk++) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = first; t < first + p->ranks[rk]; t++)
                for (int64_t d = 0; d < D; d++, k++) {
                    int64_t idx[3] = {b, t, d};
                    memcpy(want + (size_t)k * esz, (char *)p->go3.data + tu_offset(&p->go3, idx),
                           esz);
                }
        first += p->ranks[rk];
    }
}

static void assert_out_equals(const problem_buf *p, const unsigned char *want) {
    size_t esz = tu_dtype_size(p->out.dtype);
    for (int64_t i = 0; i < p->out.shape[0]; i++)
        if (memcmp((char *)p->out.data + (size_t)(i * p->out.strides[0]) * esz,
                   want + (size_t)i * esz, esz))
            fail_msg("out[%lld] differs", (long long)i);
}

/* ------------------------------------------------------------ known values */

static void test_fbgemm_worked_example(void **state) {
    (void)state;
    /* fbgemm_gpu/test/layout_transform_ops_test.py: B=4, dims [3,5,2], go = arange(40) */
    float go[40], out[40];
    for (int i = 0; i < 40; i++)
        go[i] = (float)i;
    static const float want[40] = {0,  1,  2,  10, 11, 12, 20, 21, 22, 30, 31, 32, 3,  4,
                                   5,  6,  7,  13, 14, 15, 16, 17, 23, 24, 25, 26, 27, 33,
                                   34, 35, 36, 37, 8,  9,  18, 19, 28, 29, 38, 39};
    int64_t dims[3] = {3, 5, 2}, cum[3] = {0, 3, 8}, w = 3, n = 40;
    int64_t s2[2] = {4, 10}, s3[3] = {4, 10, 1};
    gradref_tensor g2, g3, o, dt, ct;
    gradref_tensor_init(&g2, go, GRADREF_F32, 2, s2);
    gradref_tensor_init(&g3, go, GRADREF_F32, 3, s3);
    gradref_tensor_init(&o, out, GRADREF_F32, 1, &n);
    gradref_tensor_init(&dt, dims, GRADREF_I64, 1, &w);
    gradref_tensor_init(&ct, cum, GRADREF_I64, 1, &w);

    memset(out, 0, sizeof out);
    assert_int_equal(gradref_recat_embedding_grad_output_mixed_d(&g2, dims, 3, &o, NULL),
                     GRADREF_OK);
    assert_memory_equal(out, want, sizeof want);
    memset(out, 0, sizeof out);
    assert_int_equal(gradref_recat_embedding_grad_output_mixed_d_batch(&g2, &dt, &ct, &o, NULL),
                     GRADREF_OK);
    assert_memory_equal(out, want, sizeof want);
    memset(out, 0, sizeof out);
    assert_int_equal(gradref_recat_embedding_grad_output(&g3, dims, 3, &o, NULL), GRADREF_OK);
    assert_memory_equal(out, want, sizeof want);
}

static void test_seed_examples(void **state) {
    (void)state;
    /* fixed D: B=2, T=5, D=2, num_features_per_rank [2,3] */
    float go3[20], out[20];
    for (int i = 0; i < 20; i++)
        go3[i] = (float)(i + 1);
    static const float want3[20] = {1, 2, 3, 4,  11, 12, 13, 14, 5,  6,
                                    7, 8, 9, 10, 15, 16, 17, 18, 19, 20};
    int64_t shape3[3] = {2, 5, 2}, n = 20, nf[2] = {2, 3};
    gradref_tensor g, o;
    gradref_tensor_init(&g, go3, GRADREF_F32, 3, shape3);
    gradref_tensor_init(&o, out, GRADREF_F32, 1, &n);
    assert_int_equal(gradref_recat_embedding_grad_output(&g, nf, 2, &o, NULL), GRADREF_OK);
    assert_memory_equal(out, want3, sizeof want3);

    /* mixed D: B=2, sumD=5, dim_sum_per_rank [2,3] */
    float go2[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, out2[10];
    static const float want2[10] = {1, 2, 6, 7, 3, 4, 5, 8, 9, 10};
    int64_t shape2[2] = {2, 5}, n2 = 10, ds[2] = {2, 3}, cum[2] = {0, 2}, w = 2;
    gradref_tensor g2, o2, dt, ct;
    gradref_tensor_init(&g2, go2, GRADREF_F32, 2, shape2);
    gradref_tensor_init(&o2, out2, GRADREF_F32, 1, &n2);
    gradref_tensor_init(&dt, ds, GRADREF_I64, 1, &w);
    gradref_tensor_init(&ct, cum, GRADREF_I64, 1, &w);
    assert_int_equal(gradref_recat_embedding_grad_output_mixed_d(&g2, ds, 2, &o2, NULL),
                     GRADREF_OK);
    assert_memory_equal(out2, want2, sizeof want2);
    memset(out2, 0, sizeof out2);
    assert_int_equal(gradref_recat_embedding_grad_output_mixed_d_batch(&g2, &dt, &ct, &o2, NULL),
                     GRADREF_OK);
    assert_memory_equal(out2, want2, sizeof want2);
}

static int32_t dtype_from_name(const char *s) {
    static const char *names[] = {"f32", "f64", "f16", "bf16", "i8", "i32", "i64"};
    for (int32_t d = 0; d < 7; d++)
        if (strcmp(s, names[d]) == 0) return d;
    fail_msg("unknown dtype '%s'", s);
    return -1;
}

/* Fixtures from PyTorch's split+cat (tests/golden/generate.py): f16/bf16/f32 special bit
 * patterns (NaN payloads, signalling NaNs, -0, subnormals, inf) through every variant. */
static void test_golden_pytorch(void **state) {
    (void)state;
    int count;
    golden_case *cases = golden_load(GRADREF_GOLDEN_DIR "/recat.txt", &count);
    assert_true(count >= 3);
    for (int c = 0; c < count; c++) {
        const golden_case *g = &cases[c];
        int32_t dtype = dtype_from_name(golden_get(g, "dtype"));
        size_t esz = tu_dtype_size(dtype);
        int64_t shape[3], split[64], cum[64];
        int nd = golden_ints(g, "shape", shape, 3), w = golden_ints(g, "split", split, 64);
        int64_t numel = 1;
        for (int i = 0; i < nd; i++)
            numel *= shape[i];
        unsigned char *in = malloc((size_t)numel * esz), *want = malloc((size_t)numel * esz),
                      *out = calloc((size_t)numel, esz);
        assert_int_equal(golden_bits(g, "input", in, esz, (size_t)numel), numel);
        assert_int_equal(golden_bits(g, "expected", want, esz, (size_t)numel), numel);
        gradref_tensor go, o, dt, ct;
        int64_t w64 = w;
        gradref_tensor_init(&go, in, dtype, nd, shape);
        gradref_tensor_init(&o, out, dtype, 1, &numel);
        const char *variant = golden_get(g, "variant");
        gradref_status s;
        if (strcmp(variant, "fixed") == 0) {
            s = gradref_recat_embedding_grad_output(&go, split, w, &o, NULL);
        } else if (strcmp(variant, "mixed") == 0) {
            s = gradref_recat_embedding_grad_output_mixed_d(&go, split, w, &o, NULL);
        } else {
            for (int r = 0, acc = 0; r < w; acc += (int)split[r], r++)
                cum[r] = acc;
            gradref_tensor_init(&dt, split, GRADREF_I64, 1, &w64);
            gradref_tensor_init(&ct, cum, GRADREF_I64, 1, &w64);
            s = gradref_recat_embedding_grad_output_mixed_d_batch(&go, &dt, &ct, &o, NULL);
        }
        if (s != GRADREF_OK) fail_msg("%s: %s", g->name, gradref_last_error());
        if (memcmp(out, want, (size_t)numel * esz) != 0)
            fail_msg("%s differs from PyTorch", g->name);
        free(in);
        free(want);
        free(out);
    }
    golden_free(cases, count);
}

/* Edge cases, each through all three variants against the upstream split+cat formula. */
static void test_edge_cases(void **state) {
    (void)state;
    static const struct {
        int64_t B, D;
        int32_t num_ranks;
        int64_t ranks[5];
    } cases[] = {
        {3, 2, 3, {0, 2, 1}}, /* empty rank first */
        {3, 2, 3, {2, 0, 1}}, /* empty rank in the middle */
        {3, 2, 3, {1, 2, 0}}, /* empty rank last */
        {4, 3, 1, {5}},       /* one rank: a flatten */
        {1, 4, 2, {1, 2}},    /* B = 1 */
        {0, 2, 2, {1, 2}},    /* B = 0 */
        {3, 2, 2, {0, 0}},    /* row width 0 */
        {3, 0, 2, {1, 2}},    /* D = 0 */
        {2, 1, 5, {0, 0, 3, 0, 0}},
    };
    tu_rng r = tu_rng_make(10);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int strided = 0; strided < 2; strided++)
            for (int v = FIXED; v <= BATCH; v++) {
                problem_buf p;
                make_problem(&p, GRADREF_F32, cases[c].B, cases[c].D, cases[c].ranks,
                             cases[c].num_ranks, strided, &r);
                if (v != FIXED && p.go2.ndim == 0) {
                    free_problem(&p);
                    continue;
                }
                size_t n = (size_t)p.out.shape[0] * 4;
                unsigned char *want = malloc(n + 1);
                expected_bits(&p, want);
                assert_int_equal(run_variant(&p, (variant)v, NULL), GRADREF_OK);
                assert_out_equals(&p, want);
                free(want);
                free_problem(&p);
            }
}

/* ------------------------------------------------------------ reference vs fast, variants */

static gradref__recat_plan plan_of(const problem_buf *p) {
    gradref__recat_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.in_dtype = p->go3.dtype;
    plan.out_dtype = p->out.dtype;
    plan.src = p->go3.data;
    plan.dst = p->out.data;
    plan.elem_size = tu_dtype_size(p->go3.dtype);
    plan.batch = p->go3.shape[0];
    plan.features = p->go3.shape[1];
    plan.width = p->go3.shape[2];
    for (int i = 0; i < 3; i++)
        plan.src_stride[i] = p->go3.strides[i];
    plan.dst_stride = p->out.strides[0];
    plan.num_ranks = p->num_ranks;
    plan.rank_features = p->ranks;
    plan.rank_features_stride = 1;
    return plan;
}

/* Runs the fast path through every variant and thread count, and the reference loop, on one
 * problem; all outputs (including the bytes between strided elements) must be identical. */
static void check_fast_against_reference(problem_buf *p) {
    unsigned char *ref = malloc(p->out_bytes + 1), *want = malloc((size_t)p->out.shape[0] * 8 + 1);
    memset(p->out_buf, 0xa5, p->out_bytes);
    gradref__recat_plan plan = plan_of(p);
    gradref__recat_ref(&plan);
    memcpy(ref, p->out_buf, p->out_bytes);
    expected_bits(p, want);
    assert_out_equals(p, want);
    int counts[] = TU_THREAD_COUNTS;
    for (int v = FIXED; v <= BATCH; v++) {
        if (v != FIXED && p->go2.ndim == 0) continue;
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            gradref_exec exec = {NULL, 0, counts[k], 0};
            memset(p->out_buf, 0xa5, p->out_bytes);
            assert_int_equal(run_variant(p, (variant)v, &exec), GRADREF_OK);
            if (memcmp(ref, p->out_buf, p->out_bytes) != 0)
                fail_msg("variant %d at %d threads differs from the reference", v, counts[k]);
        }
    }
    free(ref);
    free(want);
}

static void test_fast_matches_reference(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(11);
    for (int iter = 0; iter < 300; iter++) {
        int32_t dtype = (int32_t)(iter % 7);
        int64_t B = tu_range(&r, 0, 9), D = tu_range(&r, 1, 40);
        int32_t W = (int32_t)tu_range(&r, 1, 8);
        int64_t ranks[8];
        for (int i = 0; i < W; i++)
            ranks[i] = tu_range(&r, 0, 4) == 0 ? 0 : tu_range(&r, 1, 6);
        problem_buf p;
        make_problem(&p, dtype, B, D, ranks, W, iter % 3 == 1, &r);
        check_fast_against_reference(&p);
        free_problem(&p);
    }
}

/* Large enough that the fast path really runs on several threads, with narrow and wide
 * segments; random bits, so f16/bf16 NaN payloads, -0 and subnormals must survive. */
static void test_threads_bitwise_equal(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(12);
    const int64_t ranks[6] = {3, 0, 17, 1, 64, 5};
    for (int32_t dtype = 0; dtype < 7; dtype++)
        for (int strided = 0; strided < 2; strided++) {
            problem_buf p;
            make_problem(&p, dtype, 1500, dtype == GRADREF_I8 ? 4 : 1, ranks, 6, strided, &r);
            check_fast_against_reference(&p);
            free_problem(&p);
        }
}

/* One streamed recat of B rows over the ranks (floats each) at out offsets of 0-60 bytes from a
 * line, on 1, 2 and 3 threads (thread ends fall inside rows' shared lines), against the
 * split+cat formula. */
static void check_streamed(const int64_t *ranks, int num_ranks, int64_t B) {
    int64_t G = 0;
    for (int r = 0; r < num_ranks; r++)
        G += ranks[r];
    const size_t bytes = (size_t)(B * G) * sizeof(float);
    float *go = malloc(bytes), *want = malloc(bytes);
    char *out_buf = malloc(bytes + 128);
    assert_non_null(go);
    assert_non_null(want);
    assert_non_null(out_buf);
    for (int64_t i = 0; i < B * G; i++)
        go[i] = (float)i;
    size_t o = 0;
    for (int64_t r = 0, first = 0; r < num_ranks; first += ranks[r++])
        for (int64_t b = 0; b < B; b++)
            for (int64_t c = 0; c < ranks[r]; c++)
                want[o++] = go[b * G + first + c];
    const int64_t shape[2] = {B, G}, flat = B * G;
    const int offsets[4] = {0, 4, 20, 60};
    const int counts[] = TU_THREAD_COUNTS;
    for (int k = 0; k < 4; k++) {
        float *out = (float *)(out_buf + (64 - (uintptr_t)out_buf % 64) + offsets[k]);
        gradref_tensor tg, to;
        gradref_tensor_init(&tg, go, GRADREF_F32, 2, shape);
        gradref_tensor_init(&to, out, GRADREF_F32, 1, &flat);
        for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
            gradref_exec exec = {NULL, 0, counts[t], GRADREF_PRECISION_DEFAULT};
            memset(out, 0xa5, bytes);
            assert_int_equal(
                gradref_recat_embedding_grad_output_mixed_d(&tg, ranks, num_ranks, &to, &exec),
                GRADREF_OK);
            if (memcmp(out, want, bytes) != 0)
                fail_msg("B %lld, offset %d at %d threads differs", (long long)B, offsets[k],
                         counts[t]);
        }
    }
    free(go);
    free(want);
    free(out_buf);
}

/* Outputs past the streaming threshold: segments of 12 to 400 bytes, whose lines shared between
 * rows are assembled for the streaming stores; and narrow ranks of 4 to 60 bytes, staged a
 * block of rows at a time and streamed as whole lines, over row blocks that make out's runs
 * whole lines (B a multiple of 64) and that do not. */
static void test_streaming_unaligned(void **state) {
    (void)state;
    const int64_t wide[6] = {17, 0, 40, 3, 100, 16}, narrow[7] = {1, 4, 7, 15, 2, 0, 3};
    check_streamed(wide, 6, 15001);
    check_streamed(narrow, 7, 65536);
    check_streamed(narrow, 7, 65599);
}

static void test_bench_problems(void **state) {
    (void)state;
    problem *list;
    char err[256];
    int n = problem_load(GRADREF_PROBLEMS, &list, err, sizeof err);
    if (n < 0) fail_msg("%s", err);
    tu_rng r = tu_rng_make(13);
    int ran = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(list[i].op, "recat") != 0) continue;
        problem_buf p;
        int64_t B = problem_get(&list[i], "B", 1), D = problem_get(&list[i], "D", 1);
        make_problem(&p, list[i].dtype, B < 37 ? B : 37, D, list[i].dims, list[i].num_dims, 0, &r);
        check_fast_against_reference(&p);
        free_problem(&p);
        ran++;
    }
    assert_true(ran > 0);
    free(list);
}

/* ------------------------------------------------------------ errors */

#define OUT_N 24

typedef struct error_fixture {
    float go[OUT_N];
    float out[OUT_N];
    int64_t ds[3], cum[3], w;
    gradref_tensor go2, go3, o, dt, ct;
} error_fixture;

static void fixture_init(error_fixture *f) {
    for (int i = 0; i < OUT_N; i++) {
        f->go[i] = (float)i;
        f->out[i] = -1.0f;
    }
    int64_t s2[2] = {4, 6}, s3[3] = {4, 3, 2}, n = OUT_N;
    f->ds[0] = 2;
    f->ds[1] = 4;
    f->ds[2] = 0;
    f->cum[0] = 0;
    f->cum[1] = 2;
    f->cum[2] = 6;
    f->w = 3;
    gradref_tensor_init(&f->go2, f->go, GRADREF_F32, 2, s2);
    gradref_tensor_init(&f->go3, f->go, GRADREF_F32, 3, s3);
    gradref_tensor_init(&f->o, f->out, GRADREF_F32, 1, &n);
    gradref_tensor_init(&f->dt, f->ds, GRADREF_I64, 1, &f->w);
    gradref_tensor_init(&f->ct, f->cum, GRADREF_I64, 1, &f->w);
}

static void expect_error(error_fixture *f, gradref_status got, gradref_status want, const char *op,
                         const char *fragment) {
    tu_expect_status(got, want, op, fragment);
    for (int i = 0; i < OUT_N; i++)
        if (f->out[i] != -1.0f) fail_msg("out[%d] was written", i);
}

/* GRADREF_TERM_*: an F64 out of a float grad_output, each element |value| (magnitudes) or 0
 * (counts: a value moved is no rounding); the dtype rules around it, outputs untouched. */
static void test_term_outputs(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(880);
    const int64_t ranks[3] = {2, 1, 3};
    const gradref_exec mag = {NULL, 0, 2, GRADREF_TERM_MAGNITUDES},
                       counts = {NULL, 0, 1, GRADREF_TERM_COUNTS};
    problem_buf p, wide, ints;
    make_problem(&p, GRADREF_F16, 3, 2, ranks, 3, 0, &r);
    make_problem(&wide, GRADREF_F16, 3, 2, ranks, 3, 0, &r);
    make_problem(&ints, GRADREF_I32, 3, 2, ranks, 3, 0, &r);
    memcpy(wide.go_buf, p.go_buf, (size_t)(3 * 6 * 2) * 2);
    for (problem_buf *q = &wide; q != NULL; q = q == &wide ? &ints : NULL) {
        const int64_t n = q->out.shape[0];
        free(q->out_buf);
        q->out_buf = tu_make_tensor(&q->out, GRADREF_F64, 1, &n, NULL, NULL, &q->out_bytes, &r);
    }
    memset(p.out_buf, 0xee, p.out_bytes);
    tu_expect_status(run_variant(&p, FIXED, &mag), GRADREF_ERR_DTYPE, "recat_embedding_grad_output",
                     "writes F64");
    tu_expect_untouched(p.out_buf, p.out_bytes, 0xee, "out");
    memset(wide.out_buf, 0xee, wide.out_bytes);
    tu_expect_status(run_variant(&wide, MIXED, NULL), GRADREF_ERR_DTYPE,
                     "recat_embedding_grad_output_mixed_d", "but grad_output.dtype is F16");
    size_t bytes = 1;
    assert_int_equal(gradref_recat_embedding_grad_output_workspace_size(
                         &wide.go3, wide.ranks, wide.num_ranks, &wide.out, &bytes),
                     GRADREF_ERR_DTYPE);
    memset(ints.out_buf, 0xee, ints.out_bytes);
    tu_expect_status(run_variant(&ints, FIXED, &mag), GRADREF_ERR_DTYPE,
                     "recat_embedding_grad_output", "float dtype");
    tu_expect_untouched(ints.out_buf, ints.out_bytes, 0xee, "out");
    assert_int_equal(run_variant(&p, FIXED, NULL), GRADREF_OK); /* the values, for reference */
    for (variant v = FIXED; v <= BATCH; v++) {
        assert_int_equal(run_variant(&wide, v, &mag), GRADREF_OK);
        for (int64_t i = 0; i < p.out.shape[0]; i++)
            assert_true(tu_get(&wide.out, &i) == fabs(tu_get(&p.out, &i)));
        assert_int_equal(run_variant(&wide, v, &counts), GRADREF_OK);
        for (int64_t i = 0; i < p.out.shape[0]; i++)
            assert_true(tu_get(&wide.out, &i) == 0);
    }
    free_problem(&p);
    free_problem(&wide);
    free_problem(&ints);
}

static void test_errors_mixed(void **state) {
    (void)state;
    const char *op = "recat_embedding_grad_output_mixed_d";
    error_fixture f;
    fixture_init(&f);
    gradref_tensor t;
    int64_t bad[3];
    assert_int_equal(gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, 3, &f.o, NULL),
                     GRADREF_OK);
    fixture_init(&f);

    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(NULL, f.ds, 3, &f.o, NULL),
                 GRADREF_ERR_NULL, op, "grad_output is NULL");
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, 3, NULL, NULL),
                 GRADREF_ERR_NULL, op, "out is NULL");
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, NULL, 3, &f.o, NULL),
                 GRADREF_ERR_NULL, op, "dim_sum_per_rank is NULL");
    t = f.go2;
    t.data = NULL;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&t, f.ds, 3, &f.o, NULL),
                 GRADREF_ERR_NULL, op, "grad_output.data");
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, 0, &f.o, NULL),
                 GRADREF_ERR_PARAM, op, "num_ranks is 0");
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, -2, &f.o, NULL),
                 GRADREF_ERR_PARAM, op, "num_ranks is -2");
    bad[0] = 3;
    bad[1] = -1;
    bad[2] = 4;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, bad, 3, &f.o, NULL),
                 GRADREF_ERR_PARAM, op, "dim_sum_per_rank[1] is -1");
    bad[0] = 2;
    bad[1] = 3;
    bad[2] = 0;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, bad, 3, &f.o, NULL),
                 GRADREF_ERR_PARAM, op, "sum to 5 but grad_output.shape[1] is 6");
    bad[0] = INT64_MAX;
    bad[1] = 4;
    bad[2] = 0;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, bad, 3, &f.o, NULL),
                 GRADREF_ERR_OVERFLOW, op, "overflow");
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go3, f.ds, 3, &f.o, NULL),
                 GRADREF_ERR_RANK, op, "grad_output.ndim is 3");
    t = f.o;
    t.ndim = 2;
    t.shape[1] = 1;
    t.strides[1] = 1;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, 3, &t, NULL),
                 GRADREF_ERR_RANK, op, "out.ndim is 2");
    t = f.o;
    t.dtype = GRADREF_I32;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, 3, &t, NULL),
                 GRADREF_ERR_DTYPE, op, "out.dtype is I32");
    t = f.go2;
    t.dtype = 42;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&t, f.ds, 3, &f.o, NULL),
                 GRADREF_ERR_DTYPE, op, "grad_output.dtype is 42");
    t = f.o;
    t.shape[0] = OUT_N - 1;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, 3, &t, NULL),
                 GRADREF_ERR_SHAPE, op, "out.shape[0] is 23");
    t = f.go2;
    t.shape[0] = -4;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&t, f.ds, 3, &f.o, NULL),
                 GRADREF_ERR_SHAPE, op, "grad_output.shape[0] is -4");
    t = f.o;
    t.strides[0] = 0;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, 3, &t, NULL),
                 GRADREF_ERR_STRIDE, op, "overlapping");
    t = f.go2;
    t.strides[1] = -1;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&t, f.ds, 3, &f.o, NULL),
                 GRADREF_ERR_STRIDE, op, "grad_output.strides[1]");
    t = f.go2;
    t.data = f.out; /* out overlaps grad_output */
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&t, f.ds, 3, &f.o, NULL),
                 GRADREF_ERR_ALIAS, op, "out overlaps grad_output");
    t = f.go2;
    t.shape[0] = INT64_C(1) << 40;
    t.strides[0] = INT64_C(1) << 40;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&t, f.ds, 3, &f.o, NULL),
                 GRADREF_ERR_OVERFLOW, op, "grad_output");
    gradref_exec e = {NULL, 0, -1, 0};
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, 3, &f.o, &e),
                 GRADREF_ERR_PARAM, op, "exec.num_threads");
    e.num_threads = 1;
    e.precision = 5;
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d(&f.go2, f.ds, 3, &f.o, &e),
                 GRADREF_ERR_PARAM, op, "exec.precision");

    size_t bytes = 99;
    assert_int_equal(
        gradref_recat_embedding_grad_output_mixed_d_workspace_size(&f.go2, f.ds, 3, &f.o, &bytes),
        GRADREF_OK);
    assert_int_equal(bytes, 0);
    bytes = 99;
    expect_error(
        &f,
        gradref_recat_embedding_grad_output_mixed_d_workspace_size(&f.go2, f.ds, 0, &f.o, &bytes),
        GRADREF_ERR_PARAM, op, "num_ranks");
    assert_int_equal(bytes, 99);
    expect_error(
        &f, gradref_recat_embedding_grad_output_mixed_d_workspace_size(&f.go2, f.ds, 3, &f.o, NULL),
        GRADREF_ERR_NULL, op, "bytes is NULL");
}

static void test_errors_fixed(void **state) {
    (void)state;
    const char *op = "recat_embedding_grad_output";
    error_fixture f;
    fixture_init(&f);
    int64_t nf[2] = {1, 2}, bad[2] = {1, 1};
    gradref_tensor t;
    assert_int_equal(gradref_recat_embedding_grad_output(&f.go3, nf, 2, &f.o, NULL), GRADREF_OK);
    fixture_init(&f);
    expect_error(&f, gradref_recat_embedding_grad_output(&f.go3, bad, 2, &f.o, NULL),
                 GRADREF_ERR_PARAM, op, "sum to 2 but grad_output.shape[1] (T) is 3");
    expect_error(&f, gradref_recat_embedding_grad_output(&f.go2, nf, 2, &f.o, NULL),
                 GRADREF_ERR_RANK, op, "grad_output.ndim is 2 but must be 3");
    expect_error(&f, gradref_recat_embedding_grad_output(&f.go3, NULL, 2, &f.o, NULL),
                 GRADREF_ERR_NULL, op, "num_features_per_rank is NULL");
    t = f.o;
    t.data = f.go + 1;
    expect_error(&f, gradref_recat_embedding_grad_output(&f.go3, nf, 2, &t, NULL),
                 GRADREF_ERR_ALIAS, op, "out overlaps grad_output");
    size_t bytes = 7;
    assert_int_equal(
        gradref_recat_embedding_grad_output_workspace_size(&f.go3, nf, 2, &f.o, &bytes),
        GRADREF_OK);
    assert_int_equal(bytes, 0);
}

static void test_errors_batch(void **state) {
    (void)state;
    const char *op = "recat_embedding_grad_output_mixed_d_batch";
    error_fixture f;
    fixture_init(&f);
    gradref_tensor t;
    assert_int_equal(
        gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &f.dt, &f.ct, &f.o, NULL),
        GRADREF_OK);
    fixture_init(&f);

    /* torchrec's buffers: inclusive prefix, int32 */
    int64_t inclusive[3] = {2, 6, 6};
    int32_t cum32[3] = {0, 2, 6};
    gradref_tensor inc = f.ct, c32 = f.ct;
    inc.data = inclusive;
    c32.data = cum32;
    c32.dtype = GRADREF_I32;
    expect_error(&f,
                 gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &f.dt, &inc, &f.o, NULL),
                 GRADREF_ERR_PARAM, op, "inclusive prefix sum");
    expect_error(&f,
                 gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &f.dt, &c32, &f.o, NULL),
                 GRADREF_ERR_DTYPE, op, "cumsum_dim_sum_per_rank.dtype is I32");
    assert_non_null(strstr(gradref_last_error(), "torchrec"));
    int64_t wrong[3] = {0, 3, 6};
    t = f.ct;
    t.data = wrong;
    expect_error(
        &f, gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &f.dt, &t, &f.o, NULL),
        GRADREF_ERR_PARAM, op,
        "cumsum_dim_sum_per_rank[1] is 3 but the exclusive prefix sum of dim_sum_per_rank gives 2");
    int64_t bad_ds[3] = {2, 5, -1};
    t = f.dt;
    t.data = bad_ds;
    expect_error(&f,
                 gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &t, &f.ct, &f.o, NULL),
                 GRADREF_ERR_PARAM, op, "dim_sum_per_rank[2] is -1");
    t = f.ct;
    t.shape[0] = 2;
    expect_error(&f,
                 gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &f.dt, &t, &f.o, NULL),
                 GRADREF_ERR_SHAPE, op, "cumsum_dim_sum_per_rank.shape[0] is 2");
    t = f.dt;
    t.shape[0] = 0;
    expect_error(&f,
                 gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &t, &f.ct, &f.o, NULL),
                 GRADREF_ERR_SHAPE, op, "at least 1 rank");
    t = f.dt;
    t.ndim = 2;
    t.shape[1] = 1;
    t.strides[1] = 1;
    expect_error(&f,
                 gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &t, &f.ct, &f.o, NULL),
                 GRADREF_ERR_RANK, op, "dim_sum_per_rank.ndim is 2");
    expect_error(&f,
                 gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, NULL, &f.ct, &f.o, NULL),
                 GRADREF_ERR_NULL, op, "dim_sum_per_rank is NULL");
    expect_error(&f,
                 gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &f.dt, NULL, &f.o, NULL),
                 GRADREF_ERR_NULL, op, "cumsum_dim_sum_per_rank is NULL");
    /* out must not overlap the index tensors either */
    int64_t shared[OUT_N + 3];
    memcpy(shared, f.ds, sizeof f.ds);
    t = f.dt;
    t.data = shared;
    gradref_tensor o64 = f.o;
    o64.data = shared + 1;
    o64.dtype = GRADREF_I64;
    gradref_tensor g64 = f.go2;
    int64_t go64[OUT_N];
    g64.data = go64;
    g64.dtype = GRADREF_I64;
    memset(go64, 0, sizeof go64);
    expect_error(&f, gradref_recat_embedding_grad_output_mixed_d_batch(&g64, &t, &f.ct, &o64, NULL),
                 GRADREF_ERR_ALIAS, op, "out overlaps dim_sum_per_rank");

    /* strided index tensors are read through their strides */
    int64_t spaced_ds[6] = {2, -9, 4, -9, 0, -9}, spaced_cum[6] = {0, -9, 2, -9, 6, -9};
    gradref_tensor sd = f.dt, sc = f.ct;
    sd.data = spaced_ds;
    sd.strides[0] = 2;
    sc.data = spaced_cum;
    sc.strides[0] = 2;
    assert_int_equal(
        gradref_recat_embedding_grad_output_mixed_d_batch(&f.go2, &sd, &sc, &f.o, NULL),
        GRADREF_OK);
    static const float want[OUT_N] = {0, 1, 6,  7,  12, 13, 18, 19, 2,  3,  4,  5,
                                      8, 9, 10, 11, 14, 15, 16, 17, 20, 21, 22, 23};
    assert_memory_equal(f.out, want, sizeof want);
}

/* GRADREF_STRICT_UPSTREAM: FBGEMM's CPU recat takes F32 and F16, contiguous; those pass with the
 * bits of a plain call, BF16/F64 and a strided grad_output are refused, out untouched. */
static void test_strict_fbgemm(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(91);
    const int64_t ranks[3] = {2, 0, 3};
    const gradref_exec strict = {NULL, 0, 2, GRADREF_PRECISION_DEFAULT | GRADREF_STRICT_UPSTREAM};
    static const int32_t dtypes[4] = {GRADREF_F32, GRADREF_F16, GRADREF_BF16, GRADREF_F64};
    for (int d = 0; d < 4; d++)
        for (int strided = 0; strided < 2; strided++)
            for (int v = FIXED; v <= BATCH; v++) {
                problem_buf p;
                make_problem(&p, dtypes[d], 5, 3, ranks, 3, strided, &r);
                if (v != FIXED && p.go2.ndim == 0) { /* no 2-D view of this layout */
                    free_problem(&p);
                    continue;
                }
                assert_int_equal(run_variant(&p, (variant)v, NULL), GRADREF_OK);
                unsigned char *want = malloc(p.out_bytes);
                memcpy(want, p.out_buf, p.out_bytes);
                memset(p.out_buf, 0xee, p.out_bytes);
                const gradref_status s = run_variant(&p, (variant)v, &strict);
                const char *op = v == FIXED   ? "recat_embedding_grad_output"
                                 : v == MIXED ? "recat_embedding_grad_output_mixed_d"
                                              : "recat_embedding_grad_output_mixed_d_batch";
                if (d >= 2) {
                    tu_expect_status(s, GRADREF_ERR_DTYPE, op, "FBGEMM takes F32 and F16");
                    tu_expect_untouched(p.out_buf, p.out_bytes, 0xee, "out");
                } else if (strided) {
                    tu_expect_status(s, GRADREF_ERR_STRIDE, op,
                                     "strict FBGEMM: grad_output is not contiguous");
                    tu_expect_untouched(p.out_buf, p.out_bytes, 0xee, "out");
                } else {
                    assert_int_equal(s, GRADREF_OK);
                    assert_memory_equal(p.out_buf, want, p.out_bytes);
                }
                free(want);
                free_problem(&p);
            }
    /* empty grad_outputs are contiguous, whatever their strides or other sizes: (4, 0) with a
     * row stride of 7, and (0, 2^32, 2^32), whose sizes' product overflows int64 */
    float none[1];
    const int64_t empty2[2] = {4, 0}, empty3[3] = {0, INT64_C(1) << 32, INT64_C(1) << 32}, zero = 0;
    const int64_t ds2[1] = {0}, fixed3[1] = {INT64_C(1) << 32};
    gradref_tensor go, out;
    gradref_tensor_init(&go, none, GRADREF_F32, 2, empty2);
    go.strides[0] = 7;
    gradref_tensor_init(&out, none, GRADREF_F32, 1, &zero);
    assert_int_equal(gradref_recat_embedding_grad_output_mixed_d(&go, ds2, 1, &out, &strict),
                     GRADREF_OK);
    memset(&go, 0, sizeof go); /* gradref_tensor_init refuses the sizes' product */
    go.data = none, go.dtype = GRADREF_F32, go.ndim = 3;
    for (int i = 0; i < 3; i++)
        go.shape[i] = empty3[i], go.strides[i] = 1;
    assert_int_equal(gradref_recat_embedding_grad_output(&go, fixed3, 1, &out, &strict),
                     GRADREF_OK);
}

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fbgemm_worked_example),  cmocka_unit_test(test_seed_examples),
        cmocka_unit_test(test_golden_pytorch),         cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_fast_matches_reference), cmocka_unit_test(test_threads_bitwise_equal),
        cmocka_unit_test(test_bench_problems),         cmocka_unit_test(test_streaming_unaligned),
        cmocka_unit_test(test_errors_mixed),           cmocka_unit_test(test_term_outputs),
        cmocka_unit_test(test_errors_fixed),           cmocka_unit_test(test_errors_batch),
        cmocka_unit_test(test_strict_fbgemm),
    };
    return TU_RUN_GROUP("recat", tests);
}
