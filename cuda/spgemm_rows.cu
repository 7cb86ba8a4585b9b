/*
 * spgemm_rows.cu -- the CUDA-core path of the GPU SpGEMM: C = A @ B row by row (Gustavson), for
 * products whose 8x8 tiles are too sparse for the Tensor Cores to pay (spgemm.cu's model), with
 * products and sums in FP64 and deterministic sums.
 *
 * The products of row i are (e, f) for every entry e = (i, k) of A (in its CSR order) and every
 * entry f = (k, j) of B's row k (in its order); |products(i)| = sum over A's row of B's row
 * lengths, from one scan over A's entries (pe).  Rows are cut three ways:
 *
 *   - tiny rows (at most 32 entries of A and 32 products): a warp per row expands one product
 *     per lane.  The symbolic pass counts the row's distinct columns with __match_any_sync; the
 *     numeric pass keys the products (column, product index), sorts the keys with a bitonic
 *     sort in registers (shuffles: equal columns keep their expansion order), sums each run left
 *     to right and writes it at row_offsets[row] + the runs before it.  No permutation is kept,
 *     nothing but the result touches global memory; a warp holds TINY_ROWS rows at once.
 *   - hashed rows (other rows of at most ROWS_HASH_MAX = 256 entries and products that make at most
 *     ROWS_HASH_NNZ = 64 entries of C from at least twice as many products): a warp per row.  The
 *     symbolic pass inserts the row's products, 32 at a time, in a hash table in shared memory and
 *     counts the insertions that took a free slot; the numeric pass inserts them again with their
 *     values, summed in expansion order (lanes of one slot add in lane order), then writes each entry
 *     at its place among the row's sorted columns.  The candidates are counted in a sample first; where
 *     fewer than half of the sampled ones qualify (rows that share few columns), all stay in the row
 *     groups.  No sort: kron b2's rows (100 products, 26 entries) take 0.27 + 0.47 ms where the row
 *     groups took 0.63 + 0.53 (benchmarks/NOTES.md).
 *   - other small rows (at most SMALL_MAX = 1024 products): row groups.  Group g holds the small rows
 *     whose first product, counted over small rows only (ps, 32 bits where the total fits), lies in
 *     [g stride, (g+1) stride), stride = 2049 - the largest small row: at most CAP = 2048
 *     products, consecutive in that count.  One block of 256 threads expands them, 8 per thread:
 *     where the group has at most 2048 entries of A and 2^16 rows (stage_entries), the threads
 *     locate the entries' B rows together in shared memory and two block max-scans give each
 *     product its entry and row; else one binary search per thread, then a walk.  The symbolic
 *     pass keys the products (row - first row, column) and sorts them with a stable block radix
 *     sort: each output entry's products end up adjacent, in their expansion order (scipy's
 *     order of the sums); it counts the distinct keys of each row and keeps the permutation (2
 *     bytes a product).  The numeric pass (staged_numeric) takes the products in that sorted order,
 *     sums each run sequentially and writes it at row_offsets[row] + (its index among the
 *     block's runs - the index of its row's first one), from a block scan of the run heads and a
 *     max-scan of the row starts.  No global memory but the result.
 *   - large rows, n <= rows_dense_cols() (as many columns as a block's shared memory holds): one
 *     block per row accumulates the row densely in shared memory (n doubles and an n-bit
 *     pattern), A's entries in order, each entry's B row spread over the threads, a barrier
 *     between entries (B's rows hold each column once, so no two threads meet: the sums run in
 *     scipy's order); the rows run longest first.  The symbolic pass only sets the pattern.
 *   - large rows, larger n, at most MEDIUM_MAX = 8192 products (medium): one block per row,
 *     sorted and summed like a group, in the smallest of three block sizes (2048, 4096 or 8192
 *     products) that holds the row.
 *   - larger rows (huge): batches of whole rows, at most BATCH products (a larger row alone),
 *     expanded, keyed (row in batch, column) and sorted by a device radix sort in global memory
 *     (stable), then counted or summed run by run as above.  About 40 bytes per product of a
 *     batch at the peak.
 *
 * Only the dense accumulation needs B's rows without duplicate columns (spgemm.cu's canonical
 * form, for n <= rows_dense_cols() where a row may be large: the caller's arrays when they already
 * are, else a sorted copy with a map for the values); the sorts sum duplicates like any other run.
 */
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <type_traits>

#include "spgemm_internal.h"

namespace acc_spgemm {
namespace {

constexpr int kGroupThreads = 256;
constexpr int kGroupItems = 8;
constexpr int CAP = kGroupThreads * kGroupItems; /* products of one row group */
constexpr int64_t SMALL_MAX = ROWS_SMALL_MAX;    /* a row is small with at most this many products */
static_assert(2 * SMALL_MAX == CAP, "a row group holds two small rows' worth of products");
constexpr int kMediumThreads = 512;
constexpr int kMediumItems = 16;
constexpr int64_t MEDIUM_MAX = ROWS_MEDIUM_MAX; /* products of one medium row */
static_assert(kMediumThreads * kMediumItems == MEDIUM_MAX, "the largest medium block holds a medium row");
constexpr int kRadixBits = 5;
constexpr int64_t BATCH = int64_t(1) << 23; /* products per batch of the huge rows' sort */
constexpr uint16_t HEAD = 0x8000;           /* perm: the first product of an output entry */

__device__ __forceinline__ int bits_for_device(int64_t n) { return n <= 1 ? 0 : 64 - __clzll((u64)(n - 1)); }

/* Value i of an operand held as V (the caller's float or double values, or the plan's doubles),
 * widened: products and sums run in FP64 whatever V is. */
template <typename V> __device__ __forceinline__ double value(const void *vals, int64_t i) {
    return (double)static_cast<const V *>(vals)[i];
}

/* ---- products per entry, rows' classes ------------------------------------------------------------ */

/* A prefix of products over A's entries (pe, ps), held in 64 bits, or in 32 where its total fits
 * (ps of a product with fewer than 2^32 products: half the memory). */
struct Prefix {
    const int64_t *wide = nullptr;
    const uint32_t *narrow = nullptr;
    __device__ __forceinline__ int64_t operator[](int64_t x) const {
        return wide ? wide[x] : (int64_t)narrow[x];
    }
};

template <typename T>
__global__ void entry_products(int64_t nnz, const int32_t *__restrict__ ciA, const int64_t *__restrict__ rpB,
                               T *__restrict__ c) {
    GRID_STRIDE(e, nnz) c[e + 1] = (T)(rpB[ciA[e] + 1] - rpB[ciA[e]]);
}

struct IsLarge {
    const int64_t *rpA, *pe;
    __device__ bool operator()(int64_t i) const { return pe[rpA[i + 1]] - pe[rpA[i]] > SMALL_MAX; }
};

/* The entries of large rows count no products in ps (block per large row; *nlarge on the device). */
template <typename T>
__global__ void zero_large_rows(const int64_t *__restrict__ nlarge, const int64_t *__restrict__ large,
                                const int64_t *__restrict__ rpA, T *__restrict__ c) {
    for (int64_t j = blockIdx.x; j < *nlarge; j += gridDim.x) {
        const int64_t i = large[j];
        for (int64_t e = rpA[i] + threadIdx.x; e < rpA[i + 1]; e += blockDim.x)
            c[e + 1] = 0;
    }
}

struct MaxOp {
    template <typename T> __device__ T operator()(T x, T y) const { return x > y ? x : y; }
};

/* *out = max(*out, the most products of a row in c's prefix): a block reduction, one atomic per block. */
__global__ void __launch_bounds__(kThreads)
    max_row_products(int64_t m, const int64_t *__restrict__ rpA, Prefix c, u64 *__restrict__ out) {
    using Reduce = cub::BlockReduce<u64, kThreads>;
    __shared__ typename Reduce::TempStorage tmp;
    u64 most = 0;
    GRID_STRIDE(i, m) most = max(most, (u64)(c[rpA[i + 1]] - c[rpA[i]]));
    most = Reduce(tmp).Reduce(most, MaxOp());
    if (threadIdx.x == 0 && most) atomicMax(out, most);
}

__global__ void large_products(int64_t nlarge, const int64_t *__restrict__ large,
                               const int64_t *__restrict__ rpA, const int64_t *__restrict__ pe,
                               int64_t *__restrict__ out) {
    GRID_STRIDE(j, nlarge) out[j] = pe[rpA[large[j] + 1]] - pe[rpA[large[j]]];
}

/* ---- small rows (groups) and medium rows: one block sorts their products once ---------------------- */

/* The work of one block: rows [i0, i1) whose products are [q0, q1) in `prefix`'s numbering, and
 * where their permutation starts in perm. */
struct Piece {
    int64_t i0, i1, q0, q1, pbase;
};

/* What every row kernel reads and writes (RowOperands of the plan: row_operands below). */
struct RowOperands {
    const int64_t *rpA, *rpB;
    const int32_t *ciA, *ciB;
    const void *valsA, *valsB; /* numeric only: V (float or double) each, V a kernel parameter */
    int64_t *row_nnz;          /* symbolic: entries per row */
    const int64_t *row_ptr;    /* numeric: C's row offsets */
    void *cols, *vals;         /* numeric: C's arrays */
    u64 *zeros;                /* numeric: exact zeros written (the compaction's count) */
};

struct GroupArgs : RowOperands {
    int64_t m, count;      /* blocks' pieces: row groups, or medium rows */
    const int64_t *gstart; /* groups: [count+1] their first rows (group_starts); NULL for medium rows */
    const int64_t *rows;   /* medium rows: [count] the rows; pbase[count] their offsets in perm */
    const int64_t *pbase;
    Prefix prefix; /* ps (groups: small rows only) or pe (medium rows) */
    int colbits;
    uint16_t *perm; /* symbolic: written; numeric: read.  Per product, in sorted order: the
                     * product's index in the piece | HEAD for the first of each output entry */
    int staged;     /* numeric of the row groups: staged_numeric ran, sorted_numeric takes the rest */
};

__device__ __forceinline__ Piece piece_of(const GroupArgs &a, int64_t g) {
    Piece p;
    if (a.gstart) {
        p.i0 = a.gstart[g];
        p.i1 = a.gstart[g + 1];
        p.q0 = a.prefix[a.rpA[p.i0]];
        p.q1 = a.prefix[a.rpA[p.i1]];
        p.pbase = p.q0;
    } else {
        p.i0 = a.rows[g];
        p.i1 = p.i0 + 1;
        p.q0 = a.prefix[a.rpA[p.i0]];
        p.q1 = a.prefix[a.rpA[p.i1]];
        p.pbase = a.pbase[g];
    }
    return p;
}

/* The first row of group g: the first row whose first product (numbered over small rows) is at or
 * after g stride, or m; ngroups + 1 entries.  A thread per row i <= m writes the groups whose start
 * S(i-1) < g stride <= S(i) falls on it (S(i) = ps[rpA[i]], non-decreasing; S(-1) = -1), and row m
 * also the groups past S(m): every group once, without a search. */
__global__ void group_starts(int64_t m, int64_t ngroups, int64_t stride, const int64_t *__restrict__ rpA,
                             Prefix ps, int64_t *__restrict__ gstart) {
    GRID_STRIDE(i, m + 1) {
        const int64_t lo = i == 0 ? -1 : ps[rpA[i - 1]], hi = ps[rpA[i]];
        const int64_t g1 = i == m ? ngroups : min(hi / stride, ngroups); /* the last g with g stride <= hi */
        for (int64_t g = lo < 0 ? 0 : lo / stride + 1; g <= g1; g++) /* from the first g with g stride > lo */
            gstart[g] = i;
    }
}

/* stage_entries takes a piece of at most C entries of A and 2^16 rows (16-bit entry and row
 * indices; a group may span many empty rows). */
__device__ __forceinline__ bool stageable(int64_t entries, int64_t rows, int64_t C) {
    return entries <= C && rows <= 65536;
}

/* *count += the groups that stage_entries does not take (stageable). */
__global__ void count_wide_groups(int64_t ngroups, const int64_t *__restrict__ gstart,
                                  const int64_t *__restrict__ rpA, int64_t *__restrict__ count) {
    GRID_STRIDE(g, ngroups)
    if (!stageable(rpA[gstart[g + 1]] - rpA[gstart[g]], gstart[g + 1] - gstart[g], CAP))
        atomicAdd((u64 *)count, (u64)1);
}

/* This thread's products [base, base + ITEMS) of the piece as keys (row - i0, column) and values;
 * ~0 past the piece.  One binary search for the first entry and row, then steps (a search again
 * across runs of entries or rows without products: a large row's entries, empty rows). */
template <int ITEMS, bool VALUES, typename V>
__device__ __forceinline__ void expand(const GroupArgs &a, const Piece &pc, int64_t base,
                                       uint64_t (&keys)[ITEMS], double (&vals)[ITEMS]) {
    int64_t q = pc.q0 + base;
    int64_t e = 0, r = 0, e_end = 0, r_end = 0, fbase = 0;
    const int64_t e_last = a.rpA[pc.i1] - 1;
    if (q < pc.q1) {
        e = last_le(a.rpA[pc.i0], e_last, q, [&](int64_t x) { return a.prefix[x]; });
        r = last_le(pc.i0, pc.i1 - 1, e, [&](int64_t x) { return a.rpA[x]; });
        e_end = a.prefix[e + 1];
        r_end = a.rpA[r + 1];
        fbase = a.rpB[a.ciA[e]] - a.prefix[e];
    }
#pragma unroll
    for (int t = 0; t < ITEMS; t++, q++) {
        keys[t] = ~0ull;
        if (VALUES) vals[t] = 0.0;
        if (q < pc.q1) {
            if (q >= e_end) {
                e++;
                if (q >= a.prefix[e + 1])
                    e = last_le(e + 1, e_last, q, [&](int64_t x) { return a.prefix[x]; });
                e_end = a.prefix[e + 1];
                fbase = a.rpB[a.ciA[e]] - a.prefix[e];
            }
            if (e >= r_end) {
                r++;
                if (e >= a.rpA[r + 1]) r = last_le(r + 1, pc.i1 - 1, e, [&](int64_t x) { return a.rpA[x]; });
                r_end = a.rpA[r + 1];
            }
            const int64_t f = fbase + q;
            keys[t] = ((uint64_t)(r - pc.i0) << a.colbits) | (uint64_t)a.ciB[f];
            if (VALUES) vals[t] = value<V>(a.valsA, e) * value<V>(a.valsB, f);
        }
    }
}

/* Shared memory of the cooperative expansion (stage_entries) of C products: per entry of the piece,
 * its first product's position in B's arrays less its first product in the piece (fb) and row - i0
 * (row); per product, the entry that starts there (owner), then the product's entry. */
struct Stage {
    int64_t *fb;
    uint16_t *row, *owner;
};

/* The piece's entries located for the whole block at once, where it has at most C = THREADS x ITEMS
 * of them (else false, uniformly, and nothing is written): the threads locate the entries' B rows
 * together, one entry each, and mark each entry's first product and each row's first entry in
 * shared memory; two block max-scans give every product its entry (ow: of products base + t, and in
 * st.owner) and every entry its row (st.row).  A product is then one load of B's column and value,
 * with no search and no chain of dependent loads.  Ends with a barrier. */
template <int THREADS, int ITEMS, typename ScanT>
__device__ __forceinline__ bool stage_entries(const GroupArgs &a, const Piece &pc, int64_t base,
                                              const Stage &st, typename ScanT::TempStorage &scan,
                                              int (&ow)[ITEMS]) {
    constexpr int C = THREADS * ITEMS;
    static_assert(C <= 65536, "entries and rows of a piece are 16-bit");
    const int64_t E0 = a.rpA[pc.i0], ne = a.rpA[pc.i1] - E0;
    if (!stageable(ne, pc.i1 - pc.i0, C)) return false;
    for (int j = threadIdx.x; j < C; j += THREADS) {
        st.owner[j] = 0;
        st.row[j] = 0;
    }
    __syncthreads();
    for (int64_t el = threadIdx.x; el < ne; el += THREADS) {
        const int64_t e = E0 + el, first = a.prefix[e] - pc.q0;
        if (a.prefix[e + 1] - pc.q0 > first) { /* an entry with products: the first at `first` */
            st.fb[el] = a.rpB[a.ciA[e]] - first;
            st.owner[first] = (uint16_t)el;
        }
    }
    for (int64_t r = pc.i0 + threadIdx.x; r < pc.i1; r += THREADS) {
        const int64_t e0 = a.rpA[r];
        if (a.rpA[r + 1] > e0) st.row[e0 - E0] = (uint16_t)(r - pc.i0);
    }
    __syncthreads();
    int rw[ITEMS];
#pragma unroll
    for (int t = 0; t < ITEMS; t++) {
        ow[t] = st.owner[base + t];
        rw[t] = st.row[base + t];
    }
    ScanT(scan).InclusiveScan(ow, ow, MaxOp()); /* each product's entry: the last start at or before it */
    __syncthreads();
    ScanT(scan).InclusiveScan(rw, rw, MaxOp()); /* each entry's row (base + t as an entry here) */
#pragma unroll
    for (int t = 0; t < ITEMS; t++) {
        st.row[base + t] = (uint16_t)rw[t];
        st.owner[base + t] = (uint16_t)ow[t];
    }
    __syncthreads();
    return true;
}

/* expand's keys through stage_entries (false where it does not apply).  (The symbolic pass's; the
 * numeric pass stages the entries itself: staged_numeric.) */
template <int THREADS, int ITEMS, typename ScanT>
__device__ __forceinline__ bool expand_keys(const GroupArgs &a, const Piece &pc, int64_t base,
                                            uint64_t (&keys)[ITEMS], const Stage &st,
                                            typename ScanT::TempStorage &scan) {
    int ow[ITEMS];
    if (!stage_entries<THREADS, ITEMS, ScanT>(a, pc, base, st, scan, ow)) return false;
    const int64_t span = pc.q1 - pc.q0;
#pragma unroll
    for (int t = 0; t < ITEMS; t++) {
        keys[t] = ~0ull;
        const int64_t j = base + t;
        if (j < span) {
            const int el = ow[t];
            keys[t] = ((uint64_t)st.row[el] << a.colbits) | (uint64_t)a.ciB[st.fb[el] + j];
        }
    }
    __syncthreads();
    return true;
}

/* Symbolic: sorts each piece's keys with their product indices (stable block radix sort: equal keys
 * keep their expansion order, scipy's order of the sums), writes the permutation with the run heads
 * marked, and counts each row's distinct keys.  Keys sort as 32 bits where (row, column) fit, else
 * 64 (WIDE kernels only). */
template <int THREADS, int ITEMS, bool WIDE>
__global__ void __launch_bounds__(THREADS, WIDE ? 3 : 1) sorted_symbolic(GroupArgs a) {
    using Sort32 = cub::BlockRadixSort<uint32_t, THREADS, ITEMS, uint16_t, kRadixBits>;
    using Sort64 = cub::BlockRadixSort<uint64_t, THREADS, WIDE ? ITEMS : 1, uint16_t, kRadixBits>;
    using Scan = cub::BlockScan<int, THREADS>;
    constexpr bool COOP = THREADS * ITEMS <= CAP; /* expand_keys's stage fits (static shared memory) */
    __shared__ union {
        typename Sort32::TempStorage s32;
        typename Sort64::TempStorage s64;
        uint64_t last[THREADS];
        struct {
            int64_t fb[COOP ? THREADS * ITEMS : 1];
            uint16_t row[COOP ? THREADS * ITEMS : 1], owner[COOP ? THREADS * ITEMS : 1];
        } stage;
    } sm;
    __shared__ typename Scan::TempStorage scan;
    __shared__ unsigned warp_lo[THREADS / 32], warp_hi[THREADS / 32];
    const uint64_t colmask = (uint64_t(1) << a.colbits) - 1;
    for (int64_t g = blockIdx.x; g < a.count; g += gridDim.x) {
        const Piece pc = piece_of(a, g);
        const int64_t span = pc.q1 - pc.q0;
        if (span <= 0) continue; /* uniform across the block */
        const int64_t base = (int64_t)threadIdx.x * ITEMS;
        uint64_t keys[ITEMS];
        double unused[ITEMS];
        uint16_t idx[ITEMS];
        bool expanded = false;
        if constexpr (COOP)
            expanded = expand_keys<THREADS, ITEMS, Scan>(
                a, pc, base, keys, Stage{sm.stage.fb, sm.stage.row, sm.stage.owner}, scan);
        if (!expanded) expand<ITEMS, false, double>(a, pc, base, keys, unused);
        /* the piece's columns lie in [lo, hi]: keys (row, column - lo) sort on fewer bits, in the
         * same order (often one radix pass less) */
        unsigned lo = ~0u, hi = 0;
#pragma unroll
        for (int t = 0; t < ITEMS; t++) {
            idx[t] = (uint16_t)(base + t);
            if (keys[t] != ~0ull) {
                lo = min(lo, (unsigned)(keys[t] & colmask));
                hi = max(hi, (unsigned)(keys[t] & colmask));
            }
        }
        lo = __reduce_min_sync(0xFFFFFFFFu, lo);
        hi = __reduce_max_sync(0xFFFFFFFFu, hi);
        if ((threadIdx.x & 31) == 0) {
            warp_lo[threadIdx.x >> 5] = lo;
            warp_hi[threadIdx.x >> 5] = hi;
        }
        __syncthreads();
#pragma unroll
        for (int w = 0; w < THREADS / 32; w++) {
            lo = min(lo, warp_lo[w]);
            hi = max(hi, warp_hi[w]);
        }
        const int cbits = bits_for_device((int64_t)hi - lo + 1); /* span > 0: lo <= hi */
#pragma unroll
        for (int t = 0; t < ITEMS; t++)
            if (keys[t] != ~0ull) keys[t] = ((keys[t] >> a.colbits) << cbits) | ((keys[t] & colmask) - lo);
        const int end_bit = max(cbits + bits_for_device(pc.i1 - pc.i0), 1);
        if (!WIDE || end_bit <= 32) {
            uint32_t k32[ITEMS];
#pragma unroll
            for (int t = 0; t < ITEMS; t++)
                k32[t] = (uint32_t)keys[t];
            Sort32(sm.s32).Sort(k32, idx, 0, end_bit);
#pragma unroll
            for (int t = 0; t < ITEMS; t++)
                keys[t] = k32[t];
        } else if (WIDE) {
            Sort64(sm.s64).Sort(reinterpret_cast<uint64_t(&)[WIDE ? ITEMS : 1]>(keys),
                                reinterpret_cast<uint16_t(&)[WIDE ? ITEMS : 1]>(idx), 0, end_bit);
        }
        __syncthreads();
        sm.last[threadIdx.x] = keys[ITEMS - 1];
        __syncthreads();
        uint64_t prev = threadIdx.x ? sm.last[threadIdx.x - 1] : ~0ull;
        int64_t row = -1, n = 0; /* this thread's run of heads in one row (sorted: rows ascend) */
#pragma unroll
        for (int t = 0; t < ITEMS; t++) {
            const int64_t j = base + t;
            if (j < span) {
                const bool head = j == 0 || keys[t] != prev;
                a.perm[pc.pbase + j] = (uint16_t)(idx[t] | (head ? HEAD : 0));
                if (head) {
                    const int64_t r = pc.i0 + (int64_t)(keys[t] >> cbits);
                    if (r != row) {
                        if (n) atomicAdd((unsigned long long *)&a.row_nnz[row], (unsigned long long)n);
                        row = r;
                        n = 0;
                    }
                    n++;
                }
            }
            prev = keys[t];
        }
        if (n) atomicAdd((unsigned long long *)&a.row_nnz[row], (unsigned long long)n);
        __syncthreads();
    }
}

/* Each run head's place in its row of C: its index among the piece's runs (a block scan of the
 * heads) less the index of its row's first run (a max-scan of the row starts, which `rowstart`
 * flags and this overwrites).  Ends with the second scan: `scan` needs a barrier before reuse. */
template <int ITEMS, typename ScanT>
__device__ __forceinline__ void run_places(int (&head)[ITEMS], int (&rowstart)[ITEMS], int (&place)[ITEMS],
                                           typename ScanT::TempStorage &scan) {
    int h[ITEMS], hs[ITEMS];
    ScanT(scan).ExclusiveSum(head, h); /* runs before each position */
    __syncthreads();
#pragma unroll
    for (int t = 0; t < ITEMS; t++)
        rowstart[t] = rowstart[t] ? h[t] : 0;
    ScanT(scan).InclusiveScan(rowstart, hs, MaxOp()); /* the first run of each position's row */
#pragma unroll
    for (int t = 0; t < ITEMS; t++)
        place[t] = h[t] - hs[t];
}

/* Numeric, no sort: the products' keys and values (expanded again, in their order) go to shared
 * memory; the symbolic permutation lists them in sorted order with the run heads marked; each head
 * sums its run in that order and writes it at row_offsets[row] + (its index among the piece's runs -
 * the index of its row's first run), from a block scan of the heads and a max-scan of the row
 * starts.  Shared memory: CAP (key, value, position) = 18 bytes per product (dynamic). */
template <int THREADS, int ITEMS, typename ColT, typename OutT, typename V>
__global__ void __launch_bounds__(THREADS) sorted_numeric(GroupArgs a) {
    using Scan = cub::BlockScan<int, THREADS>;
    constexpr int C = THREADS * ITEMS;
    extern __shared__ uint64_t dyn_keys[];
    uint64_t *skeys = dyn_keys;
    double *svals = reinterpret_cast<double *>(skeys + C);
    uint16_t *spos = reinterpret_cast<uint16_t *>(svals + C);
    __shared__ typename Scan::TempStorage scan;
    ColT *cols = static_cast<ColT *>(a.cols);
    OutT *out = static_cast<OutT *>(a.vals);
    const uint64_t colmask = (uint64_t(1) << a.colbits) - 1;
    u64 zeros = 0;
    for (int64_t g = blockIdx.x; g < a.count; g += gridDim.x) {
        const Piece pc = piece_of(a, g);
        const int64_t span = pc.q1 - pc.q0;
        if (span <= 0) continue; /* uniform across the block */
        if (a.staged && stageable(a.rpA[pc.i1] - a.rpA[pc.i0], pc.i1 - pc.i0, CAP))
            continue; /* staged_numeric's */
        const int64_t base = (int64_t)threadIdx.x * ITEMS;
        uint64_t keys[ITEMS];
        double vals[ITEMS];
        expand<ITEMS, true, V>(a, pc, base, keys, vals);
#pragma unroll
        for (int t = 0; t < ITEMS; t++) {
            skeys[base + t] = keys[t];
            svals[base + t] = vals[t];
            spos[base + t] = base + t < span ? a.perm[pc.pbase + base + t] : (uint16_t)0;
        }
        __syncthreads();
        int head[ITEMS], rowstart[ITEMS], place[ITEMS];
        uint64_t key[ITEMS];
#pragma unroll
        for (int t = 0; t < ITEMS; t++) {
            const int64_t j = base + t;
            const uint16_t p = spos[j];
            key[t] = skeys[p & (HEAD - 1)];
            head[t] = j < span && (p & HEAD);
            const uint64_t prev = j ? skeys[spos[j - 1] & (HEAD - 1)] : ~0ull;
            rowstart[t] = head[t] && (j == 0 || (key[t] >> a.colbits) != (prev >> a.colbits));
        }
        run_places<ITEMS, Scan>(head, rowstart, place, scan);
#pragma unroll
        for (int t = 0; t < ITEMS; t++) {
            if (!head[t]) continue;
            const int64_t j = base + t;
            double sum = svals[spos[j] & (HEAD - 1)];
            for (int64_t u = j + 1; u < span && !(spos[u] & HEAD); u++)
                sum += svals[spos[u] & (HEAD - 1)];
            const int64_t row = pc.i0 + (int64_t)(key[t] >> a.colbits);
            const int64_t pos = a.row_ptr[row] + place[t];
            const OutT v = (OutT)sum;
            cols[pos] = (ColT)(key[t] & colmask);
            out[pos] = v;
            zeros += v == (OutT)0;
        }
        __syncthreads();
    }
    add_zeros(zeros, a.zeros);
}

/* Numeric of a row group whose entries stage_entries holds (stageable; the others are
 * sorted_numeric's): each thread takes the products of sorted positions base .. base + ITEMS - 1
 * (the symbolic permutation), one load each of B's column and value from its entry's staged row
 * offset; the values go to shared memory in sorted order, and each run's head sums its run there
 * and writes it as sorted_numeric does.  No keys, no product-order staging: fewer registers and
 * 14 bytes of shared memory per product (within numeric_smem's 18). */
template <typename ColT, typename OutT, typename V>
__global__ void __launch_bounds__(kGroupThreads, 4) staged_numeric(GroupArgs a) {
    constexpr int THREADS = kGroupThreads, ITEMS = kGroupItems, C = CAP;
    using Scan = cub::BlockScan<int, THREADS>;
    extern __shared__ uint64_t dyn_keys[];
    int64_t *fb = reinterpret_cast<int64_t *>(dyn_keys); /* staged entries, then ... */
    double *sval = reinterpret_cast<double *>(dyn_keys); /* ... the values in sorted order */
    uint16_t *owner = reinterpret_cast<uint16_t *>(dyn_keys + C), *row = owner + C, *srow = owner + 2 * C;
    uint16_t *spos = reinterpret_cast<uint16_t *>(dyn_keys + 2 * C);
    __shared__ typename Scan::TempStorage scan;
    ColT *cols = static_cast<ColT *>(a.cols);
    OutT *out = static_cast<OutT *>(a.vals);
    u64 zeros = 0;
    for (int64_t g = blockIdx.x; g < a.count; g += gridDim.x) {
        const Piece pc = piece_of(a, g);
        const int64_t span = pc.q1 - pc.q0;
        if (span <= 0) continue; /* uniform across the block */
        const int64_t base = (int64_t)threadIdx.x * ITEMS;
#pragma unroll
        for (int t = 0; t < ITEMS; t++) /* read after stage_entries' barriers */
            spos[base + t] = base + t < span ? a.perm[pc.pbase + base + t] : (uint16_t)0;
        int ow[ITEMS];
        if (!stage_entries<THREADS, ITEMS, Scan>(a, pc, base, Stage{fb, row, owner}, scan, ow))
            continue; /* uniform: sorted_numeric's piece */
        const int64_t E0 = a.rpA[pc.i0];
        double v[ITEMS];
        int col[ITEMS], r[ITEMS], head[ITEMS];
#pragma unroll
        for (int t = 0; t < ITEMS; t++) {
            const int64_t j = base + t;
            v[t] = 0.0;
            col[t] = r[t] = head[t] = 0;
            if (j < span) {
                const uint16_t q = spos[j];
                const int p = q & (HEAD - 1), el = owner[p];
                const int64_t f = fb[el] + p;
                v[t] = value<V>(a.valsA, E0 + el) * value<V>(a.valsB, f);
                col[t] = a.ciB[f];
                r[t] = row[el];
                head[t] = (q & HEAD) != 0;
            }
        }
        __syncthreads(); /* fb is read: sval takes its place */
#pragma unroll
        for (int t = 0; t < ITEMS; t++) {
            sval[base + t] = v[t];
            srow[base + t] = (uint16_t)r[t];
        }
        __syncthreads();
        int rowstart[ITEMS], place[ITEMS];
#pragma unroll
        for (int t = 0; t < ITEMS; t++) {
            const int64_t j = base + t;
            rowstart[t] = head[t] && (j == 0 || r[t] != srow[j - 1]);
        }
        run_places<ITEMS, Scan>(head, rowstart, place, scan);
#pragma unroll
        for (int t = 0; t < ITEMS; t++) {
            if (!head[t]) continue;
            const int64_t j = base + t;
            double sum = sval[j];
            for (int64_t u = j + 1; u < span && !(spos[u] & HEAD); u++)
                sum += sval[u];
            const int64_t pos = a.row_ptr[pc.i0 + r[t]] + place[t];
            const OutT res = (OutT)sum;
            cols[pos] = (ColT)col[t];
            out[pos] = res;
            zeros += res == (OutT)0;
        }
        __syncthreads();
    }
    add_zeros(zeros, a.zeros);
}

template <int THREADS, int ITEMS> constexpr size_t numeric_smem() {
    return (size_t)THREADS * ITEMS * (sizeof(uint64_t) + sizeof(double) + sizeof(uint16_t));
}

/* ---- tiny rows: a warp per row, sorted in registers ------------------------------------------------ */

constexpr int64_t TINY_MAX = ROWS_TINY_MAX;
constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kTinyWarps = 8; /* warps per block of the tiny-row kernels */
static_assert(TINY_MAX == 32, "a tiny row holds one product per lane");

/* The tiny rows' entries count no products in c (entry_products' counts, before the scan into ps: they
 * are in no row group; the hashed rows' are zeroed by their symbolic pass); bit i of `tiny` is set for a
 * tiny row i (the tiny kernels skip the others), and the hash candidates are appended to `list`
 * (*count of them, in any order).
 * Row i is tiny with at most TINY_MAX entries of A and 1..TINY_MAX products, else a candidate with at
 * most hash_max entries and 1..hash_max products (list NULL: none), summed from its entries' counts in
 * c (consecutive; the large rows' are zero already), which may be pe's own array (overwritten).  A warp
 * takes 32 rows: one word of the bits. */
template <typename T>
__global__ void classify_small_rows(int64_t m, const int64_t *__restrict__ rpA, int64_t hash_max,
                                    T *__restrict__ c, uint32_t *__restrict__ tiny,
                                    uint32_t *__restrict__ list, u64 *__restrict__ count) {
    const int64_t most = max(TINY_MAX, hash_max);
    GRID_STRIDE(i, (m + 31) / 32 * 32) { /* whole warps, aligned to 32 rows: the ballot below */
        int64_t e0 = 0, e1 = 0, P = 0;
        if (i < m) {
            e0 = rpA[i];
            e1 = rpA[i + 1];
        }
        /* a lane per row (its counts are consecutive: loads unrolled, independent) */
        const bool candidate = i < m && e1 - e0 <= most;
        if (candidate) {
#pragma unroll 4
            for (int64_t e = e0; e < e1; e++)
                P += (int64_t)c[e + 1];
        }
        const bool is_tiny = candidate && e1 - e0 <= TINY_MAX && P > 0 && P <= TINY_MAX;
        const bool is_hashed = candidate && !is_tiny && P > 0 && P <= hash_max;
        if (is_tiny)
            for (int64_t e = e0; e < e1; e++)
                c[e + 1] = 0;
        const unsigned word = __ballot_sync(kFull, is_tiny), hword = __ballot_sync(kFull, is_hashed);
        const int lane = threadIdx.x & 31;
        if (lane == 0) tiny[i >> 5] = word;
        if (hword) { /* list != NULL */
            u64 at = 0;
            if (lane == 0) at = atomicAdd(count, (u64)__popc(hword));
            at = __shfl_sync(kFull, at, 0);
            if (is_hashed) list[at + __popc(hword & ((1u << lane) - 1u))] = (uint32_t)i;
        }
    }
}

struct TinyArgs : RowOperands {
    int64_t m, n;         /* rows of A, columns of B */
    const uint32_t *tiny; /* bit i: row i is tiny (classify_small_rows); NULL: every row may be */
    /* plans (acc_spgemm_gpu.tiny_place): [32 m] per tiny row i and sorted lane l, at 32 i + l, the lane
     * whose product sorts there, 0x80 where a run of equal columns starts: written by TINY_BUILD, read by
     * TINY_USE instead of sorting */
    uint8_t *place;
};

enum { TINY_SORT = 0, TINY_BUILD = 1, TINY_USE = 2 };

/* A warp takes TINY_ROWS consecutive rows at a time and runs each step for all of them before the
 * next step (branch-free: a row that is not tiny has P = 0), so that their dependent loads (row
 * offsets -> entries -> B's row offsets -> B's columns and values) are in flight together. */
constexpr int TINY_ROWS = 4;

/* Rows i0 .. i0 + TINY_ROWS - 1 hold no tiny row (by the bits; i0 a multiple of TINY_ROWS). */
__device__ __forceinline__ bool no_tiny_row(const TinyArgs &a, int64_t i0) {
    static_assert(TINY_ROWS == 4 && 32 % TINY_ROWS == 0, "a warp's rows are 4 bits of one word");
    return a.tiny && ((a.tiny[i0 >> 5] >> (i0 & 31)) & 0xFu) == 0;
}

/* The products of rows i0 .. i0 + TINY_ROWS - 1, lane p holding product p of each: key (column
 * << 5 | p), ~0 past the row's P products (P = 0 for a row that is not tiny), and its value (VALUES).
 * Lane l < len holds entry e0 + l and its B row's length (a warp scan gives each entry's first
 * product); the entry of product p is the nonempty entry whose first product is the last start at
 * or before p (`owner`: this warp's shared bytes, start -> lane, per row). */
template <bool VALUES, typename K, typename V, bool KEYS = true>
__device__ __forceinline__ void
tiny_expand(const TinyArgs &a, int64_t i0, int lane, uint8_t (*owner)[32], int64_t (&e0)[TINY_ROWS],
            int (&P)[TINY_ROWS], K (&key)[TINY_ROWS], double (&val)[TINY_ROWS], int64_t (&f)[TINY_ROWS]) {
    int64_t e1[TINY_ROWS];
#pragma unroll
    for (int r = 0; r < TINY_ROWS; r++) {
        const bool in = i0 + r < a.m && (!a.tiny || (a.tiny[(i0 + r) >> 5] >> ((i0 + r) & 31)) & 1u);
        e0[r] = in ? a.rpA[i0 + r] : 0;
        e1[r] = in ? a.rpA[i0 + r + 1] : 0;
    }
    int start[TINY_ROWS], count[TINY_ROWS];
    int64_t fbase[TINY_ROWS];
    double av[TINY_ROWS];
#pragma unroll
    for (int r = 0; r < TINY_ROWS; r++) {
        int64_t c = 0;
        fbase[r] = 0;
        av[r] = 0.0;
        if (e1[r] - e0[r] <= TINY_MAX && lane < e1[r] - e0[r]) {
            const int64_t e = e0[r] + lane;
            const int32_t j = a.ciA[e];
            fbase[r] = a.rpB[j];
            c = a.rpB[j + 1] - fbase[r];
            if (VALUES) av[r] = value<V>(a.valsA, e);
        }
        count[r] = (int)min(c, TINY_MAX + 1); /* a larger count makes the row not tiny anyway */
    }
#pragma unroll
    for (int r = 0; r < TINY_ROWS; r++) { /* inclusive warp scans of the counts */
        int x = count[r];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(kFull, x, o);
            if (lane >= o) x += y;
        }
        start[r] = x - count[r];
        const int total = __shfl_sync(kFull, x, 31);
        P[r] = total <= TINY_MAX ? total : 0;
        if (P[r] == 0) count[r] = 0;
    }
    unsigned starts[TINY_ROWS];
#pragma unroll
    for (int r = 0; r < TINY_ROWS; r++) {
        if (count[r] > 0) owner[r][start[r]] = (uint8_t)lane; /* then start < P <= 32 */
        starts[r] = __reduce_or_sync(kFull, count[r] > 0 ? 1u << start[r] : 0u);
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < TINY_ROWS; r++) {
        /* bit 0 is set where P > 0 (the first nonempty entry starts at 0); (2u << 31) - 1 is all ones */
        const int b = 31 - __clz((starts[r] & ((2u << lane) - 1u)) | 1u);
        const int src = lane < P[r] ? owner[r][b] : 0;
        f[r] = __shfl_sync(kFull, fbase[r], src) + (lane - b);
        if (VALUES) av[r] = __shfl_sync(kFull, av[r], src);
    }
    __syncwarp(); /* owner is rewritten by the next rows */
#pragma unroll
    for (int r = 0; r < TINY_ROWS; r++) {
        key[r] = ~K(0);
        if (lane < P[r]) {
            if (KEYS) key[r] = ((K)a.ciB[f[r]] << 5) | (K)lane;
            if (VALUES) val[r] = av[r] * value<V>(a.valsB, f[r]);
        }
    }
}

/* Ascending bitonic sort of one key per lane for each row (the keys are distinct but for ~0): 15
 * exchanges, one shuffle each for 32-bit keys (where the columns fit 27 bits), two for 64-bit. */
template <typename K> __device__ __forceinline__ void warp_sort(K (&key)[TINY_ROWS], int lane) {
#pragma unroll
    for (int k = 2; k <= 32; k <<= 1) {
#pragma unroll
        for (int j = k >> 1; j > 0; j >>= 1) {
            const bool keep_min = ((lane & j) == 0) == ((lane & k) == 0);
#pragma unroll
            for (int r = 0; r < TINY_ROWS; r++) {
                const K other = __shfl_xor_sync(kFull, key[r], j);
                key[r] = keep_min ? min(key[r], other) : max(key[r], other);
            }
        }
    }
}

/* Symbolic: each tiny row's distinct columns, without a sort: a lane whose column no lane below it
 * holds (__match_any_sync) is the first of its column. */
__global__ void __launch_bounds__(kTinyWarps * 32, 4) tiny_symbolic(TinyArgs a) {
    __shared__ uint8_t owners[kTinyWarps][TINY_ROWS][32];
    const int lane = threadIdx.x & 31;
    const unsigned below = (1u << lane) - 1u;
    const int64_t step = (int64_t)gridDim.x * kTinyWarps * TINY_ROWS;
    for (int64_t i0 = ((int64_t)blockIdx.x * kTinyWarps + (threadIdx.x >> 5)) * TINY_ROWS; i0 < a.m;
         i0 += step) {
        if (no_tiny_row(a, i0)) continue; /* uniform across the warp */
        int64_t e0[TINY_ROWS];
        int P[TINY_ROWS];
        uint64_t key[TINY_ROWS];
        double unused[TINY_ROWS];
        int64_t f[TINY_ROWS];
        tiny_expand<false, uint64_t, double>(a, i0, lane, owners[threadIdx.x >> 5], e0, P, key, unused, f);
#pragma unroll
        for (int r = 0; r < TINY_ROWS; r++) {
            /* a column is an int32: matched as 32 bits (a 64-bit match costs about twice as much) */
            const unsigned same = __match_any_sync(kFull, (unsigned)(key[r] >> 5));
            const unsigned first = __ballot_sync(kFull, lane < P[r] && !(same & below));
            if (lane == r && P[r] > 0) a.row_nnz[i0 + r] = __popc(first);
        }
    }
}

/* Numeric: sorted as above (equal columns keep their expansion order, scipy's order of the sums);
 * each run's head sums it left to right (its length from the heads' ballot) and writes it at
 * row_ptr[i] + the heads before it.  TINY_BUILD also keeps each sorted lane's source lane and run
 * start (a.place); TINY_USE reads them instead of loading every product's column and sorting (the same
 * sums in the same order), and loads the column of a run's head only. */
template <typename K, typename ColT, typename OutT, typename V, int MODE = TINY_SORT>
__global__ void __launch_bounds__(kTinyWarps * 32, 4) tiny_numeric(TinyArgs a) {
    __shared__ uint8_t owners[kTinyWarps][TINY_ROWS][32];
    const int lane = threadIdx.x & 31;
    const int64_t step = (int64_t)gridDim.x * kTinyWarps * TINY_ROWS;
    ColT *cols = static_cast<ColT *>(a.cols);
    OutT *out = static_cast<OutT *>(a.vals);
    u64 zeros = 0;
    for (int64_t i0 = ((int64_t)blockIdx.x * kTinyWarps + (threadIdx.x >> 5)) * TINY_ROWS; i0 < a.m;
         i0 += step) {
        if (no_tiny_row(a, i0)) continue; /* uniform across the warp */
        int64_t e0[TINY_ROWS], base[TINY_ROWS], f[TINY_ROWS];
        int P[TINY_ROWS];
        K key[TINY_ROWS];
        double val[TINY_ROWS];
        tiny_expand<true, K, V, MODE != TINY_USE>(a, i0, lane, owners[threadIdx.x >> 5], e0, P, key, val, f);
        uint8_t code[TINY_ROWS];
#pragma unroll
        for (int r = 0; r < TINY_ROWS; r++) {
            base[r] = P[r] > 0 ? a.row_ptr[i0 + r] : 0;
            if (MODE == TINY_USE) code[r] = lane < P[r] ? a.place[(i0 + r) * 32 + lane] : 0;
        }
        if (MODE != TINY_USE) warp_sort(key, lane);
#pragma unroll
        for (int r = 0; r < TINY_ROWS; r++) {
            const int src =
                MODE == TINY_USE ? code[r] & 31 : (int)(key[r] & 31); /* the sorted product's lane */
            const double v = __shfl_sync(kFull, val[r], src);
            K col = key[r] >> 5;
            bool head;
            if (MODE == TINY_USE) {
                head = lane < P[r] && (code[r] & 0x80);
                const int64_t fs = __shfl_sync(kFull, f[r], src);
                if (head) col = (K)a.ciB[fs];
            } else {
                const K prev = __shfl_up_sync(kFull, col, 1);
                head = lane < P[r] && (lane == 0 || col != prev);
                if (MODE == TINY_BUILD && lane < P[r])
                    a.place[(i0 + r) * 32 + lane] = (uint8_t)(src | (head ? 0x80 : 0));
            }
            const unsigned heads = __ballot_sync(kFull, head);
            /* a run ends at the next head or at P ((2u << 31) - 1 is all ones) */
            const unsigned later = heads & ~((2u << lane) - 1u);
            const int len = head ? (later ? __ffs(later) - 1 : P[r]) - lane : 0;
            const int longest = __reduce_max_sync(kFull, (unsigned)len);
            double sum = v;
            for (int t = 1; t < longest; t++) {
                const double w = __shfl_down_sync(kFull, v, t);
                if (t < len) sum += w;
            }
            if (head) {
                const int64_t pos = base[r] + __popc(heads & ((1u << lane) - 1u));
                const OutT res = (OutT)sum;
                cols[pos] = (ColT)col;
                out[pos] = res;
                zeros += res == (OutT)0;
            }
        }
    }
    add_zeros(zeros, a.zeros);
}

/* ---- hashed rows: a warp per row, summed in a hash table in shared memory ------------------------- */

constexpr int kHashWarps = 8;                         /* warps per block of the hashed-row kernels */
constexpr int HASH_SLOTS = 2 * ROWS_HASH_MAX;         /* symbolic: a warp's table, at most half full */
constexpr int HASH_NUMERIC_SLOTS = 2 * ROWS_HASH_NNZ; /* numeric: a warp's table, at most half full */
constexpr uint32_t kEmpty = 0xFFFFFFFFu;              /* a free slot (columns are below 2^31) */
constexpr uint32_t kDemoted = 0xFFFFFFFFu; /* a row of the list that symbolic gave to the row groups */
static_assert((HASH_SLOTS & (HASH_SLOTS - 1)) == 0 && (HASH_NUMERIC_SLOTS & (HASH_NUMERIC_SLOTS - 1)) == 0 &&
                  HASH_NUMERIC_SLOTS >= 32,
              "tables of 2^b slots");

struct HashArgs : RowOperands {
    uint32_t *list;   /* [*count] the candidate rows (classify_small_rows, in any order); symbolic sets a
                       * row it gives to the row groups to kDemoted */
    const u64 *count; /* device: [0] the list's length, [1] and [2] the sample's kept and counted rows
                       * (symbolic; the full pass counts the rows kept hashed in row_ptr[m + 2]) */
    int64_t m;
    void *c; /* symbolic: entry_products' counts before the scan (int64, c_wide, or uint32): a
              * hashed row's are zeroed */
    int c_wide;
    int mode; /* HASH_NUMERIC, or symbolic's HASH_SAMPLE then HASH_FULL */
    /* one-shot products (acc_spgemm_gpu.fused_*): the full symbolic pass (FUSED) writes each kept row's
     * sorted entries at fcols/fvals[foff[x]..] (foff[x] kNoFused where they did not fit in fcap), and
     * the numeric pass copies them; NULL foff: every row computes */
    uint32_t *foff;
    uint32_t *fcols;
    void *fvals;
    u64 fcap;
    /* plans (acc_spgemm_gpu.hash_place): PLACES_BUILD writes each kept row's products' places in its row of
     * C at place[poff[x]..] (kNoFused where place_cap would be passed; place_count the entries reserved),
     * PLACES_USE adds at those places without a table */
    uint16_t *place; /* per product: its place (bits 0-5), 0x40 on a place's first product, and its rank among
                      * the products of its place in its step of 32 (bits 7-11) */
    uint32_t *poff;
    u64 *place_count;
    u64 place_cap;
};

enum { PLACES_NONE = 0, PLACES_BUILD = 1, PLACES_USE = 2 };

constexpr uint32_t kNoFused = 0xFFFFFFFFu; /* fused_off of a row whose sums the numeric pass computes */

/* A warp's staging of 32 entries of A (hash_products): the product -> entry map of their products
 * (at most ROWS_HASH_MAX: the row's), and per entry its first product's position in B's arrays less its
 * first product in the chunk, and its value. */
struct HashStage {
    uint8_t owner[ROWS_HASH_MAX];
    int64_t fbase[32];
    double av[32];
};

/* Row i's products, 32 at a time in their expansion order (A's entries in CSR order, each one's B row
 * in its order: lane l takes product q0 + l, its entry staged in st).  slot = lookup(q, f, fresh) for
 * the row's product q, B's entry f; visit(active, slot, fresh, value, q, f) runs for every step on all
 * lanes; value = A's value x B's value (VALUES, rounded once: no fused multiply-add).  Returns the row's
 * products (at most ROWS_HASH_MAX), the same on every lane. */
template <bool VALUES, typename V, typename L, typename F>
__device__ __forceinline__ int row_products(const HashArgs &a, int64_t e0, int64_t e1, int lane,
                                            HashStage &st, L lookup, F visit) {
    int qbase = 0; /* the row's products in the chunks before */
    for (int64_t c = e0; c < e1; c += 32) {
        const int64_t e = c + lane;
        int64_t fb = 0;
        int len = 0;
        double av = 0.0;
        if (e < e1) {
            const int32_t k = a.ciA[e];
            fb = a.rpB[k];
            len = (int)(a.rpB[k + 1] - fb); /* the row has at most ROWS_HASH_MAX products */
            if (VALUES) av = value<V>(a.valsA, e);
        }
        int incl = len;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int y = __shfl_up_sync(kFull, incl, o);
            if (lane >= o) incl += y;
        }
        const int excl = incl - len, total = min(__shfl_sync(kFull, incl, 31), (int)ROWS_HASH_MAX);
        /* each entry marks its products with its lane: a product is then one byte read from its entry */
        for (int t = excl; t < min(incl, (int)ROWS_HASH_MAX); t++)
            st.owner[t] = (uint8_t)lane;
        st.fbase[lane] = fb - excl;
        if (VALUES) st.av[lane] = av;
        __syncwarp();
        for (int q0 = 0; q0 < total; q0 += 32) {
            const int q = q0 + lane;
            const bool active = q < total;
            int slot = 0;
            bool fresh = false;
            double v = 0.0;
            int64_t f = 0;
            if (active) {
                const int j = st.owner[q];
                f = st.fbase[j] + q;
                if (VALUES) v = __dmul_rn(st.av[j], value<V>(a.valsB, f));
                slot = lookup(qbase + q, f, fresh);
            }
            visit(active, slot, fresh, v, qbase + q, f);
        }
        qbase += total;
        __syncwarp(); /* the stage is read: the next chunk rewrites it */
    }
    return qbase;
}

/* row_products with each product inserted in the warp's table of T = 2^tb slots (linear probing from a
 * multiplicative hash of the column; its keys start free): `fresh` where this lane's insertion took a
 * free slot. */
template <bool VALUES, typename V, typename F>
__device__ __forceinline__ int hash_products(const HashArgs &a, int64_t e0, int64_t e1, int lane,
                                             uint32_t *keys, int tb, HashStage &st, F visit) {
    volatile uint32_t *vkeys = keys;
    const unsigned mask = (1u << tb) - 1u;
    return row_products<VALUES, V>(
        a, e0, e1, lane, st,
        [&](int, int64_t f, bool &fresh) {
            const uint32_t col = (uint32_t)a.ciB[f];
            uint32_t h = (col * 0x9E3779B1u) >> (32 - tb);
            for (;;) {
                uint32_t old = vkeys[h];
                if (old == kEmpty) {
                    old = atomicCAS(&keys[h], kEmpty, col);
                    fresh = old == kEmpty;
                }
                if (fresh || old == col) break;
                h = (h + 1) & mask;
            }
            return (int)h;
        },
        visit);
}

enum { HASH_NUMERIC = 0, HASH_SAMPLE = 1, HASH_FULL = 2 };
constexpr int64_t HASH_SAMPLE_EVERY = 16;      /* symbolic's sample: candidates of rows 0 mod 16 */
constexpr int64_t HASH_MIN_PRODUCTS = 1 << 19; /* algorithm "auto": fewer candidates' products hash none */

/* Row i (entries e0..e1) stays hashed: its entries count no products for the row groups (c). */
__device__ __forceinline__ void leave_groups(const HashArgs &a, int64_t e0, int64_t e1, int lane) {
    for (int64_t e = e0 + lane; e < e1; e += 32) {
        if (a.c_wide)
            static_cast<int64_t *>(a.c)[e + 1] = 0;
        else
            static_cast<uint32_t *>(a.c)[e + 1] = 0;
    }
}

/* The occupied slots of a warp's table of T keys moved to its front in slot order (each chunk of 32
 * read before any is written): store(from, to, load(from)) moves a slot's payload.  Returns their
 * count n; keys[n .. n + 3] become free (place_of reads 4 keys at a time). */
template <typename Load, typename Store>
__device__ __forceinline__ int compact_slots(uint32_t *keys, int T, int lane, Load load, Store store) {
    const unsigned below = (1u << lane) - 1u;
    int n = 0;
    for (int t0 = 0; t0 < T; t0 += 32) {
        const uint32_t k = keys[t0 + lane];
        const auto y = k != kEmpty ? load(t0 + lane) : decltype(load(0))(0);
        const unsigned occ = __ballot_sync(kFull, k != kEmpty);
        __syncwarp();
        if (k != kEmpty) {
            const int to = n + __popc(occ & below);
            keys[to] = k;
            store(t0 + lane, to, y);
        }
        n += __popc(occ);
    }
    if (lane < 4) keys[n + lane] = kEmpty;
    __syncwarp();
    return n;
}

/* Key k's place among the n keys compact_slots left at the front: the count of smaller ones. */
__device__ __forceinline__ int place_of(const uint32_t *keys, int n, uint32_t k) {
    const uint4 *k4 = reinterpret_cast<const uint4 *>(keys);
    int place = 0;
    for (int u = 0; u < (n + 3) / 4; u++) {
        const uint4 g = k4[u];
        place += (g.x < k) + (g.y < k) + (g.z < k) + (g.w < k);
    }
    return place;
}

/* The fused symbolic pass's kept row at list position x (nnz <= ROWS_HASH_NNZ entries: its table
 * `keys` of HASH_SLOTS slots, each occupied slot's ordinal in `ords`, the sums by ordinal): reserves nnz
 * entries of the fused arrays (none where fcap would be passed: foff[x] = kNoFused, and the numeric pass
 * sums the row) and writes the row there sorted by column, its values rounded to OutT. */
template <typename OutT>
__device__ __forceinline__ void fused_store(const HashArgs &a, int64_t x, int nnz, uint32_t *keys,
                                            uint8_t *ords, const double *sums, int lane) {
    u64 off = 0;
    if (lane == 0) {
        off = atomicAdd(const_cast<u64 *>(a.count) + 3, (u64)nnz);
        if (off + (u64)nnz > a.fcap) off = kNoFused;
        a.foff[x] = (uint32_t)off;
    }
    off = __shfl_sync(kFull, off, 0);
    if (off == kNoFused) return;
    const int n = compact_slots(
        keys, HASH_SLOTS, lane, [&](int t) { return ords[t]; },
        [&](int, int to, uint8_t o) { ords[to] = o; });
    OutT *fv = static_cast<OutT *>(a.fvals);
    for (int t = lane; t < n; t += 32) {
        const int place = place_of(keys, n, keys[t]);
        a.fcols[off + place] = keys[t];
        fv[off + place] = (OutT)sums[ords[t]];
    }
}

/* PLACES_BUILD, after row x (P products) is written: each product's place in the row (its slot's,
 * through the slot's index among the occupied ones) to a.place, at P entries reserved for the row. */
__device__ __forceinline__ void store_places(const HashArgs &a, int64_t x, int P, const uint16_t *pslot,
                                             const uint8_t *cidx, const uint8_t *plc, int lane) {
    u64 off = 0;
    if (lane == 0) {
        off = atomicAdd(a.place_count, (u64)P);
        if (off + (u64)P > a.place_cap) off = kNoFused;
        a.poff[x] = (uint32_t)off;
    }
    off = __shfl_sync(kFull, off, 0);
    __syncwarp(); /* plc and cidx are written */
    if (off == kNoFused) return;
    for (int q = lane; q < P; q += 32)
        a.place[off + q] =
            (uint16_t)(plc[cidx[pslot[q] & 0x7F]] | ((pslot[q] & 0x80) >> 1) | (pslot[q] >> 8 << 7));
}

/* Symbolic, first a sample (the candidates of rows i = 0 mod HASH_SAMPLE_EVERY: counted, nothing
 * written), then every candidate row (a warp per row): its distinct columns counted in a table of
 * HASH_SLOTS (its P <= ROWS_HASH_MAX products fill at most half).  A row of at most ROWS_HASH_NNZ entries of
 * C whose products are at least twice its entries stays hashed (row_nnz written, its entries' counts in c
 * zeroed); any other goes to the row groups (its list entry kDemoted, row_nnz left 0 for the groups'
 * count): where few products share a column the sorted groups' numeric pass is faster (see
 * benchmarks/NOTES.md).  Where fewer than half of the sampled candidates would stay, the full pass
 * does nothing and every candidate stays with the row groups (graphs whose rows share few columns: the
 * hashing would be wasted; the plan then has no hashed row and numeric does not run).
 * Numeric, every hashed row: a table of 2^tb >= 2 x its entries of C (at least 32 slots).  The sums
 * run in the products' expansion order, scipy's: within a step the lanes of one slot (__match_any_sync)
 * add in lane order, one rank at a time, and the first product of a slot assigns instead of adding (a
 * product of -0 stays -0, as in the sorted paths); then the occupied slots are compacted and each entry's
 * place in the row is the count of smaller columns.
 * FUSED (the full symbolic pass of a one-shot product, HashArgs.foff): the same sums in the same order,
 * kept per column by the order the row first saw it, and each kept row's entries written to the fused
 * arrays (fused_store); the numeric pass copies those rows (the same bits) and sums the others.
 * (ncu, H200 at its boost clock, amg_poisson (RA)·P: full symbolic 92 + numeric 162 us became 179-184 + 21.)
 */
template <bool VALUES, typename ColT, typename OutT, typename V, bool FUSED = false, int PLACES = PLACES_NONE>
__global__ void __launch_bounds__(kHashWarps * 32, VALUES ? 8 : 6) hashed_rows(HashArgs a) {
    static_assert(!(VALUES && FUSED), "FUSED is the full symbolic pass's");
    static_assert(VALUES || PLACES == PLACES_NONE, "places are the numeric pass's");
    constexpr int SLOTS = VALUES ? HASH_NUMERIC_SLOTS : HASH_SLOTS;
    __shared__ uint32_t key_table[kHashWarps][SLOTS];
    __shared__ double val_table[VALUES ? kHashWarps : 1][VALUES ? SLOTS : 1];
    __shared__ HashStage stage[kHashWarps];
    /* FUSED: each slot's column's ordinal in the row (the order the columns were first seen; 255 past
     * ROWS_HASH_NNZ: such a row is not kept) and the sums by ordinal */
    __shared__ uint8_t ord_table[FUSED ? kHashWarps : 1][FUSED ? SLOTS : 1];
    __shared__ double sum_table[FUSED ? kHashWarps : 1][FUSED ? ROWS_HASH_NNZ : 1];
    /* PLACES_BUILD: each product's slot, each slot's index among the occupied ones, their places */
    constexpr bool B = PLACES == PLACES_BUILD;
    __shared__ uint16_t pslot_table[B ? kHashWarps : 1][B ? ROWS_HASH_MAX : 1];
    __shared__ uint8_t cidx_table[B ? kHashWarps : 1][B ? SLOTS : 1];
    __shared__ uint8_t plc_table[B ? kHashWarps : 1][B ? ROWS_HASH_NNZ : 1];
    uint16_t *pslot = pslot_table[B ? threadIdx.x >> 5 : 0];
    uint8_t *cidx = cidx_table[B ? threadIdx.x >> 5 : 0], *plc = plc_table[B ? threadIdx.x >> 5 : 0];
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    uint32_t *keys = key_table[w];
    double *vals = val_table[VALUES ? w : 0];
    const unsigned below = (1u << lane) - 1u;
    ColT *cols = static_cast<ColT *>(a.cols);
    OutT *out = static_cast<OutT *>(a.vals);
    u64 zeros = 0;
    u64 *counters = const_cast<u64 *>(a.count);
    const int64_t count = (int64_t)counters[0];
    /* symbolic, full pass: hash the candidates only where at least half of the sampled ones stayed
     * (else the row groups take them all, as classify_small_rows left them) */
    if (!VALUES && a.mode == HASH_FULL && 2 * counters[1] < counters[2]) return;
    u64 kept = 0, sampled = 0; /* this warp's (lane 0) */
    /* the warps stride over the list; in the sample each takes a contiguous part instead: the list is
     * nearly in row order, so with a stride that is a multiple of HASH_SAMPLE_EVERY the sampled rows all
     * fell to one warp in HASH_SAMPLE_EVERY, which ran them one after another (amg_poisson (RA)·P: the
     * sample took 44 us, half the full pass) */
    const int64_t warps = (int64_t)gridDim.x * kHashWarps, g = (int64_t)blockIdx.x * kHashWarps + w;
    int64_t x0 = g, x1 = count, step = warps;
    if (a.mode == HASH_SAMPLE) {
        const int64_t part = (count + warps - 1) / warps;
        x0 = min(count, g * part);
        x1 = min(count, x0 + part);
        step = 1;
    }
    for (int64_t x = x0; x < x1; x += step) {
        const uint32_t row = a.list[x];
        if (VALUES && row == kDemoted) continue; /* uniform across the warp */
        /* the sample: the candidates whose index is a multiple of HASH_SAMPLE_EVERY (the list's order
         * varies between runs; the sample, and so the verdict, does not) */
        if (a.mode == HASH_SAMPLE && row % HASH_SAMPLE_EVERY != 0) continue;
        const int64_t i = row, e0 = a.rpA[i], e1 = a.rpA[i + 1];
        int tb = __ffs(SLOTS) - 1;
        int64_t base = 0;
        if constexpr (VALUES) {
            base = a.row_ptr[i];
            if (a.foff) { /* summed by the fused symbolic pass (uniform across the warp) */
                const uint32_t off = a.foff[x];
                if (off != kNoFused) {
                    const int nnz = (int)(a.row_ptr[i + 1] - base);
                    const OutT *fv = static_cast<const OutT *>(a.fvals);
                    for (int t = lane; t < nnz; t += 32) {
                        const OutT res = fv[off + t];
                        cols[base + t] = (ColT)a.fcols[off + t];
                        out[base + t] = res;
                        zeros += res == (OutT)0;
                    }
                    continue;
                }
            }
            const int nnz = (int)(a.row_ptr[i + 1] - base); /* at most ROWS_HASH_NNZ (symbolic) */
            if constexpr (PLACES == PLACES_USE) {
                const uint32_t off = a.poff[x];
                if (off != kNoFused) { /* each product's place kept by an earlier call: no table */
                    const uint16_t *pl = a.place + off;
                    row_products<true, V>(
                        a, e0, e1, lane, stage[w], [&](int q, int64_t, bool &) { return (int)pl[q]; },
                        [&](bool active, int code, bool, double v, int, int64_t f) {
                            const int place = code & 0x3F, rank = code >> 7; /* no __match_any_sync */
                            const bool first = (code & 0x40) != 0;           /* it assigns */
                            if (active && first) cols[base + place] = (ColT)a.ciB[f];
                            const int most = __reduce_max_sync(kFull, active ? (unsigned)rank : 0u);
                            for (int r = 0; r <= most; r++) {
                                if (active && rank == r) vals[place] = first ? v : __dadd_rn(vals[place], v);
                                __syncwarp();
                            }
                        });
                    for (int t = lane; t < nnz; t += 32) {
                        const OutT res = (OutT)vals[t];
                        out[base + t] = res;
                        zeros += res == (OutT)0;
                    }
                    __syncwarp(); /* vals is read: the next row may write it */
                    continue;
                }
            }
            tb = min(max(5, 33 - __clz(max(nnz, 1) - 1)), tb);
        }
        const int T = 1 << tb;
        for (int t = lane; t < T; t += 32)
            keys[t] = kEmpty;
        __syncwarp();
        if constexpr (!VALUES) {
            int fresh_count = 0;
            uint8_t *ords = ord_table[FUSED ? w : 0];
            double *sums = sum_table[FUSED ? w : 0];
            int seen = 0; /* FUSED: the row's columns so far (uniform) */
            const int products = hash_products<FUSED, V>(
                a, e0, e1, lane, keys, tb, stage[w],
                [&](bool active, int slot, bool fresh, double v, int, int64_t) {
                    fresh_count += fresh;
                    if constexpr (FUSED) { /* the numeric pass's sums, in its order (below) */
                        const unsigned fb = __ballot_sync(kFull, fresh);
                        if (fresh) {
                            const int o = seen + __popc(fb & below);
                            ords[slot] = (uint8_t)(o < ROWS_HASH_NNZ ? o : 255);
                        }
                        seen += __popc(fb);
                        __syncwarp();
                        const int o = active ? ords[slot] : 255;
                        const unsigned peers =
                            __match_any_sync(kFull, active ? (unsigned)slot : 0x80000000u | lane);
                        const bool created = (fb & peers) != 0;
                        const int rank = __popc(peers & below);
                        const int most = __reduce_max_sync(kFull, active ? (unsigned)rank : 0u);
                        for (int r = 0; r <= most; r++) {
                            if (active && rank == r && o < ROWS_HASH_NNZ)
                                sums[o] = r == 0 && created ? v : __dadd_rn(sums[o], v);
                            __syncwarp();
                        }
                    }
                });
            fresh_count = __reduce_add_sync(kFull, fresh_count);
            const bool keep = fresh_count <= ROWS_HASH_NNZ && 2 * fresh_count <= products;
            kept += keep;
            sampled++;
            if (a.mode == HASH_FULL) {
                if (keep) {
                    if (lane == 0) a.row_nnz[i] = fresh_count;
                    leave_groups(a, e0, e1, lane);
                    if constexpr (FUSED) fused_store<OutT>(a, x, fresh_count, keys, ords, sums, lane);
                } else if (lane == 0) {
                    a.list[x] = kDemoted;
                }
            }
        } else {
            const int products = hash_products<true, V>(
                a, e0, e1, lane, keys, tb, stage[w],
                [&](bool active, int slot, bool fresh, double v, int q, int64_t) {
                    const unsigned peers =
                        __match_any_sync(kFull, active ? (unsigned)slot : 0x80000000u | lane);
                    const bool created = (__ballot_sync(kFull, fresh) & peers) != 0;
                    const int rank = __popc(peers & below);
                    /* the slot, and 0x80 on its first product (the one that assigns) */
                    if (PLACES == PLACES_BUILD && active)
                        pslot[q] = (uint16_t)(slot | (created && rank == 0 ? 0x80 : 0) | rank << 8);
                    const int most = __reduce_max_sync(kFull, active ? (unsigned)rank : 0u);
                    for (int r = 0; r <= most; r++) {
                        if (active && rank == r)
                            vals[slot] = r == 0 && created ? v : __dadd_rn(vals[slot], v);
                        __syncwarp();
                    }
                });
            const int nnz = compact_slots(
                keys, T, lane, [&](int t) { return vals[t]; },
                [&](int from, int to, double y) {
                    vals[to] = y;
                    if (PLACES == PLACES_BUILD) cidx[from] = (uint8_t)to;
                });
            for (int t = lane; t < nnz; t += 32) {
                const uint32_t k = keys[t];
                const int place = place_of(keys, nnz, k);
                const OutT res = (OutT)vals[t];
                cols[base + place] = (ColT)k;
                out[base + place] = res;
                zeros += res == (OutT)0;
                if (PLACES == PLACES_BUILD) plc[t] = (uint8_t)place;
            }
            if (PLACES == PLACES_BUILD) store_places(a, x, products, pslot, cidx, plc, lane);
        }
        __syncwarp(); /* the table is read: the next row may clear it */
    }
    if (VALUES) {
        add_zeros(zeros, a.zeros);
    } else if (lane == 0 && sampled) {
        if (a.mode == HASH_SAMPLE) {
            atomicAdd(counters + 1, kept);
            atomicAdd(counters + 2, sampled);
        } else {
            atomicAdd(reinterpret_cast<u64 *>(const_cast<int64_t *>(a.row_ptr) + a.m + 2),
                      kept); /* analyse reads it */
        }
    }
}

/* ---- large rows, small n: dense accumulation in shared memory ------------------------------------ */

struct DenseArgs : RowOperands {
    int64_t n, nlarge;
    const int64_t *large;
    const int32_t
        *known; /* numeric: C's structural columns kept by the plan (acc_spgemm_gpu.known_cols), or NULL */
};

constexpr int kDenseStage = 256; /* numeric: A's entries whose B rows are located at a time */
constexpr int kDenseAhead = 8;   /* numeric: entries whose products a thread loads before adding them */

/* Threads of the dense kernels: the symbolic pass sets bits in any order (wide blocks); the numeric
 * pass adds an entry at a time with a barrier between entries, which costs less in a narrow block,
 * and B's rows are short (longer ones loop): 128 threads, or 256 where n > kDenseWideCols, whose
 * accumulator (9 bytes a column) leaves room for at most 3 blocks per SM (H100: blogcatalog 2, musae
 * 1).  H100, reuse (the numeric pass), whole call, 256 threads against 128: blogcatalog 4.08-4.25 ->
 * 3.58 ms, musae 0.81-0.87 -> 0.71-0.77, wiki-Vote 0.31-0.40 -> 0.29-0.31; ddi (n = 4,267,
 * L1/shared-bound) went 7.1 -> 8.5 ms in an earlier version, so narrow n keeps 128. */
constexpr int kDenseSymbolicThreads = 512;
constexpr int64_t kDenseWideCols = 8192;

/* One block per large row.  Symbolic: the row's pattern as n bits (every product sets one, in any
 * order: a warp per 32 entries of A, their B rows located by its lanes at once, each row over the
 * lanes), counted.  Numeric: the sums in n doubles, A's entries in order with a barrier between them,
 * each entry's B row over the threads (distinct columns), then written in column order.  The
 * entries' B rows and values are staged in shared memory kDenseStage at a time, and each thread
 * loads and multiplies its products of kDenseAhead entries and sets their bits before adding the
 * first: an entry's step is its adds and its barrier (a row of many entries runs its steps one after
 * another, and at the end alone).  KNOWN (numeric, a plan's later products): the row's columns are
 * read from a.known (the structural pattern, the same for any values), so no bit is set or scanned:
 * the same adds in the same order, the same output. */
template <bool NUMERIC, int T, typename ColT, typename OutT, typename V, bool KNOWN = false>
__global__ void __launch_bounds__(T, 1) dense_rows(DenseArgs a) {
    static_assert(NUMERIC || !KNOWN, "the kept columns serve the numeric pass only");
    using Scan = cub::BlockScan<int, T>;
    extern __shared__ double dyn[];
    double *acc = dyn;
    uint32_t *bits = NUMERIC ? reinterpret_cast<uint32_t *>(dyn + a.n) : reinterpret_cast<uint32_t *>(dyn);
    __shared__ typename Scan::TempStorage scan;
    __shared__ int64_t s_start[NUMERIC ? kDenseStage : 1];
    __shared__ int s_len[NUMERIC ? kDenseStage : 1];
    __shared__ double s_av[NUMERIC ? kDenseStage : 1];
    const int words = (int)((a.n + 31) / 32);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u64 zeros = 0;
    for (int64_t j = blockIdx.x; j < a.nlarge; j += gridDim.x) {
        const int64_t i = a.large[j], e0 = a.rpA[i], e1 = a.rpA[i + 1];
        if (!KNOWN)
            for (int w = threadIdx.x; w < words; w += T)
                bits[w] = 0;
        if (NUMERIC)
            for (int64_t c = threadIdx.x; c < a.n; c += T)
                acc[c] = 0.0;
        __syncthreads();
        if (!NUMERIC) {
            for (int64_t base = e0 + (int64_t)warp * 32; base < e1; base += T) {
                int64_t f0 = 0, f1 = 0;
                if (base + lane < e1) {
                    const int64_t k = a.ciA[base + lane];
                    f0 = a.rpB[k];
                    f1 = a.rpB[k + 1];
                }
                const int cnt = (int)min((int64_t)32, e1 - base);
                for (int t = 0; t < cnt; t++) {
                    const int64_t g0 = __shfl_sync(kFull, f0, t), g1 = __shfl_sync(kFull, f1, t);
                    for (int64_t f = g0 + lane; f < g1; f += 32) {
                        const int64_t col = a.ciB[f];
                        atomicOr(&bits[col >> 5], 1u << (col & 31));
                    }
                }
            }
        } else {
            for (int64_t c0 = e0; c0 < e1; c0 += kDenseStage) {
                const int cnt = (int)min((int64_t)kDenseStage, e1 - c0);
                for (int t = threadIdx.x; t < cnt; t += T) {
                    const int64_t k = a.ciA[c0 + t];
                    s_start[t] = a.rpB[k];
                    s_len[t] = (int)(a.rpB[k + 1] - a.rpB[k]);
                    s_av[t] = value<V>(a.valsA, c0 + t);
                }
                __syncthreads();
                for (int t0 = 0; t0 < cnt; t0 += kDenseAhead) {
                    /* the loads and products only (product, then sum: two roundings, as scipy's, no
                     * fused multiply-add): an entry's step is its adds and its barrier */
                    int col[kDenseAhead];
                    double prod[kDenseAhead];
                    unsigned longer = 0; /* bit u: entry t0 + u's B row is longer than the block */
#pragma unroll
                    for (int u = 0; u < kDenseAhead; u++) {
                        col[u] = -1;
                        prod[u] = 0.0;
                        const int len = t0 + u < cnt ? s_len[t0 + u] : 0;
                        if ((int)threadIdx.x < len) {
                            const int64_t f = s_start[t0 + u] + threadIdx.x;
                            col[u] = a.ciB[f];
                            prod[u] = __dmul_rn(s_av[t0 + u], value<V>(a.valsB, f));
                        }
                        longer |= (len > T ? 1u : 0u) << u;
                    }
                    if (!KNOWN) {
#pragma unroll
                        for (int u = 0; u < kDenseAhead; u++) /* the pattern's bits in any order */
                            if (col[u] >= 0) atomicOr(&bits[col[u] >> 5], 1u << (col[u] & 31));
                    }
#pragma unroll
                    for (int u = 0; u < kDenseAhead; u++) {
                        if (t0 + u < cnt) { /* uniform across the block */
                            if (col[u] >= 0) acc[col[u]] += prod[u];
                            if ((longer >> u) & 1u) { /* the B row's other products (distinct columns) */
                                const int len = s_len[t0 + u];
                                const double av = s_av[t0 + u];
                                for (int x = threadIdx.x + T; x < len; x += T) {
                                    const int64_t f = s_start[t0 + u] + x;
                                    const int64_t c = a.ciB[f];
                                    acc[c] += __dmul_rn(av, value<V>(a.valsB, f));
                                    if (!KNOWN) atomicOr(&bits[c >> 5], 1u << (c & 31));
                                }
                            }
                            __syncthreads();
                        }
                    }
                }
            }
        }
        __syncthreads();
        if (KNOWN) { /* the row's columns as kept: ascending, as the bits would give them */
            ColT *cols = static_cast<ColT *>(a.cols);
            OutT *out = static_cast<OutT *>(a.vals);
            for (int64_t pos = a.row_ptr[i] + threadIdx.x; pos < a.row_ptr[i + 1]; pos += T) {
                const int32_t col = a.known[pos];
                const OutT v = (OutT)acc[col];
                cols[pos] = (ColT)col;
                out[pos] = v;
                zeros += v == (OutT)0;
            }
            __syncthreads();
            continue;
        }
        /* thread t compacts words [t W, t W + W) of the pattern, W = ceil(words / threads) */
        const int per = (words + T - 1) / T, w0 = (int)threadIdx.x * per;
        const int w1 = min(w0 + per, words);
        int count = 0, before = 0, total = 0;
        for (int w = w0; w < w1; w++)
            count += __popc(bits[w]);
        Scan(scan).ExclusiveSum(count, before, total);
        if (!NUMERIC) {
            if (threadIdx.x == 0) a.row_nnz[i] = total;
        } else {
            ColT *cols = static_cast<ColT *>(a.cols);
            OutT *out = static_cast<OutT *>(a.vals);
            int64_t pos = a.row_ptr[i] + before;
            for (int w = w0; w < w1; w++) {
                for (uint32_t x = bits[w]; x; x &= x - 1) {
                    const int64_t col = (int64_t)w * 32 + (__ffs(x) - 1);
                    const OutT v = (OutT)acc[col];
                    cols[pos] = (ColT)col;
                    out[pos] = v;
                    zeros += v == (OutT)0;
                    pos++;
                }
            }
        }
        __syncthreads();
    }
    if (NUMERIC) {
        add_zeros(zeros, a.zeros);
    }
}

/* ---- large rows, large n: batches sorted in global memory ----------------------------------------- */

struct BatchArgs {
    int64_t j0, j1, base, count; /* rows large[j0 .. j1), products [base, base + count) of LU's numbering */
    const int64_t *large, *LU, *rpA, *pe, *rpB;
    const int32_t *ciA, *ciB;
    const void *valsA, *valsB; /* V each */
    int colbits;
};

/* Thread t expands products [8t, 8t + 8) of the batch: its row by binary search over LU, its entry
 * over pe, then a walk. */
template <bool VALUES, typename V>
__global__ void batch_expand(BatchArgs b, uint64_t *__restrict__ keys, double *__restrict__ vals) {
    const int64_t nthreads = (b.count + 7) / 8;
    GRID_STRIDE(t, nthreads) {
        int64_t q = b.base + t * 8;
        const int64_t qend = b.base + min(t * 8 + 8, b.count);
        int64_t j = last_le(b.j0, b.j1 - 1, q, [&](int64_t x) { return b.LU[x]; });
        int64_t i = b.large[j];
        int64_t e = last_le(b.rpA[i], b.rpA[i + 1] - 1, q - b.LU[j] + b.pe[b.rpA[i]],
                            [&](int64_t x) { return b.pe[x]; });
        for (; q < qend; q++) {
            if (q >= b.LU[j + 1]) { /* the next large row (each holds more than SMALL_MAX products) */
                j++;
                i = b.large[j];
                e = last_le(b.rpA[i], b.rpA[i + 1] - 1, b.pe[b.rpA[i]], [&](int64_t x) { return b.pe[x]; });
            }
            const int64_t local = q - b.LU[j] + b.pe[b.rpA[i]]; /* q in pe's numbering */
            if (local >= b.pe[e + 1]) { /* a step, else a search over entries without products */
                e++;
                if (local >= b.pe[e + 1])
                    e = last_le(e + 1, b.rpA[i + 1] - 1, local, [&](int64_t x) { return b.pe[x]; });
            }
            const int64_t f = b.rpB[b.ciA[e]] + (local - b.pe[e]);
            const int64_t out = q - b.base;
            keys[out] = ((uint64_t)(j - b.j0) << b.colbits) | (uint64_t)b.ciB[f];
            if (VALUES) vals[out] = value<V>(b.valsA, e) * value<V>(b.valsB, f);
        }
    }
}

/* Symbolic: each run of equal keys adds one entry to its row (one atomic per row per warp). */
__global__ void batch_count(int64_t count, const uint64_t *__restrict__ keys, int colbits, int64_t j0,
                            const int64_t *__restrict__ large, int64_t *__restrict__ row_nnz) {
    const int64_t nthreads = ((count + 31) / 32) * 32; /* whole warps */
    GRID_STRIDE(t, nthreads) {
        const bool head = t < count && (t == 0 || keys[t] != keys[t - 1]);
        const uint64_t row = t < count ? keys[t] >> colbits : ~0ull;
        const unsigned peers =
            __match_any_sync(0xFFFFFFFFu, head ? row : ~0ull); /* whole warps: see nthreads */
        const unsigned heads = __ballot_sync(0xFFFFFFFFu, head) & peers;
        if (head && (threadIdx.x & 31) == __ffs(heads) - 1)
            atomicAdd((unsigned long long *)&row_nnz[large[j0 + (int64_t)row]],
                      (unsigned long long)__popc(heads));
    }
}

__global__ void batch_heads(int64_t count, const uint64_t *__restrict__ keys, int64_t *__restrict__ H) {
    GRID_STRIDE(t, count) H[t] = t == 0 || keys[t] != keys[t - 1];
}

/* first[r] = the run index of row r's first run (after H's inclusive scan). */
__global__ void batch_row_first(int64_t count, const uint64_t *__restrict__ keys, int colbits,
                                const int64_t *__restrict__ H, int64_t *__restrict__ first) {
    GRID_STRIDE(t, count)
    if (t == 0 || (keys[t] >> colbits) != (keys[t - 1] >> colbits)) first[keys[t] >> colbits] = H[t] - 1;
}

template <typename ColT, typename OutT>
__global__ void batch_write(int64_t count, const uint64_t *__restrict__ keys, const double *__restrict__ vals,
                            const int64_t *__restrict__ H, const int64_t *__restrict__ first, int colbits,
                            int64_t j0, const int64_t *__restrict__ large,
                            const int64_t *__restrict__ row_ptr, ColT *__restrict__ cols,
                            OutT *__restrict__ out, u64 *__restrict__ zeros) {
    const uint64_t colmask = (uint64_t(1) << colbits) - 1;
    u64 z = 0;
    GRID_STRIDE(t, count) {
        if (t > 0 && keys[t] == keys[t - 1]) continue;
        double sum = vals[t];
        for (int64_t u = t + 1; u < count && keys[u] == keys[t]; u++)
            sum += vals[u];
        const int64_t r = (int64_t)(keys[t] >> colbits);
        const int64_t pos = row_ptr[large[j0 + r]] + (H[t] - 1 - first[r]);
        const OutT v = (OutT)sum;
        cols[pos] = (ColT)(keys[t] & colmask);
        out[pos] = v;
        z += v == (OutT)0;
    }
    if (z) atomicAdd(zeros, z);
}

/* ---- host ---------------------------------------------------------------------------------------- */

int64_t group_grid(int64_t count) { return std::min<int64_t>(std::max<int64_t>(count, 1), 1 << 20); }

Prefix small_prefix(const acc_spgemm_gpu *p) { return Prefix{p->ps, p->ps32}; }

/* The plan's operands for the row kernels; C's arrays (cols, vals) are set by the numeric phase. */
RowOperands row_operands(const acc_spgemm_gpu *p, const void *valsA, const void *valsB) {
    RowOperands o;
    o.rpA = p->RA.rp;
    o.rpB = p->RB.rp;
    o.ciA = p->RA.ci;
    o.ciB = p->RB.ci;
    o.valsA = valsA;
    o.valsB = valsB;
    o.row_nnz = p->row_ptr + 1;
    o.row_ptr = p->row_ptr;
    o.cols = nullptr;
    o.vals = nullptr;
    o.zeros = p->zeros;
    return o;
}

GroupArgs sorted_args(acc_spgemm_gpu *p, bool medium, const void *valsA, const void *valsB) {
    GroupArgs a;
    static_cast<RowOperands &>(a) = row_operands(p, valsA, valsB);
    a.m = p->m;
    a.count = medium ? p->nmedium : p->ngroups;
    a.gstart = medium ? nullptr : p->gstart;
    a.rows = medium ? p->medium_rows : nullptr;
    a.pbase = medium ? p->medium_prefix : nullptr;
    a.prefix = medium ? Prefix{p->pe, nullptr} : small_prefix(p);
    a.colbits = std::max(1, bits_for(p->n));
    a.perm = medium ? p->perm_medium : p->perm_small;
    a.staged = 0;
    return a;
}

/* The medium rows of tier t (rows sorted by tier in split_large; perm offsets stay absolute). */
GroupArgs tier_args(const acc_spgemm_gpu *p, GroupArgs a, int t) {
    int64_t off = 0;
    for (int u = 0; u < t; u++)
        off += p->medium_tier[u];
    a.rows += off;
    a.pbase += off;
    a.count = p->medium_tier[t];
    return a;
}

template <int THREADS, int ITEMS, bool WIDE> int launch_sorted_symbolic(const GroupArgs &a, cudaStream_t s) {
    if (a.count == 0) return ACC_SUCCESS;
    sorted_symbolic<THREADS, ITEMS, WIDE><<<(unsigned)group_grid(a.count), THREADS, 0, s>>>(a);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

int launch_symbolic(acc_spgemm_gpu *p, bool medium, cudaStream_t s) {
    const GroupArgs a = sorted_args(p, medium, nullptr, nullptr);
    if (!medium) return launch_sorted_symbolic<kGroupThreads, kGroupItems, true>(a, s);
    TRY((launch_sorted_symbolic<kGroupThreads, kGroupItems, false>(tier_args(p, a, 0), s)));
    TRY((launch_sorted_symbolic<kMediumThreads, kMediumItems / 2, false>(tier_args(p, a, 1), s)));
    return launch_sorted_symbolic<kMediumThreads, kMediumItems, false>(tier_args(p, a, 2), s);
}

/* kernel<<<grid, threads, bytes, s>>>(args), its dynamic shared memory allowed up to `bytes` first. */
template <typename Args>
int launch_with_smem(void (*kernel)(Args), unsigned grid, int threads, size_t bytes, cudaStream_t s,
                     const Args &args) {
    ACC_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    kernel<<<grid, threads, bytes, s>>>(args);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

template <int THREADS, int ITEMS, typename ColT, typename OutT, typename V>
int launch_sorted_numeric(const GroupArgs &a, cudaStream_t s) {
    if (a.count == 0) return ACC_SUCCESS;
    return launch_with_smem(sorted_numeric<THREADS, ITEMS, ColT, OutT, V>, (unsigned)group_grid(a.count),
                            THREADS, numeric_smem<THREADS, ITEMS>(), s, a);
}

template <typename ColT, typename OutT, typename V>
int launch_staged_numeric(const GroupArgs &a, cudaStream_t s) {
    static_assert(numeric_smem<kGroupThreads, kGroupItems>() >= (size_t)CAP * 14,
                  "staged_numeric's arrays fit");
    return launch_with_smem(staged_numeric<ColT, OutT, V>, (unsigned)group_grid(a.count), kGroupThreads,
                            numeric_smem<kGroupThreads, kGroupItems>(), s, a);
}

TinyArgs tiny_args(const acc_spgemm_gpu *p, const void *valsA, const void *valsB) {
    TinyArgs t;
    static_cast<RowOperands &>(t) = row_operands(p, valsA, valsB);
    t.m = p->m;
    t.n = p->n;
    t.tiny = p->tiny_bits;
    t.place = nullptr;
    return t;
}

template <bool NUMERIC, typename ColT, typename OutT, typename V, int MODE = TINY_SORT>
int launch_tiny(const TinyArgs &t, cudaStream_t s) {
    if (t.m == 0) return ACC_SUCCESS;
    const int64_t per_block = (int64_t)kTinyWarps * TINY_ROWS;
    const unsigned blocks = (unsigned)std::min<int64_t>((t.m + per_block - 1) / per_block, 1 << 16);
    if (NUMERIC && t.n <= (int64_t(1) << 27)) /* (column, product) keys fit 32 bits */
        tiny_numeric<uint32_t, ColT, OutT, V, MODE><<<blocks, kTinyWarps * 32, 0, s>>>(t);
    else if (NUMERIC)
        tiny_numeric<uint64_t, ColT, OutT, V, MODE><<<blocks, kTinyWarps * 32, 0, s>>>(t);
    else
        tiny_symbolic<<<blocks, kTinyWarps * 32, 0, s>>>(t);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

/* The tiny rows' numeric pass.  A plan's second product also keeps each tiny row's sorted order (32
 * bytes a row, tiny_place: only where the tiny rows average at least 16 products over all rows, so
 * that it costs at most 2 bytes a product), and its later products read it instead of sorting (the
 * same bits).  (G3_circuit, whose time is its tiny rows: reuse was 1.99x a fresh product on the H100.) */
template <typename ColT, typename OutT, typename V>
int launch_tiny_numeric(acc_spgemm_gpu *p, TinyArgs t, cudaStream_t s) {
    const bool worth = p->rs_known && p->rs_tiny > 0 && 32 * p->m <= 2 * p->rs_tiny;
    if (worth && p->tiny_state == 0 && p->numeric_calls == 1) {
        TRY(p->palloc(&p->tiny_place, (size_t)(32 * p->m)));
        p->tiny_state = 1; /* 2 once this call has succeeded (acc_spgemm_gpu_numeric) */
        t.place = p->tiny_place;
        return launch_tiny<true, ColT, OutT, V, TINY_BUILD>(t, s);
    }
    if (p->tiny_state == 2) {
        t.place = p->tiny_place;
        return launch_tiny<true, ColT, OutT, V, TINY_USE>(t, s);
    }
    return launch_tiny<true, ColT, OutT, V>(t, s);
}

HashArgs hash_args(const acc_spgemm_gpu *p, const void *valsA, const void *valsB) {
    HashArgs h;
    static_cast<RowOperands &>(h) = row_operands(p, valsA, valsB);
    h.list = p->hash_list;
    h.count = p->hash_count;
    h.c = nullptr;
    h.c_wide = 0;
    h.mode = HASH_NUMERIC;
    h.m = p->m;
    h.foff = nullptr;
    h.fcols = nullptr;
    h.fvals = nullptr;
    h.fcap = 0;
    h.place = nullptr;
    h.poff = nullptr;
    h.place_count = nullptr;
    h.place_cap = 0;
    return h;
}

/* rows: an upper bound of the list's length (symbolic runs before the host knows it): at most one wave
 * of blocks (the warps stride over the list: a second, partial wave would start its rows only as the
 * first wave's blocks end), fewer where the rows are few. */
template <bool NUMERIC, typename ColT, typename OutT, typename V, bool FUSED = false,
          int PLACES = PLACES_NONE>
int launch_hashed(const HashArgs &h, int64_t rows, cudaStream_t s) {
    if (!h.list || rows == 0) return ACC_SUCCESS;
    const unsigned blocks = wave_grid(hashed_rows<NUMERIC, ColT, OutT, V, FUSED, PLACES>, kHashWarps * 32, 0,
                                      std::min<int64_t>((rows + kHashWarps - 1) / kHashWarps, 1024));
    hashed_rows<NUMERIC, ColT, OutT, V, FUSED, PLACES><<<blocks, kHashWarps * 32, 0, s>>>(h);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

/* The entries the fused arrays hold: a quarter of the candidates' products (a kept row makes at most
 * half as many entries as products; amg_poisson (RA)·P makes one per 7.3, kron b2 one per 3.8: 96% of
 * its rows fit), so 2 bytes a product for a float result, 3 for double (cuSPARSE's ALG2 held 3.7 to 22
 * a product on the products of benchmarks/results/h100_spgemm.md), at most 2^32 - 2; or
 * ACCSPMM_SPGEMM_FUSED_CAP where that is set (tests: rows that do not fit).  Allocated before the
 * sample's verdict is known: where it gives the candidates back to the row groups, unused. */
int64_t fused_cap(const acc_spgemm_gpu *p) {
    const char *e = std::getenv("ACCSPMM_SPGEMM_FUSED_CAP");
    const int64_t cap = e && *e ? std::max<int64_t>(std::atoll(e), 0) : p->rs_hashed / 4;
    return std::min<int64_t>(cap, (int64_t)kNoFused - 1);
}

/* The hashed rows' full symbolic pass; for a one-shot product (opt.a_values) whose numeric call will
 * read the caller's values directly (canonical operands, no float64 -> float32 gather: rows_numeric's
 * `direct`), the fused one, which also sums the kept rows into the plan (acc_spgemm_gpu.fused_*). */
int launch_hashed_full(acc_spgemm_gpu *p, HashArgs h, int64_t rows, cudaStream_t s) {
    const acc_spgemm_gpu_options &o = p->opt;
    const bool raw = p->RA.src == nullptr && (p->same || p->RB.src == nullptr);
    const bool in32 = o.values_dtype == ACC_FLOAT32, out32 = o.out_dtype == ACC_FLOAT32;
    const bool dtypes = (in32 || o.values_dtype == ACC_FLOAT64) && (out32 || o.out_dtype == ACC_FLOAT64);
    const int64_t cap = p->rs_known ? fused_cap(p) : 0;
    if (!o.a_values || (!p->same && !o.b_values) || !raw || !dtypes || (in32 && !out32) || cap <= 0)
        return launch_hashed<false, int32_t, float, double>(h, rows, s);
    TRY(p->palloc(&p->fused_off, (size_t)p->m));
    TRY(p->palloc(&p->fused_cols, (size_t)cap));
    if (out32) {
        float *v = nullptr;
        TRY(p->palloc(&v, (size_t)cap));
        p->fused_vals = v;
    } else {
        double *v = nullptr;
        TRY(p->palloc(&v, (size_t)cap));
        p->fused_vals = v;
    }
    p->fused_cap = cap;
    p->fused_ready = true;
    h.valsA = o.a_values;
    h.valsB = p->same ? o.a_values : o.b_values;
    h.foff = p->fused_off;
    h.fcols = p->fused_cols;
    h.fvals = p->fused_vals;
    h.fcap = (u64)cap;
    if (in32) return launch_hashed<false, int32_t, float, float, true>(h, rows, s);
    if (out32) return launch_hashed<false, int32_t, float, double, true>(h, rows, s);
    return launch_hashed<false, int32_t, double, double, true>(h, rows, s);
}

DenseArgs dense_args(acc_spgemm_gpu *p, const void *valsA, const void *valsB) {
    DenseArgs d;
    static_cast<RowOperands &>(d) = row_operands(p, valsA, valsB);
    d.n = p->n;
    d.nlarge = p->nlarge;
    d.large = p->large;
    d.known = nullptr;
    return d;
}

/* The hashed rows' numeric pass.  A plan's second product also keeps each product's place in its row
 * of C and its rank among its place's products in its step (2 bytes per product of the candidates,
 * hash_place), and its later products add at those places in that order without a hash table or a
 * __match_any_sync (the same adds in the same order: the same bits); a one-shot product's first
 * (fused_use) copies the symbolic pass's sums instead.  (kron b3, the H100: reuse was 1.82x a fresh
 * product once the fused symbolic pass made the fresh one faster.) */
template <typename ColT, typename OutT, typename V>
int launch_hashed_numeric(acc_spgemm_gpu *p, HashArgs h, cudaStream_t s) {
    if (p->fused_use) { /* the fused symbolic pass's sums, in this call's output type */
        h.foff = p->fused_off;
        h.fcols = p->fused_cols;
        h.fvals = p->fused_vals;
        h.fcap = (u64)p->fused_cap;
        return launch_hashed<true, ColT, OutT, V>(h, p->nhashed, s);
    }
    if (!p->rs_known || p->rs_hashed >= (int64_t)kNoFused)
        return launch_hashed<true, ColT, OutT, V>(h, p->nhashed, s);
    if (p->places_state == 0 && p->numeric_calls == 1) { /* a plan multiplying again: keep the places */
        TRY(p->palloc(&p->hash_place, (size_t)p->rs_hashed));
        TRY(p->palloc(&p->hash_poff, (size_t)p->nhashed));
        TRY(p->palloc(&p->place_count, 1));
        ACC_CUDA_TRY(cudaMemsetAsync(p->place_count, 0, sizeof(u64), s));
        p->places_state = 1; /* 2 once this call has succeeded (acc_spgemm_gpu_numeric) */
    } else if (p->places_state != 2) {
        return launch_hashed<true, ColT, OutT, V>(h, p->nhashed, s);
    }
    h.place = p->hash_place;
    h.poff = p->hash_poff;
    h.place_count = p->place_count;
    h.place_cap = (u64)p->rs_hashed;
    if (p->places_state == 1)
        return launch_hashed<true, ColT, OutT, V, false, PLACES_BUILD>(h, p->nhashed, s);
    return launch_hashed<true, ColT, OutT, V, false, PLACES_USE>(h, p->nhashed, s);
}

/* The dense kernel's instantiation for d, its block size and dynamic shared memory. */
struct DenseKernel {
    void (*kernel)(DenseArgs);
    int threads;
    size_t bytes;
};

template <bool NUMERIC, typename ColT, typename OutT, typename V> DenseKernel pick_dense(const DenseArgs &d) {
    const size_t words = (size_t)((d.n + 31) / 32);
    const size_t bytes = (NUMERIC ? (size_t)d.n * sizeof(double) : 0) + words * sizeof(uint32_t);
    if (!NUMERIC)
        return {dense_rows<false, kDenseSymbolicThreads, ColT, OutT, V>, kDenseSymbolicThreads, bytes};
    if (d.known) { /* no bits: the accumulator only */
        const size_t kbytes = (size_t)d.n * sizeof(double);
        if (d.n > kDenseWideCols) return {dense_rows<true, 256, ColT, OutT, V, true>, 256, kbytes};
        return {dense_rows<true, 128, ColT, OutT, V, true>, 128, kbytes};
    }
    if (d.n > kDenseWideCols) return {dense_rows<true, 256, ColT, OutT, V>, 256, bytes};
    return {dense_rows<true, 128, ColT, OutT, V>, 128, bytes};
}

template <bool NUMERIC, typename ColT, typename OutT, typename V>
int launch_dense(const DenseArgs &d, cudaStream_t s) {
    const DenseKernel k = pick_dense<NUMERIC, ColT, OutT, V>(d);
    const unsigned grid = (unsigned)std::min<int64_t>(d.nlarge, 1 << 16);
    return launch_with_smem(k.kernel, grid, k.threads, k.bytes, s, d);
}

/* Whether the small rows' kernels run beside the dense kernel (Fork): where its blocks (one per large
 * row) do not fill the device, or where an SM holds two or more of them.  Where it holds one (a wide
 * accumulator), a small block placed on a free SM keeps the next dense row off that whole SM until it
 * ends.  H100, whole calls, one A/B round with a fork on every dense plan: reuse 17-33% faster on
 * polblogs, pubmed, lastfm_asia, wiki-Vote, email-Eu-core, ego-Facebook and rajat01, and 6-13% slower
 * (reuse, fresh) on musae_facebook (22,470 columns: 202 KB of accumulator, one block an SM). */
template <bool NUMERIC, typename ColT, typename OutT, typename V> bool dense_beside(const DenseArgs &d) {
    const DenseKernel k = pick_dense<NUMERIC, ColT, OutT, V>(d);
    if (cudaFuncSetAttribute(k.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k.bytes) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    int per_sm = 0; /* not cached: the accumulator's bytes change with n */
    const int64_t resident =
        resident_blocks(reinterpret_cast<const void *>(k.kernel), k.threads, k.bytes, &per_sm);
    return resident > 0 && (per_sm >= 2 || d.nlarge < resident);
}

/* The huge rows in batches of at most BATCH products, on the device: symbolic (counts) or numeric. */
template <bool NUMERIC, typename ColT, typename OutT, typename V>
int huge_batches(acc_spgemm_gpu *p, const void *valsA, const void *valsB, void *cols, void *vals,
                 cudaStream_t s) {
    const std::vector<int64_t> &U = p->huge_products;
    const int64_t nh = (int64_t)U.size();
    const int colbits = std::max(1, bits_for(p->n));
    int64_t j0 = 0, base = 0;
    while (j0 < nh) {
        int64_t j1 = j0 + 1, count = U[(size_t)j0];
        while (j1 < nh && count + U[(size_t)j1] <= BATCH)
            count += U[(size_t)j1++];
        BatchArgs b{j0,    j1,       base,     count,    p->huge_rows, p->huge_prefix, p->RA.rp,
                    p->pe, p->RB.rp, p->RA.ci, p->RB.ci, valsA,        valsB,          colbits};
        const int end_bit = colbits + bits_for(j1 - j0);
        Temp<uint64_t> k0, k1;
        Temp<double> v0, v1;
        TRY(k0.alloc((size_t)count, s, &p->tr));
        TRY(k1.alloc((size_t)count, s, &p->tr));
        if (NUMERIC) {
            TRY(v0.alloc((size_t)count, s, &p->tr));
            TRY(v1.alloc((size_t)count, s, &p->tr));
        }
        batch_expand<NUMERIC, V><<<grid_for((count + 7) / 8), kThreads, 0, s>>>(b, k0.p, v0.p);
        LAUNCH_CHECK();
        cub::DoubleBuffer<uint64_t> kb(k0.p, k1.p);
        cub::DoubleBuffer<double> vb(v0.p, v1.p);
        size_t bytes = 0;
        if (NUMERIC)
            ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, kb, vb, count, 0, end_bit, s));
        else
            ACC_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, bytes, kb, count, 0, end_bit, s));
        {
            Temp<char> temp;
            TRY(temp.alloc(bytes, s, &p->tr));
            if (NUMERIC)
                ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp.p, bytes, kb, vb, count, 0, end_bit, s));
            else
                ACC_CUDA_TRY(cub::DeviceRadixSort::SortKeys(temp.p, bytes, kb, count, 0, end_bit, s));
        }
        const uint64_t *K = kb.Current();
        if (!NUMERIC) {
            batch_count<<<grid_for(((count + 31) / 32) * 32), kThreads, 0, s>>>(count, K, colbits, j0,
                                                                                p->huge_rows, p->row_ptr + 1);
            LAUNCH_CHECK();
        } else {
            Temp<int64_t> H, first;
            TRY(H.alloc((size_t)count, s, &p->tr));
            TRY(first.alloc((size_t)(j1 - j0), s, &p->tr));
            batch_heads<<<grid_for(count), kThreads, 0, s>>>(count, K, H.p);
            LAUNCH_CHECK();
            TRY(scan_in_place(H.p, count, true, s, &p->tr));
            batch_row_first<<<grid_for(count), kThreads, 0, s>>>(count, K, colbits, H.p, first.p);
            LAUNCH_CHECK();
            batch_write<ColT, OutT><<<grid_for(count), kThreads, 0, s>>>(
                count, K, vb.Current(), H.p, first.p, colbits, j0, p->huge_rows, p->row_ptr,
                static_cast<ColT *>(cols), static_cast<OutT *>(vals), p->zeros);
            LAUNCH_CHECK();
        }
        base += count;
        j0 = j1;
    }
    return ACC_SUCCESS;
}

template <typename ColT, typename OutT, typename V>
int launch_dense_numeric(acc_spgemm_gpu *p, const DenseArgs &d, cudaStream_t s) {
    PhaseTimer timer(p, PH_ROWS_LARGE);
    return launch_dense<true, ColT, OutT, V>(d, s);
}

/* The dense large rows, where there are, run on a side stream beside the small rows' kernels (Fork):
 * they write other rows of C, and each kernel's adds keep their order, so the bits are the same. */
template <typename ColT, typename OutT, typename V>
int numeric_typed(acc_spgemm_gpu *p, const void *valsA, const void *valsB, void *cols, void *vals,
                  cudaStream_t s) {
    const bool dense = p->nlarge > 0 && p->dense_large;
    DenseArgs d{};
    if (dense) {
        d = dense_args(p, valsA, valsB);
        d.cols = cols;
        d.vals = vals;
        if constexpr (std::is_same<ColT, int32_t>::value) d.known = p->known_cols;
    }
    Fork fork(p, s, dense && dense_beside<true, ColT, OutT, V>(d));
    if (fork.active()) TRY((launch_dense_numeric<ColT, OutT, V>(p, d, fork.side())));
    {
        PhaseTimer timer(p, PH_ROWS_SMALL);
        if (p->RA.nnz > 0) {
            TinyArgs t = tiny_args(p, valsA, valsB);
            t.cols = cols;
            t.vals = vals;
            TRY((launch_tiny_numeric<ColT, OutT, V>(p, t, s)));
            HashArgs h = hash_args(p, valsA, valsB);
            h.cols = cols;
            h.vals = vals;
            if (p->hashed_rows > 0) TRY((launch_hashed_numeric<ColT, OutT, V>(p, h, s)));
        }
        if (p->ngroups > 0) {
            GroupArgs a = sorted_args(p, false, valsA, valsB);
            a.cols = cols;
            a.vals = vals;
            TRY((launch_staged_numeric<ColT, OutT, V>(a, s)));
            a.staged = 1;
            if (p->wide_groups > 0)
                TRY((launch_sorted_numeric<kGroupThreads, kGroupItems, ColT, OutT, V>(a, s)));
        }
    }
    if (dense) return fork.active() ? fork.join() : launch_dense_numeric<ColT, OutT, V>(p, d, s);
    if (p->nlarge == 0) return ACC_SUCCESS;
    PhaseTimer timer(p, PH_ROWS_LARGE);
    if (p->nmedium > 0) {
        GroupArgs a = sorted_args(p, true, valsA, valsB);
        a.cols = cols;
        a.vals = vals;
        TRY((launch_sorted_numeric<kGroupThreads, kGroupItems, ColT, OutT, V>(tier_args(p, a, 0), s)));
        TRY((launch_sorted_numeric<kMediumThreads, kMediumItems / 2, ColT, OutT, V>(tier_args(p, a, 1), s)));
        TRY((launch_sorted_numeric<kMediumThreads, kMediumItems, ColT, OutT, V>(tier_args(p, a, 2), s)));
    }
    return huge_batches<true, ColT, OutT, V>(p, valsA, valsB, cols, vals, s);
}

/* The dense kernel's cost of a large row: a barrier per entry of A, and its products over the block. */
__global__ void dense_cost(int64_t nlarge, const int64_t *__restrict__ rows, const int64_t *__restrict__ rpA,
                           const int64_t *__restrict__ products, uint32_t *__restrict__ cost) {
    GRID_STRIDE(j, nlarge) {
        const int64_t c = rpA[rows[j] + 1] - rpA[rows[j]] + products[j] / 128; /* (a narrow block's) */
        cost[j] = (uint32_t)min(c, (int64_t)UINT32_MAX);
    }
}

/* p->large = the large rows (`rows`, products in large_prefix + 1) by decreasing dense cost: one
 * block per row runs them in that order, so the longest rows start first instead of finishing last. */
int longest_first(acc_spgemm_gpu *p, const int64_t *rows, cudaStream_t s) {
    const int64_t nl = p->nlarge;
    Temp<uint32_t> cost, sorted;
    TRY(cost.alloc((size_t)nl, s, &p->tr));
    TRY(sorted.alloc((size_t)nl, s, &p->tr));
    dense_cost<<<grid_for(nl), kThreads, 0, s>>>(nl, rows, p->RA.rp, p->large_prefix + 1, cost.p);
    LAUNCH_CHECK();
    size_t bytes = 0;
    ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, cost.p, sorted.p, rows, p->large,
                                                           nl, 0, 32, s));
    Temp<char> temp;
    TRY(temp.alloc(bytes, s, &p->tr));
    ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(temp.p, bytes, cost.p, sorted.p, rows, p->large,
                                                           nl, 0, 32, s));
    return ACC_SUCCESS;
}

/* Large rows on the host, for n > rows_dense_cols(): medium ones (at most MEDIUM_MAX products: one block
 * sorts each; three tiers of block capacity, CAP, MEDIUM_MAX / 2 and MEDIUM_MAX products, so that
 * a row sorts in the smallest block that holds it) and huge ones (batches), each list with its
 * products' prefix, uploaded. */
int split_large(acc_spgemm_gpu *p, const std::vector<int64_t> &rows, const std::vector<int64_t> &U,
                cudaStream_t s) {
    std::vector<int64_t> mrows, mpre(1, 0), hpre(1, 0);
    p->huge_products.clear();
    std::vector<int64_t> hrows;
    const int64_t cap[3] = {CAP, MEDIUM_MAX / 2, MEDIUM_MAX};
    for (int t = 0; t < 3; t++) {
        p->medium_tier[t] = 0;
        for (size_t j = 0; j < rows.size(); j++) {
            if (U[j] <= cap[t] && (t == 0 || U[j] > cap[t - 1])) {
                mrows.push_back(rows[j]);
                mpre.push_back(mpre.back() + U[j]);
                p->medium_tier[t]++;
            }
        }
    }
    for (size_t j = 0; j < rows.size(); j++) {
        if (U[j] > MEDIUM_MAX) {
            hrows.push_back(rows[j]);
            hpre.push_back(hpre.back() + U[j]);
            p->huge_products.push_back(U[j]);
        }
    }
    p->nmedium = (int64_t)mrows.size();
    TRY(p->palloc(&p->medium_rows, mrows.size()));
    TRY(p->palloc(&p->medium_prefix, mpre.size()));
    TRY(p->palloc(&p->perm_medium, (size_t)mpre.back()));
    TRY(p->palloc(&p->huge_rows, hrows.size()));
    TRY(p->palloc(&p->huge_prefix, hpre.size()));
    ACC_CUDA_TRY(cudaMemcpyAsync(p->medium_rows, mrows.data(), mrows.size() * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, s));
    ACC_CUDA_TRY(cudaMemcpyAsync(p->medium_prefix, mpre.data(), mpre.size() * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, s));
    ACC_CUDA_TRY(cudaMemcpyAsync(p->huge_rows, hrows.data(), hrows.size() * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, s));
    ACC_CUDA_TRY(cudaMemcpyAsync(p->huge_prefix, hpre.data(), hpre.size() * sizeof(int64_t),
                                 cudaMemcpyHostToDevice, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s)); /* the host vectors go away */
    return ACC_SUCCESS;
}

} // namespace

/* Products before each entry of A over every row (pe, allocated here), the large rows (`rows`,
 * their count in `num`) and the products' total (p->products, p->nlarge): one synchronisation. */
int count_products(acc_spgemm_gpu *p, Temp<int64_t> &rows, Temp<int64_t> &num, cudaStream_t s) {
    const RowMat &A = p->RA, &B = p->RB;
    const int64_t nnz = A.nnz, m = p->m;
    TRY(p->palloc(&p->pe, (size_t)nnz + 1));
    ACC_CUDA_TRY(cudaMemsetAsync(p->pe, 0, sizeof(int64_t), s));
    TRY(rows.alloc((size_t)m, s, &p->tr));
    TRY(num.alloc(1, s, &p->tr));
    ACC_CUDA_TRY(cudaMemsetAsync(num.p, 0, sizeof(int64_t), s));
    if (nnz > 0) {
        size_t bytes = 0, sb = 0;
        ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, p->pe + 1, p->pe + 1, nnz, s));
        auto ids = thrust::counting_iterator<int64_t>(0);
        ACC_CUDA_TRY(cub::DeviceSelect::If(nullptr, sb, ids, rows.p, num.p, m, IsLarge{A.rp, p->pe}, s));
        Temp<char> temp;
        TRY(temp.alloc(std::max(bytes, sb), s, &p->tr));
        entry_products<<<grid_for(nnz), kThreads, 0, s>>>(nnz, A.ci, B.rp, p->pe);
        LAUNCH_CHECK();
        ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp.p, bytes, p->pe + 1, p->pe + 1, nnz, s));
        ACC_CUDA_TRY(cub::DeviceSelect::If(temp.p, sb, ids, rows.p, num.p, m, IsLarge{A.rp, p->pe}, s));
    }
    int64_t h[2] = {0, 0};
    ACC_CUDA_TRY(cudaMemcpyAsync(&h[0], num.p, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaMemcpyAsync(&h[1], p->pe + nnz, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    p->nlarge = h[0];
    p->products = h[1];
    return ACC_SUCCESS;
}

/* ps's entries: the products of each entry of a row group's row (tiny and large rows count none),
 * scanned. */
template <typename T>
int fill_group_prefix(acc_spgemm_gpu *p, T *c, const Temp<int64_t> &rows, const Temp<int64_t> &num,
                      cudaStream_t s) {
    const RowMat &A = p->RA, &B = p->RB;
    const int64_t nnz = A.nnz, m = p->m;
    ACC_CUDA_TRY(cudaMemsetAsync(c, 0, sizeof(T), s));
    entry_products<T><<<grid_for(nnz), kThreads, 0, s>>>(nnz, A.ci, B.rp, c);
    LAUNCH_CHECK();
    if (p->nlarge > 0) {
        zero_large_rows<T><<<1024, kThreads, 0, s>>>(num.p, rows.p, A.rp, c);
        LAUNCH_CHECK();
    }
    /* hash candidates (row indices in 32 bits), then the hashed symbolic pass, which gives some back;
     * none where the model's statistics show too few candidates' products to pay for its two launches
     * (about 20 us: benchmarks/NOTES.md) */
    const bool few = p->rs_known && p->rs_hashed < HASH_MIN_PRODUCTS;
    const int64_t hash_max = m < (int64_t)kDemoted && !few ? rows_hash_max(p) : 0;
    TRY(p->palloc(&p->tiny_bits, (size_t)(m + 31) / 32));
    if (hash_max > 0) {
        TRY(p->palloc(&p->hash_list, (size_t)m));
        TRY(p->palloc(&p->hash_count, 4));
        ACC_CUDA_TRY(cudaMemsetAsync(p->hash_count, 0, 4 * sizeof(u64), s));
    }
    classify_small_rows<T><<<grid_for((m + 31) / 32 * 32), kThreads, 0, s>>>(
        m, A.rp, hash_max, c, p->tiny_bits, p->hash_list, p->hash_count);
    LAUNCH_CHECK();
    if (hash_max > 0) {
        HashArgs h = hash_args(p, nullptr, nullptr);
        h.c = c;
        h.c_wide = sizeof(T) == sizeof(int64_t);
        h.mode = HASH_SAMPLE;
        TRY((launch_hashed<false, int32_t, float, double>(h, m, s)));
        h.mode = HASH_FULL;
        TRY(launch_hashed_full(p, h, m, s));
    }
    return scan_in_place(c + 1, nnz, true, s, &p->tr);
}

/* The same over the row groups' rows only (ps), its total (p->small_total) and largest row
 * (p->small_max): one synchronisation.  ps takes 32 bits an entry where the product's total fits
 * (small_total <= products); else 64, in pe's own array where pe is complete and no row is large
 * (only the large rows' paths read pe: memory of one prefix, not two).  A.nnz > 0. */
int group_products(acc_spgemm_gpu *p, bool pe_complete, const Temp<int64_t> &rows, const Temp<int64_t> &num,
                   cudaStream_t s) {
    const int64_t nnz = p->RA.nnz, m = p->m;
    if (p->nlarge == 0 && pe_complete) {
        p->ps = p->pe;
        TRY(fill_group_prefix(p, p->ps, rows, num, s));
    } else if (p->products < (int64_t(1) << 32)) {
        TRY(p->palloc(&p->ps32, (size_t)nnz + 1));
        TRY(fill_group_prefix(p, p->ps32, rows, num, s));
    } else {
        TRY(p->palloc(&p->ps, (size_t)nnz + 1));
        TRY(fill_group_prefix(p, p->ps, rows, num, s));
    }
    Temp<u64> most;
    TRY(most.alloc(1, s, &p->tr));
    ACC_CUDA_TRY(cudaMemsetAsync(most.p, 0, sizeof(u64), s));
    max_row_products<<<std::min(grid_for(m), 1024u), kThreads, 0, s>>>(m, p->RA.rp, small_prefix(p), most.p);
    LAUNCH_CHECK();
    u64 h = 0;
    uint32_t h32 = 0;
    if (p->ps32)
        ACC_CUDA_TRY(cudaMemcpyAsync(&h32, p->ps32 + nnz, sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
    else
        ACC_CUDA_TRY(
            cudaMemcpyAsync(&p->small_total, p->ps + nnz, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaMemcpyAsync(&h, most.p, sizeof(u64), cudaMemcpyDeviceToHost, s));
    if (p->hash_count)
        ACC_CUDA_TRY(cudaMemcpyAsync(&p->nhashed, p->hash_count, sizeof(u64), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    if (p->ps32) p->small_total = h32;
    p->small_max = (int64_t)h;
    return ACC_SUCCESS;
}

int rows_analyse(acc_spgemm_gpu *p, cudaStream_t s) {
    const RowMat &A = p->RA, &B = p->RB;
    const int64_t nnz = A.nnz, m = p->m;
    PhaseTimer timer(p, PH_ROWS_COUNT);
    /* The model's exact row statistics (algorithm "auto") may show that no row is large, and even
     * that every row with products is tiny; where canonical_rows changed neither operand the counts
     * are the rows' own.  Then the first prefix (pe: read by the large rows' paths only) and its
     * synchronisation, or both prefixes, are not needed. */
    Temp<int64_t> rows, num; /* the large rows and their count */
    /* C's row lengths (the hashed rows' from group_products on), then offsets */
    ACC_CUDA_TRY(cudaMemsetAsync(p->row_ptr, 0, (size_t)(m + 1) * sizeof(int64_t), s));
    const bool known = p->rs_known && A.nnz == A.nnz_in && B.nnz == B.nnz_in && p->rs_large_rows == 0;
    if (known) {
        p->nlarge = 0;
        p->products = p->rs_small;
    }
    if (known && p->rs_tiny == p->rs_small + p->rs_large) { /* every row tiny (or no products) */
        p->small_total = 0;
        TRY(p->palloc(&p->pe, 1));
        p->ps = p->pe;
    } else {
        if (known)
            TRY(p->palloc(&p->pe, 1));
        else
            TRY(count_products(p, rows, num, s));
        if (nnz == 0) {
            p->ps = p->pe; /* not owned twice: only pe is in the plan's allocations */
            p->small_total = 0;
        } else {
            TRY(group_products(p, !known, rows, num, s));
        }
    }
    /* Groups of rows starting within `stride` products of each other hold at most stride - 1 + the
     * largest small row's products: CAP with stride = CAP + 1 - that row (at least SMALL_MAX + 1, as
     * SMALL_MAX is the largest possible).  Blocks run nearly full where the rows are shorter. */
    const int64_t stride = CAP + 1 - std::max<int64_t>(p->small_max, 1);
    p->ngroups = (p->small_total + stride - 1) / stride;
    /* the large rows and their products; for n > rows_dense_cols(), split on the host (one more sync) */
    TRY(p->palloc(&p->large, (size_t)p->nlarge));
    TRY(p->palloc(&p->large_prefix, (size_t)p->nlarge + 1));
    p->large_products.assign((size_t)p->nlarge, 0);
    if (p->nlarge > 0) {
        large_products<<<grid_for(p->nlarge), kThreads, 0, s>>>(p->nlarge, rows.p, A.rp, p->pe,
                                                                p->large_prefix + 1);
        LAUNCH_CHECK();
        if (p->dense_large && p->nlarge > 1)
            TRY(longest_first(p, rows.p, s));
        else
            ACC_CUDA_TRY(cudaMemcpyAsync(p->large, rows.p, (size_t)p->nlarge * sizeof(int64_t),
                                         cudaMemcpyDeviceToDevice, s));
        ACC_CUDA_TRY(cudaMemcpyAsync(p->large_products.data(), p->large_prefix + 1,
                                     (size_t)p->nlarge * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
        if (!p->dense_large) {
            std::vector<int64_t> ids((size_t)p->nlarge);
            ACC_CUDA_TRY(
                cudaMemcpyAsync(ids.data(), rows.p, ids.size() * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
            ACC_CUDA_TRY(cudaStreamSynchronize(s));
            TRY(split_large(p, ids, p->large_products, s));
        }
    }
    rows.release();
    timer.next(PH_ROWS_SMALL);
    TRY(p->palloc(&p->gstart, (size_t)p->ngroups + 1));
    TRY(p->palloc(&p->perm_small, (size_t)p->small_total));
    /* the dense large rows' counts beside the small rows' (numeric_typed) */
    const bool dense = p->nlarge > 0 && p->dense_large;
    const DenseArgs d = dense ? dense_args(p, nullptr, nullptr) : DenseArgs{};
    Fork fork(p, s, dense && dense_beside<false, int32_t, float, double>(d));
    if (fork.active()) TRY((launch_dense<false, int32_t, float, double>(d, fork.side())));
    if (nnz > 0) TRY((launch_tiny<false, int32_t, float, double>(tiny_args(p, nullptr, nullptr), s)));
    if (p->ngroups > 0) {
        group_starts<<<grid_for(m + 1), kThreads, 0, s>>>(m, p->ngroups, stride, A.rp, small_prefix(p),
                                                          p->gstart);
        LAUNCH_CHECK();
        count_wide_groups<<<grid_for(p->ngroups), kThreads, 0, s>>>(p->ngroups, p->gstart, A.rp,
                                                                    p->row_ptr + m + 1);
        LAUNCH_CHECK(); /* p->wide_groups after analyse's last synchronisation */
        TRY(launch_symbolic(p, false, s));
    }
    timer.next(PH_ROWS_LARGE);
    if (dense && !fork.active()) {
        TRY((launch_dense<false, int32_t, float, double>(d, s)));
    } else if (p->nlarge > 0 && !dense) {
        TRY(launch_symbolic(p, true, s));
        TRY((huge_batches<false, int32_t, float, double>(p, nullptr, nullptr, nullptr, nullptr, s)));
    }
    TRY(fork.join());
    timer.next(PH_STRUCTURE);
    return scan_in_place(p->row_ptr + 1, m, true, s, &p->tr);
}

template <typename ColT, typename V>
int numeric_out(acc_spgemm_gpu *p, const void *valsA, const void *valsB, void *cols, void *vals,
                acc_dtype out_dtype, cudaStream_t s) {
    if constexpr (std::is_same<V, float>::value) /* float values give a float result only (rows_numeric) */
        return numeric_typed<ColT, float, float>(p, valsA, valsB, cols, vals, s);
    else
        return out_dtype == ACC_FLOAT32 ? numeric_typed<ColT, float, double>(p, valsA, valsB, cols, vals, s)
                                        : numeric_typed<ColT, double, double>(p, valsA, valsB, cols, vals, s);
}

/* The kernels read the caller's values where the plan kept the operands' own order (no canonical
 * copy: src NULL), widening float to double as they load: no copy of the values, no memory.  Else
 * (or float data for a double result) the values are gathered (and duplicates summed) in doubles. */
int rows_numeric(acc_spgemm_gpu *p, const void *a_values, const void *b_values, acc_dtype in_dtype,
                 void *cols, int c_index_bits, void *vals, acc_dtype out_dtype, cudaStream_t s) {
    const bool raw_a = p->RA.src == nullptr, raw_b = p->same || p->RB.src == nullptr;
    const bool narrow = in_dtype == ACC_FLOAT32;
    const bool direct = raw_a && raw_b && (!narrow || out_dtype == ACC_FLOAT32);
    Temp<double> va, vb;
    const void *valsA = a_values, *valsB = p->same ? a_values : b_values;
    if (!direct) {
        PhaseTimer timer(p, PH_VALUES);
        TRY(va.alloc((size_t)p->RA.nnz, s, &p->tr));
        TRY(gather_values(a_values, in_dtype, p->RA.nnz, p->RA.src, p->RA.run, va.p, s));
        valsA = va.p;
        valsB = va.p;
        if (!p->same) {
            TRY(vb.alloc((size_t)p->RB.nnz, s, &p->tr));
            TRY(gather_values(b_values, in_dtype, p->RB.nnz, p->RB.src, p->RB.run, vb.p, s));
            valsB = vb.p;
        }
    }
    const bool f32 = direct && narrow;
    if (c_index_bits == 32)
        return f32 ? numeric_out<int32_t, float>(p, valsA, valsB, cols, vals, out_dtype, s)
                   : numeric_out<int32_t, double>(p, valsA, valsB, cols, vals, out_dtype, s);
    return f32 ? numeric_out<int64_t, float>(p, valsA, valsB, cols, vals, out_dtype, s)
               : numeric_out<int64_t, double>(p, valsA, valsB, cols, vals, out_dtype, s);
}

} // namespace acc_spgemm
