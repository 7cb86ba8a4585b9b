/*
 * half_device.h -- device helpers shared by the half-precision BSR16 kernels (half_spmm.cu: warps
 * on mma.sync; half_wgmma.cu: warpgroups on wgmma): element conversion, the blocks' fragment order,
 * the exact recomputation of a non-finite output element, and the mbarrier operations of the TMA
 * pipelines.  Internal; included by .cu files only.
 */
#ifndef ACC_HALF_DEVICE_H
#define ACC_HALF_DEVICE_H

#include <cuda.h> /* CUtensorMap (types only) */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>

#include "half_spmm.h"

/* half_spmm.cu: the driver's cuTensorMapEncodeTiled (through the runtime's entry point), or NULL. */
PFN_cuTensorMapEncodeTiled_v12000 acc_half_encoder();

/* half_spmm.cu: the tensor map of B (k x n halves) for 16 x 64 tiles with the 128-byte swizzle, the
 * calling thread's last one cached; false where the driver cannot make it. */
bool acc_half_b_map(const acc_half_args &p, CUtensorMap *map);

/* A thread's last tensor map of B, for one kind of map (a thread_local each): a map is a function of B's
 * address, n, k and the kind's `variant` (e.g. its box) only, so calls on the same B skip the driver's
 * encoding.  get() remakes it with make(&map) where any of them changed; false, with nothing kept, where
 * make fails. */
struct LastBMap {
    const uint16_t *B = nullptr;
    int64_t n = -1, k = -1;
    int variant = 0;
    CUtensorMap map;

    template <typename Make> bool get(const acc_half_args &p, int v, CUtensorMap *out, Make make) {
        if (B != p.B || n != p.n || k != p.k || variant != v) {
            if (!make(&map)) {
                B = nullptr;
                return false;
            }
            B = p.B;
            n = p.n;
            k = p.k;
            variant = v;
        }
        *out = map;
        return true;
    }
};

/* Whether every row of B and C starts on a 16-byte boundary (n a multiple of 8, both arrays 16-byte
 * aligned): the 16-byte copies and stores of the row and pair kernels, and the quads on B and C directly. */
inline bool rows_16b(const acc_half_args &p) {
    return p.n % 8 == 0 && (uintptr_t)p.B % 16 == 0 && (uintptr_t)p.C % 16 == 0;
}

/* half_wgmma.cu: acc_half_spmm for quads (args.pairs == ACC_HALF_QUADS); ACC_ERR_UNSUPPORTED where
 * this build or device has no warpgroup MMA or B and C do not allow its copies (nothing launched). */
int acc_half_quads(const acc_half_args &p, cudaStream_t s);
/* Columns of a quad thread block at width n for a schedule of `tasks` quads or parts (its column tile: 128,
 * 256 or 512; narrower where the wider tile's grid would leave SMs idle). */
int64_t acc_half_quad_cols(int64_t n, int64_t tasks);

namespace acc_half {

template <int FMT> __device__ __forceinline__ float to_f32(uint16_t h) {
    if (FMT == ACC_HALF_BF16) return __uint_as_float((uint32_t)h << 16);
    return __half2float(__ushort_as_half(h));
}

/* Position of block entry (i, j) in the fragment order (csrc/accspmm.h). */
__device__ __forceinline__ int frag_pos(int i, int j) {
    return 8 * (4 * (i & 7) + ((j & 7) >> 1)) + 2 * ((i >> 3) + 2 * (j >> 3)) + (j & 1);
}

/* Row i of block row r at column col, from the stored entries only, in ascending column order.
 * Out of line (the rare non-finite path stays out of the kernels' registers), so it takes the
 * arrays it reads as scalars: a reference to the kernel's parameter struct would make every thread
 * copy the struct (168 bytes) to a local-memory stack frame at entry, which the split reduction,
 * a thread per element, paid in full. */
template <int FMT>
__device__ __noinline__ float
exact_elem_of(const int64_t *__restrict__ brow_offsets, const uint64_t *__restrict__ block_masks,
              const int32_t *__restrict__ block_cols, const uint16_t *__restrict__ block_values,
              const uint16_t *__restrict__ B, int64_t n, int64_t r, int i, int64_t col) {
    const int64_t b0 = brow_offsets[r], b1 = brow_offsets[r + 1];
    float acc = 0.f;
    for (int64_t b = b0; b < b1; b++) {
        uint32_t bits = (uint32_t)(block_masks[4 * b + i / 4] >> (16 * (i % 4))) & 0xffffu;
        while (bits) {
            const int j = __ffs(bits) - 1;
            bits &= bits - 1;
            const int64_t bcol = (int64_t)block_cols[b] * 16 + j;
            const float a = to_f32<FMT>(block_values[256 * b + frag_pos(i, j)]);
            const float x = to_f32<FMT>(B[bcol * n + col]);
            acc = __fadd_rn(acc, __fmul_rn(a, x)); /* the product of two half values is exact in FP32 */
        }
    }
    return acc;
}

__device__ __forceinline__ unsigned smem_u32(const void *q) { return (unsigned)__cvta_generic_to_shared(q); }

/* An mbarrier in shared memory expecting `count` arrivals a phase. */
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count = 1) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
#endif
}

__device__ __forceinline__ void mbar_init_fence() {
#if __CUDA_ARCH__ >= 900
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

/* Waits until the phase of parity `parity` of the mbarrier has completed. */
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
#if __CUDA_ARCH__ >= 900
    unsigned done = 0;
    while (!done)
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
#endif
}

/* Two adjacent elements (at is even, n is even: 4- or 8-byte aligned). */
template <int FMT, bool OUT_F32>
__device__ __forceinline__ void store2(const acc_half_args &p, int64_t at, float v0, float v1) {
    if (OUT_F32)
        __stcs(reinterpret_cast<float2 *>(static_cast<float *>(p.C) + at), make_float2(v0, v1));
    else if (FMT == ACC_HALF_BF16)
        *reinterpret_cast<__nv_bfloat162 *>(static_cast<__nv_bfloat16 *>(p.C) + at) =
            __floats2bfloat162_rn(v0, v1);
    else
        *reinterpret_cast<__half2 *>(static_cast<__half *>(p.C) + at) = __floats2half2_rn(v0, v1);
}

/* A TMA copy of the 2D box at (x, y) of `map` into shared memory at dst, reported to the mbarrier at bar
 * (complete_tx of the box's bytes). */
__device__ __forceinline__ void tma_2d(unsigned dst, const CUtensorMap *map, int x, int y, unsigned bar) {
#if __CUDA_ARCH__ >= 900
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, "
        "{%2, %3}], [%4];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
        : "memory");
#endif
}

} // namespace acc_half

#endif
