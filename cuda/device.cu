/*
 * device.cu -- device query and device memory for the C ABI, with CUDA
 * errors mapped to acc_status.  The runtime is linked statically, so this
 * works on any machine with a driver; without one, probe reports
 * ACC_ERR_NO_DEVICE instead of failing at import.
 *
 * Device memory.  Every allocation of the library (plans' arrays, the GPU format build's
 * temporaries, SpGEMM) comes from one stream-ordered pool per device that keeps up to
 * ACCSPMM_POOL_KEEP_BYTES (default 1 GiB) of freed memory for reuse, so that making a plan costs
 * no cudaMalloc (~20-60 us each, and a cudaFree as much) once the pool is warm; acc_cuda_trim_pool
 * gives the unused rest back.  acc_cuda_malloc / acc_cuda_free keep cudaMalloc / cudaFree's
 * semantics: the memory is usable on any stream when malloc returns (allocated on the pool's
 * private stream, which is then synchronised: nothing else runs on it), and free waits for the
 * device's work first, as cudaFree does, because a kernel on any stream may still read it.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "acc_cuda_internal.h"

static char g_last_error[512] = "";

/* Maps a CUDA error to a status and remembers its text. */
extern "C" int acc_cuda_status(cudaError_t err, const char *what) {
    if (err == cudaSuccess) return ACC_SUCCESS;
    snprintf(g_last_error, sizeof g_last_error, "%s: %s (%s)", what, cudaGetErrorString(err),
             cudaGetErrorName(err));
    cudaGetLastError(); /* clear sticky-free errors so the next call starts clean */
    switch (err) {
    case cudaErrorMemoryAllocation:
        return ACC_ERR_DEVICE_MEMORY;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
        return ACC_ERR_NO_DEVICE;
    default:
        return ACC_ERR_CUDA;
    }
}

extern "C" const char *acc_cuda_last_error(void) { return g_last_error; }

extern "C" int acc_cuda_probe(int *driver_version, int *runtime_version, int *device_count) {
    *driver_version = *runtime_version = *device_count = 0;
    cudaRuntimeGetVersion(runtime_version);
    cudaError_t err = cudaDriverGetVersion(driver_version);
    if (err != cudaSuccess || *driver_version == 0) {
        snprintf(g_last_error, sizeof g_last_error, "no CUDA driver found");
        return ACC_ERR_NO_DEVICE;
    }
    err = cudaGetDeviceCount(device_count);
    if (err != cudaSuccess) {
        *device_count = 0;
        return acc_cuda_status(err, "cudaGetDeviceCount");
    }
    if (*device_count == 0) {
        snprintf(g_last_error, sizeof g_last_error, "the CUDA driver reports no device");
        return ACC_ERR_NO_DEVICE;
    }
    return ACC_SUCCESS;
}

extern "C" int acc_cuda_get_device_info(int device, acc_cuda_device_info *info) {
    cudaDeviceProp prop;
    int st = acc_cuda_status(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    if (st) return st;
    memset(info, 0, sizeof *info);
    strncpy(info->name, prop.name, sizeof info->name - 1);
    info->major = prop.major;
    info->minor = prop.minor;
    info->multiprocessors = prop.multiProcessorCount;
    info->l2_bytes = prop.l2CacheSize;
    info->max_shared_per_block = (int)prop.sharedMemPerBlockOptin;
    int cur = 0;
    cudaGetDevice(&cur);
    if (cur == device) {
        st = acc_cuda_status(cudaMemGetInfo(&info->free_memory, &info->total_memory), "cudaMemGetInfo");
    } else {
        info->total_memory = prop.totalGlobalMem;
    }
    return st;
}

extern "C" int acc_cuda_set_device(int device) {
    return acc_cuda_status(cudaSetDevice(device), "cudaSetDevice");
}

extern "C" int acc_cuda_get_device(int *device) {
    return acc_cuda_status(cudaGetDevice(device), "cudaGetDevice");
}

/* ---- the memory pool ------------------------------------------------------------------------------ */

namespace {
struct DevicePool {
    cudaMemPool_t pool;
    cudaStream_t stream; /* acc_cuda_malloc / acc_cuda_free's stream: nothing else runs on it */
    cudaStream_t side;   /* acc_side_stream's, created at its first use */
};
std::mutex g_pool_lock;
DevicePool g_pools[kMaxDevices];

/* The pool of `dev`, created at first use (the caller made `dev` current). */
int pool_of(int dev, DevicePool **out) {
    if (dev < 0 || dev >= kMaxDevices) return ACC_ERR_UNSUPPORTED;
    std::lock_guard<std::mutex> guard(g_pool_lock);
    DevicePool &p = g_pools[dev];
    if (!p.pool) {
        cudaMemPoolProps props = {};
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = dev;
        cudaMemPool_t pool = nullptr;
        cudaStream_t stream = nullptr;
        ACC_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        int st = acc_cuda_status(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
        if (st == ACC_SUCCESS) {
            const char *env = getenv("ACCSPMM_POOL_KEEP_BYTES");
            unsigned long long keep = env ? strtoull(env, nullptr, 10) : (1ull << 30);
            st = acc_cuda_status(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                                 "cudaMemPoolSetAttribute");
        }
        if (st != ACC_SUCCESS) {
            if (pool) cudaMemPoolDestroy(pool);
            cudaStreamDestroy(stream);
            return st;
        }
        p.pool = pool;
        p.stream = stream;
    }
    *out = &p;
    return ACC_SUCCESS;
}

int current_pool(DevicePool **out) {
    int dev = 0;
    ACC_CUDA_TRY(cudaGetDevice(&dev));
    return pool_of(dev, out);
}

/* `bytes` (at least 1) from the current device's pool, in the order of `s` or, with own_stream,
 * of the pool's private stream; `*dp` gets the pool. */
int alloc_from_pool(void **p, size_t bytes, cudaStream_t s, bool own_stream, DevicePool **dp) {
    *p = nullptr;
    int st = current_pool(dp);
    if (st) return st;
    return acc_cuda_status(
        cudaMallocFromPoolAsync(p, bytes ? bytes : 1, (*dp)->pool, own_stream ? (*dp)->stream : s),
        "cudaMallocFromPoolAsync");
}
} // namespace

extern "C" int acc_pool_alloc(void **p, size_t bytes, cudaStream_t s) {
    DevicePool *dp;
    return alloc_from_pool(p, bytes, s, false, &dp);
}

extern "C" void acc_pool_free(void *p, cudaStream_t s) {
    if (p) cudaFreeAsync(p, s);
}

extern "C" int acc_side_stream(cudaStream_t *out) {
    *out = nullptr;
    DevicePool *dp;
    int st = current_pool(&dp);
    if (st) return st;
    std::lock_guard<std::mutex> guard(g_pool_lock);
    if (!dp->side) ACC_CUDA_TRY(cudaStreamCreateWithFlags(&dp->side, cudaStreamNonBlocking));
    *out = dp->side;
    return ACC_SUCCESS;
}

extern "C" int acc_cuda_trim_pool(void) {
    DevicePool *dp;
    int st = current_pool(&dp);
    if (st) return st;
    return acc_cuda_status(cudaMemPoolTrimTo(dp->pool, 0), "cudaMemPoolTrimTo");
}

extern "C" int acc_cuda_malloc(void **d_ptr, size_t bytes) {
    DevicePool *dp = nullptr;
    int st = alloc_from_pool(d_ptr, bytes, nullptr, true, &dp);
    if (st == ACC_SUCCESS) st = acc_cuda_status(cudaStreamSynchronize(dp->stream), "cudaStreamSynchronize");
    if (st != ACC_SUCCESS && *d_ptr) {
        cudaFreeAsync(*d_ptr, dp->stream);
        *d_ptr = nullptr;
    }
    return st;
}

extern "C" int acc_cuda_malloc_ordered(void **d_ptr, size_t bytes, void *stream) {
    DevicePool *dp = nullptr;
    return alloc_from_pool(d_ptr, bytes, (cudaStream_t)stream, false, &dp);
}

extern "C" int acc_cuda_upload(void **d_ptr, const void *h_src, size_t bytes, void *stream) {
    int st = acc_cuda_malloc_ordered(d_ptr, bytes, stream);
    if (st != ACC_SUCCESS || bytes == 0) return st;
    const acc_h2d_segment seg = {*d_ptr, h_src, bytes};
    st = acc_h2d_staged(&seg, 1, stream);
    if (st != ACC_SUCCESS) {
        cudaFreeAsync(*d_ptr, (cudaStream_t)stream);
        *d_ptr = nullptr;
    }
    return st;
}

extern "C" int acc_cuda_side_stream(void **stream) {
    cudaStream_t s = nullptr;
    const int st = acc_side_stream(&s);
    *stream = (void *)s;
    return st;
}

/* ---- host slots: mapped pinned memory that kernels write to directly ------------------------------- */

namespace {
constexpr size_t kSlotBytes = 1024, kSlabBytes = 64 * 1024;
std::mutex g_slot_lock;
std::vector<char *> g_free_slots; /* slabs are kept for the process: bounded by the most slots held at once */
size_t g_total_slots = 0;         /* g_free_slots' capacity is at least this: a free never reallocates */
} // namespace

extern "C" int acc_cuda_host_slot(void **slot) {
    *slot = nullptr;
    std::lock_guard<std::mutex> guard(g_slot_lock);
    if (g_free_slots.empty()) {
        char *slab = nullptr;
        ACC_CUDA_TRY(cudaHostAlloc((void **)&slab, kSlabBytes, cudaHostAllocMapped | cudaHostAllocPortable));
        void *on_device = nullptr;
        const int st =
            acc_cuda_status(cudaHostGetDevicePointer(&on_device, slab, 0), "cudaHostGetDevicePointer");
        if (st != ACC_SUCCESS || on_device != slab) { /* no unified addressing: the caller copies instead */
            cudaFreeHost(slab);
            return st != ACC_SUCCESS ? st : ACC_ERR_UNSUPPORTED;
        }
        try {
            g_free_slots.reserve(g_total_slots + kSlabBytes / kSlotBytes);
        } catch (...) {
            cudaFreeHost(slab);
            return ACC_ERR_OUT_OF_MEMORY;
        }
        for (size_t off = kSlabBytes; off >= kSlotBytes; off -= kSlotBytes)
            g_free_slots.push_back(slab + off - kSlotBytes);
        g_total_slots += kSlabBytes / kSlotBytes;
    }
    *slot = g_free_slots.back();
    g_free_slots.pop_back();
    return ACC_SUCCESS;
}

extern "C" void acc_cuda_host_slot_free(void *slot) {
    if (!slot) return;
    std::lock_guard<std::mutex> guard(g_slot_lock);
    g_free_slots.push_back(static_cast<char *>(slot)); /* within the reserved capacity: no throw */
}

extern "C" int acc_cuda_free(void *d_ptr) {
    if (!d_ptr) return ACC_SUCCESS;
    cudaPointerAttributes attr;
    ACC_CUDA_TRY(cudaPointerGetAttributes(&attr, d_ptr));
    int cur = 0;
    ACC_CUDA_TRY(cudaGetDevice(&cur));
    const int dev = attr.type == cudaMemoryTypeDevice ? attr.device : cur;
    if (dev != cur) ACC_CUDA_TRY(cudaSetDevice(dev));
    DevicePool *dp;
    int st = pool_of(dev, &dp);
    /* as cudaFree: the device's work, on every stream, finishes before the memory can be reused */
    if (st == ACC_SUCCESS) st = acc_cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize (free)");
    if (st == ACC_SUCCESS) st = acc_cuda_status(cudaFreeAsync(d_ptr, dp->stream), "cudaFree (pool)");
    if (dev != cur) cudaSetDevice(cur);
    return st;
}

static int copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, void *stream) {
    if (bytes == 0) return ACC_SUCCESS;
    cudaStream_t s = (cudaStream_t)stream;
    int st = acc_cuda_status(cudaMemcpyAsync(dst, src, bytes, kind, s), "cudaMemcpyAsync");
    if (st) return st;
    /* Host buffers belong to Python objects that may go away after return. */
    if (kind != cudaMemcpyDeviceToDevice)
        st = acc_cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    return st;
}

extern "C" int acc_cuda_memcpy_htod(void *d_dst, const void *h_src, size_t bytes, void *stream) {
    return copy(d_dst, h_src, bytes, cudaMemcpyHostToDevice, stream);
}
extern "C" int acc_cuda_memcpy_dtoh(void *h_dst, const void *d_src, size_t bytes, void *stream) {
    return copy(h_dst, d_src, bytes, cudaMemcpyDeviceToHost, stream);
}
extern "C" int acc_cuda_memcpy_dtod(void *d_dst, const void *d_src, size_t bytes, void *stream) {
    return copy(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, stream);
}
extern "C" int acc_cuda_memset(void *d_ptr, int byte, size_t bytes, void *stream) {
    if (bytes == 0) return ACC_SUCCESS;
    return acc_cuda_status(cudaMemsetAsync(d_ptr, byte, bytes, (cudaStream_t)stream), "cudaMemsetAsync");
}
extern "C" int acc_cuda_stream_synchronize(void *stream) {
    return acc_cuda_status(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}
extern "C" int acc_cuda_stream_capturing(void *stream, int *capturing) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    *capturing = 0;
    int st = acc_cuda_status(cudaStreamIsCapturing((cudaStream_t)stream, &status), "cudaStreamIsCapturing");
    *capturing = status != cudaStreamCaptureStatusNone;
    return st;
}

namespace {

/* dst[r * ldd + c] = c < ncopy ? src[r * lds + c] : 0 for r < rows, c < ncols. */
template <typename T, typename I>
__global__ void copy_rows(const T *__restrict__ src, int64_t lds, T *__restrict__ dst, int64_t ldd, I rows,
                          I ncols, I ncopy) {
    const I total = rows * ncols;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        const I r = i / ncols, c = i - r * ncols;
        dst[(int64_t)r * ldd + c] = c < ncopy ? src[(int64_t)r * lds + c] : T(0);
    }
}

template <typename T>
int copy_rows_on(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t rows, int64_t ncols,
                 int64_t ncopy, cudaStream_t s) {
    const int64_t total = rows * ncols;
    if (total == 0) return ACC_SUCCESS;
    const int64_t blocks = (total + 255) / 256;
    const unsigned grid = (unsigned)(blocks < 4096 ? blocks : 4096);
    if (total < (1LL << 31))
        copy_rows<T, int32_t><<<grid, 256, 0, s>>>((const T *)src, lds, (T *)dst, ldd, (int32_t)rows,
                                                   (int32_t)ncols, (int32_t)ncopy);
    else
        copy_rows<T, int64_t><<<grid, 256, 0, s>>>((const T *)src, lds, (T *)dst, ldd, rows, ncols, ncopy);
    ACC_CUDA_TRY(cudaGetLastError());
    return ACC_SUCCESS;
}

} // namespace

extern "C" int acc_copy_rows(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t rows,
                             int64_t ncols, int64_t ncopy, int elem_bytes, cudaStream_t s) {
    switch (elem_bytes) {
    case 2:
        return copy_rows_on<uint16_t>(src, lds, dst, ldd, rows, ncols, ncopy, s);
    case 4:
        return copy_rows_on<uint32_t>(src, lds, dst, ldd, rows, ncols, ncopy, s);
    default:
        return ACC_ERR_INVALID_ARGUMENT;
    }
}

/* ---- occupancy (acc_cuda_internal.h) ---------------------------------------------------- */

int64_t resident_blocks(const void *kernel, int threads, size_t smem, int *per_sm) {
    int dev = 0, sms = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (per_sm) *per_sm = n;
    return (int64_t)sms * n;
}

int64_t wave_blocks(const void *kernel, int threads, size_t smem) {
    struct Entry {
        const void *kernel;
        int device, threads;
        size_t smem;
        int64_t blocks;
    };
    static std::mutex lock;
    static std::vector<Entry> cache;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    {
        std::lock_guard<std::mutex> g(lock);
        for (const Entry &e : cache)
            if (e.kernel == kernel && e.device == dev && e.threads == threads && e.smem == smem)
                return e.blocks;
    }
    const int64_t blocks = resident_blocks(kernel, threads, smem, nullptr);
    if (blocks == 0) return 0;
    std::lock_guard<std::mutex> g(lock);
    cache.push_back({kernel, dev, threads, smem, blocks});
    return blocks;
}
