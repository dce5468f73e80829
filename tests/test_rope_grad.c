/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad: ATB's positive case bit for bit, the worked D=4 example of every mode, the
 * adjoint identity against a forward RoPE written here, PyTorch fixtures, the fast path
 * (SIMD and portable) against the reference loop on every mode, dtype, layout and precision,
 * thread invariance, and every error path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#include "problem.h"
#include "golden.h"
#include "rope_grad/rope_grad_internal.h"

/* ------------------------------------------------------------ helpers */

typedef struct rope_case {
    gradref_rope_params params;
    int32_t lens[16];
    int64_t starts[16];
    gradref_tensor q, k, cos, sin, dq, dk;
    void *buf[6];
    size_t bytes[6];
} rope_case;

static double at(const gradref_tensor *t, int64_t i, int64_t j) {
    int64_t idx[2] = {i, j};
    return tu_get(t, idx);
}

static void put(const gradref_tensor *t, int64_t i, int64_t j, double v) {
    int64_t idx[2] = {i, j};
    tu_put(t, idx, v);
}

/* Random values in [-scale, scale] in every element of t (finite, in the dtype). */
static void fill(const gradref_tensor *t, double scale, tu_rng *r) {
    for (int64_t i = 0; i < t->shape[0]; i++)
        for (int64_t j = 0; j < t->shape[1]; j++)
            put(t, i, j, (2 * tu_uniform(r) - 1) * scale);
}

enum { DENSE = 0, PADDED = 1, COLUMN_STRIDED = 2 };

static void *make2d(gradref_tensor *t, int32_t dtype, int64_t rows, int64_t cols, int layout,
                    size_t *bytes, tu_rng *r) {
    int64_t shape[2] = {rows, cols}, pad[2] = {0, layout == PADDED ? 3 : 0};
    int perm[2] = {1, 0}; /* column-major: column stride != 1 */
    return tu_make_tensor(t, dtype, 2, shape, layout == COLUMN_STRIDED ? perm : NULL, pad, bytes,
                          r);
}

/* make_case's tensors, their values left as allocated. */
static void make_unfilled(rope_case *c, int32_t mode, int32_t dtype, int64_t D, int32_t rotary,
                          int num_seqs, const int32_t *lens, const int64_t *starts, int64_t S,
                          int64_t Hq, int64_t Hk, int layout, tu_rng *r) {
    memset(c, 0, sizeof *c);
    int64_t T = 0;
    for (int b = 0; b < num_seqs; b++) {
        c->lens[b] = lens[b];
        c->starts[b] = starts ? starts[b] : 0;
        T += lens[b];
    }
    gradref_rope_params p = {mode,     (int32_t)D, rotary,
                             num_seqs, c->lens,    starts ? c->starts : NULL};
    c->params = p;
    c->buf[0] = make2d(&c->q, dtype, T, Hq, layout, &c->bytes[0], r);
    c->buf[1] = make2d(&c->k, dtype, T, Hk, layout, &c->bytes[1], r);
    c->buf[2] = make2d(&c->cos, dtype, S, D, layout, &c->bytes[2], r);
    c->buf[3] = make2d(&c->sin, dtype, S, D, layout, &c->bytes[3], r);
    c->buf[4] =
        make2d(&c->dq, dtype, T, Hq, layout == COLUMN_STRIDED ? DENSE : layout, &c->bytes[4], r);
    c->buf[5] = make2d(&c->dk, dtype, T, Hk, layout, &c->bytes[5], r);
}

/* A problem: sequences `lens`, cos/sin with S rows, Hq/Hk widths. */
static void make_case(rope_case *c, int32_t mode, int32_t dtype, int64_t D, int32_t rotary,
                      int num_seqs, const int32_t *lens, const int64_t *starts, int64_t S,
                      int64_t Hq, int64_t Hk, int layout, tu_rng *r) {
    make_unfilled(c, mode, dtype, D, rotary, num_seqs, lens, starts, S, Hq, Hk, layout, r);
    fill(&c->q, 2, r);
    fill(&c->k, 2, r);
    fill(&c->cos, 1, r);
    fill(&c->sin, 1, r);
}

static void free_case(rope_case *c) {
    for (int i = 0; i < 6; i++)
        free(c->buf[i]);
}

static gradref_status run(rope_case *c, const gradref_exec *exec) {
    return gradref_rope_grad(&c->params, &c->q, &c->k, &c->cos, &c->sin, &c->dq, &c->dk, exec);
}

/* ------------------------------------------------------------ known values */

/* ATB's positive test case: qSeqLen [2,1,4,4], q/k (11,128), cos/sin (64,128), data in
 * [-100, 100]; the expected values use 16-bit rounding after every operation, computed with
 * the test's own rounding routines. Positions restart at 0 in every sequence. */
static void check_atb_case(int32_t dtype) {
    tu_rng r = tu_rng_make(100 + (uint64_t)dtype);
    const int32_t lens[4] = {2, 1, 4, 4};
    rope_case c;
    make_case(&c, GRADREF_ROPE_ATB, dtype, 128, 0, 4, lens, NULL, 64, 128, 128, DENSE, &r);
    fill(&c.q, 100, &r);
    fill(&c.k, 100, &r);
    fill(&c.cos, 100, &r);
    fill(&c.sin, 100, &r);
    assert_int_equal(run(&c, NULL), GRADREF_OK);
    int64_t row = 0;
    for (int b = 0; b < 4; b++)
        for (int t = 0; t < lens[b]; t++, row++)
            for (int s = 0; s < 2; s++) {
                const gradref_tensor *in = s ? &c.k : &c.q, *out = s ? &c.dk : &c.dq;
                for (int64_t j = 0; j < 128; j++) {
                    double cs = at(&c.cos, t, j);
                    double sn = j < 64 ? at(&c.sin, t, j + 64) : -at(&c.sin, t, j - 64);
                    double want;
                    if (dtype == GRADREF_F32) {
                        float w = (float)cs + (float)sn;
                        want = (float)at(in, row, j) * w;
                    } else {
                        uint16_t (*round16)(double) =
                            dtype == GRADREF_F16 ? tu_round_f16 : tu_round_bf16;
                        double (*value16)(uint16_t) =
                            dtype == GRADREF_F16 ? tu_f16_value : tu_bf16_value;
                        double w = value16(round16(cs + sn));
                        want = value16(round16(at(in, row, j) * w));
                    }
                    double got = at(out, row, j);
                    if (got != want || signbit(got) != signbit(want))
                        fail_msg("dtype %d row %lld col %lld: got %a want %a", dtype,
                                 (long long)row, (long long)j, got, want);
                }
            }
    free_case(&c);
}

static void test_atb_positive_case(void **state) {
    (void)state;
    check_atb_case(GRADREF_F16);
    check_atb_case(GRADREF_BF16);
    check_atb_case(GRADREF_F32);
}

/* docs/rope_grad.md's worked example: c=[1,2,3,4], s=[5,6,7,8], g=[1,10,100,1000]. */
static void test_worked_example(void **state) {
    (void)state;
    static const double want[3][4] = {
        {8, 100, -200, -2000},  /* ATB */
        {701, 8020, 295, 3940}, /* HALF: the exact adjoint */
        {61, 15, 8300, 3300},   /* INTERLEAVED */
    };
    const double c[4] = {1, 2, 3, 4}, s[4] = {5, 6, 7, 8}, g[4] = {1, 10, 100, 1000};
    for (int32_t dtype = GRADREF_F32; dtype <= GRADREF_F64; dtype++)
        for (int32_t mode = 0; mode < 3; mode++) {
            tu_rng r = tu_rng_make(7);
            const int32_t one = 1;
            rope_case rc;
            make_case(&rc, mode, dtype, 4, 0, 1, &one, NULL, 1, 4, 4, DENSE, &r);
            for (int j = 0; j < 4; j++) {
                put(&rc.cos, 0, j, c[j]);
                put(&rc.sin, 0, j, s[j]);
                put(&rc.q, 0, j, g[j]);
                put(&rc.k, 0, j, g[j]);
            }
            assert_int_equal(run(&rc, NULL), GRADREF_OK);
            for (int j = 0; j < 4; j++) {
                assert_true(at(&rc.dq, 0, j) == want[mode][j]);
                assert_true(at(&rc.dk, 0, j) == want[mode][j]);
            }
            free_case(&rc);
        }
}

/* ------------------------------------------------------------ adjoint identity */

/* The forward RoPE in f64 on one head row: y = R(pos) x (rotate_half or interleaved, first
 * `rotary` dims; the rest passes through). */
static void forward_row(int32_t mode, int64_t D, int64_t rotary, const double *c, const double *s,
                        const double *x, double *y) {
    for (int64_t j = rotary; j < D; j++)
        y[j] = x[j];
    if (mode == GRADREF_ROPE_HALF) {
        int64_t h = rotary / 2;
        for (int64_t j = 0; j < h; j++) {
            y[j] = x[j] * c[j] - x[j + h] * s[j];
            y[j + h] = x[j + h] * c[j + h] + x[j] * s[j + h];
        }
    } else if (mode == GRADREF_ROPE_INTERLEAVED) {
        for (int64_t j = 0; j < rotary; j += 2) {
            y[j] = x[j] * c[j] - x[j + 1] * s[j];
            y[j + 1] = x[j + 1] * c[j + 1] + x[j] * s[j + 1];
        }
    } else { /* the map ATB's kernel is the adjoint of: x * (cos + [sin2, -sin1]) */
        int64_t h = D / 2;
        for (int64_t j = 0; j < h; j++) {
            y[j] = x[j] * (c[j] + s[j + h]);
            y[j + h] = x[j + h] * (c[j + h] - s[j]);
        }
    }
}

static void test_adjoint_identity(void **state) {
    (void)state;
    const int32_t lens[3] = {3, 1, 5};
    const int64_t starts[3] = {2, 0, 7};
    struct {
        int32_t mode, rotary;
    } cases[] = {{GRADREF_ROPE_HALF, 0},
                 {GRADREF_ROPE_HALF, 8},
                 {GRADREF_ROPE_INTERLEAVED, 0},
                 {GRADREF_ROPE_INTERLEAVED, 6},
                 {GRADREF_ROPE_ATB, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tu_rng r = tu_rng_make(200 + k);
        const int64_t D = 16, Hq = 3 * D, Hk = D, S = 12;
        rope_case c; /* independent cos/sin halves, as Paddle #74716 taught */
        make_case(&c, cases[k].mode, GRADREF_F64, D, cases[k].rotary, 3, lens, starts, S, Hq, Hk,
                  PADDED, &r);
        assert_int_equal(run(&c, NULL), GRADREF_OK);
        const int64_t rotary = cases[k].rotary ? cases[k].rotary : D;
        double lhs = 0, rhs = 0, scale = 0; /* <R x, g> and <x, R^T g> */
        int64_t row = 0;
        for (int b = 0; b < 3; b++)
            for (int t = 0; t < lens[b]; t++, row++) {
                double cr[16], sr[16];
                for (int j = 0; j < D; j++) {
                    cr[j] = at(&c.cos, starts[b] + t, j);
                    sr[j] = at(&c.sin, starts[b] + t, j);
                }
                for (int s = 0; s < 2; s++) {
                    const gradref_tensor *g = s ? &c.k : &c.q, *dx = s ? &c.dk : &c.dq;
                    for (int64_t n = 0; n < g->shape[1] / D; n++) {
                        double x[16], y[16];
                        for (int j = 0; j < D; j++)
                            x[j] = 2 * tu_uniform(&r) - 1;
                        forward_row(cases[k].mode, D, rotary, cr, sr, x, y);
                        for (int j = 0; j < D; j++) {
                            lhs += y[j] * at(g, row, n * D + j);
                            rhs += x[j] * at(dx, row, n * D + j);
                            scale += fabs(y[j] * at(g, row, n * D + j));
                        }
                    }
                }
            }
        if (fabs(lhs - rhs) > 1e-13 * scale)
            fail_msg("mode %d rotary %d: <Rx,g> = %.17g but <x,R^T g> = %.17g", cases[k].mode,
                     cases[k].rotary, lhs, rhs);
        free_case(&c);
    }
}

/* ------------------------------------------------------------ fast vs reference */

/* Runs the public call at 1, 2 and 3 threads (the widest SIMD kernels the CPU has), the AVX2
 * kernels and the portable fast path, and compares each output buffer, bit for bit, with the
 * reference loop. */
static void check_fast_against_reference(rope_case *c, int32_t precision) {
    gradref__rope_plan plan;
    assert_int_equal(gradref__rope_grad_validate(&c->params, &c->q, &c->k, &c->cos, &c->sin, &c->dq,
                                                 &c->dk, &plan),
                     GRADREF_OK);
    plan.precision = precision;
    memset(c->buf[4], 0x5a, c->bytes[4]);
    memset(c->buf[5], 0x5a, c->bytes[5]);
    gradref__rope_grad_ref(&plan);
    tu_expect_canonical_nans(&c->dq, "q_grad");
    tu_expect_canonical_nans(&c->dk, "k_grad");
    void *ref_q = malloc(c->bytes[4]), *ref_k = malloc(c->bytes[5] + 1);
    memcpy(ref_q, c->buf[4], c->bytes[4]);
    memcpy(ref_k, c->buf[5], c->bytes[5]);
    int counts[] = TU_THREAD_COUNTS;
    const size_t calls = sizeof counts / sizeof counts[0];
    for (size_t i = 0; i < calls + 2; i++) {
        memset(c->buf[4], 0x5a, c->bytes[4]);
        memset(c->buf[5], 0x5a, c->bytes[5]);
        if (i < calls) {
            gradref_exec exec = {NULL, 0, counts[i], precision};
            assert_int_equal(run(c, &exec), GRADREF_OK);
        } else {
            plan.max_isa = (int32_t)(calls + 1 - i); /* AVX2, then portable; 2 threads */
            gradref__rope_grad_fast(&plan, 2);
        }
        if (memcmp(ref_q, c->buf[4], c->bytes[4]) || memcmp(ref_k, c->buf[5], c->bytes[5]))
            fail_msg("mode %d dtype %d precision %d: run %zu differs from the reference",
                     c->params.mode, c->q.dtype, precision, i);
    }
    free(ref_q);
    free(ref_k);
}

static void test_fast_matches_reference(void **state) {
    (void)state;
    const int32_t lens[4] = {5, 1, 17, 9};
    const int64_t starts[4] = {3, 0, 20, 40};
    for (int32_t dtype = 0; dtype < 4; dtype++)
        for (int32_t mode = 0; mode < 3; mode++)
            for (int layout = DENSE; layout <= COLUMN_STRIDED; layout++)
                for (int variant = 0; variant < 10; variant++) {
                    tu_rng r = tu_rng_make(
                        300 + (uint64_t)(dtype * 100 + mode * 10 + layout * 5 + variant));
                    /* head dims past one chunk and with SIMD tails; partial rotary; GQA; every
                     * half width of the all-heads kernel (16 to 64) and every width of the
                     * interleaved one (16 to 128) */
                    static const int64_t dims[10] = {128, 2 * 272, 22, 96, 32, 64, 16, 48, 80, 112};
                    int64_t D = dims[variant];
                    int32_t rotary = mode == GRADREF_ROPE_ATB || variant != 2 ? 0 : 10;
                    rope_case c;
                    make_case(&c, mode, dtype, D, rotary, 4, lens, variant ? starts : NULL, 64,
                              4 * D, D, layout, &r);
                    for (int32_t precision = 0; precision < 2; precision++)
                        check_fast_against_reference(&c, precision);
                    free_case(&c);
                }
}

/* The NaN rule: q, k, cos and sin holding signalling and quiet NaNs of either sign with
 * payloads and Infs: the reference gives the canonical NaN, every kernel (all-heads, row,
 * pairs, tails) and thread count its bits. */
static void test_nan_bits(void **state) {
    (void)state;
    const int32_t lens[4] = {5, 1, 17, 9};
    for (int32_t dtype = 0; dtype < 4; dtype++)
        for (int32_t mode = 0; mode < 3; mode++)
            for (int variant = 0; variant < 6; variant++) {
                tu_rng r = tu_rng_make(900 + (uint64_t)(dtype * 100 + mode * 10 + variant));
                static const int64_t dims[6] = {128, 22, 96, 32, 64, 16};
                const int64_t D = dims[variant];
                rope_case c;
                /* HALF and interleaved: a partial rotary whose pass-through takes NaNs too */
                const int32_t rotary =
                    mode != GRADREF_ROPE_ATB && variant % 2 ? (int32_t)(D / 2 / 2 * 2) : 0;
                make_case(&c, mode, dtype, D, rotary, 4, lens, NULL, 64, 4 * D, D, variant % 3, &r);
                tu_sprinkle_specials(&c.q, &r, 6);
                tu_sprinkle_specials(&c.k, &r, 6);
                if (variant % 2) tu_sprinkle_specials(&c.cos, &r, 40);
                if (variant % 3 == 1) tu_sprinkle_specials(&c.sin, &r, 40);
                check_fast_against_reference(&c, variant % 4 == 3);
                free_case(&c);
            }
}

/* BF16 in ATB mode with products in the subnormal range, where f32 itself is subnormal: the
 * fast path's f32 product, rounded once, must still equal the reference's exact rounding. */
/* Random finite values of magnitude 2^-8 to 2^8 in a dense tensor, written as bits. */
static void fill_bits(const gradref_tensor *t, tu_rng *r) {
    const int64_t n = t->shape[0] * t->shape[1];
    for (int64_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t)(tu_uniform(r) * 4294967296.0);
        const uint32_t sign = u >> 31, exponent = (u >> 24) % 16; /* 16 binades */
        if (t->dtype == GRADREF_F32)
            ((uint32_t *)t->data)[i] = sign << 31 | (119 + exponent) << 23 | (u & 0x7fffffu);
        else if (t->dtype == GRADREF_BF16)
            ((uint16_t *)t->data)[i] = (uint16_t)(sign << 15 | (119 + exponent) << 7 | (u & 0x7fu));
        else /* F16 */
            ((uint16_t *)t->data)[i] = (uint16_t)(sign << 15 | (7 + exponent) << 10 | (u & 0x3ffu));
    }
}

/* c's outputs from one call per sequence, each under the size that streams, into dq and dk
 * (laid out as c's). */
static void per_sequence(const rope_case *c, char *dq, char *dk) {
    const size_t es = tu_dtype_size(c->q.dtype);
    const int64_t Hq = c->q.shape[1], Hk = c->k.shape[1];
    int64_t row = 0;
    for (int b = 0; b < c->params.num_seqs; b++) {
        gradref_rope_params p = c->params;
        p.num_seqs = 1;
        p.seq_lens = &c->lens[b];
        const int64_t len = c->lens[b], qs[2] = {len, Hq}, ks[2] = {len, Hk};
        gradref_tensor q, k, dqv, dkv;
        gradref_tensor_init(&q, (char *)c->q.data + (size_t)(row * Hq) * es, c->q.dtype, 2, qs);
        gradref_tensor_init(&k, (char *)c->k.data + (size_t)(row * Hk) * es, c->k.dtype, 2, ks);
        gradref_tensor_init(&dqv, dq + (size_t)(row * Hq) * es, c->q.dtype, 2, qs);
        gradref_tensor_init(&dkv, dk + (size_t)(row * Hk) * es, c->k.dtype, 2, ks);
        const gradref_exec exec = {NULL, 0, 2, GRADREF_PRECISION_DEFAULT};
        assert_int_equal(gradref_rope_grad(&p, &q, &k, &c->cos, &c->sin, &dqv, &dkv, &exec),
                         GRADREF_OK);
        row += len;
    }
}

/* Outputs of 8 MiB and more are written with streaming stores: against calls on one sequence
 * at a time (which do not stream; the other tests hold those to the reference), at 2 threads,
 * with dq and dk starting on a 64-byte boundary, 16 bytes past one and 4 bytes past one (the
 * kernels' whole-line, 16-byte and ordinary stores). */
static void test_streamed_outputs(void **state) {
    (void)state;
    const int32_t lens[3] = {342, 341, 341}; /* 1024 tokens, at most 7 MiB a sequence */
    /* mode, dtype, head dim: 128 takes the all-heads kernels, 544 the row kernels */
    const int32_t cases[5][3] = {{GRADREF_ROPE_INTERLEAVED, GRADREF_BF16, 128},
                                 {GRADREF_ROPE_HALF, GRADREF_F16, 128},
                                 {GRADREF_ROPE_ATB, GRADREF_F32, 128},
                                 {GRADREF_ROPE_ATB, GRADREF_F16, 544},
                                 {GRADREF_ROPE_INTERLEAVED, GRADREF_BF16, 544}};
    for (int k = 0; k < 5; k++) {
        tu_rng r = tu_rng_make(700 + (uint64_t)k);
        const int64_t D = cases[k][2], q_heads = D == 128 ? 32 : 8;
        rope_case c;
        make_unfilled(&c, cases[k][0], cases[k][1], D, 0, 3, lens, NULL, 342, q_heads * D,
                      q_heads / 4 * D, DENSE, &r);
        assert_true(c.bytes[4] + c.bytes[5] >= (size_t)8 << 20);
        fill_bits(&c.q, &r); /* tu_put on 10 MiB takes seconds */
        fill_bits(&c.k, &r);
        fill(&c.cos, 1, &r);
        fill(&c.sin, 1, &r);
        per_sequence(&c, c.buf[4], c.buf[5]);
        char *alloc[2], *big[2]; /* big: 64-byte aligned */
        for (int t = 0; t < 2; t++) {
            alloc[t] = malloc(c.bytes[4 + t] + 128);
            assert_non_null(alloc[t]);
            big[t] = alloc[t] + (64 - (uintptr_t)alloc[t] % 64);
        }
        static const size_t offsets[3] = {0, 16, 4};
        for (int o = 0; o < 3; o++) {
            gradref_tensor dq, dk;
            gradref_tensor_init(&dq, big[0] + offsets[o], c.dq.dtype, 2, c.dq.shape);
            gradref_tensor_init(&dk, big[1] + offsets[o], c.dk.dtype, 2, c.dk.shape);
            memset(big[0], 0x5a, c.bytes[4] + 64);
            memset(big[1], 0x5a, c.bytes[5] + 64);
            const gradref_exec exec = {NULL, 0, 2, GRADREF_PRECISION_DEFAULT};
            assert_int_equal(
                gradref_rope_grad(&c.params, &c.q, &c.k, &c.cos, &c.sin, &dq, &dk, &exec),
                GRADREF_OK);
            if (memcmp(big[0] + offsets[o], c.buf[4], c.bytes[4]) ||
                memcmp(big[1] + offsets[o], c.buf[5], c.bytes[5]))
                fail_msg("mode %d dtype %d head dim %d offset %zu: the streamed outputs differ",
                         cases[k][0], cases[k][1], cases[k][2], offsets[o]);
        }
        free(alloc[0]);
        free(alloc[1]);
        free_case(&c);
    }
}

static void test_bf16_tiny_products(void **state) {
    (void)state;
    const int32_t lens[2] = {30, 34};
    tu_rng r = tu_rng_make(450);
    rope_case c;
    make_case(&c, GRADREF_ROPE_ATB, GRADREF_BF16, 64, 0, 2, lens, NULL, 34, 512, 128, DENSE, &r);
    fill(&c.q, ldexp(1, -64), &r);
    fill(&c.k, ldexp(1, -66), &r);
    fill(&c.cos, ldexp(1, -62), &r);
    fill(&c.sin, ldexp(1, -63), &r);
    check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
    int subnormal = 0; /* the case does reach bf16 subnormals */
    for (int64_t i = 0; i < 64; i++)
        for (int64_t j = 0; j < 512; j++) {
            double v = fabs(at(&c.dq, i, j));
            subnormal += v > 0 && v < ldexp(1, -126);
        }
    assert_true(subnormal > 1000);
    free_case(&c);
}

/* NaNs made by the arithmetic from finite F32 and BF16 inputs: products overflowing to +Inf
 * and -Inf, then added (HALF and interleaved). The AVX2 all-heads kernels find them only after
 * storing (a sum of the stored values) and store the token's rows again under the NaN rule;
 * ATB's products give +Inf beside -Inf, which sets the sum off without a NaN to mend. */
static void test_nan_from_overflow(void **state) {
    (void)state;
    const int32_t lens[1] = {8};
    for (int32_t bf16 = 0; bf16 < 2; bf16++)
        for (int32_t mode = 0; mode < 3; mode++) {
            tu_rng r = tu_rng_make(410 + (uint64_t)(bf16 * 3 + mode));
            rope_case c;
            const int64_t D = 64;
            make_case(&c, mode, bf16 ? GRADREF_BF16 : GRADREF_F32, D, 0, 1, lens, NULL, 8, 4 * D, D,
                      DENSE, &r);
            for (int64_t j = 0; j < 4 * D; j++)
                put(&c.q, 3, j, j % 2 ? -3e38 : 3e38);
            for (int64_t j = 0; j < D; j++) {
                put(&c.cos, 3, j, 2.0);
                put(&c.sin, 3, j, -2.0);
            }
            check_fast_against_reference(&c, 0);
            int nans = 0, plus = 0, minus = 0;
            for (int64_t j = 0; j < 4 * D; j++) {
                const double v = at(&c.dq, 3, j);
                nans += isnan(v), plus += v == INFINITY, minus += v == -INFINITY;
            }
            if (mode == GRADREF_ROPE_ATB ? plus == 0 || minus == 0 : nans == 0)
                fail_msg("bf16 %d mode %d: %d NaNs, %d +Inf, %d -Inf", bf16, mode, nans, plus,
                         minus);
            free_case(&c);
        }
}

/* Inf and NaN in the gradient propagate the same way on every path. */
static void test_non_finite(void **state) {
    (void)state;
    const int32_t lens[1] = {40};
    for (int32_t dtype = 0; dtype < 4; dtype++)
        for (int32_t mode = 0; mode < 3; mode++) {
            tu_rng r = tu_rng_make(400 + (uint64_t)(dtype * 3 + mode));
            rope_case c;
            make_case(&c, mode, dtype, 64, 0, 1, lens, NULL, 40, 256, 64, DENSE, &r);
            put(&c.q, 3, 5, INFINITY);
            put(&c.q, 7, 64 + 40, NAN);
            put(&c.k, 9, 33, -INFINITY);
            put(&c.cos, 11, 2, NAN);
            gradref__rope_plan plan;
            assert_int_equal(gradref__rope_grad_validate(&c.params, &c.q, &c.k, &c.cos, &c.sin,
                                                         &c.dq, &c.dk, &plan),
                             GRADREF_OK);
            gradref__rope_grad_ref(&plan);
            double *want = malloc(sizeof(double) * 40 * 256);
            for (int64_t i = 0; i < 40 * 256; i++)
                want[i] = at(&c.dq, i / 256, i % 256);
            if (!isnan(want[11 * 256 + 2]) || !isinf(want[3 * 256 + 5]))
                fail_msg("dtype %d mode %d: %g %g", dtype, mode, want[11 * 256 + 2],
                         want[3 * 256 + 5]);
            assert_int_equal(run(&c, NULL), GRADREF_OK);
            for (int64_t i = 0; i < 40 * 256; i++) {
                double got = at(&c.dq, i / 256, i % 256);
                if (isnan(want[i]) ? !isnan(got) : got != want[i])
                    fail_msg("dtype %d mode %d element %lld: %g vs %g", dtype, mode, (long long)i,
                             got, want[i]);
            }
            free(want);
            free_case(&c);
        }
}

static void test_bench_problems(void **state) {
    (void)state;
    problem *list;
    char err[256];
    int n = problem_load(GRADREF_PROBLEMS, &list, err, sizeof err);
    if (n < 0) fail_msg("%s", err);
    int ran = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(list[i].op, "rope") != 0) continue;
        tu_rng r = tu_rng_make(500 + (uint64_t)i);
        int32_t mode = strcmp(list[i].mode, "half") == 0          ? GRADREF_ROPE_HALF
                       : strcmp(list[i].mode, "interleaved") == 0 ? GRADREF_ROPE_INTERLEAVED
                                                                  : GRADREF_ROPE_ATB;
        const int32_t lens[3] = {7, 2, 5}; /* the line's widths and head_dim, fewer tokens */
        rope_case c;
        make_case(&c, mode, list[i].dtype, problem_get(&list[i], "D", 128), 0, 3, lens, NULL, 7,
                  problem_get(&list[i], "Hq", 128) / 4, problem_get(&list[i], "Hk", 128) / 4, DENSE,
                  &r);
        check_fast_against_reference(&c, GRADREF_PRECISION_DEFAULT);
        free_case(&c);
        ran++;
    }
    assert_true(ran > 0);
    free(list);
}

/* ------------------------------------------------------------ PyTorch fixtures */

static int32_t dtype_named(const char *s) {
    static const char *names[] = {"f32", "f64", "f16", "bf16"};
    for (int32_t d = 0; d < 4; d++)
        if (strcmp(s, names[d]) == 0) return d;
    fail_msg("unknown dtype '%s'", s);
    return -1;
}

static void load_tensor(const golden_case *g, const char *key, gradref_tensor *t, void **buf,
                        int32_t dtype, int64_t rows, int64_t cols) {
    int64_t shape[2] = {rows, cols};
    size_t esz = tu_dtype_size(dtype);
    *buf = calloc((size_t)(rows * cols) + 1, esz);
    gradref_tensor_init(t, *buf, dtype, 2, shape);
    if (key) assert_int_equal(golden_bits(g, key, *buf, esz, (size_t)(rows * cols)), rows * cols);
}

/* Fixtures from tests/golden/generate.py: ATB's formula in torch half arithmetic (bit for bit)
 * and the adjoint modes by autograd through a forward RoPE (to rounding). */
static void test_golden_pytorch(void **state) {
    (void)state;
    int count;
    golden_case *cases = golden_load(GRADREF_GOLDEN_DIR "/rope_grad.txt", &count);
    assert_true(count >= 3);
    for (int i = 0; i < count; i++) {
        const golden_case *g = &cases[i];
        int64_t v[8];
        int32_t dtype = dtype_named(golden_get(g, "dtype"));
        golden_ints(g, "mode", v, 1);
        int32_t mode = (int32_t)v[0];
        golden_ints(g, "dims", v, 6); /* T Hq Hk S D rotary */
        int64_t T = v[0], Hq = v[1], Hk = v[2], S = v[3], D = v[4];
        int32_t rotary = (int32_t)v[5];
        int64_t lens64[16], starts[16];
        int num_seqs = golden_ints(g, "seq_lens", lens64, 16);
        golden_ints(g, "start_positions", starts, 16);
        int32_t lens[16];
        for (int b = 0; b < num_seqs; b++)
            lens[b] = (int32_t)lens64[b];
        gradref_tensor q, k, cs, sn, dq, dk, wq, wk;
        void *bufs[8];
        load_tensor(g, "q_embed_grad", &q, &bufs[0], dtype, T, Hq);
        load_tensor(g, "k_embed_grad", &k, &bufs[1], dtype, T, Hk);
        load_tensor(g, "cos", &cs, &bufs[2], dtype, S, D);
        load_tensor(g, "sin", &sn, &bufs[3], dtype, S, D);
        load_tensor(g, NULL, &dq, &bufs[4], dtype, T, Hq);
        load_tensor(g, NULL, &dk, &bufs[5], dtype, T, Hk);
        load_tensor(g, "q_grad", &wq, &bufs[6], dtype, T, Hq);
        load_tensor(g, "k_grad", &wk, &bufs[7], dtype, T, Hk);
        gradref_rope_params p = {mode, (int32_t)D, rotary, num_seqs, lens, starts};
        if (gradref_rope_grad(&p, &q, &k, &cs, &sn, &dq, &dk, NULL) != GRADREF_OK)
            fail_msg("%s: %s", g->name, gradref_last_error());
        double tol = mode == GRADREF_ROPE_ATB ? 0 : dtype == GRADREF_F64 ? 1e-14 : 1e-6;
        for (int s = 0; s < 2; s++) {
            const gradref_tensor *got = s ? &dk : &dq, *want = s ? &wk : &wq;
            for (int64_t a = 0; a < T; a++)
                for (int64_t b = 0; b < got->shape[1]; b++) {
                    double x = at(got, a, b), y = at(want, a, b);
                    if (fabs(x - y) > tol * (1 + fabs(y)))
                        fail_msg("%s: %s[%lld][%lld] = %.17g, PyTorch %.17g", g->name,
                                 s ? "k_grad" : "q_grad", (long long)a, (long long)b, x, y);
                }
        }
        for (int b = 0; b < 8; b++)
            free(bufs[b]);
    }
    golden_free(cases, count);
}

/* ------------------------------------------------------------ errors */

static void expect_error(rope_case *c, gradref_status got, gradref_status want,
                         const char *fragment) {
    tu_expect_status(got, want, "rope_grad", fragment);
    tu_expect_untouched(c->buf[4], c->bytes[4], 0xee, "q_grad");
    tu_expect_untouched(c->buf[5], c->bytes[5], 0xee, "k_grad");
}

/* GRADREF_TERM_*: F64 outputs of F16 inputs, each element's |c g| + |s' g'| (ATB: |c g| +
 * |s' g|) in every mode, 2 terms, and |g| with none past rotary_dim; F16 outputs and both flags
 * refused, the outputs untouched. */
static void test_term_outputs(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(620);
    const int32_t lens[2] = {3, 2};
    const gradref_exec mag = {NULL, 0, 2, GRADREF_TERM_MAGNITUDES},
                       counts = {NULL, 0, 1, GRADREF_TERM_COUNTS},
                       both = {NULL, 0, 1, GRADREF_TERM_MAGNITUDES | GRADREF_TERM_COUNTS};
    for (int32_t mode = 0; mode < 3; mode++) {
        const int32_t rotary = mode == GRADREF_ROPE_ATB ? 0 : 4; /* D 8: half rotated */
        rope_case c;
        make_case(&c, mode, GRADREF_F16, 8, rotary, 2, lens, NULL, 4, 16, 8, DENSE, &r);
        memset(c.buf[4], 0xee, c.bytes[4]);
        memset(c.buf[5], 0xee, c.bytes[5]);
        tu_expect_status(run(&c, &mag), GRADREF_ERR_DTYPE, "rope_grad", "writes F64");
        tu_expect_untouched(c.buf[4], c.bytes[4], 0xee, "q_grad");
        free(c.buf[4]);
        free(c.buf[5]);
        c.buf[4] = make2d(&c.dq, GRADREF_F64, 5, 16, DENSE, &c.bytes[4], &r);
        c.buf[5] = make2d(&c.dk, GRADREF_F64, 5, 8, DENSE, &c.bytes[5], &r);
        tu_expect_status(run(&c, &both), GRADREF_ERR_PARAM, "rope_grad", "goes alone");
        const int64_t D = 8, R = rotary ? rotary : D;
        for (int pass = 0; pass < 2; pass++) {
            assert_int_equal(run(&c, pass ? &counts : &mag), GRADREF_OK);
            for (int64_t t = 0; t < 5; t++) {
                const int64_t pos = t < 3 ? t : t - 3;
                for (int64_t j = 0; j < 16; j++) {
                    const int64_t h = j % D, head = j - h;
                    const int front = mode == GRADREF_ROPE_INTERLEAVED ? h % 2 == 0 : h < R / 2;
                    const int64_t partner = mode == GRADREF_ROPE_INTERLEAVED
                                                ? (front ? h + 1 : h - 1)
                                            : front ? h + R / 2
                                                    : h - R / 2;
                    const double g = at(&c.q, t, j), cg = at(&c.cos, pos, h);
                    double want = pass ? 2 : 0;
                    if (h >= R) {
                        want = pass ? 0 : fabs(g);
                    } else if (!pass) {
                        const double gp =
                            mode == GRADREF_ROPE_ATB ? g : at(&c.q, t, head + partner);
                        want = fabs(cg * g) + fabs(at(&c.sin, pos, partner) * gp);
                    }
                    if (at(&c.dq, t, j) != want)
                        fail_msg("mode %d pass %d q_grad[%lld,%lld] = %.17g, want %.17g", mode,
                                 pass, (long long)t, (long long)j, at(&c.dq, t, j), want);
                }
            }
        }
        free_case(&c);
    }
}

static void test_errors(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(600);
    const int32_t lens[2] = {3, 2};
    rope_case c;
    make_case(&c, GRADREF_ROPE_HALF, GRADREF_F32, 8, 0, 2, lens, NULL, 4, 16, 8, DENSE, &r);
    memset(c.buf[4], 0xee, c.bytes[4]);
    memset(c.buf[5], 0xee, c.bytes[5]);
    gradref_rope_params good = c.params, p;
    gradref_tensor t;
#define CALL(params, q, k, cs, sn, dq, dk) gradref_rope_grad(params, q, k, cs, sn, dq, dk, NULL)
    expect_error(&c, CALL(NULL, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_NULL,
                 "p is NULL");
    p = good;
    p.mode = 3;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "p.mode is 3");
    p = good;
    p.head_dim = 7;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "p.head_dim is 7");
    p = good;
    p.head_dim = 0;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "p.head_dim is 0");
    p = good;
    p.rotary_dim = 5;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "p.rotary_dim is 5");
    p = good;
    p.rotary_dim = 10;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "p.rotary_dim is 10");
    p = good;
    p.mode = GRADREF_ROPE_ATB;
    p.rotary_dim = 4;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "ATB mode");
    p = good;
    p.num_seqs = 0;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "p.num_seqs is 0");
    p = good;
    p.seq_lens = NULL;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_NULL,
                 "p.seq_lens");
    const int32_t zero_len[2] = {5, 0}, short_lens[2] = {3, 1};
    p = good;
    p.seq_lens = zero_len;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "p.seq_lens[1] is 0");
    p = good;
    p.seq_lens = short_lens; /* ATB does not check this and reads out of bounds */
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "sum to 4 but q_embed_grad has 5 rows");
    const int64_t starts_bad[2] = {0, 3}, starts_neg[2] = {-1, 0};
    p = good;
    p.start_positions = starts_bad;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "sequence 1 starts at position 3 and has 2 tokens");
    p = good;
    p.start_positions = starts_neg;
    expect_error(&c, CALL(&p, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_PARAM,
                 "sequence 0");
    expect_error(&c, CALL(&good, NULL, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_NULL,
                 "q_embed_grad is NULL");
    expect_error(&c, CALL(&good, &c.q, &c.k, &c.cos, &c.sin, &c.dq, NULL), GRADREF_ERR_NULL,
                 "k_grad is NULL");
    t = c.cos;
    t.ndim = 3;
    t.shape[2] = 1;
    t.strides[2] = 1;
    expect_error(&c, CALL(&good, &c.q, &c.k, &t, &c.sin, &c.dq, &c.dk), GRADREF_ERR_RANK,
                 "cos.ndim is 3");
    t = c.q;
    t.dtype = GRADREF_I32;
    expect_error(&c, CALL(&good, &t, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_DTYPE,
                 "F32, F64, F16 or BF16");
    t = c.sin;
    t.dtype = GRADREF_F64;
    expect_error(&c, CALL(&good, &c.q, &c.k, &c.cos, &t, &c.dq, &c.dk), GRADREF_ERR_DTYPE,
                 "sin.dtype is F64");
    t = c.q;
    t.shape[1] = 12;
    expect_error(&c, CALL(&good, &t, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_SHAPE,
                 "not a multiple of head_dim");
    t = c.k;
    t.shape[0] = 4;
    expect_error(&c, CALL(&good, &c.q, &t, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_SHAPE,
                 "k_embed_grad is (4, 8)");
    t = c.sin;
    t.shape[0] = 3;
    expect_error(&c, CALL(&good, &c.q, &c.k, &c.cos, &t, &c.dq, &c.dk), GRADREF_ERR_SHAPE,
                 "sin is (3, 8)");
    t = c.cos;
    t.shape[1] = 6;
    expect_error(&c, CALL(&good, &c.q, &c.k, &t, &c.sin, &c.dq, &c.dk), GRADREF_ERR_SHAPE,
                 "cos is (4, 6)");
    t = c.dq;
    t.shape[1] = 8;
    expect_error(&c, CALL(&good, &c.q, &c.k, &c.cos, &c.sin, &t, &c.dk), GRADREF_ERR_SHAPE,
                 "q_grad is (5, 8)");
    t = c.dk;
    t.strides[0] = 0;
    expect_error(&c, CALL(&good, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &t), GRADREF_ERR_STRIDE,
                 "overlapping");
    t = c.q;
    t.strides[1] = -1;
    expect_error(&c, CALL(&good, &t, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_STRIDE,
                 "q_embed_grad.strides[1]");
    t = c.dk;
    t.data = c.q.data;
    expect_error(&c, CALL(&good, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &t), GRADREF_ERR_ALIAS,
                 "k_grad overlaps q_embed_grad");
    t = c.dk;
    t.data = c.dq.data;
    expect_error(&c, CALL(&good, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &t), GRADREF_ERR_ALIAS,
                 "k_grad overlaps q_grad");
    t = c.q;
    t.shape[0] = INT64_C(1) << 62;
    t.strides[0] = 16;
    expect_error(&c, CALL(&good, &t, &c.k, &c.cos, &c.sin, &c.dq, &c.dk), GRADREF_ERR_OVERFLOW,
                 "q_embed_grad");
    gradref_exec bad = {NULL, 0, -3, 0};
    expect_error(&c, gradref_rope_grad(&good, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk, &bad),
                 GRADREF_ERR_PARAM, "exec.num_threads");
    size_t bytes = 5;
    assert_int_equal(
        gradref_rope_grad_workspace_size(&good, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk, &bytes),
        GRADREF_OK);
    assert_int_equal(bytes, 0);
    expect_error(
        &c, gradref_rope_grad_workspace_size(&good, &c.q, &c.k, &c.cos, &c.sin, &c.dq, &c.dk, NULL),
        GRADREF_ERR_NULL, "bytes is NULL");
    /* no heads at all in k is legal */
    rope_case e;
    make_case(&e, GRADREF_ROPE_HALF, GRADREF_F16, 8, 0, 2, lens, NULL, 4, 8, 0, DENSE, &r);
    assert_int_equal(run(&e, NULL), GRADREF_OK);
    free_case(&e);
#undef CALL
    free_case(&c);
}

/* GRADREF_STRICT_UPSTREAM: ATB's positive case passes with the bits of a plain call; each of
 * ATB's rejections that gradref would accept is refused, outputs untouched. */
static void test_strict_atb(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(650);
    const int32_t lens[4] = {2, 1, 4, 4};
    const int64_t starts[4] = {0, 1, 2, 3};
    const gradref_exec strict = {NULL, 0, 2, GRADREF_PRECISION_DEFAULT | GRADREF_STRICT_UPSTREAM};
    rope_case c;
    make_case(&c, GRADREF_ROPE_ATB, GRADREF_F16, 128, 0, 4, lens, NULL, 64, 128, 128, DENSE, &r);
    assert_int_equal(run(&c, NULL), GRADREF_OK);
    void *want = malloc(c.bytes[4]);
    memcpy(want, c.buf[4], c.bytes[4]);
    memset(c.buf[4], 0xee, c.bytes[4]);
    assert_int_equal(run(&c, &strict), GRADREF_OK);
    assert_memory_equal(c.buf[4], want, c.bytes[4]);
    free(want);
    free_case(&c);
    static const struct {
        int32_t mode, dtype;
        int64_t D, Hk;
        int starts;
        gradref_status status;
        const char *message;
    } bad[] = {
        {GRADREF_ROPE_HALF, GRADREF_F16, 128, 128, 0, GRADREF_ERR_PARAM,
         "strict ATB: p.mode must be GRADREF_ROPE_ATB"},
        {GRADREF_ROPE_ATB, GRADREF_F32, 128, 128, 0, GRADREF_ERR_DTYPE,
         "strict ATB: q_embed_grad.dtype is F32; RopeGrad takes F16 only"},
        {GRADREF_ROPE_ATB, GRADREF_BF16, 128, 128, 0, GRADREF_ERR_DTYPE, "takes F16 only"},
        {GRADREF_ROPE_ATB, GRADREF_F16, 64, 64, 0, GRADREF_ERR_SHAPE,
         "strict ATB: q_embed_grad.shape[1] is 64, not a multiple of 128"},
        {GRADREF_ROPE_ATB, GRADREF_F16, 128, 256, 0, GRADREF_ERR_SHAPE,
         "strict ATB: q_embed_grad is (11, 128) and k_embed_grad (11, 256); RopeGrad needs equal "
         "shapes"},
        {GRADREF_ROPE_ATB, GRADREF_F16, 128, 128, 1, GRADREF_ERR_PARAM,
         "strict ATB: p.start_positions must be NULL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        make_case(&c, bad[i].mode, bad[i].dtype, bad[i].D, 0, 4, lens,
                  bad[i].starts ? starts : NULL, 64, bad[i].D, bad[i].Hk, DENSE, &r);
        assert_int_equal(run(&c, NULL), GRADREF_OK); /* accepted without the flag */
        memset(c.buf[4], 0xee, c.bytes[4]);
        memset(c.buf[5], 0xee, c.bytes[5]);
        expect_error(&c, run(&c, &strict), bad[i].status, bad[i].message);
        free_case(&c);
    }
    /* ATB's CSV rows whose class another gradref check used to decide: q 12 rows and k 11 with
     * qSeqLen summing to 11 (TENSOR_SIZE, not the seq_lens sum), cos and sin 127 wide with
     * head_dim 127 (TENSOR_DIM, not the odd head_dim); and empty q and k (CheckInTensor) */
    const int32_t lens12[4] = {2, 1, 4, 5};
    for (int row = 0; row < 3; row++) {
        make_case(&c, GRADREF_ROPE_ATB, GRADREF_F16, 128, 0, 4, lens12, NULL, 64, 128, 128, DENSE,
                  &r);
        gradref_rope_params p = c.params;
        gradref_tensor q = c.q, k = c.k, cs = c.cos, sn = c.sin, dq = c.dq, dk = c.dk;
        gradref_status plain = GRADREF_ERR_PARAM;
        const char *message;
        if (row == 0) {
            p.seq_lens = lens;
            k.shape[0] = dk.shape[0] = 11;
            message = "strict ATB: q_embed_grad is (12, 128) and k_embed_grad (11, 128)";
        } else if (row == 1) {
            p.head_dim = 127;
            cs.shape[1] = sn.shape[1] = 127;
            message = "strict ATB: cos.shape[1] is 127; RopeGrad's headSize is 128 only";
        } else {
            q.shape[1] = k.shape[1] = dq.shape[1] = dk.shape[1] = 0;
            plain = GRADREF_OK;
            message = "strict ATB: q_embed_grad is (12, 0); ATB takes no empty tensor";
        }
        assert_int_equal(gradref_rope_grad(&p, &q, &k, &cs, &sn, &dq, &dk, NULL), plain);
        memset(c.buf[4], 0xee, c.bytes[4]);
        memset(c.buf[5], 0xee, c.bytes[5]);
        tu_expect_status(gradref_rope_grad(&p, &q, &k, &cs, &sn, &dq, &dk, &strict),
                         GRADREF_ERR_SHAPE, "rope_grad", message);
        tu_expect_untouched(c.buf[4], c.bytes[4], 0xee, "q_grad");
        tu_expect_untouched(c.buf[5], c.bytes[5], 0xee, "k_grad");
        free_case(&c);
    }
    /* ATB's tiling limit: batch < 100000 (one token per sequence here) */
    enum { SEQS = 100000 };
    int32_t *ones = malloc(SEQS * sizeof *ones);
    for (int b = 0; b < SEQS; b++)
        ones[b] = 1;
    make_case(&c, GRADREF_ROPE_ATB, GRADREF_F16, 128, 0, 1, lens, NULL, 2, 128, 128, DENSE, &r);
    gradref_tensor q = c.q, k = c.k, dq = c.dq, dk = c.dk;
    void *big[4];
    big[0] = make2d(&q, GRADREF_F16, SEQS, 128, DENSE, NULL, &r);
    big[1] = make2d(&k, GRADREF_F16, SEQS, 128, DENSE, NULL, &r);
    big[2] = make2d(&dq, GRADREF_F16, SEQS, 128, DENSE, NULL, &r);
    big[3] = make2d(&dk, GRADREF_F16, SEQS, 128, DENSE, NULL, &r);
    gradref_rope_params p = c.params;
    p.num_seqs = SEQS;
    p.seq_lens = ones;
    memset(big[2], 0xee, (size_t)SEQS * 128 * 2);
    tu_expect_status(gradref_rope_grad(&p, &q, &k, &c.cos, &c.sin, &dq, &dk, &strict),
                     GRADREF_ERR_PARAM, "rope_grad",
                     "strict ATB: p.num_seqs is 100000; RopeGrad's batch must be < 100000");
    tu_expect_untouched(big[2], (size_t)SEQS * 128 * 2, 0xee, "q_grad");
    p.num_seqs = SEQS - 1;
    q.shape[0] = k.shape[0] = dq.shape[0] = dk.shape[0] = SEQS - 1;
    assert_int_equal(gradref_rope_grad(&p, &q, &k, &c.cos, &c.sin, &dq, &dk, &strict), GRADREF_OK);
    for (int i = 0; i < 4; i++)
        free(big[i]);
    free(ones);
    free_case(&c);
}

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atb_positive_case), cmocka_unit_test(test_worked_example),
        cmocka_unit_test(test_adjoint_identity),  cmocka_unit_test(test_fast_matches_reference),
        cmocka_unit_test(test_nan_bits),          cmocka_unit_test(test_nan_from_overflow),
        cmocka_unit_test(test_streamed_outputs),  cmocka_unit_test(test_bf16_tiny_products),
        cmocka_unit_test(test_non_finite),        cmocka_unit_test(test_bench_problems),
        cmocka_unit_test(test_golden_pytorch),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_term_outputs),      cmocka_unit_test(test_strict_atb),
    };
    return TU_RUN_GROUP("rope_grad", tests);
}
