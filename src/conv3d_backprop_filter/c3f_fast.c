/* The fast path for F32 compute (F32, F16, BF16 at the default precision):
 *
 *   for each block of GRADREF_C3F_BLOCK reduction indices r = (n, od, oh, ow):
 *     S_block[j][co] = sum over r in the block of col[j][r] * dy[co][r]     (one GEMM slice)
 *   dw = the blocks' binary-counter combination (the reference's order)
 *
 * with j = (ci, tap) and col the im2col of x for the block, built row by row (zero where the
 * tap falls outside x). A zero term is exact when dy is finite (fma(0, d, acc) = acc, and acc
 * is never -0), so the path requires a finite dy; one holding Inf or NaN runs the reference,
 * which skips those taps. Work items are (group, block of j); each thread keeps its own level
 * buffers and writes only its items' dw elements, so the bits do not depend on the thread
 * count. F64 and GRADREF_PRECISION_HIGH run the reference loop over dw ranges. */
#include <math.h>
#include <string.h>

#include "c3f_internal.h"
#include "common/convert.h"
#include "common/gemm.h"
#include "common/internal.h"
#include "common/tensor.h"

#define BLOCK GRADREF_C3F_BLOCK
/* j rows per item: their level buffers (j x Cout/G floats each) stay near 1 MiB */
#define LEVEL_FLOATS (INT64_C(256) * 1024)

typedef struct layout {
    int gemm, stage;
    int64_t jb, levels;
    size_t x32, dy32;
    size_t thread0, per_thread, col_at, dyt_at, level_at;
    size_t total;
} layout;

static size_t take(size_t *at, size_t bytes) {
    size_t here = *at;
    *at += (bytes + 63) & ~(size_t)63;
    return here;
}

static int64_t taps_of(const gradref__c3f_plan *p) {
    return p->K[0] * p->K[1] * p->K[2];
}

static int64_t reduction(const gradref__c3f_plan *p) {
    return p->N * p->O[0] * p->O[1] * p->O[2];
}

static layout layout_of(const gradref__c3f_plan *p, int32_t precision, int threads) {
    layout L;
    memset(&L, 0, sizeof L);
    const int f32 = p->in_dtype != GRADREF_F64;
    const int64_t J = p->Cin_g * taps_of(p), R = reduction(p);
    L.gemm = f32 && precision == GRADREF_PRECISION_DEFAULT && J > 0 && p->Cout_g > 0 && R > 0;
    if (!L.gemm) return L;
    size_t at = 0;
    L.stage = p->in_dtype != GRADREF_F32;
    if (L.stage) {
        const int64_t xn = p->N * p->G * p->Cin_g * p->I[0] * p->I[1] * p->I[2];
        const int64_t yn = p->N * p->G * p->Cout_g * p->O[0] * p->O[1] * p->O[2];
        L.x32 = take(&at, (size_t)xn * 4);
        L.dy32 = take(&at, (size_t)yn * 4);
    }
    L.jb = LEVEL_FLOATS / p->Cout_g;
    if (L.jb < 1) L.jb = 1;
    if (L.jb > J) L.jb = J;
    int64_t blocks = (R + BLOCK - 1) / BLOCK;
    L.levels = 1;
    while ((INT64_C(1) << (L.levels - 1)) < blocks)
        L.levels++;
    size_t per = 0;
    take(&per, gradref__sgemm_work_bytes());
    L.col_at = take(&per, (size_t)(((L.jb + 15) / 16 * 16 + 1) * BLOCK) * 4); /* panels, a row */
    L.dyt_at = take(&per, (size_t)(BLOCK * p->Cout_g) * 4);
    L.level_at = take(&per, (size_t)(L.levels + 1) * (size_t)(L.jb * p->Cout_g) * 4);
    L.per_thread = per;
    L.thread0 = at;
    L.total = at + per * (size_t)threads;
    return L;
}

size_t gradref__c3f_fast_workspace(const gradref__c3f_plan *p, int32_t precision, int threads) {
    return layout_of(p, precision, threads).total;
}

int gradref__c3f_fast_threads(const gradref__c3f_plan *p, int32_t precision, size_t bytes,
                              int wanted) {
    const layout one = layout_of(p, precision, 1);
    if (bytes < one.total) return 0;
    if (one.per_thread == 0) return wanted;
    const size_t fit = (bytes - one.thread0) / one.per_thread;
    return fit < (size_t)wanted ? (int)fit : wanted;
}

typedef struct run {
    const gradref__c3f_plan *p;
    const float *x, *dy; /* f32 data with strides xs, ys */
    int64_t xs[5], ys[5];
    int kernel;
} run;

/* col[jj][r - r0] for rows j0 .. j0 + nj of group g, r in [r0, r1): x at the tap, or 0. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#  include <immintrin.h>
#  define C3F_SCATTER 1
/* panel[k * mr] = row[k] for k < K, 16 at a time (AVX-512 scatters); returns how many. */
__attribute__((target("avx512f"))) static int64_t scatter_row(const float *row, int64_t K,
                                                              float *panel, int64_t mr) {
    const __m512i idx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32((int32_t)mr));
    int64_t k = 0;
    for (; k + 16 <= K; k += 16)
        _mm512_i32scatter_ps(panel + k * mr, idx, _mm512_loadu_ps(row + k), 4);
    return k;
}
#endif

/* The im2col rows j0 .. j0 + nj of group g for r in [r0, r1), written straight into the GEMM's
 * A panels (mr rows each, k-major; rows past nj zero); row is a scratch of r1 - r0 floats. */
static void im2col(const run *R, int64_t g, int64_t j0, int64_t nj, int64_t r0, int64_t r1,
                   float *panels, int64_t mr, float *row_buf) {
    const gradref__c3f_plan *p = R->p;
    const int scatter = gradref__sgemm_kernel(R->kernel) == GRADREF_GEMM_AVX512;
    (void)scatter;
    const int64_t T = taps_of(p), W = p->O[2], HW = p->O[1] * W, DHW = p->O[0] * HW;
    /* the block's output rows (n, od, oh) as runs of columns, the same for every j */
    int64_t run_n[GRADREF_C3F_BLOCK], run_od[GRADREF_C3F_BLOCK], run_oh[GRADREF_C3F_BLOCK],
        run_ow[GRADREF_C3F_BLOCK], run_len[GRADREF_C3F_BLOCK], runs = 0;
    for (int64_t r = r0; r < r1; runs++) {
        run_n[runs] = r / DHW, run_od[runs] = r / HW % p->O[0], run_oh[runs] = r / W % p->O[1];
        run_ow[runs] = r % W;
        run_len[runs] = W - run_ow[runs] < r1 - r ? W - run_ow[runs] : r1 - r;
        r += run_len[runs];
    }
    for (int64_t jj = 0; jj < nj; jj++) {
        const int64_t j = j0 + jj, ci = j / T, t = j % T;
        const int64_t k[3] = {t / (p->K[1] * p->K[2]), t / p->K[2] % p->K[1], t % p->K[2]};
        int64_t off[3];
        for (int d = 0; d < 3; d++) {
            const int64_t kp =
                p->mode == GRADREF_CONV_CROSS_CORRELATION ? k[d] : p->K[d] - 1 - k[d];
            off[d] = kp * p->dil[d] - p->pad_begin[d];
        }
        const float *xc = R->x + (g * p->Cin_g + ci) * R->xs[1];
        float *out = row_buf, *dst = row_buf;
        for (int64_t u = 0; u < runs; u++) {
            const int64_t run = run_len[u], ow0 = run_ow[u];
            const int64_t id = run_od[u] * p->stride[0] + off[0],
                          ih = run_oh[u] * p->stride[1] + off[1];
            if (id < 0 || id >= p->I[0] || ih < 0 || ih >= p->I[1]) {
                for (int64_t q = 0; q < run; q++)
                    dst[q] = 0.0f;
            } else {
                /* q in [lo, hi) reaches iw = (ow0 + q) * s + off in [0, I2) */
                const float *row = xc + run_n[u] * R->xs[0] + id * R->xs[2] + ih * R->xs[3];
                const int64_t s = p->stride[2], xw = R->xs[4], first = ow0 * s + off[2];
                int64_t lo = first >= 0 ? 0 : (-first + s - 1) / s;
                int64_t hi = p->I[2] - 1 - first < 0 ? 0 : (p->I[2] - 1 - first) / s + 1;
                if (hi > run) hi = run;
                if (lo > hi) lo = hi;
                for (int64_t q = 0; q < lo; q++)
                    dst[q] = 0.0f;
                if (s == 1 && xw == 1) {
                    const float *src = row + first;
                    for (int64_t q = lo; q < hi; q++)
                        dst[q] = src[q];
                } else {
                    for (int64_t q = lo; q < hi; q++)
                        dst[q] = row[(first + q * s) * xw];
                }
                for (int64_t q = hi; q < run; q++)
                    dst[q] = 0.0f;
            }
            dst += run;
        }
        const int64_t K = r1 - r0;
        float *panel = panels + jj / mr * K * mr + jj % mr;
        int64_t done = 0;
#ifdef C3F_SCATTER
        if (scatter) done = scatter_row(out, K, panel, mr);
#endif
        for (int64_t q = done; q < K; q++)
            panel[q * mr] = out[q];
    }
    const int64_t K = r1 - r0;
    for (int64_t jj = nj; jj % mr != 0; jj++) { /* the last panel's padding rows */
        float *panel = panels + jj / mr * K * mr + jj % mr;
        for (int64_t k = 0; k < K; k++)
            panel[k * mr] = 0.0f;
    }
}

/* dyt[r - r0][co] = dy[n, g * Cout_g + co, o] for r in [r0, r1), channel by channel along
 * each output row. */
static void dy_block(const run *R, int64_t g, int64_t r0, int64_t r1, float *dyt) {
    const gradref__c3f_plan *p = R->p;
    const int64_t W = p->O[2], HW = p->O[1] * W, DHW = p->O[0] * HW, C = p->Cout_g;
    for (int64_t r = r0; r < r1;) {
        const int64_t n = r / DHW, od = r / HW % p->O[0], oh = r / W % p->O[1], ow0 = r % W;
        const int64_t run = W - ow0 < r1 - r ? W - ow0 : r1 - r;
        const float *src = R->dy + n * R->ys[0] + g * C * R->ys[1] + od * R->ys[2] + oh * R->ys[3] +
                           ow0 * R->ys[4];
        float *dst = dyt + (r - r0) * C;
        for (int64_t co = 0; co < C; co++) {
            const float *s = src + co * R->ys[1];
            for (int64_t q = 0; q < run; q++)
                dst[q * C + co] = s[q * R->ys[4]];
        }
        r += run;
    }
}

static void item(const run *R, const layout *L, int64_t g, int64_t j0, int64_t j1, char *mine) {
    const gradref__c3f_plan *p = R->p;
    const int64_t nj = j1 - j0, C = p->Cout_g, size = nj * C, total_r = reduction(p);
    void *work = mine;
    float *col = (float *)(mine + L->col_at), *dyt = (float *)(mine + L->dyt_at);
    float *level = (float *)(mine + L->level_at); /* levels + 1 slots of size floats */
    int used[64] = {0};
    float *fresh = level + L->levels * size; /* the newest block's sum */
    const int64_t mr = gradref__sgemm_mr(R->kernel), panel_floats = (nj + mr - 1) / mr * mr * BLOCK;
    for (int64_t r0 = 0; r0 < total_r; r0 += BLOCK) {
        const int64_t r1 = r0 + BLOCK < total_r ? r0 + BLOCK : total_r;
        im2col(R, g, j0, nj, r0, r1, col, mr, col + panel_floats);
        dy_block(R, g, r0, r1, dyt);
        gradref__sgemm_args a;
        memset(&a, 0, sizeof a);
        a.M = nj, a.N = C, a.K = r1 - r0;
        a.a_panels = col;
        a.b = dyt, a.b_rs = C, a.b_cs = 1;
        a.c = fresh, a.c_rs = C, a.c_cs = 1;
        gradref__sgemm(&a, R->kernel, work);
        int l = 0;
        while (used[l]) { /* older + newer, moving up */
            const float *old = level + l * size;
            for (int64_t e = 0; e < size; e++)
                fresh[e] = old[e] + fresh[e];
            used[l++] = 0;
        }
        memcpy(level + l * size, fresh, (size_t)size * sizeof *fresh);
        used[l] = 1;
    }
    /* the stored sums from the lowest level up, each older one on the left */
    int started = 0;
    for (int l = 0; l < L->levels; l++) {
        if (!used[l]) continue;
        const float *s = level + l * size;
        if (!started) {
            memcpy(fresh, s, (size_t)size * sizeof *fresh);
            started = 1;
        } else {
            for (int64_t e = 0; e < size; e++)
                fresh[e] = s[e] + fresh[e];
        }
    }
    const int64_t T = taps_of(p);
    for (int64_t jj = 0; jj < nj; jj++) {
        const int64_t j = j0 + jj, ci = j / T, t = j % T;
        const int64_t kd = t / (p->K[1] * p->K[2]), kh = t / p->K[2] % p->K[1], kw = t % p->K[2];
        for (int64_t co = 0; co < C; co++) {
            char *out = p->dw + (size_t)((g * C + co) * p->ws[0] + ci * p->ws[1] + kd * p->ws[2] +
                                         kh * p->ws[3] + kw * p->ws[4]) *
                                    p->out_size;
            const float v = fresh[jj * C + co];
            if (p->out_dtype == GRADREF_F32)
                *(float *)out = v;
            else
                gradref__store_float(p->out_dtype, out, v);
        }
    }
}

static void tensor5(gradref_tensor *t, const void *data, int32_t dtype, const int64_t *shape,
                    const int64_t *strides) {
    memset(t, 0, sizeof *t);
    t->data = (void *)data;
    t->dtype = dtype;
    t->ndim = 5;
    for (int i = 0; i < 5; i++) {
        t->shape[i] = shape[i];
        t->strides[i] = strides[i];
    }
}

/* f32 copy of a tensor in its own dim order (dense); its strides into st. */
static void stage(const char *src, int32_t dtype, const int64_t *shape, const int64_t *s,
                  float *dst, int64_t *st, int threads) {
    gradref__dense_strides_like(5, shape, s, st);
    gradref_tensor a, b;
    tensor5(&a, src, dtype, shape, s);
    tensor5(&b, dst, GRADREF_F32, shape, st);
    gradref_exec e = {NULL, 0, threads, GRADREF_PRECISION_DEFAULT};
    (void)gradref_copy(&a, &b, &e);
}

static int all_finite(const float *d, const int64_t *shape, const int64_t *st) {
    int ok = 1;
    for (int64_t a = 0; a < shape[0]; a++)
        for (int64_t b = 0; b < shape[1]; b++)
            for (int64_t c = 0; c < shape[2]; c++)
                for (int64_t e = 0; e < shape[3]; e++)
                    for (int64_t f = 0; f < shape[4]; f++)
                        ok &=
                            isfinite(
                                d[a * st[0] + b * st[1] + c * st[2] + e * st[3] + f * st[4]]) != 0;
    return ok;
}

void gradref__c3f_fast(const gradref__c3f_plan *p, void *ws, int threads) {
    const int64_t elements = p->G * p->Cout_g * p->Cin_g * taps_of(p);
    if (elements == 0) return;
    const layout L = layout_of(p, p->precision, threads);
    char *base = (char *)ws;
    run R;
    memset(&R, 0, sizeof R);
    R.p = p;
    R.kernel = p->kernel;
    R.x = (const float *)p->x;
    R.dy = (const float *)p->dy;
    memcpy(R.xs, p->xs, sizeof R.xs);
    memcpy(R.ys, p->ys, sizeof R.ys);
    const int64_t xshape[5] = {p->N, p->G * p->Cin_g, p->I[0], p->I[1], p->I[2]};
    const int64_t yshape[5] = {p->N, p->G * p->Cout_g, p->O[0], p->O[1], p->O[2]};
    int gemm = L.gemm;
    if (gemm && L.stage) {
        stage(p->x, p->in_dtype, xshape, p->xs, (float *)(base + L.x32), R.xs, threads);
        stage(p->dy, p->in_dtype, yshape, p->ys, (float *)(base + L.dy32), R.ys, threads);
        R.x = (const float *)(base + L.x32);
        R.dy = (const float *)(base + L.dy32);
    }
    if (gemm) gemm = all_finite(R.dy, yshape, R.ys);
    if (!gemm) {
        const int team = elements < threads ? (int)elements : threads;
        (void)team;
        GRADREF_OMP(omp parallel num_threads(team)) {
            int64_t b, e;
            gradref__my_range(elements, &b, &e);
            gradref__c3f_ref_elements(p, b, e);
        }
        return;
    }
    /* j blocks: as large as the level buffers allow, but enough items for the threads */
    const int64_t J = p->Cin_g * taps_of(p);
    int64_t jb = L.jb;
    if (p->G * ((J + jb - 1) / jb) < threads) {
        const int64_t per_group = (threads + p->G - 1) / p->G;
        jb = (J + per_group - 1) / per_group;
        jb = (jb + 13) / 14 * 14; /* whole GEMM panels */
        if (jb > L.jb) jb = L.jb;
    }
    const int64_t jblocks = (J + jb - 1) / jb;
    const int64_t items = p->G * jblocks;
    const int team = items < threads ? (int)items : threads;
    (void)team;
    GRADREF_OMP(omp parallel num_threads(team)) {
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        char *mine = base + L.thread0 + L.per_thread * (size_t)me;
        int64_t b, e;
        gradref__my_range(items, &b, &e);
        for (int64_t it = b; it < e; it++) {
            const int64_t g = it / jblocks, j0 = it % jblocks * jb;
            item(&R, &L, g, j0, j0 + jb < J ? j0 + jb : J, mine);
        }
    }
}
