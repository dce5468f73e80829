/* SPDX-License-Identifier: Apache-2.0 */
/* Run-time CPU feature checks for the kernels compiled with target attributes. */
#ifndef GRADREF_COMMON_CPU_H
#define GRADREF_COMMON_CPU_H

/* 1 when the CPU and the OS support AVX and F16C (AVX state enabled by the OS). */
int gradref__cpu_has_avx_f16c(void);
/* 1 when AVX2 is available too. */
int gradref__cpu_has_avx2_f16c(void);
/* 1 when AVX-512 F, CD, DQ, BW and VL are available and enabled by the OS. */
int gradref__cpu_has_avx512(void);
/* 1 when AVX512_BF16 is available too (its conversion to BF16, used where exact); off under
 * GRADREF_MAX_ISA=avx512 and below. */
int gradref__cpu_has_avx512_bf16(void);
/* 1 when FMA3 is available (with AVX). */
int gradref__cpu_has_fma(void);

#endif
