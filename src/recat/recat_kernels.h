/* SPDX-License-Identifier: Apache-2.0 */
/* recat's kernels, one ISA per file (recat_kernels.c portable, recat_avx2.c, recat_avx512.c,
 * recat_neon.c),
 * picked once per call. */
#ifndef GRADREF_RECAT_KERNELS_H
#define GRADREF_RECAT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Segments up to this many bytes are moved by small_rows. */
#define GRADREF__RECAT_SMALL_BYTES 64
/* Segments at least this long are streamed by stream_rows (shorter ones would share every line
 * with other rows). */
#define GRADREF__RECAT_STREAM_BYTES 64

typedef struct gradref__recat_kernels {
    const char *isa;
    /* rows segments of `bytes` (1..GRADREF__RECAT_SMALL_BYTES) from src, pitch bytes apart, to
     * consecutive segments of dst, each with a prefetch of dst `ahead` bytes on */
    void (*small_rows)(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                       size_t ahead);
    /* the same for segments of at least GRADREF__RECAT_STREAM_BYTES, with streaming stores for
     * every whole line of dst whatever its alignment: the line a row shares with the previous
     * one is assembled from both and streamed with the later row, when this thread writes
     * both: has_prev (has_next) says it wrote (writes) the row before (after) these. The lines
     * at a thread's ends take ordinary stores. The caller fences. */
    void (*stream_rows)(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                        int has_prev, int has_next);
} gradref__recat_kernels;

extern const gradref__recat_kernels gradref__recat_kernels_portable;
extern const gradref__recat_kernels gradref__recat_kernels_avx2;
extern const gradref__recat_kernels gradref__recat_kernels_avx512;
extern const gradref__recat_kernels gradref__recat_kernels_neon;

/* The portable small_rows (overlapping 16-byte moves); AVX2 and NEON take it under 16 bytes. */
void gradref__recat_small_rows(char *dst, const char *src, size_t pitch, size_t bytes, int64_t rows,
                               size_t ahead);
/* The portable stream_rows (gradref__copy_stream of whole lines); NEON takes it. */
void gradref__recat_stream_rows(char *dst, const char *src, size_t pitch, size_t bytes,
                                int64_t rows, int has_prev, int has_next);

/* The table of the highest level at or below max_isa (common/isa.h) that the CPU runs. */
const gradref__recat_kernels *gradref__recat_kernels_for(int max_isa);

#endif
