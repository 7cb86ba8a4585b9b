/*
 * acc_reorder_jaccard.c -- Jaccard row clustering (the SMaT preprocessing,
 * after Sylos Labini et al.), our own implementation.
 *
 * A row's pattern is its set of column blocks (column / block_width).  The
 * original greedy procedure: take the first unclustered row as the seed of
 * a new cluster whose pattern P is the seed's; walk every later unclustered
 * row j in order and add it when the Jaccard distance
 *     d(j, P) = 1 - |pat(j) & P| / |pat(j) | P|
 * is at most tau, growing P by pat(j); repeat until every row is clustered.
 * Rows of a cluster are placed consecutively, clusters in creation order.
 *
 * Sub-quadratic candidate generation.  A row sharing no block with P is at
 * distance 1 and can never join (tau < 1), so only rows found through the
 * inverted index (block -> rows) of P's blocks are examined, in the same
 * order as the original walk: a min-heap by visit position, holding rows
 * after the current position; when P gains a block, that block's rows are
 * pushed.  Without a cap this is exactly the original algorithm.  Clustered
 * rows are swap-removed from the index lists when a scan meets them
 * (O(nnz) in total).  Each cluster examines at most max_candidates rows and
 * scans at most 8 * max_candidates index entries; an examined row is read only
 * when its length is within a factor 1 / (1 - tau) of P's size (otherwise its
 * distance exceeds tau whatever it holds), so a hub row is not read by every
 * small cluster.  The cost is O(nnz log + m * max_candidates * log +
 * max_candidates * nnz / (1 - tau)) in the worst case, and the scans and
 * examinations of all clusters together stop at 80 x (row blocks) before
 * smaller per-cluster caps take over, so hub columns cost
 * O((nnz + m) log nnz) too.  The caps can only make clusters smaller than
 * the original's.
 *
 * tau = 1 would join rows with no block in common; it is treated as the
 * largest tau below 1 (candidates still come from shared blocks).
 * With seed != 0 the rows are visited in a seeded shuffled order.
 */
#include "acc_internal.h"

/* Min-heap of visit positions (row counts are below INT32_MAX: 32-bit entries halve its
 * cache footprint). */
typedef struct heap {
    int32_t *a;
    int64_t n;
} heap;

/* What the walk reads of a candidate row at once: its visit position and the cluster that last
 * pushed it, side by side so that one cache miss serves both (the scans touch rows at random). */
typedef struct row_state {
    int32_t pos, seen;
} row_state;

static void heap_push(heap *h, int32_t x) {
    int64_t i = h->n++;
    while (i > 0) {
        const int64_t parent = (i - 1) / 2;
        if (h->a[parent] <= x) break;
        h->a[i] = h->a[parent];
        i = parent;
    }
    h->a[i] = x;
}

static int32_t heap_pop(heap *h) {
    const int32_t top = h->a[0], x = h->a[--h->n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->a[c + 1] < h->a[c]) c++;
        if (h->a[c] >= x) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n > 0) h->a[i] = x;
    return top;
}

/* Block pattern of every row: rb_offsets[m+1], rb (unique blocks, sorted).
 * Two passes (count, fill), parallel over rows. */
static acc_status row_blocks(const acc_csr *A, int64_t bw, int64_t *rb_offsets, int32_t **rb_out) {
    const int64_t m = A->m, *rp = A->row_offsets;
    const int32_t *ci = A->column_indices;
    rb_offsets[0] = 0;
#pragma omp parallel for schedule(dynamic, 1024)
    for (int64_t i = 0; i < m; i++) {
        int64_t cnt = 0, prev = -1;
        for (int64_t p = rp[i]; p < rp[i + 1]; p++) {
            const int64_t b = ci[p] / bw;
            cnt += b != prev;
            prev = b;
        }
        rb_offsets[i + 1] = cnt;
    }
    for (int64_t i = 0; i < m; i++)
        rb_offsets[i + 1] += rb_offsets[i];
    int32_t *rb = acc_mem_alloc((size_t)rb_offsets[m], sizeof(int32_t));
    if (!rb) return ACC_ERR_OUT_OF_MEMORY;
#pragma omp parallel for schedule(dynamic, 1024)
    for (int64_t i = 0; i < m; i++) {
        int64_t out = rb_offsets[i], prev = -1;
        for (int64_t p = rp[i]; p < rp[i + 1]; p++) {
            const int64_t b = ci[p] / bw;
            if (b != prev) rb[out++] = (int32_t)b;
            prev = b;
        }
    }
    *rb_out = rb;
    return ACC_SUCCESS;
}

acc_status acc_reorder_jaccard(const acc_csr *A, const acc_jaccard_params *params, int64_t *perm,
                               int64_t *progress) {
    if (!A || !params || !perm || A->m < 0 || A->k < 0 || !A->row_offsets || params->block_width < 1 ||
        params->max_candidates <= 0 || !(params->tau >= 0.0) || !(params->tau <= 1.0))
        return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = A->m, nb = (A->k + params->block_width - 1) / params->block_width;
    if (m >= INT32_MAX) return ACC_ERR_TOO_LARGE;
    const double tau = params->tau;
    const int64_t max_scan = 8 * params->max_candidates;
    acc_status status = ACC_SUCCESS;
    int32_t *rb = NULL;
    heap h = {0};
    int64_t *rb_offsets = acc_mem_alloc((size_t)m + 1, sizeof(int64_t));
    int32_t *order = acc_mem_alloc((size_t)m, sizeof(int32_t));
    row_state *rs = acc_mem_alloc((size_t)m, sizeof(row_state)); /* seen: cluster that pushed the row */
    uint8_t *done_row = acc_mem_alloc((size_t)m, sizeof(uint8_t));
    int64_t *blk_offsets = acc_mem_alloc((size_t)nb + 1, sizeof(int64_t));
    int64_t *live = acc_mem_alloc((size_t)nb, sizeof(int64_t));
    int32_t *in_p = acc_mem_alloc((size_t)nb, sizeof(int32_t)); /* cluster whose P holds the block */
    h.a = acc_mem_alloc((size_t)m, sizeof(int32_t));
    int32_t *blk_rows = NULL;
    if (!rb_offsets || !order || !rs || !done_row || !blk_offsets || !live || !in_p || !h.a) {
        status = ACC_ERR_OUT_OF_MEMORY;
        goto done;
    }
    acc_progress_set(progress, 0, m);
    ACC_CHECK(row_blocks(A, params->block_width, rb_offsets, &rb));
    /* inverted index of the block patterns */
    {
        const acc_csr P = {m, nb, rb_offsets, rb, NULL, ACC_FLOAT32};
        blk_rows = acc_mem_alloc((size_t)rb_offsets[m], sizeof(int32_t));
        if (!blk_rows) {
            status = ACC_ERR_OUT_OF_MEMORY;
            goto done;
        }
        ACC_CHECK(acc_pattern_transpose(&P, blk_offsets, blk_rows));
    }
    for (int64_t b = 0; b < nb; b++) {
        live[b] = blk_offsets[b + 1] - blk_offsets[b];
        in_p[b] = -1;
    }
    for (int64_t i = 0; i < m; i++) {
        perm[i] = i; /* perm is the shuffle's 64-bit scratch until the walk writes it */
        rs[i].seen = -1;
        done_row[i] = rb_offsets[i + 1] == rb_offsets[i]; /* empty rows go last */
    }
    if (params->seed != 0) acc_shuffle_i64(perm, m, params->seed);
    for (int64_t p = 0; p < m; p++) {
        order[p] = (int32_t)perm[p];
        rs[perm[p]].pos = (int32_t)p;
    }

    int64_t out = 0;
    /* Work budget: index entries scanned plus rows examined, over all clusters.  Within it each
     * cluster has the caps above; past it, the small caps below (a hub column would otherwise
     * make every one of m clusters scan max_scan entries of its list).  With the default
     * parameters the 24 real matrices of the benchmark set use at most 68 x blocks
     * (blogcatalog), so it never binds there; with block_width 4 and tau 0.5 it binds on
     * blogcatalog (1.0% more TC blocks) and rajat01 (the same count). */
    const int64_t budget = 80 * rb_offsets[m] + 1024;
    int64_t work = 0, scan_cap = max_scan, examine_cap = params->max_candidates;
    for (int64_t sp = 0; sp < m; sp++) {
        const int64_t s = order[sp];
        if (done_row[s]) continue;
        const int32_t cluster = (int32_t)sp; /* unique id: the seed's position */
        int64_t p_size = 0, examined = 0, scanned = 0;
        if (work > budget) {
            scan_cap = max_scan < 64 ? max_scan : 64;
            examine_cap = params->max_candidates < 16 ? params->max_candidates : 16;
        }
        h.n = 0;
        int64_t r = s;
        for (;;) {
            /* add row r to the cluster and its new blocks to P */
            perm[out++] = r;
            done_row[r] = 1;
            const int32_t rpos = rs[r].pos;
            for (int64_t q = rb_offsets[r]; q < rb_offsets[r + 1]; q++) {
                const int32_t b = rb[q];
                if (in_p[b] == cluster) continue;
                in_p[b] = cluster;
                p_size++;
                int32_t *rows = blk_rows + blk_offsets[b];
                for (int64_t t = 0; t < live[b] && scanned < scan_cap;) {
                    const int32_t c = rows[t];
                    if (done_row[c]) {
                        rows[t] = rows[--live[b]];
                        continue;
                    }
                    scanned++;
                    t++;
                    row_state *st = rs + c;
                    if (st->seen != cluster && st->pos > rpos) {
                        st->seen = cluster;
                        heap_push(&h, st->pos);
                    }
                }
            }
            /* next candidate in walk order that is close enough */
            r = -1;
            while (h.n > 0 && examined < examine_cap) {
                const int64_t c = order[heap_pop(&h)];
                if (done_row[c]) continue;
                examined++;
                int64_t inter = 0;
                const int64_t len = rb_offsets[c + 1] - rb_offsets[c];
                /* |pat & P| / |pat | P| <= min(len, p_size) / max(len, p_size): a row much longer
                 * or much shorter than P cannot be within tau, so it is rejected without reading it
                 * (the same decision the scan below takes; the margin keeps rounding out of it).
                 * This bounds the work of an examination by P's size: a hub row is not read again
                 * by every small cluster that meets it. */
                const double lo = (double)(len < p_size ? len : p_size),
                             hi = (double)(len < p_size ? p_size : len);
                if (lo * (1.0 + 1e-9) < (1.0 - tau) * hi) continue;
                for (int64_t q = rb_offsets[c]; q < rb_offsets[c + 1]; q++)
                    inter += in_p[rb[q]] == cluster;
                const double dist = 1.0 - (double)inter / (double)(p_size + len - inter);
                if (inter > 0 && dist <= tau) {
                    r = c;
                    break;
                }
            }
            if (r < 0) break;
        }
        work += scanned + examined;
        if ((sp & 1023) == 0) acc_progress_set(progress, out, m);
    }
    for (int64_t i = 0; i < m; i++)
        if (rb_offsets[i + 1] == rb_offsets[i]) perm[out++] = i;
    acc_progress_set(progress, m, m);
done:
    acc_mem_free(rb);
    acc_mem_free(rb_offsets);
    acc_mem_free(order);
    acc_mem_free(rs);
    acc_mem_free(done_row);
    acc_mem_free(blk_offsets);
    acc_mem_free(blk_rows);
    acc_mem_free(live);
    acc_mem_free(in_p);
    acc_mem_free(h.a);
    return status;
}
