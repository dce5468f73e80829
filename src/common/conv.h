/* SPDX-License-Identifier: Apache-2.0 */
/* Checks shared by the convolution operators (gradref_conv_params and the forward rule). */
#ifndef GRADREF_COMMON_CONV_H
#define GRADREF_COMMON_CONV_H

#include <stdint.h>

#include "gradref.h"

/* The fields both convolution plans start with (declared once, read by name in each module):
 * the call's numerics and the problem held as 3-D (a 1-D or 2-D call gets leading spatial
 * dims of size 1, stride and dilation 1, no pad). "in" is the pair of operands the sums
 * read (filter/diff, x/dy), "out" the written tensor (grad, dw). */
#define GRADREF__CONV_PLAN_FIELDS                                                                  \
  int32_t mode;              /* gradref_conv_mode */                                               \
  int32_t in_dtype;          /* the two operands' dtype */                                         \
  int32_t out_dtype;         /* the output's dtype */                                              \
  int32_t precision;         /* gradref_precision */                                               \
  int32_t max_isa;           /* the highest kernel level to use (isa.h); tests lower it */         \
  int32_t zero_only;         /* an operand or the output is empty: the output is +0 */             \
  int64_t N, G;              /* batch, groups */                                                   \
  int64_t K[3], I[3], O[3];  /* kernel, input (x/grad) and output (y/diff) spatial sizes */        \
  int64_t stride[3], dil[3]; /* 1 where they change nothing (one output, one tap) */               \
  int64_t pad_begin[3];                                                                            \
  size_t in_size, out_size; /* element bytes */                                                    \
  gradref_tensor out_desc   /* the output, normalised (written directly when zero_only) */

/* Spatial dim j's stride and dilation as a plan holds them: 1 where they change nothing (one
 * output position, one tap), which keeps every later product of them small. */
static inline void gradref__conv_plan_steps(const gradref_conv_params *p, int j, int64_t k,
                                            int64_t o, int64_t *stride, int64_t *dil) {
    *stride = o == 1 ? 1 : p->stride[j];
    *dil = k == 1 ? 1 : p->dilation[j];
}

/* p is not NULL, its mode is a gradref_conv_mode and its groups >= 0. */
gradref_status gradref__conv_check_params(const char *op, const gradref_conv_params *p);

/* Spatial dim j of the call: p's stride and dilation >= 1 and pads >= 0, the kernel size k
 * (kernel.shape[kdim]) >= 1, and the forward rule
 *   o = (i + pad_begin + pad_end - dilation * (k - 1) - 1) / stride + 1
 * holding for the input size i (in.shape[2 + j]) and the output size o (out.shape[2 + j]);
 * int64 overflow of the padded size or the dilated kernel is OVERFLOW. */
gradref_status gradref__conv_check_dim(const char *op, const gradref_conv_params *p, int j,
                                       const char *kernel, int kdim, int64_t k, const char *in,
                                       int64_t i, const char *out, int64_t o);

#endif
