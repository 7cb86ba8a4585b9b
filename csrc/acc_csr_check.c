/* acc_csr_check.c -- validation of a CSR view, so no malformed array can
 * make a later kernel read or write out of bounds.
 *
 * Two flat passes over arrays, no per-row loop, so they vectorise whatever
 * the row lengths (a row-by-row scan costs a branch per row and a serial
 * chain per entry: 1 ns per entry on matrices of short rows):
 *   offsets: rp[i + 1] >= rp[i] for every row;
 *   entries: every column in [0, k), and the descents ci[p] <= ci[p - 1]
 *            counted over all p >= 1; the descents at the first entry of
 *            each non-empty row (a row boundary, where any order is fine)
 *            are counted again from the offsets and subtracted.  The rows
 *            are sorted without duplicates iff no descent is left.
 * O(m + nnz) whatever the degree distribution. */
#include "acc_internal.h"

/* The two flat loops below are also built for AVX2 on x86-64 with GCC, which the CPU picks when the
 * library loads: twice the lanes of the baseline SSE2, which has no 64-bit compare at all. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ACC_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define ACC_AVX2_CLONE
#endif

/* Offsets that decrease, over rp[0..m]. */
ACC_AVX2_CLONE static int64_t count_descending(const int64_t *rp, int64_t m) {
    int64_t bad = 0;
    for (int64_t i = 0; i < m; i++)
        bad += rp[i + 1] < rp[i];
    return bad;
}

/* Counts, over ci[lo..hi) (lo >= 1), the columns outside [0, ku) and the descents ci[p] <= ci[p - 1]
 * in int32 lanes (they vectorise; an int64 count per entry does not). */
ACC_AVX2_CLONE static void count_entries(const int32_t *ci, int64_t lo, int64_t hi, uint32_t ku,
                                         int32_t *bad_out, int32_t *desc_out) {
    int32_t bad = 0, desc = 0;
    for (int64_t p = lo; p < hi; p++) {
        bad += (uint32_t)ci[p] >= ku;
        desc += ci[p] <= ci[p - 1];
    }
    *bad_out = bad;
    *desc_out = desc;
}

acc_status acc_csr_check(const acc_csr *A, int *canonical) {
    if (canonical) *canonical = 0;
    if (!A || A->m < 0 || A->k < 0 || A->k > INT32_MAX || !A->row_offsets) return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = A->m, k = A->k;
    const int64_t *rp = A->row_offsets;
    if (rp[0] != 0) return ACC_ERR_ROW_OFFSETS;
    const int64_t nnz = rp[m];
    if (nnz < 0) return ACC_ERR_ROW_OFFSETS;
    if (nnz > 0 && !A->column_indices) return ACC_ERR_INVALID_ARGUMENT;

    /* Offsets first: only once they are monotone is indexing by them safe. */
    int64_t bad_offsets = 0;
    const int64_t nrblk = (m + 4095) / 4096; /* blocks of 4096 rows (count_descending) */
#pragma omp parallel for reduction(+ : bad_offsets) schedule(static) num_threads(acc_threads_for(m))
    for (int64_t b = 0; b < nrblk; b++)
        bad_offsets += count_descending(rp + b * 4096, (b + 1) * 4096 < m ? 4096 : m - b * 4096);
    if (bad_offsets) return ACC_ERR_ROW_OFFSETS;

    const int32_t *ci = A->column_indices;
    const uint32_t ku = (uint32_t)k; /* k <= INT32_MAX: a negative column is >= ku as unsigned */
    int64_t bad_index = nnz > 0 && (uint32_t)ci[0] >= ku, descents = 0;
    /* blocks of 4096 entries (count_entries) */
    const int64_t nblk = (nnz + 4095) / 4096;
#pragma omp parallel for reduction(+ : bad_index, descents) schedule(static) num_threads(acc_threads_for(nnz))
    for (int64_t b = 0; b < nblk; b++) {
        const int64_t lo = b == 0 ? 1 : b * 4096, hi = (b + 1) * 4096 < nnz ? (b + 1) * 4096 : nnz;
        int32_t bad = 0, desc = 0;
        count_entries(ci, lo, hi, ku, &bad, &desc);
        bad_index += bad;
        descents += desc;
    }
    if (bad_index) return ACC_ERR_COLUMN_INDEX;
    int64_t boundary = 0;
#pragma omp parallel for reduction(+ : boundary) schedule(static) num_threads(acc_threads_for(m))
    for (int64_t i = 0; i < m; i++) {
        const int64_t p = rp[i];
        boundary += p > 0 && rp[i + 1] > p && ci[p] <= ci[p - 1];
    }
    if (canonical) *canonical = descents == boundary;
    return ACC_SUCCESS;
}
