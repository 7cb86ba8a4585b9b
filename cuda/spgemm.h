/*
 * spgemm.h -- C ABI of the GPU SpGEMM on 8x8 bitmap tiles (spgemm.cu) and of the
 * cuSPARSE SpGEMM harness the benchmark times it against (cusparse_spgemm.cu).
 *
 * C = A @ B for CSR A (m x k) and B (k x n) on the device.  Two steps, so that
 * the caller (the Python layer) allocates the result in its own array library:
 *   acc_spgemm_gpu_analyse   tiles both patterns, finds C's tiles and their
 *                            structural pattern (no values read); gives nnz_s
 *   acc_spgemm_gpu_numeric   tiles the values and writes C's structural CSR
 *                            (row offsets, sorted columns, values) into the
 *                            caller's arrays of nnz_s entries; counts the
 *                            entries whose rounded value is exactly zero
 *   acc_spgemm_gpu_compact   drops those entries (scipy's rule) into arrays of
 *                            nnz_s - zeros entries
 * numeric may run any number of times on one analysis with new values of the
 * same patterns (cuSPARSE's SpGEMMreuse).  Algorithm, formats and limits are
 * in spgemm.cu's header comment.
 */
#ifndef ACC_SPGEMM_H
#define ACC_SPGEMM_H

#include <stddef.h>
#include <stdint.h>

#include "../csrc/accspmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A CSR pattern on the device: d_row_offsets [m+1] and d_column_indices [nnz], both
 * int32 (index_bits 32) or both int64 (64).  Any valid CSR: rows may be unsorted
 * and hold duplicates (they are summed, in CSR order).  nnz < 2^32. */
typedef struct acc_spgemm_gpu_csr {
    int64_t m, k, nnz;
    const void *d_row_offsets;
    const void *d_column_indices;
    int index_bits;
    int canonical; /* 1: every row strictly increasing; 0: not; -1: unknown (checked on the device) */
} acc_spgemm_gpu_csr;

/* How the numeric phase multiplies a tile pair (experiments; the default is the model). */
enum {
    ACC_SPGEMM_PATH_MODEL = 0,  /* the model in spgemm.cu picks per tile pair */
    ACC_SPGEMM_PATH_TENSOR = 1, /* every finite pair on FP64 Tensor Cores (mma.m8n8k4) */
    ACC_SPGEMM_PATH_SCALAR = 2  /* every pair on CUDA cores (stored entries only) */
};

/* Which algorithm multiplies (experiments; the default is the model of spgemm.cu). */
enum {
    ACC_SPGEMM_ALGO_AUTO = 0,  /* tiles where the sampled tile densities pay, rows elsewhere */
    ACC_SPGEMM_ALGO_TILES = 1, /* 8x8 bitmap tiles (spgemm_tiles.cu) */
    ACC_SPGEMM_ALGO_ROWS = 2   /* row by row on CUDA cores (spgemm_rows.cu) */
};

typedef struct acc_spgemm_gpu_options {
    int64_t chunk_pairs; /* tiles: candidate tile pairs sorted at once (0: the default) */
    int keep_pairs;      /* tiles: keep the sorted pairs for numeric reuse when they fit in one chunk */
    int path;            /* tiles: ACC_SPGEMM_PATH_* */
    int same;            /* B is A (the same device arrays): prepare it once */
    int algorithm;       /* ACC_SPGEMM_ALGO_* */
    int validate;        /* check both operands first (acc_spgemm_gpu_check_csr's checks; canonical
                          * fields found on the device), in the synchronisation of the model's samples */
    int sort_small_rows; /* rows: 1 sorts every small row in row groups, none in hash tables (experiments:
                          * the same bits) */
    /* One-shot products: the values (device arrays of values_dtype, in the analysed CSRs' order) that
     * the numeric call to follow passes, with out_dtype for the result; a_values NULL: not known.  The
     * row path's hashed rows then sum them in their symbolic pass, into the plan, and the first numeric
     * call, given the same addresses and dtypes, copies those rows instead of hashing their products
     * again (the same bits); every other numeric call computes them. */
    const void *a_values, *b_values;
    int values_dtype, out_dtype; /* acc_dtype */
} acc_spgemm_gpu_options;

typedef struct acc_spgemm_gpu acc_spgemm_gpu;

typedef struct acc_spgemm_gpu_info {
    int64_t m, k, n;
    int64_t tiles_a, tiles_b;    /* nonempty 8x8 tiles of A and B */
    int64_t values_a, values_b;  /* distinct stored entries (duplicates summed) */
    int64_t tiles_c;             /* nonempty tiles of C's structural pattern */
    int64_t raw_pairs;           /* candidate tile pairs (A tile x B tile row) */
    int64_t pairs;               /* tile pairs whose product is not empty */
    int64_t products;            /* scalar products: sum over A's entries (i, j) of B's row j length */
    int64_t nnz_structural;      /* entries of C's structural pattern (exact zeros included) */
    int64_t chunks;              /* chunks of tile rows the pairs were sorted in */
    int64_t segments;            /* work items of the numeric kernel */
    int pairs_kept;              /* the sorted pairs stay in the plan (numeric re-sorts otherwise) */
    size_t plan_bytes;           /* device bytes the analysis holds */
    size_t peak_bytes;           /* the most device bytes this analysis (or a numeric) held at once */
    int algorithm;               /* ACC_SPGEMM_ALGO_TILES or _ROWS: the one that ran */
    double density_a, density_b; /* sampled entries per nonempty 8x8 tile (the model's input; 0 if forced) */
    int64_t large_rows;          /* rows: rows of more than 1024 products (dense or sorted in batches) */
    int64_t row_groups;          /* rows: blocks of the small rows */
    int64_t max_row_products;    /* rows: the most products of one row */
    int64_t large_products;      /* auto: products of rows with more than 1024 of them (the model's input) */
    int64_t large_entries;       /* auto: A's entries in those rows */
    int64_t tiny_products;   /* auto: products of tiny rows (at most 32 entries and products: a warp each) */
    int64_t hashed_products; /* auto: products of the hash candidates (other rows of at most 256 entries and
                              * products) */
    int64_t hashed_rows;     /* rows: rows summed in hash tables (candidates of at most 64 entries of C from
                              * at least twice as many products) */
    double model_ms_tiles;   /* auto: the model's predicted times of the whole call (ms, H100) */
    double model_ms_rows;
    double phase_ms[9];     /* with ACCSPMM_SPGEMM_PROFILE set: check, tile, pairs, structure, values,
                             * numeric (tiles), rows count, small rows, large rows (synchronised) */
    int64_t fused_cap;      /* rows, one-shot (options.a_values): entries the plan holds for the hashed
                             * rows' sums from the symbolic pass (0: none) */
    int64_t fused_reserved; /* entries the kept hashed rows asked for there (rows past fused_cap are
                             * summed by the numeric call instead) */
    int64_t hash_places;    /* rows, plans: bytes kept by the second numeric call for the hashed rows'
                             * products' places in C (later calls add there without hashing; 0: none) */
    int64_t tiny_places;    /* rows, plans: bytes kept by the second numeric call for the tiny rows'
                             * sorted orders (later calls do not sort; 0: none) */
} acc_spgemm_gpu_info;

/* Validates `count` device CSRs (row offsets start at 0, never decrease, end at nnz; columns in
 * [0, k)) with one synchronisation of `stream`: ACC_ERR_ROW_OFFSETS or ACC_ERR_COLUMN_INDEX for
 * the first invalid one, whose index goes to *bad (may be NULL).  Their `canonical` fields are not
 * read; canonical[count] (may be NULL) gets 1 for each whose rows are strictly increasing. */
int acc_spgemm_gpu_check_csr(const acc_spgemm_gpu_csr *ops, int count, int *canonical, int *bad,
                             void *stream);

/* Gives the SpGEMM memory pool's unused device memory back to the driver. */
int acc_spgemm_gpu_trim_pool(void);

/* The symbolic phase (see above).  A.k must equal B.m.  Synchronises `stream`.
 * ACC_ERR_TOO_LARGE when an operand holds 2^32 or more entries or the tile grid does not fit
 * the sort keys; ACC_ERR_DEVICE_MEMORY when out of memory (nothing stays allocated); with
 * options->validate, ACC_ERR_ROW_OFFSETS / ACC_ERR_COLUMN_INDEX for an invalid operand, whose
 * index (0: A, 1: B) goes to *bad_operand (may be NULL). */
int acc_spgemm_gpu_analyse(const acc_spgemm_gpu_csr *A, const acc_spgemm_gpu_csr *B,
                           const acc_spgemm_gpu_options *options, acc_spgemm_gpu **plan, int *bad_operand,
                           void *stream);

int acc_spgemm_gpu_get_info(const acc_spgemm_gpu *plan, acc_spgemm_gpu_info *info);

/* The numeric phase: d_a_values [A.nnz] and d_b_values [B.nnz] of in_dtype, in the analysed
 * CSRs' order; writes d_row_offsets [m+1], d_columns [nnz_s] (both c_index_bits) and
 * d_values [nnz_s] (out_dtype): products and sums in FP64, rounded once to out_dtype.
 * *zeros = entries whose rounded value is zero (+0 or -0).  Synchronises `stream`. */
int acc_spgemm_gpu_numeric(acc_spgemm_gpu *plan, const void *d_a_values, const void *d_b_values,
                           acc_dtype in_dtype, void *d_row_offsets, void *d_columns, int c_index_bits,
                           void *d_values, acc_dtype out_dtype, int64_t *zeros, void *stream);

/* Copies the CSR (m rows, nnz_in entries; index_bits for offsets and columns, dtype values)
 * without its zero values into the out arrays (nnz_in - zeros entries), order kept. */
int acc_spgemm_gpu_compact(int64_t m, int64_t nnz_in, const void *d_row_offsets, const void *d_columns,
                           const void *d_values, int index_bits, acc_dtype dtype, void *d_row_offsets_out,
                           void *d_columns_out, void *d_values_out, void *stream);

void acc_spgemm_gpu_destroy(acc_spgemm_gpu *plan);

/* Debug view of the analysis for tests (device pointers the plan owns; do not free):
 * C's tiles in (tile row, tile column) order. */
typedef struct acc_spgemm_gpu_tiles {
    int64_t tiles_c;
    const int64_t *d_tile_row_offsets; /* [ceil(m/8)+1] */
    const int32_t *d_tile_cols;        /* [tiles_c] */
    const uint64_t *d_tile_masks;      /* [tiles_c] */
    const int64_t *d_row_offsets;      /* [m+1] structural row offsets */
} acc_spgemm_gpu_tiles;
int acc_spgemm_gpu_get_tiles(const acc_spgemm_gpu *plan, acc_spgemm_gpu_tiles *tiles);

/* ---- cuSPARSE SpGEMM harness (cusparse_spgemm.cu; the benchmark's baseline) -----------------
 * One whole cusparseSpGEMM product C = A @ B of CSR operands on the device (int32 indices,
 * `dtype` values, compute in dtype), every step included: descriptors, work estimation,
 * memory estimation (ALG2/ALG3), compute, the allocation of C and the copy.  alg: 1, 2 or 3
 * (CUSPARSE_SPGEMM_ALG1..3); chunk_fraction for ALG3.  reuse != 0 runs the SpGEMMreuse
 * sequence instead (ALG for reuse: DEFAULT) and times its compute step alone on `reps` runs.
 * Outputs: ms_total (the whole product, events on the stream), ms_reuse (the median reuse
 * compute, 0 when reuse == 0), nnz_c, buffer_bytes (the largest sum of the buffers alive at
 * once), and, when d_c_* are given (NULL otherwise), nothing else: C is freed before return. */
typedef struct acc_cusparse_spgemm_result {
    float ms_total, ms_reuse;
    int64_t nnz_c;
    size_t buffer_bytes;
} acc_cusparse_spgemm_result;

int acc_cusparse_spgemm_run(int64_t m, int64_t k, int64_t n, int64_t nnz_a, const int32_t *d_a_rows,
                            const int32_t *d_a_cols, const void *d_a_vals, int64_t nnz_b,
                            const int32_t *d_b_rows, const int32_t *d_b_cols, const void *d_b_vals,
                            acc_dtype dtype, int alg, float chunk_fraction, int reuse, int reps,
                            acc_cusparse_spgemm_result *result, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* ACC_SPGEMM_H */
