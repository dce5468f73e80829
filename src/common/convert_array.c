/* SPDX-License-Identifier: Apache-2.0 */
#include "convert_array.h"

#include <string.h>

#include "convert.h"
#include "cpu.h"
#include "isa.h"

void gradref__f16_to_f32_array(const uint16_t *src, float *dst, size_t n) {
#ifdef GRADREF_X86
    if (gradref__cpu_has_avx_f16c()) {
        gradref__f16_to_f32_f16c(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = gradref__f16_to_f32(src[i]);
}

void gradref__f32_to_f16_array(const float *src, uint16_t *dst, size_t n) {
#ifdef GRADREF_X86
    if (gradref__cpu_has_avx_f16c()) {
        gradref__f32_to_f16_f16c(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = gradref__f32_to_f16(src[i]);
}

/* Both bf16 directions are integer operations; written branch-free so they vectorize. */
void gradref__bf16_to_f32_array(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x = (uint32_t)src[i] << 16;
        memcpy(dst + i, &x, sizeof x);
    }
}

void gradref__f32_to_bf16_array(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, src + i, sizeof x);
        uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
        uint32_t nan = (x >> 16) | (((x >> 16) & 0x7fu) == 0u ? 0x40u : 0u);
        dst[i] = (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
    }
}
