/*
 * spgemm_tiles.cu -- the Tensor-Core path of the GPU SpGEMM: C = A @ B on 8x8 bitmap tiles (the
 * tSparse design, our own implementation), products and sums in FP64.  spgemm.cu picks this path
 * where the tiles are dense enough to pay (its model), or when asked.
 *
 * Tiles.  Each operand is cut into 8x8 tiles: tile (I, J) holds rows 8I..8I+7 and columns
 * 8J..8J+7, and exists where it stores an entry.  Tile CSR, per operand (struct TileMat):
 *   row_ptr[mt+1]  tiles of tile row I: row_ptr[I] .. row_ptr[I+1]-1, ascending J
 *   col[nt]        J;  trow[nt]: I (A only)
 *   mask[nt]       bit r*8+c set where (8I+r, 8J+c) is stored (explicit zeros included:
 *                  they meet inf as NaN, as in scipy)
 *   voff[nt+1]     first value of each tile; a tile's values in ascending bit order
 *   vals[nv]       FP64 (float32 data widened exactly); duplicate entries summed in CSR order
 *   src[nnz], run[nv+1]  the caller's CSR position of each sorted entry, and where each
 *                  value's run of duplicates starts (run is absent without duplicates): new
 *                  values of the same pattern are tiled by this gather, no sort.
 * Built with one stable radix sort of (tile row, tile column, row, column) keys: O(nnz) work
 * whatever the degrees, about 40 bytes of temporaries per entry.
 *
 * Symbolic phase.  The candidate pairs of tile row I are (A_IK, B_KJ) for every tile A_IK and
 * every tile of B's tile row K.  A pair is culled when no column of A_IK holding an entry meets
 * a row of B_KJ holding one: then (and only then) its boolean product is empty.  Candidates are
 * enumerated in runs of 8 per thread (one binary search per run for its A tile, then a walk), in
 * two passes (count, then write), so the work is O(candidates) whatever the tile-row lengths.
 * Every surviving pair gets the key (I, J) of the output tile it adds to, and one stable radix
 * sort of (key, pair) groups each output tile's pairs in the order they were enumerated (A's
 * tiles by K, then B's): that order is the order of the sums, so results are deterministic.  A
 * reduction by key gives each output tile its mask (the OR of the pairs' boolean products) and
 * its pair count.  Pairs are sorted in chunks of whole tile rows of at most `chunk_pairs`
 * candidates (a tile row is never split, so one chunk holds at most max(chunk_pairs, the
 * largest tile row's candidates) <= max(chunk_pairs, B's tiles)).  Peak memory of a chunk: 1
 * byte per candidate and about 48 per surviving pair.  With one chunk and keep_pairs, the
 * sorted pairs stay in the plan and numeric does not sort again.
 *
 * C's structural pattern follows from the output tiles' masks: row r's entries are, tile by
 * tile (ascending J), the set bits of byte r%8, so columns come out sorted.  Output tiles are
 * cut into segments of at most SEG tiles of one tile row; each segment gets, per row, its
 * offset inside the row (a scan over the row's segments), so a warp can write its segment's
 * entries straight into the CSR arrays.
 *
 * Numeric phase.  One warp per segment.  For each output tile, the warp walks its pairs
 * (metadata of 32 pairs at once staged in shared memory) and keeps the 8x8 sums in the
 * mma.m8n8k4.f64 accumulator layout (lane = 4 g + t holds (g, 2t) and (g, 2t+1)).  Per pair,
 * the model (pair_path) picks:
 *   - FP64 Tensor Cores: the A tile as two 8x4 halves, the B tile as two 4x8 halves (zeros
 *     where nothing is stored), two mma.m8n8k4.f64;
 *   - CUDA cores: each lane sums, for its two outputs, the products of stored entries only
 *     (the set bits of A's row AND B's column), ascending k.
 *   A pair with a non-finite value in either tile always takes the CUDA cores: the Tensor
 *   Cores would multiply the zeros of empty slots by it (0 x inf = NaN where scipy has no
 *   product).  Otherwise the CUDA cores take pairs of at most SCALAR_MAX_PRODUCTS products,
 *   where the two mma and their eight loads cost more than a few FMAs.
 * The sums are FP64 (FP32 data: exact products, FP64 sums), rounded once to the output type;
 * the warp counts the entries that round to zero (acc_spgemm_gpu_compact drops them).
 *
 * Limits: each operand < 2^32 stored entries and < 2^32 tiles; (tile rows, tile columns) keys
 * within 64 bits.
 */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/transform_iterator.h>

#include "spgemm_internal.h"
#include "spgemm_tile.h"

namespace acc_spgemm {
namespace {

constexpr int SEG = 8; /* output tiles per numeric work item (segment) */
constexpr int SCALAR_MAX_PRODUCTS =
    4;                           /* the model: pairs with at most this many products run on CUDA cores */
constexpr int kNumericWarps = 4; /* warps per block of the numeric kernel */
constexpr int kCandidates = 8;   /* candidate pairs per thread of the enumeration */

/* ---- kernels: tiling a CSR --------------------------------------------------------------------- */

/* Each entry e gets the key (I, J, r, c) and its index; its row is found by binary search. */
template <typename IdxT>
__global__ void tile_keys(int64_t m, int64_t nnz, const IdxT *__restrict__ rp, const IdxT *__restrict__ ci,
                          int jb, uint64_t *__restrict__ keys, uint32_t *__restrict__ src) {
    GRID_STRIDE(e, nnz) {
        /* the last row whose offset is <= e */
        const uint64_t i = (uint64_t)last_le(0, m - 1, e, [&](int64_t r) { return (int64_t)rp[r]; });
        const uint64_t c = (uint64_t)ci[e];
        keys[e] = ((i >> 3) << (jb + 6)) | ((c >> 3) << 6) | ((i & 7) << 3) | (c & 7);
        src[e] = (uint32_t)e;
    }
}

/* Tile and value heads of the sorted keys (1 where a new tile / a new (row, column) starts). */
__global__ void tile_heads(int64_t nnz, const uint64_t *__restrict__ K, int64_t *__restrict__ tile_id,
                           int64_t *__restrict__ slot) {
    GRID_STRIDE(j, nnz) {
        tile_id[j] = j == 0 || (K[j] >> 6) != (K[j - 1] >> 6);
        slot[j] = j == 0 || K[j] != K[j - 1];
    }
}

/* After the inclusive scans: tile columns, rows, value offsets, masks, duplicate runs. */
__global__ void tile_fill(int64_t nnz, const uint64_t *__restrict__ K, const int64_t *__restrict__ tile_id,
                          const int64_t *__restrict__ slot, int jb, int32_t *__restrict__ col,
                          int32_t *__restrict__ trow, int64_t *__restrict__ voff, u64 *__restrict__ mask,
                          int64_t *__restrict__ run) {
    GRID_STRIDE(j, nnz) {
        const uint64_t key = K[j];
        const int64_t t = tile_id[j] - 1, s = slot[j] - 1;
        if (j == 0 || (K[j - 1] >> 6) != (key >> 6)) {
            col[t] = (int32_t)((key >> 6) & ((uint64_t(1) << jb) - 1));
            trow[t] = (int32_t)(key >> (jb + 6));
            voff[t] = s;
        }
        if (run && (j == 0 || K[j - 1] != key)) run[s] = j;
        atomicOr(mask + t, 1ull << (key & 63));
    }
}

/* A canonical operand (rows sorted, no duplicates) is tiled without a sort: eight lanes per tile
 * row, lane r walking row 8I + r; each step takes the smallest tile column J among the eight
 * cursors, and each lane consumes its entries of tile J (at most 8).  The tile's values are row
 * 0's, then row 1's, ... (ascending bit order), so they take the tile row's CSR positions in that
 * order.  Pass 1 (FILL = false) counts the tiles of each tile row; pass 2 writes them. */
template <typename IdxT, bool FILL>
__global__ void merge_tiles(int64_t m, int64_t mt, const IdxT *__restrict__ rp, const IdxT *__restrict__ ci,
                            int64_t *__restrict__ counts, const int64_t *__restrict__ tile_off,
                            int32_t *__restrict__ col, int32_t *__restrict__ trow, u64 *__restrict__ mask,
                            int64_t *__restrict__ voff, uint32_t *__restrict__ src) {
    const int64_t I = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 3;
    if (I >= mt) return; /* the eight lanes of a tile row leave together */
    const int r = threadIdx.x & 7;
    const unsigned group = 0xFFu << (threadIdx.x & 24);
    const int64_t row = 8 * I + r;
    int64_t e = row < m ? (int64_t)rp[row] : 0, e1 = row < m ? (int64_t)rp[row + 1] : 0;
    int64_t t = FILL ? tile_off[I] : 0, v = (int64_t)rp[8 * I];
    while (true) {
        int64_t J = e < e1 ? (int64_t)ci[e] >> 3 : INT64_MAX;
#pragma unroll
        for (int o = 1; o < 8; o <<= 1)
            J = min(J, (int64_t)__shfl_xor_sync(group, (long long)J, o, 8));
        if (J == INT64_MAX) break;
        int n = 0;
        uint32_t bits = 0;
        while (e + n < e1 && ((int64_t)ci[e + n] >> 3) == J) {
            bits |= 1u << ((int)ci[e + n] & 7);
            n++;
        }
        u64 mk = (u64)bits << (8 * r);
        int total = n, before = n;
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) {
            mk |= __shfl_xor_sync(group, mk, o, 8);
            total += __shfl_xor_sync(group, total, o, 8);
            const int up = __shfl_up_sync(group, before, o, 8);
            if (r >= o) before += up;
        }
        before -= n; /* entries of the rows above in this tile */
        if (FILL) {
            if (r == 0) {
                col[t] = (int32_t)J;
                trow[t] = (int32_t)I;
                mask[t] = mk;
                voff[t] = v;
            }
            for (int i = 0; i < n; i++)
                src[v + before + i] = (uint32_t)(e + i);
        }
        v += total;
        e += n;
        t++;
    }
    if (!FILL && r == 0) counts[I + 1] = t;
}

__global__ void tile_nonfinite(int64_t ntiles, const int64_t *__restrict__ voff,
                               const double *__restrict__ vals, uint8_t *__restrict__ bad) {
    GRID_STRIDE(t, ntiles) {
        uint8_t b = 0;
        for (int64_t v = voff[t]; v < voff[t + 1]; v++)
            b |= !isfinite(vals[v]);
        bad[t] = b;
    }
}

/* ---- kernels: pairs ----------------------------------------------------------------------------- */

/* Candidates of each A tile: the tiles of B's tile row col[a] (into counts[a + 1]). */
__global__ void raw_counts(int64_t nA, const int32_t *__restrict__ colA, const int64_t *__restrict__ rowptrB,
                           int64_t *__restrict__ counts) {
    GRID_STRIDE(a, nA) counts[a + 1] = rowptrB[colA[a] + 1] - rowptrB[colA[a]];
}

struct EnumArgs {
    int64_t q0, R, a0, a1, I0;
    int jbn;
    const int64_t *raw_off, *rowptrB;
    const int32_t *colA, *trowA, *colB;
    const u64 *maskA, *maskB;
};

/* Thread t takes the chunk's candidates [8t, 8t + 8): its A tile by one binary search, then a
 * walk.  A candidate survives the cull when some column of A's tile holding an entry meets a row
 * of B's holding one (exactly when the boolean product is not empty).  Pass 1 (WRITE = false)
 * counts the survivors of each thread; pass 2 writes them at the scanned offsets, with their sort
 * keys (tile row - I0, tile column of B's tile), in enumeration order. */
template <bool WRITE>
__global__ void enumerate_pairs(EnumArgs e, uint32_t *__restrict__ counts, uint64_t *__restrict__ keys,
                                u64 *__restrict__ pairs) {
    const int64_t nthreads = (e.R + kCandidates - 1) / kCandidates;
    GRID_STRIDE(t, nthreads) {
        const int64_t ql = t * kCandidates;
        int64_t q = e.q0 + ql;
        /* the last A tile whose first candidate is <= q */
        int64_t a = last_le(e.a0, e.a1 - 1, q, [&](int64_t x) { return e.raw_off[x]; }),
                aend = e.raw_off[a + 1], bbase = e.rowptrB[e.colA[a]] - e.raw_off[a];
        uint32_t cols = acc_tile_cols(e.maskA[a]);
        uint32_t n = 0, out = WRITE ? counts[t] : 0;
        const int64_t qend = e.q0 + min(ql + kCandidates, e.R);
        for (; q < qend; q++) {
            while (q >= aend) {
                a++;
                aend = e.raw_off[a + 1];
                bbase = e.rowptrB[e.colA[a]] - e.raw_off[a];
                cols = acc_tile_cols(e.maskA[a]);
            }
            const int64_t b = bbase + q;
            if (cols & acc_tile_rows(e.maskB[b])) {
                if (WRITE) {
                    keys[out] = ((uint64_t)(e.trowA[a] - e.I0) << e.jbn) | (uint64_t)e.colB[b];
                    pairs[out] = ((u64)a << 32) | (u64)b;
                    out++;
                } else {
                    n++;
                }
            }
        }
        if (!WRITE) counts[t] = n;
    }
}

struct MaskCount {
    u64 mask;
    u64 count;
};

struct PairMask {
    const u64 *maskA, *maskB;
    __device__ MaskCount operator()(u64 pr) const {
        return {acc_tile_product(maskA[pr >> 32], maskB[pr & 0xFFFFFFFFull]), 1ull};
    }
};

struct CombineMaskCount {
    __device__ MaskCount operator()(const MaskCount &x, const MaskCount &y) const {
        return {x.mask | y.mask, x.count + y.count};
    }
};

/* Output tiles of a chunk from the reduction: columns, masks, tile rows, pair counts. */
__global__ void chunk_tiles(int64_t nc, const uint64_t *__restrict__ ukeys, const MaskCount *__restrict__ agg,
                            int64_t I0, int jbn, int32_t *__restrict__ ccol, int32_t *__restrict__ ctrow,
                            u64 *__restrict__ cmask, uint32_t *__restrict__ counts) {
    GRID_STRIDE(i, nc) {
        const uint64_t key = ukeys[i];
        if (ccol) ccol[i] = (int32_t)(key & ((uint64_t(1) << jbn) - 1));
        if (ctrow) ctrow[i] = (int32_t)(I0 + (int64_t)(key >> jbn));
        if (cmask) cmask[i] = agg[i].mask;
        counts[i + 1] = (uint32_t)agg[i].count;
    }
}

/* ---- kernels: C's structure ------------------------------------------------------------------- */

__global__ void segment_counts(int64_t mt, const int64_t *__restrict__ crow_ptr,
                               int64_t *__restrict__ counts) {
    GRID_STRIDE(I, mt) counts[I + 1] = (crow_ptr[I + 1] - crow_ptr[I] + SEG - 1) / SEG;
}

/* The tile row holding segment s (the last row whose first segment is <= s). */
__device__ __forceinline__ int64_t segment_row(const int64_t *__restrict__ seg_off, int64_t lo, int64_t hi,
                                               int64_t s) {
    return last_le(lo, hi, s, [&](int64_t i) { return seg_off[i]; });
}

/* Per segment: the entries its tiles hold in each of its 8 rows. */
__global__ void segment_entries(int64_t nseg, int64_t mt, const int64_t *__restrict__ seg_off,
                                const int64_t *__restrict__ crow_ptr, const u64 *__restrict__ cmask,
                                int32_t *__restrict__ seg_pre) {
    GRID_STRIDE(s, nseg) {
        const int64_t I = segment_row(seg_off, 0, mt - 1, s);
        const int64_t t0 = crow_ptr[I] + (s - seg_off[I]) * SEG;
        const int64_t t1 = min(t0 + SEG, crow_ptr[I + 1]);
        int32_t c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t t = t0; t < t1; t++) {
            const u64 mk = cmask[t];
#pragma unroll
            for (int r = 0; r < 8; r++)
                c[r] += __popc((uint32_t)(mk >> (8 * r)) & 0xFFu);
        }
#pragma unroll
        for (int r = 0; r < 8; r++)
            seg_pre[s * 8 + r] = c[r];
    }
}

/* Per tile row: each segment's counts become its offsets inside the 8 rows (exclusive scan
 * over the row's segments), and the rows' totals go to row_counts[r + 1]. */
__global__ void segment_prefix(int64_t mt, int64_t m, const int64_t *__restrict__ seg_off,
                               int32_t *__restrict__ seg_pre, int64_t *__restrict__ row_counts) {
    GRID_STRIDE(I, mt) {
        int64_t run[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t s = seg_off[I]; s < seg_off[I + 1]; s++) {
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const int32_t c = seg_pre[s * 8 + r];
                seg_pre[s * 8 + r] = (int32_t)run[r];
                run[r] += c;
            }
        }
#pragma unroll
        for (int r = 0; r < 8; r++)
            if (8 * I + r < m) row_counts[8 * I + r + 1] = run[r];
    }
}

/* ---- the numeric kernel -------------------------------------------------------------------------- */

__device__ __forceinline__ void dmma(double &c0, double &c1, double a, double b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                 : "+d"(c0), "+d"(c1)
                 : "d"(a), "d"(b));
}

/* The value at `bit` of a tile (mask, first value voff), or 0 where nothing is stored. */
__device__ __forceinline__ double tile_at(u64 mask, int64_t voff, int bit, const double *__restrict__ vals) {
    if (!((mask >> bit) & 1ull)) return 0.0;
    return __ldg(vals + voff + __popcll(mask & ((1ull << bit) - 1ull)));
}

/* The model: 1 (CUDA cores) for a pair with a non-finite value or few products, else 0
 * (Tensor Cores); `path` forces either (ACC_SPGEMM_PATH_*), except that non-finite values
 * always take the CUDA cores. */
__device__ __forceinline__ int pair_path(u64 ma, u64 mb, int bad, int path) {
    if (bad || path == ACC_SPGEMM_PATH_SCALAR) return 1;
    if (path == ACC_SPGEMM_PATH_TENSOR) return 0;
    return acc_tile_pair_products(ma, mb) <= SCALAR_MAX_PRODUCTS;
}

struct NumericArgs {
    int64_t m, mt;
    int64_t I0, I1, seg0, seg1, c0; /* the chunk: tile rows, segments, first output tile */
    const int64_t *seg_off, *crow_ptr, *row_ptr;
    const int32_t *seg_pre, *ccol;
    const u64 *cmask;
    const uint32_t *pair_off; /* [nc_chunk + 1] */
    const u64 *pairs;
    const u64 *maskA, *maskB;
    const int64_t *voffA, *voffB;
    const double *valsA, *valsB;
    const uint8_t *badA, *badB;
    int path;
    void *cols, *vals;
    u64 *zeros;
};

template <typename ColT, typename OutT>
__global__ void __launch_bounds__(kNumericWarps * 32) numeric_kernel(NumericArgs p) {
    __shared__ u64 s_ma[kNumericWarps][32], s_mb[kNumericWarps][32];
    __shared__ int64_t s_va[kNumericWarps][32], s_vb[kNumericWarps][32];
    __shared__ int s_path[kNumericWarps][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t s = p.seg0 + (int64_t)blockIdx.x * kNumericWarps + warp;
    if (s >= p.seg1) return; /* the whole warp leaves together */
    const int64_t I = segment_row(p.seg_off, p.I0, p.I1 - 1, s);
    const int64_t t0 = p.crow_ptr[I] + (s - p.seg_off[I]) * SEG;
    const int64_t t1 = min(t0 + SEG, p.crow_ptr[I + 1]);
    const int g = lane >> 2, q = lane & 3;
    const int64_t row = 8 * I + g;
    int64_t rb = row < p.m ? p.row_ptr[row] + p.seg_pre[s * 8 + g] : 0;
    ColT *cols = static_cast<ColT *>(p.cols);
    OutT *vals = static_cast<OutT *>(p.vals);
    u64 zeros = 0;
    for (int64_t t = t0; t < t1; t++) {
        const u64 cm = p.cmask[t];
        const int64_t J = p.ccol[t];
        const int64_t p0 = p.pair_off[t - p.c0], p1 = p.pair_off[t - p.c0 + 1];
        double acc0 = 0.0, acc1 = 0.0;
        for (int64_t pb = p0; pb < p1; pb += 32) {
            const int nb = (int)min((int64_t)32, p1 - pb);
            if (lane < nb) {
                const u64 pr = p.pairs[pb + lane];
                const int64_t a = (int64_t)(pr >> 32), b = (int64_t)(pr & 0xFFFFFFFFull);
                const u64 ma = p.maskA[a], mb = p.maskB[b];
                s_ma[warp][lane] = ma;
                s_mb[warp][lane] = mb;
                s_va[warp][lane] = p.voffA[a];
                s_vb[warp][lane] = p.voffB[b];
                s_path[warp][lane] = pair_path(ma, mb, p.badA[a] | p.badB[b], p.path);
            }
            __syncwarp();
            for (int j = 0; j < nb; j++) {
                const u64 ma = s_ma[warp][j], mb = s_mb[warp][j];
                const int64_t va = s_va[warp][j], vb = s_vb[warp][j];
                if (s_path[warp][j] == 0) { /* Tensor Cores: k = 0..3, then 4..7 */
                    const double a0 = tile_at(ma, va, 8 * g + q, p.valsA);
                    const double a1 = tile_at(ma, va, 8 * g + q + 4, p.valsA);
                    const double b0 = tile_at(mb, vb, 8 * q + g, p.valsB);
                    const double b1 = tile_at(mb, vb, 8 * (q + 4) + g, p.valsB);
                    dmma(acc0, acc1, a0, b0);
                    dmma(acc0, acc1, a1, b1);
                } else { /* CUDA cores: stored entries only */
                    const uint32_t arow = (uint32_t)(ma >> (8 * g)) & 0xFFu;
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        const int c = 2 * q + i;
                        uint32_t common = arow & acc_tile_column(mb, c);
                        double acc = i ? acc1 : acc0;
                        while (common) {
                            const int kk = __ffs(common) - 1;
                            common &= common - 1;
                            const double av =
                                __ldg(p.valsA + va + __popcll(ma & ((1ull << (8 * g + kk)) - 1ull)));
                            const double bv =
                                __ldg(p.valsB + vb + __popcll(mb & ((1ull << (8 * kk + c)) - 1ull)));
                            acc = fma(av, bv, acc);
                        }
                        if (i)
                            acc1 = acc;
                        else
                            acc0 = acc;
                    }
                }
            }
            __syncwarp();
        }
        const uint32_t byte = (uint32_t)(cm >> (8 * g)) & 0xFFu;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int c = 2 * q + i;
            if ((byte >> c) & 1u) {
                const int64_t pos = rb + __popc(byte & ((1u << c) - 1u));
                const OutT v = (OutT)(i ? acc1 : acc0);
                cols[pos] = (ColT)(8 * J + c);
                vals[pos] = v;
                zeros += v == (OutT)0;
            }
        }
        rb += __popc(byte);
    }
    add_zeros(zeros, p.zeros);
}

/* ---- host: tiling ----------------------------------------------------------------------------- */

/* T's arrays for nt tiles and nv values (and nnz source positions where src); the tile rows in
 * T->trow where kept, else in tmp; *trow points at them. */
int alloc_tiles(acc_spgemm_gpu *p, TileMat *T, int64_t nt, int64_t nv, bool keep_trow, Temp<int32_t> &tmp,
                int32_t **trow, cudaStream_t s) {
    T->ntiles = nt;
    T->nvals = nv;
    TRY(p->palloc(&T->col, (size_t)nt));
    TRY(p->palloc(&T->mask, (size_t)nt));
    TRY(p->palloc(&T->voff, (size_t)nt + 1));
    TRY(p->palloc(&T->vals, (size_t)nv));
    TRY(p->palloc(&T->bad, (size_t)nt));
    if (keep_trow)
        TRY(p->palloc(&T->trow, (size_t)nt));
    else
        TRY(tmp.alloc((size_t)nt, s, &p->tr));
    *trow = keep_trow ? T->trow : tmp.p;
    return ACC_SUCCESS;
}

/* Tiles of a canonical operand without a sort (merge_tiles): count, scan, fill. */
template <typename IdxT>
int tile_merged(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *in, TileMat *T, bool keep_trow, cudaStream_t s) {
    const int64_t m = in->m, mt = T->mt, nnz = in->nnz;
    const IdxT *rp = (const IdxT *)in->d_row_offsets, *ci = (const IdxT *)in->d_column_indices;
    const unsigned blocks = (unsigned)((mt * 8 + kThreads - 1) / kThreads);
    ACC_CUDA_TRY(cudaMemsetAsync(T->row_ptr, 0, sizeof(int64_t), s));
    merge_tiles<IdxT, false><<<blocks, kThreads, 0, s>>>(m, mt, rp, ci, T->row_ptr, nullptr, nullptr, nullptr,
                                                         nullptr, nullptr, nullptr);
    LAUNCH_CHECK();
    TRY(scan_in_place(T->row_ptr + 1, mt, true, s, &p->tr));
    int64_t nt = 0;
    ACC_CUDA_TRY(cudaMemcpyAsync(&nt, T->row_ptr + mt, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    Temp<int32_t> trow_tmp;
    int32_t *trow = nullptr;
    TRY(alloc_tiles(p, T, nt, nnz, keep_trow, trow_tmp, &trow, s));
    TRY(p->palloc(&T->src, (size_t)nnz));
    merge_tiles<IdxT, true><<<blocks, kThreads, 0, s>>>(m, mt, rp, ci, nullptr, T->row_ptr, T->col, trow,
                                                        T->mask, T->voff, T->src);
    LAUNCH_CHECK();
    set_value<int64_t><<<1, 1, 0, s>>>(T->voff + nt, nnz);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

template <typename IdxT>
int tile_pattern(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *in, TileMat *T, bool keep_trow,
                 cudaStream_t s) {
    const int64_t m = in->m, k = in->k, nnz = in->nnz;
    T->m = m;
    T->k = k;
    T->nnz = nnz;
    T->mt = (m + 7) / 8;
    T->kt = (k + 7) / 8;
    const int jb = bits_for(T->kt), total = bits_for(T->mt) + jb + 6;
    if (total > 64 || nnz >= (int64_t(1) << 32)) return ACC_ERR_TOO_LARGE;
    TRY(p->palloc(&T->row_ptr, (size_t)T->mt + 1));
    if (nnz == 0) {
        ACC_CUDA_TRY(cudaMemsetAsync(T->row_ptr, 0, (size_t)(T->mt + 1) * sizeof(int64_t), s));
        TRY(p->palloc(&T->col, 1));
        TRY(p->palloc(&T->trow, 1));
        TRY(p->palloc(&T->mask, 1));
        TRY(p->palloc(&T->voff, 1));
        ACC_CUDA_TRY(cudaMemsetAsync(T->voff, 0, sizeof(int64_t), s));
        TRY(p->palloc(&T->src, 1));
        TRY(p->palloc(&T->vals, 1));
        TRY(p->palloc(&T->bad, 1));
        return ACC_SUCCESS;
    }
    if (in->canonical == 1) return tile_merged<IdxT>(p, in, T, keep_trow, s);
    Temp<uint64_t> keys0, keys1;
    Temp<uint32_t> src0, src1;
    TRY(keys0.alloc((size_t)nnz, s, &p->tr));
    TRY(keys1.alloc((size_t)nnz, s, &p->tr));
    TRY(src0.alloc((size_t)nnz, s, &p->tr));
    TRY(src1.alloc((size_t)nnz, s, &p->tr));
    tile_keys<IdxT><<<grid_for(nnz), kThreads, 0, s>>>(
        m, nnz, (const IdxT *)in->d_row_offsets, (const IdxT *)in->d_column_indices, jb, keys0.p, src0.p);
    LAUNCH_CHECK();
    cub::DoubleBuffer<uint64_t> kb(keys0.p, keys1.p);
    cub::DoubleBuffer<uint32_t> vb(src0.p, src1.p);
    size_t sort_bytes = 0, scan_bytes = 0;
    ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, kb, vb, nnz, 0, total, s));
    ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, (int64_t *)nullptr, (int64_t *)nullptr,
                                               std::max(nnz, T->mt + 1), s));
    Temp<char> temp;
    TRY(temp.alloc(std::max(sort_bytes, scan_bytes), s, &p->tr));
    ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp.p, sort_bytes, kb, vb, nnz, 0, total, s));
    const uint64_t *K = kb.Current();
    Temp<int64_t> tile_id, slot;
    TRY(tile_id.alloc((size_t)nnz, s, &p->tr));
    TRY(slot.alloc((size_t)nnz, s, &p->tr));
    tile_heads<<<grid_for(nnz), kThreads, 0, s>>>(nnz, K, tile_id.p, slot.p);
    LAUNCH_CHECK();
    size_t bytes = scan_bytes;
    ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp.p, bytes, tile_id.p, tile_id.p, nnz, s));
    bytes = scan_bytes;
    ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp.p, bytes, slot.p, slot.p, nnz, s));
    int64_t counts[2];
    ACC_CUDA_TRY(
        cudaMemcpyAsync(&counts[0], tile_id.p + nnz - 1, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaMemcpyAsync(&counts[1], slot.p + nnz - 1, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    const int64_t nt = counts[0], nv = counts[1];
    Temp<int32_t> trow_tmp;
    int32_t *trow = nullptr;
    TRY(alloc_tiles(p, T, nt, nv, keep_trow, trow_tmp, &trow, s));
    if (nv < nnz) TRY(p->palloc(&T->run, (size_t)nv + 1));
    ACC_CUDA_TRY(cudaMemsetAsync(T->mask, 0, (size_t)nt * sizeof(u64), s));
    tile_fill<<<grid_for(nnz), kThreads, 0, s>>>(nnz, K, tile_id.p, slot.p, jb, T->col, trow, T->voff,
                                                 T->mask, T->run);
    LAUNCH_CHECK();
    set_value<int64_t><<<1, 1, 0, s>>>(T->voff + nt, nv);
    LAUNCH_CHECK();
    if (T->run) {
        set_value<int64_t><<<1, 1, 0, s>>>(T->run + nv, nnz);
        LAUNCH_CHECK();
    }
    offsets_from_sorted<int32_t><<<grid_for(T->mt + 1), kThreads, 0, s>>>(T->mt, nt, trow, T->row_ptr);
    LAUNCH_CHECK();
    TRY(p->palloc(&T->src, (size_t)nnz));
    ACC_CUDA_TRY(
        cudaMemcpyAsync(T->src, vb.Current(), (size_t)nnz * sizeof(uint32_t), cudaMemcpyDeviceToDevice, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s)); /* the temporaries go back to the pool after the work */
    return ACC_SUCCESS;
}

int tile(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *in, TileMat *T, bool keep_trow, cudaStream_t s) {
    return in->index_bits == 32 ? tile_pattern<int32_t>(p, in, T, keep_trow, s)
                                : tile_pattern<int64_t>(p, in, T, keep_trow, s);
}

/* Values into tile order (FP64; duplicate entries summed in CSR order) and the non-finite flags. */
int tile_values_into(const TileMat &T, const void *d_values, acc_dtype dtype, cudaStream_t s) {
    if (T.nvals == 0) return ACC_SUCCESS;
    TRY(gather_values(d_values, dtype, T.nvals, T.src, T.run, T.vals, s));
    tile_nonfinite<<<grid_for(T.ntiles), kThreads, 0, s>>>(T.ntiles, T.voff, T.vals, T.bad);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

/* ---- host: pairs of a chunk ------------------------------------------------------------------- */

/* The surviving pairs of chunk c, sorted by output tile: keys and pairs [*T], stable. */
int chunk_sorted_pairs(acc_spgemm_gpu *p, const Chunk &c, Temp<uint64_t> &keys, Temp<u64> &pairs, int64_t *T,
                       cudaStream_t s) {
    const int64_t R = c.q1 - c.q0;
    *T = 0;
    if (R == 0) return ACC_SUCCESS;
    EnumArgs e{c.q0,         R,        c.a0,      c.a1,     c.I0,      p->jbn,   p->raw_off,
               p->B.row_ptr, p->A.col, p->A.trow, p->B.col, p->A.mask, p->B.mask};
    const int64_t nthreads = (R + kCandidates - 1) / kCandidates;
    Temp<uint32_t> counts;
    TRY(counts.alloc((size_t)nthreads + 1, s, &p->tr));
    enumerate_pairs<false><<<grid_for(nthreads), kThreads, 0, s>>>(e, counts.p, nullptr, nullptr);
    LAUNCH_CHECK();
    uint32_t last[2] = {0, 0};
    ACC_CUDA_TRY(
        cudaMemcpyAsync(&last[0], counts.p + nthreads - 1, sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
    TRY(scan_in_place(counts.p, nthreads, false, s, &p->tr));
    ACC_CUDA_TRY(
        cudaMemcpyAsync(&last[1], counts.p + nthreads - 1, sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    const int64_t t = (int64_t)last[0] + last[1];
    *T = t;
    if (t == 0) return ACC_SUCCESS;
    Temp<uint64_t> keys1;
    Temp<u64> pairs0, pairs1;
    TRY(keys.alloc((size_t)t, s, &p->tr));
    TRY(pairs0.alloc((size_t)t, s, &p->tr));
    enumerate_pairs<true><<<grid_for(nthreads), kThreads, 0, s>>>(e, counts.p, keys.p, pairs0.p);
    LAUNCH_CHECK();
    counts.release();
    TRY(keys1.alloc((size_t)t, s, &p->tr));
    TRY(pairs1.alloc((size_t)t, s, &p->tr));
    const int end_bit = std::max(1, bits_for(c.I1 - c.I0) + p->jbn);
    cub::DoubleBuffer<uint64_t> kb(keys.p, keys1.p);
    cub::DoubleBuffer<u64> vb(pairs0.p, pairs1.p);
    size_t sort_bytes = 0;
    ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, kb, vb, t, 0, end_bit, s));
    {
        Temp<char> temp;
        TRY(temp.alloc(sort_bytes, s, &p->tr));
        ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp.p, sort_bytes, kb, vb, t, 0, end_bit, s));
    }
    if (kb.Current() != keys.p) keys.swap(keys1);
    if (vb.Current() == pairs0.p)
        pairs.swap(pairs0);
    else
        pairs.swap(pairs1);
    return ACC_SUCCESS;
}

/* Groups a chunk's sorted pairs by output tile: unique keys, masks and counts [*nc]. */
int chunk_group(acc_spgemm_gpu *p, const Temp<uint64_t> &keys, const Temp<u64> &pairs, int64_t T,
                Temp<uint64_t> &ukeys, Temp<MaskCount> &agg, int64_t *nc, cudaStream_t s) {
    *nc = 0;
    if (T == 0) return ACC_SUCCESS;
    auto values = thrust::make_transform_iterator(pairs.p, PairMask{p->A.mask, p->B.mask});
    Temp<int64_t> num;
    TRY(num.alloc(1, s, &p->tr));
    TRY(ukeys.alloc((size_t)T, s, &p->tr));
    TRY(agg.alloc((size_t)T, s, &p->tr));
    size_t bytes = 0;
    ACC_CUDA_TRY(cub::DeviceReduce::ReduceByKey(nullptr, bytes, keys.p, ukeys.p, values, agg.p, num.p,
                                                CombineMaskCount(), T, s));
    {
        Temp<char> temp;
        TRY(temp.alloc(bytes, s, &p->tr));
        ACC_CUDA_TRY(cub::DeviceReduce::ReduceByKey(temp.p, bytes, keys.p, ukeys.p, values, agg.p, num.p,
                                                    CombineMaskCount(), T, s));
    }
    int64_t n = 0;
    ACC_CUDA_TRY(cudaMemcpyAsync(&n, num.p, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    *nc = n;
    return ACC_SUCCESS;
}

/* counts[1..nc] -> exclusive offsets [nc+1] in place (counts[0] = 0). */
int scan_counts(acc_spgemm_gpu *p, uint32_t *counts, int64_t nc, cudaStream_t s) {
    ACC_CUDA_TRY(cudaMemsetAsync(counts, 0, sizeof(uint32_t), s));
    return scan_in_place(counts + 1, nc, true, s, &p->tr);
}

/* Splits A's tile rows into chunks of at most chunk_pairs candidates (whole tile rows). */
int make_chunks(acc_spgemm_gpu *p, int64_t budget, cudaStream_t s) {
    const int64_t mt = p->A.mt;
    p->chunks.clear();
    if (p->raw_total <= budget) {
        p->chunks.push_back({0, mt, 0, p->A.ntiles, 0, p->raw_total, 0, 0, 0, 0, 0});
        return ACC_SUCCESS;
    }
    /* first candidate of each tile row, on the host (only for products this large) */
    std::vector<int64_t> tile_rows((size_t)mt + 1), raw((size_t)p->A.ntiles + 1);
    ACC_CUDA_TRY(cudaMemcpyAsync(tile_rows.data(), p->A.row_ptr, (size_t)(mt + 1) * sizeof(int64_t),
                                 cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaMemcpyAsync(raw.data(), p->raw_off, (size_t)(p->A.ntiles + 1) * sizeof(int64_t),
                                 cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    int64_t I = 0;
    while (I < mt) {
        const int64_t start = raw[tile_rows[I]];
        int64_t J = I + 1;
        while (J < mt && raw[tile_rows[J + 1]] - start <= budget)
            J++;
        p->chunks.push_back({I, J, tile_rows[I], tile_rows[J], start, raw[tile_rows[J]], 0, 0, 0, 0, 0});
        I = J;
    }
    return ACC_SUCCESS;
}

int64_t default_chunk_pairs(const acc_spgemm_gpu *p) {
    /* about 48 bytes per surviving pair (and 1 per candidate) at the peak of a chunk: at least
     * 2^24 candidates, more for larger operands (8 per stored entry) */
    const int64_t inputs = p->A.nnz + (p->same ? 0 : p->B.nnz);
    return std::max(int64_t(1) << 24, std::min(int64_t(1) << 31, 8 * inputs));
}

template <typename ColT, typename OutT>
int launch_numeric(acc_spgemm_gpu *p, const Chunk &c, int64_t seg0, int64_t seg1, const u64 *pairs,
                   const uint32_t *pair_off, void *cols, void *vals, cudaStream_t s) {
    const int64_t nseg = seg1 - seg0;
    if (nseg == 0) return ACC_SUCCESS;
    NumericArgs a;
    a.m = p->m;
    a.mt = p->mt;
    a.I0 = c.I0;
    a.I1 = c.I1;
    a.seg0 = seg0;
    a.seg1 = seg1;
    a.c0 = c.c0;
    a.seg_off = p->seg_off;
    a.crow_ptr = p->crow_ptr;
    a.row_ptr = p->row_ptr;
    a.seg_pre = p->seg_pre;
    a.ccol = p->ccol;
    a.cmask = p->cmask;
    a.pair_off = pair_off;
    a.pairs = pairs;
    a.maskA = p->A.mask;
    a.maskB = p->B.mask;
    a.voffA = p->A.voff;
    a.voffB = p->B.voff;
    a.valsA = p->A.vals;
    a.valsB = p->B.vals;
    a.badA = p->A.bad;
    a.badB = p->B.bad;
    a.path = p->opt.path;
    a.cols = cols;
    a.vals = vals;
    a.zeros = p->zeros;
    const int64_t blocks = (nseg + kNumericWarps - 1) / kNumericWarps;
    if (blocks > INT32_MAX) return ACC_ERR_TOO_LARGE;
    numeric_kernel<ColT, OutT><<<(unsigned)blocks, kNumericWarps * 32, 0, s>>>(a);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

template <typename ColT, typename OutT>
int numeric(acc_spgemm_gpu *p, void *cols, void *vals, cudaStream_t s) {
    PhaseTimer timer(p, PH_NUMERIC);
    for (const Chunk &c : p->chunks) {
        if (c.nc == 0) continue;
        if (p->kept_pairs) {
            TRY((
                launch_numeric<ColT, OutT>(p, c, c.seg0, c.seg1, p->kept_pairs, p->kept_off, cols, vals, s)));
            continue;
        }
        Temp<uint64_t> keys, ukeys;
        Temp<u64> pairs;
        Temp<MaskCount> agg;
        int64_t T = 0, nc = 0;
        TRY(chunk_sorted_pairs(p, c, keys, pairs, &T, s));
        TRY(chunk_group(p, keys, pairs, T, ukeys, agg, &nc, s));
        if (nc != c.nc || T != c.pairs)
            return ACC_ERR_CUDA; /* cannot happen: the same keys as the analysis */
        keys.release();
        Temp<uint32_t> off;
        TRY(off.alloc((size_t)nc + 1, s, &p->tr));
        chunk_tiles<<<grid_for(nc), kThreads, 0, s>>>(nc, ukeys.p, agg.p, c.I0, p->jbn, nullptr, nullptr,
                                                      nullptr, off.p);
        LAUNCH_CHECK();
        ukeys.release();
        agg.release();
        TRY(scan_counts(p, off.p, nc, s));
        TRY((launch_numeric<ColT, OutT>(p, c, c.seg0, c.seg1, pairs.p, off.p, cols, vals, s)));
    }
    return ACC_SUCCESS;
}

} // namespace

int tiles_analyse(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B,
                  cudaStream_t s) {
    p->mt = (p->m + 7) / 8;
    p->nt = (p->n + 7) / 8;
    p->jbn = bits_for(p->nt);
    if (bits_for(p->mt) + p->jbn > 64) return ACC_ERR_TOO_LARGE;
    {
        PhaseTimer timer(p, PH_TILE);
        TRY(tile(p, A, &p->A, true, s));
        if (p->same)
            p->B = p->A;
        else
            TRY(tile(p, B, &p->B, false, s));
    }
    if (p->A.ntiles >= (int64_t(1) << 32) || p->B.ntiles >= (int64_t(1) << 32)) return ACC_ERR_TOO_LARGE;
    PhaseTimer pairs_timer(p, PH_PAIRS);
    /* candidates of each A tile */
    const int64_t nA = p->A.ntiles;
    TRY(p->palloc(&p->raw_off, (size_t)nA + 1));
    ACC_CUDA_TRY(cudaMemsetAsync(p->raw_off, 0, sizeof(int64_t), s));
    if (nA > 0) {
        raw_counts<<<grid_for(nA), kThreads, 0, s>>>(nA, p->A.col, p->B.row_ptr, p->raw_off);
        LAUNCH_CHECK();
        TRY(scan_in_place(p->raw_off + 1, nA, true, s, &p->tr));
        ACC_CUDA_TRY(
            cudaMemcpyAsync(&p->raw_total, p->raw_off + nA, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
        ACC_CUDA_TRY(cudaStreamSynchronize(s));
    }
    const int64_t budget = p->opt.chunk_pairs > 0 ? p->opt.chunk_pairs : default_chunk_pairs(p);
    TRY(make_chunks(p, std::min(budget, (int64_t(1) << 32) - 1), s));
    const bool keep = p->opt.keep_pairs && p->chunks.size() == 1;

    /* symbolic, chunk by chunk: output tiles (columns, tile rows, masks); one chunk's arrays are
     * the plan's own, several are joined at the end */
    struct Part {
        int32_t *ccol, *ctrow;
        u64 *cmask;
        int64_t nc;
    };
    std::vector<Part> parts;
    struct PartMemory { /* frees the chunks' arrays on every exit */
        std::vector<void *> q;
        cudaStream_t s;
        ~PartMemory() {
            for (void *x : q)
                acc_pool_free(x, s);
        }
    } part_mem{{}, s};
    size_t part_bytes = 0;
    int64_t c0 = 0;
    for (Chunk &c : p->chunks) {
        Temp<uint64_t> keys, ukeys;
        Temp<u64> pairs;
        Temp<MaskCount> agg;
        int64_t T = 0, nc = 0;
        TRY(chunk_sorted_pairs(p, c, keys, pairs, &T, s));
        TRY(chunk_group(p, keys, pairs, T, ukeys, agg, &nc, s));
        c.c0 = c0;
        c.nc = nc;
        c.pairs = T;
        p->pairs_total += T;
        keys.release();
        Part part{nullptr, nullptr, nullptr, nc};
        void *q[3] = {nullptr, nullptr, nullptr};
        const size_t sizes[3] = {(size_t)(nc ? nc : 1) * 4, (size_t)(nc ? nc : 1) * 4,
                                 (size_t)(nc ? nc : 1) * 8};
        for (int i = 0; i < 3; i++) {
            TRY(acc_pool_alloc(&q[i], sizes[i], s));
            part_mem.q.push_back(q[i]);
            p->tr.add(sizes[i]);
            part_bytes += sizes[i];
        }
        part.ccol = (int32_t *)q[0];
        part.ctrow = (int32_t *)q[1];
        part.cmask = (u64 *)q[2];
        Temp<uint32_t> counts_tmp;
        uint32_t *counts = nullptr;
        if (keep) {
            TRY(p->palloc(&p->kept_off, (size_t)nc + 1));
            counts = p->kept_off;
        } else {
            TRY(counts_tmp.alloc((size_t)nc + 1, s, &p->tr));
            counts = counts_tmp.p;
        }
        if (nc > 0) {
            chunk_tiles<<<grid_for(nc), kThreads, 0, s>>>(nc, ukeys.p, agg.p, c.I0, p->jbn, part.ccol,
                                                          part.ctrow, part.cmask, counts);
            LAUNCH_CHECK();
        }
        TRY(scan_counts(p, counts, nc, s));
        if (keep) {
            TRY(p->palloc(&p->kept_pairs, (size_t)T));
            if (T > 0)
                ACC_CUDA_TRY(cudaMemcpyAsync(p->kept_pairs, pairs.p, (size_t)T * sizeof(u64),
                                             cudaMemcpyDeviceToDevice, s));
        }
        parts.push_back(part);
        c0 += nc;
    }
    p->nc = c0;
    /* the output tiles of every chunk, one after the other */
    Temp<int32_t> ctrow;
    TRY(p->palloc(&p->ccol, (size_t)p->nc));
    TRY(p->palloc(&p->cmask, (size_t)p->nc));
    TRY(ctrow.alloc((size_t)p->nc, s, &p->tr));
    for (size_t i = 0; i < parts.size(); i++) {
        const Part &pt = parts[i];
        const int64_t at = p->chunks[i].c0;
        if (pt.nc == 0) continue;
        ACC_CUDA_TRY(cudaMemcpyAsync(p->ccol + at, pt.ccol, (size_t)pt.nc * 4, cudaMemcpyDeviceToDevice, s));
        ACC_CUDA_TRY(cudaMemcpyAsync(ctrow.p + at, pt.ctrow, (size_t)pt.nc * 4, cudaMemcpyDeviceToDevice, s));
        ACC_CUDA_TRY(
            cudaMemcpyAsync(p->cmask + at, pt.cmask, (size_t)pt.nc * 8, cudaMemcpyDeviceToDevice, s));
    }
    p->tr.sub(part_bytes);
    pairs_timer.next(PH_STRUCTURE);

    /* C's tile rows, segments, and structural row offsets */
    const int64_t mt = p->mt;
    TRY(p->palloc(&p->crow_ptr, (size_t)mt + 1));
    offsets_from_sorted<int32_t><<<grid_for(mt + 1), kThreads, 0, s>>>(mt, p->nc, ctrow.p, p->crow_ptr);
    LAUNCH_CHECK();
    ctrow.release();
    TRY(p->palloc(&p->seg_off, (size_t)mt + 1));
    ACC_CUDA_TRY(cudaMemsetAsync(p->seg_off, 0, sizeof(int64_t), s));
    ACC_CUDA_TRY(cudaMemsetAsync(p->row_ptr, 0, (size_t)(p->m + 1) * sizeof(int64_t), s));
    if (mt > 0) {
        segment_counts<<<grid_for(mt), kThreads, 0, s>>>(mt, p->crow_ptr, p->seg_off);
        LAUNCH_CHECK();
        size_t bytes = 0, b2 = 0;
        ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, p->seg_off + 1, p->seg_off + 1, mt, s));
        ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, b2, p->row_ptr + 1, p->row_ptr + 1, p->m, s));
        Temp<char> temp;
        TRY(temp.alloc(std::max(bytes, b2), s, &p->tr));
        size_t use = bytes;
        ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp.p, use, p->seg_off + 1, p->seg_off + 1, mt, s));
        /* the segments of every chunk (its tile rows' first segments), and the total */
        std::vector<int64_t> bounds(p->chunks.size() + 1);
        for (size_t i = 0; i < p->chunks.size(); i++)
            ACC_CUDA_TRY(cudaMemcpyAsync(&bounds[i], p->seg_off + p->chunks[i].I0, sizeof(int64_t),
                                         cudaMemcpyDeviceToHost, s));
        ACC_CUDA_TRY(
            cudaMemcpyAsync(&bounds.back(), p->seg_off + mt, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
        ACC_CUDA_TRY(cudaStreamSynchronize(s));
        for (size_t i = 0; i < p->chunks.size(); i++) {
            p->chunks[i].seg0 = bounds[i];
            p->chunks[i].seg1 = bounds[i + 1];
        }
        p->nseg = bounds.back();
        TRY(p->palloc(&p->seg_pre, (size_t)p->nseg * 8));
        if (p->nseg > 0) {
            segment_entries<<<grid_for(p->nseg), kThreads, 0, s>>>(p->nseg, mt, p->seg_off, p->crow_ptr,
                                                                   p->cmask, p->seg_pre);
            LAUNCH_CHECK();
            segment_prefix<<<grid_for(mt), kThreads, 0, s>>>(mt, p->m, p->seg_off, p->seg_pre, p->row_ptr);
            LAUNCH_CHECK();
        }
        use = b2;
        ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp.p, use, p->row_ptr + 1, p->row_ptr + 1, p->m, s));
    }
    return ACC_SUCCESS;
}

int tiles_numeric(acc_spgemm_gpu *p, const void *a_values, const void *b_values, acc_dtype in_dtype,
                  void *cols, int c_index_bits, void *vals, acc_dtype out_dtype, cudaStream_t s) {
    {
        PhaseTimer timer(p, PH_VALUES);
        TRY(tile_values_into(p->A, a_values, in_dtype, s));
        if (!p->same) TRY(tile_values_into(p->B, b_values, in_dtype, s));
    }
    if (c_index_bits == 32)
        return out_dtype == ACC_FLOAT32 ? numeric<int32_t, float>(p, cols, vals, s)
                                        : numeric<int32_t, double>(p, cols, vals, s);
    return out_dtype == ACC_FLOAT32 ? numeric<int64_t, float>(p, cols, vals, s)
                                    : numeric<int64_t, double>(p, cols, vals, s);
}

} // namespace acc_spgemm
