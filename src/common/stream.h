/* SPDX-License-Identifier: Apache-2.0 */
/* Copies that bypass the cache for outputs too large to stay in it: a streaming store skips
 * the read-for-ownership of the destination, so a pure copy moves 2 bytes per byte instead of
 * 3. The portable level's (SSE2, every x86-64; memcpy elsewhere): the kernel levels above it
 * stream with their own instructions. */
#ifndef GRADREF_COMMON_STREAM_H
#define GRADREF_COMMON_STREAM_H

#include <stddef.h>

/* Outputs at least this large are written with streaming stores by the copy-shaped kernels. */
#define GRADREF__STREAM_MIN_BYTES ((size_t)8 << 20)

/* Whether gradref__copy_stream streams (1: SSE2, every x86-64) or is a memcpy (0). */
#if defined(__SSE2__)
#  define GRADREF__COPY_STREAMS 1
#else
#  define GRADREF__COPY_STREAMS 0
#endif

/* memcpy with streaming stores for the whole 64-byte lines of dst (ordinary stores at its
 * ends). Call gradref__stream_fence() before the data is read by another thread. */
void gradref__copy_stream(void *dst, const void *src, size_t bytes);
void gradref__stream_fence(void);

#endif
