/* SPDX-License-Identifier: Apache-2.0 */
/* Array conversions for the fast paths: the same results as convert.h, bit for bit (NaN
 * payloads included), with F16C or vectorizable loops. */
#ifndef GRADREF_COMMON_CONVERT_ARRAY_H
#define GRADREF_COMMON_CONVERT_ARRAY_H

#include <stddef.h>
#include <stdint.h>

void gradref__f16_to_f32_array(const uint16_t *src, float *dst, size_t n);
void gradref__f32_to_f16_array(const float *src, uint16_t *dst, size_t n);
void gradref__bf16_to_f32_array(const uint16_t *src, float *dst, size_t n);
void gradref__f32_to_bf16_array(const float *src, uint16_t *dst, size_t n);

/* The F16C versions (convert_array_avx2.c; the CPU must have AVX and F16C). */
void gradref__f16_to_f32_f16c(const uint16_t *src, float *dst, size_t n);
void gradref__f32_to_f16_f16c(const float *src, uint16_t *dst, size_t n);

#endif
