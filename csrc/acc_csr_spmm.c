/* acc_csr_spmm.c -- C = A @ B on the CPU from CSR (the fast CPU path).
 *
 * Rows are split between threads by equal work (nonzeros + rows), each
 * thread computing whole rows of C, so there are no write conflicts and the
 * result does not depend on the thread count.  A row of C is accumulated in
 * place (it stays in L1 while its nonzeros stream B rows through it) four
 * nonzeros at a time: one load/store of C per four B rows instead of per
 * one.  The sum order is (((c + a0 b0 + a1 b1) + a2 b2) + a3 b3) per group,
 * so integer-valued inputs give exactly scipy's result and others stay
 * within the FP32/FP64 accumulation bound.
 *
 * On x86-64 with GCC/Clang the inner loops are compiled twice (AVX2+FMA and
 * baseline SSE2) and picked at load time by the CPU (target_clones). */
#include "acc_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__linux__) &&                \
    !defined(ACC_NO_TARGET_CLONES)
#define ACC_MULTIVERSION __attribute__((target_clones("arch=haswell", "default")))
#else
#define ACC_MULTIVERSION
#endif

#define DEFINE_CSR_ROWS(T, NAME)                                                                             \
    ACC_MULTIVERSION static void NAME(const int64_t *restrict rp, const int32_t *restrict ci,                \
                                      const T *restrict av, const T *restrict B, int64_t n, T *restrict C,   \
                                      int64_t row_begin, int64_t row_end) {                                  \
        for (int64_t i = row_begin; i < row_end; i++) {                                                      \
            T *restrict c = C + i * n;                                                                       \
            for (int64_t j = 0; j < n; j++)                                                                  \
                c[j] = 0;                                                                                    \
            int64_t p = rp[i];                                                                               \
            const int64_t end = rp[i + 1];                                                                   \
            for (; p + 4 <= end; p += 4) {                                                                   \
                const T a0 = av[p], a1 = av[p + 1], a2 = av[p + 2], a3 = av[p + 3];                          \
                const T *restrict b0 = B + (int64_t)ci[p] * n;                                               \
                const T *restrict b1 = B + (int64_t)ci[p + 1] * n;                                           \
                const T *restrict b2 = B + (int64_t)ci[p + 2] * n;                                           \
                const T *restrict b3 = B + (int64_t)ci[p + 3] * n;                                           \
                for (int64_t j = 0; j < n; j++)                                                              \
                    c[j] = c[j] + a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];                         \
            }                                                                                                \
            for (; p < end; p++) {                                                                           \
                const T a = av[p];                                                                           \
                const T *restrict b = B + (int64_t)ci[p] * n;                                                \
                for (int64_t j = 0; j < n; j++)                                                              \
                    c[j] += a * b[j];                                                                        \
            }                                                                                                \
        }                                                                                                    \
    }

DEFINE_CSR_ROWS(float, csr_rows_f32)
DEFINE_CSR_ROWS(double, csr_rows_f64)

acc_status acc_csr_spmm(const acc_csr *A, const void *B, int64_t n, void *C) {
    if (!A || !acc_dtype_valid(A->dtype) || n < 0 || !A->row_offsets || A->m < 0)
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = A->m, *rp = A->row_offsets, nnz = rp[m];
    if (m == 0 || n == 0) return ACC_SUCCESS;
    if (!C || (nnz > 0 && (!B || !A->values || !A->column_indices))) return ACC_ERR_INVALID_ARGUMENT;

    const int64_t total = nnz + m;
#pragma omp parallel
    {
        const int nth = acc_team_size(), t = acc_thread_id();
        const int64_t lo = acc_row_for_work(rp, m, total * t / nth);
        const int64_t hi = acc_row_for_work(rp, m, total * (t + 1) / nth);
        if (A->dtype == ACC_FLOAT64)
            csr_rows_f64(rp, A->column_indices, A->values, B, n, C, lo, hi);
        else
            csr_rows_f32(rp, A->column_indices, A->values, B, n, C, lo, hi);
    }
    return ACC_SUCCESS;
}
