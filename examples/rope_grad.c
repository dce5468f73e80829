/* SPDX-License-Identifier: Apache-2.0 */
/* rope_grad: the backward of rotary position embedding for two packed sequences, in ATB's
 * mode and as the exact adjoint (rotate_half), on the worked example of docs/rope_grad.md.
 * Checks its own output and exits non-zero on a mismatch. */
#include <stdio.h>

#include "gradref.h"

int main(void) {
    /* One head of dim 4; two sequences of 1 token each; the second starts at position 1. */
    float cos[2][4] = {{1, 1, 1, 1}, {1, 2, 3, 4}};
    float sin[2][4] = {{0, 0, 0, 0}, {5, 6, 7, 8}};
    float q_embed_grad[2][4] = {{1, 2, 3, 4}, {1, 10, 100, 1000}};
    float k_embed_grad[2][4] = {{4, 3, 2, 1}, {1, 10, 100, 1000}};
    float q_grad[2][4], k_grad[2][4];
    const int32_t seq_lens[2] = {1, 1};
    const int64_t start_positions[2] = {0, 1};

    gradref_tensor q, k, c, s, dq, dk;
    int64_t rows4[2] = {2, 4};
    gradref_tensor_init(&q, q_embed_grad, GRADREF_F32, 2, rows4);
    gradref_tensor_init(&k, k_embed_grad, GRADREF_F32, 2, rows4);
    gradref_tensor_init(&c, cos, GRADREF_F32, 2, rows4);
    gradref_tensor_init(&s, sin, GRADREF_F32, 2, rows4);
    gradref_tensor_init(&dq, q_grad, GRADREF_F32, 2, rows4);
    gradref_tensor_init(&dk, k_grad, GRADREF_F32, 2, rows4);

    static const float want[3][4] = {{8, 100, -200, -2000},  /* ATB */
                                     {701, 8020, 295, 3940}, /* exact adjoint, rotate_half */
                                     {61, 15, 8300, 3300}};  /* exact adjoint, interleaved */
    static const char *names[3] = {"ATB", "HALF", "INTERLEAVED"};
    int bad = 0;
    for (int32_t mode = 0; mode < 3; mode++) {
        gradref_rope_params p = {mode, 4, 0, 2, seq_lens, start_positions};
        gradref_status st = gradref_rope_grad(&p, &q, &k, &c, &s, &dq, &dk, NULL);
        if (st != GRADREF_OK) {
            fprintf(stderr, "rope_grad: %s\n", gradref_last_error());
            return 1;
        }
        printf("%-12s q_grad[1] = %g %g %g %g\n", names[mode], q_grad[1][0], q_grad[1][1],
               q_grad[1][2], q_grad[1][3]);
        for (int j = 0; j < 4; j++) {
            bad |= q_grad[1][j] != want[mode][j];
            /* position 0 has cos 1, sin 0: every mode passes the gradient through */
            bad |= q_grad[0][j] != q_embed_grad[0][j] || k_grad[0][j] != k_embed_grad[0][j];
        }
    }
    /* A token count that does not match seq_lens is an error, not an out-of-bounds read. */
    const int32_t wrong[2] = {1, 2};
    gradref_rope_params p = {GRADREF_ROPE_ATB, 4, 0, 2, wrong, NULL};
    gradref_status st = gradref_rope_grad(&p, &q, &k, &c, &s, &dq, &dk, NULL);
    printf("bad seq_lens -> %s: %s\n", gradref_status_string(st), gradref_last_error());
    bad |= st != GRADREF_ERR_PARAM;
    /* Strict ATB validation: RopeGrad takes F16 and head 128 only, so this F32 call is refused
     * before anything is written (without the flag it is the ATB call above). */
    gradref_rope_params atb = {GRADREF_ROPE_ATB, 4, 0, 2, seq_lens, NULL};
    const gradref_exec strict = {NULL, 0, 0, GRADREF_PRECISION_DEFAULT | GRADREF_STRICT_UPSTREAM};
    st = gradref_rope_grad(&atb, &q, &k, &c, &s, &dq, &dk, &strict);
    printf("strict ATB -> %s: %s\n", gradref_status_string(st), gradref_last_error());
    bad |= st != GRADREF_ERR_DTYPE;
    if (bad) {
        fprintf(stderr, "unexpected result\n");
        return 1;
    }
    printf("rope_grad example: OK\n");
    return 0;
}
