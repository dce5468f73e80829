/* SPDX-License-Identifier: Apache-2.0 */
/* Descriptor validation shared by every operator (docs/api.md, "Validation"). */
#ifndef GRADREF_COMMON_TENSOR_H
#define GRADREF_COMMON_TENSOR_H

#include <stdint.h>

#include "internal.h"

/* What a validated tensor covers. */
typedef struct gradref__extent {
    int64_t numel;
    uintptr_t lo, hi; /* the bytes [lo, hi) holding its elements; lo == hi when numel == 0 */
} gradref__extent;

/* Bytes per element, 0 for a value that is not a gradref_dtype. */
size_t gradref__dtype_size(int32_t dtype);
/* "F32", "BF16", ...; "?" for a value that is not a gradref_dtype. */
const char *gradref__dtype_name(int32_t dtype);
int gradref__dtype_is_float(int32_t dtype);

/* A descriptor that can be read: t != NULL, a known dtype, 0 <= ndim <= 8, sizes and strides
 * >= 0, element count and byte span within int64_t/size_t/the address space, and data != NULL
 * and aligned to the element size when it has elements. Fills *ext (may be NULL). */
gradref_status gradref__check_tensor(const char *op, const char *name, const gradref_tensor *t,
                                     gradref__extent *ext);

/* As gradref__check_tensor, then the output rule: no two elements share memory. Dims of size 1
 * are ignored; sorted by stride, each stride must exceed the largest offset its smaller dims
 * reach (every permutation of a dense layout, and every slice of one, passes). */
gradref_status gradref__check_output(const char *op, const char *name, const gradref_tensor *t,
                                     gradref__extent *ext);

/* *local = *t with every stride of a size-1 dim set to 0, every stride of an empty tensor set to
 * 0, and the dims past ndim set to size 1, stride 0. A validated, normalised descriptor keeps
 * every later offset within the span validation checked, whatever strides the caller gave to
 * dims that address nothing; the copy also means the call never reads the caller's
 * descriptor again once it starts writing. */
void gradref__tensor_normalize(const gradref_tensor *t, gradref_tensor *local);

/* gradref__check_tensor / gradref__check_output, then gradref__tensor_normalize into *local. */
gradref_status gradref__take_input(const char *op, const char *name, const gradref_tensor *t,
                                   gradref_tensor *local, gradref__extent *ext);
gradref_status gradref__take_output(const char *op, const char *name, const gradref_tensor *t,
                                    gradref_tensor *local, gradref__extent *ext);

/* Whether t's elements fill their span exactly: dense in some order of its dims (NCDHW,
 * NDHWC, ...; dims of size 1 ignored). */
int gradref__tensor_dense(const gradref_tensor *t);

/* ALIAS when the count elements of elem_size bytes at array, stride elements apart (a caller's
 * list such as seq_lens, read while outputs are written), intersect an output. The list must
 * already fit in the address space (it is read during validation). */
gradref_status gradref__check_array(const char *op, const char *out_name,
                                    const gradref__extent *out, const char *array_name,
                                    const void *array, int64_t count, int64_t stride,
                                    size_t elem_size);

/* ALIAS when the byte ranges of an output and another tensor intersect (empty ones never do). */
gradref_status gradref__check_disjoint(const char *op, const char *out_name,
                                       const gradref__extent *out, const char *other_name,
                                       const gradref__extent *other);

/* Requires t->shape[dim] == want (SHAPE otherwise, naming `what` as the source of want). */
gradref_status gradref__check_dim(const char *op, const char *name, const gradref_tensor *t,
                                  int dim, int64_t want, const char *what);

/* Requires t->shape[dim] == a * b, the product checked for overflow. */
gradref_status gradref__check_dim_product(const char *op, const char *name, const gradref_tensor *t,
                                          int dim, int64_t a, int64_t b, const char *what);

/* Requires t->ndim == ndim (RANK otherwise). */
gradref_status gradref__check_rank(const char *op, const char *name, const gradref_tensor *t,
                                   int32_t ndim);

/* Blocked descriptors (gradref.h): the number of dims with a negative stride (0 for NULL or a
 * bad ndim). */
int gradref__blocked_dims(const gradref_tensor *t);

/* block[d] = the block size of dim d (1 for a plain dim), the slots validated (RANK, SHAPE,
 * STRIDE, OVERFLOW). t's ndim must be in range. */
gradref_status gradref__blocks_of(const char *op, const char *name, const gradref_tensor *t,
                                  int64_t *block);

/* The plain view of t with every dim d whose block[d] > 1 split into (shape/block, block): a
 * blocked dim by its own strides, a plain one of stride s as (s * block, s). The view indexes
 * the same elements in the same logical order. RANK when it needs more than 8 dims. */
gradref_status gradref__split_view(const char *op, const char *name, const gradref_tensor *t,
                                   const int64_t *block, gradref_tensor *view);

/* gradref__take_input / _output for tensors an operator reads blocked: a blocked t is checked
 * through its plain view (ext exact) and *local is then a dense row-major stand-in of its
 * logical shape at t->data, for the caller to point at a plain copy; *blocked tells which. */
gradref_status gradref__take_blockable(const char *op, const char *name, const gradref_tensor *t,
                                       int output, gradref_tensor *local, gradref__extent *ext,
                                       int *blocked);

/* One physical dim of a layout: logical dim `dim`, whole or split into blocks. */
enum { GRADREF__WHOLE = 0, GRADREF__BLOCKS = 1, GRADREF__INSIDE = 2 };
typedef struct gradref__phys {
    int8_t dim, part;
} gradref__phys;

/* A dense layout of the logical shape whose physical dims, outermost first, are order[0..nphys):
 * a dim named WHOLE, or BLOCKS (shape / block) and INSIDE (block); a split dim becomes a
 * blocked dim of *t. SHAPE when a split dim is not divisible by block. */
gradref_status gradref__init_blocked(const char *op, gradref_tensor *t, void *data,
                                     gradref_dtype dtype, int32_t ndim, const int64_t *shape,
                                     const gradref__phys *order, int nphys, int64_t block);

#endif
