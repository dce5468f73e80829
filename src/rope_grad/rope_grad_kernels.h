/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad's row kernels, one table per ISA (rope_grad_kernels.c portable, rope_grad_avx2.c,
 * rope_grad_avx512.c, rope_grad_avx512_bf16.c, rope_grad_neon.c). Every kernel computes exactly the
 * operations of the reference loop on F32, F16 or BF16 rows (f32 arithmetic, one rounding when
 * stored) and writes its outputs with streaming stores when `stream` is set and the destination
 * allows it. */
#ifndef GRADREF_ROPE_GRAD_KERNELS_H
#define GRADREF_ROPE_GRAD_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "common/convert.h"
#include "common/nan.h"
#include "gradref.h"

typedef struct gradref__rope_kernels {
    const char *isa;
    /* ATB: out = round(g * w), n elements; w is f32. */
    void (*atb_row)(int32_t dtype, const void *g, void *out, const float *w, int64_t n, int stream);
    /* rotate_half adjoint on one pair of half rows: out_f = cf*gf + sb*gb, out_b = cb*gb -
     * sf*gf. */
    void (*half_row)(int32_t dtype, const void *gf, const void *gb, void *out_f, void *out_b,
                     const float *cf, const float *sb, const float *cb, const float *sf, int64_t n,
                     int stream);
    /* rotate_half on every head of a token row at once, the weights held in registers: half
     * width n in {16, 32, 48, 64}, heads head_dim elements apart. NULL: head by head with
     * half_row. */
    void (*half_heads)(int32_t dtype, const void *in, void *out, int64_t heads, int64_t head_dim,
                       const float *cf, const float *sb, const float *cb, const float *sf,
                       int64_t n, int stream);
    /* interleaved adjoint on n (even) elements: even i: c*g + s[i+1]*g[i+1]; odd i: c*g -
     * s[i-1]*g[i-1]. */
    void (*interleaved_row)(int32_t dtype, const void *g, void *out, const float *c, const float *s,
                            int64_t n, int stream);
    /* atb_row on every head of a token row at once, w held in registers: n (the head's weights)
     * in {16, 32, ..., 128}, heads head_dim elements apart. NULL: head by head. */
    void (*atb_heads)(int32_t dtype, const void *in, void *out, int64_t heads, int64_t head_dim,
                      const float *w, int64_t n, int stream);
    /* interleaved_row on every head of a token row at once, c and s held in registers: n in
     * {16, 32, ..., 128}, heads head_dim elements apart. NULL: head by head. */
    void (*interleaved_heads)(int32_t dtype, const void *in, void *out, int64_t heads,
                              int64_t head_dim, const float *c, const float *s, int64_t n,
                              int stream);
} gradref__rope_kernels;

/* The table of the highest level at or below max_isa (common/isa.h) that the CPU runs. */
const gradref__rope_kernels *gradref__rope_kernels_for(int max_isa);

extern const gradref__rope_kernels gradref__rope_kernels_portable;
extern const gradref__rope_kernels gradref__rope_kernels_avx2;
extern const gradref__rope_kernels gradref__rope_kernels_avx512;
extern const gradref__rope_kernels gradref__rope_kernels_avx512_bf16;
extern const gradref__rope_kernels gradref__rope_kernels_neon;

/* Element helpers shared by the kernel files (F32, F16 or BF16 rows). */
static inline size_t gradref__rope_esize(int32_t dt) {
    return dt == GRADREF_F32 ? 4 : 2;
}

static inline float gradref__rope_load1(int32_t dt, const void *p, int64_t i) {
    if (dt == GRADREF_F32) return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    return dt == GRADREF_F16 ? gradref__f16_to_f32(h) : gradref__bf16_to_f32(h);
}

static inline void gradref__rope_store1(int32_t dt, void *p, int64_t i, float v) {
    v = gradref__canon_f32(v); /* the NaN rule (common/nan.h) */
    if (dt == GRADREF_F32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dt == GRADREF_F16 ? gradref__f32_to_f16(v) : gradref__f32_to_bf16(v);
}

static inline int gradref__rope_aligned16(const void *p) {
    return ((uintptr_t)p & 15u) == 0;
}

/* Whether an all-heads kernel may stream: every head row of out starts 16-byte aligned. */
static inline int gradref__rope_heads_stream(int stream, const void *out, int64_t head_dim,
                                             int32_t dt) {
    return stream && gradref__rope_aligned16(out) &&
           (head_dim * (int64_t)gradref__rope_esize(dt)) % 16 == 0;
}

#endif
