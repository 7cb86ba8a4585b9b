/* acc_bittcf_spmm.c -- C = A @ B from BitTCF on the CPU: the reference that
 * proves the format (every index goes through window, block, mask bit and
 * perm exactly as the GPU kernel's do).  Parallel over windows: a window
 * owns its 8 output rows, so there are no write conflicts. */
#include "acc_internal.h"

#define DEFINE_BITTCF_WINDOWS(T, NAME)                                                                       \
    static void NAME(const acc_bittcf *F, const T *B, int64_t n, T *C) {                                     \
        const T *vals = (const T *)F->values;                                                                \
        _Pragma("omp parallel for schedule(dynamic, 16)") for (int64_t w = 0; w < F->num_windows; w++) {     \
            T *rows[ACC_TILE] = {0};                                                                         \
            for (int r = 0; r < ACC_TILE && w * ACC_TILE + r < F->m; r++) {                                  \
                rows[r] = C + F->perm[w * ACC_TILE + r] * n;                                                 \
                for (int64_t j = 0; j < n; j++)                                                              \
                    rows[r][j] = 0;                                                                          \
            }                                                                                                \
            for (int64_t b = F->window_offsets[w]; b < F->window_offsets[w + 1]; b++) {                      \
                int64_t v = F->block_value_offsets[b];                                                       \
                for (uint64_t bits = F->block_mask[b]; bits; bits &= bits - 1) {                             \
                    const int bit = __builtin_ctzll(bits);                                                   \
                    const int r = bit / ACC_TILE, c = bit % ACC_TILE;                                        \
                    const int32_t col = F->block_cols[b * ACC_TILE + c];                                     \
                    const T a = vals[v++];                                                                   \
                    const T *bp = B + (int64_t)col * n;                                                      \
                    T *cp = rows[r];                                                                         \
                    for (int64_t j = 0; j < n; j++)                                                          \
                        cp[j] += a * bp[j];                                                                  \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }

DEFINE_BITTCF_WINDOWS(float, bittcf_windows_f32)
DEFINE_BITTCF_WINDOWS(double, bittcf_windows_f64)

acc_status acc_bittcf_spmm(const acc_bittcf *F, const void *B, int64_t n, void *C) {
    if (!F || n < 0 || !acc_dtype_valid(F->dtype) || F->m < 0) return ACC_ERR_INVALID_ARGUMENT;
    if (F->m == 0 || n == 0) return ACC_SUCCESS;
    if (!C || !F->perm || !F->window_offsets || (F->num_blocks > 0 && (!B || !F->values)))
        return ACC_ERR_INVALID_ARGUMENT;
    if (F->dtype == ACC_FLOAT64)
        bittcf_windows_f64(F, B, n, C);
    else
        bittcf_windows_f32(F, B, n, C);
    return ACC_SUCCESS;
}
