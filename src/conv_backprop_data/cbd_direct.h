/* SPDX-License-Identifier: Apache-2.0 */
/* cbd_direct.c: the no-workspace strategy: the phases' GEMMs and tiles with stack buffers. */
#ifndef GRADREF_CBD_DIRECT_H
#define GRADREF_CBD_DIRECT_H

#include "cbd_run.h"

/* Whether the no-workspace direct path takes plan p (F32, F16 or BF16 at the default precision,
 * or I8; at most 256 taps, a finite filter), and the path itself over `threads` threads (part:
 * I8's output channels a part, gradref__cbd_int8_part). */
int gradref__cbd_direct_fits(const gradref__cbd_plan *p);
void gradref__cbd_direct(const gradref__cbd_plan *p, int64_t part, int threads);
#endif
