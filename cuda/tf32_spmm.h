/*
 * tf32_spmm.h -- launcher of the TF32 Tensor-Core BitTCF SpMM (tf32_spmm.cu).
 * All pointers are device pointers; lengths in brackets.
 */
#ifndef ACC_TF32_SPMM_H
#define ACC_TF32_SPMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Warps per thread block; a task row of the schedule has ACC_TF32_TASK_WORDS int32 entries. */
#define ACC_TF32_WARPS 2 /* 2 rather than 8: see benchmarks/NOTES.md, v4 -> v5 */
#define ACC_TF32_TASK_WORDS (1 + 2 * ACC_TF32_WARPS)
/* The narrow CSR kernel's long rows: more entries than this go to thread blocks (acc_tf32_csr). */
#define ACC_TF32_CSR_LONG 1024
/* The wide CSR kernel's long rows (n > acc_tf32_narrow_max()): more entries than this go to parts. */
#define ACC_TF32_CSR_WIDE_LONG 32
/* Widths up to this run on CUDA cores (tf32_spmm.cu, narrow_kernel): the same tasks, slice 0 only.
 * H100, TF32, the 24 real matrices, kernel time Tensor Cores / CUDA cores (geomean, min): n = 1 1.50x,
 * 1.14x; n = 2 1.42x, 1.09x; n = 4 1.27x, 1.01x; n = 8 0.96x, 0.75x (benchmarks/NOTES.md). */
#define ACC_TF32_NARROW_MAX 4

/* Kernel variant (see the kernel file's header): column slice per warp 32 * slice_s
 * (slice_s 1 or 2; half formats 64 * slice_s; slice_s = 0: narrow steps of 16 columns, half formats 32, the
 * register pipeline at depth 2 or 3 only, with S = 1's element path where n is not a multiple of 4 (TF32)
 * or 8, or B or C is not 16-byte aligned), pipeline
 * depth (2 to 4 stages of the metadata ring, and of the B and value stages when staged), B loaded through L1
 * and L2 (cache_l1 = 1: ld.global.nc or cp.async.ca) or L2 only (0: ld.global.cg or cp.async.cg), B and
 * values staged through shared memory with cp.async (staged = 1) or loaded into a double set of registers
 * (0), and the grid order (slice_major = 1: every task of column slice 0, then slice 1, ...; 0: all slices of
 * task 0, then task 1, ...).  No variant changes a result bit: the schedule alone fixes
 * the order of every sum. */
typedef struct acc_tf32_variant {
    int slice_s;
    int depth;
    int cache_l1;
    int slice_major;
    int staged;
} acc_tf32_variant;

/* Narrow widths (n <= acc_tf32_narrow_max()) on A's CSR instead of BitTCF, when lanes > 0
 * (tf32_spmm.cu, csr_narrow_kernel; every elem): row i's entries offsets[i] .. [i + 1] - 1 in original
 * row order (no perm), columns cols, float32 values as the BitTCF path has them (TF32-rounded:
 * acc_tf32_round_values, as the BitTCF build rounds them; a half format's values, widened; duplicates
 * summed), lanes (1, 2, 4, 8, 16 or 32) lanes per row.  The rows of more than ACC_TF32_CSR_LONG
 * entries go to thread blocks instead, one per part: long_parts[4 q .. 4 q + 3] is part q's row, its
 * entries e0 .. e1 - 1 (CSR positions) and (part index j) | (parts P << 32), a row's parts consecutive
 * (q - j is the first).  With P > 1 each part's sums go to workspace[4 q ..] and the part that arrives last
 * (counters[q - j]) adds the P in part order and leaves the counter at zero: the workspace holds 4 *
 * num_parts floats and the counters num_parts int32 (zero before the first launch).  parts_first: the parts'
 * thread blocks come before the rows' (else after them).  The tasks are not read then.
 * Wider widths (every elem) take the same struct on the wide CSR kernel (tf32_spmm.cu, csr_wide_kernel):
 * lanes must be acc_tf32_csr_wide_lanes(n) (lanes a row; 4 columns a lane), or half of it where that is at
 * least 4 (8 columns a lane, where n is a multiple of 8 and B and C are 16-byte aligned, else the full lanes
 * of 4 columns: the same slices, the same bits); the long rows are those of more than ACC_TF32_CSR_WIDE_LONG
 * entries, a group of lanes per part, their parts always first; with P > 1 part q's sums go to workspace[q *
 * W ..] (W = slices * 4 * lanes columns, slices = ceil(n / (4 * lanes))) and the counters hold num_parts *
 * slices int32 (row-major by part). */
typedef struct acc_tf32_csr {
    const int64_t *offsets;
    const int32_t *cols;
    const float *values;
    const int64_t *long_parts;
    int64_t num_parts;
    int lanes;
    int parts_first;
} acc_tf32_csr;

/* An acc_tf32_csr from device addresses as integers (0 = NULL), as the Python layer passes them. */
static inline acc_tf32_csr acc_tf32_csr_of(unsigned long long offsets, unsigned long long cols,
                                           unsigned long long values, int lanes,
                                           unsigned long long long_parts, long long num_parts,
                                           int parts_first) {
    acc_tf32_csr c;
    c.offsets = (const int64_t *)(uintptr_t)offsets;
    c.cols = (const int32_t *)(uintptr_t)cols;
    c.values = (const float *)(uintptr_t)values;
    c.long_parts = (const int64_t *)(uintptr_t)long_parts;
    c.num_parts = num_parts;
    c.lanes = lanes;
    c.parts_first = parts_first;
    return c;
}

typedef struct acc_tf32_args {
    int64_t m, k, n;               /* A is m x k, B k x n, C m x n (row-major) */
    int64_t num_windows;           /* ceil(m / 8), <= INT32_MAX */
    const int64_t *perm;           /* [m] new -> old row */
    const int64_t *window_offsets; /* [num_windows + 1] */
    /* [12 * blocks]: block b's 48-byte record at 12 b: its 8 columns interleaved
     * (c0, c4, c1, c5, c2, c6, c3, c7; no padding: an unused slot
     * repeats a real column of the block, with its mask bits clear), its 64-bit mask and its 64-bit value
     * offset (both little-endian: low word first).  Packed from BitTCF by the plan
     * (accspmm._tf32.pack_meta) so that 3 lanes copy a block's metadata with one 16-byte
     * cp.async each. */
    const int32_t *block_meta;
    const float *values; /* [nnz], TF32-rounded */
    /* Schedule: task t is row = tasks[t * ACC_TF32_TASK_WORDS ..] (int32), by row[0]:
     *   0 PACK:   warp i runs whole windows row[1 + 2i] .. row[2 + 2i] - 1 (empty range: idle);
     *   1 GROUP:  warp i works on window w = row[1 + 2i] (-1: idle) as warp j = row[2 + 2i] >> 4
     *             of g = row[2 + 2i] & 15 consecutive warps: the window's blocks cut into g equal
     *             ranges, warp j takes range j; warp i - j sums the g partials in warp order;
     *   < 0 SPLIT: part row[1] of row[2] parts of window -row[0]-1: the window's blocks cut into
     *         row[2] equal ranges, this part's range cut into ACC_TF32_WARPS equal ranges, one per
     *         warp, summed in warp order.  With more than one part, each part's sum goes to
     *         workspace slot row[4] + part and the part that arrives last (counters[row[3]])
     *         sums the slots in part order.
     * Every window is in exactly one PACK warp, one GROUP or all parts of one SPLIT. */
    const int32_t *tasks;
    int64_t num_tasks;
    /* [slots * slices * 8 * 32 * slice_s] (narrow steps: what S = 1 needs), NULL when no split has parts > 1
     * (the CSR kernel: see acc_tf32_csr) */
    float *workspace;
    int32_t *counters; /* [splits * slices] (narrow steps: their slices), zero before the first launch; left
                        * zero by every launch */
    const float *B;    /* [k * n] (elem > 0: half bits of that format, read through this pointer's bytes) */
    float *C;          /* [m * n] (elem > 0: half bits, or float32 when out_f32) */
    /* Operand format.  0 (ACC_TF32_ELEM_TF32): float32 B and C, values TF32-rounded floats [nnz].
     * ACC_TF32_ELEM_FP16 / _BF16: B half bits of that format, FP32 accumulation, C rounded to
     * the format (nearest even) or float32 when out_f32; `values` then points at one dense 8 x 8
     * tile per block (64 halves, row-major, zeros where the mask is clear: acc_half_tiles) and a
     * record's value offset is 64 x its block index (in halves).  A half warp covers 64 columns
     * per step instead of 32: a column slice is 64 * slice_s columns and the split workspace
     * 8 * 64 * slice_s floats per slot and slice; slice_s = 0 takes 32-column steps of 8-byte pieces (the
     * columns and warps of TF32's S = 1; n a multiple of 8 with B and C 16-byte aligned, other widths run
     * 64-column slices).  Half formats take cache_l1 = 1 and depth 2 or 3.
     * Where the slice is not full they run S = 1; with n a multiple of 8 and B, C 16-byte aligned
     * with 16-byte loads and stores under a per-lane predicate; at n < 8 (where ACCSPMM_NARROW_MAX
     * keeps such widths off the CUDA-core kernel) or with B or C not 16-byte aligned on copies of B
     * and C padded to a multiple of 8 columns (pool memory in the stream's order); else on the element
     * path in the register pipeline (the same bits).  Every format runs n <= acc_tf32_narrow_max() on
     * CUDA cores instead (tf32_spmm.cu, narrow_kernel: no alignment needed, other bits than the
     * Tensor-Core kernel's on data that is not exact, the same error bound). */
    int elem;
    int out_f32;
    acc_tf32_csr csr; /* narrow widths on A's CSR (csr.lanes > 0), else zeros */
} acc_tf32_args;

#define ACC_TF32_ELEM_TF32 0
#define ACC_TF32_ELEM_FP16 1
#define ACC_TF32_ELEM_BF16 2

/* Launches C = A @ B on `stream` (cudaStream_t, NULL = default); asynchronous.
 * ACC_ERR_INVALID_ARGUMENT for an unknown variant or inconsistent sizes. */
int acc_tf32_spmm(const acc_tf32_args *args, const acc_tf32_variant *variant, void *stream);

/* The same with the split workspace (workspace_floats floats) and counters (`counters` int32)
 * allocated, zeroed and freed on `stream` (cudaMallocAsync / cudaMemsetAsync / cudaFreeAsync)
 * around the launch, ignoring args->workspace and args->counters: under a CUDA-graph capture these
 * become the graph's own memory nodes, so each graph owns its workspace. */
int acc_tf32_spmm_ordered(const acc_tf32_args *args, const acc_tf32_variant *variant, void *stream,
                          size_t workspace_floats, size_t counters);

/* values[0 .. count - 1] rounded to TF32 in place on `stream` (the narrow CSR kernel's values), as the
 * BitTCF build rounds A: nearest, ties away from zero; inf and NaN unchanged. */
int acc_tf32_round_values(float *values, int64_t count, void *stream);

/* The widest n that runs on CUDA cores: ACC_TF32_NARROW_MAX, or ACCSPMM_NARROW_MAX from the environment
 * (0 .. ACC_TF32_NARROW_MAX, read once; 0 keeps every width on the Tensor Cores, for comparisons). */
int acc_tf32_narrow_max(void);
/* Lanes per row of the wide CSR kernel at width n (2 to 32: the least power of two >= n / 4). */
int acc_tf32_csr_wide_lanes(int64_t n);

/* Shared memory (bytes) a variant's thread block uses. */
int acc_tf32_shared_bytes(const acc_tf32_variant *variant);

/* The schedule on the device (tf32_schedule.cu), as csrc/acc_schedule_cost.c builds it on the host:
 * the same sums, maxes, counts and rows.  constants: WB, FILL, REDUCE, TASK, MERGE (whole numbers in
 * [0, 1024]); d_window_offsets [num_windows + 1], non-decreasing (else the status word says where).
 * acc_tf32_schedule_price: caps[ncaps] (host, ncaps <= 16, each in [0, 2^20]) priced on `stream`
 * into d_out[8 * ncaps]: per cap (sum, max, tasks, slots, splits, windows of more than cap blocks,
 * status, 0) as int64, status -1 or 4 * (first bad window) + (1: offsets decrease, 2: too large).
 * acc_tf32_schedule_rows: the ntasks rows of cap (ntasks and max_cost as priced) into
 * d_tasks[ACC_TF32_TASK_WORDS * ntasks], in window order (lpt = 0) or longest predicted task first
 * (lpt = 1, stable: accspmm._tf32.lpt_order); d_out (8 int64, may be NULL) as the pricing's.
 * Scratch from the library's pool in the order of `stream`; nothing waits for the device. */
int acc_tf32_schedule_price(const int64_t *d_window_offsets, int64_t num_windows, const int64_t *caps,
                            int ncaps, const int64_t constants[5], int64_t *d_out, void *stream);
int acc_tf32_schedule_rows(const int64_t *d_window_offsets, int64_t num_windows, int64_t cap,
                           const int64_t constants[5], int64_t ntasks, int64_t max_cost, int lpt,
                           int32_t *d_tasks, int64_t *d_out, void *stream);

#ifdef __cplusplus
}
#endif

#endif
