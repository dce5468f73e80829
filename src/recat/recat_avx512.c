/* SPDX-License-Identifier: Apache-2.0 */
/* recat's AVX-512 kernels: a small segment is one masked load and one masked store (AVX-512BW
 * byte masks), with a write prefetch of out (with many narrow ranks the time goes to the
 * segments' count, not their bytes); a streamed segment's line shared with the previous row
 * is assembled by two masked loads. */
#include "common/isa.h"
#include "recat_kernels.h"

#ifdef GRADREF__X86
#  include <immintrin.h>

static void small_rows_avx512(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                              size_t ahead) {
    const __mmask64 m = bytes >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << bytes) - 1;
    for (int64_t b = 0; b < rows; b++, src += pitch, dst += bytes) {
        _mm_prefetch(dst + ahead, _MM_HINT_ET0);
        _mm512_mask_storeu_epi8(dst, m, _mm512_maskz_loadu_epi8(m, src));
    }
}

static void stream_rows_avx512(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                               int has_prev, int has_next) {
    for (int64_t b = 0; b < rows; b++, src += pitch, dst += bytes) {
        const size_t a = (uintptr_t)dst & 63u, head = a ? 64 - a : 0;
        if (head) { /* lanes [0, a) of the line are the previous row's last bytes */
            const __mmask64 tail = ((__mmask64)1 << a) - 1;
            const __m512i mine = _mm512_maskz_loadu_epi8(~tail, src - a);
            if (b > 0 || has_prev)
                _mm512_stream_si512(
                    (void *)(dst - a),
                    _mm512_or_si512(mine, _mm512_maskz_loadu_epi8(tail, src - pitch + bytes - a)));
            else
                _mm512_mask_storeu_epi8(dst - a, ~tail, mine);
        }
        size_t i = head;
        for (; i + 64 <= bytes; i += 64)
            _mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512(src + i));
        if (i < bytes && b + 1 == rows && !has_next) { /* else the next row streams it */
            const __mmask64 m = ((__mmask64)1 << (bytes - i)) - 1;
            _mm512_mask_storeu_epi8(dst + i, m, _mm512_maskz_loadu_epi8(m, src + i));
        }
    }
}

const gradref__recat_kernels gradref__recat_kernels_avx512 = {
    .isa = "avx512",
    .small_rows = small_rows_avx512,
    .stream_rows = stream_rows_avx512,
};

#else
typedef int gradref__recat_avx512_unused;
#endif
