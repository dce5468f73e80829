/* SPDX-License-Identifier: Apache-2.0 */
#include "stream.h"

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#  include <emmintrin.h>

void gradref__copy_stream(void *dst, const void *src, size_t bytes) {
    char *d = dst;
    const char *s = src;
    /* Only whole 64-byte lines are streamed: a partial line would be flushed from the
     * write-combining buffer as a partial write, which costs a read at the memory. */
    size_t head = (64u - ((uintptr_t)d & 63u)) & 63u;
    if (head > bytes) head = bytes;
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    size_t i = 0;
    for (; i + 64 <= bytes; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a);
        _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(d + i + 48), e);
    }
    memcpy(d + i, s + i, bytes - i);
}

void gradref__stream_fence(void) {
    _mm_sfence();
}

#else

void gradref__copy_stream(void *dst, const void *src, size_t bytes) {
    memcpy(dst, src, bytes);
}
void gradref__stream_fence(void) {}

#endif
