/*
 * spgemm_internal.h -- what the GPU SpGEMM's files share (spgemm.cu: the C ABI, the memory pool,
 * the choice of path; spgemm_tiles.cu: the Tensor-Core path on 8x8 tiles; spgemm_rows.cu: the
 * CUDA-core path on rows).  Not public.
 */
#ifndef ACC_SPGEMM_INTERNAL_H
#define ACC_SPGEMM_INTERNAL_H

#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "acc_cuda_internal.h"
#include "spgemm.h"

namespace acc_spgemm {

using u64 = unsigned long long;

constexpr int kThreads = 256;

static_assert(kThreads == 256, "grid_for (acc_cuda_internal.h) counts blocks of 256 threads by default");

/* The numeric kernels' count of exact zeros written: each warp's sum, one atomic per warp (every lane
 * of the warp calls it). */
__device__ __forceinline__ void add_zeros(u64 zeros, u64 *total) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        zeros += __shfl_down_sync(0xFFFFFFFFu, zeros, o);
    if ((threadIdx.x & 31) == 0 && zeros) atomicAdd(total, zeros);
}

#define TRY(call)                                                                                            \
    do {                                                                                                     \
        int st_ = (call);                                                                                    \
        if (st_ != ACC_SUCCESS) return st_;                                                                  \
    } while (0)

#define LAUNCH_CHECK() ACC_CUDA_TRY(cudaPeekAtLastError())

/* Device bytes held now and at most (the plan's arrays and every temporary). */
struct Tracker {
    size_t cur = 0, peak = 0;
    void add(size_t b) {
        cur += b;
        if (cur > peak) peak = cur;
    }
    void sub(size_t b) { cur -= b; }
};

/* The memory pool every allocation of the SpGEMM comes from (spgemm.cu): stream-ordered, and
 * kept between calls up to a release threshold, so a product costs no cudaMalloc. */

/* A stream-ordered temporary, freed (stream-ordered) when it goes out of scope. */
template <typename T> struct Temp {
    T *p = nullptr;
    size_t bytes = 0;
    cudaStream_t s = nullptr;
    Tracker *tr = nullptr;
    Temp() = default;
    Temp(const Temp &) = delete;
    Temp &operator=(const Temp &) = delete;
    int alloc(size_t count, cudaStream_t stream, Tracker *tracker) {
        release();
        s = stream;
        tr = tracker;
        bytes = (count ? count : 1) * sizeof(T);
        void *q = nullptr;
        TRY(acc_pool_alloc(&q, bytes, s));
        p = static_cast<T *>(q);
        tr->add(bytes);
        return ACC_SUCCESS;
    }
    void release() {
        if (p) {
            acc_pool_free(p, s);
            tr->sub(bytes);
            p = nullptr;
        }
    }
    void swap(Temp &o) {
        std::swap(p, o.p);
        std::swap(bytes, o.bytes);
        std::swap(s, o.s);
        std::swap(tr, o.tr);
    }
    ~Temp() { release(); }
};

/* offsets[i] = the first entry of row i or after, for i in [0, rows]: CSR offsets from the sorted row
 * of each of count entries (binary search). */
template <typename R>
__global__ void offsets_from_sorted(int64_t rows, int64_t count, const R *__restrict__ sorted_rows,
                                    int64_t *__restrict__ offsets) {
    GRID_STRIDE(i, rows + 1) {
        int64_t lo = 0, hi = count;
        while (lo < hi) {
            const int64_t mid = (lo + hi) >> 1;
            if ((int64_t)sorted_rows[mid] < i)
                lo = mid + 1;
            else
                hi = mid;
        }
        offsets[i] = lo;
    }
}

template <typename T> __global__ void set_value(T *__restrict__ p, T v) { *p = v; }

/* x[0..n) replaced by its inclusive (or exclusive) prefix sums on s; cub's temporary storage from
 * the pool, counted in tr. */
template <typename T> int scan_in_place(T *x, int64_t n, bool inclusive, cudaStream_t s, Tracker *tr) {
    if (n <= 0) return ACC_SUCCESS;
    size_t bytes = 0;
    if (inclusive)
        ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, bytes, x, x, n, s));
    else
        ACC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, x, x, n, s));
    Temp<char> temp;
    TRY(temp.alloc(bytes, s, tr));
    if (inclusive)
        ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp.p, bytes, x, x, n, s));
    else
        ACC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp.p, bytes, x, x, n, s));
    return ACC_SUCCESS;
}

/* Phases timed when ACCSPMM_SPGEMM_PROFILE is set (each one synchronises then): host ms. */
enum Phase {
    PH_CHECK,
    PH_TILE,
    PH_PAIRS,
    PH_STRUCTURE,
    PH_VALUES,
    PH_NUMERIC,
    PH_ROWS_COUNT,
    PH_ROWS_SMALL,
    PH_ROWS_LARGE,
    PH_COUNT
};

/* One operand cut into 8x8 tiles (the tile path; spgemm_tiles.cu's header comment). */
struct TileMat {
    int64_t m = 0, k = 0, nnz = 0, mt = 0, kt = 0, ntiles = 0, nvals = 0;
    int64_t *row_ptr = nullptr;
    int32_t *col = nullptr;
    int32_t *trow = nullptr; /* tile row of each tile (kept for A) */
    u64 *mask = nullptr;
    int64_t *voff = nullptr;
    uint32_t *src = nullptr;
    int64_t *run = nullptr;
    double *vals = nullptr;
    uint8_t *bad = nullptr; /* 1 where the tile holds a non-finite value (set by the numeric phase) */
};

struct Chunk {
    int64_t I0, I1;     /* tile rows */
    int64_t a0, a1;     /* A tiles */
    int64_t q0, q1;     /* candidate pairs (offsets into raw_off's numbering) */
    int64_t c0, nc;     /* output tiles */
    int64_t pairs;      /* surviving pairs */
    int64_t seg0, seg1; /* numeric work items (segments) */
};

/* One operand for the row path: canonical CSR (sorted rows, no duplicates) with int64 offsets and
 * int32 columns, the caller's arrays where they already are that, else the plan's canonical copy;
 * src/run map the caller's values onto it (as for tiles). */
struct RowMat {
    int64_t m = 0, k = 0, nnz = 0;
    const int64_t *rp = nullptr;
    const int32_t *ci = nullptr;
    uint32_t *src = nullptr; /* [nnz] the caller's position of each entry (NULL: the same order) */
    int64_t *run = nullptr;  /* [nnz+1] duplicates' runs in src (NULL: none) */
    int64_t nnz_in = 0;      /* the caller's entries */
};

enum { PATH_TILES = 1, PATH_ROWS = 2 };

/* The row path accumulates large rows densely in shared memory (9 bytes a column) up to
 * rows_dense_cols() columns (n): as many as fit in a block's shared memory on this device, less
 * ROWS_DENSE_RESERVE (about 24,000 on sm_90, 16,700 on sm_80), or ACCSPMM_SPGEMM_DENSE_COLS where
 * that is set and smaller (tests: 0 makes every large row sort).  Only then does it need B's rows
 * free of duplicate columns (spgemm_rows.cu). */
constexpr int64_t ROWS_DENSE_RESERVE = 16384; /* the kernel's static shared memory, and a margin */
inline int64_t rows_dense_cols() {
    static const int64_t env = [] {
        const char *e = std::getenv("ACCSPMM_SPGEMM_DENSE_COLS");
        return e && *e ? std::max<int64_t>(std::atoll(e), 0) : (int64_t)-1;
    }();
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
        optin = 48 * 1024;
    const int64_t fit = std::max<int64_t>(0, (int64_t)optin - ROWS_DENSE_RESERVE) / 9 / 32 * 32;
    return env >= 0 ? std::min(env, fit) : fit;
}
/* A row of C is small (row groups) with at most this many products, large otherwise; a large row
 * is medium (n > rows_dense_cols(): one block sorts it) with at most ROWS_MEDIUM_MAX, else huge. */
constexpr int64_t ROWS_SMALL_MAX = 1024;
constexpr int64_t ROWS_MEDIUM_MAX = 8192;
/* A small row is tiny (one warp sorts it in registers) with at most this many entries of A and
 * this many products, one per lane. */
constexpr int64_t ROWS_TINY_MAX = 32;
/* A small row that is not tiny is hashed (one warp sums it in a hash table in shared memory, no sort)
 * with at most this many entries of A and this many products, unless the plan sorts every small row
 * (acc_spgemm_gpu_options.sort_small_rows). */
constexpr int64_t ROWS_HASH_MAX = 256;
/* ... and stays hashed when it makes at most this many entries of C, from at least twice as many
 * products (its symbolic pass, spgemm_rows.cu, gives the others to the row groups). */
constexpr int64_t ROWS_HASH_NNZ = 64;

} // namespace acc_spgemm

struct acc_spgemm_gpu {
    int64_t m = 0, k = 0, n = 0;
    acc_spgemm_gpu_options opt{};
    int path = 0; /* acc_spgemm::PATH_* */
    bool same = false;
    acc_spgemm_gpu_csr A_in{}, B_in{}; /* the caller's patterns (alive while the plan is) */
    std::vector<void *> owned;         /* pool allocations of the plan */
    acc_spgemm::Tracker tr;
    size_t plan_bytes = 0;
    int64_t products = 0;
    int64_t *row_ptr =
        nullptr; /* [m+1] structural row offsets of C; [m+1]: wide_groups, [m+2]: hashed rows (device) */
    int64_t nnz_s = 0;
    acc_spgemm::u64 *zeros = nullptr;            /* [1] counter of the numeric phase */
    double est_density_a = 0, est_density_b = 0; /* sampled entries per nonempty 8x8 tile */
    int64_t rs_small = 0, rs_large = 0, rs_large_entries = 0, rs_large_rows = 0, rs_huge = 0; /* row stats */
    int64_t rs_tiny = 0;                      /* of rs_small, the tiny rows' products */
    int64_t rs_hashed = 0;                    /* of rs_small, the hash candidates' products */
    bool rs_known = false;                    /* the row statistics above were computed (algorithm "auto") */
    double est_ms_tiles = 0, est_ms_rows = 0; /* its predictions */
    bool profile = false;
    double phase_ms[acc_spgemm::PH_COUNT] = {};
    cudaStream_t stream = nullptr;                   /* the stream of the call in progress (allocations) */
    cudaEvent_t fork_events[2] = {nullptr, nullptr}; /* Fork's (created at its first use) */

    /* tile path */
    acc_spgemm::TileMat A, B;
    int64_t mt = 0, nt = 0;
    int jbn = 0;
    int64_t *raw_off = nullptr;
    int64_t raw_total = 0, pairs_total = 0;
    std::vector<acc_spgemm::Chunk> chunks;
    int64_t nc = 0;
    int32_t *ccol = nullptr;
    acc_spgemm::u64 *cmask = nullptr;
    int64_t *crow_ptr = nullptr;
    int64_t nseg = 0;
    int64_t *seg_off = nullptr;
    int32_t *seg_pre = nullptr;
    acc_spgemm::u64 *kept_pairs = nullptr;
    uint32_t *kept_off = nullptr;

    /* row path */
    acc_spgemm::RowMat RA, RB;
    int64_t *pe = nullptr;         /* [nnz(A)+1] products before each entry of A (every row; the large
                                    * rows' paths read it: without large rows it becomes ps) */
    int64_t *ps = nullptr;         /* [nnz(A)+1] the same over the row groups' rows only (tiny and large
                                    * rows count 0) */
    uint32_t *ps32 = nullptr;      /* ps in 32 bits, instead, where the products' total fits */
    uint32_t *tiny_bits = nullptr; /* [ceil(m/32)] bit i: row i is tiny (NULL: every row may be) */
    uint32_t *hash_list = nullptr; /* [m] the hash candidates (kDemoted: given to the row groups) */
    acc_spgemm::u64 *hash_count = nullptr; /* [4] their count, the sample's kept and counted, and the
                                            * fused entries reserved (device) */
    /* one-shot products (acc_spgemm_gpu_options.a_values): the hashed rows' sums from their symbolic pass
     * (spgemm_rows.cu, hashed_rows FUSED), for the first numeric call with the same values */
    uint32_t *fused_off = nullptr;  /* [m] per candidate of hash_list: its row's first entry in fused_cols
                                     * and fused_vals, or kNoFused (demoted, or no room) */
    uint32_t *fused_cols = nullptr; /* [fused_cap] the rows' columns, sorted */
    void *fused_vals = nullptr;     /* [fused_cap] their values (opt.out_dtype) */
    int64_t fused_cap = 0, fused_reserved = 0;
    bool fused_ready = false; /* set by analyse; cleared by the first numeric call */
    bool fused_use = false;   /* the numeric call in progress copies them (its values and dtypes are those) */
    /* plans: each hashed row's products' places in its row of C and ranks in their steps, kept by the second
     * numeric call for the later ones (spgemm_rows.cu, launch_hashed_numeric) */
    uint16_t *hash_place = nullptr;         /* [rs_hashed] */
    uint32_t *hash_poff = nullptr;          /* [nhashed] per candidate: its first place, or kNoFused */
    acc_spgemm::u64 *place_count = nullptr; /* [1] the places reserved */
    int places_state = 0;                /* 0 none, 1 being written by the numeric call in progress, 2 kept */
    uint8_t *tiny_place = nullptr;       /* [32 m] plans: the tiny rows' sorted orders (spgemm_rows.cu) */
    int tiny_state = 0;                  /* as places_state */
    int64_t nhashed = 0;                 /* the candidates' count (host) */
    int64_t hashed_rows = 0;             /* the rows kept hashed (host, after analyse) */
    int64_t small_total = 0;             /* products of the row groups' rows */
    int64_t small_max = 0;               /* the most products of one of those rows */
    int64_t ngroups = 0;                 /* blocks of the small-row kernels */
    int64_t wide_groups = 0;             /* of them, groups that a block does not stage (spgemm_rows.cu) */
    int64_t *gstart = nullptr;           /* [ngroups+1] their first rows */
    int64_t nlarge = 0;                  /* rows with more than SMALL_MAX products */
    int64_t *large = nullptr;            /* [nlarge] those rows */
    int64_t *large_prefix = nullptr;     /* [nlarge+1] products before each of them */
    std::vector<int64_t> large_products; /* their products (host) */
    int dense_large = 0; /* large rows accumulate densely in shared memory (n small, B's rows made canonical
                          * where needed: analyse); else every large row sorts */
    int64_t numeric_calls = 0;      /* numeric phases run (acc_spgemm_gpu_numeric) */
    int32_t *known_cols = nullptr;  /* [nnz_s] C's structural columns, kept at the second numeric phase of a
                                     * plan with dense large rows (32-bit columns): the third and later
                                     * read their dense rows' columns here instead of setting and scanning
                                     * bits (spgemm_rows.cu, dense_rows KNOWN).  One more copy of C's
                                     * columns in device memory, for plans that multiply again. */
    uint16_t *perm_small = nullptr; /* [small_total] the small rows' products in sorted order */
    int64_t nmedium = 0;            /* not dense_large: large rows one block sorts */
    int64_t medium_tier[3] = {0, 0, 0}; /* of them, by block size (spgemm_rows.cu), in that order */
    int64_t *medium_rows = nullptr, *medium_prefix = nullptr; /* [nmedium], [nmedium+1] */
    uint16_t *perm_medium = nullptr;                          /* their products in sorted order */
    int64_t *huge_rows = nullptr, *huge_prefix = nullptr;     /* the other large rows (batches) */
    std::vector<int64_t> huge_products;
    int64_t max_row_products = 0;

    template <typename T> int palloc(T **out, size_t count) {
        void *q = nullptr;
        const size_t bytes = (count ? count : 1) * sizeof(T);
        TRY(acc_pool_alloc(&q, bytes, stream));
        owned.push_back(q);
        plan_bytes += bytes;
        tr.add(bytes);
        *out = static_cast<T *>(q);
        return ACC_SUCCESS;
    }
    ~acc_spgemm_gpu();
};

namespace acc_spgemm {

/* The most entries and products of a hashed row in plan p (0: no row is hashed). */
inline int64_t rows_hash_max(const acc_spgemm_gpu *p) { return p->opt.sort_small_rows ? 0 : ROWS_HASH_MAX; }

/* Phase timer: with plan->profile, synchronises the plan's stream and adds the host time since
 * the start to the phase (at next() and at the end of the scope). */
struct PhaseTimer {
    acc_spgemm_gpu *p;
    Phase ph;
    double t0;
    PhaseTimer(acc_spgemm_gpu *plan, Phase phase);
    void next(Phase phase); /* ends the current phase, starts `phase` */
    ~PhaseTimer();
};

/* Work beside the call's stream s (spgemm_rows.cu: the dense large rows beside the small rows, which
 * write other rows of C).  side() runs after everything enqueued on s before the Fork was made, and s
 * waits at join() (or at the end of the scope) for everything enqueued on side() since.  Inactive
 * (side() is s: the same work in sequence) where not wanted, where the plan times its phases (its
 * timers synchronise s only), or where no side stream or event could be had. */
class Fork {
  public:
    Fork(acc_spgemm_gpu *plan, cudaStream_t s, bool want);
    Fork(const Fork &) = delete;
    Fork &operator=(const Fork &) = delete;
    bool active() const { return side_ != s_; }
    cudaStream_t side() const { return side_; }
    int join(); /* once; later calls return ACC_SUCCESS */
    ~Fork() { join(); }

  private:
    acc_spgemm_gpu *p_;
    cudaStream_t s_, side_;
};

/* spgemm_tiles.cu */
int tiles_analyse(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B,
                  cudaStream_t s);
int tiles_numeric(acc_spgemm_gpu *p, const void *a_values, const void *b_values, acc_dtype in_dtype,
                  void *cols, int c_index_bits, void *vals, acc_dtype out_dtype, cudaStream_t s);
int tiles_free(acc_spgemm_gpu *p);

/* spgemm_rows.cu */
int rows_analyse(acc_spgemm_gpu *p, cudaStream_t s);
int rows_numeric(acc_spgemm_gpu *p, const void *a_values, const void *b_values, acc_dtype in_dtype,
                 void *cols, int c_index_bits, void *vals, acc_dtype out_dtype, cudaStream_t s);

/* spgemm.cu: a CSR operand in the row path's form: int64 offsets, int32 columns, the caller's arrays
 * where they are that; with `need`, also canonical (a sorted copy with a values map when not). */
int canonical_rows(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *in, bool need, RowMat *out, cudaStream_t s);

/* spgemm.cu: out[i] = the caller's values mapped through src (NULL: the same position) and run
 * (NULL: no duplicates; else the sum of src[run[i]] .. src[run[i+1]-1] in order), as doubles. */
int gather_values(const void *in, acc_dtype dtype, int64_t count, const uint32_t *src, const int64_t *run,
                  double *out, cudaStream_t s);

} // namespace acc_spgemm

#endif /* ACC_SPGEMM_INTERNAL_H */
