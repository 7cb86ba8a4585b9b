/* acc_bittcf_build.c -- CSR + row permutation -> BitTCF (two passes).
 *
 * A window's distinct columns are the union of its (at most 8) rows' sorted
 * column lists, so both passes walk the window with an 8-way merge instead
 * of sorting: O(distinct columns * 8) per window, linear in nnz overall.
 * Windows are independent: both passes run in parallel over windows
 * (dynamic schedule, as window sizes vary by orders of magnitude). */
#include "acc_internal.h"

/* The rows of window w: heads/ends of their column lists. Returns the number
 * of rows (<= 8). */
static int window_rows(const acc_csr *A, const int64_t *perm, int64_t w, int64_t head[ACC_TILE],
                       int64_t end[ACC_TILE]) {
    int nrows = 0;
    for (int r = 0; r < ACC_TILE; r++) {
        const int64_t i = w * ACC_TILE + r;
        if (i >= A->m) break;
        const int64_t row = perm[i];
        head[r] = A->row_offsets[row];
        end[r] = A->row_offsets[row + 1];
        nrows++;
    }
    return nrows;
}

/* Smallest head column of the window, or -1 when every row is exhausted. */
static inline int64_t window_min_col(const int32_t *ci, int nrows, const int64_t head[ACC_TILE],
                                     const int64_t end[ACC_TILE]) {
    int64_t best = -1;
    for (int r = 0; r < nrows; r++)
        if (head[r] < end[r] && (best < 0 || ci[head[r]] < best)) best = ci[head[r]];
    return best;
}

acc_status acc_bittcf_count(const acc_csr *A, const int64_t *perm, int64_t *window_offsets) {
    if (!A || !perm || !window_offsets || A->m < 0 || !A->row_offsets) return ACC_ERR_INVALID_ARGUMENT;
    const int64_t W = (A->m + ACC_TILE - 1) / ACC_TILE;
    const int32_t *ci = A->column_indices;
    int not_canonical = 0;
    window_offsets[0] = 0;
#pragma omp parallel for schedule(dynamic, 64) reduction(| : not_canonical)
    for (int64_t w = 0; w < W; w++) {
        int64_t head[ACC_TILE], end[ACC_TILE], distinct = 0;
        const int nrows = window_rows(A, perm, w, head, end);
        int64_t c;
        while ((c = window_min_col(ci, nrows, head, end)) >= 0) {
            distinct++;
            for (int r = 0; r < nrows; r++) {
                if (head[r] < end[r] && ci[head[r]] == c) {
                    head[r]++;
                    if (head[r] < end[r] && ci[head[r]] <= c) {
                        not_canonical = 1;
                        head[r] = end[r];
                    }
                }
            }
        }
        window_offsets[w + 1] = (distinct + ACC_TILE - 1) / ACC_TILE;
    }
    if (not_canonical) return ACC_ERR_NOT_CANONICAL;
    for (int64_t w = 0; w < W; w++)
        window_offsets[w + 1] += window_offsets[w];
    return ACC_SUCCESS;
}

/* Writes one finished block: its 8 columns, mask, value offset and values in
 * ascending bit order.  src[bit] is the CSR position of each set bit. */
static void flush_block(const acc_csr *A, int64_t b, const int32_t cols[ACC_TILE], uint64_t mask,
                        const int64_t src[64], int64_t vpos, int32_t *block_cols, uint64_t *block_mask,
                        int64_t *block_value_offsets, void *values) {
    for (int c = 0; c < ACC_TILE; c++)
        block_cols[b * ACC_TILE + c] = cols[c];
    block_mask[b] = mask;
    block_value_offsets[b] = vpos;
    for (uint64_t bits = mask; bits; bits &= bits - 1) {
        const int bit = __builtin_ctzll(bits);
        if (A->dtype == ACC_FLOAT64)
            ((double *)values)[vpos++] = ((const double *)A->values)[src[bit]];
        else
            ((float *)values)[vpos++] = ((const float *)A->values)[src[bit]];
    }
}

acc_status acc_bittcf_fill(const acc_csr *A, const int64_t *perm, const int64_t *window_offsets,
                           int32_t *block_cols, uint64_t *block_mask, int64_t *block_value_offsets,
                           void *values) {
    acc_status status = ACC_SUCCESS;
    int64_t *vstart = NULL;
    if (!A || !perm || !window_offsets || !block_value_offsets || A->m < 0 || !A->row_offsets ||
        !acc_dtype_valid(A->dtype))
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = A->m, W = (m + ACC_TILE - 1) / ACC_TILE, nnz = A->row_offsets[m];
    const int64_t nblocks = window_offsets[W];
    if (nblocks > 0 && (!block_cols || !block_mask || !values || !A->values)) return ACC_ERR_INVALID_ARGUMENT;
    const int32_t *ci = A->column_indices;

    /* First value of each window: the nnz of its rows, prefix-summed. */
    vstart = acc_mem_alloc((size_t)W + 1, sizeof(int64_t));
    if (!vstart) return ACC_ERR_OUT_OF_MEMORY;
    vstart[0] = 0;
#pragma omp parallel for schedule(static)
    for (int64_t w = 0; w < W; w++) {
        int64_t head[ACC_TILE], end[ACC_TILE], len = 0;
        const int nrows = window_rows(A, perm, w, head, end);
        for (int r = 0; r < nrows; r++)
            len += end[r] - head[r];
        vstart[w + 1] = len;
    }
    for (int64_t w = 0; w < W; w++)
        vstart[w + 1] += vstart[w];

    int mismatch = 0;
#pragma omp parallel for schedule(dynamic, 64) reduction(| : mismatch)
    for (int64_t w = 0; w < W; w++) {
        int64_t head[ACC_TILE], end[ACC_TILE], src[64];
        int32_t cols[ACC_TILE];
        const int nrows = window_rows(A, perm, w, head, end);
        int64_t b = window_offsets[w], vpos = vstart[w], c;
        const int64_t b_end = window_offsets[w + 1];
        uint64_t mask = 0;
        int j = 0; /* compacted column within the current block */
        while ((c = window_min_col(ci, nrows, head, end)) >= 0) {
            if (b >= b_end) { /* window_offsets do not match this CSR */
                mismatch = 1;
                break;
            }
            cols[j] = (int32_t)c;
            for (int r = 0; r < nrows; r++) {
                if (head[r] < end[r] && ci[head[r]] == c) {
                    const int bit = r * ACC_TILE + j;
                    src[bit] = head[r]++;
                    mask |= 1ull << bit;
                }
            }
            if (++j == ACC_TILE) {
                flush_block(A, b, cols, mask, src, vpos, block_cols, block_mask, block_value_offsets, values);
                vpos += __builtin_popcountll(mask);
                b++;
                j = 0;
                mask = 0;
            }
        }
        if (j > 0 && b < b_end) {
            for (int q = j; q < ACC_TILE; q++)
                cols[q] = ACC_PAD_COL;
            flush_block(A, b, cols, mask, src, vpos, block_cols, block_mask, block_value_offsets, values);
            vpos += __builtin_popcountll(mask);
            b++;
        }
        mismatch |= (b != b_end) | (vpos != vstart[w + 1]);
    }
    if (mismatch) {
        status = ACC_ERR_INVALID_ARGUMENT;
        goto done;
    }
    block_value_offsets[nblocks] = nnz;
done:
    acc_mem_free(vstart);
    return status;
}
