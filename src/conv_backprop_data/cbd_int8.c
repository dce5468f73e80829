/* SPDX-License-Identifier: Apache-2.0 */
/* I8 sums (I8 -> I32 and QuantizedS8) on the f32 kernels, exactly.
 *
 * The values and their products (|w * d| <= 2^14) are integers f32 holds, and so is every
 * partial sum of a grad element while its bound, sum |w| over the element's filter column
 * times max |diff|, is at most 2^24. Every order of the sum then gives the true integer, which
 * is the reference's int64 sum (its low 32 bits are the same number).
 *
 * A larger bound is cut along the sum: output channels in parts whose own bound is at most
 * 2^24, each part's sums exact in f32 and the parts' added in int32, mod 2^32 like the
 * reference's low 32 bits. The parts together do the work of one call. Only a single output
 * channel past the bound (taps x 128 x 128 > 2^24, more than 1024 taps) runs the reference
 * loop.
 *
 * Where the kernel table has word tiles (word_tile32), the direct tiles sum in int32 instead:
 * diff and the filter as 32-bit words of several output channels' values (two int16 halves for
 * x86's vpmaddwd, four bytes for Arm's SDOT), whose products the tiles add a word at a time.
 * Those sums are exact whatever their size, in one part. */
#include "cbd_int8.h"
#include "common/exec.h"
#include "common/internal.h"

#define F32_EXACT_INTEGERS (INT64_C(1) << 24)

/* A largest value found by the parts of a range: each part raises `most` to its own. */
typedef struct largest {
    const gradref__cbd_plan *p;
    int64_t part; /* largest_part_sum's output channels a part */
    int64_t most;
} largest;

static void raise_to(largest *l, int64_t v) {
    int64_t seen = __atomic_load_n(&l->most, __ATOMIC_RELAXED);
    while (v > seen &&
           !__atomic_compare_exchange_n(&l->most, &seen, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The largest sum of |w| over filter rows [b, e) (g, ic)'s columns (every tap) within a part
 * of `part` output channels. */
static void part_sums(const void *arg, int64_t b, int64_t e) {
    largest *l = (largest *)(uintptr_t)arg; /* raised atomically */
    const gradref__cbd_plan *p = l->p;
    const int64_t T = taps_of(p);
    const int8_t *w = (const int8_t *)(const void *)p->filter;
    int64_t most = 0;
    for (int64_t r = b; r < e; r++)
        for (int64_t oc0 = 0; oc0 < p->OCpg; oc0 += l->part) {
            const int64_t oc1 = oc0 + l->part < p->OCpg ? oc0 + l->part : p->OCpg;
            int64_t sum = 0;
            for (int64_t t = 0; t < T; t++) {
                const int64_t off = filter_offset(p, r / p->ICpg, r % p->ICpg, t);
                for (int64_t oc = oc0; oc < oc1; oc++) {
                    const int v = w[off + oc * p->fs[1]];
                    sum += v < 0 ? -v : v;
                }
            }
            if (sum > most) most = sum;
        }
    raise_to(l, most);
}

/* The largest sum of |w| over one input channel's filter column (every tap) within a part of
 * `part` output channels. */
static int64_t largest_part_sum(const gradref__cbd_plan *p, int64_t part, int threads) {
    const int64_t rows = p->G * p->ICpg;
    largest l = {p, part, 0};
    gradref__parallel_ranges(rows, rows * taps_of(p) * p->OCpg >= (INT64_C(1) << 15) ? threads : 1,
                             part_sums, &l);
    return l.most;
}

/* The largest |diff| over planes [b, e) (n, g, oc). */
static void diff_magnitudes(const void *arg, int64_t b, int64_t e) {
    largest *l = (largest *)(uintptr_t)arg; /* raised atomically */
    const gradref__cbd_plan *p = l->p;
    const int8_t *d = (const int8_t *)(const void *)p->diff;
    int most = 0;
    for (int64_t s = b; s < e; s++) {
        const int64_t n = s / (p->G * p->OCpg), c = s % (p->G * p->OCpg);
        const int8_t *plane = d + n * p->ds[0] + c * p->ds[2];
        for (int64_t o0 = 0; o0 < p->O[0]; o0++)
            for (int64_t o1 = 0; o1 < p->O[1]; o1++)
                for (int64_t o2 = 0; o2 < p->O[2]; o2++) {
                    const int v = plane[o0 * p->ds[3] + o1 * p->ds[4] + o2 * p->ds[5]];
                    const int a = v < 0 ? -v : v;
                    if (a > most) most = a;
                }
    }
    raise_to(l, most);
}

/* The largest |diff| (128 at most). */
static int64_t largest_diff(const gradref__cbd_plan *p, int threads) {
    const int64_t planes = p->N * p->G * p->OCpg;
    largest l = {p, 0, 0};
    gradref__parallel_ranges(planes, planes * pixels(p->O) >= (INT64_C(1) << 15) ? threads : 1,
                             diff_magnitudes, &l);
    return l.most;
}

int64_t gradref__cbd_int8_part(const gradref__cbd_plan *p, int threads) {
    if (p->OCpg == 0) return 1;
    int64_t column = largest_part_sum(p, p->OCpg, threads);
    if (column * 128 <= F32_EXACT_INTEGERS) return p->OCpg; /* most problems: diff unread */
    const int64_t most = largest_diff(p, threads);
    if (most == 0) return p->OCpg;
    const int64_t limit = F32_EXACT_INTEGERS / most;
    int64_t part = p->OCpg;
    while (column > limit) { /* parts of the size the bound asks, smaller where one fails */
        if (part == 1) return 0;
        const int64_t split = (column + limit - 1) / limit; /* >= 2 */
        part = (part + split - 1) / split;
        column = largest_part_sum(p, part, threads);
    }
    return part;
}

void gradref__cbd_fold_sums(const float *acc, int64_t n, int first, int32_t *sums) {
    for (int64_t i = 0; i < n; i++) {
        const uint32_t part = (uint32_t)(int32_t)acc[i];
        sums[i] = (int32_t)((first ? 0u : (uint32_t)sums[i]) + part);
    }
}

/* One grad row of n f32 integer sums (at most 2^24): I32, or requantised to QuantizedS8
 * (fields in locals: the int8 stores may alias the plan). */
static void store_f32_row(const gradref__cbd_plan *p, const gradref__cbd_kernels *k,
                          const float *from, char *to, int64_t step, int64_t n) {
    if (p->qs8) {
        const float as = p->qs8_acc_scale, gs = p->qs8_grad_scale;
        int8_t *out = (int8_t *)(void *)to;
        if (step == 1 && k->qs8_row)
            k->qs8_row(from, n, as, gs, out);
        else
            for (int64_t x = 0; x < n; x++)
                out[x * step] = gradref__cbd_qs8_requantize_inline((int32_t)from[x], as, gs);
        return;
    }
    int32_t *out = (int32_t *)(void *)to;
    for (int64_t x = 0; x < n; x++)
        out[x * step] = (int32_t)from[x];
}

void gradref__cbd_store_sums(const gradref__cbd_plan *p, const gradref__cbd_kernels *k,
                             const int32_t *from, char *to, int64_t step, int64_t n) {
    if (!p->qs8) {
        int32_t *out = (int32_t *)(void *)to;
        for (int64_t x = 0; x < n; x++)
            out[x * step] = from[x];
        return;
    }
    const float as = p->qs8_acc_scale, gs = p->qs8_grad_scale;
    int8_t *out = (int8_t *)(void *)to;
    int64_t x = 0;
    if (step == 1 && k->qs8_row) { /* the kernel takes (float)sum, as the scalar rule does */
        float part[256];
        while (n - x >= 8) {
            const int64_t len = (n - x < 256 ? n - x : 256) / 8 * 8;
            for (int64_t i = 0; i < len; i++)
                part[i] = (float)from[x + i];
            k->qs8_row(part, len, as, gs, out + x);
            x += len;
        }
    }
    for (; x < n; x++)
        out[x * step] = gradref__cbd_qs8_requantize_inline(from[x], as, gs);
}

typedef struct store_ctx {
    const gradref__cbd_plan *p;
    const gradref__cbd_kernels *k;
    const float *acc;    /* dense (image, channel, pixel) f32 sums, or */
    const int32_t *sums; /* the same in int32 */
} store_ctx;

static void store_slabs(const void *arg, int64_t s0, int64_t s1) {
    const store_ctx *c = arg;
    const gradref__cbd_plan *p = c->p;
    const int64_t px = pixels(p->I), C = p->G * p->ICpg;
    for (int64_t s = s0; s < s1; s++) {
        const int64_t n = s / C, ch = s % C;
        int64_t at = s * px;
        for (int64_t i0 = 0; i0 < p->I[0]; i0++)
            for (int64_t i1 = 0; i1 < p->I[1]; i1++, at += p->I[2]) {
                const int64_t e = n * p->gs[0] + ch * p->gs[2] + i0 * p->gs[3] + i1 * p->gs[4];
                char *to = p->grad + (size_t)e * p->out_size;
                if (c->sums)
                    gradref__cbd_store_sums(p, c->k, c->sums + at, to, p->gs[5], p->I[2]);
                else
                    store_f32_row(p, c->k, c->acc + at, to, p->gs[5], p->I[2]);
            }
    }
}

void gradref__cbd_store_int(const gradref__cbd_plan *p, const float *acc, const int32_t *sums,
                            int threads) {
    const store_ctx c = {p, gradref__cbd_kernels_for(p->max_isa), acc, sums};
    gradref__parallel_ranges(p->N * p->G * p->ICpg, threads, store_slabs, &c);
}

/* The word of the `have` (at most wc) I8 values v[0], v[step], ...: wc 2, int16 halves; wc 4,
 * bytes; the first value in the lowest bits, +0 past `have`. */
static inline int32_t channel_word(const int8_t *v, int64_t step, int64_t have, int wc) {
    if (have >= wc && wc == 2)
        return (int32_t)((uint32_t)(uint16_t)v[0] | (uint32_t)(uint16_t)v[step] << 16);
    if (have >= wc)
        return (int32_t)((uint32_t)(uint8_t)v[0] | (uint32_t)(uint8_t)v[step] << 8 |
                         (uint32_t)(uint8_t)v[2 * step] << 16 |
                         (uint32_t)(uint8_t)v[3 * step] << 24);
    const int bits = 32 / wc;
    const uint32_t mask = (1u << bits) - 1u;
    uint32_t word = 0;
    for (int i = 0; i < have; i++)
        word |= ((uint32_t)(int32_t)v[i * step] & mask) << (bits * i);
    return (int32_t)word;
}

/* channel_word of n dense pixels' whole words (rows `step` apart), in loops the compiler
 * vectorises. */
static void dense_words(const int8_t *v, int64_t step, int64_t n, int wc, int32_t *out) {
    if (wc == 2) {
        for (int64_t x = 0; x < n; x++)
            out[x] = (int32_t)((uint32_t)(uint16_t)v[x] | (uint32_t)(uint16_t)v[step + x] << 16);
        return;
    }
    for (int64_t x = 0; x < n; x++)
        out[x] = (int32_t)((uint32_t)(uint8_t)v[x] | (uint32_t)(uint8_t)v[step + x] << 8 |
                           (uint32_t)(uint8_t)v[2 * step + x] << 16 |
                           (uint32_t)(uint8_t)v[3 * step + x] << 24);
}

void gradref__cbd_words_run(const gradref__cbd_plan *p, int wc, int64_t e, int64_t have, int64_t n,
                            int64_t s, int32_t *out) {
    const int8_t *v = (const int8_t *)(const void *)p->diff + e;
    if (s == 1 && have >= wc) {
        dense_words(v, p->ds[2], n, wc, out);
        return;
    }
    for (int64_t x = 0; x < n; x++)
        out[x] = channel_word(v + x * s, p->ds[2], have, wc);
}

typedef struct stage_ctx {
    const gradref__cbd_plan *p;
    int32_t *out;
    int64_t words;
    int wc;
} stage_ctx;

static void stage_planes(const void *arg, int64_t s0, int64_t s1) {
    const stage_ctx *c = arg;
    const gradref__cbd_plan *p = c->p;
    const int64_t *ds = p->ds;
    const int dense = dense_pixels(ds, p->O);
    for (int64_t s = s0; s < s1; s++) { /* (image, group, word) */
        const int64_t n = s / (p->G * c->words), g = s / c->words % p->G;
        const int64_t oc = c->wc * (s % c->words), at = n * ds[0] + g * ds[1] + oc * ds[2];
        int32_t *out = c->out + s * pixels(p->O);
        if (dense) { /* the plane as one row */
            gradref__cbd_words_run(p, c->wc, at, p->OCpg - oc, pixels(p->O), 1, out);
            continue;
        }
        for (int64_t o0 = 0; o0 < p->O[0]; o0++)
            for (int64_t o1 = 0; o1 < p->O[1]; o1++, out += p->O[2])
                gradref__cbd_words_run(p, c->wc, at + o0 * ds[3] + o1 * ds[4], p->OCpg - oc,
                                       p->O[2], ds[5], out);
    }
}

void gradref__cbd_stage_words(const gradref__cbd_plan *p, int wc, int32_t *out, int threads) {
    const stage_ctx c = {p, out, (p->OCpg + wc - 1) / wc, wc};
    gradref__parallel_ranges(p->N * p->G * c.words, threads, stage_planes, &c);
}

void gradref__cbd_pack_word_panel(const gradref__cbd_plan *p, int wc, int64_t g, int64_t ic0,
                                  int64_t rows, const int64_t *tap, int64_t ntaps, int64_t mr,
                                  int32_t *dst) {
    const int8_t *w = (const int8_t *)(const void *)p->filter;
    for (int64_t i = 0; i < ntaps; i++) {
        const int64_t off = filter_offset(p, g, ic0, tap[4 * i]);
        for (int64_t oc = 0; oc < p->OCpg; oc += wc, dst += mr) {
            int64_t r = 0;
            for (; r < rows; r++)
                dst[r] = channel_word(w + off + oc * p->fs[1] + r * p->fs[2], p->fs[1],
                                      p->OCpg - oc, wc);
            for (; r < mr; r++)
                dst[r] = 0;
        }
    }
}
