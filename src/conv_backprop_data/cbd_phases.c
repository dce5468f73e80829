/* SPDX-License-Identifier: Apache-2.0 */
/* The stride phases of conv_backprop_data's GEMM path (cbd_fast.c says why): the grad indices
 * i with i mod stride = ph are reached by a fixed set of taps, so each live phase is one GEMM
 * over its sub-grid of grad pixels, written straight into grad (stride 1) or through a chunk
 * buffer scattered into the grad slab. */
#include <stdlib.h>

#include "cbd_int8.h"
#include "cbd_phases.h"
#include "cbd_tiles.h"
#include "common/gemm.h"
#include "common/internal.h"
#include "common/nan.h"

/* cbd_pack_b's row source on the staged f32 diff (dense planes, f->R->dn and dc apart). */
static inline void phase_row(const void *src, int64_t oc, const int64_t *o, int64_t n, float *out) {
    const cbd_phase *f = src;
    const gradref__cbd_plan *p = f->R->p;
    const float *row = f->R->diff + f->n * f->R->dn + (f->g * p->OCpg + oc) * f->R->dc +
                       (o[0] * p->O[1] + o[1]) * p->O[2] + o[2];
    for (int64_t x = 0; x < n; x++)
        out[x] = row[x];
}

/* B (k = (phase tap, oc); columns: sub-grid pixels q) from diff shifted by the tap, zero
 * outside diff: the implicit im2col. */
static void pack_b_phase(const void *ctx, int64_t k0, int64_t kc, int64_t first, int64_t count,
                         int width, float *dst) {
    const cbd_phase *f = ctx;
    const gradref__cbd_plan *p = f->R->p;
    cbd_pack_b(p, f->Q, f->tap, p->OCpg, 0, f->j_base + first, k0, kc, count, width, dst, phase_row,
               f);
}

/* Taps reaching phase ph, in the reference's order (diff position ascending); returns count. */
int64_t gradref__cbd_phase_taps(const gradref__cbd_plan *p, const int64_t *ph, int64_t *tap) {
    int64_t n = 0, kp[3];
    for (kp[0] = p->K[0] - 1; kp[0] >= 0; kp[0]--)
        for (kp[1] = p->K[1] - 1; kp[1] >= 0; kp[1]--)
            for (kp[2] = p->K[2] - 1; kp[2] >= 0; kp[2]--) {
                int64_t shift[3], ok = 1;
                for (int j = 0; j < 3 && ok; j++) {
                    const int64_t num = ph[j] + p->pad_begin[j] - kp[j] * p->dil[j];
                    const int64_t s = p->stride[j];
                    ok = num % s == 0;
                    /* exact division, rounding toward -inf for negative num */
                    shift[j] = num >= 0 ? num / s : -((-num) / s);
                }
                if (!ok) continue;
                int64_t k[3];
                for (int j = 0; j < 3; j++)
                    k[j] = p->mode == GRADREF_CONV_CROSS_CORRELATION ? kp[j] : p->K[j] - 1 - kp[j];
                tap[4 * n] = (k[0] * p->K[1] + k[1]) * p->K[2] + k[2];
                tap[4 * n + 1] = shift[0];
                tap[4 * n + 2] = shift[1];
                tap[4 * n + 3] = shift[2];
                n++;
            }
    return n;
}

/* `rows` runs of len values (from, contiguous) to grad rows row_stride apart, stride[2] apart
 * within a row; as a pair (a stride of 2), odd's values (+0 without odd) go between from's,
 * every element of the runs' 2 len written, and with zero_at the 2 len elements zero_at past
 * them are +0. Else the first phase along the row (ph2 0) may write +0 between its values:
 * those elements are +0 (the slab is zeroed first) or a later phase's, written after it. */
static void scatter_rows(const cbd_run *R, const float *from, const float *odd, int pair,
                         int64_t zero_at, int64_t len, int64_t rows, float *row, int64_t row_stride,
                         int64_t ph2) {
    const int64_t step = R->p->stride[2];
    if (pair && R->k->interleave2) {
        R->k->interleave2(from, odd, len, rows, row, row_stride, zero_at);
        return;
    }
    if (pair) {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t x = 0; x < len; x++) {
                float *at = row + r * row_stride + 2 * x;
                at[0] = from[r * len + x];
                at[1] = odd ? odd[r * len + x] : 0.0f;
                if (zero_at) at[zero_at] = at[zero_at + 1] = 0.0f;
            }
        return;
    }
    if (step == 2 && R->k->scatter2) {
        R->k->scatter2(from, len, rows, row, row_stride, ph2 == 0);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t x = 0; x < len; x++)
            row[r * row_stride + x * step] = from[r * len + x];
}

/* How the strided phases run along the row (item_pair), with a stride of 2 there, phase 0
 * live and an even grad width: 2, in pairs (both sub-grids are the same); 1, phase 0 alone,
 * interleaved with +0. Else 0: one phase at a time, scattered. */
static int row_pairs(const cbd_run *R) {
    const gradref__cbd_plan *p = R->p;
    if (unit_strides(p) || p->stride[2] != 2 || p->I[2] % 2 != 0 || R->ocpg == 0 ||
        R->nres[2] == 0 || R->res[2][0] != 0)
        return 0;
    return (int)R->nres[2];
}

/* Whether the pairs also write +0 into the grad row below each of theirs (interleave2's
 * zero_at): a stride of 2 along dim 1, whose residue 1 no tap reaches, and an even height. */
static int zero_rows_below(const cbd_run *R) {
    const gradref__cbd_plan *p = R->p;
    return row_pairs(R) && p->stride[1] == 2 && R->nres[1] == 1 && R->res[1][0] == 0 &&
           p->I[1] % 2 == 0;
}

/* grad positions j0..j1 of phase ph's sub-grid, for M channels (chunk: M rows of j1 - j0), to
 * the slabs at slab0: runs of a sub-grid row, or whole rows of one sub-grid plane per call;
 * as a pair, interleaved with odd (the next phase along the row, ph2 1, of the same sub-grid)
 * or with +0, and the zero rows below theirs written too (zero_rows_below). */
static void scatter_chunk(const cbd_run *R, const cbd_phase *f, const int64_t *ph, float *slab0,
                          const float *chunk, const float *odd, int pair, int64_t M, int64_t j0,
                          int64_t j1) {
    const gradref__cbd_plan *p = R->p;
    /* whole rows only when a phase has several rows (then stride[1] < I[1]: no overflow) */
    const int64_t W = f->Q[2], row_stride = f->Q[1] > 1 ? p->stride[1] * p->I[2] : 0;
    const int64_t start2 = j0 % W, start1 = j0 / W % f->Q[1], start0 = j0 / (W * f->Q[1]);
    const int64_t zero_at = pair && zero_rows_below(R) ? p->I[2] : 0;
    for (int64_t m = 0; m < M; m++) { /* each grad element is in one cbd_phase */
        float *slab = slab0 + m * R->ac;
        const int64_t at = m * (j1 - j0);
        int64_t q2 = start2, q1 = start1, q0 = start0;
        for (int64_t j = j0; j < j1;) {
            const int64_t len = W - q2 < j1 - j ? W - q2 : j1 - j;
            int64_t rows = 1;
            if (q2 == 0 && len == W) {
                rows = (j1 - j) / W;
                if (rows > f->Q[1] - q1) rows = f->Q[1] - q1;
            }
            float *row =
                slab +
                ((q0 * p->stride[0] + ph[0]) * p->I[1] + q1 * p->stride[1] + ph[1]) * p->I[2] +
                q2 * p->stride[2] + ph[2];
            scatter_rows(R, chunk + at + (j - j0), odd ? odd + at + (j - j0) : NULL, pair, zero_at,
                         len, rows, row, row_stride, ph[2]);
            j += rows * len;
            q2 += len;
            q1 += rows - 1;
            if (q2 == W) {
                q2 = 0;
                if (++q1 == f->Q[1]) q1 = 0, q0++;
            }
        }
    }
}

/* Whether direct tiles may run on a phase of sub-grid sizes Q (the table has them, for words
 * too, and offsets fit int32). */
static int flat_ok(const cbd_run *R, const int64_t *Q) {
    const int kernel = R->word_channels ? R->k->word_tile32 && R->mr == R->k->word_rows
                                        : R->k->tile32 && R->mr == R->k->tile_rows;
    return kernel && pixels(R->p->O) < INT64_C(1) << 30 && pixels(Q) < INT64_C(1) << 30;
}

/* Whether a phase of sub-grid sizes Q runs direct tiles: they may, and its sub-grid has diff's
 * last two sizes. */
static int phase_direct(const cbd_run *R, const int64_t *Q) {
    return flat_ok(R, Q) && Q[1] == R->p->O[1] && Q[2] == R->p->O[2];
}

/* Live phase number f's offsets ph along the three dims (the last varies fastest). */
static void phase_at(const cbd_run *R, int64_t f, int64_t *ph) {
    ph[0] = R->res[0][f / (R->nres[1] * R->nres[2])];
    ph[1] = R->res[1][f / R->nres[2] % R->nres[1]];
    ph[2] = R->res[2][f % R->nres[2]];
}

static int compare_int64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The live phases along each dim into `at` (K[0] + K[1] + K[2] slots): the offsets
 * (k * dilation - pad_begin) mod stride of the taps, distinct, ascending, below the grad size.
 * A huge stride thus costs nothing: the other phases hold no tap and stay +0. */
void gradref__cbd_live_phases(cbd_run *R, int64_t *at) {
    const gradref__cbd_plan *p = R->p;
    R->phases = 1;
    for (int j = 0; j < 3; j++) {
        int64_t n = 0;
        for (int64_t k = 0; k < p->K[j]; k++) {
            int64_t r = (k * p->dil[j] - p->pad_begin[j]) % p->stride[j];
            if (r < 0) r += p->stride[j];
            if (r < p->I[j]) at[n++] = r;
        }
        qsort(at, (size_t)n, sizeof *at, compare_int64);
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (m == 0 || at[i] != at[m - 1]) at[m++] = at[i];
        R->res[j] = at;
        R->nres[j] = m;
        R->phases *= m;
        at += p->K[j];
    }
}

/* The sub-grid sizes of stride phase ph; returns their product. */
static int64_t phase_grid(const gradref__cbd_plan *p, const int64_t *ph, int64_t *Q) {
    int64_t N = 1;
    for (int j = 0; j < 3; j++) {
        Q[j] = ph[j] < p->I[j] ? (p->I[j] - ph[j] - 1) / p->stride[j] + 1 : 0;
        N *= Q[j];
    }
    return N;
}

/* Whether every stride phase that has pixels and taps runs direct tiles (item_phase). */
int gradref__cbd_all_direct(const cbd_run *R, int64_t *tap) {
    const gradref__cbd_plan *p = R->p;
    for (int64_t f = 0; f < R->phases; f++) {
        int64_t ph[3];
        phase_at(R, f, ph);
        int64_t Q[3];
        if (phase_grid(p, ph, Q) == 0 || gradref__cbd_phase_taps(p, ph, tap) == 0) continue;
        if (!phase_direct(R, Q)) return 0;
    }
    return 1;
}

/* Phase f_index of channels [ic0, ic0 + M) of image n, group g, into f and a (its GEMM with
 * the packed panels); returns the sub-grid's pixel count. */
static int64_t phase_setup(const cbd_run *R, int64_t n, int64_t g, int64_t ic0, int64_t M,
                           int64_t f_index, cbd_phase *f, gradref__sgemm_args *a) {
    memset(f, 0, sizeof *f);
    f->R = R, f->n = n, f->g = g, f->ic0 = ic0;
    int64_t ph[3];
    phase_at(R, f_index, ph);
    const int64_t N = phase_grid(R->p, ph, f->Q);
    f->ntaps = cbd_phase_taps_of(R, f_index, &f->tap);
    f->index = f_index;
    memset(a, 0, sizeof *a);
    a->M = M;
    a->K = f->ntaps * R->ocpg;
    a->pack_b = pack_b_phase;
    a->pack_b_ctx = f;
    a->a_panels =
        R->panels + g * R->group_floats + R->phase_off[f_index] + ic0 / R->pr * a->K * R->mr;
    return N;
}

/* A strided phase's sub-grid pixels [j0, j1) of its M channels into chunk (M rows of j1 - j0),
 * the NaN rule applied; the first phase's tiles zero the slab as they go, the rest before. */
static void phase_chunk(const cbd_run *R, cbd_phase *f, gradref__sgemm_args *a, int64_t M,
                        int64_t j0, int64_t j1, float *chunk, const cbd_scratch *S, cbd_zeros *z) {
    f->j_base = j0;
    a->N = j1 - j0;
    a->c = chunk;
    a->c_rs = j1 - j0;
    a->c_cs = 1;
    int scan = 1;
    if (phase_direct(R, f->Q))
        scan = gradref__cbd_direct_tiles(R, f, a->a_panels, M, j0, j1, chunk, j1 - j0, S, z) != 0;
    else
        gradref__sgemm(a, R->max_isa, S->gemm);
    zeros_rest(z);
    if (scan) cbd_run_canon(R, chunk, M * (j1 - j0)); /* the NaN rule, on the phase's values */
}

/* The sub-grid pixels per chunk of `floats` for M channels: whole sub-grid rows when they fit. */
static int64_t chunk_step(int64_t W, int64_t M, int64_t floats) {
    const int64_t per_row = W * M;
    if (per_row <= floats) return floats / per_row * W;
    return floats / M > 0 ? floats / M : 1;
}

/* Channels [ic0, ic1) of image n, group g, stride phase ph: a GEMM (or 32-pixel tiles) straight
 * into grad when the stride is 1, else through the chunk buffer, whole sub-grid rows at a
 * time when they fit, then scattered. Returns whether the values written straight into grad
 * still need the NaN and signed-zero scan (the GEMM's always; the tiles' when one is a zero or
 * a NaN); the chunks get theirs here. */
static int item_phase(const cbd_run *R, int64_t n, int64_t g, int64_t ic0, int64_t M,
                      int64_t f_index, float *slab0, const cbd_scratch *S, cbd_zeros *z) {
    const gradref__cbd_plan *p = R->p;
    cbd_phase f;
    gradref__sgemm_args a;
    const int64_t N = phase_setup(R, n, g, ic0, M, f_index, &f, &a);
    if (N == 0) return 0;
    if (unit_strides(p) && phase_direct(R, f.Q))
        return gradref__cbd_direct_tiles(R, &f, a.a_panels, M, 0, N, slab0, R->ac, S, NULL) != 0;
    if (unit_strides(p)) { /* the only phase: straight into grad */
        a.N = N;
        a.c = slab0;
        a.c_rs = R->ac;
        a.c_cs = 1;
        gradref__sgemm(&a, R->max_isa, S->gemm);
        return 1;
    }
    if (a.K == 0) return 0; /* no tap reaches this phase: +0 from the start */
    int64_t ph[3];
    phase_at(R, f_index, ph);
    const int64_t step = chunk_step(f.Q[2], M, GRADREF__CBD_CHUNK_FLOATS);
    for (int64_t j0 = 0; j0 < N; j0 += step) {
        const int64_t j1 = j0 + step < N ? j0 + step : N;
        phase_chunk(R, &f, &a, M, j0, j1, S->chunk, S, z);
        scatter_chunk(R, &f, ph, slab0, S->chunk, NULL, 0, M, j0, j1);
    }
    return 0;
}

/* Phase f_index (ph2 0) and with `both` f_index + 1 (ph2 1): a chunk of each into its half of
 * the chunk buffer, then interleaved into the grad rows (+0 for a missing second phase), each
 * of their elements stored once, none read back. */
static void item_pair(const cbd_run *R, int64_t n, int64_t g, int64_t ic0, int64_t M,
                      int64_t f_index, int both, float *slab0, const cbd_scratch *S, cbd_zeros *z) {
    cbd_phase f[2];
    gradref__sgemm_args a[2];
    const int64_t N = phase_setup(R, n, g, ic0, M, f_index, &f[0], &a[0]);
    if (both) phase_setup(R, n, g, ic0, M, f_index + 1, &f[1], &a[1]);
    if (N == 0) return;
    int64_t ph[3];
    phase_at(R, f_index, ph);
    float *odd = both ? S->chunk + GRADREF__CBD_CHUNK_FLOATS / 2 : NULL;
    const int64_t step = chunk_step(f[0].Q[2], M, GRADREF__CBD_CHUNK_FLOATS / (both ? 2 : 1));
    for (int64_t j0 = 0; j0 < N; j0 += step) {
        const int64_t j1 = j0 + step < N ? j0 + step : N;
        phase_chunk(R, &f[0], &a[0], M, j0, j1, S->chunk, S, z);
        if (both) phase_chunk(R, &f[1], &a[1], M, j0, j1, odd, S, z);
        scatter_chunk(R, &f[0], ph, slab0, S->chunk, odd, 1, M, j0, j1);
    }
}

/* Whether the phases write every grad element (the slab then needs no zeros first): pairs
 * along the row, every residue of dim 0 live, and every one of dim 1 or the zero rows below. */
static int phases_cover(const cbd_run *R) {
    const gradref__cbd_plan *p = R->p;
    if (!row_pairs(R) || R->nres[0] < (p->stride[0] < p->I[0] ? p->stride[0] : p->I[0])) return 0;
    return R->nres[1] >= (p->stride[1] < p->I[1] ? p->stride[1] : p->I[1]) || zero_rows_below(R);
}

/* Channels [ic0, ic0 + M) of image n, group g, every stride phase in turn. */
static void item_block(const cbd_run *R, int64_t n, int64_t g, int64_t ic0, int64_t M,
                       const cbd_scratch *S) {
    const gradref__cbd_plan *p = R->p;
    float *slab0 = R->acc + n * R->an + (g * p->ICpg + ic0) * R->ac;
    cbd_zeros z = {(char *)slab0, 0, 0};
    /* phases fill in their elements; the ones no tap reaches stay +0 */
    if (!unit_strides(p) && !phases_cover(R)) {
        if (R->ac == pixels(p->I)) /* one block, zeroed between the first phase's tiles */
            z.left = (size_t)(M * R->ac) * sizeof(float);
        else
            for (int64_t m = 0; m < M; m++)
                memset(slab0 + m * R->ac, 0, (size_t)pixels(p->I) * sizeof(float));
    }
    int scan = 0;
    const int pairs = row_pairs(R);
    for (int64_t f_index = 0; f_index < R->phases; f_index += pairs ? pairs : 1)
        if (pairs) /* residues {0, 1} or {0} along the row: phases f (and f + 1) of a row */
            item_pair(R, n, g, ic0, M, f_index, pairs == 2, slab0, S, &z);
        else
            scan |= item_phase(R, n, g, ic0, M, f_index, slab0, S, &z);
    zeros_rest(&z); /* no phase had a tap */
    /* the NaN rule, while the slab is in the cache (strided: per chunk), where a value may
     * need it */
    if (unit_strides(p) && scan)
        for (int64_t m = 0; m < M; m++)
            cbd_run_canon(R, slab0 + m * R->ac, pixels(p->I));
}

/* One work item: channels [ic0, ic1) of image n, group g. A strided phase's chunk holds at
 * least one pixel of every channel: past the floats of a phase's chunk buffer (half of it for
 * a pair), blocks of whole panels. */
void gradref__cbd_item_gemm(const cbd_run *R, int64_t n, int64_t g, int64_t ic0, int64_t ic1,
                            const cbd_scratch *S) {
    const int64_t floats = GRADREF__CBD_CHUNK_FLOATS / (row_pairs(R) == 2 ? 2 : 1);
    const int64_t most = unit_strides(R->p) ? ic1 - ic0 : floats / R->pr * R->pr;
    for (int64_t b0 = ic0; b0 < ic1; b0 += most)
        item_block(R, n, g, b0, ic1 - b0 < most ? ic1 - b0 : most, S);
}

/* gradref__cbd_pack_panel of an F32 filter already scanned: no test in the loops, and the rows
 * past `rows` zeroed by one memset a panel rather than a call for a few bytes at every k. */
static void pack_f32_panel(const gradref__cbd_plan *p, int64_t g, int64_t ic0, int64_t rows,
                           const int64_t *tap, int64_t ntaps, int64_t mr, float *dst) {
    const float *f = (const float *)(const void *)p->filter;
    const int64_t s1 = p->fs[1], s2 = p->fs[2], OC = p->OCpg;
    if (rows < mr) memset(dst, 0, (size_t)(ntaps * OC * mr) * sizeof *dst);
    for (int64_t i = 0; i < ntaps; i++) {
        const float *w = f + filter_offset(p, g, ic0, tap[4 * i]);
        float *d = dst + i * OC * mr;
        if (rows == 6) /* AVX2's panels, unrolled */
            for (int64_t oc = 0; oc < OC; oc++, w += s1, d += mr) {
                d[0] = w[0], d[1] = w[s2], d[2] = w[2 * s2], d[3] = w[3 * s2];
                d[4] = w[4 * s2], d[5] = w[5 * s2];
            }
        else
            for (int64_t oc = 0; oc < OC; oc++, w += s1, d += mr)
                for (int64_t r = 0; r < rows; r++)
                    d[r] = w[r * s2];
    }
}

int gradref__cbd_pack_panel(const gradref__cbd_plan *p, int64_t g, int64_t ic0, int64_t rows,
                            const int64_t *tap, int64_t ntaps, int64_t mr, int check, float *dst) {
    if (p->in_dtype == GRADREF_F32 && !check) {
        pack_f32_panel(p, g, ic0, rows, tap, ntaps, mr, dst);
        return 1;
    }
    int finite = 1;
    for (int64_t i = 0; i < ntaps; i++) {
        const int64_t off = filter_offset(p, g, ic0, tap[4 * i]);
        for (int64_t oc = 0; oc < p->OCpg; oc++, dst += mr) {
            const int64_t at = off + oc * p->fs[1];
            int64_t r = 0;
            if (p->in_dtype == GRADREF_F32) { /* tested as loaded, not from dst (stores) */
                const float *w = (const float *)(const void *)p->filter + at;
                for (; r < rows; r++) {
                    dst[r] = w[r * p->fs[2]];
                    finite &= isfinite(w[r * p->fs[2]]) != 0;
                }
            } else {
                for (; r < rows; r++) {
                    dst[r] = filter_value(p, at + r * p->fs[2]);
                    finite &= isfinite(dst[r]) != 0;
                }
            }
            for (; r < mr; r++)
                dst[r] = 0.0f;
        }
    }
    return finite;
}

/* Each live phase's taps and where each (group, phase) starts in the panels, before the
 * region: the items and the packing read the taps from there (a phase's list costs three
 * divisions a tap and dim). */
void gradref__cbd_panel_offsets(cbd_run *R, const cbd_layout *L, char *base) {
    const gradref__cbd_plan *p = R->p;
    int64_t *off = (int64_t *)(base + L->phase_off);
    int64_t *taps = (int64_t *)(base + L->phase_taps), *tap_at = (int64_t *)(base + L->tap_at);
    R->group_floats = L->group_floats;
    R->panels = L->private_panels ? NULL : (const float *)(base + L->panels); /* a thread's own */
    R->phase_off = off;
    R->phase_taps = taps;
    R->tap_at = tap_at;
    int64_t at = 0;
    tap_at[0] = 0;
    for (int64_t f = 0; f < R->phases; f++) {
        int64_t ph[3];
        phase_at(R, f, ph);
        off[f] = at;
        const int64_t n = gradref__cbd_phase_taps(p, ph, taps + 4 * tap_at[f]);
        tap_at[f + 1] = tap_at[f] + n;
        at += (p->ICpg + R->pr - 1) / R->pr * R->mr * n * R->ocpg;
    }
}

/* Whether the F32 filter's rows [ic0, ic0 + rows) of group g hold every tap of each output
 * channel in one run (dense from the input channel down), and then finite &= their scan: one
 * vector pass instead of a test per value as they are packed. */
static int block_scan(const cbd_run *R, int64_t g, int64_t ic0, int64_t rows, int *finite) {
    const gradref__cbd_plan *p = R->p;
    int64_t taps = 1; /* the dense size of the dims inside, from k2 out */
    for (int d = 2; d >= 0; d--) {
        if (p->K[d] > 1 && p->fs[3 + d] != taps) return 0;
        taps *= p->K[d];
    }
    if (p->in_dtype != GRADREF_F32 || (rows > 1 && p->fs[2] != taps)) return 0;
    int (*all_finite)(const float *, int64_t) =
        gradref__nan_kernels_for(R->max_isa)->all_finite_f32;
    const float *w = (const float *)(const void *)p->filter + g * p->fs[0] + ic0 * p->fs[2];
    for (int64_t oc = 0; oc < p->OCpg; oc++)
        *finite &= all_finite(w + oc * p->fs[1], rows * taps);
    return 1;
}

/* Whether the F32 filter is one dense run (group, output channel, input channel, taps), and
 * then finite &= this thread's share of its scan (all of it with `all`): one vector pass over
 * the filter instead of one per block and output channel (a call each). */
static int filter_scan(const cbd_run *R, int all, int *finite) {
    const gradref__cbd_plan *p = R->p;
    if (p->in_dtype != GRADREF_F32 || R->word_channels) return 0;
    const int64_t sizes[6] = {p->G, p->OCpg, p->ICpg, p->K[0], p->K[1], p->K[2]};
    int64_t dense = 1;
    for (int d = 5; d >= 0; d--) {
        if (sizes[d] > 1 && p->fs[d] != dense) return 0;
        dense *= sizes[d];
    }
    int64_t b = 0, e = dense;
    if (!all) gradref__my_range(dense, &b, &e);
    *finite &= gradref__nan_kernels_for(R->max_isa)
                   ->all_finite_f32((const float *)(const void *)p->filter + b, e - b);
    return 1;
}

/* This thread's share of the panels of every (group, live phase), or all of them with `all`,
 * inside the region: the filter is read once per call, into the panels the tiles and the GEMM
 * take. A thread takes blocks of panel rows (input channels), each for every live phase, so
 * the block's filter lines are read from L2 once, not once per phase (only live phases have
 * panels: a share of all four phases of a 1x1 stride 2 left one thread every panel). Returns
 * 0 when a value it read is not finite. */
int gradref__cbd_pack_panels(const cbd_run *R, int all) {
    const gradref__cbd_plan *p = R->p;
    const int64_t np = (p->ICpg + R->pr - 1) / R->pr;
    int finite = 1;
    const int whole = filter_scan(R, all, &finite);
    int64_t b = 0, e = p->G * np;
    if (!all) gradref__my_range(p->G * np, &b, &e);
    for (int64_t it = b; it < e; it++) {
        const int64_t g = it / np, ic0 = it % np * R->pr;
        const int64_t rows = p->ICpg - ic0 < R->pr ? p->ICpg - ic0 : R->pr;
        const int scanned = whole || (!R->word_channels && block_scan(R, g, ic0, rows, &finite));
        for (int64_t f = 0; f < R->phases; f++) { /* the block's filter lines stay in L1 */
            const int64_t *tap;
            const int64_t ntaps = cbd_phase_taps_of(R, f, &tap);
            if (ntaps == 0) continue;
            float *dst = (float *)R->panels + g * R->group_floats + R->phase_off[f] +
                         ic0 / R->pr * ntaps * R->ocpg * R->mr;
            if (R->word_channels)
                gradref__cbd_pack_word_panel(p, R->word_channels, g, ic0, rows, tap, ntaps, R->mr,
                                             (int32_t *)(void *)dst);
            else
                finite &=
                    gradref__cbd_pack_panel(p, g, ic0, rows, tap, ntaps, R->mr, !scanned, dst);
        }
    }
    return finite;
}
