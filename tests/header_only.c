/* SPDX-License-Identifier: Apache-2.0 */
/* Compiled as C99 and as C++ by the header tests: gradref.h needs nothing else. */
#include "gradref.h"

int gradref_header_only_probe(void);
int gradref_header_only_probe(void) {
    return GRADREF_VERSION_NUMBER > 0 && GRADREF_MAX_DIMS == 8;
}
