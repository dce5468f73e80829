/* SPDX-License-Identifier: Apache-2.0 */
/* Checks shared by the convolution operators (gradref_conv_params and the forward rule). */
#ifndef GRADREF_COMMON_CONV_H
#define GRADREF_COMMON_CONV_H

#include <stdint.h>

#include "gradref.h"

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
