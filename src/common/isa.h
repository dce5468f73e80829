/* SPDX-License-Identifier: Apache-2.0 */
/* The one ISA layer: kernel levels, the CPU's level, and the table picker every module uses.
 *
 * A module's kernels live one level per file (<op>_avx2.c, <op>_avx512.c, <op>_neon.c, and a
 * portable file whose kernels build everywhere); each file defines that level's kernel table
 * (designated initializers, NULL where the level has no kernel of its own), and the module's
 * chooser gradref__<op>_kernels_for(max_isa) hands gradref__isa_pick its tables by level. Every
 * plan carries max_isa (GRADREF__ISA_MAX unless a test or benchmark lowers it). */
#ifndef GRADREF_COMMON_ISA_H
#define GRADREF_COMMON_ISA_H

/* Levels: each architecture has its own ladder from 0 (portable C) up, and a table of level L
 * may call kernels of lower levels of its architecture. */
enum {
    GRADREF__ISA_PORTABLE = 0,
    /* x86-64 */
    GRADREF__ISA_AVX2 = 1,        /* x86-64-v3: AVX2, FMA and F16C */
    GRADREF__ISA_AVX512 = 2,      /* x86-64-v4: AVX-512 F, CD, DQ, BW and VL */
    GRADREF__ISA_AVX512_VNNI = 3, /* and AVX512_VNNI (Cascade Lake, Ice Lake, Zen 4 on) */
    GRADREF__ISA_AVX512_BF16 = 4, /* and AVX512_BF16 (whose CPUs all have AVX512_VNNI too) */
    /* aarch64 (a level for SVE comes with the first kernels that use it) */
    GRADREF__ISA_NEON = 1,     /* Advanced SIMD (ASIMD), on every aarch64 CPU */
    GRADREF__ISA_NEON_DOT = 2, /* and the int8 dot product (SDOT, FEAT_DotProd: Armv8.2-A on) */
    GRADREF__ISA_LEVELS = 5
};

/* The max_isa of a plan nothing caps. */
#define GRADREF__ISA_MAX (GRADREF__ISA_LEVELS - 1)

/* GCC or Clang on x86-64 / aarch64: the kernel files of that architecture compile, each with
 * its level's instruction set from CMake (*_avx2.c, *_avx512.c: GRADREF_ISA_FLAGS_*), so that
 * the rest of the library keeps the baseline ISA. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#  define GRADREF__X86 1
#endif
#if defined(__aarch64__) && defined(__GNUC__)
#  define GRADREF__ARM64 1
#endif

/* The highest level of this architecture's ladder. */
#if defined(GRADREF__X86)
#  define GRADREF__ISA_TOP GRADREF__ISA_AVX512_BF16
#elif defined(GRADREF__ARM64)
#  define GRADREF__ISA_TOP GRADREF__ISA_NEON_DOT
#else
#  define GRADREF__ISA_TOP GRADREF__ISA_PORTABLE
#endif

/* The widest level this CPU runs, after GRADREF_MAX_ISA (a level's name: portable, avx2,
 * avx512, avx512_vnni, avx512_bf16 on x86; portable, neon, neon_dot on aarch64); read once when
 * the library loads. */
int gradref__isa_level(void);

/* A level's name on this architecture ("portable", "avx2", ...; "?" above GRADREF__ISA_TOP). */
const char *gradref__isa_name(int level);

/* tables[l]: the kernel table of level l, or NULL where the module has none (tables[0], the
 * portable one, always exists). Returns the highest one at or below both max_isa and the
 * CPU's level. */
const void *gradref__isa_pick(const void *const tables[GRADREF__ISA_LEVELS], int max_isa);

#endif
