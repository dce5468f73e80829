/* SPDX-License-Identifier: Apache-2.0 */
/* GRADREF_VERBOSE: ctest runs this suite with the variable set (every call writes one line of
 * ten fields to stderr, naming the operator, what ran, the kernel level, threads, precision,
 * tensors, workspace given and used, and milliseconds) and without it (no line at all). A
 * call that fails writes nothing. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/exec.h"
#include "common/isa.h"
#include "conv3d_backprop_filter/c3f_internal.h"
#include "conv3d_backprop_filter/c3f_kernels.h"
#include "conv_backprop_data/cbd_kernels.h"
#include "recat/recat_kernels.h"
#include "test_util.h"

static FILE *capture;
static int saved_stderr;

static void capture_start(void) {
    fflush(stderr);
    capture = tmpfile();
    assert_non_null(capture);
    saved_stderr = dup(2);
    assert_true(dup2(fileno(capture), 2) >= 0);
}

/* The captured call lines (up to 8 of 2000 bytes each); returns their count. GRADREF_VERBOSE=2's
 * lines on the strategies a call passed over go to skips (up to 32), counted in *skipped. */
static int capture_end(char lines[8][2000], char skips[32][2000], int *skipped) {
    fflush(stderr);
    assert_true(dup2(saved_stderr, 2) >= 0);
    close(saved_stderr);
    rewind(capture);
    int n = 0, k = 0;
    char line[2000];
    while (fgets(line, sizeof line, capture) != NULL) {
        if (strncmp(line, "gradref_verbose_skip,", 21) == 0) {
            if (k < 32) snprintf(skips[k++], 2000, "%s", line);
        } else if (n < 8) {
            snprintf(lines[n++], 2000, "%s", line);
        }
    }
    fclose(capture);
    *skipped = k;
    return n;
}

static int verbose_level(void) {
    const char *v = getenv("GRADREF_VERBOSE");
    return v != NULL ? atoi(v) : 0;
}

static int verbose_set(void) {
    return verbose_level() != 0;
}

/* Checks one line's ten fields against what the call was: op, strategy, the level of the
 * operator's kernel table (under GRADREF_MAX_ISA: ctest runs the suite at every level), threads,
 * precision name, a fragment of the tensors field, the workspace given. */
static void expect_line(const char *line, const char *op, const char *strategy, const char *isa,
                        int threads, const char *precision, const char *tensors, size_t given) {
    char copy[2000], *field[11];
    snprintf(copy, sizeof copy, "%s", line);
    copy[strcspn(copy, "\n")] = '\0';
    int n = 0;
    for (char *save = NULL, *f = strtok_r(copy, ",", &save); f && n < 11;
         f = strtok_r(NULL, ",", &save))
        field[n++] = f;
    if (n != 10) fail_msg("%d fields in: %s", n, line);
    assert_string_equal(field[0], "gradref_verbose");
    assert_string_equal(field[1], op);
    assert_string_equal(field[2], strategy);
    assert_string_equal(field[3], isa);
    assert_int_equal(atoi(field[4]), threads);
    assert_string_equal(field[5], precision);
    if (strstr(field[6], tensors) == NULL) fail_msg("no '%s' in %s", tensors, field[6]);
    assert_int_equal(strtoull(field[7], NULL, 10), given);
    assert_true(strtod(field[9], NULL) >= 0.0);
}

typedef struct conv_call {
    gradref_conv_params p;
    gradref_tensor filter, diff, grad;
    void *buf[3];
} conv_call;

/* conv_backprop_data, N images of 4 channels 6 x 6, 3 x 3, pad 1, of dtype dt. */
static void make_conv(conv_call *c, int64_t N, int32_t dt, tu_rng *r) {
    memset(c, 0, sizeof *c);
    c->p.mode = GRADREF_CONV_CROSS_CORRELATION;
    c->p.groups = 1;
    for (int j = 0; j < 2; j++)
        c->p.stride[j] = c->p.dilation[j] = 1, c->p.pad[2 * j] = c->p.pad[2 * j + 1] = 1;
    const int64_t fshape[4] = {4, 4, 3, 3}, dshape[4] = {N, 4, 6, 6};
    size_t bytes;
    c->buf[0] = tu_make_tensor(&c->filter, dt, 4, fshape, NULL, NULL, &bytes, r);
    c->buf[1] = tu_make_tensor(&c->diff, dt, 4, dshape, NULL, NULL, &bytes, r);
    c->buf[2] = tu_make_tensor(&c->grad, dt, 4, dshape, NULL, NULL, &bytes, r);
    memset(c->buf[0], 0, 4 * 4 * 9 * tu_dtype_size(dt)); /* finite values */
    memset(c->buf[1], 0, (size_t)N * 4 * 36 * tu_dtype_size(dt));
}

static void free_conv(conv_call *c) {
    for (int i = 0; i < 3; i++)
        free(c->buf[i]);
}

static gradref_status call_conv(conv_call *c, const gradref_exec *e) {
    return gradref_conv_backprop_data(&c->p, &c->filter, &c->diff, &c->grad, e);
}

/* conv_backprop_data's strategies: the fast path (NULL workspace), the no-workspace path (a
 * 1-byte one), an empty batch, MegEngine's DEFAULT; then a failing call. */
static void test_conv_backprop_data_lines(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(1);
    conv_call c, empty, half, wide;
    make_conv(&c, 2, GRADREF_F32, &r);
    make_conv(&empty, 0, GRADREF_F32, &r);
    make_conv(&half, 1, GRADREF_F16, &r);
    make_conv(&wide, 1, GRADREF_F64, &r);
    char byte, lines[8][2000];
    const gradref_exec plain = {NULL, 0, 1, GRADREF_PRECISION_DEFAULT},
                       tiny = {&byte, 1, 2, GRADREF_PRECISION_DEFAULT},
                       megengine = {NULL, 0, 1, GRADREF_PRECISION_MEGENGINE_DEFAULT},
                       terms = {NULL, 0, 1, GRADREF_TERM_MAGNITUDES};
    capture_start();
    assert_int_equal(call_conv(&c, &plain), GRADREF_OK);
    assert_int_equal(call_conv(&c, &tiny), GRADREF_OK);
    assert_int_equal(call_conv(&empty, &plain), GRADREF_OK);
    assert_int_equal(call_conv(&half, &megengine), GRADREF_OK);
    assert_int_equal(call_conv(&wide, &terms), GRADREF_OK);
    c.p.groups = 3; /* 4 channels: refused, and no line */
    assert_int_not_equal(call_conv(&c, &plain), GRADREF_OK);
    char skips[32][2000];
    int skipped;
    const int n = capture_end(lines, skips, &skipped);
    free_conv(&c), free_conv(&empty), free_conv(&half), free_conv(&wide);
    if (!verbose_set()) {
        assert_int_equal(n + skipped, 0);
        return;
    }
    assert_int_equal(n, 5);
    const char *op = "conv_backprop_data", *isa = gradref__cbd_kernels_for(GRADREF__ISA_MAX)->isa;
    expect_line(lines[0], op, "phases", isa, 1, "DEFAULT", "filter:F32:4x4x3x3:36x9x3x1", 0);
#ifdef _OPENMP
    const int two = 2;
#else
    const int two = 1; /* a build without OpenMP runs on the calling thread */
#endif
    /* a 1-byte workspace: the first strategy that needs none, the phases' GEMMs on the stack */
    expect_line(lines[1], op, "direct", isa, two, "DEFAULT", "diff:F32:2x4x6x6", 1);
    expect_line(lines[2], op, "zero_output", isa, 1, "DEFAULT", "grad:F32:0x4x6x6", 0);
    if (strstr(lines[3], "megengine_lanes") == NULL)
        expect_line(lines[3], op, "megengine_scatter", isa, 1, "MEGENGINE_DEFAULT", "F16", 0);
    else
        expect_line(lines[3], op, "megengine_lanes", isa, 1, "MEGENGINE_DEFAULT", "F16", 0);
    /* a GRADREF_TERM_* call: the reference loop, the flag beside the precision */
    expect_line(lines[4], op, "reference", isa, 1, "DEFAULT+TERM_MAGNITUDES", "grad:F64", 0);
    if (verbose_level() < 2) {
        assert_int_equal(skipped, 0);
        return;
    }
    /* the rows passed over, in table order: the plain call's three, the 1-byte call's four
     * (phases for want of workspace), none for the empty batch, the MegEngine call's lanes row
     * when it has no lanes kernel, the TERM call's five */
    assert_true(skipped == 12 || skipped == 13);
    assert_non_null(strstr(skips[0], ",conv_backprop_data,megengine_lanes,"));
    assert_non_null(strstr(skips[2], ",depthwise,not depthwise"));
    assert_non_null(strstr(skips[6], ",phases,the caller's workspace holds less than"));
}

/* conv3d_backprop_filter and recat: their names, tensors and a caller's workspace. */
static void test_other_lines(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(2);
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    p.mode = GRADREF_CONV_CROSS_CORRELATION, p.groups = 1;
    for (int j = 0; j < 3; j++)
        p.stride[j] = p.dilation[j] = 1;
    const int64_t xshape[5] = {1, 2, 3, 3, 3}, yshape[5] = {1, 2, 1, 1, 1},
                  wshape[5] = {2, 2, 3, 3, 3}, gshape[2] = {2, 6}, oshape[1] = {12};
    gradref_tensor x, dy, dw, go, out;
    size_t bytes;
    void *buf[5] = {tu_make_tensor(&x, GRADREF_F32, 5, xshape, NULL, NULL, &bytes, &r),
                    tu_make_tensor(&dy, GRADREF_F32, 5, yshape, NULL, NULL, &bytes, &r),
                    tu_make_tensor(&dw, GRADREF_F32, 5, wshape, NULL, NULL, &bytes, &r),
                    tu_make_tensor(&go, GRADREF_F32, 2, gshape, NULL, NULL, &bytes, &r),
                    tu_make_tensor(&out, GRADREF_F32, 1, oshape, NULL, NULL, &bytes, &r)};
    static char workspace[1 << 20];
    const gradref_exec e = {workspace, sizeof workspace, 1, GRADREF_PRECISION_DEFAULT};
    const int64_t dims[2] = {4, 2};
    char lines[8][2000];
    capture_start();
    assert_int_equal(gradref_conv3d_backprop_filter(&p, &x, &dy, &dw, &e), GRADREF_OK);
    assert_int_equal(gradref_recat_embedding_grad_output_mixed_d(&go, dims, 2, &out, NULL),
                     GRADREF_OK);
    char skips[32][2000];
    int skipped;
    const int n = capture_end(lines, skips, &skipped);
    for (int i = 0; i < 5; i++)
        free(buf[i]);
    if (!verbose_set()) {
        assert_int_equal(n + skipped, 0);
        return;
    }
    assert_int_equal(n, 2);
    static const char *const c3f[] = {"reference", "gemm", "gemm_row_tiles", "gemm_indirect",
                                      "gemm_split_reduction"};
    int known = 0;
    for (int i = 0; i < 5; i++)
        if (strstr(lines[0], c3f[i])) known = 1;
    assert_true(known);
    assert_non_null(strstr(lines[0], "dw:F32:2x2x3x3x3:54x27x9x3x1"));
    assert_non_null(strstr(lines[0], ",1048576,"));
    char c3f_isa[64];
    snprintf(c3f_isa, sizeof c3f_isa, ",%s,", gradref__c3f_kernels_for(GRADREF__ISA_MAX)->isa);
    assert_non_null(strstr(lines[0], c3f_isa));
    expect_line(lines[1], "recat_embedding_grad_output_mixed_d", "fast",
                gradref__recat_kernels_for(GRADREF__ISA_MAX)->isa, gradref__default_threads(),
                "DEFAULT", "grad_output:F32:2x6:6x1 out:F32:12:1", 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_backprop_data_lines),
        cmocka_unit_test(test_other_lines),
    };
    return TU_RUN_GROUP("verbose", tests);
}
