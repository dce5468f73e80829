/* SPDX-License-Identifier: Apache-2.0 */
/* cbd_int8.c: I8 problems in parts whose sums are exact in f32, and their int32 stores. */
#ifndef GRADREF_CBD_INT8_H
#define GRADREF_CBD_INT8_H

#include "cbd_run.h"

/* How many output channels of a group an I8 problem's parts take, each part's sums exact in
 * f32 (OCpg: one part, the whole call); 0 when no part is (the reference loop). */
int64_t gradref__cbd_int8_part(const gradref__cbd_plan *p, int threads);

/* sums[i] = (first ? 0 : sums[i]) + acc[i] mod 2^32 for i < n, acc holding one part's integer
 * sums. */
void gradref__cbd_fold_sums(const float *acc, int64_t n, int first, int32_t *sums);

/* n int32 sums into grad from `to` on, `step` elements apart: I32, or requantised to
 * QuantizedS8. */
void gradref__cbd_store_sums(const gradref__cbd_plan *p, const gradref__cbd_kernels *k,
                             const int32_t *from, char *to, int64_t step, int64_t n);

/* I8 by words (cbd_run's word_channels wc: 2 or 4): diff as dense planes of 32-bit words,
 * (image, group, word j) holding output channels wc j .. wc j + wc - 1 of each pixel (int16
 * halves or bytes, the lowest channel lowest, +0 past OCpg). */
void gradref__cbd_stage_words(const gradref__cbd_plan *p, int wc, int32_t *out, int threads);

/* n words of diff from element e on (output channel oc, the word's first), pixels s elements
 * apart, as gradref__cbd_stage_words makes them; have = OCpg - oc. */
void gradref__cbd_words_run(const gradref__cbd_plan *p, int wc, int64_t e, int64_t have, int64_t n,
                            int64_t s, int32_t *out);

/* The word tiles' filter panel of rows [ic0, ic0 + rows) of group g for a phase's taps, as
 * gradref__cbd_pack_panel lays it out with words of wc output channels for the channels:
 * k = (tap, word) ascending, mr words each, the rows past `rows` zero. */
void gradref__cbd_pack_word_panel(const gradref__cbd_plan *p, int wc, int64_t g, int64_t ic0,
                                  int64_t rows, const int64_t *tap, int64_t ntaps, int64_t mr,
                                  int32_t *dst);

/* Dense (image, channel, pixel) sums into grad: f32 integers of a single part (acc) or int32
 * (sums, when not NULL). */
void gradref__cbd_store_int(const gradref__cbd_plan *p, const float *acc, const int32_t *sums,
                            int threads);
#endif
