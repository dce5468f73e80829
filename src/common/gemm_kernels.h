/* Micro-kernels of the packed SGEMM (gemm.c). Each computes one MR x NR tile over a k-slice:
 * c[i][j] = fma(a[p][i], b[p][j], c[i][j]) for p = 0..k-1, starting from c (load) or +0, with
 * a packed k-major in runs of MR and b in runs of NR; c has row stride ldc, unit columns. */
#ifndef GRADREF_COMMON_GEMM_KERNELS_H
#define GRADREF_COMMON_GEMM_KERNELS_H

#include <stdint.h>

#define GRADREF__PORTABLE_MR   4
#define GRADREF__PORTABLE_NR   4
#define GRADREF__AVX2_MR       6
#define GRADREF__AVX2_NR       16
#define GRADREF__AVX512_MR     14
#define GRADREF__AVX512_NR     32
#define GRADREF__GEMM_MAX_TILE (GRADREF__AVX512_MR * GRADREF__AVX512_NR)

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#  define GRADREF__GEMM_X86 1
void gradref__sgemm_kernel_avx2(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                                int load);
void gradref__sgemm_kernel_avx512(int64_t k, const float *a, const float *b, float *c, int64_t ldc,
                                  int load);
#endif

#endif
