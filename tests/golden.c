/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L
#include "golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

golden_case *golden_load(const char *path, int *count) {
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open golden fixture %s", path);
    golden_case *cases = NULL, *cur = NULL;
    int n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#') continue;
        char *space = strchr(line, ' ');
        char *rest = space ? space + 1 : line + len;
        if (space) *space = '\0';
        if (strcmp(line, "case") == 0) {
            cases = realloc(cases, (size_t)(n + 1) * sizeof *cases);
            assert_non_null(cases);
            cur = &cases[n++];
            memset(cur, 0, sizeof *cur);
            snprintf(cur->name, sizeof cur->name, "%s", rest);
        } else if (strcmp(line, "end") == 0) {
            cur = NULL;
        } else {
            if (!cur || cur->num_keys == GOLDEN_MAX_KEYS)
                fail_msg("%s: '%s' outside a case or too many keys", path, line);
            cur->keys[cur->num_keys] = strdup(line);
            cur->values[cur->num_keys] = strdup(rest);
            cur->num_keys++;
        }
    }
    free(line);
    fclose(f);
    *count = n;
    return cases;
}

void golden_free(golden_case *cases, int count) {
    for (int i = 0; i < count; i++)
        for (int k = 0; k < cases[i].num_keys; k++) {
            free(cases[i].keys[k]);
            free(cases[i].values[k]);
        }
    free(cases);
}

const char *golden_get(const golden_case *c, const char *key) {
    for (int k = 0; k < c->num_keys; k++)
        if (strcmp(c->keys[k], key) == 0) return c->values[k];
    return NULL;
}

int golden_ints(const golden_case *c, const char *key, int64_t *out, int max) {
    const char *s = golden_get(c, key);
    if (!s) fail_msg("golden case %s has no '%s'", c->name, key);
    int n = 0;
    char *end;
    for (long long v = strtoll(s, &end, 10); end != s && n < max; v = strtoll(s, &end, 10)) {
        out[n++] = (int64_t)v;
        s = end;
    }
    return n;
}

size_t golden_bits(const golden_case *c, const char *key, void *out, size_t elem_size, size_t max) {
    const char *s = golden_get(c, key);
    if (!s) fail_msg("golden case %s has no '%s'", c->name, key);
    size_t n = 0;
    char *end;
    unsigned char *o = out;
    for (unsigned long long v = strtoull(s, &end, 16); end != s && n < max;
         v = strtoull(s, &end, 16)) {
        uint8_t v8 = (uint8_t)v;
        uint16_t v16 = (uint16_t)v;
        uint32_t v32 = (uint32_t)v;
        uint64_t v64 = (uint64_t)v;
        const void *src = elem_size == 1   ? (const void *)&v8
                          : elem_size == 2 ? (const void *)&v16
                          : elem_size == 4 ? (const void *)&v32
                                           : (const void *)&v64;
        memcpy(o + n * elem_size, src, elem_size);
        n++;
        s = end;
    }
    return n;
}
