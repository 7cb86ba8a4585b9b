/*
 * device.cu -- device query and device memory for the C ABI, with CUDA
 * errors mapped to acc_status.  The runtime is linked statically, so this
 * works on any machine with a driver; without one, probe reports
 * ACC_ERR_NO_DEVICE instead of failing at import.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "accspmm_cuda.h"

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

extern "C" int acc_cuda_malloc(void **d_ptr, size_t bytes) {
    *d_ptr = nullptr;
    return acc_cuda_status(cudaMalloc(d_ptr, bytes ? bytes : 1), "cudaMalloc");
}

extern "C" int acc_cuda_free(void *d_ptr) { return acc_cuda_status(cudaFree(d_ptr), "cudaFree"); }

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
