/* acc_bittcf_build.c -- CSR + row permutation -> BitTCF (two passes).
 *
 * A window's distinct columns are the union of its (at most 8) rows' sorted
 * column lists.  The count pass needs only their number: acc_window_distinct
 * (a bitset or a merge tree, O(L log 8) for L entries).  The fill pass walks
 * the window with an 8-way merge instead of sorting: O(distinct columns x
 * rows still active) per window, linear in nnz overall.  Rows leave the merge as they run out (window_cursor): on
 * one thread that made the build 1.2-2.4x faster than a merge over all 8
 * rows with a test per exhausted row (benchmarks/results/devbox_cpu_builders.md).
 * Windows are independent: both passes run in parallel over windows
 * (dynamic schedule, as window sizes vary by orders of magnitude). */
#include "acc_internal.h"

/* The window's rows that still have entries, for the merge: CSR position (head), end and column
 * at head (cur) of each, and its row within the window.  A row leaves when it runs out, so each
 * step of the merge costs the rows still active, not 8, and holds no branch on exhausted rows.
 * acc_bsr16_build.c has the same cursor over 16 rows keyed by column block; one struct of 16 rows
 * for both made these passes 8-20% slower (dev machine, one thread), so each keeps its own size. */
typedef struct {
    int n;
    int row[ACC_TILE];
    int64_t head[ACC_TILE], end[ACC_TILE], cur[ACC_TILE];
} window_cursor;

static void cursor_init(window_cursor *wc, const acc_csr *A, const int64_t *perm, int64_t w) {
    wc->n = 0;
    for (int r = 0; r < ACC_TILE; r++) {
        const int64_t i = w * ACC_TILE + r;
        if (i >= A->m) break;
        const int64_t row = perm[i], h = A->row_offsets[row], e = A->row_offsets[row + 1];
        if (h < e) {
            wc->row[wc->n] = r;
            wc->head[wc->n] = h;
            wc->end[wc->n] = e;
            wc->cur[wc->n] = A->column_indices[h];
            wc->n++;
        }
    }
}

/* Smallest column at the active rows' heads, or -1 when every row is exhausted. */
static inline int64_t cursor_min(const window_cursor *wc) {
    int64_t best = INT64_MAX;
    for (int q = 0; q < wc->n; q++)
        best = wc->cur[q] < best ? wc->cur[q] : best;
    return wc->n ? best : -1;
}

/* Takes column c from every active row whose head is at c: pos[r] = its CSR position for window
 * row r, bit r of the result set.  A row whose next column is not above c (unsorted or duplicate
 * columns) leaves and sets *bad. */
static inline unsigned cursor_take(window_cursor *wc, const int32_t *ci, int64_t c, int64_t pos[ACC_TILE],
                                   int *bad) {
    unsigned rows = 0;
    for (int q = wc->n - 1; q >= 0; q--) { /* downwards: a leaving row swaps with the last */
        if (wc->cur[q] != c) continue;
        const int r = wc->row[q];
        rows |= 1u << r;
        pos[r] = wc->head[q]++;
        const int64_t next = wc->head[q] < wc->end[q] ? ci[wc->head[q]] : -1;
        if (next > c) {
            wc->cur[q] = next;
            continue;
        }
        if (next >= 0) *bad = 1;
        const int last = --wc->n;
        wc->row[q] = wc->row[last];
        wc->head[q] = wc->head[last];
        wc->end[q] = wc->end[last];
        wc->cur[q] = wc->cur[last];
    }
    return rows;
}

acc_status acc_bittcf_count(const acc_csr *A, const int64_t *perm, int64_t *window_offsets) {
    if (!A || !perm || !window_offsets || A->m < 0 || !A->row_offsets) return ACC_ERR_INVALID_ARGUMENT;
    const int64_t W = (A->m + ACC_TILE - 1) / ACC_TILE;
    int not_canonical = 0, out_of_memory = 0;
    window_offsets[0] = 0;
    /* the count's merge tree (acc_window_distinct) costs several ns an entry: threads by ACC_MERGE_WORK */
    const int threads = acc_threads_for(ACC_MERGE_WORK * A->row_offsets[A->m] + A->m);
#pragma omp parallel num_threads(threads) reduction(| : not_canonical, out_of_memory)
    {
        acc_window_scratch scratch = {NULL, 0};
#pragma omp for schedule(dynamic, 64)
        for (int64_t w = 0; w < W; w++) {
            const int64_t d =
                acc_window_distinct(A, perm, w * ACC_TILE, ACC_TILE, 0, &scratch, &not_canonical);
            out_of_memory |= d < 0;
            window_offsets[w + 1] = d < 0 ? 0 : (d + ACC_TILE - 1) / ACC_TILE;
        }
        acc_window_scratch_free(&scratch);
    }
    if (out_of_memory) return ACC_ERR_OUT_OF_MEMORY;
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
#pragma omp parallel for num_threads(acc_threads_for(m)) schedule(static)
    for (int64_t w = 0; w < W; w++) {
        int64_t len = 0;
        for (int64_t i = w * ACC_TILE; i < m && i < (w + 1) * ACC_TILE; i++)
            len += A->row_offsets[perm[i] + 1] - A->row_offsets[perm[i]];
        vstart[w + 1] = len;
    }
    for (int64_t w = 0; w < W; w++)
        vstart[w + 1] += vstart[w];

    int mismatch = 0;
#pragma omp parallel for num_threads(acc_threads_for(nnz + m)) schedule(dynamic, 64) reduction(| : mismatch)
    for (int64_t w = 0; w < W; w++) {
        window_cursor wc;
        int64_t pos[ACC_TILE], src[64];
        int32_t cols[ACC_TILE];
        int bad = 0;
        cursor_init(&wc, A, perm, w);
        int64_t b = window_offsets[w], vpos = vstart[w], c;
        const int64_t b_end = window_offsets[w + 1];
        uint64_t mask = 0;
        int j = 0; /* compacted column within the current block */
        while ((c = cursor_min(&wc)) >= 0) {
            if (b >= b_end) { /* window_offsets do not match this CSR */
                mismatch = 1;
                break;
            }
            cols[j] = (int32_t)c;
            for (unsigned rows = cursor_take(&wc, ci, c, pos, &bad); rows; rows &= rows - 1) {
                const int r = __builtin_ctz(rows), bit = r * ACC_TILE + j;
                src[bit] = pos[r];
                mask |= 1ull << bit;
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
        mismatch |= (b != b_end) | (vpos != vstart[w + 1]) | bad;
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
