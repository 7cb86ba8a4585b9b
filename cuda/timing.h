/* timing.h -- CUDA-event timing of a launcher (timing.cu). */
#ifndef ACC_TIMING_H
#define ACC_TIMING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A launcher: enqueues one run on `stream`, returns an acc_status. */
typedef int (*acc_run_fn)(void *ctx, void *stream);

/* Runs `run` reps times, each bracketed by events, after flushing L2 by writing
 * d_flush[flush_bytes] (cold runs; NULL = warm, back-to-back).  times_ms[reps] out. */
int acc_time_runs(acc_run_fn run, void *ctx, int reps, void *d_flush, size_t flush_bytes, void *stream,
                  float *times_ms);

#ifdef __cplusplus
}
#endif

#endif
