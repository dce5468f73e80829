/* SPDX-License-Identifier: Apache-2.0 */
/* Reader for the fixtures under tests/golden/ (written by tests/golden/generate.py):
 *   case <name> / <key> <values...> / end */
#ifndef GRADREF_TEST_GOLDEN_H
#define GRADREF_TEST_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#define GOLDEN_MAX_KEYS 32

typedef struct golden_case {
    char name[64];
    int num_keys;
    char *keys[GOLDEN_MAX_KEYS];
    char *values[GOLDEN_MAX_KEYS]; /* the rest of the line */
} golden_case;

/* Loads every case of a fixture file; fails the running test on a malformed file. */
golden_case *golden_load(const char *path, int *count);
void golden_free(golden_case *cases, int count);

/* The value text of key, or NULL. */
const char *golden_get(const golden_case *c, const char *key);
/* Integers of key into out (at most max); returns how many. Fails the test if key is missing. */
int golden_ints(const golden_case *c, const char *key, int64_t *out, int max);
/* Hex element bits of key into out, elem_size bytes each (at most max); returns how many. */
size_t golden_bits(const golden_case *c, const char *key, void *out, size_t elem_size, size_t max);

#endif
