/* staging.cu -- host-to-device copies of pageable host arrays through pinned memory.
 *
 * cudaMemcpyAsync from pageable memory makes the driver copy the source into its own pinned
 * staging on the calling thread, one array at a time: about 5 GB/s on the GPU machine's host,
 * and 50-100 us of fixed cost per array for small ones.  Here the arrays go through two pinned
 * chunks of the library's (per device, allocated at first use and kept for the process): the
 * host's threads copy a chunk (every segment that falls in it) while the DMA of the previous chunk
 * runs, and each chunk is one cudaMemcpyAsync per segment piece, in stream order.  A chunk is
 * reused only after an event says its DMA is done, so the caller's host arrays may go as soon as
 * acc_h2d_staged returns, and the copies are ordered before later work on the stream.  Uploads
 * from several host threads take turns (a mutex).  Where pinned memory cannot be had, the copies
 * fall back to cudaMemcpyAsync from the pageable arrays. */
#include "acc_cuda_internal.h"
#include "accspmm_cuda.h"

#include <cstring>
#include <mutex>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

constexpr size_t kChunk = size_t(4) << 20; /* bytes per pinned chunk (two per device) */

struct Stage {
    char *buf[2] = {nullptr, nullptr};
    cudaEvent_t done[2] = {nullptr, nullptr};
    bool pending[2] = {false, false};
    bool failed = false; /* no pinned memory: pageable copies from now on */
};

std::mutex g_lock;
Stage g_stage[kMaxDevices];

bool ready(Stage &st) {
    if (st.failed) return false;
    if (st.buf[0]) return true;
    for (int b = 0; b < 2; b++) {
        if (cudaHostAlloc((void **)&st.buf[b], kChunk, cudaHostAllocPortable) != cudaSuccess ||
            cudaEventCreateWithFlags(&st.done[b], cudaEventDisableTiming) != cudaSuccess) {
            cudaGetLastError(); /* not sticky: clear it */
            for (int c = 0; c < 2; c++) {
                if (st.buf[c]) cudaFreeHost(st.buf[c]);
                if (st.done[c]) cudaEventDestroy(st.done[c]);
                st.buf[c] = nullptr;
                st.done[c] = nullptr;
            }
            st.failed = true;
            return false;
        }
    }
    return true;
}

/* dst <- src, n bytes, on up to one thread per 512 KiB from 2 MiB on: below that one thread, as a
 * sleeping OpenMP thread takes longer to wake than a small piece takes to copy */
void copy_parallel(char *dst, const char *src, size_t n) {
#ifdef _OPENMP
    const size_t piece = size_t(512) << 10;
    int threads = n >= (size_t(2) << 20) ? (int)(n / piece) + 1 : 1, max = omp_get_max_threads();
    if (threads > max) threads = max;
    if (threads > 1) {
        const size_t per = (n + (size_t)threads - 1) / (size_t)threads;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int t = 0; t < threads; t++) {
            const size_t lo = (size_t)t * per, hi = lo + per < n ? lo + per : n;
            if (lo < hi) memcpy(dst + lo, src + lo, hi - lo);
        }
        return;
    }
#endif
    memcpy(dst, src, n);
}

/* The current device's staging chunks in *st, or NULL where pinned memory cannot be had (the caller
 * holds g_lock). */
int current_stage(Stage **st) {
    int dev = 0;
    ACC_CUDA_TRY(cudaGetDevice(&dev));
    *st = dev < kMaxDevices && ready(g_stage[dev]) ? &g_stage[dev] : nullptr;
    return ACC_SUCCESS;
}

/* Every segment by cudaMemcpyAsync of `kind` from or to pageable memory (no staging). */
template <typename Seg> int pageable_copies(const Seg *segs, int nseg, cudaMemcpyKind kind, cudaStream_t s) {
    for (int i = 0; i < nseg; i++)
        if (segs[i].bytes) ACC_CUDA_TRY(cudaMemcpyAsync(segs[i].dst, segs[i].src, segs[i].bytes, kind, s));
    return ACC_SUCCESS;
}

} // namespace

extern "C" int acc_h2d_staged(const acc_h2d_segment *segs, int nseg, void *stream) {
    if (nseg < 0 || (nseg > 0 && !segs)) return ACC_ERR_INVALID_ARGUMENT;
    cudaStream_t s = (cudaStream_t)stream;
    std::lock_guard<std::mutex> guard(g_lock);
    Stage *st = nullptr;
    if (const int e = current_stage(&st)) return e;
    if (!st) return pageable_copies(segs, nseg, cudaMemcpyHostToDevice, s);
    int b = 0;
    size_t fill = 0; /* bytes of chunk b in use */
    struct Piece {
        char *dst;
        size_t off, bytes;
    } pieces[64];
    int npieces = 0;
    /* sends chunk b: one DMA per piece, then the event that frees the chunk */
    auto flush = [&]() -> int {
        for (int p = 0; p < npieces; p++) {
            const cudaError_t e = cudaMemcpyAsync(pieces[p].dst, st->buf[b] + pieces[p].off, pieces[p].bytes,
                                                  cudaMemcpyHostToDevice, s);
            if (e != cudaSuccess) {
                cudaStreamSynchronize(s); /* no DMA of an earlier piece may still read the chunk */
                return acc_cuda_status(e, "cudaMemcpyAsync (staged)");
            }
        }
        const cudaError_t e = cudaEventRecord(st->done[b], s);
        if (e != cudaSuccess) {
            cudaStreamSynchronize(s);
            return acc_cuda_status(e, "cudaEventRecord (staged)");
        }
        st->pending[b] = true;
        b ^= 1;
        fill = 0;
        npieces = 0;
        return ACC_SUCCESS;
    };
    for (int i = 0; i < nseg; i++) {
        const char *src = (const char *)segs[i].src;
        char *dst = (char *)segs[i].dst;
        size_t left = segs[i].bytes;
        while (left > 0) {
            if (fill == 0 && st->pending[b]) { /* the chunk's previous DMA must be done */
                ACC_CUDA_TRY(cudaEventSynchronize(st->done[b]));
                st->pending[b] = false;
            }
            /* a segment whose device start is the last piece's device end (the next array of one
             * allocation), staged right after it, extends that piece: one DMA, not two */
            Piece *last = npieces ? &pieces[npieces - 1] : nullptr;
            const bool merge = last && last->dst + last->bytes == dst && last->off + last->bytes == fill;
            const size_t n = left < kChunk - fill ? left : kChunk - fill;
            copy_parallel(st->buf[b] + fill, src, n);
            if (merge)
                last->bytes += n;
            else
                pieces[npieces++] = {dst, fill, n};
            fill += n;
            src += n;
            dst += n;
            left -= n;
            if (fill == kChunk || npieces == 64) {
                const int e = flush();
                if (e) return e;
            }
        }
    }
    return npieces > 0 ? flush() : ACC_SUCCESS;
}

extern "C" int acc_d2h_staged(const acc_d2h_segment *segs, int nseg, void *stream) {
    if (nseg < 0 || (nseg > 0 && !segs)) return ACC_ERR_INVALID_ARGUMENT;
    cudaStream_t s = (cudaStream_t)stream;
    std::lock_guard<std::mutex> guard(g_lock);
    Stage *st = nullptr;
    if (const int e = current_stage(&st)) return e;
    if (!st) {
        const int e = pageable_copies(segs, nseg, cudaMemcpyDeviceToHost, s);
        return e ? e : acc_cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    }
    for (int b = 0; b < 2; b++) /* no upload's DMA may still read a chunk this copy overwrites */
        if (st->pending[b]) {
            ACC_CUDA_TRY(cudaEventSynchronize(st->done[b]));
            st->pending[b] = false;
        }
    char *buf = st->buf[0];
    int i = 0;
    size_t done = 0; /* bytes of segment i already copied */
    while (i < nseg) {
        /* fill the chunk with DMAs of whole or partial segments, then wait once and copy them out */
        struct Piece {
            char *dst;
            size_t off, bytes;
        } pieces[64];
        int npieces = 0;
        size_t fill = 0;
        while (i < nseg && fill < kChunk && npieces < 64) {
            const size_t left = segs[i].bytes - done, n = left < kChunk - fill ? left : kChunk - fill;
            if (n > 0) {
                ACC_CUDA_TRY(cudaMemcpyAsync(buf + fill, (const char *)segs[i].src + done, n,
                                             cudaMemcpyDeviceToHost, s));
                pieces[npieces++] = {(char *)segs[i].dst + done, fill, n};
                fill += n;
                done += n;
            }
            if (done == segs[i].bytes) {
                i++;
                done = 0;
            }
        }
        ACC_CUDA_TRY(cudaStreamSynchronize(s));
        for (int p = 0; p < npieces; p++)
            copy_parallel(pieces[p].dst, buf + pieces[p].off, pieces[p].bytes);
    }
    return ACC_SUCCESS;
}
