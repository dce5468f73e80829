/* SPDX-License-Identifier: Apache-2.0 */
/* conv3d_backprop_filter's summation counter: the blocks' sums combined in the reference's
 * binary-counter order, whatever the chunking (c3f_counter.c). */
#ifndef GRADREF_C3F_COUNTER_H
#define GRADREF_C3F_COUNTER_H

#include <stdint.h>

#include "c3f_kernels.h"

/* The blocks' binary counter: sums pushed in order; level l holds the sum of 2^l of them, and
 * a push carries through the used levels (older + newer); the fold adds the stored sums from
 * the lowest level up, each older one on the left. levels + 1 slots of `size` floats, the
 * last the newest sum. */
typedef struct gradref__c3f_counter {
    float *level;
    int64_t size;
    int levels, used[64];
    const gradref__c3f_kernels *k; /* its add */
} gradref__c3f_counter;

/* An empty counter over `levels` + 1 slots of `size` floats at level, adding with k's add. */
gradref__c3f_counter gradref__c3f_counter_make(const gradref__c3f_kernels *k, float *level,
                                               int64_t size, int levels);

/* dst[e] = older[e] + newer[e] for e < n (dst may be either): the same bits at any width. */
void gradref__c3f_add_sums(const gradref__c3f_kernels *k, float *dst, const float *older,
                           const float *newer, int64_t n);

/* Where the next sum goes before gradref__c3f_counter_push. */
float *gradref__c3f_counter_slot(const gradref__c3f_counter *c);

/* A new sum src at level m, the levels below m empty (the count pushed so far a multiple of
 * 2^m): while level l is used, older (level l) + newer, the last add into the first unused level
 * `top`, or into `out` when given (which then holds the counter's only sum; the counter is left
 * empty). A node of 2^m consecutive sums pushed at level m meets the same carries, so gives the
 * same bits, as pushing them one by one. */
void gradref__c3f_counter_carry(gradref__c3f_counter *c, int m, const float *src, float *out);

/* The sum at gradref__c3f_counter_slot into the counter. */
void gradref__c3f_counter_push(gradref__c3f_counter *c);

/* gradref__c3f_counter_push of the last sum when the counter will then hold one level only (a
 * power-of-two count): the carry's last add writes `into`, which is the fold, instead of a level
 * buffer the fold would copy. Returns 0, having pushed nothing, otherwise. */
int gradref__c3f_counter_push_last(gradref__c3f_counter *c, float *into);

/* The fold, into dst (NULL: the newest slot), which it returns. At least one sum was pushed. */
float *gradref__c3f_counter_fold(gradref__c3f_counter *c, float *dst);

#endif
