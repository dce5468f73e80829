/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L
#include "problem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_dtype(const char *s, gradref_dtype *d) {
    static const struct {
        const char *name;
        gradref_dtype dtype;
    } names[] = {{"f32", GRADREF_F32},   {"f64", GRADREF_F64}, {"f16", GRADREF_F16},
                 {"bf16", GRADREF_BF16}, {"i8", GRADREF_I8},   {"i32", GRADREF_I32},
                 {"i64", GRADREF_I64}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) {
            *d = names[i].dtype;
            return 1;
        }
    return 0;
}

static int parse_int(const char *s, int64_t *v) {
    char *end;
    if (*s == '\0') return 0;
    long long x = strtoll(s, &end, 10);
    if (*end != '\0' || x < 0) return 0;
    *v = (int64_t)x;
    return 1;
}

int64_t problem_get(const problem *p, const char *key, int64_t fallback) {
    for (int i = 0; i < p->num_keys; i++)
        if (strcmp(p->keys[i], key) == 0) return p->values[i];
    return fallback;
}

int problem_parse(const char *line, problem *p, char *err, int err_size) {
    char buf[256];
    size_t n = strcspn(line, "#\r\n");
    if (n >= sizeof buf) {
        snprintf(err, (size_t)err_size, "line longer than %d characters", (int)sizeof buf - 1);
        return -1;
    }
    memcpy(buf, line, n);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = '\0';
    memset(p, 0, sizeof *p);
    memcpy(p->text, buf, n + 1);
    p->dtype = GRADREF_F32;
    char *save = NULL, *tok = strtok_r(buf, " \t", &save);
    if (tok == NULL) return 0;
    snprintf(p->op, sizeof p->op, "%s", tok);
    while ((tok = strtok_r(NULL, " \t", &save)) != NULL) {
        size_t alpha = strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
        int64_t value;
        if (strncmp(tok, "dims", 4) == 0 && alpha == 4) {
            char *s2 = NULL, *item = strtok_r(tok + 4, ",", &s2);
            for (; item; item = strtok_r(NULL, ",", &s2)) {
                if (p->num_dims == PROBLEM_MAX_DIMS || !parse_int(item, &p->dims[p->num_dims])) {
                    snprintf(err, (size_t)err_size, "bad dims entry '%s'", item);
                    return -1;
                }
                p->num_dims++;
            }
        } else if (parse_dtype(tok, &p->dtype)) {
        } else if (alpha > 0 && alpha < sizeof p->keys[0] && tok[alpha] != '\0' &&
                   parse_int(tok + alpha, &value)) {
            if (p->num_keys == PROBLEM_MAX_KEYS) {
                snprintf(err, (size_t)err_size, "too many settings");
                return -1;
            }
            memcpy(p->keys[p->num_keys], tok, alpha);
            p->keys[p->num_keys][alpha] = '\0';
            p->values[p->num_keys++] = value;
        } else if (tok[alpha] == '\0' && alpha < sizeof p->mode && p->mode[0] == '\0') {
            memcpy(p->mode, tok, alpha + 1);
        } else {
            snprintf(err, (size_t)err_size, "unknown token '%s'", tok);
            return -1;
        }
    }
    return 1;
}

int problem_load(const char *path, problem **out, char *err, int err_size) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, (size_t)err_size, "cannot open %s", path);
        return -1;
    }
    int count = 0, cap = 0, lineno = 0;
    problem *list = NULL;
    char line[512], why[128];
    while (fgets(line, sizeof line, f)) {
        lineno++;
        problem p;
        int r = problem_parse(line, &p, why, sizeof why);
        if (r < 0) {
            snprintf(err, (size_t)err_size, "%s:%d: %s", path, lineno, why);
            free(list);
            fclose(f);
            return -1;
        }
        if (r == 0) continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            problem *grown = realloc(list, (size_t)cap * sizeof *list);
            if (!grown) {
                free(list);
                fclose(f);
                snprintf(err, (size_t)err_size, "out of memory");
                return -1;
            }
            list = grown;
        }
        list[count++] = p;
    }
    fclose(f);
    *out = list;
    return count;
}
