/* SPDX-License-Identifier: Apache-2.0 */
/* recat's NEON kernel: small rows as two overlapping 16- or 32-byte moves, the size class
 * chosen once for all rows (the portable kernel, without SSE2 here, moves 8 bytes at a time).
 * Long rows take the portable kernel: AArch64 has no streaming store intrinsic (STNP is only a
 * hint), so its memcpy of whole lines is what a row gets. */
#include "common/isa.h"
#include "recat_kernels.h"

#ifdef GRADREF__ARM64
#  include <arm_neon.h>

static void small_rows_neon(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                            size_t ahead) {
    const uint8_t *s = (const uint8_t *)src;
    uint8_t *d = (uint8_t *)dst;
    if (bytes >= 32) {
        for (int64_t b = 0; b < rows; b++, s += pitch, d += bytes) {
            __builtin_prefetch(d + ahead, 1, 3);
            const uint8x16x2_t x = vld1q_u8_x2(s), y = vld1q_u8_x2(s + bytes - 32);
            vst1q_u8_x2(d, x);
            vst1q_u8_x2(d + bytes - 32, y);
        }
    } else if (bytes >= 16) {
        for (int64_t b = 0; b < rows; b++, s += pitch, d += bytes) {
            __builtin_prefetch(d + ahead, 1, 3);
            const uint8x16_t x = vld1q_u8(s), y = vld1q_u8(s + bytes - 16);
            vst1q_u8(d, x);
            vst1q_u8(d + bytes - 16, y);
        }
    } else {
        gradref__recat_small_rows(dst, src, pitch, bytes, rows, ahead);
    }
}

const gradref__recat_kernels gradref__recat_kernels_neon = {
    .isa = "neon",
    .small_rows = small_rows_neon,
    .stream_rows = gradref__recat_stream_rows,
};

#else
typedef int gradref__recat_neon_unused;
#endif
