/* SPDX-License-Identifier: Apache-2.0 */
/* recat's AVX-512 kernel: a small segment is one masked load and one masked store (AVX-512BW
 * byte masks), with a write prefetch of out: with many narrow ranks the time goes to the
 * segments' count, 0.36 -> 0.5 of copy on the bench's 16 narrow ranks (Zen 5). */
#include "common/isa.h"
#include "recat_kernels.h"

#ifdef GRADREF_X86
#  include <immintrin.h>

__attribute__((target("avx512f,avx512bw,prfchw"))) static void
small_rows_avx512(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                  size_t ahead) {
    const __mmask64 m = bytes >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << bytes) - 1;
    for (int64_t b = 0; b < rows; b++, src += pitch, dst += bytes) {
        _mm_prefetch(dst + ahead, _MM_HINT_ET0);
        _mm512_mask_storeu_epi8(dst, m, _mm512_maskz_loadu_epi8(m, src));
    }
}

const gradref__recat_kernels gradref__recat_kernels_avx512 = {"avx512", small_rows_avx512};

#else
typedef int gradref__recat_avx512_unused;
#endif
