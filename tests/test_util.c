/* SPDX-License-Identifier: Apache-2.0 */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fast_path.h"
#include "common/isa.h"

/* Whether `name` is one of the comma-separated names in `list`. */
static int tu_listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list;; p++) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        if (!end) return 0;
        p = end;
    }
}

/* Whether every name in `list` (may be NULL) is a test of the suite; prints the first that
 * is not. */
static int tu_known(const char *list, const struct CMUnitTest *tests, size_t count) {
    char name[128];
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        size_t i = 0;
        while (i < count && strcmp(tests[i].name, name) != 0)
            i++;
        if (i == count) {
            fprintf(stderr, "the suite has no test named \"%s\"\n", name);
            return 0;
        }
        p = end ? end + 1 : p + len;
    }
    return 1;
}

int tu_run_group(const char *group, const struct CMUnitTest *tests, size_t count) {
    const char *only = getenv("GRADREF_TEST_ONLY"), *skip = getenv("GRADREF_TEST_SKIP");
    if (!tu_known(only, tests, count) || !tu_known(skip, tests, count)) return 1;
    struct CMUnitTest *kept = malloc((count ? count : 1) * sizeof *kept);
    if (!kept) return 1;
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if ((!only || tu_listed(only, tests[i].name)) && !(skip && tu_listed(skip, tests[i].name)))
            kept[n++] = tests[i];
    const int failed = _cmocka_run_group_tests(group, kept, n, NULL, NULL);
    free(kept);
    return failed;
}

int tu_level_here(int level) {
    const char *apart = getenv("GRADREF_TEST_LEVELS_APART");
    return !apart || level >= gradref__isa_level() || !tu_listed(apart, gradref__isa_name(level));
}

uint64_t tu_seed(void) {
    static uint64_t seed;
    static int have;
    if (!have) {
        const char *env = getenv("GRADREF_TEST_SEED");
        seed = env ? strtoull(env, NULL, 0) : UINT64_C(0x6772616472656621);
        have = 1;
        fprintf(stderr, "GRADREF_TEST_SEED=%llu\n", (unsigned long long)seed);
    }
    return seed;
}

tu_rng tu_rng_make(uint64_t salt) {
    tu_rng r = {tu_seed() ^ (salt * UINT64_C(0x9e3779b97f4a7c15))};
    return r;
}

uint64_t tu_next(tu_rng *r) { /* splitmix64 */
    uint64_t z = (r->state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

int64_t tu_range(tu_rng *r, int64_t lo, int64_t hi) {
    return lo + (int64_t)(tu_next(r) % (uint64_t)(hi - lo + 1));
}

double tu_uniform(tu_rng *r) {
    return (double)(tu_next(r) >> 11) * 0x1p-53;
}

void tu_fill_random(void *p, size_t bytes, tu_rng *r) {
    unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++)
        c[i] = (unsigned char)tu_next(r);
}

size_t tu_dtype_size(int32_t dtype) {
    switch (dtype) {
    case GRADREF_F64:
    case GRADREF_I64: return 8;
    case GRADREF_F16:
    case GRADREF_BF16: return 2;
    case GRADREF_I8: return 1;
    default: return 4;
    }
}

void *tu_make_tensor(gradref_tensor *t, int32_t dtype, int32_t ndim, const int64_t *shape,
                     const int *perm, const int64_t *pad, size_t *bytes, tu_rng *r) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    int64_t running = 1;
    for (int k = ndim - 1; k >= 0; k--) {
        int i = perm ? perm[k] : k;
        t->shape[i] = shape[i];
        t->strides[i] = running;
        running *= (shape[i] > 0 ? shape[i] : 1) + (pad ? pad[i] : 0);
    }
    size_t n = (size_t)running * tu_dtype_size(dtype);
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    tu_fill_random(p, n, r);
    t->data = p;
    if (bytes) *bytes = n;
    return p;
}

size_t tu_offset(const gradref_tensor *t, const int64_t *index) {
    int64_t off = 0;
    for (int i = 0; i < t->ndim; i++)
        off += index[i] * t->strides[i];
    return (size_t)off * tu_dtype_size(t->dtype);
}

double tu_value(int32_t dtype, const void *p) {
    switch (dtype) {
    case GRADREF_F32: return *(const float *)p;
    case GRADREF_F64: return *(const double *)p;
    case GRADREF_F16: return tu_f16_value(*(const uint16_t *)p);
    case GRADREF_I8: return *(const int8_t *)p;
    case GRADREF_I32: return *(const int32_t *)p;
    default: return tu_bf16_value(*(const uint16_t *)p);
    }
}

void tu_set_value(int32_t dtype, void *p, double v) {
    switch (dtype) {
    case GRADREF_F32: *(float *)p = (float)v; break;
    case GRADREF_F64: *(double *)p = v; break;
    case GRADREF_F16: *(uint16_t *)p = tu_round_f16(v); break;
    default: *(uint16_t *)p = tu_round_bf16(v); break;
    }
}

double tu_get(const gradref_tensor *t, const int64_t *index) {
    return tu_value(t->dtype, (const char *)t->data + tu_offset(t, index));
}

void tu_put(const gradref_tensor *t, const int64_t *index, double v) {
    tu_set_value(t->dtype, (char *)t->data + tu_offset(t, index), v);
}

/* Independent rounding references: the value of every 16-bit pattern from its fields, and
 * rounding by binary search plus an exact midpoint comparison (midpoints are exact in double). */
double tu_f16_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

double tu_bf16_value(uint16_t h) {
    int e = (h >> 7) & 255, m = h & 127;
    double v = e == 255 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

/* Positive patterns below `top` (the infinity pattern) are ordered like their values; `beyond`
 * is what rounding past the largest finite value reaches. */
static uint16_t round_by_search(double x, double (*value)(uint16_t), uint16_t top, double beyond,
                                uint16_t quiet_nan) {
    if (isnan(x)) return quiet_nan;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    uint16_t lo = 0, hi = top;
    while (hi - lo > 1) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (value(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double vlo = value(lo), vhi = hi == top ? beyond : value(hi);
    if (a == vlo) return sign | lo;
    double midpoint = (vlo + vhi) / 2;
    uint16_t r = a < midpoint ? lo : a > midpoint ? hi : ((lo & 1) ? hi : lo);
    if (a >= beyond) r = top;
    return sign | r;
}

uint16_t tu_round_f16(double x) {
    return round_by_search(x, tu_f16_value, 0x7c00, 65536.0, 0x7e00);
}

uint16_t tu_round_bf16(double x) {
    return round_by_search(x, tu_bf16_value, 0x7f80, ldexp(1, 128), 0x7fc0);
}

void tu_expect_status(gradref_status got, gradref_status want, const char *op,
                      const char *fragment) {
    if (got != want)
        fail_msg("got %s, want %s (%s)", gradref_status_string(got), gradref_status_string(want),
                 gradref_last_error());
    const char *msg = gradref_last_error();
    const size_t n = strlen(op);
    if (strncmp(msg, op, n) != 0 || strncmp(msg + n, ": ", 2) != 0 || !strstr(msg, fragment))
        fail_msg("message '%s' lacks '%s: ...%s'", msg, op, fragment);
}

void tu_expect_untouched(const void *p, size_t bytes, unsigned char fill, const char *what) {
    for (size_t i = 0; i < bytes; i++)
        if (((const unsigned char *)p)[i] != fill) fail_msg("%s was written", what);
}

void tu_expect_same_bits(const gradref_tensor *got, const gradref_tensor *want, const char *what) {
    assert_int_equal(got->ndim, want->ndim);
    assert_int_equal(got->dtype, want->dtype);
    int64_t idx[GRADREF_MAX_DIMS] = {0};
    for (int d = 0; d < got->ndim; d++) {
        assert_int_equal(got->shape[d], want->shape[d]);
        if (got->shape[d] == 0) return;
    }
    const size_t esz = tu_dtype_size(got->dtype);
    for (;;) {
        const char *a = (const char *)got->data + tu_offset(got, idx);
        const char *b = (const char *)want->data + tu_offset(want, idx);
        if (memcmp(a, b, esz) != 0) {
            char at[160];
            int n = 0;
            for (int d = 0; d < got->ndim && n < (int)sizeof at - 24; d++)
                n += snprintf(at + n, sizeof at - (size_t)n, "%s%lld", d ? "," : "",
                              (long long)idx[d]);
            const int is_float = got->dtype <= GRADREF_BF16;
            fail_msg("%s[%s] = %.17g, want %.17g (bits differ)", what, at,
                     is_float ? tu_value(got->dtype, a) : 0.0,
                     is_float ? tu_value(want->dtype, b) : 0.0);
        }
        int d = got->ndim - 1;
        while (d >= 0 && ++idx[d] == got->shape[d])
            idx[d--] = 0;
        if (d < 0) return;
    }
}

/* Calls f(t, element) for every element of t. */
static void for_each_element(const gradref_tensor *t,
                             void (*f)(const gradref_tensor *, char *, void *), void *arg) {
    int64_t idx[GRADREF_MAX_DIMS] = {0};
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] == 0) return;
    for (;;) {
        f(t, (char *)t->data + tu_offset(t, idx), arg);
        int d = t->ndim - 1;
        while (d >= 0 && ++idx[d] == t->shape[d])
            idx[d--] = 0;
        if (d < 0) return;
    }
}

typedef struct specials {
    tu_rng *r;
    int one_in;
} specials;

static void put_special(const gradref_tensor *t, char *e, void *arg) {
    specials *sp = arg;
    if (tu_range(sp->r, 0, sp->one_in - 1) != 0) return;
    const int kind = (int)tu_range(sp->r, 0, 6);
    const uint64_t payload = tu_next(sp->r) | 1u; /* never all zero: stays NaN */
    const int neg = kind & 1;
    switch (t->dtype) {
    case GRADREF_F32: { /* 0-1 signalling NaN, 2-3 quiet NaN, 4-5 Inf, 6 quiet -NaN default */
        uint32_t b = kind < 2   ? 0x7f800000u | (uint32_t)(payload & 0x3fffffu)
                     : kind < 4 ? 0x7fc00000u | (uint32_t)(payload & 0x3fffffu)
                     : kind < 6 ? 0x7f800000u
                                : 0xffc00000u;
        if (neg) b |= 0x80000000u;
        memcpy(e, &b, 4);
    } break;
    case GRADREF_F64: {
        uint64_t b = kind < 2 ? UINT64_C(0x7ff0000000000000) | (payload & UINT64_C(0x7ffffffffffff))
                     : kind < 4
                         ? UINT64_C(0x7ff8000000000000) | (payload & UINT64_C(0x7ffffffffffff))
                     : kind < 6 ? UINT64_C(0x7ff0000000000000)
                                : UINT64_C(0xfff8000000000000);
        if (neg) b |= UINT64_C(0x8000000000000000);
        memcpy(e, &b, 8);
    } break;
    case GRADREF_F16:
    case GRADREF_BF16: {
        const uint16_t inf = t->dtype == GRADREF_F16 ? 0x7c00u : 0x7f80u,
                       quiet = t->dtype == GRADREF_F16 ? 0x200u : 0x40u;
        uint16_t b = kind < 2   ? (uint16_t)(inf | (payload & (quiet - 1u)))
                     : kind < 4 ? (uint16_t)(inf | quiet | (payload & (quiet - 1u)))
                     : kind < 6 ? inf
                                : (uint16_t)(0x8000u | inf | quiet);
        if (neg) b |= 0x8000u;
        memcpy(e, &b, 2);
    } break;
    default: break;
    }
}

void tu_sprinkle_specials(const gradref_tensor *t, tu_rng *r, int one_in) {
    specials sp = {r, one_in};
    for_each_element(t, put_special, &sp);
}

static void check_canonical(const gradref_tensor *t, char *e, void *arg) {
    const char *what = arg;
    uint64_t b = 0;
    int nan = 0, canonical = 0;
    switch (t->dtype) {
    case GRADREF_F32: {
        uint32_t v;
        memcpy(&v, e, 4);
        b = v, nan = (v & 0x7fffffffu) > 0x7f800000u, canonical = v == 0x7fc00000u;
    } break;
    case GRADREF_F64:
        memcpy(&b, e, 8);
        nan = (b & UINT64_C(0x7fffffffffffffff)) > UINT64_C(0x7ff0000000000000);
        canonical = b == UINT64_C(0x7ff8000000000000);
        break;
    case GRADREF_F16:
    case GRADREF_BF16: {
        uint16_t v;
        memcpy(&v, e, 2);
        const uint16_t inf = t->dtype == GRADREF_F16 ? 0x7c00u : 0x7f80u;
        b = v, nan = (v & 0x7fffu) > inf;
        canonical = v == (t->dtype == GRADREF_F16 ? 0x7e00u : 0x7fc0u);
    } break;
    default: return;
    }
    if (nan && !canonical)
        fail_msg("%s holds the NaN %llx, not the canonical one", what, (unsigned long long)b);
}

void tu_expect_canonical_nans(const gradref_tensor *t, const char *what) {
    for_each_element(t, check_canonical, (void *)what);
}

void tu_expect_tiny_workspace_same_bits(gradref_status (*call)(void *ctx, const gradref_exec *e),
                                        void *ctx, void *const *out, const size_t *bytes,
                                        int count) {
    unsigned char small[64], *want[8];
    assert_true(count <= 8);
    memset(small, 0x5c, sizeof small);
    assert_int_equal(call(ctx, NULL), GRADREF_OK);
    for (int o = 0; o < count; o++) {
        want[o] = malloc(bytes[o]);
        assert_non_null(want[o]);
        memcpy(want[o], out[o], bytes[o]);
    }
    for (int t = 1; t <= 3; t++) {
        gradref_exec tiny = {small, t == 3 ? 1 : sizeof small, t, GRADREF_PRECISION_DEFAULT};
        for (int o = 0; o < count; o++)
            memset(out[o], 0xee, bytes[o]);
        assert_int_equal(call(ctx, &tiny), GRADREF_OK);
        for (int o = 0; o < count; o++)
            assert_memory_equal(out[o], want[o], bytes[o]);
    }
    tu_expect_untouched(small, sizeof small, 0x5c, "workspace");
    for (int o = 0; o < count; o++) {
        memset(out[o], 0xee, bytes[o]);
        free(want[o]);
    }
}

void tu_expect_threads_same_bits(gradref_status (*call)(void *ctx, const gradref_exec *e),
                                 void *ctx, int32_t precision, void *const *out,
                                 const size_t *bytes, int count) {
    unsigned char *want[8];
    assert_true(count <= 8);
    for (int t = 1; t <= 3; t++) {
        const gradref_exec e = {NULL, 0, t, precision};
        for (int o = 0; o < count; o++)
            memset(out[o], 0xee, bytes[o]);
        assert_int_equal(call(ctx, &e), GRADREF_OK);
        for (int o = 0; o < count && t == 1; o++) {
            want[o] = malloc(bytes[o]);
            assert_non_null(want[o]);
            memcpy(want[o], out[o], bytes[o]);
        }
        for (int o = 0; o < count && t > 1; o++)
            if (memcmp(out[o], want[o], bytes[o]) != 0)
                fail_msg("output %d at %d threads differs from 1 thread's (precision 0x%x)", o, t,
                         (unsigned)precision);
    }
    for (int o = 0; o < count; o++)
        free(want[o]);
}

void tu_expect_strategies(const struct gradref__fast_path *fp, const void *plan, int32_t precision,
                          int threads, const char *const *skip, const gradref_tensor *out,
                          const gradref_tensor *want, size_t bytes, int fill) {
    gradref__ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.op = fp->op, ctx.num_threads = threads, ctx.precision = precision;
    for (int i = 0; i < fp->count; i++) {
        const char *name = fp->rows[i].name;
        int skipped = 0;
        for (const char *const *s = skip; *s && !skipped; s++)
            skipped = strcmp(*s, name) == 0;
        if (skipped) continue;
        memset(out->data, fill, bytes);
        const gradref_status st = gradref__run_strategy(fp, &ctx, plan, name);
        if (st == GRADREF_ERR_PARAM) continue; /* the row does not apply */
        assert_int_equal(st, GRADREF_OK);
        tu_expect_same_bits(out, want, name);
    }
}
