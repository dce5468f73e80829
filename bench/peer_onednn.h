/* SPDX-License-Identifier: Apache-2.0 */
/* Same-run peers for gradref-bench. */
#ifndef GRADREF_BENCH_PEER_ONEDNN_H
#define GRADREF_BENCH_PEER_ONEDNN_H

#include <stdint.h>

/* A convolution: rank spatial dims, sizes of the forward input (I), output (O), kernel (K). */
typedef struct peer_conv {
    int rank;
    int64_t N, G, ICpg, OCpg;
    int64_t K[3], I[3], O[3], stride[3], dil[3], pad_begin[3], pad_end[3];
    int channels_last; /* the activations' layout for a plain peer (else NC + spatial) */
} peer_conv;

/* The peer's `plain` modes: its own formats (0), the operator's layouts through reorders, or
 * the operator's activation layouts in the convolution itself. */
enum { PEER_PLAIN_REORDERS = 1, PEER_PLAIN_LAYOUTS = 2 };

/* oneDNN's f32 convolution backward-data, ready to run; NULL when the bench was built without
 * oneDNN (or oneDNN refused the problem). It runs in the memory formats it picks (its fastest
 * setting); with PEER_PLAIN_REORDERS it takes and returns tensors in the operator's layouts
 * (activations row-major or channels last, weights row-major) and each run includes its
 * reorders to and from its own formats: what a caller holding those layouts pays; with
 * PEER_PLAIN_LAYOUTS the convolution itself takes the activations in those layouts, its weights
 * in the format it picks, and runs no reorders. */
typedef struct peer_onednn peer_onednn;
peer_onednn *peer_onednn_conv_bwd_data(const peer_conv *c, int threads, int plain);
/* The same for the weight gradient (backward weights, no bias). */
peer_onednn *peer_onednn_conv_bwd_weights(const peer_conv *c, int threads, int plain);
/* One execution (waits for it); 0 on success. */
int peer_onednn_run(peer_onednn *h);
void peer_onednn_free(peer_onednn *h);
/* The instruction set oneDNN's kernels run at in this process ("avx2", "avx512_core", ...; its
 * ONEDNN_MAX_CPU_ISA cap included), or "none" without oneDNN. */
const char *peer_onednn_isa(void);

#endif
