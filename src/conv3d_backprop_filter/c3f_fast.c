/* SPDX-License-Identifier: Apache-2.0 */
/* The fast path for F32 compute (F32, F16, BF16 at the default precision; F32 at the HF32
 * precisions, from staged copies rounded to HF32):
 *
 *   for each block of GRADREF__C3F_BLOCK reduction indices r = (n, od, oh, ow):
 *     S_block[j][co] = sum over r in the block of col[j][r] * dy[r][co]     (one GEMM slice)
 *   dw = the blocks' binary-counter combination (the reference's order)
 *
 * with j = (tap, ci) and col the im2col of x for the block (zero where the tap falls outside
 * x). With AVX-512 or AVX2 col is never built: the indirect kernel reads row r of a tap through
 * a pointer into x and skips the rows outside it (with few channels, x staged with zeros past its
 * w edges lets one tile take a tap row's every kw); otherwise col is packed into GEMM panels.
 * A zero term is exact when dy is finite (fma(0, d, acc) = acc, and acc is never -0), so the
 * path requires a finite dy: each B panel is checked, and one holding Inf or NaN sends the call
 * to the reference, which skips those taps. dy goes to the GEMM as packed B panels, copied
 * from a channels-last dy or gathered from a channel-major one. Work items are (group, range
 * of j), or, for one group whose rows fit one item, aligned chunks of blocks (the split
 * reduction); each thread keeps its own level buffers and the partial sums combine in the
 * reference's tree, so the bits do not depend on the thread count. F64 and
 * GRADREF_PRECISION_HIGH run the reference loop over dw ranges. */
#include <math.h>
#include <string.h>

#include "c3f_internal.h"
#include "c3f_kernels.h"
#include "common/copy.h"
#include "common/convert.h"
#include "common/gemm.h"
#include "common/gemm_kernels.h"
#include "common/exec.h"
#include "common/internal.h"
#include "common/isa.h"
#include "common/nan.h"
#include "common/tensor.h"
#include "c3f_counter.h"

#define BLOCK GRADREF__C3F_BLOCK
/* j rows per item: their level buffers (j x Cout/G floats each) stay near 1 MiB */
#define LEVEL_FLOATS (INT64_C(256) * 1024)
/* the multiply-adds below which another thread costs more than it saves */
#define MIN_THREAD_MACS (INT64_C(1) << 18)
/* the split reduction's chunk sums, all together, as far as balance allows */
#define CHUNK_FLOATS (INT64_C(4) * 1024 * 1024)

/* The block's output rows (n, od, oh) as runs of columns ow, the same for every tap. */
typedef struct runs {
    int64_t n[BLOCK], od[BLOCK], oh[BLOCK], ow[BLOCK], len[BLOCK], count;
    uint32_t nonfinite; /* a B panel of this thread held Inf or NaN */
} runs;

typedef struct layout {
    int gemm, stage_x, stage_dy, indirect;
    int round_x;   /* HF32: x copied dense in its own layout, rounded (x32), not staged */
    int row_tiles; /* x staged with zeros past its w edges: a tile takes a whole tap row */
    int split;     /* every row in one item: threads split the reduction into aligned chunks */
    int64_t xw;    /* row_tiles: the staged x's padded width */
    int64_t chunk_blocks; /* split: blocks per chunk, a power of two */
    int64_t chunks;
    size_t chunk_at; /* split: the chunks' sums */
    size_t node_at;  /* split: per chunk, the level of the node its slot holds, or -1 */
    int64_t mr, nr;  /* GEMM panel rows and columns */
    int64_t unit;    /* items hold whole multiples of this many rows j: a tap, or one row */
    int64_t jb;      /* the most rows j per item */
    int64_t levels;
    size_t x32, dy32;
    size_t thread0, per_thread, col_at, dyt_at, level_at, runs_at, rows_at;
    size_t total;
} layout;

static int64_t taps_of(const gradref__c3f_plan *p) {
    return p->K[0] * p->K[1] * p->K[2];
}

static int64_t reduction(const gradref__c3f_plan *p) {
    return p->N * p->O[0] * p->O[1] * p->O[2];
}

/* Whether a tile may hold every (kw, ci) of a tap row: x staged channels-last with zeros past
 * its w edges puts them at consecutive floats (kw * Cin + ci, no group stride, dilation 1, taps
 * in order), so a tap row of few channels fills more of a tile than one tap does. */
static int row_tiles_fit(const gradref__c3f_plan *p, int64_t mr) {
    const int64_t row = p->Cin_g * p->K[2];
    return p->G == 1 && p->K[2] > 1 && p->Cin_g < mr && row <= mr && p->dil[2] == 1 &&
           p->mode == GRADREF_CONV_CROSS_CORRELATION;
}

/* The split reduction's blocks per chunk, a power of two: at least 16 chunks per thread (an
 * even share) while their sums fit CHUNK_FLOATS, never fewer than 4 per thread. */
static int64_t chunk_blocks(const gradref__c3f_plan *p, int64_t blocks, int threads) {
    const int64_t J = p->Cin_g * taps_of(p);
    const int64_t most = CHUNK_FLOATS / (J * p->Cout_g);
    const int64_t want = 16 * (int64_t)threads < most ? 16 * (int64_t)threads : most;
    int64_t b = 1;
    while (blocks / (b * 2) >= (want > 4 * threads ? want : 4 * threads))
        b *= 2;
    return b;
}

/* Whether x's elements fill its span exactly, in some order of its dims (NCDHW, NDHWC, ...). */
static int x_dense(const gradref__c3f_plan *p) {
    gradref_tensor x;
    memset(&x, 0, sizeof x);
    x.ndim = 5;
    const int64_t size[5] = {p->N, p->G * p->Cin_g, p->I[0], p->I[1], p->I[2]};
    memcpy(x.shape, size, sizeof size);
    memcpy(x.strides, p->xs, sizeof size);
    return gradref__tensor_dense(&x);
}

/* How the GEMM reads x: in place, staged (f32 channels-last, for the packed panels whose rows
 * are runs of channels, rounded at HF32), or at HF32 from a rounded copy in x's own layout
 * when the default reads it in place and it is dense (one pass, no transposes). */
static void x_staging(const gradref__c3f_plan *p, int hf32, layout *L) {
    L->stage_x = p->in_dtype != GRADREF_F32 || L->row_tiles ||
                 (!L->indirect && p->xs[1] != 1 && p->G * p->Cin_g > 1);
    L->round_x = hf32 && !L->stage_x && x_dense(p);
    L->stage_x |= hf32 && !L->round_x;
}

/* Whether the GEMM reads x by the indirect kernel (and by row tiles), and how x is staged. The
 * indirect kernel reads x in place (at AVX-512 and AVX2 faster even for 1 to 7 channels per tap,
 * where its tiles are short, than packing panels that straddle taps, a packing that costs most
 * at AVX2's narrow panels); NEON's only where a tile's channels are adjacent floats (x
 * channels-last, staged, or in row tiles). */
static void x_access(const gradref__c3f_plan *p, int hf32, layout *L) {
    const gradref__sgemm_kernels *gk = gradref__sgemm_kernels_for(p->max_isa);
    L->indirect = gk->indirect != NULL;
    L->row_tiles = L->indirect && row_tiles_fit(p, L->mr);
    x_staging(p, hf32, L);
    if (L->indirect && gk->indirect_unit_rows && !L->row_tiles && !L->stage_x && p->xs[1] != 1) {
        L->indirect = 0;
        x_staging(p, hf32, L);
    }
}

static layout layout_of(const gradref__c3f_plan *p, int32_t precision, int threads) {
    layout L;
    memset(&L, 0, sizeof L);
    const int f32 = p->in_dtype != GRADREF_F64;
    const int64_t J = p->Cin_g * taps_of(p), R = reduction(p);
    const int hf32 = gradref__hf32_kept_bits(precision) != 0;
    L.gemm =
        f32 && (precision == GRADREF_PRECISION_DEFAULT || hf32) && J > 0 && p->Cout_g > 0 && R > 0;
    if (!L.gemm) return L;
    size_t at = 0;
    L.mr = gradref__sgemm_mr(p->max_isa);
    L.nr = gradref__sgemm_nr(p->max_isa);
    x_access(p, hf32, &L);
    /* packed panels straddle taps, tiles need not (but row tiles keep a tap row whole) */
    L.unit = L.row_tiles ? p->Cin_g * p->K[2] : L.indirect ? 1 : p->Cin_g;
    int64_t units = LEVEL_FLOATS / (L.unit * p->Cout_g);
    if (units < 1) units = 1;
    if (units > J / L.unit) units = J / L.unit;
    L.jb = units * L.unit;
    const int64_t blocks = (R + BLOCK - 1) / BLOCK;
    /* One group whose rows all fit one item: the threads share the reduction instead of the
     * rows, so each reads only its part of dy. Any aligned run of 2^k blocks is a subtree of
     * the blocks' binary-counter sum, so the chunks' sums combined by the same counter give
     * the bits of one pass, whatever the chunk size or thread count. */
    L.split = p->G == 1 && L.jb == J && blocks > 1;
    L.chunk_blocks = L.split ? chunk_blocks(p, blocks, threads) : blocks;
    L.chunks = (blocks + L.chunk_blocks - 1) / L.chunk_blocks;
    /* f32 channels-last dy (a B panel row is a run of channels). Channel-major F32 dy is packed
     * straight from dy (each block's B panels gathered across the channels) when each block is
     * read once (split) or by few row blocks: one pass over dy per reader rather than a whole
     * copy first */
    /* (with at least 512 rows per block to share the gather; fewer rows, as a first layer's
     * 3 x 27, spend more on gathering than the copy costs) */
    const int few_blocks = p->G * ((J + L.jb - 1) / L.jb) <= 2 && L.jb >= 512;
    /* (HF32 F32 dy is rounded in its B panels as they are gathered: no staged copy) */
    L.stage_dy = p->in_dtype != GRADREF_F32 ||
                 (p->ys[1] != 1 && p->G * p->Cout_g > 1 && !few_blocks && !L.split);
    const int64_t yn = p->N * p->G * p->Cout_g * p->O[0] * p->O[1] * p->O[2];
    int64_t xn = p->N * p->G * p->Cin_g * p->I[0] * p->I[1] * p->I[2];
    if (L.row_tiles) { /* w from -pad_begin to the last tap of the last output */
        const int64_t last = (p->O[2] - 1) * p->stride[2] + p->K[2];
        L.xw = p->pad_begin[2] + p->I[2] > last ? p->pad_begin[2] + p->I[2] : last;
        xn = p->N * p->Cin_g * p->I[0] * p->I[1] * L.xw;
    }
    if (L.stage_x || L.round_x) L.x32 = gradref__ws_take(&at, (size_t)xn * 4);
    if (L.stage_dy) L.dy32 = gradref__ws_take(&at, (size_t)yn * 4);
    if (L.split) {
        L.chunk_at = gradref__ws_take(&at, (size_t)(L.chunks * J * p->Cout_g) * 4);
        L.node_at = gradref__ws_take(&at, (size_t)L.chunks);
    }
    /* levels for the blocks of an item or a chunk, and for combining the chunks */
    const int64_t pushes = L.chunk_blocks > L.chunks ? L.chunk_blocks : L.chunks;
    L.levels = 1;
    while ((INT64_C(1) << (L.levels - 1)) < pushes)
        L.levels++;
    /* per thread (the GEMM gets A and B in panels: no work of its own), a block's panels being
     * at most the reduction long */
    size_t per = 0;
    const int64_t block = R < BLOCK ? R : BLOCK;
    if (!L.indirect) /* A panels */
        L.col_at = gradref__ws_take(&per, (size_t)((L.jb + L.mr - 1) / L.mr * L.mr * block) * 4);
    L.dyt_at = gradref__ws_take(&per, (size_t)((p->Cout_g + L.nr - 1) / L.nr * L.nr * block) * 4);
    L.rows_at = gradref__ws_take(&per, (size_t)block * sizeof(const float *));
    L.level_at = gradref__ws_take(&per, (size_t)(L.levels + 1) * (size_t)(L.jb * p->Cout_g) * 4);
    L.runs_at = gradref__ws_take(&per, sizeof(runs));
    L.per_thread = per;
    L.thread0 = at;
    L.total = at + per * (size_t)threads;
    return L;
}

size_t gradref__c3f_fast_workspace(const gradref__c3f_plan *p, int32_t precision, int threads) {
    return layout_of(p, precision, threads).total;
}

int gradref__c3f_fast_threads(const gradref__c3f_plan *p, int32_t precision, int threads) {
    const layout L = layout_of(p, precision, threads);
    if (!L.gemm) return threads; /* no per-thread parts */
    const int64_t J = p->Cin_g * taps_of(p);
    /* split: chunks, then rows j to combine; else (group, row block) items of whole units */
    const int64_t items = L.split ? (L.chunks > J ? L.chunks : J) : p->G * (J / L.unit);
    /* and no thread (with its part of the workspace) for less than MIN_THREAD_MACS (in double:
     * a broadcast dy's reduction times dw may pass int64) */
    const double macs = (double)(p->G * J) * (double)p->Cout_g * (double)reduction(p);
    int64_t team = macs < (double)items * (double)MIN_THREAD_MACS
                       ? (int64_t)(macs / (double)MIN_THREAD_MACS)
                       : items;
    return gradref__team(team > 0 ? team : 1, threads);
}

typedef struct run {
    const gradref__c3f_plan *p;
    const float *x, *dy; /* f32 data with strides xs, ys; channels-last but for one channel */
    int64_t xs[5], ys[5];
    int max_isa;
    int dy_is_panel; /* dy's rows, in order, are whole B panels (one group, Cout == nr) */
    int dy_hf32;     /* HF32's kept bits when dy is read unrounded: its panels are rounded */
    int row_tiles;   /* x is staged with zeros past its w edges (layout.row_tiles) */
    const gradref__sgemm_kernels *gk; /* the GEMM kernels of `kernel` */
    const gradref__c3f_kernels *k;    /* the same family's own kernels */
} run;

/* One thread's part of the workspace (layout's *_at offsets), typed once per thread by
 * scratch_of: the B panels of a block, the indirect kernel's row pointers, the A panels, the
 * counter's level buffers and the block's runs. */
typedef struct scratch {
    float *dyt;
    const float **rows;
    float *col;
    float *levels;
    runs *u;
} scratch;

static scratch scratch_of(const layout *L, char *base, int thread) {
    char *mine = base + L->thread0 + L->per_thread * (size_t)thread;
    scratch S;
    S.dyt = (float *)(void *)(mine + L->dyt_at);
    S.rows = (const float **)(void *)(mine + L->rows_at);
    S.col = (float *)(void *)(mine + L->col_at);
    S.levels = (float *)(void *)(mine + L->level_at);
    S.u = (runs *)(void *)(mine + L->runs_at);
    return S;
}

static void block_runs(const gradref__c3f_plan *p, int64_t r0, int64_t r1, runs *u) {
    const int64_t W = p->O[2], HW = p->O[1] * W, DHW = p->O[0] * HW;
    u->count = 0;
    for (int64_t r = r0; r < r1; u->count++) {
        const int64_t c = u->count;
        u->n[c] = r / DHW, u->od[c] = r / HW % p->O[0], u->oh[c] = r / W % p->O[1];
        u->ow[c] = r % W;
        u->len[c] = W - u->ow[c] < r1 - r ? W - u->ow[c] : r1 - r;
        r += u->len[c];
    }
}

/* The tap's input offsets (flipped in CONVOLUTION mode). */
static void tap_offsets(const gradref__c3f_plan *p, int64_t t, int64_t off[3]) {
    const int64_t k3[3] = {t / (p->K[1] * p->K[2]), t / p->K[2] % p->K[1], t % p->K[2]};
    for (int d = 0; d < 3; d++) {
        const int64_t kp = p->mode == GRADREF_CONV_CROSS_CORRELATION ? k3[d] : p->K[d] - 1 - k3[d];
        off[d] = kp * p->dil[d] - p->pad_begin[d];
    }
}

/* Run c of the block at the tap with offsets off: its columns q in [lo, hi) read x at
 * base + q * stride_w * xs[4] (channel 0 of group g), the others fall outside x. */
static const float *run_span(const run *R, int64_t g, const runs *u, int64_t c,
                             const int64_t off[3], int64_t *lo, int64_t *hi) {
    const gradref__c3f_plan *p = R->p;
    const int64_t id = u->od[c] * p->stride[0] + off[0], ih = u->oh[c] * p->stride[1] + off[1];
    *lo = *hi = 0;
    if (id < 0 || id >= p->I[0] || ih < 0 || ih >= p->I[1]) return NULL;
    const int64_t s = p->stride[2], first = u->ow[c] * s + off[2];
    if (s == 1) { /* no division: a call takes this for every (tap, run) */
        *lo = first >= 0 ? 0 : -first;
        *hi = p->I[2] - first < 0 ? 0 : p->I[2] - first;
    } else {
        *lo = first >= 0 ? 0 : (-first + s - 1) / s;
        *hi = p->I[2] - 1 - first < 0 ? 0 : (p->I[2] - 1 - first) / s + 1;
    }
    if (*hi > u->len[c]) *hi = u->len[c];
    if (*lo > *hi) *lo = *hi;
    return R->x + u->n[c] * R->xs[0] + id * R->xs[2] + ih * R->xs[3] + first * R->xs[4] +
           g * p->Cin_g * R->xs[1];
}

/* A panels for taps [t0, t1) of group g and r in [r0, r1): row j = (t - t0) * Cin/G + ci holds
 * x at tap t for channel ci (0 outside x), panel j / mr holds K runs of mr values, k-major, and
 * the rows past the last are 0. A panel may hold the end of one tap and the start of the next:
 * each tap writes its lanes. x is channels-last. */
static void pack_panels(const run *R, const layout *L, int64_t g, int64_t t0, int64_t t1,
                        const runs *u, int64_t r0, int64_t r1, float *panels) {
    const gradref__c3f_plan *p = R->p;
    const int64_t K = r1 - r0, mr = L->mr, C = p->Cin_g, rows = (t1 - t0) * C;
    for (int64_t t = t0; t < t1; t++) {
        int64_t off[3];
        tap_offsets(p, t, off);
        const int64_t j_first = (t - t0) * C, j_end = j_first + C;
        int64_t k = 0;
        for (int64_t c = 0; c < u->count; c++) {
            const int64_t run = u->len[c];
            int64_t lo, hi;
            const float *base = run_span(R, g, u, c, off, &lo, &hi);
            /* the tap's rows, panel by panel: lanes [la, lb) take channels from ci0 */
            for (int64_t j = j_first; j < j_end;) {
                const int64_t pn = j / mr, la = j % mr;
                const int64_t lb = mr - la < j_end - j ? mr : la + (j_end - j);
                const int64_t ci0 = j - j_first;
                float *dst = panels + pn * K * mr + k * mr;
                const int64_t step = p->stride[2] * R->xs[4];
                if (R->k->panel_lanes) {
                    R->k->panel_lanes(dst, mr, base ? base + ci0 : NULL, step, lo, hi, run, la, lb);
                    j += lb - la;
                    continue;
                }
                for (int64_t q = 0; q < run; q++, dst += mr) {
                    const float *src = q >= lo && q < hi ? base + q * step + ci0 : NULL;
                    for (int64_t l = la; l < lb; l++)
                        dst[l] = src ? src[l - la] : 0.0f;
                }
                j += lb - la;
            }
            k += run;
        }
    }
    for (int64_t j = rows; j % mr != 0; j++) { /* the last panel's rows past the end */
        float *dst = panels + j / mr * K * mr + j % mr;
        for (int64_t q = 0; q < K; q++)
            dst[q * mr] = 0.0f;
    }
}

/* B panels of nr columns for r in [r0, r1): panel q holds K runs of nr values, row r - r0 being
 * dy[n, g * Cout_g + q * nr + j, o] (channels-last dy), zero past Cout/G. When dy's rows are
 * already such a panel they are returned in place; otherwise they are copied into dst. */
static const float *dy_panels(const run *R, int64_t g, const runs *u, int64_t r0, int64_t r1,
                              int64_t nr, float *dst) {
    const gradref__c3f_plan *p = R->p;
    const int64_t C = p->Cout_g, K = r1 - r0, cs = R->ys[1];
    if (R->dy_is_panel && !R->dy_hf32) return R->dy + r0 * C;
    int64_t k = 0;
    for (int64_t c = 0; c < u->count; c++) {
        const float *src = R->dy + u->n[c] * R->ys[0] + g * C * cs + u->od[c] * R->ys[2] +
                           u->oh[c] * R->ys[3] + u->ow[c] * R->ys[4];
        const int64_t len = u->len[c];
        /* a table's gather takes its own GEMM's nr (NEON, AVX2: 8 lanes a block; AVX-512 16) */
        if (R->k->gather_panel && C > 1 && cs != 1 && R->ys[4] == 1 && nr % 8 == 0) {
            for (int64_t pn = 0; pn * nr < C; pn++) /* channel-major runs, transposed */
                R->k->gather_panel(dst + pn * K * nr + k * nr, nr, src + pn * nr * cs, cs, len,
                                   C - pn * nr < nr ? C - pn * nr : nr);
            k += len;
            continue;
        }
        for (int64_t pn = 0; pn * nr < C; pn++) {
            const int64_t cols = C - pn * nr < nr ? C - pn * nr : nr;
            float *out = dst + pn * K * nr + k * nr;
            if ((C == 1 || cs == 1) && R->k->copy_panel && nr % 8 == 0) {
                R->k->copy_panel(out, nr, src + pn * nr, R->ys[4], len, cols);
                continue; /* zeros past cols included */
            }
            if (C == 1 || cs == 1) { /* channels-last: a row's channels are adjacent */
                for (int64_t q = 0; q < len; q++)
                    memcpy(out + q * nr, src + q * R->ys[4] + pn * nr, (size_t)cols * sizeof *out);
            } else { /* channel-major: each channel's run is adjacent, gathered into lanes */
                for (int64_t j = 0; j < cols; j++) {
                    const float *ch = src + (pn * nr + j) * cs;
                    for (int64_t q = 0; q < len; q++)
                        out[q * nr + j] = ch[q * R->ys[4]];
                }
            }
            for (int64_t q = 0; q < len && cols < nr; q++)
                memset(out + q * nr + cols, 0, (size_t)(nr - cols) * sizeof *out);
        }
        k += len;
    }
    if (R->dy_hf32) R->k->round_hf32(dst, dst, (C + nr - 1) / nr * K * nr, R->dy_hf32); /* L1 */
    return dst;
}

/* block_indirect with one tile per tap row (kd, kh): its rows j = kw * Cin + ci are the
 * consecutive floats of the zero-padded x from the row's w origin, so only rows whose (id, ih)
 * falls outside x are skipped. Rows [j0, j1) hold whole tap rows. */
static void block_row_tiles(const run *R, int64_t j0, int64_t j1, const runs *u, int64_t K,
                            const float *bp, const float **rows, float *out) {
    const gradref__c3f_plan *p = R->p;
    const int64_t C = p->Cout_g, nr = R->gk->nr, row = p->Cin_g * p->K[2];
    const int64_t step = p->stride[2] * R->xs[4];
    for (int64_t tr = j0 / row; tr < j1 / row; tr++) {
        int64_t off[3];
        tap_offsets(p, tr * p->K[2], off); /* kw = 0: w offset -pad_begin, the staged origin */
        const float **at = rows;
        for (int64_t c = 0; c < u->count; c++) {
            const int64_t id = u->od[c] * p->stride[0] + off[0],
                          ih = u->oh[c] * p->stride[1] + off[1];
            const float *base = NULL;
            if (id >= 0 && id < p->I[0] && ih >= 0 && ih < p->I[1])
                base = R->x + u->n[c] * R->xs[0] + id * R->xs[2] + ih * R->xs[3] + u->ow[c] * step;
            for (int64_t q = 0; q < u->len[c]; q++)
                *at++ = base ? base + q * step : NULL;
        }
        for (int64_t pn = 0; pn * nr < C; pn++) {
            const int cols = (int)(C - pn * nr < nr ? C - pn * nr : nr);
            R->gk->indirect((int)row, cols, K, rows, 0, 1, bp + pn * K * nr,
                            out + (tr * row - j0) * C + pn * nr, C);
        }
    }
}

/* out[j - j0][co] for rows j = t * Cin/G + ci in [j0, j1) with the indirect kernel: row k of
 * the implicit im2col is a pointer to x's channels at the tap, NULL where the tap falls
 * outside x (the kernel skips those terms: adding fma(0, dy, acc) would leave acc as it is,
 * dy being finite). Tiles of at most mr channels stay inside one tap. */
static void block_indirect(const run *R, int64_t g, int64_t j0, int64_t j1, const runs *u,
                           int64_t K, const float *bp, const float **rows, float *out) {
    const gradref__c3f_plan *p = R->p;
    const int64_t Ci = p->Cin_g, C = p->Cout_g, mr = R->gk->mr, nr = R->gk->nr;
    if (R->row_tiles) {
        block_row_tiles(R, j0, j1, u, K, bp, rows, out);
        return;
    }
    for (int64_t t = j0 / Ci; t * Ci < j1; t++) {
        const int64_t c_lo = j0 > t * Ci ? j0 - t * Ci : 0,
                      c_hi = j1 < (t + 1) * Ci ? j1 - t * Ci : Ci;
        const int64_t tiles = (c_hi - c_lo + mr - 1) / mr;
        int64_t off[3];
        tap_offsets(p, t, off);
        const float **row = rows;
        for (int64_t c = 0; c < u->count; c++) {
            int64_t lo, hi, q = 0;
            const float *base = run_span(R, g, u, c, off, &lo, &hi);
            const int64_t step = p->stride[2] * R->xs[4];
            for (; q < lo; q++)
                *row++ = NULL;
            for (; q < hi; q++)
                *row++ = base + q * step;
            for (; q < u->len[c]; q++)
                *row++ = NULL;
        }
        for (int64_t pn = 0; pn * nr < C; pn++) {
            const int cols = (int)(C - pn * nr < nr ? C - pn * nr : nr);
            for (int64_t i = 0; i < tiles; i++) {
                const int64_t ci0 = c_lo + (c_hi - c_lo) * i / tiles,
                              ci1 = c_lo + (c_hi - c_lo) * (i + 1) / tiles;
                R->gk->indirect((int)(ci1 - ci0), cols, K, rows, ci0 * R->xs[1], R->xs[1],
                                bp + pn * K * nr, out + (t * Ci + ci0 - j0) * C + pn * nr, C);
            }
        }
    }
}

/* The sum over reduction indices [r0, r1) of dw rows j in [j0, j1) of group g, into sum. */
static void block_sum(const run *R, const layout *L, int64_t g, int64_t j0, int64_t j1, int64_t r0,
                      int64_t r1, const scratch *S, float *sum) {
    const gradref__c3f_plan *p = R->p;
    runs *u = S->u;
    block_runs(p, r0, r1, u);
    const float *bp = dy_panels(R, g, u, r0, r1, L->nr, S->dyt);
    const int64_t floats = (p->Cout_g + L->nr - 1) / L->nr * L->nr * (r1 - r0);
    u->nonfinite |= !gradref__nan_kernels_for(R->max_isa)->all_finite_f32(bp, floats);
    if (L->indirect) {
        block_indirect(R, g, j0, j1, u, r1 - r0, bp, S->rows, sum);
        return;
    }
    float *col = S->col;
    pack_panels(R, L, g, j0 / p->Cin_g, j1 / p->Cin_g, u, r0, r1, col);
    gradref__sgemm_args a;
    memset(&a, 0, sizeof a);
    a.M = j1 - j0, a.N = p->Cout_g, a.K = r1 - r0;
    a.a_panels = col;
    a.b_panels = bp;
    a.c = sum, a.c_rs = p->Cout_g, a.c_cs = 1;
    gradref__sgemm(&a, R->max_isa, NULL);
}

/* The counter's fold of blocks [b0, b1) for dw rows j in [j0, j1) of group g, into `into` (NULL:
 * the thread's level buffers), which it returns. */
static float *blocks_sum(const run *R, const layout *L, int64_t g, int64_t j0, int64_t j1,
                         int64_t b0, int64_t b1, const scratch *S, float *into) {
    const int64_t total_r = reduction(R->p);
    gradref__c3f_counter c =
        gradref__c3f_counter_make(R->k, S->levels, (j1 - j0) * R->p->Cout_g, (int)L->levels);
    for (int64_t b = b0; b < b1; b++) {
        const int64_t r0 = b * BLOCK, r1 = r0 + BLOCK < total_r ? r0 + BLOCK : total_r;
        if (into != NULL && b1 - b0 == 1) { /* one block: its sum is the fold */
            block_sum(R, L, g, j0, j1, r0, r1, S, into);
            return into;
        }
        block_sum(R, L, g, j0, j1, r0, r1, S, gradref__c3f_counter_slot(&c));
        if (b + 1 == b1 && gradref__c3f_counter_push_last(&c, into)) return into;
        gradref__c3f_counter_push(&c);
    }
    return gradref__c3f_counter_fold(&c, into);
}

/* dw rows j in [j0, j1) of group g from their sums s[(j - j0) * Cout/G + co]: output channel
 * by output channel, so that the writes walk dw's (Cin, taps) extent of each rather than a
 * line per element (a stride of Cin x taps elements). */
static void store_rows(const gradref__c3f_plan *p, int64_t g, int64_t j0, int64_t j1,
                       const float *s) {
    if (j1 <= j0) return; /* no rows: Cin_g may be 0 */
    const int64_t C = p->Cout_g, t0 = j0 / p->Cin_g;
    const int64_t k0[3] = {t0 / (p->K[1] * p->K[2]), t0 / p->K[2] % p->K[1], t0 % p->K[2]};
    for (int64_t co = 0; co < C; co++) {
        const int64_t base = (g * C + co) * p->ws[0];
        int64_t ci = j0 % p->Cin_g, k[3] = {k0[0], k0[1], k0[2]}; /* the tap by steps */
        int64_t tap = k[0] * p->ws[2] + k[1] * p->ws[3] + k[2] * p->ws[4];
        for (int64_t j = j0; j < j1; j++) {
            char *out = p->dw + (size_t)(base + ci * p->ws[1] + tap) * p->out_size;
            const float v = s[(j - j0) * C + co];
            if (p->out_dtype == GRADREF_F32)
                *(float *)out = v;
            else
                gradref__store_float(p->out_dtype, out, v);
            if (++ci < p->Cin_g) continue;
            ci = 0;
            if (++k[2] == p->K[2]) {
                k[2] = 0;
                if (++k[1] == p->K[1]) k[1] = 0, k[0]++;
            }
            tap = k[0] * p->ws[2] + k[1] * p->ws[3] + k[2] * p->ws[4];
        }
    }
}

/* dw rows j in [j0, j1) of group g (whole units). */
static void item(const run *R, const layout *L, int64_t g, int64_t j0, int64_t j1,
                 const scratch *S) {
    const int64_t blocks = (reduction(R->p) + BLOCK - 1) / BLOCK;
    store_rows(R->p, g, j0, j1, blocks_sum(R, L, g, j0, j1, 0, blocks, S, NULL));
}

/* What each member of a team reads: `items` pieces of work, the items (group, row block) of a
 * call without the split (per_group, units), or the split's chunks, or combine's dw rows. */
typedef struct items_call {
    const run *R;
    const layout *L;
    char *base;
    int64_t items, per_group, units;
} items_call;

static void items_member(void *arg) {
    const items_call *c = arg;
    const scratch S = scratch_of(c->L, c->base, gradref__thread_num());
    S.u->nonfinite = 0;
    int64_t b, e;
    gradref__my_range(c->items, &b, &e);
    for (int64_t it = b; it < e; it++) {
        const int64_t g = it / c->per_group, blk = it % c->per_group;
        item(c->R, c->L, g, c->units * blk / c->per_group * c->L->unit,
             c->units * (blk + 1) / c->per_group * c->L->unit, &S);
    }
}

/* split_chunks' share of one member of the team: chunks in order, each summed over its blocks
 * and then added into the nodes it completes. */
static void chunks_member(void *arg) {
    const items_call *c = arg;
    const run *R = c->R;
    const layout *L = c->L;
    const gradref__c3f_plan *p = R->p;
    const int64_t J = p->Cin_g * taps_of(p), size = J * p->Cout_g;
    const int64_t blocks = (reduction(p) + BLOCK - 1) / BLOCK;
    float *chunk = (float *)(c->base + L->chunk_at);
    int8_t *node = (int8_t *)(c->base + L->node_at);
    const scratch S = scratch_of(L, c->base, gradref__thread_num());
    S.u->nonfinite = 0;
    int64_t b, e;
    gradref__my_range(c->items, &b, &e);
    for (int64_t k = b; k < e; k++) {
        const int64_t b0 = k * L->chunk_blocks,
                      b1 = b0 + L->chunk_blocks < blocks ? b0 + L->chunk_blocks : blocks;
        blocks_sum(R, L, 0, 0, J, b0, b1, &S, chunk + k * size);
        node[k] = 0;
        for (int m = 1; (k + 1) % (INT64_C(1) << m) == 0 && k + 1 - (INT64_C(1) << m) >= b; m++) {
            const int64_t first = k + 1 - (INT64_C(1) << m),
                          second = k + 1 - (INT64_C(1) << (m - 1));
            gradref__c3f_add_sums(R->k, chunk + first * size, chunk + first * size,
                                  chunk + second * size, size);
            node[first] = (int8_t)m, node[second] = -1;
        }
    }
}

/* The split reduction (one group, every row): chunks of L->chunk_blocks blocks shared by the
 * threads, their sums kept for combine_chunks. A thread adds its consecutive chunks' sums in
 * place into the aligned nodes of the counter's tree (2^m chunks starting at a multiple of 2^m)
 * that its range holds whole, as the counter over all chunks would (older + newer), so that
 * combine_chunks reads a few nodes per thread instead of every chunk, most of them written by
 * the other cores. Returns the team. */
static int split_chunks(const run *R, const layout *L, char *base, int threads) {
    const int team = gradref__team(L->chunks, threads);
    items_call c = {R, L, base, L->chunks, 0, 0};
    gradref__run_team(team, chunks_member, &c);
    return team;
}

/* combine_chunks' rows for one member of the team. */
static void combine_member(void *arg) {
    const items_call *c = arg;
    const layout *L = c->L;
    const gradref__c3f_plan *p = c->R->p;
    const int64_t size = c->items * p->Cout_g;
    const float *chunk = (const float *)(c->base + L->chunk_at);
    const int8_t *node = (const int8_t *)(c->base + L->node_at);
    const scratch S = scratch_of(L, c->base, gradref__thread_num());
    int64_t j0, j1;
    gradref__my_range(c->items, &j0, &j1);
    if (j1 <= j0) return;
    gradref__c3f_counter sum =
        gradref__c3f_counter_make(c->R->k, S.levels, (j1 - j0) * p->Cout_g, (int)L->levels);
    for (int64_t k = 0; k < L->chunks; k += INT64_C(1) << node[k])
        gradref__c3f_counter_carry(&sum, node[k], chunk + k * size + j0 * p->Cout_g, NULL);
    store_rows(p, 0, j0, j1, gradref__c3f_counter_fold(&sum, NULL));
}

/* dw from the chunks' nodes combined by the counter, rows shared by the threads. */
static void combine_chunks(const run *R, const layout *L, char *base, int threads) {
    const gradref__c3f_plan *p = R->p;
    const int64_t J = p->Cin_g * taps_of(p);
    items_call c = {R, L, base, J, 0, 0};
    gradref__run_team(gradref__team(J, threads), combine_member, &c);
}

typedef struct rounding {
    const gradref__c3f_kernels *k;
    float *dst;
    const float *src;
    int hf32;
} rounding;

static void round_part(const void *arg, int64_t begin, int64_t end) {
    const rounding *r = arg;
    r->k->round_hf32(r->dst + begin, r->src + begin, end - begin, r->hf32);
}

/* dst[i] = src[i] rounded to HF32's `hf32` kept bits for i < n (dst may be src): the threads
 * a range each, by the level's vector kernel. */
static void round_all(float *dst, const float *src, int64_t n, int hf32, int threads, int max_isa) {
    const rounding r = {gradref__c3f_kernels_for(max_isa), dst, src, hf32};
    gradref__parallel_ranges(n, threads, round_part, &r);
}

/* The zeros around each channels-last row of channels_last. */
typedef struct row_pads {
    float *dst;
    int64_t C, W, width, w0;
} row_pads;

static void zero_pads(const void *arg, int64_t b, int64_t e) {
    const row_pads *z = arg;
    for (int64_t r = b; r < e; r++) {
        float *row = z->dst + r * z->width * z->C;
        memset(row, 0, (size_t)(z->w0 * z->C) * sizeof *row);
        memset(row + (z->w0 + z->W) * z->C, 0,
               (size_t)((z->width - z->w0 - z->W) * z->C) * sizeof *row);
    }
}

/* src as channels-last f32 at dst (strides st), each row (n, d, h) `width` >= W positions
 * long with zeros before w = 0 (w0 of them) and after w = W; with `hf32` kept bits each value
 * is then rounded to HF32. st addresses position w = -w0. */
static void channels_last(const char *src, int32_t dtype, const int64_t *shape, const int64_t *s,
                          float *dst, int64_t *st, int64_t width, int64_t w0, int hf32, int threads,
                          int max_isa) {
    const int64_t C = shape[1], W = shape[4], rows = shape[0] * shape[2] * shape[3];
    st[1] = 1, st[4] = C, st[3] = width * C, st[2] = shape[3] * st[3], st[0] = shape[2] * st[2];
    if (width > W) {
        const row_pads pads = {dst, C, W, width, w0};
        gradref__parallel_ranges(rows, threads, zero_pads, &pads);
    }
    gradref__copy5(shape, src, dtype, s, dst + w0 * C, GRADREF_F32, st, threads, max_isa);
    if (hf32) round_all(dst, dst, shape[0] * st[0], hf32, threads, max_isa);
}

static void ref_part(const void *plan, int64_t begin, int64_t end) {
    gradref__c3f_ref_elements(plan, begin, end);
}

/* x and dy as the GEMM reads them: in place, copied rounded (HF32) or staged (layout L). */
static void bind_inputs(run *R, const layout *L, char *base, int hf32, int threads) {
    const gradref__c3f_plan *p = R->p;
    const int64_t xshape[5] = {p->N, p->G * p->Cin_g, p->I[0], p->I[1], p->I[2]};
    const int64_t yshape[5] = {p->N, p->G * p->Cout_g, p->O[0], p->O[1], p->O[2]};
    if (L->round_x) {
        float *dst = (float *)(base + L->x32);
        round_all(dst, R->x, xshape[0] * xshape[1] * xshape[2] * xshape[3] * xshape[4], hf32,
                  threads, p->max_isa);
        R->x = dst;
    }
    if (L->stage_x) {
        const int64_t width = L->row_tiles ? L->xw : p->I[2];
        channels_last(p->x, p->in_dtype, xshape, p->xs, (float *)(base + L->x32), R->xs, width,
                      L->row_tiles ? p->pad_begin[2] : 0, hf32, threads, p->max_isa);
        R->x = (const float *)(base + L->x32);
    }
    if (L->stage_dy) {
        channels_last(p->dy, p->in_dtype, yshape, p->ys, (float *)(base + L->dy32), R->ys, p->O[2],
                      0, hf32, threads, p->max_isa);
        R->dy = (const float *)(base + L->dy32);
    } else {
        R->dy_hf32 = hf32;
    }
}

static void fast_run(const gradref__c3f_plan *p, void *ws, int threads);

void gradref__c3f_fast(const gradref__c3f_plan *p, void *ws, int threads) {
    fast_run(p, ws, threads);
    gradref__c3f_mend_signed_zeros(p, threads);
}

static void fast_run(const gradref__c3f_plan *p, void *ws, int threads) {
    const int64_t elements = p->G * p->Cout_g * p->Cin_g * taps_of(p);
    if (elements == 0) return;
    const layout L = layout_of(p, p->precision, threads);
    const int hf32 = gradref__hf32_kept_bits(p->precision);
    char *base = (char *)ws;
    run R;
    memset(&R, 0, sizeof R);
    R.p = p;
    R.max_isa = p->max_isa;
    R.k = gradref__c3f_kernels_for(p->max_isa);
    R.gk = R.k->gemm;
    R.x = (const float *)p->x;
    R.dy = (const float *)p->dy;
    memcpy(R.xs, p->xs, sizeof R.xs);
    memcpy(R.ys, p->ys, sizeof R.ys);
    int gemm = L.gemm;
    if (gemm) bind_inputs(&R, &L, base, hf32, threads);
    R.dy_is_panel = p->G == 1 && p->Cout_g == L.nr && R.ys[4] == p->Cout_g &&
                    R.ys[3] == p->O[2] * R.ys[4] && R.ys[2] == p->O[1] * R.ys[3] &&
                    R.ys[0] == p->O[0] * R.ys[2];
    if (!gemm) { /* the reference loop, dw elements split over the threads */
        gradref__parallel_ranges(elements, threads, ref_part, p);
        return;
    }
    R.row_tiles = L.row_tiles;
    int team;
    if (L.split) {
        team = split_chunks(&R, &L, base, threads);
    } else {
        /* items: (group, row block), as few blocks per group as the level buffers allow, their
         * count making items a multiple of the threads when that is possible, rows spread
         * evenly */
        const int64_t units = p->Cin_g * taps_of(p) / L.unit;
        int64_t per_group = (units * L.unit + L.jb - 1) / L.jb;
        while ((p->G * per_group) % threads != 0 && per_group < units)
            per_group++;
        const int64_t items = p->G * per_group;
        team = gradref__team(items, threads);
        items_call c = {&R, &L, base, items, per_group, units};
        gradref__run_team(team, items_member, &c);
    }
    /* dy held Inf or NaN (seen in a B panel): the reference, which skips the taps outside x
     * where the kernels would add 0 * Inf */
    uint32_t nonfinite = 0;
    for (int t = 0; t < team; t++)
        nonfinite |= scratch_of(&L, base, t).u->nonfinite;
    if (nonfinite) {
        gradref__parallel_ranges(elements, threads, ref_part, p);
        return;
    }
    if (L.split) combine_chunks(&R, &L, base, threads);
    gradref__canon_nans(&p->out_desc, threads,
                        p->max_isa); /* the NaN rule; dw is small beside the sums */
}

/* ---------------------------------------------------------------- the strategy table */

static const char *gemm_skip(const void *plan, int32_t precision) {
    if (((const gradref__c3f_plan *)plan)->terms)
        return "the GRADREF_TERM_* outputs come from the reference loop";
    return layout_of(plan, precision, 1).gemm ? NULL
                                              : "F64, HIGH, or nothing to reduce (the reference "
                                                "loop's order or +0)";
}

static const char *gemm_variant(const void *plan, int32_t precision, int threads) {
    const layout L = layout_of(plan, precision, threads);
    if (L.split) return "gemm_split_reduction";
    if (L.row_tiles) return "gemm_row_tiles"; /* (by the indirect kernel) */
    return L.indirect ? "gemm_indirect" : "gemm";
}

static size_t gemm_workspace(const void *plan, int32_t precision, int threads) {
    return gradref__c3f_fast_workspace(plan, precision, threads);
}

static int gemm_threads(const void *plan, int32_t precision, int threads) {
    return gradref__c3f_fast_threads(plan, precision, threads);
}

static void gemm_run(const void *plan, void *ws, int threads) {
    gradref__c3f_fast(plan, ws, threads);
}

static const char *direct_skip(const void *plan, int32_t precision) {
    const gradref__c3f_plan *p = plan;
    if (p->terms) return "the GRADREF_TERM_* outputs come from the reference loop";
    if (p->in_dtype == GRADREF_F64 || precision == GRADREF_PRECISION_HIGH)
        return "F64 or HIGH (the reference loop's order)";
    return gradref__c3f_direct_fits(p) ? NULL
                                       : "a dy value that is not finite, or more blocks than the "
                                         "stack's levels";
}

/* The block GEMMs with stack buffers (c3f_direct.c): no workspace. */
static void direct_run(const void *plan, void *ws, int threads) {
    (void)ws;
    gradref__c3f_direct(plan, threads);
    gradref__c3f_mend_signed_zeros(plan, threads);
}

/* The reference loop, dw elements split over the threads. */
static void reference_run(const void *plan, void *ws, int threads) {
    const gradref__c3f_plan *p = plan;
    (void)ws;
    gradref__parallel_ranges(p->G * p->Cout_g * p->Cin_g * taps_of(p), threads, ref_part, p);
}

const gradref__strategy gradref__c3f_strategies[GRADREF__C3F_STRATEGIES] = {
    {"gemm", gemm_skip, gemm_workspace, gemm_threads, gemm_run, gemm_variant},
    {"direct", direct_skip, NULL, NULL, direct_run, NULL},
    {"reference", NULL, NULL, NULL, reference_run, NULL},
};
