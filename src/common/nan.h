/* SPDX-License-Identifier: Apache-2.0 */
/* The NaN rule of the operators that compute: every NaN they store is the canonical quiet NaN
 * of its dtype (positive, quiet bit set, payload zero: F32 0x7fc00000, F64 0x7ff8000000000000,
 * F16 0x7e00, BF16 0x7fc0). x86 and aarch64 pick NaN signs and payloads by different rules
 * (x86's invalid operations give a negative NaN, aarch64's a positive one; x86 passes the first
 * operand's payload, aarch64 a signalling one first), and so do two summation orders on one
 * CPU: one rule for every output makes the bits the same on every path and architecture.
 * Operators that only move values (recat, gradref_copy) keep every bit instead. */
#ifndef GRADREF_COMMON_NAN_H
#define GRADREF_COMMON_NAN_H

#include <stdint.h>
#include <string.h>

#include "gradref.h"

#define GRADREF__CANON_NAN_F32 0x7fc00000u
#define GRADREF__CANON_NAN_F64 UINT64_C(0x7ff8000000000000)

static inline float gradref__canon_f32(float f) {
    if (f == f) return f;
    const uint32_t b = GRADREF__CANON_NAN_F32;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline double gradref__canon_f64(double d) {
    if (d == d) return d;
    const uint64_t b = GRADREF__CANON_NAN_F64;
    memcpy(&d, &b, sizeof d);
    return d;
}

/* p[0 .. n) with every NaN made canonical (a read-only scan when there is none), by the scan
 * of the highest level at or below max_isa (common/isa.h: the caller's plan's cap) that the
 * CPU runs. */
void gradref__canon_nans_f32(float *p, int64_t n, int max_isa);

/* The same, and whether p then holds a +0 (the bits 0: conv_backprop_data's fast paths check
 * their +0 results against the reference's signed zeros). */
int gradref__canon_nans_f32_zeros(float *p, int64_t n, int max_isa);

/* The scan's body of one ISA: canon_f32 does the whole steps of `step` floats from p and
 * returns how many floats it took (NULL: the portable loop does them all); with pos_zero, it
 * sets *pos_zero to 1 when those floats hold a +0 (and leaves it alone otherwise). */
typedef struct gradref__nan_kernels {
    const char *isa;
    int step;
    int64_t (*canon_f32)(float *p, int64_t n, int *pos_zero);
    int (*all_finite_f32)(const float *d, int64_t n); /* never NULL */
} gradref__nan_kernels;

/* The table of the highest level at or below max_isa (common/isa.h) that the CPU runs. */
const gradref__nan_kernels *gradref__nan_kernels_for(int max_isa);

/* The AVX2 and AVX-512 bodies (nan_avx2.c, nan_avx512.c): steps of 32 and 64 floats. */
int64_t gradref__canon_nans_f32_avx2(float *p, int64_t n, int *pos_zero);
int64_t gradref__canon_nans_f32_avx512(float *p, int64_t n, int *pos_zero);
/* The NEON body (nan_neon.c): steps of 16 floats. */
int64_t gradref__canon_nans_f32_neon(float *p, int64_t n, int *pos_zero);

/* Whether the n floats at d are all finite (no all-ones exponent), a read-only scan: the
 * portable loop (nan.c) and the bodies of nan_avx2.c, nan_avx512.c and nan_neon.c. */
int gradref__all_finite_f32_portable(const float *d, int64_t n);
int gradref__all_finite_f32_avx2(const float *d, int64_t n);
int gradref__all_finite_f32_avx512(const float *d, int64_t n);
int gradref__all_finite_f32_neon(const float *d, int64_t n);

/* The same for n contiguous elements of any float dtype. */
void gradref__canon_nans_elems(int32_t dtype, void *p, int64_t n, int max_isa);

/* Every NaN element of a valid output descriptor of a float dtype made canonical, over up to
 * `threads` threads; other dtypes are left alone. */
void gradref__canon_nans(const gradref_tensor *t, int threads, int max_isa);

#endif
