/* The x86 micro-kernels (gemm_kernels.h), compiled with target attributes and chosen at run
 * time. Every element is a chain of _mm*_fmadd_ps in ascending p: one rounding per step, as
 * C99 fmaf, so these equal the portable kernel bit for bit. */
#include "gemm_kernels.h"

#ifdef GRADREF__GEMM_X86
#  include <immintrin.h>

__attribute__((target("avx2,fma"))) void gradref__sgemm_kernel_avx2(int64_t k, const float *a,
                                                                    const float *b, float *c,
                                                                    int64_t ldc, int load) {
    enum { MR = GRADREF__AVX2_MR };
    __m256 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = load ? _mm256_loadu_ps(c + i * ldc) : _mm256_setzero_ps();
        acc[i][1] = load ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_setzero_ps();
    }
    for (int64_t p = 0; p < k; p++) {
        const __m256 b0 = _mm256_loadu_ps(b + p * 16), b1 = _mm256_loadu_ps(b + p * 16 + 8);
        for (int i = 0; i < MR; i++) {
            const __m256 ai = _mm256_broadcast_ss(a + p * MR + i);
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_ps(c + i * ldc, acc[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, acc[i][1]);
    }
}

__attribute__((target("avx512f,fma"))) void gradref__sgemm_kernel_avx512(int64_t k, const float *a,
                                                                         const float *b, float *c,
                                                                         int64_t ldc, int load) {
    enum { MR = GRADREF__AVX512_MR };
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) {
        acc[i][0] = load ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
        acc[i][1] = load ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < k; p++) {
        const __m512 b0 = _mm512_loadu_ps(b + p * 32), b1 = _mm512_loadu_ps(b + p * 32 + 16);
        for (int i = 0; i < MR; i++) {
            const __m512 ai = _mm512_set1_ps(a[p * MR + i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
    }
    for (int i = 0; i < MR; i++) {
        _mm512_storeu_ps(c + i * ldc, acc[i][0]);
        _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
}

#else
typedef int gradref__gemm_kernels_unused;
#endif
