/* SPDX-License-Identifier: Apache-2.0 */
/* Says which kernel levels this CPU runs and which the suites therefore skip: ctest runs every
 * unit suite at the widest level and again capped at avx2 and at portable (GRADREF_MAX_ISA), and
 * rope_grad also at avx512 (without the BF16 extension). */
#include <stdio.h>
#include <stdlib.h>

#include "common/cpu.h"

int main(void) {
    const char *cap = getenv("GRADREF_MAX_ISA");
    const int avx512 = gradref__cpu_has_avx512(), avx2 = gradref__cpu_has_avx2_f16c();
    const int bf16 = gradref__cpu_has_avx512_bf16();
    printf(
        "kernel levels on this CPU: avx512 %s (its BF16 extension %s), avx2 %s, portable yes%s%s\n",
        avx512 ? "yes" : "no", bf16 ? "yes" : "no", avx2 ? "yes" : "no",
        cap ? " (capped by GRADREF_MAX_ISA=" : "", cap ? cap : "");
    if (cap) printf(")\n");
    if (!avx512) printf("skipped: the AVX-512 kernels (this CPU has no AVX-512 F/CD/DQ/BW/VL)\n");
    if (!avx2) printf("skipped: the AVX2 kernels (this CPU has no AVX2 with F16C)\n");
    if (avx512 && !bf16)
        printf("skipped: rope_grad's BF16 stores by AVX512_BF16 (this CPU has no AVX512_BF16)\n");
    if (avx512 && avx2 && bf16) printf("skipped: none\n");
    return 0;
}
