/* SPDX-License-Identifier: Apache-2.0 */
/* GRADREF_VERBOSE (docs/api.md): with the variable set to a nonzero number when the library
 * loads, every operator call writes one line to stderr saying what ran, for how long:
 *
 *   gradref_verbose,<op>,<strategy>,<isa>,<threads>,<precision>,<tensors>,<ws given>,<ws used>,<ms>
 *
 * <tensors>: name:dtype:shape:strides for each tensor of the call, separated by spaces (shape
 * and strides in elements, joined by 'x'). Without the variable a call pays one test of a
 * flag read at load. */
#ifndef GRADREF_COMMON_VERBOSE_H
#define GRADREF_COMMON_VERBOSE_H

#include <stddef.h>

#include "exec.h"

/* Nonzero when GRADREF_VERBOSE was set (read once, when the library loads). */
int gradref__verbose(void);

/* A monotonic clock in milliseconds. */
double gradref__verbose_ms(void);

/* The line of one call: strategy (what ran), isa (its kernel table's level), threads, the
 * workspace bytes used, and ms. */
void gradref__verbose_line(const char *op, const char *strategy, const char *isa,
                           const gradref__ctx *ctx, int threads, size_t workspace_used, double ms);

#endif
