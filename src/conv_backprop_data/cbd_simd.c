#include "cbd_simd.h"

#include <math.h>

#include "common/gemm.h"

/* The diff column of grad column i2 through tap position kp2 (stride 1). */
static int64_t column_shift(const gradref__cbd_plan *p, int64_t kp2) {
    return p->pad_begin[2] - kp2 * p->dil[2];
}

static int64_t stored(const gradref__cbd_plan *p, int j, int64_t kp) {
    return p->mode == GRADREF_CONV_CROSS_CORRELATION ? kp : p->K[j] - 1 - kp;
}

/* Row (i0, i1) of grad: the diff rows its row taps reach, in the chain's order. Returns how
 * many, filling rows[] and the stored row-tap index base (k0 * K1 + k1) * K2. */
static int64_t row_taps(const gradref__cbd_plan *p, const float *diff, int64_t i0, int64_t i1,
                        const float **rows, int64_t *base) {
    int64_t n = 0;
    for (int64_t kp0 = p->K[0] - 1; kp0 >= 0; kp0--) {
        const int64_t o0 = i0 + p->pad_begin[0] - kp0 * p->dil[0];
        if (o0 < 0 || o0 >= p->O[0]) continue;
        for (int64_t kp1 = p->K[1] - 1; kp1 >= 0; kp1--) {
            const int64_t o1 = i1 + p->pad_begin[1] - kp1 * p->dil[1];
            if (o1 < 0 || o1 >= p->O[1]) continue;
            rows[n] = diff + (o0 * p->O[1] + o1) * p->O[2];
            base[n] = (stored(p, 0, kp0) * p->K[1] + stored(p, 1, kp1)) * p->K[2];
            n++;
        }
    }
    return n;
}

static void row_portable(const gradref__cbd_plan *p, const float *w, const float *const *rows,
                         const int64_t *base, int64_t nrows, float *out) {
    for (int64_t i2 = 0; i2 < p->I[2]; i2++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t o2 = i2 + column_shift(p, kp2);
                if (o2 >= 0 && o2 < p->O[2])
                    acc = fmaf(w[base[r] + stored(p, 2, kp2)], rows[r][o2], acc);
            }
        out[i2] = acc;
    }
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#  include <immintrin.h>
#  define CBD_X86 1

/* Lanes l of o2 = start + l inside [0, O2), as a 16-lane mask. */
static uint32_t valid16(int64_t start, int64_t O2) {
    const int64_t lo = start < 0 ? -start : 0, hi = O2 - start < 16 ? O2 - start : 16;
    if (hi <= lo) return 0;
    return (uint32_t)(((1u << hi) - 1u) & ~((1u << lo) - 1u)) & 0xffffu;
}

__attribute__((target("avx512f,fma"))) static void
row_avx512(const gradref__cbd_plan *p, const float *w, const float *const *rows,
           const int64_t *base, int64_t nrows, float *out) {
    const int64_t I2 = p->I[2], O2 = p->O[2];
    for (int64_t i2 = 0; i2 < I2; i2 += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t start = i2 + column_shift(p, kp2);
                const __mmask16 m = (__mmask16)valid16(start, O2);
                if (!m) continue;
                const __m512 v = _mm512_maskz_loadu_ps(m, rows[r] + start);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(w[base[r] + stored(p, 2, kp2)]), v, acc);
            }
        const int64_t left = I2 - i2;
        if (left >= 16)
            _mm512_storeu_ps(out + i2, acc);
        else
            _mm512_mask_storeu_ps(out + i2, (__mmask16)((1u << left) - 1u), acc);
    }
}

__attribute__((target("avx2,fma"))) static void row_avx2(const gradref__cbd_plan *p, const float *w,
                                                         const float *const *rows,
                                                         const int64_t *base, int64_t nrows,
                                                         float *out) {
    const int64_t I2 = p->I[2], O2 = p->O[2];
    int64_t i2 = 0;
    for (; i2 + 8 <= I2; i2 += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t start = i2 + column_shift(p, kp2);
                __m256 v;
                if (start >= 0 && start + 8 <= O2) {
                    v = _mm256_loadu_ps(rows[r] + start);
                } else {
                    float tmp[8];
                    for (int l = 0; l < 8; l++)
                        tmp[l] = start + l >= 0 && start + l < O2 ? rows[r][start + l] : 0.0f;
                    v = _mm256_loadu_ps(tmp);
                }
                acc = _mm256_fmadd_ps(_mm256_set1_ps(w[base[r] + stored(p, 2, kp2)]), v, acc);
            }
        _mm256_storeu_ps(out + i2, acc);
    }
    for (; i2 < I2; i2++) { /* the tail, as the portable loop */
        float acc = 0.0f;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t o2 = i2 + column_shift(p, kp2);
                if (o2 >= 0 && o2 < O2)
                    acc = fmaf(w[base[r] + stored(p, 2, kp2)], rows[r][o2], acc);
            }
        out[i2] = acc;
    }
}
#endif

void gradref__cbd_depthwise_plane(const gradref__cbd_plan *p, const float *w, const float *diff,
                                  float *grad, int kernel) {
    const float *rows[64];
    int64_t base[64];
    int best = gradref__sgemm_best_kernel();
    if (kernel > best) kernel = best;
    for (int64_t i0 = 0; i0 < p->I[0]; i0++)
        for (int64_t i1 = 0; i1 < p->I[1]; i1++) {
            float *out = grad + (i0 * p->I[1] + i1) * p->I[2];
            int64_t n = row_taps(p, diff, i0, i1, rows, base);
#ifdef CBD_X86
            if (kernel == GRADREF_GEMM_AVX512)
                row_avx512(p, w, rows, base, n, out);
            else if (kernel == GRADREF_GEMM_AVX2)
                row_avx2(p, w, rows, base, n, out);
            else
#endif
                row_portable(p, w, rows, base, n, out);
        }
}
