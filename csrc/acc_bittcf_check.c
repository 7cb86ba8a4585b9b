/* acc_bittcf_check.c -- full consistency check of a BitTCF view, so a
 * kernel given one can never index out of bounds. O(m + blocks). */
#include "acc_internal.h"

acc_status acc_bittcf_check(const acc_bittcf *F) {
    if (!F || F->m < 0 || F->k < 0 || F->k > INT32_MAX || !acc_dtype_valid(F->dtype) ||
        F->num_windows != (F->m + ACC_TILE - 1) / ACC_TILE || !F->window_offsets || !F->block_value_offsets ||
        !F->perm)
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t W = F->num_windows, nb = F->num_blocks;
    if (F->window_offsets[0] != 0 || F->window_offsets[W] != nb || nb < 0) return ACC_ERR_INVALID_ARGUMENT;
    if (nb > 0 && (!F->block_cols || !F->block_mask || !F->values)) return ACC_ERR_INVALID_ARGUMENT;
    for (int64_t w = 0; w < W; w++)
        if (F->window_offsets[w + 1] < F->window_offsets[w]) return ACC_ERR_INVALID_ARGUMENT;
    if (F->block_value_offsets[0] != 0 || F->block_value_offsets[nb] != F->nnz)
        return ACC_ERR_INVALID_ARGUMENT;
    for (int64_t b = 0; b < nb; b++) {
        const uint64_t mask = F->block_mask[b];
        if (F->block_value_offsets[b + 1] - F->block_value_offsets[b] != __builtin_popcountll(mask))
            return ACC_ERR_INVALID_ARGUMENT;
        for (int c = 0; c < ACC_TILE; c++) {
            const int32_t col = F->block_cols[b * ACC_TILE + c];
            const uint64_t colbits = 0x0101010101010101ull << c;
            if (col == ACC_PAD_COL) {
                if (mask & colbits) return ACC_ERR_INVALID_ARGUMENT;
            } else if (col < 0 || col >= F->k) {
                return ACC_ERR_COLUMN_INDEX;
            }
        }
        /* Rows beyond m in the last window must hold no entry. */
    }
    if (W > 0 && F->m % ACC_TILE) {
        const int valid_rows = (int)(F->m % ACC_TILE);
        const uint64_t allowed = valid_rows == 0 ? ~0ull : ((1ull << (valid_rows * ACC_TILE)) - 1);
        for (int64_t b = F->window_offsets[W - 1]; b < nb; b++)
            if (F->block_mask[b] & ~allowed) return ACC_ERR_INVALID_ARGUMENT;
    }
    return acc_perm_check(F->perm, F->m);
}
