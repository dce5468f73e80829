/* SPDX-License-Identifier: Apache-2.0 */
/* The portable row kernels (any CPU): rows widened to f32 in chunks, computed with the
 * reference loop's operations, narrowed once, written with streaming stores when asked; and
 * the choice of a kernel table. They are the portable level's, so the shared helpers they
 * call run at that level too. */
#include <string.h>

#include "common/convert_array.h"
#include "common/isa.h"
#include "common/stream.h"
#include "rope_grad_kernels.h"

#define CHUNK 256 /* elements widened at a time */

static const float *as_f32(int32_t dt, const void *src, float *buf, int64_t n) {
    if (dt == GRADREF_F32) return (const float *)src;
    gradref__half_to_f32_array(gradref__array_kernels_for(GRADREF__ISA_PORTABLE), dt,
                               (const uint16_t *)src, buf, (size_t)n);
    return buf;
}

/* Rounds n f32 results to the dtype, NaN as the canonical one (common/nan.h), and writes them
 * to dst. */
static void emit(int32_t dt, float *v, void *dst, int64_t n, int stream) {
    uint16_t half[CHUNK];
    const void *bytes = v;
    gradref__canon_nans_f32(v, n, GRADREF__ISA_PORTABLE);
    if (dt != GRADREF_F32) {
        gradref__f32_to_half_array(gradref__array_kernels_for(GRADREF__ISA_PORTABLE), dt, v, half,
                                   (size_t)n);
        bytes = half;
    }
    const size_t size = (size_t)n * gradref__rope_esize(dt);
    if (stream)
        gradref__copy_stream(dst, bytes, size);
    else
        memcpy(dst, bytes, size);
}

static void atb_row(int32_t dt, const void *g, void *out, const float *w, int64_t n, int stream) {
    const size_t es = gradref__rope_esize(dt);
    float buf[CHUNK], o[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        const int64_t L = n - i0 < CHUNK ? n - i0 : CHUNK;
        const float *gv = as_f32(dt, (const char *)g + (size_t)i0 * es, buf, L);
        for (int64_t i = 0; i < L; i++)
            o[i] = gv[i] * w[i0 + i];
        emit(dt, o, (char *)out + (size_t)i0 * es, L, stream);
    }
}

static void half_row(int32_t dt, const void *gf, const void *gb, void *out_f, void *out_b,
                     const float *cf, const float *sb, const float *cb, const float *sf, int64_t n,
                     int stream) {
    const size_t es = gradref__rope_esize(dt);
    float fbuf[CHUNK], bbuf[CHUNK], of[CHUNK], ob[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        const int64_t L = n - i0 < CHUNK ? n - i0 : CHUNK;
        const float *f = as_f32(dt, (const char *)gf + (size_t)i0 * es, fbuf, L);
        const float *b = as_f32(dt, (const char *)gb + (size_t)i0 * es, bbuf, L);
        for (int64_t i = 0; i < L; i++) {
            const float front = cf[i0 + i] * f[i], front_partner = sb[i0 + i] * b[i];
            const float back = cb[i0 + i] * b[i], back_partner = sf[i0 + i] * f[i];
            of[i] = front + front_partner;
            ob[i] = back - back_partner;
        }
        emit(dt, of, (char *)out_f + (size_t)i0 * es, L, stream);
        emit(dt, ob, (char *)out_b + (size_t)i0 * es, L, stream);
    }
}

static void interleaved_row(int32_t dt, const void *g, void *out, const float *c, const float *s,
                            int64_t n, int stream) {
    const size_t es = gradref__rope_esize(dt);
    float buf[CHUNK], o[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) { /* CHUNK is even: pairs stay together */
        const int64_t L = n - i0 < CHUNK ? n - i0 : CHUNK;
        const float *gv = as_f32(dt, (const char *)g + (size_t)i0 * es, buf, L);
        for (int64_t i = 0; i < L; i += 2) {
            const float even = c[i0 + i] * gv[i], even_partner = s[i0 + i + 1] * gv[i + 1];
            const float odd = c[i0 + i + 1] * gv[i + 1], odd_partner = s[i0 + i] * gv[i];
            o[i] = even + even_partner;
            o[i + 1] = odd - odd_partner;
        }
        emit(dt, o, (char *)out + (size_t)i0 * es, L, stream);
    }
}

const gradref__rope_kernels gradref__rope_kernels_portable = {
    .isa = "portable",
    .atb_row = atb_row,
    .half_row = half_row,
    .interleaved_row = interleaved_row,
};

const gradref__rope_kernels *gradref__rope_kernels_for(int max_isa) {
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &gradref__rope_kernels_portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &gradref__rope_kernels_avx2,
        [GRADREF__ISA_AVX512] = &gradref__rope_kernels_avx512,
        [GRADREF__ISA_AVX512_BF16] = &gradref__rope_kernels_avx512_bf16,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &gradref__rope_kernels_neon,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}
