/* SPDX-License-Identifier: Apache-2.0 */
/* Says which kernel levels this CPU runs and which the suites therefore skip: ctest runs every
 * unit suite at the widest level and again capped at avx2 and at portable (GRADREF_MAX_ISA). */
#include <stdio.h>
#include <stdlib.h>

#include "common/cpu.h"

int main(void) {
    const char *cap = getenv("GRADREF_MAX_ISA");
    const int avx512 = gradref__cpu_has_avx512(), avx2 = gradref__cpu_has_avx2_f16c();
    printf("kernel levels on this CPU: avx512 %s, avx2 %s, portable yes%s%s\n",
           avx512 ? "yes" : "no", avx2 ? "yes" : "no", cap ? " (capped by GRADREF_MAX_ISA=" : "",
           cap ? cap : "");
    if (cap) printf(")\n");
    if (!avx512) printf("skipped: the AVX-512 kernels (this CPU has no AVX-512 F/CD/DQ/BW/VL)\n");
    if (!avx2) printf("skipped: the AVX2 kernels (this CPU has no AVX2 with F16C)\n");
    if (avx512 && avx2) printf("skipped: none\n");
    return 0;
}
