/* SPDX-License-Identifier: Apache-2.0 */
/* A user program: includes the installed header, links the installed library. */
#include <stdio.h>
#include <string.h>

#include <gradref.h>

int main(void) {
    if (strcmp(gradref_version(), GRADREF_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s but library %s\n", GRADREF_VERSION_STRING, gradref_version());
        return 1;
    }
    float go[6] = {1, 2, 3, 4, 5, 6}, out[6];
    const float want[6] = {1, 4, 2, 3, 5, 6};
    int64_t shape[2] = {2, 3}, n = 6, dims[2] = {1, 2};
    gradref_tensor g, o;
    gradref_tensor_init(&g, go, GRADREF_F32, 2, shape);
    gradref_tensor_init(&o, out, GRADREF_F32, 1, &n);
    gradref_status s = gradref_recat_embedding_grad_output_mixed_d(&g, dims, 2, &o, NULL);
    if (s != GRADREF_OK || memcmp(out, want, sizeof want) != 0) {
        fprintf(stderr, "recat: %s %s\n", gradref_status_string(s), gradref_last_error());
        return 1;
    }
    printf("consumer: gradref %s OK\n", gradref_version());
    return 0;
}
