/* acc_csr_canonicalize.c -- sort each row by column and sum duplicates into
 * a new CSR (scipy's sort_indices + sum_duplicates, without touching A).
 *
 * Pass 1 (parallel over rows): each row is sorted through uint64 keys
 * (column << 32 | position in row), so equal columns keep their input order
 * and duplicates are summed in that order; the row is written, compacted,
 * at its *input* offset and its new length noted.  Pass 2 (serial): prefix
 * sum of lengths and a left shift of every row to its final offset. */
#include "acc_internal.h"

#define CANON_ROW(T)                                                                                         \
    do {                                                                                                     \
        const T *vin = (const T *)A->values;                                                                 \
        T *vout = (T *)out_values;                                                                           \
        int64_t w = start;                                                                                   \
        for (int64_t q = 0; q < len; q++) {                                                                  \
            int32_t c = (int32_t)(keys[q] >> 32);                                                            \
            T v = vin[start + (int64_t)(keys[q] & 0xffffffffu)];                                             \
            if (w > start && out_column_indices[w - 1] == c) {                                               \
                vout[w - 1] += v;                                                                            \
            } else {                                                                                         \
                out_column_indices[w] = c;                                                                   \
                vout[w] = v;                                                                                 \
                w++;                                                                                         \
            }                                                                                                \
        }                                                                                                    \
        out_row_offsets[i + 1] = w - start;                                                                  \
    } while (0)

acc_status acc_csr_canonicalize(const acc_csr *A, int64_t *out_row_offsets, int32_t *out_column_indices,
                                void *out_values, int64_t *nnz_out) {
    acc_status status = ACC_SUCCESS;
    uint64_t *scratch = NULL;
    if (!A || !out_row_offsets || !nnz_out || !acc_dtype_valid(A->dtype)) return ACC_ERR_INVALID_ARGUMENT;
    ACC_CHECK(acc_csr_check(A, NULL));
    const int64_t m = A->m, *rp = A->row_offsets, nnz = rp[m];
    if (nnz > 0 && (!A->values || !out_column_indices || !out_values)) return ACC_ERR_INVALID_ARGUMENT;

    int64_t max_len = 0;
    for (int64_t i = 0; i < m; i++)
        if (rp[i + 1] - rp[i] > max_len) max_len = rp[i + 1] - rp[i];
    if (max_len > (int64_t)UINT32_MAX) return ACC_ERR_TOO_LARGE;

    const int nthreads = acc_threads_for(nnz + m); /* small inputs: no sleeping threads to wake */
    scratch = acc_mem_alloc((size_t)nthreads * (size_t)(max_len > 0 ? max_len : 1), sizeof(uint64_t));
    if (!scratch) return ACC_ERR_OUT_OF_MEMORY;

    out_row_offsets[0] = 0;
#pragma omp parallel num_threads(nthreads)
    {
        uint64_t *keys = scratch + (size_t)acc_thread_id() * (size_t)(max_len > 0 ? max_len : 1);
#pragma omp for schedule(dynamic, 256)
        for (int64_t i = 0; i < m; i++) {
            const int64_t start = rp[i], len = rp[i + 1] - rp[i];
            for (int64_t q = 0; q < len; q++)
                keys[q] = ((uint64_t)(uint32_t)A->column_indices[start + q] << 32) | (uint64_t)q;
            acc_sort_u64(keys, len);
            if (A->dtype == ACC_FLOAT64)
                CANON_ROW(double);
            else
                CANON_ROW(float);
        }
    }

    /* Serial compaction: rows only move left, so in-place memmove is safe. */
    const size_t vsize = acc_dtype_size(A->dtype);
    int64_t pos = 0;
    for (int64_t i = 0; i < m; i++) {
        const int64_t len = out_row_offsets[i + 1];
        if (pos != rp[i] && len > 0) {
            memmove(out_column_indices + pos, out_column_indices + rp[i], (size_t)len * sizeof(int32_t));
            memmove((char *)out_values + (size_t)pos * vsize,
                    (const char *)out_values + (size_t)rp[i] * vsize, (size_t)len * vsize);
        }
        pos += len;
        out_row_offsets[i + 1] = pos;
    }
    *nnz_out = pos;
done:
    acc_mem_free(scratch);
    return status;
}
