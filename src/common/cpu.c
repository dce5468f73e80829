/* CPUID-based checks (clang 14's __builtin_cpu_supports does not know "f16c"). CPUID traps to
 * the hypervisor on virtual machines (microseconds), so the answers are read once when the
 * library is loaded and only read afterwards: the library's one piece of global state, constant
 * for the life of the process. */
#include "cpu.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#  include <cpuid.h>

static int detect_avx_f16c(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
    if ((c & (osxsave | avx | f16c)) != (osxsave | avx | f16c)) return 0;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6u) == 6u; /* the OS saves XMM and YMM state */
}

static int detect_avx2_f16c(void) {
    unsigned a, b, c, d;
    if (!detect_avx_f16c() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 5) & 1u;
}

static int has_avx_f16c, has_avx2_f16c;

__attribute__((constructor)) static void detect_features(void) {
    has_avx_f16c = detect_avx_f16c();
    has_avx2_f16c = detect_avx2_f16c();
}

int gradref__cpu_has_avx_f16c(void) {
    return has_avx_f16c;
}
int gradref__cpu_has_avx2_f16c(void) {
    return has_avx2_f16c;
}

#else

int gradref__cpu_has_avx_f16c(void) {
    return 0;
}
int gradref__cpu_has_avx2_f16c(void) {
    return 0;
}

#endif
