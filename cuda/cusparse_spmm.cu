/*
 * cusparse_spmm.cu -- the cuSPARSE SpMM baseline and exact FP32/FP64 GPU path.
 *
 * libcusparse is opened with dlopen on first use (acc_cusparse_load), so
 * importing accspmm never needs it; the header is used for types only and
 * each entry point is a pointer of the header's own declared type
 * (decltype), so a signature mismatch cannot compile.
 *
 * A plan binds one CSR, one n and one algorithm: descriptors, workspace and
 * cusparseSpMM_preprocess are done at create time, so run() is exactly one
 * cusparseSpMM call (what the benchmark times), after rebinding B and C.
 */
#include <cusparse.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>

#include "acc_cuda_internal.h"

namespace {

#define ACC_CUSPARSE_FUNCS(X)                                                                                \
    X(cusparseCreate)                                                                                        \
    X(cusparseDestroy)                                                                                       \
    X(cusparseSetStream)                                                                                     \
    X(cusparseGetErrorString)                                                                                \
    X(cusparseCreateCsr)                                                                                     \
    X(cusparseDestroySpMat)                                                                                  \
    X(cusparseCreateDnMat)                                                                                   \
    X(cusparseDestroyDnMat)                                                                                  \
    X(cusparseDnMatSetValues)                                                                                \
    X(cusparseSpMM_bufferSize)                                                                               \
    X(cusparseSpMM_preprocess)                                                                               \
    X(cusparseSpMM)

struct cusparse_api {
#define X(name) decltype(&::name) name = nullptr;
    ACC_CUSPARSE_FUNCS(X)
#undef X
};

cusparse_api g_api;
void *g_lib = nullptr;
std::mutex g_lock;
char g_error[512];

int cusparse_status(cusparseStatus_t s, const char *what) {
    if (s == CUSPARSE_STATUS_SUCCESS) return ACC_SUCCESS;
    snprintf(g_error, sizeof g_error, "%s: %s", what,
             g_api.cusparseGetErrorString ? g_api.cusparseGetErrorString(s) : "error");
    if (s == CUSPARSE_STATUS_NOT_SUPPORTED) return ACC_ERR_UNSUPPORTED;
    if (s == CUSPARSE_STATUS_ALLOC_FAILED || s == CUSPARSE_STATUS_INSUFFICIENT_RESOURCES)
        return ACC_ERR_DEVICE_MEMORY;
    return ACC_ERR_CUSPARSE;
}

#define CUSPARSE_TRY(call)                                                                                   \
    do {                                                                                                     \
        st = cusparse_status((call), #call);                                                                 \
        if (st != ACC_SUCCESS) goto fail;                                                                    \
    } while (0)

} // namespace

struct acc_cusparse_spmm {
    cusparseHandle_t handle = nullptr;
    cusparseSpMatDescr_t A = nullptr;
    cusparseDnMatDescr_t B = nullptr, C = nullptr;
    void *workspace = nullptr;
    cusparseSpMMAlg_t alg = CUSPARSE_SPMM_ALG_DEFAULT;
    cudaDataType type = CUDA_R_32F;
    double alpha = 1.0, beta = 0.0;
    float alpha_f = 1.0f, beta_f = 0.0f;
};

extern "C" int acc_cusparse_load(const char *path) {
    std::lock_guard<std::mutex> guard(g_lock);
    if (g_lib) return ACC_SUCCESS;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(g_error, sizeof g_error, "dlopen(%s): %s", path, dlerror());
        return ACC_ERR_CUSPARSE_LOAD;
    }
    cusparse_api api;
#define X(name)                                                                                              \
    api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));                                       \
    if (!api.name) {                                                                                         \
        snprintf(g_error, sizeof g_error, "%s: symbol %s missing", path, #name);                             \
        dlclose(lib);                                                                                        \
        return ACC_ERR_CUSPARSE_LOAD;                                                                        \
    }
    ACC_CUSPARSE_FUNCS(X)
#undef X
    g_api = api;
    g_lib = lib;
    return ACC_SUCCESS;
}

extern "C" const char *acc_cusparse_last_error(void) { return g_error; }

/* The dlopen handle (NULL before acc_cusparse_load succeeded), for the SpGEMM harness's own
 * lookups, and a way for it to report its failures through acc_cusparse_last_error. */
extern "C" void *acc_cusparse_library(void) {
    std::lock_guard<std::mutex> guard(g_lock);
    return g_lib;
}
extern "C" void acc_cusparse_note_error(const char *message) {
    snprintf(g_error, sizeof g_error, "%s", message);
}

extern "C" void acc_cusparse_spmm_destroy(acc_cusparse_spmm *p) {
    if (!p) return;
    if (p->A) g_api.cusparseDestroySpMat(p->A);
    if (p->B) g_api.cusparseDestroyDnMat(p->B);
    if (p->C) g_api.cusparseDestroyDnMat(p->C);
    if (p->handle) g_api.cusparseDestroy(p->handle);
    if (p->workspace) cudaFree(p->workspace);
    delete p;
}

extern "C" int acc_cusparse_spmm_create(acc_cusparse_spmm **plan, int64_t m, int64_t k, int64_t nnz,
                                        const void *d_row_offsets, const void *d_column_indices,
                                        const void *d_values, int index_bits, acc_dtype dtype, int64_t n,
                                        int alg, const void *d_B, void *d_C, void *stream) {
    *plan = nullptr;
    if (!g_lib) return ACC_ERR_CUSPARSE_LOAD;
    if (m < 0 || k < 0 || n <= 0 || nnz < 0 || (index_bits != 32 && index_bits != 64))
        return ACC_ERR_INVALID_ARGUMENT;
    int st = ACC_SUCCESS;
    size_t bytes = 0;
    const void *alpha, *beta;
    cusparseIndexType_t it = index_bits == 32 ? CUSPARSE_INDEX_32I : CUSPARSE_INDEX_64I;
    acc_cusparse_spmm *p = new (std::nothrow) acc_cusparse_spmm;
    if (!p) return ACC_ERR_OUT_OF_MEMORY;
    p->alg = (cusparseSpMMAlg_t)alg;
    p->type = dtype == ACC_FLOAT64 ? CUDA_R_64F : CUDA_R_32F;
    alpha = dtype == ACC_FLOAT64 ? (const void *)&p->alpha : (const void *)&p->alpha_f;
    beta = dtype == ACC_FLOAT64 ? (const void *)&p->beta : (const void *)&p->beta_f;
    CUSPARSE_TRY(g_api.cusparseCreate(&p->handle));
    CUSPARSE_TRY(g_api.cusparseSetStream(p->handle, (cudaStream_t)stream));
    CUSPARSE_TRY(g_api.cusparseCreateCsr(&p->A, m, k, nnz, const_cast<void *>(d_row_offsets),
                                         const_cast<void *>(d_column_indices), const_cast<void *>(d_values),
                                         it, it, CUSPARSE_INDEX_BASE_ZERO, p->type));
    CUSPARSE_TRY(
        g_api.cusparseCreateDnMat(&p->B, k, n, n, const_cast<void *>(d_B), p->type, CUSPARSE_ORDER_ROW));
    CUSPARSE_TRY(g_api.cusparseCreateDnMat(&p->C, m, n, n, d_C, p->type, CUSPARSE_ORDER_ROW));
    CUSPARSE_TRY(g_api.cusparseSpMM_bufferSize(p->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                               CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, p->A, p->B, beta,
                                               p->C, p->type, p->alg, &bytes));
    if (bytes > 0) {
        st = acc_cuda_status(cudaMalloc(&p->workspace, bytes), "cudaMalloc(cuSPARSE workspace)");
        if (st) goto fail;
    }
    CUSPARSE_TRY(g_api.cusparseSpMM_preprocess(p->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                               CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, p->A, p->B, beta,
                                               p->C, p->type, p->alg, p->workspace));
    *plan = p;
    return ACC_SUCCESS;
fail:
    acc_cusparse_spmm_destroy(p);
    return st;
}

extern "C" int acc_cusparse_spmm_run(acc_cusparse_spmm *p, const void *d_B, void *d_C, void *stream) {
    int st = ACC_SUCCESS;
    const bool f64 = p->type == CUDA_R_64F;
    const void *alpha = f64 ? (const void *)&p->alpha : (const void *)&p->alpha_f;
    const void *beta = f64 ? (const void *)&p->beta : (const void *)&p->beta_f;
    CUSPARSE_TRY(g_api.cusparseSetStream(p->handle, (cudaStream_t)stream));
    CUSPARSE_TRY(g_api.cusparseDnMatSetValues(p->B, const_cast<void *>(d_B)));
    CUSPARSE_TRY(g_api.cusparseDnMatSetValues(p->C, d_C));
    CUSPARSE_TRY(g_api.cusparseSpMM(p->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                    CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, p->A, p->B, beta, p->C, p->type,
                                    p->alg, p->workspace));
    return acc_cuda_status(cudaGetLastError(), "cusparseSpMM launch");
fail:
    return st;
}
