/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's "direct" strategy, the first that needs no workspace (for a caller
 * workspace too small for one thread's share): the fast path's block GEMMs with stack buffers
 * only. A work item is one GEMM tile of
 * dw (group g, mr rows j = (tap, ci), nr columns co); each block of GRADREF__C3F_BLOCK reduction
 * indices r = (n, od, oh, ow) is one gradref__sgemm_small call from +0 (x and dy packed from
 * the caller's tensors, widened and, at the HF32 precisions, rounded to HF32 as they are read;
 * x is 0 where a tap falls outside it), pushed into the tile's summation counter, whose fold is
 * dw. Each dw element is thus the reference's block chains combined in its order; the zero terms
 * are exact for a finite dy (c3f_fast.c), which the path checks first. */
#include <math.h>
#include <string.h>

#include "c3f_counter.h"
#include "c3f_internal.h"
#include "c3f_kernels.h"
#include "common/convert.h"
#include "common/convert_array.h"
#include "common/exec.h"
#include "common/gemm.h"
#include "common/gemm_kernels.h"
#include "common/nan.h"

enum {
    MAX_LEVELS = 24, /* 2^24 blocks of reduction indices (4.3e9 of them; beyond, the loop) */
    /* the counter's floats (23 KiB: with the GEMM's 11, a small thread stack holds them): its
     * levels + 1 slots of a tile; an AVX-512 panel up to 12 levels (2^12 blocks), more panels
     * (dy packed once for all) with fewer levels, a narrower level's panel with more
     * (kernel_level) */
    COUNTER_FLOATS = 13 * GRADREF__AVX512_MR * GRADREF__AVX512_NR,
    /* a tile's floats at most: three AVX-512 panels (more would push their level counter out of
     * L1) */
    MAX_TILE = 3 * GRADREF__AVX512_MR * GRADREF__AVX512_NR,
    /* a tap's channels go by the 8 x 8 few_lanes kernel below this, not by 16-wide
     * transposes that would run mostly empty (AVX2's 6-row panels above all) */
    FEW_LANES = 8,
    GEMM_KC = 48,                 /* a block's GEMM in K slices of 48 */
    GEMM_NC = GRADREF__AVX512_NR, /* a tile's columns: at most one panel */
    /* F16 and BF16 runs are widened into a buffer of this many floats, a piece at a time: x's
     * 16 channels x 24 rows, or fewer than 8 channels x GEMM_KC; dy's 32 channels x 12 rows */
    WIDE_FLOATS = 16 * 24,
    WIDE_X = WIDE_FLOATS / 16,      /* x's rows a piece */
    WIDE_DY = WIDE_FLOATS / GEMM_NC /* dy's rows a piece */
};

typedef struct direct {
    const gradref__c3f_plan *p;
    int64_t g, j0, co0, r0;
    int hf32;                         /* kept bits at an HF32 precision, else 0 */
    const gradref__array_kernels *ak; /* F16 and BF16 runs widened (runs_f32) */
} direct;

static float value(const gradref__c3f_plan *p, const char *base, int64_t e, int hf32) {
    const float v = gradref__load_f32(p->in_dtype, base, e);
    return hf32 ? gradref__hf32_round(v, hf32) : v;
}

/* Whether the call's x and dy are F16 or BF16, whose runs the array kernels widen. */
static int half(const direct *d) {
    return d->p->in_dtype == GRADREF_F16 || d->p->in_dtype == GRADREF_BF16;
}

/* `rows` runs of n elements of x or dy (base) from element e, run r at e + r * stride, as f32:
 * F32 in place (*cs = stride), F16 and BF16 widened into tmp, runs `pitch` floats apart (*cs =
 * pitch); each element's scalar conversion took most of the call. */
static const float *runs_f32(const direct *d, const char *base, int64_t e, int64_t stride,
                             int64_t rows, int64_t n, float *tmp, int64_t pitch, int64_t *cs) {
    if (!half(d)) {
        *cs = stride;
        return (const float *)(const void *)base + e;
    }
    gradref__half_rows_to_f32(d->ak, d->p->in_dtype, (const uint16_t *)(const void *)base + e,
                              stride, tmp, pitch, (size_t)n, (size_t)rows);
    *cs = pitch;
    return tmp;
}

/* n consecutive F16 or BF16 elements of base from e on (n <= GEMM_KC), as value() reads them,
 * into dst[i * step]. */
static void widen_run(const direct *d, const char *base, int64_t e, int64_t n, float *dst,
                      int64_t step) {
    float tmp[GEMM_KC];
    int64_t cs;
    const float *v = runs_f32(d, base, e, 0, 1, n, tmp, GEMM_KC, &cs);
    for (int64_t i = 0; i < n; i++)
        dst[i * step] = d->hf32 ? gradref__hf32_round(v[i], d->hf32) : v[i];
}

/* The reduction index r as (n, od, oh, ow). */
static void decode(const gradref__c3f_plan *p, int64_t r, int64_t *o) {
    o[3] = r % p->O[2];
    o[2] = r / p->O[2] % p->O[1];
    o[1] = r / (p->O[2] * p->O[1]) % p->O[0];
    o[0] = r / (p->O[2] * p->O[1] * p->O[0]);
}

/* The block's reduction indices as runs along ow: for each run of fixed (n, od, oh), ow from
 * o[3] for len indices, at k within the block. */
#define FOR_EACH_RUN(p, r_first, kc, k, len, o)                                                    \
  int64_t o[4];                                                                                    \
  decode(p, r_first, o);                                                                           \
  for (int64_t k = 0, len = 0; k < (kc); k += len, o[3] += len, advance(p, o))                     \
    if ((len = (p)->O[2] - o[3] < (kc)-k ? (p)->O[2] - o[3] : (kc)-k) > 0)

/* After a run: o[3] past the row wraps to the next (oh, od, n). */
static void advance(const gradref__c3f_plan *p, int64_t *o) {
    if (o[3] < p->O[2]) return;
    o[3] = 0;
    if (++o[2] == p->O[1]) {
        o[2] = 0;
        if (++o[1] == p->O[0]) o[1] = 0, o[0]++;
    }
}

/* The input offset of a row's tap: input index = o * stride + shift per dim. */
static void tap_shift(const gradref__c3f_plan *p, int64_t t, int64_t *shift) {
    const int64_t kk[3] = {t / (p->K[1] * p->K[2]), t / p->K[2] % p->K[1], t % p->K[2]};
    for (int q = 0; q < 3; q++) {
        const int64_t kp = p->mode == GRADREF_CONV_CROSS_CORRELATION ? kk[q] : p->K[q] - 1 - kk[q];
        shift[q] = kp * p->dil[q] - p->pad_begin[q];
    }
}

/* A run of a tap's x: its ow with iw inside x, [*lo, *hi) of len, the offset (without the
 * channel) of the iw at lo, and *step between iws. Offsets and steps are formed only from
 * indices inside x: a tap in a huge pad would overflow them. */
static int64_t x_bounds(const gradref__c3f_plan *p, const int64_t *shift, const int64_t *o,
                        int64_t len, int64_t *lo, int64_t *hi, int64_t *step) {
    const int64_t id = o[1] * p->stride[0] + shift[0], ih = o[2] * p->stride[1] + shift[1];
    const int64_t s = p->stride[2], first = o[3] * s + shift[2]; /* iw at the run's start */
    *lo = *hi = len;
    *step = 0;
    if (id < 0 || id >= p->I[0] || ih < 0 || ih >= p->I[1]) return 0;
    *lo = first >= 0 ? 0 : (-first + s - 1) / s;
    *hi = first > p->I[2] - 1 ? 0 : (p->I[2] - 1 - first) / s + 1;
    *hi = *hi < len ? *hi : len;
    *lo = *lo < *hi ? *lo : *hi;
    if (*hi == *lo) return 0;
    if (*hi - *lo > 1) *step = s * p->xs[4]; /* two iws inside x: s < I[2] */
    return o[0] * p->xs[0] + id * p->xs[2] + ih * p->xs[3] + (first + *lo * s) * p->xs[4];
}

/* dst[i * step] for i < len: the row's x along a run, 0 where the tap falls outside x. */
static void x_run(const direct *d, int64_t channel, const int64_t *shift, const int64_t *o,
                  int64_t len, float *dst, int64_t step) {
    const gradref__c3f_plan *p = d->p;
    int64_t lo, hi, s;
    const int64_t base = x_bounds(p, shift, o, len, &lo, &hi, &s) + channel;
    for (int64_t i = 0; i < lo; i++)
        dst[i * step] = 0.0f;
    if (half(d) && (s == 1 || hi - lo == 1))
        widen_run(d, p->x, base, hi - lo, dst + lo * step, step);
    else
        for (int64_t i = lo; i < hi; i++)
            dst[i * step] = value(p, p->x, base + (i - lo) * s, d->hf32);
    for (int64_t i = hi; i < len; i++)
        dst[i * step] = 0.0f;
}

/* Lanes [la, la + n) of a run's len panel rows (width floats apart, row 0 at dst) by the
 * level's panel_lanes: rows [lo, hi) from src (row lo's first channel, step floats a row), zeros
 * else. The rows inside are a call of their own, so that no pointer is formed before src. */
static void run_lanes(const gradref__c3f_kernels *k, float *dst, int width, const float *src,
                      int64_t step, int64_t lo, int64_t hi, int64_t len, int64_t la, int64_t n) {
    k->panel_lanes(dst, width, NULL, 0, 0, 0, lo, la, la + n);
    k->panel_lanes(dst + lo * width, width, src, step, 0, hi - lo, hi - lo, la, la + n);
    k->panel_lanes(dst + hi * width, width, NULL, 0, 0, 0, len - hi, la, la + n);
}

/* Lanes [la, la + n) of A's panel (width floats a row) for one tap and the n channels from ci,
 * by the kernels' register transposes: F32 x with unit steps along the runs (stride 1, unit
 * stride along w), n <= 16. The rows, rounded at HF32, go into the panel by panel_lanes (n >= 8
 * only in AVX-512's and NEON's panels, whose panel_lanes take 16 lanes and any). */
static void x_lanes_transposed(const direct *d, const gradref__c3f_kernels *k, const int64_t *shift,
                               int64_t ci, int64_t n, int64_t r_first, int64_t kc, float *dst,
                               int width, int64_t la, float *wide) {
    const gradref__c3f_plan *p = d->p;
    __attribute__((aligned(64))) float tmp[GEMM_KC * 16];
    const int64_t channel = (d->g * p->Cin_g + ci) * p->xs[1];
    FOR_EACH_RUN(p, r_first, kc, q, len, o) {
        int64_t lo, hi, step, cs; /* step 1: unit stride along w */
        const int64_t base = x_bounds(p, shift, o, len, &lo, &hi, &step);
        for (int64_t h = 0, m; h < hi - lo; h += m) { /* F16 and BF16 in pieces of WIDE_X */
            m = half(d) && hi - lo - h > WIDE_X ? WIDE_X : hi - lo - h;
            const float *src =
                runs_f32(d, p->x, channel + base + h, p->xs[1], n, m, wide, WIDE_X, &cs);
            k->gather_panel(tmp + h * 16, 16, src, cs, m, n);
        }
        if (hi > lo && d->hf32) k->round_hf32(tmp, tmp, (hi - lo) * 16, d->hf32);
        run_lanes(k, dst + q * width, width, tmp, 16, lo, hi, len, la, n);
    }
}

/* The same for fewer than FEW_LANES channels (a first layer's 3, AVX2's 6-row panels), whose
 * 16-wide transposes would run mostly empty: the level's few_lanes kernel (8 x 8 transposes,
 * rounding at HF32). */
static void x_lanes_few(const direct *d, const gradref__c3f_kernels *k, const int64_t *shift,
                        int64_t ci, int64_t n, int64_t r_first, int64_t kc, float *dst, int width,
                        int64_t la, float *wide) {
    const gradref__c3f_plan *p = d->p;
    const int64_t channel = (d->g * p->Cin_g + ci) * p->xs[1];
    FOR_EACH_RUN(p, r_first, kc, q, len, o) {
        int64_t lo, hi, step, cs; /* step 1: unit stride along w */
        const int64_t base = x_bounds(p, shift, o, len, &lo, &hi, &step);
        const float *src =
            runs_f32(d, p->x, channel + base, p->xs[1], n, hi - lo, wide, GEMM_KC, &cs);
        k->few_lanes(dst + q * width + la, width, src, cs, lo, hi, len, n, d->hf32);
    }
}

/* Lanes [la, la + n) of len panel rows from dst (width floats a row): rows [lo, hi) from x (row
 * lo's first channel, rows step floats apart), by panel_lanes where the level has it and no
 * rounding is due, else inline (a few lanes: the kernel's call would cost more); zeros else. */
static void lanes_of_rows(const direct *d, const gradref__c3f_kernels *k, float *dst, int width,
                          const float *x, int64_t step, int64_t lo, int64_t hi, int64_t len,
                          int64_t la, int64_t n) {
    if (k->panel_lanes && !d->hf32) {
        run_lanes(k, dst, width, x, step, lo, hi, len, la, n);
        return;
    }
    for (int64_t i = 0; i < len; i++) {
        float *row = dst + i * width + la;
        if (i < lo || i >= hi) {
            for (int64_t l = 0; l < n; l++)
                row[l] = 0.0f;
            continue;
        }
        const float *from = x + (i - lo) * step;
        if (d->hf32)
            for (int64_t l = 0; l < n; l++)
                row[l] = gradref__hf32_round(from[l], d->hf32);
        else
            for (int64_t l = 0; l < n; l++)
                row[l] = from[l];
    }
}

/* The same where x's channels are contiguous (NDHWC): each row of a run is n consecutive
 * floats (any n; its rows' lanes are [la, la + n) of width <= the level's mr), F16 and BF16
 * widened WIDE_X rows at a time. */
static void x_lanes_contiguous(const direct *d, const gradref__c3f_kernels *k, const int64_t *shift,
                               int64_t ci, int64_t n, int64_t r_first, int64_t kc, float *dst,
                               int width, int64_t la, float *wide) {
    const gradref__c3f_plan *p = d->p;
    FOR_EACH_RUN(p, r_first, kc, q, len, o) {
        int64_t lo, hi, step;
        const int64_t base = x_bounds(p, shift, o, len, &lo, &hi, &step);
        for (int64_t a = 0, m; a < len; a += m) { /* F16 and BF16 in pieces of WIDE_X rows */
            m = half(d) && len - a > WIDE_X ? WIDE_X : len - a;
            const int64_t plo = lo < a ? 0 : lo - a < m ? lo - a : m;
            const int64_t phi = hi < a ? 0 : hi - a < m ? hi - a : m;
            int64_t cs; /* x's row a + plo (row lo when none is inside), rows cs floats apart */
            const float *x = runs_f32(
                d, p->x, d->g * p->Cin_g + ci + base + (phi > plo ? a + plo - lo : 0) * step, step,
                phi - plo, n, wide, 16, &cs);
            lanes_of_rows(d, k, dst + (q + a) * width, width, x, cs, plo, phi, m, la, n);
        }
    }
}

/* A (rows j = (tap, ci) from j0 + first, k = the block's r from r0 + k0): x at the tap, 0
 * outside x; rows past the last are 0. Lanes of one tap go together where they can: by
 * transposes (NCDHW) or as contiguous channels (NDHWC); F16 and BF16 runs through `wide`. */
static void pack_a_rows(const direct *d, int64_t k0, int64_t kc, int64_t first, int64_t count,
                        int width, float *dst, float *wide) {
    const gradref__c3f_plan *p = d->p;
    const gradref__c3f_kernels *k = gradref__c3f_kernels_for(p->max_isa);
    const int floats = p->in_dtype == GRADREF_F32 || half(d), contiguous = floats && p->xs[1] == 1;
    const int transposed = k->gather_panel != NULL && k->panel_lanes != NULL &&
                           k->few_lanes != NULL && floats && p->xs[4] == 1 && p->stride[2] == 1 &&
                           kc <= GEMM_KC;
    const int64_t T = p->K[0] * p->K[1] * p->K[2];
    for (int64_t i0 = 0; i0 < count; i0 += width, dst += kc * width)
        for (int64_t i = 0, n = 1; i < width; i += n) {
            const int64_t j = d->j0 + first + i0 + i, t = j / p->Cin_g, ci = j % p->Cin_g;
            n = 1;
            if (i0 + i >= count || t >= T) {
                for (int64_t q = 0; q < kc; q++)
                    dst[q * width + i] = 0.0f;
                continue;
            }
            int64_t shift[3];
            tap_shift(p, t, shift);
            if (transposed || contiguous) { /* the lanes of this tap: channels ci on */
                n = width - i;
                n = n < count - i0 - i ? n : count - i0 - i;
                n = n < p->Cin_g - ci ? n : p->Cin_g - ci;
                if (contiguous) {
                    x_lanes_contiguous(d, k, shift, ci, n, d->r0 + k0, kc, dst, width, i, wide);
                    continue;
                }
                n = n < 16 ? n : 16;
                if (n < FEW_LANES)
                    x_lanes_few(d, k, shift, ci, n, d->r0 + k0, kc, dst, width, i, wide);
                else
                    x_lanes_transposed(d, k, shift, ci, n, d->r0 + k0, kc, dst, width, i, wide);
                continue;
            }
            const int64_t channel = (d->g * p->Cin_g + ci) * p->xs[1];
            FOR_EACH_RUN(p, d->r0 + k0, kc, q, len, o)
            x_run(d, channel, shift, o, len, dst + q * width + i, width);
        }
}

/* B by the kernels' register transposes: dy with unit stride along ow (F16 and BF16 runs widened
 * first); HF32 rounds the panel after, in L1. */
static int pack_b_transposed(const direct *d, int64_t k0, int64_t kc, int64_t first, int64_t count,
                             int width, float *dst, float *wide) {
    const gradref__c3f_plan *p = d->p;
    const gradref__c3f_kernels *k = gradref__c3f_kernels_for(p->max_isa);
    /* the gather takes its own GEMM's panel width (the table's kernels are the GEMM's level) */
    if (k->gather_panel == NULL || (p->in_dtype != GRADREF_F32 && !half(d)) || p->ys[4] != 1 ||
        width != k->gemm->nr || kc > GEMM_KC)
        return 0;
    for (int64_t c0 = 0; c0 < count; c0 += width, dst += kc * width) {
        const int64_t cols = count - c0 < width ? count - c0 : width;
        const int64_t channel = (d->g * p->Cout_g + d->co0 + first + c0) * p->ys[1];
        FOR_EACH_RUN(p, d->r0 + k0, kc, q, len, o) {
            const int64_t at = channel + o[0] * p->ys[0] + o[1] * p->ys[2] + o[2] * p->ys[3] + o[3];
            for (int64_t h = 0, m; h < len; h += m) { /* F16 and BF16 in pieces of WIDE_DY */
                m = half(d) && len - h > WIDE_DY ? WIDE_DY : len - h;
                int64_t cs;
                const float *src =
                    runs_f32(d, p->dy, at + h, p->ys[1], cols, m, wide, WIDE_DY, &cs);
                k->gather_panel(dst + (q + h) * width, width, src, cs, m, cols);
            }
        }
        if (d->hf32) k->round_hf32(dst, dst, kc * width, d->hf32);
    }
    return 1;
}

/* Rows [0, len) of a B panel (width floats a row): lanes [0, cols) from src's rows (step
 * floats apart), zeros past them (the level's copy_panel, else row by row). */
static void rows_into_panel(const gradref__c3f_kernels *k, float *dst, int width, const float *src,
                            int64_t step, int64_t len, int64_t cols) {
    if (k->copy_panel && width % 8 == 0) {
        k->copy_panel(dst, width, src, step, len, cols);
        return;
    }
    for (int64_t i = 0; i < len; i++, src += step) {
        float *row = dst + i * width;
        memcpy(row, src, (size_t)cols * sizeof *row);
        for (int64_t c = cols; c < width; c++)
            row[c] = 0.0f;
    }
}

/* B from NDHWC dy, whose k's columns are contiguous: each panel row copied (the level's
 * copy_panel kernel, else row by row; F16 and BF16 runs widened first); HF32 rounds the panel
 * after, in L1. */
static int pack_b_rows(const direct *d, int64_t k0, int64_t kc, int64_t first, int64_t count,
                       int width, float *dst, float *wide) {
    const gradref__c3f_plan *p = d->p;
    const gradref__c3f_kernels *k = gradref__c3f_kernels_for(p->max_isa);
    if ((p->in_dtype != GRADREF_F32 && !half(d)) || p->ys[1] != 1 || width > GEMM_NC ||
        kc > GEMM_KC)
        return 0;
    for (int64_t c0 = 0; c0 < count; c0 += width, dst += kc * width) {
        const int64_t cols = count - c0 < width ? count - c0 : width;
        const int64_t channel = d->g * p->Cout_g + d->co0 + first + c0;
        FOR_EACH_RUN(p, d->r0 + k0, kc, q, len, o) {
            const int64_t at =
                channel + o[0] * p->ys[0] + o[1] * p->ys[2] + o[2] * p->ys[3] + o[3] * p->ys[4];
            for (int64_t h = 0, m; h < len; h += m) { /* F16 and BF16 in pieces of WIDE_DY */
                m = half(d) && len - h > WIDE_DY ? WIDE_DY : len - h;
                int64_t step;
                const float *from =
                    runs_f32(d, p->dy, at + h * p->ys[4], p->ys[4], m, cols, wide, GEMM_NC, &step);
                rows_into_panel(k, dst + (q + h) * width, width, from, step, m, cols);
            }
        }
        if (d->hf32) k->round_hf32(dst, dst, kc * width, d->hf32);
    }
    return 1;
}

/* B (k = the block's r from r0 + k0, columns co from co0 + first): dy, read along its rows; F16
 * and BF16 runs through `wide`. */
static void pack_b_columns(const direct *d, int64_t k0, int64_t kc, int64_t first, int64_t count,
                           int width, float *dst, float *wide) {
    const gradref__c3f_plan *p = d->p;
    if (pack_b_transposed(d, k0, kc, first, count, width, dst, wide)) return;
    if (pack_b_rows(d, k0, kc, first, count, width, dst, wide)) return;
    for (int64_t c0 = 0; c0 < count; c0 += width, dst += kc * width)
        for (int64_t c = 0; c < width; c++) {
            if (c0 + c >= count) {
                for (int64_t k = 0; k < kc; k++)
                    dst[k * width + c] = 0.0f;
                continue;
            }
            const int64_t channel = (d->g * p->Cout_g + d->co0 + first + c0 + c) * p->ys[1];
            FOR_EACH_RUN(p, d->r0 + k0, kc, k, len, o) {
                const int64_t base =
                    o[0] * p->ys[0] + channel + o[1] * p->ys[2] + o[2] * p->ys[3] + o[3] * p->ys[4];
                float *out = dst + k * width + c;
                if (half(d) && (p->ys[4] == 1 || len == 1)) {
                    widen_run(d, p->dy, base, len, out, width);
                    continue;
                }
                for (int64_t i = 0; i < len; i++)
                    out[i * width] = value(p, p->dy, base + i * p->ys[4], d->hf32);
            }
        }
}

/* A packer's body: wide holds WIDE_FLOATS for F16 and BF16 runs (NULL for F32). */
typedef void (*packer_body)(const direct *d, int64_t k0, int64_t kc, int64_t first, int64_t count,
                            int width, float *dst, float *wide);

/* body with the buffer of F16 and BF16 runs (noinline: off the F32 calls' stack). */
__attribute__((noinline)) static void with_widening(packer_body body, const direct *d, int64_t k0,
                                                    int64_t kc, int64_t first, int64_t count,
                                                    int width, float *dst) {
    __attribute__((aligned(64))) float wide[WIDE_FLOATS];
    body(d, k0, kc, first, count, width, dst, wide);
}

/* The GEMM's packers: pack_a_rows and pack_b_columns, F16 and BF16 with_widening. */
static inline void pack_by(packer_body body, const void *ctx, int64_t k0, int64_t kc, int64_t first,
                           int64_t count, int width, float *dst) {
    const direct *d = ctx;
    if (half(d))
        with_widening(body, d, k0, kc, first, count, width, dst);
    else
        body(d, k0, kc, first, count, width, dst, NULL);
}

static void pack_a_x(const void *ctx, int64_t k0, int64_t kc, int64_t first, int64_t count,
                     int width, float *dst) {
    pack_by(pack_a_rows, ctx, k0, kc, first, count, width, dst);
}

static void pack_b_dy(const void *ctx, int64_t k0, int64_t kc, int64_t first, int64_t count,
                      int width, float *dst) {
    pack_by(pack_b_columns, ctx, k0, kc, first, count, width, dst);
}

static int64_t reductions(const gradref__c3f_plan *p) {
    return p->N * p->O[0] * p->O[1] * p->O[2];
}

static int levels_for(int64_t blocks) {
    int levels = 1;
    while (levels < 63 && (INT64_C(1) << levels) <= blocks)
        levels++;
    return levels;
}

/* One tile: rows [j0, j0 + M), columns [co0, co0 + N) of group g. */
static void tile(const gradref__c3f_plan *p, int64_t g, int64_t j0, int64_t M, int64_t co0,
                 int64_t N) {
    __attribute__((aligned(64))) float work[GRADREF__SGEMM_SMALL_FLOATS(GEMM_KC, GEMM_NC)];
    __attribute__((aligned(64))) float level[COUNTER_FLOATS];
    const int64_t R = reductions(p), blocks = (R + GRADREF__C3F_BLOCK - 1) / GRADREF__C3F_BLOCK;
    direct d = {p, g, j0, co0, 0, gradref__hf32_kept_bits(p->precision), NULL};
    d.ak = gradref__array_kernels_for(p->max_isa);
    gradref__c3f_counter c = gradref__c3f_counter_make(gradref__c3f_kernels_for(p->max_isa), level,
                                                       M * N, levels_for(blocks));
    gradref__sgemm_args a;
    memset(&a, 0, sizeof a);
    a.M = M;
    a.N = N;
    a.pack_a = pack_a_x;
    a.pack_b = pack_b_dy;
    a.pack_a_ctx = a.pack_b_ctx = &d;
    a.c_rs = N;
    a.c_cs = 1;
    for (int64_t b = 0; b < blocks; b++) {
        d.r0 = b * GRADREF__C3F_BLOCK;
        a.K = R - d.r0 < GRADREF__C3F_BLOCK ? R - d.r0 : GRADREF__C3F_BLOCK;
        a.c = gradref__c3f_counter_slot(&c);
        gradref__sgemm_small(&a, p->max_isa, work, GEMM_KC, GEMM_NC);
        gradref__c3f_counter_push(&c);
    }
    const float *sum = blocks > 0 ? gradref__c3f_counter_fold(&c, NULL) : NULL;
    const int64_t T = p->K[0] * p->K[1] * p->K[2];
    for (int64_t i = 0; i < M; i++) {
        const int64_t j = j0 + i, t = j / p->Cin_g, ci = j % p->Cin_g;
        const int64_t k0 = t / (p->K[1] * p->K[2]), k1 = t / p->K[2] % p->K[1], k2 = t % p->K[2];
        if (t >= T) continue;
        for (int64_t n = 0; n < N; n++) {
            const int64_t co = g * p->Cout_g + co0 + n;
            char *e = p->dw + (size_t)(co * p->ws[0] + ci * p->ws[1] + k0 * p->ws[2] +
                                       k1 * p->ws[3] + k2 * p->ws[4]) *
                                  p->out_size;
            gradref__store_float(p->out_dtype, e, sum ? (double)sum[i * N + n] : 0.0);
        }
    }
}

/* The widest kernel level at or below p->max_isa whose panel's counter (levels + 1 slots of
 * mr x nr) fits the stack's COUNTER_FLOATS, or -1: every level gives the same bits. */
static int kernel_level(const gradref__c3f_plan *p) {
    const int64_t blocks = (reductions(p) + GRADREF__C3F_BLOCK - 1) / GRADREF__C3F_BLOCK;
    const int64_t slots = levels_for(blocks) + 1;
    for (int level = p->max_isa; level >= GRADREF__ISA_PORTABLE; level--)
        if (slots * gradref__sgemm_mr(level) * gradref__sgemm_nr(level) <= COUNTER_FLOATS)
            return level;
    return -1;
}

/* The smallest magnitude, as bits, of an f32 that is not finite once HF32-rounded to `hf32`
 * kept bits (0: not rounded): Inf's, or the first that rounds up to it. */
static uint32_t nonfinite_from(int hf32) {
    uint32_t lo = 0x7f000000u, hi = 0x7f800000u; /* lo rounds to a finite value, hi does not */
    while (hf32 && hi - lo > 1) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (isfinite(gradref__hf32_round(gradref__f32_from_bits(mid), hf32)))
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* Whether n contiguous F32 values all lie below `limit` in magnitude bits: common/nan's scan
 * for plain finiteness, else the largest magnitude's bits (a loop the compiler vectorises). */
static int row_below(const gradref__nan_kernels *k, const float *row, int64_t n, uint32_t limit) {
    if (limit == 0x7f800000u) return k->all_finite_f32(row, n);
    uint32_t worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t u = gradref__f32_bits(row[i]) & 0x7fffffffu;
        worst = u > worst ? u : worst;
    }
    return worst < limit;
}

/* Whether dy's n elements from e on (unit stride) all stay below `limit` in magnitude bits:
 * F32 by row_below; F16 and BF16, which HF32 leaves as they are, finite by their exponents (a
 * loop the compiler vectorises). */
static int row_finite(const gradref__c3f_plan *p, const gradref__nan_kernels *k, int64_t e,
                      int64_t n, uint32_t limit) {
    if (p->in_dtype == GRADREF_F32)
        return row_below(k, (const float *)(const void *)p->dy + e, n, limit);
    const uint16_t *row = (const uint16_t *)(const void *)p->dy + e;
    const uint16_t exponent = p->in_dtype == GRADREF_F16 ? 0x7c00 : 0x7f80;
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad |= (row[i] & exponent) == exponent;
    return !bad;
}

/* dy with a unit-stride dim (ow, or the channels), row by row along it: whether every value
 * stays finite once HF32-rounded (hf32 0: as it is). A NaN whose rounding wraps to zero counts
 * as not finite here, which only sends such a call to the reference loop. */
static int rows_finite(const gradref__c3f_plan *p, const gradref__nan_kernels *k, int hf32) {
    const uint32_t limit = nonfinite_from(hf32);
    const int64_t C = p->G * p->Cout_g, *ys = p->ys;
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t a = 0; a < (ys[4] == 1 ? C : p->O[0]); a++)
            for (int64_t b = 0; b < (ys[4] == 1 ? p->O[0] : p->O[1]); b++)
                for (int64_t c = 0; c < (ys[4] == 1 ? p->O[1] : p->O[2]); c++) {
                    /* NCDHW-like (n, co, od, oh) rows along ow; else (n, od, oh, ow) channels */
                    const int64_t e = ys[4] == 1 ? n * ys[0] + a * ys[1] + b * ys[2] + c * ys[3]
                                                 : n * ys[0] + a * ys[2] + b * ys[3] + c * ys[4];
                    if (!row_finite(p, k, e, ys[4] == 1 ? p->O[2] : C, limit)) return 0;
                }
    return 1;
}

/* Whether the path takes plan p: the fast path's dtypes and precisions (not F64 or HIGH), few
 * enough blocks for the stack's counter, and a finite dy (as the GEMM reads it). */
int gradref__c3f_direct_fits(const gradref__c3f_plan *p) {
    if (p->in_dtype == GRADREF_F64 || p->precision == GRADREF_PRECISION_HIGH) return 0;
    const int64_t blocks = (reductions(p) + GRADREF__C3F_BLOCK - 1) / GRADREF__C3F_BLOCK;
    if (levels_for(blocks) > MAX_LEVELS || kernel_level(p) < 0) return 0;
    const int hf32 = gradref__hf32_kept_bits(p->precision);
    if (p->ys[4] == 1 || p->ys[1] == 1) /* F32, F16 or BF16 */
        return rows_finite(p, gradref__nan_kernels_for(p->max_isa), hf32);
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t co = 0; co < p->G * p->Cout_g; co++)
            for (int64_t od = 0; od < p->O[0]; od++)
                for (int64_t oh = 0; oh < p->O[1]; oh++)
                    for (int64_t ow = 0; ow < p->O[2]; ow++)
                        if (!isfinite(value(p, p->dy,
                                            n * p->ys[0] + co * p->ys[1] + od * p->ys[2] +
                                                oh * p->ys[3] + ow * p->ys[4],
                                            hf32)))
                            return 0;
    return 1;
}

typedef struct tiling {
    const gradref__c3f_plan *p;
    int64_t mr, nr, row_tiles, col_tiles;
} tiling;

static void tiles(const void *arg, int64_t begin, int64_t end) {
    const tiling *t = arg;
    const gradref__c3f_plan *p = t->p;
    const int64_t J = p->K[0] * p->K[1] * p->K[2] * p->Cin_g;
    for (int64_t it = begin; it < end; it++) {
        const int64_t g = it / (t->row_tiles * t->col_tiles);
        const int64_t j0 = it / t->col_tiles % t->row_tiles * t->mr;
        const int64_t co0 = it % t->col_tiles * t->nr;
        tile(p, g, j0, J - j0 < t->mr ? J - j0 : t->mr, co0,
             p->Cout_g - co0 < t->nr ? p->Cout_g - co0 : t->nr);
    }
}

/* The most columns a tile takes: all of a group's, up to the GEMM's block of them (GEMM_NC),
 * while one row panel's counter fits. */
static int64_t widest_columns(const gradref__c3f_plan *p, int64_t slots, int64_t mr, int64_t nr) {
    int64_t cols = (p->Cout_g + nr - 1) / nr * nr;
    if (cols > GEMM_NC / nr * nr) cols = GEMM_NC / nr * nr;
    while (cols > nr && slots * mr * cols > COUNTER_FLOATS)
        cols -= nr;
    return cols;
}

/* *t for tiles of `cols` columns and as many row panels as the counter and a tile hold (each
 * packs dy once for all of them), while every thread keeps two tiles or more (a dw element's
 * chains do not depend on its tile). Returns what the tiles pack per reduction index: x's J
 * rows once per column tile, dy's columns once per row tile. */
static int64_t shape_tiles(const gradref__c3f_plan *p, int threads, int64_t slots, int64_t mr,
                           int64_t cols, tiling *t) {
    const int64_t J = p->K[0] * p->K[1] * p->K[2] * p->Cin_g;
    t->p = p;
    t->nr = cols;
    t->col_tiles = (p->Cout_g + cols - 1) / cols;
    const int64_t panels = p->G * ((J + mr - 1) / mr) * t->col_tiles;
    int64_t per_tile = COUNTER_FLOATS / (slots * mr * cols);
    if (per_tile > MAX_TILE / (mr * cols)) per_tile = MAX_TILE / (mr * cols);
    if (per_tile > panels / (2 * (int64_t)threads)) per_tile = panels / (2 * (int64_t)threads);
    t->mr = (per_tile > 1 ? per_tile : 1) * mr;
    t->row_tiles = (J + t->mr - 1) / t->mr;
    return t->col_tiles * J + t->row_tiles * p->Cout_g;
}

void gradref__c3f_direct(const gradref__c3f_plan *plan, int threads) {
    gradref__c3f_plan narrowed = *plan; /* the level whose counter fits the stack */
    narrowed.max_isa = kernel_level(plan);
    const gradref__c3f_plan *p = &narrowed;
    const int64_t mr = gradref__sgemm_mr(p->max_isa), nr = gradref__sgemm_nr(p->max_isa);
    const int64_t blocks = (reductions(p) + GRADREF__C3F_BLOCK - 1) / GRADREF__C3F_BLOCK;
    const int64_t slots = levels_for(blocks) + 1;
    /* the tile width that packs the fewest x rows and dy columns: wide tiles pack x (27 rows a
     * channel for a 3x3x3 kernel) fewer times, tall ones dy (the first layer's 64 channels
     * against 3) */
    tiling t;
    const int64_t widest = widest_columns(p, slots, mr, nr);
    int64_t least = shape_tiles(p, threads, slots, mr, widest, &t);
    for (int64_t cols = widest - nr; cols >= nr; cols -= nr) {
        tiling shape;
        const int64_t packed = shape_tiles(p, threads, slots, mr, cols, &shape);
        if (packed < least) least = packed, t = shape;
    }
    gradref__parallel_ranges(p->G * t.row_tiles * t.col_tiles, threads, tiles, &t);
}
