#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
