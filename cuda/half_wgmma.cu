/*
 * half_wgmma.cu -- BSR16 on quads of block rows with Hopper's warpgroup MMA (sm_90a): C = A @ B, FP16 or
 * BF16 in, FP32 accumulate, for block-structured A (half_spmm.h, acc_half_args.pairs = ACC_HALF_QUADS).
 *
 * Why.  The warp kernels of half_spmm.cu issue mma.sync.m16n8k16 with B fragments from ldmatrix: each
 * 16 x 64 tile of B feeds 16 or 32 rows, and a warp's issue slots go to ldmatrix, address work and
 * MMAs.  On uniform 32 x 32 blocks they reach about 3.4 TB/s of B tiles from L2 and 110-120 TFLOP/s of
 * MMA (benchmarks/NOTES.md), half of what cuSPARSE's Blocked-ELL and dense cuBLAS get.  Here a
 * warpgroup (4 warps) multiplies 64 rows at once with wgmma.mma_async.m64nNk16, B read by the Tensor
 * Cores straight from shared memory, and a producer warp keeps a ring of stages filled by TMA.
 *
 * Layout.  Quad Q is block rows 4Q .. 4Q + 3 (rows 64Q .. 64Q + 63).  Its entries u = pair_offsets[Q]
 * .. pair_offsets[Q + 1] - 1 are the ascending union of the four rows' column blocks: column block
 * pair_cols[u], and the four rows' blocks packed at group_values[1024 u ..] (zeros where a row has none,
 * so its warp multiplies zeros).  Each entry is one K = 16 step for all 64 rows.
 *
 * Thread block: two consumer warpgroups (warps 0-7) and a producer warpgroup (warps 8-11, of which warp 8
 * works; setmaxnreg gives the consumers 224 registers and the producers 56), for one task and NT = 2 NW
 * columns (NW = 64, 128 or 256 by n).  A task (acc_half_args.tasks, biggest first) is a quad, or a range of
 * a hub quad's entries whose FP32 sums go to a workspace slot for reduce_splits (half_spmm.cu) to add in
 * slot order; accspmm._half.quad_schedule cuts quads so that none is the kernel's tail.  A stage holds kE
 * consecutive entries (4; 2 at NW = 256): their 16 x NT tiles of B (one TMA request each: a 3D tensor map of
 * 64-column chunks where n % 64 == 0, else NT / 64 boxes of 16 x 64, a request each, which half_spmm.cu's
 * pad_pays avoids by padded copies where they cost less; 128-byte swizzle) and their packed
 * blocks of A (one bulk copy), with a `full` mbarrier (the producer's arrive with the expected bytes; the
 * copies' complete_tx) and an `empty` one (an arrival per consumer thread).  The producer's lanes hold 32
 * entries' column blocks; kLanes stage loads go out side by side, each from a group of lanes that issue its
 * requests a lane each (one lane issuing them in turn was the kernel's limit: c1e9267 took uniform 70% at
 * n = 512 from 104.5 to 85.0 us on the H100).  Consumer warpgroup w, per
 * stage: wait for `full`, take its warp's 16 x 16 blocks (the BSR16 fragment order is wgmma's register layout
 * of A for a warp's 16 rows), one wgmma.fence, kE wgmma.m64n{NW}k16 with B described in shared memory as
 * MN-major, 128-byte swizzle (the TMA box's layout: rows of 128 bytes, 8-row groups 1,024 bytes apart,
 * 64-column chunks 2,048 apart), columns w NW .., one commit; then wait for the stage before (wait_group 1)
 * and release it.  Measured on the H100 (benchmarks/NOTES.md): a stage per entry, one lane issuing, ran at
 * about 0.45 us an entry whatever its bytes (even with the copies and MMAs taken out): the copies are few and
 * large now, and the per-stage waits are shared by kE entries.  Every sum runs in ascending column-block
 * order over the quad's entries (a row without a block there adds zeros), so the result is deterministic;
 * within a block the order is wgmma's, so on data that is not exact in FP32 the bits may differ from the warp
 * kernels' (within the same error bound; integer data is exact in all of them).
 *
 * Write-back: row 64Q + 16j + i goes to C[perm[...]] (rows >= m skipped), columns >= n not written; a
 * non-finite FP32 sum is recomputed from the stored entries (acc_half::exact_elem_of), scipy's
 * semantics, as the other kernels do.  A part writes its FP32 sums to workspace rows 64 slot + 16j + i,
 * and the reduction recomputes a non-finite total.
 *
 * Limits: sm_90 (the cubin is built for sm_90a: accspmm's build adds it where its arch list has 90),
 * n a multiple of 8 with B and C 16-byte aligned (TMA's row pitch), n < 2^31, k < 2^31.
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdlib>

#include "acc_cuda_internal.h"
#include "half_device.h"
#include "half_spmm.h"

/* wgmma and its fences need the architecture-specific target (sm_90a); elsewhere the kernel is empty
 * and acc_half_quads reports ACC_ERR_UNSUPPORTED before launching it. */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ACC_WGMMA 1
#else
#define ACC_WGMMA 0
#pragma nv_diag_suppress 177 /* the compiled-out kernels leave their helpers and constants unreferenced */
#endif

namespace {

using namespace acc_half;

constexpr int kBox = 2048;    /* bytes of a 16 x 64 box of B */
constexpr int kABytes = 2048; /* an entry's four 512-byte blocks of A */
constexpr int kThreads = 384; /* two consumer warpgroups and a producer warpgroup (one warp of it works) */

template <int NW> struct Quad {
    static constexpr int kCols = 2 * NW;               /* columns of a thread block */
    static constexpr int kBBytes = kCols * 32;         /* an entry's tile of B: 16 rows of kCols halves */
    static constexpr int kEntries = NW == 256 ? 2 : 4; /* entries a stage holds (one wait, one MMA batch) */
    static constexpr int kStage = kEntries * (kBBytes + kABytes); /* B tiles, then the blocks of A */
    static constexpr int kStages = (225 * 1024) / kStage < 8 ? (225 * 1024) / kStage : 8;
    static constexpr int kSmem = 1024 + kStages * kStage + kStages * 16; /* alignment, stages, barriers */
    /* stage loads the producer issues side by side: a pass waits for all of its stages to be free, and the
     * consumers free a stage one load later, so a pass of kStages loads or more would wait for itself, and
     * a long pass leaves stages idle; two at NW = 256 (H100: n = 512 1.05x on uniform 70% and ogbl-ddi),
     * else one (two at NW = 128: 0.95x at n = 256, and racecheck hazards; four at NW = 64, once kept, drew
     * racecheck hazards on long quads and ran 1.04x slower in geometric mean, uniform 70% at n = 128 41.5
     * against 36.9 us: benchmarks/NOTES.md, 2026-11-27 14:43) */
    static constexpr int kLanes = NW == 256 ? 2 : 1;
    /* A's blocks evict-first in L2 (bulk_copy's policy) from 256 columns a thread block: H100, uniform 70%
     * and ogbl-ddi 1.02-1.09x (with two stage loads at once at NW = 256); at NW = 64 uniform 90% took 18.0
     * -> 20.0 us, so not there */
    static constexpr bool kEvictA = NW >= 128;
    static constexpr int kChunk =
        32 / (kLanes * kEntries) * (kLanes * kEntries); /* entries a producer lane holds */
    static_assert(kEntries * (kCols / 64) <= 32 / kLanes, "a stage load's requests, a lane each");
};

/* The shared-memory descriptor of a 16 x NW tile of B at `addr` (1,024-aligned stage): MN-major with
 * the 128-byte swizzle; leading byte offset 2,048 (the next 64-column box), stride byte offset 1,024
 * (the next 8 rows). */
__device__ __forceinline__ uint64_t b_desc(unsigned addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(kBox >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
           (1ull << 62);
}

/* Registers per thread: the producer warpgroup gives back to 56, the consumers take 224 (64,512 of the
 * SM's 65,536 for 384 threads; __launch_bounds__ alone allows 168). */
__device__ __forceinline__ void setmaxnreg_dec() {
#if ACC_WGMMA
    asm volatile("setmaxnreg.dec.sync.aligned.u32 56;");
#endif
}

__device__ __forceinline__ void setmaxnreg_inc() {
#if ACC_WGMMA
    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;");
#endif
}

__device__ __forceinline__ void wg_fence() {
#if ACC_WGMMA
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ void wg_commit() {
#if ACC_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}

__device__ __forceinline__ void wg_wait1() {
#if ACC_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
#endif
}

__device__ __forceinline__ void wg_wait0() {
#if ACC_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#endif
}

/* Orders the accumulators after the wait that completes the MMAs writing them. */
template <int N> __device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* d (64 x NW, FP32, wgmma's accumulator layout) += A (the warpgroup's 64 x 16, a warp's 16 rows in
 * `a`, BSR16 fragment order) x B (16 x NW from shared memory, `desc`). */
template <int FMT, int NW> __device__ __forceinline__ void wgmma_rs(float *d, const uint4 &a, uint64_t desc);

#if ACC_WGMMA
/* the FP16 and BF16 wrappers of width NW */
#define ACC_WGMMA_RS_BOTH(NW)                                                                                \
    template <>                                                                                              \
    __device__ __forceinline__ void wgmma_rs<ACC_HALF_FP16, NW>(float *d, const uint4 &a, uint64_t desc) {   \
        ACC_WGMMA_RS_##NW("f16");                                                                            \
    }                                                                                                        \
    template <>                                                                                              \
    __device__ __forceinline__ void wgmma_rs<ACC_HALF_BF16, NW>(float *d, const uint4 &a, uint64_t desc) {   \
        ACC_WGMMA_RS_##NW("bf16");                                                                           \
    }

/* wgmma.m64n64k16 with elements of type TY ("f16" or "bf16"), A from registers, B MN-major */
#define ACC_WGMMA_RS_64(TY)                                                                                  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {"                                \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                    \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"            \
                 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                                            \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),       \
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),   \
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),             \
                   "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),             \
                   "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])              \
                 : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "l"(desc), "r"(1))

ACC_WGMMA_RS_BOTH(64)

/* wgmma.m64n128k16 with elements of type TY ("f16" or "bf16"), A from registers, B MN-major */
#define ACC_WGMMA_RS_128(TY)                                                                                 \
    asm volatile(                                                                                            \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                         \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {"                                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                             \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                   \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                   \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                     \
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                                     \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),    \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),           \
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),         \
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),         \
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),         \
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),         \
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),         \
          "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),         \
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])          \
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "l"(desc), "r"(1))

ACC_WGMMA_RS_BOTH(128)

/* wgmma.m64n256k16 with elements of type TY ("f16" or "bf16"), A from registers, B MN-major */
#define ACC_WGMMA_RS_256(TY)                                                                                 \
    asm volatile(                                                                                            \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                                        \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {"                                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                             \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                   \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                   \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                   \
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                   \
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                   \
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "       \
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"     \
        "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"                                                \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),    \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),           \
          "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),         \
          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),         \
          "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),         \
          "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),         \
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),         \
          "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),         \
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),         \
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),         \
          "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),         \
          "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),         \
          "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),         \
          "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),         \
          "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]),   \
          "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]),  \
          "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),  \
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),  \
          "+f"(d[127])                                                                                       \
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "l"(desc), "r"(1))

ACC_WGMMA_RS_BOTH(256)
#else
template <int FMT, int NW> __device__ __forceinline__ void wgmma_rs(float *, const uint4 &, uint64_t) {}
#endif

__device__ __forceinline__ void expect_bytes(unsigned bar, unsigned bytes) {
#if ACC_WGMMA
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
#endif
}

/* The 3D map's box: 16 rows of B from row y, NT / 64 chunks of 64 columns from chunk z, in one request. */
__device__ __forceinline__ void tma_box3(unsigned dst, const CUtensorMap *map, int y, int z, unsigned bar) {
#if ACC_WGMMA
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, "
        "{%2, %3, %4}], [%5];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(0), "r"(y), "r"(z), "r"(bar)
        : "memory");
#endif
}

__device__ __forceinline__ void bulk_copy(unsigned dst, const void *src, unsigned bytes, unsigned bar) {
#if ACC_WGMMA
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
#endif
}

/* An L2 policy for the blocks of A, which are read once: evict-first, so that they do not push out the tiles
 * of B, which every thread block reads again (Quad::kEvictA). */
__device__ __forceinline__ uint64_t evict_first_policy() {
    uint64_t pol = 0;
#if ACC_WGMMA
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
    return pol;
}

/* bulk_copy with an L2 cache policy. */
__device__ __forceinline__ void bulk_copy(unsigned dst, const void *src, unsigned bytes, unsigned bar,
                                          uint64_t pol) {
#if ACC_WGMMA
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
                 "[%1], %2, [%3], %4;" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(pol)
                 : "memory");
#endif
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
#if ACC_WGMMA
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
#endif
}

template <int FMT, bool OUT_F32, int NW>
__global__ void __launch_bounds__(kThreads, 1)
    quad_kernel(const acc_half_args p, const __grid_constant__ CUtensorMap map, int chunked) {
#if ACC_WGMMA
    using Q = Quad<NW>;
    constexpr int kStages = Q::kStages, kE = Q::kEntries;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    const unsigned base = smem_u32(smem);
    const unsigned bars =
        base + kStages * Q::kStage; /* full[s] at bars + 8 s, empty[s] at bars + 8 (kStages + s) */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* task (quad, quad + 1, u0, u1, slot): entries u0 .. u1 - 1 of the quad, to C (slot -1) or to workspace
     * slot `slot` (a part of a split quad) */
    const int64_t *task = p.tasks + ACC_HALF_TASK_WORDS * (int64_t)blockIdx.x;
    const int64_t quad = task[0], u0 = task[2], count = task[3] - u0, slot = task[4];
    const int64_t n0 = (int64_t)blockIdx.y * Q::kCols;
    const int64_t groups = (count + kE - 1) / kE; /* stage loads: entries kE g .. kE g + kE - 1 */
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; s++) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (kStages + s), 256); /* every consumer thread */
        }
        mbar_init_fence();
    }
    __syncthreads();
    pdl_wait();      /* B is read (TMA) and C written only after the kernels before this one */
    if (warp >= 8) { /* the producer warpgroup: its registers go to the consumers; warp 8 issues the copies */
        setmaxnreg_dec();
        if (warp != 8) return;
        /* lane l holds the column block of entry c + l of the current kChunk, and loads the next
         * kChunk's while the current ones are issued */
        constexpr int kChunk = Q::kChunk, kLanes = Q::kLanes, kGroup = 32 / kLanes;
        int32_t ncol = 0;
        auto fetch = [&](int64_t c) {
            if (lane < kChunk && c + lane < count) ncol = p.pair_cols[u0 + c + lane];
        };
        /* kLanes stage loads at a time, a group of kGroup lanes each: the group waits for its stage to be
         * free, its first lane arrives with the bytes to expect, then lane r of the group issues request r
         * of the stage (entry r / boxes, box r % boxes of its tile of B: a 3D request, or a 2D one per
         * 64-column chunk) and its first lane the bulk copy of the entries' blocks of A.  Requests issued
         * by one lane cost hundreds of cycles each (benchmarks/NOTES.md), so they go out side by side. */
        const int boxes = chunked ? Q::kCols / 64 : 1;
        const uint64_t pol = Q::kEvictA ? evict_first_policy() : 0;
        const int sl = lane / kGroup, r = lane % kGroup, re = r / boxes < kE ? r / boxes : kE - 1,
                  rb = r % boxes;
        fetch(0);
        for (int64_t c = 0; c < count; c += kChunk) {
            const int32_t col = ncol;
            fetch(c + kChunk);
            for (int h = 0; h < kChunk && c + h < count; h += kLanes * kE) {
                const int64_t g = (c + h) / kE + sl; /* this lane's stage load */
                const bool live = g < groups;
                const int s = (int)(g % kStages);
                if (live && g >= kStages)
                    mbar_wait(bars + 8 * (kStages + s), (unsigned)((g / kStages - 1) & 1));
                const unsigned full = bars + 8 * s, stage = base + s * Q::kStage;
                const int64_t first = kE * g, entries = count - first < kE ? count - first : kE;
                /* the arrival with the bytes to expect first, then the copies that bring them (the phase
                 * completes when they have all landed) */
                if (live && r == 0) expect_bytes(full, (unsigned)((Q::kBBytes + kABytes) * entries));
                __syncwarp();
                const int32_t ce = __shfl_sync(0xffffffffu, col, h + kE * sl + re); /* entry c + .. */
                if (live && r < kE * boxes && r / boxes < entries) {
                    const unsigned tile = stage + (r / boxes) * Q::kBBytes;
                    if (chunked)
                        tma_2d(tile + rb * kBox, &map, (int)(n0 + 64 * rb), 16 * ce, full);
                    else
                        tma_box3(tile, &map, 16 * ce, (int)(n0 / 64), full);
                }
                if (live && r == 0) {
                    const unsigned a_stage = stage + kE * Q::kBBytes, a_bytes = (unsigned)(kABytes * entries);
                    const uint16_t *a_src = p.group_values + 1024 * (u0 + first);
                    if (Q::kEvictA)
                        bulk_copy(a_stage, a_src, a_bytes, full, pol);
                    else
                        bulk_copy(a_stage, a_src, a_bytes, full);
                }
                __syncwarp();
            }
        }
        return;
    }
    /* a consumer: warpgroup wg (columns n0 + wg NW ..), warp j of it (block row 4 quad + j) */
    setmaxnreg_inc();
    const int wg = warp >> 2, j = warp & 3;
    float acc[NW / 2];
#pragma unroll
    for (int t = 0; t < NW / 2; t++)
        acc[t] = 0.f;
    /* stage load g: wait for it, take the warp's blocks of A from it, then one fence, its kE MMAs (past the
     * last entry: a zero block times the stage's first tile, since wgmma on a divergent path would be
     * serialized; a non-finite B value there makes a non-finite sum, which the write-back recomputes
     * exactly) and one commit; once the load before has been multiplied (wait_group 1), release its
     * stage.  The fragments alternate between two sets of registers: the MMAs read them until they
     * complete. */
    const unsigned b_off = wg * (NW / 64) * kBox;
    auto load = [&](int64_t g, uint4(&a)[kE]) {
        const int s = (int)(g % kStages);
        mbar_wait(bars + 8 * s, (unsigned)((g / kStages) & 1));
        const unsigned char *blocks = smem + s * Q::kStage + kE * Q::kBBytes + 512 * j + 16 * lane;
#pragma unroll
        for (int e = 0; e < kE; e++)
            a[e] = kE * g + e < count ? *reinterpret_cast<const uint4 *>(blocks + kABytes * e)
                                      : make_uint4(0, 0, 0, 0);
        wg_fence();
#pragma unroll
        for (int e = 0; e < kE; e++)
            wgmma_rs<FMT, NW>(
                acc, a[e], b_desc(base + s * Q::kStage + (kE * g + e < count ? e : 0) * Q::kBBytes + b_off));
        wg_commit();
        wg_wait1();
        /* each thread releases the stage before after its own reads of it (an arrival a thread, so the
         * order needs no warp barrier; compute-sanitizer's racecheck did not follow __syncwarp + one lane's
         * arrival) */
        if (g > 0) mbar_arrive(bars + 8 * (kStages + (int)((g - 1) % kStages)));
    };
    uint4 a0[kE], a1[kE];
    for (int64_t g = 0; g < groups; g += 2) {
        load(g, a0);
        if (g + 1 < groups) load(g + 1, a1);
    }
    wg_wait0();
    fence_regs(acc);
    /* write-back: lane holds rows r0 and r0 + 8, columns 8 t + 2 (lane % 4) + {0, 1} of its NW */
    const int64_t brow = 4 * quad + j;
    const int64_t cbase = n0 + wg * NW + 2 * (lane & 3);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int i = (lane >> 2) + 8 * h;
        const int64_t row = 16 * brow + i;
        if (row >= p.m) continue;
        if (slot >= 0) { /* a part: its FP32 sums, for reduce_splits (which handles non-finite sums) */
            float *ws = p.workspace + (slot * ACC_HALF_WINDOW_ROWS(ACC_HALF_QUADS) + 16 * j + i) * p.n;
#pragma unroll
            for (int t = 0; t < NW / 8; t++) {
                const int64_t col = cbase + 8 * t;
                if (col >= p.n) break;
                *reinterpret_cast<float2 *>(ws + col) =
                    make_float2(acc[4 * t + 2 * h], acc[4 * t + 2 * h + 1]);
            }
            continue;
        }
        const int64_t crow = p.perm[row] * p.n;
#pragma unroll
        for (int t = 0; t < NW / 8; t++) {
            const int64_t col = cbase + 8 * t;
            if (col >= p.n) break;
            float v0 = acc[4 * t + 2 * h], v1 = acc[4 * t + 2 * h + 1];
            if (!isfinite(v0 + v1)) { /* rare: the stored entries only (scipy's non-finite semantics) */
                if (!isfinite(v0))
                    v0 = exact_elem_of<FMT>(p.brow_offsets, p.block_masks, p.block_cols, p.block_values, p.B,
                                            p.n, brow, i, col);
                if (!isfinite(v1))
                    v1 = exact_elem_of<FMT>(p.brow_offsets, p.block_masks, p.block_cols, p.block_values, p.B,
                                            p.n, brow, i, col + 1);
            }
            store2<FMT, OUT_F32>(p, crow + col, v0, v1);
        }
    }
#endif
}

typedef void (*quad_kernel_fn)(const acc_half_args, const CUtensorMap, int);

/* Whether the current device runs the quad kernels: compute capability 9.0 with their sm_90a code in
 * this binary.  Cached per device. */
bool quads_usable() {
    static unsigned char known[kMaxDevices];
    const quad_kernel_fn k = quad_kernel<ACC_HALF_FP16, false, 64>;
    return kernel_runs_here(reinterpret_cast<const void *>(k), known,
                            [](int major, int minor, const cudaFuncAttributes &a) {
                                return major == 9 && minor == 0 && a.binaryVersion == 90;
                            });
}

/* B's tensor map for a thread block's 16 x (64 chunks) tiles: where n % 64 == 0, one 3D box {64 columns,
 * 16 rows, `chunks` chunks of 64 columns} over (column in a chunk, row, chunk), so a tile is one TMA
 * request (*chunked = 0; chunks past n/64 are out of bounds, zero-filled); else, or where the driver
 * refuses that map, the 2D map of 16 x 64 boxes, a request per chunk (*chunked = 1). */
bool quad_map(const acc_half_args &p, int chunks, CUtensorMap *map, int *chunked) {
    thread_local LastBMap last; /* the 3D map, its variant the chunks of a box */
    if (p.n % 64 == 0 && last.get(p, chunks, map, [&](CUtensorMap *m) {
            const PFN_cuTensorMapEncodeTiled_v12000 enc = acc_half_encoder();
            const cuuint64_t dims[3] = {64, (cuuint64_t)p.k, (cuuint64_t)(p.n / 64)};
            const cuuint64_t strides[2] = {(cuuint64_t)p.n * 2, 128};
            const cuuint32_t box[3] = {64, 16, (cuuint32_t)chunks}, elem[3] = {1, 1, 1};
            return enc &&
                   enc(m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<uint16_t *>(p.B), dims, strides, box,
                       elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
        })) {
        *chunked = 0;
        return true;
    }
    *chunked = 1;
    return acc_half_b_map(p, map);
}

template <int FMT, bool OUT_F32, int NW> int run_quads(const acc_half_args &p, cudaStream_t s) {
    static unsigned char prepared[kMaxDevices], pdl[kMaxDevices];
    CUtensorMap map;
    int chunked = 1;
    if (!quad_map(p, Quad<NW>::kCols / 64, &map, &chunked)) return ACC_ERR_UNSUPPORTED;
    const quad_kernel_fn k = quad_kernel<FMT, OUT_F32, NW>;
    const int st = raise_smem_limit(reinterpret_cast<const void *>(k), Quad<NW>::kSmem, prepared);
    if (st) return st;
    const int64_t tiles = (p.n + Quad<NW>::kCols - 1) / Quad<NW>::kCols;
    return acc_cuda_status(launch_ex(k, dim3((unsigned)p.num_tasks, (unsigned)tiles), dim3(kThreads),
                                     Quad<NW>::kSmem, s, pdl_usable(reinterpret_cast<const void *>(k), pdl),
                                     p, map, chunked),
                           "quad_kernel");
}

template <int FMT, bool OUT_F32> int launch_quads(const acc_half_args &p, cudaStream_t s) {
    const int64_t cols = acc_half_quad_cols(p.n, p.num_tasks);
    if (cols == Quad<256>::kCols) return run_quads<FMT, OUT_F32, 256>(p, s);
    if (cols == Quad<128>::kCols) return run_quads<FMT, OUT_F32, 128>(p, s);
    return run_quads<FMT, OUT_F32, 64>(p, s);
}

/* The SMs of the current device (cached per device; 0 where it cannot be had). */
int64_t sm_count() {
    static int known[kMaxDevices];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
        (void)cudaGetLastError();
        return 0;
    }
    if (!known[dev] && cudaDeviceGetAttribute(&known[dev], cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        known[dev] = 0;
    }
    return known[dev];
}

} // namespace

/* 512 columns above 256, 256 above 128, else 128; then halved (to 128 at least) while the grid of `tasks`
 * thread blocks per column tile, one an SM, still fits the SMs at the narrower tile: a thread block streams
 * its quad's entries alone, so a grid of fewer thread blocks than SMs leaves the others idle (H100, quads
 * forced, kernel us, n = 512 -> narrower tiles: benchmarks/NOTES.md, 2026-11-27 16:41).  Where the tiles
 * would make a second wave (128 quads of 8192^2 at n = 512: 256 thread blocks), each tile re-reads A and
 * refills the pipeline, and the narrower tiles were slower (benchmarks/NOTES.md, 2026-11-27 06:16).  The
 * tile changes which thread block sums an element, not its sum: the same bits either way (tests/test_half.py,
 * ACC_HALF_QUAD_NARROW=0 keeps the widest tile). */
int64_t acc_half_quad_cols(int64_t n, int64_t tasks) {
    int64_t cols = n > 256 ? 512 : n > 128 ? 256 : 128;
    const char *env = getenv("ACC_HALF_QUAD_NARROW"); /* "0": the widest tile always (for comparisons) */
    const int64_t sms = env && env[0] == '0' ? 0 : sm_count();
    while (cols > 128 && tasks * ((n + cols / 2 - 1) / (cols / 2)) <= sms)
        cols /= 2;
    return cols;
}

extern "C" int acc_half_quads_usable(void) { return quads_usable() ? 1 : 0; }

int acc_half_quads(const acc_half_args &p, cudaStream_t s) {
    if (!rows_16b(p) || p.num_tasks >= 0x7fffffffLL ||
        (p.n + 511) / 512 > 65535 || !quads_usable())
        return ACC_ERR_UNSUPPORTED;
    if (p.fmt == ACC_HALF_BF16)
        return p.out_f32 ? launch_quads<ACC_HALF_BF16, true>(p, s) : launch_quads<ACC_HALF_BF16, false>(p, s);
    return p.out_f32 ? launch_quads<ACC_HALF_FP16, true>(p, s) : launch_quads<ACC_HALF_FP16, false>(p, s);
}
