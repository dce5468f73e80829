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
