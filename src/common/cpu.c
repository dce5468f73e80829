/* SPDX-License-Identifier: Apache-2.0 */
/* CPUID-based checks (clang 14's __builtin_cpu_supports does not know "f16c"). CPUID traps to
 * the hypervisor on virtual machines (microseconds), so the answers are read once when the
 * library is loaded and only read afterwards: the library's one piece of global state, constant
 * for the life of the process. */
#include "cpu.h"
#include "isa.h"

#ifdef GRADREF_X86
#  include <cpuid.h>
#  include <stdlib.h>
#  include <string.h>

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

/* AVX-512 F, CD, DQ, BW and VL, with the OS saving the opmask and ZMM state. */
static int detect_avx512(void) {
    unsigned a, b, c, d;
    if (!detect_avx2_f16c() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const unsigned f = 1u << 16, dq = 1u << 17, cd = 1u << 28, bw = 1u << 30, vl = 1u << 31;
    if ((b & (f | dq | cd | bw | vl)) != (f | dq | cd | bw | vl)) return 0;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 0xe6u) == 0xe6u;
}

/* AVX512_BF16 (CPUID leaf 7, subleaf 1, EAX bit 5), on top of the AVX-512 level. */
static int detect_avx512_bf16(void) {
    unsigned a, b, c, d;
    if (!detect_avx512() || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 5) & 1u;
}

/* FMA3 (for kernels whose contract allows fused multiply-adds). */
static int detect_fma(void) {
    unsigned a, b, c, d;
    if (!detect_avx_f16c() || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c >> 12) & 1u;
}

static int has_avx_f16c, has_avx2_f16c, has_avx512, has_avx512_bf16, has_fma;

/* GRADREF_MAX_ISA=portable|avx2|avx512 caps the kernels (tests and benchmarks of the lower
 * levels on a machine that has the higher ones; avx512 leaves out its BF16 extension); read
 * once, with the flags. */
static void apply_isa_cap(void) {
    const char *cap = getenv("GRADREF_MAX_ISA");
    if (cap == NULL) return;
    if (strcmp(cap, "portable") == 0) {
        has_avx_f16c = has_avx2_f16c = has_avx512 = has_avx512_bf16 = has_fma = 0;
    } else if (strcmp(cap, "avx2") == 0) {
        has_avx512 = has_avx512_bf16 = 0;
    } else if (strcmp(cap, "avx512") == 0) {
        has_avx512_bf16 = 0;
    }
}

__attribute__((constructor)) static void detect_features(void) {
    has_avx_f16c = detect_avx_f16c();
    has_avx2_f16c = detect_avx2_f16c();
    has_avx512 = detect_avx512();
    has_avx512_bf16 = detect_avx512_bf16();
    has_fma = detect_fma();
    apply_isa_cap();
}

int gradref__cpu_has_avx_f16c(void) {
    return has_avx_f16c;
}
int gradref__cpu_has_avx2_f16c(void) {
    return has_avx2_f16c;
}
int gradref__cpu_has_avx512(void) {
    return has_avx512;
}
int gradref__cpu_has_avx512_bf16(void) {
    return has_avx512_bf16;
}
int gradref__cpu_has_fma(void) {
    return has_fma;
}

#else

int gradref__cpu_has_avx_f16c(void) {
    return 0;
}
int gradref__cpu_has_avx2_f16c(void) {
    return 0;
}
int gradref__cpu_has_avx512(void) {
    return 0;
}
int gradref__cpu_has_avx512_bf16(void) {
    return 0;
}
int gradref__cpu_has_fma(void) {
    return 0;
}

#endif

int gradref__isa_level(void) {
    if (gradref__cpu_has_avx512()) return GRADREF_ISA_AVX512;
    return gradref__cpu_has_avx2_f16c() ? GRADREF_ISA_AVX2 : GRADREF_ISA_PORTABLE;
}
