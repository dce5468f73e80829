/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's kernel tables, one per ISA (the kernels: common/gemm*.c,
 * c3f_avx2.c and c3f_avx512.c). */
#include "c3f_internal.h"
#include "common/gemm.h"
#include "common/gemm_kernels.h"
#include "common/isa.h"

static const gradref__c3f_kernels portable = {
    "portable", &gradref__sgemm_kernels_portable, NULL, NULL, NULL, NULL};
#ifdef GRADREF_X86
static const gradref__c3f_kernels avx2 = {"avx2",
                                          &gradref__sgemm_kernels_avx2,
                                          NULL,
                                          gradref__c3f_f32_gather_panel_avx2,
                                          gradref__c3f_f32_add_avx2,
                                          gradref__c3f_f32_all_finite_avx2};
static const gradref__c3f_kernels avx512 = {"avx512",
                                            &gradref__sgemm_kernels_avx512,
                                            gradref__c3f_f32_panel_lanes_avx512,
                                            gradref__c3f_f32_gather_panel_avx512,
                                            gradref__c3f_f32_add_avx512,
                                            gradref__c3f_f32_all_finite_avx512};
#endif

const gradref__c3f_kernels *gradref__c3f_kernels_for(int kernel) {
    switch (gradref__sgemm_kernel(kernel)) {
#ifdef GRADREF_X86
    case GRADREF_GEMM_AVX512: return &avx512;
    case GRADREF_GEMM_AVX2: return &avx2;
#endif
    default: return &portable;
    }
}
