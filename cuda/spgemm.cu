/*
 * spgemm.cu -- the GPU SpGEMM's C ABI (spgemm.h): C = A @ B for device CSR operands, products and
 * sums in FP64 rounded once, deterministic, scipy's pattern (exact zeros dropped by the
 * compaction).  This file holds the memory pool, the checks, the operands' canonical form, the
 * model that picks the algorithm, and the compaction; the algorithms are
 *   spgemm_tiles.cu  8x8 bitmap tiles, FP64 Tensor Cores for dense tile pairs (tSparse's design);
 *   spgemm_rows.cu   row by row on CUDA cores (row groups sorted in shared memory).
 *
 * The model.  A tile pair of A and B tiles holding dA and dB entries does about dA dB / 8 scalar
 * products (each of A's entries meets the row of B's tile it names, dB / 8 entries), for one
 * pair's overhead: enumerating, sorting and loading it, two mma and a 64-slot accumulator.  dA and
 * dB are sampled (entries per nonempty tile over up to SAMPLES tile rows of each operand, at most
 * 2048 entries each); the products of every row of A are counted exactly (row_stats: small and
 * large rows, the large rows' entries).  Both algorithms' times are predicted from these (Model,
 * fitted on the H100: benchmarks/NOTES.md) and the faster runs.  Two kernels per operand and one
 * synchronisation, shared with the checks.
 *
 * Memory.  Every device allocation comes from the library's stream-ordered pool (device.cu), which
 * keeps up to ACCSPMM_POOL_KEEP_BYTES (default 1 GiB) between products, so a product makes no
 * cudaMalloc; acc_spgemm_gpu_trim_pool gives the rest back.  The plan counts its bytes (Tracker): the peak is
 * reported in its info.
 */
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <new>

#include "spgemm_internal.h"

namespace acc_spgemm {

/* ---- phase timing ------------------------------------------------------------------------------- */

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

PhaseTimer::PhaseTimer(acc_spgemm_gpu *plan, Phase phase) : p(plan), ph(phase), t0(0) {
    if (p->profile) {
        cudaStreamSynchronize(p->stream);
        t0 = now_ms();
    }
}

void PhaseTimer::next(Phase phase) {
    if (p->profile) {
        cudaStreamSynchronize(p->stream);
        const double t = now_ms();
        p->phase_ms[ph] += t - t0;
        t0 = t;
    }
    ph = phase;
}

PhaseTimer::~PhaseTimer() {
    if (p->profile) {
        cudaStreamSynchronize(p->stream);
        p->phase_ms[ph] += now_ms() - t0;
    }
}

Fork::Fork(acc_spgemm_gpu *plan, cudaStream_t s, bool want) : p_(plan), s_(s), side_(s) {
    if (!want || p_->profile) return;
    cudaStream_t t = nullptr;
    if (acc_side_stream(&t) != ACC_SUCCESS || t == s) return;
    for (cudaEvent_t &e : p_->fork_events)
        if (!e && cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
            e = nullptr;
            (void)cudaGetLastError();
            return;
        }
    if (cudaEventRecord(p_->fork_events[0], s) != cudaSuccess ||
        cudaStreamWaitEvent(t, p_->fork_events[0], 0) != cudaSuccess) {
        (void)cudaGetLastError();
        return; /* nothing was enqueued on t for this fork: run in sequence on s */
    }
    side_ = t;
}

int Fork::join() {
    if (side_ == s_) return ACC_SUCCESS;
    const cudaStream_t t = side_;
    side_ = s_;
    if (cudaEventRecord(p_->fork_events[1], t) == cudaSuccess &&
        cudaStreamWaitEvent(s_, p_->fork_events[1], 0) == cudaSuccess)
        return ACC_SUCCESS;
    /* s could not be ordered after t's work: wait for it here instead (the memory it uses is freed in
     * s's order after this) */
    const int st = acc_cuda_status(cudaGetLastError(), "Fork::join");
    cudaStreamSynchronize(t);
    return st ? st : ACC_ERR_CUDA;
}

/* ---- kernels: checks, the canonical form, values, the model's samples ----------------------------- */

namespace {

/* One pass over an operand: bad |= 1 for offsets that are not a CSR's, 2 for a column out of
 * [0, k); with `descents`, the canonical test too (every row strictly increasing) without marking
 * the row starts: each descent ci[e] <= ci[e-1] must be at a row start, so the count of descents
 * less the count of row starts that are descents is 0 exactly for a canonical operand (the block's
 * difference is added modulo 2^64; meaningful where the offsets are valid, else bad is set). */
template <typename IdxT>
__global__ void check_operand(int64_t m, int64_t k, int64_t nnz, const IdxT *__restrict__ rp,
                              const IdxT *__restrict__ ci, unsigned long long *__restrict__ bad,
                              unsigned long long *__restrict__ descents) {
    using Reduce = cub::BlockReduce<long long, kThreads>;
    __shared__ typename Reduce::TempStorage tmp;
    long long d = 0;
    GRID_STRIDE(i, max(m + 1, nnz)) {
        if (i <= m) {
            const int64_t v = (int64_t)rp[i];
            if ((i == 0 && v != 0) || (i == m && v != nnz) || (i > 0 && v < (int64_t)rp[i - 1]) || v < 0 ||
                v > nnz)
                atomicOr(bad, 1ull);
            if (descents && i < m) {
                const int64_t v1 = (int64_t)rp[i + 1];
                if (v > 0 && v < v1 && v1 <= nnz) d -= ci[v] <= ci[v - 1]; /* a row start that descends */
            }
        }
        if (i < nnz) {
            const int64_t c = (int64_t)ci[i];
            if (c < 0 || c >= k) atomicOr(bad, 2ull);
            if (descents && i > 0) d += ci[i] <= ci[i - 1];
        }
    }
    if (!descents) return; /* uniform */
    d = Reduce(tmp).Sum(d);
    if (threadIdx.x == 0 && d) atomicAdd(descents, (unsigned long long)d);
}

template <typename IdxT>
__global__ void widen_offsets(int64_t n, const IdxT *__restrict__ in, int64_t *__restrict__ out) {
    GRID_STRIDE(i, n) out[i] = (int64_t)in[i];
}

__global__ void narrow_columns(int64_t n, const int64_t *__restrict__ in, int32_t *__restrict__ out) {
    GRID_STRIDE(i, n) out[i] = (int32_t)in[i];
}

/* key (row, column) = row << cb | column and index of every entry (rows by binary search); cb: the
 * columns' bits, so that the sort runs over the bits of rows and columns only. */
template <typename IdxT>
__global__ void row_keys(int64_t m, int64_t nnz, const IdxT *__restrict__ rp, const IdxT *__restrict__ ci,
                         int cb, uint64_t *__restrict__ keys, uint32_t *__restrict__ src) {
    GRID_STRIDE(e, nnz) {
        const int64_t row = last_le(0, m - 1, e, [&](int64_t i) { return (int64_t)rp[i]; });
        keys[e] = ((uint64_t)row << cb) | (uint64_t)ci[e];
        src[e] = (uint32_t)e;
    }
}

__global__ void key_heads(int64_t nnz, const uint64_t *__restrict__ keys, int64_t *__restrict__ slot) {
    GRID_STRIDE(j, nnz) slot[j] = j == 0 || keys[j] != keys[j - 1];
}

__global__ void canonical_fill(int64_t nnz, const uint64_t *__restrict__ keys, int cb,
                               const int64_t *__restrict__ slot, int32_t *__restrict__ ci,
                               int64_t *__restrict__ rows, int64_t *__restrict__ run) {
    GRID_STRIDE(j, nnz) {
        if (j == 0 || keys[j] != keys[j - 1]) {
            const int64_t s = slot[j] - 1;
            ci[s] = (int32_t)(keys[j] & ((1ull << cb) - 1));
            rows[s] = (int64_t)(keys[j] >> cb);
            if (run) run[s] = j;
        }
    }
}

template <typename V>
__global__ void gather(int64_t count, const V *__restrict__ in, const uint32_t *__restrict__ src,
                       const int64_t *__restrict__ run, double *__restrict__ out) {
    GRID_STRIDE(i, count) {
        if (!src) {
            out[i] = (double)in[i];
        } else if (!run) {
            out[i] = (double)in[src[i]];
        } else {
            const int64_t j0 = run[i], j1 = run[i + 1];
            double sum = (double)in[src[j0]];
            for (int64_t j = j0 + 1; j < j1; j++)
                sum += (double)in[src[j]];
            out[i] = sum;
        }
    }
}

constexpr int kSampleThreads = 256, kSampleItems = 8, SAMPLES = 512;
using SampleSort = cub::BlockRadixSort<uint32_t, kSampleThreads, kSampleItems>;

/* One operand's sample: `samples` tile rows of its m rows; entries and distinct tile columns go to
 * out[0], out[1]. */
template <typename IdxT> struct SampleOperand {
    int64_t m, samples, length; /* length: ci's length as the caller gave it */
    const IdxT *rp, *ci;
    int end_bit;
    unsigned long long *out;
};

/* Block per sampled tile row of operand blockIdx.y (A and B in one launch: each is a wave of short
 * blocks, so two launches took twice the time of one): its first (up to 2048) entries' tile columns,
 * sorted; entries and distinct tile columns added to its out[0], out[1]. */
template <typename IdxT>
__global__ void __launch_bounds__(kSampleThreads) sample_tiles(SampleOperand<IdxT> a, SampleOperand<IdxT> b) {
    const SampleOperand<IdxT> &op = blockIdx.y ? b : a;
    const int64_t m = op.m, samples = op.samples, length = op.length;
    const IdxT *__restrict__ rp = op.rp;
    const IdxT *__restrict__ ci = op.ci;
    const int end_bit = op.end_bit;
    unsigned long long *__restrict__ out = op.out;
    /* min(rp[m], length) bounds the reads of ci */
    __shared__ union {
        typename SampleSort::TempStorage sort;
        uint32_t last[kSampleThreads];
    } sm;
    const int64_t mt = (m + 7) / 8;
    for (int64_t s = blockIdx.x; s < samples; s += gridDim.x) {
        const int64_t I = s * mt / samples;
        /* bounds clamped: this may run before the checks' verdict */
        const int64_t nnz = max((int64_t)0, min((int64_t)rp[m], length));
        const int64_t e0 = max((int64_t)0, min((int64_t)rp[8 * I], nnz));
        const int64_t e1 = max(e0, min((int64_t)rp[min(8 * I + 8, m)], nnz));
        const int64_t count = min(e1 - e0, (int64_t)(kSampleThreads * kSampleItems));
        uint32_t keys[kSampleItems];
#pragma unroll
        for (int t = 0; t < kSampleItems; t++) {
            const int64_t j = (int64_t)threadIdx.x * kSampleItems + t;
            keys[t] = j < count ? (uint32_t)((int64_t)ci[e0 + j] >> 3) : 0xFFFFFFFFu;
        }
        __syncthreads();
        SampleSort(sm.sort).Sort(keys, 0, end_bit); /* stable: the padding stays last */
        __syncthreads();
        sm.last[threadIdx.x] = keys[kSampleItems - 1];
        __syncthreads();
        uint32_t prev = threadIdx.x ? sm.last[threadIdx.x - 1] : 0xFFFFFFFFu;
        unsigned distinct = 0;
#pragma unroll
        for (int t = 0; t < kSampleItems; t++) {
            const int64_t j = (int64_t)threadIdx.x * kSampleItems + t;
            distinct += j < count && (j == 0 || keys[t] != prev);
            prev = keys[t];
        }
        distinct = __reduce_add_sync(0xFFFFFFFFu, distinct); /* one atomic per warp */
        if ((threadIdx.x & 31) == 0 && distinct) atomicAdd(&out[1], (unsigned long long)distinct);
        if (threadIdx.x == 0) atomicAdd(&out[0], (unsigned long long)count);
        __syncthreads();
    }
}

template <typename IdxT>
__global__ void copy_offsets(int64_t n, const int64_t *__restrict__ in, IdxT *__restrict__ out) {
    GRID_STRIDE(i, n) out[i] = (IdxT)in[i];
}

template <typename V> struct NonZero {
    __device__ bool operator()(V v) const { return v != (V)0; }
};
template <typename V> struct NonZeroCount {
    const V *vals;
    __device__ int64_t operator()(int64_t i) const { return vals[i] != (V)0; }
};

/* ---- host helpers ---------------------------------------------------------------------------------- */

/* Enqueues the checks of one operand into flags[0] (1: bad offsets, 2: a column out of range) and,
 * with `canonical`, flags[1] (nonzero: a row not strictly increasing). */
template <typename IdxT>
int enqueue_checks(const acc_spgemm_gpu_csr *A, unsigned long long *flags, bool canonical, cudaStream_t s) {
    const IdxT *rp = (const IdxT *)A->d_row_offsets, *ci = (const IdxT *)A->d_column_indices;
    /* at most a wave of blocks: each ends with a block reduction */
    const unsigned grid = wave_grid(check_operand<IdxT>, kThreads, 0, grid_for(std::max(A->m + 1, A->nnz)));
    check_operand<IdxT><<<grid, kThreads, 0, s>>>(A->m, A->k, A->nnz, rp, ci, flags,
                                                  canonical && A->nnz > 1 ? flags + 1 : nullptr);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

/* The checks of up to two operands, enqueued (check_operand, with the canonical test when asked), then
 * read back with the caller's synchronisation: flags [4] on the device, h [4] on the host. */
struct Checks {
    Tracker tr;
    Temp<unsigned long long> flags;
    unsigned long long h[4] = {0, 0, 0, 0};
    int count = 0;
    int enqueue(const acc_spgemm_gpu_csr *ops, int n, bool canonical, cudaStream_t s) {
        count = n;
        TRY(flags.alloc(4, s, &tr));
        ACC_CUDA_TRY(cudaMemsetAsync(flags.p, 0, 4 * sizeof(unsigned long long), s));
        for (int i = 0; i < n; i++) {
            const acc_spgemm_gpu_csr *A = &ops[i];
            TRY(A->index_bits == 32 ? enqueue_checks<int32_t>(A, flags.p + 2 * i, canonical, s)
                                    : enqueue_checks<int64_t>(A, flags.p + 2 * i, canonical, s));
        }
        ACC_CUDA_TRY(cudaMemcpyAsync(h, flags.p, sizeof h, cudaMemcpyDeviceToHost, s));
        return ACC_SUCCESS;
    }
    /* After the synchronisation: the first invalid operand's status (its index in *bad), and the
     * canonical flags (1 where sorted without duplicates). */
    int verdict(int *canonical, int *bad) const {
        for (int i = 0; i < count; i++) {
            if (h[2 * i]) {
                if (bad) *bad = i;
                return (h[2 * i] & 1) ? ACC_ERR_ROW_OFFSETS : ACC_ERR_COLUMN_INDEX;
            }
            if (canonical) canonical[i] = !h[2 * i + 1];
        }
        return ACC_SUCCESS;
    }
};

/* Checks count (<= 2) operands with one synchronisation; see Checks::verdict. */
int check_operands(const acc_spgemm_gpu_csr *ops, int count, int *canonical, int *bad, cudaStream_t s) {
    Checks c;
    TRY(c.enqueue(ops, count, canonical != nullptr, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    return c.verdict(canonical, bad);
}

/* The row path's canonical form of a non-canonical operand: one stable sort of (row, column). */
template <typename IdxT>
int canonicalize(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *in, RowMat *out, cudaStream_t s) {
    const int64_t m = in->m, nnz = in->nnz;
    if (nnz >= (int64_t(1) << 32) || m >= (int64_t(1) << 32)) return ACC_ERR_TOO_LARGE;
    Temp<uint64_t> k0, k1;
    Temp<uint32_t> s0, s1;
    TRY(k0.alloc((size_t)nnz, s, &p->tr));
    TRY(k1.alloc((size_t)nnz, s, &p->tr));
    TRY(s0.alloc((size_t)nnz, s, &p->tr));
    TRY(s1.alloc((size_t)nnz, s, &p->tr));
    const int cb = std::max(1, bits_for(in->k)); /* k < 2^31, m < 2^32: the key fits 63 bits */
    row_keys<IdxT><<<grid_for(nnz), kThreads, 0, s>>>(m, nnz, (const IdxT *)in->d_row_offsets,
                                                      (const IdxT *)in->d_column_indices, cb, k0.p, s0.p);
    LAUNCH_CHECK();
    cub::DoubleBuffer<uint64_t> kb(k0.p, k1.p);
    cub::DoubleBuffer<uint32_t> vb(s0.p, s1.p);
    const int end_bit = cb + std::max(1, bits_for(m)); /* the bits of rows and columns only (was 32 + rows) */
    size_t sort_bytes = 0, scan_bytes = 0;
    ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, kb, vb, nnz, 0, end_bit, s));
    ACC_CUDA_TRY(
        cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, (int64_t *)nullptr, (int64_t *)nullptr, nnz, s));
    Temp<char> temp;
    TRY(temp.alloc(std::max(sort_bytes, scan_bytes), s, &p->tr));
    ACC_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp.p, sort_bytes, kb, vb, nnz, 0, end_bit, s));
    Temp<int64_t> slot;
    TRY(slot.alloc((size_t)nnz, s, &p->tr));
    key_heads<<<grid_for(nnz), kThreads, 0, s>>>(nnz, kb.Current(), slot.p);
    LAUNCH_CHECK();
    ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp.p, scan_bytes, slot.p, slot.p, nnz, s));
    int64_t nv = 0;
    ACC_CUDA_TRY(cudaMemcpyAsync(&nv, slot.p + nnz - 1, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    int32_t *ci = nullptr;
    int64_t *rp = nullptr, *run = nullptr;
    Temp<int64_t> rows;
    TRY(p->palloc(&ci, (size_t)nv));
    TRY(p->palloc(&rp, (size_t)m + 1));
    TRY(rows.alloc((size_t)nv, s, &p->tr));
    if (nv < nnz) TRY(p->palloc(&run, (size_t)nv + 1));
    canonical_fill<<<grid_for(nnz), kThreads, 0, s>>>(nnz, kb.Current(), cb, slot.p, ci, rows.p, run);
    LAUNCH_CHECK();
    if (run) {
        set_value<int64_t><<<1, 1, 0, s>>>(run + nv, nnz);
        LAUNCH_CHECK();
    }
    offsets_from_sorted<int64_t><<<grid_for(m + 1), kThreads, 0, s>>>(m, nv, rows.p, rp);
    LAUNCH_CHECK();
    TRY(p->palloc(&out->src, (size_t)nnz));
    ACC_CUDA_TRY(
        cudaMemcpyAsync(out->src, vb.Current(), (size_t)nnz * sizeof(uint32_t), cudaMemcpyDeviceToDevice, s));
    out->rp = rp;
    out->ci = ci;
    out->run = run;
    out->nnz = nv;
    ACC_CUDA_TRY(cudaStreamSynchronize(s)); /* the temporaries go back to the pool after the work */
    return ACC_SUCCESS;
}

template <typename IdxT>
SampleOperand<IdxT> sample_operand(const acc_spgemm_gpu_csr *in, unsigned long long *out) {
    const int64_t samples = in->nnz == 0 ? 0 : std::min<int64_t>(SAMPLES, (in->m + 7) / 8);
    return {in->m,
            samples,
            in->nnz,
            (const IdxT *)in->d_row_offsets,
            (const IdxT *)in->d_column_indices,
            std::max(1, bits_for((in->k + 7) / 8)),
            out};
}

/* A's sample and B's (B may be NULL; both of IdxT) in one launch. */
template <typename IdxT>
int enqueue_samples(const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B, unsigned long long *out,
                    cudaStream_t s) {
    const SampleOperand<IdxT> a = sample_operand<IdxT>(A, out);
    const SampleOperand<IdxT> b = B ? sample_operand<IdxT>(B, out + 2) : SampleOperand<IdxT>{};
    const int64_t blocks = std::max(a.samples, b.samples);
    if (blocks == 0) return ACC_SUCCESS;
    /* an operand with fewer samples than blocks (or none: B NULL, or no entries) has idle blocks */
    sample_tiles<IdxT><<<dim3((unsigned)blocks, B ? 2u : 1u), kSampleThreads, 0, s>>>(a, b);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

/* The model's row statistics, exact: per row of A (W lanes each, W a power of two up to 32 near its
 * mean entries, or the whole warp for rows of more than 32 entries), its products (the sum of B's row
 * lengths at its columns); out[0] += the products of small rows (at most ROWS_SMALL_MAX), out[1] +=
 * those of the others, out[2] += their entries, out[3] += their count, out[4] += the products of rows
 * of more than ROWS_MEDIUM_MAX, out[5] += the products of tiny rows (at most ROWS_TINY_MAX entries and
 * products: a warp each), out[6] += the products of the other rows of at most hash_max entries and
 * products (hashed: a warp each).  Offsets (to ci's length, lengthA) and columns are clamped (this runs
 * before the checks' verdict): invalid operands give wrong statistics, never a fault.  One set of
 * atomics per block: same-address atomics of every warp cost about 100 us on the H100.  W > 1 keeps
 * small matrices from running on a few warps whose lanes walk their rows' entries one after another
 * (H100, polblogs: 1,490 rows of 13 entries on average on 6 blocks of lanes: 20 us). */
constexpr int kRowStatsThreads = 256;
/* threads that keep a device busy (H100: 132 SMs of 2,048); more lanes a row than one only below
 * that.  (The grid stops at 1,024 blocks: on G3_circuit, 1.58M rows of 4.8 entries, 8 lanes a row
 * made each warp take 48 steps instead of 6, and its whole product was 8% slower.) */
constexpr int64_t kRowStatsBusy = 1 << 18;

template <typename IA, typename IB>
__global__ void __launch_bounds__(kRowStatsThreads)
    row_stats(int64_t m, int64_t k, const IA *__restrict__ rpA, const IA *__restrict__ ciA, int64_t lengthA,
              const IB *__restrict__ rpB, int64_t hash_max, int lanes_log2,
              unsigned long long *__restrict__ out) {
    const int lane = threadIdx.x & 31;
    const int W = 1 << lanes_log2, R = 32 >> lanes_log2; /* lanes per row, rows per warp at a time */
    const int sub = lane & (W - 1);                      /* this lane's place in its row's lanes */
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const int64_t nnz = max((int64_t)0, min((int64_t)rpA[m], lengthA));
    const int64_t nnzB = max((int64_t)rpB[k], (int64_t)0);
    auto length = [&](int64_t e) -> unsigned long long { /* B's row length at A's entry e */
                                                         const int64_t c = (int64_t)ciA[e];
                                                         if (c < 0 || c >= k) return 0;
                                                         const int64_t lo =
                                                             max((int64_t)0, min((int64_t)rpB[c], nnzB));
                                                         return (unsigned long long)max(
                                                             (int64_t)0, min((int64_t)rpB[c + 1], nnzB) - lo);
    };
    unsigned long long small = 0, large = 0, entries = 0, rows = 0, huge = 0, tiny = 0, hashed = 0;
    /* R rows per warp at a time, W lanes each; rows of more than 32 entries by the whole warp */
    for (int64_t base = warp * R; base < m; base += warps * R) {
        const int64_t i = base + (lane >> lanes_log2);
        int64_t e0 = 0, e1 = 0;
        if (i < m) {
            e0 = max((int64_t)0, min((int64_t)rpA[i], nnz));
            e1 = max(e0, min((int64_t)rpA[i + 1], nnz));
        }
        const bool shared = e1 - e0 > 32;
        unsigned long long prod = 0;
        if (!shared)
            for (int64_t e = e0 + sub; e < e1; e += W)
                prod += length(e);
        for (int o = W >> 1; o > 0; o >>= 1) /* the row's lanes' sum, in its first lane */
            prod += __shfl_xor_sync(0xFFFFFFFFu, prod, o);
        for (unsigned long_rows = __ballot_sync(0xFFFFFFFFu, shared && sub == 0); long_rows;
             long_rows &= long_rows - 1) {
            const int src = __ffs(long_rows) - 1;
            const int64_t s0 = __shfl_sync(0xFFFFFFFFu, e0, src), s1 = __shfl_sync(0xFFFFFFFFu, e1, src);
            unsigned long long part = 0;
            for (int64_t e = s0 + lane; e < s1; e += 32)
                part += length(e);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                part += __shfl_xor_sync(0xFFFFFFFFu, part, o);
            if (lane == src) prod = part;
        }
        if (i >= m || sub != 0) continue;
        if (prod <= (unsigned long long)ROWS_SMALL_MAX) {
            small += prod;
            if (e1 - e0 <= ROWS_TINY_MAX && prod <= (unsigned long long)ROWS_TINY_MAX)
                tiny += prod;
            else if (e1 - e0 <= hash_max && prod <= (unsigned long long)hash_max)
                hashed += prod;
        } else {
            large += prod;
            entries += (unsigned long long)(e1 - e0);
            rows++;
            if (prod > (unsigned long long)ROWS_MEDIUM_MAX) huge += prod;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        small += __shfl_xor_sync(0xFFFFFFFFu, small, o);
        large += __shfl_xor_sync(0xFFFFFFFFu, large, o);
        entries += __shfl_xor_sync(0xFFFFFFFFu, entries, o);
        rows += __shfl_xor_sync(0xFFFFFFFFu, rows, o);
        huge += __shfl_xor_sync(0xFFFFFFFFu, huge, o);
        tiny += __shfl_xor_sync(0xFFFFFFFFu, tiny, o);
        hashed += __shfl_xor_sync(0xFFFFFFFFu, hashed, o);
    }
    __shared__ unsigned long long part[kRowStatsThreads / 32][7];
    if (lane == 0) {
        part[threadIdx.x >> 5][0] = small;
        part[threadIdx.x >> 5][1] = large;
        part[threadIdx.x >> 5][2] = entries;
        part[threadIdx.x >> 5][3] = rows;
        part[threadIdx.x >> 5][4] = huge;
        part[threadIdx.x >> 5][5] = tiny;
        part[threadIdx.x >> 5][6] = hashed;
    }
    __syncthreads();
    if (threadIdx.x < 7) {
        unsigned long long sum = 0;
        for (int w = 0; w < kRowStatsThreads / 32; w++)
            sum += part[w][threadIdx.x];
        if (sum) atomicAdd(&out[threadIdx.x], sum);
    }
}

template <typename IA, typename IB>
int enqueue_row_stats_typed(const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B, int64_t hash_max,
                            unsigned long long *out, cudaStream_t s) {
    /* W: one lane a row where the rows alone give kRowStatsBusy threads, else the power of two that
     * does, at most the one at or above A's mean entries per row, and 32 */
    int lanes_log2 = 0;
    while (lanes_log2 < 5 && (A->m << lanes_log2) < kRowStatsBusy &&
           ((int64_t)1 << lanes_log2) * A->m < A->nnz)
        lanes_log2++;
    const int64_t threads = (A->m << lanes_log2);
    const int64_t blocks = std::min<int64_t>((threads + kRowStatsThreads - 1) / kRowStatsThreads, 1024);
    row_stats<IA, IB><<<(unsigned)blocks, kRowStatsThreads, 0, s>>>(
        A->m, B->m, (const IA *)A->d_row_offsets, (const IA *)A->d_column_indices, A->nnz,
        (const IB *)B->d_row_offsets, hash_max, lanes_log2, out);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

int enqueue_row_stats(const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B, int64_t hash_max,
                      unsigned long long *out, cudaStream_t s) {
    if (A->m == 0) return ACC_SUCCESS;
    if (A->index_bits == 32)
        return B->index_bits == 32 ? enqueue_row_stats_typed<int32_t, int32_t>(A, B, hash_max, out, s)
                                   : enqueue_row_stats_typed<int32_t, int64_t>(A, B, hash_max, out, s);
    return B->index_bits == 32 ? enqueue_row_stats_typed<int64_t, int32_t>(A, B, hash_max, out, s)
                               : enqueue_row_stats_typed<int64_t, int64_t>(A, B, hash_max, out, s);
}

/* Sampled entries and nonempty tiles of A and B (B may be NULL) into out [4], enqueued. */
int enqueue_densities(const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B, unsigned long long *out,
                      cudaStream_t s) {
    ACC_CUDA_TRY(cudaMemsetAsync(out, 0, 4 * sizeof(unsigned long long), s));
    return A->index_bits == 32 ? enqueue_samples<int32_t>(A, B, out, s)
                               : enqueue_samples<int64_t>(A, B, out, s);
}

/* The model: each algorithm's time (ms, whole call) as a linear function of statistics known before
 * either runs, fitted on the H100 (benchmarks/NOTES.md, "SpGEMM model"): the tiles by their tile
 * pairs, estimated as products / (dA dB / 8), and the operands' entries they tile; the rows by their small
 * rows' products (tiny, hash candidates and the others at their own rates: the candidates' fitted on
 * kron b2 and b3, whose rows all stay hashed), plus, for the large rows, their entries, products and n-wide
 * dense rows (n <= rows_dense_cols()), or their products (sorted, larger n: one block per row, or in batches
 * for rows of more than ROWS_MEDIUM_MAX products).  Only the comparison matters: a wrong choice costs time,
 * never correctness. */
struct Model {
    double tiles_ms0 = 1.05, tiles_ms_per_mpair = 0.086, tiles_ms_per_mentry = 0.14;
    double rows_ms0 = 0.45, small_ms_per_mproduct = 0.065, tiny_ms_per_mproduct = 0.04,
           hashed_ms_per_mproduct = 0.02;
    double dense_ms0 = 0.085, dense_ms_per_mentry = 0.15, dense_ms_per_mproduct = 0.0059,
           dense_ms_per_gcell = 7.1;
    double medium_ms_per_mproduct = 0.08, huge_ms_per_mproduct = 0.22;
};

/* operand_entries: the entries the tiles path tiles (A's, and B's where B is another matrix). */
void predict(acc_spgemm_gpu *p, int64_t operand_entries) {
    const Model M;
    const double mega = 1e-6;
    const double per_pair = std::max(p->est_density_a * p->est_density_b / 8.0, 1e-3);
    const double products = (double)(p->rs_small + p->rs_large);
    p->est_ms_tiles = M.tiles_ms0 + M.tiles_ms_per_mpair * products * mega / per_pair +
                      M.tiles_ms_per_mentry * (double)operand_entries * mega;
    double large = 0;
    if (p->n <= rows_dense_cols() && p->rs_large_rows > 0)
        large = M.dense_ms0 + M.dense_ms_per_mentry * (double)p->rs_large_entries * mega +
                M.dense_ms_per_mproduct * (double)p->rs_large * mega +
                M.dense_ms_per_gcell * (double)p->rs_large_rows * (double)p->n * 1e-9;
    else
        large = M.medium_ms_per_mproduct * (double)(p->rs_large - p->rs_huge) * mega +
                M.huge_ms_per_mproduct * (double)p->rs_huge * mega;
    p->est_ms_rows = M.rows_ms0 +
                     M.small_ms_per_mproduct * (double)(p->rs_small - p->rs_tiny - p->rs_hashed) * mega +
                     M.tiny_ms_per_mproduct * (double)p->rs_tiny * mega +
                     M.hashed_ms_per_mproduct * (double)p->rs_hashed * mega + large;
}

template <typename IdxT, typename V>
int compact_typed(int64_t m, int64_t nnz, const IdxT *rp, const IdxT *ci, const V *vals, IdxT *rp_out,
                  IdxT *ci_out, V *vals_out, cudaStream_t s) {
    Tracker tr;
    Temp<int64_t> counts, num;
    TRY(counts.alloc((size_t)m + 1, s, &tr));
    TRY(num.alloc(1, s, &tr));
    auto nonzero =
        thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0), NonZeroCount<V>{vals});
    size_t b1 = 0, b2 = 0, b3 = 0, b4 = 0;
    ACC_CUDA_TRY(cub::DeviceSegmentedReduce::Sum(nullptr, b1, nonzero, counts.p + 1, m, rp, rp + 1, s));
    ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, b2, counts.p + 1, counts.p + 1, m, s));
    auto flags = thrust::make_transform_iterator(vals, NonZero<V>());
    ACC_CUDA_TRY(cub::DeviceSelect::Flagged(nullptr, b3, ci, flags, ci_out, num.p, nnz, s));
    ACC_CUDA_TRY(cub::DeviceSelect::Flagged(nullptr, b4, vals, flags, vals_out, num.p, nnz, s));
    Temp<char> temp;
    const size_t bytes = std::max(std::max(b1, b2), std::max(b3, b4));
    TRY(temp.alloc(bytes, s, &tr));
    ACC_CUDA_TRY(cudaMemsetAsync(counts.p, 0, sizeof(int64_t), s));
    size_t use = bytes;
    ACC_CUDA_TRY(cub::DeviceSegmentedReduce::Sum(temp.p, use, nonzero, counts.p + 1, m, rp, rp + 1, s));
    use = bytes;
    ACC_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp.p, use, counts.p + 1, counts.p + 1, m, s));
    copy_offsets<IdxT><<<grid_for(m + 1), kThreads, 0, s>>>(m + 1, counts.p, rp_out);
    LAUNCH_CHECK();
    use = bytes;
    ACC_CUDA_TRY(cub::DeviceSelect::Flagged(temp.p, use, ci, flags, ci_out, num.p, nnz, s));
    use = bytes;
    ACC_CUDA_TRY(cub::DeviceSelect::Flagged(temp.p, use, vals, flags, vals_out, num.p, nnz, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    return ACC_SUCCESS;
}

/* B's row length at A's column of entry e (the scalar products of entry e). */
template <typename IdxT> struct RowLength {
    const IdxT *ci, *rp;
    __device__ int64_t operator()(int64_t e) const { return (int64_t)rp[ci[e] + 1] - (int64_t)rp[ci[e]]; }
};

/* The scalar products (a statistic of the tile path; the row path counts them anyway). */
template <typename IdxT>
int sum_row_lengths(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B,
                    cudaStream_t s) {
    if (A->nnz == 0) return ACC_SUCCESS;
    auto it = thrust::make_transform_iterator(
        thrust::counting_iterator<int64_t>(0),
        RowLength<IdxT>{(const IdxT *)A->d_column_indices, (const IdxT *)B->d_row_offsets});
    Temp<int64_t> out;
    TRY(out.alloc(1, s, &p->tr));
    size_t bytes = 0;
    ACC_CUDA_TRY(cub::DeviceReduce::Sum(nullptr, bytes, it, out.p, A->nnz, s));
    Temp<char> temp;
    TRY(temp.alloc(bytes, s, &p->tr));
    ACC_CUDA_TRY(cub::DeviceReduce::Sum(temp.p, bytes, it, out.p, A->nnz, s));
    ACC_CUDA_TRY(cudaMemcpyAsync(&p->products, out.p, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    return ACC_SUCCESS;
}

bool valid_csr(const acc_spgemm_gpu_csr *X) {
    return X && X->m >= 0 && X->k >= 0 && X->nnz >= 0 && (X->index_bits == 32 || X->index_bits == 64) &&
           X->d_row_offsets && (X->nnz == 0 || X->d_column_indices);
}

int analyse(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B, int *bad,
            cudaStream_t s) {
    p->m = A->m;
    p->k = A->k;
    p->n = B->k;
    int algo = p->opt.algorithm;
    {
        /* the operands' checks (validate) and the model's samples (auto): one synchronisation */
        PhaseTimer timer(p, PH_CHECK);
        Checks checks;
        Temp<unsigned long long> samples;
        acc_spgemm_gpu_csr ops[2] = {*A, *B};
        const int nops = p->same ? 1 : 2;
        if (p->opt.validate) TRY(checks.enqueue(ops, nops, true, s));
        if (algo == ACC_SPGEMM_ALGO_AUTO) {
            TRY(samples.alloc(11, s, &p->tr));
            TRY(enqueue_densities(A, p->same ? nullptr : B, samples.p, s));
        }
        unsigned long long h[11] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        if (algo == ACC_SPGEMM_ALGO_AUTO) {
            ACC_CUDA_TRY(cudaMemsetAsync(samples.p + 4, 0, 7 * sizeof(unsigned long long), s));
            TRY(enqueue_row_stats(A, B, rows_hash_max(p), samples.p + 4, s));
            ACC_CUDA_TRY(cudaMemcpyAsync(h, samples.p, sizeof h, cudaMemcpyDeviceToHost, s));
        }
        if (p->opt.validate || algo == ACC_SPGEMM_ALGO_AUTO) ACC_CUDA_TRY(cudaStreamSynchronize(s));
        if (p->opt.validate) {
            int canonical[2] = {0, 0};
            TRY(checks.verdict(canonical, bad));
            p->A_in.canonical = canonical[0];
            p->B_in.canonical = p->same ? canonical[0] : canonical[1];
        }
        if (algo == ACC_SPGEMM_ALGO_AUTO) {
            p->est_density_a = h[1] ? (double)h[0] / (double)h[1] : 0.0;
            p->est_density_b = p->same ? p->est_density_a : (h[3] ? (double)h[2] / (double)h[3] : 0.0);
            p->rs_small = (int64_t)h[4];
            p->rs_large = (int64_t)h[5];
            p->rs_large_entries = (int64_t)h[6];
            p->rs_large_rows = (int64_t)h[7];
            p->rs_huge = (int64_t)h[8];
            p->rs_tiny = (int64_t)h[9];
            p->rs_hashed = (int64_t)h[10];
            p->rs_known = true;
            predict(p, A->nnz + (p->same ? 0 : B->nnz));
            algo = p->est_ms_tiles < p->est_ms_rows ? ACC_SPGEMM_ALGO_TILES : ACC_SPGEMM_ALGO_ROWS;
        }
    }
    A = &p->A_in;
    B = &p->B_in;
    TRY(p->palloc(&p->zeros, 1));
    /* C's row offsets, and after them the count of row groups that stage_entries does not take and the
     * count of hashed rows (spgemm_rows.cu) */
    TRY(p->palloc(&p->row_ptr, (size_t)p->m + 3));
    ACC_CUDA_TRY(cudaMemsetAsync(p->row_ptr + p->m + 1, 0, 2 * sizeof(int64_t), s));
    if (algo == ACC_SPGEMM_ALGO_TILES) {
        p->path = PATH_TILES;
        if (p->opt.algorithm == ACC_SPGEMM_ALGO_AUTO) /* the model counted them */
            p->products = p->rs_small + p->rs_large;
        else
            TRY(A->index_bits == 32 ? sum_row_lengths<int32_t>(p, A, B, s)
                                    : sum_row_lengths<int64_t>(p, A, B, s));
        TRY(tiles_analyse(p, A, B, s));
    } else {
        p->path = PATH_ROWS;
        {
            PhaseTimer timer(p, PH_CHECK);
            /* A as it is (rows in any order, duplicates: their products add up like scipy's); B too,
             * unless the dense accumulation of large rows may run (n small, and a large row unless the
             * model's statistics show none: they count duplicates, so canonical forms have no more),
             * which needs B's rows free of duplicate columns: then a canonical copy of B where it is
             * not canonical */
            const bool dense = p->n <= rows_dense_cols() && !(p->rs_known && p->rs_large_rows == 0);
            p->dense_large = dense;
            TRY(canonical_rows(p, A, p->same && dense, &p->RA, s));
            if (p->same)
                p->RB = p->RA;
            else
                TRY(canonical_rows(p, B, dense, &p->RB, s));
        }
        TRY(rows_analyse(p, s));
    }
    int64_t h[3] = {0, 0, 0};
    u64 reserved = 0;
    ACC_CUDA_TRY(cudaMemcpyAsync(h, p->row_ptr + p->m, sizeof h, cudaMemcpyDeviceToHost, s));
    if (p->fused_ready)
        ACC_CUDA_TRY(
            cudaMemcpyAsync(&reserved, p->hash_count + 3, sizeof reserved, cudaMemcpyDeviceToHost, s));
    ACC_CUDA_TRY(cudaStreamSynchronize(s));
    p->fused_reserved = (int64_t)reserved;
    p->nnz_s = h[0];
    p->wide_groups = h[1];
    p->hashed_rows = h[2];
    return ACC_SUCCESS;
}

} // namespace

int canonical_rows(acc_spgemm_gpu *p, const acc_spgemm_gpu_csr *in, bool need, RowMat *out, cudaStream_t s) {
    out->m = in->m;
    out->k = in->k;
    out->nnz = in->nnz;
    out->nnz_in = in->nnz;
    out->src = nullptr;
    out->run = nullptr;
    if (in->nnz >= (int64_t(1) << 32)) return ACC_ERR_TOO_LARGE;
    int canonical = in->canonical;
    if (need && canonical < 0) TRY(check_operands(in, 1, &canonical, nullptr, s));
    if (need && !canonical)
        return in->index_bits == 32 ? canonicalize<int32_t>(p, in, out, s)
                                    : canonicalize<int64_t>(p, in, out, s);
    if (in->index_bits == 32) {
        int64_t *rp = nullptr;
        TRY(p->palloc(&rp, (size_t)in->m + 1));
        widen_offsets<int32_t>
            <<<grid_for(in->m + 1), kThreads, 0, s>>>(in->m + 1, (const int32_t *)in->d_row_offsets, rp);
        LAUNCH_CHECK();
        out->rp = rp;
        out->ci = (const int32_t *)in->d_column_indices;
    } else {
        int32_t *ci = nullptr;
        TRY(p->palloc(&ci, (size_t)in->nnz));
        narrow_columns<<<grid_for(in->nnz), kThreads, 0, s>>>(in->nnz, (const int64_t *)in->d_column_indices,
                                                              ci);
        LAUNCH_CHECK();
        out->rp = (const int64_t *)in->d_row_offsets;
        out->ci = ci;
    }
    return ACC_SUCCESS;
}

int gather_values(const void *in, acc_dtype dtype, int64_t count, const uint32_t *src, const int64_t *run,
                  double *out, cudaStream_t s) {
    if (count == 0) return ACC_SUCCESS;
    if (dtype == ACC_FLOAT32)
        gather<float><<<grid_for(count), kThreads, 0, s>>>(count, (const float *)in, src, run, out);
    else
        gather<double><<<grid_for(count), kThreads, 0, s>>>(count, (const double *)in, src, run, out);
    LAUNCH_CHECK();
    return ACC_SUCCESS;
}

} // namespace acc_spgemm

using namespace acc_spgemm;

acc_spgemm_gpu::~acc_spgemm_gpu() {
    for (void *q : owned)
        acc_pool_free(q, nullptr); /* every call synchronised before returning: nothing uses them */
    for (cudaEvent_t e : fork_events)
        if (e) cudaEventDestroy(e);
}

extern "C" int acc_spgemm_gpu_check_csr(const acc_spgemm_gpu_csr *ops, int count, int *canonical, int *bad,
                                        void *stream) {
    if (!ops || count < 1) return ACC_ERR_INVALID_ARGUMENT;
    for (int i = 0; i < count; i++)
        if (!valid_csr(&ops[i])) return ACC_ERR_INVALID_ARGUMENT;
    return check_operands(ops, count, canonical, bad, (cudaStream_t)stream);
}

extern "C" int acc_spgemm_gpu_trim_pool(void) { return acc_cuda_trim_pool(); }

extern "C" int acc_spgemm_gpu_analyse(const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B,
                                      const acc_spgemm_gpu_options *options, acc_spgemm_gpu **plan,
                                      int *bad_operand, void *stream) {
    if (!plan) return ACC_ERR_INVALID_ARGUMENT;
    *plan = nullptr;
    if (!valid_csr(A) || !valid_csr(B) || A->k != B->m || A->index_bits != B->index_bits ||
        B->k >= (int64_t(1) << 31))
        return ACC_ERR_INVALID_ARGUMENT;
    acc_spgemm_gpu *p = new (std::nothrow) acc_spgemm_gpu;
    if (!p) return ACC_ERR_OUT_OF_MEMORY;
    if (options) p->opt = *options;
    p->same = p->opt.same && A->m == B->m && A->k == B->k && A->nnz == B->nnz &&
              A->d_row_offsets == B->d_row_offsets && A->d_column_indices == B->d_column_indices;
    p->A_in = *A;
    p->B_in = *B;
    p->profile = getenv("ACCSPMM_SPGEMM_PROFILE") != nullptr;
    cudaStream_t s = (cudaStream_t)stream;
    p->stream = s;
    const int st = analyse(p, A, B, bad_operand, s);
    if (st != ACC_SUCCESS) {
        cudaStreamSynchronize(s);
        delete p;
        return st;
    }
    *plan = p;
    return ACC_SUCCESS;
}

extern "C" int acc_spgemm_gpu_get_info(const acc_spgemm_gpu *p, acc_spgemm_gpu_info *info) {
    if (!p || !info) return ACC_ERR_INVALID_ARGUMENT;
    *info = acc_spgemm_gpu_info{};
    info->m = p->m;
    info->k = p->k;
    info->n = p->n;
    info->tiles_a = p->A.ntiles;
    info->tiles_b = p->B.ntiles;
    info->values_a = p->path == PATH_TILES ? p->A.nvals : p->RA.nnz;
    info->values_b = p->path == PATH_TILES ? p->B.nvals : p->RB.nnz;
    info->tiles_c = p->nc;
    info->raw_pairs = p->raw_total;
    info->pairs = p->pairs_total;
    info->products = p->products;
    info->nnz_structural = p->nnz_s;
    info->chunks = (int64_t)p->chunks.size();
    info->segments = p->nseg;
    info->pairs_kept = p->kept_pairs != nullptr;
    info->plan_bytes = p->plan_bytes;
    info->peak_bytes = p->tr.peak;
    info->algorithm = p->path == PATH_TILES ? ACC_SPGEMM_ALGO_TILES : ACC_SPGEMM_ALGO_ROWS;
    info->density_a = p->est_density_a;
    info->density_b = p->est_density_b;
    info->model_ms_tiles = p->est_ms_tiles;
    info->model_ms_rows = p->est_ms_rows;
    info->large_products = p->rs_large;
    info->large_entries = p->rs_large_entries;
    info->tiny_products = p->rs_tiny;
    info->hashed_products = p->rs_hashed;
    info->hashed_rows = p->hashed_rows;
    info->large_rows = p->nlarge;
    info->row_groups = p->ngroups;
    for (int64_t u : p->large_products) /* (copied before analyse's last synchronisation) */
        info->max_row_products = std::max(info->max_row_products, u);
    for (int i = 0; i < PH_COUNT && i < 9; i++)
        info->phase_ms[i] = p->phase_ms[i];
    info->fused_cap = p->fused_cap;
    info->fused_reserved = p->fused_reserved;
    info->hash_places = p->places_state == 2 ? 2 * p->rs_hashed : 0;
    info->tiny_places = p->tiny_state == 2 ? 32 * p->m : 0;
    return ACC_SUCCESS;
}

extern "C" int acc_spgemm_gpu_get_tiles(const acc_spgemm_gpu *p, acc_spgemm_gpu_tiles *t) {
    if (!p || !t) return ACC_ERR_INVALID_ARGUMENT;
    t->tiles_c = p->nc;
    t->d_tile_row_offsets = p->crow_ptr;
    t->d_tile_cols = p->ccol;
    t->d_tile_masks = (const uint64_t *)p->cmask;
    t->d_row_offsets = p->row_ptr;
    return ACC_SUCCESS;
}

extern "C" int acc_spgemm_gpu_numeric(acc_spgemm_gpu *p, const void *d_a_values, const void *d_b_values,
                                      acc_dtype in_dtype, void *d_row_offsets, void *d_columns,
                                      int c_index_bits, void *d_values, acc_dtype out_dtype, int64_t *zeros,
                                      void *stream) {
    if (!p || !zeros || !d_row_offsets || (c_index_bits != 32 && c_index_bits != 64) ||
        (in_dtype != ACC_FLOAT32 && in_dtype != ACC_FLOAT64) ||
        (out_dtype != ACC_FLOAT32 && out_dtype != ACC_FLOAT64) || (p->A_in.nnz > 0 && !d_a_values) ||
        (p->B_in.nnz > 0 && !d_b_values) || (p->nnz_s > 0 && (!d_columns || !d_values)))
        return ACC_ERR_INVALID_ARGUMENT;
    if (c_index_bits == 32 && (p->nnz_s > INT32_MAX || p->n > (int64_t)INT32_MAX + 1))
        return ACC_ERR_TOO_LARGE;
    cudaStream_t s = (cudaStream_t)stream;
    p->stream = s;
    *zeros = 0;
    /* the fused symbolic pass's sums serve the first numeric call only, and only with its values */
    p->fused_use = p->fused_ready && p->numeric_calls == 0 && d_a_values == p->opt.a_values &&
                   (p->same || d_b_values == p->opt.b_values) && (int)in_dtype == p->opt.values_dtype &&
                   (int)out_dtype == p->opt.out_dtype;
    p->fused_ready = false;
    int st = acc_cuda_status(cudaMemsetAsync(p->zeros, 0, sizeof(u64), s), "cudaMemsetAsync");
    if (st == ACC_SUCCESS) {
        if (c_index_bits == 32) {
            copy_offsets<int32_t>
                <<<grid_for(p->m + 1), kThreads, 0, s>>>(p->m + 1, p->row_ptr, (int32_t *)d_row_offsets);
            st = acc_cuda_status(cudaPeekAtLastError(), "copy_offsets");
        } else {
            st = acc_cuda_status(cudaMemcpyAsync(d_row_offsets, p->row_ptr,
                                                 (size_t)(p->m + 1) * sizeof(int64_t),
                                                 cudaMemcpyDeviceToDevice, s),
                                 "cudaMemcpyAsync");
        }
    }
    if (st == ACC_SUCCESS && p->nnz_s > 0)
        st = p->path == PATH_TILES ? tiles_numeric(p, d_a_values, d_b_values, in_dtype, d_columns,
                                                   c_index_bits, d_values, out_dtype, s)
                                   : rows_numeric(p, d_a_values, d_b_values, in_dtype, d_columns,
                                                  c_index_bits, d_values, out_dtype, s);
    p->fused_use = false;
    if (p->places_state == 1) p->places_state = st == ACC_SUCCESS ? 2 : 3; /* 3: never read */
    if (p->tiny_state == 1) p->tiny_state = st == ACC_SUCCESS ? 2 : 3;
    /* A plan multiplied a second time will likely be again: keep its dense rows' structural columns
     * (this call's output before any compaction) for the next calls (acc_spgemm_gpu.known_cols). */
    const bool keep = st == ACC_SUCCESS && ++p->numeric_calls == 2 && p->path != PATH_TILES &&
                      p->dense_large && p->nlarge > 0 && c_index_bits == 32 && p->nnz_s > 0 && !p->known_cols;
    if (keep) { /* an optimisation: without memory for it, the calls go on setting bits */
        int32_t *kept = nullptr;
        if (p->palloc(&kept, (size_t)p->nnz_s) == ACC_SUCCESS &&
            cudaMemcpyAsync(kept, d_columns, (size_t)p->nnz_s * sizeof(int32_t), cudaMemcpyDeviceToDevice,
                            s) == cudaSuccess)
            p->known_cols = kept;
        else
            (void)cudaGetLastError();
    }
    u64 z = 0;
    if (st == ACC_SUCCESS)
        st = acc_cuda_status(cudaMemcpyAsync(&z, p->zeros, sizeof(u64), cudaMemcpyDeviceToHost, s),
                             "cudaMemcpyAsync");
    const int sync = acc_cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    if (st == ACC_SUCCESS) st = sync;
    if (st != ACC_SUCCESS)
        p->known_cols = nullptr; /* never read columns a failed call may not have written */
    *zeros = (int64_t)z;
    return st;
}

extern "C" int acc_spgemm_gpu_compact(int64_t m, int64_t nnz_in, const void *d_row_offsets,
                                      const void *d_columns, const void *d_values, int index_bits,
                                      acc_dtype dtype, void *d_row_offsets_out, void *d_columns_out,
                                      void *d_values_out, void *stream) {
    if (m < 0 || nnz_in < 0 || !d_row_offsets || !d_row_offsets_out ||
        (index_bits != 32 && index_bits != 64) || (dtype != ACC_FLOAT32 && dtype != ACC_FLOAT64))
        return ACC_ERR_INVALID_ARGUMENT;
    cudaStream_t s = (cudaStream_t)stream;
    if (m == 0 || nnz_in == 0) {
        const size_t b = (size_t)(m + 1) * (index_bits == 32 ? 4 : 8);
        ACC_CUDA_TRY(cudaMemcpyAsync(d_row_offsets_out, d_row_offsets, b, cudaMemcpyDeviceToDevice, s));
        return acc_cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    }
#define ACC_COMPACT(I, V)                                                                                    \
    compact_typed<I, V>(m, nnz_in, (const I *)d_row_offsets, (const I *)d_columns, (const V *)d_values,      \
                        (I *)d_row_offsets_out, (I *)d_columns_out, (V *)d_values_out, s)
    if (index_bits == 32)
        return dtype == ACC_FLOAT32 ? ACC_COMPACT(int32_t, float) : ACC_COMPACT(int32_t, double);
    return dtype == ACC_FLOAT32 ? ACC_COMPACT(int64_t, float) : ACC_COMPACT(int64_t, double);
#undef ACC_COMPACT
}

extern "C" void acc_spgemm_gpu_destroy(acc_spgemm_gpu *plan) { delete plan; }
