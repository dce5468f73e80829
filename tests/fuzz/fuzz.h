/* SPDX-License-Identifier: Apache-2.0 */
/* The libFuzzer harnesses' shared part: a decoder of the fuzz input, an arena in which every
 * tensor and caller array of a call lives, and the contract check run after each call
 * (docs/api.md, "What the fuzz suite checks"). Each harness decodes one problem, mostly valid
 * and sometimes mutated, places its arguments in the arena and hands a call to fz_check. */
#ifndef GRADREF_FUZZ_H
#define GRADREF_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "gradref.h"

/* The fuzz input, read front to back; past its end every read gives 0. */
typedef struct fz {
    const uint8_t *p;
    size_t n;
} fz;

uint64_t fz_bits(fz *f, int bytes);
/* Uniform-ish in [lo, hi] (hi - lo < 2^32). */
int64_t fz_range(fz *f, int64_t lo, int64_t hi);
/* 1 with probability about 1/n. */
int fz_one_in(fz *f, int n);

/* Every tensor and array lives here, so aliasing is possible and checkable. */
#define FZ_ARENA_BYTES ((size_t)512 << 10)
extern unsigned char *fz_arena;

/* Starts a new input: clears the placement cursor and fills the arena from the input. */
void fz_begin(fz *f);

/* Places a tensor of `shape` in the arena: a random dim order, gaps, zero strides (inputs),
 * huge strides on dims that address nothing, misaligned or NULL data, overlap with earlier
 * tensors (rarely; outputs more often), and, with `mutate`, a wrong dtype, rank or size.
 * Returns 0 when it cannot fit the tensor (the harness then skips the input). */
int fz_tensor(fz *f, gradref_tensor *t, int32_t dtype, int32_t ndim, const int64_t *shape,
              int is_output, int mutate);

/* Writes float values chosen for the operator's edge cases (±0, ±1, near bounds, NaNs of
 * either sign, quiet or signalling, with payloads, Inf, huge, subnormal, or uniform in
 * [-range, range]) into every element of t. */
void fz_fill_floats(fz *f, const gradref_tensor *t, double range);

/* `count` elements of `size` bytes in the arena (a caller's list), maybe overlapping an
 * earlier tensor; NULL when it does not fit. */
void *fz_array(fz *f, size_t count, size_t size);

/* One call of the entry point under test. */
typedef struct fz_call {
    const char *op; /* the operator name messages start with */
    gradref_status (*run)(void *ctx, const gradref_exec *exec);
    gradref_status (*workspace_size)(void *ctx, size_t *bytes); /* NULL: none */
    void *ctx;
    const gradref_tensor *outputs[2]; /* NULL entries: none */
    int canonical_nans; /* an arithmetic operator: every NaN it stores is the canonical one */
} fz_call;

/* Decodes an exec (NULL, any thread count, precision and workspace size) and checks the
 * contract: status in range; on error a message naming the operator and every byte of the
 * arena and of the workspace unchanged; on success every output element written, nothing
 * outside the outputs touched (inputs unchanged), every NaN in the outputs canonical (when
 * canonical_nans), and the same bits at 1 and 2 threads; the workspace twin agreeing with the
 * call. Aborts (a crash for libFuzzer) on a violation. */
void fz_check(fz *f, const fz_call *call);

/* The abort path, with a message. */
void fz_fail(const char *what, const char *detail);

#endif
