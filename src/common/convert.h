/* SPDX-License-Identifier: Apache-2.0 */
/* Scalar conversions between the float dtypes, all round-to-nearest-even, subnormals exact.
 * NaN stays NaN with as much of its payload as fits (the quiet bit is set only when the kept
 * payload would otherwise read as infinity); nothing depends on the FPU rounding mode. */
#ifndef GRADREF_COMMON_CONVERT_H
#define GRADREF_COMMON_CONVERT_H

#include <stdint.h>
#include <string.h>

#include "gradref.h"

static inline uint32_t gradref__f32_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static inline float gradref__f32_from_bits(uint32_t x) {
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* f widened to f64; a NaN by hand, its payload (and quiet bit) kept: the cast quiets a
 * signalling NaN. */
static inline double gradref__f32_to_f64(float f) {
    const uint32_t x = gradref__f32_bits(f);
    if ((x & 0x7fffffffu) <= 0x7f800000u) return (double)f;
    const uint64_t bits =
        (uint64_t)(x >> 31) << 63 | UINT64_C(0x7ff) << 52 | (uint64_t)(x & 0x7fffffu) << 29;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* d rounded to f32 (to nearest even); a NaN by hand: the top 23 bits of its payload, the quiet
 * bit set only when they are all zero (they would read as infinity). */
static inline float gradref__f64_to_f32(double d) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    if ((bits & UINT64_C(0x7fffffffffffffff)) <= UINT64_C(0x7ff0000000000000)) return (float)d;
    uint32_t m = (uint32_t)((bits >> 29) & 0x7fffffu);
    if (m == 0) m = 0x400000u;
    return gradref__f32_from_bits((uint32_t)(bits >> 63) << 31 | 0x7f800000u | m);
}

/* f rounded to HF32 keeping `kept` (10 or 11) mantissa bits, as CANN's golden rounds on the
 * int32 view, ((v >> (22 - kept)) + 1) >> 1 << (23 - kept): half of the last kept bit is added
 * to the bit pattern and the rest cut, so magnitudes round half away from zero and carries run
 * into the exponent (the largest finites become Inf). A NaN is quieted first, as the golden's
 * float64 inputs are, so a signalling NaN stays NaN on every path; the quiet all-ones patterns
 * still wrap, 0x7fffffff to -0 and 0xffffffff to +0, as the golden's integers do. */
static inline float gradref__hf32_round(float f, int kept) {
    const uint32_t cut = 23u - (uint32_t)kept;
    uint32_t b = gradref__f32_bits(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) b |= 0x400000u;
    return gradref__f32_from_bits((b + (1u << (cut - 1))) & ~((1u << cut) - 1u));
}

/* The mantissa bits an HF32 precision keeps (0: not an HF32 precision). */
static inline int gradref__hf32_kept_bits(int32_t precision) {
    return precision == GRADREF_PRECISION_HF32        ? 10
           : precision == GRADREF_PRECISION_HF32_910B ? 11
                                                      : 0;
}

static inline float gradref__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) return gradref__f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp != 0) return gradref__f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in f32 */
    float mag = (float)man * 0x1p-24f;
    return sign ? -mag : mag;
}

static inline uint16_t gradref__f32_to_f16(float f) {
    uint32_t x = gradref__f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
        uint32_t m = (ax >> 13) & 0x3ffu;
        return (uint16_t)(sign | 0x7c00u | (m ? m : 0x200u));
    }
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                                   /* below 2^-14: f16 subnormal */
        if (ax <= 0x33000000u) return sign;                   /* <= 2^-25 ties to zero */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24: q = value * 2^24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax - 0x38000000u; /* rebias the exponent from 127 to 15 */
    uint32_t q = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* f to F16 as MegEngine's half.hpp (half 1.11, HALF_ROUND_STYLE 1, HALF_ROUND_TIES_TO_EVEN 0)
 * converts on the host: to nearest with ties away from zero; values from 65520 up become Inf;
 * a NaN keeps the top 10 bits of its payload and is not quieted (so a payload only in the
 * lower 13 bits becomes Inf). */
static inline uint16_t gradref__f32_to_f16_megengine(float f) {
    const uint32_t x = gradref__f32_bits(f), e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    if (e == 0xffu) return (uint16_t)(sign | 0x7c00u | (m >> 13));
    if (e > 142u) return (uint16_t)(sign | 0x7c00u);
    if (e >= 113u) /* a normal F16: the first cut bit rounds up (carrying into the exponent) */
        return (uint16_t)((sign | ((e - 112u) << 10) | (m >> 13)) + ((m >> 12) & 1u));
    if (e < 102u) return sign;
    const uint32_t full = m | 0x800000u, shift = 126u - e; /* 14..24: F16 subnormals */
    return (uint16_t)((sign | (full >> shift)) + ((full >> (shift - 1u)) & 1u));
}

static inline float gradref__bf16_to_f32(uint16_t h) {
    return gradref__f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t gradref__f32_to_bf16(float f) {
    uint32_t x = gradref__f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        uint16_t h = (uint16_t)(x >> 16);
        return (uint16_t)((h & 0x7fu) ? h : (h | 0x40u));
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* Element e of an array of F32, F16, BF16, I8 (exact) or F64 (rounded) as f32: the fast paths'
 * packers' read, inline (gradref__load_float's switch without its call and f64). */
static inline float gradref__load_f32(int32_t dtype, const void *base, int64_t e) {
    switch (dtype) {
    case GRADREF_F32: return ((const float *)base)[e];
    case GRADREF_F16: return gradref__f16_to_f32(((const uint16_t *)base)[e]);
    case GRADREF_BF16: return gradref__bf16_to_f32(((const uint16_t *)base)[e]);
    case GRADREF_I8: return (float)((const int8_t *)base)[e];
    default: return (float)((const double *)base)[e];
    }
}

/* Single roundings from f64 and from integers (a detour through f32 would round twice). */
uint16_t gradref__f64_to_f16(double d);
uint16_t gradref__f64_to_bf16(double d);
uint16_t gradref__i64_to_f16(int64_t v);
uint16_t gradref__i64_to_bf16(int64_t v);

/* Reference-loop helpers: a float element of any float dtype read exactly as an f64, and an
 * f64 rounded once into an element of any float dtype, a NaN as the canonical one (nan.h). */
double gradref__load_float(int32_t dtype, const void *p);
void gradref__store_float(int32_t dtype, void *p, double v);

/* f to BF16 as MegEngine's bfloat16.hpp converts: to nearest even; Inf and NaN are cut to
 * their top 16 bits, and a NaN with payload in the cut bits gets the lowest kept bit set. */
static inline uint16_t gradref__f32_to_bf16_megengine(float f) {
    uint32_t x = gradref__f32_bits(f);
    if (~x & 0x7f800000u)
        x += 0x7fffu + ((x >> 16) & 1u);
    else if (x & 0xffffu)
        x |= 0x10000u;
    return (uint16_t)(x >> 16);
}

#endif
