/* SPDX-License-Identifier: Apache-2.0 */
/* Status strings, the thread-local error message, the version. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

#if defined(_MSC_VER)
#  define GRADREF__THREAD_LOCAL __declspec(thread)
#else
#  define GRADREF__THREAD_LOCAL __thread
#endif

#define GRADREF__MESSAGE_CAPACITY 512

static GRADREF__THREAD_LOCAL char last_error[GRADREF__MESSAGE_CAPACITY];

const char *gradref_status_string(gradref_status s) {
    switch (s) {
    case GRADREF_OK: return "GRADREF_OK";
    case GRADREF_ERR_NULL: return "GRADREF_ERR_NULL";
    case GRADREF_ERR_DTYPE: return "GRADREF_ERR_DTYPE";
    case GRADREF_ERR_RANK: return "GRADREF_ERR_RANK";
    case GRADREF_ERR_SHAPE: return "GRADREF_ERR_SHAPE";
    case GRADREF_ERR_STRIDE: return "GRADREF_ERR_STRIDE";
    case GRADREF_ERR_PARAM: return "GRADREF_ERR_PARAM";
    case GRADREF_ERR_OVERFLOW: return "GRADREF_ERR_OVERFLOW";
    case GRADREF_ERR_ALIAS: return "GRADREF_ERR_ALIAS";
    case GRADREF_ERR_NO_MEMORY: return "GRADREF_ERR_NO_MEMORY";
    case GRADREF_ERR_WORKSPACE: return "GRADREF_ERR_WORKSPACE";
    }
    return "GRADREF_ERR_UNKNOWN";
}

const char *gradref_last_error(void) {
    return last_error;
}

const char *gradref_version(void) {
    return GRADREF_VERSION_STRING;
}

gradref_status gradref__fail(gradref_status s, const char *op, const char *fmt, ...) {
    int n = snprintf(last_error, sizeof last_error, "%s: ", op);
    if (n < 0 || (size_t)n >= sizeof last_error) return s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return s;
}
