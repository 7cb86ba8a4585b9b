/*
 * half_spmm.cu -- C = A @ B on Tensor Cores, FP16 or BF16 in, FP32 accumulate; C rounded to the
 * input format (nearest even) or kept in FP32, for A in BSR16 (SMaT's block CSR, for block-structured
 * A; half_spmm.h).  Unstructured A in half precision runs the TF32 kernel's BitTCF pipeline with half
 * operands (tf32_spmm.cu, elem FP16/BF16); this file builds its tiles (acc_half_tiles).  The kernel
 * (half_kernel) is written over a layout's operations (BsrOps): the schedule, the split reduction,
 * the pipeline's shape and the non-finite rule.
 *
 * Algorithm.  A warp runs one task (a block row, or one part of a long block row) over one
 * column slice of ACC_HALF_SLICE = 64 columns.  For each 16 x 16 block it issues 8
 * `mma.sync.m16n8k16.row.col.f32.{f16,bf16}`:
 *   MMA "A" (16x16, row) = the block itself, stored in fragment order (csrc/accspmm.h), so a
 *                          lane's fragment is one 16-byte piece of the block's 512 bytes;
 *   MMA "B" (16x8, col)  = 16 rows of B (the block's column block) x 8 columns, one MMA per
 *                          8-column tile of the slice, loaded with ldmatrix.x4.trans;
 *   D (16x8)             = 16 rows of C x 8 columns.
 * Thread block, below ACC_HALF_WARPS slices (n <= 192): ACC_HALF_WARPS warps on consecutive tasks
 * and the same slice, so block rows that share column blocks share B rows in L1.  Grid: x = task
 * groups, y = slices (all tasks of slice 0 first, so the slice of B in use stays in L2).  From
 * ACC_HALF_WARPS slices on: the warps of a thread block run the same task on consecutive slices
 * (grid x = tasks, y = groups of slices) and read its blocks of A through L1, so A goes from L2
 * to the SM once per ACC_HALF_WARPS slices instead of once per slice (A is a third of a pair
 * step's bytes: two 512-byte blocks beside the 2 KB tile of B).  H100, kernel time, slice-major
 * over task-major, the same bits (2026-11-26): uniform 32x32 blocks 8192^2 0.93-0.99x at n = 256
 * and 512, irregular 0.88-1.01x, BSR16 forced on G3_circuit 0.85x, cnr-2000 0.92-0.97x, landmark
 * 1.01-1.03x.
 *
 * Pairs (acc_half_args.pairs, PairOps): a warp's window is a pair of block rows and its step one
 * column block of their union: one 16 x 64 B tile and both rows' blocks (a zero block where a row
 * has none), 16 MMAs on the same 4 ldmatrix.x4 loads of B instead of 8, so a structure of 32 x 32
 * blocks reads each B tile once for 32 rows.  64 accumulators a lane (168 registers: 12 warps per
 * SM against the row kernel's 128 registers and 16 warps), which only wide products repay
 * (accspmm._half.PAIR_MIN_N).  At widths with 16-byte rows of B and C the pairs run instead in
 * thread blocks of 128 columns (pair_cta_kernel below: the same tasks, entries and bits).
 *
 * Pipeline (per warp, DEPTH stages in shared memory): for block i + DEPTH - 1 each lane copies
 * one 16-byte piece of the block's values and 4 of the 16 x 64 B tile (2 KB) with cp.async and
 * commits one group; cp.async.wait_group(DEPTH - 1) + __syncwarp then publish block i.  The B
 * tile's rows are 128 bytes (8 pieces); piece c of tile row r sits at slot c ^ (r % 8), so the
 * 8 row addresses of each ldmatrix phase hit 8 different 16-byte bank groups.  Column ids of
 * the next 32 blocks sit one per lane in a register and are shuffled out, so no global load
 * sits between a block and its copies.  Rows of B beyond k (the last column block) and columns
 * beyond n are zero-filled (cp.async with source size 0, or element loads when n is not a
 * multiple of 8 or B is not 16-byte aligned).
 *
 * TMA (sm_90, the row kernel in slice-major thread blocks, rows of B a multiple of 128 bytes from a
 * 128-byte aligned B): one lane asks for each B tile with cp.async.bulk.tensor through a tensor map
 * of B (128-byte swizzle: the same slots; zero fill beyond k), and the stage's mbarrier says when it
 * has landed; the block's values still come by cp.async.  The same bits.  The TMA kernel holds 117 registers
 * against 155 (16 warps per SM instead of 12).  H100, kernel us, cp.async -> TMA, one process per
 * side (results/h100_half_tma.txt): uniform 32x32 blocks 8192^2 at n = 256 1.15-1.25x (99%: 12.8 ->
 * 11.1), at n = 512 1.04-1.11x (99%: 18.0 -> 16.8); G3_circuit, cnr-2000, landmark 1.06-1.14x;
 * ddi 0.95x, irregular block rows 0.94-1.01x.  Not used: in task-major blocks (n <= 192), whose
 * warps share B tiles through L1, which TMA bypasses (0.86-0.96x at n = 128), and in the pair
 * kernel (capped at 3 thread blocks per SM to fit: 0.93-1.01x on uniform blocks, the pairs' use).
 * Nor where B's rows are not a multiple of 128 bytes: n = 264 (528-byte rows) ran 0.81-0.86x at
 * 70-95%, n = 272 0.93-1.06x, while n = 320 and 384 ran 1.10-1.21x (results/h100_half_tma_widths.txt).
 * ACC_HALF_TMA=0 turns it off (comparisons).
 *
 * Write-back: row 16 r + i of the block row goes to C[perm[16 r + i]] (rows >= m skipped),
 * columns >= n neither read nor written.  A lane whose 32 sums are finite (one test over all of
 * them) in a slice below n stores them without a test per element.  The row kernel loads both of
 * a lane's perm entries before that test (results/h100_half_write_perm_first.txt, H100: rows kernel
 * 1.03x geomean, cnr-2000 1.11-1.19x, 99% at n = 512 16.8 -> 15.9 us); the pair kernel does not (at
 * its register count ptxas then gave it 192 registers instead of 168).  Split block rows: each part
 * writes its FP32 tile to its workspace slot; reduce_splits sums the parts in slot order
 * (deterministic, no atomics).
 *
 * Non-finite B (scipy's semantics): a dense block multiplies its zero slots too (0 * inf =
 * NaN), so every written element whose FP32 sum is not finite is recomputed by exact_elem from
 * the stored entries only (the block masks), in ascending column order, with the same rounded
 * operands; NaN and inf then land exactly where a stored entry of A meets them.  Finite sums
 * cost one comparison.
 *
 * Limits: n < 2^31, k < 2^31 (block column ids are int32), blocks < 2^57.
 */
#include <cuda.h> /* CUtensorMap (types only: the encoder comes through the runtime's entry point) */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdlib>

#include "acc_cuda_internal.h"
#include "half_device.h"
#include "half_spmm.h"

namespace {

using namespace acc_half;

constexpr int kWarps = ACC_HALF_WARPS;
constexpr int kSlice = ACC_HALF_SLICE;
constexpr int kTiles = kSlice / 8;        /* 8-column MMA tiles per slice */
constexpr int kBPieces = 16 * kSlice / 8; /* 16-byte pieces of a 16 x 64 B tile: 128 */
constexpr int kStage = kBPieces + 32;     /* pieces per stage: B tile + the block's 512 bytes */
constexpr int kDepth = 4;
constexpr int kTmaStage = 192; /* pieces per stage of the TMA kernels: 3,072 bytes (a multiple of 1,024) */

template <int FMT>
__device__ __forceinline__ void mma(float (&d)[4], const uint4 &a, uint32_t b0, uint32_t b1) {
    if (FMT == ACC_HALF_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void *smem) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* cp.async of 16 bytes (src_bytes 0: zeros); through L1 (.ca) or L2 only (.cg). */
template <bool L1> __device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    if (L1)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(src_bytes));
    else
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }

template <int N> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

/* ---- sm_90: the B tile by the tensor-memory accelerator (TMA) --------------------------------
 * One lane asks for the 16 x 64 tile with one cp.async.bulk.tensor; the tensor map's 128-byte
 * swizzle puts piece c of tile row r at slot c ^ (r % 8), the layout the cp.async path writes, and
 * fills rows beyond k and columns beyond n with zeros.  Each stage has an mbarrier (arrival count
 * 1: that lane's expect_tx) whose phase completes when the tile's 2,048 bytes have landed. */
__device__ __forceinline__ void tma_b_tile(unsigned dst, const CUtensorMap *map, int x, int y, unsigned bar) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "n"(16 * kSlice * 2)
                 : "memory");
#endif
    tma_2d(dst, map, x, y, bar);
}

template <int FMT>
__device__ __forceinline__ float exact_elem(const acc_half_args &p, int64_t r, int i, int64_t col) {
    return exact_elem_of<FMT>(p.brow_offsets, p.block_masks, p.block_cols, p.block_values, p.B, p.n, r, i,
                              col);
}

template <int FMT, bool OUT_F32>
__device__ __forceinline__ void store1(const acc_half_args &p, int64_t at, float v) {
    if (OUT_F32)
        __stcs(static_cast<float *>(p.C) + at, v);
    else if (FMT == ACC_HALF_BF16)
        static_cast<__nv_bfloat16 *>(p.C)[at] = __float2bfloat16_rn(v);
    else
        static_cast<__half *>(p.C)[at] = __float2half_rn(v);
}

/* Where a TMA copy of a stage's B tile reports (the kernel's tensor map of B, the stage's mbarrier). */
struct Tma {
    const CUtensorMap *map;
    unsigned bar;
};

/* Copies the 16 x 64 tile of B at column block bc (columns n0 ..) into a stage: rows beyond k and
 * columns beyond n as zeros.  Tile row r's 8 pieces: piece c at slot c ^ (r % 8).  TMA: lane 0 asks
 * for the whole tile (the stage is 1,024-byte aligned, as the swizzle needs). */
template <bool VEC, bool TMA>
__device__ __forceinline__ void issue_b_tile(const acc_half_args &p, uint4 *stage, int32_t bc, int64_t n0,
                                             int lane, const Tma &t) {
    if (TMA) {
        if (lane == 0) tma_b_tile(smem_u32(stage), t.map, (int)n0, 16 * bc, t.bar);
        return;
    }
    const int c = lane & 7;
    const int64_t col = n0 + 8 * c;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int r = (lane >> 3) + 4 * j;
        const int64_t krow = (int64_t)bc * 16 + r;
        uint4 *dst = stage + 8 * r + (c ^ (r & 7));
        if (VEC) {
            const bool ok = krow < p.k && col < p.n;
            cp_async16<true>(dst, ok ? p.B + krow * p.n + col : p.B,
                             ok ? 16 : 0); /* L1: the next block row often reads it too */
        } else {
            uint16_t h[8];
#pragma unroll
            for (int e = 0; e < 8; e++)
                h[e] = krow < p.k && col + e < p.n ? __ldg(p.B + krow * p.n + col + e) : (uint16_t)0;
            *dst = make_uint4(h[0] | (uint32_t)h[1] << 16, h[2] | (uint32_t)h[3] << 16,
                              h[4] | (uint32_t)h[5] << 16, h[6] | (uint32_t)h[7] << 16);
        }
    }
}

/* Copies block b's 512 bytes (a piece per lane) to dst; b < 0: zeros.  L1: through L1 (the other
 * warps of the thread block read the same block: slice-major thread blocks). */
template <bool L1 = false>
__device__ __forceinline__ void issue_block_values(const acc_half_args &p, uint4 *dst, int64_t b, int lane) {
    cp_async16<L1>(dst + lane, b >= 0 ? p.block_values + 256 * b + 8 * lane : p.block_values,
                   b >= 0 ? 16 : 0);
}

/* Copies block b (column block bc) into a stage: the 16 x 64 tile of B, then its 512 bytes. */
template <bool VEC, bool L1A, bool TMA>
__device__ __forceinline__ void issue(const acc_half_args &p, uint4 *stage, int64_t b, int32_t bc, int64_t n0,
                                      int lane, const Tma &t) {
    issue_block_values<L1A>(p, stage + kBPieces, b, lane);
    issue_b_tile<VEC, TMA>(p, stage, bc, n0, lane, t);
}

/* acc[TILES h + j] += block h of the stage x tile j of its B tile's columns from piece c0, for the stage's H
 * blocks (H = 2: the two rows of a pair); each B fragment is loaded once (ldmatrix.x4.trans) for all H
 * blocks.  The stage: the B tile's 16 rows of ROW 16-byte pieces (piece c of row r at slot c ^ (r % 8)), then
 * the blocks' 32 pieces each. */
template <int FMT, int H, int TILES = kTiles, int ROW = 8>
__device__ __forceinline__ void consume(const uint4 *stage, int lane, float (&acc)[H * TILES][4],
                                        int c0 = 0) {
    uint4 a[H];
#pragma unroll
    for (int h = 0; h < H; h++)
        a[h] = stage[16 * ROW + 32 * h + lane];
    const int mi = lane >> 3, r = 8 * (mi & 1) + (lane & 7);
#pragma unroll
    for (int jj = 0; jj < TILES / 2; jj++) {
        /* matrices: (k 0-7, tile 2jj), (k 8-15, 2jj), (0-7, 2jj+1), (8-15, 2jj+1) */
        const int c = c0 + 2 * jj + (mi >> 1);
        uint32_t b[4];
        ldmatrix_x4_trans(b, stage + ROW * r + (c ^ (r & 7)));
#pragma unroll
        for (int h = 0; h < H; h++) {
            mma<FMT>(acc[TILES * h + 2 * jj], a[h], b[0], b[1]);
            mma<FMT>(acc[TILES * h + 2 * jj + 1], a[h], b[2], b[3]);
        }
    }
}

/* ---- the layouts' operations (the kernel, half_kernel below, is shared) --------------------- */

template <int N> __device__ __forceinline__ void zero_acc(float (&acc)[N][4]) {
#pragma unroll
    for (int j = 0; j < N; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
}

/* Whether the lane's sums acc[OFF .. OFF + TILES - 1] are all finite, in one test: v * 0 is NaN exactly for
 * NaN and inf, and NaN stays NaN through the additions. */
template <int OFF, int TILES, int N> __device__ __forceinline__ bool sums_finite(const float (&acc)[N][4]) {
    float z = 0.f;
#pragma unroll
    for (int j = 0; j < TILES; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            z = fmaf(acc[OFF + j][e], 0.f, z);
    return isfinite(z);
}

/* Lane (g, t): rows g and g + 8 of block row r, columns n0 + 8j + 2t and + 1 of each tile j < TILES,
 * from acc[OFF + j]; to C (rows >= m and columns >= n skipped; a sum that is not finite recomputed from
 * the stored entries only: exact_elem), or (slot >= 0) to rows `lo` .. lo + 15 of workspace slot
 * `slot` of `rows` rows. */
template <int FMT, bool OUT_F32, bool VEC, int OFF, int N, bool EARLY = true, int TILES = kTiles>
__device__ __forceinline__ void write_block_row(const acc_half_args &p, const float (&acc)[N][4], int64_t r,
                                                int64_t slot, int rows, int lo, int64_t n0, int lane) {
    const int g = lane >> 2, t = lane & 3;
    if (slot >= 0) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *ws = p.workspace + (slot * rows + lo + g + 8 * h) * p.n;
#pragma unroll
            for (int j = 0; j < TILES; j++) {
                const int64_t col = n0 + 8 * j + 2 * t;
                if (col < p.n) ws[col] = acc[OFF + j][2 * h];
                if (col + 1 < p.n) ws[col + 1] = acc[OFF + j][2 * h + 1];
            }
        }
        return;
    }
    /* Both rows of C first, ahead of the finiteness test and of any store (a store to C could alias
     * perm, so a load after one would wait for it): one L2 round trip at the end of a task, not two. */
    int64_t dst[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t row = r * 16 + g + 8 * h;
        dst[h] = EARLY && row < p.m ? __ldg(p.perm + row) : -1;
    }
    /* The common case in one test for the lane's sums: all finite (sums_finite) and the slice's columns all
     * below n; then the stores go out without a test per element.  Otherwise each element as below. */
    const bool fast = sums_finite<OFF, TILES>(acc) && n0 + 8 * TILES <= p.n;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int i = g + 8 * h;
        const int64_t row = r * 16 + i;
        if (row >= p.m) continue;
        const int64_t base = (EARLY ? dst[h] : p.perm[row]) * p.n;
        if (fast) {
            const int64_t at = base + n0 + 2 * t;
#pragma unroll
            for (int j = 0; j < TILES; j++) {
                if (VEC) {
                    store2<FMT, OUT_F32>(p, at + 8 * j, acc[OFF + j][2 * h], acc[OFF + j][2 * h + 1]);
                } else {
                    store1<FMT, OUT_F32>(p, at + 8 * j, acc[OFF + j][2 * h]);
                    store1<FMT, OUT_F32>(p, at + 8 * j + 1, acc[OFF + j][2 * h + 1]);
                }
            }
            continue;
        }
#pragma unroll
        for (int j = 0; j < TILES; j++) {
            const int64_t col = n0 + 8 * j + 2 * t;
            float v0 = acc[OFF + j][2 * h], v1 = acc[OFF + j][2 * h + 1];
            if (!isfinite(v0) && col < p.n) v0 = exact_elem<FMT>(p, r, i, col);
            if (!isfinite(v1) && col + 1 < p.n) v1 = exact_elem<FMT>(p, r, i, col + 1);
            if (VEC) {
                if (col < p.n) store2<FMT, OUT_F32>(p, base + col, v0, v1);
            } else {
                if (col < p.n) store1<FMT, OUT_F32>(p, base + col, v0);
                if (col + 1 < p.n) store1<FMT, OUT_F32>(p, base + col + 1, v1);
            }
        }
    }
}

/* BSR16: a window is a block row, its blocks are the BSR16 blocks.  Cache: the block column of
 * block base + lane, refilled every 32 blocks (blocks are asked for in order, warp-uniform). */
struct BsrOps {
    static constexpr int kTilesN = kTiles, kStageN = kStage, kScratch = 0, kDepthN = kDepth;
    using Col = int32_t;
    struct Cache {
        int64_t base;
        int32_t c;
    };
    static __device__ __forceinline__ int64_t window_start(const acc_half_args &p, int64_t w) {
        return p.brow_offsets[w];
    }
    static __device__ __forceinline__ void init(Cache &k, const acc_half_args &p, int64_t b0, int64_t b1,
                                                int lane) {
        k.base = b0;
        k.c = b0 + lane < b1 ? __ldg(p.block_cols + b0 + lane) : 0;
    }
    static __device__ __forceinline__ Col cols(Cache &k, const acc_half_args &p, int64_t b, int64_t b1,
                                               int lane) {
        if (b >= k.base + 32) {
            k.base += 32;
            k.c = k.base + lane < b1 ? __ldg(p.block_cols + k.base + lane) : 0;
        }
        return __shfl_sync(0xffffffffu, k.c, (int)(b - k.base));
    }
    template <bool VEC, bool L1A, bool TMA>
    static __device__ __forceinline__ void issue_block(const acc_half_args &p, uint4 *stage, int64_t b, Col c,
                                                       int64_t n0, int lane, const Tma &t) {
        issue<VEC, L1A, TMA>(p, stage, b, c, n0, lane, t);
    }
    template <int FMT>
    static __device__ __forceinline__ void consume_block(const uint4 *stage, int lane,
                                                         float (&acc)[kTilesN][4]) {
        consume<FMT, 1>(stage, lane, acc);
    }
    template <int FMT, bool OUT_F32, bool VEC>
    static __device__ __forceinline__ void write(const acc_half_args &p, const float (&acc)[kTilesN][4],
                                                 int64_t r, int64_t slot, int64_t n0, int lane,
                                                 float * /*scratch*/) {
        write_block_row<FMT, OUT_F32, VEC, 0>(p, acc, r, slot, ACC_HALF_WINDOW_ROWS(0), 0, n0, lane);
    }
};

/* Pair w's block rows over TILES tiles from column n0: 2w from acc[0 .. TILES - 1], 2w + 1 from
 * acc[TILES ..]; a split part to a 32-row slot.  EARLY: write_block_row's (each row's perm loaded first). */
template <int FMT, bool OUT_F32, bool VEC, int TILES, bool EARLY = false>
__device__ __forceinline__ void write_pair(const acc_half_args &p, const float (&acc)[2 * TILES][4],
                                           int64_t w, int64_t slot, int64_t n0, int lane) {
    write_block_row<FMT, OUT_F32, VEC, 0, 2 * TILES, EARLY, TILES>(p, acc, 2 * w, slot,
                                                                   ACC_HALF_WINDOW_ROWS(1), 0, n0, lane);
    if (2 * w + 1 < p.num_brows)
        write_block_row<FMT, OUT_F32, VEC, TILES, 2 * TILES, EARLY, TILES>(
            p, acc, 2 * w + 1, slot, ACC_HALF_WINDOW_ROWS(1), 16, n0, lane);
}

/* Pairs of block rows (acc_half_args.pairs): window P is block rows 2P and 2P + 1, its "blocks" the
 * entries of the union of their column blocks.  An entry's stage holds one B tile and both rows'
 * blocks (zeros where a row has none: they add +-0 to sums that start at +0, so every finite bit is
 * the BSR16 kernel's, and a non-finite sum is recomputed from the stored entries either way).
 * Cache: lane l holds entry base + l (column block, both block indices). */
struct PairOps {
    static constexpr int kTilesN = 2 * kTiles, kStageN = kBPieces + 64, kScratch = 0, kDepthN = kDepth;
    struct Col {
        int32_t c;
        int64_t top, bottom;
    };
    struct Cache {
        int64_t base;
        Col e;
    };
    static __device__ __forceinline__ int64_t window_start(const acc_half_args &p, int64_t w) {
        return p.pair_offsets[w];
    }
    static __device__ __forceinline__ void load(Cache &k, const acc_half_args &p, int64_t b1, int lane) {
        const int64_t u = k.base + lane;
        k.e.c = u < b1 ? __ldg(p.pair_cols + u) : 0;
        k.e.top = u < b1 ? __ldg(reinterpret_cast<const long long *>(p.pair_blocks) + 2 * u) : -1;
        k.e.bottom = u < b1 ? __ldg(reinterpret_cast<const long long *>(p.pair_blocks) + 2 * u + 1) : -1;
    }
    static __device__ __forceinline__ void init(Cache &k, const acc_half_args &p, int64_t b0, int64_t b1,
                                                int lane) {
        k.base = b0;
        load(k, p, b1, lane);
    }
    static __device__ __forceinline__ Col cols(Cache &k, const acc_half_args &p, int64_t b, int64_t b1,
                                               int lane) {
        if (b >= k.base + 32) {
            k.base += 32;
            load(k, p, b1, lane);
        }
        const int src = (int)(b - k.base);
        return {__shfl_sync(0xffffffffu, k.e.c, src),
                (int64_t)__shfl_sync(0xffffffffu, (long long)k.e.top, src),
                (int64_t)__shfl_sync(0xffffffffu, (long long)k.e.bottom, src)};
    }
    template <bool VEC, bool L1A, bool TMA>
    static __device__ __forceinline__ void issue_block(const acc_half_args &p, uint4 *stage, int64_t /*b*/,
                                                       Col c, int64_t n0, int lane, const Tma &t) {
        issue_block_values<L1A>(p, stage + kBPieces, c.top, lane);
        issue_block_values<L1A>(p, stage + kBPieces + 32, c.bottom, lane);
        issue_b_tile<VEC, TMA>(p, stage, c.c, n0, lane, t);
    }
    template <int FMT>
    static __device__ __forceinline__ void consume_block(const uint4 *stage, int lane,
                                                         float (&acc)[kTilesN][4]) {
        consume<FMT, 2>(stage, lane, acc);
    }
    template <int FMT, bool OUT_F32, bool VEC>
    static __device__ __forceinline__ void write(const acc_half_args &p, const float (&acc)[kTilesN][4],
                                                 int64_t w, int64_t slot, int64_t n0, int lane,
                                                 float * /*scratch*/) {
        write_pair<FMT, OUT_F32, VEC, kTiles>(p, acc, w, slot, n0, lane);
    }
};

/* Split block rows: C = the sum of the parts' tiles in slot order (one thread per element). */
template <int FMT, bool OUT_F32> __global__ void reduce_splits(const acc_half_args p) {
    const int H = ACC_HALF_WINDOW_ROWS(p.pairs);
    const int64_t s = blockIdx.y;
    const int64_t r = p.splits[3 * s], first = p.splits[3 * s + 1], parts = p.splits[3 * s + 2];
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < H * p.n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int i = (int)(e / p.n);
        const int64_t col = e % p.n, row = r * H + i;
        if (row >= p.m) continue;
        float acc = 0.f;
        for (int64_t q = 0; q < parts; q++)
            acc += __ldcg(p.workspace + ((first + q) * H + i) * p.n + col);
        if (!isfinite(acc)) acc = exact_elem<FMT>(p, row / 16, i % 16, col);
        store1<FMT, OUT_F32>(p, p.perm[row] * p.n + col, acc);
    }
}

/* One warp runs one task over one column slice of 64 columns.  Task (w0, w1, b0, b1, slot):
 * slot -1: a pack of whole consecutive windows (block rows) w0 .. w1 - 1, blocks b0 .. b1 - 1, run
 * as ONE stream of blocks (the pipeline does not drain between windows): at each window's last
 * block the warp writes the window and starts the next; empty windows are written as zeros.
 * slot >= 0: blocks b0 .. b1 - 1 of the split window w0 (w1 = w0 + 1), summed into workspace slot
 * `slot` (reduce_splits adds the parts).  Pipeline: see the file's header.  SCTA: slice-major thread
 * blocks (the warps of a block share the task, each on its own slice; the file's header).  TMA (sm_90):
 * B tiles by the tensor map `map` (tma_b_tile), stages of 3,072 bytes from a 1,024-byte aligned
 * base, an mbarrier per stage after them; `map` is unused otherwise. */
template <class L, int FMT, bool OUT_F32, bool VEC, bool SCTA, bool TMA>
__global__ void __launch_bounds__(kWarps * 32)
    half_kernel(const acc_half_args p, const __grid_constant__ CUtensorMap map) {
    extern __shared__ uint4 smem[];
    constexpr int kStride = TMA ? kTmaStage : L::kStageN;
    static_assert(!TMA || (L::kStageN <= kTmaStage && L::kScratch == 0),
                  "a TMA stage holds the layout's stage");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t task = SCTA ? (int64_t)blockIdx.x : (int64_t)blockIdx.x * kWarps + warp;
    if (task >= p.num_tasks) return;
    const int64_t *T = p.tasks + ACC_HALF_TASK_WORDS * task;
    const int64_t w0 = T[0], w1 = T[1], b0 = T[2], b1 = T[3], slot = T[4];
    uint4 *base = smem;
    if (TMA) /* the swizzle's 1,024-byte alignment (the launch adds 1 KB for it) */
        base = smem + ((1024 - (smem_u32(smem) & 1023)) & 1023) / 16;
    uint4 *stages = base + warp * (L::kDepthN * kStride + L::kScratch);
    float *scratch = reinterpret_cast<float *>(stages + L::kDepthN * kStride);
    const unsigned bars = smem_u32(base + kWarps * L::kDepthN * kStride) + 8 * L::kDepthN * warp;
    unsigned phase = 0; /* bit s: the parity stage s's barrier completes next */
    if (TMA) {
        if (lane == 0)
            for (int s = 0; s < L::kDepthN; s++)
                mbar_init(bars + 8 * s);
        mbar_init_fence();
        __syncwarp();
    }
    const int64_t slices = (p.n + kSlice - 1) / kSlice;
    const int64_t first = SCTA ? (int64_t)blockIdx.y * kWarps + warp : (int64_t)blockIdx.y;
    const int64_t step = SCTA ? (int64_t)gridDim.y * kWarps : (int64_t)gridDim.y;
    for (int64_t slice = first; slice < slices; slice += step) {
        const int64_t n0 = slice * kSlice;
        float acc[L::kTilesN][4];
        zero_acc(acc);
        /* window w is being summed; its blocks end at stop, the next window's at next_stop */
        int64_t w = w0, stop = slot >= 0 ? b1 : L::window_start(p, w0 + 1);
        /* C is written only after the kernels before this one (acc_cuda_internal.h) */
        if (w < w1 && stop == b0) pdl_wait();
        while (w < w1 && stop == b0) { /* leading empty windows of a pack */
            L::template write<FMT, OUT_F32, VEC>(p, acc, w, slot, n0, lane, scratch);
            w++;
            stop = w < w1 ? L::window_start(p, w + 1) : -1;
        }
        int64_t next_stop = slot < 0 && w + 1 < w1 ? L::window_start(p, w + 2) : -1;
        typename L::Cache cache;
        L::init(cache, p, b0, b1, lane);
        pdl_wait(); /* everything above read the plan's own arrays; B, C and the workspace from here */
#pragma unroll
        for (int s = 0; s < L::kDepthN - 1; s++) {
            if (b0 + s < b1)
                L::template issue_block<VEC, SCTA, TMA>(p, stages + s * kStride, b0 + s,
                                                        L::cols(cache, p, b0 + s, b1, lane), n0, lane,
                                                        Tma{&map, bars + 8 * s});
            cp_commit();
        }
        for (int64_t b = b0; b < b1; b++) {
            const int64_t i = b - b0;
            const int at = (int)(i % L::kDepthN), next = (int)((i + L::kDepthN - 1) % L::kDepthN);
            __syncwarp(); /* every lane has read the stage that block b + DEPTH - 1 overwrites */
            if (b + L::kDepthN - 1 < b1)
                L::template issue_block<VEC, SCTA, TMA>(p, stages + next * kStride, b + L::kDepthN - 1,
                                                        L::cols(cache, p, b + L::kDepthN - 1, b1, lane), n0,
                                                        lane, Tma{&map, bars + 8 * next});
            cp_commit();
            cp_wait<L::kDepthN - 1>();
            if (TMA) {
                mbar_wait(bars + 8 * at, (phase >> at) & 1u);
                phase ^= 1u << at;
            }
            __syncwarp();
            L::template consume_block<FMT>(stages + at * kStride, lane, acc);
            if (b + 1 == stop) { /* warp-uniform: window w is complete */
                L::template write<FMT, OUT_F32, VEC>(p, acc, w, slot, n0, lane, scratch);
                zero_acc(acc);
                w++;
                stop = next_stop;
                while (w < w1 && stop == b + 1) { /* empty windows */
                    L::template write<FMT, OUT_F32, VEC>(p, acc, w, slot, n0, lane, scratch);
                    w++;
                    stop = w < w1 ? L::window_start(p, w + 1) : -1;
                }
                next_stop = w + 1 < w1 ? L::window_start(p, w + 2) : -1;
            }
        }
        cp_wait<0>();
        __syncwarp();
    }
}

/* ---- pairs, a thread block per task (pair_cta_kernel) -------------------------------------------
 * The pair kernel's tasks and entries, the same sums in the same order (the same bits), run by the kWarps
 * warps of a thread block together over kCtaCols = 128 columns, 32 a warp.  A stage holds one entry's
 * 16 x 128 tile of B (4 KB, 2 pieces a thread) and both rows' blocks (1 KB); the thread block keeps
 * kCtaDepth - 1 entries in flight and meets at one barrier per entry.  Against the warp kernel (a warp, 64
 * columns, 4 stages of 3 KB, 64 accumulators a lane: 168 registers, 12 warps an SM), a warp holds 32
 * accumulators (72 registers, 7 thread blocks or 28 warps an SM) and the loads of a short pair go out
 * together: pairs of a few entries, as 32 x 32 blocks at 99% give, are bound by the latency of their
 * dependent loads (task, entries, tiles, perm) rather than by bytes.  H100, kernel us, FP16, warp kernel ->
 * this one (benchmarks/NOTES.md, 2026-11-27): uniform 32 x 32 blocks 8192^2 at 99% 11.9 -> 9.2 (n = 256)
 * and 17.3 -> 13.1 (n = 512), 32768^2 at 99% 60.2 -> 50.5 and 107.9 -> 92.0, uniform 90% 70.4 -> 64.0
 * (n = 512), ogbl-ddi 142.8 -> 118.3 (n = 256), landmark 115.0 -> 86.6 (n = 512), G3_circuit 4,311 -> 4,137;
 * irregular 32 x 32 block rows at 99% 22.4 -> 23.5 (n = 256, the one loss) and 28.6 -> 28.0.
 * B's tile rows are 256 bytes (16 pieces); piece c of row r sits at slot c ^ (r % 8), so each ldmatrix
 * phase's 8 rows hit 8 bank groups.  Widths a multiple of 8 with B and C 16-byte aligned (the launch's
 * `vec`); a task's entries below 2^31 (k < 2^31 bounds a pair's entries by 2^27, and the schedule cuts a
 * pack of pairs at PACK_MAX entries).
 * Tried and not kept (same runs): 6 or 8 stages (0.93-1.0x of 4 at 8 thread blocks an SM), 8 thread blocks an
 * SM (64 registers, spills: 0.92-0.94x), the first pair's perm rows by cp.async with the first stage (no
 * gain), and each lane's 16 bytes of a row by a transpose across the quad, one 16-byte store instead of four
 * 4-byte ones (0.79x at 99%). */
constexpr int kCtaCols = kWarps * 32;
static_assert(kCtaCols == ACC_HALF_CTA_COLS,
              "the plan's width rule (acc_half_fills_slices) assumes these columns");
constexpr int kCtaDepth = 4;
/* The thread block's shape for H column groups a warp (H = 2: the wide thread block, 32 columns at nw and
 * 32 at nw + kCtaCols, 64 accumulators a lane): its columns, B tile pieces (16 rows), stage (pieces, with
 * the two blocks) and thread blocks an SM (H = 1: 72 registers; H = 2: at most 128). */
template <int H> struct CtaShape {
    static constexpr int kCols = H * kCtaCols;
    static constexpr int kRow = kCols / 8;          /* pieces a row of the B tile */
    static constexpr int kRowLog = H == 1 ? 4 : 5;
    static constexpr int kBPieces = 16 * kRow;      /* 256 (H = 1), 512 */
    static constexpr int kStage = kBPieces + 64;    /* 5,120 bytes (H = 1), 9,216 */
    static constexpr int kBlocksPerSm = H == 1 ? 7 : 4;
    static constexpr int kSmem = kCtaDepth * kStage * 16;
    static_assert(kRow == 1 << kRowLog, "a row of the B tile is 2^kRowLog pieces");
};

/* Entry e's tile of B (columns n0 ..) and its two blocks into a stage, by thread tid of the block. */
template <int H>
__device__ __forceinline__ void cta_issue(const acc_half_args &p, uint4 *stage, const PairOps::Col &e,
                                          int64_t n0, int tid) {
    using Sh = CtaShape<H>;
#pragma unroll
    for (int j = 0; j < Sh::kBPieces / (kWarps * 32); j++) {
        const int q = tid + kWarps * 32 * j, r = q >> Sh::kRowLog, c = q & (Sh::kRow - 1);
        const int64_t krow = (int64_t)e.c * 16 + r, col = n0 + 8 * c;
        const bool ok = krow < p.k && col < p.n;
        cp_async16<false>(stage + Sh::kRow * r + (c ^ (r & 7)), ok ? p.B + krow * p.n + col : p.B,
                          ok ? 16 : 0);
    }
    if (tid < 64) /* warps 0 and 1: the top and the bottom block */
        issue_block_values(p, stage + Sh::kBPieces + (tid & 32), tid < 32 ? e.top : e.bottom, tid & 31);
}

/* Pair w's two block rows from warp w's 32 columns at nw, the general case (write_pair at 4 tiles: a
 * split part's workspace slot, sums that are not finite, columns beyond n, rows beyond m), out of line so
 * that the common case keeps its registers. */
template <int FMT, bool OUT_F32>
__device__ __noinline__ void cta_write_slow(const acc_half_args &p, const float (&acc)[8][4], int64_t w,
                                            int64_t slot, int64_t nw, int lane) {
    if (nw >= p.n) return; /* every column of the warp beyond n: nothing to write */
    write_pair<FMT, OUT_F32, true, 4, true>(p, acc, w, slot, nw, lane);
}

/* Pair w's rows from warp w's 32 columns at nw: lane (g, t) holds rows g, 8 + g, 16 + g and 24 + g, columns
 * nw + 8j + 2t and + 1.  With GENERAL (pair_cta_kernel), a split part's raw sums go straight to its
 * workspace slot.  The common case (the pair's 32 rows below m, the lane's sums finite, no split, the warp's
 * 32 columns below n, or with GENERAL some of them: its tiles below n, as n is a multiple of 8 here) with
 * one test and the four rows' perm loaded first; else cta_write_slow (on a copy: a callee taking acc's
 * address would put acc in local memory for the whole kernel), which writes nothing for a warp whose columns
 * all lie beyond n. */
template <int FMT, bool OUT_F32, bool GENERAL>
__device__ __forceinline__ void cta_write(const acc_half_args &p, const float (&acc)[8][4], int64_t w,
                                          int64_t slot, int64_t nw, int lane) {
    const int g = lane >> 2, t = lane & 3;
    if (GENERAL && slot >= 0) { /* a part of a split pair: its raw sums to workspace slot `slot` (32 rows) */
#pragma unroll
        for (int h = 0; h < 4; h++) {
            float *ws = p.workspace + (slot * ACC_HALF_WINDOW_ROWS(1) + 8 * h + g) * p.n + nw + 2 * t;
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (nw + 8 * j < p.n) {
                    ws[8 * j] = acc[4 * (h / 2) + j][2 * (h % 2)];
                    ws[8 * j + 1] = acc[4 * (h / 2) + j][2 * (h % 2) + 1];
                }
        }
        return;
    }
    if (slot >= 0 || !sums_finite<0, 8>(acc) || (GENERAL ? nw >= p.n : nw + 32 > p.n) || 32 * w + 32 > p.m) {
        float copy[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                copy[j][e] = acc[j][e];
        cta_write_slow<FMT, OUT_F32>(p, copy, w, slot, nw, lane);
        return;
    }
    int64_t dst[4];
#pragma unroll
    for (int h = 0; h < 4; h++)
        dst[h] = __ldg(p.perm + 32 * w + 8 * h + g) * p.n + nw + 2 * t;
#pragma unroll
    for (int h = 0; h < 4; h++)
#pragma unroll
        for (int j = 0; j < 4; j++) /* row 8h + g: block h / 2, its rows g + 8 (h % 2) */
            if (!GENERAL || nw + 8 * j < p.n)
                store2<FMT, OUT_F32>(p, dst[h] + 8 * j, acc[4 * (h / 2) + j][2 * (h % 2)],
                                     acc[4 * (h / 2) + j][2 * (h % 2) + 1]);
}

/* Task blockIdx.x of the pairs' schedule (half_kernel's task semantics: a pack of whole pairs, or a part of
 * a split one) over column slices blockIdx.y, + gridDim.y, ... of kCtaCols columns.  `p` is a grid constant:
 * cta_write_slow takes its address, which would otherwise copy it to local memory (measured 4x slower).
 * GENERAL: n is not a multiple of kCtaCols, or the schedule splits pairs.  Then warps of the last slice may
 * have columns beyond n: cta_write stores a warp's tiles below n, and a split part's sums, without the slow
 * path, and a warp wholly beyond n writes nothing (H100, kernel us, FP16, uniform 32 x 32 blocks of 8192^2
 * at 99%: n = 136 12.2 -> 9.0, 200 12.4 -> 9.3, 320 14.1 -> 11.5, 448 16.0 -> 13.1; irregular 32 x 32 block
 * rows at 99%, 10 split pairs: n = 256 23.4 -> 20.5, 512 27.9 -> 25.5; benchmarks/NOTES.md, 2026-11-27
 * 14:43).  Its own instance, because those tests cost the other widths 1-2% in spills (uniform 32768^2 at
 * 99.5%, n = 512: 55.6 -> 56.4). */
template <int FMT, bool OUT_F32, bool GENERAL, int H>
__global__ void __launch_bounds__(kWarps * 32, CtaShape<H>::kBlocksPerSm)
    pair_cta_kernel(const __grid_constant__ acc_half_args p) {
    using Sh = CtaShape<H>;
    constexpr int S = kCtaDepth;
    extern __shared__ uint4 smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int64_t *T = p.tasks + ACC_HALF_TASK_WORDS * (int64_t)blockIdx.x;
    const int64_t w0 = T[0], w1 = T[1], b0 = T[2], slot = T[4];
    const int nb = (int)(T[3] - b0);
    const int64_t slices = (p.n + Sh::kCols - 1) / Sh::kCols;
    for (int64_t slice = blockIdx.y; slice < slices; slice += gridDim.y) {
        /* column group h of warp `warp`: columns nw + kCtaCols h .. + 31, its sums acc[h] */
        const int64_t n0 = slice * Sh::kCols, nw = n0 + 32 * warp;
        float acc[H][8][4];
#pragma unroll
        for (int h = 0; h < H; h++)
            zero_acc(acc[h]);
        PairOps::Cache cache; /* its loads first: they and the pairs' starts below need only the task */
        PairOps::init(cache, p, b0, b0 + nb, lane);
        /* pair w is being summed; its entries end at stop (from b0), the next pair's at next_stop.  A task of
         * one pair (or a part of one) ends where the pair does: no load */
        int64_t w = w0;
        int stop = slot >= 0 || w1 == w0 + 1 ? nb : (int)(PairOps::window_start(p, w0 + 1) - b0);
        if (w < w1 && stop == 0) pdl_wait(); /* C is written only after the kernels before this one */
        while (w < w1 && stop == 0) {        /* leading empty pairs of a pack */
#pragma unroll
            for (int h = 0; h < H; h++)
                cta_write<FMT, OUT_F32, GENERAL>(p, acc[h], w, slot, nw + kCtaCols * h, lane);
            w++;
            stop = w < w1 ? (int)(PairOps::window_start(p, w + 1) - b0) : -1;
        }
        int next_stop = slot < 0 && w + 1 < w1 ? (int)(PairOps::window_start(p, w + 2) - b0) : -1;
        pdl_wait(); /* everything above read the plan's own arrays; B, C and the workspace from here */
#pragma unroll
        for (int s = 0; s < S - 1; s++) {
            if (s < nb)
                cta_issue<H>(p, smem + s * Sh::kStage, PairOps::cols(cache, p, b0 + s, b0 + nb, lane), n0, tid);
            cp_commit();
        }
        for (int i = 0; i < nb; i++) {
            cp_wait<S - 2>();
            __syncthreads(); /* entry i's stage has landed for every thread; entry i - 1's was read by all */
            if (i + S - 1 < nb)
                cta_issue<H>(p, smem + (i + S - 1) % S * Sh::kStage,
                             PairOps::cols(cache, p, b0 + i + S - 1, b0 + nb, lane), n0, tid);
            cp_commit();
            /* acc[h][j] (the top block's rows) and acc[h][4 + j] (bottom) += both blocks x the 4 tiles of
             * column group h */
#pragma unroll
            for (int h = 0; h < H; h++)
                consume<FMT, 2, 4, Sh::kRow>(smem + i % S * Sh::kStage, lane, acc[h], 4 * warp + 16 * h);
            if (i + 1 == stop) { /* block-uniform: pair w is complete */
#pragma unroll
                for (int h = 0; h < H; h++) {
                    cta_write<FMT, OUT_F32, GENERAL>(p, acc[h], w, slot, nw + kCtaCols * h, lane);
                    zero_acc(acc[h]);
                }
                w++;
                stop = next_stop;
                while (w < w1 && stop == i + 1) { /* empty pairs */
#pragma unroll
                    for (int h = 0; h < H; h++)
                        cta_write<FMT, OUT_F32, GENERAL>(p, acc[h], w, slot, nw + kCtaCols * h, lane);
                    w++;
                    stop = w < w1 ? (int)(PairOps::window_start(p, w + 1) - b0) : -1;
                }
                next_stop = w + 1 < w1 ? (int)(PairOps::window_start(p, w + 2) - b0) : -1;
            }
        }
        cp_wait<0>();
        __syncthreads(); /* every stage read before the next slice refills them */
    }
}

__global__ void tiles_kernel(const int32_t *__restrict__ meta, const float *__restrict__ values, int64_t nb,
                             uint16_t *__restrict__ tiles, int bf16) {
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 64 * nb;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = e >> 6;
        const int bit = (int)(e & 63);
        const int32_t *rec = meta + 12 * b;
        const uint64_t mask = (uint64_t)(uint32_t)rec[8] | ((uint64_t)(uint32_t)rec[9] << 32);
        const int64_t voff = (int64_t)((uint64_t)(uint32_t)rec[10] | ((uint64_t)(uint32_t)rec[11] << 32));
        uint16_t h = 0;
        if ((mask >> bit) & 1) {
            const float v = values[voff + __popcll(mask & ((1ull << bit) - 1))];
            h = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
        }
        tiles[e] = h;
    }
}

/* out[s] = BSR16 block blocks[s] (256 halves, 32 x 16 bytes), zeros where blocks[s] < 0: a thread per 16
 * bytes. */
__global__ void pack_groups_kernel(const int64_t *__restrict__ blocks, int64_t slots,
                                   const uint4 *__restrict__ values, uint4 *__restrict__ out) {
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 32 * slots;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = __ldg(blocks + (e >> 5));
        out[e] = b >= 0 ? __ldg(values + 32 * b + (e & 31)) : make_uint4(0, 0, 0, 0);
    }
}

/* Sets block b's record value offset to 64 b (its tile's offset in halves), after tiles_kernel. */
__global__ void tile_offsets_kernel(int32_t *__restrict__ meta, int64_t nb) {
    for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < nb;
         b += (int64_t)gridDim.x * blockDim.x) {
        const uint64_t off = 64ull * (uint64_t)b;
        meta[12 * b + 10] = (int32_t)(uint32_t)off;
        meta[12 * b + 11] = (int32_t)(uint32_t)(off >> 32);
    }
}

/* ---- TMA on the host: the driver's tensor-map encoder, and whether this build and device have TMA */
using EncodeFn = PFN_cuTensorMapEncodeTiled_v12000;

EncodeFn tensor_map_encoder() {
    static const EncodeFn fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            f = nullptr;
        }
        return reinterpret_cast<EncodeFn>(f);
    }();
    return fn;
}

/* B (k rows of n half values, row-major) as a tensor map of 16 x 64 tiles with the 128-byte swizzle;
 * false where the driver cannot make it. */
bool b_tensor_map(const acc_half_args &p, CUtensorMap *map) {
    const EncodeFn enc = tensor_map_encoder();
    if (!enc) return false;
    const cuuint64_t dims[2] = {(cuuint64_t)p.n, (cuuint64_t)p.k};
    const cuuint64_t strides[1] = {(cuuint64_t)p.n * 2};
    const cuuint32_t box[2] = {kSlice, 16}, elem[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<uint16_t *>(p.B), dims, strides, box, elem,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

typedef void (*half_kernel_fn)(const acc_half_args, const CUtensorMap);

/* Whether the current device runs the TMA kernels: compute capability 9 or more, and the kernels'
 * code built for it (a binary of sm_80 code alone has them empty).  Cached per device. */
bool tma_usable() {
    static unsigned char known[kMaxDevices];
    const half_kernel_fn k = half_kernel<BsrOps, ACC_HALF_FP16, false, true, true, true>;
    return kernel_runs_here(reinterpret_cast<const void *>(k), known, sm90_code);
}

} // namespace

PFN_cuTensorMapEncodeTiled_v12000 acc_half_encoder() { return tensor_map_encoder(); }

/* The tensor map of B for 16 x 64 tiles (b_tensor_map), false where the driver cannot make it; the
 * thread's last one is kept (LastBMap). */
bool acc_half_b_map(const acc_half_args &p, CUtensorMap *map) {
    thread_local LastBMap last;
    return last.get(p, 0, map, [&](CUtensorMap *m) { return b_tensor_map(p, m); });
}

namespace {

/* TMA for B where it applies: rows of B a multiple of 128 bytes (n % 64 == 0) from a 128-byte aligned
 * B (the file's header: other widths lose), the device and build have it, ACC_HALF_TMA is not "0" (the
 * cp.async path, for comparisons), and the driver makes the map. */
bool use_tma(const acc_half_args &p, bool vec, CUtensorMap *map) {
    if (!vec || p.n % 64 != 0 || (uintptr_t)p.B % 128 != 0) return false;
    const char *env = getenv("ACC_HALF_TMA");
    if (env && env[0] == '0') return false;
    return tma_usable() && acc_half_b_map(p, map);
}

template <class L, int FMT, bool OUT_F32, bool VEC, bool SCTA, bool TMA>
int run_kernel(const acc_half_args &p, const CUtensorMap &map, dim3 grid, cudaStream_t s) {
    static unsigned char prepared[kMaxDevices], pdl[kMaxDevices];
    constexpr int bytes =
        TMA ? 1024 + kWarps * kDepth * (16 * kTmaStage + 8) : kWarps * kDepth * L::kStageN * 16;
    static_assert(TMA || bytes <= 48 * 1024,
                  "above 48 KB the kernel needs cudaFuncAttributeMaxDynamicSharedMemorySize");
    const half_kernel_fn k = half_kernel<L, FMT, OUT_F32, VEC, SCTA, TMA>;
    if (TMA) { /* above 48 KB */
        const int st = raise_smem_limit(reinterpret_cast<const void *>(k), bytes, prepared);
        if (st) return st;
    }
    return acc_cuda_status(launch_ex(k, grid, dim3(kWarps * 32), bytes, s,
                                     pdl_usable(reinterpret_cast<const void *>(k), pdl), p, map),
                           "half_kernel");
}

template <int FMT, bool OUT_F32, bool SCTA>
int launch_kernel(const acc_half_args &p, bool vec, cudaStream_t s) {
    const int64_t slices = (p.n + kSlice - 1) / kSlice;
    const int64_t gy = SCTA ? (slices + kWarps - 1) / kWarps : slices;
    const dim3 grid((unsigned)(SCTA ? p.num_tasks : (p.num_tasks + kWarps - 1) / kWarps),
                    (unsigned)(gy < 65535 ? gy : 65535));
    CUtensorMap map = {};
    if constexpr (SCTA) /* TMA: the row kernel in slice-major thread blocks (the file's header) */
        if (!p.pairs && use_tma(p, vec, &map))
            return run_kernel<BsrOps, FMT, OUT_F32, true, true, true>(p, map, grid, s);
    if (p.pairs && vec) return run_kernel<PairOps, FMT, OUT_F32, true, SCTA, false>(p, map, grid, s);
    if (p.pairs) return run_kernel<PairOps, FMT, OUT_F32, false, SCTA, false>(p, map, grid, s);
    if (vec) return run_kernel<BsrOps, FMT, OUT_F32, true, SCTA, false>(p, map, grid, s);
    return run_kernel<BsrOps, FMT, OUT_F32, false, SCTA, false>(p, map, grid, s);
}

/* The split windows' sums into C, after the kernel that wrote their parts (stream order). */
template <int FMT, bool OUT_F32> int reduce(const acc_half_args &p, cudaStream_t s) {
    if (p.num_splits > 0) {
        const int64_t bx = (ACC_HALF_WINDOW_ROWS(p.pairs) * p.n + 255) / 256;
        const dim3 rgrid((unsigned)(bx < 65535 ? bx : 65535), (unsigned)p.num_splits);
        reduce_splits<FMT, OUT_F32><<<rgrid, 256, 0, s>>>(p);
        ACC_CUDA_TRY(cudaGetLastError());
    }
    return ACC_SUCCESS;
}

typedef void (*pair_cta_fn)(const acc_half_args);

template <int FMT, bool OUT_F32, bool GENERAL, int H>
int run_pair_cta(const acc_half_args &p, cudaStream_t s) {
    static unsigned char pdl[kMaxDevices];
    const pair_cta_fn k = pair_cta_kernel<FMT, OUT_F32, GENERAL, H>;
    const int64_t slices = (p.n + CtaShape<H>::kCols - 1) / CtaShape<H>::kCols;
    const dim3 grid((unsigned)p.num_tasks, (unsigned)(slices < 65535 ? slices : 65535));
    return acc_cuda_status(launch_ex(k, grid, dim3(kWarps * 32), CtaShape<H>::kSmem, s,
                                     pdl_usable(reinterpret_cast<const void *>(k), pdl), p),
                           "pair_cta_kernel");
}

/* The wide thread blocks (H = 2: 256 columns, two 32-column groups a warp, 4 thread blocks an SM against 7)
 * move the same entries with half the thread blocks: a stage's A blocks, the entry's index loads and barrier
 * serve 256 columns instead of 128, and the L2 bytes fall by 10% (9 KB a stage for 256 columns against 2 x 5
 * KB).  What they lose is parallelism: half the thread blocks, each chain of a task twice as long in bytes.
 * So they run where (1) n fills their last slice to 3/4 at least (n % 256 == 0 or > 192; else the second
 * group computes zeros), (2) a task holds kWideMinEntries entries or more on average (short chains are
 * latency: the resident thread blocks hide it), and (3) the longest task is at most kWideCritical times the
 * entries a place of the 128-column grid takes on average (pair_entries x slices / resident thread blocks):
 * where one long task is the makespan, the 128-column grid spreads it over more SMs.  H100, FP16, kernel us,
 * 128 -> 256 columns (benchmarks/NOTES.md, 2026-11-27 18:08; mean entries a task, longest / place):
 * uniform 32 x 32 blocks of 8192^2 at n = 512: 90% 60.0 -> 46.8 (51, 0.92), 95% 34.6 -> 27.6, 97% 24.5 -> 19.7,
 * 98% 18.4 -> 15.7, 99% 13.0 -> 12.4 (5.1, 1.06), 99.5% 10.7 -> 10.9 (2.6: not taken); 32768^2 at 99% 92.8 ->
 * 79.5; bands 64 / 128 / 256 1.10 / 1.18 / 1.27x; usroads, Andrews, landmark, PROTEINS_full (pairs forced)
 * 1.21 / 1.24 / 1.08 / 1.05x; losses where a rule refuses: rajat01 0.86x (14 entries, longest 3.1), ogbl-ddi at
 * n = 256 0.91x (267 entries, 134 tasks: 3.5), irregular blocks at 99% 0.89x (4.8, 2.6), n = 384 0.86x (the
 * last slice half empty).  The same entries and MMA per 16 x 8 tile in the same order: the same bits
 * (tests/test_half.py).  Unknown sizes (pair_entries 0): 128 columns.  ACC_HALF_PAIR_WIDE: "0" never, "1"
 * always (comparisons).  The resident thread blocks are those of one 128-column instance: every one holds 72
 * registers (ptxas) and the same shared memory, under the same launch bounds. */
constexpr int64_t kWideMinEntries = 4;
constexpr double kWideCritical = 2.0;

bool use_wide_cta(const acc_half_args &p) {
    const char *env = getenv("ACC_HALF_PAIR_WIDE");
    if (env && (env[0] == '0' || env[0] == '1')) return env[0] == '1';
    const int64_t rest = p.n % CtaShape<2>::kCols;
    if ((rest != 0 && rest <= 3 * CtaShape<2>::kCols / 4) || p.pair_entries < kWideMinEntries * p.num_tasks)
        return false;
    const int64_t places = wave_blocks(
        reinterpret_cast<const void *>(pair_cta_kernel<ACC_HALF_FP16, false, false, 1>), kWarps * 32,
        CtaShape<1>::kSmem);
    const int64_t slices = (p.n + CtaShape<1>::kCols - 1) / CtaShape<1>::kCols;
    return places > 0 &&
           (double)p.pair_longest * (double)places <= kWideCritical * (double)p.pair_entries * (double)slices;
}

/* GENERAL: n is not a multiple of the thread block's columns, or the schedule splits pairs. */
template <int FMT, bool OUT_F32> int launch_pair_cta(const acc_half_args &p, cudaStream_t s) {
    if (use_wide_cta(p))
        return p.n % CtaShape<2>::kCols || p.num_splits > 0 ? run_pair_cta<FMT, OUT_F32, true, 2>(p, s)
                                                             : run_pair_cta<FMT, OUT_F32, false, 2>(p, s);
    return p.n % CtaShape<1>::kCols || p.num_splits > 0 ? run_pair_cta<FMT, OUT_F32, true, 1>(p, s)
                                                         : run_pair_cta<FMT, OUT_F32, false, 1>(p, s);
}

/* Pairs run in thread blocks (pair_cta_kernel) at widths with 16-byte rows of B and C, unless
 * ACC_HALF_PAIR_CTA is "0" (the warp kernel, for comparisons). */
bool use_pair_cta(const acc_half_args &p, bool vec) {
    if (p.pairs != 1 || !vec || p.num_tasks >= 0x7fffffffLL) return false;
    const char *env = getenv("ACC_HALF_PAIR_CTA");
    return !(env && env[0] == '0');
}

template <int FMT, bool OUT_F32> int launch(const acc_half_args &p, bool vec, cudaStream_t s) {
    /* slice-major thread blocks where every warp of one has a slice (file header) */
    int st;
    if (use_pair_cta(p, vec))
        st = launch_pair_cta<FMT, OUT_F32>(p, s);
    else if ((p.n + kSlice - 1) / kSlice >= kWarps && p.num_tasks < 0x7fffffffLL)
        st = launch_kernel<FMT, OUT_F32, true>(p, vec, s);
    else
        st = launch_kernel<FMT, OUT_F32, false>(p, vec, s);
    if (st) return st; /* run_kernel reported the launch's own error */
    return reduce<FMT, OUT_F32>(p, s);
}

/* run(q) where q is p on copies of B and C padded to n8 >= n columns (with_padded_copies: the padded columns
 * are zeros and dropped, so every result bit is the padded width's). */
template <typename Run> int on_padded_copies(const acc_half_args &p, int64_t n8, cudaStream_t s, Run run) {
    return with_padded_copies(p.B, p.C, p.m, p.k, p.n, n8, p.out_f32 ? 4 : 2, s,
                              [&](const void *B8, void *C8) {
                                  acc_half_args q = p;
                                  q.B = static_cast<const uint16_t *>(B8);
                                  q.C = C8;
                                  q.n = n8;
                                  return run(q);
                              });
}

/* Whether a width that is a multiple of 8 but not of 64 (B and C 16-byte aligned) runs faster on copies
 * padded to n64 = ceil(n / 64) * 64 columns: there a tile of B is one TMA request per entry, where B itself
 * needs a 2D request per 64-column chunk of the tile, each past the first about 0.02 us an entry of the
 * schedule's makespan (quad_makespan) and column tile; against the copies' two launches (about 4 us) and
 * their bytes (about 1.7 MB a us).  Measured on an H200 with the quads forced (benchmarks/NOTES.md; uniform
 * and irregular 32 x 32 block matrices, ogbl-ddi, ego-Facebook, email-Eu-core, n = 136, 200, 264, 520, 600):
 * padding gains up to 1.4x on the large ones (uniform 70% n = 264: 137.6 -> 99.0 us).  Against both sides'
 * times there, this rule takes the faster in 23 of the 30 cases; the others lose at most 10% (ego-Facebook
 * and email-Eu-core at n >= 264, where a request costs about half as much, and uniform 90% at n = 264). */
bool pad_pays(const acc_half_args &p) {
    const int64_t cols = acc_half_quad_cols(p.n, p.num_tasks), tiles = (p.n + cols - 1) / cols,
                  n64 = (p.n + 63) / 64 * 64;
    const double requests = 0.02 * (double)(cols / 64 - 1) * (double)p.quad_makespan * (double)tiles;
    const double copies =
        4.0 + (4.0 * (double)p.k + 2.0 * (p.out_f32 ? 4.0 : 2.0) * (double)p.m) * (double)n64 / 1.7e6;
    return requests > copies;
}

/* Quads (half_wgmma.cu), then their split parts' sums.  A width that is not a multiple of 8, or a B or C off
 * a 16-byte boundary (TMA's row pitch, the 16-byte stores), runs on copies padded to n64 columns
 * (on_padded_copies; the caller's split workspace holds n64 columns, ACC_HALF_WS_COLS), and so does a width
 * that is a multiple of 8 but not of 64 where pad_pays.  Where the pool cannot hold the copies, the latter
 * runs on B itself; the former returns ACC_ERR_UNSUPPORTED with nothing launched, as where this device has
 * no quad kernel: the callers then run the row kernel. */
int quads_then_reduce(const acc_half_args &p, cudaStream_t s) {
    const bool direct = rows_16b(p);
    if (!direct || (p.n % 64 != 0 && pad_pays(p))) {
        if (!acc_half_quads_usable()) return ACC_ERR_UNSUPPORTED;
        const int st = on_padded_copies(p, (p.n + 63) / 64 * 64, s,
                                        [&](const acc_half_args &q) { return quads_then_reduce(q, s); });
        if (st != ACC_ERR_DEVICE_MEMORY) return st;
        if (!direct) return ACC_ERR_UNSUPPORTED;
    }
    const int st = acc_half_quads(p, s);
    if (st) return st;
    if (p.fmt == ACC_HALF_BF16)
        return p.out_f32 ? reduce<ACC_HALF_BF16, true>(p, s) : reduce<ACC_HALF_BF16, false>(p, s);
    return p.out_f32 ? reduce<ACC_HALF_FP16, true>(p, s) : reduce<ACC_HALF_FP16, false>(p, s);
}

template <int FMT> __global__ void round_kernel(const float *src, uint16_t *dst, int64_t count) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = FMT == ACC_HALF_BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(src[i]))
                                      : __half_as_ushort(__float2half_rn(src[i]));
}

/* n < 8 on at least kPadMinBrows block rows: B copied into 8 zero-padded columns, the product
 * computed there on the 16-byte path and its n columns copied into C, as the BitTCF kernel's
 * half_padded (tf32_spmm.cu) does.  The padded columns are zeros and are dropped, so every result
 * bit is the 16-byte path's; the element path loads each 64-column step with predicated 2-byte loads
 * for a few columns.  H100, n = 1 (benchmarks/half_widths.py --format bsr16): G3_circuit (98,700
 * block rows) 1,090 -> 630 us, cnr-2000 (20,300) 430 -> 320 us; on bcsstk16 (306) the copies' two
 * launches cost more than they save (25-30 -> 37-48 us), hence the threshold.  The copies share one
 * buffer from the library's pool (with_padded_copies; where it cannot be had, the caller takes the
 * element path); the caller's split workspace holds 8 columns (acc_half_args.workspace). */
constexpr int64_t kPadMinBrows = 4096;

int bsr16_padded(const acc_half_args &p, cudaStream_t s) {
    return on_padded_copies(p, 8, s, [&](const acc_half_args &q) { return acc_half_spmm(&q, s); });
}

} // namespace

extern "C" int acc_half_spmm(const acc_half_args *args, void *stream_ptr) {
    if (!args) return ACC_ERR_INVALID_ARGUMENT;
    const acc_half_args &p = *args;
    const cudaStream_t s = (cudaStream_t)stream_ptr;
    if (p.m < 0 || p.k < 0 || p.n < 0 || p.num_brows != (p.m + 15) / 16 || p.num_tasks < 0 ||
        p.num_splits < 0 || (p.fmt != ACC_HALF_FP16 && p.fmt != ACC_HALF_BF16))
        return ACC_ERR_INVALID_ARGUMENT;
    if (p.n > 0x7fffffffLL || p.k > 0x7fffffffLL || p.num_splits > 65535) return ACC_ERR_TOO_LARGE;
    if (p.m == 0 || p.n == 0) return ACC_SUCCESS;
    if (!p.C || !p.B || !p.perm || !p.brow_offsets || !p.tasks || p.num_tasks == 0 || !p.block_values ||
        !p.block_cols || !p.block_masks || (p.num_splits > 0 && (!p.splits || !p.workspace)) ||
        (p.pairs &&
         (!p.pair_offsets || !p.pair_cols ||
          !(p.pairs == ACC_HALF_QUADS ? (const void *)p.group_values : (const void *)p.pair_blocks))))
        return ACC_ERR_INVALID_ARGUMENT;
    if (p.pairs == ACC_HALF_QUADS) return quads_then_reduce(p, s);
    if (p.n < 8 && p.num_brows >= kPadMinBrows) {
        const int st = bsr16_padded(p, s);
        if (st != ACC_ERR_DEVICE_MEMORY) return st; /* no room for the copies: the element path */
    }
    const bool vec = rows_16b(p); /* 16-byte copies of B */
    if (p.fmt == ACC_HALF_BF16)
        return p.out_f32 ? launch<ACC_HALF_BF16, true>(p, vec, s) : launch<ACC_HALF_BF16, false>(p, vec, s);
    return p.out_f32 ? launch<ACC_HALF_FP16, true>(p, vec, s) : launch<ACC_HALF_FP16, false>(p, vec, s);
}

extern "C" int acc_half_pair_cta_cols(const acc_half_args *args) {
    if (!args || args->pairs != 1) return 0;
    if (!use_pair_cta(*args, rows_16b(*args))) return 0;
    return use_wide_cta(*args) ? CtaShape<2>::kCols : CtaShape<1>::kCols;
}

extern "C" int acc_half_round_device(const float *src, uint16_t *dst, int64_t count, int fmt,
                                     void *stream_ptr) {
    if (count < 0 || (count > 0 && (!src || !dst)) || (fmt != ACC_HALF_FP16 && fmt != ACC_HALF_BF16))
        return ACC_ERR_INVALID_ARGUMENT;
    if (count == 0) return ACC_SUCCESS;
    const int64_t blocks = (count + 255) / 256;
    const unsigned grid = (unsigned)(blocks < 4096 ? blocks : 4096);
    if (fmt == ACC_HALF_BF16)
        round_kernel<ACC_HALF_BF16><<<grid, 256, 0, (cudaStream_t)stream_ptr>>>(src, dst, count);
    else
        round_kernel<ACC_HALF_FP16><<<grid, 256, 0, (cudaStream_t)stream_ptr>>>(src, dst, count);
    ACC_CUDA_TRY(cudaGetLastError());
    return ACC_SUCCESS;
}

extern "C" int acc_half_pack_groups(const int64_t *blocks, int64_t slots, const uint16_t *block_values,
                                    int64_t num_blocks, uint16_t *out, void *stream_ptr) {
    if (slots < 0 || num_blocks < 0 || (slots > 0 && (!blocks || !out)) ||
        (num_blocks > 0 && !block_values) || (uintptr_t)block_values % 16 || (uintptr_t)out % 16)
        return ACC_ERR_INVALID_ARGUMENT;
    if (slots == 0) return ACC_SUCCESS;
    const int64_t grid = (32 * slots + 255) / 256;
    pack_groups_kernel<<<(unsigned)(grid < 65536 ? grid : 65536), 256, 0, (cudaStream_t)stream_ptr>>>(
        blocks, slots, reinterpret_cast<const uint4 *>(block_values), reinterpret_cast<uint4 *>(out));
    ACC_CUDA_TRY(cudaGetLastError());
    return ACC_SUCCESS;
}

extern "C" int acc_half_tiles(int32_t *block_meta, const float *values, int64_t num_blocks, uint16_t *tiles,
                              int fmt, void *stream_ptr) {
    if (num_blocks < 0 || (num_blocks > 0 && (!block_meta || !values || !tiles)) ||
        (fmt != ACC_HALF_FP16 && fmt != ACC_HALF_BF16))
        return ACC_ERR_INVALID_ARGUMENT;
    if (num_blocks == 0) return ACC_SUCCESS;
    const int64_t blocks = (64 * num_blocks + 255) / 256;
    tiles_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, (cudaStream_t)stream_ptr>>>(
        block_meta, values, num_blocks, tiles, fmt == ACC_HALF_BF16);
    ACC_CUDA_TRY(cudaGetLastError());
    const int64_t rb = (num_blocks + 255) / 256;
    tile_offsets_kernel<<<(unsigned)(rb < 65536 ? rb : 65536), 256, 0, (cudaStream_t)stream_ptr>>>(
        block_meta, num_blocks);
    ACC_CUDA_TRY(cudaGetLastError());
    return ACC_SUCCESS;
}
