/* SPDX-License-Identifier: Apache-2.0 */
/* gradref_copy between any two layouts and dtypes, and the descriptor helpers. */
#include <string.h>

#include "fuzz.h"

typedef struct copy_args {
    gradref_tensor src, dst;
} copy_args;

static gradref_status run_copy(void *ctx, const gradref_exec *exec) {
    copy_args *a = ctx;
    return gradref_copy(&a->src, &a->dst, exec);
}

/* tensor_init, tensor_init_format and conv_pads_same write only their output struct. */
static void helpers(fz *f) {
    int64_t shape[GRADREF_MAX_DIMS + 1];
    for (int i = 0; i <= GRADREF_MAX_DIMS; i++)
        shape[i] = fz_one_in(f, 8) ? (int64_t)fz_bits(f, 8) : fz_range(f, -1, 9);
    gradref_tensor t, before;
    memset(&t, 0x5a, sizeof t);
    before = t;
    gradref_status s;
    if (fz_one_in(f, 2))
        s = gradref_tensor_init(fz_one_in(f, 16) ? NULL : &t, fz_arena,
                                (gradref_dtype)fz_range(f, -1, 8), (int32_t)fz_range(f, -1, 9),
                                fz_one_in(f, 16) ? NULL : shape);
    else
        s = gradref_tensor_init_format(fz_one_in(f, 16) ? NULL : &t, fz_arena,
                                       (gradref_dtype)fz_range(f, -1, 8),
                                       (gradref_format)fz_range(f, -1, 7), shape);
    if (s != GRADREF_OK && memcmp(&t, &before, sizeof t) != 0)
        fz_fail("a failed tensor_init changed its output", NULL);

    gradref_conv_params p, pb;
    memset(&p, 0, sizeof p);
    for (int j = 0; j < 3; j++) {
        p.stride[j] = fz_one_in(f, 8) ? (int64_t)fz_bits(f, 8) : fz_range(f, -1, 4);
        p.dilation[j] = fz_one_in(f, 8) ? (int64_t)fz_bits(f, 8) : fz_range(f, -1, 4);
    }
    pb = p;
    int64_t in[3], k[3];
    for (int j = 0; j < 3; j++) {
        in[j] = fz_one_in(f, 8) ? (int64_t)fz_bits(f, 8) : fz_range(f, -1, 40);
        k[j] = fz_one_in(f, 8) ? (int64_t)fz_bits(f, 8) : fz_range(f, -1, 5);
    }
    s = gradref_conv_pads_same(&p, (int32_t)fz_range(f, -1, 4), in, k);
    if (s != GRADREF_OK && memcmp(&p, &pb, sizeof p) != 0)
        fz_fail("a failed conv_pads_same changed its output", NULL);
    (void)gradref_conv3d_dw_transpose_needed((int32_t)fz_range(f, -1, 6), (int64_t)fz_bits(f, 8),
                                             (int64_t)fz_bits(f, 8), (int64_t)fz_bits(f, 8),
                                             (int64_t)fz_bits(f, 8), (int32_t)fz_range(f, -1, 2));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = {data, size};
    fz_begin(&f);
    if (fz_one_in(&f, 4)) {
        helpers(&f);
        return 0;
    }
    copy_args a;
    const int32_t ndim =
        fz_one_in(&f, 8) ? (int32_t)fz_range(&f, 0, 8) : (int32_t)fz_range(&f, 0, 4);
    int64_t shape[GRADREF_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        shape[i] = fz_one_in(&f, 10) ? fz_range(&f, 0, 70) : fz_range(&f, 0, ndim > 4 ? 3 : 12);
    const int32_t sdt = (int32_t)fz_range(&f, 0, 6);
    const int32_t ddt = fz_one_in(&f, 2) ? sdt : (int32_t)fz_range(&f, 0, 6);
    if (!fz_tensor(&f, &a.src, sdt, ndim, shape, 0, 1)) return 0;
    if (!fz_tensor(&f, &a.dst, ddt, ndim, shape, 1, 1)) return 0;
    fz_call c = {"copy", run_copy, NULL, &a, {&a.dst, NULL}, 0};
    fz_check(&f, &c);
    return 0;
}
