/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU's kernel level (isa.h), read once when the library is loaded and only read
 * afterwards: the library's one piece of global state, constant for the life of the process.
 * On x86 from CPUID (clang 14's __builtin_cpu_supports does not know "f16c"; CPUID traps to the
 * hypervisor on virtual machines, microseconds); on aarch64 NEON, which every CPU has, and the
 * dot product from the kernel's hardware capabilities (getauxval). */
#include "isa.h"

#include <stdlib.h>
#include <string.h>

#ifdef GRADREF__X86
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

/* AVX512_VNNI (CPUID leaf 7, subleaf 0, ECX bit 11), on top of the AVX-512 level. */
static int detect_avx512_vnni(void) {
    unsigned a, b, c, d;
    if (!detect_avx512() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (c >> 11) & 1u;
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

static const char *const names[GRADREF__ISA_LEVELS] = {"portable", "avx2", "avx512", "avx512_vnni",
                                                       "avx512_bf16"};

/* AVX2 with FMA and F16C (x86-64-v3), AVX-512, its VNNI and then its BF16 extension (a CPU
 * with BF16 but not VNNI, which none is, stops at avx512). */
static int detect(void) {
    if (!detect_avx2_f16c() || !detect_fma()) return GRADREF__ISA_PORTABLE;
    if (!detect_avx512()) return GRADREF__ISA_AVX2;
    if (!detect_avx512_vnni()) return GRADREF__ISA_AVX512;
    return detect_avx512_bf16() ? GRADREF__ISA_AVX512_BF16 : GRADREF__ISA_AVX512_VNNI;
}

#elif defined(GRADREF__ARM64)
#  if defined(__linux__)
#    include <asm/hwcap.h>
#    include <sys/auxv.h>
#  endif

static const char *const names[GRADREF__ISA_LEVELS] = {"portable", "neon", "neon_dot", "?", "?"};

/* ASIMD is part of every aarch64 CPU; the dot product is a hardware capability (Linux). */
static int detect(void) {
#  if defined(__linux__) && defined(HWCAP_ASIMDDP)
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) return GRADREF__ISA_NEON_DOT;
#  endif
    return GRADREF__ISA_NEON;
}

#else

static const char *const names[GRADREF__ISA_LEVELS] = {"portable", "?", "?", "?", "?"};

static int detect(void) {
    return GRADREF__ISA_PORTABLE;
}

#endif

const char *gradref__isa_name(int level) {
    return level >= 0 && level <= GRADREF__ISA_TOP ? names[level] : "?";
}

static int cpu_level;

/* GRADREF_MAX_ISA=<a level's name> caps the level (tests and benchmarks of the lower levels on
 * a machine that has the higher ones); read once, with the flags. An unknown name is ignored. */
static void apply_isa_cap(void) {
    const char *cap = getenv("GRADREF_MAX_ISA");
    if (cap == NULL) return;
    for (int level = 0; level <= GRADREF__ISA_TOP; level++)
        if (strcmp(cap, gradref__isa_name(level)) == 0 && level < cpu_level) cpu_level = level;
}

__attribute__((constructor)) static void detect_level(void) {
    cpu_level = detect();
    apply_isa_cap();
}

int gradref__isa_level(void) {
    return cpu_level;
}

const void *gradref__isa_pick(const void *const tables[GRADREF__ISA_LEVELS], int max_isa) {
    int level = max_isa < cpu_level ? max_isa : cpu_level;
    while (level > 0 && tables[level] == NULL)
        level--;
    return tables[level > 0 ? level : 0];
}
