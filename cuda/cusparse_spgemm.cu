/*
 * cusparse_spgemm.cu -- the cuSPARSE SpGEMM baseline of benchmarks/bench_spgemm.py: one whole
 * cusparseSpGEMM product as a user makes it (descriptors, work estimation, memory estimation for
 * ALG2/ALG3, compute, allocating C, copy), or the cusparseSpGEMMreuse sequence with its compute
 * step timed alone.  The symbols are looked up in the libcusparse that cusparse_spmm.cu opened
 * (acc_cusparse_library), each as a pointer of the header's own declared type.
 */
#include <cusparse.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <vector>

#include "acc_cuda_internal.h"
#include "spgemm.h"

extern "C" void *acc_cusparse_library(void);
extern "C" void acc_cusparse_note_error(const char *message);

namespace {

#define ACC_SPGEMM_FUNCS(X)                                                                                  \
    X(cusparseCreate)                                                                                        \
    X(cusparseDestroy)                                                                                       \
    X(cusparseSetStream)                                                                                     \
    X(cusparseGetErrorString)                                                                                \
    X(cusparseCreateCsr)                                                                                     \
    X(cusparseDestroySpMat)                                                                                  \
    X(cusparseSpMatGetSize)                                                                                  \
    X(cusparseCsrSetPointers)                                                                                \
    X(cusparseSpGEMM_createDescr)                                                                            \
    X(cusparseSpGEMM_destroyDescr)                                                                           \
    X(cusparseSpGEMM_workEstimation)                                                                         \
    X(cusparseSpGEMM_estimateMemory)                                                                         \
    X(cusparseSpGEMM_compute)                                                                                \
    X(cusparseSpGEMM_copy)                                                                                   \
    X(cusparseSpGEMMreuse_workEstimation)                                                                    \
    X(cusparseSpGEMMreuse_nnz)                                                                               \
    X(cusparseSpGEMMreuse_copy)                                                                              \
    X(cusparseSpGEMMreuse_compute)

struct spgemm_api {
#define X(name) decltype(&::name) name = nullptr;
    ACC_SPGEMM_FUNCS(X)
#undef X
};

spgemm_api g_api;
bool g_loaded = false;
std::mutex g_lock;

int load() {
    std::lock_guard<std::mutex> guard(g_lock);
    if (g_loaded) return ACC_SUCCESS;
    void *lib = acc_cusparse_library();
    if (!lib) return ACC_ERR_CUSPARSE_LOAD;
    spgemm_api api;
#define X(name)                                                                                              \
    api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));                                       \
    if (!api.name) {                                                                                         \
        acc_cusparse_note_error("libcusparse lacks " #name);                                                 \
        return ACC_ERR_CUSPARSE_LOAD;                                                                        \
    }
    ACC_SPGEMM_FUNCS(X)
#undef X
    g_api = api;
    g_loaded = true;
    return ACC_SUCCESS;
}

int status(cusparseStatus_t s, const char *what) {
    if (s == CUSPARSE_STATUS_SUCCESS) return ACC_SUCCESS;
    char text[512];
    snprintf(text, sizeof text, "%s: %s", what, g_api.cusparseGetErrorString(s));
    acc_cusparse_note_error(text);
    if (s == CUSPARSE_STATUS_NOT_SUPPORTED) return ACC_ERR_UNSUPPORTED;
    if (s == CUSPARSE_STATUS_ALLOC_FAILED || s == CUSPARSE_STATUS_INSUFFICIENT_RESOURCES)
        return ACC_ERR_DEVICE_MEMORY;
    return ACC_ERR_CUSPARSE;
}

/* Every resource of one product, released on every exit path. */
struct Product {
    cusparseHandle_t h = nullptr;
    cusparseSpMatDescr_t A = nullptr, B = nullptr, C = nullptr;
    cusparseSpGEMMDescr_t d = nullptr;
    std::vector<void *> mem;
    size_t live = 0, peak = 0;
    int alloc(void **p, size_t bytes) {
        *p = nullptr;
        if (bytes == 0) return ACC_SUCCESS;
        ACC_CUDA_TRY(cudaMalloc(p, bytes));
        mem.push_back(*p);
        live += bytes;
        peak = std::max(peak, live);
        return ACC_SUCCESS;
    }
    void release(void *p, size_t bytes) {
        if (!p) return;
        cudaFree(p);
        mem.erase(std::find(mem.begin(), mem.end(), p));
        live -= bytes;
    }
    ~Product() {
        if (d) g_api.cusparseSpGEMM_destroyDescr(d);
        if (A) g_api.cusparseDestroySpMat(A);
        if (B) g_api.cusparseDestroySpMat(B);
        if (C) g_api.cusparseDestroySpMat(C);
        if (h) g_api.cusparseDestroy(h);
        for (void *p : mem)
            cudaFree(p);
    }
};

#define CS(call)                                                                                             \
    do {                                                                                                     \
        int st_ = status((call), #call);                                                                     \
        if (st_ != ACC_SUCCESS) return st_;                                                                  \
    } while (0)
#define OK(call)                                                                                             \
    do {                                                                                                     \
        int st_ = (call);                                                                                    \
        if (st_ != ACC_SUCCESS) return st_;                                                                  \
    } while (0)

} // namespace

extern "C" int acc_cusparse_spgemm_run(int64_t m, int64_t k, int64_t n, int64_t nnz_a,
                                       const int32_t *d_a_rows, const int32_t *d_a_cols, const void *d_a_vals,
                                       int64_t nnz_b, const int32_t *d_b_rows, const int32_t *d_b_cols,
                                       const void *d_b_vals, acc_dtype dtype, int alg, float chunk_fraction,
                                       int reuse, int reps, acc_cusparse_spgemm_result *result,
                                       void *stream) {
    if (!result || m < 0 || k < 0 || n < 0 || alg < 1 || alg > 3 || reps < 1) return ACC_ERR_INVALID_ARGUMENT;
    OK(load());
    *result = acc_cusparse_spgemm_result{};
    cudaStream_t s = (cudaStream_t)stream;
    const cudaDataType t = dtype == ACC_FLOAT64 ? CUDA_R_64F : CUDA_R_32F;
    const double alpha64 = 1.0, beta64 = 0.0;
    const float alpha32 = 1.0f, beta32 = 0.0f;
    const void *alpha = dtype == ACC_FLOAT64 ? (const void *)&alpha64 : (const void *)&alpha32;
    const void *beta = dtype == ACC_FLOAT64 ? (const void *)&beta64 : (const void *)&beta32;
    const cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
    const cusparseSpGEMMAlg_t a =
        reuse ? CUSPARSE_SPGEMM_DEFAULT
              : (alg == 1 ? CUSPARSE_SPGEMM_ALG1 : (alg == 2 ? CUSPARSE_SPGEMM_ALG2 : CUSPARSE_SPGEMM_ALG3));
    const size_t vbytes = dtype == ACC_FLOAT64 ? 8 : 4;
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    const auto t0 = std::chrono::steady_clock::now();
    Product P;
    CS(g_api.cusparseCreate(&P.h));
    CS(g_api.cusparseSetStream(P.h, s));
    CS(g_api.cusparseCreateCsr(&P.A, m, k, nnz_a, (void *)d_a_rows, (void *)d_a_cols, (void *)d_a_vals,
                               CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, t));
    CS(g_api.cusparseCreateCsr(&P.B, k, n, nnz_b, (void *)d_b_rows, (void *)d_b_cols, (void *)d_b_vals,
                               CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, t));
    void *c_rows = nullptr, *c_cols = nullptr, *c_vals = nullptr;
    OK(P.alloc(&c_rows, (size_t)(m + 1) * 4));
    CS(g_api.cusparseCreateCsr(&P.C, m, n, 0, c_rows, nullptr, nullptr, CUSPARSE_INDEX_32I,
                               CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, t));
    CS(g_api.cusparseSpGEMM_createDescr(&P.d));
    const size_t outputs_before = P.live; /* C's row offsets: an output, not a buffer */
    size_t b1 = 0, b2 = 0, b3 = 0, b4 = 0, b5 = 0;
    void *d1 = nullptr, *d2 = nullptr, *d3 = nullptr, *d4 = nullptr, *d5 = nullptr;
    size_t buffers_peak = 0;
    auto note = [&]() { buffers_peak = std::max(buffers_peak, P.live - outputs_before); };
    int64_t rows_c = 0, cols_c = 0, nnz_c = 0;
    if (!reuse) {
        CS(g_api.cusparseSpGEMM_workEstimation(P.h, op, op, alpha, P.A, P.B, beta, P.C, t, a, P.d, &b1,
                                               nullptr));
        OK(P.alloc(&d1, b1));
        CS(g_api.cusparseSpGEMM_workEstimation(P.h, op, op, alpha, P.A, P.B, beta, P.C, t, a, P.d, &b1, d1));
        if (a != CUSPARSE_SPGEMM_ALG1) {
            CS(g_api.cusparseSpGEMM_estimateMemory(P.h, op, op, alpha, P.A, P.B, beta, P.C, t, a, P.d,
                                                   chunk_fraction, &b3, nullptr, nullptr));
            OK(P.alloc(&d3, b3));
            note();
            CS(g_api.cusparseSpGEMM_estimateMemory(P.h, op, op, alpha, P.A, P.B, beta, P.C, t, a, P.d,
                                                   chunk_fraction, &b3, d3, &b2));
            P.release(d3, b3);
        } else {
            CS(g_api.cusparseSpGEMM_compute(P.h, op, op, alpha, P.A, P.B, beta, P.C, t, a, P.d, &b2,
                                            nullptr));
        }
        OK(P.alloc(&d2, b2));
        note();
        CS(g_api.cusparseSpGEMM_compute(P.h, op, op, alpha, P.A, P.B, beta, P.C, t, a, P.d, &b2, d2));
        CS(g_api.cusparseSpMatGetSize(P.C, &rows_c, &cols_c, &nnz_c));
        OK(P.alloc(&c_cols, (size_t)(nnz_c ? nnz_c : 1) * 4));
        OK(P.alloc(&c_vals, (size_t)(nnz_c ? nnz_c : 1) * vbytes));
        CS(g_api.cusparseCsrSetPointers(P.C, c_rows, c_cols, c_vals));
        CS(g_api.cusparseSpGEMM_copy(P.h, op, op, alpha, P.A, P.B, beta, P.C, t, a, P.d));
        ACC_CUDA_TRY(cudaStreamSynchronize(s));
        const auto t1 = std::chrono::steady_clock::now();
        result->ms_total = (float)std::chrono::duration<double, std::milli>(t1 - t0).count();
    } else {
        CS(g_api.cusparseSpGEMMreuse_workEstimation(P.h, op, op, P.A, P.B, P.C, a, P.d, &b1, nullptr));
        OK(P.alloc(&d1, b1));
        CS(g_api.cusparseSpGEMMreuse_workEstimation(P.h, op, op, P.A, P.B, P.C, a, P.d, &b1, d1));
        CS(g_api.cusparseSpGEMMreuse_nnz(P.h, op, op, P.A, P.B, P.C, a, P.d, &b2, nullptr, &b3, nullptr, &b4,
                                         nullptr));
        OK(P.alloc(&d2, b2));
        OK(P.alloc(&d3, b3));
        OK(P.alloc(&d4, b4));
        note();
        CS(g_api.cusparseSpGEMMreuse_nnz(P.h, op, op, P.A, P.B, P.C, a, P.d, &b2, d2, &b3, d3, &b4, d4));
        P.release(d1, b1);
        P.release(d2, b2);
        CS(g_api.cusparseSpMatGetSize(P.C, &rows_c, &cols_c, &nnz_c));
        OK(P.alloc(&c_cols, (size_t)(nnz_c ? nnz_c : 1) * 4));
        OK(P.alloc(&c_vals, (size_t)(nnz_c ? nnz_c : 1) * vbytes));
        CS(g_api.cusparseCsrSetPointers(P.C, c_rows, c_cols, c_vals));
        CS(g_api.cusparseSpGEMMreuse_copy(P.h, op, op, P.A, P.B, P.C, a, P.d, &b5, nullptr));
        OK(P.alloc(&d5, b5));
        note();
        CS(g_api.cusparseSpGEMMreuse_copy(P.h, op, op, P.A, P.B, P.C, a, P.d, &b5, d5));
        P.release(d3, b3);
        CS(g_api.cusparseSpGEMMreuse_compute(P.h, op, op, alpha, P.A, P.B, beta, P.C, t, a, P.d));
        ACC_CUDA_TRY(cudaStreamSynchronize(s));
        const auto t1 = std::chrono::steady_clock::now();
        result->ms_total = (float)std::chrono::duration<double, std::milli>(t1 - t0).count();
        cudaEvent_t e0 = nullptr, e1 = nullptr;
        ACC_CUDA_TRY(cudaEventCreate(&e0));
        int st = acc_cuda_status(cudaEventCreate(&e1), "cudaEventCreate");
        std::vector<float> ms;
        for (int r = 0; st == ACC_SUCCESS && r < reps; r++) {
            cudaEventRecord(e0, s);
            st = status(g_api.cusparseSpGEMMreuse_compute(P.h, op, op, alpha, P.A, P.B, beta, P.C, t, a, P.d),
                        "cusparseSpGEMMreuse_compute");
            cudaEventRecord(e1, s);
            if (st == ACC_SUCCESS) st = acc_cuda_status(cudaEventSynchronize(e1), "cudaEventSynchronize");
            float x = 0;
            if (st == ACC_SUCCESS)
                st = acc_cuda_status(cudaEventElapsedTime(&x, e0, e1), "cudaEventElapsedTime");
            ms.push_back(x);
        }
        if (e0) cudaEventDestroy(e0);
        if (e1) cudaEventDestroy(e1);
        if (st != ACC_SUCCESS) return st;
        std::sort(ms.begin(), ms.end());
        result->ms_reuse = ms[ms.size() / 2];
    }
    result->nnz_c = nnz_c;
    result->buffer_bytes = buffers_peak;
    return ACC_SUCCESS;
}
