/* SPDX-License-Identifier: Apache-2.0 */
/* The harnesses' decoder, arena and contract check (fuzz.h). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sanitizer defaults for every harness: a failed huge malloc returns NULL (the library must
 * report NO_MEMORY, not crash), and UBSan stops at its first report. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1:detect_leaks=1";
}
/* libomp keeps the thread pool it grows for a large team until exit */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
    return "leak:libomp.so\n";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) {
    return "halt_on_error=1:print_stacktrace=1";
}

unsigned char *fz_arena;
static unsigned char *snapshot, *after_a, *mask;

#define FZ_MAX_REGIONS 16
static struct { size_t lo, hi; } regions[FZ_MAX_REGIONS];
static int region_count;
static size_t cursor, dirty_end = FZ_ARENA_BYTES;

/* Bytes of random data at the arena's head; every check covers [0, used) byte by byte, and
 * the rest of the arena only as "still 0xcd", so an input that places little is fast. */
#define FZ_RANDOM_BYTES ((size_t)32 << 10)

static size_t used_end(void) {
    size_t end = cursor > FZ_RANDOM_BYTES ? cursor : FZ_RANDOM_BYTES;
    end = (end + 63) & ~(size_t)63;
    return end < FZ_ARENA_BYTES ? end : FZ_ARENA_BYTES;
}

static unsigned char *pattern; /* FZ_ARENA_BYTES of 0xcd */

static void expect_tail_intact(size_t end, const char *what) {
    if (memcmp(fz_arena + end, pattern, FZ_ARENA_BYTES - end) != 0)
        fz_fail(what, "a byte past every placed argument changed");
}

void fz_fail(const char *what, const char *detail) {
    fprintf(stderr, "gradref fuzz: contract violated: %s\n  %s\n  last error: %s\n", what,
            detail ? detail : "", gradref_last_error());
    abort();
}

uint64_t fz_bits(fz *f, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v <<= 8;
        if (f->n > 0) {
            v |= *f->p++;
            f->n--;
        }
    }
    return v;
}

int64_t fz_range(fz *f, int64_t lo, int64_t hi) {
    const uint64_t span = (uint64_t)(hi - lo) + 1;
    const int bytes = span <= 256 ? 1 : span <= 65536 ? 2 : 4;
    return lo + (int64_t)(fz_bits(f, bytes) % span);
}

int fz_one_in(fz *f, int n) {
    return fz_bits(f, 1) % (unsigned)n == 0;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void fz_begin(fz *f) {
    if (fz_arena == NULL) {
        fz_arena = malloc(FZ_ARENA_BYTES); /* 16-byte aligned: enough for every dtype */
        snapshot = malloc(FZ_ARENA_BYTES);
        after_a = malloc(FZ_ARENA_BYTES);
        mask = malloc(FZ_ARENA_BYTES);
        pattern = malloc(FZ_ARENA_BYTES);
        if (!fz_arena || !snapshot || !after_a || !mask || !pattern)
            fz_fail("harness out of memory", NULL);
        memset(pattern, 0xcd, FZ_ARENA_BYTES);
    }
    /* the arena is 0xcd past what the last input used; its head gets random bytes */
    const size_t last = used_end(); /* an input that gave up early placed this much */
    memset(fz_arena, 0xcd, dirty_end > last ? dirty_end : last);
    uint64_t seed = fz_bits(f, 8);
    for (size_t i = 0; i < FZ_RANDOM_BYTES; i += 8) {
        uint64_t v = splitmix(&seed);
        memcpy(fz_arena + i, &v, 8);
    }
    dirty_end = FZ_RANDOM_BYTES;
    region_count = 0;
    cursor = (size_t)fz_range(f, 0, 63);
}

static size_t dtype_size(int32_t dtype) {
    static const size_t sizes[7] = {4, 8, 2, 2, 1, 4, 8};
    return dtype >= 0 && dtype < 7 ? sizes[dtype] : 0;
}

/* The byte span of t's elements (0 when empty); -1 when it is not a tensor the library can
 * accept (negative size or stride, or an offset beyond int64). */
static int64_t span_bytes(const gradref_tensor *t) {
    const size_t esz = dtype_size(t->dtype);
    if (esz == 0 || t->ndim < 0 || t->ndim > GRADREF_MAX_DIMS) return -1;
    int64_t last = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0 || t->strides[i] < 0) return -1;
        if (t->shape[i] == 0) return 0;
    }
    for (int i = 0; i < t->ndim; i++) {
        int64_t reach;
        if (__builtin_mul_overflow(t->strides[i], t->shape[i] - 1, &reach) ||
            __builtin_add_overflow(last, reach, &last))
            return -1;
    }
    int64_t bytes;
    if (last == INT64_MAX || __builtin_mul_overflow(last + 1, (int64_t)esz, &bytes)) return -1;
    return bytes;
}

static const int64_t huge_values[] = {INT64_C(1) << 33, INT64_C(1) << 40, INT64_C(1) << 62,
                                      INT64_MAX,        INT64_MAX / 3,    INT64_C(3037000500)};

static void mutate_tensor(fz *f, gradref_tensor *t) {
    const int d = t->ndim > 0 ? (int)fz_range(f, 0, t->ndim - 1) : 0;
    switch (fz_range(f, 0, 7)) {
    case 0: t->dtype = (int32_t)fz_range(f, -1, 8); break;
    case 1: t->ndim = (int32_t)fz_range(f, -1, 9); break;
    case 2: t->ndim += fz_one_in(f, 2) ? 1 : -1; break;
    case 3: t->shape[d] = 0; break;
    case 4: t->shape[d] += fz_one_in(f, 2) ? 1 : -1; break;
    case 5: t->shape[d] = huge_values[fz_range(f, 0, 5)]; break;
    case 6: t->strides[d] = -t->strides[d] - 1; break;
    default: t->shape[d] = fz_range(f, 0, 40); break;
    }
}

int fz_tensor(fz *f, gradref_tensor *t, int32_t dtype, int32_t ndim, const int64_t *shape,
              int is_output, int mutate) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    int perm[GRADREF_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        perm[i] = i;
    const unsigned mode = (unsigned)fz_bits(f, 1);
    if (mode & 1) /* a random memory order */
        for (int i = ndim - 1; i > 0; i--) {
            int j = (int)fz_range(f, 0, i), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
    int empty = 0;
    int64_t running = 1;
    for (int k = ndim - 1; k >= 0; k--) {
        const int i = perm[k];
        t->shape[i] = shape[i];
        t->strides[i] = running;
        empty |= shape[i] == 0;
        int64_t room = shape[i] > 1 ? shape[i] : 1;
        if ((mode & 2) && fz_one_in(f, 3)) room += fz_range(f, 1, 3); /* a sliced view */
        if (__builtin_mul_overflow(running, room, &running)) running = INT64_C(1) << 40;
    }
    if ((mode & 4) && !is_output && ndim > 0) /* a broadcast input */
        t->strides[fz_range(f, 0, ndim - 1)] = 0;
    if (mode & 8) /* strides that address nothing may be anything */
        for (int i = 0; i < ndim; i++)
            if (empty || shape[i] == 1) t->strides[i] = huge_values[fz_range(f, 0, 5)];
    if ((mode & 16) && ndim > 1 && fz_one_in(f, 4)) /* overlapping elements */
        t->strides[fz_range(f, 0, ndim - 1)] = t->strides[fz_range(f, 0, ndim - 1)];
    if (mutate && fz_one_in(f, 3)) mutate_tensor(f, t);

    const int64_t span = span_bytes(t);
    if (span < 0) { /* rejected before any access: the address does not matter */
        t->data = fz_arena;
        return 1;
    }
    if ((uint64_t)span > FZ_ARENA_BYTES) return 0;
    if (span == 0) { /* nothing is read: NULL, a wild pointer or an arena address */
        const int64_t pick = fz_range(f, 0, 3);
        t->data = pick == 0 ? NULL : pick == 1 ? (void *)(uintptr_t)16 : fz_arena + cursor;
        return 1;
    }
    const size_t esz = dtype_size(t->dtype), bytes = (size_t)span;
    size_t off;
    if (region_count > 0 && fz_one_in(f, is_output ? 6 : 24)) { /* overlap an earlier one */
        const int r = (int)fz_range(f, 0, region_count - 1);
        off = regions[r].lo + (size_t)fz_range(f, 0, (int64_t)(regions[r].hi - regions[r].lo));
    } else {
        off = cursor + (size_t)fz_range(f, 0, 3) * 64;
    }
    off = (off + esz - 1) / esz * esz;
    if (fz_one_in(f, 48)) off += 1; /* misaligned */
    if (off + bytes > FZ_ARENA_BYTES) {
        if (bytes > FZ_ARENA_BYTES - 64) return 0;
        off = (size_t)fz_range(f, 0, (int64_t)(FZ_ARENA_BYTES - bytes) / 64) * 64;
    }
    t->data = fz_one_in(f, 64) ? NULL : fz_arena + off;
    if (off + bytes > cursor) cursor = off + bytes;
    if (region_count < FZ_MAX_REGIONS) {
        regions[region_count].lo = off;
        regions[region_count].hi = off + bytes;
        region_count++;
    }
    return 1;
}

void *fz_array(fz *f, size_t count, size_t size) {
    const size_t bytes = count * size;
    size_t off;
    if (region_count > 0 && fz_one_in(f, 8)) {
        const int r = (int)fz_range(f, 0, region_count - 1);
        off = regions[r].lo + (size_t)fz_range(f, 0, (int64_t)(regions[r].hi - regions[r].lo));
    } else {
        off = cursor + (size_t)fz_range(f, 0, 3) * 8;
    }
    off = (off + size - 1) / size * size;
    if (off + bytes > FZ_ARENA_BYTES) return NULL;
    if (off + bytes > cursor) cursor = off + bytes;
    return fz_arena + off;
}

/* Calls fn(byte offset in the arena) for every element of t that lies in the arena. */
static void for_each_element(const gradref_tensor *t, void (*fn)(size_t off, const void *arg)) {
    const int64_t span = span_bytes(t);
    if (span <= 0 || t->data == NULL) return;
    int64_t numel = 1; /* a broadcast tensor may have many elements in a small span */
    for (int i = 0; i < t->ndim; i++)
        if (__builtin_mul_overflow(numel, t->shape[i], &numel) || numel > (1 << 22)) return;
    const size_t esz = dtype_size(t->dtype);
    const uintptr_t base = (uintptr_t)t->data, lo = (uintptr_t)fz_arena;
    if (base < lo || base + (uint64_t)span > lo + FZ_ARENA_BYTES) return;
    int64_t idx[GRADREF_MAX_DIMS] = {0};
    for (;;) {
        int64_t e = 0;
        for (int i = 0; i < t->ndim; i++)
            e += idx[i] * t->strides[i];
        fn(base - lo + (size_t)e * esz, t);
        int i = t->ndim - 1;
        while (i >= 0 && ++idx[i] == t->shape[i])
            idx[i--] = 0;
        if (i < 0) return;
    }
}

static double fill_range;
static fz *fill_input;

static void fill_one(size_t off, const void *arg) {
    const gradref_tensor *t = arg;
    fz *f = fill_input;
    double v;
    switch (fz_range(f, 0, 15)) {
    case 0: v = 0.0; break;
    case 1: v = -0.0; break;
    case 2: v = fz_one_in(f, 2) ? 1.0 : -1.0; break;
    case 3: v = fz_one_in(f, 2) ? 1.0000001 : -0.9999999; break;
    case 4: { /* a NaN of either sign, quiet or signalling, with a payload */
        const uint64_t payload = fz_bits(f, 3) | 1u, sign = (uint64_t)fz_one_in(f, 2);
        const int quiet = fz_one_in(f, 2);
        unsigned char *q = fz_arena + off;
        if (t->dtype == GRADREF_F32) {
            const uint32_t u = (uint32_t)(sign << 31) | 0x7f800000u | (quiet ? 0x400000u : 0u) |
                               (uint32_t)(payload & 0x3fffffu);
            memcpy(q, &u, 4);
        } else if (t->dtype == GRADREF_F64) {
            const uint64_t u = sign << 63 | UINT64_C(0x7ff0000000000000) |
                               (quiet ? UINT64_C(0x8000000000000) : 0u) |
                               (payload & UINT64_C(0x7ffffffffffff));
            memcpy(q, &u, 8);
        } else if (t->dtype == GRADREF_F16 || t->dtype == GRADREF_BF16) {
            const int f16 = t->dtype == GRADREF_F16;
            const uint16_t u = (uint16_t)(sign << 15 | (f16 ? 0x7c00u : 0x7f80u) |
                                          (quiet ? (f16 ? 0x200u : 0x40u) : 0u) |
                                          (payload & (f16 ? 0x1ffu : 0x3fu)));
            memcpy(q, &u, 2);
        }
        return;
    }
    case 5: v = fz_one_in(f, 2) ? __builtin_inf() : -__builtin_inf(); break;
    case 6: v = fz_one_in(f, 2) ? 3e9 : -1e30; break;
    case 7: v = 1e-41; break;
    default: v = ((double)fz_bits(f, 2) / 32767.5 - 1.0) * fill_range; break;
    }
    unsigned char *p = fz_arena + off;
    switch (t->dtype) {
    case GRADREF_F32: {
        float x = (float)v;
        memcpy(p, &x, 4);
        break;
    }
    case GRADREF_F64: memcpy(p, &v, 8); break;
    case GRADREF_F16:
    case GRADREF_BF16: { /* the top half of an f32 is a bf16; an f16 of a similar value */
        float x = (float)v;
        uint32_t u;
        memcpy(&u, &x, 4);
        uint16_t h = (uint16_t)(u >> 16);
        if (t->dtype == GRADREF_F16)
            h = (uint16_t)(((u >> 16) & 0x8000u) | (((u >> 13) & 0x7fffu) & 0x7fffu));
        memcpy(p, &h, 2);
        break;
    }
    default: break;
    }
}

void fz_fill_floats(fz *f, const gradref_tensor *t, double range) {
    fill_range = range;
    fill_input = f;
    for_each_element(t, fill_one);
}

/* The NaN rule (docs/api.md): a NaN element must be the canonical quiet NaN of its dtype. */
static void expect_canonical_one(size_t off, const void *arg) {
    const gradref_tensor *t = arg;
    const unsigned char *p = fz_arena + off;
    int nan = 0, canonical = 0;
    if (t->dtype == GRADREF_F32) {
        uint32_t u;
        memcpy(&u, p, 4);
        nan = (u & 0x7fffffffu) > 0x7f800000u, canonical = u == 0x7fc00000u;
    } else if (t->dtype == GRADREF_F64) {
        uint64_t u;
        memcpy(&u, p, 8);
        nan = (u & UINT64_C(0x7fffffffffffffff)) > UINT64_C(0x7ff0000000000000);
        canonical = u == UINT64_C(0x7ff8000000000000);
    } else if (t->dtype == GRADREF_F16 || t->dtype == GRADREF_BF16) {
        uint16_t u;
        memcpy(&u, p, 2);
        const int f16 = t->dtype == GRADREF_F16;
        nan = (u & 0x7fffu) > (f16 ? 0x7c00u : 0x7f80u);
        canonical = u == (f16 ? 0x7e00u : 0x7fc0u);
    }
    if (nan && !canonical) fz_fail("an output NaN is not the canonical quiet NaN", NULL);
}

static void mark_one(size_t off, const void *arg) {
    const gradref_tensor *t = arg;
    memset(mask + off, 1, dtype_size(t->dtype));
}

static void set_sentinel_error(const char *op) {
    if (strcmp(op, "copy") == 0)
        (void)gradref_tensor_init(NULL, NULL, GRADREF_F32, 0, NULL);
    else
        (void)gradref_copy(NULL, NULL, NULL);
}

static void expect_message(const char *op) {
    const char *msg = gradref_last_error();
    const size_t n = strlen(op);
    if (strncmp(msg, op, n) != 0 || msg[n] != ':' || strlen(msg) < n + 4)
        fz_fail("the error message does not name the operator", msg);
}

#define WS_GUARD 64

typedef struct workspace {
    unsigned char *buf;
    size_t bytes; /* what exec declares */
} workspace;

static void ws_fill(workspace *w) {
    if (w->buf) memset(w->buf, 0xa5, w->bytes + WS_GUARD);
}

static int ws_guard_intact(const workspace *w, int whole) {
    if (!w->buf) return 1;
    for (size_t i = whole ? 0 : w->bytes; i < w->bytes + WS_GUARD; i++)
        if (w->buf[i] != 0xa5) return 0;
    return 1;
}

static gradref_status status_of(gradref_status s) {
    if ((int)s < 0 || (int)s > GRADREF_ERR_WORKSPACE) fz_fail("status out of range", NULL);
    return s;
}

void fz_check(fz *f, const fz_call *c) {
    static const int32_t thread_choices[16] = {0, 1, 2,  3,  1,    2,      0,         2,
                                               1, 3, 64, -1, 1025, 100000, INT32_MAX, INT32_MIN};
    gradref_exec ex;
    memset(&ex, 0, sizeof ex);
    const int null_exec = fz_one_in(f, 8);
    ex.num_threads = thread_choices[fz_range(f, 0, 15) & (fz_one_in(f, 4) ? 15 : 7)];
    ex.precision = fz_one_in(f, 3) ? (fz_one_in(f, 8) ? (int32_t)fz_range(f, -1, 9) : 1) : 0;
    if (fz_one_in(f, 8)) ex.precision |= GRADREF_STRICT_UPSTREAM;
    /* the GRADREF_TERM_* outputs (the convolutions and grid_sampler3d_grad with F64 outputs
     * take them, whose twins keep the plain dtype rules) */
    const int terms = !null_exec && fz_one_in(f, 16);
    if (terms) ex.precision |= fz_one_in(f, 2) ? GRADREF_TERM_MAGNITUDES : GRADREF_TERM_COUNTS;
    const int32_t base_precision =
        ex.precision & ~(GRADREF_STRICT_UPSTREAM | GRADREF_TERM_MAGNITUDES | GRADREF_TERM_COUNTS);
    const int ws_mode = (int)fz_range(f, 0, 7);
    const int threads_ok = ex.num_threads >= 0 && ex.num_threads <= 1024;
    const int exec_valid = null_exec || (threads_ok && ex.precision >= 0 && ex.precision <= 1);
    /* the device precisions 2..4 (each valid for one operator and some dtypes, PARAM elsewhere)
     * and strict validation (upstream's rules) reject calls their twins accept */
    const int device_mode = !null_exec && threads_ok && base_precision >= 0 &&
                            base_precision <= 4 &&
                            (base_precision >= 2 || ex.precision != base_precision || terms);

    const size_t end = used_end();
    if (end > dirty_end) dirty_end = end;
    /* the twin: validates like the call, writes nothing but *bytes */
    size_t need = 0;
    gradref_status ws_status = GRADREF_OK;
    if (c->workspace_size) {
        memcpy(snapshot, fz_arena, end);
        set_sentinel_error(c->op);
        ws_status = status_of(c->workspace_size(c->ctx, &need));
        if (ws_status != GRADREF_OK) expect_message(c->op);
        if (memcmp(snapshot, fz_arena, end) != 0)
            fz_fail("the workspace twin wrote into the arena", c->op);
        expect_tail_intact(end, "the workspace twin wrote into the arena");
    }

    workspace w = {NULL, 0};
    if (!null_exec && ws_status == GRADREF_OK && ws_mode != 0) {
        size_t bytes = need;
        switch (ws_mode) {
        case 1: bytes = need; break;
        case 2: bytes = need > 0 ? need - 1 : 0; break;
        case 3: bytes = (size_t)fz_range(f, 1, 200); break;
        case 4: bytes = 0; break;
        case 5: bytes = need + (size_t)fz_range(f, 1, 4096); break;
        default: bytes = need / (size_t)fz_range(f, 2, 3); break;
        }
        if (bytes <= ((size_t)256 << 20)) {
            w.bytes = bytes;
            w.buf = malloc(bytes + WS_GUARD);
            if (!w.buf) fz_fail("harness out of memory", NULL);
            ws_fill(&w);
            ex.workspace = w.buf;
            ex.workspace_bytes = bytes;
        }
    }
    const gradref_exec *exec = null_exec ? NULL : &ex;

    /* run A, as decoded */
    memcpy(snapshot, fz_arena, end);
    set_sentinel_error(c->op);
    const gradref_status a = status_of(c->run(c->ctx, exec));
    if (a != GRADREF_OK) {
        expect_message(c->op);
        if (memcmp(snapshot, fz_arena, end) != 0)
            fz_fail("a failed call changed the arena", gradref_status_string(a));
        expect_tail_intact(end, "a failed call changed the arena");
        if (!ws_guard_intact(&w, 1)) fz_fail("a failed call wrote into the workspace", NULL);
        if (exec_valid && c->workspace_size) {
            if (ws_status != GRADREF_OK && a != ws_status)
                fz_fail("the call and its workspace twin disagree", gradref_status_string(a));
            if (ws_status == GRADREF_OK && a != GRADREF_ERR_NO_MEMORY &&
                !(a == GRADREF_ERR_WORKSPACE && w.buf && w.bytes < need))
                fz_fail("the twin accepted what the call rejected", gradref_status_string(a));
        }
        free(w.buf);
        return;
    }
    if (!exec_valid && !device_mode) fz_fail("an invalid exec was accepted", NULL);
    if (ws_status != GRADREF_OK && !terms)
        fz_fail("the twin rejected what the call accepted", NULL);
    if (!ws_guard_intact(&w, 0)) fz_fail("the call wrote past its workspace", NULL);

    expect_tail_intact(end, "the call wrote outside its outputs");
    memset(mask, 0, end);
    for (int o = 0; o < 2; o++)
        if (c->outputs[o]) for_each_element(c->outputs[o], mark_one);
    for (size_t i = 0; i < end; i++)
        if (!mask[i] && fz_arena[i] != snapshot[i]) {
            char where[64];
            snprintf(where, sizeof where, "arena byte %zu", i);
            fz_fail("the call wrote outside its outputs (or into an input)", where);
        }
    memcpy(after_a, fz_arena, end);
    if (c->canonical_nans)
        for (int o = 0; o < 2; o++)
            if (c->outputs[o]) for_each_element(c->outputs[o], expect_canonical_one);

    /* run B: every output byte flipped first (an element the call leaves unwritten then
     * differs), on the other thread count */
    memcpy(fz_arena, snapshot, end);
    for (size_t i = 0; i < end; i++)
        if (mask[i]) fz_arena[i] = (unsigned char)~fz_arena[i];
    memcpy(snapshot, fz_arena, end);
    gradref_exec exb = ex;
    if (null_exec) memset(&exb, 0, sizeof exb);
    const int threads_a = null_exec ? 0 : ex.num_threads;
    exb.num_threads = threads_a == 1 ? 2 : 1;
    ws_fill(&w);
    const gradref_status b = status_of(c->run(c->ctx, &exb));
    if (b != GRADREF_OK) fz_fail("the call failed on another thread count", gradref_last_error());
    if (!ws_guard_intact(&w, 0)) fz_fail("the call wrote past its workspace", NULL);
    expect_tail_intact(end, "run B wrote outside its outputs");
    for (size_t i = 0; i < end; i++) {
        if (mask[i] && fz_arena[i] != after_a[i]) {
            char where[96];
            snprintf(where, sizeof where, "arena byte %zu: threads %d and %d", i, threads_a,
                     exb.num_threads);
            fz_fail("an output element differs between thread counts or was not written", where);
        }
        if (!mask[i] && fz_arena[i] != snapshot[i])
            fz_fail("run B wrote outside its outputs", NULL);
    }
    free(w.buf);
}
