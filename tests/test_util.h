/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the cmocka suites: a seeded generator (GRADREF_TEST_SEED, printed), canary
 * buffers, and descriptor builders. */
#ifndef GRADREF_TEST_UTIL_H
#define GRADREF_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include "gradref.h"

typedef struct tu_rng {
    uint64_t state;
} tu_rng;

/* Runs cmocka's group `tests`, or the tests GRADREF_TEST_ONLY names (a comma-separated list) less
 * the ones GRADREF_TEST_SKIP names, so that a test can be rerun or timed alone. A listed name
 * the suite lacks fails the run: a renamed test cannot drop out of a list silently. */
int tu_run_group(const char *group, const struct CMUnitTest *tests, size_t count);
#define TU_RUN_GROUP(group, tests) tu_run_group(group, tests, sizeof(tests) / sizeof((tests)[0]))

/* Whether a test that checks every kernel level checks `level` in this run: not a level below
 * the run's own that ctest runs apart (GRADREF_TEST_LEVELS_APART names them, comma-separated;
 * the sanitizer build runs the widest level only, and checks every level there). */
int tu_level_here(int level);

/* The suite's seed: GRADREF_TEST_SEED if set, else a fixed default; printed once. */
uint64_t tu_seed(void);
tu_rng tu_rng_make(uint64_t salt);
uint64_t tu_next(tu_rng *r);
/* Uniform in [lo, hi]. */
int64_t tu_range(tu_rng *r, int64_t lo, int64_t hi);
double tu_uniform(tu_rng *r); /* [0, 1) */
void tu_fill_random(void *p, size_t bytes, tu_rng *r);

size_t tu_dtype_size(int32_t dtype);

/* A tensor of `shape` laid out in the dim order `perm` (outermost first) inside a buffer that
 * may be padded: each dim gets pad[i] extra elements of room (a sliced view). The buffer,
 * of *bytes bytes, is malloc'd and filled with random bits. */
void *tu_make_tensor(gradref_tensor *t, int32_t dtype, int32_t ndim, const int64_t *shape,
                     const int *perm, const int64_t *pad, size_t *bytes, tu_rng *r);

/* Byte offset of a logical index. */
size_t tu_offset(const gradref_tensor *t, const int64_t *index);

/* Independent 16-bit float references (no library code): exact values of bit patterns, and
 * round-to-nearest-even of a double. */
double tu_f16_value(uint16_t h);
double tu_bf16_value(uint16_t h);
uint16_t tu_round_f16(double x);
uint16_t tu_round_bf16(double x);

/* The value of one element of any float dtype (tu_f16_value/tu_bf16_value for 16-bit), and
 * storing a double into one (rounded with tu_round_f16/tu_round_bf16). */
double tu_value(int32_t dtype, const void *p);
void tu_set_value(int32_t dtype, void *p, double v);
/* Element `index` of t, read or written the same way. */
double tu_get(const gradref_tensor *t, const int64_t *index);
void tu_put(const gradref_tensor *t, const int64_t *index, double v);

/* Fails unless got == want and gradref_last_error() reads "op: ..." containing fragment. */
void tu_expect_status(gradref_status got, gradref_status want, const char *op,
                      const char *fragment);
/* Fails if a byte of p[0 .. bytes) is not `fill`: an output the failed call must not touch. */
void tu_expect_untouched(const void *p, size_t bytes, unsigned char fill, const char *what);

/* Fails unless every element of got has the bits of want's element at the same index (any
 * rank and strides, one shape, one dtype); names the first index that differs and both
 * values. The fast-path-against-reference checks use it. */
void tu_expect_same_bits(const gradref_tensor *got, const gradref_tensor *want, const char *what);

struct gradref__fast_path;
/* Every row of fp's strategy table but those named in skip (NULL-terminated) that applies to
 * plan, run by name (gradref__run_strategy) at `threads` and `precision`, gives want's bits in
 * out, whose `bytes` bytes are filled with `fill` before each run (so that an element a run
 * leaves unwritten shows). */
void tu_expect_strategies(const struct gradref__fast_path *fp, const void *plan, int32_t precision,
                          int threads, const char *const *skip, const gradref_tensor *out,
                          const gradref_tensor *want, size_t bytes, int fill);

/* Sets about one element in `one_in` of a float tensor to a special value: signalling and
 * quiet NaNs of either sign with random payloads, the negative default NaN, or +-Inf. */
void tu_sprinkle_specials(const gradref_tensor *t, tu_rng *r, int one_in);
/* Fails unless every NaN element of t is the canonical quiet NaN of its dtype (the operators'
 * NaN rule: F32 0x7fc00000, F64 0x7ff8000000000000, F16 0x7e00, BF16 0x7fc0). */
void tu_expect_canonical_nans(const gradref_tensor *t, const char *what);

/* A caller's workspace too small for one thread's share (64 bytes, then 1 byte) runs the
 * no-workspace path: call(ctx, exec) must succeed at 1, 2 and 3 threads with the bits a NULL
 * workspace gives in its `count` output buffers (out[i], bytes[i]), without touching that
 * workspace. The outputs are left filled with 0xee. */
void tu_expect_tiny_workspace_same_bits(gradref_status (*call)(void *ctx, const gradref_exec *e),
                                        void *ctx, void *const *out, const size_t *bytes,
                                        int count);

/* call(ctx, exec) with a NULL workspace and the precision flags `precision` at 1, 2 and 3
 * threads gives the same bits in its `count` output buffers (out[i], bytes[i]). */
void tu_expect_threads_same_bits(gradref_status (*call)(void *ctx, const gradref_exec *e),
                                 void *ctx, int32_t precision, void *const *out,
                                 const size_t *bytes, int count);

/* Thread counts the thread-invariance tests compare. */
#define TU_THREAD_COUNTS                                                                           \
  { 1, 2, 3 }

#endif
