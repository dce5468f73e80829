/* SPDX-License-Identifier: Apache-2.0 */
/* The public ABI, checked at compile time (built as C99 and as C++ by ctest): every enum value,
 * every public struct's size and field offsets, and every function's signature. A change here
 * is an ABI change: docs/api.md ("ABI rules") says which ones are allowed. */
#include <stddef.h>
#include <stdint.h>

#include "gradref.h"

/* C99 has no static_assert: an array of negative size fails to compile. */
#define ABI_ASSERT(name, cond) typedef char gradref_abi_##name[(cond) ? 1 : -1]

#define P sizeof(void *)
#define Z sizeof(size_t)

/* ---- values ---- */
ABI_ASSERT(max_dims, GRADREF_MAX_DIMS == 8);
ABI_ASSERT(max_threads, GRADREF_MAX_THREADS == 1024);
ABI_ASSERT(version,
           GRADREF_VERSION_NUMBER ==
               GRADREF_VERSION_MAJOR * 10000 + GRADREF_VERSION_MINOR * 100 + GRADREF_VERSION_PATCH);
ABI_ASSERT(dtype, GRADREF_F32 == 0 && GRADREF_F64 == 1 && GRADREF_F16 == 2 && GRADREF_BF16 == 3 &&
                      GRADREF_I8 == 4 && GRADREF_I32 == 5 && GRADREF_I64 == 6);
ABI_ASSERT(status, GRADREF_OK == 0 && GRADREF_ERR_NULL == 1 && GRADREF_ERR_DTYPE == 2 &&
                       GRADREF_ERR_RANK == 3 && GRADREF_ERR_SHAPE == 4 && GRADREF_ERR_STRIDE == 5 &&
                       GRADREF_ERR_PARAM == 6 && GRADREF_ERR_OVERFLOW == 7 &&
                       GRADREF_ERR_ALIAS == 8 && GRADREF_ERR_NO_MEMORY == 9 &&
                       GRADREF_ERR_WORKSPACE == 10);
ABI_ASSERT(precision, GRADREF_PRECISION_DEFAULT == 0 && GRADREF_PRECISION_HIGH == 1 &&
                          GRADREF_PRECISION_HF32 == 2 && GRADREF_PRECISION_HF32_910B == 3 &&
                          GRADREF_PRECISION_MEGENGINE_DEFAULT == 4);
ABI_ASSERT(strict_flag, GRADREF_STRICT_UPSTREAM == 0x100);
ABI_ASSERT(padded_zeros_flag, GRADREF_PADDED_ZEROS == 0x200);
ABI_ASSERT(term_magnitudes_flag, GRADREF_TERM_MAGNITUDES == 0x400);
ABI_ASSERT(term_counts_flag, GRADREF_TERM_COUNTS == 0x800);
ABI_ASSERT(format, GRADREF_FORMAT_NCHW == 0 && GRADREF_FORMAT_NHWC == 1 &&
                       GRADREF_FORMAT_NCDHW == 2 && GRADREF_FORMAT_NDHWC == 3 &&
                       GRADREF_FORMAT_DHWCN == 4 && GRADREF_FORMAT_HWCN == 5 &&
                       GRADREF_FORMAT_NCHW4 == 6 && GRADREF_FORMAT_NHWCD4 == 7 &&
                       GRADREF_FORMAT_NHWCD4_DOT == 8);
ABI_ASSERT(interp, GRADREF_INTERP_BILINEAR == 0 && GRADREF_INTERP_NEAREST == 1);
ABI_ASSERT(padding,
           GRADREF_PAD_ZEROS == 0 && GRADREF_PAD_BORDER == 1 && GRADREF_PAD_REFLECTION == 2);
ABI_ASSERT(conv_mode, GRADREF_CONV_CROSS_CORRELATION == 0 && GRADREF_CONV_CONVOLUTION == 1);
ABI_ASSERT(rope_mode,
           GRADREF_ROPE_ATB == 0 && GRADREF_ROPE_HALF == 1 && GRADREF_ROPE_INTERLEAVED == 2);

/* ---- structs: size and every field's offset ---- */
ABI_ASSERT(tensor_size, sizeof(gradref_tensor) == P + 8 + 2 * 8 * GRADREF_MAX_DIMS);
ABI_ASSERT(tensor_fields, offsetof(gradref_tensor, data) == 0 &&
                              offsetof(gradref_tensor, dtype) == P &&
                              offsetof(gradref_tensor, ndim) == P + 4 &&
                              offsetof(gradref_tensor, shape) == P + 8 &&
                              offsetof(gradref_tensor, strides) == P + 8 + 8 * GRADREF_MAX_DIMS);
ABI_ASSERT(exec_size, sizeof(gradref_exec) == P + Z + 8);
ABI_ASSERT(exec_fields, offsetof(gradref_exec, workspace) == 0 &&
                            offsetof(gradref_exec, workspace_bytes) == P &&
                            offsetof(gradref_exec, num_threads) == P + Z &&
                            offsetof(gradref_exec, precision) == P + Z + 4);
ABI_ASSERT(grid_params, sizeof(gradref_grid_sampler3d_params) == 12 &&
                            offsetof(gradref_grid_sampler3d_params, interpolation) == 0 &&
                            offsetof(gradref_grid_sampler3d_params, padding) == 4 &&
                            offsetof(gradref_grid_sampler3d_params, align_corners) == 8);
ABI_ASSERT(conv_params, sizeof(gradref_conv_params) == 8 + 12 * 8 &&
                            offsetof(gradref_conv_params, mode) == 0 &&
                            offsetof(gradref_conv_params, groups) == 4 &&
                            offsetof(gradref_conv_params, stride) == 8 &&
                            offsetof(gradref_conv_params, dilation) == 32 &&
                            offsetof(gradref_conv_params, pad) == 56);
ABI_ASSERT(qs8_scales,
           sizeof(gradref_qs8_scales) == 12 && offsetof(gradref_qs8_scales, filter) == 0 &&
               offsetof(gradref_qs8_scales, diff) == 4 && offsetof(gradref_qs8_scales, grad) == 8);
ABI_ASSERT(rope_params, sizeof(gradref_rope_params) == 16 + 2 * P &&
                            offsetof(gradref_rope_params, mode) == 0 &&
                            offsetof(gradref_rope_params, head_dim) == 4 &&
                            offsetof(gradref_rope_params, rotary_dim) == 8 &&
                            offsetof(gradref_rope_params, num_seqs) == 12 &&
                            offsetof(gradref_rope_params, seq_lens) == 16 &&
                            offsetof(gradref_rope_params, start_positions) == 16 + P);
ABI_ASSERT(enum_size,
           sizeof(gradref_dtype) == sizeof(int) && sizeof(gradref_status) == sizeof(int));

/* ---- signatures: each function assigned to a pointer of its exact type ---- */
typedef const gradref_tensor *T;
typedef gradref_status (*op4)(const gradref_conv_params *, T, T, T, const gradref_exec *);
typedef gradref_status (*ws4)(const gradref_conv_params *, T, T, T, size_t *);

int gradref_abi_signatures(void);
int gradref_abi_signatures(void) {
    const char *(*status_string)(gradref_status) = gradref_status_string;
    const char *(*last_error)(void) = gradref_last_error;
    const char *(*version)(void) = gradref_version;
    gradref_status (*init)(gradref_tensor *, void *, gradref_dtype, int32_t, const int64_t *) =
        gradref_tensor_init;
    gradref_status (*init_format)(gradref_tensor *, void *, gradref_dtype, gradref_format,
                                  const int64_t *) = gradref_tensor_init_format;
    gradref_status (*copy)(T, T, const gradref_exec *) = gradref_copy;
    gradref_status (*gs3d)(const gradref_grid_sampler3d_params *, T, T, T, T, T,
                           const gradref_exec *) = gradref_grid_sampler3d_grad;
    gradref_status (*gs3d_ws)(const gradref_grid_sampler3d_params *, T, T, T, T, T, size_t *) =
        gradref_grid_sampler3d_grad_workspace_size;
    op4 cbd = gradref_conv_backprop_data, c3f = gradref_conv3d_backprop_filter;
    ws4 cbd_ws = gradref_conv_backprop_data_workspace_size,
        c3f_ws = gradref_conv3d_backprop_filter_workspace_size;
    gradref_status (*cbd_qs8)(const gradref_conv_params *, const gradref_qs8_scales *, T, T, T,
                              const gradref_exec *) = gradref_conv_backprop_data_qs8;
    gradref_status (*cbd_qs8_ws)(const gradref_conv_params *, const gradref_qs8_scales *, T, T, T,
                                 size_t *) = gradref_conv_backprop_data_qs8_workspace_size;
    gradref_status (*filter_format)(gradref_tensor *, void *, gradref_dtype, gradref_format,
                                    int32_t, const int64_t *) = gradref_conv_filter_init_format;
    gradref_status (*filter_cann)(gradref_tensor *, void *, gradref_dtype, gradref_format, int32_t,
                                  const int64_t *, int32_t) = gradref_conv3d_filter_init_cann;
    gradref_status (*pads_same)(gradref_conv_params *, int32_t, const int64_t *, const int64_t *) =
        gradref_conv_pads_same;
    int32_t (*transpose_needed)(int32_t, int64_t, int64_t, int64_t, int64_t, int32_t) =
        gradref_conv3d_dw_transpose_needed;
    gradref_status (*rope)(const gradref_rope_params *, T, T, T, T, T, T, const gradref_exec *) =
        gradref_rope_grad;
    gradref_status (*rope_ws)(const gradref_rope_params *, T, T, T, T, T, T, size_t *) =
        gradref_rope_grad_workspace_size;
    gradref_status (*recat)(T, const int64_t *, int32_t, T, const gradref_exec *) =
        gradref_recat_embedding_grad_output;
    gradref_status (*recat_ws)(T, const int64_t *, int32_t, T, size_t *) =
        gradref_recat_embedding_grad_output_workspace_size;
    gradref_status (*mixed)(T, const int64_t *, int32_t, T, const gradref_exec *) =
        gradref_recat_embedding_grad_output_mixed_d;
    gradref_status (*mixed_ws)(T, const int64_t *, int32_t, T, size_t *) =
        gradref_recat_embedding_grad_output_mixed_d_workspace_size;
    gradref_status (*batch)(T, T, T, T, const gradref_exec *) =
        gradref_recat_embedding_grad_output_mixed_d_batch;
    gradref_status (*batch_ws)(T, T, T, T, size_t *) =
        gradref_recat_embedding_grad_output_mixed_d_batch_workspace_size;
    const void *all[] = {(const void *)&status_string, (const void *)&last_error,
                         (const void *)&version,       (const void *)&init,
                         (const void *)&init_format,   (const void *)&copy,
                         (const void *)&gs3d,          (const void *)&gs3d_ws,
                         (const void *)&cbd,           (const void *)&c3f,
                         (const void *)&cbd_ws,        (const void *)&c3f_ws,
                         (const void *)&pads_same,     (const void *)&transpose_needed,
                         (const void *)&rope,          (const void *)&rope_ws,
                         (const void *)&recat,         (const void *)&recat_ws,
                         (const void *)&mixed,         (const void *)&mixed_ws,
                         (const void *)&batch,         (const void *)&batch_ws,
                         (const void *)&cbd_qs8,       (const void *)&cbd_qs8_ws,
                         (const void *)&filter_format, (const void *)&filter_cann};
    return (int)(sizeof all / sizeof all[0]);
}
