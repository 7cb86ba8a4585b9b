/*
 * accspmm.h -- the one public header of the accspmm C core.
 *
 * Plain C99 + OpenMP, no Python.  Every function returns an acc_status
 * (0 success, negative error), never prints and never exits.  Buffers are
 * always owned by the caller: functions whose output size is unknown come in
 * two passes (count, then fill into caller-allocated arrays).
 *
 * Conventions used by every function below
 * -----------------------------------------
 *  CSR (acc_csr): m rows, k columns, nnz = row_offsets[m].
 *      row_offsets[m+1]      int64, row_offsets[0] == 0, non-decreasing
 *      column_indices[nnz]   int32, each in [0, k)  (so k <= 2^31 - 1)
 *      values[nnz]           float or double (acc_csr.dtype)
 *    A CSR is *canonical* when every row's column indices are strictly
 *    increasing (sorted, no duplicates).  SpMM on CSR accepts any valid CSR
 *    (duplicates add up, order does not matter, as in scipy); the format
 *    builders need canonical input (acc_csr_canonicalize makes it).
 *
 *  Dense matrices are row-major and contiguous: B is k x n, C is m x n.
 *
 *  Permutations: perm[i] = original index of new row i (new -> old), int64.
 *
 *  BitTCF (Acc-SpMM's format, 8x8 Tensor-Core blocks):
 *    A row window is 8 consecutive rows of the *permuted* matrix:
 *    window w holds original rows perm[8w .. 8w+7] (fewer in the last one).
 *    The distinct column indices of a window, ascending, are cut into groups
 *    of 8; each group is one TC block of 8 rows x 8 compacted columns.
 *      window_offsets[W+1]        int64, W = ceil(m/8); blocks of window w are
 *                                 window_offsets[w] .. window_offsets[w+1]-1
 *      block_cols[8*nblocks]      int32, original column of each compacted
 *                                 column; ACC_PAD_COL (-1) in padding slots
 *      block_mask[nblocks]        uint64, bit r*8+c set where (window row r,
 *                                 compacted column c) is a nonzero
 *      block_value_offsets[nblocks+1]  int64, first value of each block
 *      values[nnz]                each block's values in ascending bit order
 *                                 (row-major inside the block)
 */
#ifndef ACCSPMM_H
#define ACCSPMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes shared by the C core and the CUDA layer. */
typedef enum acc_status {
    ACC_SUCCESS = 0,
    ACC_ERR_INVALID_ARGUMENT = -1, /* null pointer, negative size, bad enum */
    ACC_ERR_ROW_OFFSETS = -2,      /* row_offsets[0] != 0, decreasing, or end != nnz */
    ACC_ERR_COLUMN_INDEX = -3,     /* a column index outside [0, k) */
    ACC_ERR_PERMUTATION = -4,      /* perm is not a permutation of [0, m) */
    ACC_ERR_NOT_CANONICAL = -5,    /* unsorted or duplicate column indices in a row */
    ACC_ERR_TOO_LARGE = -6,        /* a size exceeds what a format or kernel indexes */
    ACC_ERR_OUT_OF_MEMORY = -7,    /* host allocation failed */
    ACC_ERR_NO_DEVICE = -8,        /* no CUDA driver or no CUDA device */
    ACC_ERR_DEVICE_MEMORY = -9,    /* cudaMalloc failed */
    ACC_ERR_CUDA = -10,            /* any other CUDA runtime error */
    ACC_ERR_CUSPARSE_LOAD = -11,   /* libcusparse could not be loaded */
    ACC_ERR_CUSPARSE = -12,        /* a cuSPARSE call failed */
    ACC_ERR_UNSUPPORTED = -13      /* valid request this build cannot serve */
} acc_status;

/* Human-readable text of a status code (static string, never NULL). */
const char *acc_status_string(int status);

/* Element type of values / dense matrices. */
typedef enum acc_dtype { ACC_FLOAT32 = 0, ACC_FLOAT64 = 1 } acc_dtype;

/* Padding slot of block_cols: the kernel loads zeros for it. */
#define ACC_PAD_COL (-1)
/* Rows per row window and columns per TC block. */
#define ACC_TILE 8

/* A read-only CSR view (see conventions above). */
typedef struct acc_csr {
    int64_t m;                     /* rows */
    int64_t k;                     /* columns, <= INT32_MAX */
    const int64_t *row_offsets;    /* [m+1] */
    const int32_t *column_indices; /* [nnz] */
    const void *values;            /* [nnz] float or double; may be NULL for pattern-only calls */
    acc_dtype dtype;
} acc_csr;

/* A read-only BitTCF view (see conventions above). */
typedef struct acc_bittcf {
    int64_t m, k;                       /* shape of A */
    int64_t num_windows;                /* ceil(m/8) */
    int64_t num_blocks;                 /* window_offsets[num_windows] */
    int64_t nnz;                        /* block_value_offsets[num_blocks] */
    const int64_t *perm;                /* [m] new -> old row */
    const int64_t *window_offsets;      /* [num_windows+1] */
    const int32_t *block_cols;          /* [8*num_blocks] */
    const uint64_t *block_mask;         /* [num_blocks] */
    const int64_t *block_value_offsets; /* [num_blocks+1] */
    const void *values;                 /* [nnz] float or double */
    acc_dtype dtype;
} acc_bittcf;

/* Statistics of a BitTCF (quality metrics exported to Python). */
typedef struct acc_bittcf_stats {
    int64_t num_blocks;        /* TC blocks */
    int64_t num_windows;       /* row windows, empty ones included */
    int64_t empty_windows;     /* windows with no block */
    double mean_nnz_per_block; /* MeanNNZTC = nnz / blocks (0 when no block) */
    double blocks_per_window_mean;
    int64_t blocks_per_window_max;
    double blocks_per_window_std; /* population standard deviation */
    double imbalance_degree;      /* IBD = mean |blocks_w - mean| (Acc-SpMM eq. 1) */
    int64_t bytes;                /* bytes of the BitTCF arrays (values at dtype size, perm excluded) */
    int64_t csr_bytes;            /* bytes of the same matrix as CSR with int32 indices, int64 offsets */
} acc_bittcf_stats;

/* Maps every page of a fresh host buffer (a store per 4 KiB page, pages split among threads), so
 * that a copy into it does not fault page by page; its contents are undefined afterwards. */
void acc_prefault(void *buf, size_t bytes);

/* ---- CSR checks and canonicalisation ---------------------------------- */

/* Validates a CSR: sizes, row_offsets, column range.
 *   A          CSR view; values unused
 *   canonical  out (may be NULL): 1 when every row is strictly increasing
 * Returns ACC_SUCCESS, ACC_ERR_INVALID_ARGUMENT, ACC_ERR_ROW_OFFSETS or
 * ACC_ERR_COLUMN_INDEX. Reads every entry; O(m + nnz), parallel. */
acc_status acc_csr_check(const acc_csr *A, int *canonical);

/* Narrows int64 column indices to int32 while checking their range.
 *   in[n]   int64 column indices
 *   k       number of columns (each index must be in [0, k), k <= INT32_MAX)
 *   out[n]  int32 result */
acc_status acc_indices_narrow(const int64_t *in, int64_t n, int64_t k, int32_t *out);

/* Sorts each row by column and sums duplicates (scipy's sum_duplicates),
 * writing a canonical copy; A is not modified. A must pass acc_csr_check.
 *   out_row_offsets[m+1], out_column_indices[nnz], out_values[nnz] (A.dtype)
 *   nnz_out   out: entries of the canonical copy (<= nnz); the arrays'
 *             first nnz_out entries hold it. */
acc_status acc_csr_canonicalize(const acc_csr *A, int64_t *out_row_offsets, int32_t *out_column_indices,
                                void *out_values, int64_t *nnz_out);

/* Checks that perm[m] is a permutation of [0, m). */
acc_status acc_perm_check(const int64_t *perm, int64_t m);

/* ---- SpMM on CSR (the CPU fast path) ------------------------------------ */

/* C = A @ B on the CPU, accumulating in A.dtype (float or double).
 *   A     any valid CSR (acc_csr_check passed); duplicates are summed
 *   B     [k*n] row-major, A.dtype
 *   n     columns of B and C (n >= 0)
 *   C     [m*n] row-major, A.dtype, fully overwritten
 * Parallel over rows (OpenMP), rows split by equal nnz. */
acc_status acc_csr_spmm(const acc_csr *A, const void *B, int64_t n, void *C);

/* ---- BitTCF ----------------------------------------------------------- */

/* Pass 1 of the BitTCF build: counts TC blocks per window.
 *   A               canonical CSR (values unused)
 *   perm[m]         new -> old rows (valid permutation)
 *   window_offsets  out [ceil(m/8)+1]: prefix sums of blocks per window */
acc_status acc_bittcf_count(const acc_csr *A, const int64_t *perm, int64_t *window_offsets);

/* Pass 2 of the BitTCF build: fills the block arrays.
 *   A, perm, window_offsets  as for/from acc_bittcf_count
 *   block_cols[8*nblocks], block_mask[nblocks],
 *   block_value_offsets[nblocks+1], values[nnz] (A.dtype)  out */
acc_status acc_bittcf_fill(const acc_csr *A, const int64_t *perm, const int64_t *window_offsets,
                           int32_t *block_cols, uint64_t *block_mask, int64_t *block_value_offsets,
                           void *values);

/* The TF32 kernel's schedule for `cap` (accspmm._tf32's cost model; the
 * task rows are defined in acc_schedule_cost.c and cuda/tf32_spmm.h), one
 * pass over the windows:
 *   window_offsets [num_windows + 1]  BitTCF window offsets (num_windows < 2^31 - 1)
 *   warps                             warps per task (ACC_TF32_WARPS, >= 2)
 *   c[5]                              WB, FILL, REDUCE, TASK, MERGE (model units)
 *   tasks [capacity * (1 + 2 warps)], task_cost [capacity]
 *                                     out, both NULL for the costs only (then
 *                                     call again with room for *ntasks rows);
 *                                     rows beyond capacity are not written, and
 *                                     the call fails (ACC_ERR_INVALID_ARGUMENT)
 *   counts [3]                        out, or NULL: the tasks of multi-part
 *                                     SPLIT windows (workspace slots), those
 *                                     windows, and the windows of more than
 *                                     cap blocks (GROUP or SPLIT)
 * c must hold whole numbers in [0, 1024] (ACC_ERR_INVALID_ARGUMENT otherwise).
 * Writes the sum and the max of the task costs and the number of tasks. */
acc_status acc_schedule_build(const int64_t *window_offsets, int64_t num_windows, int64_t cap, int warps,
                              const double c[5], int32_t *tasks, double *task_cost, int64_t capacity,
                              double *sum, double *max, int64_t *ntasks, int64_t counts[3]);

/* acc_schedule_build's costs only (integer arithmetic where the constants
 * are small non-negative integers: the same values). */
acc_status acc_schedule_cost(const int64_t *window_offsets, int64_t num_windows, int64_t cap, int warps,
                             const double c[5], double *sum, double *max, int64_t *ntasks);

/* acc_schedule_cost for each of caps[ncaps] (in parallel): sums, maxes and
 * ntasks [ncaps] out. */
acc_status acc_schedule_costs(const int64_t *window_offsets, int64_t num_windows, const int64_t *caps,
                              int64_t ncaps, int warps, const double c[5], double *sums, double *maxes,
                              int64_t *ntasks);

/* The launch order "longest predicted task first" (acc_lpt_rows.c): order[n] gets the indices of
 * cost[n] sorted by cost descending, ties in index order; ACC_ERR_INVALID_ARGUMENT on a NaN cost.
 * acc_lpt_rows writes the n rows of `width` int32 of `rows` to `out` in that order. */
acc_status acc_lpt_order(const double *cost, int64_t n, int64_t *order);
acc_status acc_lpt_rows(const int32_t *rows, int64_t n, int64_t width, const double *cost, int32_t *out);

/* The CSR kernels' parts of the rows of more than long_len entries (acc_csr_long_parts.c): acc_csr_long_count
 * gives how many such rows and parts of at most `part` entries there are, and the longest row's length
 * (`longest` may be NULL); acc_csr_long_parts writes 4 int64 a part to out[4 capacity]: its row, first entry,
 * end, and (its index j in the row) | (the row's parts << 32); a row's parts cut it into equal consecutive
 * ranges (j * length / parts ..), rows ascending.  capacity is the count of parts (acc_csr_long_count's):
 * ACC_ERR_INVALID_ARGUMENT, with no write past it, where the offsets make more or fewer. */
acc_status acc_csr_long_count(const int64_t *offsets, int64_t m, int64_t long_len, int64_t part,
                              int64_t *rows, int64_t *parts, int64_t *longest);
acc_status acc_csr_long_parts(const int64_t *offsets, int64_t m, int64_t long_len, int64_t part, int64_t *out,
                              int64_t capacity);

/* Computes the statistics of a BitTCF (block arrays may be NULL except
 * window_offsets and block_value_offsets). */
acc_status acc_bittcf_get_stats(const acc_bittcf *F, acc_bittcf_stats *out);

/* Checks a BitTCF view for internal consistency (offsets, masks against
 * value counts, column range, padding, perm); O(m + blocks). */
acc_status acc_bittcf_check(const acc_bittcf *F);

/* C = A @ B from the BitTCF form (CPU reference that proves the format):
 * row r of window w goes to C[perm[8w+r]]; only stored entries are
 * multiplied, so the result equals acc_csr_spmm's (same summation per entry
 * order up to rounding; exact on small integers).
 *   B [k*n], C [m*n] row-major, F.dtype; C fully overwritten. */
acc_status acc_bittcf_spmm(const acc_bittcf *F, const void *B, int64_t n, void *C);

/* ---- Half precision: FP16 / BF16 storage and the 16x16 block format ----
 *
 * Half values are stored as their 16-bit patterns (uint16).
 *
 * BSR16 (SMaT's block CSR, shaped for mma.m16n8k16): block row r holds the
 * 16 rows perm[16r .. 16r+15] of A (fewer in the last); its nonzero 16x16
 * blocks are the column blocks 16c .. 16c+15 that hold an entry, ascending.
 *   brow_offsets[R+1]       int64, R = ceil(m/16): blocks of block row r are
 *                           brow_offsets[r] .. brow_offsets[r+1]-1
 *   block_cols[nblocks]     int32, column block c of each block
 *   block_values[256*nblocks]  half bits, dense, in the MMA's A-fragment
 *                           order: entry (i, j) of a block (i: row, j:
 *                           column, 0..15) sits at 8*(4*(i%8) + (j%8)/2) +
 *                           2*(i/8 + 2*(j/8)) + j%2, so lane L of a warp
 *                           reads its whole fragment as 16 bytes at 8*L;
 *                           zeros where A stores nothing
 *   block_masks[4*nblocks]  uint64, bit 16i+j of the block's 256-bit mask
 *                           (word (16i+j)/64) set where A stores an entry
 *                           (explicit zeros included: they meet inf as NaN)
 * Memory is O(nblocks + m), never O(m k). */
typedef enum acc_half_format { ACC_HALF_FP16 = 0, ACC_HALF_BF16 = 1 } acc_half_format;

#define ACC_BSR 16 /* rows and columns of a BSR16 block */

/* Rounds src[count] (float32 or float64, src_dtype) to the half format,
 * to nearest even, in one rounding.  first_bad (may be NULL) gets the
 * index of the first finite value that rounds to inf or nonzero value that
 * rounds to zero, or -1. */
acc_status acc_half_round(const void *src, acc_dtype src_dtype, int64_t count, acc_half_format fmt,
                          uint16_t *dst, int64_t *first_bad);

/* Widens half bits to float32 (exact). */
acc_status acc_half_widen(const uint16_t *src, int64_t count, acc_half_format fmt, float *dst);

/* Pass 1 of the BSR16 build: brow_offsets[ceil(m/16)+1] out.  A canonical
 * CSR (values unused), perm[m] a valid permutation.  O(nnz + 16 nblocks + m). */
acc_status acc_bsr16_count(const acc_csr *A, const int64_t *perm, int64_t *brow_offsets);

/* Pass 2: block_cols, block_values (from A's entries as half bits,
 * half_values[nnz], aligned with A's column indices) and block_masks. */
acc_status acc_bsr16_fill(const acc_csr *A, const uint16_t *half_values, const int64_t *perm,
                          const int64_t *brow_offsets, int32_t *block_cols, uint16_t *block_values,
                          uint64_t *block_masks);

/* ---- SpGEMM on the CPU (acc_spgemm.c) ---------------------------------
 * C = A @ B for CSR A (m x k) and B (k x n, B.m == A.k) of the same dtype,
 * any valid CSR (duplicates add up, order does not matter); products and
 * sums in double, rounded once to out_dtype; rows of C with ascending
 * columns.  Two passes: compute (checking A and B unless the caller has)
 * counts C's structural entries into a state the library owns until
 * acc_spgemm_free; the caller allocates that many, and fill computes C into
 * its arrays. */
typedef struct acc_spgemm_state acc_spgemm_state;

/* drop_zeros: leave out entries whose rounded sum is exactly zero (scipy's
 * rule).  b_canonical: -1, compute checks A and B (acc_csr_check); 0 or 1,
 * the caller has just checked both and says whether B is canonical (sorted
 * rows without duplicates).  *nnz = C's structural entries (the room fill
 * needs; an upper bound of its result), *products (may be NULL) =
 * intermediate products (the sum over A's entries of B's row lengths).  A
 * and B must stay alive and unchanged until fill returns. */
acc_status acc_spgemm_compute(const acc_csr *A, const acc_csr *B, int drop_zeros, int b_canonical,
                              acc_dtype out_dtype, acc_spgemm_state **state, int64_t *nnz, int64_t *products);

/* row_offsets[m+1], cols[room], vals[room] (out_dtype) out, room = compute's
 * *nnz; *nnz out: C's entries (the arrays' first *nnz hold them). */
acc_status acc_spgemm_fill(const acc_spgemm_state *state, int64_t *row_offsets, int32_t *cols, void *vals,
                           int64_t *nnz);

void acc_spgemm_free(acc_spgemm_state *state);

/* ---- Row reorderings ---------------------------------------------------
 * Each returns perm[m] (new -> old), a permutation of [0, m).  All need a
 * canonical CSR (values unused) and are deterministic for a given seed
 * (seed 0: ties broken by row index; another seed: ties broken by a
 * seeded shuffle).  Rows with no nonzero are placed last, in ascending
 * order: they add no column to a window, so they are best kept together.
 *
 * progress (may be NULL): progress[0] counts units of work done and
 * progress[1] holds their total; both are written with relaxed atomic
 * stores while the call runs so another thread may poll them. */

/* Rows by nnz, descending (stable: equal rows keep ascending index). */
acc_status acc_reorder_degree(const acc_csr *A, int64_t *perm);

/* Reverse Cuthill-McKee of the square pattern G (symmetric for the usual meaning), breadth-first
 * searches rooted at the unvisited nodes in the order of seeds[m] (a permutation), in
 * O(nnz log nnz + m) whatever the degrees: perm[m], the same order as
 * scipy.sparse.csgraph.reverse_cuthill_mckee given scipy's seeds (acc_reorder_rcm.c).  Not the
 * empty-rows-last rule of the other methods.  Needs m < 2^31. */
acc_status acc_reorder_rcm(const acc_csr *G, const int64_t *seeds, int64_t *perm);

/* How the dendrogram's communities rank the affinity walk's candidates. */
enum {
    ACC_COMMUNITY_IGNORE = 0, /* only the shared-column count ranks candidates */
    ACC_COMMUNITY_TIE = 1     /* the current community wins among equal counts */
};

/* Parameters of the data-affinity reordering (Acc-SpMM section 3.2). */
typedef struct acc_affinity_params {
    uint64_t seed;
    int64_t max_scan;     /* column-list entries a placed row may scan (> 0) */
    int community;        /* ACC_COMMUNITY_* */
    double max_community; /* cap on a community's strength, in average degrees (> 0) */
    int64_t chunk_nnz;    /* nonzeros per independently ordered chunk of step II (> 0) */
    int64_t part_edges;   /* graph edges per independently built part of step I (> 0) */
} acc_affinity_params;

/* Phases of the affinity reordering timed into its `seconds` array: graph
 * (transposed pattern and graph offsets), step I (dendrogram), the
 * depth-first walk and communities (when step I runs in parts, each part's
 * walk runs and is timed with it), step II (ordering). */
#define ACC_AFFINITY_PHASES 4

/* Data-affinity reordering: modularity dendrogram + greedy affinity walk;
 * the algorithm, graph definition and complexity are in
 * acc_reorder_affinity.c.  Needs m + k < 2^31 (rectangular) or m < 2^31,
 * and 2 * nnz < 2^31 (ACC_ERR_TOO_LARGE otherwise).  seconds: NULL, or
 * ACC_AFFINITY_PHASES wall times out. */
acc_status acc_reorder_affinity(const acc_csr *A, const acc_affinity_params *params, int64_t *perm,
                                int64_t *progress, double *seconds);

/* Parameters of the Jaccard row clustering (SMaT / Sylos Labini et al.). */
typedef struct acc_jaccard_params {
    uint64_t seed;
    double tau;             /* Jaccard distance threshold in [0, 1] */
    int64_t block_width;    /* columns per column block of a row's pattern (>= 1) */
    int64_t max_candidates; /* candidate rows examined per cluster (> 0) */
} acc_jaccard_params;

/* Jaccard clustering: see acc_reorder_jaccard.c.  Needs m < 2^31. */
acc_status acc_reorder_jaccard(const acc_csr *A, const acc_jaccard_params *params, int64_t *perm,
                               int64_t *progress);

#ifdef __cplusplus
}
#endif

#endif /* ACCSPMM_H */
