/* SPDX-License-Identifier: Apache-2.0 */
/* GRADREF_PRECISION_MEGENGINE_DEFAULT on LANES grad elements of one row at a time, in GCC vector
 * extensions, included by an ISA file after defining LANES and ME_ROW (the function's name); the
 * file's ISA flags give the vectors their width. Each lane runs one grad element's chain in
 * MegEngine's order (cbd_megengine.c): over oc, then the taps in ascending diff position, each
 * term the float product of the two 16-bit values, added to the element in float and rounded to
 * 16 bits as half.hpp (F16, ties away from zero) or bfloat16.hpp (BF16, ties to even) round.
 * The element is held as the f32 value of its 16 bits, so the chain's operations are
 * MegEngine's own, lane by lane: the same bits. A NaN stays a NaN (its payload may differ; the
 * caller makes every NaN canonical). The ISA file may define ME_LOAD_F16, ME_LOAD_U16_PART,
 * ME_ANY, ME_F16_SCALAR, ME_MIN_U and ME_MAX_U (below) with its own instructions; the header
 * undefines all of these macros. */
#include <string.h>

#include "cbd_kernels.h"

typedef float me_vf __attribute__((vector_size(4 * LANES)));
typedef uint32_t me_vu __attribute__((vector_size(4 * LANES)));
typedef int32_t me_vi __attribute__((vector_size(4 * LANES)));
typedef uint16_t me_vh __attribute__((vector_size(2 * LANES)));

/* Exact F16 -> f32 of the 16-bit lanes h: the exponent and mantissa moved to f32's places and
 * scaled by 2^112 (normal and subnormal values alike), Inf and NaN given f32's all-ones
 * exponent. */
static inline me_vf me_f16_to_f32(me_vu h) {
    const me_vu em = h & 0x7fffu, sign = (h & 0x8000u) << 16;
    me_vf v = (me_vf)(em << 13) * 0x1p112f;
    const me_vi special = (me_vi)(em >= 0x7c00u);
    const me_vu bits = ((me_vu)v & ~(me_vu)special) | (((em << 13) | 0x7f800000u) & (me_vu)special);
    return (me_vf)(bits | sign);
}

static inline me_vf me_load16(int bf16, me_vu h) {
    return bf16 ? (me_vf)(h << 16) : me_f16_to_f32(h);
}

/* s rounded to F16 as gradref__f32_to_f16_megengine (convert.h), as the f32 value: normal
 * results keep 10 mantissa bits, the first cut bit rounding the magnitude up (into the exponent
 * too), 65520 and up become Inf; subnormal ones are q * 2^-24 with q rounded the same way;
 * below 2^-25, +-0; Inf and NaN stay. */
static inline me_vf me_round_f16_all(me_vf s) {
    const me_vu x = (me_vu)s, sign = x & 0x80000000u, ax = x & 0x7fffffffu, e = ax >> 23;
    me_vu normal = (ax + 0x1000u) & 0xffffe000u;
    const me_vi big = (me_vi)(normal >= 0x47800000u);
    normal = (normal & ~(me_vu)big) | (0x7f800000u & (me_vu)big);
    /* e in [102, 112]: shift 126 - e in [14, 24] (other lanes take a harmless shift) */
    const me_vi sub_range = (me_vi)(e >= 102u) & (me_vi)(e <= 112u);
    const me_vu shift = ((126u - e) & (me_vu)sub_range) | (14u & ~(me_vu)sub_range);
    const me_vu full = (ax & 0x7fffffu) | 0x800000u;
    const me_vu q = (full >> shift) + ((full >> (shift - 1u)) & 1u);
    const me_vf sub = __builtin_convertvector((me_vi)q, me_vf) * 0x1p-24f;
    const me_vi nan = (me_vi)(ax > 0x7f800000u), is_normal = (me_vi)(e >= 113u);
    me_vu r = (normal & (me_vu)is_normal) | ((me_vu)sub & (me_vu)sub_range);
    r = (r & ~(me_vu)nan) | (ax & (me_vu)nan);
    return (me_vf)(r | sign);
}

/* s rounded to F16 as me_round_f16_all where every lane is 0 or in [2^-14, 65520) in magnitude:
 * the first cut bit added to the magnitude bits, 10 mantissa bits kept (the sign bit takes no
 * carry below 65520). */
static inline me_vf me_round_f16_fast(me_vf s) {
    return (me_vf)(((me_vu)s + 0x1000u) & 0xffffe000u);
}

/* Whether a lane of v is non-zero (ME_ANY, when the ISA file defines it, by one instruction). */
static inline int me_any(me_vi v) {
#ifdef ME_ANY
    return ME_ANY(v);
#else
    int any = 0;
    for (int l = 0; l < LANES; l++)
        any |= v[l];
    return any;
#endif
}

/* s rounded to BF16 as gradref__f32_to_bf16_megengine: to nearest even; Inf and NaN stay. */
static inline me_vf me_round_bf16(me_vf s) {
    const me_vu x = (me_vu)s;
    const me_vi special = (me_vi)((x & 0x7f800000u) == 0x7f800000u);
    const me_vu r = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u;
    return (me_vf)((r & ~(me_vu)special) | (x & (me_vu)special));
}

/* The same where no lane is a NaN: a finite value rounds to nearest even (overflowing to Inf
 * with its sign) and Inf stays Inf by the same additions. */
static inline me_vf me_round_bf16_fast(me_vf s) {
    const me_vu x = (me_vu)s;
    return (me_vf)((x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u);
}

static inline uint16_t me_scalar_bits(int bf16, float v) {
    return bf16 ? gradref__f32_to_bf16_megengine(v) : gradref__f32_to_f16_megengine(v);
}

/* One tap's diff values for the lanes as f32 (0 where a lane has no term): whole vectors where
 * the lanes are contiguous and inside the row (ME_LOAD_F16, when the ISA file defines it,
 * converts F16 by its instruction: exact as the generic conversion). */
__attribute__((always_inline)) static inline me_vf
me_diff_lanes(int bf16, const uint16_t *row, int64_t o2, int64_t O2, int64_t ds5, int64_t count) {
    me_vh h;
    if (ds5 == 1 && o2 >= 0 && o2 + LANES <= O2) {
#ifdef ME_LOAD_F16
        if (!bf16) return ME_LOAD_F16(row + o2);
#endif
        memcpy(&h, row + o2, sizeof h);
#ifdef ME_LOAD_U16_PART
    } else if (ds5 == 1) { /* contiguous, partly outside the row: the part inside */
        /* no lane inside (lo may be past the lanes): any values, the caller masks them all */
        const int64_t lo = o2 < 0 ? -o2 : 0, end = O2 - o2 < count ? O2 - o2 : count;
        if (end <= lo) return (me_vf){0};
        return me_load16(bf16, ME_LOAD_U16_PART(row, o2, O2, lo, end));
#endif
    } else {
        uint16_t tmp[LANES];
        for (int l = 0; l < LANES; l++)
            tmp[l] = o2 + l >= 0 && o2 + l < O2 && l < count ? row[(o2 + l) * ds5] : 0;
        memcpy(&h, tmp, sizeof h);
    }
    return me_load16(bf16, __builtin_convertvector(h, me_vu));
}

/* Unsigned lane minimum and maximum (ME_MIN_U and ME_MAX_U, when the ISA file defines them, by
 * one instruction each). */
static inline me_vu me_min_u(me_vu a, me_vu b) {
#ifdef ME_MIN_U
    return ME_MIN_U(a, b);
#else
    const me_vu m = (me_vu)(a < b);
    return (a & m) | (b & ~m);
#endif
}
static inline me_vu me_max_u(me_vu a, me_vu b) {
#ifdef ME_MAX_U
    return ME_MAX_U(a, b);
#else
    const me_vu m = (me_vu)(a > b);
    return (a & m) | (b & ~m);
#endif
}

/* Whether the fast rounding may differ from the exact one for a sum whose magnitude ax was
 * folded into lo (min of ax - 1) and hi (max of ax): F16, a subnormal, overflowing or NaN sum;
 * BF16, a NaN. */
static inline int me_fast_failed(int bf16, me_vu lo, me_vu hi) {
    return bf16 ? me_any((me_vi)(hi > 0x7f800000u))
                : me_any((me_vi)(lo < 0x387fffffu) | (me_vi)(hi >= 0x477ff000u));
}

/* me_term's fast steps (partial a constant in each instance): each sum rounded by the fast
 * rounding, its magnitude's bits doubled (the sign shifted out, no mask held) folded into *lo as
 * 2|s| - 1 (0 wrapping to the top) and *hi as 2|s|. */
__attribute__((always_inline)) static inline void me_fast_terms(me_vf *g, const float *w, me_vf dv,
                                                                me_vi valid, const int partial,
                                                                int64_t nic, const int bf16,
                                                                me_vu *lo, me_vu *hi) {
    enum { C = GRADREF__CBD_ME_CHANNELS };
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
        if (c >= nic) break;
        const me_vf sum = g[c] + w[c] * dv;
        const me_vu ax2 = (me_vu)sum + (me_vu)sum;
        if (!bf16) *lo = me_min_u(*lo, ax2 - 1u);
        *hi = me_max_u(*hi, ax2);
        const me_vf r = bf16 ? me_round_bf16_fast(sum) : me_round_f16_fast(sum);
        g[c] = partial ? (me_vf)(((me_vu)r & (me_vu)valid) | ((me_vu)g[c] & ~(me_vu)valid)) : r;
    }
}

/* One term of every chain of the block: sum[c] = g[c] + w[c] * dv (two float roundings, as
 * MegEngine), then sum rounded to 16 bits, kept in the lanes with a term (valid). exact 0:
 * me_fast_terms, whose *lo and *hi the caller tests after a run of terms; 1: the step tests its
 * own sums and rounds them exactly where the fast rounding would not. */
__attribute__((always_inline)) static inline void me_term(me_vf *g, const float *w, me_vf dv,
                                                          me_vi valid, int partial, int64_t nic,
                                                          const int bf16, const int exact,
                                                          me_vu *lo, me_vu *hi) {
    enum { C = GRADREF__CBD_ME_CHANNELS };
    if (!exact) {
        if (partial)
            me_fast_terms(g, w, dv, valid, 1, nic, bf16, lo, hi);
        else
            me_fast_terms(g, w, dv, valid, 0, nic, bf16, lo, hi);
        return;
    }
    me_vf sum[C] = {(me_vf){0}}; /* past nic: unused */
    me_vu step_lo = (me_vu){0} - 1u, step_hi = (me_vu){0};
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
        if (c >= nic) break;
        sum[c] = g[c] + w[c] * dv;
        const me_vu ax = (me_vu)sum[c] & 0x7fffffffu;
        step_lo = me_min_u(step_lo, ax - 1u);
        step_hi = me_max_u(step_hi, ax);
    }
    const int slow = me_fast_failed(bf16, step_lo, step_hi);
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
        if (c >= nic) break;
        const me_vf r = bf16   ? (slow ? me_round_bf16(sum[c]) : me_round_bf16_fast(sum[c]))
                        : slow ? me_round_f16_all(sum[c])
                               : me_round_f16_fast(sum[c]);
        g[c] = partial ? (me_vf)(((me_vu)r & (me_vu)valid) | ((me_vu)g[c] & ~(me_vu)valid)) : r;
    }
}

/* The terms of output channel oc, every tap in order, into the chains g (me_term's exact). */
__attribute__((always_inline)) static inline void
me_channel_terms(const gradref__cbd_me_row *a, int64_t oc, me_vf *g, const me_vi *valid,
                 const int *partial, int64_t nic, const int bf16, const int wide, const int exact,
                 me_vu *lo, me_vu *hi) {
    enum { C = GRADREF__CBD_ME_CHANNELS };
    const uint16_t *f = a->filter + oc * a->fs_oc, *d = a->diff + oc * a->ds_oc;
    for (int64_t t = 0; t < a->ntaps; t++) {
        const int64_t o2 = a->tap[t].base + a->j0;
        const me_vf dv = me_diff_lanes(bf16, d + a->tap[t].drow, o2, a->O2, a->ds5, a->count);
        float converted[C];
        const float *w = converted; /* wide: read in place, broadcast from memory */
        if (wide) {
            w = a->wf + oc * a->wf_oc + a->tap[t].fk * C;
        } else {
            const uint16_t *fw = f + a->tap[t].foff;
            for (int c = 0; c < C; c++) {
                const uint16_t wbits = c < nic ? fw[c * a->fs_ic] : 0;
#ifdef ME_F16_SCALAR
                converted[c] = bf16 ? gradref__bf16_to_f32(wbits) : ME_F16_SCALAR(wbits);
#else
                converted[c] = bf16 ? gradref__bf16_to_f32(wbits) : gradref__f16_to_f32(wbits);
#endif
            }
        }
        me_term(g, w, dv, valid[t], partial[t], nic, bf16, exact, lo, hi);
    }
}

/* Up to GRADREF__CBD_ME_CHANNELS input channels at once: independent chains (one element's
 * chain is a sequence of dependent roundings) that share each tap's diff values. wide: the
 * weights from the block's f32 copy (a->wf), else converted from the filter per term. Each
 * output channel's terms run with the fast rounding and no test between them; where one of
 * their sums left its range (rare), the chains go back to where they were and those terms run
 * again with the exact roundings: the same bits, without a test and branch a term. */
__attribute__((always_inline)) static inline void
me_row_body(const gradref__cbd_me_row *a, const int bf16, const int whole, const int wide) {
    enum { C = GRADREF__CBD_ME_CHANNELS };
    me_vi lane;
    for (int l = 0; l < LANES; l++)
        lane[l] = l;
    me_vf g[C];
    for (int c = 0; c < C; c++)
        g[c] = (me_vf){0};
    const int32_t O2 = (int32_t)a->O2, count = (int32_t)a->count;
    const int64_t nic = whole ? C : a->channels; /* whole: a constant, the chains in registers */
    /* the lanes with a term, per tap: the same for every oc */
    me_vi valid[GRADREF__CBD_ME_MAX_TAPS];
    int partial[GRADREF__CBD_ME_MAX_TAPS];
    for (int64_t t = 0; t < a->ntaps; t++) {
        const me_vi at = lane + (int32_t)(a->tap[t].base + a->j0); /* the caller checked int32 */
        valid[t] = (at >= 0) & (at < O2) & (lane < count);
        partial[t] = me_any(~valid[t]);
    }
    for (int64_t oc = 0; oc < a->OCpg; oc++) {
        me_vf before[C];
        memcpy(before, g, sizeof before);
        me_vu lo = (me_vu){0} - 1u, hi = (me_vu){0};
        me_channel_terms(a, oc, g, valid, partial, nic, bf16, wide, 0, &lo, &hi);
        if (me_fast_failed(bf16, lo >> 1, hi >> 1)) { /* me_fast_terms' doubled magnitudes */
            memcpy(g, before, sizeof before);
            me_channel_terms(a, oc, g, valid, partial, nic, bf16, wide, 1, &lo, &hi);
        }
    }
    for (int64_t c = 0; c < nic; c++)
        for (int64_t l = 0; l < a->count; l++)
            a->out[c * a->out_ic + l * a->out_step] = me_scalar_bits(bf16, g[c][l]);
}

static void ME_ROW(const gradref__cbd_me_row *a) {
    const int whole = a->channels == GRADREF__CBD_ME_CHANNELS, wide = a->wf != NULL;
    if (a->bf16) {
        if (wide)
            whole ? me_row_body(a, 1, 1, 1) : me_row_body(a, 1, 0, 1);
        else
            whole ? me_row_body(a, 1, 1, 0) : me_row_body(a, 1, 0, 0);
    } else {
        if (wide)
            whole ? me_row_body(a, 0, 1, 1) : me_row_body(a, 0, 0, 1);
        else
            whole ? me_row_body(a, 0, 1, 0) : me_row_body(a, 0, 0, 0);
    }
}

#undef LANES
#undef ME_ROW
#undef ME_LOAD_F16
#undef ME_ANY
#undef ME_F16_SCALAR
#undef ME_MIN_U
#undef ME_MAX_U
#undef ME_LOAD_U16_PART
