/* SPDX-License-Identifier: Apache-2.0 */
/* Says which kernel level this CPU runs and which levels the suites therefore skip: ctest runs
 * every unit suite at the widest level and again capped at each lower one (GRADREF_MAX_ISA). */
#include <stdio.h>
#include <stdlib.h>

#include "common/isa.h"

int main(void) {
    const char *cap = getenv("GRADREF_MAX_ISA");
    const int level = gradref__isa_level();
    printf("kernel level on this CPU: %s%s%s%s\n", gradref__isa_name(level),
           cap ? " (capped by GRADREF_MAX_ISA=" : "", cap ? cap : "", cap ? ")" : "");
    for (int l = level + 1; l <= GRADREF__ISA_TOP; l++)
        printf("skipped: the %s kernels (%s)\n", gradref__isa_name(l),
               cap ? "capped, or not on this CPU" : "not on this CPU");
    if (level == GRADREF__ISA_TOP) printf("skipped: none\n");
    return 0;
}
