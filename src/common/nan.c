/* SPDX-License-Identifier: Apache-2.0 */
/* The canonical-NaN passes (nan.h): a scan that only reads unless it finds a NaN; and the
 * finiteness scan's portable loop. */
#include "nan.h"

#include "exec.h"
#include "internal.h"
#include "isa.h"
#include "tensor.h"

/* Whether a bit pattern of each float dtype is a NaN. */
static int is_nan_bits(int32_t dtype, const char *e) {
    switch (dtype) {
    case GRADREF_F32: {
        uint32_t b;
        memcpy(&b, e, 4);
        return (b & 0x7fffffffu) > 0x7f800000u;
    }
    case GRADREF_F64: {
        uint64_t b;
        memcpy(&b, e, 8);
        return (b & UINT64_C(0x7fffffffffffffff)) > UINT64_C(0x7ff0000000000000);
    }
    case GRADREF_F16: {
        uint16_t b;
        memcpy(&b, e, 2);
        return (b & 0x7fffu) > 0x7c00u;
    }
    default: {
        uint16_t b;
        memcpy(&b, e, 2);
        return (b & 0x7fffu) > 0x7f80u;
    }
    }
}

static void set_canonical(int32_t dtype, char *e) {
    static const uint16_t f16 = 0x7e00u, bf16 = 0x7fc0u;
    const uint32_t f32 = GRADREF__CANON_NAN_F32;
    const uint64_t f64 = GRADREF__CANON_NAN_F64;
    switch (dtype) {
    case GRADREF_F32: memcpy(e, &f32, 4); break;
    case GRADREF_F64: memcpy(e, &f64, 8); break;
    case GRADREF_F16: memcpy(e, &f16, 2); break;
    default: memcpy(e, &bf16, 2); break;
    }
}

/* A branch-free test on the exponent bits, which the compiler vectorises. */
int gradref__all_finite_f32_portable(const float *d, int64_t n) {
    uint32_t hit = 0;
    for (int64_t e = 0; e < n; e++) {
        uint32_t bits;
        memcpy(&bits, d + e, 4);
        hit |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
    }
    return hit == 0;
}

const gradref__nan_kernels *gradref__nan_kernels_for(int max_isa) {
    static const gradref__nan_kernels portable = {"portable", 1, NULL,
                                                  gradref__all_finite_f32_portable};
#ifdef GRADREF__X86
    static const gradref__nan_kernels avx2 = {"avx2", 32, gradref__canon_nans_f32_avx2,
                                              gradref__all_finite_f32_avx2};
    static const gradref__nan_kernels avx512 = {"avx512", 64, gradref__canon_nans_f32_avx512,
                                                gradref__all_finite_f32_avx512};
#endif
#ifdef GRADREF__ARM64
    static const gradref__nan_kernels neon = {"neon", 16, gradref__canon_nans_f32_neon,
                                              gradref__all_finite_f32_neon};
#endif
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &avx2,
        [GRADREF__ISA_AVX512] = &avx512,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &neon,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}

static void canon_f32(float *p, int64_t n, int *pos_zero, int max_isa) {
    const gradref__nan_kernels *k = gradref__nan_kernels_for(max_isa);
    int64_t i0 = k->canon_f32 ? k->canon_f32(p, n, pos_zero) : 0;
    for (; i0 < n; i0 += 256) {
        const int64_t i1 = n - i0 < 256 ? n : i0 + 256;
        uint32_t any = 0, zero = 0; /* branch-free scans the compiler vectorises */
        for (int64_t i = i0; i < i1; i++) {
            uint32_t b;
            memcpy(&b, p + i, 4);
            any |= (b & 0x7fffffffu) > 0x7f800000u;
            zero |= b == 0;
        }
        if (any)
            for (int64_t i = i0; i < i1; i++)
                p[i] = gradref__canon_f32(p[i]);
        if (zero && pos_zero) *pos_zero = 1;
    }
}

void gradref__canon_nans_f32(float *p, int64_t n, int max_isa) {
    canon_f32(p, n, NULL, max_isa);
}

int gradref__canon_nans_f32_zeros(float *p, int64_t n, int max_isa) {
    int pos_zero = 0;
    canon_f32(p, n, &pos_zero, max_isa);
    return pos_zero;
}

void gradref__canon_nans_elems(int32_t dtype, void *p, int64_t n, int max_isa) {
    if (dtype == GRADREF_F32) {
        gradref__canon_nans_f32((float *)p, n, max_isa);
        return;
    }
    const size_t es = dtype == GRADREF_F64 ? 8 : 2;
    for (int64_t i = 0; i < n; i++) {
        char *e = (char *)p + (size_t)i * es;
        if (is_nan_bits(dtype, e)) set_canonical(dtype, e);
    }
}

/* gradref__canon_nans' rows of a strided tensor: along dim `inner` (len elements, step
 * apart; -1: one element a row). */
typedef struct strided_rows {
    const gradref_tensor *t;
    int inner;
    int64_t len, step;
    int max_isa;
} strided_rows;

static void canon_rows(const void *arg, int64_t b, int64_t e) {
    const strided_rows *c = arg;
    const gradref_tensor *t = c->t;
    const int32_t dt = t->dtype;
    const size_t es = gradref__dtype_size(dt);
    for (int64_t r = b; r < e; r++) {
        int64_t off = 0, rest = r; /* the row's offset: its index over the other dims */
        for (int i = t->ndim - 1; i >= 0; i--) {
            if (i == c->inner) continue;
            off += rest % t->shape[i] * t->strides[i];
            rest /= t->shape[i];
        }
        char *row = (char *)t->data + (size_t)off * es;
        if (dt == GRADREF_F32 && c->step == 1) {
            gradref__canon_nans_f32((float *)(void *)row, c->len, c->max_isa);
            continue;
        }
        for (int64_t k = 0; k < c->len; k++) {
            char *el = row + (size_t)(k * c->step) * es;
            if (is_nan_bits(dt, el)) set_canonical(dt, el);
        }
    }
}

/* Elements [b, e) of a dense tensor's one run. */
static void canon_run(const void *arg, int64_t b, int64_t e) {
    const strided_rows *c = arg;
    const int32_t dt = c->t->dtype;
    gradref__canon_nans_elems(dt, (char *)c->t->data + (size_t)b * gradref__dtype_size(dt), e - b,
                              c->max_isa);
}

void gradref__canon_nans(const gradref_tensor *t, int threads, int max_isa) {
    const int32_t dt = t->dtype;
    if (dt != GRADREF_F32 && dt != GRADREF_F64 && dt != GRADREF_F16 && dt != GRADREF_BF16) return;
    /* rows along the dim of the smallest stride, the others in any order */
    int inner = -1;
    int64_t rows = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0) return;
        if (t->shape[i] > 1 && (inner < 0 || t->strides[i] < t->strides[inner])) inner = i;
        rows *= t->shape[i];
    }
    int64_t len = inner < 0 ? 1 : t->shape[inner], step = inner < 0 ? 1 : t->strides[inner];
    rows /= len;
    if (gradref__tensor_dense(t)) { /* one run over the whole span */
        len = rows * len, step = 1, rows = 1, inner = -1;
        const strided_rows c = {t, -1, len, 1, max_isa};
        gradref__parallel_ranges(len, len >= (INT64_C(1) << 16) ? threads : 1, canon_run, &c);
        return;
    }
    const strided_rows c = {t, inner, len, step, max_isa};
    gradref__parallel_ranges(rows, rows * len >= (INT64_C(1) << 16) ? threads : 1, canon_rows, &c);
}
