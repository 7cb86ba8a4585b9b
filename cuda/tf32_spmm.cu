/*
 * tf32_spmm.cu -- C = A @ B on Tensor Cores from BitTCF, TF32 in, FP32 accumulate.
 *
 * Algorithm (Acc-SpMM's swapped MMA).  For each TC block a warp issues 2*S
 * `mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32` over a slice of 32*S columns of B:
 *   MMA "A" (16x8, row) = B^T: 16 columns of B x the block's 8 compacted columns,
 *   MMA "B" (8x8, col)  = A_block^T: the 8x8 TC block itself,
 *   D (16x8)            = C^T: 16 columns x the window's 8 rows.
 * So the sparse 8x8 block is the small operand and B the large one; no zero-padding of A to
 * 16 rows is needed (the reason Acc-SpMM swaps the operands).
 *
 * Register layout (lane = 4*g + t, g = groupID 0..7, t = threadID_in_group 0..3).  The MMA's
 * row index is only a label for a column of B, so it is remapped to make every B access a
 * 16-byte vector: lane (g, t) needs B[col_t][n0+4g .. +3] and B[col_{t+4}][same], which are
 * exactly the A-fragments of two MMAs (rows g and g+8 <-> columns 4g, 4g+1 for the first,
 * 4g+2, 4g+3 for the second).  The results land so that lane (g, t) owns C[row 2t][n0+4g .. +3]
 * and C[row 2t+1][same]: two 16-byte stores per slice.  The block operand is
 * b0 = A_block[g][t], b1 = A_block[g][t+4], found from the 64-bit mask: bit r*8+c set -> value
 * at values[offset + popcount(mask & ((1 << bit) - 1))].
 *
 * Work decomposition (the schedule, built on the host by accspmm._tf32): a thread block of
 * ACC_TF32_WARPS warps runs one task for one column slice.
 *   PACK task:  each warp runs a run of whole consecutive windows as ONE stream of TC blocks
 *               (the pipeline does not drain between windows); at each window's last block it
 *               writes the window's 8 rows and starts the next.  Empty windows are written as
 *               zeros.
 *   GROUP task: groups of g consecutive warps, each group on one window of more than cap
 *               blocks: warp j of the group takes the j-th of g equal block ranges, writes its
 *               8-row partial to shared memory, and after a barrier the group's first warp sums
 *               the g partials in warp order and writes the window.  Several windows share a
 *               thread block, so each warp gets about cap blocks even for windows of a few cap.
 *   SPLIT task: part q of Q of one window of more than WARPS cap blocks; each warp takes an equal
 *               range of the part's blocks, writes its 8-row partial to shared memory, and after
 *               a barrier the block sums the partials in warp order.  Q = 1: it writes C.  Q > 1:
 *               it writes its tile to workspace slot (base + q), fences, and bumps the window's
 *               counter; the thread block that brings the counter to Q sums the Q tiles in part
 *               order (loads through L2), writes C and resets the counter to zero for the next
 *               launch.  The order of every sum is fixed by the schedule: deterministic, one
 *               launch, no float atomics.
 * The schedule (which windows split, how many blocks a warp packs) comes from the cost model
 * in accspmm/_tf32.py.  Grid order: slice_major runs column slice 0 of every task, then slice
 * 1, ...; each pass reads only 32*S columns of B, so B stays in L2 when k * 32S * 4 bytes fits.
 *
 * Metadata (every variant).  The plan packs each block's metadata into one 48-byte record
 * (block_meta: the 8 column ids interleaved c0, c4, c1, c5, ..., the 64-bit mask, the 64-bit
 * value offset; a padding slot repeats a real column of the block with its mask bits clear, so
 * B rows load without a predicate: 0 * B = 0 for finite B, and tiles where B is not are rewritten by
 * exact_tile, below); lanes 0-2 copy a
 * record into a per-warp shared-memory ring with one 16-byte cp.async each (one code path), __syncwarp
 * publishes a landed slot, and lane 8q + j reads the column ids of block rows q and q + 4 (the B
 * rows it loads) with one 8-byte load.  The ring runs ahead of the operand loads (R - 1 = 5 blocks
 * on the register path, 7 at depth 4; DEPTH on the staged one), so the chain column id -> B address
 * never waits on a global load.  Per-lane constants (the B base address of the
 * lane's columns, the 32-bit row pitch, where the lane's two bits sit in the mask) are set once per thread
 * block, so a block's decode is a few instructions: one IMAD.WIDE per B row, two popcounts.
 *
 * Operands, two pipelines (the `staged` variant bit):
 *   register (staged = 0): each lane loads 2*S 16-byte pieces of B rows and its two block
 *     values (decoded from the mask with popcount) for block i + DEPTH - 1 straight into
 *     registers (ld.global.nc, or .cg without L1) while block i's MMAs run: DEPTH register
 *     sets rotate (the loop is unrolled by DEPTH), so no register copy waits on a load in
 *     flight and DEPTH - 1 blocks are in flight.  Best when B is L2-resident: no shared-memory
 *     round trip.
 *     Transposed loads: the fragment layout wants lane (g, t) to hold B[col_t][4g .. 4g+3], so
 *     each quarter warp (the unit in which the L1 serves a 16-byte load) would touch 4 rows, 32
 *     bytes each: one L1 data-pipe wavefront per 32-byte sector, and that pipe was the busiest
 *     unit of the kernel (ncu, blogcatalog N = 128: 66% of peak, about 7.8M global wavefronts for 7.3M
 *     sectors).  Instead lane 8q + j loads B[col_q][4j .. 4j+3] and B[col_{q+4}][...], so a
 *     quarter warp reads 128 contiguous bytes of one row, and lane (g, t) takes its pieces from
 *     lane 8t + g with one shuffle per register just before the MMAs (16 SHFL per block at
 *     S = 2).  A/B on the H100, 14 matrices x N = 128/256/512: 1.125x geomean, up to 1.35x
 *     (ddi, landmark, bcsstk16); DRAM-bound matrices unchanged.
 *   staged (staged = 1): each lane copies the same operands of block i + DEPTH - 1 with
 *     cp.async (.ca or .cg for B, zero-fill for padding columns, columns >= n and absent
 *     values) into its slots of stage (i + DEPTH - 1) % DEPTH and commits one group per
 *     block; cp.async.wait_group(DEPTH - 1) then guarantees that this lane's copies of block i
 *     have landed, and the __syncwarp after it that every lane's have.  B is copied transposed
 *     as on the register path, into swizzled slots (swizzle()), and lane (g, t) reads lane
 *     8t + g's slot; a __syncwarp before each block's copies keeps them from overwriting a stage
 *     another lane has not read yet.  Values: each lane copies and reads its own.  DEPTH - 1
 *     blocks of B are in flight per warp without holding registers: best when B comes from DRAM.
 *
 * Cache operators: B through L1 and L2 (cache_l1 = 1: B rows are re-read by neighbouring
 * windows and, in slice-major order, by the next task) or L2 only; the metadata ring through
 * cp.async.ca; window offsets, perm and the schedule through ld.global.nc; C written with st.global.cs
 * (streaming: never read again here); split tiles written with st.global.cg and read with ld.global.cg
 * (another SM wrote them).
 *
 * Write-back: window row r goes to C[perm[8w + r]] (the plan's row permutation, fused: no
 * permuted copy of C or B); rows >= m are skipped, columns >= n neither read nor written.
 *
 * Launch: on sm_90 with programmatic dependent launch (acc_cuda_internal.h), so the task row, window
 * offsets, perm and the first blocks' metadata load while the kernel before it on the stream
 * completes; pdl_wait() precedes the first read of B and the first write of C, the workspace or the
 * counters.  H100, back-to-back calls from Python (benchmarks/back_to_back.py, one process per side):
 * 1.09x geomean over 24 real matrices at N = 32/128/512 (0.999-1.24x; the most on small graphs).
 *
 * Inputs: block values must be TF32-rounded on the host (accspmm._tf32.round_tf32, ties
 * away); B is rounded here to the nearest TF32: cvt.rn.tf32.f32 on sm_90 and later (ties to
 * even, one instruction), cvt.rna.tf32.f32 on sm_80 (ties away); both within 2^-11.
 *
 * Non-finite B: a tile whose sums are not finite is rewritten exactly on CUDA cores from the
 * format (exact_tile, below), so NaN/inf land where scipy puts them; no host synchronisation.
 *
 * Limits: 1 <= n < 2^30.  With B and C 16-byte aligned: the 16-byte path with no column test in
 * the loop when n is a multiple of the slice width 32 S (VEC 1), 16-byte copies under a per-lane
 * predicate when n is a multiple of 4 (VEC 2: a lane's 4 columns are all in range or none is);
 * else 4-byte copies with column tests (VEC 0).  k <= 2^31 - 1; num_windows <= 2^31 - 1;
 * num_tasks * slices <= 2^31 - 1.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "acc_cuda_internal.h"
#include "tf32_spmm.h"

namespace {

constexpr int kWarps = ACC_TF32_WARPS;
constexpr int kThreads = kWarps * 32;
static_assert(8 % kWarps == 0,
              "launch bounds and blocks_per_sm scale the 8-warp register budget by 8 / kWarps");
constexpr int kTaskWords = ACC_TF32_TASK_WORDS;
constexpr int kMetaWords = 12; /* one block's record in block_meta and in the ring (48 bytes) */

/* Register path: a metadata ring of R slots, filled A = R - 1 blocks ahead of the operand loads.
 * R is a multiple of DEPTH, so the main loop unrolled by R has compile-time ring slots and
 * register sets (the 32-bit block counters, per-lane metadata pointer and immediate slot
 * offsets cut the loop from about 150 to about 100 instructions per block at S = 2, depth 3).
 * R = 6 rather than 3 costs no registers (H100, 14 matrices x N = 128/256/512: +0.4% geomean,
 * within run-to-run noise; +3-4% on Andrews and deezer_europe, -1-2% on some social graphs). */
template <int DEPTH> struct RegRing {
    static constexpr int R = DEPTH == 4 ? 8 : 6;
    static constexpr int A = R - 1;
    static_assert(R % DEPTH == 0 && DEPTH - 1 <= R, "ring slots must rotate with the register sets");
};

/* The operand format E (ACC_TF32_ELEM_*): TF32 issues KM = 2 MMAs per 32-column step of a lane's
 * pieces, FP16 / BF16 (m16n8k8 with half operands) KM = 4 per 64-column step.  Either way a lane
 * loads one 16-byte piece of each of its two B rows per step, so the byte addresses, pipelines and
 * rings are the same; only the fragment assembly, the value fetch and the write-back differ.
 * Narrow steps: E = a format plus kNarrowStep (the variant's slice_s = 0) takes half the MMAs and
 * columns a step (TF32: one MMA and 16 columns, half formats two and 32) with 8-byte pieces, so a
 * slice's columns are spread over twice the warps and thread blocks of S = 1, for grids under one wave.
 * The register pipeline with whole 8-byte runs only (VEC 1 or 2). */
constexpr int kNarrowStep = 4;
__host__ __device__ constexpr int elem_format(int E) { return E & 3; } /* ACC_TF32_ELEM_* of E */

template <int E> struct Elem {
    static constexpr bool kTf32 = elem_format(E) == ACC_TF32_ELEM_TF32;
    static constexpr int KM = (kTf32 ? 2 : 4) >> ((E & kNarrowStep) ? 1 : 0); /* MMAs per step */
    static constexpr int kStep = 16 * KM;                 /* columns per step: 16, 32 or 64 */
    static constexpr int kLaneCols = 2 * KM;              /* columns per lane and step: 2, 4 or 8 */
    static constexpr int kSize = kTf32 ? 4 : 2;           /* bytes per element of B */
    static constexpr int kStepFloats = kStep * kSize / 4; /* a step of a B row in 4-byte words */
    using Piece = typename std::conditional<kLaneCols * kSize == 16, float4, float2>::type; /* a lane's run */
};

/* A lane's view of a block's record: the columns of the two B rows it loads (TF32: block rows q and
 * q + 4; half: 2q and 2q + 1), the mask, the value offset. */
struct Meta {
    int col0, col1; /* always real columns (pack_meta fills the padding slots) */
    uint32_t mlo, mhi;
    int64_t voff;
};

/* Per-lane constants, computed once per thread block, that make the per-block decode a few
 * instructions: the address of B[0][lcol] as an integer (lcol = slice * 32S + 4 (lane % 8), the
 * first column the lane loads; it may lie past the end of a row and is only dereferenced where in
 * range), the row pitch in bytes, the columns left from each 32-column step (all 4 on the 16-byte path, where
 * n is a multiple of 32 S), and where lane (g, t)'s bits g*8+t and g*8+t+4 sit in the mask. */
template <int S> struct Lane {
    uint64_t bl;
    uint32_t row_bytes;
    int nrem[S];     /* min(4, max(0, n - (lcol + 32 s))): columns of step s in range */
    uint32_t bit0;   /* bit g*8+t within its 32-bit word (bit g*8+t+4 is bit0 << 4) */
    uint32_t below0; /* the word's bits below bit0 */
    uint32_t below1; /* the word's bits below bit0 << 4 */
    bool high;       /* g >= 4: the bits are in the mask's high word */
    uint32_t vword;  /* half formats: the lane's 32-bit word of a block's dense tile, 4g + t */
    int live[S];     /* half formats, element path: MMAs of step s with a column < n (4 unless the
                      * step holds fewer than 8 columns: then (columns + 1) / 2) */
    bool pairs;      /* half formats, element path: n and B's address even (4-byte pair loads) */
};

__device__ __forceinline__ int64_t ldg64(const int64_t *p) {
    return __ldg(reinterpret_cast<const long long *>(p));
}

/* FP32 -> TF32, round to nearest: one F2FP instruction (ties to even) on sm_90 and later,
 * cvt.rna (ties away, three instructions) on sm_80.  Same error bound, 2^-11. */
__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#else
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#endif
    return r;
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* cp.async of 16 bytes; src_bytes 0 fills the destination with zeros (src is not read). */
template <bool CACHE_L1>
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    if (CACHE_L1)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(src_bytes));
    else
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async4(void *dst, const void *src, int src_bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(s), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }

template <int N> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

/* Lanes 0..2 copy a block's 48-byte record (src: its 16 bytes for this lane) into ring slot
 * `slot` (one code path, no branch per field: the record was packed on the host for this). */
__device__ __forceinline__ void copy_meta_from(int *ring, int lane, const int32_t *src, int slot) {
    if (lane < 3) cp_async16<true>(ring + slot * kMetaWords + 4 * lane, src, 16);
}

__device__ __forceinline__ void copy_meta(const acc_tf32_args &p, int *ring, int lane, int64_t b, int slot) {
    copy_meta_from(ring, lane, p.block_meta + b * kMetaWords + 4 * lane, slot);
}

/* The metadata of the block in ring slot `slot` (landed and published by __syncwarp), with the
 * columns of block rows q and q+4: they are stored interleaved (c0, c4, c1, c5, ...), so one
 * 8-byte read gets both. */
template <int E> __device__ __forceinline__ Meta read_meta(const int *ring, int q, int slot) {
    const int *m = ring + slot * kMetaWords;
    const int4 w = *reinterpret_cast<const int4 *>(m + 8);
    Meta r;
    if (Elem<E>::kTf32) {
        const int2 c = *reinterpret_cast<const int2 *>(m + 2 * q);
        r.col0 = c.x;
        r.col1 = c.y;
    } else { /* columns 2q and 2q + 1 sit at 4q and 4q + 2 (q < 2), or 4q - 7 and 4q - 5 */
        const int a = q < 2 ? 4 * q : 4 * q - 7;
        r.col0 = m[a];
        r.col1 = m[a + 2];
    }
    r.mlo = (uint32_t)w.x;
    r.mhi = (uint32_t)w.y;
    r.voff = (int64_t)(((uint64_t)(uint32_t)w.w << 32) | (uint32_t)w.z);
    return r;
}

/* base + idx * scale in one IMAD.WIDE.U32 (the compiler otherwise splits the 64-bit add). */
__device__ __forceinline__ uint64_t wide_addr(uint64_t base, uint32_t idx, uint32_t scale) {
    uint64_t r;
    asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(r) : "r"(idx), "r"(scale), "l"(base));
    return r;
}

/* Where lane (g, t)'s two values of a block are: has0/has1 (stored?) and their addresses in
 * values[] (ascending bit order: the popcount of the mask below the bit; a block holds at
 * most 64 values, so the offset within it is a 32-bit multiply-add). */
struct ValueIdx {
    bool has0, has1;
    const float *v0, *v1;
};

template <int S>
__device__ __forceinline__ ValueIdx value_idx(const Lane<S> &L, const Meta &mt, const float *values) {
    const uint32_t w = L.high ? mt.mhi : mt.mlo;
    const uint32_t base = L.high ? __popc(mt.mlo) : 0;
    const uint64_t vb = (uint64_t)(uintptr_t)(values + mt.voff);
    ValueIdx v;
    v.has0 = (w & L.bit0) != 0;
    v.has1 = (w & (L.bit0 << 4)) != 0;
    v.v0 = reinterpret_cast<const float *>(wide_addr(vb, base + __popc(w & L.below0), 4));
    v.v1 = reinterpret_cast<const float *>(wide_addr(vb, base + __popc(w & L.below1), 4));
    return v;
}

/* Half formats: the lane's word of the block's dense tile (values + 64 b halves, row-major), A_block[g][2t]
 * and A_block[g][2t + 1]: the MMA's B fragment as it is. */
template <int S>
__device__ __forceinline__ const uint32_t *tile_word(const Lane<S> &L, const Meta &mt, const float *values) {
    return reinterpret_cast<const uint32_t *>(values) + (mt.voff >> 1) + L.vword;
}

template <int E> __device__ __forceinline__ float half_to_f32(uint16_t h) {
    if (elem_format(E) == ACC_TF32_ELEM_BF16) return __uint_as_float((uint32_t)h << 16);
    return __half2float(__ushort_as_half(h));
}

/* Two floats rounded to the half format E (nearest even), lo in the low half. */
template <int E> __device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    if (elem_format(E) == ACC_TF32_ELEM_BF16) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<const uint32_t *>(&h);
    }
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

template <int E> __device__ __forceinline__ uint16_t to_half(float x) {
    return (uint16_t)(pack_half2<E>(x, 0.f) & 0xffffu);
}

template <int E>
__device__ __forceinline__ void mma_half(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
    if (elem_format(E) == ACC_TF32_ELEM_BF16)
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(b));
    else
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(b));
}

__device__ __forceinline__ uint32_t prmt(uint32_t x, uint32_t y, uint32_t sel) {
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(sel));
    return r;
}

/* Word j of a lane's piece (j a compile-time constant once unrolled). */
__device__ __forceinline__ uint32_t word(const float4 &f, int j) {
    return __float_as_uint(j == 0 ? f.x : j == 1 ? f.y : j == 2 ? f.z : f.w);
}
__device__ __forceinline__ uint32_t word(const float2 &f, int j) {
    return __float_as_uint(j == 0 ? f.x : f.y);
}

/* One step's MMAs of a block for lane (g, t), from its two B pieces f0, f1 (already moved to it).
 * TF32: f0 = B[col_t][4g .. 4g+3], f1 = B[col_{t+4}][...]; MMA j takes columns 4g + 2j (row g)
 * and 4g + 2j + 1 (row g + 8); a0, a1 = A_block[g][t], A_block[g][t + 4].
 * Half: f0 = B[col_2t][8g .. 8g+7], f1 = B[col_{2t+1}][...] (8 halves each); MMA j takes columns
 * 8g + 2j (row g) and 8g + 2j + 1 (row g + 8), and its A fragment pairs k = 2t, 2t + 1 of each row,
 * one PRMT each; a0 = A_block[g][2t .. 2t+1] (the B fragment).  On narrow steps (kNarrowStep) the pieces
 * hold half the columns, B[col][2g .. 2g+1] (TF32: one MMA) or B[col][4g .. 4g+3] (half: MMA j of 2 takes
 * columns 4g + 2j and 4g + 2j + 1).  Either way lane (g, t) gets C[2t][c] in d[0] (column 2j of its run) and
 * d[2] (2j + 1), C[2t + 1][c] in d[1] and d[3]. */

template <int E>
__device__ __forceinline__ void mma_step(float (&acc)[Elem<E>::KM][4], const typename Elem<E>::Piece &f0,
                                         const typename Elem<E>::Piece &f1, uint32_t a0, uint32_t a1,
                                         int live = 4) {
    if constexpr (Elem<E>::kTf32) {
        mma_tf32(acc[0], to_tf32(f0.x), to_tf32(f0.y), to_tf32(f1.x), to_tf32(f1.y), a0, a1);
        if constexpr (Elem<E>::KM == 2)
            mma_tf32(acc[1], to_tf32(f0.z), to_tf32(f0.w), to_tf32(f1.z), to_tf32(f1.w), a0, a1);
    } else {
        uint32_t u[Elem<E>::KM], v[Elem<E>::KM];
#pragma unroll
        for (int j = 0; j < Elem<E>::KM; j++) {
            u[j] = word(f0, j);
            v[j] = word(f1, j);
        }
#pragma unroll
        for (int j = 0; j < Elem<E>::KM; j++)
            if (j < live) /* warp-uniform: MMA j's columns 8g + 2j, + 1 are all >= n for j >= live */
                mma_half<E>(acc[j], prmt(u[j], v[j], 0x5410u), prmt(u[j], v[j], 0x7632u), a0);
    }
}

/* Address of B[col][ncol] for lane L (0 <= col < k), from its base `bl`. */
__device__ __forceinline__ const float *b_row(uint64_t bl, uint32_t row_bytes, int col) {
    return reinterpret_cast<const float *>(wide_addr(bl, (uint32_t)col, row_bytes));
}

/* Shared memory of one thread block.  STAGED, per warp: DEPTH stages of 2*S*32 float4 (B),
 * DEPTH stages of 2*32 floats (values; half formats use the first 32), and a ring of DEPTH
 * metadata slots; SPLIT partials (8 x kStep S floats per warp) reuse the B stages once the pipeline has
 * drained.  Register pipeline (!STAGED): the SPLIT partials, then the metadata rings of RegRing<DEPTH>::R
 * slots. */
template <int E, int S, int DEPTH, bool STAGED> struct Smem {
    static constexpr int kRing = STAGED ? DEPTH : RegRing<DEPTH>::R; /* metadata slots per warp */
    static constexpr int kPart = 8 * Elem<E>::kStep * S * 4;         /* bytes of one warp's partial */
    static constexpr int kB = STAGED ? DEPTH * 2 * S * 32 : 0;       /* float4 per warp */
    static constexpr int kV = STAGED ? DEPTH * 2 * 32 : 0;           /* floats per warp */
    static constexpr int kM = kRing * kMetaWords;                    /* 32-bit words per warp */
    static constexpr int kHead = STAGED ? kWarps * (kB * 16 + kV * 4) : kWarps * kPart;
    static constexpr int kBytes = kHead + kWarps * kM * 4;
    static_assert(!STAGED || kB * 16 >= kPart, "SPLIT partials must fit in the B stages");
    static_assert(kHead % 16 == 0, "the rings must be 16-byte aligned");
};

/* STAGED: the B slot (of 32 float4 per stage and piece) that lane 8a + b copies into, 8a + (b + 2a) % 8:
 * the copies of a quarter warp (one a) and the reads of one (lanes 8t + g for t = 0..3 and two
 * consecutive g) each cover 8 distinct float4 bank groups, so neither has bank conflicts. */
__device__ __forceinline__ int swizzle(int lane) { return (lane & 24) | ((lane + 2 * (lane >> 3)) & 7); }

/* Per-warp state of the stream of TC blocks. */
struct Warp {
    float4 *sB; /* this warp's B stages (STAGED) */
    float *sV;  /* this warp's value stages (STAGED) */
    int *sM;    /* this warp's metadata ring */
    int g, t, lane;
    int q;     /* the block row pair (q, q + 4) whose B pieces this lane loads (lane / 8) */
    int src;   /* the lane that loaded this lane's B pieces (8t + g) */
    int wslot; /* STAGED: this lane's B slots (swizzled lane), and where lane src's are */
    int rslot;
    int64_t ncol; /* first column this lane owns in C: slice * 32S + 4g */
    int64_t col0; /* first column of the slice: slice * 32S */
};

template <int E, int S, bool CACHE_L1, int VEC>
__device__ __forceinline__ void issue_block(const acc_tf32_args &p, const Warp &W, const Lane<S> &L,
                                            const Meta &mt, int stage) {
    static_assert(E == ACC_TF32_ELEM_TF32 || VEC, "half formats stage B with 16-byte copies only");
    static_assert(!(E & kNarrowStep), "narrow steps run the register pipeline only");
    float4 *dst = W.sB + stage * (2 * S * 32) + W.wslot;
    const int cols[2] = {mt.col0, mt.col1};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const float *row = b_row(L.bl, L.row_bytes, cols[h]);
#pragma unroll
        for (int s = 0; s < S; s++) {
            float4 *d = dst + (2 * s + h) * 32;
            if (VEC == 1) { /* every column of the slice is < n */
                cp_async16<CACHE_L1>(d, row + 32 * s, 16);
            } else if (VEC == 2) { /* the lane's piece is wholly in range or wholly out (zeros) */
                const bool ok = L.nrem[s] > 0;
                cp_async16<CACHE_L1>(d, ok ? row + 32 * s : p.B, ok ? 16 : 0);
            } else if constexpr (E == ACC_TF32_ELEM_TF32) {
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const bool ok = q < L.nrem[s];
                    cp_async4(reinterpret_cast<float *>(d) + q, ok ? row + 32 * s + q : p.B, ok ? 4 : 0);
                }
            }
        }
    }
    float *v = W.sV + stage * 64 + W.lane;
    if constexpr (E == ACC_TF32_ELEM_TF32) {
        const ValueIdx vi = value_idx(L, mt, p.values);
        cp_async4(v, vi.has0 ? vi.v0 : p.values, vi.has0 ? 4 : 0);
        cp_async4(v + 32, vi.has1 ? vi.v1 : p.values, vi.has1 ? 4 : 0);
    } else {
        cp_async4(v, tile_word(L, mt, p.values), 4);
    }
}

template <int E, int S, int DEPTH>
__device__ __forceinline__ void consume_block(const Warp &W, int stage, float (&acc)[S][Elem<E>::KM][4]) {
    const float4 *src = W.sB + stage * (2 * S * 32) + W.rslot;
    const uint32_t b0 = __float_as_uint(W.sV[stage * 64 + W.lane]);
    const uint32_t b1 = E == ACC_TF32_ELEM_TF32 ? __float_as_uint(W.sV[stage * 64 + 32 + W.lane]) : 0u;
#pragma unroll
    for (int s = 0; s < S; s++)
        mma_step<E>(acc[s], src[(2 * s) * 32], src[(2 * s + 1) * 32], b0, b1);
}

/* STAGED: issues the copies of block j into `slot` (its stage and metadata slot): reads j's
 * metadata from the ring, copies its B rows and values, then (after every lane has read the
 * slot) refills the slot with the metadata of block j + DEPTH.  j and b_end are warp-uniform. */
template <int E, int S, int DEPTH, bool CACHE_L1, int VEC>
__device__ __forceinline__ void refill(const acc_tf32_args &p, const Warp &W, const Lane<S> &L, int64_t j,
                                       int64_t b_end, int slot) {
    if (j >= b_end) return;
    const Meta mt = read_meta<E>(W.sM, W.q, slot);
    __syncwarp(); /* every lane has read the B stage that this block's copies overwrite */
    issue_block<E, S, CACHE_L1, VEC>(p, W, L, mt, slot);
    __syncwarp();
    if (j + DEPTH < b_end) copy_meta(p, W.sM, W.lane, j + DEPTH, slot);
}

/* Pipeline prologue: the metadata of blocks b .. b+COUNT-1 (those before b_end) into ring slots
 * 0 .. COUNT-1, landed and visible to every lane of the warp. */
template <int COUNT>
__device__ __forceinline__ void first_meta(const acc_tf32_args &p, const Warp &W, int64_t b, int64_t b_end) {
#pragma unroll
    for (int s = 0; s < COUNT; s++)
        if (b + s < b_end) copy_meta(p, W.sM, W.lane, b + s, s);
    cp_commit();
    cp_wait<0>();
    __syncwarp();
}

/* Non-finite B (scipy's semantics without a host synchronisation).  A TC block multiplies every
 * slot of its 8 x 8 tile, so an inf or NaN in a B row that only a padding slot or a clear mask bit
 * meets (0 * inf = NaN) would reach rows of the window that store nothing in that column, where
 * scipy's sum is finite.  Every writer of a window's output tile therefore tests its sums
 * (all_finite): a GROUP's first warp and a SPLIT's final thread block vote and, if any sum is not
 * finite, write the tile with exact_tile instead; a PACK warp keeps a flag per lane and, after its
 * loop, rewrites the flagged windows (fix_pack_range).  exact_tile recomputes the tile from the
 * format on CUDA cores, stored entries only, in ascending column order (scipy's order), with the
 * same TF32-rounded operands and FP32 sums.  NaN and inf then land exactly where a stored entry
 * meets them, and every other element of the tile is still a TF32 product of its row (bit-exact
 * on integer data).  Finite B costs the vote alone.  Not inlined: the hot loop keeps its registers. */
/* C[at] = v in the output format. */
template <int E> __device__ __forceinline__ void store_c(float *C, int out_f32, int64_t at, float v) {
    if (E == ACC_TF32_ELEM_TF32 || out_f32)
        __stcs(C + at, v);
    else
        __stcs(reinterpret_cast<unsigned short *>(C) + at, (unsigned short)to_half<E>(v));
}

/* C[at] (written by this grid, read through L2) as a float. */
template <int E> __device__ __forceinline__ float load_c(const float *C, int out_f32, int64_t at) {
    if (E == ACC_TF32_ELEM_TF32 || out_f32) return __ldcg(C + at);
    return half_to_f32<E>(__ldcg(reinterpret_cast<const unsigned short *>(C) + at));
}

template <int E>
__device__ __noinline__ void exact_tile(const int64_t *window_offsets, const int32_t *block_meta,
                                        const float *values, const int64_t *perm, const float *B, float *C,
                                        int64_t m, int64_t n, int64_t w, int64_t col0, int ncols, int tid,
                                        int nthreads, int out_f32) {
    const int64_t b0 = ldg64(window_offsets + w), b1 = ldg64(window_offsets + w + 1);
    for (int e = tid; e < 8 * ncols; e += nthreads) {
        const int r = e / ncols;
        const int64_t row = w * 8 + r, col = col0 + e % ncols;
        if (row >= m || col >= n) continue;
        float acc = 0.f;
        for (int64_t b = b0; b < b1; b++) {
            const int32_t *rec = block_meta + b * kMetaWords;
            const uint64_t mask =
                (uint64_t)(uint32_t)__ldg(rec + 8) | ((uint64_t)(uint32_t)__ldg(rec + 9) << 32);
            const int64_t voff =
                (int64_t)((uint64_t)(uint32_t)__ldg(rec + 10) | ((uint64_t)(uint32_t)__ldg(rec + 11) << 32));
            uint32_t bits = (uint32_t)(mask >> (8 * r)) & 0xffu;
            while (bits) {
                const int c = __ffs(bits) - 1, bit = 8 * r + c;
                bits &= bits - 1;
                /* slot c's column: the record interleaves c0, c4, c1, c5, ... */
                const int32_t bcol = __ldg(rec + (c < 4 ? 2 * c : 2 * (c - 4) + 1));
                float a, x;
                if (E == ACC_TF32_ELEM_TF32) {
                    a = __ldg(values + voff + __popcll(mask & ((1ull << bit) - 1)));
                    x = __uint_as_float(to_tf32(__ldg(B + (int64_t)bcol * n + col)));
                } else { /* the dense tile at 64 b halves (voff) */
                    a = half_to_f32<E>(__ldg(reinterpret_cast<const unsigned short *>(values) + voff + bit));
                    x = half_to_f32<E>(
                        __ldg(reinterpret_cast<const unsigned short *>(B) + (int64_t)bcol * n + col));
                }
                acc =
                    __fadd_rn(acc, __fmul_rn(a, x)); /* the product of two TF32 or two half values is exact */
            }
        }
        store_c<E>(C, out_f32, ldg64(perm + row) * n + col, acc);
    }
}

/* A multi-part SPLIT's arrival, after this thread block stored its part to the workspace: whether it is the
 * last of `parts` to arrive at *counter (the same answer in every thread); the last one's reads of the
 * workspace then see every part's stores. */
__device__ __forceinline__ bool last_to_arrive(int32_t *counter, int parts) {
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(counter, 1) == parts - 1;
    __syncthreads();
    const bool mine = last;
    if (mine) __threadfence();
    return mine;
}

template <int N> __device__ __forceinline__ bool all_finite(const float (&v)[N]) {
    bool ok = true;
#pragma unroll
    for (int q = 0; q < N; q++)
        ok &= fabsf(v[q]) <= 3.402823466e38f; /* false for inf and NaN */
    return ok;
}

/* PACK warps check their sums at each window's end (one flag per lane, no vote in the loop) and,
 * where any lane saw a non-finite sum, call this after their loop, when the pipeline's registers
 * are free: it reads back each window's tile of C that the warp wrote (windows w0 .. w1 - 1,
 * columns col0 .. col0 + ncols - 1) and rewrites with exact_tile those holding a non-finite value. */
template <int E>
__device__ __noinline__ void fix_pack_range(const int64_t *window_offsets, const int32_t *block_meta,
                                            const float *values, const int64_t *perm, const float *B,
                                            float *C, int64_t m, int64_t n, int64_t w0, int64_t w1,
                                            int64_t col0, int ncols, int lane, int out_f32) {
    for (int64_t w = w0; w < w1; w++) {
        __syncwarp(); /* the warp's stores to C (and the previous window's rewrite) are visible to all lanes
                       */
        bool ok = true;
        for (int e = lane; e < 8 * ncols; e += 32) {
            const int64_t row = w * 8 + e / ncols, col = col0 + e % ncols;
            if (row < m && col < n)
                ok &= fabsf(load_c<E>(C, out_f32, ldg64(perm + row) * n + col)) <= 3.402823466e38f;
        }
        if (__any_sync(0xffffffffu, !ok))
            exact_tile<E>(window_offsets, block_meta, values, perm, B, C, m, n, w, col0, ncols, lane, 32,
                          out_f32);
    }
}

/* Writes lane (g, t)'s rows 2t and 2t+1 (original rows prow[0], prow[1]; < 0 = beyond m). */
template <int E, int S, int VEC>
__device__ __forceinline__ void write_rows(const acc_tf32_args &p, const float (&acc)[S][Elem<E>::KM][4],
                                           const int64_t (&prow)[2], int64_t ncol) {
    constexpr int KM = Elem<E>::KM, LC = Elem<E>::kLaneCols;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        if (prow[h] < 0) continue;
        const int64_t base = prow[h] * p.n;
#pragma unroll
        for (int s = 0; s < S; s++) {
            const int64_t c = ncol + Elem<E>::kStep * s;
            float v[LC];
#pragma unroll
            for (int j = 0; j < KM; j++) {
                v[2 * j] = acc[s][j][h];
                v[2 * j + 1] = acc[s][j][2 + h];
            }
            if (Elem<E>::kTf32 || p.out_f32) {
                float *dst = p.C + base + c;
                if (VEC) { /* every column of the slice is < n (VEC 2: of the lane's run, if any) */
                    if (VEC == 2 && c >= p.n) continue;
                    if constexpr (LC % 4 == 0) {
#pragma unroll
                        for (int q = 0; q < LC; q += 4)
                            __stcs(reinterpret_cast<float4 *>(dst + q),
                                   make_float4(v[q], v[q + 1], v[q + 2], v[q + 3]));
                    } else {
                        __stcs(reinterpret_cast<float2 *>(dst), make_float2(v[0], v[1]));
                    }
                } else {
#pragma unroll
                    for (int q = 0; q < LC; q++)
                        if (c + q < p.n) __stcs(dst + q, v[q]);
                }
            } else if (VEC) {
                if (VEC == 2 && c >= p.n) continue;
                unsigned short *dst = reinterpret_cast<unsigned short *>(p.C) + base + c;
                if constexpr (LC == 8)
                    __stcs(reinterpret_cast<uint4 *>(dst),
                           make_uint4(pack_half2<E>(v[0], v[1]), pack_half2<E>(v[2], v[3]),
                                      pack_half2<E>(v[4], v[5]), pack_half2<E>(v[6], v[7])));
                else
                    __stcs(reinterpret_cast<uint2 *>(dst),
                           make_uint2(pack_half2<E>(v[0], v[1]), pack_half2<E>(v[2], v[3])));
            } else {
                unsigned short *dst = reinterpret_cast<unsigned short *>(p.C) + base + c;
#pragma unroll
                for (int q = 0; q < LC; q++)
                    if (c + q < p.n) __stcs(dst + q, (unsigned short)to_half<E>(v[q]));
            }
        }
    }
}

/* Original rows of lane t's two rows of window w (-1 beyond m). */
__device__ __forceinline__ void window_rows(const acc_tf32_args &p, int64_t w, int t, int64_t (&prow)[2]) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int64_t row = w * 8 + 2 * t + h;
        prow[h] = row < p.m ? ldg64(p.perm + row) : -1;
    }
}

template <int S, int KM> __device__ __forceinline__ void zero(float (&acc)[S][KM][4]) {
#pragma unroll
    for (int s = 0; s < S; s++)
#pragma unroll
        for (int j = 0; j < KM; j++)
#pragma unroll
            for (int q = 0; q < 4; q++)
                acc[s][j][q] = 0.f;
}

template <int E, int S, int VEC>
__device__ __forceinline__ void write_zero_window(const acc_tf32_args &p, int64_t w, int t, int64_t ncol) {
    float acc[S][Elem<E>::KM][4];
    zero(acc);
    int64_t prow[2];
    window_rows(p, w, t, prow);
    write_rows<E, S, VEC>(p, acc, prow, ncol);
}

/* PACK state of a warp: current window w (< w_end), the original rows of lane t's two rows, and
 * as block indices relative to the warp's first block b0 (32-bit: a warp's range is at most one
 * window or one packed run, fewer than 2^31 blocks) the block that ends window w (stop) and the
 * end of window w + 1 (next_stop, prefetched).  SPLIT and GROUP: stop = -1, never met. */
struct Pack {
    int64_t w, w_end, b0, prow[2];
    int stop, next_stop;
    bool bad; /* this lane wrote a non-finite sum (the warp's windows are checked after the loop) */
};

/* After block i: at the end of a PACK window, write its rows, zero the accumulators, write any
 * empty windows that follow and move to the next non-empty one. */
template <int E, int S, int VEC>
__device__ __forceinline__ void after_block(const acc_tf32_args &p, int i, Pack &P,
                                            float (&acc)[S][Elem<E>::KM][4], const Warp &W) {
    if (i + 1 != P.stop) return;
    const int t = W.t;
    const int64_t ncol = W.ncol;
    constexpr int kAcc = 4 * Elem<E>::KM * S;
    P.bad |= !all_finite<kAcc>(reinterpret_cast<const float(&)[kAcc]>(acc)); /* see fix_pack_range */
    write_rows<E, S, VEC>(p, acc, P.prow, ncol);
    zero(acc);
    P.w++;
    int stop = P.next_stop;
    while (P.w < P.w_end && stop == P.stop) { /* empty windows after this one */
        write_zero_window<E, S, VEC>(p, P.w, t, ncol);
        P.w++;
        stop = P.w < P.w_end ? (int)(ldg64(p.window_offsets + P.w + 1) - P.b0) : 0;
    }
    if (P.w < P.w_end) {
        P.stop = stop;
        P.next_stop = P.w + 1 < P.w_end ? (int)(ldg64(p.window_offsets + P.w + 2) - P.b0) : 0;
        window_rows(p, P.w, t, P.prow);
    }
}

/* Register pipeline: one block's operands of lane (g, t), loaded straight into registers. */
template <int E, int S> struct Ops {
    typename Elem<E>::Piece f[2 * S]; /* the pieces of the lane's two B rows a step (floats or halves) */
    uint32_t a0, a1; /* TF32: A_block[g][t], A_block[g][t+4]; half: A_block[g][2t .. 2t+1] in a0 */
};

template <bool CACHE_L1, class P> __device__ __forceinline__ P ldb_piece(const float *q) {
    return CACHE_L1 ? __ldg(reinterpret_cast<const P *>(q)) : __ldcg(reinterpret_cast<const P *>(q));
}

template <bool CACHE_L1> __device__ __forceinline__ float ldb1(const float *q) {
    return CACHE_L1 ? __ldg(q) : __ldcg(q);
}

template <int E, int S, bool CACHE_L1, int VEC>
__device__ __forceinline__ void load_ops(const acc_tf32_args &p, const Lane<S> &L, const Meta &mt,
                                         Ops<E, S> &o) {
    using P = typename Elem<E>::Piece;
    constexpr int kSF = Elem<E>::kStepFloats;
    static_assert(!(E & kNarrowStep) || VEC != 0, "narrow steps load whole 8-byte runs only");
    const int cols[2] = {mt.col0, mt.col1}; /* real columns: pack_meta fills padding slots */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const float *row = b_row(L.bl, L.row_bytes, cols[h]);
#pragma unroll
        for (int s = 0; s < S; s++) {
            P &f = o.f[2 * s + h];
            if constexpr (VEC == 1) { /* every column of the slice is < n */
                f = ldb_piece<CACHE_L1, P>(row + kSF * s);
            } else if constexpr (VEC == 2) { /* the lane's run of halves is all < n or none of it is */
                f = L.nrem[s] > 0 ? ldb_piece<CACHE_L1, P>(row + kSF * s) : P{};
            } else if constexpr (!Elem<E>::kTf32) { /* the step's 8 halves, those < n */
                uint32_t w[4] = {0u, 0u, 0u, 0u};
                if (L.pairs) { /* n even: pairs are 4-byte aligned and wholly in or out of range */
                    const uint32_t *r32 = reinterpret_cast<const uint32_t *>(row + 32 * s);
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        if (2 * j < L.nrem[s]) w[j] = CACHE_L1 ? __ldg(r32 + j) : __ldcg(r32 + j);
                } else {
                    const unsigned short *r16 = reinterpret_cast<const unsigned short *>(row + 32 * s);
#pragma unroll
                    for (int q = 0; q < 8; q++) /* independent loads, all in flight together */
                        if (q < L.nrem[s])
                            w[q >> 1] |= (uint32_t)(CACHE_L1 ? __ldg(r16 + q) : __ldcg(r16 + q))
                                         << (16 * (q & 1));
                }
                f = make_float4(__uint_as_float(w[0]), __uint_as_float(w[1]), __uint_as_float(w[2]),
                                __uint_as_float(w[3]));
            } else {
                f = make_float4(0.f, 0.f, 0.f, 0.f);
                if (L.nrem[s] > 0) f.x = ldb1<CACHE_L1>(row + 32 * s);
                if (L.nrem[s] > 1) f.y = ldb1<CACHE_L1>(row + 32 * s + 1);
                if (L.nrem[s] > 2) f.z = ldb1<CACHE_L1>(row + 32 * s + 2);
                if (L.nrem[s] > 3) f.w = ldb1<CACHE_L1>(row + 32 * s + 3);
            }
        }
    }
    if constexpr (Elem<E>::kTf32) {
        const ValueIdx vi = value_idx(L, mt, p.values);
        o.a0 = vi.has0 ? __float_as_uint(__ldg(vi.v0)) : 0u;
        o.a1 = vi.has1 ? __float_as_uint(__ldg(vi.v1)) : 0u;
    } else {
        o.a0 = __ldg(tile_word(L, mt, p.values));
        o.a1 = 0u;
    }
}

__device__ __forceinline__ float4 shfl_piece(const float4 &v, int src) {
    return make_float4(__shfl_sync(0xffffffffu, v.x, src), __shfl_sync(0xffffffffu, v.y, src),
                       __shfl_sync(0xffffffffu, v.z, src), __shfl_sync(0xffffffffu, v.w, src));
}
__device__ __forceinline__ float2 shfl_piece(const float2 &v, int src) {
    return make_float2(__shfl_sync(0xffffffffu, v.x, src), __shfl_sync(0xffffffffu, v.y, src));
}

template <int E, int S, bool LIVE>
__device__ __forceinline__ void consume_ops(const Ops<E, S> &o, int src, float (&acc)[S][Elem<E>::KM][4],
                                            const Lane<S> &L) {
#pragma unroll
    for (int s = 0; s < S; s++)
        mma_step<E>(acc[s], shfl_piece(o.f[2 * s], src), shfl_piece(o.f[2 * s + 1], src), o.a0, o.a1,
                    LIVE ? L.live[s] : 4);
}

/* Step i (relative to the warp's first block; i % R == r) of the register pipeline with
 * F = DEPTH - 1 blocks of operands loaded ahead: block i + F's operands go into `nxt` (its
 * metadata from ring slot (r + F) % R, copied A steps ago), the slot read in the previous step
 * is refilled with block i + F + A (mq: lane's 16 bytes of block F + A's record), and block i's
 * MMAs run on `cur`.  r is a compile-time constant once the caller's loop is unrolled, so the
 * ring slots are immediate offsets; DEPTH register sets rotate (R is a multiple of DEPTH), so no
 * register copy waits on a load in flight. */
template <int E, int S, int DEPTH, bool CACHE_L1, int VEC>
__device__ __forceinline__ void reg_step(const acc_tf32_args &p, const Warp &W, const Lane<S> &L, int r,
                                         int i, int nblk, const int32_t *mq, const Ops<E, S> &cur,
                                         Ops<E, S> &nxt, float (&acc)[S][Elem<E>::KM][4], Pack &P) {
    constexpr int F = DEPTH - 1, R = RegRing<DEPTH>::R, A = RegRing<DEPTH>::A;
    cp_wait<A - 1>(); /* block i + F's metadata has landed ... */
    __syncwarp();     /* ... is visible to every lane, and the previous step's slot was read by all */
    if (i + F < nblk) load_ops<E, S, CACHE_L1, VEC>(p, L, read_meta<E>(W.sM, W.q, (r + F) % R), nxt);
    if (i + F + A < nblk) copy_meta_from(W.sM, W.lane, mq + (int64_t)i * kMetaWords, (r + F + R - 1) % R);
    cp_commit();
    consume_ops<E, S, !Elem<E>::kTf32 && VEC == 0>(cur, W.src, acc, L);
    after_block<E, S, VEC>(p, i, P, acc, W);
}

template <int E, int S, int DEPTH, bool CACHE_L1, int VEC, bool STAGED>
/* minimum thread blocks per SM, i.e. the register budget: per 8 warps 2 on the register path
 * (3 at S = 1, depth 2), 3 staged (4 at S = 1); accspmm._tf32.blocks_per_sm mirrors it */
__global__ void __launch_bounds__(kThreads,
                                  (8 / kWarps) * (STAGED ? (S == 1 ? 4 : 3) : (S == 1 && DEPTH == 2 ? 3 : 2)))
    tf32_spmm_kernel(const acc_tf32_args p, int slices, int slice_major) {
    extern __shared__ __align__(16) unsigned char smem[];
    using SM = Smem<E, S, DEPTH, STAGED>;
    using EL = Elem<E>;
    constexpr int KM = EL::KM;
    constexpr int EF = elem_format(E); /* E without kNarrowStep */
    const int warp = threadIdx.x >> 5;
    Warp W;
    W.lane = threadIdx.x & 31;
    W.g = W.lane >> 2;
    W.t = W.lane & 3;
    W.sB = reinterpret_cast<float4 *>(smem) + warp * SM::kB;
    W.sV = reinterpret_cast<float *>(smem + kWarps * SM::kB * 16) + warp * SM::kV;
    W.sM = reinterpret_cast<int *>(smem + SM::kHead) + warp * SM::kM;
    const int64_t bid = blockIdx.x;
    int64_t task, slice;
    if (slice_major) {
        slice = bid / p.num_tasks;
        task = bid - slice * p.num_tasks;
    } else {
        task = bid / slices;
        slice = bid - task * slices;
    }
    W.q = W.lane >> 3;
    W.src = 8 * W.t + W.g;
    W.wslot = swizzle(W.lane);
    W.rslot = swizzle(W.src);
    W.col0 = slice * (EL::kStep * S);
    W.ncol = W.col0 + EL::kLaneCols * W.g;
    /* both pipelines load B transposed: lane 8q + j loads columns kLaneCols j .. + kLaneCols - 1
     * (16 bytes) of block rows q and q + 4 (half: 2q and 2q + 1), so each quarter warp reads 128
     * contiguous bytes of one B row */
    const int64_t lcol = slice * (EL::kStep * S) + EL::kLaneCols * (W.lane & 7);
    Lane<S> L;
    L.bl = (uint64_t)(uintptr_t)p.B + (uint64_t)lcol * EL::kSize;
    L.row_bytes = (uint32_t)(p.n * EL::kSize);
#pragma unroll
    for (int s = 0; s < S; s++) {
        const int64_t left = p.n - (lcol + EL::kStep * s);
        L.nrem[s] = left < 0 ? 0 : left > EL::kLaneCols ? EL::kLaneCols : (int)left;
    }
    L.vword = 4 * W.g + W.t;
#pragma unroll
    for (int s = 0; s < S; s++) {
        const int64_t left = p.n - (W.col0 + EL::kStep * s);
        L.live[s] = left >= 8 ? 4 : left <= 0 ? 0 : (int)(left + 1) / 2;
    }
    L.pairs = p.n % 2 == 0 && (uintptr_t)p.B % 4 == 0;
    L.high = W.g >= 4;
    L.bit0 = 1u << ((W.g & 3) * 8 + W.t);
    L.below0 = L.bit0 - 1;
    L.below1 = (L.bit0 << 4) - 1;

    const int32_t *row = p.tasks + task * kTaskWords;
    const int32_t kind = __ldg(row);
    int64_t b = 0, b_end = 0;
    Pack P;
    P.w = P.w_end = P.b0 = 0;
    P.stop = -1;
    P.next_stop = 0;
    P.prow[0] = P.prow[1] = -1;
    P.bad = false;
    int part = 0, parts = 1, gj = 0, gsize = 0; /* GROUP: warp gj of gsize (0: no window part) */
    if (kind < 0) {                             /* SPLIT part: all warps, one window */
        P.w = -(int64_t)kind - 1;
        part = __ldg(row + 1);
        parts = __ldg(row + 2);
        const int64_t wb = ldg64(p.window_offsets + P.w), nb = ldg64(p.window_offsets + P.w + 1) - wb;
        const int64_t pb = wb + nb * part / parts, pn = wb + nb * (part + 1) / parts - pb;
        b = pb + pn * warp / kWarps;
        b_end = pb + pn * (warp + 1) / kWarps;
    } else if (kind == 1) { /* GROUP: warp gj of gsize consecutive warps on window w */
        const int32_t w = __ldg(row + 1 + 2 * warp), jg = __ldg(row + 2 + 2 * warp);
        if (w >= 0) {
            P.w = w;
            gj = jg >> 4;
            gsize = jg & 15;
            const int64_t wb = ldg64(p.window_offsets + w), nb = ldg64(p.window_offsets + w + 1) - wb;
            b = wb + nb * gj / gsize;
            b_end = wb + nb * (gj + 1) / gsize;
        }
    } else { /* PACK: whole windows w .. w_end - 1 */
        P.w = __ldg(row + 1 + 2 * warp);
        P.w_end = __ldg(row + 2 + 2 * warp);
        b = P.w < P.w_end ? ldg64(p.window_offsets + P.w) : 0;
        b_end = P.w < P.w_end ? ldg64(p.window_offsets + P.w_end) : 0;
        while (P.w < P.w_end && ldg64(p.window_offsets + P.w + 1) == b) { /* leading empty windows */
            pdl_wait(); /* C is written only after the kernels before this one have finished */
            write_zero_window<E, S, VEC>(p, P.w, W.t, W.ncol);
            P.w++;
        }
        if (P.w < P.w_end) {
            P.b0 = b;
            P.stop = (int)(ldg64(p.window_offsets + P.w + 1) - b);
            P.next_stop = P.w + 1 < P.w_end ? (int)(ldg64(p.window_offsets + P.w + 2) - b) : 0;
            window_rows(p, P.w, W.t, P.prow);
        }
    }

    float acc[S][KM][4];
    zero(acc);
    if constexpr (STAGED) {
        /* prologue: metadata of blocks b .. b+DEPTH-1 into the ring (waited for once), block j
         * in ring slot (and stage) (j - b) % DEPTH; then the copies of blocks b .. b+DEPTH-2,
         * and one block issued and one consumed per step */
        first_meta<DEPTH>(p, W, b, b_end);
        pdl_wait(); /* everything above read the plan's own arrays; B only from here */
#pragma unroll
        for (int s = 0; s < DEPTH - 1; s++) {
            refill<E, S, DEPTH, CACHE_L1, VEC>(p, W, L, b + s, b_end, s);
            cp_commit();
        }
        int stage = 0;
        const int nblk = (int)(b_end - b);
        for (int i = 0; i < nblk; i++) {
            refill<E, S, DEPTH, CACHE_L1, VEC>(p, W, L, b + i + DEPTH - 1, b_end,
                                               stage == 0 ? DEPTH - 1 : stage - 1);
            cp_commit();
            cp_wait<DEPTH - 1>(); /* block i's copies (and metadata DEPTH blocks ahead) have landed */
            __syncwarp();         /* ... and the metadata copied by lanes 0-2 is visible to all */
            consume_block<E, S, DEPTH>(W, stage, acc);
            stage = stage + 1 == DEPTH ? 0 : stage + 1;
            after_block<E, S, VEC>(p, i, P, acc, W);
        }
    } else if (b < b_end) {
        /* F = DEPTH - 1 blocks' operands in flight.  Prologue: metadata of blocks b .. b+F-1
         * (waited for), their operands, then the metadata of the next A blocks, one cp.async
         * group each (reg_step waits group by group).  Block b + j uses ring slot j % R and
         * register set j % DEPTH; the loop is unrolled by R. */
        constexpr int F = DEPTH - 1, R = RegRing<DEPTH>::R, A = RegRing<DEPTH>::A;
        const int nblk = (int)(b_end - b);
        Ops<E, S> o[DEPTH];
        first_meta<F>(p, W, b, b_end);
        pdl_wait(); /* everything above read the plan's own arrays; B only from here */
#pragma unroll
        for (int f = 0; f < F; f++)
            if (f < nblk) load_ops<E, S, CACHE_L1, VEC>(p, L, read_meta<E>(W.sM, W.q, f), o[f]);
        __syncwarp();
#pragma unroll
        for (int a = 0; a < A; a++) {
            if (F + a < nblk) copy_meta(p, W.sM, W.lane, b + F + a, (F + a) % R);
            cp_commit();
        }
        const int32_t *mq = p.block_meta + (b + F + A) * kMetaWords + 4 * W.lane;
        for (int i = 0; i < nblk; i += R) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (i + r >= nblk) break;
                reg_step<E, S, DEPTH, CACHE_L1, VEC>(p, W, L, r, i + r, nblk, mq, o[r % DEPTH],
                                                     o[(r + F) % DEPTH], acc, P);
            }
        }
    }
    cp_wait<0>();
    pdl_wait();      /* warps with no blocks: before C, the workspace and the counters */
    if (kind == 0) { /* PACK: every window of the range was written in the loop or before it */
        if (__any_sync(0xffffffffu, P.bad))
            fix_pack_range<EF>(p.window_offsets, p.block_meta, p.values, p.perm, p.B, p.C, p.m, p.n,
                              __ldg(row + 1 + 2 * warp), P.w_end, W.col0, EL::kStep * S, W.lane, p.out_f32);
        return;
    }

    /* SPLIT and GROUP: partials to shared memory, then summed in warp order */
    __syncthreads(); /* all warps' copies have landed: the B stages can be reused */
    float *tile = reinterpret_cast<float *>(smem);
    constexpr int kCols = EL::kStep * S;
    if (kind < 0 || gsize > 0) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *dst = tile + (warp * 8 + 2 * W.t + h) * kCols + EL::kLaneCols * W.g;
#pragma unroll
            for (int s = 0; s < S; s++) {
                if constexpr (KM == 1) {
                    *reinterpret_cast<float2 *>(dst + EL::kStep * s) =
                        make_float2(acc[s][0][h], acc[s][0][2 + h]);
                } else {
#pragma unroll
                    for (int j = 0; j < KM; j += 2)
                        *reinterpret_cast<float4 *>(dst + EL::kStep * s + 2 * j) = make_float4(
                            acc[s][j][h], acc[s][j][2 + h], acc[s][j + 1][h], acc[s][j + 1][2 + h]);
                }
            }
        }
    }
    __syncthreads();
    if (kind == 1) {
        /* the group's first warp sums its gsize tiles in warp order and writes the window */
        if (gsize == 0 || gj != 0) return;
        constexpr int kLane = (8 * kCols) / 32; /* tile elements per lane */
        float v[kLane];
#pragma unroll
        for (int q = 0; q < kLane; q++) {
            const int e = W.lane + 32 * q;
            v[q] = tile[warp * 8 * kCols + e];
            for (int k = 1; k < gsize; k++)
                v[q] += tile[(warp + k) * 8 * kCols + e];
        }
        if (__any_sync(0xffffffffu, !all_finite<kLane>(v))) {
            exact_tile<EF>(p.window_offsets, p.block_meta, p.values, p.perm, p.B, p.C, p.m, p.n, P.w, W.col0,
                          kCols, W.lane, 32, p.out_f32);
            return;
        }
#pragma unroll
        for (int q = 0; q < kLane; q++) {
            const int e = W.lane + 32 * q, r = e / kCols, c = e % kCols;
            const int64_t rowi = P.w * 8 + r, col = slice * kCols + c;
            if (rowi < p.m && col < p.n) store_c<EF>(p.C, p.out_f32, ldg64(p.perm + rowi) * p.n + col, v[q]);
        }
        return;
    }
    constexpr int kPer = (8 * kCols) / kThreads; /* elements of the 8 x 32S tile per thread */
    float sum[kPer];
#pragma unroll
    for (int q = 0; q < kPer; q++) {
        const int e = threadIdx.x + q * kThreads;
        sum[q] = tile[e];
#pragma unroll
        for (int k = 1; k < kWarps; k++)
            sum[q] += tile[k * 8 * kCols + e];
    }
    if (parts > 1) {
        /* publish this part's tile; the last part to arrive sums all tiles in part order */
        const int64_t base = __ldg(row + 4), id = (int64_t)__ldg(row + 3) * slices + slice;
        float *ws = p.workspace + ((base + part) * slices + slice) * (8 * kCols);
#pragma unroll
        for (int q = 0; q < kPer; q++)
            __stcg(ws + threadIdx.x + q * kThreads, sum[q]);
        if (!last_to_arrive(p.counters + id, parts)) return;
        const float *ws0 = p.workspace + (base * slices + slice) * (8 * kCols);
#pragma unroll
        for (int q = 0; q < kPer; q++) {
            const int e = threadIdx.x + q * kThreads;
            sum[q] = __ldcg(ws0 + e);
            for (int j = 1; j < parts; j++)
                sum[q] += __ldcg(ws0 + (int64_t)j * slices * (8 * kCols) + e);
        }
        if (threadIdx.x == 0) p.counters[id] = 0; /* ready for the next launch */
    }
    if (__syncthreads_or(!all_finite<kPer>(sum))) { /* block-uniform: `last` and `parts` are */
        exact_tile<EF>(p.window_offsets, p.block_meta, p.values, p.perm, p.B, p.C, p.m, p.n, P.w, W.col0,
                      kCols, threadIdx.x, kThreads, p.out_f32);
        return;
    }
#pragma unroll
    for (int q = 0; q < kPer; q++) {
        const int e = threadIdx.x + q * kThreads, r = e / kCols, c = e % kCols;
        const int64_t rowi = P.w * 8 + r, col = slice * kCols + c;
        if (rowi < p.m && col < p.n) store_c<EF>(p.C, p.out_f32, ldg64(p.perm + rowi) * p.n + col, sum[q]);
    }
}

/* ---- Narrow widths (n <= ACC_TF32_NARROW_MAX) on CUDA cores ------------------------------------------
 * At n < 8 an MMA computes at least 8 columns (TF32: a 32-column slice) for each useful one, and the
 * Tensor-Core kernel's time hardly depends on n below 32 (H100: G3_circuit 263 us at n = 1, 255 at
 * n = 4, against cuSPARSE's 38 and 185 us; this kernel 104 and 135 us; benchmarks/NOTES.md).  This kernel
 * runs the same tasks (PACK, GROUP, SPLIT, the same workspace slots and counters, slice 0 only) with a warp's
 * lanes on blocks instead: lane 8q + r takes row r of blocks q, q + 4, q + 8, ... of the warp's range.  Lane
 * 8q + c loads B's n values of the block's column slot c, and lane 8q + r gets slot c's by a shuffle
 * and adds a x B for each stored entry (r, c) of its row in ascending c; at a window's end the four
 * quarters' sums are added by two xor shuffles (8, then 16), a fixed tree.  Operands as the Tensor-Core
 * path has them (TF32-rounded values and B, or half values and B; FP32 sums of exact products), so the
 * error bound and the integer exactness are the same; the order of the sums differs, and it is fixed
 * by the schedule alone, so the bits are deterministic.  A sum that is not finite is rewritten by
 * exact_tile, as in the Tensor-Core kernel. */
template <int E, int N> struct Narrow {
    /* lane's column-slot value of B for block `rec` (slot lane & 7), n <= N columns */
    static __device__ __forceinline__ void load_b(const acc_tf32_args &p, const int32_t *rec, int slot,
                                                  float (&x)[N]) {
        const int32_t col = __ldg(rec + (slot < 4 ? 2 * slot : 2 * (slot - 4) + 1));
#pragma unroll
        for (int j = 0; j < N; j++) {
            if (j >= p.n) {
                x[j] = 0.f;
                continue;
            }
            if (E == ACC_TF32_ELEM_TF32)
                x[j] = __uint_as_float(to_tf32(__ldg(p.B + (int64_t)col * p.n + j)));
            else
                x[j] = half_to_f32<E>(
                    __ldg(reinterpret_cast<const unsigned short *>(p.B) + (int64_t)col * p.n + j));
        }
    }

    /* acc += row r of blocks b + q, b + q + 4, ... < b_end (lane = 8 q + r), entries in ascending slot.
     * Every load of a step (the record, B, the row's values) is issued before its first product: a TF32
     * row's values (contiguous from its first) are read by column slot into v, each at its own index,
     * so no product waits for the load of the one before it. */
    static __device__ __forceinline__ void range(const acc_tf32_args &p, int64_t b, int64_t b_end, int lane,
                                                 float (&acc)[N]) {
        const int q = lane >> 3, r = lane & 7, base = lane & ~7;
        for (int64_t b0 = b; b0 < b_end; b0 += 4) { /* uniform over the warp: the shuffles need every lane */
            const int64_t blk = b0 + q;
            uint32_t bits = 0;
            float x[N], v[8];
#pragma unroll
            for (int c = 0; c < 8; c++)
                v[c] = 0.f;
            if (blk < b_end) {
                const int32_t *rec = p.block_meta + blk * kMetaWords;
                const uint64_t mask =
                    (uint64_t)(uint32_t)__ldg(rec + 8) | ((uint64_t)(uint32_t)__ldg(rec + 9) << 32);
                const int64_t voff = (int64_t)((uint64_t)(uint32_t)__ldg(rec + 10) |
                                               ((uint64_t)(uint32_t)__ldg(rec + 11) << 32));
                bits = (uint32_t)(mask >> (8 * r)) & 0xffu;
                load_b(p, rec, r, x);
                if (E == ACC_TF32_ELEM_TF32) {
                    const float *row = p.values + voff + __popcll(mask & ((1ull << (8 * r)) - 1));
#pragma unroll
                    for (int c = 0; c < 8; c++)
                        if (bits >> c & 1u) v[c] = __ldg(row + __popc(bits & ((1u << c) - 1u)));
                } else if (bits) { /* the block's dense 8 x 8 tile of halves at voff; row r is 16 bytes */
                    const uint4 tile = __ldg(reinterpret_cast<const uint4 *>(
                        reinterpret_cast<const unsigned short *>(p.values) + voff + 8 * r));
#pragma unroll
                    for (int c = 0; c < 8; c++) {
                        const uint32_t w = c < 2 ? tile.x : c < 4 ? tile.y : c < 6 ? tile.z : tile.w;
                        v[c] = half_to_f32<E>((uint16_t)(c & 1 ? w >> 16 : w & 0xffffu));
                    }
                }
            } else {
#pragma unroll
                for (int j = 0; j < N; j++)
                    x[j] = 0.f;
            }
#pragma unroll
            for (int c = 0; c < 8; c++) {
                float xc[N];
#pragma unroll
                for (int j = 0; j < N; j++)
                    xc[j] = __shfl_sync(0xffffffffu, x[j], base + c);
                if (bits >> c & 1u)
#pragma unroll
                    for (int j = 0; j < N; j++)
                        acc[j] = __fmaf_rn(v[c], xc[j], acc[j]); /* the product is exact: an add of it */
            }
        }
    }

    /* the four quarters' sums of each row, into lanes 0-7 (a fixed tree) */
    static __device__ __forceinline__ void reduce(float (&acc)[N]) {
#pragma unroll
        for (int j = 0; j < N; j++) {
            acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], 8);
            acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], 16);
        }
    }

    static __device__ __forceinline__ bool finite(const float (&acc)[N], int n) {
        bool ok = true;
#pragma unroll
        for (int j = 0; j < N; j++)
            ok &= j >= n || fabsf(acc[j]) <= 3.402823466e38f;
        return ok;
    }

    /* the original row of lane's window row (lane & 7) of window w, -1 past m: read when the window
     * starts, so that the write does not wait for it */
    static __device__ __forceinline__ int64_t dest(const acc_tf32_args &p, int64_t w, int lane) {
        const int64_t row = w * 8 + (lane & 7);
        return row < p.m ? ldg64(p.perm + row) : -1;
    }

    /* window w's rows from lanes 0-7 (the warp calls it together); orig = dest(p, w, lane) */
    static __device__ __forceinline__ void write(const acc_tf32_args &p, int64_t w, int lane,
                                                 const float (&acc)[N], int64_t orig) {
        const bool bad = lane < 8 && orig >= 0 && !finite(acc, (int)p.n);
        if (__any_sync(0xffffffffu, bad)) {
            exact_tile<E>(p.window_offsets, p.block_meta, p.values, p.perm, p.B, p.C, p.m, p.n, w, 0,
                          (int)p.n, lane, 32, p.out_f32);
            return;
        }
        if (lane < 8 && orig >= 0) {
            const int64_t at = orig * p.n;
#pragma unroll
            for (int j = 0; j < N; j++)
                if (j < p.n) store_c<E>(p.C, p.out_f32, at + j, acc[j]);
        }
    }
};

template <int E, int N> __global__ void __launch_bounds__(kThreads) narrow_kernel(const acc_tf32_args p) {
    using NR = Narrow<E, N>;
    __shared__ float tile[kWarps * 8 * N]; /* GROUP and SPLIT: each warp's 8 x N partial */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int32_t *row = p.tasks + (int64_t)blockIdx.x * kTaskWords;
    const int32_t kind = __ldg(row);
    pdl_wait(); /* B, C, the workspace and the counters only after the kernels before this one */
    float acc[N];
    if (kind == 0) { /* PACK: whole windows, one after another */
        const int64_t w0 = __ldg(row + 1 + 2 * warp), w_end = __ldg(row + 2 + 2 * warp);
        if (w0 >= w_end) return;
        /* a window's end offset is the next one's start; the end after it is read a window ahead */
        int64_t b = ldg64(p.window_offsets + w0), b_end = ldg64(p.window_offsets + w0 + 1);
        for (int64_t w = w0; w < w_end; w++) {
            const int64_t b_next = w + 1 < w_end ? ldg64(p.window_offsets + w + 2) : 0;
            const int64_t orig = NR::dest(p, w, lane);
#pragma unroll
            for (int j = 0; j < N; j++)
                acc[j] = 0.f;
            NR::range(p, b, b_end, lane, acc);
            NR::reduce(acc);
            NR::write(p, w, lane, acc, orig);
            b = b_end;
            b_end = b_next;
        }
        return;
    }
    int64_t w = -1, b = 0, b_end = 0, orig = -1;
    int part = 0, parts = 1, gj = 0, gsize = 0;
    if (kind < 0) { /* SPLIT part: the part's range cut into kWarps equal ranges */
        w = -(int64_t)kind - 1;
        part = __ldg(row + 1);
        parts = __ldg(row + 2);
        const int64_t wb = ldg64(p.window_offsets + w), nb = ldg64(p.window_offsets + w + 1) - wb;
        const int64_t pb = wb + nb * part / parts, pn = wb + nb * (part + 1) / parts - pb;
        b = pb + pn * warp / kWarps;
        b_end = pb + pn * (warp + 1) / kWarps;
    } else { /* GROUP: warp gj of gsize on window w */
        const int32_t ww = __ldg(row + 1 + 2 * warp), jg = __ldg(row + 2 + 2 * warp);
        if (ww >= 0) {
            w = ww;
            gj = jg >> 4;
            gsize = jg & 15;
            if (gj == 0) orig = NR::dest(p, w, lane); /* the group's first warp writes */
            const int64_t wb = ldg64(p.window_offsets + w), nb = ldg64(p.window_offsets + w + 1) - wb;
            b = wb + nb * gj / gsize;
            b_end = wb + nb * (gj + 1) / gsize;
        }
    }
#pragma unroll
    for (int j = 0; j < N; j++)
        acc[j] = 0.f;
    NR::range(p, b, b_end, lane, acc);
    NR::reduce(acc);
    if (lane < 8)
#pragma unroll
        for (int j = 0; j < N; j++)
            tile[(warp * 8 + lane) * N + j] = acc[j];
    __syncthreads();
    if (kind == 1) { /* the group's first warp sums its gsize partials in warp order */
        if (gsize == 0 || gj != 0) return;
        const int rl = lane & 7; /* lanes 8-31 read row rl too, and write nothing */
#pragma unroll
        for (int j = 0; j < N; j++)
            acc[j] = tile[(warp * 8 + rl) * N + j];
        for (int k = 1; k < gsize; k++)
#pragma unroll
            for (int j = 0; j < N; j++)
                acc[j] += tile[((warp + k) * 8 + rl) * N + j];
        NR::write(p, w, lane, acc, orig);
        return;
    }
    /* SPLIT: thread e < 8 N sums element e of the warps' partials in warp order */
    const int e = threadIdx.x;
    float sum = 0.f;
    if (e < 8 * N) {
        sum = tile[e];
#pragma unroll
        for (int k = 1; k < kWarps; k++)
            sum += tile[k * 8 * N + e];
    }
    if (parts > 1) { /* publish this part's partial; the last part to arrive sums them in part order */
        const int64_t base = __ldg(row + 4), id = __ldg(row + 3);
        float *ws = p.workspace + (base + part) * (8 * N);
        if (e < 8 * N) __stcg(ws + e, sum);
        if (!last_to_arrive(p.counters + id, parts)) return;
        if (e < 8 * N) {
            const float *ws0 = p.workspace + base * (8 * N);
            sum = __ldcg(ws0 + e);
            for (int j = 1; j < parts; j++)
                sum += __ldcg(ws0 + (int64_t)j * (8 * N) + e);
        }
        if (threadIdx.x == 0) p.counters[id] = 0; /* ready for the next launch */
    }
    const int r = e / N, j = e % N;
    const int64_t rowi = w * 8 + r;
    const bool live = e < 8 * N && j < p.n && rowi < p.m;
    if (__syncthreads_or(live && !(fabsf(sum) <= 3.402823466e38f))) {
        exact_tile<E>(p.window_offsets, p.block_meta, p.values, p.perm, p.B, p.C, p.m, p.n, w, 0, (int)p.n,
                      threadIdx.x, kThreads, p.out_f32);
        return;
    }
    if (live) store_c<E>(p.C, p.out_f32, ldg64(p.perm + rowi) * p.n + j, sum);
}

template <int E, int N> int launch_narrow(const acc_tf32_args &p, cudaStream_t stream) {
    static unsigned char pdl[kMaxDevices];
    void (*fn)(const acc_tf32_args) = narrow_kernel<E, N>;
    if (p.num_tasks > 0x7fffffffLL) return ACC_ERR_TOO_LARGE;
    ACC_CUDA_TRY(launch_ex(fn, dim3((unsigned)p.num_tasks), dim3(kThreads), 0, stream,
                           pdl_usable(reinterpret_cast<const void *>(fn), pdl), p));
    return ACC_SUCCESS;
}

template <int E> int dispatch_narrow(const acc_tf32_args &p, cudaStream_t s) {
    static_assert(ACC_TF32_NARROW_MAX == 4, "instantiate narrow_kernel up to ACC_TF32_NARROW_MAX columns");
    return p.n == 1   ? launch_narrow<E, 1>(p, s)
           : p.n == 2 ? launch_narrow<E, 2>(p, s)
                      : launch_narrow<E, 4>(p, s);
}

/* ---- Narrow widths on A's CSR (acc_tf32_args.csr.lanes > 0) -------------------------------------------
 * Where BitTCF's blocks are sparse and its windows short (G3_circuit: 3.8 blocks of 10 entries a window),
 * the narrow kernel spends a shuffle and a test on each of a block row's 8 slots for about one entry, and
 * a warp walks one window's chain of dependent loads at a time.  Here L = csr.lanes lanes take a row: lane
 * j adds entries j, j + L, ... of the row in CSR order, a x B with the operands the BitTCF path has (A's
 * values rounded to TF32 at upload, B here; or A's half values as floats and B's half values), the product
 * exact, four entries' loads before their products, and the L sums are added by xor shuffles
 * (L/2, ..., 1), a fixed tree.  A row of more than ACC_TF32_CSR_LONG entries goes to thread blocks
 * instead, one per part (acc_tf32_csr; their blocks before the rows' where a row has several parts, else
 * after them: hub and star ran 1.11-1.26x faster with parts first, ogbl-ddi's single-part rows of 1-2
 * thousand entries 0.88-0.95x, results/h100_narrow_vec.md): thread t adds entries t, t + kCsrThreads,
 * ... of its part, the block's sums by a fixed tree (block_sum); a row of several parts leaves each part's
 * sums in the workspace and the part that finishes last adds them in part order, by the same tree.  C is
 * written in the output format (store_c).  Deterministic, with the same error bound and integer
 * exactness; only stored entries are multiplied, so a non-finite B value reaches exactly the entries that
 * meet it, with no recomputation.  Where n == N (1, 2 or 4) and B is aligned to its rows, one vector load
 * reads an entry's row of B (ptxas, TF32 at N = 4 without long rows: 32 registers, 48 with element loads;
 * 60 when each element load had its 64-bit address live across a 4-entry step), and a plan without long
 * rows runs a variant without their code (N = 4 with element loads: 48-60 registers, 64 with it); H100,
 * kernel 1.04-1.09x at n = 1-4, results/h100_narrow_vec.md. */
constexpr int kCsrThreads = 256;

/* x = B[row, c0 .. c0 + N) as exact float operands (TF32-rounded, or the half format E's values), zeros past
 * n.  VEC: the N columns in range and aligned to N elements, so one vector load takes them (the narrow
 * kernel: n == N and c0 = 0; p.n == 1 is VEC-free) */
template <int E, int N, bool VEC>
__device__ __forceinline__ void csr_b(const acc_tf32_args &p, int64_t row, float (&x)[N], int64_t c0 = 0) {
    if constexpr (E == ACC_TF32_ELEM_TF32) {
        const float *b = p.B + row * p.n + c0;
        if constexpr (VEC && N == 4) {
            const float4 v = __ldg(reinterpret_cast<const float4 *>(b));
            x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
        } else if constexpr (VEC && N == 2) {
            const float2 v = __ldg(reinterpret_cast<const float2 *>(b));
            x[0] = v.x, x[1] = v.y;
        } else {
#pragma unroll
            for (int c = 0; c < N; c++)
                x[c] = c0 + c < p.n ? __ldg(b + c) : 0.f;
        }
#pragma unroll
        for (int c = 0; c < N; c++)
            x[c] = __uint_as_float(to_tf32(x[c]));
        return;
    }
    const unsigned short *b = reinterpret_cast<const unsigned short *>(p.B) + row * p.n + c0;
    if constexpr (VEC && N == 4) {
        const uint2 v = __ldg(reinterpret_cast<const uint2 *>(b));
        x[0] = half_to_f32<E>(v.x & 0xffff), x[1] = half_to_f32<E>(v.x >> 16);
        x[2] = half_to_f32<E>(v.y & 0xffff), x[3] = half_to_f32<E>(v.y >> 16);
    } else if constexpr (VEC && N == 2) {
        const unsigned v = __ldg(reinterpret_cast<const unsigned *>(b));
        x[0] = half_to_f32<E>(v & 0xffff), x[1] = half_to_f32<E>(v >> 16);
    } else {
#pragma unroll
        for (int c = 0; c < N; c++)
            x[c] = c0 + c < p.n ? half_to_f32<E>(__ldg(b + c)) : 0.f;
    }
}

/* acc += entries e, e + L, ..., e + (S - 1) L of A's CSR times B (n <= N columns): the S entries' loads
 * before their products, the products in entry order */
template <int E, int N, bool VEC, int S>
__device__ __forceinline__ void csr_step(const acc_tf32_args &p, int64_t e, int L, float (&acc)[N]) {
    float a[S], x[S][N];
#pragma unroll
    for (int u = 0; u < S; u++) {
        a[u] = __ldg(p.csr.values + e + u * L);
        csr_b<E, N, VEC>(p, __ldg(p.csr.cols + e + u * L), x[u]);
    }
#pragma unroll
    for (int u = 0; u < S; u++)
#pragma unroll
        for (int c = 0; c < N; c++)
            acc[c] = __fmaf_rn(a[u], x[u][c], acc[c]);
}

/* acc += entries e, e + L, ... < e1 of A's CSR times B (n <= N columns), in that order: steps of four
 * entries (a long row), then of two (a lane's last 2 or 3) and one */
template <int E, int N, bool VEC>
__device__ __forceinline__ void csr_walk(const acc_tf32_args &p, int64_t e, int64_t e1, int L,
                                         float (&acc)[N]) {
    for (; e + 3 * L < e1; e += 4 * L)
        csr_step<E, N, VEC, 4>(p, e, L, acc);
    if (e + L < e1) {
        csr_step<E, N, VEC, 2>(p, e, L, acc);
        e += 2 * L;
    }
    if (e < e1) csr_step<E, N, VEC, 1>(p, e, L, acc);
}

/* The thread block's sums of acc (every thread's), a fixed tree: each warp's by xor shuffles, then the
 * warps' in warp order; thread c < N returns column c's total (the others, garbage). */
template <int N> __device__ __forceinline__ float block_sum(float (&acc)[N]) {
    __shared__ float part[kCsrThreads / 32][N];
#pragma unroll
    for (int c = 0; c < N; c++)
        for (int o = 16; o > 0; o >>= 1)
            acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], o);
    if ((threadIdx.x & 31) == 0)
#pragma unroll
        for (int c = 0; c < N; c++)
            part[threadIdx.x >> 5][c] = acc[c];
    __syncthreads();
    float sum = 0.f;
    if (threadIdx.x < N) {
        sum = part[0][threadIdx.x];
        for (int w = 1; w < kCsrThreads / 32; w++)
            sum += part[w][threadIdx.x];
    }
    return sum;
}

/* Part q of a long row (acc_tf32_csr.long_parts): its sums to C, or with several parts to the workspace,
 * the last part to arrive adding them all. */
template <int E, int N, bool VEC>
__device__ __forceinline__ void csr_long_part(const acc_tf32_args &p, int64_t q) {
    __shared__ int last;
    float acc[N];
#pragma unroll
    for (int c = 0; c < N; c++)
        acc[c] = 0.f;
    const int64_t *rec = p.csr.long_parts + 4 * q;
    const int64_t row = ldg64(rec), e0 = ldg64(rec + 1), e1 = ldg64(rec + 2), info = ldg64(rec + 3);
    const int64_t j = info & 0xffffffffLL, parts = info >> 32;
    pdl_wait(); /* B, C and the workspace only after the kernels before this one */
    csr_walk<E, N, VEC>(p, e0 + threadIdx.x, e1, kCsrThreads, acc);
    float sum = block_sum<N>(acc);
    const bool col = threadIdx.x < N && threadIdx.x < p.n;
    if (parts == 1) {
        if (col) store_c<E>(p.C, p.out_f32, row * p.n + threadIdx.x, sum);
        return;
    }
    if (col) __stcg(p.workspace + 4 * q + threadIdx.x, sum);
    __threadfence(); /* this part's sums visible before its arrival is counted */
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(p.counters + (q - j), 1) == (int)parts - 1;
    __syncthreads();
    if (!last) return;
    __threadfence(); /* every part's sums, as they were before their arrivals */
#pragma unroll
    for (int c = 0; c < N; c++)
        acc[c] = 0.f;
    for (int64_t i = threadIdx.x; i < parts; i += kCsrThreads) /* part i's sums, parts in a fixed tree */
#pragma unroll
        for (int c = 0; c < N; c++)
            if (c < p.n) acc[c] += __ldcg(p.workspace + 4 * (q - j + i) + c);
    __syncthreads(); /* block_sum's shared memory, read above, is written again */
    sum = block_sum<N>(acc);
    if (col) store_c<E>(p.C, p.out_f32, row * p.n + threadIdx.x, sum);
    if (threadIdx.x == 0) p.counters[q - j] = 0; /* for the next launch */
}

template <int E, int N, bool PARTS, bool VEC>
__global__ void __launch_bounds__(kCsrThreads)
    csr_narrow_kernel(const acc_tf32_args p, int shift, int64_t row_blocks) {
    int64_t b = blockIdx.x; /* the rows' blocks, then the parts' (or the parts' first: csr.parts_first) */
    if (PARTS) {
        const int64_t q = p.csr.parts_first ? b : b - row_blocks;
        if (q >= 0 && q < p.csr.num_parts) { /* a long row's part: the whole thread block */
            csr_long_part<E, N, VEC>(p, q);
            return;
        }
        if (p.csr.parts_first) b -= p.csr.num_parts;
    }
    float acc[N];
#pragma unroll
    for (int c = 0; c < N; c++)
        acc[c] = 0.f;
    const int L = 1 << shift;
    const int64_t row = (b * kCsrThreads + threadIdx.x) >> shift;
    const int j = threadIdx.x & (L - 1);
    pdl_wait(); /* B and C only after the kernels before this one */
    bool mine = false;
    if (row < p.m) {
        const int64_t e0 = ldg64(p.csr.offsets + row), e1 = ldg64(p.csr.offsets + row + 1);
        mine = !PARTS || e1 - e0 <= ACC_TF32_CSR_LONG; /* else a long row's parts write it */
        if (mine) csr_walk<E, N, VEC>(p, e0 + j, e1, L, acc);
    }
    for (int o = L >> 1; o > 0; o >>= 1) /* every lane of the warp: the rows past m add zeros */
#pragma unroll
        for (int c = 0; c < N; c++)
            acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], o);
    if (mine && j == 0)
#pragma unroll
        for (int c = 0; c < N; c++)
            if (c < p.n) store_c<E>(p.C, p.out_f32, row * p.n + c, acc[c]);
}

template <int E, int N, bool PARTS, bool VEC>
int launch_csr_narrow(const acc_tf32_args &p, cudaStream_t stream) {
    static unsigned char pdl[kMaxDevices];
    void (*fn)(const acc_tf32_args, int, int64_t) = csr_narrow_kernel<E, N, PARTS, VEC>;
    const int shift = __builtin_ctz((unsigned)p.csr.lanes);
    const int64_t row_blocks = ((p.m << shift) + kCsrThreads - 1) / kCsrThreads;
    if (row_blocks + p.csr.num_parts > 0x7fffffffLL) return ACC_ERR_TOO_LARGE;
    ACC_CUDA_TRY(launch_ex(fn, dim3((unsigned)(row_blocks + p.csr.num_parts)), dim3(kCsrThreads), 0, stream,
                           pdl_usable(reinterpret_cast<const void *>(fn), pdl), p, shift, row_blocks));
    return ACC_SUCCESS;
}

/* The kernel for n <= N columns: long rows' parts or none (a variant without them keeps fewer registers:
 * FP16 at N = 4, 48 against 64), and B's rows read by vector loads where n == N and B is aligned to them */
template <int E, int N> int csr_narrow_n(const acc_tf32_args &p, cudaStream_t s) {
    const size_t row_bytes = (size_t)N * (E == ACC_TF32_ELEM_TF32 ? 4 : 2);
    const bool vec = N > 1 && p.n == N && reinterpret_cast<uintptr_t>(p.B) % row_bytes == 0;
    if (p.csr.num_parts > 0)
        return vec ? launch_csr_narrow<E, N, true, N != 1>(p, s) : launch_csr_narrow<E, N, true, false>(p, s);
    return vec ? launch_csr_narrow<E, N, false, N != 1>(p, s) : launch_csr_narrow<E, N, false, false>(p, s);
}

template <int E> int csr_narrow_for(const acc_tf32_args &p, cudaStream_t s) {
    return p.n == 1   ? csr_narrow_n<E, 1>(p, s)
           : p.n == 2 ? csr_narrow_n<E, 2>(p, s)
                      : csr_narrow_n<E, 4>(p, s);
}

int dispatch_csr_narrow(const acc_tf32_args &p, cudaStream_t s) {
    const int L = p.csr.lanes;
    if (L > 32 || (L & (L - 1)) || !p.csr.offsets || !p.csr.cols || !p.csr.values || p.csr.num_parts < 0 ||
        (p.csr.num_parts > 0 && !p.csr.long_parts))
        return ACC_ERR_INVALID_ARGUMENT;
    return p.elem == ACC_TF32_ELEM_TF32   ? csr_narrow_for<ACC_TF32_ELEM_TF32>(p, s)
           : p.elem == ACC_TF32_ELEM_FP16 ? csr_narrow_for<ACC_TF32_ELEM_FP16>(p, s)
                                          : csr_narrow_for<ACC_TF32_ELEM_BF16>(p, s);
}

/* ---- Wider widths on A's CSR (acc_tf32_args.csr.lanes > 0, n > acc_tf32_narrow_max(); every elem) -----
 * At n <= 32 the Tensor-Core kernel still computes a warp's whole 32-column slice, and where BitTCF's blocks
 * hold few entries A's CSR is the cheaper walk.  A group of G lanes takes a row and a column slice of 4G
 * columns, lane j columns 4j .. 4j + 3 of the slice (G = acc_tf32_csr_wide_lanes(n): the least power of two
 * >= n / 4, from 2 to 32; blockIdx.y the slice).  The group loads the row's entries in chunks of up to 32
 * (lane j entries base + j + G i: column and value), the next chunk's loads issued before this one's
 * products, and hands each entry to every lane by a shuffle; each lane adds a x B[column, its 4 columns]
 * over the row's entries in CSR order, the loads of four entries before their products: each element of C
 * is one FMA chain in entry order (deterministic), with the operands of the BitTCF path (A's values
 * TF32-rounded at upload and B rounded here, or the half format's exact values of both), so the same error
 * bound and integer exactness; C is written in the output format (half rounded once, or float32).  Only
 * stored entries are multiplied: a non-finite B value reaches exactly the entries that meet it.  A row of
 * more than ACC_TF32_CSR_WIDE_LONG entries is left to parts (acc_tf32_csr.long_parts, cut by the plan; their
 * groups in the first thread blocks), a group each: a one-part row is written by its part; otherwise each
 * part's sums go to workspace[(q * slices + s) * 4G ..] and the part that arrives last at counters[(q - j)
 * * slices + s] adds the row's parts in part order.  VEC: n a multiple of 4 and B's and C's rows aligned to
 * 4 elements (one 16-byte load of B per entry and lane, 8-byte for half B; one store of C), else element
 * loads and stores.  Where the plan asks for half the lanes (p.csr.lanes = G / 2;
 * accspmm._tf32.csr_wide_lane_cols), lanes of 8 columns take the same slices: half the shuffles, address
 * steps and loop steps per entry, twice the products a lane; H100, FP16 at n = 64-256 on rows of 25 and more
 * entries a row, 1.06-1.5x (benchmarks/NOTES.md, "Session of 2026-11-28, 02:48"). */
constexpr int kCsrWideThreads = 256;

/* The lane's W columns of B's rows (W = 4, or 8 where the whole slice is in range and aligned: see
 * csr_wide_g): LEAN, base = B + c0 (in B's element type; c0 a column in range, the caller clamps a lane past
 * n to column 0 and stores nothing), one 16-byte load a row per 4 floats or 8 halves (8-byte for 4 halves) at
 * base + col * n by one 32 x 32 -> 64-bit multiply, no select; else csr_b's loads of the columns below n,
 * zeros past it (inactive: all zero).  LEAN = VEC at G <= 8 (n <= 32, the widths the rule gives this kernel)
 * for 4 columns: 1.03-1.04x there in geometric mean over 34 shapes, the same bits; at G = 32 (n = 128,
 * forced) it ran 0.96x (H100, benchmarks/NOTES.md, "Session of 2026-11-27, 21:47"); always for 8 columns. */
template <int W> struct wide_vec { float v[W]; };

template <int E, int W, bool VEC, bool LEAN> struct wide_lane {
    static_assert(W == 4 || (W == 8 && VEC && LEAN), "8 columns a lane only by vector loads");
    const void *base;
    uint32_t n;
    int64_t c0;
    bool active;
    /* B[col, c0 .. c0 + W - 1] as exact float operands (TF32-rounded, or the half format E's values) */
    __device__ __forceinline__ wide_vec<W> b(const acc_tf32_args &p, int32_t col) const {
        wide_vec<W> x;
        if constexpr (LEAN) {
            const size_t at = (size_t)(uint32_t)col * n; /* columns are checked: 0 <= col < k */
            if constexpr (E == ACC_TF32_ELEM_TF32) {
                const float4 *q = reinterpret_cast<const float4 *>(static_cast<const float *>(base) + at);
#pragma unroll
                for (int h = 0; h < W / 4; h++) {
                    const float4 v = __ldg(q + h);
                    x.v[4 * h] = __uint_as_float(to_tf32(v.x));
                    x.v[4 * h + 1] = __uint_as_float(to_tf32(v.y));
                    x.v[4 * h + 2] = __uint_as_float(to_tf32(v.z));
                    x.v[4 * h + 3] = __uint_as_float(to_tf32(v.w));
                }
            } else {
                const unsigned short *q = static_cast<const unsigned short *>(base) + at;
                unsigned w[W / 2];
                if constexpr (W == 8) {
                    const uint4 v = __ldg(reinterpret_cast<const uint4 *>(q));
                    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
                } else {
                    const uint2 v = __ldg(reinterpret_cast<const uint2 *>(q));
                    w[0] = v.x, w[1] = v.y;
                }
#pragma unroll
                for (int h = 0; h < W / 2; h++)
                    x.v[2 * h] = half_to_f32<E>(w[h] & 0xffff), x.v[2 * h + 1] = half_to_f32<E>(w[h] >> 16);
            }
        } else if (!active) {
#pragma unroll
            for (int c = 0; c < W; c++)
                x.v[c] = 0.f;
        } else {
            csr_b<E, W, VEC>(p, col, x.v, c0);
        }
        return x;
    }
};

template <int E, int G, int W, bool VEC> using wide_lane_g = wide_lane<E, W, VEC, VEC && (W == 8 || G <= 8)>;

template <int E, int G, int W, bool VEC>
__device__ __forceinline__ wide_lane_g<E, G, W, VEC> make_wide_lane(const acc_tf32_args &p, int64_t c0) {
    const bool active = c0 < p.n;
    const int64_t at = VEC && !active ? 0 : c0;
    const void *base = E == ACC_TF32_ELEM_TF32
                           ? static_cast<const void *>(p.B + at)
                           : static_cast<const void *>(reinterpret_cast<const unsigned short *>(p.B) + at);
    return {base, (uint32_t)p.n, c0, active};
}

/* The group's chunk of entries: lane j holds entries base + j + G i (i < R: column, value) */
template <int G, int R> struct wide_chunk {
    int32_t c[R];
    float a[R];
    __device__ __forceinline__ void load(const acc_tf32_args &p, int64_t base, int64_t e1, int j) {
#pragma unroll
        for (int i = 0; i < R; i++) {
            const int64_t e = base + j + G * i;
            c[i] = e < e1 ? __ldg(p.csr.cols + e) : 0;
            a[i] = e < e1 ? __ldg(p.csr.values + e) : 0.f;
        }
    }
};

/* acc += the chunk's entries f .. f + S - 1 (entry f + u in lane (f + u) % G, slot (f + u) / G): S shuffles
 * and loads, then the products in entry order */
template <int E, int G, int R, int W, bool VEC, int S>
__device__ __forceinline__ void wide_step(const acc_tf32_args &p, unsigned gmask, const wide_chunk<G, R> &ch,
                                          int f, const wide_lane_g<E, G, W, VEC> &lane, wide_vec<W> &acc) {
    float a[S];
    wide_vec<W> x[S];
#pragma unroll
    for (int u = 0; u < S; u++) {
        const int32_t c = __shfl_sync(gmask, ch.c[(f + u) / G], (f + u) % G, G);
        a[u] = __shfl_sync(gmask, ch.a[(f + u) / G], (f + u) % G, G);
        x[u] = lane.b(p, c);
    }
#pragma unroll
    for (int u = 0; u < S; u++)
#pragma unroll
        for (int c = 0; c < W; c++)
            acc.v[c] = __fmaf_rn(a[u], x[u].v[c], acc.v[c]);
}

/* acc = the sum over entries e0 .. e1 - 1 of A's CSR of a x B[column, c0 .. c0 + W - 1], in entry order;
 * every lane of the group (gmask) calls it with the same range, lane j < G.  Chunks of G R entries, the next
 * chunk's loads issued before this one's products; steps of 4 entries, then single ones. */
template <int E, int G, int W, bool VEC>
__device__ __forceinline__ wide_vec<W> wide_walk(const acc_tf32_args &p, unsigned gmask, int j, int64_t e0,
                                                 int64_t e1, const wide_lane_g<E, G, W, VEC> &lane) {
    constexpr int R = 32 / G < 8 ? 32 / G : 8, CH = G * R, S = 4;
    wide_vec<W> acc;
#pragma unroll
    for (int c = 0; c < W; c++)
        acc.v[c] = 0.f;
    wide_chunk<G, R> cur, next;
    cur.load(p, e0, e1, j);
    for (int64_t base = e0; base < e1; base += CH) {
        if (base + CH < e1) next.load(p, base + CH, e1, j);
        const int cnt = (int)(e1 - base < CH ? e1 - base : CH);
#pragma unroll
        for (int f = 0; f < CH; f += S) {
            if (f >= cnt) break;
            if (f + S <= cnt) {
                wide_step<E, G, R, W, VEC, S>(p, gmask, cur, f, lane, acc);
            } else {
#pragma unroll
                for (int u = 0; u < S - 1; u++)
                    if (f + u < cnt) wide_step<E, G, R, W, VEC, 1>(p, gmask, cur, f + u, lane, acc);
            }
        }
        cur = next;
    }
    return acc;
}

/* C[row, c0 .. c0 + W - 1] = v (the columns below n) in the output format: 8- or 16-byte stores (VEC), else
 * store_c's element by element */
template <int E, int W, bool VEC>
__device__ __forceinline__ void wide_store(const acc_tf32_args &p, int64_t row, int64_t c0,
                                           const wide_vec<W> &v) {
    const int64_t at = row * p.n + c0;
    if constexpr (!VEC) {
#pragma unroll
        for (int c = 0; c < W; c++)
            if (c0 + c < p.n) store_c<E>(p.C, p.out_f32, at + c, v.v[c]);
    } else if (E != ACC_TF32_ELEM_TF32 && !p.out_f32) {
        unsigned h[W / 2];
#pragma unroll
        for (int c = 0; c < W / 2; c++)
            h[c] = to_half<E>(v.v[2 * c]) | to_half<E>(v.v[2 * c + 1]) << 16;
        unsigned short *q = reinterpret_cast<unsigned short *>(p.C) + at;
        if constexpr (W == 8)
            __stcs(reinterpret_cast<uint4 *>(q), make_uint4(h[0], h[1], h[2], h[3]));
        else
            __stcs(reinterpret_cast<uint2 *>(q), make_uint2(h[0], h[1]));
    } else {
#pragma unroll
        for (int c = 0; c < W; c += 4)
            __stcs(reinterpret_cast<float4 *>(p.C + at + c),
                   make_float4(v.v[c], v.v[c + 1], v.v[c + 2], v.v[c + 3]));
    }
}

/* W floats of a part's sums in the workspace at q (16-byte aligned), written by another thread block */
template <int W> __device__ __forceinline__ wide_vec<W> wide_ws_load(const float *q) {
    wide_vec<W> x;
#pragma unroll
    for (int c = 0; c < W; c += 4) {
        const float4 v = __ldcg(reinterpret_cast<const float4 *>(q + c));
        x.v[c] = v.x, x.v[c + 1] = v.y, x.v[c + 2] = v.z, x.v[c + 3] = v.w;
    }
    return x;
}

/* G lanes a row, W columns a lane: column slice s covers columns s W G .. (s + 1) W G - 1 */
template <int E, int G, int W, bool VEC, bool PARTS>
__global__ void __launch_bounds__(kCsrWideThreads)
    csr_wide_kernel(const acc_tf32_args p, int64_t part_blocks) {
    constexpr int kGroups = kCsrWideThreads / G;
    const int j = threadIdx.x % G;
    const unsigned gmask = G == 32 ? 0xffffffffu : ((1u << G) - 1) << (threadIdx.x & 31 & ~(G - 1));
    const int64_t slices = gridDim.y, s = blockIdx.y, c0 = s * W * G + W * j;
    const wide_lane_g<E, G, W, VEC> lane = make_wide_lane<E, G, W, VEC>(p, c0);
    const bool active = lane.active;
    int64_t g = (int64_t)blockIdx.x * kGroups + threadIdx.x / G;
    if (PARTS && (int64_t)blockIdx.x < part_blocks) { /* a long row's part */
        if (g >= p.csr.num_parts) return;
        const int64_t *rec = p.csr.long_parts + 4 * g;
        const int64_t row = ldg64(rec), e0 = ldg64(rec + 1), e1 = ldg64(rec + 2), info = ldg64(rec + 3);
        const int64_t jp = info & 0xffffffffLL, parts = info >> 32;
        pdl_wait(); /* B, C and the workspace only after the kernels before this one */
        wide_vec<W> acc = wide_walk<E, G, W, VEC>(p, gmask, j, e0, e1, lane);
        if (parts == 1) {
            if (active) wide_store<E, W, VEC>(p, row, c0, acc);
            return;
        }
        const int64_t first = g - jp, width = slices * W * G;
        float4 *ws = reinterpret_cast<float4 *>(p.workspace + g * width + c0);
#pragma unroll
        for (int c = 0; c < W; c += 4)
            __stcg(ws + c / 4, make_float4(acc.v[c], acc.v[c + 1], acc.v[c + 2], acc.v[c + 3]));
        __threadfence(); /* this part's sums visible before its arrival is counted */
        __syncwarp(gmask);
        int last = 0;
        if (j == 0) last = atomicAdd(p.counters + first * slices + s, 1) == (int)parts - 1;
        last = __shfl_sync(gmask, last, 0, G);
        if (!last) return;
        __threadfence(); /* every part's sums, as they were before their arrivals */
        const float *ws0 = p.workspace + first * width + c0;
        acc = wide_ws_load<W>(ws0);
        for (int64_t i = 1; i < parts; i++) { /* in part order */
            const wide_vec<W> v = wide_ws_load<W>(ws0 + i * width);
#pragma unroll
            for (int c = 0; c < W; c++)
                acc.v[c] += v.v[c];
        }
        if (active) wide_store<E, W, VEC>(p, row, c0, acc);
        if (j == 0) p.counters[first * slices + s] = 0; /* for the next launch */
        return;
    }
    const int64_t row = g - (PARTS ? part_blocks * kGroups : 0);
    if (row >= p.m) return; /* a whole group: rows are per group */
    const int64_t e0 = ldg64(p.csr.offsets + row), e1 = ldg64(p.csr.offsets + row + 1);
    if (PARTS && e1 - e0 > ACC_TF32_CSR_WIDE_LONG) return; /* its parts write it */
    pdl_wait(); /* B and C only after the kernels before this one */
    const wide_vec<W> acc = wide_walk<E, G, W, VEC>(p, gmask, j, e0, e1, lane);
    if (active) wide_store<E, W, VEC>(p, row, c0, acc);
}

template <int E, int G, int W, bool VEC, bool PARTS>
int launch_csr_wide(const acc_tf32_args &p, cudaStream_t stream) {
    static unsigned char pdl[kMaxDevices];
    void (*fn)(const acc_tf32_args, int64_t) = csr_wide_kernel<E, G, W, VEC, PARTS>;
    constexpr int64_t kGroups = kCsrWideThreads / G;
    const int64_t part_blocks = PARTS ? (p.csr.num_parts + kGroups - 1) / kGroups : 0;
    const int64_t blocks = part_blocks + (p.m + kGroups - 1) / kGroups, slices = (p.n + W * G - 1) / (W * G);
    if (blocks > 0x7fffffffLL || slices > 65535) return ACC_ERR_TOO_LARGE;
    ACC_CUDA_TRY(launch_ex(fn, dim3((unsigned)blocks, (unsigned)slices), dim3(kCsrWideThreads), 0, stream,
                           pdl_usable(reinterpret_cast<const void *>(fn), pdl), p, part_blocks));
    return ACC_SUCCESS;
}

template <int E, int G, int W, bool VEC> int csr_wide_parts(const acc_tf32_args &p, cudaStream_t s) {
    return p.csr.num_parts > 0 ? launch_csr_wide<E, G, W, VEC, true>(p, s)
                               : launch_csr_wide<E, G, W, VEC, false>(p, s);
}

/* G = acc_tf32_csr_wide_lanes(n) lanes a row of 4 columns each; where the plan asks for G / 2 lanes
 * (p.csr.lanes, at G >= 4), n is a multiple of 8 and B's and C's rows are 16-byte aligned, G / 2 lanes of 8
 * columns instead (the same column slices and workspace; otherwise the G lanes of 4).  VEC: n a multiple of 4
 * and B's and C's rows aligned to 4 of their elements */
template <int E, int G> int csr_wide_g(const acc_tf32_args &p, cudaStream_t s) {
    const uintptr_t b_align = E == ACC_TF32_ELEM_TF32 ? 16 : 8,
                    c_align = E == ACC_TF32_ELEM_TF32 || p.out_f32 ? 16 : 8;
    const uintptr_t b = reinterpret_cast<uintptr_t>(p.B), c = reinterpret_cast<uintptr_t>(p.C);
    if constexpr (G >= 4)
        if (2 * p.csr.lanes == G && p.n % 8 == 0 && b % 16 == 0 && c % 16 == 0)
            return csr_wide_parts<E, G / 2, 8, true>(p, s);
    const bool vec = p.n % 4 == 0 && b % b_align == 0 && c % c_align == 0;
    return vec ? csr_wide_parts<E, G, 4, true>(p, s) : csr_wide_parts<E, G, 4, false>(p, s);
}

template <int E> int csr_wide_e(const acc_tf32_args &p, cudaStream_t s) {
    switch (acc_tf32_csr_wide_lanes(p.n)) {
    case 2:
        return csr_wide_g<E, 2>(p, s);
    case 4:
        return csr_wide_g<E, 4>(p, s);
    case 8:
        return csr_wide_g<E, 8>(p, s);
    case 16:
        return csr_wide_g<E, 16>(p, s);
    default:
        return csr_wide_g<E, 32>(p, s);
    }
}

extern "C" int acc_tf32_csr_wide_lanes(int64_t n) {
    int g = 2;
    while (g < 32 && 4 * g < n)
        g *= 2;
    return g;
}

int dispatch_csr_wide(const acc_tf32_args &p, cudaStream_t s) {
    /* the caller sized the parts' workspace for acc_tf32_csr_wide_lanes(n) lanes of 4 columns
     * (accspmm._tf32.csr_wide_lanes), the same columns as half as many lanes of 8 */
    const int lanes = acc_tf32_csr_wide_lanes(p.n);
    if ((p.csr.lanes != lanes && (lanes < 4 || 2 * p.csr.lanes != lanes)) || !p.csr.offsets || !p.csr.cols ||
        !p.csr.values || p.csr.num_parts < 0 || (p.csr.num_parts > 0 && (!p.csr.long_parts || !p.counters)))
        return ACC_ERR_INVALID_ARGUMENT;
    return p.elem == ACC_TF32_ELEM_TF32   ? csr_wide_e<ACC_TF32_ELEM_TF32>(p, s)
           : p.elem == ACC_TF32_ELEM_FP16 ? csr_wide_e<ACC_TF32_ELEM_FP16>(p, s)
                                          : csr_wide_e<ACC_TF32_ELEM_BF16>(p, s);
}

__global__ void round_values_kernel(float *v, int64_t count) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        v[i] = round_tf32(v[i]);
}

typedef void (*kernel_fn)(const acc_tf32_args, int, int);

template <int E, int S, int DEPTH, bool CACHE_L1, int VEC, bool STAGED>
int launch(const acc_tf32_args &p, int slice_major, cudaStream_t stream) {
    static unsigned char prepared[kMaxDevices], pdl[kMaxDevices];
    constexpr int bytes = Smem<E, S, DEPTH, STAGED>::kBytes;
    kernel_fn fn = tf32_spmm_kernel<E, S, DEPTH, CACHE_L1, VEC, STAGED>;
    const int st = raise_smem_limit(reinterpret_cast<const void *>(fn), bytes, prepared);
    if (st) return st;
    constexpr int kSlice = Elem<E>::kStep * S;
    const int64_t slices = (p.n + kSlice - 1) / kSlice;
    const int64_t blocks = p.num_tasks * slices;
    if (blocks > 0x7fffffffLL) return ACC_ERR_TOO_LARGE;
    ACC_CUDA_TRY(launch_ex(fn, dim3((unsigned)blocks), dim3(kThreads), bytes, stream,
                           pdl_usable(reinterpret_cast<const void *>(fn), pdl), p, (int)slices, slice_major));
    return ACC_SUCCESS;
}

template <int S, int DEPTH, bool STAGED>
int dispatch_cache(const acc_tf32_args &p, const acc_tf32_variant &v, int vec, cudaStream_t s) {
    constexpr int T = ACC_TF32_ELEM_TF32;
    if (v.cache_l1)
        return vec == 1   ? launch<T, S, DEPTH, true, 1, STAGED>(p, v.slice_major, s)
               : vec == 2 ? launch<T, S, DEPTH, true, 2, STAGED>(p, v.slice_major, s)
                          : launch<T, S, DEPTH, true, 0, STAGED>(p, v.slice_major, s);
    return vec == 1   ? launch<T, S, DEPTH, false, 1, STAGED>(p, v.slice_major, s)
           : vec == 2 ? launch<T, S, DEPTH, false, 2, STAGED>(p, v.slice_major, s)
                      : launch<T, S, DEPTH, false, 0, STAGED>(p, v.slice_major, s);
}

/* Narrow steps (slice_s = 0) of format E: the register pipeline at depth 2 or 3, vec 1 or 2 (the callers
 * check); L2-only loads for TF32 (half formats take cache_l1 = 1, checked by acc_tf32_spmm). */
template <int E, int DEPTH, bool CACHE_L1>
int launch_steps(const acc_tf32_args &p, const acc_tf32_variant &v, int vec, cudaStream_t s) {
    constexpr int N = E | kNarrowStep;
    return vec == 1 ? launch<N, 1, DEPTH, CACHE_L1, 1, false>(p, v.slice_major, s)
                    : launch<N, 1, DEPTH, CACHE_L1, 2, false>(p, v.slice_major, s);
}

template <int E>
int dispatch_steps(const acc_tf32_args &p, const acc_tf32_variant &v, int vec, cudaStream_t s) {
    if constexpr (E == ACC_TF32_ELEM_TF32) {
        if (!v.cache_l1)
            return v.depth == 2 ? launch_steps<E, 2, false>(p, v, vec, s)
                                : launch_steps<E, 3, false>(p, v, vec, s);
    }
    return v.depth == 2 ? launch_steps<E, 2, true>(p, v, vec, s) : launch_steps<E, 3, true>(p, v, vec, s);
}

template <bool STAGED>
int dispatch(const acc_tf32_args &p, const acc_tf32_variant &v, int vec, cudaStream_t s) {
    switch (v.slice_s * 10 + v.depth) {
    case 12:
        return dispatch_cache<1, 2, STAGED>(p, v, vec, s);
    case 13:
        return dispatch_cache<1, 3, STAGED>(p, v, vec, s);
    case 14:
        return dispatch_cache<1, 4, STAGED>(p, v, vec, s);
    case 22:
        return dispatch_cache<2, 2, STAGED>(p, v, vec, s);
    case 23:
        return dispatch_cache<2, 3, STAGED>(p, v, vec, s);
    default:
        return dispatch_cache<2, 4, STAGED>(p, v, vec, s);
    }
}

/* Half formats: cache_l1 = 1, depth 2 or 3 (checked by the caller).  `vec`: 1, every slice full
 * (16-byte loads and stores, no column tests); 2, n a multiple of 8 and B, C 16-byte aligned (a
 * lane's 8 columns are all in range or none is: 16-byte loads and stores under a predicate);
 * 0, the element path (n > 8 not a multiple of 8; narrower n is padded, see half_padded), which
 * runs the register pipeline at depth 3 with 64-column slices whatever the variant says (cp.async
 * copies 4 bytes at least; at S = 2, or depth 2, its predicated element loads and stores spill
 * 1.1-2.4 KB of registers).  S never changes a result bit, and the host sizes the split counters
 * for 64-column slices. */
template <int E, int S, int DEPTH>
int dispatch_half_vec(const acc_tf32_args &p, const acc_tf32_variant &v, int vec, cudaStream_t s) {
    if (vec == 0) return launch<E, 1, 3, true, 0, false>(p, v.slice_major, s); /* depth 2 spills 1.2 KB */
    if (vec == 2)
        return v.staged ? launch<E, S, DEPTH, true, 2, true>(p, v.slice_major, s)
                        : launch<E, S, DEPTH, true, 2, false>(p, v.slice_major, s);
    return v.staged ? launch<E, S, DEPTH, true, 1, true>(p, v.slice_major, s)
                    : launch<E, S, DEPTH, true, 1, false>(p, v.slice_major, s);
}

template <int E>
int dispatch_half(const acc_tf32_args &p, const acc_tf32_variant &v, int vec, cudaStream_t s) {
    if (v.slice_s == 0 && vec) return dispatch_steps<E>(p, v, vec, s); /* 32-column steps */
    switch ((vec ? v.slice_s : 1) * 10 + v.depth) {
    case 12:
        return dispatch_half_vec<E, 1, 2>(p, v, vec, s);
    case 13:
        return dispatch_half_vec<E, 1, 3>(p, v, vec, s);
    case 22:
        return dispatch_half_vec<E, 2, 2>(p, v, vec, s);
    default:
        return dispatch_half_vec<E, 2, 3>(p, v, vec, s);
    }
}

/* Half formats at n < 8, or with B or C not 16-byte aligned: B copied into n8 = ceil(n / 8) * 8
 * zero-padded columns, the product computed there on the 16-byte path, and its n columns copied
 * into C.  One buffer for both copies from the library's pool, in the stream's order, freed after
 * the second copy (the pool keeps freed memory: no mapping per call).  The padded columns are zeros
 * and are dropped, so every result bit is the 16-byte path's.  At n < 8 the element path loads a
 * 64-column step with predicated 2-byte loads for a few columns, 2x the padded path's time on
 * large matrices (H100, benchmarks/half_widths.py); at wider odd n the two copies of B and C cost
 * about what the element path loses, so it stays.  The split workspace is sized for 64-column
 * slices, which n8 never adds.  Where the pool cannot hold the copies (ACC_ERR_DEVICE_MEMORY), the
 * caller takes the element path instead. */
int half_padded(const acc_tf32_args &p, const acc_tf32_variant &v, cudaStream_t s) {
    const int64_t n8 = (p.n + 7) / 8 * 8;
    return with_padded_copies(p.B, p.C, p.m, p.k, p.n, n8, p.out_f32 ? 4 : 2, s,
                              [&](const void *B8, void *C8) {
                                  acc_tf32_args q = p;
                                  q.B = static_cast<const float *>(B8);
                                  q.C = static_cast<float *>(C8);
                                  q.n = n8;
                                  return acc_tf32_spmm(&q, &v, s);
                              });
}

bool variant_ok(const acc_tf32_variant *v) {
    return v && (v->slice_s >= 0 && v->slice_s <= 2) && (v->depth >= 2 && v->depth <= 4) &&
           (v->cache_l1 == 0 || v->cache_l1 == 1) && (v->slice_major == 0 || v->slice_major == 1) &&
           (v->staged == 0 || v->staged == 1);
}

template <bool STAGED> int shared_bytes(int slice_s, int depth) {
    constexpr int T = ACC_TF32_ELEM_TF32;
    static const int bytes[2][3] = {
        {Smem<T, 1, 2, STAGED>::kBytes, Smem<T, 1, 3, STAGED>::kBytes, Smem<T, 1, 4, STAGED>::kBytes},
        {Smem<T, 2, 2, STAGED>::kBytes, Smem<T, 2, 3, STAGED>::kBytes, Smem<T, 2, 4, STAGED>::kBytes}};
    return bytes[slice_s - 1][depth - 2];
}

} // namespace

extern "C" int acc_tf32_shared_bytes(const acc_tf32_variant *v) {
    if (!variant_ok(v)) return -1;
    const int s = v->slice_s ? v->slice_s : 1; /* narrow steps: at most S = 1 bytes */
    return v->staged ? shared_bytes<true>(s, v->depth) : shared_bytes<false>(s, v->depth);
}

extern "C" int acc_tf32_round_values(float *values, int64_t count, void *stream) {
    if (count < 0 || (count > 0 && !values)) return ACC_ERR_INVALID_ARGUMENT;
    if (count == 0) return ACC_SUCCESS;
    const int64_t blocks = std::min<int64_t>((count + 255) / 256, 4096);
    round_values_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(values, count);
    return acc_cuda_status(cudaGetLastError(), "round_values_kernel");
}

extern "C" int acc_tf32_narrow_max(void) {
    static const int max = [] {
        const char *e = std::getenv("ACCSPMM_NARROW_MAX");
        if (!e || !*e) return ACC_TF32_NARROW_MAX;
        char *end = nullptr;
        const long v = std::strtol(e, &end, 10);
        return *end || v < 0 || v > ACC_TF32_NARROW_MAX ? ACC_TF32_NARROW_MAX : (int)v;
    }();
    return max;
}

extern "C" int acc_tf32_spmm(const acc_tf32_args *args, const acc_tf32_variant *variant, void *stream_ptr) {
    if (!args || !variant_ok(variant)) return ACC_ERR_INVALID_ARGUMENT;
    const acc_tf32_args &p = *args;
    const cudaStream_t stream = (cudaStream_t)stream_ptr;
    if (p.m < 0 || p.n < 0 || p.num_windows != (p.m + 7) / 8 || p.num_tasks < 0)
        return ACC_ERR_INVALID_ARGUMENT;
    if (p.num_windows > 0x7fffffffLL || p.n >= (1LL << 30)) return ACC_ERR_TOO_LARGE;
    if (p.m == 0 || p.n == 0) return ACC_SUCCESS;
    if ((p.workspace == NULL) != (p.counters == NULL)) return ACC_ERR_INVALID_ARGUMENT;
    if (p.elem < ACC_TF32_ELEM_TF32 || p.elem > ACC_TF32_ELEM_BF16 || (p.out_f32 != 0 && p.out_f32 != 1))
        return ACC_ERR_INVALID_ARGUMENT;
    if (p.n <= acc_tf32_narrow_max() && p.csr.lanes > 0) { /* A's CSR: no tasks; the long parts' workspace */
        if (!p.C || !p.B || (p.csr.num_parts > 0 && !p.workspace)) return ACC_ERR_INVALID_ARGUMENT;
        return dispatch_csr_narrow(p, stream);
    }
    if (p.csr.lanes > 0) { /* wide widths on A's CSR: no tasks; the long rows' parts' workspace */
        if (!p.C || !p.B || (p.csr.num_parts > 0 && !p.workspace)) return ACC_ERR_INVALID_ARGUMENT;
        return dispatch_csr_wide(p, stream);
    }
    if (!p.C || !p.B || !p.perm || !p.window_offsets || !p.block_meta || !p.tasks || !p.values ||
        p.num_tasks == 0)
        return ACC_ERR_INVALID_ARGUMENT;
    if (p.elem != ACC_TF32_ELEM_TF32 && (variant->cache_l1 != 1 || variant->depth > 3))
        return ACC_ERR_UNSUPPORTED;
    if (variant->slice_s == 0 && (variant->staged || variant->depth > 3)) /* narrow steps: registers */
        return ACC_ERR_UNSUPPORTED;
    if (p.n <= acc_tf32_narrow_max()) /* CUDA cores (narrow_kernel); the variant has no part in it */
        return p.elem == ACC_TF32_ELEM_TF32   ? dispatch_narrow<ACC_TF32_ELEM_TF32>(p, stream)
               : p.elem == ACC_TF32_ELEM_FP16 ? dispatch_narrow<ACC_TF32_ELEM_FP16>(p, stream)
                                              : dispatch_narrow<ACC_TF32_ELEM_BF16>(p, stream);
    /* the 16-byte path: every column slice full (no column tests in the loop), B and C aligned */
    const bool aligned = (uintptr_t)p.B % 16 == 0 && (uintptr_t)p.C % 16 == 0;
    if (p.elem != ACC_TF32_ELEM_TF32) {
        if (!aligned || p.n < 8) {
            const int st = half_padded(p, *variant, stream);
            if (st != ACC_ERR_DEVICE_MEMORY) return st; /* no room for the copies: the element path */
        }
        /* S = 1 where the variant's slice is not full; the 16-byte modes (see dispatch_half_vec; 32-column
         * steps: vec 1 where n is a multiple of 32) */
        acc_tf32_variant v = *variant;
        if (v.slice_s == 2 && p.n % 128 != 0) v.slice_s = 1;
        const int full = v.slice_s == 0 ? 32 : 64;
        const int hvec = !aligned || p.n % 8 != 0 ? 0 : p.n % full == 0 ? 1 : 2;
        return p.elem == ACC_TF32_ELEM_FP16 ? dispatch_half<ACC_TF32_ELEM_FP16>(p, v, hvec, stream)
                                            : dispatch_half<ACC_TF32_ELEM_BF16>(p, v, hvec, stream);
    }
    /* TF32: 1, every slice full; 2, n a multiple of 4 (a lane's 4 columns all in range or none);
     * 0, the element path (narrow steps: S = 1's) */
    const int full = variant->slice_s ? 32 * variant->slice_s : 16;
    const int vec = !aligned ? 0 : p.n % full == 0 ? 1 : p.n % 4 == 0 ? 2 : 0;
    if (variant->slice_s == 0) {
        if (vec) return dispatch_steps<ACC_TF32_ELEM_TF32>(p, *variant, vec, stream);
        acc_tf32_variant v = *variant;
        v.slice_s = 1;
        return dispatch<false>(p, v, vec, stream);
    }
    return variant->staged ? dispatch<true>(p, *variant, vec, stream)
                           : dispatch<false>(p, *variant, vec, stream);
}

extern "C" int acc_tf32_spmm_ordered(const acc_tf32_args *args, const acc_tf32_variant *variant,
                                     void *stream_ptr, size_t workspace_floats, size_t counters) {
    if (!args || workspace_floats == 0 || counters == 0) return ACC_ERR_INVALID_ARGUMENT;
    const cudaStream_t s = (cudaStream_t)stream_ptr;
    acc_tf32_args a = *args;
    void *ws = nullptr, *cnt = nullptr;
    ACC_CUDA_TRY(cudaMallocAsync(&ws, workspace_floats * sizeof(float), s));
    int st = acc_cuda_status(cudaMallocAsync(&cnt, counters * sizeof(int32_t), s), "cudaMallocAsync");
    if (!st) st = acc_cuda_status(cudaMemsetAsync(cnt, 0, counters * sizeof(int32_t), s), "cudaMemsetAsync");
    if (!st) {
        a.workspace = (float *)ws;
        a.counters = (int32_t *)cnt;
        st = acc_tf32_spmm(&a, variant, stream_ptr);
    }
    /* freed in stream order after the launch, whatever happened (a failed step leaves nothing behind) */
    const int st_ws = acc_cuda_status(cudaFreeAsync(ws, s), "cudaFreeAsync");
    const int st_cnt = cnt ? acc_cuda_status(cudaFreeAsync(cnt, s), "cudaFreeAsync") : ACC_SUCCESS;
    return st ? st : st_ws ? st_ws : st_cnt;
}
