/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel levels and the one x86/compiler guard. A module's kernels live one ISA per file
 * (<op>_avx2.c, <op>_avx512.c, and a portable file whose kernels exist everywhere); each file
 * fills a table of the module's kernel type, and the fast path picks a table once per call. */
#ifndef GRADREF_COMMON_ISA_H
#define GRADREF_COMMON_ISA_H

/* The levels, in order: a table of level L may call kernels of lower levels. */
enum { GRADREF_ISA_PORTABLE = 0, GRADREF_ISA_AVX2 = 1, GRADREF_ISA_AVX512 = 2 };

/* GCC or Clang on x86: the AVX2 and AVX-512 kernel files compile (with target attributes, so
 * the rest of the library keeps the baseline ISA). */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#  define GRADREF_X86           1
#  define GRADREF_TARGET_AVX2   __attribute__((target("avx2,f16c")))
#  define GRADREF_TARGET_AVX512 __attribute__((target("avx512f,avx2,f16c")))
#endif

/* The widest level this CPU runs (AVX2 means AVX2 with F16C; AVX-512 means F, CD, DQ, BW and
 * VL), after GRADREF_MAX_ISA; read once when the library loads. */
int gradref__isa_level(void);

#endif
