/*
 * csr_spmm.cu -- FP32 CUDA-core CSR SpMM, the TF32 plan's kernel for matrices whose Tensor-Core
 * blocks are too sparse to pay (variant csr = 1, see tf32_spmm.h and accspmm/_tf32.py).
 *
 * A is the plan's CSR with its rows in the reordered order (row i is row perm[i] of the
 * original), so rows that share columns run in the same thread block and reuse B rows in L1;
 * row i is written to C[perm[i]].  A group of G lanes (8, 16 or 32) owns one row and a slice of
 * G * V columns, V = 4 (float4 loads and stores: n % 4 == 0 and 16-byte aligned B and C) or 1.
 * The group loads G column ids and values of its row in one coalesced load, then broadcasts them
 * one by one with shuffles; every lane multiplies the value into its V columns of that B row.
 * Four B rows are loaded before the first of their FMAs (more loads in flight per warp: the
 * kernel is bound by the latency of B's gathers, not by arithmetic).
 *
 * Arithmetic: FP32 FMA in CSR order per row, from zero: no TF32 rounding, so a csr plan is at
 * least as accurate as the Tensor-Core kernel and bit-exact on small integers; deterministic
 * (no atomics, the order of every sum fixed by the CSR).
 */
#include <cuda_runtime.h>

#include "acc_cuda_internal.h"
#include "tf32_spmm.h"

namespace {

constexpr int kThreads = 256;

template <int V> struct Vec;
template <> struct Vec<1> {
    using T = float;
    static __device__ __forceinline__ T load(const float *p) { return __ldg(p); }
    static __device__ __forceinline__ void fma(float (&acc)[1], float a, T b) { acc[0] = fmaf(a, b, acc[0]); }
    static __device__ __forceinline__ void store(float *p, const float (&acc)[1]) { __stcs(p, acc[0]); }
};
template <> struct Vec<4> {
    using T = float4;
    static __device__ __forceinline__ T load(const float *p) {
        return __ldg(reinterpret_cast<const float4 *>(p));
    }
    static __device__ __forceinline__ void fma(float (&acc)[4], float a, T b) {
        acc[0] = fmaf(a, b.x, acc[0]);
        acc[1] = fmaf(a, b.y, acc[1]);
        acc[2] = fmaf(a, b.z, acc[2]);
        acc[3] = fmaf(a, b.w, acc[3]);
    }
    static __device__ __forceinline__ void store(float *p, const float (&acc)[4]) {
        __stcs(reinterpret_cast<float4 *>(p), make_float4(acc[0], acc[1], acc[2], acc[3]));
    }
};

template <int G, int V> __global__ void __launch_bounds__(kThreads) csr_spmm_kernel(const acc_tf32_args p) {
    using L = Vec<V>;
    const int lane = threadIdx.x % G;
    const int64_t row = (int64_t)blockIdx.x * (kThreads / G) + threadIdx.x / G;
    if (row >= p.m) return; /* uniform over the group: its shuffles involve only its lanes */
    const unsigned mask = G == 32 ? 0xffffffffu : ((1u << G) - 1) << (threadIdx.x % 32 / G * G);
    const int64_t col = (int64_t)blockIdx.y * (G * V) + (int64_t)lane * V;
    const bool active = col < p.n; /* V = 4: n % 4 == 0, so all four columns are in range */
    const float *B = p.B + (active ? col : 0);
    const int64_t n = p.n, end = p.csr_offsets[row + 1];
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; v++)
        acc[v] = 0.0f;
    for (int64_t base = p.csr_offsets[row]; base < end; base += G) {
        const int64_t q = base + lane;
        const int c = q < end ? __ldg(p.csr_cols + q) : 0;
        const float a = q < end ? __ldg(p.csr_values + q) : 0.0f;
        const int cnt = end - base < G ? (int)(end - base) : G;
        int j = 0;
        for (; j + 4 <= cnt; j += 4) {
            int cj[4];
            float aj[4];
            typename L::T b[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                cj[u] = __shfl_sync(mask, c, j + u, G);
                aj[u] = __shfl_sync(mask, a, j + u, G);
            }
            if (active) {
#pragma unroll
                for (int u = 0; u < 4; u++)
                    b[u] = L::load(B + (int64_t)cj[u] * n);
#pragma unroll
                for (int u = 0; u < 4; u++)
                    L::fma(acc, aj[u], b[u]);
            }
        }
        for (; j < cnt; j++) {
            const int cj = __shfl_sync(mask, c, j, G);
            const float aj = __shfl_sync(mask, a, j, G);
            if (active) L::fma(acc, aj, L::load(B + (int64_t)cj * n));
        }
    }
    if (active) L::store(p.C + __ldg(p.perm + row) * n + col, acc);
}

template <int G, int V> int launch(const acc_tf32_args &p, cudaStream_t stream) {
    const int64_t row_blocks = (p.m + kThreads / G - 1) / (kThreads / G);
    const int64_t slices = (p.n + G * V - 1) / (G * V);
    if (row_blocks > 0x7fffffffLL || slices > 65535) return ACC_ERR_TOO_LARGE;
    csr_spmm_kernel<G, V><<<dim3((unsigned)row_blocks, (unsigned)slices), kThreads, 0, stream>>>(p);
    ACC_CUDA_TRY(cudaGetLastError());
    return ACC_SUCCESS;
}

} // namespace

/* Lanes per row: the narrowest group that covers n with its vectors (at least 8 lanes). */
extern "C" int acc_csr_cuda_spmm(const acc_tf32_args *p, void *stream_ptr) {
    const cudaStream_t s = (cudaStream_t)stream_ptr;
    if (!p->csr_offsets || !p->csr_cols || !p->csr_values) return ACC_ERR_INVALID_ARGUMENT;
    const bool vec = p->n % 4 == 0 && (uintptr_t)p->B % 16 == 0 && (uintptr_t)p->C % 16 == 0;
    if (vec) return p->n > 64 ? launch<32, 4>(*p, s) : p->n > 32 ? launch<16, 4>(*p, s) : launch<8, 4>(*p, s);
    return p->n > 16 ? launch<32, 1>(*p, s) : p->n > 8 ? launch<16, 1>(*p, s) : launch<8, 1>(*p, s);
}
