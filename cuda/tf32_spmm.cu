/*
 * tf32_spmm.cu -- C = A @ B on Tensor Cores from BitTCF, TF32 in, FP32 accumulate.
 *
 * Algorithm (Acc-SpMM's swapped MMA).  One warp computes one work item x one slice of
 * 32*S columns of B/C.  A work item is a list of segments; a segment is a run of TC
 * blocks of one row window.  Without load balancing every item is one whole window.
 * For each TC block the warp issues 2*S `mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32`:
 *   MMA "A" (16x8, row) = B^T: 16 columns of B x the block's 8 compacted columns,
 *   MMA "B" (8x8, col)  = A_block^T: the 8x8 TC block itself,
 *   D (16x8)            = C^T: 16 columns x the window's 8 rows.
 * So the sparse 8x8 block is the small operand and B the large one; no zero-padding
 * of A to 16 rows is needed (the reason Acc-SpMM swaps the operands).
 *
 * Register layout (lane = 4*g + t, g = groupID 0..7, t = threadID_in_group 0..3).
 * The MMA's row index is only a label for a column of B, so it is remapped to make
 * every B access a 16-byte vector: lane (g, t) loads float4 B[col_t][n0+4g .. 4g+3]
 * and B[col_{t+4}][same], which are exactly the A-fragments of two MMAs (rows g and
 * g+8 <-> columns 4g, 4g+1 for the first, 4g+2, 4g+3 for the second).  The results
 * land so that lane (g, t) owns C[row 2t][n0+4g .. +3] and C[row 2t+1][same]: two
 * float4 stores.  The block operand is b0 = A_block[g][t], b1 = A_block[g][t+4],
 * decoded straight from the 64-bit mask: bit r*8+c set -> value at
 * values[offset + popcount(mask & ((1 << bit) - 1))].
 *
 * Pipeline (per warp, in registers): while block i's MMAs run, block i+1's values
 * and B rows are already in flight and block i+2's metadata (mask, value offset,
 * column ids) is being fetched, so the dependent chain column id -> B row -> MMA
 * never stalls the warp on one block.  No shared memory: every datum is used by
 * exactly one lane, so staging would add a copy without adding reuse; see
 * benchmarks/NOTES.md for what was measured.
 *
 * Cache operators: B and the format arrays are read through the read-only path
 * (ld.global.nc: cached in L1 and L2, B rows are re-read by neighbouring windows);
 * C is written with st.global.cs (streaming, evict-first: never read again here).
 *
 * Inputs: B and the block values must already be TF32-rounded or plain FP32 (B is
 * rounded here with cvt.rna.tf32.f32: round to nearest, ties away; block values are
 * rounded once on the host at upload).
 *
 * Write-back: window row r goes to C[perm[8w + r]]; rows >= m are skipped.  A
 * segment with slot >= 0 (a split window) writes its 8 x n partial to
 * workspace[slot] instead; tf32_reduce then sums each window's slots in a fixed
 * order (deterministic result, no atomics).
 *
 * Limits: n >= 1 (tails handled with scalar predicated accesses when n % 4 != 0);
 * k <= 2^31-1; m*n and nnz fit in int64.
 */
#include <cstdint>

#include "acc_cuda_internal.h"
#include "tf32_spmm.h"

namespace {

constexpr int kWarpsPerBlock = 4;

struct Meta {
    uint64_t mask;
    int64_t voff;
    int col0, col1;  // compacted columns t and t+4 (ACC_PAD_COL = padding)
};

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ Meta load_meta(const acc_tf32_args &p, int64_t b, int t) {
    Meta m;
    m.mask = __ldg(reinterpret_cast<const unsigned long long *>(p.block_mask) + b);
    m.voff = __ldg(reinterpret_cast<const long long *>(p.block_value_offsets) + b);
    m.col0 = __ldg(p.block_cols + b * 8 + t);
    m.col1 = __ldg(p.block_cols + b * 8 + t + 4);
    return m;
}

/* The two block values of lane (g, t): A_block[g][t] and A_block[g][t+4]. */
__device__ __forceinline__ void load_avals(const acc_tf32_args &p, const Meta &m, int g, int t,
                                           uint32_t &b0, uint32_t &b1) {
    const int bit0 = g * 8 + t, bit1 = bit0 + 4;
    const uint64_t below0 = m.mask & ((1ull << bit0) - 1);
    const bool has0 = (m.mask >> bit0) & 1, has1 = (m.mask >> bit1) & 1;
    const int off0 = __popcll(below0);
    const int off1 = __popcll(m.mask & ((1ull << bit1) - 1));
    b0 = has0 ? __float_as_uint(__ldg(p.values + m.voff + off0)) : 0u;
    b1 = has1 ? __float_as_uint(__ldg(p.values + m.voff + off1)) : 0u;
}

/* B fragment: S float4 per compacted column (t and t+4). VEC: n % 4 == 0 and aligned. */
template <int S, bool VEC>
__device__ __forceinline__ void load_bfrag(const acc_tf32_args &p, const Meta &m, int64_t ncol,
                                           float4 (&f0)[S], float4 (&f1)[S]) {
#pragma unroll
    for (int s = 0; s < S; s++) {
        const int64_t c = ncol + 32 * s;
        f0[s] = f1[s] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (VEC) {
            if (c < p.n) {
                if (m.col0 >= 0) f0[s] = __ldg(reinterpret_cast<const float4 *>(p.B + (int64_t)m.col0 * p.n + c));
                if (m.col1 >= 0) f1[s] = __ldg(reinterpret_cast<const float4 *>(p.B + (int64_t)m.col1 * p.n + c));
            }
        } else {
            float v0[4] = {0.f, 0.f, 0.f, 0.f}, v1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                if (c + q < p.n) {
                    if (m.col0 >= 0) v0[q] = __ldg(p.B + (int64_t)m.col0 * p.n + c + q);
                    if (m.col1 >= 0) v1[q] = __ldg(p.B + (int64_t)m.col1 * p.n + c + q);
                }
            }
            f0[s] = make_float4(v0[0], v0[1], v0[2], v0[3]);
            f1[s] = make_float4(v1[0], v1[1], v1[2], v1[3]);
        }
    }
}

template <int S>
__device__ __forceinline__ void mma_block(float (&acc)[S][2][4], const float4 (&f0)[S],
                                          const float4 (&f1)[S], uint32_t b0, uint32_t b1) {
#pragma unroll
    for (int s = 0; s < S; s++) {
        mma_tf32(acc[s][0], to_tf32(f0[s].x), to_tf32(f0[s].y), to_tf32(f1[s].x), to_tf32(f1[s].y), b0, b1);
        mma_tf32(acc[s][1], to_tf32(f0[s].z), to_tf32(f0[s].w), to_tf32(f1[s].z), to_tf32(f1[s].w), b0, b1);
    }
}

/* Stores lane (g, t)'s two rows (2t, 2t+1) of a segment's 8 x n result. */
template <int S, bool VEC>
__device__ __forceinline__ void write_rows(const acc_tf32_args &p, const float (&acc)[S][2][4],
                                           int64_t window, int64_t slot, int64_t ncol, int t) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = 2 * t + h;
        float *dst;
        if (slot >= 0) {
            dst = p.workspace + (slot * 8 + r) * p.n;
        } else {
            const int64_t row = window * 8 + r;
            if (row >= p.m) continue;
            dst = p.C + __ldg(reinterpret_cast<const long long *>(p.perm) + row) * p.n;
        }
#pragma unroll
        for (int s = 0; s < S; s++) {
            const int64_t c = ncol + 32 * s;
            const float v[4] = {acc[s][0][h], acc[s][0][2 + h], acc[s][1][h], acc[s][1][2 + h]};
            if (VEC) {
                if (c < p.n) __stcs(reinterpret_cast<float4 *>(dst + c), make_float4(v[0], v[1], v[2], v[3]));
            } else {
#pragma unroll
                for (int q = 0; q < 4; q++)
                    if (c + q < p.n) __stcs(dst + c + q, v[q]);
            }
        }
    }
}

template <int S, bool VEC>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    tf32_spmm_kernel(const acc_tf32_args p, int64_t num_items, int slices) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int64_t gwarp = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    const int64_t item = gwarp / slices;
    if (item >= num_items) return;
    const int64_t ncol = (int64_t)(gwarp % slices) * (32 * S) + 4 * g;

    /* Segments of this item: identity schedule = one whole window per item. */
    int64_t seg_begin = item, seg_end = item + 1;
    if (p.item_offsets) {
        seg_begin = __ldg(reinterpret_cast<const long long *>(p.item_offsets) + item);
        seg_end = __ldg(reinterpret_cast<const long long *>(p.item_offsets) + item + 1);
    }
    for (int64_t sgi = seg_begin; sgi < seg_end; sgi++) {
        int64_t window = sgi, b = 0, b_end = 0, slot = -1;
        if (p.segments) {
            const long long *sg = reinterpret_cast<const long long *>(p.segments) + 4 * sgi;
            window = __ldg(sg);
            b = __ldg(sg + 1);
            b_end = __ldg(sg + 2);
            slot = __ldg(sg + 3);
        } else {
            b = __ldg(reinterpret_cast<const long long *>(p.window_offsets) + window);
            b_end = __ldg(reinterpret_cast<const long long *>(p.window_offsets) + window + 1);
        }
        float acc[S][2][4];
#pragma unroll
        for (int s = 0; s < S; s++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[s][0][q] = acc[s][1][q] = 0.f;

        if (b < b_end) {
            /* prologue: metadata of blocks b and b+1, operands of block b */
            Meta cur = load_meta(p, b, t);
            Meta nxt = cur;
            if (b + 1 < b_end) nxt = load_meta(p, b + 1, t);
            float4 f0[S], f1[S];
            uint32_t a0, a1;
            load_bfrag<S, VEC>(p, cur, ncol, f0, f1);
            load_avals(p, cur, g, t, a0, a1);
            for (; b < b_end; b++) {
                Meta nxt2 = nxt;
                if (b + 2 < b_end) nxt2 = load_meta(p, b + 2, t);
                float4 n0[S] = {}, n1[S] = {};
                uint32_t na0 = 0, na1 = 0;
                if (b + 1 < b_end) {
                    load_bfrag<S, VEC>(p, nxt, ncol, n0, n1);
                    load_avals(p, nxt, g, t, na0, na1);
                }
                mma_block<S>(acc, f0, f1, a0, a1);
#pragma unroll
                for (int s = 0; s < S; s++) {
                    f0[s] = n0[s];
                    f1[s] = n1[s];
                }
                a0 = na0;
                a1 = na1;
                nxt = nxt2;
            }
        }
        write_rows<S, VEC>(p, acc, window, slot, ncol, t);
    }
}

/* Sums each split window's partials (slots in order) into its rows of C. */
__global__ void tf32_reduce_kernel(const acc_tf32_args p) {
    const int64_t sw = blockIdx.y;  // split window index
    const long long *rec = reinterpret_cast<const long long *>(p.split_windows) + 3 * sw;
    const int64_t window = rec[0], slot_begin = rec[1], slot_end = rec[2];
    const int64_t total = 8 * p.n;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int r = (int)(e / p.n);
        const int64_t c = e % p.n, row = window * 8 + r;
        if (row >= p.m) continue;
        float sum = 0.f;
        for (int64_t s = slot_begin; s < slot_end; s++) sum += p.workspace[(s * 8 + r) * p.n + c];
        p.C[p.perm[row] * p.n + c] = sum;
    }
}

template <int S, bool VEC>
int launch(const acc_tf32_args &p, int64_t num_items, cudaStream_t stream) {
    const int slices = (int)((p.n + 32 * S - 1) / (32 * S));
    const int64_t warps = num_items * slices;
    const int64_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (blocks > 0x7fffffffLL) return ACC_ERR_TOO_LARGE;
    tf32_spmm_kernel<S, VEC><<<(unsigned)blocks, kWarpsPerBlock * 32, 0, stream>>>(p, num_items, slices);
    return ACC_SUCCESS;
}

}  // namespace

extern "C" int acc_tf32_spmm(const acc_tf32_args *args, void *stream_ptr) {
    const acc_tf32_args &p = *args;
    cudaStream_t stream = (cudaStream_t)stream_ptr;
    if (p.m < 0 || p.n < 0 || p.num_windows != (p.m + 7) / 8 || (p.segments && !p.item_offsets))
        return ACC_ERR_INVALID_ARGUMENT;
    if (p.m == 0 || p.n == 0) return ACC_SUCCESS;
    if (!p.C || !p.B || !p.perm || !p.window_offsets) return ACC_ERR_INVALID_ARGUMENT;
    if (p.num_split_windows > 0 && !p.workspace) return ACC_ERR_INVALID_ARGUMENT;
    const int64_t num_items = p.segments ? p.num_items : p.num_windows;
    if (num_items == 0) return ACC_SUCCESS;
    const bool vec = p.n % 4 == 0 && ((uintptr_t)p.B % 16 == 0) && ((uintptr_t)p.C % 16 == 0) &&
                     (!p.workspace || (uintptr_t)p.workspace % 16 == 0);
    // S = 2 (64 columns per warp) halves metadata work per column once n > 32.
    int st;
    if (p.n <= 32)
        st = vec ? launch<1, true>(p, num_items, stream) : launch<1, false>(p, num_items, stream);
    else
        st = vec ? launch<2, true>(p, num_items, stream) : launch<2, false>(p, num_items, stream);
    if (st) return st;
    ACC_CUDA_TRY(cudaGetLastError());
    if (p.num_split_windows > 0) {
        const int64_t total = 8 * p.n;
        const unsigned gx = (unsigned)((total + 255) / 256 < 65535 ? (total + 255) / 256 : 65535);
        if (p.num_split_windows > 65535) {
            // grid.y limit: launch in chunks of 65535 split windows
            for (int64_t base = 0; base < p.num_split_windows; base += 65535) {
                acc_tf32_args q = p;
                q.split_windows = p.split_windows + 3 * base;
                const int64_t cnt = p.num_split_windows - base < 65535 ? p.num_split_windows - base : 65535;
                tf32_reduce_kernel<<<dim3(gx, (unsigned)cnt), 256, 0, stream>>>(q);
                ACC_CUDA_TRY(cudaGetLastError());
            }
        } else {
            tf32_reduce_kernel<<<dim3(gx, (unsigned)p.num_split_windows), 256, 0, stream>>>(p);
            ACC_CUDA_TRY(cudaGetLastError());
        }
    }
    return ACC_SUCCESS;
}
