/*
 * timing.cu -- CUDA-event timing of one launcher, shared by the benchmark for our
 * kernels and cuSPARSE alike, so both are measured the same way.
 *
 * Each run is bracketed by its own event pair.  Before the start event the stream is
 * kept busy (a short spin kernel, or the L2 flush for cold runs), so the host's launch
 * latency is hidden and the events bracket only GPU execution.  Cold runs first write
 * a buffer larger than L2 (cudaMemsetAsync), evicting A, B and C.
 */
#include <vector>

#include "acc_cuda_internal.h"
#include "timing.h"

namespace {
__global__ void spin_kernel(long long ns) {
    const long long start = clock64();
    // ~1 GHz or more: cycles >= ns keeps the stream busy long enough on any current GPU.
    while (clock64() - start < ns)
        __nanosleep(1000);
}
} // namespace

extern "C" int acc_time_runs(acc_run_fn run, void *ctx, int reps, void *d_flush, size_t flush_bytes,
                             void *stream_ptr, float *times_ms) {
    if (reps <= 0 || !run || !times_ms) return ACC_ERR_INVALID_ARGUMENT;
    cudaStream_t s = (cudaStream_t)stream_ptr;
    std::vector<cudaEvent_t> ev(2 * (size_t)reps, nullptr);
    int st = ACC_SUCCESS;
    for (auto &e : ev) {
        st = acc_cuda_status(cudaEventCreate(&e), "cudaEventCreate");
        if (st) goto done;
    }
    for (int i = 0; i < reps; i++) {
        if (d_flush && flush_bytes) {
            st = acc_cuda_status(cudaMemsetAsync(d_flush, i & 0xff, flush_bytes, s), "flush");
            if (st) goto done;
        }
        spin_kernel<<<1, 1, 0, s>>>(50000);
        st = acc_cuda_status(cudaEventRecord(ev[2 * i], s), "cudaEventRecord");
        if (st) goto done;
        st = run(ctx, s);
        if (st) goto done;
        st = acc_cuda_status(cudaEventRecord(ev[2 * i + 1], s), "cudaEventRecord");
        if (st) goto done;
    }
    st = acc_cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (st) goto done;
    for (int i = 0; i < reps; i++) {
        st = acc_cuda_status(cudaEventElapsedTime(&times_ms[i], ev[2 * i], ev[2 * i + 1]),
                             "cudaEventElapsedTime");
        if (st) goto done;
    }
done:
    for (auto &e : ev)
        if (e) cudaEventDestroy(e);
    return st;
}
