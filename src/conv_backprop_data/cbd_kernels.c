/* SPDX-License-Identifier: Apache-2.0 */
/* The portable depthwise row kernel and the kernel tables of every ISA (cbd_avx2.c,
 * cbd_avx512.c, cbd_neon.c). */
#include "cbd_kernels.h"

#include <math.h>

#include "common/gemm.h"
#include "common/isa.h"

/* Row (i0, i1) of grad: the diff rows its row taps reach, in the chain's order. Returns how
 * many, filling rows[] and the stored row-tap index base (k0 * K1 + k1) * K2. */
static int64_t row_taps(const gradref__cbd_dw_shape *p, const float *diff, int64_t i0, int64_t i1,
                        const float **rows, int64_t *base) {
    int64_t n = 0;
    for (int64_t kp0 = p->K[0] - 1; kp0 >= 0; kp0--) {
        const int64_t o0 = i0 + p->pad[0] - kp0 * p->dil[0];
        if (o0 < 0 || o0 >= p->O[0]) continue;
        for (int64_t kp1 = p->K[1] - 1; kp1 >= 0; kp1--) {
            const int64_t o1 = i1 + p->pad[1] - kp1 * p->dil[1];
            if (o1 < 0 || o1 >= p->O[1]) continue;
            rows[n] = diff + (o0 * p->O[1] + o1) * p->O[2];
            base[n] = (gradref__cbd_stored(p, 0, kp0) * p->K[1] + gradref__cbd_stored(p, 1, kp1)) *
                      p->K[2];
            n++;
        }
    }
    return n;
}

static void row_portable(const gradref__cbd_dw_shape *p, const float *w, const float *const *rows,
                         const int64_t *base, int64_t nrows, float *out) {
    for (int64_t i2 = 0; i2 < p->I[2]; i2++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < nrows; r++)
            for (int64_t kp2 = p->K[2] - 1; kp2 >= 0; kp2--) {
                const int64_t o2 = i2 + gradref__cbd_column_shift(p, kp2);
                if (o2 >= 0 && o2 < p->O[2])
                    acc = fmaf(w[base[r] + gradref__cbd_stored(p, 2, kp2)], rows[r][o2], acc);
            }
        out[i2] = acc;
    }
}

gradref__cbd_dw_shape gradref__cbd_dw_shape_of(const gradref__cbd_plan *p) {
    gradref__cbd_dw_shape s;
    for (int j = 0; j < 3; j++) {
        s.I[j] = p->I[j];
        s.O[j] = p->O[j];
        s.K[j] = p->K[j];
        s.pad[j] = p->pad_begin[j];
        s.dil[j] = p->dil[j];
    }
    s.flip = p->mode != GRADREF_CONV_CROSS_CORRELATION;
    return s;
}

static const gradref__cbd_kernels portable = {
    .isa = "portable",
    .dw_row = row_portable,
};

const gradref__cbd_kernels *gradref__cbd_kernels_for(int max_isa) {
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &gradref__cbd_kernels_avx2,
        [GRADREF__ISA_AVX512] = &gradref__cbd_kernels_avx512,
        [GRADREF__ISA_AVX512_VNNI] = &gradref__cbd_kernels_avx512_vnni,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &gradref__cbd_kernels_neon,
        [GRADREF__ISA_NEON_DOT] = &gradref__cbd_kernels_neon_dot,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}

int gradref__cbd_depthwise_plane(const gradref__cbd_kernels *k, const gradref__cbd_dw_shape *p,
                                 const float *w, const float *diff, float *grad) {
    const float *rows[4][64];
    int64_t base[4][64], nr[4];
    if (k->dw_plane3x3 && p->I[0] == 1 && p->O[0] == 1 && p->K[0] == 1 && p->K[1] <= 3 &&
        p->K[2] <= 3 && p->dil[1] == 1 && p->dil[2] == 1) {
        return k->dw_plane3x3(p, w, diff, grad);
    }
    for (int64_t i0 = 0; i0 < p->I[0]; i0++)
        for (int64_t i1 = 0; i1 < p->I[1];) {
            float *out = grad + (i0 * p->I[1] + i1) * p->I[2];
            if (k->dw_rows4 && p->K[2] <= 64) {
                const int64_t nrow = p->I[1] - i1 < 4 ? p->I[1] - i1 : 4;
                for (int64_t r = 0; r < 4; r++)
                    nr[r] = r < nrow ? row_taps(p, diff, i0, i1 + r, rows[r], base[r]) : 0;
                k->dw_rows4(p, w, diff, (const float *const(*)[64])rows, (const int64_t(*)[64])base,
                            nr, nrow, out);
                i1 += nrow;
                continue;
            }
            nr[0] = row_taps(p, diff, i0, i1, rows[0], base[0]);
            k->dw_row(p, w, rows[0], base[0], nr[0], out);
            i1++;
        }
    return 1;
}

/* gradref__cbd_me_window's byte shuffles by shift (-7 .. 7): lane l takes the window's value
 * l + shift, or 0 (-128: pshufb's zero; 0x80 is past TBL's 16 bytes, its zero too). */
#define PAIR(from)                                                                                 \
  (from) >= 0 && (from) < 8 ? 2 * (from) : -128, (from) >= 0 && (from) < 8 ? 2 * (from) + 1 : -128
#define SHIFT(s)                                                                                   \
  {                                                                                                \
    PAIR(0 + (s)), PAIR(1 + (s)), PAIR(2 + (s)), PAIR(3 + (s)), PAIR(4 + (s)), PAIR(5 + (s)),      \
        PAIR(6 + (s)), PAIR(7 + (s))                                                               \
  }
const int8_t gradref__cbd_me_shifts[15][16] = {
    SHIFT(-7), SHIFT(-6), SHIFT(-5), SHIFT(-4), SHIFT(-3), SHIFT(-2), SHIFT(-1), SHIFT(0),
    SHIFT(1),  SHIFT(2),  SHIFT(3),  SHIFT(4),  SHIFT(5),  SHIFT(6),  SHIFT(7),
};
#undef SHIFT
#undef PAIR
