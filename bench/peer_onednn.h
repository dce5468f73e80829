/* Same-run peers for gradref-bench. */
#ifndef GRADREF_BENCH_PEER_ONEDNN_H
#define GRADREF_BENCH_PEER_ONEDNN_H

#include <stdint.h>

/* A convolution: rank spatial dims, sizes of the forward input (I), output (O), kernel (K). */
typedef struct peer_conv {
    int rank;
    int64_t N, G, ICpg, OCpg;
    int64_t K[3], I[3], O[3], stride[3], dil[3], pad_begin[3], pad_end[3];
} peer_conv;

/* Median seconds of oneDNN's f32 convolution backward-data on the problem, or -1 when the bench
 * was built without oneDNN (or oneDNN refused the problem). */
double peer_onednn_conv_bwd_data(const peer_conv *c, int threads, int repeats);

#endif
