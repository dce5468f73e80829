/* SPDX-License-Identifier: Apache-2.0 */
/* Conversions that need more than the inline f32 routines of convert.h. */
#include <math.h>
#include <string.h>

#include "convert.h"
#include "nan.h"

#include "gradref.h"

enum { F16_SIG_BITS = 11, F16_MIN_QUANTUM = -24, BF16_SIG_BITS = 8, BF16_MIN_QUANTUM = -133 };

static int bit_length(uint64_t m) {
    int n = 0;
    while (m) {
        m >>= 1;
        n++;
    }
    return n;
}

/* Rounds m * 2^e (m > 0) to sig_bits significant bits with quanta no finer than 2^min_quantum,
 * ties to even, and returns the result as an f32 (exact: every f16/bf16 value is one;
 * values past the f32 range come back as infinity). */
static float round_to_format(uint64_t m, int e, int sig_bits, int min_quantum) {
    int floor_log2 = bit_length(m) - 1 + e;
    int quantum = floor_log2 - (sig_bits - 1);
    if (quantum < min_quantum) quantum = min_quantum;
    int shift = quantum - e;
    uint64_t q;
    if (shift <= 0) {
        q = m; /* already on the grid */
        quantum = e;
    } else if (shift >= 65) {
        return 0.0f; /* m < 2^64 <= half a quantum */
    } else if (shift == 64) {
        q = (m > (UINT64_C(1) << 63)) ? 1u : 0u;
    } else {
        uint64_t rem = m & ((UINT64_C(1) << shift) - 1u);
        uint64_t half = UINT64_C(1) << (shift - 1);
        q = m >> shift;
        if (rem > half || (rem == half && (q & 1u))) q++;
    }
    if (q == 0) return 0.0f;
    if (quantum > 200) return INFINITY;
    return ldexpf((float)q, quantum); /* q has at most sig_bits + 1 bits: exact */
}

typedef struct f64_parts {
    int kind; /* 0 zero, 1 finite, 2 inf, 3 nan */
    int negative;
    uint64_t m;
    int e;
    uint64_t payload; /* the 52 fraction bits, for NaN */
} f64_parts;

static f64_parts split_f64(double d) {
    uint64_t x;
    memcpy(&x, &d, sizeof x);
    f64_parts p;
    p.negative = (int)(x >> 63);
    int be = (int)((x >> 52) & 0x7ffu);
    uint64_t frac = x & ((UINT64_C(1) << 52) - 1u);
    p.payload = frac;
    p.m = 0;
    p.e = 0;
    if (be == 0x7ff) {
        p.kind = frac ? 3 : 2;
    } else if (be == 0) {
        p.kind = frac ? 1 : 0;
        p.m = frac;
        p.e = -1074;
    } else {
        p.kind = 1;
        p.m = frac | (UINT64_C(1) << 52);
        p.e = be - 1075;
    }
    return p;
}

/* What differs between the two 16-bit formats. */
typedef struct half_format {
    int sig_bits, min_quantum;
    uint16_t inf, quiet;
    int payload_shift; /* f64 fraction bits dropped to keep the top of a NaN payload */
    uint16_t (*from_exact_f32)(float);
} half_format;

static const half_format F16 = {F16_SIG_BITS, F16_MIN_QUANTUM,    0x7c00u, 0x200u,
                                42,           gradref__f32_to_f16};
static const half_format BF16 = {BF16_SIG_BITS,       BF16_MIN_QUANTUM, 0x7f80u, 0x40u, 45,
                                 gradref__f32_to_bf16};

static uint16_t f64_to_half(double d, const half_format *f) {
    f64_parts p = split_f64(d);
    uint16_t sign = (uint16_t)(p.negative ? 0x8000u : 0u);
    if (p.kind == 3) {
        uint16_t m = (uint16_t)(p.payload >> f->payload_shift);
        return (uint16_t)(sign | f->inf | (m ? m : f->quiet));
    }
    if (p.kind == 2) return (uint16_t)(sign | f->inf);
    if (p.kind == 0) return sign;
    /* the rounded value is exact in f32 (or past the format's range, which gives inf) */
    return (uint16_t)(sign |
                      f->from_exact_f32(round_to_format(p.m, p.e, f->sig_bits, f->min_quantum)));
}

static uint16_t i64_to_half(int64_t v, const half_format *f) {
    if (v == 0) return 0;
    uint16_t sign = (uint16_t)(v < 0 ? 0x8000u : 0u);
    uint64_t magnitude = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    return (uint16_t)(sign | f->from_exact_f32(
                                 round_to_format(magnitude, 0, f->sig_bits, f->min_quantum)));
}

uint16_t gradref__f64_to_f16(double d) {
    return f64_to_half(d, &F16);
}
uint16_t gradref__f64_to_bf16(double d) {
    return f64_to_half(d, &BF16);
}
uint16_t gradref__i64_to_f16(int64_t v) {
    return i64_to_half(v, &F16);
}
uint16_t gradref__i64_to_bf16(int64_t v) {
    return i64_to_half(v, &BF16);
}

double gradref__load_float(int32_t dtype, const void *p) {
    uint16_t h;
    switch (dtype) {
    case GRADREF_F32: {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case GRADREF_F64: {
        double v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    case GRADREF_F16: memcpy(&h, p, 2); return gradref__f16_to_f32(h);
    default: memcpy(&h, p, 2); return gradref__bf16_to_f32(h);
    }
}

void gradref__store_float(int32_t dtype, void *p, double v) {
    v = gradref__canon_f64(v); /* the operators' NaN rule (nan.h) */
    switch (dtype) {
    case GRADREF_F32: {
        float f = (float)v;
        memcpy(p, &f, sizeof f);
    } break;
    case GRADREF_F64: memcpy(p, &v, sizeof v); break;
    case GRADREF_F16: {
        uint16_t h = gradref__f64_to_f16(v);
        memcpy(p, &h, 2);
    } break;
    default: {
        uint16_t h = gradref__f64_to_bf16(v);
        memcpy(p, &h, 2);
    } break;
    }
}
