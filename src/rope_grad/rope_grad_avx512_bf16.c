/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad's AVX512_BF16 level: the kernels of rope_grad_avx512.h, BF16 stores rounded by
 * VCVTNEPS2BF16 (this file is compiled for the extension). */
#define GRADREF__ROPE_BF16_BY_HW   1
#define GRADREF__ROPE_AVX512_TABLE gradref__rope_kernels_avx512_bf16
#define GRADREF__ROPE_AVX512_ISA   "avx512_bf16"
#include "rope_grad_avx512.h"

typedef int gradref__rope_avx512_bf16_unit; /* not empty where the kernels do not build */
