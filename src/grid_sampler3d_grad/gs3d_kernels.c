/* SPDX-License-Identifier: Apache-2.0 */
/* The grid_sampler3d_grad kernel choice and what the ISA files share: the level a plan runs
 * at, dgrid stores, and the dx-plane dispatch. The kernels: gs3d_avx2.c, gs3d_avx512.c,
 * gs3d_neon.c. */
#include "gs3d_simd.h"

#include "common/convert.h"
#include "common/isa.h"

/* dgrid of `count` consecutive points from q: out[k][j] is component k of point q + j. */
void gradref__gs3d_store_dgrid(const gs3d_kargs *r, int64_t n, int64_t q, int count,
                               float out[3][16]) {
    const gs3d_shape *p = &r->shape;
    const gradref__gs3d_view *dv = &p->dgrid;
    int64_t od = q / (p->Ho * p->Wo), oh = q / p->Wo % p->Ho, ow = q % p->Wo;
    for (int j = 0; j < count; j++) {
        char *o =
            dv->data +
            (size_t)(n * dv->s[0] + od * dv->s[1] + oh * dv->s[2] + ow * dv->s[3]) * p->elem_size;
        for (int k = 0; k < 3; k++) {
            char *e = o + (size_t)(k * dv->s[4]) * p->elem_size;
            if (p->dtype == GRADREF_F32)
                *(float *)e = out[k][j];
            else
                gradref__store_float(p->dtype, e, out[k][j]);
        }
        if (++ow == p->Wo) {
            ow = 0;
            if (++oh == p->Ho) {
                oh = 0;
                od++;
            }
        }
    }
}

/* The fast path's own loops are the portable kernels. */
static const gradref__gs3d_kernels portable = {.isa = "portable"};

const gradref__gs3d_kernels *gradref__gs3d_kernels_for(int max_isa) {
    static const void *const tables[GRADREF__ISA_LEVELS] = {
        [GRADREF__ISA_PORTABLE] = &portable,
#ifdef GRADREF__X86
        [GRADREF__ISA_AVX2] = &gradref__gs3d_kernels_avx2,
        [GRADREF__ISA_AVX512] = &gradref__gs3d_kernels_avx512,
#endif
#ifdef GRADREF__ARM64
        [GRADREF__ISA_NEON] = &gradref__gs3d_kernels_neon,
#endif
    };
    return gradref__isa_pick(tables, max_isa);
}
