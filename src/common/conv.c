/* SPDX-License-Identifier: Apache-2.0 */
#include "conv.h"

#include "internal.h"

gradref_status gradref__conv_check_params(const char *op, const gradref_conv_params *p) {
    if (p == NULL) return gradref__fail(GRADREF_ERR_NULL, op, "p is NULL");
    if (p->mode != GRADREF_CONV_CROSS_CORRELATION && p->mode != GRADREF_CONV_CONVOLUTION)
        return gradref__fail(GRADREF_ERR_PARAM, op,
                             "p.mode is %d, not a gradref_conv_mode (0 cross-correlation, "
                             "1 convolution)",
                             (int)p->mode);
    if (p->groups < 0)
        return gradref__fail(GRADREF_ERR_PARAM, op, "p.groups is %d, below 0", (int)p->groups);
    return GRADREF_OK;
}

gradref_status gradref__conv_check_dim(const char *op, const gradref_conv_params *p, int j,
                                       const char *kernel, int kdim, int64_t k, const char *in,
                                       int64_t i, const char *out, int64_t o) {
    const int64_t st = p->stride[j], dl = p->dilation[j], pb = p->pad[2 * j],
                  pe = p->pad[2 * j + 1];
    if (st < 1)
        return gradref__fail(GRADREF_ERR_PARAM, op, "p.stride[%d] is %lld; it must be >= 1", j,
                             (long long)st);
    if (dl < 1)
        return gradref__fail(GRADREF_ERR_PARAM, op, "p.dilation[%d] is %lld; it must be >= 1", j,
                             (long long)dl);
    if (pb < 0 || pe < 0)
        return gradref__fail(GRADREF_ERR_PARAM, op,
                             "p.pad[%d] and p.pad[%d] are %lld and %lld; pads must be >= 0", 2 * j,
                             2 * j + 1, (long long)pb, (long long)pe);
    if (k < 1)
        return gradref__fail(GRADREF_ERR_SHAPE, op,
                             "%s.shape[%d] is %lld; kernel sizes must be >= 1", kernel, kdim,
                             (long long)k);
    int64_t ext, span;
    if (gradref__mul_ovf(dl, k - 1, &ext) || gradref__add_ovf(ext, 1, &ext) ||
        gradref__add_ovf(i, pb, &span) || gradref__add_ovf(span, pe, &span))
        return gradref__fail(GRADREF_ERR_OVERFLOW, op,
                             "spatial dim %d: the dilated kernel or the padded size exceeds int64",
                             j);
    if (span < ext)
        return gradref__fail(GRADREF_ERR_SHAPE, op,
                             "%s.shape[%d] is %lld: with pads %lld+%lld it is smaller than the "
                             "dilated kernel (%lld)",
                             in, 2 + j, (long long)i, (long long)pb, (long long)pe, (long long)ext);
    const int64_t want = (span - ext) / st + 1;
    if (o != want)
        return gradref__fail(GRADREF_ERR_SHAPE, op,
                             "%s.shape[%d] is %lld but the geometry gives %lld", out, 2 + j,
                             (long long)o, (long long)want);
    return GRADREF_OK;
}

gradref_status gradref_conv_pads_same(gradref_conv_params *p, int32_t spatial_dims,
                                      const int64_t *input_size, const int64_t *kernel_size) {
    static const char SAME[] = "conv_pads_same";
    if (p == NULL) return gradref__fail(GRADREF_ERR_NULL, SAME, "p is NULL");
    if (spatial_dims < 1 || spatial_dims > 3)
        return gradref__fail(GRADREF_ERR_PARAM, SAME, "spatial_dims is %d; it must be 1, 2 or 3",
                             (int)spatial_dims);
    if (input_size == NULL || kernel_size == NULL)
        return gradref__fail(GRADREF_ERR_NULL, SAME, "%s is NULL",
                             input_size == NULL ? "input_size" : "kernel_size");
    int64_t pads[6];
    for (int j = 0; j < spatial_dims; j++) {
        const int64_t in = input_size[j], k = kernel_size[j], st = p->stride[j],
                      dl = p->dilation[j];
        if (st < 1 || dl < 1)
            return gradref__fail(GRADREF_ERR_PARAM, SAME,
                                 "p.stride[%d] is %lld and p.dilation[%d] is %lld; both must be "
                                 ">= 1",
                                 j, (long long)st, j, (long long)dl);
        if (in < 0 || k < 1)
            return gradref__fail(GRADREF_ERR_PARAM, SAME,
                                 "input_size[%d] is %lld and kernel_size[%d] is %lld; sizes must "
                                 "be >= 0 and kernels >= 1",
                                 j, (long long)in, j, (long long)k);
        int64_t ext, need, last;
        const int64_t out = in / st + (in % st != 0); /* ceil(in / stride) */
        if (gradref__mul_ovf(dl, k - 1, &ext) || gradref__add_ovf(ext, 1, &ext) ||
            gradref__mul_ovf(out > 0 ? out - 1 : 0, st, &last) ||
            gradref__add_ovf(last, ext, &need))
            return gradref__fail(GRADREF_ERR_OVERFLOW, SAME,
                                 "spatial dim %d: the padded extent exceeds int64", j);
        need -= in;
        if (need < 0) need = 0;
        pads[2 * j] = need / 2;
        pads[2 * j + 1] = need - need / 2;
    }
    for (int j = 0; j < spatial_dims; j++) {
        p->pad[2 * j] = pads[2 * j];
        p->pad[2 * j + 1] = pads[2 * j + 1];
    }
    return GRADREF_OK;
}
