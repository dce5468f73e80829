/* SPDX-License-Identifier: Apache-2.0 */
/* The fast path. Threads own contiguous token ranges (the work per token is the same). For
 * each token the cos/sin row is turned into weights once, in chunks of up to CHUNK pairs, and
 * every head of q and k streams through them: 16-bit rows are widened to f32 (F16C where the
 * CPU has it), computed with exactly the operations of the reference loop, and narrowed once.
 * F64, GRADREF_PRECISION_HIGH and tensors whose rows are not dense take the reference loop on
 * the same token ranges. */
#include <string.h>

#include "common/nan.h"
#include "common/convert.h"
#include "common/convert_array.h"
#include "common/exec.h"
#include "common/internal.h"
#include "common/isa.h"
#include "common/stream.h"
#include "gradref.h"
#include "rope_grad_internal.h"
#include "rope_grad_kernels.h"

#define CHUNK                 128                /* pairs of weights built at a time */
#define PARALLEL_MIN_ELEMENTS (INT64_C(1) << 15) /* smaller problems run on one thread */

/* n values of the fast path's dtype (F32, F16 or BF16) to f32, and back. */
static void widen(int32_t dtype, const char *src, float *dst, int64_t n, int max_isa) {
    if (dtype == GRADREF_F32)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else
        gradref__half_to_f32_array(gradref__array_kernels_for(max_isa), dtype,
                                   (const uint16_t *)(const void *)src, dst, (size_t)n);
}

static void narrow(int32_t dtype, const float *src, char *dst, int64_t n, int max_isa) {
    if (dtype == GRADREF_F32)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else
        gradref__f32_to_half_array(gradref__array_kernels_for(max_isa), dtype, src,
                                   (uint16_t *)(void *)dst, (size_t)n);
}

/* ATB: the weight w = c +/- s' rounded to the dtype, as an f32. */
static void atb_weights(int32_t dtype, const float *c, const float *s, float *w, int64_t n,
                        int front, int max_isa) {
    for (int64_t i = 0; i < n; i++)
        w[i] = front ? c[i] + s[i] : c[i] - s[i];
    if (dtype != GRADREF_F32) { /* round through the 16-bit type: exact for F16/BF16 sums */
        uint16_t rounded[CHUNK];
        narrow(dtype, w, (char *)rounded, n, max_isa);
        widen(dtype, (const char *)rounded, w, n, max_isa);
    }
}

typedef struct token_ctx {
    const gradref__rope_plan *p;
    int64_t row, pos;
    int stream;                     /* write outputs with streaming stores */
    const gradref__rope_kernels *k; /* the row kernels */
} token_ctx;

/* Pointer to element (row, col) of a stream's input or output, for dense rows. */
static const char *in_at(const gradref__rope_plan *p, const gradref__rope_stream *st, int64_t row,
                         int64_t col) {
    return st->in + (size_t)(row * st->in_stride[0] + col) * p->elem_size;
}

static char *out_at(const gradref__rope_plan *p, const gradref__rope_stream *st, int64_t row,
                    int64_t col) {
    return st->out + (size_t)(row * st->out_stride[0] + col) * p->elem_size;
}

/* Every head of one stream for the pairs [j0, j0 + L) of a token, with its weights: c_both
 * holds c[j] then c[j + H] (ATB: the weights of both halves), sf and sb s[j] and s[j + H]. */
static void heads_half(const token_ctx *tc, const gradref__rope_stream *st, int64_t j0, int64_t L,
                       const float *c_both, const float *sf, const float *sb) {
    const gradref__rope_plan *p = tc->p;
    const gradref__rope_kernels *k = tc->k;
    const int32_t dt = p->dtype;
    const int atb = p->mode == GRADREF_ROPE_ATB;
    const int64_t D = p->head_dim, H = p->rotary_dim / 2;
    const float *cf = c_both, *cb = c_both + L;
    /* HALF: every head at once, the weights in registers */
    if (k->half_heads && !atb && L == H && H % 16 == 0 && H <= 64) {
        k->half_heads(dt, in_at(p, st, tc->row, 0), out_at(p, st, tc->row, 0), st->heads, D, cf, sb,
                      cb, sf, H, tc->stream);
        return;
    }
    if (k->atb_heads && atb && L == H && (2 * L) % 16 == 0 && 2 * L <= 128) { /* w in registers */
        k->atb_heads(dt, in_at(p, st, tc->row, 0), out_at(p, st, tc->row, 0), st->heads, D, c_both,
                     2 * L, tc->stream);
        return;
    }
    for (int64_t n = 0; n < st->heads; n++) {
        const char *in_f = in_at(p, st, tc->row, n * D + j0);
        const char *in_b = in_at(p, st, tc->row, n * D + j0 + H);
        char *out_f = out_at(p, st, tc->row, n * D + j0);
        char *out_b = out_at(p, st, tc->row, n * D + j0 + H);
        if (atb && L == H) { /* the whole head row in one pass */
            k->atb_row(dt, in_f, out_f, c_both, 2 * L, tc->stream);
        } else if (atb) {
            k->atb_row(dt, in_f, out_f, cf, L, tc->stream);
            k->atb_row(dt, in_b, out_b, cb, L, tc->stream);
        } else {
            k->half_row(dt, in_f, in_b, out_f, out_b, cf, sb, cb, sf, L, tc->stream);
        }
    }
}

/* One token, rotate_half and ATB: pairs (j, j + H) for j < H = R/2. */
static void token_half(const token_ctx *tc) {
    const gradref__rope_plan *p = tc->p;
    const int32_t dt = p->dtype;
    const int atb = p->mode == GRADREF_ROPE_ATB;
    const int64_t H = p->rotary_dim / 2;
    const char *crow = p->cos + (size_t)(tc->pos * p->cos_stride[0]) * p->elem_size;
    const char *srow = p->sin + (size_t)(tc->pos * p->sin_stride[0]) * p->elem_size;
    /* c[j] then c[j+H] side by side, so that when one chunk covers the head (L == H) the ATB
     * weights of the whole row are one array */
    float c_both[2 * CHUNK], sf[CHUNK], sb[CHUNK]; /* s[j], s[j+H] */
    for (int64_t j0 = 0; j0 < H; j0 += CHUNK) {
        const int64_t L = H - j0 < CHUNK ? H - j0 : CHUNK;
        float *cf = c_both, *cb = c_both + L;
        widen(dt, crow + (size_t)j0 * p->elem_size, cf, L, p->max_isa);
        widen(dt, crow + (size_t)(j0 + H) * p->elem_size, cb, L, p->max_isa);
        widen(dt, srow + (size_t)j0 * p->elem_size, sf, L, p->max_isa);
        widen(dt, srow + (size_t)(j0 + H) * p->elem_size, sb, L, p->max_isa);
        if (atb) {
            atb_weights(dt, cf, sb, cf, L, 1, p->max_isa); /* front: c[j] + s[j+H] */
            atb_weights(dt, cb, sf, cb, L, 0, p->max_isa); /* back:  c[j+H] - s[j] */
        }
        for (int s = 0; s < 2; s++)
            heads_half(tc, &p->stream[s], j0, L, c_both, sf, sb);
    }
}

/* One token, interleaved: pairs (2i, 2i + 1). */
static void token_interleaved(const token_ctx *tc) {
    const gradref__rope_plan *p = tc->p;
    const int32_t dt = p->dtype;
    const int64_t D = p->head_dim, R = p->rotary_dim;
    const char *crow = p->cos + (size_t)(tc->pos * p->cos_stride[0]) * p->elem_size;
    const char *srow = p->sin + (size_t)(tc->pos * p->sin_stride[0]) * p->elem_size;
    float c[2 * CHUNK], sn[2 * CHUNK];
    for (int64_t j0 = 0; j0 < R; j0 += 2 * CHUNK) {
        const int64_t L = R - j0 < 2 * CHUNK ? R - j0 : 2 * CHUNK; /* even */
        widen(dt, crow + (size_t)j0 * p->elem_size, c, L, p->max_isa);
        widen(dt, srow + (size_t)j0 * p->elem_size, sn, L, p->max_isa);
        for (int s = 0; s < 2; s++) {
            const gradref__rope_stream *st = &p->stream[s];
            if (tc->k->interleaved_heads && L % 16 == 0 && L <= 128) { /* c, s in registers */
                tc->k->interleaved_heads(dt, in_at(p, st, tc->row, j0), out_at(p, st, tc->row, j0),
                                         st->heads, D, c, sn, L, tc->stream);
                continue;
            }
            for (int64_t n = 0; n < st->heads; n++)
                tc->k->interleaved_row(dt, in_at(p, st, tc->row, n * D + j0),
                                       out_at(p, st, tc->row, n * D + j0), c, sn, L, tc->stream);
        }
    }
}

/* Columns past rotary_dim: the gradient passes through, a NaN as the canonical one (the NaN
 * rule holds for every output element). */
static void token_pass_through(const token_ctx *tc) {
    const gradref__rope_plan *p = tc->p;
    const int64_t D = p->head_dim, R = p->rotary_dim;
    if (R == D) return;
    for (int s = 0; s < 2; s++) {
        const gradref__rope_stream *st = &p->stream[s];
        for (int64_t n = 0; n < st->heads; n++) {
            void *out = out_at(p, st, tc->row, n * D + R);
            memcpy(out, in_at(p, st, tc->row, n * D + R), (size_t)(D - R) * p->elem_size);
            gradref__canon_nans_elems(p->dtype, out, D - R, p->max_isa);
        }
    }
}

static int dense_rows(const gradref__rope_plan *p) {
    for (int s = 0; s < 2; s++)
        if (p->stream[s].in_stride[1] != 1 || p->stream[s].out_stride[1] != 1) return 0;
    return p->cos_stride[1] == 1 && p->sin_stride[1] == 1;
}

static void rows_fast(const gradref__rope_plan *p, int64_t row_begin, int64_t row_end, int stream,
                      const gradref__rope_kernels *k) {
    token_ctx tc = {p, 0, 0, stream, k};
    int64_t row = 0;
    for (int64_t b = 0; b < p->num_seqs && row < row_end; b++) {
        const int64_t len = p->seq_lens[b];
        const int64_t start = p->start_positions ? p->start_positions[b] : 0;
        int64_t t0 = row_begin > row ? row_begin - row : 0;
        int64_t t1 = row_end - row < len ? row_end - row : len;
        for (int64_t t = t0; t < t1; t++) {
            tc.row = row + t;
            tc.pos = start + t;
            if (p->mode == GRADREF_ROPE_INTERLEAVED)
                token_interleaved(&tc);
            else
                token_half(&tc);
            token_pass_through(&tc);
        }
        row += len;
    }
}

/* The tokens' split, for each member of the team. */
typedef struct tokens_call {
    const gradref__rope_plan *p;
    const gradref__rope_kernels *k;
    int fast, stream;
} tokens_call;

static void tokens_member(void *arg) {
    const tokens_call *c = arg;
    int64_t begin, end;
    gradref__my_range(c->p->tokens, &begin, &end);
    if (begin < end) {
        if (c->fast)
            rows_fast(c->p, begin, end, c->stream, c->k);
        else
            gradref__rope_grad_ref_rows(c->p, begin, end);
    }
    if (c->stream) gradref__stream_fence();
}

void gradref__rope_grad_fast(const gradref__rope_plan *p, int threads) {
    tokens_call c;
    c.p = p;
    c.fast = dense_rows(p) && p->dtype != GRADREF_F64 && !p->terms &&
             (p->precision == GRADREF_PRECISION_DEFAULT || p->mode == GRADREF_ROPE_ATB);
    const int64_t T = p->tokens;
    const int64_t per_token = (p->stream[0].heads + p->stream[1].heads) * p->head_dim;
    c.stream = c.fast && (size_t)(T * per_token) * p->elem_size >= GRADREF__STREAM_MIN_BYTES;
    c.k = gradref__rope_kernels_for(p->max_isa);
    int team = T * per_token >= PARALLEL_MIN_ELEMENTS ? threads : 1;
    if ((int64_t)team > T) team = (int)T;
    gradref__run_team(team, tokens_member, &c);
}
