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
/* 1 when FMA3 is available (with AVX). */
int gradref__cpu_has_fma(void);

#endif
