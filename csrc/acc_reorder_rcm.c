/* acc_reorder_rcm.c -- reverse Cuthill-McKee in O(nnz log nnz + n), whatever the degrees.
 *
 * The order is the one scipy.sparse.csgraph.reverse_cuthill_mckee (symmetric_mode) gives for the
 * same graph: breadth-first searches rooted at the unvisited nodes taken in the order `seeds`
 * lists them (scipy: numpy.argsort of the degrees), each node's newly found neighbours appended
 * in ascending degree with ties in row order, and the whole order reversed at the end.  The
 * degree of a node is its row length, plus one when the row holds the diagonal (scipy's rule).
 *
 * scipy orders each node's new neighbours with an insertion sort, quadratic in the degree: a hub
 * of 10^6 neighbours does not finish.  Here they are sorted as (degree, position) keys with a
 * heapsort above a few dozen (insertion sort below), O(d log d) per node. */
#include "acc_internal.h"

static void sift_down(uint64_t *a, int64_t root, int64_t n) {
    for (int64_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && a[child + 1] > a[child]) child++;
        if (a[root] >= a[child]) return;
        const uint64_t t = a[root];
        a[root] = a[child];
        a[child] = t;
    }
}

/* Ascending, in place, O(n log n) in every case (keys here are distinct). */
static void sort_keys(uint64_t *a, int64_t n) {
    if (n < 32) {
        for (int64_t i = 1; i < n; i++) {
            const uint64_t x = a[i];
            int64_t j = i - 1;
            for (; j >= 0 && a[j] > x; j--)
                a[j + 1] = a[j];
            a[j + 1] = x;
        }
        return;
    }
    for (int64_t i = n / 2 - 1; i >= 0; i--)
        sift_down(a, i, n);
    for (int64_t end = n - 1; end > 0; end--) {
        const uint64_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end);
    }
}

acc_status acc_reorder_rcm(const acc_csr *G, const int64_t *seeds, int64_t *perm) {
    if (!G || !seeds || !perm || G->m < 0 || G->m != G->k || !G->row_offsets) return ACC_ERR_INVALID_ARGUMENT;
    const int64_t n = G->m;
    if (n > INT32_MAX) return ACC_ERR_TOO_LARGE;
    if (n == 0) return ACC_SUCCESS;
    const int64_t *rp = G->row_offsets;
    const int32_t *ci = G->column_indices;
    acc_status status = ACC_SUCCESS;
    unsigned char *seen = NULL;
    uint32_t *degree = NULL;
    uint64_t *keys = NULL;
    int64_t max_row = 0;
    for (int64_t i = 0; i < n; i++) {
        if (seeds[i] < 0 || seeds[i] >= n) return ACC_ERR_INVALID_ARGUMENT;
        if (rp[i + 1] - rp[i] > max_row) max_row = rp[i + 1] - rp[i];
    }
    seen = acc_mem_alloc((size_t)n, 1);
    degree = acc_mem_alloc((size_t)n, sizeof *degree);
    keys = acc_mem_alloc((size_t)(max_row ? max_row : 1), sizeof *keys);
    if (!seen || !degree || !keys) ACC_CHECK(ACC_ERR_OUT_OF_MEMORY);
    memset(seen, 0, (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t d = rp[i + 1] - rp[i];
        for (int64_t j = rp[i]; j < rp[i + 1]; j++)
            if (ci[j] == i) {
                d++;
                break;
            }
        degree[i] = (uint32_t)d; /* <= n + 1 < 2^32 */
    }
    int64_t placed = 0; /* perm[0 .. placed) holds the order found so far, the BFS queue included */
    for (int64_t s = 0; s < n && placed < n; s++) {
        const int64_t root = seeds[s];
        if (seen[root]) continue;
        seen[root] = 1;
        perm[placed++] = root;
        for (int64_t head = placed - 1; head < placed; head++) {
            const int64_t u = perm[head];
            int64_t found = 0;
            for (int64_t j = rp[u]; j < rp[u + 1]; j++) {
                const int64_t v = ci[j];
                if (v < 0 || v >= n) ACC_CHECK(ACC_ERR_INVALID_ARGUMENT);
                if (!seen[v]) {
                    seen[v] = 1;
                    keys[found] = ((uint64_t)degree[v] << 32) | (uint64_t)found;
                    perm[placed + found++] = v;
                }
            }
            if (found > 1) {
                /* keys[i] = (degree, i): sorting them puts the new neighbours in ascending degree,
                 * ties in the order they were found; rewrite that slice of perm through them */
                sort_keys(keys, found);
                for (int64_t i = 0; i < found; i++)
                    keys[i] = (uint64_t)perm[placed + (int64_t)(keys[i] & 0xffffffffu)];
                for (int64_t i = 0; i < found; i++)
                    perm[placed + i] = (int64_t)keys[i];
            }
            placed += found;
        }
    }
    if (placed != n) ACC_CHECK(ACC_ERR_INVALID_ARGUMENT); /* seeds was not a permutation */
    for (int64_t i = 0, j = n - 1; i < j; i++, j--) {
        const int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
done:
    acc_mem_free(seen);
    acc_mem_free(degree);
    acc_mem_free(keys);
    return status;
}
