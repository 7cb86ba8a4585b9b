/* acc_window_distinct.c -- the number of distinct keys (column >> shift) in a window of rows: the count
 * passes of BitTCF (8 rows, columns) and BSR16 (16 rows, column blocks) that the format model runs.
 *
 * Where the window's keys span at most 64 min(LOCAL_WORDS, 2 L) values (L entries; banded rows, tall
 * matrices), a bitset over that range counts them: O(L).  Otherwise the rows' sorted lists are merged
 * in rounds of pairwise merges that drop repeats (a merge tree): O(L log2 R) over R nonempty rows,
 * whatever the columns, in tight loops over an L1-sized buffer.  The builders' merge
 * (acc_bittcf_build.c, acc_bsr16_build.c) takes the smallest head of the active rows at every
 * distinct key, O(distinct x active rows): it must, to emit the blocks in order, but a count needs
 * only the size of the union, and on windows of mostly distinct keys (pubmed, blogcatalog) that
 * merge took 20-35 ns an entry on the GPU machine's host. */
#include "acc_internal.h"

/* Windows of up to this many entries merge in a buffer on the stack. */
#define LOCAL_ENTRIES 1024
/* Words of the bitset path (keys within a range of 64 LOCAL_WORDS). */
#define LOCAL_WORDS 256

/* Merges sorted x and y into out, each key once; returns the keys written. */
static int64_t merge_unique(const int32_t *x, int64_t nx, const int32_t *y, int64_t ny, int32_t *out) {
    int64_t i = 0, j = 0, o = 0;
    while (i < nx && j < ny) {
        const int32_t a = x[i], b = y[j], v = a < b ? a : b;
        i += a == v;
        j += b == v;
        out[o++] = v;
    }
    while (i < nx)
        out[o++] = x[i++];
    while (j < ny)
        out[o++] = y[j++];
    return o;
}

/* The rows of a window: CSR start and length of each nonempty row. */
typedef struct rows_of {
    int n;
    int64_t start[ACC_BSR], len[ACC_BSR], total;
} rows_of;

/* Keys in [lo, lo + 64 words): a bitset on the stack (out of line: its frame). */
static __attribute__((noinline)) int64_t count_bitset(const int32_t *ci, const rows_of *w, int shift,
                                                      int32_t lo, int32_t hi, int64_t words, int *bad) {
    uint64_t bits[LOCAL_WORDS];
    memset(bits, 0, (size_t)words * sizeof(uint64_t));
    for (int q = 0; q < w->n; q++) {
        const int32_t *c = ci + w->start[q];
        int32_t prev = -1;
        for (int64_t t = 0; t < w->len[q]; t++) {
            const int32_t col = c[t], k = col >> shift;
            *bad |= col <= prev || k < lo || k > hi;
            prev = col;
            if (k >= lo && k <= hi) bits[(k - lo) >> 6] |= 1ull << ((k - lo) & 63);
        }
    }
    int64_t d = 0;
    for (int64_t q = 0; q < words; q++)
        d += __builtin_popcountll(bits[q]);
    return d;
}

/* Every other window: the merge tree over every row but the longest, in a stack buffer or the scratch
 * (out of line: its frame), then a merge that only counts against the longest row, read in place: a
 * hub row is read once and never copied, so a window of one hub and short rows costs its entries. */
static __attribute__((noinline)) int64_t count_merge(const int32_t *ci, const rows_of *w, int shift,
                                                     acc_window_scratch *s, int *bad) {
    int big = 0;
    for (int q = 1; q < w->n; q++)
        big = w->len[q] > w->len[big] ? q : big;
    const int64_t rest = w->total - w->len[big];
    int32_t local[2 * LOCAL_ENTRIES], *buf = local;
    if (rest > LOCAL_ENTRIES) {
        if (s->cap < rest) {
            int32_t *grown = acc_mem_realloc(s->buf, (size_t)(2 * rest), sizeof(int32_t));
            if (!grown) return -1;
            s->buf = grown;
            s->cap = rest;
        }
        buf = s->buf;
    }
    /* each other row's keys, repeats dropped (column blocks repeat within a row), into segments of
     * buf; a column not above its predecessor (unsorted or duplicate) sets *bad */
    int32_t *cur = buf, *next = buf + rest;
    int64_t seg[ACC_BSR + 1], o = 0;
    int n = 0;
    for (int q = 0; q < w->n; q++) {
        if (q == big) continue;
        const int32_t *c = ci + w->start[q];
        int32_t prev = c[0], key = prev >> shift;
        seg[n++] = o;
        cur[o++] = key;
        for (int64_t t = 1; t < w->len[q]; t++) {
            const int32_t col = c[t], k = col >> shift;
            *bad |= col <= prev;
            prev = col;
            if (k != key) cur[o++] = key = k;
        }
    }
    seg[n] = o;
    /* rounds of pairwise merges: segments 2i and 2i + 1 into segment i of the other half */
    while (n > 1) {
        int64_t out = 0, nseg[ACC_BSR + 1];
        int m = 0;
        for (int q = 0; q < n; q += 2) {
            nseg[m++] = out;
            if (q + 1 < n)
                out += merge_unique(cur + seg[q], seg[q + 1] - seg[q], cur + seg[q + 1],
                                    seg[q + 2] - seg[q + 1], next + out);
            else {
                memcpy(next + out, cur + seg[q], (size_t)(seg[q + 1] - seg[q]) * sizeof(int32_t));
                out += seg[q + 1] - seg[q];
            }
        }
        nseg[m] = out;
        memcpy(seg, nseg, (size_t)(m + 1) * sizeof(int64_t));
        n = m;
        int32_t *t = cur;
        cur = next;
        next = t;
    }
    /* the union with the longest row: its distinct keys plus the merged keys it does not hold */
    const int32_t *x = cur, *c = ci + w->start[big];
    const int64_t nx = n ? seg[1] : 0, nc = w->len[big];
    int64_t i = 0, distinct = 0;
    int32_t prev = -1, key = -1;
    for (int64_t t = 0; t < nc; t++) {
        const int32_t col = c[t], k = col >> shift;
        *bad |= col <= prev;
        prev = col;
        if (k == key) continue;
        key = k;
        distinct++;
        while (i < nx && x[i] < k)
            i++, distinct++;
        i += i < nx && x[i] == k;
    }
    return distinct + (nx - i);
}

int64_t acc_window_distinct(const acc_csr *A, const int64_t *perm, int64_t first, int rows, int shift,
                            acc_window_scratch *s, int *bad) {
    const int32_t *ci = A->column_indices;
    rows_of w;
    int32_t lo = INT32_MAX, hi = 0; /* the keys' range, from each row's first and last column */
    w.n = 0;
    w.total = 0;
    if (rows > ACC_BSR) rows = ACC_BSR;
    for (int r = 0; r < rows && first + r < A->m; r++) {
        const int64_t row = perm[first + r], p = A->row_offsets[row], e = A->row_offsets[row + 1];
        if (p < e) {
            const int32_t a = ci[p] >> shift, b = ci[e - 1] >> shift;
            lo = a < lo ? a : lo;
            hi = b > hi ? b : hi;
            w.start[w.n] = p;
            w.len[w.n] = e - p;
            w.total += e - p;
            w.n++;
        }
    }
    if (w.n == 0) return 0;
    /* keys within a narrow range (banded rows, tall matrices): a bitset over it, O(L + range / 64); a
     * key out of [lo, hi] only where a row does not ascend */
    const int64_t words = hi >= lo ? (((int64_t)hi - lo) >> 6) + 1 : 1;
    if (words == 1) {
        uint64_t bits = 0;
        for (int q = 0; q < w.n; q++) {
            const int32_t *c = ci + w.start[q];
            int32_t prev = -1;
            for (int64_t t = 0; t < w.len[q]; t++) {
                const int32_t col = c[t], k = (col >> shift) - lo;
                *bad |= col <= prev || k < 0 || k > 63;
                prev = col;
                bits |= (k >= 0 && k <= 63 ? 1ull : 0ull) << (k & 63);
            }
        }
        return __builtin_popcountll(bits);
    }
    if (words <= LOCAL_WORDS && words <= 2 * w.total) return count_bitset(ci, &w, shift, lo, hi, words, bad);
    return count_merge(ci, &w, shift, s, bad);
}

void acc_window_scratch_free(acc_window_scratch *s) {
    acc_mem_free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}
