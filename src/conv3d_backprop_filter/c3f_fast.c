/* The fast path, first slice: the reference loop with threads owning disjoint ranges of dw
 * elements (each element's blocked sum is the reference's, so the bits do not depend on the
 * thread count). The GEMM path (dw_g = dy_g . im2col(x)^T with K cut into the same blocks)
 * is the next step; see docs/conv3d_backprop_filter.md. */
#include "c3f_internal.h"
#include "common/internal.h"

void gradref__c3f_fast(const gradref__c3f_plan *p, int threads) {
    const int64_t elements = p->G * p->Cout_g * p->Cin_g * p->K[0] * p->K[1] * p->K[2];
    if (elements == 0) return;
    const int team = elements < threads ? (int)elements : threads;
    (void)team;
    GRADREF_OMP(omp parallel num_threads(team)) {
        int64_t b, e;
        gradref__my_range(elements, &b, &e);
        gradref__c3f_ref_elements(p, b, e);
    }
}
