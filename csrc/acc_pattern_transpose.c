/*
 * acc_pattern_transpose.c -- the pattern of A^T (rows of each column,
 * ascending).
 *
 * Serial: one counting pass and one fill in row order.  Parallel (large
 * inputs, called outside a parallel region): T threads take nnz-balanced
 * ranges of rows and count their columns in private int32 histograms; a
 * pass over the columns turns the T counts of each column into each
 * thread's first slot within the column (threads in row order); each thread
 * then fills its slots.  Rows come out ascending in every column with no
 * atomics and no sort: the result is the serial one, whatever T.  Work
 * O(nnz + T k); T follows the work (acc_threads_for) and is capped at
 * 2 nnz / k, so the histograms (T k int32) never outweigh the output; small
 * or hypersparse inputs run serially.
 */
#include "acc_internal.h"

static void transpose_serial(const acc_csr *A, int64_t *col_offsets, int32_t *rows) {
    const int64_t m = A->m, k = A->k, *rp = A->row_offsets;
    const int32_t *ci = A->column_indices;
    for (int64_t p = 0; p < rp[m]; p++)
        col_offsets[ci[p] + 1]++;
    for (int64_t j = 0; j < k; j++)
        col_offsets[j + 1] += col_offsets[j];
    /* fill in row order so each column's rows come out ascending; the
     * offsets are shifted by one slot while filling and restored after */
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = rp[i]; p < rp[i + 1]; p++)
            rows[col_offsets[ci[p]]++] = (int32_t)i;
    for (int64_t j = k; j > 0; j--)
        col_offsets[j] = col_offsets[j - 1];
    col_offsets[0] = 0;
}

/* Threads for the parallel transpose; 1 means serial. */
static int transpose_threads(const acc_csr *A) {
#ifdef _OPENMP
    if (omp_in_parallel()) return 1;
#endif
    const int64_t nnz = A->row_offsets[A->m];
    int64_t t = acc_threads_for(nnz + A->m);
    if (A->k < 1) return 1;
    if (t > 2 * nnz / A->k) t = 2 * nnz / A->k;
    return t < 2 ? 1 : (int)t;
}

acc_status acc_pattern_transpose(const acc_csr *A, int64_t *col_offsets, int32_t *rows) {
    if (!A || !col_offsets || !rows || A->m < 0 || A->k < 0) return ACC_ERR_INVALID_ARGUMENT;
    if (A->m > INT32_MAX) return ACC_ERR_TOO_LARGE;
    const int64_t m = A->m, k = A->k, *rp = A->row_offsets, nnz = rp[m];
    const int32_t *ci = A->column_indices;
    memset(col_offsets, 0, (size_t)(k + 1) * sizeof(int64_t));
    const int nth = transpose_threads(A);
    int32_t *cnt = nth > 1 ? acc_mem_alloc((size_t)nth * (size_t)k, sizeof(int32_t)) : NULL;
    if (!cnt) { /* serial (or no memory for the histograms: serial too) */
        transpose_serial(A, col_offsets, rows);
        return ACC_SUCCESS;
    }
#pragma omp parallel num_threads(nth)
    {
        const int64_t t = acc_thread_id(), T = acc_team_size(), total = nnz + m;
        const int64_t lo = acc_row_for_work(rp, m, total * t / T);
        const int64_t hi = acc_row_for_work(rp, m, total * (t + 1) / T);
        int32_t *mine = cnt + t * k;
        memset(mine, 0, (size_t)k * sizeof(int32_t));
        for (int64_t p = rp[lo]; p < rp[hi]; p++)
            mine[ci[p]]++;
#pragma omp barrier
#pragma omp for schedule(static)
        for (int64_t j = 0; j < k; j++) { /* counts -> each thread's first slot in the column */
            int32_t run = 0;
            for (int64_t u = 0; u < T; u++) {
                const int32_t c = cnt[u * k + j];
                cnt[u * k + j] = run;
                run += c;
            }
            col_offsets[j + 1] = run;
        }
#pragma omp single
        for (int64_t j = 0; j < k; j++)
            col_offsets[j + 1] += col_offsets[j];
        /* implicit barrier */
        for (int64_t i = lo; i < hi; i++)
            for (int64_t p = rp[i]; p < rp[i + 1]; p++) {
                const int32_t j = ci[p];
                rows[col_offsets[j] + mine[j]++] = (int32_t)i;
            }
    }
    acc_mem_free(cnt);
    return ACC_SUCCESS;
}
