/* SPDX-License-Identifier: Apache-2.0 */
/* cbd_phases.c: the stride phases: their taps, panels, GEMMs and direct tiles. */
#ifndef GRADREF_CBD_PHASES_H
#define GRADREF_CBD_PHASES_H

#include "cbd_run.h"

/* The taps reaching stride phase ph (its offsets along the three dims), in the reference's
 * order (diff positions ascending): per tap its stored index and its 3 shifts (diff index =
 * sub-grid index + shift). Returns how many (at most K0 * K1 * K2). */
int64_t gradref__cbd_phase_taps(const gradref__cbd_plan *p, const int64_t *ph, int64_t *tap);

/* The live phases along each dim into `at` (K[0] + K[1] + K[2] slots): the offsets
 * (k * dilation - pad_begin) mod stride of the taps, distinct, ascending, below the grad size.
 * A huge stride thus costs nothing: the other phases hold no tap and stay +0. */
void gradref__cbd_live_phases(cbd_run *R, int64_t *at);

/* Whether every stride phase that has pixels and taps runs direct tiles (item_phase). */
int gradref__cbd_all_direct(const cbd_run *R, int64_t *tap);

/* Filter rows [ic0, ic0 + rows) of group g for a phase's taps, straight from the filter, as
 * the GEMM's A panels are laid out (gemm.h): k = (tap, oc) ascending, mr floats each, the rows
 * past `rows` zero. With check, returns 0 when a value is not finite (else 1). */
int gradref__cbd_pack_panel(const gradref__cbd_plan *p, int64_t g, int64_t ic0, int64_t rows,
                            const int64_t *tap, int64_t ntaps, int64_t mr, int check, float *dst);

/* Each live phase's taps, and where each (group, phase) starts in the panels, before the
 * region. */
void gradref__cbd_panel_offsets(cbd_run *R, const cbd_layout *L, char *base);

/* This thread's share of the panels of every (group, live phase), or all of them with `all`
 * (private panels), inside the region: the filter is read once per call, into the panels the
 * tiles and the GEMM take, a block of input channels at a time for every live phase. Returns 0
 * when a value it read is not finite. */
int gradref__cbd_pack_panels(const cbd_run *R, int all);

/* One work item: channels [ic0, ic1) of image n, group g, every stride phase in turn. */
void gradref__cbd_item_gemm(const cbd_run *R, int64_t n, int64_t g, int64_t ic0, int64_t ic1,
                            const cbd_scratch *S);
#endif
