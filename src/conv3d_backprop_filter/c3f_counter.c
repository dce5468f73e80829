/* SPDX-License-Identifier: Apache-2.0 */
/* The summation counter (c3f_counter.h). */
#include "c3f_counter.h"

#include <string.h>

/* An empty counter over `levels` + 1 slots of `size` floats at level. */
gradref__c3f_counter gradref__c3f_counter_make(const gradref__c3f_kernels *k, float *level,
                                               int64_t size, int levels) {
    gradref__c3f_counter c;
    memset(&c, 0, sizeof c);
    c.level = level, c.size = size, c.levels = levels, c.k = k;
    return c;
}

/* dst[e] = older[e] + newer[e] for e < n (dst may be either): the same bits at any width. */
void gradref__c3f_add_sums(const gradref__c3f_kernels *k, float *dst, const float *older,
                           const float *newer, int64_t n) {
    if (k->add) {
        k->add(dst, older, newer, n);
        return;
    }
    for (int64_t e = 0; e < n; e++)
        dst[e] = older[e] + newer[e];
}

/* Where the next sum goes before counter_push. */
float *gradref__c3f_counter_slot(const gradref__c3f_counter *c) {
    return c->used[0] ? c->level + c->levels * c->size : c->level;
}

/* A new sum src at level m, the levels below m empty (the count pushed so far a multiple of
 * 2^m): while level l is used, older (level l) + newer, the last add into the first unused level
 * `top`, or into `out` when given (which then holds the counter's only sum; the counter is left
 * empty). A node of 2^m consecutive sums pushed at level m meets the same carries, so gives the
 * same bits, as pushing them one by one. */
void gradref__c3f_counter_carry(gradref__c3f_counter *c, int m, const float *src, float *out) {
    int top = m;
    while (c->used[top])
        top++;
    float *fresh = c->level + c->levels * c->size, *last = out ? out : c->level + top * c->size;
    const float *newer = src;
    if (top == m && src != last) memcpy(last, src, (size_t)c->size * sizeof *src);
    for (int l = m; l < top; l++) {
        float *dst = l == top - 1 ? last : fresh;
        gradref__c3f_add_sums(c->k, dst, c->level + l * c->size, newer, c->size);
        newer = dst;
        c->used[l] = 0;
    }
    if (out == NULL) c->used[top] = 1;
}

/* The sum at counter_slot into the counter. */
void gradref__c3f_counter_push(gradref__c3f_counter *c) {
    gradref__c3f_counter_carry(c, 0, gradref__c3f_counter_slot(c), NULL);
}

/* counter_push of the last sum when the counter will then hold one level only (a power-of-two
 * count): the carry's last add writes `into`, which is the fold, instead of a level buffer the
 * fold would copy. Returns 0, having pushed nothing, otherwise. */
int gradref__c3f_counter_push_last(gradref__c3f_counter *c, float *into) {
    int top = 0;
    while (c->used[top])
        top++;
    for (int l = top + 1; l < c->levels; l++)
        if (c->used[l]) return 0;
    if (into == NULL || top == 0) return 0;
    gradref__c3f_counter_carry(c, 0, gradref__c3f_counter_slot(c), into);
    return 1;
}

/* The fold, into dst (NULL: the newest slot), which it returns. At least one sum was pushed. */
float *gradref__c3f_counter_fold(gradref__c3f_counter *c, float *dst) {
    float *fresh = dst ? dst : c->level + c->levels * c->size;
    int started = 0;
    for (int l = 0; l < c->levels; l++) {
        if (!c->used[l]) continue;
        const float *s = c->level + l * c->size;
        if (!started) {
            memcpy(fresh, s, (size_t)c->size * sizeof *fresh);
            started = 1;
        } else {
            gradref__c3f_add_sums(c->k, fresh, s, fresh, c->size);
        }
    }
    return fresh;
}
