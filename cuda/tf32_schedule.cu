/*
 * tf32_schedule.cu -- the TF32 kernel's schedule on the device: the costs of
 * every cap (sum, max and count of the task costs, the split counts) and the
 * task rows of one cap, the same numbers and rows as the C schedule
 * (csrc/acc_schedule_cost.c, which stays the reference and serves host-only
 * callers), from the window offsets the plan already holds on the device.
 *
 * A plan's first call used to price every cap and build the chosen cap's rows
 * on the host (7-20 ns per window and cap on the GPU machine's host, pubmed's
 * pricing 180 us cold) and upload the rows; here the device prices every cap
 * at once and the host reads 8 numbers per cap.
 *
 * The C pass is a state machine over the windows; with two warps per task
 * (ACC_TF32_WARPS == 2, checked below) every step of it is a prefix of
 * something, so a tile of windows is two block-wide scans:
 *   1. a segmented sum of the PACK windows' costs (blocks + WB), reset by each
 *      GROUP or SPLIT window: P(w), the cost of w's run before w.  A PACK
 *      window costs at most cap + WB = D, so the C rule "open a warp when the
 *      run's cost reaches the next multiple of D" is: w opens a warp when it
 *      starts its run or floor(P(w) / D) != floor(P(w - 1) / D), and its warp
 *      is the run's warp k = floor(P(w) / D) (cap 0: every window is a warp,
 *      k = w).  Warps 2t and 2t + 1 of a run form a task;
 *   2. sums of the tasks each window opens (a PACK window opening an even
 *      warp: 1; GROUP: 1, since with two warps a GROUP window (g = 2) fills
 *      its task; SPLIT: q), of the multi-part splits and of their slots (the
 *      row index, split id and first slot of each window's tasks), and the
 *      last warp opener and last task opener with their P (a "last non-empty"
 *      scan).
 * A PACK window whose successor opens a warp or ends the run closes its warp;
 * where that ends a task (an odd warp, or the run's end) the window writes the
 * task: its warps run from the task opener to the warp opener and from there to
 * the window after this one, and cost P differences + FILL, the slower + TASK.
 * GROUP and SPLIT windows write their own tasks.  Costs are integers (int64);
 * the C core sums them as doubles, exact below 2^53, so the sums agree.
 *
 * The windows of a cap are cut into chunks, one thread block each, in one
 * cooperative launch (grid.sync between the phases; every cap's blocks at
 * once, at most one wave): (1) each block's segmented-sum total; (2) each
 * block's step-2 total, from its predecessors' step-1 totals; (3) the tasks,
 * from both prefixes; (4) block 0 of each cap adds up the blocks' costs.  A
 * block walks its chunk in tiles of 256 windows (one a thread), carrying both
 * scans from tile to tile.  O(windows + blocks^2) work per cap.  Up to 1,536
 * windows one block per cap runs phases 3 and 4 alone (no grid barrier): on
 * the H100 (globaltimer stamps) a tile of phase 3 took about 1.9 us and the
 * barriers, phases 1-2 and the folds about 11 us together.  Where the device
 * refuses the cooperative grid, one block per cap does it all.  Scratch (the
 * blocks' totals) comes from the library's pool in the stream's order.
 *
 * The rows of one cap come from the same kernel with `rows` set; the launch
 * order "longest predicted task first" (accspmm._tf32.lpt_order: a stable
 * sort by descending cost) is a block radix sort in the same launch up to
 * 4,096 tasks, else a stable cub radix sort of (cost, row index) and a
 * gather; temporaries from the pool, in the stream's order.
 */
#include <cooperative_groups.h>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <cstdint>

#include "acc_cuda_internal.h"
#include "tf32_spmm.h"

static_assert(ACC_TF32_WARPS == 2,
              "the device schedule assumes two warps per task (a GROUP window fills one)");

namespace {

constexpr int kThreads = 256;
constexpr int kWords = ACC_TF32_TASK_WORDS;
/* LPT order inside the rows kernel (one block radix sort, no more launches) up to this many tasks */
constexpr int kSortMax = kThreads * 16;
/* One block per cap (no grid barrier, no phases 1-2) up to this many windows: a block's tile of 256
 * windows takes about 1.9 us in phase 3 on the H100 and the three grid barriers, the other phases
 * and the folds about 11 us together (globaltimer stamps, benchmarks/NOTES.md) */
constexpr int64_t kOneBlockMax = 6 * kThreads;

struct Consts {
    int64_t WB, FILL, REDUCE, TASK, MERGE;
};

/* Segmented sum: f = 1 starts a new segment (a GROUP or SPLIT window, which adds nothing). */
struct Seg {
    int64_t v;
    int f;
};
struct SegOp {
    __device__ Seg operator()(const Seg &a, const Seg &b) const { return {b.f ? b.v : a.v + b.v, a.f | b.f}; }
};

/* Step 2's sums and the last warp opener (lo) and task opener (lt), pos -1: none. */
struct Acc {
    int64_t opens, splits, slots, lo_p, lt_p;
    int32_t lo, lt;
};
struct AccOp {
    __device__ Acc operator()(const Acc &a, const Acc &b) const {
        Acc r;
        r.opens = a.opens + b.opens;
        r.splits = a.splits + b.splits;
        r.slots = a.slots + b.slots;
        r.lo = b.lo >= 0 ? b.lo : a.lo;
        r.lo_p = b.lo >= 0 ? b.lo_p : a.lo_p;
        r.lt = b.lt >= 0 ? b.lt : a.lt;
        r.lt_p = b.lt >= 0 ? b.lt_p : a.lt_p;
        return r;
    }
};
__device__ __forceinline__ Acc acc_none() { return {0, 0, 0, 0, 0, -1, -1}; }

/* A running prefix across tiles (cub's block prefix callback: warp 0 calls it with the tile's total). */
template <typename T, typename Op> struct Running {
    T total;
    Op op;
    __device__ T operator()(const T &tile) {
        const T before = total;
        total = op(total, tile);
        return before;
    }
};

/* The caps a launch prices, one thread block each (a kernel parameter: no device array). */
constexpr int kMaxCaps = 16;
struct Caps {
    int64_t c[kMaxCaps];
};

struct MaxOp {
    __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};
__device__ __forceinline__ int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* The launch's arguments (one struct: a cooperative launch takes an argument array). */
struct Args {
    const int64_t *wo;
    int64_t W;
    Caps caps;
    Consts k;
    int64_t chunk;           /* windows per block, a multiple of kThreads */
    Seg *agg1;               /* [ncaps * nb]: each block's segmented-sum total */
    Acc *agg2;               /* [ncaps * nb]: each block's step-2 total */
    int64_t *part;           /* [ncaps * nb * 3]: each block's cost sum, max and cut windows */
    unsigned long long *bad; /* [ncaps]: first bad window * 4 + code */
    int64_t *out;            /* [8 * ncaps] or NULL */
    int32_t *rows;           /* rows mode: [capacity * kWords] */
    uint64_t *keys;          /* with rows: each task's cost (for an LPT sort), or NULL */
    int32_t *index;          /* with keys, for the device-wide sort: each task's row (its values), or NULL */
    int64_t capacity;
    int index_bits, end_bit; /* kSortItems > 0: the sort keys' layout */
    int32_t *sorted;         /* kSortItems > 0: the rows in LPT order */
};

/* A window's neighbourhood: offsets w - 1 .. w + 2 (clamped to [0, W]). */
struct Window {
    int64_t w, nbp, nb, nbn;
    bool valid;
};
__device__ __forceinline__ Window window_at(const Args &a, int64_t w, int64_t hi) {
    Window x;
    x.w = w;
    x.valid = w < hi;
    int64_t off[4];
    for (int j = 0; j < 4; j++) {
        const int64_t at = w - 1 + j;
        off[j] = x.valid ? a.wo[at < 0 ? 0 : at > a.W ? a.W : at] : 0;
    }
    x.nbp = off[1] - off[0];
    x.nb = off[2] - off[1];
    x.nbn = off[3] - off[2];
    return x;
}

__device__ __forceinline__ Seg seg_of(const Window &x, int64_t cap, const Consts &k) {
    return !x.valid ? Seg{0, 0} : cap == 0 || x.nb <= cap ? Seg{x.nb + k.WB, 0} : Seg{0, 1};
}

/* A window's step-2 element given p, the cost of its run before it; flags: bit 0 the window ends a
 * task (PACK), bit 1 its warp is odd. */
__device__ __forceinline__ Acc element(const Window &x, int64_t W, int64_t cap, const Consts &k, int64_t p,
                                       int &flags) {
    Acc a = acc_none();
    flags = 0;
    const int64_t w = x.w, nb = x.nb, D = cap + k.WB, two_cap = 2 * cap;
    if (!x.valid || nb < 0) return a;
    if (cap == 0 || nb <= cap) { /* PACK */
        const bool ends_run = w + 1 == W || (cap > 0 && x.nbn > cap);
        bool opener, next_opens;
        int64_t kw;
        if (cap == 0) {
            kw = w;
            opener = true;
            next_opens = !ends_run;
        } else {
            /* warp k = floor(p / D); the previous window (cost nbp + WB <= D) is in warp k - 1 iff the
             * remainder is below its cost, and the next opens warp k + 1 iff this window takes the
             * remainder to D: one division (32-bit where p allows) */
            kw = p < (int64_t(1) << 32) ? (int64_t)((uint32_t)p / (uint32_t)D) : p / D;
            const int64_t r = p - kw * D;
            opener = w == 0 || x.nbp > cap || r < x.nbp + k.WB;
            next_opens = !ends_run && r + nb + k.WB >= D;
        }
        const int odd = (int)(kw & 1);
        flags = ((ends_run || next_opens) && (odd || ends_run)) | odd << 1;
        if (opener) {
            a.lo = (int32_t)w;
            a.lo_p = p;
            if (!odd) {
                a.opens = 1;
                a.lt = (int32_t)w;
                a.lt_p = p;
            }
        }
    } else if (nb <= two_cap) { /* GROUP */
        a.opens = 1;
    } else { /* SPLIT */
        const int64_t q = (nb + two_cap - 1) / two_cap;
        a.opens = q;
        a.splits = 1;
        a.slots = q;
    }
    return a;
}

template <int kSortItems> struct Shared {
    using Scan1 = cub::BlockScan<Seg, kThreads>;
    using Scan2 = cub::BlockScan<Acc, kThreads>;
    using Reduce = cub::BlockReduce<int64_t, kThreads>;
    using Sort = cub::BlockRadixSort<uint64_t, kThreads, kSortItems ? kSortItems : 1>;
    union {
        typename Scan1::TempStorage s1;
        typename Scan2::TempStorage s2;
        typename Reduce::TempStorage r;
        typename Sort::TempStorage sort;
    } u;
};

/* The ordered fold of v[0 .. count) (op, identity id), on every thread of the block. */
template <typename T, typename Op, typename Scan, typename Storage>
__device__ T ordered_fold(const T *v, int64_t count, Op op, T id, Storage &storage) {
    const int64_t per = (count + kThreads - 1) / kThreads, lo = threadIdx.x * per;
    T mine = id;
    for (int64_t i = lo; i < lo + per && i < count; i++)
        mine = op(mine, v[i]);
    T ignored, total;
    Scan(storage).ExclusiveScan(mine, ignored, op, total);
    __syncthreads();
    return total;
}

/* Walks windows [lo, hi) in tiles of kThreads (one a thread, the next tile's offsets loaded ahead),
 * both scans carried from tile to tile by run1 and run2, and calls visit(x, p, e, ex, flags) for
 * each thread's window x: p its run's cost before it, e its step-2 element, ex the step-2 prefix
 * before it (visit runs on every thread, x.valid or not, after the tile's barriers). */
template <typename S, typename Visit>
__device__ __forceinline__ void walk(const Args &a, int64_t lo, int64_t hi, int64_t cap, const Consts &k,
                                     Running<Seg, SegOp> &run1, Running<Acc, AccOp> &run2, S &sh,
                                     Visit visit) {
    Window next = window_at(a, lo + threadIdx.x, hi);
    for (int64_t base = lo; base < hi; base += kThreads) {
        const Window x = next;
        next = window_at(a, base + kThreads + threadIdx.x, hi);
        Seg p;
        typename S::Scan1(sh.u.s1).ExclusiveScan(seg_of(x, cap, k), p, SegOp(), run1);
        __syncthreads();
        int flags;
        const Acc e = element(x, a.W, cap, k, p.v, flags);
        Acc ex;
        typename S::Scan2(sh.u.s2).ExclusiveScan(e, ex, AccOp(), run2);
        __syncthreads();
        visit(x, p, e, ex, flags);
    }
}

/* Block (b, c) of a grid of nb x ncaps (module header).  With nb = 1 there is no grid barrier, and
 * the launch need not be cooperative.  kSortItems > 0: the rows of one cap, then sorted (LPT) by
 * block 0 in phase 4, kSortItems keys a thread. */
template <int kSortItems> __global__ void __launch_bounds__(kThreads) schedule_kernel(Args a) {
    namespace cg = cooperative_groups;
    using S = Shared<kSortItems>;
    __shared__ S sh;
    const int64_t b = blockIdx.x, c = blockIdx.y, nb = gridDim.x;
    const int64_t cap = a.caps.c[c], W = a.W, lo = b * a.chunk, hi = lo + a.chunk < W ? lo + a.chunk : W;
    const Consts k = a.k;
    auto sync_grid = [&] {
        if (nb > 1) cg::this_grid().sync();
    };
    if (b == 0 && threadIdx.x == 0) a.bad[c] = ~0ull;
    /* (1) this block's segmented-sum total */
    Seg pre1{0, 0};
    if (nb > 1) {
        Running<Seg, SegOp> run1{{0, 0}, SegOp()};
        Window x = window_at(a, lo + threadIdx.x, hi);
        for (int64_t base = lo; base < hi; base += kThreads) {
            const Window next = window_at(a, base + kThreads + threadIdx.x, hi); /* loads ahead of the scan */
            Seg y;
            typename S::Scan1(sh.u.s1).ExclusiveScan(seg_of(x, cap, k), y, SegOp(), run1);
            __syncthreads();
            x = next;
        }
        if (threadIdx.x == 0) a.agg1[c * nb + b] = run1.total; /* lane 0 of warp 0 holds the total */
        sync_grid();
        pre1 = ordered_fold<Seg, SegOp, typename S::Scan1>(a.agg1 + c * nb, b, SegOp(), Seg{0, 0}, sh.u.s1);
    }
    /* (2) this block's step-2 total */
    Acc pre2 = acc_none();
    if (nb > 1) {
        Running<Seg, SegOp> run1{pre1, SegOp()};
        Running<Acc, AccOp> run2{acc_none(), AccOp()};
        walk(a, lo, hi, cap, k, run1, run2, sh,
             [](const Window &, const Seg &, const Acc &, const Acc &, int) {});
        if (threadIdx.x == 0) a.agg2[c * nb + b] = run2.total;
        sync_grid();
        pre2 = ordered_fold<Acc, AccOp, typename S::Scan2>(a.agg2 + c * nb, b, AccOp(), acc_none(), sh.u.s2);
    }
    /* (3) the tasks */
    Running<Seg, SegOp> run1{pre1, SegOp()};
    Running<Acc, AccOp> run2{pre2, AccOp()};
    int64_t sum = 0, mx = 0, cut = 0;
    auto fail = [&](int64_t w, int code) { atomicMin(a.bad + c, (unsigned long long)(w * 4 + code)); };
    auto emit = [&](int64_t r, int32_t r0, int32_t r1, int32_t r2, int32_t r3, int32_t r4, int64_t cost) {
        if (a.rows && r < a.capacity) {
            int32_t *row = a.rows + kWords * r;
            row[0] = r0;
            row[1] = r1;
            row[2] = r2;
            row[3] = r3;
            row[4] = r4;
            if (a.keys) a.keys[r] = (uint64_t)cost;
            if (a.index) a.index[r] = (int32_t)r; /* the device-wide sort's values only */
        }
    };
    walk(a, lo, hi, cap, k, run1, run2, sh,
         [&](const Window &x, const Seg &p, const Acc &e, const Acc &ex, int flags) {
             const int64_t w = x.w, nb = x.nb;
             if (!x.valid) return;
             if (nb < 0) {
                 fail(w, 1);
                 return;
             }
             if (nb > (int64_t(1) << 40) || ex.slots > INT32_MAX - nb) fail(w, 2); /* the C checks */
             const Acc in = AccOp()(ex, e);
             if (cap == 0 || nb <= cap) {
                 if (flags & 1) {
                     const int64_t pend = p.v + nb + k.WB;
                     int64_t cost;
                     if (flags & 2) { /* warps from the task opener and from the warp opener */
                         cost = imax(in.lo_p - in.lt_p, pend - in.lo_p) + k.FILL + k.TASK;
                         emit(in.opens - 1, 0, in.lt, in.lo, in.lo, (int32_t)(w + 1), cost);
                     } else { /* one warp, the run's last; the unused warp holds (end, end) */
                         cost = pend - in.lo_p + k.FILL + k.TASK;
                         emit(in.opens - 1, 0, in.lo, (int32_t)(w + 1), (int32_t)(w + 1), (int32_t)(w + 1),
                              cost);
                     }
                     sum += cost;
                     mx = imax(mx, cost);
                 }
             } else if (nb <= 2 * cap) {
                 cut++;
                 const int64_t cost = (nb + 1) / 2 + k.FILL + k.REDUCE + k.TASK;
                 emit(ex.opens, 1, (int32_t)w, 2, (int32_t)w, (1 << 4) | 2, cost);
                 sum += cost;
                 mx = imax(mx, cost);
             } else {
                 cut++;
                 const int64_t q = e.opens;
                 const int64_t cost =
                     (nb + q * 2 - 1) / (q * 2) + k.FILL + k.REDUCE + k.TASK + k.MERGE * (1 + q);
                 for (int64_t j = 0; a.rows && j < q; j++)
                     emit(ex.opens + j, (int32_t)(-(w + 1)), (int32_t)j, (int32_t)q, (int32_t)ex.splits,
                          (int32_t)ex.slots, cost);
                 sum += cost * q;
                 mx = imax(mx, cost);
             }
         });
    const int64_t bsum = typename S::Reduce(sh.u.r).Sum(sum);
    __syncthreads();
    const int64_t bmax = typename S::Reduce(sh.u.r).Reduce(mx, MaxOp());
    __syncthreads();
    const int64_t bcut = typename S::Reduce(sh.u.r).Sum(cut);
    __syncthreads();
    if (threadIdx.x == 0) {
        a.part[3 * (c * nb + b)] = bsum;
        a.part[3 * (c * nb + b) + 1] = bmax;
        a.part[3 * (c * nb + b) + 2] = bcut;
        if (nb == 1) a.agg2[c] = run2.total;
    }
    sync_grid();
    if (b != 0) return;
    /* (4) block 0 of each cap: the totals, and the rows in LPT order */
    int64_t tsum = 0, tmax = 0, tcut = 0;
    for (int64_t i = threadIdx.x; i < nb; i += kThreads) {
        const int64_t *q = a.part + 3 * (c * nb + i);
        tsum += q[0];
        tmax = imax(tmax, q[1]);
        tcut += q[2];
    }
    tsum = typename S::Reduce(sh.u.r).Sum(tsum);
    __syncthreads();
    tmax = typename S::Reduce(sh.u.r).Reduce(tmax, MaxOp());
    __syncthreads();
    tcut = typename S::Reduce(sh.u.r).Sum(tcut);
    __syncthreads();
    const Acc total =
        ordered_fold<Acc, AccOp, typename S::Scan2>(a.agg2 + c * nb, nb, AccOp(), acc_none(), sh.u.s2);
    if (a.out && threadIdx.x == 0) {
        int64_t *o = a.out + 8 * c;
        const unsigned long long bad = a.bad[c];
        o[0] = tsum;
        o[1] = tmax;
        o[2] = total.opens;
        o[3] = total.slots;
        o[4] = total.splits;
        o[5] = tcut;
        o[6] = bad == ~0ull ? -1 : (int64_t)bad;
        o[7] = 0;
    }
    if constexpr (kSortItems > 0) {
        uint64_t key[kSortItems];
        for (int i = 0; i < kSortItems; i++) {
            const int64_t r = threadIdx.x * kSortItems + i;
            key[i] = r < a.capacity ? a.keys[r] << a.index_bits | (uint64_t)(a.capacity - r)
                                    : 0; /* padding last */
        }
        typename S::Sort(sh.u.sort).SortDescending(key, 0, a.end_bit);
        for (int i = 0; i < kSortItems; i++) {
            const int64_t at = threadIdx.x * kSortItems + i;
            if (at >= a.capacity) break;
            const int64_t r = a.capacity - (int64_t)(key[i] & ((1ull << a.index_bits) - 1));
            for (int j = 0; j < kWords; j++)
                a.sorted[kWords * at + j] = a.rows[kWords * r + j];
        }
    }
}

__global__ void gather_rows(int64_t n, const int32_t *__restrict__ order, const int32_t *__restrict__ in,
                            int32_t *__restrict__ out) {
    GRID_STRIDE(i, n * kWords) {
        const int64_t t = i / kWords, j = i - t * kWords;
        out[i] = in[(int64_t)order[t] * kWords + j];
    }
}

int check_args(const int64_t *d_wo, int64_t W, const int64_t c[5]) {
    if (W < 0 || (W > 0 && !d_wo) || !c) return ACC_ERR_INVALID_ARGUMENT;
    if (W >= INT32_MAX - 1) return ACC_ERR_TOO_LARGE;
    for (int j = 0; j < 5; j++)
        if (c[j] < 0 || c[j] > 1024) return ACC_ERR_INVALID_ARGUMENT;
    return ACC_SUCCESS;
}

Consts consts_of(const int64_t c[5]) { return {c[0], c[1], c[2], c[3], c[4]}; }

/* Launches schedule_kernel<kSortItems> for the ncaps caps of a.caps: blocks per cap from the windows (one
 * per 256, as many as one wave allows for all caps), their scratch from the pool in `s`'s order, and
 * `extra` bytes more for the caller's temporaries, which place(a, at) points a's arrays into before
 * the launch.  *scratch: the allocation, which the caller frees (in stream order) after its last use.
 * A grid the device will not run cooperatively falls back to one block per cap. */
template <int kSortItems, typename Place>
int run_schedule(Args &a, int ncaps, size_t extra, Place place, char **scratch, cudaStream_t s) {
    const int64_t wave =
        wave_blocks(reinterpret_cast<const void *>(schedule_kernel<kSortItems>), kThreads, 0);
    const int64_t want = std::max<int64_t>(1, (a.W + kThreads - 1) / kThreads);
    int64_t nb = a.W <= kOneBlockMax ? 1 : std::max<int64_t>(1, std::min<int64_t>(want, wave / ncaps));
    /* ACCSPMM_SCHEDULE_MAX_BLOCKS (tests): at most this many blocks a cap; 1 runs the path a device that
     * refuses the cooperative grid takes */
    if (const char *env = std::getenv("ACCSPMM_SCHEDULE_MAX_BLOCKS")) {
        const long long cap_blocks = std::atoll(env);
        if (cap_blocks >= 1) nb = std::min<int64_t>(nb, cap_blocks);
    }
    a.chunk = ((a.W + nb - 1) / nb + kThreads - 1) / kThreads * kThreads;
    if (a.chunk == 0) a.chunk = kThreads;
    nb = std::max<int64_t>(1, (a.W + a.chunk - 1) / a.chunk);
    const size_t blocks = (size_t)ncaps * (size_t)nb;
    auto round = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t b1 = round(blocks * sizeof(Seg)), b2 = round(blocks * sizeof(Acc)),
                 b3 = round(blocks * 3 * sizeof(int64_t)),
                 b4 = round((size_t)ncaps * sizeof(unsigned long long));
    char *buf = nullptr;
    int st = acc_pool_alloc((void **)&buf, b1 + b2 + b3 + b4 + extra, s);
    if (st != ACC_SUCCESS) return st;
    *scratch = buf;
    a.agg1 = reinterpret_cast<Seg *>(buf);
    a.agg2 = reinterpret_cast<Acc *>(buf + b1);
    a.part = reinterpret_cast<int64_t *>(buf + b1 + b2);
    a.bad = reinterpret_cast<unsigned long long *>(buf + b1 + b2 + b3);
    place(a, buf + b1 + b2 + b3 + b4);
    cudaError_t e = cudaErrorCooperativeLaunchTooLarge;
    if (nb > 1) {
        void *args[] = {&a};
        e = cudaLaunchCooperativeKernel(reinterpret_cast<const void *>(schedule_kernel<kSortItems>),
                                        dim3((unsigned)nb, (unsigned)ncaps), dim3(kThreads), args, 0, s);
        if (e == cudaErrorCooperativeLaunchTooLarge || e == cudaErrorNotSupported) (void)cudaGetLastError();
    }
    if (e == cudaErrorCooperativeLaunchTooLarge || e == cudaErrorNotSupported) { /* one block per cap */
        a.chunk = std::max<int64_t>(a.W, 1);
        schedule_kernel<kSortItems><<<dim3(1, (unsigned)ncaps), kThreads, 0, s>>>(a);
        e = cudaPeekAtLastError();
    }
    return acc_cuda_status(e, "TF32 schedule");
}

Args args_of(const int64_t *d_wo, int64_t W, const int64_t c[5]) {
    Args a{};
    a.wo = d_wo;
    a.W = W;
    a.k = consts_of(c);
    return a;
}

} // namespace

extern "C" int acc_tf32_schedule_price(const int64_t *d_window_offsets, int64_t num_windows,
                                       const int64_t *caps, int ncaps, const int64_t constants[5],
                                       int64_t *d_out, void *stream) {
    int st = check_args(d_window_offsets, num_windows, constants);
    if (st != ACC_SUCCESS) return st;
    if (ncaps < 1 || ncaps > kMaxCaps || !caps || !d_out) return ACC_ERR_INVALID_ARGUMENT;
    Args a = args_of(d_window_offsets, num_windows, constants);
    for (int i = 0; i < ncaps; i++) {
        if (caps[i] < 0 || caps[i] > (1 << 20)) return ACC_ERR_INVALID_ARGUMENT;
        a.caps.c[i] = caps[i];
    }
    a.out = d_out;
    cudaStream_t s = (cudaStream_t)stream;
    char *scratch = nullptr;
    st = run_schedule<0>(
        a, ncaps, 0, [](Args &, char *) {}, &scratch, s);
    acc_pool_free(scratch, s);
    return st;
}

extern "C" int acc_tf32_schedule_rows(const int64_t *d_window_offsets, int64_t num_windows, int64_t cap,
                                      const int64_t constants[5], int64_t ntasks, int64_t max_cost, int lpt,
                                      int32_t *d_tasks, int64_t *d_out, void *stream) {
    int st = check_args(d_window_offsets, num_windows, constants);
    if (st != ACC_SUCCESS) return st;
    if (cap < 0 || cap > (1 << 20) || ntasks < 0 || ntasks > INT32_MAX || (ntasks > 0 && !d_tasks) ||
        max_cost < 0)
        return ACC_ERR_INVALID_ARGUMENT;
    cudaStream_t s = (cudaStream_t)stream;
    Args a = args_of(d_window_offsets, num_windows, constants);
    a.caps.c[0] = cap;
    a.out = d_out;
    a.capacity = ntasks;
    char *scratch = nullptr;
    if (!lpt || ntasks < 2) {
        a.rows = d_tasks;
        st = run_schedule<0>(
            a, 1, 0, [](Args &, char *) {}, &scratch, s);
        acc_pool_free(scratch, s);
        return st;
    }
    const size_t n = (size_t)ntasks, rows_bytes = (n * kWords * sizeof(int32_t) + 255) / 256 * 256;
    const int ib = bits_for(ntasks + 1);                           /* capacity - r in [1, ntasks] */
    if (ntasks <= kSortMax && ib + bits_for(max_cost + 1) <= 64) { /* rows, sort and gather in one launch */
        a.index_bits = ib;
        a.end_bit = ib + bits_for(max_cost + 1);
        a.sorted = d_tasks;
        auto place = [&](Args &x, char *at) { /* the block sort carries the row in its key: no index */
                                              x.rows = reinterpret_cast<int32_t *>(at);
                                              x.keys = reinterpret_cast<uint64_t *>(at + rows_bytes);
        };
        const size_t extra = rows_bytes + n * sizeof(uint64_t);
        /* the fewest keys a thread that hold the tasks: the sort's time grows with them (522 tasks in
         * 16 a thread took 20 us, 130 in 2 about 4 us, on the H100) */
        st = ntasks <= 2 * kThreads   ? run_schedule<2>(a, 1, extra, place, &scratch, s)
             : ntasks <= 4 * kThreads ? run_schedule<4>(a, 1, extra, place, &scratch, s)
             : ntasks <= 8 * kThreads ? run_schedule<8>(a, 1, extra, place, &scratch, s)
                                      : run_schedule<16>(a, 1, extra, place, &scratch, s);
        acc_pool_free(scratch, s);
        return st;
    }
    /* rows in window order into a temporary, then a stable descending sort of (cost, row) and a gather */
    const size_t keys_bytes = 2 * n * sizeof(uint64_t),
                 index_bytes = (2 * n * sizeof(int32_t) + 255) / 256 * 256;
    const int end_bit = std::max(1, bits_for(max_cost + 1));
    size_t temp_bytes = 0;
    {
        cub::DoubleBuffer<uint64_t> kb(nullptr, nullptr);
        cub::DoubleBuffer<int32_t> vb(nullptr, nullptr);
        ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairsDescending(nullptr, temp_bytes, kb, vb, (int64_t)n, 0,
                                                               end_bit, s));
    }
    char *temp = nullptr;
    st = run_schedule<0>(
        a, 1, rows_bytes + keys_bytes + index_bytes + temp_bytes,
        [&](Args &x, char *at) {
            x.rows = reinterpret_cast<int32_t *>(at);
            x.keys = reinterpret_cast<uint64_t *>(at + rows_bytes);
            x.index = reinterpret_cast<int32_t *>(at + rows_bytes + keys_bytes);
            temp = at + rows_bytes + keys_bytes + index_bytes;
        },
        &scratch, s);
    cub::DoubleBuffer<uint64_t> keys2(a.keys, a.keys + n);
    cub::DoubleBuffer<int32_t> index2(a.index, a.index + n);
    if (st == ACC_SUCCESS)
        st = acc_cuda_status(cub::DeviceRadixSort::SortPairsDescending(temp, temp_bytes, keys2, index2,
                                                                       (int64_t)n, 0, end_bit, s),
                             "TF32 schedule LPT sort");
    if (st == ACC_SUCCESS) {
        gather_rows<<<grid_for((int64_t)n * kWords), 256, 0, s>>>((int64_t)n, index2.Current(), a.rows,
                                                                  d_tasks);
        st = acc_cuda_status(cudaPeekAtLastError(), "TF32 schedule LPT gather");
    }
    acc_pool_free(scratch, s);
    return st;
}
