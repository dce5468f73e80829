/* SPDX-License-Identifier: Apache-2.0 */
/* The same bits everywhere: a fixed set of problems over every operator, mode, dtype, layout and
 * precision (inputs from a fixed generator, NaNs of every kind, Infs, signed zeros and
 * subnormals among them) whose outputs are hashed and held to the hashes committed in
 * tests/golden/hashes.txt, which were made once on x86-64. ctest runs it at every kernel level
 * and on every architecture the test command builds (aarch64 under qemu-user), so a level or an
 * architecture that rounds, orders or signs one bit differently fails here.
 *
 * GRADREF_WRITE_HASHES=FILE writes the hashes instead (after a change that is meant to change
 * results: say so in the commit). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#ifndef GRADREF_HASHES_FILE
#  define GRADREF_HASHES_FILE "tests/golden/hashes.txt"
#endif

/* ---- inputs ---- */

static uint64_t gen_state;

static uint64_t gen(void) {
    uint64_t z = (gen_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* One value's bits in a float dtype: mostly uniform in [-2, 2), one in 16 special. */
static void put(int32_t dtype, void *p, int64_t i, int specials) {
    const uint64_t u = gen();
    const int kind = specials ? (int)(u >> 60) : 15;
    double v = (double)(u >> 11) * 0x1p-53 * 4.0 - 2.0;
    uint64_t b64;
    uint32_t b32;
    float f;
    switch (dtype) {
    case GRADREF_F64:
        memcpy(&b64, &v, 8);
        if (kind == 0) b64 = UINT64_C(0x7ff0000000000123) | (u & 0x8000000000000000u); /* sNaN */
        if (kind == 1) b64 = UINT64_C(0xfff8000000000456);                             /* -qNaN */
        if (kind == 2) b64 = UINT64_C(0x7ff0000000000000) | (u & 0x8000000000000000u);
        if (kind == 3) b64 = UINT64_C(0x8000000000000000);
        memcpy((double *)p + i, &b64, 8);
        break;
    case GRADREF_F32:
        f = (float)v;
        memcpy(&b32, &f, 4);
        if (kind == 0) b32 = 0x7f800123u | (uint32_t)(u & 0x80000000u);
        if (kind == 1) b32 = 0xffc00456u;
        if (kind == 2) b32 = 0x7f800000u | (uint32_t)(u & 0x80000000u);
        if (kind == 3) b32 = 0x80000000u;
        if (kind == 4) b32 = 0x00000042u; /* subnormal */
        memcpy((float *)p + i, &b32, 4);
        break;
    case GRADREF_F16:
    case GRADREF_BF16: {
        const int f16 = dtype == GRADREF_F16;
        uint16_t h = f16 ? tu_round_f16(v) : tu_round_bf16(v);
        if (kind == 0) h = (uint16_t)(f16 ? 0x7c05u : 0x7f85u);
        if (kind == 1) h = (uint16_t)(f16 ? 0xfe07u : 0xffc7u);
        if (kind == 2) h = (uint16_t)(f16 ? 0x7c00u : 0x7f80u);
        if (kind == 3) h = 0x8000u;
        if (kind == 4) h = 0x0003u;
        memcpy((uint16_t *)p + i, &h, 2);
        break;
    }
    case GRADREF_I8: ((int8_t *)p)[i] = (int8_t)(u >> 56); break;
    default: break;
    }
}

typedef struct buf {
    gradref_tensor t;
    void *data;
    size_t bytes;
} buf;

/* A tensor of `shape` (format: NC.. or channels-last when `last`), filled (input) or zeroed. */
static void make(buf *b, int32_t dtype, int ndim, const int64_t *shape, int last, int fill,
                 int specials) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    b->bytes = (size_t)n * tu_dtype_size(dtype);
    b->data = calloc(1, b->bytes ? b->bytes : 1);
    assert_non_null(b->data);
    if (last && ndim >= 4) {
        const int32_t fmt = ndim == 4 ? GRADREF_FORMAT_NHWC : GRADREF_FORMAT_NDHWC;
        assert_int_equal(gradref_tensor_init_format(&b->t, b->data, dtype, fmt, shape), GRADREF_OK);
    } else {
        assert_int_equal(gradref_tensor_init(&b->t, b->data, dtype, ndim, shape), GRADREF_OK);
    }
    if (fill)
        for (int64_t i = 0; i < n; i++)
            put(dtype, b->data, i, specials);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* ---- the committed hashes ---- */

enum { MAX_CASES = 512 };
static char names[MAX_CASES][96];
static uint64_t hashes[MAX_CASES];
static int count, mismatches;

static void record(const char *name, gradref_status s, const buf *outs, int nout) {
    if (s != GRADREF_OK) fail_msg("%s: %s", name, gradref_last_error());
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (int o = 0; o < nout; o++)
        h = fnv(h, outs[o].data, outs[o].bytes);
    assert_true(count < MAX_CASES);
    snprintf(names[count], sizeof names[count], "%s", name);
    hashes[count++] = h;
}

static void check_or_write(void) {
    const char *out = getenv("GRADREF_WRITE_HASHES");
    if (out) {
        FILE *f = fopen(out, "w");
        assert_non_null(f);
        fprintf(f, "# tests/test_hashes.c: output hashes (FNV-1a 64) of its problems, made on "
                   "x86-64\n");
        for (int i = 0; i < count; i++)
            fprintf(f, "%s %016" PRIx64 "\n", names[i], hashes[i]);
        fclose(f);
        printf("wrote %d hashes to %s\n", count, out);
        return;
    }
    FILE *f = fopen(GRADREF_HASHES_FILE, "r");
    if (f == NULL) fail_msg("cannot read %s", GRADREF_HASHES_FILE);
    char line[256];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        char name[96];
        uint64_t want;
        if (line[0] == '#' || sscanf(line, "%95s %" SCNx64, name, &want) != 2) continue;
        for (int i = 0; i < count; i++)
            if (strcmp(names[i], name) == 0) {
                seen++;
                if (hashes[i] != want) {
                    printf("differs: %s (got %016" PRIx64 ", committed %016" PRIx64 ")\n", name,
                           hashes[i], want);
                    mismatches++;
                }
            }
    }
    fclose(f);
    printf("%d problems, %d with a committed hash, %d differ\n", count, seen, mismatches);
    assert_int_equal(seen, count);
    assert_int_equal(mismatches, 0);
}

/* ---- the problems ---- */

static void free_bufs(buf *b, int n) {
    for (int i = 0; i < n; i++)
        free(b[i].data);
}

static const int32_t FLOATS[4] = {GRADREF_F32, GRADREF_F64, GRADREF_F16, GRADREF_BF16};
static const char *const DT[7] = {"f32", "f64", "f16", "bf16", "i8", "i32", "i64"};

static void rope_cases(void) {
    static const int32_t lens[3] = {3, 1, 4};
    for (int d = 0; d < 4; d++)
        for (int mode = 0; mode < 3; mode++)
            for (int prec = 0; prec < 2; prec++) {
                const int64_t D = 16, T = 8, qs[2] = {T, 3 * D}, ks[2] = {T, D}, cs[2] = {12, D};
                buf b[6];
                make(&b[0], FLOATS[d], 2, qs, 0, 1, 1);
                make(&b[1], FLOATS[d], 2, ks, 0, 1, 1);
                make(&b[2], FLOATS[d], 2, cs, 0, 1, 0);
                make(&b[3], FLOATS[d], 2, cs, 0, 1, 0);
                make(&b[4], FLOATS[d], 2, qs, 0, 0, 0);
                make(&b[5], FLOATS[d], 2, ks, 0, 0, 0);
                const int64_t starts[3] = {0, 5, 2};
                gradref_rope_params p = {mode, (int32_t)D, mode == GRADREF_ROPE_HALF ? 12 : 0,
                                         3,    lens,       mode ? starts : NULL};
                gradref_exec e = {NULL, 0, 2, prec};
                char name[96];
                snprintf(name, sizeof name, "rope_m%d_%s_p%d", mode, DT[FLOATS[d]], prec);
                record(
                    name,
                    gradref_rope_grad(&p, &b[0].t, &b[1].t, &b[2].t, &b[3].t, &b[4].t, &b[5].t, &e),
                    b + 4, 2);
                free_bufs(b, 6);
            }
}

static void gs3d_cases(void) {
    for (int d = 0; d < 4; d++)
        for (int m = 0; m < 12; m++)
            for (int last = 0; last < 2; last++) {
                const int64_t xs[5] = {2, 3, 4, 5, 6}, gs[5] = {2, 3, 3, 4, 5},
                              grs[5] = {2, 3, 4, 5, 3};
                buf b[5];
                make(&b[0], FLOATS[d], 5, gs, last, 1, 1);
                make(&b[1], FLOATS[d], 5, xs, last, 1, 1);
                make(&b[2], FLOATS[d], 5, grs, 0, 1, 0);
                make(&b[3], FLOATS[d], 5, xs, last, 0, 0);
                make(&b[4], FLOATS[d], 5, grs, 0, 0, 0);
                gradref_grid_sampler3d_params p = {m / 6, m / 2 % 3, m % 2};
                gradref_exec e = {NULL, 0, 2, m % 3 == 2};
                char name[96];
                snprintf(name, sizeof name, "gs3d_i%d_p%d_a%d_%s_l%d_h%d", p.interpolation,
                         p.padding, p.align_corners, DT[FLOATS[d]], last, e.precision);
                record(name,
                       gradref_grid_sampler3d_grad(&p, &b[0].t, &b[1].t, &b[2].t, &b[3].t, &b[4].t,
                                                   &e),
                       b + 3, 2);
                free_bufs(b, 5);
            }
}

static void cbd_cases(void) {
    static const struct {
        int32_t in, out, prec;
    } kinds[9] = {{GRADREF_F32, GRADREF_F32, 0},   {GRADREF_F64, GRADREF_F64, 0},
                  {GRADREF_F16, GRADREF_F16, 0},   {GRADREF_BF16, GRADREF_F32, 0},
                  {GRADREF_F32, GRADREF_F32, 1},   {GRADREF_F16, GRADREF_F16, 4},
                  {GRADREF_BF16, GRADREF_BF16, 4}, {GRADREF_I8, GRADREF_I32, 0},
                  {GRADREF_I8, GRADREF_I8, -1}};
    for (int k = 0; k < 9; k++)
        for (int g = 0; g < 4; g++) { /* stride 1 or 2, groups 1 or 2, modes, layouts */
            const int64_t G = g % 2 ? 2 : 1, S = g / 2 ? 2 : 1;
            const int64_t fs[4] = {4 * G, 3, 3, 3}, ds[4] = {2, 4 * G, 5, 6};
            const int64_t gsz[4] = {2, 3 * G, (5 - 1) * S + 3 - 2, (6 - 1) * S + 3 - 2};
            buf b[3];
            make(&b[0], kinds[k].in, 4, fs, 0, 1, k == 0 && g == 3); /* one case: filter NaNs */
            make(&b[1], kinds[k].in, 4, ds, g == 1, 1, kinds[k].in != GRADREF_I8);
            make(&b[2], kinds[k].out, 4, gsz, g == 1, 0, 0);
            gradref_conv_params p;
            memset(&p, 0, sizeof p);
            p.mode = g == 2;
            p.groups = (int32_t)G;
            for (int j = 0; j < 2; j++) {
                p.stride[j] = S, p.dilation[j] = 1;
                p.pad[2 * j] = p.pad[2 * j + 1] = 1;
            }
            gradref_exec e = {NULL, 0, 2, kinds[k].prec > 0 ? kinds[k].prec : 0};
            gradref_status s;
            if (kinds[k].prec < 0) {
                const gradref_qs8_scales sc = {0.02f, 0.05f, 0.01f};
                s = gradref_conv_backprop_data_qs8(&p, &sc, &b[0].t, &b[1].t, &b[2].t, &e);
            } else {
                s = gradref_conv_backprop_data(&p, &b[0].t, &b[1].t, &b[2].t, &e);
            }
            char name[96];
            snprintf(name, sizeof name, "cbd_%s_%s_p%d_g%d", DT[kinds[k].in], DT[kinds[k].out],
                     kinds[k].prec, g);
            record(name, s, b + 2, 1);
            free_bufs(b, 3);
        }
}

static void c3f_cases(void) {
    static const struct {
        int32_t in, out, prec;
    } kinds[8] = {{GRADREF_F32, GRADREF_F32, 0}, {GRADREF_F64, GRADREF_F64, 0},
                  {GRADREF_F16, GRADREF_F32, 0}, {GRADREF_BF16, GRADREF_BF16, 0},
                  {GRADREF_F32, GRADREF_F32, 1}, {GRADREF_F32, GRADREF_F32, 2},
                  {GRADREF_F32, GRADREF_F32, 3}, {GRADREF_F16, GRADREF_F16, 1}};
    for (int k = 0; k < 8; k++)
        for (int g = 0; g < 3; g++) {
            const int64_t G = g == 2 ? 2 : 1;
            const int64_t xs[5] = {2, 2 * G, 4, 5, 6}, ws[5] = {3 * G, 2, 2, 3, 3},
                          ys[5] = {2, 3 * G, 3, 3, 4};
            buf b[3];
            make(&b[0], kinds[k].in, 5, xs, g == 1, 1, 1);
            make(&b[1], kinds[k].in, 5, ys, g == 1, 1, k % 2 == 0);
            make(&b[2], kinds[k].out, 5, ws, 0, 0, 0);
            gradref_conv_params p;
            memset(&p, 0, sizeof p);
            p.groups = (int32_t)G;
            for (int j = 0; j < 3; j++)
                p.stride[j] = p.dilation[j] = 1;
            gradref_exec e = {NULL, 0, 2, kinds[k].prec};
            char name[96];
            snprintf(name, sizeof name, "c3f_%s_%s_p%d_g%d", DT[kinds[k].in], DT[kinds[k].out],
                     kinds[k].prec, g);
            record(name, gradref_conv3d_backprop_filter(&p, &b[0].t, &b[1].t, &b[2].t, &e), b + 2,
                   1);
            free_bufs(b, 3);
        }
}

/* One depthwise problem (G channels, a 3^rank filter, pad 1, stride S (S0 along the first dim),
 * diff of sizes O, with specials) in dtype dt, channels-last when `last`, recorded as `name`. */
static void cbd_depthwise_case(const char *name, int32_t dt, int rank, const int64_t *O, int S0,
                               int S, int last, int32_t mode, int64_t G) {
    int64_t fs[5] = {G, 1}, ds[5] = {2, G}, gsz[5] = {2, G};
    for (int j = 0; j < rank; j++)
        fs[2 + j] = 3, ds[2 + j] = O[j], gsz[2 + j] = (O[j] - 1) * (j ? S : S0) + 1;
    buf b[3];
    make(&b[0], dt, rank + 2, fs, 0, 1, 0);
    make(&b[1], dt, rank + 2, ds, last, 1, 1);
    make(&b[2], dt, rank + 2, gsz, last, 0, 0);
    gradref_conv_params p;
    memset(&p, 0, sizeof p);
    p.mode = mode;
    p.groups = (int32_t)G;
    for (int j = 0; j < rank; j++) {
        p.stride[j] = j ? S : S0, p.dilation[j] = 1;
        p.pad[2 * j] = p.pad[2 * j + 1] = 1;
    }
    gradref_exec e = {NULL, 0, 2, 0};
    record(name, gradref_conv_backprop_data(&p, &b[0].t, &b[1].t, &b[2].t, &e), b + 2, 1);
    free_bufs(b, 3);
}

/* 2-D depthwise in dtype dt: NCHW and NHWC, stride 1 and 2, a small plane and a larger one:
 * the plane, lanes, stride-2 and channels-last kernels. */
static void cbd_depthwise_cases(int32_t dt) {
    char name[96];
    for (int c = 0; c < 8; c++) {
        const int last = c % 2, S = c / 2 % 2 ? 2 : 1;
        const int64_t O[2] = {c / 4 ? 14 : 5, c / 4 ? 15 : 6};
        snprintf(name, sizeof name, "cbd_dw_%s_l%d_s%d_o%lld", DT[dt], last, S, (long long)O[0]);
        cbd_depthwise_case(name, dt, 2, O, S, S, last, c % 3 == 0, 8);
    }
}

/* 3-D depthwise in dtype dt: NCDHW and NDHWC, stride 1 and 2: the planes and the channels-last
 * rows across planes. */
static void cbd_depthwise_3d_cases(int32_t dt) {
    char name[96];
    for (int c = 0; c < 4; c++) {
        const int last = c % 2, S = c / 2 ? 2 : 1;
        const int64_t O[3] = {4, 5, 6};
        snprintf(name, sizeof name, "cbd_dw3_%s_l%d_s%d", DT[dt], last, S);
        cbd_depthwise_case(name, dt, 3, O, S, S, last, c % 3 == 0, 8);
    }
}

/* Channels-last depthwise in dtype dt of G0 and then G1 channels, stride 1 and 2: channels that
 * end in a part of a block (12: of 8 and 16 lanes, 6: of 4, 8 and 16), and groups of whole
 * blocks (136: 17 blocks of 8, 8 of 16 and a part; 40: 5 of 8, 2 of 16 and a part). */
static void cbd_depthwise_part_cases(int32_t dt, int G0, int G1) {
    char name[96];
    for (int c = 0; c < 4; c++) {
        const int S = c % 2 ? 2 : 1, G = c / 2 ? G1 : G0;
        const int64_t O[2] = {7, 9};
        snprintf(name, sizeof name, "cbd_dw_%s_g%d_s%d", DT[dt], G, S);
        cbd_depthwise_case(name, dt, 2, O, S, S, 1, c % 3 == 0, G);
    }
}

/* 3-D depthwise at stride 2 along h and w, the depth at stride 1 (X3D's) and 2, in dtype dt,
 * NCDHW and NDHWC, rows past two blocks of 16 columns: the stride-2 planes over depth taps. */
static void cbd_depthwise_3d_s2_cases(int32_t dt) {
    char name[96];
    for (int c = 0; c < 4; c++) {
        const int last = c % 2, S0 = c / 2 ? 2 : 1;
        const int64_t O[3] = {3, 6, 21};
        snprintf(name, sizeof name, "cbd_dw3_%s_l%d_s%d22", DT[dt], last, S0);
        cbd_depthwise_case(name, dt, 3, O, S0, 2, last, c % 3 == 0, 8);
    }
}

static void recat_and_copy_cases(void) {
    for (int d = 0; d < 4; d++) {
        const int64_t gs[2] = {5, 9}, n = 45;
        const int64_t dims[3] = {2, 0, 7};
        buf b[2];
        make(&b[0], FLOATS[d], 2, gs, 0, 1, 1);
        make(&b[1], FLOATS[d], 1, &n, 0, 0, 0);
        char name[96];
        snprintf(name, sizeof name, "recat_%s", DT[FLOATS[d]]);
        record(name, gradref_recat_embedding_grad_output_mixed_d(&b[0].t, dims, 3, &b[1].t, NULL),
               b + 1, 1);
        free_bufs(b, 2);
        for (int to = 0; to < 4; to++) { /* conversions, and a layout change */
            const int64_t s4[4] = {2, 3, 4, 5};
            make(&b[0], FLOATS[d], 4, s4, 0, 1, 1);
            make(&b[1], FLOATS[to], 4, s4, 1, 0, 0);
            snprintf(name, sizeof name, "copy_%s_%s", DT[FLOATS[d]], DT[FLOATS[to]]);
            record(name, gradref_copy(&b[0].t, &b[1].t, NULL), b + 1, 1);
            free_bufs(b, 2);
        }
    }
}

static void test_hashes(void **state) {
    (void)state;
    gen_state = 20261202;
    recat_and_copy_cases();
    rope_cases();
    gs3d_cases();
    cbd_cases();
    c3f_cases();
    /* last, in the order they were added: the inputs of the cases before keep their draws */
    cbd_depthwise_cases(GRADREF_F32);
    cbd_depthwise_cases(GRADREF_F16);
    cbd_depthwise_cases(GRADREF_BF16);
    cbd_depthwise_3d_cases(GRADREF_F32);
    cbd_depthwise_3d_cases(GRADREF_F16);
    cbd_depthwise_part_cases(GRADREF_F32, 12, 6);
    cbd_depthwise_part_cases(GRADREF_BF16, 12, 6);
    cbd_depthwise_3d_s2_cases(GRADREF_F32);
    cbd_depthwise_3d_s2_cases(GRADREF_F16);
    cbd_depthwise_part_cases(GRADREF_F32, 136, 40);
    cbd_depthwise_part_cases(GRADREF_F16, 136, 40);
    check_or_write();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_hashes)};
    return TU_RUN_GROUP("hashes", tests);
}
