/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's kernel tables, one per ISA (the kernels: common/gemm*.c,
 * c3f_avx2.c, c3f_avx512.c and c3f_neon.c). */
#include "c3f_kernels.h"
#include "common/convert.h"
#include "common/gemm.h"
#include "common/gemm_kernels.h"
#include "common/isa.h"

static void round_hf32_portable(float *dst, const float *src, int64_t n, int kept) {
    for (int64_t e = 0; e < n; e++)
        dst[e] = gradref__hf32_round(src[e], kept);
}

static const gradref__c3f_kernels portable = {
    .isa = "portable",
    .gemm = &gradref__sgemm_kernels_portable,
    .round_hf32 = round_hf32_portable,
};

const gradref__c3f_kernels *gradref__c3f_kernels_for(int max_isa) {
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &gradref__c3f_kernels_avx2,
        [GRADREF__ISA_AVX512] = &gradref__c3f_kernels_avx512,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &gradref__c3f_kernels_neon,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}
