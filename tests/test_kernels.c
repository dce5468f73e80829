/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel testers: every entry of every kernel table at every level this CPU runs, held bit for
 * bit to the portable entry (or, where the portable table has none, to a plain loop written
 * here, or to the portable row kernel applied row by row), over edge sweeps: every length up to
 * two vectors and past them, every tail, misaligned pointers, streaming and ordinary stores,
 * inputs with NaNs of every kind, Infs, subnormals and signed zeros. The operator suites test
 * the same kernels through whole calls; these name the kernel that is wrong. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/convert.h"
#include "common/convert_array.h"
#include "common/gemm_kernels.h"
#include "common/isa.h"
#include "common/nan.h"
#include "common/stream.h"
#include "conv3d_backprop_filter/c3f_internal.h"
#include "conv3d_backprop_filter/c3f_kernels.h"
#include "conv_backprop_data/cbd_kernels.h"
#include "grid_sampler3d_grad/gs3d_kernels.h"
#include "recat/recat_kernels.h"
#include "rope_grad/rope_grad_kernels.h"
#include "test_util.h"

/* Random bits with specials mixed in: about one element in `one_in` a NaN (either sign, quiet or
 * signalling, a payload), an Inf, a signed zero or a subnormal, as the dtype has them. */
static void fill_specials(void *p, int32_t dtype, int64_t n, tu_rng *r) {
    for (int64_t i = 0; i < n; i++) {
        const uint64_t u = tu_next(r);
        const int kind = (int)(u % 12);
        if (dtype == GRADREF_F32) {
            static const uint32_t special[6] = {0x7fc00001u, 0xff800123u, 0x7f800000u,
                                                0x80000000u, 0x00000042u, 0xffc00000u};
            float v = (float)(tu_uniform(r) * 8.0 - 4.0);
            uint32_t b;
            memcpy(&b, &v, 4);
            if (kind < 6) b = special[kind];
            memcpy((float *)p + i, &b, 4);
        } else {
            static const uint16_t f16[6] = {0x7e01u, 0xfc23u, 0x7c00u, 0x8000u, 0x0003u, 0xfe00u};
            static const uint16_t bf16[6] = {0x7fc1u, 0xff83u, 0x7f80u, 0x8000u, 0x0005u, 0xffc0u};
            const float v = (float)(tu_uniform(r) * 8.0 - 4.0);
            uint16_t h = dtype == GRADREF_F16 ? gradref__f32_to_f16(v) : gradref__f32_to_bf16(v);
            if (kind < 6) h = dtype == GRADREF_F16 ? f16[kind] : bf16[kind];
            memcpy((uint16_t *)p + i, &h, 2);
        }
    }
}

static void fill_weights(float *w, int64_t n, tu_rng *r) {
    for (int64_t i = 0; i < n; i++)
        w[i] = (float)(tu_uniform(r) * 2.0 - 1.0);
}

/* The levels above portable this CPU runs whose table is not the one below it. */
#define FOR_EACH_LEVEL(level) for (int level = 1; level <= gradref__isa_level(); level++)

static void expect_bytes(const void *got, const void *want, size_t n, const char *what,
                         const char *isa, int64_t len, int extra) {
    if (memcmp(got, want, n) != 0)
        fail_msg("%s at %s: length %lld (case %d) differs from the reference", what, isa,
                 (long long)len, extra);
}

/* ---- rope_grad: row kernels against the portable ones, heads kernels against rows ---- */

enum { ROPE_MAX = 300, ROPE_PAD = 8 };

static void test_rope_rows(void **state) {
    (void)state;
    const gradref__rope_kernels *base = gradref__rope_kernels_for(GRADREF__ISA_PORTABLE);
    tu_rng r = tu_rng_make(1);
    static const int32_t dtypes[3] = {GRADREF_F32, GRADREF_F16, GRADREF_BF16};
    char *g = malloc(4 * (ROPE_MAX + ROPE_PAD)), *gb = malloc(4 * (ROPE_MAX + ROPE_PAD));
    char *want = malloc(4 * 2 * (ROPE_MAX + ROPE_PAD)),
         *got = malloc(4 * 2 * (ROPE_MAX + ROPE_PAD));
    float w[4][ROPE_MAX];
    FOR_EACH_LEVEL(level) {
        const gradref__rope_kernels *k = gradref__rope_kernels_for(level);
        if (k == gradref__rope_kernels_for(level - 1)) continue;
        for (int d = 0; d < 3; d++) {
            const int32_t dt = dtypes[d];
            const size_t es = gradref__rope_esize(dt);
            for (int64_t n = 2; n <= ROPE_MAX; n += n < 70 ? 2 : 46)
                for (int c = 0; c < 4; c++) { /* c: misalignment in elements, and stream */
                    const int stream = c & 1, off = c;
                    fill_specials(g + off * es, dt, n, &r);
                    fill_specials(gb + off * es, dt, n, &r);
                    for (int i = 0; i < 4; i++)
                        fill_weights(w[i], n, &r);
                    const size_t bytes = (size_t)n * es;
                    char *o = got + off * es, *ob = got + off * es + bytes;
                    char *wo = want + off * es, *wob = want + off * es + bytes;
                    base->atb_row(dt, g + off * es, wo, w[0], n, 0);
                    k->atb_row(dt, g + off * es, o, w[0], n, stream);
                    gradref__stream_fence();
                    expect_bytes(o, wo, bytes, "rope atb_row", k->isa, n, c);
                    base->interleaved_row(dt, g + off * es, wo, w[0], w[1], n, 0);
                    k->interleaved_row(dt, g + off * es, o, w[0], w[1], n, stream);
                    gradref__stream_fence();
                    expect_bytes(o, wo, bytes, "rope interleaved_row", k->isa, n, c);
                    base->half_row(dt, g + off * es, gb + off * es, wo, wob, w[0], w[1], w[2], w[3],
                                   n, 0);
                    k->half_row(dt, g + off * es, gb + off * es, o, ob, w[0], w[1], w[2], w[3], n,
                                stream);
                    gradref__stream_fence();
                    expect_bytes(o, wo, 2 * bytes, "rope half_row", k->isa, n, c);
                }
        }
    }
    free(g);
    free(gb);
    free(want);
    free(got);
}

static void test_rope_heads(void **state) {
    (void)state;
    const gradref__rope_kernels *base = gradref__rope_kernels_for(GRADREF__ISA_PORTABLE);
    tu_rng r = tu_rng_make(2);
    static const int32_t dtypes[3] = {GRADREF_F32, GRADREF_F16, GRADREF_BF16};
    enum { HEADS = 3, HEAD_DIM = 144 };
    char *in = malloc(4 * HEADS * HEAD_DIM), *want = malloc(4 * HEADS * HEAD_DIM),
         *got = malloc(4 * HEADS * HEAD_DIM);
    float w[4][HEAD_DIM];
    FOR_EACH_LEVEL(level) {
        const gradref__rope_kernels *k = gradref__rope_kernels_for(level);
        if (k == gradref__rope_kernels_for(level - 1)) continue;
        for (int d = 0; d < 3; d++) {
            const int32_t dt = dtypes[d];
            const size_t es = gradref__rope_esize(dt), row = HEAD_DIM * es;
            for (int64_t n = 16; n <= 128; n += 16)
                for (int stream = 0; stream < 2; stream++) {
                    fill_specials(in, dt, HEADS * HEAD_DIM, &r);
                    for (int i = 0; i < 4; i++)
                        fill_weights(w[i], HEAD_DIM, &r);
                    if (k->atb_heads) {
                        memset(want, 0x5a, HEADS * row);
                        memset(got, 0x5a, HEADS * row);
                        for (int h = 0; h < HEADS; h++)
                            base->atb_row(dt, in + h * row, want + h * row, w[0], n, 0);
                        k->atb_heads(dt, in, got, HEADS, HEAD_DIM, w[0], n, stream);
                        gradref__stream_fence();
                        expect_bytes(got, want, HEADS * row, "rope atb_heads", k->isa, n, stream);
                    }
                    if (k->interleaved_heads) {
                        memset(want, 0x5a, HEADS * row);
                        memset(got, 0x5a, HEADS * row);
                        for (int h = 0; h < HEADS; h++)
                            base->interleaved_row(dt, in + h * row, want + h * row, w[0], w[1], n,
                                                  0);
                        k->interleaved_heads(dt, in, got, HEADS, HEAD_DIM, w[0], w[1], n, stream);
                        gradref__stream_fence();
                        expect_bytes(got, want, HEADS * row, "rope interleaved_heads", k->isa, n,
                                     stream);
                    }
                    if (k->half_heads && n <= 64) { /* n: the half width */
                        memset(want, 0x5a, HEADS * row);
                        memset(got, 0x5a, HEADS * row);
                        for (int h = 0; h < HEADS; h++)
                            base->half_row(dt, in + h * row, in + h * row + n * es, want + h * row,
                                           want + h * row + n * es, w[0], w[1], w[2], w[3], n, 0);
                        k->half_heads(dt, in, got, HEADS, HEAD_DIM, w[0], w[1], w[2], w[3], n,
                                      stream);
                        gradref__stream_fence();
                        expect_bytes(got, want, HEADS * row, "rope half_heads", k->isa, n, stream);
                    }
                }
        }
    }
    free(in);
    free(want);
    free(got);
}

/* ---- recat: row movers against the portable ones ---- */

static void test_recat_rows(void **state) {
    (void)state;
    const gradref__recat_kernels *base = gradref__recat_kernels_for(GRADREF__ISA_PORTABLE);
    tu_rng r = tu_rng_make(3);
    enum { ROWS = 9, PITCH = 700, SPAN = ROWS * PITCH + 256 };
    char *src = malloc(SPAN), *want = malloc(SPAN), *got = malloc(SPAN);
    tu_fill_random(src, SPAN, &r);
    FOR_EACH_LEVEL(level) {
        const gradref__recat_kernels *k = gradref__recat_kernels_for(level);
        if (k == gradref__recat_kernels_for(level - 1)) continue;
        for (size_t bytes = 1; bytes <= 600; bytes += bytes < 140 ? 1 : 37)
            for (int c = 0; c < 8; c++) { /* misalignment of src and dst, prev/next */
                const size_t so = (size_t)c * 3 % 64, dof = (size_t)c * 5 % 64;
                memset(want, 0x11, SPAN);
                memset(got, 0x11, SPAN);
                if (bytes <= GRADREF__RECAT_SMALL_BYTES) {
                    base->small_rows(want + dof, src + so, PITCH, bytes, ROWS, 128);
                    k->small_rows(got + dof, src + so, PITCH, bytes, ROWS, 128);
                    expect_bytes(got, want, SPAN, "recat small_rows", k->isa, (int64_t)bytes, c);
                }
                if (bytes >= GRADREF__RECAT_STREAM_BYTES) {
                    /* has_prev (has_next): the same thread wrote (writes) the row before
                     * (after) with has_next (has_prev), and the line two rows share is written
                     * by the later call: three calls as a thread makes them, the whole copy */
                    const int prev = c & 1, next = c >> 1 & 1;
                    memset(want, 0x11, SPAN);
                    for (int64_t row = 0; row < ROWS; row++)
                        memcpy(want + dof + (size_t)row * bytes, src + so + (size_t)row * PITCH,
                               bytes);
                    const gradref__recat_kernels *both[2] = {base, k};
                    for (int t = 0; t < 2; t++) {
                        memset(got, 0x11, SPAN);
                        const gradref__recat_kernels *kt = both[t];
                        if (prev) kt->stream_rows(got + dof, src + so, PITCH, bytes, 1, 0, 1);
                        kt->stream_rows(got + dof + (size_t)prev * bytes,
                                        src + so + (size_t)prev * PITCH, PITCH, bytes,
                                        ROWS - prev - next, prev, next);
                        if (next)
                            kt->stream_rows(got + dof + (size_t)(ROWS - 1) * bytes,
                                            src + so + (size_t)(ROWS - 1) * PITCH, PITCH, bytes, 1,
                                            1, 0);
                        gradref__stream_fence();
                        expect_bytes(got, want, SPAN, "recat stream_rows", both[t]->isa,
                                     (int64_t)bytes, c);
                    }
                }
            }
    }
    free(src);
    free(want);
    free(got);
}

/* ---- common: the NaN scan, the array conversions and transposes ---- */

static int holds_pos_zero(const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, v + i, 4);
        if (bits == 0) return 1;
    }
    return 0;
}

static void test_canon_nans(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(4);
    enum { N = 300 };
    float a[N + 16], b[N + 16];
    for (int64_t n = 0; n <= N; n += n < 140 ? 1 : 31)
        for (int off = 0; off < 3; off++) {
            fill_specials(a + off, GRADREF_F32, n, &r);
            if (n % 3 == 0 && n > 0) a[off + n * 5 / 6] = 0.0f; /* a +0 where some step takes it */
            memcpy(b, a, sizeof a);
            for (int64_t i = 0; i < n; i++) /* the model: element by element */
                b[off + i] = gradref__canon_f32(b[off + i]);
            float c[N + 16];
            memcpy(c, a, sizeof a);
            /* the widest body the CPU has, then the tail; then again noting +0 */
            gradref__canon_nans_f32(c + off, n, GRADREF__ISA_MAX);
            expect_bytes(c, b, sizeof c, "canon_nans_f32", gradref__isa_name(gradref__isa_level()),
                         n, off);
            memcpy(c, a, sizeof a);
            assert_int_equal(gradref__canon_nans_f32_zeros(c + off, n, GRADREF__ISA_MAX),
                             holds_pos_zero(b + off, n));
            expect_bytes(c, b, sizeof c, "canon_nans_f32_zeros",
                         gradref__isa_name(gradref__isa_level()), n, off);
            FOR_EACH_LEVEL(level) { /* each level's body on its own: whole steps, no more */
                const gradref__nan_kernels *k = gradref__nan_kernels_for(level);
                if (k == gradref__nan_kernels_for(level - 1) || !k->canon_f32) continue;
                memcpy(c, a, sizeof a);
                int pos_zero = 0;
                const int64_t done = k->canon_f32(c + off, n, (n & 1) ? &pos_zero : NULL);
                assert_true(done <= n && done % k->step == 0 && n - done < k->step);
                expect_bytes(c + off, b + off, (size_t)done * 4, "canon_nans_f32", k->isa, n, off);
                assert_memory_equal(c + off + done, a + off + done, (size_t)(n - done) * 4);
                assert_int_equal(pos_zero, (n & 1) && holds_pos_zero(b + off, done));
            }
        }
}

/* Every level's finiteness scan (common/nan.h) against isfinite: random specials at every
 * length and offset, then all finite, then one Inf at each place. */
static void test_all_finite(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(14);
    enum { N = 200 };
    float d[N + 8];
    for (int level = 0; level <= gradref__isa_level(); level++) { /* portable too */
        const gradref__nan_kernels *k = gradref__nan_kernels_for(level);
        if (level > 0 && k == gradref__nan_kernels_for(level - 1)) continue;
        for (int64_t n = 0; n <= N; n += n < 70 ? 1 : 23) {
            fill_specials(d, GRADREF_F32, N + 8, &r);
            int finite = 1;
            for (int64_t e = 0; e < n; e++)
                finite &= isfinite(d[1 + e]) != 0;
            if (k->all_finite_f32(d + 1, n) != finite)
                fail_msg("all_finite_f32 at %s: length %lld", k->isa, (long long)n);
            for (int64_t e = 0; e < n; e++)
                d[1 + e] = (float)e;
            assert_true(k->all_finite_f32(d + 1, n));
            for (int64_t e = 0; e < n; e += 7) {
                d[1 + e] = INFINITY;
                assert_false(k->all_finite_f32(d + 1, n));
                d[1 + e] = 1.0f;
            }
        }
    }
}

/* Every level's rows widening (f16_rows_to_f32, bf16_rows_to_f32, and the dtype's through
 * gradref__half_rows_to_f32) against the element conversions: runs of 0 to 40 values, 0 to 5
 * rows, source rows ascending or descending, and nothing between or past the runs written. */
static void test_array_rows(void **state) {
    (void)state;
    enum { RUNS = 5, PITCH = 50 };
    uint16_t *h = malloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++) /* every pattern: NaNs, infinities, subnormals */
        h[i] = (uint16_t)i;
    float got[RUNS * PITCH], want[RUNS * PITCH];
    for (int level = 0; level <= gradref__isa_level(); level++) { /* portable too */
        const gradref__array_kernels *k = gradref__array_kernels_for(level);
        if (level > 0 && k == gradref__array_kernels_for(level - 1)) continue;
        for (int bf = 0; bf < 2; bf++)
            for (int64_t n = 0; n <= 40; n++)
                for (int64_t rows = 0; rows <= RUNS; rows++)
                    for (int64_t sstride = -1003; sstride <= 1003; sstride += 2006) {
                        /* starts around F16's largest finite, its Inf and NaNs (BF16: 0x7f80) */
                        const uint16_t *src = h + (bf ? 0x7f70 : 0x7bf0) + 7 * n +
                                              (sstride < 0 ? (RUNS - 1) * 1003 : 0);
                        memset(got, 0xa5, sizeof got), memset(want, 0xa5, sizeof want);
                        for (int64_t r = 0; r < rows; r++)
                            for (int64_t i = 0; i < n; i++) {
                                const uint16_t v = src[r * sstride + i];
                                want[r * PITCH + i] =
                                    bf ? gradref__bf16_to_f32(v) : gradref__f16_to_f32(v);
                            }
                        (bf ? k->bf16_rows_to_f32 : k->f16_rows_to_f32)(src, sstride, got, PITCH,
                                                                        (size_t)n, (size_t)rows);
                        expect_bytes(got, want, sizeof got, bf ? "bf16_rows" : "f16_rows", k->isa,
                                     n, (int)(rows * sstride));
                        memset(got, 0xa5, sizeof got);
                        gradref__half_rows_to_f32(k, bf ? GRADREF_BF16 : GRADREF_F16, src, sstride,
                                                  got, PITCH, (size_t)n, (size_t)rows);
                        expect_bytes(got, want, sizeof got, "half_rows", k->isa, n, bf);
                    }
    }
    free(h);
}

static void test_array_kernels(void **state) {
    (void)state;
    const gradref__array_kernels *base = gradref__array_kernels_for(GRADREF__ISA_PORTABLE);
    tu_rng r = tu_rng_make(5);
    enum { N = 65536 + 7 };
    uint16_t *h = malloc(N * 2), *hw = malloc(N * 2), *hg = malloc(N * 2);
    float *f = malloc(N * 4), *fw = malloc(N * 4), *fg = malloc(N * 4);
    for (int i = 0; i < N; i++) /* every f16 pattern */
        h[i] = (uint16_t)i;
    fill_specials(f, GRADREF_F32, N, &r);
    /* NaNs of every kind, signalling ones with payload in the bits F16 keeps among them */
    static const uint32_t nans[] = {0x7f800001u, 0x7fa00000u, 0xff900000u, 0x7fbfe000u,
                                    0x7fc00001u, 0xffc00000u, 0x7fffffffu, 0xffe01000u};
    for (int i = 0; i < 64; i++)
        memcpy(f + 1000 + i * 37, &nans[i % 8], 4);
    uint32_t s[40 * 40], dw[40 * 40], dg[40 * 40];
    for (int i = 0; i < 40 * 40; i++)
        s[i] = (uint32_t)tu_next(&r);
    FOR_EACH_LEVEL(level) {
        const gradref__array_kernels *k = gradref__array_kernels_for(level);
        if (k == gradref__array_kernels_for(level - 1)) continue;
        for (int off = 0; off < 3; off++) {
            base->f16_to_f32(h + off, fw, N - off);
            k->f16_to_f32(h + off, fg, N - off);
            expect_bytes(fg, fw, (size_t)(N - off) * 4, "f16_to_f32", k->isa, N - off, off);
            base->f32_to_f16(f + off, hw, N - off);
            k->f32_to_f16(f + off, hg, N - off);
            expect_bytes(hg, hw, (size_t)(N - off) * 2, "f32_to_f16", k->isa, N - off, off);
        }
        /* short runs (a diff row): whole blocks, the last one overlapping, or none; nothing
         * past n written. Starts at every NaN-holding 37th element and between. */
        for (int64_t n = 0; n <= 40; n++)
            for (int64_t at = 990; at < 1400; at += 19) {
                memset(fw, 0xa5, 64 * 4), memset(fg, 0xa5, 64 * 4);
                base->f16_to_f32(h + 0x7bf0 + at, fw, (size_t)n);
                k->f16_to_f32(h + 0x7bf0 + at, fg, (size_t)n);
                expect_bytes(fg, fw, 64 * 4, "f16_to_f32 short", k->isa, n, (int)at);
                memset(hw, 0xa5, 64 * 2), memset(hg, 0xa5, 64 * 2);
                base->f32_to_f16(f + at, hw, (size_t)n);
                k->f32_to_f16(f + at, hg, (size_t)n);
                expect_bytes(hg, hw, 64 * 2, "f32_to_f16 short", k->isa, n, (int)at);
            }
        if (k->transpose32x32_32) {
            memset(dg, 0, sizeof dg);
            k->transpose32x32_32(s + 3, 40, dg + 5, 40);
            memset(dw, 0, sizeof dw);
            for (int i = 0; i < 32; i++)
                for (int j = 0; j < 32; j++)
                    dw[5 + i * 40 + j] = s[3 + j * 40 + i];
            expect_bytes(dg, dw, sizeof dg, "transpose32x32_32", k->isa, 32, 0);
        }
    }
    free(h);
    free(hw);
    free(hg);
    free(f);
    free(fw);
    free(fg);
}

/* ---- conv3d_backprop_filter: the counter's add ---- */

static void test_c3f_add(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(6);
    enum { N = 300 };
    float older[N + 8], newer[N + 8], want[N + 8], got[N + 8];
    FOR_EACH_LEVEL(level) {
        const gradref__c3f_kernels *k = gradref__c3f_kernels_for(level);
        if (k == gradref__c3f_kernels_for(level - 1)) continue;
        for (int64_t n = 0; n <= N; n += n < 70 ? 1 : 23) {
            fill_specials(older, GRADREF_F32, N + 8, &r);
            fill_specials(newer, GRADREF_F32, N + 8, &r);
            memcpy(want, newer, sizeof want);
            memcpy(got, newer, sizeof got);
            for (int64_t e = 0; e < n; e++)
                want[1 + e] = older[1 + e] + newer[1 + e];
            if (k->add) { /* a NaN sum may carry either operand's payload: the NaN rule
                           * makes the output's canonical, and C may swap the operands of + */
                k->add(got + 1, older + 1, newer + 1, n);
                gradref__canon_nans_f32(got, N + 8, GRADREF__ISA_MAX);
                gradref__canon_nans_f32(want, N + 8, GRADREF__ISA_MAX);
                expect_bytes(got, want, sizeof got, "c3f add", k->isa, n, 0);
            }
        }
    }
}

/* few_lanes against its contract: random channel counts, panel widths, runs (their ends not
 * multiples of the kernels' 4 or 8 positions) and HF32 kept bits on values with NaNs, Infs and
 * ties; every byte outside the lanes it owns stays as it was. */
static void check_few_lanes(const gradref__c3f_kernels *k, tu_rng *r) {
    enum { ROWS = 40, DST = ROWS * 16 + 16, SRC = 7 * 64 };
    static const int kept_bits[3] = {0, 10, 11};
    float got[DST], want[DST], src[SRC];
    fill_specials(src, GRADREF_F32, SRC, r);
    for (int e = 0; e < SRC; e += 5) { /* a tie at 10 kept bits */
        uint32_t b = gradref__f32_bits(src[e]);
        src[e] = gradref__f32_from_bits((b & ~0x1fffu) | 0x1000u);
    }
    for (int trial = 0; trial < 400; trial++) {
        const int64_t n = 1 + (int64_t)(tu_next(r) % 7), width = n + (int64_t)(tu_next(r) % 9);
        const int64_t la = (int64_t)(tu_next(r) % (uint64_t)(width - n + 1));
        const int64_t len = 1 + (int64_t)(tu_next(r) % ROWS);
        const int64_t lo = (int64_t)(tu_next(r) % (uint64_t)(len + 1));
        const int64_t hi = lo + (int64_t)(tu_next(r) % (uint64_t)(len - lo + 1));
        const int64_t cs = (hi - lo) + (int64_t)(tu_next(r) % 24);
        const int kept = kept_bits[tu_next(r) % 3];
        for (int e = 0; e < DST; e++)
            got[e] = want[e] = (float)e;
        for (int64_t i = 0; i < len; i++)
            for (int64_t l = 0; l < n; l++) {
                const float v = i >= lo && i < hi ? src[l * cs + i - lo] : 0.0f;
                want[i * width + la + l] = kept ? gradref__hf32_round(v, kept) : v;
            }
        k->few_lanes(got + la, width, src, cs, lo, hi, len, n, kept);
        expect_bytes(got, want, sizeof got, "c3f few_lanes", k->isa, n, kept);
    }
}

/* round_hf32 against gradref__hf32_round: every length to 70 at a shifted start, out of place
 * and in place, both kept-bit counts, on values with NaNs, Infs and ties; nothing written
 * past n. */
static void check_round_hf32(const gradref__c3f_kernels *k, tu_rng *r) {
    enum { N = 80 };
    float src[N], got[N], want[N];
    fill_specials(src, GRADREF_F32, N, r);
    for (int e = 0; e < N; e += 3) /* a tie at 10 kept bits, or at 11 */
        src[e] = gradref__f32_from_bits((gradref__f32_bits(src[e]) & ~0x1fffu) | 0x1000u >> e % 2);
    for (int kept = 10; kept <= 11; kept++)
        for (int64_t n = 0; n <= 70; n++)
            for (int in_place = 0; in_place < 2; in_place++) {
                for (int e = 0; e < N; e++)
                    got[e] = want[e] = in_place ? src[e] : (float)e;
                for (int64_t e = 0; e < n; e++)
                    want[3 + e] = gradref__hf32_round(src[3 + e], kept);
                k->round_hf32(got + 3, (in_place ? got : src) + 3, n, kept);
                expect_bytes(got, want, sizeof got, "c3f round_hf32", k->isa, n, kept);
            }
}

/* panel_lanes, gather_panel and copy_panel against their contracts (c3f_kernels.h), written
 * out here; everything outside the lanes and rows they own must stay as it was */
static void test_c3f_panels(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(9);
    enum { ROWS = 24, SRC = 64 * 48, DST = ROWS * 32 + 16 };
    float *src = malloc(SRC * sizeof *src), got[DST], want[DST];
    for (int e = 0; e < SRC; e++)
        src[e] = (float)(tu_uniform(&r) * 2 - 1);
    FOR_EACH_LEVEL(level) {
        const gradref__c3f_kernels *k = gradref__c3f_kernels_for(level);
        if (k == gradref__c3f_kernels_for(level - 1)) continue;
        const int64_t mr = k->gemm->mr, nr = k->gemm->nr;
        for (int trial = 0; k->panel_lanes && trial < 400; trial++) {
            const int64_t la = (int64_t)(tu_next(&r) % (uint64_t)mr);
            const int64_t lb = la + 1 + (int64_t)(tu_next(&r) % (uint64_t)(mr - la));
            const int64_t run = 1 + (int64_t)(tu_next(&r) % ROWS);
            int64_t lo = (int64_t)(tu_next(&r) % (uint64_t)(run + 1));
            int64_t hi = lo + (int64_t)(tu_next(&r) % (uint64_t)(run - lo + 1));
            const int64_t step = (lb - la) + (int64_t)(tu_next(&r) % 40);
            const float *base = hi > lo ? src + la : NULL;
            for (int e = 0; e < DST; e++)
                got[e] = want[e] = (float)e;
            for (int64_t q = 0; q < run; q++)
                for (int64_t l = la; l < lb; l++)
                    want[q * mr + l] = q >= lo && q < hi ? base[q * step + l - la] : 0.0f;
            k->panel_lanes(got, mr, base, step, lo, hi, run, la, lb);
            expect_bytes(got, want, sizeof got, "c3f panel_lanes", k->isa, lb - la, la);
        }
        for (int rows_last = 0; rows_last < 2; rows_last++) { /* gather_panel, copy_panel */
            void (*panel)(float *, int64_t, const float *, int64_t, int64_t, int64_t) =
                rows_last ? k->copy_panel : k->gather_panel;
            for (int trial = 0; panel && trial < 200; trial++) {
                const int64_t cols = 1 + (int64_t)(tu_next(&r) % (uint64_t)nr);
                const int64_t len = 1 + (int64_t)(tu_next(&r) % ROWS);
                const int64_t cs = (rows_last ? cols : len) + (int64_t)(tu_next(&r) % 24);
                for (int e = 0; e < DST; e++)
                    got[e] = want[e] = (float)e;
                for (int64_t q = 0; q < len; q++)
                    for (int64_t j = 0; j < nr; j++)
                        want[q * nr + j] =
                            j >= cols ? 0.0f : src[rows_last ? q * cs + j : j * cs + q];
                panel(got, nr, src, cs, len, cols);
                expect_bytes(got, want, sizeof got,
                             rows_last ? "c3f copy_panel" : "c3f gather_panel", k->isa, len, cols);
            }
        }
        if (k->few_lanes) check_few_lanes(k, &r);
        check_round_hf32(k, &r);
    }
    free(src);
}

/* ---- conv_backprop_data: the tile masks and the stride-2 scatter ---- */

/* The model of tile32_masks: lane l (< cols) of tap t is set when every dim's diff position,
 * the lane's sub-grid coordinate plus the tap's shift, lies inside diff. */
static void masks_model(const int64_t *tap, int64_t ntaps, const int64_t *Q, const int64_t *O,
                        int64_t j0, int64_t cols, uint16_t *masks) {
    int64_t q[3][32];
    int64_t q2 = j0 % Q[2], q1 = j0 / Q[2] % Q[1], q0 = j0 / (Q[2] * Q[1]);
    for (int l = 0; l < 32; l++) {
        q[0][l] = q0, q[1][l] = q1, q[2][l] = q2;
        if (++q2 == Q[2]) {
            q2 = 0;
            if (++q1 == Q[1]) q1 = 0, q0++;
        }
    }
    for (int64_t t = 0; t < ntaps; t++) {
        uint32_t m = 0;
        for (int l = 0; l < cols && l < 32; l++) {
            int in = 1;
            for (int d = 0; d < 3; d++) {
                const int64_t o = q[d][l] + tap[4 * t + 1 + d];
                in &= o >= 0 && o < O[d];
            }
            m |= (uint32_t)in << l;
        }
        masks[2 * t] = (uint16_t)(m & 0xffffu);
        masks[2 * t + 1] = (uint16_t)(m >> 16);
    }
}

static void test_cbd_masks_and_scatter(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(7);
    FOR_EACH_LEVEL(level) {
        const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
        if (k == gradref__cbd_kernels_for(level - 1)) continue;
        if (k->tile32_masks)
            for (int iter = 0; iter < 600; iter++) {
                /* up to 12 taps at up to 9 shifts a dim (every seventh case 41, past the
                 * span the kernels compare once per shift); a stride phase's sub-grid (Q
                 * beside O), one column wide, or past 2^32 pixels (coordinates past 32 bits) */
                int64_t tap[4 * 12], Q[3], O[3];
                const int64_t ntaps = tu_range(&r, 1, 12);
                for (int d = 0; d < 3; d++) {
                    O[d] = tu_range(&r, 1, d == 2 ? 70 : 4);
                    Q[d] = tu_range(&r, 1, O[d] + 2);
                }
                if (iter % 5 == 1) Q[2] = 1;
                if (iter % 25 == 2) Q[0] = O[0] = 3, Q[1] = O[1] = 80000, Q[2] = O[2] = 60000;
                if (iter % 25 == 3)
                    Q[0] = O[0] = INT64_C(1) << 20, Q[1] = O[1] = 4000, Q[2] = O[2] = 50;
                const int64_t reach = iter % 7 == 3 ? 20 : 4; /* dilated: shifts spread wide */
                for (int64_t t = 0; t < ntaps; t++) {
                    tap[4 * t] = t;
                    for (int d = 0; d < 3; d++)
                        tap[4 * t + 1 + d] = tu_range(&r, -reach, reach);
                }
                const int64_t pixels = Q[0] * Q[1] * Q[2];
                const int64_t j0 = tu_range(&r, 0, pixels - 1);
                const int64_t cols = pixels - j0 < 32 ? pixels - j0 : tu_range(&r, 1, 32);
                uint16_t want[24], got[24];
                masks_model(tap, ntaps, Q, O, j0, cols, want);
                k->tile32_masks(tap, ntaps, Q, O, j0, cols, got);
                expect_bytes(got, want, (size_t)ntaps * 4, "cbd tile32_masks", k->isa, cols, iter);
            }
        if (k->scatter2)
            for (int64_t len = 1; len <= 80; len++)
                for (int odd_free = 0; odd_free < 2; odd_free++) {
                    enum { ROWS = 3, STRIDE = 200 };
                    float from[ROWS * 80], want[ROWS * STRIDE], got[ROWS * STRIDE];
                    fill_specials(from, GRADREF_F32, ROWS * len, &r);
                    for (int i = 0; i < ROWS * STRIDE; i++)
                        want[i] = got[i] = (float)i;
                    for (int64_t row = 0; row < ROWS; row++)
                        for (int64_t x = 0; x < len; x++)
                            want[row * STRIDE + 2 * x] = from[row * len + x];
                    k->scatter2(from, len, ROWS, got, STRIDE, odd_free);
                    for (int i = 0; i < ROWS * STRIDE; i++) {
                        const int64_t row = i / STRIDE, x = i % STRIDE;
                        const int between = x % 2 == 1 && x < 2 * len - 1;
                        if (odd_free && between && got[i] == 0.0f && !signbit(got[i]))
                            continue; /* an odd element between two values may become +0 */
                        if (memcmp(&got[i], &want[i], 4) != 0)
                            fail_msg("cbd scatter2 at %s: len %lld, odd_free %d, row %lld, x %lld",
                                     k->isa, (long long)len, odd_free, (long long)row,
                                     (long long)x);
                    }
                }
        if (k->interleave2) /* with odd values or +0 (odd NULL), with a zero row or not */
            for (int64_t len = 1; len <= 80; len++)
                for (int variant = 0; variant < 4; variant++) {
                    enum { ROWS = 3, STRIDE = 400, BELOW = 180 };
                    const int zeros = variant & 1;
                    const int64_t zero_at = variant & 2 ? BELOW : 0;
                    float even[ROWS * 80], odd[ROWS * 80], want[ROWS * STRIDE];
                    float got[ROWS * STRIDE];
                    fill_specials(even, GRADREF_F32, ROWS * len, &r);
                    fill_specials(odd, GRADREF_F32, ROWS * len, &r);
                    for (int i = 0; i < ROWS * STRIDE; i++) /* elsewhere: untouched */
                        want[i] = got[i] = (float)i;
                    for (int64_t row = 0; row < ROWS; row++)
                        for (int64_t x = 0; x < len; x++) {
                            float *at = want + row * STRIDE + 2 * x;
                            at[0] = even[row * len + x];
                            at[1] = zeros ? 0.0f : odd[row * len + x];
                            if (zero_at) at[zero_at] = at[zero_at + 1] = 0.0f;
                        }
                    k->interleave2(even, zeros ? NULL : odd, len, ROWS, got, STRIDE, zero_at);
                    if (memcmp(got, want, sizeof got) != 0)
                        fail_msg("cbd interleave2 at %s: len %lld, variant %d", k->isa,
                                 (long long)len, variant);
                }
    }
}

/* got's +0 made -0 where want holds -0: the plane and lane kernels add a zero term for a tap
 * outside diff (masked loads, narrower taps), which turns a -0 chain into +0; the call mends
 * those signs (cbd_signed_zeros.c), so the kernels are held to the rest of the bits. */
static void zero_signs_as(float *got, const float *want, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (got[i] == 0 && want[i] == 0 && signbit(want[i])) got[i] = -0.0f;
}

/* conv_backprop_data's depthwise planes: every level's rows (dw_row, dw_rows4) and 3 x 3
 * planes (dw_plane3x3, 2-D and 3-D: a grad plane from the diff planes of one to three depth
 * taps), as gradref__cbd_depthwise_plane picks them, against the portable table on random
 * geometries: kernel sizes 1 to 5, dilations 1 and 2, pads, both modes, widths past
 * two vectors; finite filter values (what the fast path sends there), diff with specials in
 * every other case. A plane whose call says no scan is needed holds no zero and no NaN (the
 * caller then skips its NaN and signed-zero scan), and the plane kernels say so at times. */
static void test_cbd_depthwise(void **state) {
    (void)state;
    const gradref__cbd_kernels *base = gradref__cbd_kernels_for(GRADREF__ISA_PORTABLE);
    tu_rng r = tu_rng_make(8);
    int64_t unscanned = 0;
    for (int iter = 0; iter < 400; iter++) {
        gradref__cbd_dw_shape sh;
        memset(&sh, 0, sizeof sh);
        sh.flip = (int)tu_range(&r, 0, 1);
        for (int d = 0; d < 3; d++) {
            const int flat = d == 0 && iter % 3 != 0; /* mostly 2-D (the 3 x 3 plane kernels) */
            const int strip = d > 0 && iter % 6 == 0; /* 3-D by the 3 x 3 planes' strips */
            sh.K[d] = flat ? 1 : strip ? 3 : tu_range(&r, 1, d == 0 ? 3 : 5);
            sh.dil[d] = flat || strip || iter % 4 ? 1 : tu_range(&r, 1, 2);
            sh.stride[d] = 1;
            sh.I[d] = flat ? 1 : tu_range(&r, 1, d == 2 ? 70 : 9);
            const int64_t ext = (sh.K[d] - 1) * sh.dil[d];
            sh.pad[d] = tu_range(&r, 0, ext);
            /* stride 1: O = I + pads - ext, the end pad chosen so that O >= 1 */
            const int64_t pad_end = tu_range(&r, 0, ext);
            sh.O[d] = sh.I[d] + sh.pad[d] + pad_end - ext;
            if (sh.O[d] < 1) sh.O[d] = 1;
        }
        const int64_t taps = sh.K[0] * sh.K[1] * sh.K[2];
        const int64_t in = sh.O[0] * sh.O[1] * sh.O[2], out = sh.I[0] * sh.I[1] * sh.I[2];
        float *w = malloc(sizeof(float) * (size_t)taps), *diff = malloc(sizeof(float) * (size_t)in);
        float *want = malloc(sizeof(float) * (size_t)out),
              *got = malloc(sizeof(float) * (size_t)out);
        fill_weights(w, taps, &r);
        if (iter % 2)
            fill_weights(diff, in, &r);
        else
            fill_specials(diff, GRADREF_F32, in, &r);
        gradref__cbd_depthwise_plane(base, &sh, w, diff, want);
        FOR_EACH_LEVEL(level) {
            const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
            if (k == gradref__cbd_kernels_for(level - 1)) continue;
            memset(got, 0x5a, sizeof(float) * (size_t)out);
            if (!gradref__cbd_depthwise_plane(k, &sh, w, diff, got)) {
                unscanned++;
                for (int64_t i = 0; i < out; i++)
                    assert_false(got[i] == 0 || isnan(got[i]));
            }
            gradref__canon_nans_f32(
                got, out, GRADREF__ISA_MAX); /* NaN payloads follow the rule at the call */
            gradref__canon_nans_f32(want, out, GRADREF__ISA_MAX);
            zero_signs_as(got, want, out);
            expect_bytes(got, want, sizeof(float) * (size_t)out, "cbd depthwise plane", k->isa, out,
                         iter);
        }
        free(w);
        free(diff);
        free(want);
        free(got);
    }
    if (gradref__cbd_kernels_for(GRADREF__ISA_MAX)->dw_plane3x3) assert_true(unscanned > 0);
}

/* Small depthwise planes by lanes (dw_lanes): at every level that has them, 3 x 3 planes from
 * 1 x 1 to the largest padded plane they take, every pad from 0 to 2 on each side, both modes,
 * channel planes further apart than a plane (the floats between untouched), against the
 * portable plane kernel a channel at a time; diff with specials in every other case. The
 * returned bits say exactly which channels hold a zero or a NaN. */
enum { LANES_TEST_PLANES = 8, LANES_TEST_GAP = 5 };
static void lanes_case(const gradref__cbd_kernels *k, const gradref__cbd_dw_shape *sh,
                       const gradref__cbd_dw_lanes *L, const float *w, const float *diff,
                       const float *want, float *got, int iter) {
    const int64_t planes = k->dw_lanes_planes, in = sh->O[1] * sh->O[2];
    const int64_t out = sh->I[1] * sh->I[2], dc = in + LANES_TEST_GAP, gc = out + LANES_TEST_GAP;
    float wl[9 * LANES_TEST_PLANES];
    for (int64_t t = 0; t < 9; t++)
        for (int64_t c = 0; c < planes; c++)
            wl[t * planes + c] = w[c * 9 + L->weight[t]];
    memset(got, 0x5a, sizeof(float) * (size_t)(planes * gc));
    const unsigned hit = k->dw_lanes(L, wl, diff, dc, got, gc);
    for (int64_t c = 0; c < planes; c++) {
        float *plane = got + c * gc;
        unsigned zero_or_nan = 0;
        for (int64_t i = 0; i < out; i++)
            zero_or_nan |= plane[i] == 0 || isnan(plane[i]);
        if ((hit >> c & 1u) != zero_or_nan)
            fail_msg("cbd dw_lanes at %s: channel %lld's bit (case %d)", k->isa, (long long)c,
                     iter);
        gradref__canon_nans_f32(plane, out, GRADREF__ISA_MAX);
        zero_signs_as(plane, want + c * gc, out);
    }
    expect_bytes(got, want, sizeof(float) * (size_t)(planes * gc), "cbd dw_lanes", k->isa, out,
                 iter);
}

static void test_cbd_depthwise_lanes(void **state) {
    (void)state;
    const gradref__cbd_kernels *base = gradref__cbd_kernels_for(GRADREF__ISA_PORTABLE);
    tu_rng r = tu_rng_make(58);
    int64_t ran = 0;
    for (int iter = 0; iter < 300; iter++) {
        gradref__cbd_dw_shape sh;
        memset(&sh, 0, sizeof sh);
        sh.flip = (int)tu_range(&r, 0, 1);
        sh.I[0] = sh.O[0] = sh.K[0] = 1;
        for (int d = 0; d < 3; d++)
            sh.dil[d] = sh.stride[d] = 1;
        for (int d = 1; d < 3; d++) {
            sh.K[d] = 3, sh.I[d] = tu_range(&r, 1, 12), sh.pad[d] = tu_range(&r, 0, 2);
            sh.O[d] = sh.I[d] + sh.pad[d] + tu_range(&r, 0, 2) - 2;
            if (sh.O[d] < 1) sh.O[d] = 1;
        }
        gradref__cbd_dw_lanes L;
        if (!gradref__cbd_dw_lanes_of(&sh, &L)) continue;
        const int64_t in = sh.O[1] * sh.O[2], out = sh.I[1] * sh.I[2];
        const int64_t dc = in + LANES_TEST_GAP, gc = out + LANES_TEST_GAP;
        const size_t bytes = sizeof(float) * (size_t)(LANES_TEST_PLANES * gc);
        float w[9 * LANES_TEST_PLANES], *diff = malloc(sizeof(float) * (size_t)(8 * dc));
        float *want = malloc(bytes), *got = malloc(bytes);
        fill_weights(w, 9 * LANES_TEST_PLANES, &r);
        if (iter % 2)
            fill_weights(diff, LANES_TEST_PLANES * dc, &r);
        else
            fill_specials(diff, GRADREF_F32, LANES_TEST_PLANES * dc, &r);
        memset(want, 0x5a, bytes);
        for (int64_t c = 0; c < LANES_TEST_PLANES; c++) {
            gradref__cbd_depthwise_plane(base, &sh, w + 9 * c, diff + c * dc, want + c * gc);
            gradref__canon_nans_f32(want + c * gc, out, GRADREF__ISA_MAX);
        }
        FOR_EACH_LEVEL(level) {
            const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
            if (k == gradref__cbd_kernels_for(level - 1) || !k->dw_lanes) continue;
            lanes_case(k, &sh, &L, w, diff, want, got, iter);
            ran++;
        }
        free(diff);
        free(want);
        free(got);
    }
    if (gradref__cbd_kernels_for(GRADREF__ISA_MAX)->dw_lanes) assert_true(ran > 100);
}

/* Strided depthwise planes (gradref__cbd_depthwise_strided): at every level that has the
 * stride-2 plane kernel (dw_plane_s2), K <= 3 and any pad (every fifth case up to 12), widths of 1
 * to 80; then other strides and dilations by stride phases. A third are 3-D, their depth at
 * stride 1 or 2 and dilation 1 or 2 (dw_plane_s2 over one to three diff planes). The portable
 * table's stride phases (its scalar rows, no plane kernel) are the chains written out. */
static void test_cbd_depthwise_strided(void **state) {
    (void)state;
    const gradref__cbd_kernels *base = gradref__cbd_kernels_for(GRADREF__ISA_PORTABLE);
    tu_rng r = tu_rng_make(81);
    for (int iter = 0; iter < 300; iter++) {
        gradref__cbd_dw_shape sh;
        memset(&sh, 0, sizeof sh);
        sh.flip = (int)tu_range(&r, 0, 1);
        for (int d = 0; d < 3; d++) {
            if (d == 0 && iter % 3 != 1) {
                sh.I[0] = sh.O[0] = sh.K[0] = sh.dil[0] = sh.stride[0] = 1;
                continue;
            }
            sh.stride[d] = d == 0 ? tu_range(&r, 1, 2) : iter % 4 == 3 ? tu_range(&r, 1, 3) : 2;
            sh.K[d] = tu_range(&r, 1, 3);
            sh.dil[d] = d == 0 || iter % 4 == 3 ? tu_range(&r, 1, 2) : 1;
            sh.I[d] = tu_range(&r, 1, d == 2 ? 80 : d == 1 ? 9 : 5);
            /* every fifth case pads past the kernel: the edge blocks of dw_plane_s2 */
            const int64_t most_pad = iter % 5 == 4 ? 12 : (sh.K[d] - 1) * sh.dil[d];
            sh.pad[d] = tu_range(&r, 0, most_pad);
            /* diff as the forward gives it, the end padding chosen */
            const int64_t span =
                sh.I[d] + sh.pad[d] + tu_range(&r, 0, most_pad) - (sh.K[d] - 1) * sh.dil[d] - 1;
            sh.O[d] = span < 0 ? 1 : span / sh.stride[d] + 1;
        }
        if (!gradref__cbd_dw_strided_fits(&sh)) continue;
        const int64_t taps = sh.K[0] * sh.K[1] * sh.K[2], in = sh.O[0] * sh.O[1] * sh.O[2];
        const int64_t out = sh.I[0] * sh.I[1] * sh.I[2];
        float *w = malloc(sizeof(float) * (size_t)taps), *diff = malloc(sizeof(float) * (size_t)in);
        float *want = malloc(sizeof(float) * (size_t)out),
              *got = malloc(sizeof(float) * (size_t)out);
        float *scratch = malloc(sizeof(float) * (size_t)gradref__cbd_dw_strided_floats(&sh));
        fill_weights(w, taps, &r);
        if (iter % 2)
            fill_weights(diff, in, &r);
        else
            fill_specials(diff, GRADREF_F32, in, &r);
        gradref__cbd_depthwise_strided(base, &sh, w, diff, want, scratch);
        gradref__canon_nans_f32(want, out, GRADREF__ISA_MAX);
        FOR_EACH_LEVEL(level) {
            const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
            if (k == gradref__cbd_kernels_for(level - 1)) continue;
            memset(got, 0x5a, sizeof(float) * (size_t)out);
            if (!gradref__cbd_depthwise_strided(k, &sh, w, diff, got, scratch))
                for (int64_t i = 0; i < out; i++)
                    assert_false(got[i] == 0 || isnan(got[i]));
            gradref__canon_nans_f32(got, out, GRADREF__ISA_MAX);
            zero_signs_as(got, want, out);
            expect_bytes(got, want, sizeof(float) * (size_t)out, "cbd strided depthwise", k->isa,
                         out, iter);
        }
        free(w);
        free(diff);
        free(want);
        free(got);
        free(scratch);
    }
}

/* dw_plane3x3 called straight on a 3-D channel's grad planes, each from the diff planes of its
 * depth taps (written out here: kp0 descending, the filter's 2-D slice of each), for every
 * kernel it takes (K1 and K2 of 1 to 3, not only the 3 x 3 strips gradref__cbd_depthwise_plane
 * sends it for 3-D), one to three depth taps, depth dilation 1 and 2, pads, both modes, against
 * the portable rows; a plane no depth tap reaches is the caller's (+0), skipped here. */
static void test_cbd_plane3x3_depth(void **state) {
    (void)state;
    const gradref__cbd_kernels *base = gradref__cbd_kernels_for(GRADREF__ISA_PORTABLE);
    tu_rng r = tu_rng_make(10);
    for (int iter = 0; iter < 200; iter++) {
        gradref__cbd_dw_shape sh, flat;
        memset(&sh, 0, sizeof sh);
        sh.flip = (int)tu_range(&r, 0, 1);
        for (int d = 0; d < 3; d++) {
            sh.K[d] = tu_range(&r, 1, 3);
            sh.dil[d] = d == 0 ? tu_range(&r, 1, 2) : 1;
            sh.stride[d] = 1;
            sh.I[d] = tu_range(&r, 1, d == 2 ? 40 : d == 1 ? 9 : 4);
            const int64_t ext = (sh.K[d] - 1) * sh.dil[d], pad_end = tu_range(&r, 0, ext);
            sh.pad[d] = tu_range(&r, 0, ext);
            sh.O[d] = sh.I[d] + sh.pad[d] + pad_end - ext;
            if (sh.O[d] < 1) sh.O[d] = 1;
        }
        flat = sh, flat.I[0] = flat.O[0] = flat.K[0] = 1, flat.pad[0] = 0;
        const int64_t taps = sh.K[0] * sh.K[1] * sh.K[2], slice = sh.K[1] * sh.K[2];
        const int64_t in = sh.O[1] * sh.O[2], out = sh.I[1] * sh.I[2];
        float *w = malloc(sizeof(float) * (size_t)taps);
        float *diff = malloc(sizeof(float) * (size_t)(sh.O[0] * in));
        float *want = malloc(sizeof(float) * (size_t)(sh.I[0] * out));
        float *got = malloc(sizeof(float) * (size_t)out);
        fill_weights(w, taps, &r);
        if (iter % 2)
            fill_weights(diff, sh.O[0] * in, &r);
        else
            fill_specials(diff, GRADREF_F32, sh.O[0] * in, &r);
        gradref__cbd_depthwise_plane(base, &sh, w, diff, want);
        gradref__canon_nans_f32(want, sh.I[0] * out, GRADREF__ISA_MAX);
        for (int64_t i0 = 0; i0 < sh.I[0]; i0++) {
            const float *ws[3], *ds[3];
            int64_t n = 0;
            for (int64_t kp0 = sh.K[0] - 1; kp0 >= 0; kp0--) {
                const int64_t o0 = i0 + sh.pad[0] - kp0 * sh.dil[0];
                if (o0 < 0 || o0 >= sh.O[0]) continue;
                ws[n] = w + (sh.flip ? sh.K[0] - 1 - kp0 : kp0) * slice, ds[n++] = diff + o0 * in;
            }
            FOR_EACH_LEVEL(level) {
                const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
                if (n == 0 || k == gradref__cbd_kernels_for(level - 1) || !k->dw_plane3x3) continue;
                memset(got, 0x5a, sizeof(float) * (size_t)out);
                k->dw_plane3x3(&flat, ws, ds, n, got);
                gradref__canon_nans_f32(got, out, GRADREF__ISA_MAX);
                const float *w0 = want + i0 * out;
                zero_signs_as(got, w0, out);
                expect_bytes(got, w0, sizeof(float) * (size_t)out, "cbd plane3x3 depth", k->isa,
                             out, iter);
            }
        }
        free(w);
        free(diff);
        free(want);
        free(got);
    }
}

/* The 3 x 3 plane kernels' answer to whether the caller must scan: a filter of one nonzero tap
 * and diff uniform but for one +0 or NaN make grad's zeros and NaNs few and known (a NaN
 * reaches every tap, a zero only its one), in any row of a four-row block and any column of a
 * strip; the call asks for the scan exactly when grad holds one. */
static void test_cbd_plane_scan(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(9);
    float w[9], diff[14 * 42], got[14 * 42];
    for (int iter = 0; iter < 300; iter++) {
        gradref__cbd_dw_shape sh;
        memset(&sh, 0, sizeof sh);
        sh.flip = iter % 2;
        sh.K[0] = sh.I[0] = sh.O[0] = sh.dil[0] = sh.dil[1] = sh.dil[2] = 1;
        sh.stride[0] = sh.stride[1] = sh.stride[2] = 1;
        sh.K[1] = sh.K[2] = 3;
        sh.I[1] = tu_range(&r, 4, 12), sh.I[2] = tu_range(&r, 1, 40);
        sh.pad[1] = sh.pad[2] = 1; /* O = I */
        sh.O[1] = sh.I[1], sh.O[2] = sh.I[2];
        const int64_t n = sh.I[1] * sh.I[2], keep = tu_range(&r, 0, 8);
        for (int t = 0; t < 9; t++)
            w[t] = t == keep ? 0.75f : 0.0f;
        for (int64_t i = 0; i < n; i++)
            diff[i] = (float)(tu_uniform(&r) + 0.5); /* no zero */
        if (iter % 3) diff[tu_range(&r, 0, n - 1)] = iter % 3 == 1 ? 0.0f : NAN;
        FOR_EACH_LEVEL(level) {
            const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
            if (k == gradref__cbd_kernels_for(level - 1) || !k->dw_plane3x3) continue;
            const float *slice = w, *plane = diff;
            const int scan = k->dw_plane3x3(&sh, &slice, &plane, 1, got);
            int held = 0;
            for (int64_t i = 0; i < n; i++)
                held |= got[i] == 0 || isnan(got[i]);
            if (scan != held)
                fail_msg("cbd plane scan at %s: %d for a grad %s a zero or NaN (case %d)", k->isa,
                         scan, held ? "holding" : "without", iter);
        }
    }
}

/* conv_backprop_data's direct tiles: tile32 against the chain written out here (for i < rows
 * and lanes l < cols, from +0 or, with load, from c's value, fma(a[(t * ocpg + oc) * mr + i],
 * lane l of tap t, acc) over the taps and channels in order, a lane outside its tap's mask read
 * as 0), on diff read in place
 * with masked loads (inside 0), with whole vectors (inside 1), and packed by pack_tile32
 * (inside 2); pack_tile32 against its layout. What the kernels do not own must stay as it was.
 * tile32 says whether a value it stored is a zero or a NaN, exactly: diff without specials and
 * masks without lanes past cols in a quarter of the cases give it clean tiles, and now and then
 * a single zero (one row weighing one tap that leaves one lane out). */
static void test_cbd_tiles(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(11);
    FOR_EACH_LEVEL(level) {
        const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
        if (k == gradref__cbd_kernels_for(level - 1) || k->tile32 == NULL) continue;
        const int mr = k->tile_rows;
        int64_t clean = 0; /* cases whose tile held no zero and no NaN */
        for (int iter = 0; iter < 600; iter++) {
            enum { SPAN = 256, LDC = 40 };
            const int64_t ntaps = tu_range(&r, 1, 9), ocpg = tu_range(&r, 1, 6);
            const int64_t cs = SPAN + tu_range(&r, 0, 3), cols = tu_range(&r, 1, 32);
            /* a single zero (below) in a full panel, any row */
            const int rows = iter % 8 == 7 ? mr : (int)tu_range(&r, 1, mr);
            const int inside = iter % 3, load = iter / 3 % 2;
            int64_t offset[9];
            uint16_t masks[18];
            const size_t image_floats = (size_t)(ocpg * cs + 64);
            float *image = malloc(sizeof(float) * image_floats);
            float *a = malloc(sizeof(float) * (size_t)(ntaps * ocpg * mr));
            float *packed = malloc(sizeof(float) * (size_t)(ntaps * ocpg * 32));
            float want[16 * LDC], got[16 * LDC];
            const int plain = iter % 4 == 3; /* no specials: the answer can be "clean" */
            if (plain)
                fill_weights(image, (int64_t)image_floats, &r);
            else
                fill_specials(image, GRADREF_F32, (int64_t)image_floats, &r);
            fill_weights(a, ntaps * ocpg * mr, &r);
            for (int64_t t = 0; t < ntaps; t++) {
                offset[t] = tu_range(&r, 0, SPAN - 32);
                for (int h = 0; h < 2; h++) {
                    const int64_t kind = tu_range(&r, 0, 3); /* none, all, or random lanes */
                    masks[2 * t + h] = (uint16_t)(kind == 0   ? 0
                                                  : kind == 1 ? 0xffff
                                                              : tu_range(&r, 0, 0xffff));
                }
            }
            if (plain) { /* as tile32_masks gives them: no lane past cols */
                const uint32_t live = cols >= 32 ? 0xffffffffu : (1u << cols) - 1u;
                for (int64_t t = 0; t < ntaps; t++)
                    for (int h = 0; h < 2; h++)
                        masks[2 * t + h] &= (uint16_t)(live >> (16 * h));
            }
            if (plain && iter % 8 == 7) { /* one zero: row zr's only weight is tap t1's, which
                                             leaves lane zl out */
                const int64_t zr = tu_range(&r, 0, rows - 1), zl = tu_range(&r, 0, cols - 1);
                const int64_t t1 = tu_range(&r, 0, ntaps - 1);
                const uint32_t t1_lanes =
                    (cols >= 32 ? 0xffffffffu : (1u << cols) - 1u) & ~(UINT32_C(1) << zl);
                for (int64_t k2 = 0; k2 < ntaps * ocpg; k2++)
                    a[k2 * mr + zr] = k2 == t1 * ocpg ? 1.0f : 0.0f;
                masks[2 * t1] = (uint16_t)t1_lanes, masks[2 * t1 + 1] = (uint16_t)(t1_lanes >> 16);
            }
            /* pack_tile32: every tap with a lane, the others left as they were */
            for (int64_t e = 0; e < ntaps * ocpg * 32; e++)
                packed[e] = -7.0f;
            k->pack_tile32(image, cs, ocpg, offset, masks, ntaps, packed);
            for (int64_t t = 0; t < ntaps; t++) {
                const uint32_t m = masks[2 * t] | (uint32_t)masks[2 * t + 1] << 16;
                for (int64_t oc = 0; oc < ocpg; oc++)
                    for (int l = 0; l < 32; l++) {
                        const float v = packed[(t * ocpg + oc) * 32 + l];
                        const float w = m == 0                 ? -7.0f
                                        : ((m >> l) & 1u) != 0 ? image[offset[t] + oc * cs + l]
                                                               : 0.0f;
                        if (memcmp(&v, &w, 4) != 0)
                            fail_msg("cbd pack_tile32 at %s: tap %lld, oc %lld, lane %d (case %d)",
                                     k->isa, (long long)t, (long long)oc, l, iter);
                    }
            }
            for (int e = 0; e < 16 * LDC; e++)
                want[e] = got[e] = e % 11 == 0 ? 0.0f : (float)e * 0.25f;
            for (int i = 0; i < rows; i++)
                for (int64_t l = 0; l < cols; l++) {
                    float acc = load ? got[i * LDC + l] : 0.0f;
                    for (int64_t t = 0; t < ntaps; t++) {
                        const uint32_t m = masks[2 * t] | (uint32_t)masks[2 * t + 1] << 16;
                        for (int64_t oc = 0; oc < ocpg; oc++) {
                            const float b = (m >> l) & 1u ? image[offset[t] + oc * cs + l] : 0.0f;
                            acc = fmaf(a[(t * ocpg + oc) * mr + i], b, acc);
                        }
                    }
                    want[i * LDC + l] = acc;
                }
            int held = 0; /* a value the tile stores is a zero or a NaN */
            for (int i = 0; i < rows; i++)
                for (int64_t l = 0; l < cols; l++)
                    held |= want[i * LDC + l] == 0 || isnan(want[i * LDC + l]);
            unsigned hit;
            if (inside == 2) { /* the packed tile: taps with a lane read whole, zeros packed */
                int64_t block_offset[9];
                uint16_t block_masks[18];
                for (int64_t t = 0; t < ntaps; t++) {
                    block_offset[t] = t * ocpg * 32;
                    block_masks[2 * t] = block_masks[2 * t + 1] =
                        (uint16_t)((masks[2 * t] | masks[2 * t + 1]) ? 0xffffu : 0u);
                }
                hit = k->tile32(packed, 32, ocpg, block_offset, block_masks, ntaps, cols, 2, a,
                                rows, got, LDC, load);
            } else
                hit = k->tile32(image, cs, ocpg, offset, masks, ntaps, cols, inside, a, rows, got,
                                LDC, load);
            if ((hit != 0) != held)
                fail_msg("cbd tile32 at %s: says %u for values %s a zero or NaN (case %d)", k->isa,
                         hit, held ? "holding" : "without", iter);
            clean += !held;
            gradref__canon_nans_f32(got, 16 * LDC, GRADREF__ISA_MAX);
            gradref__canon_nans_f32(want, 16 * LDC, GRADREF__ISA_MAX);
            expect_bytes(got, want, sizeof want, "cbd tile32", k->isa, cols, iter);
            free(image);
            free(a);
            free(packed);
        }
        assert_true(clean > 0);
    }
}

/* tile_columns against the chain written out here: for rows i < M (panel i / pr, its row
 * i % pr) and pixels first + p (p < cols), from +0, fma(panel value, diff, acc) over the taps
 * and channels in order, a tap skipped where it leaves every one of the cols pixels out and a
 * pixel it leaves out read as 0; diff in place under random masks, or a packed tile. The
 * panels are allocated to their last float (the sanitizer build sees a read past them), and
 * what the kernel does not own stays as it was; its answer is exact as tile32's. */
static void test_cbd_tile_columns(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(23);
    FOR_EACH_LEVEL(level) {
        const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
        if (k == gradref__cbd_kernels_for(level - 1) || k->tile_columns == NULL) continue;
        const int64_t mr = k->tile_rows;
        int64_t clean = 0;
        for (int iter = 0; iter < 400; iter++) {
            /* 17 panels of up to 14 rows: AVX-512's groups of 16 panels split */
            enum { SPAN = 256, LDC = 40, MAX_ROWS = 17 * GRADREF__CBD_TILE_ROWS };
            const int64_t ntaps = tu_range(&r, 1, 9), ocpg = tu_range(&r, 1, 6);
            const int64_t cs = SPAN + tu_range(&r, 0, 3), cols = tu_range(&r, 1, 4);
            const int64_t first = 16 * tu_range(&r, 0, 1) + tu_range(&r, 0, 16 - cols);
            const int64_t pr = tu_range(&r, 1, mr), np = tu_range(&r, 1, 17);
            const int64_t M = tu_range(&r, (np - 1) * pr + 1, np * pr), K = ntaps * ocpg;
            assert_true(np * pr <= MAX_ROWS);
            const int packed = iter % 3 == 2, plain = iter % 4 == 3;
            int64_t offset[9];
            uint16_t masks[18];
            /* in place: channels cs apart; packed: taps' channels of 32 pixels */
            const int64_t image_floats = packed ? K * 32 : ocpg * cs + 64;
            float *image = malloc(sizeof(float) * (size_t)image_floats);
            float *a = malloc(sizeof(float) * (size_t)(np * K * mr));
            float *want = malloc(sizeof(float) * MAX_ROWS * LDC);
            float *got = malloc(sizeof(float) * MAX_ROWS * LDC);
            if (plain)
                fill_weights(image, image_floats, &r);
            else
                fill_specials(image, GRADREF_F32, image_floats, &r);
            fill_weights(a, np * K * mr, &r);
            for (int64_t t = 0; t < ntaps; t++) {
                offset[t] = packed ? t * ocpg * 32 : tu_range(&r, 0, SPAN - 32);
                const int64_t kind = tu_range(&r, 0, 3); /* none, all, or random lanes */
                for (int h = 0; h < 2; h++)
                    masks[2 * t + h] = (uint16_t)(kind == 0   ? 0
                                                  : kind == 1 ? 0xffff
                                                              : tu_range(&r, 0, 0xffff));
                if (packed) masks[2 * t] = masks[2 * t + 1] = kind ? 0xffff : 0;
            }
            for (int e = 0; e < MAX_ROWS * LDC; e++)
                want[e] = got[e] = e % 11 == 0 ? 0.0f : (float)e * 0.25f;
            const int h = (int)(first / 16);
            const unsigned lane = (unsigned)(first % 16), all = (1u << cols) - 1u;
            const int64_t image_cs = packed ? 32 : cs;
            for (int64_t i = 0; i < M; i++)
                for (int64_t p = 0; p < cols; p++) {
                    float acc = 0.0f;
                    for (int64_t t = 0; t < ntaps; t++) {
                        const unsigned m = (unsigned)(masks[2 * t + h] >> lane) & all;
                        for (int64_t oc = 0; oc < ocpg && m != 0; oc++) {
                            const float b =
                                (m >> p) & 1u ? image[offset[t] + oc * image_cs + first + p] : 0.0f;
                            acc = fmaf(a[i / pr * K * mr + (t * ocpg + oc) * mr + i % pr], b, acc);
                        }
                    }
                    want[i * LDC + first + p] = acc;
                }
            int held = 0;
            for (int64_t i = 0; i < M; i++)
                for (int64_t p = 0; p < cols; p++)
                    held |= want[i * LDC + first + p] == 0 || isnan(want[i * LDC + first + p]);
            const unsigned hit = k->tile_columns(image, image_cs, ocpg, offset, masks, ntaps, first,
                                                 cols, a, K * mr, pr, M, got, LDC);
            if ((hit != 0) != held)
                fail_msg("cbd tile_columns at %s: says %u for values %s a zero or NaN (case %d)",
                         k->isa, hit, held ? "holding" : "without", iter);
            clean += !held;
            gradref__canon_nans_f32(got, MAX_ROWS * LDC, GRADREF__ISA_MAX);
            gradref__canon_nans_f32(want, MAX_ROWS * LDC, GRADREF__ISA_MAX);
            expect_bytes(got, want, sizeof(float) * MAX_ROWS * LDC, "cbd tile_columns", k->isa,
                         cols, iter);
            free(image);
            free(a);
            free(want);
            free(got);
        }
        assert_true(clean > 0);
    }
}

/* Channel c's value in a word of wc I8 channels (int16 halves or bytes, channel 0 lowest). */
static int32_t word_value(uint32_t word, int c, int wc) {
    return wc == 2 ? (int16_t)(uint16_t)(word >> (16 * c)) : (int8_t)(uint8_t)(word >> (8 * c));
}

/* A word of wc random I8 values. */
static uint32_t random_word(int wc, tu_rng *r) {
    uint32_t word = 0;
    for (int c = 0; c < wc; c++)
        word |= ((uint32_t)(int32_t)tu_range(r, -128, 127) & (wc == 2 ? 0xffffu : 0xffu))
                << (32 / wc * c);
    return word;
}

/* The I8 word tiles (word_tile32: int16 pairs, int8 quads) against their sums written out here:
 * for i < rows and lanes l < cols, from 0 or (load) c's value, the int32 sum mod 2^32 over the
 * taps, words and channels of a's channel value times the image's (0 outside the tap's mask),
 * with the image read with masked loads, whole vectors and packed; c's values near 2^31 make
 * the sums wrap. What the kernel does not own must stay as it was. */
static void test_cbd_word_tiles(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(12);
    FOR_EACH_LEVEL(level) {
        const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
        if (k == gradref__cbd_kernels_for(level - 1) || k->word_tile32 == NULL) continue;
        const int mr = k->word_rows, wc = k->word_channels;
        for (int iter = 0; iter < 300; iter++) {
            enum { SPAN = 256, LDC = 40 };
            const int64_t ntaps = tu_range(&r, 1, 9), words = tu_range(&r, 1, 6);
            const int64_t cs = SPAN + tu_range(&r, 0, 3), cols = tu_range(&r, 1, 32);
            const int rows = (int)tu_range(&r, 1, mr), inside = iter % 3, load = iter / 3 % 2;
            int64_t offset[9];
            uint16_t masks[18];
            uint32_t image[6 * (SPAN + 3) + 64], a[9 * 6 * 14], want[14 * LDC], got[14 * LDC];
            for (size_t e = 0; e < sizeof image / 4; e++)
                image[e] = random_word(wc, &r);
            for (int64_t e = 0; e < ntaps * words * mr; e++)
                a[e] = random_word(wc, &r);
            for (int64_t t = 0; t < ntaps; t++) {
                offset[t] = tu_range(&r, 0, SPAN - 32);
                for (int h = 0; h < 2; h++) /* none, all, or random lanes */
                    masks[2 * t + h] = (uint16_t)(iter % 4 == 3 ? tu_range(&r, 0, 0xffff)
                                                                : 0xffff * tu_range(&r, 0, 1));
            }
            for (int e = 0; e < 14 * LDC; e++)
                want[e] = got[e] = 0x7fffff00u + (uint32_t)e * 977u;
            for (int i = 0; i < rows; i++)
                for (int64_t l = 0; l < cols; l++) {
                    uint32_t acc = load ? got[i * LDC + l] : 0u;
                    for (int64_t t = 0; t < ntaps; t++)
                        for (int64_t j = 0; j < words && ((masks[2 * t + l / 16] >> l % 16) & 1);
                             j++)
                            for (int c = 0; c < wc; c++)
                                acc += (uint32_t)(word_value(a[(t * words + j) * mr + i], c, wc) *
                                                  word_value(image[offset[t] + j * cs + l], c, wc));
                    want[i * LDC + l] = acc;
                }
            int64_t block_offset[9];
            uint16_t block_masks[18];
            uint32_t packed[9 * 6 * 32];
            if (inside == 2) { /* the tile packed by pack_tile32, zeros outside the taps */
                k->pack_tile32((const float *)(const void *)image, cs, words, offset, masks, ntaps,
                               (float *)(void *)packed);
                for (int64_t t = 0; t < ntaps; t++) {
                    block_offset[t] = t * words * 32;
                    block_masks[2 * t] = block_masks[2 * t + 1] =
                        (uint16_t)((masks[2 * t] | masks[2 * t + 1]) ? 0xffffu : 0u);
                }
            }
            k->word_tile32((const int32_t *)(inside == 2 ? packed : image), inside == 2 ? 32 : cs,
                           words, inside == 2 ? block_offset : offset,
                           inside == 2 ? block_masks : masks, ntaps, cols, inside,
                           (const int32_t *)a, rows, (int32_t *)got, LDC, load);
            expect_bytes(got, want, sizeof want, "cbd word_tile32", k->isa, cols, iter);
        }
    }
}

/* conv_backprop_data's QuantizedS8 requantisation without libm, against the transcription of
 * MegEngine's (roundf, fmaxf, fminf): every tie of acc / 2, every acc near the clamps, and
 * random sums and scales from 2^-40 to 2^40 (overflow to Inf and quotients of 0 included); and
 * each level's row kernel against it, bytes past the row untouched. */
static void test_cbd_requantize(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(12);
    for (int32_t acc = -600; acc <= 600; acc++) {
        const float scales[4][2] = {{1.0f, 2.0f}, {0.5f, 1.0f}, {1.0f, 1.0f}, {0.25f, 0.5f}};
        for (int k = 0; k < 4; k++)
            if (gradref__cbd_qs8_requantize_inline(acc, scales[k][0], scales[k][1]) !=
                gradref__cbd_qs8_requantize(acc, scales[k][0], scales[k][1]))
                fail_msg("cbd requantize: acc %d, scales %g and %g", (int)acc, (double)scales[k][0],
                         (double)scales[k][1]);
    }
    FOR_EACH_LEVEL(level) { /* the row kernels: every length, integral sums, ties and clamps */
        const gradref__cbd_kernels *k = gradref__cbd_kernels_for(level);
        if (k == gradref__cbd_kernels_for(level - 1) || k->qs8_row == NULL) continue;
        for (int iter = 0; iter < 3000; iter++) {
            float from[40];
            int8_t want[48], got[48];
            const int64_t n = iter % 41;
            const int ties = iter % 2;
            const float sa =
                ties ? 1.0f : ldexpf((float)(1.0 + tu_uniform(&r)), (int)tu_range(&r, -30, 10));
            const float sg =
                ties ? 2.0f : ldexpf((float)(1.0 + tu_uniform(&r)), (int)tu_range(&r, -10, 10));
            for (int64_t x = 0; x < n; x++)
                from[x] = (float)tu_range(&r, ties ? -300 : -(INT64_C(1) << 24),
                                          ties ? 300 : INT64_C(1) << 24);
            memset(want, 0x55, sizeof want);
            memset(got, 0x55, sizeof got);
            for (int64_t x = 0; x < n; x++)
                want[x] = gradref__cbd_qs8_requantize_inline((int32_t)from[x], sa, sg);
            k->qs8_row(from, n, sa, sg, got);
            expect_bytes(got, want, sizeof want, "cbd qs8_row", k->isa, n, iter);
        }
    }
    for (int iter = 0; iter < 2000000; iter++) {
        const int32_t acc =
            iter % 3 == 0 ? (int32_t)(uint32_t)tu_next(&r) : (int32_t)tu_range(&r, -70000, 70000);
        const float sa = ldexpf((float)(1.0 + tu_uniform(&r)), (int)tu_range(&r, -40, 40));
        const float sg = ldexpf((float)(1.0 + tu_uniform(&r)), (int)tu_range(&r, -40, 40));
        if (gradref__cbd_qs8_requantize_inline(acc, sa, sg) !=
            gradref__cbd_qs8_requantize(acc, sa, sg))
            fail_msg("cbd requantize: acc %d, scales %a and %a", (int)acc, (double)sa, (double)sg);
    }
}

/* ---- grid_sampler3d_grad: dx planes and trilinear dgrid against their contracts ---- */

/* dx_plane: every record in order, each in-bounds corner j of it adding w[j] * grad (nearest:
 * grad) to the C adjacent channels at a + da_plane[j]; channels dense in both. */
static void test_gs3d_dx_plane(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(9);
    FOR_EACH_LEVEL(level) {
        const gradref__gs3d_kernels *k = gradref__gs3d_kernels_for(level);
        if (k == gradref__gs3d_kernels_for(level - 1) || k->dx_plane == NULL) continue;
        for (int iter = 0; iter < 300; iter++) {
            gs3d_kargs a;
            memset(&a, 0, sizeof a);
            const int64_t C = tu_range(&r, 1, 40), H = tu_range(&r, 2, 5), W = tu_range(&r, 2, 6);
            const int64_t points = tu_range(&r, 1, 30), count = tu_range(&r, 0, 60);
            a.shape.C = C;
            a.shape.interp = iter % 4 == 0 ? GRADREF_INTERP_NEAREST : GRADREF_INTERP_BILINEAR;
            const int64_t da[4] = {0, C, W * C, W * C + C};
            memcpy(a.da_plane, da, sizeof da);
            gs3d_record_f *rec = malloc(sizeof *rec * (size_t)(count + 1));
            float *gn = malloc(sizeof(float) * (size_t)(points * C));
            float *want = malloc(sizeof(float) * (size_t)(H * W * C));
            float *got = malloc(sizeof(float) * (size_t)(H * W * C));
            fill_specials(gn, GRADREF_F32, points * C, &r);
            fill_specials(want, GRADREF_F32, H * W * C, &r);
            memcpy(got, want, sizeof(float) * (size_t)(H * W * C));
            for (int64_t e = 0; e < count; e++) {
                rec[e].a = (tu_range(&r, 0, H - 2) * W + tu_range(&r, 0, W - 2)) * C;
                rec[e].g = tu_range(&r, 0, points - 1) * C;
                rec[e].on = (uint32_t)tu_range(&r, 0, 15);
                fill_weights(rec[e].w, 4, &r);
            }
            for (int64_t e = 0; e < count; e++)
                for (int j = 0; j < 4; j++) {
                    if (!((rec[e].on >> j) & 1u)) continue;
                    float *aj = want + rec[e].a + da[j];
                    for (int64_t c = 0; c < C; c++)
                        aj[c] += a.shape.interp == GRADREF_INTERP_NEAREST
                                     ? gn[rec[e].g + c]
                                     : rec[e].w[j] * gn[rec[e].g + c];
                }
            k->dx_plane(&a, rec, count, got, gn);
            gradref__canon_nans_f32(got, H * W * C,
                                    GRADREF__ISA_MAX); /* the plane's NaNs follow the rule later */
            gradref__canon_nans_f32(want, H * W * C, GRADREF__ISA_MAX);
            expect_bytes(got, want, sizeof(float) * (size_t)(H * W * C), "gs3d dx_plane", k->isa,
                         count, iter);
            free(rec);
            free(gn);
            free(want);
            free(got);
        }
    }
}

/* One point's trilinear dgrid as the portable pass makes it: over the channels, the in-bounds
 * corners k in order, each adding or subtracting v * h * d * g, v * w * d * g, v * w * h * g. */
static void gs3d_dgrid_point(const gs3d_kargs *a, int64_t n, int64_t q, float out[3]) {
    const int64_t NP = a->shape.N * a->P, i = n * a->P + q;
    const float *dist = a->g.dist, *mult = a->g.mult;
    const unsigned mask = a->g.mask[i];
    float gi[3] = {0.0f, 0.0f, 0.0f};
    const float w[2] = {dist[i], dist[NP + i]}, h[2] = {dist[2 * NP + i], dist[3 * NP + i]},
                d[2] = {dist[4 * NP + i], dist[5 * NP + i]};
    const float *xn = (const float *)a->x + n * a->xs[0] + a->g.offx[i];
    const float *gn =
        (const float *)a->grad + n * a->gs[0] + (a->grad_points_dense ? q : a->g.offg[i]);
    for (int64_t c = 0; mask && c < a->shape.C; c++)
        for (int k = 0; k < 8; k++) {
            if (!((mask >> k) & 1u)) continue;
            const int dz = k >> 2, dy = (k >> 1) & 1, dx = k & 1;
            const float v = xn[c * a->xs[1] + a->dx_corner[k]], g = gn[c * a->gs[1]];
            const float t[3] = {v * h[dy] * d[dz] * g, v * w[dx] * d[dz] * g,
                                v * w[dx] * h[dy] * g};
            const int up[3] = {dx, dy, dz};
            for (int j = 0; j < 3; j++)
                gi[j] = up[j] ? gi[j] + t[j] : gi[j] - t[j];
        }
    for (int j = 0; j < 3; j++)
        out[j] = mult[j * NP + i] * gi[j];
}

/* dgrid16 and dgrid8: the points they say they did, each as gs3d_dgrid_point, into a strided
 * dgrid view; the points after them untouched. Grad dense over the points or read through the
 * point offsets; x and grad channel-major or channels-last (grad then by the point offsets);
 * random corner masks (0 included), every corner inside (the unblended chains), or runs of six
 * points inside among random ones (NEON's half steps inside); x with specials, or finite. */
static void test_gs3d_dgrid(void **state) {
    (void)state;
    tu_rng r = tu_rng_make(10);
    FOR_EACH_LEVEL(level) {
        const gradref__gs3d_kernels *k = gradref__gs3d_kernels_for(level);
        if (k == gradref__gs3d_kernels_for(level - 1)) continue;
        for (int wide = 0; wide < 2; wide++) {
            int64_t (*dgrid)(const gs3d_kargs *, int64_t, int64_t, int64_t) =
                wide ? k->dgrid16 : k->dgrid8;
            for (int iter = 0; dgrid != NULL && iter < 200; iter++) {
                gs3d_kargs a;
                memset(&a, 0, sizeof a);
                gs3d_shape *s = &a.shape;
                s->N = 2, s->C = tu_range(&r, 1, 9);
                s->D = tu_range(&r, 2, 4), s->H = tu_range(&r, 2, 4), s->W = tu_range(&r, 2, 5);
                s->Ho = tu_range(&r, 1, 5), s->Wo = tu_range(&r, 1, 9);
                s->interp = GRADREF_INTERP_BILINEAR, s->dtype = GRADREF_F32, s->elem_size = 4;
                a.P = s->Ho * s->Wo;
                const int64_t V = s->D * s->H * s->W, NP = s->N * a.P, C = s->C;
                const int last = iter / 2 % 2, inside = iter / 4 % 3; /* last: channels-last */
                const int64_t cstep = last ? C : 1; /* a voxel's or a point's step */
                for (int c = 0; c < 8; c++)
                    a.dx_corner[c] =
                        ((c >> 2) * s->H * s->W + ((c >> 1) & 1) * s->W + (c & 1)) * cstep;
                float *x = malloc(sizeof(float) * (size_t)(s->N * C * V));
                float *grad = malloc(sizeof(float) * (size_t)(NP * C));
                float *dist = malloc(sizeof(float) * (size_t)(6 * NP));
                float *mult = malloc(sizeof(float) * (size_t)(3 * NP));
                int64_t *offx = malloc(sizeof(int64_t) * (size_t)NP);
                int64_t *offg = malloc(sizeof(int64_t) * (size_t)NP);
                int64_t *zplane = malloc(sizeof(int64_t) * (size_t)NP);
                uint8_t *mask = malloc((size_t)NP);
                const size_t out_floats = (size_t)(NP * 3 * 2); /* points 2 x 3 floats apart */
                float *want = malloc(sizeof(float) * out_floats);
                float *got = malloc(sizeof(float) * out_floats);
                if (iter / 12 % 2) /* finite: a NaN at any corner would hide the rest */
                    fill_weights(x, s->N * C * V, &r);
                else
                    fill_specials(x, GRADREF_F32, s->N * C * V, &r);
                fill_weights(grad, NP * C, &r);
                fill_weights(dist, 6 * NP, &r);
                fill_weights(mult, 3 * NP, &r);
                for (int64_t i = 0; i < NP; i++) {
                    zplane[i] = tu_range(&r, 0, s->D - 2);
                    offx[i] = ((zplane[i] * s->H + tu_range(&r, 0, s->H - 2)) * s->W +
                               tu_range(&r, 0, s->W - 2)) *
                              cstep;
                    offg[i] = tu_range(&r, 0, a.P - 1) * cstep;
                    const int all_in = inside == 1 || (inside == 2 && i / 6 % 2 == 0);
                    mask[i] = (uint8_t)(all_in                    ? 255
                                        : tu_range(&r, 0, 3) == 0 ? 0
                                                                  : tu_range(&r, 0, 255));
                }
                a.x = x, a.grad = grad;
                a.xs[0] = C * V, a.xs[1] = last ? 1 : V, a.xs[2] = s->H * s->W * cstep;
                a.xs[3] = s->W * cstep, a.xs[4] = cstep;
                a.grad_points_dense = iter % 2;
                a.gs[0] = C * a.P, a.gs[1] = last && !a.grad_points_dense ? 1 : a.P;
                a.g.dist = dist, a.g.mult = mult, a.g.offx = offx, a.g.offg = offg, a.g.mask = mask;
                a.g.zplane = zplane;
                s->dgrid.data = (char *)got;
                const int64_t dv[5] = {a.P * 6, a.P * 6, s->Wo * 6, 6, 1}; /* (n, d, h, w, k) */
                memcpy(s->dgrid.s, dv, sizeof dv);
                for (size_t e = 0; e < out_floats; e++)
                    want[e] = got[e] = (float)e;
                const int64_t n = tu_range(&r, 0, 1), q0 = tu_range(&r, 0, a.P - 1);
                const int64_t done = dgrid(&a, n, q0, a.P);
                if (done < 0 || done > a.P - q0 || (a.P - q0 - done) >= (wide ? 16 : 8))
                    fail_msg("gs3d dgrid%d at %s did %lld of %lld points", wide ? 16 : 8, k->isa,
                             (long long)done, (long long)(a.P - q0));
                for (int64_t q = q0; q < q0 + done; q++)
                    gs3d_dgrid_point(&a, n, q, want + n * dv[0] + q * 6);
                gradref__canon_nans_f32(got, (int64_t)out_floats, GRADREF__ISA_MAX);
                gradref__canon_nans_f32(want, (int64_t)out_floats, GRADREF__ISA_MAX);
                expect_bytes(got, want, sizeof(float) * out_floats,
                             wide ? "gs3d dgrid16" : "gs3d dgrid8", k->isa, done, iter);
                free(x);
                free(grad);
                free(dist);
                free(mult);
                free(offx);
                free(offg);
                free(zplane);
                free(mask);
                free(want);
                free(got);
            }
        }
    }
}

int main(void) {
    tu_seed();
    printf("kernel level: %s\n", gradref__isa_name(gradref__isa_level()));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_rows),
        cmocka_unit_test(test_rope_heads),
        cmocka_unit_test(test_recat_rows),
        cmocka_unit_test(test_canon_nans),
        cmocka_unit_test(test_all_finite),
        cmocka_unit_test(test_array_kernels),
        cmocka_unit_test(test_array_rows),
        cmocka_unit_test(test_c3f_add),
        cmocka_unit_test(test_c3f_panels),
        cmocka_unit_test(test_cbd_masks_and_scatter),
        cmocka_unit_test(test_cbd_depthwise),
        cmocka_unit_test(test_cbd_depthwise_lanes),
        cmocka_unit_test(test_cbd_depthwise_strided),
        cmocka_unit_test(test_cbd_plane3x3_depth),
        cmocka_unit_test(test_cbd_plane_scan),
        cmocka_unit_test(test_cbd_tiles),
        cmocka_unit_test(test_cbd_tile_columns),
        cmocka_unit_test(test_cbd_word_tiles),
        cmocka_unit_test(test_cbd_requantize),
        cmocka_unit_test(test_gs3d_dx_plane),
        cmocka_unit_test(test_gs3d_dgrid),
    };
    return TU_RUN_GROUP("kernels", tests);
}
