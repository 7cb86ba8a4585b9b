/*
 * acc_reorder_affinity.c -- data-affinity row reordering (Acc-SpMM, section
 * 3.2, Algorithm 1), our own implementation.
 *
 * Graph.  Rows are what get grouped, so the graph must connect rows that
 * should meet in a row window:
 *   - square A (m == k): vertices are the m rows/columns, edges the pattern
 *     of A + A^T without the diagonal (a directed web or social graph is
 *     treated as undirected, as community detection needs);
 *   - rectangular A: the bipartite graph of m row vertices and k column
 *     vertices (vertex m + j), one edge per nonzero.  Two rows are then
 *     linked through the columns they share, without ever forming the
 *     (possibly dense) row-row product A A^T.
 * Edge weights are 1; aggregated weights count edges between communities.
 *
 * Step I, dendrogram (incremental aggregation, as in Rabbit Order).  Visit
 * the vertices in ascending degree.  The visited vertex v is always the
 * root of its community (only the visited vertex ever merges away).  Its
 * community's edges are its own stored list plus the stored lists of the
 * communities merged into it so far; they are aggregated by target
 * community (union-find) into a dense accumulator, and the compacted list
 * replaces v's.  v merges into the neighbouring community u of largest
 * modularity gain
 *     dQ(v, u) = 2 (w_vu / E - s_v s_u / E^2),   E = sum of degrees,
 * when the gain is positive (we rank by w_vu - s_v s_u / E, the same order);
 * the merge is recorded by making v a child of u.  Ties go to the lower
 * vertex id.  Top-level vertices (never merged) are the dendrogram roots;
 * each root's tree is one community.
 *   Community cap: a merge is allowed only while the merged strength stays
 * at most max_community average degrees.  Row windows hold 8 rows, so
 * communities of thousands of vertices buy no density, and without the cap
 * a mesh (G3_circuit) snowballs into giant communities whose external edge
 * lists are re-aggregated at every step of a long merge chain: quadratic
 * time and memory.  With the cap every stored list has at most
 * max_community * E / n entries.
 *   Memory: the compacted list is written in place when it fits, else
 * appended; when the buffer is full, the live lists (those a later visit
 * may still read: of unvisited vertices, and of visited ones whose
 * dendrogram parent is unvisited) are copied into a fresh buffer, so the
 * buffer stays within a small multiple of the graph's edges.
 *   Parts: a square A's graph with more than params->part_edges edges is
 * cut into ranges of consecutive vertex ids of about part_edges edges
 * each, and each range's dendrogram is built on its induced subgraph
 * (edges leaving the range are dropped), in parallel.  Communities hold a
 * few dozen vertices (the cap above), so cutting costs little: on the real
 * matrices the parts (2^20 edges) gave 0-4% fewer TC blocks than the whole
 * graph and halved the time of step I on two cores
 * (benchmarks/reorder_quality.md).  The part size is a parameter, not
 * derived from the thread count, so the result is the same on every
 * machine.  The bipartite graph of a rectangular A is never cut: a range of
 * ids would separate rows from the columns that link them.
 *
 * Step II, ordering.  The dendrogram is walked depth first (roots in
 * ascending id, each node before its children); the walk gives the
 * fallback order.  From the row placed last, the next row is the unplaced
 * row sharing the most columns with the *current row window* (the union of
 * the rows already placed in it; for the first row of a window, the
 * previous window).  With one row in the window this is exactly the paper's
 * "most common neighbours with v"; counting against the window's union
 * targets what the kernel pays for (distinct columns per window).  Among
 * equal counts the row that reached its count first wins; with the
 * community rule ACC_COMMUNITY_TIE (the default) a row of the current
 * row's community wins instead when one is among the first ACC_TIE_SCAN
 * tied rows, which is our reading of the paper's "within the same
 * community first".  The strict reading (any same-community row beats any
 * other, whatever its count) was measured worse on 7 of 10 real matrices,
 * so it is not offered.  When no unplaced row shares a column, the walk
 * continues with the next unplaced row of the depth-first order.
 *   The depth-first order of the nonempty rows is cut into chunks of about
 * params->chunk_nnz nonzeros (at multiples of 8 rows); each chunk is
 * ordered on its own, in parallel, with its own transposed pattern.  The
 * chunk size is a parameter, not derived from the thread count, so the
 * permutation is the same on every machine.  A row can only meet rows of
 * its own chunk, which costs little: the depth-first order already keeps
 * communities together (benchmarks/reorder_quality.md).
 *
 * Bounding the search.  The naive search over all unvisited rows is
 * quadratic.  Candidates are found instead through the transposed pattern:
 * for each new column of the window we scan that column's list of rows.
 * Placed rows are swap-removed from a column's list when a scan meets them
 * (each (row, column) entry is removed at most once: O(nnz) in total), and
 * each placed row scans at most max_scan live entries, spread over its
 * columns (at least 16 per column).  Candidates sit in a bucket queue keyed
 * by their count, with stale entries dropped lazily, so picking the best
 * costs O(1) amortised per count increment.
 *
 * Complexity: O(nnz alpha(n) + n * cap) for the graph and the dendrogram
 * (each stored list is aggregated once, by the parent that absorbs it, and
 * holds at most cap = max_community * E / n entries) and
 * O(nnz + m * max_scan) for the ordering, plus the O(n + max degree)
 * degree sort.  Memory: about 16 bytes per graph edge and 75 bytes per
 * vertex.  Steps I and II run their parts and chunks in parallel.  The
 * result depends only on A and the parameters (not on the thread count).
 */
#include "acc_internal.h"

#include <time.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One edge of a stored adjacency list. */
typedef struct edge {
    int32_t target;
    int32_t weight;
} edge;

/* Union-find root with path halving. */
static inline int32_t find_root(int32_t *dest, int32_t x) {
    while (dest[x] != x) {
        dest[x] = dest[dest[x]];
        x = dest[x];
    }
    return x;
}

/* ---- graph ------------------------------------------------------------- */

/* Merges row i of A with column i of A (the transposed pattern) without
 * the diagonal, keeping the targets in [lo, hi); counts when out == NULL,
 * else writes the targets minus lo.  Returns the number of entries. */
static int64_t sym_row(const acc_csr *A, const int64_t *col_offsets, const int32_t *col_rows, int64_t i,
                       int64_t lo, int64_t hi, edge *out) {
    const int32_t *ci = A->column_indices;
    int64_t p = A->row_offsets[i], q = col_offsets[i], cnt = 0;
    const int64_t pe = A->row_offsets[i + 1], qe = col_offsets[i + 1];
    while (p < pe || q < qe) {
        int64_t c;
        if (q >= qe || (p < pe && ci[p] < col_rows[q]))
            c = ci[p++];
        else if (p >= pe || col_rows[q] < ci[p])
            c = col_rows[q++];
        else
            c = ci[p++], q++;
        if (c == i || c < lo || c >= hi) continue;
        if (out) out[cnt] = (edge){(int32_t)(c - lo), 1};
        cnt++;
    }
    return cnt;
}

/* Offsets of the graph defined in the header: adj_offsets[n+1]. */
static acc_status graph_offsets(const acc_csr *A, const int64_t *col_offsets, const int32_t *col_rows,
                                int64_t n, int64_t *adj_offsets) {
    const int64_t m = A->m, *rp = A->row_offsets;
    adj_offsets[0] = 0;
    if (A->m == A->k) {
#pragma omp parallel for schedule(dynamic, 1024)
        for (int64_t i = 0; i < m; i++)
            adj_offsets[i + 1] = sym_row(A, col_offsets, col_rows, i, 0, m, NULL);
    } else {
        for (int64_t i = 0; i < m; i++)
            adj_offsets[i + 1] = rp[i + 1] - rp[i];
        for (int64_t j = 0; j < A->k; j++)
            adj_offsets[m + j + 1] = col_offsets[j + 1] - col_offsets[j];
    }
    for (int64_t v = 0; v < n; v++)
        adj_offsets[v + 1] += adj_offsets[v];
    return adj_offsets[n] > INT32_MAX ? ACC_ERR_TOO_LARGE : ACC_SUCCESS;
}

/* Capacity of an edge buffer for a graph of `edges` edges: step I appends
 * merged lists to it, so it gets half again as much room. */
static inline int64_t edge_capacity(int64_t edges) { return edges + edges / 2 + 1024; }

/* Edges of the graph for the offsets of graph_offsets: allocated here with
 * capacity *cap = edge_capacity(adj_offsets[n]). */
static acc_status graph_edges(const acc_csr *A, const int64_t *col_offsets, const int32_t *col_rows,
                              const int64_t *adj_offsets, int64_t n, edge **edges_out, int64_t *cap) {
    const int64_t m = A->m, *rp = A->row_offsets;
    const int32_t *ci = A->column_indices;
    *cap = edge_capacity(adj_offsets[n]);
    edge *e = acc_mem_alloc((size_t)*cap, sizeof(edge));
    if (!e) return ACC_ERR_OUT_OF_MEMORY;
    if (A->m == A->k) {
#pragma omp parallel for schedule(dynamic, 1024)
        for (int64_t i = 0; i < m; i++)
            sym_row(A, col_offsets, col_rows, i, 0, m, e + adj_offsets[i]);
    } else {
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = rp[i]; p < rp[i + 1]; p++)
                e[adj_offsets[i] + p - rp[i]] = (edge){(int32_t)(m + ci[p]), 1};
        for (int64_t j = 0; j < A->k; j++)
            for (int64_t q = col_offsets[j]; q < col_offsets[j + 1]; q++)
                e[adj_offsets[m + j] + q - col_offsets[j]] = (edge){col_rows[q], 1};
    }
    *edges_out = e;
    return ACC_SUCCESS;
}

/* ---- step I: dendrogram ------------------------------------------------- */

typedef struct dendrogram {
    int32_t *dest;        /* [n] union-find parent (community membership) */
    int32_t *parent;      /* [n] dendrogram parent, -1 for a root */
    int32_t *first_child; /* [n] dendrogram children, in merge order */
    int32_t *last_child;  /* [n] */
    int32_t *next_sib;    /* [n] */
} dendrogram;

/* Stored adjacency lists of the communities during step I. */
typedef struct edge_store {
    edge *e;
    int64_t cap, used;
    int64_t *off;        /* [n] start of each vertex's list */
    int32_t *len, *room; /* [n] its length and slot size (< 2^31: see the entry checks) */
} edge_store;

/* Appends the stored list of x (targets mapped to their roots, v's own
 * members dropped) into the accumulator. */
static void accumulate(const edge_store *S, int32_t x, int32_t v, int32_t *dest, int32_t *acc,
                       int32_t *touched, int64_t *ntouched) {
    const edge *e = S->e + S->off[x];
    for (int64_t p = 0; p < S->len[x]; p++) {
        const int32_t r = find_root(dest, e[p].target);
        if (r == v) continue;
        if (acc[r] == 0) touched[(*ntouched)++] = r;
        acc[r] += e[p].weight;
    }
}

/* Makes room for `need` more entries: copies the live lists (see header)
 * into a fresh buffer.  visited[n] marks visited vertices. */
static acc_status store_reserve(edge_store *S, int64_t n, const dendrogram *D, const uint8_t *visited,
                                int64_t need) {
    if (S->used + need <= S->cap) return ACC_SUCCESS;
    int64_t live = 0;
    for (int64_t x = 0; x < n; x++)
        if (!visited[x] || (D->parent[x] >= 0 && !visited[D->parent[x]])) live += S->len[x];
    const int64_t ncap = 2 * (live + need) + 1024;
    edge *ne = acc_mem_alloc((size_t)ncap, sizeof(edge));
    if (!ne) return ACC_ERR_OUT_OF_MEMORY;
    int64_t used = 0;
    for (int64_t x = 0; x < n; x++) {
        if (!visited[x] || (D->parent[x] >= 0 && !visited[D->parent[x]])) {
            memcpy(ne + used, S->e + S->off[x], (size_t)S->len[x] * sizeof(edge));
            S->off[x] = used;
            S->room[x] = S->len[x];
            used += S->len[x];
        } else {
            S->len[x] = S->room[x] = 0;
        }
    }
    acc_mem_free(S->e);
    S->e = ne;
    S->cap = ncap;
    S->used = used;
    return ACC_SUCCESS;
}

static acc_status build_dendrogram(int64_t n, const int64_t *adj_offsets, edge **edges_io, int64_t cap,
                                   const int64_t *visit, double max_strength, dendrogram *D,
                                   int64_t *progress, int64_t progress_total) {
    acc_status status = ACC_SUCCESS;
    const double E = (double)adj_offsets[n];
    edge_store S = {*edges_io, cap, adj_offsets[n], NULL, NULL, NULL};
    *edges_io = NULL; /* owned by S until the end */
    S.off = acc_mem_alloc((size_t)n, sizeof(int64_t));
    S.len = acc_mem_alloc((size_t)n, sizeof(int32_t));
    S.room = acc_mem_alloc((size_t)n, sizeof(int32_t));
    int32_t *strength = acc_mem_alloc((size_t)n, sizeof(int32_t)); /* sums of degrees: < 2^31 */
    int32_t *acc = acc_mem_alloc((size_t)n, sizeof(int32_t));
    int32_t *touched = acc_mem_alloc((size_t)n, sizeof(int32_t));
    uint8_t *visited = acc_mem_alloc((size_t)n, sizeof(uint8_t));
    if (!S.off || !S.len || !S.room || !strength || !acc || !touched || !visited) {
        status = ACC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    for (int64_t v = 0; v < n; v++) {
        S.off[v] = adj_offsets[v];
        S.len[v] = S.room[v] = strength[v] = (int32_t)(adj_offsets[v + 1] - adj_offsets[v]);
        acc[v] = 0;
        visited[v] = 0;
        D->dest[v] = (int32_t)v;
        D->parent[v] = D->first_child[v] = D->last_child[v] = D->next_sib[v] = -1;
    }
    for (int64_t step = 0; step < n; step++) {
        const int32_t v = (int32_t)visit[step];
        int64_t nt = 0;
        visited[v] = 1;
        if ((step & 4095) == 0) acc_progress_set(progress, step, progress_total);
        accumulate(&S, v, v, D->dest, acc, touched, &nt);
        for (int32_t c = D->first_child[v]; c >= 0; c = D->next_sib[c])
            accumulate(&S, c, v, D->dest, acc, touched, &nt);
        /* compacted list: in place when it fits v's slot, else appended */
        if (nt > S.room[v]) {
            ACC_CHECK(store_reserve(&S, n, D, visited, nt));
            S.off[v] = S.used;
            S.room[v] = (int32_t)nt;
            S.used += nt;
        }
        S.len[v] = (int32_t)nt;
        int32_t best = -1;
        double best_gain = 0.0;
        const double sv = (double)strength[v];
        edge *out = S.e + S.off[v];
        for (int64_t t = 0; t < nt; t++) {
            const int32_t r = touched[t];
            const double gain = (double)acc[r] - sv * (double)strength[r] / E;
            if (sv + (double)strength[r] <= max_strength &&
                (gain > best_gain || (gain == best_gain && best >= 0 && r < best))) {
                best_gain = gain;
                best = r;
            }
            out[t] = (edge){r, acc[r]};
            acc[r] = 0;
        }
        if (best >= 0) {
            D->dest[v] = best;
            D->parent[v] = best;
            strength[best] += strength[v];
            if (D->last_child[best] < 0)
                D->first_child[best] = v;
            else
                D->next_sib[D->last_child[best]] = v;
            D->last_child[best] = v;
        }
    }
done:
    acc_mem_free(S.e);
    acc_mem_free(S.off);
    acc_mem_free(S.len);
    acc_mem_free(S.room);
    acc_mem_free(strength);
    acc_mem_free(acc);
    acc_mem_free(touched);
    acc_mem_free(visited);
    return status;
}

/* Depth-first order of the trees whose roots lie in [lo, hi) (every vertex
 * of those trees does): roots ascending, node before its children, written
 * to order[lo..hi); comm[x] = x's root (its community).  stack[hi - lo]
 * workspace. */
static void dendrogram_dfs(int64_t lo, int64_t hi, const dendrogram *D, int32_t *stack, int32_t *order,
                           int32_t *comm) {
    int64_t pos = lo;
    for (int64_t root = lo; root < hi; root++) {
        if (D->parent[root] >= 0) continue;
        int64_t top = 0;
        stack[top++] = (int32_t)root;
        while (top > 0) {
            const int32_t x = stack[--top];
            order[pos++] = x;
            comm[x] = (int32_t)root;
            /* children pushed in merge order pop in reverse merge order:
             * the community merged last (the strongest link) comes first */
            for (int32_t c = D->first_child[x]; c >= 0; c = D->next_sib[c])
                stack[top++] = c;
        }
    }
}

/* Step I in parts (header) for a square A whose graph (offsets adj_offsets[m+1])
 * has more than part_edges edges: vertex ranges [lo, hi) of about part_edges
 * edges each, every range's dendrogram built on its induced subgraph (made
 * from A and its transposed pattern), then its depth-first order, in
 * parallel (trees never leave their part, so the parts' orders concatenate
 * to the whole graph's).  visit[m] is workspace; D gets global vertex ids;
 * dfs[m] and comm[m] out as in dendrogram_dfs. */
static acc_status build_dendrogram_parts(const acc_csr *A, const int64_t *col_offsets,
                                         const int32_t *col_rows, const int64_t *adj_offsets,
                                         const acc_affinity_params *params, double max_strength,
                                         int64_t *visit, dendrogram *D, int32_t *dfs, int32_t *comm,
                                         int64_t *progress, int64_t progress_total) {
    const int64_t n = A->m;
    int64_t nparts = 0;
    int64_t *bounds = acc_mem_alloc((size_t)n + 1, sizeof(int64_t));
    if (!bounds) return ACC_ERR_OUT_OF_MEMORY;
    for (int64_t v = 0, acc = 0; v < n; v++) {
        if (v == 0 || acc >= params->part_edges) {
            bounds[nparts++] = v;
            acc = 0;
        }
        acc += adj_offsets[v + 1] - adj_offsets[v];
    }
    bounds[nparts] = n;
    acc_status status = ACC_SUCCESS;
    int64_t done = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t part = 0; part < nparts; part++) {
        const int64_t lo = bounds[part], hi = bounds[part + 1], np = hi - lo;
        int64_t *off = acc_mem_alloc((size_t)np + 1, sizeof(int64_t));
        int64_t pcap = 0;
        edge *pe = NULL;
        acc_status st = off ? ACC_SUCCESS : ACC_ERR_OUT_OF_MEMORY;
        if (st == ACC_SUCCESS) { /* induced subgraph, local ids */
            off[0] = 0;
            for (int64_t v = 0; v < np; v++)
                off[v + 1] = off[v] + sym_row(A, col_offsets, col_rows, lo + v, lo, hi, NULL);
            pcap = edge_capacity(off[np]);
            pe = acc_mem_alloc((size_t)pcap, sizeof(edge));
            if (!pe) st = ACC_ERR_OUT_OF_MEMORY;
        }
        if (st == ACC_SUCCESS) {
            for (int64_t v = 0; v < np; v++)
                sym_row(A, col_offsets, col_rows, lo + v, lo, hi, pe + off[v]);
            st = acc_order_by_length(off, np, 1, params->seed, visit + lo);
        }
        if (st == ACC_SUCCESS) {
            dendrogram Dp = {D->dest + lo, D->parent + lo, D->first_child + lo, D->last_child + lo,
                             D->next_sib + lo};
            st = build_dendrogram(np, off, &pe, pcap, visit + lo, max_strength, &Dp, NULL, 0);
            for (int64_t v = lo; st == ACC_SUCCESS && v < hi; v++) { /* local -> global ids */
                D->dest[v] += (int32_t)lo;
                if (D->parent[v] >= 0) D->parent[v] += (int32_t)lo;
                if (D->first_child[v] >= 0) D->first_child[v] += (int32_t)lo;
                if (D->last_child[v] >= 0) D->last_child[v] += (int32_t)lo;
                if (D->next_sib[v] >= 0) D->next_sib[v] += (int32_t)lo;
            }
            /* the part's union-find is no longer needed: its range is the stack */
            if (st == ACC_SUCCESS) dendrogram_dfs(lo, hi, D, D->dest + lo, dfs, comm);
        }
        acc_mem_free(pe); /* NULL once build_dendrogram took it */
        acc_mem_free(off);
        int64_t now;
#pragma omp atomic capture
        now = done += np;
        acc_progress_set(progress, now, progress_total);
        if (st != ACC_SUCCESS) {
#pragma omp critical(acc_affinity_status)
            status = st;
        }
    }
    acc_mem_free(bounds);
    return status;
}

/* ---- step II: ordering -------------------------------------------------- */

/* One chunk of the ordering as a problem of its own: rows 0..R-1 are the
 * chunk's rows in depth-first order, columns are renumbered 0..kc-1 in
 * first-use order.  Work arrays are sized for the largest chunk and reused. */
typedef struct walk {
    int64_t R, kc, nnz;
    int64_t *row_offsets; /* [R+1] */
    int32_t *cols;        /* [nnz] local column ids */
    int64_t *col_offsets; /* [kc+1] transposed pattern */
    int32_t *col_rows;    /* [nnz] rows of each column; live prefix per column */
    int64_t *live;        /* [kc] live rows of each column */
    int64_t *col_stamp;   /* [kc] window that last added the column */
    int32_t *cnt;         /* [R] columns shared with the current window */
    int32_t *touched;     /* [R] rows with cnt > 0 (some may be placed) */
    int64_t ntouched;
    uint8_t *placed; /* [R] */
    int32_t *comm;   /* [R] community of each row */
    int32_t *colmap; /* [k] global -> local column, -1 when unused */
    /* bucket queue over counts: an entry (row r in bucket c) is valid while
     * r is unplaced and cnt[r] == c; stale entries are dropped when met */
    int32_t *head, *tail;  /* [max_len+1] first/last entry, -1 empty */
    int64_t top, max_used; /* no valid entry above top; highest bucket used */
    int32_t *next, *entry; /* [qcap] entry pool */
    int64_t qn, qcap;
} walk;

/* Rows of equal count examined for a same-community candidate (TIE rule). */
#define ACC_TIE_SCAN 32

static void walk_free(walk *W) {
    acc_mem_free(W->row_offsets);
    acc_mem_free(W->cols);
    acc_mem_free(W->col_offsets);
    acc_mem_free(W->col_rows);
    acc_mem_free(W->live);
    acc_mem_free(W->col_stamp);
    acc_mem_free(W->cnt);
    acc_mem_free(W->touched);
    acc_mem_free(W->placed);
    acc_mem_free(W->comm);
    acc_mem_free(W->colmap);
    acc_mem_free(W->head);
    acc_mem_free(W->tail);
    acc_mem_free(W->next);
    acc_mem_free(W->entry);
}

/* Allocates a walk for chunks of at most R rows and nnz entries. */
static acc_status walk_alloc(walk *W, int64_t R, int64_t nnz, int64_t k, int64_t max_len) {
    const int64_t kc = nnz < k ? nnz : k;
    memset(W, 0, sizeof(*W));
    W->row_offsets = acc_mem_alloc((size_t)R + 1, sizeof(int64_t));
    W->cols = acc_mem_alloc((size_t)nnz, sizeof(int32_t));
    W->col_offsets = acc_mem_alloc((size_t)kc + 1, sizeof(int64_t));
    W->col_rows = acc_mem_alloc((size_t)nnz, sizeof(int32_t));
    W->live = acc_mem_alloc((size_t)kc, sizeof(int64_t));
    W->col_stamp = acc_mem_alloc((size_t)kc, sizeof(int64_t));
    W->cnt = acc_mem_alloc((size_t)R, sizeof(int32_t));
    W->touched = acc_mem_alloc((size_t)R, sizeof(int32_t));
    W->placed = acc_mem_alloc((size_t)R, sizeof(uint8_t));
    W->comm = acc_mem_alloc((size_t)R, sizeof(int32_t));
    W->colmap = acc_mem_alloc((size_t)k, sizeof(int32_t));
    W->head = acc_mem_alloc((size_t)max_len + 1, sizeof(int32_t));
    W->tail = acc_mem_alloc((size_t)max_len + 1, sizeof(int32_t));
    W->qcap = 4096;
    W->next = acc_mem_alloc((size_t)W->qcap, sizeof(int32_t));
    W->entry = acc_mem_alloc((size_t)W->qcap, sizeof(int32_t));
    if (!W->row_offsets || !W->cols || !W->col_offsets || !W->col_rows || !W->live || !W->col_stamp ||
        !W->cnt || !W->touched || !W->placed || !W->comm || !W->colmap || !W->head || !W->tail || !W->next ||
        !W->entry)
        return ACC_ERR_OUT_OF_MEMORY;
    for (int64_t j = 0; j < k; j++)
        W->colmap[j] = -1;
    for (int64_t c = 0; c <= max_len; c++)
        W->head[c] = W->tail[c] = -1;
    W->top = W->max_used = 0;
    return ACC_SUCCESS;
}

static acc_status bucket_push(walk *W, int32_t r, int64_t c) {
    if (W->qn == W->qcap) {
        const int64_t ncap = 2 * W->qcap;
        int32_t *nn = acc_mem_alloc((size_t)ncap, sizeof(int32_t));
        int32_t *ne = acc_mem_alloc((size_t)ncap, sizeof(int32_t));
        if (!nn || !ne) {
            acc_mem_free(nn);
            acc_mem_free(ne);
            return ACC_ERR_OUT_OF_MEMORY;
        }
        memcpy(nn, W->next, (size_t)W->qn * sizeof(int32_t));
        memcpy(ne, W->entry, (size_t)W->qn * sizeof(int32_t));
        acc_mem_free(W->next);
        acc_mem_free(W->entry);
        W->next = nn;
        W->entry = ne;
        W->qcap = ncap;
    }
    const int32_t e = (int32_t)W->qn++;
    W->entry[e] = r;
    W->next[e] = -1;
    if (W->tail[c] < 0)
        W->head[c] = e;
    else
        W->next[W->tail[c]] = e;
    W->tail[c] = e;
    if (c > W->top) W->top = c;
    if (c > W->max_used) W->max_used = c;
    return ACC_SUCCESS;
}

static inline int entry_valid(const walk *W, int32_t e, int64_t c) {
    return !W->placed[W->entry[e]] && W->cnt[W->entry[e]] == c;
}

/* The best unplaced candidate (highest count; among equal counts the first
 * to reach it, or with the TIE rule the first of the current community
 * within ACC_TIE_SCAN rows), or -1. */
static int32_t best_candidate(walk *W, int community, int32_t cur_comm) {
    while (W->top > 0) {
        const int64_t c = W->top;
        int32_t e = W->head[c];
        while (e >= 0 && !entry_valid(W, e, c))
            e = W->next[e];
        W->head[c] = e;
        if (e < 0) {
            W->tail[c] = -1;
            W->top--;
            continue;
        }
        if (community == ACC_COMMUNITY_TIE && W->comm[W->entry[e]] != cur_comm) {
            int32_t f = W->next[e];
            for (int seen = 1; f >= 0 && seen < ACC_TIE_SCAN; f = W->next[f]) {
                if (!entry_valid(W, f, c)) continue;
                if (W->comm[W->entry[f]] == cur_comm) return W->entry[f];
                seen++;
            }
        }
        return W->entry[e];
    }
    return -1;
}

/* Adds row u's columns to the window: every unplaced row in a new column's
 * live list gains one shared column. */
static acc_status window_add(walk *W, int64_t u, int64_t window, int64_t max_scan) {
    const int64_t p0 = W->row_offsets[u], p1 = W->row_offsets[u + 1];
    const int64_t per_col = p1 > p0 ? (max_scan / (p1 - p0) > 16 ? max_scan / (p1 - p0) : 16) : 0;
    for (int64_t p = p0; p < p1; p++) {
        const int32_t j = W->cols[p];
        if (W->col_stamp[j] == window) continue;
        W->col_stamp[j] = window;
        int32_t *rows = W->col_rows + W->col_offsets[j];
        int64_t scanned = 0;
        for (int64_t q = 0; q < W->live[j] && scanned < per_col;) {
            const int32_t r = rows[q];
            if (W->placed[r]) {
                rows[q] = rows[--W->live[j]]; /* swap-remove, re-examine slot q */
                continue;
            }
            if (W->cnt[r] == 0) W->touched[W->ntouched++] = r;
            const acc_status st = bucket_push(W, r, ++W->cnt[r]);
            if (st != ACC_SUCCESS) return st;
            scanned++;
            q++;
        }
    }
    return ACC_SUCCESS;
}

/* Clears the window's counts and queue. */
static void window_reset(walk *W) {
    for (int64_t t = 0; t < W->ntouched; t++)
        W->cnt[W->touched[t]] = 0;
    W->ntouched = 0;
    for (int64_t c = 0; c <= W->max_used; c++)
        W->head[c] = W->tail[c] = -1;
    W->top = W->max_used = W->qn = 0;
}

/* Loads the chunk rows[0..R) of A into W (local columns, transposed). */
static void walk_load(walk *W, const acc_csr *A, const int32_t *rows, int64_t R, const int32_t *comm) {
    int64_t kc = 0, nnz = 0;
    W->row_offsets[0] = 0;
    for (int64_t i = 0; i < R; i++) {
        const int32_t r = rows[i];
        for (int64_t p = A->row_offsets[r]; p < A->row_offsets[r + 1]; p++) {
            const int32_t j = A->column_indices[p];
            if (W->colmap[j] < 0) W->colmap[j] = (int32_t)kc++;
            W->cols[nnz++] = W->colmap[j];
        }
        W->row_offsets[i + 1] = nnz;
        W->comm[i] = comm[r];
        W->cnt[i] = 0;
        W->placed[i] = 0;
    }
    /* reset the column map for the next chunk */
    for (int64_t i = 0; i < R; i++)
        for (int64_t p = A->row_offsets[rows[i]]; p < A->row_offsets[rows[i] + 1]; p++)
            W->colmap[A->column_indices[p]] = -1;
    W->R = R;
    W->kc = kc;
    W->nnz = nnz;
    const acc_csr L = {R, kc, W->row_offsets, W->cols, NULL, ACC_FLOAT32};
    acc_pattern_transpose(&L, W->col_offsets, W->col_rows); /* sizes valid by construction */
    for (int64_t j = 0; j < kc; j++) {
        W->live[j] = W->col_offsets[j + 1] - W->col_offsets[j];
        W->col_stamp[j] = -1;
    }
    W->ntouched = 0;
}

/* Orders one loaded chunk: local[R] out, positions in 0..R-1. */
static acc_status walk_order(walk *W, const acc_affinity_params *params, int32_t *local) {
    int64_t cursor = 0;
    int32_t cur_comm = -1;
    window_reset(W);
    for (int64_t pos = 0; pos < W->R; pos++) {
        int32_t u = pos > 0 ? best_candidate(W, params->community, cur_comm) : -1;
        if (u < 0) {
            while (W->placed[cursor])
                cursor++;
            u = (int32_t)cursor;
        }
        local[pos] = u;
        W->placed[u] = 1;
        cur_comm = W->comm[u];
        if (pos % ACC_TILE == 0) window_reset(W);
        const acc_status st = window_add(W, u, pos / ACC_TILE, params->max_scan);
        if (st != ACC_SUCCESS) return st;
    }
    return ACC_SUCCESS;
}

/* Step II (header): fills perm[m] from the depth-first order dfs[n]. */
static acc_status order_rows(const acc_csr *A, const int32_t *dfs, int64_t n, const int32_t *comm,
                             const acc_affinity_params *params, int64_t *perm, int64_t *progress,
                             int64_t progress_base, int64_t progress_total) {
    const int64_t m = A->m, *rp = A->row_offsets;
    acc_status status = ACC_SUCCESS;
    int64_t nchunks = 0, R = 0, max_rows = 0, max_nnz = 0, max_len = 0, done_rows = 0;
    int32_t *seq = acc_mem_alloc((size_t)m, sizeof(int32_t));        /* nonempty rows, dfs order */
    int64_t *bounds = acc_mem_alloc((size_t)m + 2, sizeof(int64_t)); /* chunk starts in seq */
    int32_t *local = acc_mem_alloc((size_t)m, sizeof(int32_t));
    const int nthreads = acc_num_threads();
    if (!seq || !bounds || !local) {
        acc_mem_free(seq);
        acc_mem_free(bounds);
        acc_mem_free(local);
        return ACC_ERR_OUT_OF_MEMORY;
    }
    for (int64_t p = 0, acc = 0; p < n; p++) {
        const int32_t r = dfs[p];
        if (r >= m || rp[r + 1] == rp[r]) continue;
        if (R % ACC_TILE == 0 && (R == 0 || acc >= params->chunk_nnz)) {
            bounds[nchunks++] = R;
            acc = 0;
        }
        acc += rp[r + 1] - rp[r];
        if (rp[r + 1] - rp[r] > max_len) max_len = rp[r + 1] - rp[r];
        seq[R++] = r;
    }
    bounds[nchunks] = R;
    for (int64_t c = 0; c < nchunks; c++) {
        const int64_t rows = bounds[c + 1] - bounds[c];
        int64_t nz = 0;
        for (int64_t i = bounds[c]; i < bounds[c + 1]; i++)
            nz += rp[seq[i] + 1] - rp[seq[i]];
        if (rows > max_rows) max_rows = rows;
        if (nz > max_nnz) max_nnz = nz;
    }
    const int used_threads = nchunks < nthreads ? (int)(nchunks > 0 ? nchunks : 1) : nthreads;
#pragma omp parallel num_threads(used_threads)
    {
        /* each thread's walk lives on its own stack: the hot counters of an
         * array of walks would share cache lines between threads (measured:
         * two threads ran each chunk 2x slower than one) */
        walk W;
        const int t = acc_thread_id();
        acc_status st = walk_alloc(&W, max_rows, max_nnz, A->k, max_len);
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < nchunks; c++) {
            if (st != ACC_SUCCESS) continue;
            const int64_t b = bounds[c], rows = bounds[c + 1] - b;
            walk_load(&W, A, seq + b, rows, comm);
            st = walk_order(&W, params, local + b);
            if (st != ACC_SUCCESS) continue;
            for (int64_t i = 0; i < rows; i++)
                perm[b + i] = seq[b + local[b + i]];
#pragma omp atomic
            done_rows += rows;
            if (t == 0) acc_progress_set(progress, progress_base + done_rows, progress_total);
        }
        walk_free(&W);
        if (st != ACC_SUCCESS) {
#pragma omp critical(acc_affinity_status)
            status = st;
        }
    }
    int64_t pos = R;
    for (int64_t i = 0; i < m; i++)
        if (rp[i + 1] == rp[i]) perm[pos++] = i; /* empty rows go last */
    acc_mem_free(seq);
    acc_mem_free(bounds);
    acc_mem_free(local);
    return status;
}

acc_status acc_reorder_affinity(const acc_csr *A, const acc_affinity_params *params, int64_t *perm,
                                int64_t *progress, double *seconds) {
    if (!A || !params || !perm || A->m < 0 || A->k < 0 || !A->row_offsets || params->max_scan <= 0 ||
        params->chunk_nnz <= 0 || params->part_edges <= 0 || !(params->max_community > 0.0) ||
        (params->community != ACC_COMMUNITY_IGNORE && params->community != ACC_COMMUNITY_TIE))
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = A->m, k = A->k, nnz = A->row_offsets[m];
    const int64_t n = m == k ? m : m + k;
    if (n >= INT32_MAX || 2 * nnz >= INT32_MAX) return ACC_ERR_TOO_LARGE;
    acc_status status = ACC_SUCCESS;
    edge *edges = NULL;
    int64_t cap = 0;
    dendrogram D = {0};
    int64_t *adj_offsets = acc_mem_alloc((size_t)n + 1, sizeof(int64_t));
    int64_t *visit = acc_mem_alloc((size_t)n, sizeof(int64_t));
    int32_t *dfs = acc_mem_alloc((size_t)n, sizeof(int32_t));
    int32_t *comm = acc_mem_alloc((size_t)n, sizeof(int32_t));
    int64_t *col_offsets = acc_mem_alloc((size_t)k + 1, sizeof(int64_t));
    int32_t *col_rows = acc_mem_alloc((size_t)nnz, sizeof(int32_t));
    D.dest = acc_mem_alloc((size_t)n, sizeof(int32_t));
    D.parent = acc_mem_alloc((size_t)n, sizeof(int32_t));
    D.first_child = acc_mem_alloc((size_t)n, sizeof(int32_t));
    D.last_child = acc_mem_alloc((size_t)n, sizeof(int32_t));
    D.next_sib = acc_mem_alloc((size_t)n, sizeof(int32_t));
    if (!adj_offsets || !visit || !dfs || !comm || !col_offsets || !col_rows || !D.dest || !D.parent ||
        !D.first_child || !D.last_child || !D.next_sib) {
        status = ACC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    const int64_t total_work = n + m;
    double t_prev = now_seconds(), t_next;
#define ACC_PHASE(i)                                                                                         \
    do {                                                                                                     \
        t_next = now_seconds();                                                                              \
        if (seconds) seconds[i] = t_next - t_prev;                                                           \
        t_prev = t_next;                                                                                     \
    } while (0)
    if (seconds)
        for (int i = 0; i < ACC_AFFINITY_PHASES; i++)
            seconds[i] = 0.0;
    acc_progress_set(progress, 0, total_work);
    ACC_CHECK(acc_pattern_transpose(A, col_offsets, col_rows));
    ACC_CHECK(graph_offsets(A, col_offsets, col_rows, n, adj_offsets));
    ACC_PHASE(0);

    /* Step I */
    {
        const double avg_degree = n > 0 ? (double)adj_offsets[n] / (double)n : 0.0;
        const double max_strength = params->max_community * (avg_degree > 1.0 ? avg_degree : 1.0);
        if (m == k && adj_offsets[n] > params->part_edges) {
            ACC_CHECK(build_dendrogram_parts(A, col_offsets, col_rows, adj_offsets, params, max_strength,
                                             visit, &D, dfs, comm, progress, total_work));
            ACC_PHASE(1);
        } else { /* one part: the whole graph (always for the bipartite graph, see header) */
            ACC_CHECK(graph_edges(A, col_offsets, col_rows, adj_offsets, n, &edges, &cap));
            ACC_CHECK(acc_order_by_length(adj_offsets, n, 1, params->seed, visit));
            ACC_CHECK(build_dendrogram(n, adj_offsets, &edges, cap, visit, max_strength, &D, progress,
                                       total_work)); /* frees edges */
            ACC_PHASE(1);
            dendrogram_dfs(0, n, &D, D.dest /* stack: union-find no longer needed */, dfs, comm);
        }
    }
    ACC_PHASE(2); /* in parts, each part's depth-first order is timed with step I */

    /* Step II */
    acc_mem_free(col_offsets); /* step II builds each chunk's own transposed pattern */
    acc_mem_free(col_rows);
    col_offsets = NULL;
    col_rows = NULL;
    ACC_CHECK(order_rows(A, dfs, n, comm, params, perm, progress, n, total_work));
    ACC_PHASE(3);
#undef ACC_PHASE
    acc_progress_set(progress, total_work, total_work);
done:
    acc_mem_free(edges);
    acc_mem_free(adj_offsets);
    acc_mem_free(visit);
    acc_mem_free(dfs);
    acc_mem_free(comm);
    acc_mem_free(D.dest);
    acc_mem_free(D.parent);
    acc_mem_free(D.first_child);
    acc_mem_free(D.last_child);
    acc_mem_free(D.next_sib);
    acc_mem_free(col_offsets);
    acc_mem_free(col_rows);
    return status;
}
