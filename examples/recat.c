/* SPDX-License-Identifier: Apache-2.0 */
/* recat: re-lay a pooled-embedding gradient (B, sumD) from the global layout into one block per
 * rank, as FBGEMM's recat_embedding_grad_output_mixed_D does before the all-to-all of the
 * backward pass. Checks its own output and exits non-zero on a mismatch. */
#include <stdio.h>

#include "gradref.h"

int main(void) {
    /* Two rows; rank 0 owns 2 columns, rank 1 owns 3. */
    float grad_output[2][5] = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}};
    const int64_t dim_sum_per_rank[2] = {2, 3};
    float out[10];
    const float expected[10] = {1, 2, 6, 7, 3, 4, 5, 8, 9, 10};

    gradref_tensor go, o;
    int64_t go_shape[2] = {2, 5}, out_shape[1] = {10};
    gradref_tensor_init(&go, grad_output, GRADREF_F32, 2, go_shape);
    gradref_tensor_init(&o, out, GRADREF_F32, 1, out_shape);

    gradref_status s =
        gradref_recat_embedding_grad_output_mixed_d(&go, dim_sum_per_rank, 2, &o, NULL);
    if (s != GRADREF_OK) {
        fprintf(stderr, "recat failed: %s: %s\n", gradref_status_string(s), gradref_last_error());
        return 1;
    }
    printf("out =");
    for (int i = 0; i < 10; i++)
        printf(" %g", out[i]);
    printf("\n");

    /* A bad split is reported, not crashed on, and leaves out as it was. */
    const int64_t bad_split[2] = {2, 4};
    s = gradref_recat_embedding_grad_output_mixed_d(&go, bad_split, 2, &o, NULL);
    printf("bad split -> %s: %s\n", gradref_status_string(s), gradref_last_error());

    for (int i = 0; i < 10; i++)
        if (out[i] != expected[i] || s != GRADREF_ERR_PARAM) {
            fprintf(stderr, "unexpected result\n");
            return 1;
        }
    printf("recat example: OK\n");
    return 0;
}
