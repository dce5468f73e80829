/* SPDX-License-Identifier: Apache-2.0 */
/* AVX2 + F16C row kernels of the rope_grad fast path (x86-64 with GCC or Clang), and AVX-512
 * ones for F32 and F16. Each computes exactly the operations of the reference loop on 8 or 16
 * lanes at a time and stores straight to the output, with streaming stores when asked and the
 * destination is 16-byte aligned. */
#ifndef GRADREF_ROPE_GRAD_SIMD_H
#define GRADREF_ROPE_GRAD_SIMD_H

#include <stdint.h>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#  define GRADREF_ROPE_SIMD 1

/* The kernels this CPU runs: 0 none, 1 AVX2 + F16C, 2 those and AVX-512F. */
int gradref__rope_simd_level(void);

/* ATB: out = round(g * w). F16/BF16 rows are 16-bit, F32 rows float; w is f32. */
void gradref__rope_atb_row(int32_t dtype, const void *g, void *out, const float *w, int64_t n,
                           int stream);

/* rotate_half adjoint on one pair of half rows: out_f = cf*gf + sb*gb, out_b = cb*gb - sf*gf. */
void gradref__rope_half_row(int32_t dtype, const void *gf, const void *gb, void *out_f, void *out_b,
                            const float *cf, const float *sb, const float *cb, const float *sf,
                            int64_t n, int stream);

/* The same two on 16 lanes (level 2), for F32 and F16 rows only. */
void gradref__rope_atb_row_avx512(int32_t dtype, const void *g, void *out, const float *w,
                                  int64_t n, int stream);
void gradref__rope_half_row_avx512(int32_t dtype, const void *gf, const void *gb, void *out_f,
                                   void *out_b, const float *cf, const float *sb, const float *cb,
                                   const float *sf, int64_t n, int stream);

/* rotate_half on every head of a token row at once (level 2, F32 or F16): half width n in
 * {16, 32, 48, 64} (the whole half in one chunk), heads head_dim elements apart; the weights
 * stay in registers across the heads. */
void gradref__rope_half_heads_avx512(int32_t dtype, const void *in, void *out, int64_t heads,
                                     int64_t head_dim, const float *cf, const float *sb,
                                     const float *cb, const float *sf, int64_t n, int stream);

/* interleaved adjoint on n (even) elements: even i: c*g + s[i+1]*g[i+1]; odd i: c*g -
 * s[i-1]*g[i-1]. */
void gradref__rope_interleaved_row(int32_t dtype, const void *g, void *out, const float *c,
                                   const float *s, int64_t n, int stream);
#endif

#endif
