/* acc_bsr16_build.c -- the BSR16 format (accspmm.h) from a canonical CSR.
 *
 * The count pass needs only the number of each block row's column blocks:
 * acc_window_distinct (a bitset or a merge tree).  The fill pass merges the
 * sorted column lists of the block row's (at most 16) rows:
 * the next block is the smallest column block among the rows' next entries,
 * and each row then consumes its entries in that block.  Per block row this
 * is O(active rows * blocks + nnz) with no memory beyond 16 cursors, whatever k is
 * (no per-column marker array, which would cost O(k) per thread).  Block
 * rows are independent: both passes run them in parallel and the output
 * does not depend on the thread count. */
#include "acc_internal.h"

/* The block row's rows that still have entries: position p, end and column block at p (blk) of
 * each, and its row within the block row (row).  A row leaves when it runs out, so a step of the
 * merge costs the rows still active, not 16. */
typedef struct cursor {
    int n;
    int row[ACC_BSR];
    int64_t p[ACC_BSR], end[ACC_BSR];
    int32_t blk[ACC_BSR];
} cursor;

static void cursor_init(cursor *c, const acc_csr *A, const int64_t *perm, int64_t r) {
    const int64_t first = r * ACC_BSR;
    const int rows = (int)(A->m - first < ACC_BSR ? A->m - first : ACC_BSR);
    c->n = 0;
    for (int i = 0; i < rows; i++) {
        const int64_t row = perm[first + i], p = A->row_offsets[row], end = A->row_offsets[row + 1];
        if (p < end) {
            c->row[c->n] = i;
            c->p[c->n] = p;
            c->end[c->n] = end;
            c->blk[c->n] = A->column_indices[p] / ACC_BSR;
            c->n++;
        }
    }
}

/* The smallest column block among the active rows' next entries, or -1 when every row is done. */
static inline int32_t cursor_next(const cursor *c) {
    int32_t best = INT32_MAX;
    for (int q = 0; q < c->n; q++)
        best = c->blk[q] < best ? c->blk[q] : best;
    return c->n ? best : -1;
}

/* After active row q consumed its entries of a block: its next column block, or it leaves (the
 * last active row takes its place; callers walk q downwards). */
static inline void cursor_settle(cursor *c, const int32_t *ci, int q) {
    if (c->p[q] < c->end[q]) {
        c->blk[q] = ci[c->p[q]] / ACC_BSR;
        return;
    }
    const int last = --c->n;
    c->row[q] = c->row[last];
    c->p[q] = c->p[last];
    c->end[q] = c->end[last];
    c->blk[q] = c->blk[last];
}

acc_status acc_bsr16_count(const acc_csr *A, const int64_t *perm, int64_t *brow_offsets) {
    if (!A || A->m < 0 || A->k < 0 || !A->row_offsets || !perm || !brow_offsets ||
        (A->row_offsets[A->m] > 0 && !A->column_indices))
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t R = (A->m + ACC_BSR - 1) / ACC_BSR;
    int out_of_memory = 0;
    brow_offsets[0] = 0;
    /* a count needs only the size of each block row's union of column blocks: a merge tree
     * (acc_window_distinct), not the build's ordered merge */
#pragma omp parallel num_threads(acc_threads_for(ACC_MERGE_WORK * A->row_offsets[A->m] + A->m))              \
    reduction(|                                                                                              \
              : out_of_memory)
    {
        acc_window_scratch scratch = {NULL, 0};
        int unsorted = 0; /* the caller's CSR is canonical; the count does not check it */
#pragma omp for schedule(dynamic, 64)
        for (int64_t r = 0; r < R; r++) {
            const int64_t d = acc_window_distinct(A, perm, r * ACC_BSR, ACC_BSR, 4, &scratch, &unsorted);
            out_of_memory |= d < 0;
            brow_offsets[r + 1] = d < 0 ? 0 : d;
        }
        acc_window_scratch_free(&scratch);
    }
    if (out_of_memory) return ACC_ERR_OUT_OF_MEMORY;
    for (int64_t r = 0; r < R; r++)
        brow_offsets[r + 1] += brow_offsets[r];
    return ACC_SUCCESS;
}

/* Position of block entry (i, j) in the A-fragment order (accspmm.h). */
static inline int frag_pos(int i, int j) {
    return 8 * (4 * (i % 8) + (j % 8) / 2) + 2 * (i / 8 + 2 * (j / 8)) + j % 2;
}

acc_status acc_bsr16_fill(const acc_csr *A, const uint16_t *half_values, const int64_t *perm,
                          const int64_t *brow_offsets, int32_t *block_cols, uint16_t *block_values,
                          uint64_t *block_masks) {
    if (!A || A->m < 0 || !A->row_offsets || !perm || !brow_offsets ||
        (A->row_offsets[A->m] > 0 && (!A->column_indices || !half_values)))
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t R = (A->m + ACC_BSR - 1) / ACC_BSR;
    if (brow_offsets[R] > 0 && (!block_cols || !block_values || !block_masks))
        return ACC_ERR_INVALID_ARGUMENT;
    const int32_t *ci = A->column_indices;
#pragma omp parallel for num_threads(acc_threads_for(A->row_offsets[A->m] + A->m)) schedule(dynamic, 64)
    for (int64_t r = 0; r < R; r++) {
        cursor c;
        cursor_init(&c, A, perm, r);
        int64_t blk = brow_offsets[r];
        for (int32_t b; (b = cursor_next(&c)) >= 0; blk++) {
            uint16_t *v = block_values + blk * ACC_BSR * ACC_BSR;
            uint64_t *mask = block_masks + 4 * blk;
            memset(v, 0, ACC_BSR * ACC_BSR * sizeof(uint16_t));
            memset(mask, 0, 4 * sizeof(uint64_t));
            block_cols[blk] = b;
            for (int q = c.n - 1; q >= 0; q--) {
                if (c.blk[q] != b) continue;
                const int i = c.row[q];
                for (; c.p[q] < c.end[q] && ci[c.p[q]] / ACC_BSR == b; c.p[q]++) {
                    const int j = ci[c.p[q]] % ACC_BSR, bit = ACC_BSR * i + j;
                    v[frag_pos(i, j)] = half_values[c.p[q]];
                    mask[bit / 64] |= 1ull << (bit % 64);
                }
                cursor_settle(&c, ci, q);
            }
        }
    }
    return ACC_SUCCESS;
}
