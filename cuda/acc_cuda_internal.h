/* acc_cuda_internal.h -- helpers shared by the .cu files (not public). */
#ifndef ACC_CUDA_INTERNAL_H
#define ACC_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "accspmm_cuda.h"

extern "C" int acc_cuda_status(cudaError_t err, const char *what);

/* The library's stream-ordered device memory pool (device.cu): memory on `s`'s order, from the
 * current device's pool; free in stream order too (no wait for other streams). */
extern "C" int acc_pool_alloc(void **p, size_t bytes, cudaStream_t s);
extern "C" void acc_pool_free(void *p, cudaStream_t s);

/* The current device's side stream (non-blocking, created at first use, kept for the process): work
 * that may run beside a call's own stream, ordered against it by events only (spgemm's Fork).  Shared
 * by every caller of the device: two callers' side work runs in turn, never out of their orders. */
extern "C" int acc_side_stream(cudaStream_t *out);

/* dst[r * ldd + c] = c < ncopy ? src[r * lds + c] : 0 for r < rows, c < ncols, elements of elem_bytes
 * (2 or 4) bytes, on `s`: B into a zero-padded operand, or a padded result into C (ncopy = ncols). */
extern "C" int acc_copy_rows(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t rows,
                             int64_t ncols, int64_t ncopy, int elem_bytes, cudaStream_t s);

/* A half-precision product (B: k x n halves, C: m x n of cbytes each) computed on copies padded to
 * n8 >= n columns: B copied into n8 zero-padded columns, run(B8, C8) called on them, and C8's first
 * n columns copied into C.  One buffer from the pool for both copies, freed in stream order after
 * the second copy.  ACC_ERR_DEVICE_MEMORY (nothing launched) where the pool cannot hold them. */
template <typename Run>
int with_padded_copies(const void *B, void *C, int64_t m, int64_t k, int64_t n, int64_t n8, size_t cbytes,
                       cudaStream_t s, Run run) {
    const size_t bbytes = ((size_t)(k * n8) * 2 + 255) / 256 * 256;
    char *buf = nullptr;
    int st = acc_pool_alloc((void **)&buf, bbytes + (size_t)(m * n8) * cbytes, s);
    if (st) return st;
    st = acc_copy_rows(B, n, buf, n8, k, n8, n, 2, s);
    if (!st) st = run(static_cast<const void *>(buf), static_cast<void *>(buf + bbytes));
    if (!st) st = acc_copy_rows(buf + bbytes, n8, C, n, m, n, n, (int)cbytes, s);
    acc_pool_free(buf, s);
    return st;
}

/* The blocks of `kernel` (threads a block, smem dynamic shared bytes) that the current device holds at
 * once (occupancy x SMs; *per_sm, may be NULL: the occupancy), 0 where the runtime cannot tell (a
 * kernel past 48 KB of dynamic shared memory needs its attribute set first) (device.cu). */
int64_t resident_blocks(const void *kernel, int threads, size_t smem, int *per_sm);

/* resident_blocks, cached per kernel and device (kernels of a fixed smem).  A grid-stride kernel
 * launched with at most this many blocks runs in one wave: no second, partial wave of blocks that start
 * after the first ones end. */
int64_t wave_blocks(const void *kernel, int threads, size_t smem);

/* min(wanted, wave_blocks(...)), at least 1: a grid-stride kernel's grid. */
template <typename K> unsigned wave_grid(K *kernel, int threads, size_t smem, int64_t wanted) {
    const int64_t w = wave_blocks(reinterpret_cast<const void *>(kernel), threads, smem);
    return (unsigned)std::max<int64_t>(1, w > 0 ? std::min(wanted, w) : wanted);
}

/* Bits of the largest value in [0, n): 0 for n <= 1 (packed sort keys). */
inline int bits_for(int64_t n) {
    int b = 0;
    while (b < 63 && (int64_t(1) << b) < n)
        b++;
    return b;
}

/* Blocks of `threads` (the launch's block size) for a grid-stride kernel over n items: at least 1, at
 * most 2^20 (the grid-stride loops cover the rest). */
inline unsigned grid_for(int64_t n, int threads = 256) {
    const int64_t g = (n + threads - 1) / threads;
    return (unsigned)(g < 1 ? 1 : (g > 1048576 ? 1048576 : g));
}

#define GRID_STRIDE(i, n)                                                                                    \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                                \
         i += (int64_t)gridDim.x * blockDim.x)

/* Devices the library's per-device state covers (the memory pool, the pinned staging, per-kernel flags). */
constexpr int kMaxDevices = 64;

/* The last index in [lo, hi] whose value (by `at`) is <= x (values non-decreasing): the row of an
 * entry from row offsets, the segment of a position from segment offsets.  O(log(hi - lo)). */
template <typename F> __device__ __forceinline__ int64_t last_le(int64_t lo, int64_t hi, int64_t x, F at) {
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) >> 1;
        if (at(mid) <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Returns the mapped status of a CUDA call from the enclosing function. */
#define ACC_CUDA_TRY(call)                                                                                   \
    do {                                                                                                     \
        int acc_st_ = acc_cuda_status((call), #call);                                                        \
        if (acc_st_ != ACC_SUCCESS) return acc_st_;                                                          \
    } while (0)

/* Programmatic dependent launch (compute capability 9+).  A kernel launched with `launch_ex(..., pdl)`
 * may start before the kernel before it on the stream has completed and flushed its memory (once that
 * kernel's thread blocks have exited, or earlier where it signals so): until pdl_wait() its thread
 * blocks read only data that no kernel of a call writes (the plan's format and schedule), and
 * pdl_wait() returns once every earlier kernel of the stream has completed and its writes are
 * visible.  B, C and the split workspace are touched only after it.  No kernel here triggers its
 * dependents early (griddepcontrol.launch_dependents): on the H100, a trigger at a thread block's
 * start or after its main loop let the next call's blocks take SMs while this call's last ones still
 * ran, and self-chained calls at N = 128 ran up to 1.3x slower (wiki-Vote, lastfm_asia, ego-Facebook;
 * benchmarks/NOTES.md, 2026-11-26).  A no-op in a launch without the attribute and in code built for
 * sm_80. */
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* A's values rounded to TF32 (nearest, ties away from zero; non-finite values as they are), as
 * accspmm._tf32.round_tf32: the GPU BitTCF build (bittcf_build.cu) and the narrow CSR kernel
 * (tf32_spmm.cu) round A alike, so both give the same operands. */
__device__ __forceinline__ float round_tf32(float x) {
    if (!isfinite(x)) return x;
    return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xFFFFE000u);
}

/* Whether `kernel` runs on the current device as `ok(major, minor, attributes)` says (compute capability
 * and the kernel's cudaFuncAttributes: e.g. the code built for it), cached per device in `known` (0
 * unknown, 1 yes, 2 no). */
template <typename Ok> bool kernel_runs_here(const void *kernel, unsigned char (&known)[kMaxDevices], Ok ok) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
        (void)cudaGetLastError();
        return false;
    }
    if (!known[dev]) {
        int major = 0, minor = 0;
        cudaFuncAttributes a;
        const bool yes =
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
            cudaFuncGetAttributes(&a, kernel) == cudaSuccess && ok(major, minor, a);
        (void)cudaGetLastError();
        known[dev] = yes ? 1 : 2;
    }
    return known[dev] == 1;
}

/* kernel_runs_here's test of the sm_90 paths (programmatic dependent launch, TMA): compute capability 9
 * or more and the kernel's code built for it (an sm_80 build has those paths compiled out). */
inline bool sm90_code(int major, int, const cudaFuncAttributes &a) {
    return major >= 9 && a.ptxVersion >= 90;
}

/* Whether launches of `kernel` on the current device may use programmatic dependent launch: sm90_code
 * (an sm_80 build has no pdl_wait: launched early, it would read B before the kernel writing it has
 * finished), and ACCSPMM_PDL not "0" (read once).  `known`: the kernel's flags, one per device. */
inline bool pdl_usable(const void *kernel, unsigned char (&known)[kMaxDevices]) {
    static const bool off = [] {
        const char *e = std::getenv("ACCSPMM_PDL");
        return e && e[0] == '0' && e[1] == 0;
    }();
    return !off && kernel_runs_here(kernel, known, sm90_code);
}

/* kernel<<<grid, threads, smem, s>>>(args...), with programmatic stream serialization when `pdl`. */
template <typename... P, typename... A>
cudaError_t launch_ex(void (*kernel)(P...), dim3 grid, dim3 threads, size_t smem, cudaStream_t s, bool pdl,
                      A &&...args) {
    if (!pdl) {
        kernel<<<grid, threads, smem, s>>>(std::forward<A>(args)...);
        return cudaGetLastError();
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = threads;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args...);
    if (e != cudaErrorNotSupported && e != cudaErrorInvalidValue) return e;
    (void)cudaGetLastError(); /* a driver without the attribute: the plain launch (its own error, if any) */
    kernel<<<grid, threads, smem, s>>>(std::forward<A>(args)...);
    return cudaGetLastError();
}

/* Raises the dynamic shared-memory limit of `kernel` to `bytes` on the current device, once per device
 * (`done`: the kernel's flags, one per device). */
inline int raise_smem_limit(const void *kernel, int bytes, unsigned char (&done)[kMaxDevices]) {
    int dev = 0;
    ACC_CUDA_TRY(cudaGetDevice(&dev));
    if (dev < 0 || dev >= kMaxDevices) return ACC_ERR_UNSUPPORTED;
    if (!done[dev]) {
        ACC_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        done[dev] = 1;
    }
    return ACC_SUCCESS;
}

#endif
