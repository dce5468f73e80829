/* SPDX-License-Identifier: Apache-2.0 */
/* The common core: status strings, messages, descriptors and their validation, dtype
 * conversions (against independent rounding routines), gradref_copy, the exec plumbing. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#include "common/convert.h"
#include "common/convert_array.h"
#include "common/copy.h"
#include "common/isa.h"
#include "common/magnitude.h"
#include "common/stream.h"
#include "common/exec.h"
#include "common/fma.h"
#include "common/gemm.h"
#include "common/gemm_kernels.h"
#include "common/tensor.h"

/* ---------------------------------------------------------------- status, version, messages */

static void test_status_strings(void **state) {
    (void)state;
    for (int a = 0; a <= GRADREF_ERR_WORKSPACE; a++) {
        const char *sa = gradref_status_string((gradref_status)a);
        assert_non_null(sa);
        assert_true(strncmp(sa, "GRADREF_", 8) == 0);
        for (int b = 0; b < a; b++)
            assert_string_not_equal(sa, gradref_status_string((gradref_status)b));
    }
    assert_string_equal(gradref_status_string(GRADREF_ERR_SHAPE), "GRADREF_ERR_SHAPE");
    assert_string_equal(gradref_status_string((gradref_status)99), "GRADREF_ERR_UNKNOWN");
    assert_string_equal(gradref_status_string((gradref_status)-1), "GRADREF_ERR_UNKNOWN");
}

static void test_version(void **state) {
    (void)state;
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", GRADREF_VERSION_MAJOR, GRADREF_VERSION_MINOR,
             GRADREF_VERSION_PATCH);
    assert_string_equal(gradref_version(), expect);
    assert_string_equal(GRADREF_VERSION_STRING, expect);
    assert_int_equal(GRADREF_VERSION_NUMBER, GRADREF_VERSION_MAJOR * 10000 +
                                                 GRADREF_VERSION_MINOR * 100 +
                                                 GRADREF_VERSION_PATCH);
}

static void test_message_format_and_persistence(void **state) {
    (void)state;
    gradref_tensor t;
    int64_t shape[2] = {3, -4};
    assert_int_equal(gradref_tensor_init(&t, NULL, GRADREF_F32, 2, shape), GRADREF_ERR_SHAPE);
    assert_string_equal(gradref_last_error(), "tensor_init: shape[1] is -4, below 0");
    shape[1] = 4; /* a success leaves the last message in place */
    assert_int_equal(gradref_tensor_init(&t, NULL, GRADREF_F32, 2, shape), GRADREF_OK);
    assert_string_equal(gradref_last_error(), "tensor_init: shape[1] is -4, below 0");
}

typedef struct message_worker {
    int64_t size; /* a distinct negative size per thread */
    int mixed;
} message_worker;

static void *message_thread(void *arg) {
    message_worker *w = arg;
    char expect[128];
    snprintf(expect, sizeof expect, "tensor_init: shape[0] is %lld, below 0", (long long)w->size);
    for (int i = 0; i < 20000; i++) {
        gradref_tensor t;
        if (gradref_tensor_init(&t, NULL, GRADREF_F32, 1, &w->size) != GRADREF_ERR_SHAPE ||
            strcmp(gradref_last_error(), expect) != 0)
            w->mixed = 1;
    }
    return NULL;
}

static void test_messages_are_per_thread(void **state) {
    (void)state;
    message_worker w[2] = {{-11, 0}, {-22222, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, message_thread, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_false(w[0].mixed);
    assert_false(w[1].mixed);
}

/* ---------------------------------------------------------------- descriptors */

static void test_tensor_init(void **state) {
    (void)state;
    gradref_tensor t;
    int64_t shape[4] = {2, 3, 0, 5};
    assert_int_equal(gradref_tensor_init(&t, NULL, GRADREF_BF16, 4, shape), GRADREF_OK);
    const int64_t strides[4] = {15, 5, 5, 1}; /* a size-0 dim counts as 1 */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t.shape[i], shape[i]);
        assert_int_equal(t.strides[i], strides[i]);
    }
    assert_int_equal(t.dtype, GRADREF_BF16);
    assert_int_equal(t.ndim, 4);
    assert_int_equal(gradref_tensor_init(&t, NULL, GRADREF_F32, 0, NULL), GRADREF_OK);
    assert_int_equal(t.ndim, 0);

    /* errors leave *t untouched */
    gradref_tensor before;
    memset(&t, 0x5a, sizeof t);
    before = t;
    int64_t big[2] = {INT64_C(1) << 62, 4};
    assert_int_equal(gradref_tensor_init(&t, NULL, GRADREF_F32, 2, big), GRADREF_ERR_OVERFLOW);
    int64_t bytes_too_big[1] = {INT64_C(1) << 61};
    assert_int_equal(gradref_tensor_init(&t, NULL, GRADREF_F64, 1, bytes_too_big),
                     GRADREF_ERR_OVERFLOW);
    assert_int_equal(gradref_tensor_init(&t, NULL, GRADREF_F32, 9, shape), GRADREF_ERR_RANK);
    assert_int_equal(gradref_tensor_init(&t, NULL, GRADREF_F32, -1, shape), GRADREF_ERR_RANK);
    assert_int_equal(gradref_tensor_init(&t, NULL, (gradref_dtype)7, 1, shape), GRADREF_ERR_DTYPE);
    assert_int_equal(gradref_tensor_init(&t, NULL, GRADREF_F32, 2, NULL), GRADREF_ERR_NULL);
    assert_memory_equal(&t, &before, sizeof t);
    assert_int_equal(gradref_tensor_init(NULL, NULL, GRADREF_F32, 1, shape), GRADREF_ERR_NULL);
}

static void test_tensor_init_format(void **state) {
    (void)state;
    static const struct {
        gradref_format format;
        int64_t strides[5];
    } cases[] = {
        /* 2-D shape (N,C,H,W) = (2,3,4,5); 3-D shape (N,C,D,H,W) = (2,3,4,5,6) */
        {GRADREF_FORMAT_NCHW, {60, 20, 5, 1, 0}},    {GRADREF_FORMAT_NHWC, {60, 1, 15, 3, 0}},
        {GRADREF_FORMAT_HWCN, {1, 2, 30, 6, 0}},     {GRADREF_FORMAT_NCDHW, {360, 120, 30, 6, 1}},
        {GRADREF_FORMAT_NDHWC, {360, 1, 90, 18, 3}}, {GRADREF_FORMAT_DHWCN, {1, 2, 180, 36, 6}},
    };
    int64_t shape[5] = {2, 3, 4, 5, 6};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gradref_tensor t;
        assert_int_equal(gradref_tensor_init_format(&t, NULL, GRADREF_F32, cases[c].format, shape),
                         GRADREF_OK);
        int nd = (cases[c].format == GRADREF_FORMAT_NCHW ||
                  cases[c].format == GRADREF_FORMAT_NHWC || cases[c].format == GRADREF_FORMAT_HWCN)
                     ? 4
                     : 5;
        assert_int_equal(t.ndim, nd);
        for (int i = 0; i < nd; i++) {
            assert_int_equal(t.shape[i], shape[i]);
            assert_int_equal(t.strides[i], cases[c].strides[i]);
        }
    }
    gradref_tensor t;
    assert_int_equal(gradref_tensor_init_format(&t, NULL, GRADREF_F32, (gradref_format)9, shape),
                     GRADREF_ERR_PARAM);
    assert_int_equal(gradref_tensor_init_format(&t, NULL, GRADREF_F32, GRADREF_FORMAT_NCDHW, NULL),
                     GRADREF_ERR_NULL);
}

static gradref_tensor desc(void *data, int32_t dtype, int32_t ndim, const int64_t *shape,
                           const int64_t *strides) {
    gradref_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t.shape[i] = shape[i];
        t.strides[i] = strides[i];
    }
    return t;
}

static gradref_status check(const gradref_tensor *t) {
    return gradref__check_tensor("op", "x", t, NULL);
}
static gradref_status check_out(const gradref_tensor *t) {
    return gradref__check_output("op", "y", t, NULL);
}

static void test_validation(void **state) {
    (void)state;
    static float buf[64];
    int64_t s2[2] = {4, 4}, st2[2] = {4, 1};
    gradref_tensor t = desc(buf, GRADREF_F32, 2, s2, st2);
    assert_int_equal(check(&t), GRADREF_OK);
    assert_int_equal(gradref__check_tensor("op", "x", NULL, NULL), GRADREF_ERR_NULL);
    assert_string_equal(gradref_last_error(), "op: x is NULL");

    gradref_tensor bad = t;
    bad.dtype = 12;
    assert_int_equal(check(&bad), GRADREF_ERR_DTYPE);
    assert_string_equal(gradref_last_error(), "op: x.dtype is 12, not a gradref_dtype");
    bad = t;
    bad.ndim = 9;
    assert_int_equal(check(&bad), GRADREF_ERR_RANK);
    bad = t;
    bad.shape[1] = -1;
    assert_int_equal(check(&bad), GRADREF_ERR_SHAPE);
    assert_string_equal(gradref_last_error(), "op: x.shape[1] is -1, below 0");
    bad = t;
    bad.strides[0] = -4;
    assert_int_equal(check(&bad), GRADREF_ERR_STRIDE);
    bad = t;
    bad.data = NULL;
    assert_int_equal(check(&bad), GRADREF_ERR_NULL);
    bad.shape[0] = 0; /* empty: NULL data is fine */
    assert_int_equal(check(&bad), GRADREF_OK);

    /* overflow: element count, offset span, bytes, address space */
    int64_t huge[2] = {INT64_C(1) << 32, INT64_C(1) << 32}, one[2] = {1, 1};
    bad = desc(buf, GRADREF_F32, 2, huge, one);
    assert_int_equal(check(&bad), GRADREF_ERR_OVERFLOW);
    int64_t span_shape[2] = {3, 2}, span_strides[2] = {INT64_C(1) << 62, 1};
    bad = desc(buf, GRADREF_F32, 2, span_shape, span_strides);
    assert_int_equal(check(&bad), GRADREF_ERR_OVERFLOW);
    int64_t byte_shape[1] = {INT64_C(1) << 61}, unit[1] = {1};
    bad = desc(buf, GRADREF_F64, 1, byte_shape, unit);
    assert_int_equal(check(&bad), GRADREF_ERR_OVERFLOW);
    int64_t broadcast_shape[1] = {INT64_C(1) << 61}, zero[1] = {0}; /* dense copy would not fit */
    bad = desc(buf, GRADREF_F64, 1, broadcast_shape, zero);
    assert_int_equal(check(&bad), GRADREF_ERR_OVERFLOW);
    int64_t wrap_shape[1] = {100};
    bad = desc((void *)(UINTPTR_MAX - 67), GRADREF_F32, 1, wrap_shape, unit); /* 4-aligned */
    assert_int_equal(check(&bad), GRADREF_ERR_OVERFLOW);
    /* a zero extent makes everything else legal */
    int64_t empty_huge[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40}, st3[3] = {1, 1, 1};
    bad = desc(NULL, GRADREF_F32, 3, empty_huge, st3);
    assert_int_equal(check(&bad), GRADREF_OK);
    gradref__extent e;
    assert_int_equal(gradref__check_tensor("op", "x", &t, &e), GRADREF_OK);
    assert_int_equal(e.numel, 16);
    assert_true(e.hi - e.lo == 16 * sizeof(float));
}

static void test_output_self_overlap(void **state) {
    (void)state;
    static double buf[1024];
    struct {
        int ndim;
        int64_t shape[4], strides[4];
        gradref_status expect;
    } cases[] = {
        {2, {4, 5}, {5, 1}, GRADREF_OK},               /* dense */
        {2, {4, 5}, {1, 4}, GRADREF_OK},               /* transposed */
        {4, {2, 3, 4, 5}, {60, 1, 15, 3}, GRADREF_OK}, /* NHWC */
        {2, {4, 5}, {10, 2}, GRADREF_OK},              /* strided slice */
        {3, {4, 1, 5}, {5, 0, 1}, GRADREF_OK},         /* size-1 dims are ignored */
        {2, {4, 5}, {0, 1}, GRADREF_ERR_STRIDE},       /* broadcast output */
        {2, {4, 5}, {4, 1}, GRADREF_ERR_STRIDE},       /* rows overlap by one */
        {2, {2, 2}, {1, 1}, GRADREF_ERR_STRIDE},       /* equal strides */
        {2, {3, 2}, {2, 3}, GRADREF_ERR_STRIDE},       /* interleaved: rejected by the rule */
        {2, {0, 5}, {0, 0}, GRADREF_OK},               /* empty */
        {0, {0}, {0}, GRADREF_OK},                     /* scalar */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gradref_tensor t = desc(buf, GRADREF_F64, cases[c].ndim, cases[c].shape, cases[c].strides);
        assert_int_equal(check_out(&t), cases[c].expect);
    }
}

static void test_alias_detection(void **state) {
    (void)state;
    static float buf[100];
    int64_t shape[1] = {10}, unit[1] = {1}, two[1] = {2};
    gradref_tensor a = desc(buf, GRADREF_F32, 1, shape, unit);
    gradref_tensor b = desc(buf + 10, GRADREF_F32, 1, shape, unit);
    gradref_tensor c = desc(buf + 9, GRADREF_F32, 1, shape, unit);
    gradref_tensor odd =
        desc(buf + 1, GRADREF_F32, 1, shape, two); /* interleaved with an even view */
    gradref__extent ea, eb, ec, eo;
    assert_int_equal(gradref__check_tensor("op", "a", &a, &ea), GRADREF_OK);
    assert_int_equal(gradref__check_tensor("op", "b", &b, &eb), GRADREF_OK);
    assert_int_equal(gradref__check_tensor("op", "c", &c, &ec), GRADREF_OK);
    assert_int_equal(gradref__check_tensor("op", "odd", &odd, &eo), GRADREF_OK);
    assert_int_equal(gradref__check_disjoint("op", "a", &ea, "b", &eb), GRADREF_OK);
    assert_int_equal(gradref__check_disjoint("op", "a", &ea, "c", &ec), GRADREF_ERR_ALIAS);
    assert_string_equal(gradref_last_error(), "op: a overlaps c in memory");
    assert_int_equal(gradref__check_disjoint("op", "c", &ec, "a", &ea), GRADREF_ERR_ALIAS);
    assert_int_equal(gradref__check_disjoint("op", "a", &ea, "odd", &eo), GRADREF_ERR_ALIAS);
    shape[0] = 0;
    gradref_tensor empty = desc(buf, GRADREF_F32, 1, shape, unit);
    gradref__extent ee;
    assert_int_equal(gradref__check_tensor("op", "e", &empty, &ee), GRADREF_OK);
    assert_int_equal(gradref__check_disjoint("op", "e", &ee, "a", &ea), GRADREF_OK);
}

/* ---------------------------------------------------------------- conversions */

static void test_f16_all_patterns(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = gradref__f16_to_f32((uint16_t)h);
        int nan = ((h >> 10) & 31) == 31 && (h & 1023);
        if (nan) {
            assert_true(isnan(f));
            assert_int_equal(signbit(f) != 0, (h & 0x8000) != 0);
        } else {
            assert_true((double)f == tu_f16_value((uint16_t)h));
            assert_int_equal(signbit(f) != 0, (h & 0x8000) != 0);
        }
        assert_int_equal(gradref__f32_to_f16(f), h); /* exact round trip, payloads too */
        /* (double)f quiets a signalling NaN, so through f64 only the quiet ones keep all bits */
        if (!nan || (h & 0x200)) assert_int_equal(gradref__f64_to_f16((double)f), h);
    }
}

/* The array kernels (F16C where the CPU has it; BF16 by integer lanes) and the portable BF16
 * loops give the scalar routines' bits, NaN payloads included: every 16-bit pattern up, and f32
 * patterns (signalling NaNs, ties, subnormals, overflow) down, at every alignment of the 8-lane
 * blocks. */
static void test_array_conversions(void **state) {
    (void)state;
    uint16_t *h = malloc(65536 * sizeof *h), *h2 = malloc(65536 * sizeof *h2);
    float *f = malloc(65536 * sizeof *f);
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    gradref__array_kernels_for(GRADREF__ISA_MAX)->f16_to_f32(h, f, 65536);
    for (uint32_t i = 0; i < 65536; i++)
        assert_int_equal(gradref__f32_bits(f[i]), gradref__f32_bits(gradref__f16_to_f32(h[i])));
    gradref__bf16_to_f32_array(h, f, 65536);
    for (uint32_t i = 0; i < 65536; i++)
        assert_int_equal(gradref__f32_bits(f[i]), gradref__f32_bits(gradref__bf16_to_f32(h[i])));
    gradref__array_kernels_for(GRADREF__ISA_MAX)->bf16_to_f32(h + 3, f, 65533);
    for (uint32_t i = 0; i < 65533; i++)
        assert_int_equal(gradref__f32_bits(f[i]),
                         gradref__f32_bits(gradref__bf16_to_f32(h[i + 3])));
    tu_rng r = tu_rng_make(44);
    static const uint32_t specials[] = {
        0x7f800001u, 0xffa00000u, 0x7fc00001u, 0x7f800000u, 0x477ff000u, 0x477fefffu, 0x33000000u,
        0x33000001u, 0x38800000u, 0x00000001u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu};
    for (int round = 0; round < 4; round++) {
        for (uint32_t i = 0; i < 65536; i++) {
            uint32_t bits = (uint32_t)tu_next(&r);
            if (i % 7 == 0) bits = specials[(i / 7) % (sizeof specials / sizeof specials[0])];
            f[i] = gradref__f32_from_bits(bits);
        }
        const size_t start = (size_t)round, n = 65536 - (size_t)round;
        gradref__array_kernels_for(GRADREF__ISA_MAX)->f32_to_f16(f + start, h2, n);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(h2[i], gradref__f32_to_f16(f[start + i]));
        gradref__f32_to_bf16_array(f + start, h2, n);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(h2[i], gradref__f32_to_bf16(f[start + i]));
        gradref__array_kernels_for(GRADREF__ISA_MAX)->f32_to_bf16(f + start, h2, n);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(h2[i], gradref__f32_to_bf16(f[start + i]));
    }
    /* the dtype's own conversions through the helpers that take the dtype */
    const gradref__array_kernels *k = gradref__array_kernels_for(GRADREF__ISA_MAX);
    for (int bf = 0; bf < 2; bf++) {
        const int32_t dtype = bf ? GRADREF_BF16 : GRADREF_F16;
        gradref__half_to_f32_array(k, dtype, h, f, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            assert_int_equal(
                gradref__f32_bits(f[i]),
                gradref__f32_bits(bf ? gradref__bf16_to_f32(h[i]) : gradref__f16_to_f32(h[i])));
        f[1] = 1.0f + 0x1p-12f; /* not a 16-bit value: rounded */
        gradref__f32_to_half_array(k, dtype, f, h2, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            assert_int_equal(h2[i], bf ? gradref__f32_to_bf16(f[i]) : gradref__f32_to_f16(f[i]));
    }
    free(h);
    free(h2);
    free(f);
}

/* GEMM panels of `width` lines (rows of A or columns of B), k-major, zero past `lines`: line l
 * at depth k is m[l * ls + k * ks]. */
static float *test_panels(const float *m, int64_t lines, int64_t K, int64_t ls, int64_t ks,
                          int64_t width) {
    const int64_t np = (lines + width - 1) / width;
    float *panels = malloc(sizeof(float) * (size_t)(np * width * K + 1));
    for (int64_t q = 0; q < np; q++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t l = 0; l < width; l++)
                panels[(q * K + k) * width + l] =
                    q * width + l < lines ? m[(q * width + l) * ls + k * ks] : 0.0f;
    return panels;
}

/* The packed SGEMM, at every kernel level, against a plain fmaf loop: bit for bit, with
 * strided and transposed operands, edge tiles, K across several slices, accumulate on/off, A or
 * B given in panels; and the small GEMM (K slices outermost) at three slice and panel sizes. */
static void test_sgemm(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(45);
    void *work_block = malloc(gradref__sgemm_work_bytes() + 64);
    void *work = (char *)work_block + (64 - (uintptr_t)work_block % 64) % 64;
    static const int64_t sizes[][3] = {{1, 1, 1},    {14, 32, 5},  {15, 33, 257}, {29, 70, 600},
                                       {170, 40, 3}, {6, 2100, 9}, {3, 5, 0},     {40, 17, 513}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
        float *a = malloc(sizeof(float) * (size_t)(M * K + 1));
        float *b = malloc(sizeof(float) * (size_t)(K * N + 1));
        float *c = malloc(sizeof(float) * (size_t)(M * N * 2 + 1));
        float *want = malloc(sizeof(float) * (size_t)(M * N + 1));
        float *c0 = malloc(sizeof(float) * (size_t)(M * N + 1));
        for (int64_t i = 0; i < M * K; i++)
            a[i] = (float)(tu_uniform(&r) * 2 - 1);
        for (int64_t i = 0; i < K * N; i++)
            b[i] = (float)(tu_uniform(&r) * 2 - 1);
        for (int64_t i = 0; i < M * N; i++)
            c0[i] = (float)(tu_uniform(&r) * 2 - 1);
        for (int layout = 0; layout < 4; layout++)
            for (int acc = 0; acc < 2; acc++) {
                /* A row-major or column-major, B likewise; C row-major or with column stride 2 */
                gradref__sgemm_args g = {M,
                                         N,
                                         K,
                                         a,
                                         layout & 1 ? 1 : K,
                                         layout & 1 ? M : 1,
                                         b,
                                         layout & 2 ? 1 : N,
                                         layout & 2 ? K : 1,
                                         c,
                                         layout & 2 ? 2 * N : N,
                                         layout & 2 ? 2 : 1,
                                         acc,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL};
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++) {
                        float v = acc ? c0[i * N + j] : 0.0f;
                        for (int64_t k = 0; k < K; k++)
                            v = fmaf(a[i * g.a_rs + k * g.a_cs], b[k * g.b_rs + j * g.b_cs], v);
                        want[i * N + j] = v;
                    }
                for (int run = 0; run < 12; run++) { /* each kernel; A, B packed per call or
                                                         before; the small GEMM */
                    const int kernel = run % 3;
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++)
                            c[i * g.c_rs + j * g.c_cs] = c0[i * N + j];
                    gradref__sgemm_args h = g;
                    float *panels = NULL;
                    if (run >= 3 && run < 6) /* A panels of mr rows */
                        h.a_panels = panels =
                            test_panels(a, M, K, g.a_rs, g.a_cs, gradref__sgemm_mr(kernel));
                    if (run >= 6 && run < 9) /* B panels of nr columns */
                        h.b_panels = panels =
                            test_panels(b, N, K, g.b_cs, g.b_rs, gradref__sgemm_nr(kernel));
                    if (run < 9) {
                        gradref__sgemm(&h, kernel, work);
                    } else { /* (kc, nc): (32, 64), (48, 32), (64, 128) */
                        const int64_t kc = 32 + 16 * (run - 9),
                                      nc = run == 10 ? 32 : 64 * (run - 8);
                        gradref__sgemm_small(&h, kernel, work, kc, nc);
                    }
                    free(panels);
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++)
                            if (gradref__f32_bits(c[i * g.c_rs + j * g.c_cs]) !=
                                gradref__f32_bits(want[i * N + j]))
                                fail_msg(
                                    "M%lld N%lld K%lld layout %d acc %d kernel %d: C[%lld][%lld] "
                                    "= %.9g, want %.9g",
                                    (long long)M, (long long)N, (long long)K, layout, acc, kernel,
                                    (long long)i, (long long)j, c[i * g.c_rs + j * g.c_cs],
                                    want[i * N + j]);
                }
            }
        free(a);
        free(b);
        free(c);
        free(want);
        free(c0);
    }
    free(work_block);
}

/* One level's indirect kernel (rows 1 .. mr, cols 1 .. nr) against a plain fmaf loop, bit for
 * bit: every row count, a spread of column counts, rows of A gathered through pointers with unit
 * and strided channels, every fifth row NULL (skipped). What the kernel does not own stays. */
static void check_sgemm_indirect(const gradref__sgemm_kernels *k, tu_rng *r) {
    enum { ROWS = 40, WIDTH = 40, KMAX = 300, LDC = 40 };
    const int mr = k->mr, nr = k->nr;
    float *x = malloc(sizeof(float) * ROWS * WIDTH), *b = malloc(sizeof(float) * KMAX * 32);
    float c[14 * LDC], want[14 * LDC];
    const float *a_rows[KMAX];
    for (int i = 0; i < ROWS * WIDTH; i++)
        x[i] = (float)(tu_uniform(r) * 2 - 1);
    for (int i = 0; i < KMAX * 32; i++)
        b[i] = (float)(tu_uniform(r) * 2 - 1);
    const int cols_list[6] = {1, nr / 2 - 1, nr / 2, nr / 2 + 1, nr - 1, nr};
    static const int64_t k_list[] = {0, 1, 5, 256, 300};
    for (int rows = 1; rows <= mr; rows++)
        for (int ci = 0; ci < 6; ci++)
            for (size_t ki = 0; ki < sizeof k_list / sizeof *k_list; ki++) {
                const int cols = cols_list[ci];
                const int64_t K = k_list[ki], cs = 1 + (int64_t)(ci % 2),
                              off = WIDTH - rows * cs - rows % 3;
                for (int64_t p = 0; p < K; p++)
                    a_rows[p] = p % 5 == 3 ? NULL : x + (int64_t)tu_range(r, 0, ROWS - 1) * WIDTH;
                for (int i = 0; i < 14 * LDC; i++)
                    c[i] = want[i] = -7.0f; /* what must stay */
                for (int i = 0; i < rows; i++)
                    for (int j = 0; j < cols; j++) {
                        float v = 0.0f;
                        for (int64_t p = 0; p < K; p++)
                            if (a_rows[p]) v = fmaf(a_rows[p][off + i * cs], b[p * nr + j], v);
                        want[i * LDC + j] = v;
                    }
                k->indirect(rows, cols, K, a_rows, off, cs, b, c, LDC);
                for (int i = 0; i < 14 * LDC; i++)
                    if (gradref__f32_bits(c[i]) != gradref__f32_bits(want[i]))
                        fail_msg("%s rows %d cols %d K %lld: c[%d] = %.9g, want %.9g", k->isa, rows,
                                 cols, (long long)K, i, c[i], want[i]);
            }
    free(x);
    free(b);
}

/* Every level's indirect kernel (AVX2, AVX-512 and NEON; the portable level has none). */
static void test_sgemm_indirect(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(46);
    int checked = 0;
    for (int level = 1; level <= gradref__isa_level(); level++) {
        const gradref__sgemm_kernels *k = gradref__sgemm_kernels_for(level);
        if (k == gradref__sgemm_kernels_for(level - 1) || !k->indirect) continue;
        assert_true(k->mr <= 14 && k->nr <= 32);
        check_sgemm_indirect(k, &r);
        checked++;
    }
    assert_int_equal(checked > 0, gradref__isa_level() > GRADREF__ISA_PORTABLE);
}

static void test_bf16_all_patterns(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = gradref__bf16_to_f32((uint16_t)h);
        assert_int_equal(gradref__f32_bits(f), h << 16);
        assert_int_equal(gradref__f32_to_bf16(f), h);
        int nan = ((h >> 7) & 0xff) == 0xff && (h & 0x7f);
        if (!nan || (h & 0x40)) assert_int_equal(gradref__f64_to_bf16((double)f), h);
    }
}

static void check_f16(double x) {
    uint16_t want = tu_round_f16(x);
    uint16_t got64 = gradref__f64_to_f16(x);
    if (got64 != want) fail_msg("f64_to_f16(%a) = 0x%04x, want 0x%04x", x, got64, want);
    float f = (float)x;
    if ((double)f == x) {
        uint16_t got32 = gradref__f32_to_f16(f);
        if (got32 != want) fail_msg("f32_to_f16(%a) = 0x%04x, want 0x%04x", x, got32, want);
    }
}

static void check_bf16(double x) {
    uint16_t want = tu_round_bf16(x);
    uint16_t got64 = gradref__f64_to_bf16(x);
    if (got64 != want) fail_msg("f64_to_bf16(%a) = 0x%04x, want 0x%04x", x, got64, want);
    float f = (float)x;
    if ((double)f == x) {
        uint16_t got32 = gradref__f32_to_bf16(f);
        if (got32 != want) fail_msg("f32_to_bf16(%a) = 0x%04x, want 0x%04x", x, got32, want);
    }
}

/* Every tie point between neighbouring values of a 16-bit format (bit patterns below `top`,
 * whose next value is `beyond` past the largest), and the nearest floats and doubles on either
 * side of it: the cases where a wrong rounding (or a double rounding through f32) shows. */
static void probe_ties(double (*value)(uint16_t), uint32_t top, double beyond,
                       void (*check)(double)) {
    for (uint32_t h = 0; h < top; h++) {
        double lo = value((uint16_t)h), hi = h + 1 == top ? beyond : value((uint16_t)(h + 1));
        double mid = (lo + hi) / 2;
        double probes[] = {mid,
                           nextafter(mid, 0),
                           nextafter(mid, INFINITY),
                           (double)nextafterf((float)mid, 0),
                           (double)nextafterf((float)mid, INFINITY),
                           lo};
        for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
            check(probes[k]);
            check(-probes[k]);
        }
    }
}

static void test_rounding_ties(void **state) {
    (void)state;
    probe_ties(tu_f16_value, 0x7c00, 65536.0, check_f16);
    probe_ties(tu_bf16_value, 0x7f80, ldexp(1, 128), check_bf16);
    check_f16(INFINITY);
    check_f16(-INFINITY);
    check_bf16(INFINITY);
    check_f16(1e300);
    check_bf16(-1e300);
    check_f16(4.9e-324);
    check_bf16(-4.9e-324);
}

/* A float with a random `bits`-bit significand (top bit set) times 2^exp, of either sign. */
static float random_significand(tu_rng *r, int bits, int exp) {
    const uint64_t m = (tu_next(r) % (UINT64_C(1) << bits)) | (UINT64_C(1) << (bits - 1));
    const float f = ldexpf((float)m, exp - bits);
    return tu_next(r) & 1 ? -f : f;
}

/* An addend for a*b whose sum rounds hard: far below a*b's last bit (a sum just off a float
 * midpoint, which double rounding would send to even), -a*b rounded (cancellation), a few bits
 * below a*b, any power of two (subnormal sums among them), or a special. */
static float hard_addend(tu_rng *r, double p) {
    int e;
    frexp(p, &e);
    const float sign = tu_next(r) & 1 ? 1.0f : -1.0f;
    switch (tu_next(r) % 6) {
    case 0: return sign * ldexpf(1.0f, e - 25 - (int)tu_range(r, 0, 40));
    case 1: return -(float)p;
    case 2: return ldexpf((float)tu_range(r, -1000000, 1000000), e - 24 - (int)tu_range(r, 0, 30));
    case 3: return sign * ldexpf(1.0f, (int)tu_range(r, -149, 127));
    case 4: return 0.0f * sign;
    default: {
        static const float specials[4] = {INFINITY, -INFINITY, NAN, FLT_MAX};
        return specials[tu_next(r) % 4];
    }
    }
}

/* The portable kernels' inline fused multiply-add equals the C library's fmaf bit for bit:
 * products whose exact sums fall just off float midpoints, cancellations, subnormal and
 * overflowing results, signed zeros, Inf and NaN (any NaN for NaN). */
static void test_fmaf_odd(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(61);
    for (int i = 0; i < 1000000; i++) {
        const int bits = (int)tu_range(&r, 12, 24);
        const int ea = (int)tu_range(&r, -80, 70), eb = (int)tu_range(&r, -80, 70);
        const float a = random_significand(&r, bits, ea), b = random_significand(&r, bits, eb);
        const float c = hard_addend(&r, (double)a * b);
        const float want = fmaf(a, b, c), odd = gradref__fmaf_odd(a, b, c);
        const float used = gradref__fmaf(a, b, c);
        if (isnan(want) && isnan(odd) && isnan(used)) continue;
        if (memcmp(&want, &odd, 4) != 0 || memcmp(&want, &used, 4) != 0)
            fail_msg("fma(%a, %a, %a): fmaf %a, odd %a, used %a", a, b, c, want, odd, used);
    }
}

static void test_rounding_random(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(1);
    for (int i = 0; i < 400000; i++) {
        float f = gradref__f32_from_bits((uint32_t)tu_next(&r));
        if (isnan(f)) continue;
        check_f16((double)f);
        check_bf16((double)f);
        /* doubles near the f16/bf16 range, with bits below f32 precision */
        double d =
            ldexp(1.0 + tu_uniform(&r), (int)tu_range(&r, -140, 130)) * (tu_next(&r) & 1 ? -1 : 1);
        check_f16(d);
        check_bf16(d);
    }
}

static void test_nan_stays_nan(void **state) {
    (void)state;
    /* payload bits that do not fit: the quiet bit keeps it a NaN */
    float low_payload = gradref__f32_from_bits(0x7f800001u);
    assert_int_equal(gradref__f32_to_f16(low_payload), 0x7e00);
    assert_int_equal(gradref__f32_to_bf16(low_payload), 0x7fc0);
    assert_int_equal(gradref__f32_to_bf16(gradref__f32_from_bits(0xff812345u)), 0xff81);
    assert_int_equal(gradref__f32_to_f16(gradref__f32_from_bits(0xffc00000u)), 0xfe00);
    double dnan;
    uint64_t bits = UINT64_C(0x7ff0000000000001);
    memcpy(&dnan, &bits, sizeof dnan);
    assert_int_equal(gradref__f64_to_f16(dnan), 0x7e00);
    assert_int_equal(gradref__f64_to_bf16(dnan), 0x7fc0);
}

/* A NaN's bits in dtype dt (mantissa width mw): sign, all-ones exponent, payload m. */
static uint64_t nan_bits(int mw, int ew, uint64_t sign, uint64_t m) {
    return sign << (mw + ew) | ((UINT64_C(1) << ew) - 1) << mw | m;
}

/* gradref_copy between every pair of float dtypes, signalling and quiet NaNs of either sign
 * with random payloads, one element and runs long enough for any vector path: the payload's
 * top bits are kept (widening keeps all of them, quiet bit included), and the quiet bit is set
 * only when the kept bits are all zero. Written from that rule, not from the library's code. */
static void test_copy_nan_payloads(void **state) {
    (void)state;
    static const int32_t dts[4] = {GRADREF_F32, GRADREF_F64, GRADREF_F16, GRADREF_BF16};
    static const int mws[4] = {23, 52, 10, 7}, ews[4] = {8, 11, 5, 8}, bytes[4] = {4, 8, 2, 2};
    tu_rng r = tu_rng_make(46);
    enum { MAX_N = 1000 };
    uint64_t *src = malloc(MAX_N * 8), *dst = malloc(MAX_N * 8), *want = malloc(MAX_N * 8);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int64_t n = 1; n <= MAX_N; n = n * 37 > MAX_N && n < MAX_N ? MAX_N : n * 37) {
                for (int64_t i = 0; i < n; i++) {
                    uint64_t m = tu_next(&r) & ((UINT64_C(1) << mws[a]) - 1);
                    if (i % 3 == 0) m &= (UINT64_C(1) << (mws[a] - 1)) - 1; /* signalling */
                    if (i % 5 == 0) m &= 7; /* a payload only in the low bits */
                    if (m == 0) m = 1;
                    const uint64_t sign = tu_next(&r) & 1, v = nan_bits(mws[a], ews[a], sign, m);
                    memcpy((char *)src + i * bytes[a], &v, (size_t)bytes[a]);
                    uint64_t k = mws[b] >= mws[a] ? m << (mws[b] - mws[a]) : m >> (mws[a] - mws[b]);
                    if (k == 0) k = UINT64_C(1) << (mws[b] - 1);
                    want[i] = nan_bits(mws[b], ews[b], sign, k);
                }
                gradref_tensor ts = desc(src, dts[a], 1, &n, (int64_t[]){1}),
                               td = desc(dst, dts[b], 1, &n, (int64_t[]){1});
                assert_int_equal(gradref_copy(&ts, &td, NULL), GRADREF_OK);
                for (int64_t i = 0; i < n; i++) {
                    uint64_t got = 0;
                    memcpy(&got, (char *)dst + i * bytes[b], (size_t)bytes[b]);
                    if (got != want[i])
                        fail_msg("copy %s -> %s, %lld elements: [%lld] is 0x%llx, want 0x%llx",
                                 gradref__dtype_name(dts[a]), gradref__dtype_name(dts[b]),
                                 (long long)n, (long long)i, (unsigned long long)got,
                                 (unsigned long long)want[i]);
                }
            }
    free(src);
    free(dst);
    free(want);
}

static void test_integer_to_half(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(2);
    for (int i = 0; i < 200000; i++) {
        int64_t v =
            (int64_t)(tu_next(&r) >> (11 + tu_range(&r, 0, 52))) * (tu_next(&r) & 1 ? -1 : 1);
        assert_int_equal(gradref__i64_to_f16(v), tu_round_f16((double)v)); /* |v| < 2^53: exact */
        assert_int_equal(gradref__i64_to_bf16(v), tu_round_bf16((double)v));
    }
    /* beyond 2^53, where a conversion through double or f32 would round twice */
    int64_t above_tie = (INT64_C(1) << 62) + (INT64_C(1) << 54) + 1; /* just above a bf16 tie */
    assert_int_equal(gradref__i64_to_bf16(above_tie), gradref__f32_to_bf16(0x1.02p62f));
    assert_int_equal(gradref__i64_to_bf16((INT64_C(1) << 24) + (INT64_C(1) << 16) + 1),
                     gradref__f32_to_bf16(0x1.02p24f));
    assert_int_equal(gradref__i64_to_bf16(INT64_MIN), 0xdf00);
    assert_int_equal(gradref__i64_to_bf16(INT64_MAX), 0x5f00);
    assert_int_equal(gradref__i64_to_f16(INT64_MAX), 0x7c00);
    assert_int_equal(gradref__i64_to_f16(-65519), 0xfbff);
    assert_int_equal(gradref__i64_to_f16(65520), 0x7c00);
}

/* ---------------------------------------------------------------- gradref_copy */

static double read_value(const gradref_tensor *t, const int64_t *idx) {
    const char *p = (const char *)t->data + tu_offset(t, idx);
    switch (t->dtype) {
    case GRADREF_F32: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case GRADREF_F64: {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    case GRADREF_F16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return tu_f16_value(v);
    }
    case GRADREF_BF16: {
        uint16_t v;
        memcpy(&v, p, 2);
        return tu_bf16_value(v);
    }
    case GRADREF_I8: {
        int8_t v;
        memcpy(&v, p, 1);
        return v;
    }
    case GRADREF_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        int64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    }
}

/* What dst must hold for a src value, by the independent routines. */
static void expect_bits(int32_t sdt, const void *s, int32_t ddt, void *out) {
    size_t dz = tu_dtype_size(ddt);
    if (sdt == ddt) {
        memcpy(out, s, dz);
        return;
    }
    gradref_tensor one;
    memset(&one, 0, sizeof one);
    one.data = (void *)s;
    one.dtype = sdt;
    double v = read_value(&one, NULL);
    switch (ddt) {
    case GRADREF_F64: memcpy(out, &v, 8); break;
    case GRADREF_F32: {
        float f = (float)v;
        if (sdt == GRADREF_I64) {
            int64_t i;
            memcpy(&i, s, 8);
            f = (float)i;
        }
        memcpy(out, &f, 4);
    } break;
    case GRADREF_F16: {
        uint16_t h = tu_round_f16(v);
        memcpy(out, &h, 2);
    } break;
    case GRADREF_BF16: {
        uint16_t h = tu_round_bf16(v);
        memcpy(out, &h, 2);
    } break;
    case GRADREF_I32: {
        int32_t i = (int32_t)v;
        memcpy(out, &i, 4);
    } break;
    default: {
        int64_t i;
        if (sdt == GRADREF_I8) {
            int8_t c;
            memcpy(&c, s, 1);
            i = c;
        } else {
            int32_t w;
            memcpy(&w, s, 4);
            i = w;
        }
        memcpy(out, &i, 8);
    } break;
    }
}

static int allowed(int32_t s, int32_t d) {
    int sf = s <= GRADREF_BF16, df = d <= GRADREF_BF16;
    if (s == d || df) return 1;
    if (sf) return 0;
    static const int rank[7] = {0, 0, 0, 0, 1, 2, 3};
    return rank[d] > rank[s];
}

/* Random values each dtype can hold and a conversion can be checked on (no NaN: the
 * independent routines read values, not payloads; same-dtype copies check bits elsewhere). */
static void fill_values(gradref_tensor *t, size_t bytes, tu_rng *r) {
    size_t esz = tu_dtype_size(t->dtype);
    for (size_t off = 0; off + esz <= bytes; off += esz) {
        char *p = (char *)t->data + off;
        double v = (tu_uniform(r) - 0.5) * ldexp(1, (int)tu_range(r, -30, 20));
        switch (t->dtype) {
        case GRADREF_F32: {
            float f = (float)v;
            memcpy(p, &f, 4);
        } break;
        case GRADREF_F64: memcpy(p, &v, 8); break;
        case GRADREF_F16: {
            uint16_t h = (uint16_t)(tu_next(r) & 0x7bff);
            memcpy(p, &h, 2);
        } break;
        case GRADREF_BF16: {
            uint16_t h = (uint16_t)(tu_next(r) & 0xff7f);
            memcpy(p, &h, 2);
        } break;
        case GRADREF_I8: {
            int8_t c = (int8_t)tu_next(r);
            memcpy(p, &c, 1);
        } break;
        case GRADREF_I32: {
            int32_t i = (int32_t)tu_next(r);
            memcpy(p, &i, 4);
        } break;
        default: {
            int64_t i = (int64_t)tu_next(r);
            memcpy(p, &i, 8);
        } break;
        }
    }
}

static void test_copy_layouts_and_dtypes(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(3);
    for (int iter = 0; iter < 600; iter++) {
        int32_t nd = (int32_t)tu_range(&r, 0, 4);
        int64_t shape[4];
        int sperm[4] = {0, 1, 2, 3}, dperm[4] = {0, 1, 2, 3};
        int64_t spad[4], dpad[4];
        for (int i = 0; i < nd; i++) {
            shape[i] = tu_range(&r, iter % 50 == 0 ? 0 : 1, iter % 5 == 0 ? 12 : 6); /* 12: tiled */
            spad[i] = tu_range(&r, 0, 2);
            dpad[i] = tu_range(&r, 0, 2);
        }
        for (int i = nd - 1; i > 0; i--) { /* random memory orders */
            int j = (int)tu_range(&r, 0, i), k = (int)tu_range(&r, 0, i), x;
            x = sperm[i];
            sperm[i] = sperm[j];
            sperm[j] = x;
            x = dperm[i];
            dperm[i] = dperm[k];
            dperm[k] = x;
        }
        int32_t sdt, ddt;
        do {
            sdt = (int32_t)tu_range(&r, 0, 6);
            ddt = (int32_t)tu_range(&r, 0, 6);
        } while (!allowed(sdt, ddt));
        gradref_tensor src, dst;
        size_t sbytes, dbytes;
        void *sbuf = tu_make_tensor(&src, sdt, nd, shape, sperm, spad, &sbytes, &r);
        void *dbuf = tu_make_tensor(&dst, ddt, nd, shape, dperm, dpad, &dbytes, &r);
        fill_values(&src, sbytes, &r);
        if (nd > 0 && iter % 7 == 0) src.strides[0] = 0;      /* a broadcast input */
        if (nd > 0 && iter % 7 == 3) src.strides[nd - 1] = 0; /* broadcast along the rows */
        void *before = malloc(dbytes ? dbytes : 1);
        memcpy(before, dbuf, dbytes);
        gradref_exec exec = {NULL, 0, (int32_t)(iter % 3 + 1), 0};
        assert_int_equal(gradref_copy(&src, &dst, &exec), GRADREF_OK);

        /* every logical element converted; the padding between them untouched */
        char *mask = calloc(dbytes ? dbytes : 1, 1);
        int64_t numel = 1, idx[4] = {0, 0, 0, 0};
        for (int i = 0; i < nd; i++)
            numel *= shape[i];
        for (int64_t e = 0; e < numel; e++) {
            int64_t rest = e;
            for (int i = nd - 1; i >= 0; i--) {
                idx[i] = rest % shape[i];
                rest /= shape[i];
            }
            unsigned char want[8];
            size_t so = tu_offset(&src, idx), d0 = tu_offset(&dst, idx), dz = tu_dtype_size(ddt);
            expect_bits(sdt, (char *)sbuf + so, ddt, want);
            if (memcmp((char *)dbuf + d0, want, dz) != 0)
                fail_msg("copy %d->%d iter %d element %lld differs", sdt, ddt, iter, (long long)e);
            memset(mask + d0, 1, dz);
        }
        for (size_t b = 0; b < dbytes; b++)
            if (!mask[b])
                assert_int_equal(((unsigned char *)dbuf)[b], ((unsigned char *)before)[b]);
        free(mask);
        free(before);
        free(sbuf);
        free(dbuf);
    }
}

static void test_copy_bits_and_threads(void **state) {
    (void)state;
    /* same dtype: every bit survives (NaN payloads, -0, subnormals), in any layout and at any
     * thread count; large enough to run in parallel */
    tu_rng r = tu_rng_make(4);
    int64_t shape[3] = {37, 45, 61};
    int perm[3] = {2, 0, 1};
    for (int32_t dt = 0; dt < 2; dt++) { /* F16, then F32 (its 8 x 8 block transposes) */
        const int32_t dtype = dt ? GRADREF_F32 : GRADREF_F16;
        const size_t esz = tu_dtype_size(dtype);
        gradref_tensor src, dst;
        size_t sb, db;
        void *s = tu_make_tensor(&src, dtype, 3, shape, NULL, NULL, &sb, &r);
        void *d = tu_make_tensor(&dst, dtype, 3, shape, perm, NULL, &db, &r);
        int counts[] = TU_THREAD_COUNTS;
        void *first = NULL;
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            gradref_exec exec = {NULL, 0, counts[k], 0};
            memset(d, 0, db);
            assert_int_equal(gradref_copy(&src, &dst, &exec), GRADREF_OK);
            if (!first) {
                first = malloc(db);
                memcpy(first, d, db);
            } else {
                assert_memory_equal(first, d, db);
            }
        }
        for (int64_t i = 0; i < shape[0]; i++)
            for (int64_t j = 0; j < shape[1]; j++)
                for (int64_t k = 0; k < shape[2]; k++) {
                    int64_t idx[3] = {i, j, k};
                    assert_memory_equal((char *)s + tu_offset(&src, idx),
                                        (char *)d + tu_offset(&dst, idx), esz);
                }
        free(first);
        first = NULL;
        free(s);
        free(d);
    }
    /* f32 -> bf16 over many threads matches the scalar routine */
    gradref_tensor f, b;
    void *fb = tu_make_tensor(&f, GRADREF_F32, 3, shape, NULL, NULL, NULL, &r);
    void *bb = tu_make_tensor(&b, GRADREF_BF16, 3, shape, NULL, NULL, NULL, &r);
    gradref_exec exec = {NULL, 0, 3, 0};
    assert_int_equal(gradref_copy(&f, &b, &exec), GRADREF_OK);
    for (int64_t i = 0; i < shape[0] * shape[1] * shape[2]; i++)
        assert_int_equal(((uint16_t *)bb)[i], gradref__f32_to_bf16(((float *)fb)[i]));
    free(fb);
    free(bb);
}

/* A channels-last -> channel-major copy larger than GRADREF__STREAM_MIN_BYTES: its full tiles
 * are written with streaming stores where dst's rows are 32-byte aligned (whole lines at a time
 * where they start on 64 bytes) and with plain ones where they are not (dst one element off);
 * every element lands, at every thread count, for rows of whole lines and of half lines. Then
 * the same tiles as part of a larger output (gradref__copy5_part), one plane at a time. */
static void copy_streamed_rows(const uint32_t *src, uint32_t *buf, int64_t C, int64_t S) {
    const size_t n = (size_t)(C * S);
    const int64_t shape[2] = {C, S}, ss[2] = {1, C}, ds[2] = {S, 1};
    const int offsets[] = {0, 8, 1}; /* elements past a 64-byte boundary */
    int counts[] = TU_THREAD_COUNTS;
    for (int o = 0; o < 3; o++)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            uint32_t *dst = (uint32_t *)(((uintptr_t)buf + 63) & ~(uintptr_t)63) + offsets[o];
            memset(buf, 0xab, (n + 32) * 4);
            gradref_tensor ts = desc((void *)src, GRADREF_F32, 2, shape, ss),
                           td = desc(dst, GRADREF_F32, 2, shape, ds);
            gradref_exec exec = {NULL, 0, counts[k], 0};
            assert_int_equal(gradref_copy(&ts, &td, &exec), GRADREF_OK);
            for (int64_t c = 0; c < C; c++)
                for (int64_t i = 0; i < S; i++)
                    if (dst[c * S + i] != src[i * C + c])
                        fail_msg("S %lld off %d threads %d: dst[%lld][%lld] differs", (long long)S,
                                 offsets[o], counts[k], (long long)c, (long long)i);
        }
}

static void test_copy_streamed_tiles(void **state) {
    (void)state;
    /* 10 MiB of F32; both S leave edge tiles, 40016 makes rows of whole lines */
    enum { C = 64, S = 40008, S_LINES = 40016 };
    const size_t n = (size_t)C * S_LINES;
    uint32_t *src = malloc(n * 4), *buf = malloc((n + 32) * 4);
    assert_non_null(src);
    assert_non_null(buf);
    assert_true((size_t)C * S * 4 >= GRADREF__STREAM_MIN_BYTES);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint32_t)(i * 2654435761u);
    copy_streamed_rows(src, buf, C, S);
    copy_streamed_rows(src, buf, C, S_LINES);
    /* as gs3d writes dx: planes of (C, 1, H, W) from a channels-last buffer into NCDHW */
    const int64_t D = 3, HW = S / D, s5[5] = {0, 1, 0, 0, C}, d5[5] = {0, D * HW, HW, 0, 1},
                  sh5[5] = {1, C, 1, 1, HW};
    uint32_t *dst = (uint32_t *)(((uintptr_t)buf + 31) & ~(uintptr_t)31);
    memset(buf, 0xab, (n + 16) * 4);
    for (int64_t z = 0; z < D; z++)
        gradref__copy5_part(sh5, src + z * HW * C, GRADREF_F32, s5, dst + z * HW, GRADREF_F32, d5,
                            (size_t)(C * D * HW) * 4, 1, GRADREF__ISA_MAX);
    for (int64_t c = 0; c < C; c++)
        for (int64_t z = 0; z < D; z++)
            for (int64_t i = 0; i < HW; i++)
                if (dst[(c * D + z) * HW + i] != src[(z * HW + i) * C + c])
                    fail_msg("part: dst[%lld][%lld][%lld] differs", (long long)c, (long long)z,
                             (long long)i);
    free(src);
    free(buf);
}

static void test_copy_errors(void **state) {
    (void)state;
    static float a[64], b[64];
    static int32_t ia[64];
    int64_t shape[2] = {4, 4}, other[2] = {4, 5}, st[2] = {4, 1}, st5[2] = {5, 1};
    gradref_tensor src = desc(a, GRADREF_F32, 2, shape, st),
                   dst = desc(b, GRADREF_F32, 2, shape, st);
    for (int i = 0; i < 64; i++)
        b[i] = -1.0f;
    struct {
        gradref_tensor s, d;
        gradref_status expect;
    } cases[] = {
        {src, desc(b, GRADREF_F32, 2, other, st5), GRADREF_ERR_SHAPE},
        {src, desc(b, GRADREF_F32, 1, shape, st), GRADREF_ERR_RANK},
        {src, desc(ia, GRADREF_I32, 2, shape, st), GRADREF_ERR_DTYPE}, /* float -> int */
        {desc(ia, GRADREF_I32, 2, shape, st), desc(b, GRADREF_I8, 2, shape, st), GRADREF_ERR_DTYPE},
        {src, desc(a + 8, GRADREF_F32, 2, shape, st), GRADREF_ERR_ALIAS},
        {src, desc(b, GRADREF_F32, 2, shape, (int64_t[]){1, 1}), GRADREF_ERR_STRIDE},
        {src, desc(b, 9, 2, shape, st), GRADREF_ERR_DTYPE},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_int_equal(gradref_copy(&cases[c].s, &cases[c].d, NULL), cases[c].expect);
        assert_true(strncmp(gradref_last_error(), "copy: ", 6) == 0);
        for (int i = 0; i < 64; i++)
            assert_true(b[i] == -1.0f);
    }
    assert_int_equal(gradref_copy(NULL, &dst, NULL), GRADREF_ERR_NULL);
    assert_int_equal(gradref_copy(&src, NULL, NULL), GRADREF_ERR_NULL);
    gradref_exec bad = {NULL, 0, -2, 0};
    assert_int_equal(gradref_copy(&src, &dst, &bad), GRADREF_ERR_PARAM);
    bad.num_threads = 1;
    bad.precision = 99; /* not a gradref_precision */
    assert_int_equal(gradref_copy(&src, &dst, &bad), GRADREF_ERR_PARAM);
    for (int i = 0; i < 64; i++)
        assert_true(b[i] == -1.0f);
    /* int -> wider int and int -> float are exact or rounded once */
    int64_t wide[16];
    ia[0] = -7;
    ia[1] = INT32_MAX;
    gradref_tensor is = desc(ia, GRADREF_I32, 2, shape, st),
                   ws = desc(wide, GRADREF_I64, 2, shape, st);
    assert_int_equal(gradref_copy(&is, &ws, NULL), GRADREF_OK);
    assert_int_equal(wide[0], -7);
    assert_int_equal(wide[1], INT32_MAX);
}

/* ---------------------------------------------------------------- exec and workspace */

static void test_exec_and_workspace(void **state) {
    (void)state;
    gradref__ctx ctx;
    assert_int_equal(gradref__exec_resolve("op", NULL, &ctx), GRADREF_OK);
    assert_true(ctx.num_threads >= 1);
    assert_int_equal(ctx.precision, GRADREF_PRECISION_DEFAULT);
    assert_null(ctx.workspace);
    gradref_exec e = {NULL, 0, 2, GRADREF_PRECISION_HIGH};
    assert_int_equal(gradref__exec_resolve("op", &e, &ctx), GRADREF_OK);
    assert_int_equal(ctx.precision, GRADREF_PRECISION_HIGH);
#ifdef _OPENMP
    assert_int_equal(ctx.num_threads, 2);
#else
    assert_int_equal(ctx.num_threads, 1);
#endif
    e.num_threads = -1;
    assert_int_equal(gradref__exec_resolve("op", &e, &ctx), GRADREF_ERR_PARAM);
    assert_string_equal(gradref_last_error(), "op: exec.num_threads is -1, outside 0..1024");

    assert_int_equal(gradref__workspace_bytes(0), 0);
    assert_int_equal(gradref__workspace_bytes(100), 100 + GRADREF__WORKSPACE_ALIGN);
    static unsigned char buf[1024];
    gradref_exec given = {buf + 3, 100 + GRADREF__WORKSPACE_ALIGN, 1, 0};
    void *ptr, *owned;
    assert_int_equal(gradref__exec_resolve("op", &given, &ctx), GRADREF_OK);
    assert_int_equal(gradref__workspace_acquire("op", &ctx, 100, &ptr, &owned), GRADREF_OK);
    assert_null(owned);
    assert_true((uintptr_t)ptr % GRADREF__WORKSPACE_ALIGN == 0);
    assert_true((unsigned char *)ptr >= buf + 3 &&
                (unsigned char *)ptr + 100 <= buf + 3 + given.workspace_bytes);
    assert_int_equal(gradref__workspace_acquire("op", &ctx, 101, &ptr, &owned),
                     GRADREF_ERR_WORKSPACE);
    assert_string_equal(gradref_last_error(),
                        "op: exec.workspace_bytes is 164 but 165 are required");
    assert_int_equal(gradref__workspace_acquire("op", &ctx, 0, &ptr, &owned), GRADREF_OK);
    assert_null(ptr);
    assert_int_equal(gradref__exec_resolve("op", NULL, &ctx), GRADREF_OK);
    assert_int_equal(gradref__workspace_acquire("op", &ctx, 1000, &ptr, &owned), GRADREF_OK);
    assert_non_null(owned);
    assert_true((uintptr_t)ptr % GRADREF__WORKSPACE_ALIGN == 0);
    memset(ptr, 0, 1000);
    gradref__workspace_release(owned);
    assert_int_equal(gradref__workspace_acquire("op", &ctx, SIZE_MAX - 8, &ptr, &owned),
                     GRADREF_ERR_OVERFLOW);
    /* above 32 MiB the block is mapped (huge pages): aligned, every byte writable */
    const size_t big = (size_t)40 << 20;
    assert_int_equal(gradref__workspace_acquire("op", &ctx, big, &ptr, &owned), GRADREF_OK);
    assert_non_null(owned);
    assert_true((uintptr_t)ptr % GRADREF__WORKSPACE_ALIGN == 0);
    memset(ptr, 0x5a, big);
    assert_int_equal(((unsigned char *)ptr)[big - 1], 0x5a);
    gradref__workspace_release(owned);
    gradref__workspace_release(NULL);
}

/* A NULL workspace gives the bits of a caller's: for grid_sampler3d_grad with one large image
 * (its internal workspace over 32 MiB, mapped) and with five images (run in groups of images
 * to keep the allocation small, where a caller's workspace takes the batch at once). */
static void check_null_workspace_bits(int64_t N, int64_t Do, int64_t Ho, int64_t Wo,
                                      size_t min_need) {
    enum { C = 2, S = 8 };
    const int64_t xs[5] = {N, C, S, S, S}, gs[5] = {N, Do, Ho, Wo, 3}, ys[5] = {N, C, Do, Ho, Wo};
    gradref_tensor x, grid, grad, dx[2], dgrid[2];
    tu_rng r = tu_rng_make(77);
    void *xd = tu_make_tensor(&x, GRADREF_F32, 5, xs, NULL, NULL, NULL, &r),
         *gd = tu_make_tensor(&grid, GRADREF_F32, 5, gs, NULL, NULL, NULL, &r),
         *yd = tu_make_tensor(&grad, GRADREF_F32, 5, ys, NULL, NULL, NULL, &r);
    const int64_t counts[3] = {N * C * S * S * S, N * Do * Ho * Wo * 3, N * C * Do * Ho * Wo};
    float *data[3] = {xd, gd, yd};
    for (int t = 0; t < 3; t++)
        for (int64_t i = 0; i < counts[t]; i++)
            data[t][i] = (float)(tu_uniform(&r) * (t == 1 ? 2.2 : 2.0) - (t == 1 ? 1.1 : 1.0));
    void *dxd[2], *dgd[2];
    for (int k = 0; k < 2; k++) {
        dxd[k] = tu_make_tensor(&dx[k], GRADREF_F32, 5, xs, NULL, NULL, NULL, &r);
        dgd[k] = tu_make_tensor(&dgrid[k], GRADREF_F32, 5, gs, NULL, NULL, NULL, &r);
    }
    gradref_grid_sampler3d_params p = {GRADREF_INTERP_BILINEAR, GRADREF_PAD_ZEROS, 0};
    size_t need = 0;
    assert_int_equal(
        gradref_grid_sampler3d_grad_workspace_size(&p, &grad, &x, &grid, &dx[0], &dgrid[0], &need),
        GRADREF_OK);
    assert_true(need > min_need);
    void *ws = malloc(need);
    assert_non_null(ws);
    gradref_exec given = {ws, need, 0, GRADREF_PRECISION_DEFAULT};
    assert_int_equal(gradref_grid_sampler3d_grad(&p, &grad, &x, &grid, &dx[0], &dgrid[0], &given),
                     GRADREF_OK);
    assert_int_equal(gradref_grid_sampler3d_grad(&p, &grad, &x, &grid, &dx[1], &dgrid[1], NULL),
                     GRADREF_OK);
    tu_expect_same_bits(&dx[1], &dx[0], "dx");
    tu_expect_same_bits(&dgrid[1], &dgrid[0], "dgrid");
    free(ws);
    free(xd), free(gd), free(yd);
    for (int k = 0; k < 2; k++)
        free(dxd[k]), free(dgd[k]);
}

/* A dim blocked by 1 on one side and by 2 on the other: the block-1 tensor's elements are
 * -strides[d] apart whatever its slot stride says (an audit's case: the split took the slot's
 * stride 100 as the step inside the block and wrote past dst). Both directions, guards kept. */
static void test_copy_block_of_one(void **state) {
    (void)state;
    enum { N = 8, GUARD = 256 };
    float two[12 + 2 * GUARD], one[2 * N + 2 * GUARD];
    for (int dir = 0; dir < 2; dir++) {
        for (int i = 0; i < 12 + 2 * GUARD; i++)
            two[i] = dir ? -1.0f : (float)i;
        for (int i = 0; i < 2 * N + 2 * GUARD; i++)
            one[i] = dir ? (float)i : -1.0f;
        /* blocks of 2 three elements apart (outer -3, inner 1); blocks of 1 two apart */
        gradref_tensor t2 = desc(two + GUARD, GRADREF_F32, 1, (int64_t[]){N}, (int64_t[]){-3});
        t2.shape[1] = 2;
        t2.strides[1] = 1;
        gradref_tensor t1 = desc(one + GUARD, GRADREF_F32, 1, (int64_t[]){N}, (int64_t[]){-2});
        t1.shape[1] = 1;
        t1.strides[1] = 100;
        assert_int_equal(dir ? gradref_copy(&t1, &t2, NULL) : gradref_copy(&t2, &t1, NULL),
                         GRADREF_OK);
        for (int i = 0; i < N; i++)
            assert_true(one[GUARD + 2 * i] == two[GUARD + (i / 2) * 3 + i % 2]);
        const float *guarded = dir ? two : one;
        const int size = dir ? 12 : 2 * N;
        for (int i = 0; i < GUARD; i++) {
            assert_true(guarded[i] == -1.0f);
            assert_true(guarded[GUARD + size + i] == -1.0f);
        }
    }
}

static void test_null_workspace_bits(void **state) {
    (void)state;
    check_null_workspace_bits(1, 16, 64, 256, (size_t)32 << 20); /* mapped, huge pages */
    check_null_workspace_bits(5, 16, 64, 64, (size_t)31 << 20);  /* groups of images */
}

/* The kernel levels' ladder: this architecture's names in order (what GRADREF_MAX_ISA takes),
 * "?" past its top, the CPU's level on it, and the picker's table: the highest present at or
 * below both the cap and the CPU's level. */
/* A 16-bit or 32-bit element of random bits, a third of them zeros, infinities, NaNs or the
 * least subnormals of either sign. */
static uint32_t magnitude_test_bits(tu_rng *r, int wide) {
    static const uint32_t f32[] = {0u,          0x80000000u, 0x7f800000u, 0xff800000u,
                                   0x7fc00000u, 0xffa00001u, 0x00000001u, 0x80000002u};
    static const uint16_t half[] = {0u, 0x8000u, 0x7f80u, 0xfc00u, 0x7fc0u, 0x7e00u, 1u, 0x8001u};
    const uint64_t u = tu_next(r);
    if (u % 3) return wide ? (uint32_t)(u >> 32) : (uint32_t)(u >> 48);
    return wide ? f32[u >> 61] : half[u >> 61];
}

/* The least nonzero magnitude of the elements at e[0 .. n) (offsets in elements), by the
 * definition: +Inf's bits when none is nonzero and finite. */
static uint32_t least_by_definition(int32_t dt, const void *base, const int64_t *e, int64_t n) {
    float least = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        const float v = fabsf(gradref__load_f32(dt, base, e[i]));
        if (v > 0 && v < least) least = v;
    }
    return gradref__f32_bits(least);
}

/* gradref__least_magnitude_bits and _view against the definition: F32, BF16 and F16, rows of 0
 * to 70 at strides 1 to 3 (the vector loops' tails), and views of 1 to 4 dims (some empty)
 * whose strides are dense in a rotated order or padded, dims of 1 at stride 0 among them. */
static void test_least_magnitude(void **state) {
    (void)state;
    static const int32_t dts[3] = {GRADREF_F32, GRADREF_BF16, GRADREF_F16};
    tu_rng r = tu_rng_make(61);
    uint32_t *buf = malloc(4 * 2048);
    int64_t e[512];
    for (int iter = 0; iter < 3000; iter++) {
        const int32_t dt = dts[iter % 3];
        for (int i = 0; i < 2048; i++) {
            const uint32_t b = magnitude_test_bits(&r, dt == GRADREF_F32);
            if (dt == GRADREF_F32)
                buf[i] = b;
            else
                ((uint16_t *)(void *)buf)[i] = (uint16_t)b;
        }
        const int64_t n = tu_range(&r, 0, 70), stride = tu_range(&r, 1, 3);
        for (int64_t i = 0; i < n; i++)
            e[i] = i * stride;
        assert_int_equal(gradref__least_magnitude_bits(dt, buf, n, stride),
                         least_by_definition(dt, buf, e, n));
        int64_t size[4], st[4], count = 1, span = 1;
        const int rank = (int)tu_range(&r, 1, 4);
        for (int j = 0; j < rank; j++)
            size[j] = tu_range(&r, iter % 50 == 0 ? 0 : 1, 4);
        for (int k = 0; k < rank; k++) { /* dims in a random order, each past the last's span */
            const int j = (int)((k + iter) % rank);
            st[j] = span;
            span *= size[j] + (iter % 4 == 1);
        }
        for (int j = 0; j < rank; j++) {
            count *= size[j];
            if (size[j] == 1 && iter % 3 == 0) st[j] = 0; /* any stride: the call's are often 0 */
        }
        for (int64_t i = 0; i < count; i++) {
            int64_t at = 0, rest = i;
            for (int j = rank - 1; j >= 0; j--) {
                at += rest % size[j] * st[j];
                rest /= size[j];
            }
            e[i] = at;
        }
        assert_int_equal(gradref__least_magnitude_view(dt, buf, rank, size, st),
                         least_by_definition(dt, buf, e, count));
    }
    free(buf);
}

static void test_isa_ladder(void **state) {
    (void)state;
#if defined(GRADREF__X86)
    static const char *const want[] = {"portable", "avx2", "avx512", "avx512_vnni", "avx512_bf16"};
#elif defined(GRADREF__ARM64)
    static const char *const want[] = {"portable", "neon", "neon_dot"};
#else
    static const char *const want[] = {"portable"};
#endif
    assert_int_equal((int)(sizeof want / sizeof *want), GRADREF__ISA_TOP + 1);
    for (int level = 0; level <= GRADREF__ISA_TOP; level++)
        assert_string_equal(gradref__isa_name(level), want[level]);
    assert_string_equal(gradref__isa_name(GRADREF__ISA_TOP + 1), "?");
    assert_string_equal(gradref__isa_name(-1), "?");
    const int cpu = gradref__isa_level();
    assert_true(cpu >= 0 && cpu <= GRADREF__ISA_TOP);
    static const int a = 0, b = 1, c = 2; /* tables at levels 0, 1 and the top */
    const void *tables[GRADREF__ISA_LEVELS] = {&a, &b};
    tables[GRADREF__ISA_TOP] = &c;
    for (int cap = 0; cap < GRADREF__ISA_LEVELS; cap++) {
        const int level = cap < cpu ? cap : cpu;
        const void *expect = level == GRADREF__ISA_TOP ? (const void *)&c
                             : level >= 1              ? (const void *)&b
                                                       : (const void *)&a;
        assert_ptr_equal(gradref__isa_pick(tables, cap), expect);
    }
}

int main(void) {
    tu_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_isa_ladder),
        cmocka_unit_test(test_message_format_and_persistence),
        cmocka_unit_test(test_messages_are_per_thread),
        cmocka_unit_test(test_tensor_init),
        cmocka_unit_test(test_tensor_init_format),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_output_self_overlap),
        cmocka_unit_test(test_alias_detection),
        cmocka_unit_test(test_f16_all_patterns),
        cmocka_unit_test(test_bf16_all_patterns),
        cmocka_unit_test(test_array_conversions),
        cmocka_unit_test(test_least_magnitude),
        cmocka_unit_test(test_sgemm),
        cmocka_unit_test(test_sgemm_indirect),
        cmocka_unit_test(test_rounding_ties),
        cmocka_unit_test(test_rounding_random),
        cmocka_unit_test(test_fmaf_odd),
        cmocka_unit_test(test_nan_stays_nan),
        cmocka_unit_test(test_integer_to_half),
        cmocka_unit_test(test_copy_layouts_and_dtypes),
        cmocka_unit_test(test_copy_bits_and_threads),
        cmocka_unit_test(test_copy_streamed_tiles),
        cmocka_unit_test(test_copy_errors),
        cmocka_unit_test(test_copy_block_of_one),
        cmocka_unit_test(test_copy_nan_payloads),
        cmocka_unit_test(test_exec_and_workspace),
        cmocka_unit_test(test_null_workspace_bits),
    };
    return TU_RUN_GROUP("common", tests);
}
