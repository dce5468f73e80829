/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad's AVX-512 level: the kernels of rope_grad_avx512.h, BF16 rounded by integer
 * operations. */
#define GRADREF__ROPE_BF16_BY_HW   0
#define GRADREF__ROPE_AVX512_TABLE gradref__rope_kernels_avx512
#define GRADREF__ROPE_AVX512_ISA   "avx512"
#include "rope_grad_avx512.h"

typedef int gradref__rope_avx512_unit; /* not empty where the kernels do not build */
