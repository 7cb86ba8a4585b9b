/* acc_spgemm.c -- C = A @ B for two sparse CSR matrices on the CPU (Gustavson, row by row).
 *
 * Two passes, both parallel over rows of C (dynamic schedule: rows differ in work):
 *   symbolic: the distinct columns of each row of C (its structural nonzeros) and the
 *             intermediate products (flops / 2), so the caller can allocate;
 *   numeric:  each row's sums, columns ascending, written at the row's structural offset; with
 *             drop_zeros, entries whose sum is exactly zero are left out (scipy's rule: exact
 *             cancellations vanish from the pattern) and the row's kept count is returned.
 *
 * Accumulator per thread: dense (a value and a stamp per column of C, and the list of columns a row
 * touched) when C has at most ACC_SPGEMM_DENSE_COLS columns, else a hash table of linear probing
 * sized to the row's products (a power of two, at least twice them), so memory stays
 * O(threads * min(n, max row products)) whatever n is.  The touched columns are sorted.
 *
 * Arithmetic: products and sums in double, in the order of A's row entries and then B's (scipy's
 * order), rounded once to the output type: float64 data gives scipy's sums; float32 data is more
 * accurate than a float32 accumulation (one rounding); integer-valued data is exact either way.
 * Built without FMA contraction (no target_clones here), so the order above is the arithmetic.
 *
 * Cost: O(flops + sum over rows of r log r) time for r entries in a row of C. */
#include "acc_internal.h"

#define ACC_SPGEMM_DENSE_COLS (1 << 22)

typedef struct accum {
    int64_t n;         /* columns of C */
    int dense;         /* dense arrays (n) or a hash table (cap) */
    double *val;       /* [n] or [cap] */
    int64_t *stamp;    /* dense: [n] last row + 1 that touched the column; hash: [cap] key + 1 (0 empty) */
    uint64_t *touched; /* columns of the current row */
    int64_t count, cap, row;
} accum;

static void accum_free(accum *a) {
    acc_free(a->val);
    acc_free(a->stamp);
    acc_free(a->touched);
    memset(a, 0, sizeof *a);
}

/* Room for a row of at most `products` products. */
static acc_status accum_reserve(accum *a, int64_t products) {
    int64_t want = products < a->n ? products : a->n;
    if (want < 1) want = 1;
    if (a->dense) {
        if (!a->val) {
            a->val = acc_malloc((size_t)a->n, sizeof(double));
            a->stamp = acc_malloc((size_t)a->n, sizeof(int64_t));
            if (!a->val || !a->stamp) return ACC_ERR_OUT_OF_MEMORY;
            memset(a->stamp, 0, (size_t)a->n * sizeof(int64_t));
        }
    } else if (2 * want > a->cap) {
        int64_t cap = 16;
        while (cap < 2 * want)
            cap <<= 1;
        acc_free(a->val);
        acc_free(a->stamp);
        a->val = acc_malloc((size_t)cap, sizeof(double));
        a->stamp = acc_malloc((size_t)cap, sizeof(int64_t));
        if (!a->val || !a->stamp) return ACC_ERR_OUT_OF_MEMORY;
        memset(a->stamp, 0, (size_t)cap * sizeof(int64_t));
        a->cap = cap;
    }
    return ACC_SUCCESS;
}

static inline uint64_t hash_col(int64_t c) { return (uint64_t)c * 0x9E3779B97F4A7C15ull; }

/* Adds v to column c of the current row. */
static inline void accum_add(accum *a, int64_t c, double v) {
    if (a->dense) {
        if (a->stamp[c] != a->row + 1) {
            a->stamp[c] = a->row + 1;
            a->val[c] = v;
            a->touched[a->count++] = (uint64_t)c;
        } else {
            a->val[c] += v;
        }
        return;
    }
    const uint64_t mask = (uint64_t)a->cap - 1;
    for (uint64_t h = hash_col(c) >> 20 & mask;; h = (h + 1) & mask) {
        if (a->stamp[h] == c + 1) {
            a->val[h] += v;
            return;
        }
        if (a->stamp[h] == 0) {
            a->stamp[h] = c + 1;
            a->val[h] = v;
            a->touched[a->count++] = (uint64_t)c;
            return;
        }
    }
}

/* The sum of column c of the current row (c was touched). */
static inline double accum_get(const accum *a, int64_t c) {
    if (a->dense) return a->val[c];
    const uint64_t mask = (uint64_t)a->cap - 1;
    for (uint64_t h = hash_col(c) >> 20 & mask;; h = (h + 1) & mask)
        if (a->stamp[h] == c + 1) return a->val[h];
}

/* Clears the hash table's touched slots (the dense stamps expire with the row number). */
static void accum_clear(accum *a) {
    if (!a->dense) {
        const uint64_t mask = (uint64_t)a->cap - 1;
        for (int64_t i = 0; i < a->count; i++) {
            const int64_t c = (int64_t)a->touched[i];
            for (uint64_t h = hash_col(c) >> 20 & mask;; h = (h + 1) & mask)
                if (a->stamp[h] == c + 1) {
                    a->stamp[h] = 0;
                    break;
                }
        }
        /* linear probing needs no tombstones once every key of the row is gone */
    }
    a->count = 0;
}

static inline double value_of(const acc_csr *M, int64_t p) {
    return M->dtype == ACC_FLOAT64 ? ((const double *)M->values)[p] : (double)((const float *)M->values)[p];
}

/* Products of row i (the sum of B's row lengths over A's row entries). */
static inline int64_t row_products(const acc_csr *A, const acc_csr *B, int64_t i) {
    int64_t f = 0;
    for (int64_t p = A->row_offsets[i]; p < A->row_offsets[i + 1]; p++) {
        const int64_t r = A->column_indices[p];
        f += B->row_offsets[r + 1] - B->row_offsets[r];
    }
    return f;
}

/* Accumulates row i of A @ B into a (values when `numeric`). */
static acc_status accumulate_row(accum *a, const acc_csr *A, const acc_csr *B, int64_t i, int numeric,
                                 int64_t products) {
    acc_status st = accum_reserve(a, products);
    if (st) return st;
    a->row = i;
    for (int64_t p = A->row_offsets[i]; p < A->row_offsets[i + 1]; p++) {
        const int64_t r = A->column_indices[p];
        const double av = numeric ? value_of(A, p) : 0.0;
        for (int64_t q = B->row_offsets[r]; q < B->row_offsets[r + 1]; q++)
            accum_add(a, B->column_indices[q], numeric ? av * value_of(B, q) : 0.0);
    }
    return ACC_SUCCESS;
}

static acc_status check_pair(const acc_csr *A, const acc_csr *B) {
    if (!A || !B || A->m < 0 || A->k < 0 || B->m != A->k || B->k < 0 || !A->row_offsets || !B->row_offsets)
        return ACC_ERR_INVALID_ARGUMENT;
    if ((A->row_offsets[A->m] > 0 && !A->column_indices) || (B->row_offsets[B->m] > 0 && !B->column_indices))
        return ACC_ERR_INVALID_ARGUMENT;
    return ACC_SUCCESS;
}

/* Per-thread accumulator with `touched` sized to the largest row's products (or n). */
static acc_status accum_init(accum *a, int64_t n, int64_t max_products) {
    memset(a, 0, sizeof *a);
    a->n = n;
    a->dense = n <= ACC_SPGEMM_DENSE_COLS;
    const int64_t t = max_products < n ? max_products : n;
    a->touched = acc_malloc((size_t)(t > 0 ? t : 1), sizeof(uint64_t));
    return a->touched ? ACC_SUCCESS : ACC_ERR_OUT_OF_MEMORY;
}

acc_status acc_spgemm_symbolic(const acc_csr *A, const acc_csr *B, int64_t *row_nnz, int64_t *products,
                               int64_t *max_row_products) {
    acc_status status = check_pair(A, B);
    if (status) return status;
    if (!row_nnz || !products || !max_row_products) return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = A->m;
    int64_t total = 0, maxp = 0;
#pragma omp parallel for num_threads(acc_threads_for(A->row_offsets[m] + m)) reduction(+ : total) \
    reduction(max : maxp) schedule(static)
    for (int64_t i = 0; i < m; i++) {
        const int64_t f = row_products(A, B, i);
        total += f;
        maxp = f > maxp ? f : maxp;
        row_nnz[i] = f; /* products for now; the distinct columns below */
    }
    *products = total;
    *max_row_products = maxp;
    int failed = 0;
#pragma omp parallel num_threads(acc_threads_for(total + m))
    {
        accum a;
        acc_status st = accum_init(&a, B->k, maxp);
#pragma omp for schedule(dynamic, 32)
        for (int64_t i = 0; i < m; i++) {
            if (st || row_nnz[i] == 0) continue;
            st = accumulate_row(&a, A, B, i, 0, row_nnz[i]);
            if (st) continue;
            row_nnz[i] = a.count;
            accum_clear(&a);
        }
        if (st) {
#pragma omp atomic write
            failed = 1;
        }
        accum_free(&a);
    }
    return failed ? ACC_ERR_OUT_OF_MEMORY : ACC_SUCCESS;
}

acc_status acc_spgemm_numeric(const acc_csr *A, const acc_csr *B, const int64_t *row_offsets, int64_t max_row_products,
                              int drop_zeros, acc_dtype out_dtype, int32_t *cols, void *vals, int64_t *row_kept) {
    acc_status status = check_pair(A, B);
    if (status) return status;
    if (!row_offsets || !row_kept || !acc_dtype_valid(out_dtype) || !A->values || !B->values ||
        (row_offsets[A->m] > 0 && (!cols || !vals)))
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = A->m;
    int failed = 0;
#pragma omp parallel num_threads(acc_threads_for(row_offsets[m] + A->row_offsets[m] + m))
    {
        accum a;
        acc_status st = accum_init(&a, B->k, max_row_products);
#pragma omp for schedule(dynamic, 32)
        for (int64_t i = 0; i < m; i++) {
            row_kept[i] = 0;
            if (st || row_offsets[i + 1] == row_offsets[i]) continue;
            st = accumulate_row(&a, A, B, i, 1, row_products(A, B, i));
            if (st) continue;
            acc_sort_u64(a.touched, a.count);
            int64_t at = row_offsets[i];
            for (int64_t e = 0; e < a.count; e++) {
                const int64_t c = (int64_t)a.touched[e];
                const double s = accum_get(&a, c);
                if (out_dtype == ACC_FLOAT64) {
                    if (drop_zeros && s == 0.0) continue;
                    ((double *)vals)[at] = s;
                } else {
                    const float f = (float)s;
                    if (drop_zeros && f == 0.0f) continue;
                    ((float *)vals)[at] = f;
                }
                cols[at++] = (int32_t)c;
            }
            row_kept[i] = at - row_offsets[i];
            accum_clear(&a);
        }
        if (st) {
#pragma omp atomic write
            failed = 1;
        }
        accum_free(&a);
    }
    return failed ? ACC_ERR_OUT_OF_MEMORY : ACC_SUCCESS;
}
