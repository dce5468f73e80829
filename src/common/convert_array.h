/* Array conversions for the fast paths: the same roundings as convert.h, with F16C or
 * vectorizable loops. Results are identical to the scalar routines for every non-NaN input;
 * a signalling NaN may come back quiet (F16C quiets it), so copy bits where bits must survive. */
#ifndef GRADREF_COMMON_CONVERT_ARRAY_H
#define GRADREF_COMMON_CONVERT_ARRAY_H

#include <stddef.h>
#include <stdint.h>

void gradref__f16_to_f32_array(const uint16_t *src, float *dst, size_t n);
void gradref__f32_to_f16_array(const float *src, uint16_t *dst, size_t n);
void gradref__bf16_to_f32_array(const uint16_t *src, float *dst, size_t n);
void gradref__f32_to_bf16_array(const float *src, uint16_t *dst, size_t n);

#endif
