/*
 * bittcf_build.cu -- BitTCF built on the device from a canonical CSR and a
 * row permutation, bit-identical to the C builder (csrc/acc_bittcf_build.c),
 * plus the TF32 kernel's packed block metadata and TF32-rounded values.
 *
 * Algorithm (every step linear in nnz, whatever the degrees: a hub row or a
 * hub column is just many keys of one sort):
 *   1. iperm[perm[i]] = i (skipped for the identity);
 *   2. each nonzero e of row i gets the key (window, column, row in window)
 *      = (iperm[i] >> 3, c, iperm[i] & 7), packed into as few bits as the
 *      shape needs, and its index e as the value; the row of e is found by
 *      binary search in row_offsets (O(log m) per nonzero);
 *   3. one radix sort of (key, e) (cub): each window's nonzeros in column
 *      order, so a window's distinct columns are the runs of equal
 *      (window, column);
 *   4. distinct-run flags, inclusive scan -> D[j], the global index of j's
 *      (window, column);  each window's first and last D give its distinct
 *      column count, hence its TC blocks ceil(count / 8), scanned into
 *      window_offsets;
 *   5. per sorted nonzero: its block b = window_offsets[w] + rank / 8 and
 *      slot rank % 8 (rank = D - the window's first D); the run's first
 *      nonzero writes block_cols; every nonzero sets its mask bit
 *      (row * 8 + slot) with an atomicOr (at most 64 per block);
 *   6. block_value_offsets = exclusive scan of popcount(mask): the C
 *      builder's order (blocks in window order, values in ascending bit
 *      order), so value j goes to block_value_offsets[b] + the number of
 *      mask bits below its bit;
 *   7. packed metadata (accspmm._tf32.pack_meta's 12-int32 record: columns
 *      interleaved with padding slots pointed at a real column, mask, value
 *      offset) and TF32-rounded values (accspmm._tf32.round_tf32: round to
 *      nearest, ties away from zero, non-finite kept).
 *
 * Memory: keys and values of the sort twice (double buffer), D, and cub's
 * temporary storage: about 40 bytes per nonzero at the peak, all freed
 * before returning; the outputs come from the library's pool (device.cu) and are owned by the caller.
 * One host synchronisation, to read the number of blocks before the block
 * arrays are allocated (the window offsets come back through the pinned staging chunk).
 *
 * Ranks (the second method, for small matrices: ACC_BITTCF_GPU_RANKS_MAX nonzeros or fewer).  The
 * sort's ~20 launches and cub's calls cost about 0.2 ms of host time on the GPU machine, several
 * times the device work of a matrix of 100k nonzeros.  Where every row's columns ascend (a
 * canonical CSR), no sort is needed: the entry e = (row i, column c) at position r of window w is
 * the *representative* of its (window, column) when no row at an earlier position of w holds c (at
 * most 7 binary searches); the window's distinct columns are its representatives, and the rank of c
 * among them is the sum over w's 8 rows of the representatives below c's lower bound in that row
 * (an exclusive scan S of the representative flags in CSR order: S[lower bound] - S[row start]).
 * Rank, block, slot and bit are then those of the sort (steps 5-7 as above), so the arrays are the
 * same bit for bit.  Two cooperative kernels (grid-wide barriers between the steps; the grid is
 * one wave), one host synchronisation between them.  O(nnz log(row length)) work: 14 binary
 * searches per entry at most, whatever the degrees.  A row whose columns do not ascend (the
 * caller's CSR is not canonical) sends the build to the sort (method 0), which also reports
 * duplicates.
 *
 * The check (acc_bittcf_gpu_input.validate): a host CSR that acc_csr_check has not seen is checked
 * here instead, as that check does (offsets from 0 to nnz, never decreasing, then every column in
 * [0, k)), before any step indexes through it: the first phase of the ranks' first kernel (a grid
 * barrier, no launch), or a kernel of its own and one wait before the sort.  A small plan's host
 * check cost 12-70 us on the GPU machine's host, the device's pass a few.
 */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cooperative_groups.h>

#include <cstdint>

#include "acc_cuda_internal.h"

namespace {

constexpr int kThreads = 256;

static_assert(kThreads == 256, "grid_for (acc_cuda_internal.h) counts blocks of 256 threads by default");

__global__ void iota(int64_t n, int64_t *__restrict__ out) { GRID_STRIDE(i, n) out[i] = i; }

__global__ void invert_perm(int64_t m, const int64_t *__restrict__ perm, int64_t *__restrict__ iperm) {
    GRID_STRIDE(i, m) iperm[perm[i]] = i;
}

/* The row that holds entry e: the last row whose offset is <= e (O(log m)). */
__device__ __forceinline__ int64_t row_holding(const int64_t *__restrict__ row_offsets, int64_t m,
                                               int64_t e) {
    return last_le(0, m - 1, e, [&](int64_t i) { return row_offsets[i]; });
}

/* Step 2: key and value of every nonzero. */
template <typename V>
__global__ void make_keys(int64_t m, int64_t nnz, const int64_t *__restrict__ row_offsets,
                          const int32_t *__restrict__ cols, const int64_t *__restrict__ iperm, int cbits,
                          uint64_t *__restrict__ keys, V *__restrict__ vals) {
    GRID_STRIDE(e, nnz) {
        const int64_t row = row_holding(row_offsets, m, e);
        const uint64_t ni = (uint64_t)(iperm ? iperm[row] : row);
        keys[e] = ((ni >> 3) << (cbits + 3)) | ((uint64_t)(uint32_t)cols[e] << 3) | (ni & 7);
        vals[e] = (V)e;
    }
}

/* Step 4: 1 where a (window, column) run starts; *duplicate = 1 where two entries share a key
 * (the same row and column: a CSR that is not canonical). */
__global__ void run_flags(int64_t nnz, const uint64_t *__restrict__ keys, int64_t *__restrict__ flag,
                          int *__restrict__ duplicate) {
    GRID_STRIDE(j, nnz) {
        flag[j] = j == 0 || (keys[j] >> 3) != (keys[j - 1] >> 3);
        if (j > 0 && keys[j] == keys[j - 1]) *duplicate = 1;
    }
}

/* Step 4: each nonempty window's first D and one past its last (zero for empty windows). */
__global__ void window_bounds(int64_t nnz, const uint64_t *__restrict__ keys, const int64_t *__restrict__ D,
                              int wshift, int64_t *__restrict__ wbeg, int64_t *__restrict__ wend) {
    GRID_STRIDE(j, nnz) {
        const uint64_t w = keys[j] >> wshift;
        if (j == 0 || (keys[j - 1] >> wshift) != w) wbeg[w] = D[j] - 1;
        if (j == nnz - 1 || (keys[j + 1] >> wshift) != w) wend[w] = D[j];
    }
}

/* Step 4: TC blocks per window, written one slot to the right for the scan. */
__global__ void window_blocks(int64_t W, const int64_t *__restrict__ wbeg, const int64_t *__restrict__ wend,
                              int64_t *__restrict__ counts) {
    GRID_STRIDE(w, W) counts[w] = (wend[w] - wbeg[w] + 7) >> 3;
}

/* Step 5: columns and mask bits; D[j] becomes (block << 6) | bit. */
__global__ void place(int64_t nnz, const uint64_t *__restrict__ keys, int64_t *__restrict__ D, int wshift,
                      int cbits, const int64_t *__restrict__ wbeg, const int64_t *__restrict__ window_offsets,
                      int32_t *__restrict__ block_cols, unsigned long long *__restrict__ mask) {
    GRID_STRIDE(j, nnz) {
        const uint64_t key = keys[j], w = key >> wshift;
        const int64_t rank = D[j] - 1 - wbeg[w];
        const int64_t b = window_offsets[w] + (rank >> 3);
        const int slot = (int)(rank & 7), bit = (int)(key & 7) * 8 + slot;
        if (j == 0 || (keys[j - 1] >> 3) != (key >> 3))
            block_cols[b * 8 + slot] = (int32_t)((key >> 3) & ((uint64_t(1) << cbits) - 1));
        atomicOr(mask + b, 1ull << bit);
        D[j] = (b << 6) | bit;
    }
}

/* Step 6: popcount of each mask, one slot to the right for the scan. */
__global__ void mask_counts(int64_t nblocks, const unsigned long long *__restrict__ mask,
                            int64_t *__restrict__ offsets) {
    GRID_STRIDE(b, nblocks) offsets[b + 1] = __popcll(mask[b]);
    if (blockIdx.x == 0 && threadIdx.x == 0) offsets[0] = 0;
}

/* Step 6: value j (source index src) at its place in the C builder's order (and its TF32 rounding). */
__device__ __forceinline__ void place_value(int64_t pos, int64_t src, const float *__restrict__ values_in,
                                            const unsigned long long *__restrict__ mask,
                                            const int64_t *__restrict__ offsets, float *__restrict__ values,
                                            float *__restrict__ values_tf32) {
    const int64_t b = pos >> 6;
    const int bit = (int)(pos & 63);
    const int64_t at = offsets[b] + __popcll(mask[b] & ((1ull << bit) - 1));
    const float v = values_in[src];
    if (values) values[at] = v;
    if (values_tf32) values_tf32[at] = round_tf32(v);
}

template <typename V>
__global__ void place_values(int64_t nnz, const int64_t *__restrict__ D, const V *__restrict__ src,
                             const float *__restrict__ values_in, const unsigned long long *__restrict__ mask,
                             const int64_t *__restrict__ offsets, float *__restrict__ values,
                             float *__restrict__ values_tf32) {
    GRID_STRIDE(j, nnz) place_value(D[j], (int64_t)src[j], values_in, mask, offsets, values, values_tf32);
}

/* Step 7: block b's 12-int32 record for the TF32 kernel (cuda/tf32_spmm.h block_meta). */
__device__ __forceinline__ void pack_one(int64_t b, const int32_t *__restrict__ block_cols,
                                         const unsigned long long *__restrict__ mask,
                                         const int64_t *__restrict__ offsets, int32_t *__restrict__ meta) {
    const int32_t *c = block_cols + b * 8;
    int32_t *out = meta + b * 12;
    for (int t = 0; t < 4; t++) {
        const int32_t lo = c[t] < 0 ? c[0] : c[t];
        out[2 * t] = lo;
        out[2 * t + 1] = c[t + 4] < 0 ? lo : c[t + 4];
    }
    const unsigned long long mk = mask[b];
    const uint64_t off = (uint64_t)offsets[b];
    out[8] = (int32_t)(uint32_t)mk;
    out[9] = (int32_t)(uint32_t)(mk >> 32);
    out[10] = (int32_t)(uint32_t)off;
    out[11] = (int32_t)(uint32_t)(off >> 32);
}

__global__ void pack_meta(int64_t nblocks, const int32_t *__restrict__ block_cols,
                          const unsigned long long *__restrict__ mask, const int64_t *__restrict__ offsets,
                          int32_t *__restrict__ meta) {
    GRID_STRIDE(b, nblocks) pack_one(b, block_cols, mask, offsets, meta);
}

/* ---- the check (this file's header) ----------------------------------------------------------- */

/* What the check found, as bits: offsets that do not run from 0 to nnz without decreasing, a column
 * outside [0, k), a column not above its predecessor in its row (not canonical; sort path only). */
enum { kBadOffsets = 1, kBadColumn = 2, kDescent = 4 };

__device__ __forceinline__ int offset_fault(const int64_t *__restrict__ ro, int64_t m, int64_t nnz,
                                            int64_t i) {
    const bool bad = i == 0 ? ro[0] != 0 : ro[i] < ro[i - 1] || (i == m && ro[m] != nnz);
    return bad ? kBadOffsets : 0;
}

__device__ __forceinline__ int column_fault(const int32_t *__restrict__ ci, int64_t k, int64_t e) {
    return (uint32_t)ci[e] >= (uint64_t)k ? kBadColumn : 0; /* k <= INT32_MAX: negatives are >= k unsigned */
}

/* The check before the sort: faults into *fault (zeroed by the caller).  A descent's row comes from a
 * binary search that stays within ro[0, m) whatever the offsets hold (its answer only counts when they
 * are valid). */
__global__ void check_csr(int64_t m, int64_t nnz, int64_t k, const int64_t *__restrict__ ro,
                          const int32_t *__restrict__ ci, int *__restrict__ fault) {
    int f = 0;
    GRID_STRIDE(i, m + 1) f |= offset_fault(ro, m, nnz, i);
    GRID_STRIDE(e, nnz) {
        f |= column_fault(ci, k, e);
        if (e > 0 && ci[e] <= ci[e - 1] && ro[row_holding(ro, m, e)] != e) f |= kDescent;
    }
    if (f) atomicOr(fault, f);
}

/* A fault's status, as acc_csr_check reports it: the offsets first. */
int fault_status(int fault) {
    return fault & kBadOffsets  ? ACC_ERR_ROW_OFFSETS
           : fault & kBadColumn ? ACC_ERR_COLUMN_INDEX
                                : ACC_SUCCESS;
}

/* ---- the ranks (this file's header): two cooperative kernels ------------------------------- */

namespace cg = cooperative_groups;

struct RankArgs {
    int64_t m, nnz, W, k;
    int validate;             /* check the CSR first (this file's header) */
    const int64_t *ro;        /* row offsets [m + 1] */
    const int32_t *ci;        /* column indices [nnz] */
    const float *vin;         /* values [nnz] */
    const int64_t *perm;      /* [m] or NULL (identity) */
    int64_t *iperm;           /* [m] when perm */
    int64_t *iota;            /* [m] or NULL: gets 0..m-1 (the caller's identity permutation) */
    int32_t *row_of;          /* [nnz]: each entry's row */
    int32_t *S;               /* [nnz + 1]: representative flags, then their exclusive scan */
    int32_t *wcount;          /* [W]: distinct columns per window */
    int64_t *wo;              /* [W + 1]: window offsets (output) */
    int64_t *partial;         /* [2 * gridDim.x]: the blocks' sums of the grid-wide scans */
    int *flags; /* [3]: a duplicate entry, a descent (columns not ascending), the check's faults */
    int64_t nb;               /* blocks (second kernel) */
    int32_t *cols;            /* [8 nb] */
    unsigned long long *mask; /* [nb] */
    int64_t *offsets;         /* [nb + 1] */
    int64_t *D;               /* [nnz]: (block << 6) | bit */
    float *values, *values_tf32;
    int32_t *meta;
};

/* Row of window position g: perm[g], or g for the identity. */
__device__ __forceinline__ int64_t window_row(const RankArgs &a, int64_t g) { return a.perm ? a.perm[g] : g; }

/* First position in ci[lo, hi) (ascending) whose column is >= c. */
__device__ __forceinline__ int64_t lower_bound(const int32_t *__restrict__ ci, int64_t lo, int64_t hi,
                                               int32_t c) {
    while (lo < hi) {
        const int64_t mid = (lo + hi) >> 1;
        if (ci[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The exclusive scan of v over the block (blockDim.x a multiple of 32, at most 1024); *total: the
 * block's sum.  sh: 32 int64 of shared memory.  Every thread of the block calls it. */
__device__ int64_t block_exclusive(int64_t v, int64_t *sh, int64_t *total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    int64_t x = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int64_t y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
    }
    __syncthreads(); /* sh is free (an earlier call's readers are done) */
    if (lane == 31) sh[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int64_t t = lane < warps ? sh[lane] : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const int64_t y = __shfl_up_sync(0xffffffffu, t, d);
            if (lane >= d) t += y;
        }
        if (lane < warps) sh[lane] = t; /* inclusive over warps */
    }
    __syncthreads();
    *total = sh[warps - 1];
    return (warp ? sh[warp - 1] : 0) + x - v;
}

/* A grid-wide scan of f(i), i < n, in two calls with a grid barrier between them: blocks own
 * contiguous chunks.  First: the block's chunk sum into part[blockIdx.x].  Second: out(i, exclusive
 * prefix of f) for every i of the chunk; returns the grand total (every thread). */
template <class F> __device__ void chunk_sum(int64_t n, int64_t *part, int64_t *sh, F f) {
    const int64_t per = (n + gridDim.x - 1) / gridDim.x, lo = min(n, per * blockIdx.x), hi = min(n, lo + per);
    int64_t acc = 0, t;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        acc += f(i);
    block_exclusive(acc, sh, &t);
    if (threadIdx.x == 0) part[blockIdx.x] = t;
}

template <class F, class O>
__device__ int64_t chunk_scan(int64_t n, const int64_t *part, int64_t *sh, F f, O out) {
    const int64_t per = (n + gridDim.x - 1) / gridDim.x, lo = min(n, per * blockIdx.x), hi = min(n, lo + per);
    int64_t before = 0, all = 0, carry, t;
    for (int64_t b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
        all += part[b];
        if (b < blockIdx.x) before += part[b];
    }
    block_exclusive(before, sh, &carry); /* the chunks before this block's */
    block_exclusive(all, sh, &all);
    for (int64_t base = lo; base < hi; base += blockDim.x) {
        const int64_t i = base + threadIdx.x;
        const int64_t v = i < hi ? f(i) : 0;
        const int64_t x = block_exclusive(v, sh, &t);
        if (i < hi) out(i, carry + x);
        carry += t;
    }
    return all;
}

/* First kernel: representatives, distinct columns per window, S scanned, window offsets. */
__global__ void __launch_bounds__(kThreads) ranks_count(const RankArgs a) {
    __shared__ int64_t sh[32];
    cg::grid_group grid = cg::this_grid();
    GRID_STRIDE(i, a.m) {
        if (a.perm) a.iperm[a.perm[i]] = i;
        if (a.iota) a.iota[i] = i;
    }
    GRID_STRIDE(w, a.W) a.wcount[w] = 0;
    if (blockIdx.x == 0 && threadIdx.x < 3) a.flags[threadIdx.x] = 0;
    if (a.validate) { /* each block's faults into partial[block] (free until the scans below) */
        int f = 0;
        GRID_STRIDE(i, a.m + 1) f |= offset_fault(a.ro, a.m, a.nnz, i);
        GRID_STRIDE(e, a.nnz) f |= column_fault(a.ci, a.k, e);
        f = (__syncthreads_or(f & kBadOffsets) ? kBadOffsets : 0) |
            (__syncthreads_or(f & kBadColumn) ? kBadColumn : 0);
        if (threadIdx.x == 0) a.partial[blockIdx.x] = f;
    }
    grid.sync();
    if (a.validate) { /* every block reads all the faults: all leave together, before any read through them */
        int f = 0;
        for (int64_t b = threadIdx.x; b < gridDim.x; b += blockDim.x)
            f |= (int)a.partial[b];
        f = (__syncthreads_or(f & kBadOffsets) ? kBadOffsets : 0) |
            (__syncthreads_or(f & kBadColumn) ? kBadColumn : 0);
        if (f) { /* the window offsets zeroed: the host reads them back with the flags */
            if (blockIdx.x == 0 && threadIdx.x == 0) a.flags[2] = f;
            GRID_STRIDE(w, a.W + 1) a.wo[w] = 0;
            return;
        }
    }
    GRID_STRIDE(e, a.nnz) {
        const int64_t row = row_holding(a.ro, a.m, e);
        a.row_of[e] = (int32_t)row;
        const int32_t c = a.ci[e];
        if (e > a.ro[row] && a.ci[e - 1] >= c) atomicOr(a.flags + (a.ci[e - 1] == c ? 0 : 1), 1);
        const int64_t ni = a.perm ? a.iperm[row] : row, w = ni >> 3;
        int rep = 1;
        for (int j = 0; j < (int)(ni & 7); j++) {
            const int64_t q = window_row(a, 8 * w + j), z = a.ro[q + 1];
            const int64_t at = lower_bound(a.ci, a.ro[q], z, c);
            if (at < z && a.ci[at] == c) {
                rep = 0;
                break;
            }
        }
        a.S[e] = rep;
        if (rep) atomicAdd(a.wcount + w, 1);
    }
    grid.sync();
    const int64_t G = gridDim.x;
    const auto flag = [&](int64_t e) { return (int64_t)a.S[e]; };
    const auto blocks = [&](int64_t w) { return (int64_t)((a.wcount[w] + 7) >> 3); };
    chunk_sum(a.nnz, a.partial, sh, flag);
    chunk_sum(a.W, a.partial + G, sh, blocks);
    grid.sync();
    const int64_t reps =
        chunk_scan(a.nnz, a.partial, sh, flag, [&](int64_t e, int64_t x) { a.S[e] = (int32_t)x; });
    chunk_scan(a.W, a.partial + G, sh, blocks, [&](int64_t w, int64_t x) { a.wo[w + 1] = x + blocks(w); });
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        a.S[a.nnz] = (int32_t)reps;
        a.wo[0] = 0;
    }
}

/* Second kernel: each entry's rank -> block, slot, bit (step 5), value offsets (step 6), values and
 * metadata (steps 6-7). */
__global__ void __launch_bounds__(kThreads) ranks_place(const RankArgs a) {
    __shared__ int64_t sh[32];
    cg::grid_group grid = cg::this_grid();
    GRID_STRIDE(j, 8 * a.nb) a.cols[j] = -1; /* ACC_PAD_COL */
    GRID_STRIDE(b, a.nb) a.mask[b] = 0;
    grid.sync();
    GRID_STRIDE(e, a.nnz) {
        const int64_t row = a.row_of[e], ni = a.perm ? a.iperm[row] : row, w = ni >> 3;
        const int r = (int)(ni & 7);
        const int32_t c = a.ci[e];
        int64_t rank = 0;
        for (int j = 0; j < 8 && 8 * w + j < a.m; j++) {
            const int64_t q = window_row(a, 8 * w + j), lo = a.ro[q];
            const int64_t at = j == r ? e : lower_bound(a.ci, lo, a.ro[q + 1], c);
            rank += a.S[at] - a.S[lo];
        }
        const int64_t b = a.wo[w] + (rank >> 3);
        const int slot = (int)(rank & 7), bit = r * 8 + slot;
        if (a.S[e + 1] != a.S[e]) a.cols[b * 8 + slot] = c;
        atomicOr(a.mask + b, 1ull << bit);
        a.D[e] = (b << 6) | bit;
    }
    grid.sync();
    const auto bits = [&](int64_t b) { return (int64_t)__popcll(a.mask[b]); };
    chunk_sum(a.nb, a.partial, sh, bits);
    grid.sync();
    chunk_scan(a.nb, a.partial, sh, bits, [&](int64_t b, int64_t x) { a.offsets[b + 1] = x + bits(b); });
    if (blockIdx.x == 0 && threadIdx.x == 0) a.offsets[0] = 0;
    grid.sync();
    GRID_STRIDE(e, a.nnz) place_value(a.D[e], e, a.vin, a.mask, a.offsets, a.values, a.values_tf32);
    GRID_STRIDE(b, a.nb) pack_one(b, a.cols, a.mask, a.offsets, a.meta);
}

#define TRY(call)                                                                                            \
    do {                                                                                                     \
        int st_ = (call);                                                                                    \
        if (st_ != ACC_SUCCESS) return st_;                                                                  \
    } while (0)

/* An array of `count` elements from the library's pool, in `s`'s order: the outputs (the build
 * synchronises `s` before it returns, so the caller may use them on any stream) and Temps'. */
template <typename T> int out_alloc(T **out, size_t count, cudaStream_t s) {
    void *q = nullptr;
    TRY(acc_pool_alloc(&q, count * sizeof(T), s));
    *out = static_cast<T *>(q);
    return ACC_SUCCESS;
}

/* Bytes of `count` elements of T, rounded up to the 256-byte alignment of an allocation of its own. */
template <typename T> size_t arena_bytes(size_t count) { return (count * sizeof(T) + 255) & ~size_t(255); }

/* Temporaries of one build, freed (stream-ordered) on every exit path.  reserve() takes one block
 * that the next get()s carve (256-byte aligned, as their own allocations would be): one pool
 * allocation and one free for a step's temporaries, not one each (host calls a small build pays). */
struct Temps {
    cudaStream_t s;
    void *p[32] = {};
    int used = 0;
    char *arena = nullptr;
    size_t arena_left = 0;
    explicit Temps(cudaStream_t stream) : s(stream) {}
    int reserve(size_t bytes) {
        char *q = nullptr;
        TRY(get(&q, bytes));
        arena = q;
        arena_left = bytes;
        return ACC_SUCCESS;
    }
    template <typename T> int get(T **out, size_t count) {
        const size_t need = arena_bytes<T>(count ? count : 1);
        if (arena && need <= arena_left) {
            *out = reinterpret_cast<T *>(arena);
            arena += need;
            arena_left -= need;
            return ACC_SUCCESS;
        }
        if (used == (int)(sizeof p / sizeof p[0]))
            return ACC_ERR_INVALID_ARGUMENT; /* a bug: more than p holds */
        TRY(out_alloc(out, count, s));       /* the pool gives at least one byte */
        p[used++] = *out;
        return ACC_SUCCESS;
    }
    ~Temps() {
        for (int i = 0; i < used; i++)
            acc_pool_free(p[i], s);
    }
};

#define LAUNCH_CHECK() ACC_CUDA_TRY(cudaPeekAtLastError())

/* The block arrays for nb blocks: the caller's outputs with keep_blocks (tests compare them with
 * the C builder), else temporaries; and the TF32 kernel's outputs (metadata, rounded values). */
int alloc_blocks(acc_bittcf_gpu_output *out, int64_t nb, int64_t nnz, cudaStream_t s, Temps &tmp,
                 int32_t **cols, unsigned long long **mask, int64_t **offsets) {
    out->num_blocks = nb;
    if (!out->keep_blocks) {
        TRY(tmp.reserve(arena_bytes<int32_t>((size_t)nb * 8) + arena_bytes<unsigned long long>((size_t)nb) +
                        arena_bytes<int64_t>((size_t)nb + 1)));
        TRY(tmp.get(cols, (size_t)nb * 8));
        TRY(tmp.get(mask, (size_t)nb));
        TRY(tmp.get(offsets, (size_t)nb + 1));
    } else {
        TRY(out_alloc(&out->d_block_cols, (size_t)(nb ? nb : 1) * 8, s));
        TRY(out_alloc(&out->d_block_mask, (size_t)(nb ? nb : 1), s));
        TRY(out_alloc(&out->d_block_value_offsets, (size_t)(nb + 1), s));
        TRY(out_alloc(&out->d_values, (size_t)(nnz ? nnz : 1), s));
        *cols = out->d_block_cols;
        *mask = (unsigned long long *)out->d_block_mask;
        *offsets = out->d_block_value_offsets;
    }
    TRY(out_alloc(&out->d_block_meta, (size_t)(nb ? nb : 1) * 12, s));
    TRY(out_alloc(&out->d_values_tf32, (size_t)(nnz ? nnz : 1), s));
    return ACC_SUCCESS;
}

/* The end of a build: synchronise, or (defer_sync) record the event the caller waits on at its
 * first use (a plan: its first call, after the host-side schedule); the temporaries are released
 * in stream order after the work. */
int finish(acc_bittcf_gpu_output *out, cudaStream_t s) {
    if (!out->defer_sync) {
        ACC_CUDA_TRY(cudaStreamSynchronize(s));
        return ACC_SUCCESS;
    }
    cudaEvent_t ev;
    ACC_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    const cudaError_t e = cudaEventRecord(ev, s);
    if (e != cudaSuccess) {
        cudaEventDestroy(ev);
        return acc_cuda_status(e, "cudaEventRecord");
    }
    out->ready = ev;
    return ACC_SUCCESS;
}

/* A cooperative launch of `kernel` over a grid of `blocks` (at most one wave). */
cudaError_t launch_coop(void (*kernel)(RankArgs), unsigned blocks, RankArgs *a, cudaStream_t s) {
    void *args[] = {a};
    return cudaLaunchCooperativeKernel(reinterpret_cast<const void *>(kernel), dim3(blocks), dim3(kThreads),
                                       args, 0, s);
}

/* Ranks instead of the sort (this file's header).  RANKS_DECLINED where a row's columns do not
 * ascend, or the device cannot tell how many blocks run at once or refuses the cooperative grid
 * (the caller runs the sort on the same input: nothing of this call is left queued).  With
 * in->validate, *checked = 1 once the check has passed (the sort then needs none). */
constexpr int RANKS_DECLINED = 1;

int build_ranks(const acc_bittcf_gpu_input *in, acc_bittcf_gpu_output *out, cudaStream_t s, Temps &tmp,
                int *checked) {
    const int64_t m = in->m, nnz = in->nnz, W = (m + 7) / 8;
    RankArgs a = {};
    a.m = m;
    a.nnz = nnz;
    a.W = W;
    a.k = in->k;
    a.validate = in->validate;
    a.ro = in->d_row_offsets;
    a.ci = in->d_column_indices;
    a.vin = in->d_values;
    a.perm = in->d_perm;
    a.iota = out->d_identity_perm;
    a.wo = out->d_window_offsets;
    const int64_t want = std::max<int64_t>(1, (std::max(nnz, m) + kThreads - 1) / kThreads);
    const int64_t w1 = wave_blocks(reinterpret_cast<const void *>(ranks_count), kThreads, 0),
                  w2 = wave_blocks(reinterpret_cast<const void *>(ranks_place), kThreads, 0);
    if (w1 <= 0 || w2 <= 0) return RANKS_DECLINED;
    const unsigned g1 = (unsigned)std::min(want, w1), g2 = (unsigned)std::min(want, w2);
    TRY(tmp.reserve((a.perm ? arena_bytes<int64_t>((size_t)m) : 0) + arena_bytes<int32_t>((size_t)nnz) +
                    arena_bytes<int32_t>((size_t)nnz + 1) + arena_bytes<int32_t>((size_t)W) +
                    arena_bytes<int64_t>(2 * (size_t)std::max(g1, g2)) + arena_bytes<int>(3) +
                    arena_bytes<int64_t>((size_t)nnz)));
    if (a.perm) TRY(tmp.get(&a.iperm, (size_t)m));
    TRY(tmp.get(&a.row_of, (size_t)nnz));
    TRY(tmp.get(&a.S, (size_t)nnz + 1));
    TRY(tmp.get(&a.wcount, (size_t)W));
    TRY(tmp.get(&a.partial, 2 * (size_t)std::max(g1, g2)));
    TRY(tmp.get(&a.flags, 3));
    TRY(tmp.get(&a.D, (size_t)nnz));
    const cudaError_t e = launch_coop(ranks_count, g1, &a, s);
    if (e == cudaErrorCooperativeLaunchTooLarge || e == cudaErrorNotSupported) {
        (void)cudaGetLastError(); /* a device or context that cannot run the grid at once: the sort */
        return RANKS_DECLINED;
    }
    ACC_CUDA_TRY(e);
    int h_flags[3] = {0, 0, 0};
    const acc_d2h_segment back[2] = {{out->h_window_offsets, a.wo, (size_t)(W + 1) * sizeof(int64_t)},
                                     {h_flags, a.flags, sizeof h_flags}};
    TRY(acc_d2h_staged(back, 2, s)); /* one wait (two pageable copies made three) */
    if (h_flags[2]) return fault_status(h_flags[2]); /* no window offsets (zeros) */
    *checked = in->validate;
    if (h_flags[0]) return ACC_ERR_NOT_CANONICAL;
    if (in->validate) out->canonical = !h_flags[1];
    if (h_flags[1]) return RANKS_DECLINED;
    a.nb = out->h_window_offsets[W];
    TRY(alloc_blocks(out, a.nb, nnz, s, tmp, &a.cols, &a.mask, &a.offsets));
    a.values = out->d_values;
    a.values_tf32 = out->d_values_tf32;
    a.meta = out->d_block_meta;
    ACC_CUDA_TRY(launch_coop(ranks_place, g2, &a, s));
    out->method_used = ACC_BITTCF_GPU_RANKS;
    return finish(out, s);
}

/* The check before the sort (this file's header): one kernel and one wait; sets out->canonical. */
int check_before_sort(const acc_bittcf_gpu_input *in, acc_bittcf_gpu_output *out, cudaStream_t s,
                      Temps &tmp) {
    int *fault = nullptr, h_fault = 0;
    TRY(tmp.get(&fault, 1));
    ACC_CUDA_TRY(cudaMemsetAsync(fault, 0, sizeof(int), s));
    check_csr<<<wave_grid(check_csr, kThreads, 0, grid_for(std::max(in->m + 1, in->nnz))), kThreads, 0, s>>>(
        in->m, in->nnz, in->k, in->d_row_offsets, in->d_column_indices, fault);
    LAUNCH_CHECK();
    const acc_d2h_segment back = {&h_fault, fault, sizeof h_fault};
    TRY(acc_d2h_staged(&back, 1, s));
    out->canonical = !(h_fault & kDescent);
    return fault_status(h_fault);
}

template <typename V>
int build(const acc_bittcf_gpu_input *in, acc_bittcf_gpu_output *out, cudaStream_t s, Temps &tmp) {
    const int64_t m = in->m, nnz = in->nnz, W = (m + 7) / 8;
    const int cbits = bits_for(in->k), wbits = bits_for(W), wshift = cbits + 3, total = wbits + cbits + 3;
    if (total > 64) return ACC_ERR_TOO_LARGE;
    int64_t *iperm = nullptr, *D = nullptr, *wbeg = nullptr, *wend = nullptr;
    uint64_t *keys[2];
    V *vals[2];
    if (in->d_perm) {
        TRY(tmp.get(&iperm, (size_t)m));
        invert_perm<<<grid_for(m), kThreads, 0, s>>>(m, in->d_perm, iperm);
        LAUNCH_CHECK();
    }
    TRY(tmp.get(&keys[0], (size_t)nnz));
    TRY(tmp.get(&keys[1], (size_t)nnz));
    TRY(tmp.get(&vals[0], (size_t)nnz));
    TRY(tmp.get(&vals[1], (size_t)nnz));
    make_keys<V><<<grid_for(nnz), kThreads, 0, s>>>(m, nnz, in->d_row_offsets, in->d_column_indices, iperm,
                                                    cbits, keys[0], vals[0]);
    LAUNCH_CHECK();
    cub::DoubleBuffer<uint64_t> kb(keys[0], keys[1]);
    cub::DoubleBuffer<V> vb(vals[0], vals[1]);
    size_t temp_bytes = 0, scan_bytes = 0;
    ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, kb, vb, nnz, 0, total, s));
    ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, (int64_t *)nullptr, (int64_t *)nullptr,
                                               nnz > W ? nnz : W, s));
    if (scan_bytes > temp_bytes) temp_bytes = scan_bytes;
    void *temp = nullptr;
    TRY(tmp.get((char **)&temp, temp_bytes + 256));
    ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, kb, vb, nnz, 0, total, s));
    const uint64_t *K = kb.Current();
    const V *E = vb.Current();
    TRY(tmp.get(&D, (size_t)nnz));
    TRY(tmp.get(&wbeg, (size_t)W));
    TRY(tmp.get(&wend, (size_t)W));
    int *dup = nullptr, h_dup = 0;
    TRY(tmp.get(&dup, 1));
    ACC_CUDA_TRY(cudaMemsetAsync(dup, 0, sizeof(int), s));
    run_flags<<<grid_for(nnz), kThreads, 0, s>>>(nnz, K, D, dup);
    LAUNCH_CHECK();
    size_t bytes = temp_bytes;
    ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp, bytes, D, D, nnz, s));
    ACC_CUDA_TRY(cudaMemsetAsync(wbeg, 0, (size_t)W * sizeof(int64_t), s));
    ACC_CUDA_TRY(cudaMemsetAsync(wend, 0, (size_t)W * sizeof(int64_t), s));
    window_bounds<<<grid_for(nnz), kThreads, 0, s>>>(nnz, K, D, wshift, wbeg, wend);
    LAUNCH_CHECK();
    int64_t *wo = out->d_window_offsets;
    window_blocks<<<grid_for(W), kThreads, 0, s>>>(W, wbeg, wend, wo + 1);
    LAUNCH_CHECK();
    ACC_CUDA_TRY(cudaMemsetAsync(wo, 0, sizeof(int64_t), s));
    bytes = temp_bytes;
    ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp, bytes, wo + 1, wo + 1, W, s));
    const acc_d2h_segment back[2] = {{out->h_window_offsets, wo, (size_t)(W + 1) * sizeof(int64_t)},
                                     {&h_dup, dup, sizeof(int)}};
    TRY(acc_d2h_staged(back, 2, s));
    if (h_dup) return ACC_ERR_NOT_CANONICAL;
    const int64_t nb = out->h_window_offsets[W];
    int32_t *cols;
    unsigned long long *mask;
    int64_t *offsets;
    TRY(alloc_blocks(out, nb, nnz, s, tmp, &cols, &mask, &offsets));
    ACC_CUDA_TRY(cudaMemsetAsync(cols, 0xFF, (size_t)nb * 8 * sizeof(int32_t), s)); /* ACC_PAD_COL = -1 */
    ACC_CUDA_TRY(cudaMemsetAsync(mask, 0, (size_t)nb * sizeof(uint64_t), s));
    place<<<grid_for(nnz), kThreads, 0, s>>>(nnz, K, D, wshift, cbits, wbeg, wo, cols, mask);
    LAUNCH_CHECK();
    mask_counts<<<grid_for(nb), kThreads, 0, s>>>(nb, mask, offsets);
    LAUNCH_CHECK();
    bytes = temp_bytes;
    if (nb > 0) ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp, bytes, offsets + 1, offsets + 1, nb, s));
    place_values<V><<<grid_for(nnz), kThreads, 0, s>>>(nnz, D, E, in->d_values, mask, offsets, out->d_values,
                                                       out->d_values_tf32);
    LAUNCH_CHECK();
    pack_meta<<<grid_for(nb), kThreads, 0, s>>>(nb, cols, mask, offsets, out->d_block_meta);
    LAUNCH_CHECK();
    out->method_used = ACC_BITTCF_GPU_SORT;
    return finish(out, s);
}

/* The host CSR of `in` into temporaries (device pointers in `dev`), through the library's pinned
 * staging (staging.cu): the host arrays may go after the call.  With out->keep_csr, into an allocation of
 * its own that the caller keeps (out->d_csr; freed with the outputs on an error). */
int upload(const acc_bittcf_gpu_input *in, acc_bittcf_gpu_input *dev, acc_bittcf_gpu_output *out, cudaStream_t s,
           Temps &tmp) {
    int64_t *rp = nullptr;
    int32_t *ci = nullptr;
    float *v = nullptr;
    const size_t m1 = (size_t)in->m + 1, nnz = (size_t)in->nnz;
    /* one block holding the three arrays back to back (8-, 8- and 4-byte aligned; every kernel reads
     * them element by element), which acc_h2d_staged sends as one DMA */
    char *blk = nullptr;
    const size_t bytes = m1 * sizeof(int64_t) + 2 * nnz * sizeof(int32_t);
    if (out->keep_csr) {
        TRY(out_alloc(&blk, bytes, s));
        out->d_csr = blk;
    } else {
        TRY(tmp.get(&blk, bytes));
    }
    rp = reinterpret_cast<int64_t *>(blk);
    ci = reinterpret_cast<int32_t *>(blk + m1 * sizeof(int64_t));
    v = reinterpret_cast<float *>(blk + m1 * sizeof(int64_t) + nnz * sizeof(int32_t));
    const acc_h2d_segment segs[3] = {{rp, in->h_row_offsets, m1 * sizeof(int64_t)},
                                     {ci, in->h_column_indices, nnz * sizeof(int32_t)},
                                     {v, in->h_values, nnz * sizeof(float)}};
    TRY(acc_h2d_staged(segs, 3, s));
    dev->d_row_offsets = rp;
    dev->d_column_indices = ci;
    dev->d_values = v;
    return ACC_SUCCESS;
}

void free_outputs(acc_bittcf_gpu_output *out, cudaStream_t s) {
    void **p[] = {(void **)&out->d_block_cols,          (void **)&out->d_block_mask,
                  (void **)&out->d_block_value_offsets, (void **)&out->d_values,
                  (void **)&out->d_block_meta,          (void **)&out->d_values_tf32,
                  &out->d_csr};
    for (void **q : p) {
        acc_pool_free(*q, s);
        *q = nullptr;
    }
}

/* ---- BSR16's block count from a built BitTCF (the half plans' format model) ---- */

/* Column of slot c of block b's packed record (accspmm._tf32.pack_meta: slot c at 2c, or 2(c - 4) + 1). */
__device__ __forceinline__ int32_t slot_col(const int32_t *__restrict__ meta, int64_t b, int c) {
    return __ldg(meta + 12 * b + (c < 4 ? 2 * c : 2 * (c - 4) + 1));
}

/* Slots of block b that hold a column (a prefix: padding slots follow a window's last column). */
__device__ __forceinline__ int used_slots(const int32_t *__restrict__ meta, int64_t b) {
    const uint64_t mask =
        (uint64_t)(uint32_t)__ldg(meta + 12 * b + 8) | ((uint64_t)(uint32_t)__ldg(meta + 12 * b + 9) << 32);
    uint64_t cols = mask;
    cols |= cols >> 32;
    cols |= cols >> 16;
    cols |= cols >> 8;
    return 32 - __clz((unsigned)(cols & 0xff)); /* highest used slot + 1 */
}

/* Window w's distinct columns: ranks 0 .. d - 1 at block wo[w] + rank / 8, slot rank % 8, ascending. */
__device__ __forceinline__ int64_t window_distinct(const int32_t *__restrict__ meta,
                                                   const int64_t *__restrict__ wo, int64_t w) {
    const int64_t b0 = wo[w], b1 = wo[w + 1];
    return b1 > b0 ? 8 * (b1 - 1 - b0) + used_slots(meta, b1 - 1) : 0;
}

/* One thread per (block, slot): a column counts for its 16-row block row (windows 2r and 2r + 1) where it
 * is the first of its column block in its window, and, in window 2r, where window 2r + 1 has no column of
 * that column block (a binary search of its ascending columns).  O(T log T) for T blocks. */
__global__ void bsr16_count_kernel(const int32_t *__restrict__ meta, const int64_t *__restrict__ wo,
                                   int64_t W, unsigned long long *__restrict__ counts) {
    const int64_t nb = wo[W];
    GRID_STRIDE(e, 8 * nb) {
        const int64_t b = e >> 3;
        const int c = (int)(e & 7);
        if (c >= used_slots(meta, b)) continue;
        int64_t lo = 0, hi = W; /* the window of b: the last w with wo[w] <= b */
        while (hi - lo > 1) {
            const int64_t mid = (lo + hi) >> 1;
            (wo[mid] <= b ? lo : hi) = mid;
        }
        const int64_t w = lo;
        const int32_t g = slot_col(meta, b, c) >> 4;
        const bool first =
            c > 0 ? (slot_col(meta, b, c - 1) >> 4) != g : b == wo[w] || (slot_col(meta, b - 1, 7) >> 4) != g;
        if (!first) continue;
        if ((w & 1) == 0 && w + 1 < W) { /* the block row's other window holds this column block? */
            const int64_t b0 = wo[w + 1], d = window_distinct(meta, wo, w + 1);
            int64_t l = 0, h = d; /* the first rank with a column >= 16 g */
            while (l < h) {
                const int64_t mid = (l + h) >> 1;
                if ((slot_col(meta, b0 + (mid >> 3), (int)(mid & 7)) >> 4) < g)
                    l = mid + 1;
                else
                    h = mid;
            }
            if (l < d && (slot_col(meta, b0 + (l >> 3), (int)(l & 7)) >> 4) == g) continue;
        }
        atomicAdd(counts + (w >> 1), 1ull);
    }
}

} // namespace

extern "C" int acc_cuda_event_wait(void *event) {
    if (!event) return ACC_SUCCESS;
    const cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
    cudaEventDestroy((cudaEvent_t)event);
    return acc_cuda_status(e, "BitTCF GPU build (deferred)");
}

extern "C" void acc_cuda_event_destroy(void *event) {
    if (event) cudaEventDestroy((cudaEvent_t)event);
}

extern "C" int acc_bittcf_bsr16_count(const int32_t *d_block_meta, const int64_t *d_window_offsets, int64_t W,
                                      int64_t num_blocks, int64_t *d_counts, void *stream) {
    if (W < 0 || num_blocks < 0 || !d_window_offsets || (num_blocks > 0 && !d_block_meta) ||
        (W > 0 && !d_counts))
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t R = (W + 1) / 2;
    cudaStream_t s = (cudaStream_t)stream;
    if (R > 0) ACC_CUDA_TRY(cudaMemsetAsync(d_counts, 0, (size_t)R * sizeof(int64_t), s));
    if (num_blocks == 0) return ACC_SUCCESS;
    static_assert(sizeof(unsigned long long) == sizeof(int64_t), "64-bit counters");
    bsr16_count_kernel<<<grid_for(8 * num_blocks), kThreads, 0, s>>>(
        d_block_meta, d_window_offsets, W, reinterpret_cast<unsigned long long *>(d_counts));
    return acc_cuda_status(cudaPeekAtLastError(), "BSR16 count");
}

extern "C" int acc_cuda_fill_identity(int64_t *d_perm, int64_t n, void *stream) {
    if (n < 0 || (n > 0 && !d_perm)) return ACC_ERR_INVALID_ARGUMENT;
    if (n == 0) return ACC_SUCCESS;
    iota<<<grid_for(n), kThreads, 0, (cudaStream_t)stream>>>(n, d_perm);
    return acc_cuda_status(cudaPeekAtLastError(), "iota");
}

extern "C" int acc_bittcf_gpu_build(const acc_bittcf_gpu_input *in, acc_bittcf_gpu_output *out,
                                    void *stream) {
    const bool on_host = in && !in->d_row_offsets && !in->d_column_indices && !in->d_values;
    if (!in || !out || in->m < 0 || in->k < 0 || in->nnz < 0 || !out->d_window_offsets ||
        !out->h_window_offsets ||
        (in->nnz > 0 && !on_host && (!in->d_row_offsets || !in->d_column_indices || !in->d_values)) ||
        (in->nnz > 0 && on_host && (!in->h_row_offsets || !in->h_column_indices || !in->h_values)) ||
        (in->validate && (!on_host || !in->h_row_offsets)))
        return ACC_ERR_INVALID_ARGUMENT;
    out->d_block_cols = nullptr;
    out->d_block_mask = nullptr;
    out->d_block_value_offsets = nullptr;
    out->d_values = nullptr;
    out->d_block_meta = nullptr;
    out->d_values_tf32 = nullptr;
    out->d_csr = nullptr;
    out->num_blocks = 0;
    out->ready = nullptr;
    out->method_used = 0;
    out->canonical = 1;
    if (in->method < ACC_BITTCF_GPU_AUTO || in->method > ACC_BITTCF_GPU_RANKS)
        return ACC_ERR_INVALID_ARGUMENT;
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t W = (in->m + 7) / 8;
    const bool ranks = in->nnz > 0 && in->nnz < INT32_MAX && in->m < INT32_MAX &&
                       (in->method == ACC_BITTCF_GPU_RANKS ||
                        (in->method == ACC_BITTCF_GPU_AUTO && in->nnz <= ACC_BITTCF_GPU_RANKS_MAX));
    if (out->d_identity_perm && !ranks) { /* the ranks' first kernel writes it; else a launch of its own */
        const int st = acc_cuda_fill_identity(out->d_identity_perm, in->m, stream);
        if (st != ACC_SUCCESS) return st;
    }
    if (in->nnz == 0) { /* no blocks: zero offsets, one-element placeholders */
        if (in->validate) /* the check: every offset 0 (nothing uploaded, so on the host) */
            for (int64_t i = 0; i <= in->m; i++)
                if (in->h_row_offsets[i] != 0) return ACC_ERR_ROW_OFFSETS;
        int st =
            acc_cuda_status(cudaMemsetAsync(out->d_window_offsets, 0, (size_t)(W + 1) * sizeof(int64_t), s),
                            "cudaMemsetAsync");
        for (int64_t w = 0; w <= W; w++)
            out->h_window_offsets[w] = 0;
        if (st == ACC_SUCCESS) st = out_alloc(&out->d_block_meta, 12, s);
        if (st == ACC_SUCCESS) st = out_alloc(&out->d_values_tf32, 1, s);
        if (st == ACC_SUCCESS && out->keep_blocks) {
            st = out_alloc(&out->d_block_cols, 8, s);
            if (st == ACC_SUCCESS) st = out_alloc(&out->d_block_mask, 1, s);
            if (st == ACC_SUCCESS) st = out_alloc(&out->d_block_value_offsets, 1, s);
            if (st == ACC_SUCCESS) st = out_alloc(&out->d_values, 1, s);
            if (st == ACC_SUCCESS)
                st = acc_cuda_status(cudaMemsetAsync(out->d_block_value_offsets, 0, 8, s), "cudaMemsetAsync");
        }
        if (st == ACC_SUCCESS) st = acc_cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        if (st != ACC_SUCCESS) free_outputs(out, s);
        return st;
    }
    int st;
    {
        Temps tmp(s);
        acc_bittcf_gpu_input dev_in = *in;
        int checked = 0;
        st = on_host ? upload(in, &dev_in, out, s, tmp) : ACC_SUCCESS;
        if (st == ACC_SUCCESS) st = ranks ? build_ranks(&dev_in, out, s, tmp, &checked) : RANKS_DECLINED;
        if (st == RANKS_DECLINED && ranks &&
            out->d_identity_perm) { /* declined, maybe before its kernel ran */
            const int fst = acc_cuda_fill_identity(out->d_identity_perm, in->m, stream);
            if (fst != ACC_SUCCESS) st = fst;
        }
        if (st == RANKS_DECLINED && in->validate && !checked) {
            st = check_before_sort(&dev_in, out, s, tmp);
            if (st == ACC_SUCCESS) st = RANKS_DECLINED; /* checked: on to the sort */
        }
        if (st == RANKS_DECLINED) /* not tried, or declined */
            st = in->nnz < (int64_t(1) << 32) ? build<uint32_t>(&dev_in, out, s, tmp)
                                              : build<uint64_t>(&dev_in, out, s, tmp);
    }
    if (st != ACC_SUCCESS) {
        acc_cuda_event_destroy(out->ready);
        out->ready = nullptr;
        free_outputs(out, s);
        cudaStreamSynchronize(s);
    }
    return st;
}
