/* SPDX-License-Identifier: Apache-2.0 */
/* fmaf for the portable kernels: a*b + c rounded once, as the vector levels' FMA instructions
 * round it. Where the target has no FMA instruction (x86-64's baseline) the C library's fmaf is
 * a call per element that keeps every accumulator in memory; gradref__fmaf_odd is exact and
 * inline instead: the product of two floats is exact in double, the sum is rounded to odd
 * (TwoSum's error sets the last bit), and a value rounded to odd at 53 bits rounds correctly
 * to 24 (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums", 2008). */
#ifndef GRADREF_COMMON_FMA_H
#define GRADREF_COMMON_FMA_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float gradref__fmaf_odd(float a, float b, float c) {
    const double p = (double)a * b, s = p + c;
    const double v = s - p, err = (p - (s - v)) + (c - v); /* s + err == p + c exactly */
    uint64_t bits;
    memcpy(&bits, &s, sizeof bits);
    /* inexact and even: step to the odd neighbour on err's side (NaN and Inf have no err) */
    const uint64_t step = (err > 0) == (s > 0) ? 1 : UINT64_MAX;
    bits += (err > 0 || err < 0) && !(bits & 1) ? step : 0;
    double odd;
    memcpy(&odd, &bits, sizeof odd);
    return (float)odd;
}

/* The instruction where the target has it; the C library's where double arithmetic may run
 * wider than double (x87), which TwoSum's error term does not survive. */
static inline float gradref__fmaf(float a, float b, float c) {
#if defined(__FMA__) || defined(__aarch64__) || !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
    return fmaf(a, b, c);
#else
    return gradref__fmaf_odd(a, b, c);
#endif
}

#endif
