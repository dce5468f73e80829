/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's AVX-512 kernel (its GEMMs are common/gemm_avx512.c's): filling
 * packed A-panel lanes from x in place. */
#include "c3f_internal.h"
#include "common/isa.h"

#ifdef GRADREF_X86
#  include <immintrin.h>

/* Lanes [la, lb) of `run` consecutive panel rows (mr floats apart): row q takes channels from
 * base + q * step (ci 0 at lane la) when lo <= q < hi, else zeros. */
__attribute__((target("avx512f"))) void
gradref__c3f_f32_panel_lanes_avx512(float *dst, int64_t mr, const float *base, int64_t step,
                                    int64_t lo, int64_t hi, int64_t run, int64_t la, int64_t lb) {
    const __mmask16 m = (__mmask16)(((1u << lb) - 1u) & ~((1u << la) - 1u));
    const __m512 zero = _mm512_setzero_ps();
    int64_t q = 0;
    for (; q < lo; q++)
        _mm512_mask_storeu_ps(dst + q * mr, m, zero);
    for (; q < hi; q++)
        _mm512_mask_storeu_ps(dst + q * mr, m, _mm512_maskz_loadu_ps(m, base + q * step - la));
    for (; q < run; q++)
        _mm512_mask_storeu_ps(dst + q * mr, m, zero);
}
#else
typedef int gradref__c3f_avx512_unused;
#endif
